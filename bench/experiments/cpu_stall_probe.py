"""Diagnostic (not a benchmark): per-call times of a few models beside a spinning process,
to see which step stalls and whether the calling-thread fallback engages."""
import os, sys, time, statistics, subprocess
import numpy as np
import tilefuse
from tilefuse._bench import _random_inputs
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from cpu_load import model_path, timed_ms  # noqa: E402
def med(f, k=300):
    for _ in range(20): f()
    return statistics.median(timed_ms(f, k))
models = sys.argv[1:]
compiled = {n: tilefuse.compile(model_path(n), backend="cpu") for n in models}
for n, m in compiled.items():  # quiet: where a call's time goes
    x = _random_inputs(m.inputs, 0)
    steps = {}
    for _ in range(100):
        for name, start, dur in m._graph.profile(x):
            steps.setdefault(name, []).append(dur)
    print(f"{n} quiet: call {med(lambda: m(*x)):.4f} ms, graph.run {med(lambda: m._graph.run(x, False, 'c')):.4f} ms, steps (us):",
          {k: round(statistics.median(v), 1) for k, v in steps.items()}, flush=True)
if os.environ.get("QUIET_ONLY"):
    sys.exit(0)
spin = subprocess.Popen(["sh", "-c", "while :; do :; done"])
time.sleep(0.5)
try:
    for n, m in compiled.items():
        x = _random_inputs(m.inputs, 0)
        for _ in range(20): m(*x)
        t = timed_ms(lambda: m(*x), 300)
        big = [i for i, v in enumerate(t) if v > 1.0]
        print(f"{n}: median {statistics.median(t):.3f} ms, p10 {np.percentile(t,10):.3f}, p90 {np.percentile(t,90):.3f}, "
              f"{len(big)} calls > 1 ms, first at {big[:12]}", flush=True)
        worst = {}
        for _ in range(30):
            for name, start, dur in m._graph.profile(x):
                worst[name] = max(worst.get(name, 0), dur)
        print("   steps over 1 ms in 30 profiled runs:", {k: round(v) for k, v in worst.items() if v > 1000}, flush=True)
finally:
    spin.kill()
