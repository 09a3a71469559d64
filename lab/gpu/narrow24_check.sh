#!/bin/bash
# The Vulkan 2:4 kernel at the skinny shapes of LLM decode on a GPU host (docs/gemm.md, G54 and the 2:4 target:
# 2:4 over Vulkan dense, geomean >= 1.4x at M >= 8192, none below 1.2x, >= 1.1x at 4096 rows). From the repository
# root, after `source scripts/gpu_env.sh`:  OUT=/some/folder bash lab/gpu/narrow24_check.sh   (about 6 minutes)
# Everything goes to $OUT:
#   sweep.log, s/     lab/sweep_sparse24_narrow, fp16, the nine skinny shapes after an L2 flush: every tile-major
#                     candidate (128-row tiles at N = 32) against the 2:4 seeds and Vulkan dense, then the K loops
#                     of the seeds and the fastest (vkcoop inspect)
#   skinny.log, .json the measure itself: vkcoop bench sparse on benchmarks/shapes-skinny.csv, the Vulkan dense and
#                     2:4 paths, fp16 and bf16, --flush-l2, with the seeds as shipped
#   summary.txt       each step's exit status
# Success: every step "exit 0" and no configuration failing its check; the sweep's table ends in its target line.
set -u
cd "$(dirname "$0")/../.." || exit 2
STEP_TIMEOUT=330
source lab/gpu/steps.sh
step sweep sweep.log python3 -m lab.sweep_sparse24_narrow --out "$OUT/s" --budget-s 240 --inspect best
STEP_TIMEOUT=150
step skinny skinny.log python3 -m vkcoop bench sparse --dtype fp16,bf16 --shapes benchmarks/shapes-skinny.csv \
  --paths vk-coopmat2-dense,vk-coopmat2-2:4 --flush-l2 --progress none --json "$OUT/skinny.json"
grep -A 16 "narrow 2:4 against" "$OUT/sweep.log" | cut -c1-160
tail -n 25 "$OUT/skinny.log" | cut -c1-160
