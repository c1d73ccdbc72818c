B=build-gpu/bundle
[ -x "$B/tilefuse" ] || tar -C build-gpu -xJf build-gpu/bundle.tar.xz
export LD_LIBRARY_PATH="$(realpath $B)/lib:${LD_LIBRARY_PATH:-}"
X=/tmp/tilefuse-python
[ -d "$X" ] || scripts/gpu-python-ext.sh "$B" "$X" > $OUT/ext.log 2>&1 || tail $OUT/ext.log
for s in "" "TILEFUSE_SKINNY_NORMS=1" "TILEFUSE_CACHE_UPDATE_IN_ATTENTION=1" "TILEFUSE_SKINNY_NORMS=1 TILEFUSE_CACHE_UPDATE_IN_ATTENTION=1" "TILEFUSE_LAUNCH_TOGETHER=0"; do
  env $s HF_HUB_OFFLINE=1 PYTHONPATH="$X" timeout 100 python3 bench/experiments/decode_mismatch_probe.py 2>&1 | grep -E "pass|step graph|Error|error" | head -14
done
