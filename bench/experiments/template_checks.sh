# Sourced by the GPU experiment scripts: a model checked against the reference in forms of the
# GEMM template, and run under compute-sanitizer, each result a line in "$log" (and on stdout);
# models through torch.compile against its own modes. Needs B (the unpacked bundle) and log
# set by the caller.

# open_bundle LOGNAME: the bundle in B unpacked from B/../bundle.tar.xz where it is not yet, its
# libraries on the path, OUT made and log set to OUT/LOGNAME, emptied.
open_bundle() {
  [ -x "$B/tilefuse" ] || tar -C "$(dirname "$B")" -xJf "$(dirname "$B")/bundle.tar.xz"
  export LD_LIBRARY_PATH="$(realpath "$B")/lib:${LD_LIBRARY_PATH:-}"
  mkdir -p "$OUT"
  log="$OUT/$1"
  : >"$log"
}

# gtest_first: the tilefuse_tests filter in GTEST (where set) run first, its tail in "$log".
gtest_first() {
  [ -z "${GTEST:-}" ] || "$B/tilefuse_tests" --gtest_filter="$GTEST" 2>&1 | tail -25 | tee -a "$log"
}

# bench_us MODEL: `tilefuse bench` of MODEL on the GPU (the whole CUDA graph, median of 20 after
# 5), printed as "<µs> us <the first group's strategy>".
bench_us() {
  "$B/tilefuse" bench "$1" --backend cuda --repeats 20 --warmup 5 --json 2>&1 |
    python3 -c "import json,sys; d=json.load(sys.stdin); print(f\"{d['fused']['ms']*1e3:.1f} us\", d['groups'][0]['strategy'])" 2>&1 | tail -1
}

# bench_forms MODEL FLAGS: `tilefuse bench` of MODEL on the GPU with FLAGS (one string), printed
# as "<µs> us; <every group's strategy>".
bench_forms() {
  "$B/tilefuse" bench "$1" --backend cuda $2 --repeats 20 --warmup 5 --json 2>&1 |
    python3 -c "import json,sys; d=json.load(sys.stdin); print(f\"{d['fused']['ms']*1e3:.1f} us;\", '; '.join(g['strategy'] for g in d['groups']))" 2>&1 | tail -1
}

# check_forms MODEL FORM...: `run --check --gemm template` with each FORM's flags ("" the rule's).
check_forms() {
  local m=$1 form o
  shift
  for form in "$@"; do
    if o=$(timeout 300 "$B/tilefuse" run "$m" --backend cuda --check --gemm template $form 2>&1); then
      echo "PASS $m $form: $(echo "$o" | grep -o 'gemm template [^;]*' | head -1)" | tee -a "$log"
    else
      echo "FAIL $m $form" | tee -a "$log"; echo "$o" | tail -14 | tee -a "$log"
    fi
  done
}

# memcheck MODEL [FLAG...]: compute-sanitizer's memcheck over one run on the template (with FLAGs,
# e.g. --shape batch=3,seq=333).
memcheck() {
  local m=$1 o
  shift
  if o=$(timeout 300 compute-sanitizer --tool memcheck --error-exitcode 9 "$B/tilefuse" run "$m" --backend cuda --gemm template "$@" 2>&1); then
    echo "CLEAN $m $*" | tee -a "$log"
  else
    echo "MEMCHECK FAIL $m" | tee -a "$log"; echo "$o" | grep -v '^=========  ' | tail -15 | tee -a "$log"
  fi
}

# bindings MODEL SHAPE...: each SHAPE run with --check --strict; its verdict, compiles and time.
bindings() {
  local m=$1 s
  shift
  for s in "$@"; do
    timeout 300 "$B/tilefuse" run "$m" --backend cuda --check --strict --json --shape "$s" >"$OUT/run.json" 2>"$OUT/run.err"
    python3 - "$m" "$s" "$OUT/run.json" <<'PY' | tee -a "$log"
import json, sys
model, shape, path = sys.argv[1:]
try:
    j = json.load(open(path))
except Exception as e:
    print(f"FAIL {model} {shape}: no report ({e})"); sys.exit()
kernels = sum(1 for k in j["kernels"] if k["generated"])
print(f"{j['status']} {model} {shape}: {j['backend']}, {kernels} generated kernels, {j['jit_compiles']} compiled, "
      f"compile {j['compile_ms']:.0f} ms, run {j['run_ms']:.3f} ms")
PY
  done
}

# torch_frontend_runs "model:dtype:shape,shape ..."...: bench/torch_frontend.py for each run,
# its JSON and log in "$OUT", the result lines printed. Needs the Python extension in X.
torch_frontend_runs() {
  local run model dtype shapes args s
  for run in "$@"; do
    IFS=: read -r model dtype shapes <<< "$run"
    args=""
    for s in ${shapes//,/ }; do args="$args --shape $s"; done
    PYTHONPATH="$X" timeout "${LIMIT:-300}" python3 bench/torch_frontend.py --model "$model" --dtype "$dtype" $args ${BENCH_ARGS:-} \
      --json "$OUT/torch-frontend-$model-$dtype.json" > "$OUT/torch-frontend-$model-$dtype.log" 2>&1
    echo "== $model $dtype: exit $?"
    grep -E '^\{|Error|error' "$OUT/torch-frontend-$model-$dtype.log" | cut -c1-1500 | head -8
  done
}

# tune_report JSON NAME [TOP]: each kernel of a `tilefuse tune --json` report, its rule's and best
# times, and its TOP (default 6) fastest forms.
tune_report() {
  python3 - "$1" "$2" "${3:-6}" <<'PY'
import json, sys
report = json.load(open(sys.argv[1]))
for k in report["kernels"]:
    rows = sorted((t for t in k["configs"] if "time_us" in t), key=lambda t: t["time_us"])
    print(f"{sys.argv[2]} {k['name']}: rule {k['default_us']:.2f} us, best {k['best_us']:.2f} us, {len(rows)} timed")
    for t in rows[:int(sys.argv[3])]:
        c = t["config"]
        print(f"    {t['time_us']:7.2f} us  " + " ".join(f"{key}={c[key]}" for key in sorted(c) if key not in ("group_m", "promote")))
PY
}
