#!/usr/bin/env bash
# Builds the importer fuzz targets (clang, libFuzzer, ASan + UBSan) into BUILD_DIR
# (default build-fuzz), writes the seed corpora and fuzzes each target.
#   fuzz/run.sh [SECONDS]          each target for SECONDS (default 10); from 60 s on, the
#                                  corpus is kept in BUILD_DIR/corpus/<target> between runs
#   RUNS=N fuzz/run.sh             each target for N executions instead
#   TARGETS="text binary" ...      a subset of text, binary, folder
#   NODE_TESTS=DIR ...             seeds from the ONNX backend node tests too (the onnx
#                                  package's onnx/backend/test/data/node)
# A crash, leak, hang (> 10 s) or allocation over 2 GiB stops the run with libFuzzer's
# report, the input in BUILD_DIR/artifacts/ and a non-zero exit. Without clang's libFuzzer
# (and no way to install it) it says so and exits 0.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build-fuzz}
SECONDS_PER_TARGET=${1:-10}
TARGETS=${TARGETS:-text binary folder}

have_libfuzzer() {
  command -v clang++ >/dev/null && [ -n "$(clang++ -print-file-name=libclang_rt.fuzzer-x86_64.a 2>/dev/null | grep /)" ] &&
    [ -f "$(clang++ -print-file-name=libclang_rt.fuzzer-x86_64.a)" ]
}
if ! have_libfuzzer; then
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  echo "fuzz: installing clang and libclang-rt-dev (libFuzzer)"
  { $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
      clang libclang-rt-dev >/dev/null; } || true
fi
if ! have_libfuzzer; then
  echo "fuzz: SKIPPED: clang with libFuzzer (libclang_rt.fuzzer) is not available"
  exit 0
fi

./scripts/install-deps.sh
CC=clang CXX=clang++ cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CXX_FLAGS_RELEASE="-O1 -gline-tables-only" -DTILEFUSE_FUZZ=ON -DTILEFUSE_BUILD_TESTS=OFF >/dev/null
ninja -C "$BUILD_DIR" -j"$(nproc)" fuzzers

rm -rf "$BUILD_DIR/seeds"
"$BUILD_DIR/fuzz/tilefuse_fuzz_seeds" "$BUILD_DIR/seeds" ${NODE_TESTS:+--node-tests "$NODE_TESTS"}
mkdir -p "$BUILD_DIR/artifacts"
# The targets write their inputs as files: on tmpfs that costs little.
[ -z "${TMPDIR:-}" ] && [ -d /dev/shm ] && [ -w /dev/shm ] && export TMPDIR=/dev/shm
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}
for target in $TARGETS; do
  # Runs under a minute (the test slice) start from the seeds alone, so that they take the
  # same time wherever they run; longer runs keep and grow BUILD_DIR/corpus/<target>.
  corpus="$BUILD_DIR/corpus/$target"
  if [ -z "${RUNS:-}" ] && [ "$SECONDS_PER_TARGET" -lt 60 ]; then
    corpus="$BUILD_DIR/corpus-slice/$target"
    rm -rf "$corpus"
  fi
  mkdir -p "$corpus"
  limit=(-max_total_time="$SECONDS_PER_TARGET")
  [ -n "${RUNS:-}" ] && limit=(-runs="$RUNS")
  dict=()
  [ "$target" = text ] && dict=(-dict="$BUILD_DIR/seeds/onnx_text.dict")
  echo "== fuzz: onnx_${target}_fuzzer ${limit[*]}"
  "$BUILD_DIR/fuzz/tilefuse_onnx_${target}_fuzzer" "${limit[@]}" "${dict[@]}" -timeout=10 -rss_limit_mb=2048 \
    -max_len=1048576 -print_final_stats=1 -artifact_prefix="$BUILD_DIR/artifacts/${target}-" \
    "$corpus" "$BUILD_DIR/seeds/$target" 2>"$BUILD_DIR/fuzz-$target.log" ||
    { tail -60 "$BUILD_DIR/fuzz-$target.log"; echo "fuzz: onnx_${target}_fuzzer FAILED (log: $BUILD_DIR/fuzz-$target.log)"; exit 1; }
  grep -E "^stat::(number_of_executed_units|average_exec_per_sec|peak_rss_mb)" "$BUILD_DIR/fuzz-$target.log" | tr '\n' ' '
  echo
done
echo "== fuzz: no crash, leak or hang"
