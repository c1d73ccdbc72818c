#!/usr/bin/env bash
# Builds tilefuse here (no GPU needed) and gathers what the GPU machine needs to run it:
# the binaries and the shared libraries a bare CUDA image lacks (ONNX, protobuf, fmt,
# OpenBLAS), in build-gpu/bundle. libcuda, NVRTC and cuBLASLt are not bundled: tilefuse
# loads them with dlopen from the GPU machine's own CUDA installation.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build-gpu}
BUILD_DIR=$BUILD_DIR TARGETS="tilefuse tilefuse_tests tilefuse_bench_gpu_cases" scripts/build.sh
bundle=build-gpu/bundle
rm -rf "$bundle"
mkdir -p "$bundle/lib"
cp "$BUILD_DIR/tilefuse" "$BUILD_DIR/tilefuse_tests" "$BUILD_DIR/tilefuse_bench_gpu_cases" "$bundle/"
# Every library the binaries load, except the C library family and libstdc++/libgcc
# (the GPU image has newer, compatible ones).
for binary in "$bundle"/tilefuse*; do
  ldd "$binary" | awk '/=> \// {print $3}'
done | sort -u | grep -Ev '/(libc|libm|libpthread|libdl|librt|ld-linux[^/]*|libstdc\+\+|libgcc_s)\.so' |
  while read -r lib; do cp -L "$lib" "$bundle/lib/"; done
du -sh "$bundle"
# Ship it compressed (OpenBLAS alone is 36 MB; the bundle should stay well under 64 MiB).
tar -C build-gpu -cJf build-gpu/bundle.tar.xz bundle
ls -la build-gpu/bundle.tar.xz
