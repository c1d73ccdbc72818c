#!/usr/bin/env bash
# Builds tilefuse's Python extension on the GPU machine, for its own Python (a CPython build
# from the development machine would not load there), from what scripts/gpu-bundle.sh gathered:
# the position-independent library, the ONNX, CUDA driver and generated headers and nanobind's
# sources.
# Usage: scripts/gpu-python-ext.sh BUNDLE_DIR PACKAGE_DIR — leaves an importable `tilefuse` in
# PACKAGE_DIR (PYTHONPATH=PACKAGE_DIR); exits non-zero, with the compiler's words, on failure.
set -euo pipefail
B=$(realpath -m "$1") X=$(realpath -m "$2")  # before the cd: the caller's relative paths
cd "$(dirname "$0")/.."
case "$X/" in "$PWD/"*) echo "gpu-python-ext.sh: $X is inside the checkout; give a folder outside it (it is emptied)" >&2; exit 2 ;; esac
P="$B/python"
rm -rf "$X" && mkdir -p "$X/tilefuse" "$X/obj" && cp -r python/tilefuse/. "$X/tilefuse/"  # tilefuse.fx too
pyinc=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
suffix=$(python3 -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')
pids=()
# python/src sees the public headers only (include/tilefuse/tilefuse.h, the facade the CLI uses too).
for f in "$P/nanobind/src/nb_combined.cpp" python/src/*.cc; do
  g++ -c -std=gnu++20 -O2 -fPIC -fvisibility=hidden -fopenmp -DNB_COMPACT_ASSERTIONS -DFMT_SHARED -DONNX_ML=1 \
    -DONNX_NAMESPACE=onnx $([[ $f == *nb_combined* ]] && echo -DNB_BUILD) -Iinclude -I"$P/generated" \
    -I"$P/include" -isystem "$P/include/onnx" -I"$pyinc" -I"$P/nanobind/include" -I"$P/nanobind/ext/robin_map/include" \
    "$f" -o "$X/obj/$(basename "$f").o" &
  pids+=($!)
done
for pid in "${pids[@]}"; do wait "$pid"; done  # set -e: a failed compile stops here
libs=(libonnx.so.1 libonnx_proto.so.1 libprotobuf.so.32 libfmt.so.9 libopenblas.so.0 libdnnl.so.2)
g++ -shared -fopenmp -o "$X/tilefuse/_tilefuse$suffix" "$X"/obj/*.o "$P/libtilefuse.a" "${libs[@]/#/$B/lib/}" -ldl -lpthread
