#!/bin/bash
# H200 GEMM tile sweeps (docs/gemm.md): `bash lab/gemm-sweeps/sweep.sh 1` or `... 2` from the repo root, after
# `source scripts/gpu_env.sh`; logs and JSON go to $OUT. h200/ holds what the two rounds measured on the H200, with
# the configurations of kernel variants removed since (subgroup scope `sg`, two accumulators `p2`, 2:4 blocks of
# two metadata words `i2`: each lost, docs/gemm.md), which these job lists no longer name.
# Order: memory-bound LLM shape first (cheap), then 2:4 square, then dense square.
L=8192,32,8192
S=8192,8192,8192
case "$1" in
  1) jobs=(
       "dense/fp16/$L/256:64x32x128u2g1c,256:64x32x128u2g1s2c,256:64x32x128u2g1s4c,256:64x32x128u2g1s8c,128:32x32x128u2g1s4c,64:32x32x128u2g1s2c,256:128x32x128u2g1s8c,256:64x32x64u4g1s4c"
       "sparse/fp16/$L/256:64x32x128u2g1c,256:64x32x128u2g1i4c,256:64x32x128u2g1i1c,256:64x32x128u2g1s4i4c,256:64x32x128u2g1s8i4c,256:64x32x128u2g1s4i1c,256:64x32x128u2g1s4c,128:32x32x128u2g1s4i4c,64:32x32x128u2g1s2i4c,256:128x32x128u2g1s8i4c"
       "sparse/fp16/$S/256:128x256x32u4,256:128x256x32u4i4,256:128x256x32u4i1,256:128x256x64u2i4"
       "dense/fp16/$S/256:128x256x32u4,256:128x256x32u8,256:128x256x64u4,256:128x256x32u4c,128:128x256x32u4"
       "dense16/fp16/$S/256:256x256x32u4,256:128x256x32u4") ;;
  2) jobs=(
       "dense/fp16/$L/256:64x32x128u2g1c,256:64x32x128u2g1s2c,256:64x32x128u2g1s4c,256:64x32x128u2g1s8c,128:32x32x128u2g1s4c,64:32x32x128u2g1c,64:32x32x128u2g1s2c,256:128x32x128u2g1s4c,256:64x32x64u4g1s4c"
       "sparse/fp16/$L/256:64x32x128u2g1c,256:64x32x128u2g1i4c,256:64x32x128u2g1i1c,256:64x32x128u2g1s4c,256:64x32x128u2g1s4i4c,256:64x32x128u2g1s4i1c,256:64x32x128u2g1s8i4c,64:32x32x128u2g1s2i4c,128:32x32x128u2g1s4i4c,256:128x32x128u2g1s8i4c,256:64x32x256u2g1s4i4c"
       "dense/fp16/$S/256:128x256x32u4,256:128x256x32u8,256:128x256x64u4,256:256x128x32u4,128:128x128x32u4,256:128x256x32u4c"
       "sparse/fp16/$S/256:128x256x32u4,256:128x256x32u4i1"
       "dense16/fp16/$S/256:256x256x32u4,256:128x256x32u4") ;;
  *) echo "usage: $0 1|2" >&2; exit 2 ;;
esac
args=()
for job in "${jobs[@]}"; do args+=(--job "$job"); done
timeout "${SWEEP_TIMEOUT:-250}" python3 -m lab.explore --iters 20 --json "$OUT/round$1.json" "${args[@]}" \
  2>&1 | tee "$OUT/round$1.log"
