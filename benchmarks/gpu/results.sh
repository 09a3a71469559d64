#!/usr/bin/env bash
# Writes one GPU's docs/results/<gpu>/ on the GPU host: every recorded figure the README cites, each file with
# the exact command that made it. From the repository root, with .bundle carried (scripts/gpu_bundle.sh):
#
#   bash benchmarks/gpu/results.sh [PART...]       PART: core, attention, sparse-fp16, sparse-bf16, memory-fp16,
#                                                  tests (default: all)
#
#   core     facts.log, capabilities.json; run.json (vkcoop run --all --validate); fuzz.json (100k cases, hardware
#            and portable); peak.json (vkcoop bench peak); inspect-dense.json, inspect-2-4.json, inspect-khr.json
#            (vkcoop inspect --gemm ..., the driver's machine code)
#   attention
#            attention.json / .png (vkcoop bench attention --ceilings: fp16 and bf16, head_dim 64 and 128; prefill
#            at 4k causal and not, decode at kv 8k-64k with GQA and without; every torch SDPA backend, the coopmat2
#            ceiling and the read bandwidth in the same process; 345 s on an H100 since decode warms up 1 s)
#   sparse-fp16, sparse-bf16
#            bench-fp16.json / .png, bench-bf16.json / .png (vkcoop bench sparse --dtype D --sizes 4096,8192
#            --shapes square,llm --ceilings --search-budget 20: every path, the library searches in child
#            processes; one dtype per process so each fits a 10-minute device command)
#   memory-fp16
#            bench-memory-fp16.json / .png (vkcoop bench sparse --shapes benchmarks/shapes-memory-bound.csv: M = K in
#            {4096, 8192}, N in {16, 32, 64}, with the read roofline of each path's own bytes)
#   tests    pytest-gpu.log: python3 -m pytest -m "(gpu or cuda or vulkan) and not sanitizer" (the GPU suite; the
#            sanitizer tests run in the part sanitizer)
#   gpu-av   gpu-av-samples.json, gpu-av-seeds.json (vkcoop sanitize vulkan: every sample, then every GEMM and
#            attention seed on an aligned and a ragged problem, under GPU-assisted validation; each file is written
#            after every part it holds, so a step cut short keeps what it finished)
#   sanitizer
#            sanitizer.json and sanitizer-logs/ (vkcoop sanitize cuda: every hand-written CUDA kernel configuration
#            under memcheck, racecheck, synccheck and initcheck, the four at once); pytest-sanitizer.log: the
#            planted faults each tool must report, and the GPU-AV tests (pytest -m sanitizer)
#
# On an H100 each part fits one 10-minute device command. Every command's output goes to <name>.log beside its
# files, and COMMANDS.md lists each file with its command and exit status. With $OUT set (an output folder the GPU
# host hands back), the folder is also packed into $OUT/results-<gpu>-<part>.tgz, so it comes back as one file per part.
set -uo pipefail
cd "$(dirname "$0")/../.."
parts=("$@")
[ ${#parts[@]} -gt 0 ] || parts=(core attention sparse-fp16 sparse-bf16 memory-fp16 tests gpu-av sanitizer)
expanded=()
for part in "${parts[@]}"; do
  case "$part" in
    core|attention|sparse-fp16|sparse-bf16|memory-fp16|tests|gpu-av|sanitizer) expanded+=("$part") ;;
    *) echo "results.sh: unknown part '$part' (core, attention, sparse-fp16, sparse-bf16, memory-fp16, tests," \
            "gpu-av, sanitizer)" >&2
       exit 2 ;;
  esac
done
parts=("${expanded[@]}")
# shellcheck disable=SC1091
source scripts/gpu_env.sh
py=${PYTHON:-python3}
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 \
      | awk '{for (i = 1; i <= NF; i++) if ($i ~ /^[A-Za-z]+[0-9]+/) {print tolower($i); exit}}')
dir=docs/results/${gpu:-unknown-gpu}
mkdir -p "$dir"
[ -f "$dir/COMMANDS.md" ] || printf '# %s\n\n| file | command | exit |\n|---|---|---|\n' "$dir" >"$dir/COMMANDS.md"

record() {  # record NAME FILES -- COMMAND...: run it (log in NAME.log), stamp "command" into its JSON files
  local name=$1 files=$2
  shift 3
  echo "== $name: $*"
  local started=$SECONDS
  { echo "\$ $*"; timeout "${STEP_TIMEOUT:-560}" "$@"; } >"$dir/$name.log" 2>&1
  local status=$?
  echo "   exit $status after $((SECONDS - started)) s"; tail -n 3 "$dir/$name.log" | cut -c1-200 | sed 's/^/   | /'
  "$py" - "$*" $files <<'PY'
import json, sys
command, files = sys.argv[1], sys.argv[2:]
for path in files:
    try:
        data = json.load(open(path))
    except (OSError, ValueError):
        continue
    if isinstance(data, dict):
        json.dump({"command": command, **data}, open(path, "w"), indent=1, default=str)
PY
  echo "| ${files:-$name.log} | \`$*\` | $status |" >>"$dir/COMMANDS.md"
  # packed after every step, so what ran comes back even if a later step outlives the device command
  [ -z "${OUT:-}" ] || tar -czf "$OUT/results-${gpu:-unknown-gpu}-$part.tgz" "$dir"
}

for part in "${parts[@]}"; do
  case "$part" in
    core)
      record facts "" -- bash -c "nvidia-smi; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv; $py -c 'import torch; print(\"torch\", torch.__version__, \"cuSPARSELt\", torch.backends.cusparselt.version())'; $py -m pip list 2>/dev/null | grep -iE 'nvmath|cusparselt|nvdisasm|cuda-core'"
      record info "$dir/capabilities.json" -- bash -c "$py -m vkcoop info --json >$dir/capabilities.json"
      STEP_TIMEOUT=180 record run "$dir/run.json" -- "$py" -m vkcoop run --all --validate --json "$dir/run.json"
      STEP_TIMEOUT=120 record fuzz "$dir/fuzz.json" -- "$py" -m vkcoop fuzz --cases 100000 --target both --json "$dir/fuzz.json"
      STEP_TIMEOUT=90 record peak "$dir/peak.json" -- "$py" -m vkcoop bench peak --json "$dir/peak.json"
      for target in dense 2:4 khr; do
        file=$dir/inspect-${target/:/-}.json
        STEP_TIMEOUT=60 record "inspect-${target/:/-}" "$file" -- "$py" -m vkcoop inspect --gemm "$target" --json "$file"
      done
      ;;
    attention)
      record attention "$dir/attention.json" -- "$py" -m vkcoop bench attention --kinds prefill,decode \
        --dtype fp16,bf16 --head-dims 64,128 --seqs 4096 --ceilings --json "$dir/attention.json" \
        --plot "$dir/attention.png" ;;
    sparse-fp16|sparse-bf16)
      dtype=${part#sparse-}
      record "bench-$dtype" "$dir/bench-$dtype.json" -- "$py" -m vkcoop bench sparse --dtype "$dtype" \
        --sizes 4096,8192 --shapes square,llm --llm-tokens 32 --ceilings --search-budget 20 \
        --json "$dir/bench-$dtype.json" \
        --plot "$dir/bench-$dtype.png" ;;
    memory-fp16)
      record bench-memory-fp16 "$dir/bench-memory-fp16.json" -- "$py" -m vkcoop bench sparse --dtype fp16 \
        --shapes benchmarks/shapes-memory-bound.csv --ceilings --search-budget 10 \
        --json "$dir/bench-memory-fp16.json" --plot "$dir/bench-memory-fp16.png" ;;
    tests)
      record pytest-gpu "" -- "$py" -m pytest -p no:cacheprovider -q -m "(gpu or cuda or vulkan) and not sanitizer" \
        tests ;;
    gpu-av)
      STEP_TIMEOUT=270 record gpu-av-samples "$dir/gpu-av-samples.json" -- "$py" -m vkcoop sanitize vulkan \
        --parts samples --json "$dir/gpu-av-samples.json"
      STEP_TIMEOUT=290 record gpu-av-seeds "$dir/gpu-av-seeds.json" -- "$py" -m vkcoop sanitize vulkan \
        --parts gemm,attention --json "$dir/gpu-av-seeds.json" ;;
    sanitizer)
      STEP_TIMEOUT=380 record sanitizer "$dir/sanitizer.json" -- "$py" -m vkcoop sanitize cuda --timeout 280 \
        --logs "$dir/sanitizer-logs" --json "$dir/sanitizer.json"
      STEP_TIMEOUT=170 record pytest-sanitizer "" -- "$py" -m pytest -p no:cacheprovider -q -rfEs -W default \
        -m sanitizer tests/test_cuda_sanitizer.py tests/test_vk_gpu_validation.py tests/test_sanitize_vulkan.py ;;
  esac
done
