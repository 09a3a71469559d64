#!/usr/bin/env bash
# Writes one GPU's current result set, docs/results/<gpu>/, on the GPU host: every figure the README and the docs
# cite, each file with the exact command that made it. From the repository root, with .bundle carried
# (scripts/gpu_bundle.sh), and COMMIT set to the commit being measured (the host has no git history):
#
#   COMMIT=$(git rev-parse --short HEAD) bash benchmarks/gpu/results.sh [PART...]
#
#   fresh    on a machine whose caches are empty (a bare GPU host): how long a new user waits.
#            run.json (vkcoop run --all --validate), then the same again; bench-default.json / .png (vkcoop bench
#            sparse, no options), then again (bench-default-again.json); bench-default-deep.json (the same cases
#            with --search deep) and compare-quick-deep.json (vkcoop bench compare of the quick and the deep run)
#            (FRESH_DEEP=0: without the deep run and its comparison; RESULTS_CONTINUE=1: into the set already there,
#            for a later commit's first-run figures)
#   grid     bench.json / .png: vkcoop bench sparse --preset full --ceilings (fp16 and bf16, 4096 and 8192, square
#            and N = 1 to 256)
#   peak     peak.json (vkcoop bench peak)
#   sparse-grid
#            the 2:4 targets' grid, every path, the libraries searched deep: sparse-compute-<dtype>.json (vkcoop bench
#            sparse on benchmarks/shapes-compute.csv) and sparse-skinny-<dtype>.json (benchmarks/shapes-skinny.csv,
#            with --flush-l2), for each dtype of $DTYPES (default: fp16 bf16; on a 10-minute budget run one a call,
#            DTYPES=fp16 ... sparse-grid, the same set each time)
#   sparse-types
#            the types beyond fp16 and bf16, every path (those without a type skip at once), the libraries searched
#            deep: sparse-types-compute-<dtype>.json (vkcoop bench sparse --dtype <dtype> on
#            benchmarks/shapes-types-compute.csv: 8192^3, 6144^3, 14336x4096x4096) and sparse-types-skinny-<dtype>.json
#            (benchmarks/shapes-types-skinny.csv: 8192x16x8192, 8192x64x8192, with --flush-l2), for each type of
#            $TYPES (default: tf32 e4m3 e5m2 int8 uint8). A type takes up to two 280-second steps: on a 10-minute
#            budget run one type a call (TYPES=e4m3 ... sparse-types), the same set each time
#   before-after
#            before-<BEFORE_COMMIT>.json, after.json, compare-before-after.json: the default bench (vkcoop bench
#            sparse, no options) of an earlier commit, then of this tree, on one machine one after the other, and
#            vkcoop bench compare of the two (its exit 1: a path beyond its noise band). BEFORE: a folder holding
#            that commit's tree, since the host has no git (carry `git archive REV | tar -x -C .before`, a folder
#            git ignores); BEFORE_COMMIT: its name. Never part of the default list
#   attention
#            attention.json / .png: vkcoop bench attention --ceilings (prefill and decode, fp16 and bf16)
#   core     capabilities.json (vkcoop info --json), facts.log, inspect-*.json (vkcoop inspect: the driver's
#            machine code for each GEMM kernel and the attention kernel), fuzz.json (vkcoop fuzz, both targets)
#   waterfall
#            waterfall-tune.json (the CUDA rungs' tiles tuned on those cases: vkcoop bench sparse --tune),
#            waterfall-bench.json (vkcoop bench sparse on benchmarks/shapes-waterfall.csv, the paths of each rung),
#            waterfall.json / .png (vkcoop bench waterfall of it and of attention.json where the set has one)
#   tests    pytest-gpu.log: the GPU suite, python3 -m pytest -m "(gpu or cuda or vulkan) and not sanitizer" -n 16
#   gpu-av   gpu-av-samples.json, gpu-av-seeds.json (vkcoop sanitize vulkan: every sample, then every GEMM and
#            attention seed on an aligned and a ragged problem, under GPU-assisted validation)
#   sanitizer
#            sanitizer.json and sanitizer-logs.tgz (vkcoop sanitize cuda: every hand-written CUDA kernel
#            configuration under memcheck, racecheck, synccheck and initcheck); pytest-sanitizer.log: the planted
#            faults each tool must report, and the GPU-AV tests (pytest -m sanitizer)
#
# Each part fits one 10-minute command on an H100 or H200; run them in this order on one machine. The folder starts
# empty with the first part (fresh, or the first one named), so it only ever holds one run: set.json says which
# commit began it, steps.json holds each step's command, wall time, exit status and commit (a part run again
# replaces its steps), and SUMMARY.md (vkcoop bench summary) is generated from the JSON. With $OUT set (an output folder the host hands back), the folder is
# packed into $OUT/results-<gpu>[-$RESULTS_TAG].tgz after every step. On a host of two GPUs, parts may run at once,
# one GPU each (CUDA_VISIBLE_DEVICES and VKCOOP_DEVICE, a RESULTS_TAG each), once the set exists.
set -uo pipefail
cd "$(dirname "$0")/../.."
parts=("$@")
all_parts="fresh grid peak sparse-grid sparse-types attention core waterfall tests gpu-av sanitizer"
known_parts="$all_parts before-after"
[ ${#parts[@]} -gt 0 ] || read -ra parts <<<"$all_parts"
for part in "${parts[@]}"; do
  case " $known_parts " in
    *" $part "*) ;;
    *) echo "results.sh: unknown part '$part' (${known_parts// /, })" >&2; exit 2 ;;
  esac
  if [ "$part" = before-after ] && { [ ! -f "${BEFORE:-}/vkcoop/__init__.py" ] || [ -z "${BEFORE_COMMIT:-}" ]; }; then
    echo "results.sh: before-after needs BEFORE, a folder holding the earlier commit's tree (no vkcoop/__init__.py" \
         "in '${BEFORE:-}'), and BEFORE_COMMIT, its name" >&2
    exit 2
  fi
done
# shellcheck disable=SC1091
[ -n "${VK_ADD_LAYER_PATH:-}" ] || source scripts/gpu_env.sh   # once per host: not twice at once
py=${PYTHON:-python3}
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 \
      | awk '{for (i = 1; i <= NF; i++) if ($i ~ /^[A-Za-z]+[0-9]+/) {print tolower($i); exit}}')
dir=docs/results/${gpu:-unknown-gpu}
commit=${COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
if { [ "${parts[0]}" = fresh ] && [ -z "${RESULTS_CONTINUE:-}" ]; } || [ ! -f "$dir/set.json" ]; then   # a new set
  rm -rf "$dir"
  mkdir -p "$dir"
  "$py" - "$dir/set.json" "$commit" "$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)" <<'PY'
import datetime, json, sys
json.dump({"commit": sys.argv[2], "gpu": sys.argv[3],
           "date": datetime.date.today().isoformat()}, open(sys.argv[1], "w"), indent=1)
PY
fi

pack() {  # the set so far into $OUT (one archive per RESULTS_TAG: parts may run at once, one GPU each)
  [ -z "${OUT:-}" ] || tar -czf "$OUT/results-${gpu:-unknown-gpu}${RESULTS_TAG:+-$RESULTS_TAG}.tgz" "$dir"
}

step() {  # step NAME -- COMMAND...: run it (its output in NAME.log), record its wall time and exit status
  local name=$1
  shift 2
  echo "== $name: $*"
  local started=$SECONDS
  { echo "\$ $*"; timeout "${STEP_TIMEOUT:-560}" "$@"; } >"$dir/$name.log" 2>&1
  local status=$? seconds=$((SECONDS - started))
  echo "   exit $status after $seconds s"; tail -n 2 "$dir/$name.log" | cut -c1-200 | sed 's/^/   | /'
  "$py" - "$dir/steps.json" "$name" "$*" "$seconds" "$status" "${CUDA_VISIBLE_DEVICES:-}" "$commit" <<'PY'
import fcntl, json, sys
path, name, command, seconds, status, gpu, commit = sys.argv[1:]
with open(path, "a+") as f:   # locked: two GPUs of one host may each run parts of the same set
    fcntl.flock(f, fcntl.LOCK_EX)
    f.seek(0)
    try:
        steps = json.loads(f.read() or "[]")
    except ValueError:
        steps = []
    steps = [s for s in steps if s["name"] != name]   # a step run again replaces its earlier record
    steps.append({"name": name, "command": command, "seconds": int(seconds), "exit": int(status), "commit": commit,
                  **({"cuda_visible_devices": gpu} if gpu else {})})
    f.seek(0)
    f.truncate()
    json.dump(steps, f, indent=1)
PY
  pack
}

for part in "${parts[@]}"; do
  case "$part" in
    fresh)
      STEP_TIMEOUT=240 step run -- "$py" -m vkcoop run --all --validate --json "$dir/run.json"
      STEP_TIMEOUT=120 step run-again -- "$py" -m vkcoop run --all --validate
      STEP_TIMEOUT=240 step bench-default -- "$py" -m vkcoop bench sparse --json "$dir/bench-default.json" \
        --plot "$dir/bench-default.png"
      STEP_TIMEOUT=120 step bench-default-again -- "$py" -m vkcoop bench sparse \
        --json "$dir/bench-default-again.json"
      [ "${FRESH_DEEP:-1}" = 1 ] || continue
      STEP_TIMEOUT=240 step bench-default-deep -- "$py" -m vkcoop bench sparse --search deep --search-budget 3 \
        --json "$dir/bench-default-deep.json"
      step compare-quick-deep -- "$py" -m vkcoop bench compare "$dir/bench-default-again.json" \
        "$dir/bench-default-deep.json" --json "$dir/compare-quick-deep.json" ;;
    grid)
      step bench -- "$py" -m vkcoop bench sparse --preset full --ceilings --json "$dir/bench.json" \
        --plot "$dir/bench.png" ;;
    peak)
      STEP_TIMEOUT=120 step peak -- "$py" -m vkcoop bench peak --json "$dir/peak.json" ;;
    sparse-grid)
      for dtype in ${DTYPES:-fp16 bf16}; do
        step "sparse-compute-$dtype" -- "$py" -m vkcoop bench sparse --dtype "$dtype" \
          --shapes benchmarks/shapes-compute.csv --search deep --search-budget 2 --json "$dir/sparse-compute-$dtype.json"
        step "sparse-skinny-$dtype" -- "$py" -m vkcoop bench sparse --dtype "$dtype" --flush-l2 \
          --shapes benchmarks/shapes-skinny.csv --search deep --search-budget 2 --json "$dir/sparse-skinny-$dtype.json"
      done ;;
    sparse-types)
      for dtype in ${TYPES:-tf32 e4m3 e5m2 int8 uint8}; do
        STEP_TIMEOUT=280 step "sparse-types-compute-$dtype" -- "$py" -m vkcoop bench sparse --dtype "$dtype" \
          --shapes benchmarks/shapes-types-compute.csv --search deep --search-budget 2 \
          --json "$dir/sparse-types-compute-$dtype.json"
        STEP_TIMEOUT=280 step "sparse-types-skinny-$dtype" -- "$py" -m vkcoop bench sparse --dtype "$dtype" --flush-l2 \
          --shapes benchmarks/shapes-types-skinny.csv --search deep --search-budget 2 \
          --json "$dir/sparse-types-skinny-$dtype.json"
      done ;;
    before-after)   # -P: the working folder does not come first, so the earlier tree's package is the one found
      STEP_TIMEOUT=280 step before -- env PYTHONPATH="$BEFORE${PYTHONPATH:+:$PYTHONPATH}" "$py" -P -m vkcoop \
        bench sparse --json "$dir/before-$BEFORE_COMMIT.json"
      STEP_TIMEOUT=250 step after -- "$py" -m vkcoop bench sparse --json "$dir/after.json"
      step compare-before-after -- "$py" -m vkcoop bench compare "$dir/before-$BEFORE_COMMIT.json" "$dir/after.json" \
        --json "$dir/compare-before-after.json" ;;
    attention)
      step attention -- "$py" -m vkcoop bench attention --kinds prefill,decode --dtype fp16,bf16 \
        --head-dims 64,128 --seqs 4096 --ceilings --json "$dir/attention.json" --plot "$dir/attention.png" ;;
    core)
      step info -- bash -c "$py -m vkcoop info --json >$dir/capabilities.json"
      step facts -- bash -c "nvidia-smi; $py -c 'import torch; print(\"torch\", torch.__version__, \"cuSPARSELt\", torch.backends.cusparselt.version())'; $py -m pip list 2>/dev/null | grep -iE 'nvmath|nvdisasm|cuda-core'"
      for target in dense 2:4 khr; do
        STEP_TIMEOUT=90 step "inspect-${target/:/-}" -- "$py" -m vkcoop inspect --gemm "$target" \
          --json "$dir/inspect-${target/:/-}.json"
      done
      STEP_TIMEOUT=90 step inspect-attention -- "$py" -m vkcoop inspect --attention prefill/fp16/128/4096/128:64x64 \
        --json "$dir/inspect-attention.json"
      STEP_TIMEOUT=150 step fuzz -- "$py" -m vkcoop fuzz --cases 20000 --target both --json "$dir/fuzz.json" ;;
    waterfall)   # the CUDA rungs tuned first (every tile they admit), so that each rung is the best of its kind
      STEP_TIMEOUT=300 step waterfall-tune -- "$py" -m vkcoop bench sparse --shapes benchmarks/shapes-waterfall.csv \
        --paths cuda-mma.sync,cuda-mma.sync-cap,cuda-mma.sp-cap --tune --tune-budget 150 --json "$dir/waterfall-tune.json"
      STEP_TIMEOUT=420 step waterfall-bench -- "$py" -m vkcoop bench sparse --shapes benchmarks/shapes-waterfall.csv \
        --paths cuBLAS,cuda-mma.sync,cuda-mma.sync-cap,vk-coopmat2-dense,cuSPARSELt,cuda-wgmma.sp,cuda-mma.sp,cuda-mma.sp-cap,vk-coopmat2-2:4 \
        --ceilings --json "$dir/waterfall-bench.json"
      attention=()
      [ -f "$dir/attention.json" ] && attention=("$dir/attention.json")
      STEP_TIMEOUT=60 step waterfall -- "$py" -m vkcoop bench waterfall "$dir/waterfall-bench.json" "${attention[@]}" \
        --json "$dir/waterfall.json" --plot "$dir/waterfall.png" ;;
    tests)
      step pytest-gpu -- "$py" -m pytest -p no:cacheprovider -p no:benchmark -q -n 16 --dist load \
        -m "(gpu or cuda or vulkan) and not sanitizer" ;;
    gpu-av)
      STEP_TIMEOUT=270 step gpu-av-samples -- "$py" -m vkcoop sanitize vulkan --parts samples \
        --json "$dir/gpu-av-samples.json"
      STEP_TIMEOUT=290 step gpu-av-seeds -- "$py" -m vkcoop sanitize vulkan --parts gemm,attention \
        --json "$dir/gpu-av-seeds.json" ;;
    sanitizer)
      STEP_TIMEOUT=380 step sanitizer -- "$py" -m vkcoop sanitize cuda --timeout 280 --logs /tmp/sanitizer-logs \
        --json "$dir/sanitizer.json"
      tar -czf "$dir/sanitizer-logs.tgz" -C /tmp sanitizer-logs 2>/dev/null
      STEP_TIMEOUT=170 step pytest-sanitizer -- "$py" -m pytest -p no:cacheprovider -q -rfEs -W default -m sanitizer \
        tests/test_cuda_sanitizer.py tests/test_vk_gpu_validation.py tests/test_sanitize_vulkan.py ;;
  esac
done
"$py" -m vkcoop bench summary "$dir" >/dev/null && echo "wrote $dir/SUMMARY.md"
pack
