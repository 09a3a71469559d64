#!/bin/bash
# wgmma.sp's persistent walks on a GPU host (docs/cuda-sparse.md, C36 and C38). From the repository root, after
# `source scripts/gpu_env.sh`:  OUT=/some/folder bash lab/gpu/wgmma_walk_check.sh   (about 3 minutes on a warm H100)
# Everything goes to $OUT:
#   tests.log        the wgmma.sp GPU tests: every entry bit-exact, the persistent walks over 256 tiles, every type
#   sanitize.log     compute-sanitizer's four tools on the persistent entries, each walking three tiles a CTA
#   compute.log      lab/bench_cuda_sparse, two rounds in one process: the shipped persistent 128x256 against
#                    cuSPARSELt, fp16, on the compute grid
#   summary.txt      each step's exit status
# Success: every step "exit 0"; tests.log ends "N passed"; sanitize.log reports 0 errors for every tool; every row of
# compute.log exact=1.0000.
set -u
cd "$(dirname "$0")/../.." || exit 2
STEP_TIMEOUT=300
source lab/gpu/steps.sh
step tests tests.log python3 -m pytest -q -n 16 tests/test_cuda_gemm.py tests/test_cuda_wgmma_types.py -k "wgmma or Wgmma"
step sanitize sanitize.log python3 -m vkcoop sanitize cuda --kernels "_ws_p\b" --logs "$OUT/sanitizer-logs"
step compute compute.log python3 -m lab.bench_cuda_sparse --paths cusparselt,wgmma --dtype fp16 --repeat 2 \
  --shapes 4096x4096x4096,6144x6144x6144,8192x8192x8192,14336x4096x4096,4096x4096x14336 \
  --configs 128x256
tail -n 3 "$OUT/tests.log"
grep -E "errors" "$OUT/sanitize.log"
grep -E "^(##|wgmma|cuSPARSELt)" "$OUT/compute.log" | cut -c1-110
