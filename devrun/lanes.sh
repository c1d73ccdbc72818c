#!/bin/bash
mkdir -p build-gpu && tar -xJf build-gpu/bundle.tar.xz -C build-gpu
export LD_LIBRARY_PATH=$PWD/build-gpu/bundle/lib TILEFUSE_CACHE_DIR=/tmp/tfcache
TF=build-gpu/bundle/tilefuse
: > $OUT/check.txt
[ -n "$NOCHECK" ] || for m in tests/conv/*.onnxtxt examples/*.onnxtxt; do
  out=$(timeout 120 $TF run $m --backend cuda --check 2>&1); rc=$?
  echo "$rc $m :: $(echo "$out" | tail -1)" >> $OUT/check.txt
done
grep -v "^0 " $OUT/check.txt | head -20
echo "checked $(wc -l < $OUT/check.txt), nonzero $(grep -vc '^0 ' $OUT/check.txt)"
python3 bench/conv_models.py --device cuda --models ${MODELS:-convnext_tiny,mobilenet_v3_small,resnet18,resnet50} --batches 32 --dtypes bf16 --workdir /tmp/convwork --tilefuse $TF --binary-commit ${COMMIT:-wip} --warmup 5 --repeats 20 --md $OUT/bench.md --json $OUT/bench.json > $OUT/bench.log 2>&1
grep "^|" $OUT/bench.md | head -12
for m in convnext_tiny mobilenet_v3_small; do
  $TF run /tmp/convwork/${m}_b32_bf16/model.onnx --backend cuda --trace $OUT/${m}_trace.json > /dev/null 2>&1
  python3 devrun/sumtrace.py $OUT/${m}_trace.json 25 > $OUT/${m}_sum.txt; rm $OUT/${m}_trace.json
done
head -14 $OUT/*_sum.txt
