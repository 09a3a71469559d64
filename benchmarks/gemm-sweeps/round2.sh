#!/bin/bash
# H200 sweep, round 2: after the aligned-k fix (docs/gemm-notes.md, "Third sweep"). Repo root, after gpu_env.sh.
L=8192,32,8192
S=8192,8192,8192
timeout ${SWEEP_TIMEOUT:-250} python3 -m vkcoop.bench.explore --iters 20 --json "$OUT/round2.json" \
  --job "dense/fp16/$L/256:64x32x128u2g1c,256:64x32x128u2g1s2c,256:64x32x128u2g1s4c,256:64x32x128u2g1s8c,128:32x32x128u2g1s4c,64:32x32x128u2g1c,64:32x32x128u2g1s2c,256:128x32x128u2g1s4c,256:64x32x64u4g1s4c" \
  --job "sparse/fp16/$L/256:64x32x128u2g1c,256:64x32x128u2g1i4c,256:64x32x128u2g1i1c,256:64x32x128u2g1s4c,256:64x32x128u2g1s4i4c,256:64x32x128u2g1s4i1c,256:64x32x128u2g1s8i4c,64:32x32x128u2g1s2i4c,128:32x32x128u2g1s4i4c,256:128x32x128u2g1s8i4c,256:64x32x256u2g1s4i4c" \
  --job "dense/fp16/$S/256:128x256x32u4,256:128x256x32u8,256:128x256x32u4p2,256:128x256x32u4sg2,256:128x256x32u4sg4,128:128x128x32u4sg2,256:128x256x64u4,256:256x128x32u4,256:256x128x32u4p2,128:128x128x32u4,256:128x256x32u4c" \
  --job "sparse/fp16/$S/256:128x256x32u4,256:128x256x32u4i1" \
  --job "dense16/fp16/$S/256:256x256x32u4,256:128x256x32u4" \
  2>&1 | tee "$OUT/round2.log"
