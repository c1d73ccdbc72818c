#!/usr/bin/env bash
# Builds tilefuse and runs every test:
#   1. all unit, end-to-end, error and real-model tests (ctest, release build);
#   2. the ONNX backend node-test conformance run (onnx 1.17.0 from PyPI, in build/venv), and
#      the Python package's tests (python/tests, torch.compile's included: build/venv has
#      PyTorch 2.11, the GPU machine's version, run here on the CPU);
#   3. the fast unit tests again under AddressSanitizer + UndefinedBehaviorSanitizer;
#   4. a 10-second slice of each importer fuzz target (fuzz/run.sh; skipped with a message
#      where clang's libFuzzer cannot be installed).
# Tests that need a GPU are skipped here with a message; scripts/gpu-check.sh runs them on a
# machine with a GPU (see the README).
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/install-deps.sh

# Before the build: the Python extension (build/python) builds with this venv's nanobind.
echo "== python test environment (build/venv) [${SECONDS} s in]"
# onnxruntime: the CPU peer tilefuse.bench times (python/tests/test_bench.py). torch and
# transformers (the model zoo's modules through torch.compile, random weights, no download) at the
# GPU machine's versions; torchvision for bench/zoo.py's CPU smoke test. PyPI's torch wheel asks for CUDA's libraries as wheels (~3.3 GB with
# Triton); the tests run it on the CPU, and this machine's CUDA toolkit already has all but three
# of the libraries it links, so those three come as wheels and the rest is skipped (a minute of CI
# saved). Where that torch does not import, the full set is installed.
TORCH_VERSION=2.11.0 TORCHVISION_VERSION=0.26.0 TRANSFORMERS_VERSION=5.17.0
PIP="build/venv/bin/pip install -q --disable-pip-version-check"
if [ ! -x build/venv/bin/python ] || ! build/venv/bin/python -c "import onnx, pytest, nanobind, onnxruntime, torch, transformers, torchvision
assert torch.__version__.startswith('$TORCH_VERSION') and transformers.__version__ == '$TRANSFORMERS_VERSION'" 2>/dev/null; then
  python3 -m venv build/venv
  $PIP onnx==1.17.0 numpy pytest nanobind onnxruntime==1.32.0 "transformers==$TRANSFORMERS_VERSION" \
    filelock "typing-extensions>=4.10" "setuptools<82" "sympy>=1.13.3" "networkx>=2.5.1" jinja2 "fsspec>=0.8.5" pillow
  # torchvision (bench/zoo.py's smoke test builds its ResNet-18) at torch's matching version.
  $PIP --no-deps "torch==$TORCH_VERSION" "torchvision==$TORCHVISION_VERSION" nvidia-cufile==1.15.1.6 nvidia-cusparselt-cu13==0.8.0 \
    nvidia-nvshmem-cu13==3.4.5
  if ! build/venv/bin/python -c "import torch" 2>/dev/null; then
    echo "torch does not import with this machine's CUDA libraries; installing its CUDA wheels"
    $PIP "torch==$TORCH_VERSION"
  fi
fi

./scripts/build.sh -DTILEFUSE_BUILD_TESTS=ON -DTILEFUSE_PYTHON=ON -DPython_EXECUTABLE="$PWD/build/venv/bin/python"

echo "== unit, end-to-end, error and real-model tests [${SECONDS} s in]"
ctest --test-dir build -j"$(nproc)" --output-on-failure --timeout 600

echo "== ONNX backend node tests [${SECONDS} s in]"
build/venv/bin/python tests/conformance/run_node_tests.py --tilefuse build/tilefuse

echo "== Python package (build/python), torch.compile's frontend included [${SECONDS} s in]"
HF_HUB_OFFLINE=1 PYTHONPATH=build/python TILEFUSE_CLI=build/tilefuse build/venv/bin/python -m pytest -q -rs -p no:cacheprovider python/tests

echo "== fast unit tests under ASan + UBSan [${SECONDS} s in]"
# -O1 library, -O0 test bodies, and only the tests it runs (CMakeLists.txt): the sanitizer build
# must not double CI's time. Tests that load NVRTC or cuBLASLt are left out: those libraries are
# not built with the sanitizers and their allocations at exit read as leaks. The run is sharded
# over the cores; a failing shard's whole log is printed.
BUILD_DIR=build-asan TARGETS=tilefuse_tests ./scripts/build.sh -DTILEFUSE_SANITIZE=ON -DTILEFUSE_BUILD_TESTS=ON \
  -DCMAKE_CXX_FLAGS_RELEASE=-O1
SHARDS=$(nproc) pids=()
for ((i = 0; i < SHARDS; i++)); do
  ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 GTEST_TOTAL_SHARDS=$SHARDS GTEST_SHARD_INDEX=$i \
    ./build-asan/tilefuse_tests --gtest_brief=1 \
    --gtest_filter='-Cli*:*RealModel*:*Conformance*:*Scaling*:*CudaProgram*:*CudaSearchSpace*:*LtMatmul*:*TemplateSkeletons*' \
    >"build-asan/shard-$i.log" 2>&1 &
  pids+=($!)
done
failed=0
for ((i = 0; i < SHARDS; i++)); do
  if wait "${pids[$i]}"; then tail -n 3 "build-asan/shard-$i.log"; else cat "build-asan/shard-$i.log"; failed=1; fi
done
[ "$failed" = 0 ] || { echo "== ASan + UBSan: a shard failed (its log is above)"; exit 1; }
echo "== importer fuzzing, 10 s per target (the long run: bench/results/2026-11-23-importer-fuzz.md) [${SECONDS} s in]"
NODE_TESTS=$(ls -d build/venv/lib/python3*/site-packages/onnx/backend/test/data/node 2>/dev/null | head -n 1) \
  ./fuzz/run.sh 10
echo "== all tests passed [${SECONDS} s in]"
