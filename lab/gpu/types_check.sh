#!/bin/bash
# wgmma.sp's types beyond fp16 and bf16 on a GPU host (docs/cuda-sparse.md, "The other types"). From the repository
# root, after `source scripts/gpu_env.sh`:  OUT=/some/folder bash lab/gpu/types_check.sh
# Everything goes to $OUT:
#   tests.log        the GPU tests of tf32, e4m3, e5m2, int8 and uint8 in tests/test_cuda_gemm.py (each type on exact
#                    inputs at every auto tile, split-K repeating bit for bit, the tf32 sparsity refusal)
#   fp8.json, .log   lab/fp8_accumulation: the fraction bits the fp8 accumulation keeps, tf32 beside it as the fp32
#                    control (record them in docs/spec-notes.md, W1)
#   bench.json, .log lab/bench_cuda_sparse: wgmma.sp and cuSPARSELt at 8192^3, fp16 first as the reference point,
#                    then e4m3, int8 and tf32 (cuSPARSELt skips those, saying why)
#   kscale.log       lab/bench_cuda_sparse at M = N = 8192 and K = 2048, 8192, 16384 in fp16, e4m3 and int8, against
#                    cuSPARSELt: the fixed cost a tile and the main loop's rate per type, as C34 found them for fp16
#                    (the 8-bit main loop takes half fp16's time, so the same store and fill weigh twice as much)
#   peak.json, .log  vkcoop bench peak --no-vulkan for the types: each type's register-only wgmma and wgmma.sp
#   summary.txt      each step's exit status
# Success: every step "exit 0"; tests.log ends "N passed" with no "failed"; fp8.json gives each case's "bits";
# bench.log has a row "wgmma.sp[auto] ok" for each type, its check exact=1.0000; peak.log a line "ok" for each
# wgmma form of each type.
set -u
cd "$(dirname "$0")/../.." || exit 2
source lab/gpu/steps.sh
step tests tests.log python3 -m pytest -q -n 8 tests/test_cuda_gemm.py -k "tf32 or e4m3 or e5m2 or int8"
step fp8-probe fp8.log python3 -m lab.fp8_accumulation --json "$OUT/fp8.json"
step bench bench.log python3 -m lab.bench_cuda_sparse --paths wgmma,cusparselt --dtype fp16,e4m3,int8,tf32 \
  --shapes 8192x8192x8192 --json "$OUT/bench.json"
step kscale kscale.log python3 -m lab.bench_cuda_sparse --paths wgmma,cusparselt --dtype fp16,e4m3,int8 \
  --shapes 8192x8192x2048,8192x8192x8192,8192x8192x16384
step peak peak.log python3 -m vkcoop bench peak --no-vulkan --types 'fp16->fp32,tf32->fp32,e4m3->fp32,e5m2->fp32,s8->s32,u8->s32' \
  --target-ms 2 --repeats 3 --bandwidth-mib 256 --json "$OUT/peak.json"
tail -n 3 "$OUT/tests.log"
grep -E "bits=" "$OUT/fp8.log"
grep -E "^(wgmma|cuSPARSELt)" "$OUT/bench.log"
grep -E "^(##|wgmma|cuSPARSELt)" "$OUT/kscale.log" | cut -c1-110
grep -E "^CUDA wgmma" "$OUT/peak.log"
