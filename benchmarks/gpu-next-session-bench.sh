#!/usr/bin/env bash
# Issue 14 on the next GPU session (the device tool's default machine, an H100; on another kind the results go
# to that GPU's own folder). Run from the repository root with the bundle carried, one step per device command,
# in this order (each fits the 10-minute limit; docs/results/README.md explains the files):
#
#   benchmarks/gpu-next-session-bench.sh check     GPU tests of bench + CUDA paths, then a small smoke run
#   benchmarks/gpu-next-session-bench.sh facts     nvidia-smi/torch facts, vkcoop info --json (+ sm_count)
#   benchmarks/gpu-next-session-bench.sh tune      cold tuning cache, `vkcoop bench sparse --tune` (tunable paths)
#   benchmarks/gpu-next-session-bench.sh run       `vkcoop bench sparse --dtype fp16,bf16 --sizes 4096,8192
#                                                   --shapes square,llm`, every path, reading the cache
#   benchmarks/gpu-next-session-bench.sh mlp       --shapes mlp and benchmarks/shapes-example.csv
#   benchmarks/gpu-next-session-bench.sh compare   `vkcoop bench compare docs/results/h200/bench.json <this run>`
#
# Results: $OUT/results/<gpu>/ (copy to docs/results/<gpu>/), logs: $OUT/logs/. The tuning cache is kept in
# out/cache (git-ignored, survives between device commands on the same machine); `tune` empties it first.
set -uo pipefail
cd "$(dirname "$0")/.."
step=${1:-}
case "$step" in
  check|facts|tune|run|mlp|compare) ;;
  *) echo "usage: $0 check|facts|tune|run|mlp|compare (in this order; one per device command)" >&2; exit 2 ;;
esac
OUT=${OUT:-$PWD/out/session}
if [ -f scripts/gpu_env.sh ]; then
  # shellcheck disable=SC1091
  source scripts/gpu_env.sh
else
  echo "gpu-next-session-bench: scripts/gpu_env.sh is missing: without it the Vulkan paths are skipped" >&2
fi
export VKCOOP_CACHE_DIR=${VKCOOP_CACHE_DIR:-$PWD/out/cache}
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
PY=${PYTHON:-python3}
gpu=${GPU_FOLDER:-$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 \
      | awk '{for (i = 1; i <= NF; i++) if ($i ~ /^[A-Za-z]+[0-9]+/) {print tolower($i); exit}}')}
gpu=${gpu:-unknown-gpu}
results=$OUT/results/$gpu
mkdir -p "$results" "$OUT/logs" "$VKCOOP_CACHE_DIR"
log() { tee "$OUT/logs/$1.log"; }
save_cache() { rm -rf "$results/tuning"; cp -r "$VKCOOP_CACHE_DIR/tuning" "$results/tuning" 2>/dev/null || true; }
CASES=(--dtype fp16,bf16 --sizes 4096,8192 --shapes square,llm)
TUNABLE=vk-coopmat2-dense,vk-coopmat2-2:4,vk-khr-subgroup,cuda-mma.sp,cuda-wgmma.sp

case "$step" in
  check)
    timeout 300 "$PY" -m pytest -q -x tests/test_bench.py tests/test_bench_search.py tests/test_bench_tuning.py \
      tests/test_bench_compare.py tests/test_bench_shapes.py tests/test_cuda_gemm.py 2>&1 | log check-pytest
    # real torch and drivers on a small problem: every path, its search and a tuning, in a throwaway cache
    VKCOOP_CACHE_DIR=$PWD/out/smoke-cache timeout 240 "$PY" -m vkcoop bench sparse --retune --dtype fp16,bf16 \
      --sizes 512 --shapes square,llm --llm-tokens 8,32 --tune-budget 60 --search-budget 3 --iters 5 \
      --json "$results/smoke.json" 2>&1 | log check-smoke
    ;;
  facts)
    { nvidia-smi; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.limit \
        --format=csv; "$PY" -c 'import torch; p = torch.cuda.get_device_properties(0)
print("torch", torch.__version__, "cuda", torch.version.cuda, "cusparselt", torch.backends.cusparselt.version())
print("device", p.name, "sm_count", p.multi_processor_count, "uuid", getattr(p, "uuid", "?"))'
    } 2>&1 | log facts | tee "$results/facts.txt"
    "$PY" -m vkcoop info --json > "$results/capabilities-raw.json" 2> "$OUT/logs/info.err"
    "$PY" - "$results/capabilities-raw.json" "$results/capabilities.json" <<'PYEOF'
import json, sys
import torch
report = json.load(open(sys.argv[1]))
device = report[0] if isinstance(report, list) else report
device["sm_count"] = torch.cuda.get_device_properties(0).multi_processor_count
json.dump(device, open(sys.argv[2], "w"), indent=2)
print("wrote", sys.argv[2], "for", device.get("name"))
PYEOF
    ;;
  tune)
    rm -rf "$VKCOOP_CACHE_DIR/tuning"   # a cold cache: everything below is tuned on this GPU
    timeout 570 "$PY" -m vkcoop bench sparse --tune --tune-budget 330 "${CASES[@]}" --paths "$TUNABLE" \
      --json "$results/tune.json" 2>&1 | log tune | tee "$results/tune.log"
    save_cache
    "$PY" -m vkcoop bench tuning 2>&1 | tee "$results/tuning.txt"
    ;;
  run)
    timeout 570 "$PY" -m vkcoop bench sparse "${CASES[@]}" --search-budget 8 \
      --json "$results/bench.json" --plot "$results/bench.png" 2>&1 | log run | tee "$results/bench.log"
    save_cache
    ;;
  mlp)
    timeout 570 "$PY" -m vkcoop bench sparse --dtype fp16,bf16 --shapes mlp,benchmarks/shapes-example.csv \
      --search-budget 8 --json "$results/bench-mlp.json" --plot "$results/bench-mlp.png" 2>&1 \
      | log mlp | tee "$results/bench-mlp.log"
    save_cache
    ;;
  compare)
    "$PY" -m vkcoop bench compare docs/results/h200/bench.json "$results/bench.json" \
      --json "$results/compare-h200.json" 2>&1 | log compare | tee "$results/compare-h200.txt"
    echo "bench compare exit status: ${PIPESTATUS[0]} (1 = some case slower than the H200 beyond the noise band)" \
      | tee -a "$results/compare-h200.txt"
    ;;
esac
echo "results in $results"
