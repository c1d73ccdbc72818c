import json, sys, collections
d = json.load(open(sys.argv[1]))
ev = d["traceEvents"] if isinstance(d, dict) else d
tot = collections.Counter(); cnt = collections.Counter()
for e in ev:
    if e.get("ph") == "X" and "dur" in e:
        tot[e["name"]] += e["dur"]; cnt[e["name"]] += 1
s = sum(tot.values())
print(f"total {s/1000:.3f} ms over {sum(cnt.values())} events")
for n, t in tot.most_common(int(sys.argv[2]) if len(sys.argv) > 2 else 30):
    print(f"{t:10.1f} us {cnt[n]:4d}x  {n[:150]}")
