#!/usr/bin/env bash
# Builds tilefuse here (no GPU needed) and gathers what the GPU machine needs to run it:
# the binaries and the shared libraries a bare CUDA image lacks (ONNX, protobuf, fmt,
# OpenBLAS), in build-gpu/bundle (BUNDLE_ROOT/bundle: a second bundle beside one in use).
# libcuda, NVRTC and cuBLASLt are not bundled: tilefuse loads them with dlopen from the GPU
# machine's own CUDA installation.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build-gpu}
BUILD_DIR=$BUILD_DIR TARGETS="tilefuse tilefuse_tests tilefuse_bench_gpu_cases" scripts/build.sh -DTILEFUSE_PIC_LIB=ON
BUNDLE_ROOT=${BUNDLE_ROOT:-build-gpu}
bundle=$BUNDLE_ROOT/bundle
rm -rf "$bundle"
mkdir -p "$bundle/lib"
cp "$BUILD_DIR/tilefuse" "$BUILD_DIR/tilefuse_tests" "$BUILD_DIR/tilefuse_bench_gpu_cases" "$bundle/"
# Every library the binaries load, except the C library family and libstdc++/libgcc
# (the GPU image has newer, compatible ones).
for binary in "$bundle"/tilefuse*; do
  ldd "$binary" | awk '/=> \// {print $3}'
done | sort -u | grep -Ev '/(libc|libm|libpthread|libdl|librt|ld-linux[^/]*|libstdc\+\+|libgcc_s)\.so' |
  while read -r lib; do cp -L "$lib" "$bundle/lib/"; done
# What the GPU script's `python` stage needs to build the Python extension there, for the GPU
# machine's own Python (a CPython 3.11 build from here would not load under its 3.12;
# scripts/gpu-python-ext.sh): the position-independent library, the ONNX, CUDA driver and
# generated headers it was built with, nanobind's sources and pytest (both pure Python and C++
# sources).
if [ -x build/venv/bin/python ] || python3 -m venv build/venv; then
  build/venv/bin/python -c "import nanobind" 2>/dev/null || build/venv/bin/pip install -q --disable-pip-version-check nanobind
  [ -d build/pytest-lib/pytest ] || build/venv/bin/pip install -q --disable-pip-version-check --target build/pytest-lib pytest
fi
py="$bundle/python"
mkdir -p "$py/include"
cp "$BUILD_DIR/libtilefuse.a" "$py/"
cp -r /usr/include/onnx "$py/include/"
cp "${CUDA_HOME:-/usr/local/cuda}/include/cuda.h" "$py/include/"  # the driver API's types (backend/cuda/cuda_driver.h)
cp -r "$BUILD_DIR/generated" "$py/"
cp -r "$(build/venv/bin/python -c 'import nanobind, os; print(os.path.dirname(nanobind.__file__))')" "$py/nanobind"
cp -r build/pytest-lib "$py/pytest-lib"
find "$py" -name __pycache__ -prune -exec rm -rf {} +
du -sh "$bundle"
# Ship it compressed (OpenBLAS alone is 36 MB; the bundle should stay well under 64 MiB).
# (xz -9: the bundle travels beside the working tree, 64 MiB in all; at the default level it no longer fit.)
XZ_OPT=-9 tar -C "$BUNDLE_ROOT" -cJf "$BUNDLE_ROOT/bundle.tar.xz" bundle
ls -la "$BUNDLE_ROOT/bundle.tar.xz"
