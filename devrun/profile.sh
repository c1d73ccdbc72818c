#!/bin/bash
set -x
mkdir -p build-gpu && tar -xJf build-gpu/bundle.tar.xz -C build-gpu
export LD_LIBRARY_PATH=$PWD/build-gpu/bundle/lib TILEFUSE_CACHE_DIR=/tmp/tfcache
TF=build-gpu/bundle/tilefuse
python3 bench/conv_models.py --device cuda --export-only --models convnext_tiny,mobilenet_v3_small --batches 32 --dtypes bf16 --workdir /tmp/convwork > $OUT/export.log 2>&1
for m in convnext_tiny mobilenet_v3_small; do
  $TF run /tmp/convwork/${m}_b32_bf16/model.onnx --backend cuda --trace $OUT/${m}_trace.json > $OUT/${m}_run.log 2>&1
  $TF run /tmp/convwork/${m}_b32_bf16/model.onnx --backend cuda --trace $OUT/${m}_trace.json > $OUT/${m}_run.log 2>&1
  python3 devrun/sumtrace.py $OUT/${m}_trace.json 40 > $OUT/${m}_sum.txt
done
python3 devrun/torchprof.py convnext_tiny eager > $OUT/torch_cnx_eager.txt 2>&1
python3 devrun/torchprof.py convnext_tiny compile > $OUT/torch_cnx_compile.txt 2>&1
tail -5 $OUT/*_sum.txt
