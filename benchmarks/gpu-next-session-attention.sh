#!/bin/bash
# Flash attention on the GPU host (docs/attention.md, "Measuring it"). One step per device command (each stays
# under the 10-minute limit), from the repository root with .bundle carried (scripts/gpu_bundle.sh):
#   bash benchmarks/gpu-next-session-attention.sh run      # device facts, the sample under validation
#   bash benchmarks/gpu-next-session-attention.sh tests    # the gpu/cuda tests of the attention modules
#   bash benchmarks/gpu-next-session-attention.sh targets  # the target shapes, then the tile sweep
#   bash benchmarks/gpu-next-session-attention.sh bench [fp16|bf16]   # all prefill + decode cases
# Logs, JSON and plots go to $OUT (default out/attention).
set -uo pipefail
OUT=${OUT:-out/attention}
mkdir -p "$OUT"
source scripts/gpu_env.sh
BENCH="python3 -m vkcoop.bench.attention"   # `vkcoop bench attention` once the CLI wires it
step=${1:-run}
case "$step" in
  run)
    nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1
    timeout 60 python3 -m vkcoop info > "$OUT/info.txt" 2>&1
    timeout 500 python3 -m vkcoop run attention --validate --json "$OUT/run-attention.json" 2>&1 \
      | tee "$OUT/run-attention.log" ;;
  tests)
    timeout 550 python3 -m pytest -q -ra -m "gpu or cuda" tests/test_attention.py tests/test_attention_reference.py \
      tests/test_attention_sample.py tests/test_attention_bench.py 2>&1 | tee "$OUT/tests.log" ;;
  targets)
    # Issue 16's targets: prefill d128 fp16 seq 4096 (>= 0.5x the best torch backend), decode (>= 0.8x bandwidth).
    timeout 200 $BENCH --kinds prefill --head-dims 128 --seqs 4096 --json "$OUT/target-prefill.json" 2>&1 \
      | tee "$OUT/target-prefill.log"
    timeout 150 $BENCH --kinds decode --head-dims 128 --json "$OUT/target-decode.json" 2>&1 \
      | tee "$OUT/target-decode.log"
    for tile in 128:64x64 128:64x32 128:32x64 256:64x64 256:128x64 256:64x32 256:128x32; do
      timeout 60 $BENCH --kinds prefill --head-dims 128 --seqs 4096 --paths vk-coopmat2 --tile "$tile" \
        --iters 10 --json "$OUT/tile-$tile.json" 2>&1 | tee -a "$OUT/tiles.log"
    done ;;
  bench)
    dtype=${2:-fp16}
    timeout 580 $BENCH --dtype "$dtype" --json "$OUT/bench-$dtype.json" --plot "$OUT/bench-$dtype.png" 2>&1 \
      | tee "$OUT/bench-$dtype.log" ;;
  *) echo "usage: $0 run|tests|targets|bench [fp16|bf16]" >&2; exit 2 ;;
esac
