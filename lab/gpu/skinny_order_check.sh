#!/bin/bash
# Why the Vulkan paths' skinny figures depend on the process they run in. A `bench sparse --flush-l2` run of the
# skinny grid with only the Vulkan paths (H200, 580.159.04) timed the 14336-row cases 3-4.5x slower than the
# same cases in a run of every path, at the same configurations and with steady times (216 against 48 µs for
# dense 14336x16x4096); in such a process the cases that come later are slow, whatever their dtype, with or without
# the flush. The suspect: with no CUDA context open, the GPU's clocks (the memory clock first) settle lower
# between the short Vulkan dispatches. Each step is a process of its own, with nvidia-smi sampling the clocks
# every 200 ms beside it:
#   vulkan-only      the Vulkan paths alone (the slow case)
#   cuda-held        the same, while a sibling process holds a CUDA context open and idle
#   with-cublas      the Vulkan paths and cuBLAS in one process (CUDA work between the cases)
#   vulkan-reversed  the Vulkan paths alone, the shapes in reverse order (position, not shape)
# From the repository root, after `source scripts/gpu_env.sh`:
#   OUT=/some/folder bash lab/gpu/skinny_order_check.sh   (about 4 minutes)
# Everything goes to $OUT: <step>.json and .log, clocks-<step>.csv, summary.txt, and table.txt (µs per case and
# path in each step, then each step's SM and memory clocks and performance states while it ran).
set -u
cd "$(dirname "$0")/../.." || exit 2
STEP_TIMEOUT=150
source lab/gpu/steps.sh
reversed="$OUT/shapes-skinny-reversed.csv"
{ grep -E '^(#|label)' benchmarks/shapes-skinny.csv; grep -vE '^(#|label)' benchmarks/shapes-skinny.csv | tac; } > "$reversed"
bench() {  # bench NAME SHAPES PATHS: one process, its clocks sampled beside it
  local name=$1 shapes=$2 paths=$3
  nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,pstate,power.draw,clocks_event_reasons.active \
    --format=csv,noheader -lms 200 > "$OUT/clocks-$name.csv" 2>/dev/null &
  local sampler=$!
  step "$name" "$name.log" python3 -m vkcoop bench sparse --dtype bf16 --shapes "$shapes" --paths "$paths" \
    --flush-l2 --progress none --json "$OUT/$name.json"
  kill "$sampler" 2>/dev/null
  wait "$sampler" 2>/dev/null
}
vulkan=vk-coopmat2-dense,vk-coopmat2-2:4
bench vulkan-only benchmarks/shapes-skinny.csv "$vulkan"
python3 -c "import time, torch; torch.zeros(1, device='cuda'); time.sleep(170)" &
holder=$!
sleep 15   # the context is up
bench cuda-held benchmarks/shapes-skinny.csv "$vulkan"
kill "$holder" 2>/dev/null
bench with-cublas benchmarks/shapes-skinny.csv "$vulkan,cuBLAS"
bench vulkan-reversed "$reversed" "$vulkan"
python3 - "$OUT" > "$OUT/table.txt" <<'PY'
import collections, json, pathlib, statistics, sys
out = pathlib.Path(sys.argv[1])
steps = ("vulkan-only", "cuda-held", "with-cublas", "vulkan-reversed")
times = collections.defaultdict(dict)
for step in steps:
    path = out / f"{step}.json"
    for r in json.loads(path.read_text())["results"] if path.exists() else []:
        if r["path"].startswith("vk-"):
            times[(r["m"], r["n"], r["k"], r["path"])][step] = r["median_ms"] * 1e3 if r["status"] == "ok" else None
print(f"{'case':38}" + "".join(f"{s:>16}" for s in steps))
for (m, n, k, p), row in sorted(times.items()):
    print(f"{m}x{n}x{k} {p:24}" + "".join(f"{row[s]:16.1f}" if row.get(s) else f"{'-':>16}" for s in steps))
for step in steps:
    rows = [line.split(", ") for line in (out / f"clocks-{step}.csv").read_text().splitlines()
            if line.count(",") >= 5] if (out / f"clocks-{step}.csv").exists() else []
    if not rows:
        print(f"{step}: no clock samples")
        continue
    sm = [int(r[1].split()[0]) for r in rows if r[1].split()[0].isdigit()]
    mem = [int(r[2].split()[0]) for r in rows if r[2].split()[0].isdigit()]
    states = collections.Counter(r[3] for r in rows)
    print(f"{step}: {len(rows)} samples, SM MHz min {min(sm)} median {statistics.median(sm)}, memory MHz min "
          f"{min(mem)} median {statistics.median(mem)}, states {dict(states)}, reasons "
          f"{dict(collections.Counter(r[5] for r in rows).most_common(3))}")
PY
cat "$OUT/table.txt"
