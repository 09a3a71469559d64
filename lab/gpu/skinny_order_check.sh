#!/bin/bash
# Whether the Vulkan paths' skinny figures depend on what ran before them in the process. In one `bench sparse
# --flush-l2` run of the skinny grid (fp16 then bf16) on the H100, every bf16 case of 8192 and 14336 rows ran 2.5-4x
# slower than the same fp16 case, on both Vulkan paths, while the 4096-row cases agreed; the 14336-row cases, which
# follow the 8192-row ones, were slower than in the sweep's process. Each step here is a process of its own: bf16
# alone, fp16 alone, fp16 with the shapes in reverse order, bf16 then fp16, and bf16 alone without the flush (the
# GEMM's first timestamp is written at the top of the pipe, after a compute-to-compute barrier behind the flush: a
# start stamped before the flush ends would count part of it). From the repository root, after
# `source scripts/gpu_env.sh`:
#   OUT=/some/folder bash lab/gpu/skinny_order_check.sh   (about 4 minutes)
# Everything goes to $OUT: <step>.json and .log, summary.txt, and table.txt (µs per case and path in each step).
set -u
cd "$(dirname "$0")/../.." || exit 2
STEP_TIMEOUT=150
source lab/gpu/steps.sh
reversed="$OUT/shapes-skinny-reversed.csv"
{ grep -E '^(#|label)' benchmarks/shapes-skinny.csv; grep -vE '^(#|label)' benchmarks/shapes-skinny.csv | tac; } > "$reversed"
bench() {
  local name=$1 dtypes=$2 shapes=$3 flush=${4---flush-l2}
  step "$name" "$name.log" python3 -m vkcoop bench sparse --dtype "$dtypes" --shapes "$shapes" \
    --paths vk-coopmat2-dense,vk-coopmat2-2:4 $flush --progress none --json "$OUT/$name.json"
}
bench bf16-alone bf16 benchmarks/shapes-skinny.csv
bench fp16-alone fp16 benchmarks/shapes-skinny.csv
bench fp16-reversed fp16 "$reversed"
bench bf16-then-fp16 bf16,fp16 benchmarks/shapes-skinny.csv
bench bf16-no-flush bf16 benchmarks/shapes-skinny.csv ""
python3 - "$OUT" > "$OUT/table.txt" <<'PY'
import json, pathlib, sys
out = pathlib.Path(sys.argv[1])
for run in ("bf16-alone", "fp16-alone", "fp16-reversed", "bf16-then-fp16", "bf16-no-flush"):
    path = out / f"{run}.json"
    if not path.exists():
        print(f"{run}: no JSON")
        continue
    for r in json.loads(path.read_text())["results"]:
        us = f"{r['median_ms'] * 1e3:8.1f}" if r["status"] == "ok" else f"{r['status']:>8}"
        print(f"{run:15} {r['case']:32} {r['path']:18} {us} µs")
PY
cat "$OUT/table.txt"
