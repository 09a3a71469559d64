#!/bin/bash
# Why the Vulkan paths' skinny figures depend on the process they run in. A `bench sparse --flush-l2` run of the
# skinny grid with only the Vulkan paths (H200, 580.159.04) timed the 14336-row cases 3-4.5x slower than the
# same cases in a run of every path, at the same configurations and with steady times (216 against 48 µs for
# dense 14336x16x4096); in such a process the cases that come later are slow, whatever their dtype, with or without
# the flush. The suspect: with no CUDA context open, the GPU's clocks (the memory clock first) settle lower
# between the short Vulkan dispatches. Each step is a process of its own; the bench samples the clocks through NVML
# beside its run and each result keeps the least memory clock it saw (vkcoop.bench.clocks):
#   vulkan-untraced  the Vulkan paths alone, nothing sampling the GPU (as the slow runs were made)
#   vulkan-only      the same with the clock trace (whether the sampling itself changes the figures)
#   cuda-held        the same, while a sibling process holds a CUDA context open and idle
#   with-cublas      the Vulkan paths and cuBLAS in one process (CUDA work between the cases)
# From the repository root, after `source scripts/gpu_env.sh`:
#   OUT=/some/folder bash lab/gpu/skinny_order_check.sh   (about 4 minutes)
# Everything goes to $OUT: <step>.json and .log, summary.txt, and table.txt (per case and path in each step, µs and
# the least memory clock measured beside it).
set -u
cd "$(dirname "$0")/../.." || exit 2
STEP_TIMEOUT=150
source lab/gpu/steps.sh
bench() {  # bench NAME PATHS [OPTION]: one process
  local name=$1 paths=$2
  shift 2
  step "$name" "$name.log" python3 -m vkcoop bench sparse --dtype bf16 --shapes benchmarks/shapes-skinny.csv \
    --paths "$paths" --flush-l2 --progress none --json "$OUT/$name.json" "$@"
}
vulkan=vk-coopmat2-dense,vk-coopmat2-2:4
bench vulkan-untraced "$vulkan" --no-clock-trace
bench vulkan-only "$vulkan"
python3 -c "import time, torch; torch.zeros(1, device='cuda'); time.sleep(170)" &
holder=$!
sleep 15   # the context is up
bench cuda-held "$vulkan"
kill "$holder" 2>/dev/null
bench with-cublas "$vulkan,cuBLAS"
python3 - "$OUT" > "$OUT/table.txt" <<'PY'
import collections, json, pathlib, sys
out = pathlib.Path(sys.argv[1])
steps = ("vulkan-untraced", "vulkan-only", "cuda-held", "with-cublas")
times = collections.defaultdict(dict)
for step in steps:
    path = out / f"{step}.json"
    for r in json.loads(path.read_text())["results"] if path.exists() else []:
        if r["path"].startswith("vk-") and r["status"] == "ok":   # µs and the least memory clock it ran at
            least = (r.get("clocks") or {}).get("mem_mhz_min")
            times[(r["m"], r["n"], r["k"], r["path"])][step] = f"{r['median_ms'] * 1e3:.1f} ({least or '?'})"
print(f"{'case (µs, least memory MHz)':38}" + "".join(f"{s:>18}" for s in steps))
for (m, n, k, p), row in sorted(times.items()):
    print(f"{m}x{n}x{k} {p:24}" + "".join(f"{row.get(s, '-'):>18}" for s in steps))
PY
cat "$OUT/table.txt"
