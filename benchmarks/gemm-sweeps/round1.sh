#!/bin/bash
# H200 sweep, round 1 (docs/gemm-notes.md, "Third sweep"). Run from the repo root after `source scripts/gpu_env.sh`.
# Order: memory-bound LLM shape first (cheap), then 2:4 square, then dense square. Logs and JSON go to $OUT.
L=8192,32,8192
S=8192,8192,8192
timeout ${SWEEP_TIMEOUT:-250} python3 -m vkcoop.bench.explore --iters 20 --json "$OUT/round1.json" \
  --job "dense/fp16/$L/256:64x32x128u2g1c,256:64x32x128u2g1s2c,256:64x32x128u2g1s4c,256:64x32x128u2g1s8c,128:32x32x128u2g1s4c,64:32x32x128u2g1s2c,256:128x32x128u2g1s8c,256:64x32x64u4g1s4c" \
  --job "sparse/fp16/$L/256:64x32x128u2g1c,256:64x32x128u2g1i4c,256:64x32x128u2g1i1c,256:64x32x128u2g1s4i4c,256:64x32x128u2g1s8i4c,256:64x32x128u2g1s4i1c,256:64x32x128u2g1s4c,128:32x32x128u2g1s4i4c,64:32x32x128u2g1s2i4c,256:128x32x128u2g1s8i4c" \
  --job "sparse/fp16/$S/256:128x256x32u4,256:128x256x32u4i4,256:128x256x32u4i1,256:128x256x32u4i2,256:128x256x64u2i4" \
  --job "dense/fp16/$S/256:128x256x32u4,256:128x256x32u4p2,256:128x256x32u8,256:128x256x64u4,256:256x128x32u4p2,256:128x256x32u4sg2,256:128x256x32u4sg4,128:128x128x32u4sg2,256:128x256x32u4c,128:128x256x32u4,256:256x128x32u4sg4" \
  --job "dense16/fp16/$S/256:256x256x32u4,256:128x256x32u4" \
  2>&1 | tee "$OUT/round1.log"
