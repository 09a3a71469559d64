#!/usr/bin/env bash
# The types beyond fp16 and bf16 on the GPU host: the GPU tests of the library baselines in tf32, e4m3, e5m2 and
# int8 (tests/test_cuda_typed_libraries.py) and of the Vulkan dense path in int8 (tests/test_bench_types.py), then
# one `vkcoop bench sparse --dtype e4m3,int8,tf32` at 8192^3 of the libraries and the Vulkan dense path. From the
# repository root, after `source scripts/gpu_env.sh` (sourced here when it was not), under 5 minutes:
#
#   OUT=/some/folder bash lab/gpu/typelibs_check.sh
#
# Writes $OUT/typelibs-pytest.log, $OUT/typelibs-bench.json and .log, and $OUT/typelibs-summary.txt (also printed):
# the pytest summary line and one line per result (type, path, status, TFLOP/s, x cuBLAS, x cuSPARSELt, then the
# configuration or the reason). Exit status: pytest's, else the bench's.
set -uo pipefail
cd "$(dirname "$0")/../.."
# shellcheck disable=SC1091
[ -n "${VK_ADD_LAYER_PATH:-}" ] || source scripts/gpu_env.sh
py=${PYTHON:-python3}
out=${OUT:-/tmp/typelibs-check}
mkdir -p "$out"

timeout 130 "$py" -m pytest -p no:cacheprovider -p no:benchmark -q -rfEs -n 4 --dist load -m "gpu or cuda" \
  tests/test_cuda_typed_libraries.py tests/test_bench_types.py >"$out/typelibs-pytest.log" 2>&1
tests=$?

timeout 160 "$py" -m vkcoop bench sparse --dtype e4m3,int8,tf32 --sizes 8192 --shapes square \
  --paths vk-coopmat2-dense,cuSPARSELt,cuSPARSELt-nvmath,torch-semi-structured,cuBLAS --search quick --progress none \
  --json "$out/typelibs-bench.json" >"$out/typelibs-bench.log" 2>&1
bench=$?

"$py" - "$out" "$tests" "$bench" <<'PY' | tee "$out/typelibs-summary.txt"
import json, re, sys
from pathlib import Path
out, tests, bench = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
log = (out / "typelibs-pytest.log").read_text().splitlines()
print(f"pytest (exit {tests}): " + next((l.strip("= ") for l in reversed(log)
                                          if re.search(r"\d+ (passed|failed|skipped|errors?)\b", l)),
                                         "no summary line; see typelibs-pytest.log"))
for line in log:
    if line.startswith(("FAILED", "ERROR")):
        print("  " + line[:300])
print(f"bench sparse (exit {bench}):")
try:
    run = json.loads((out / "typelibs-bench.json").read_text())
except (OSError, ValueError) as error:
    print(f"  no JSON ({error}); see typelibs-bench.log")
    sys.exit(0)
fmt = lambda v, spec: "-" if v is None else format(v, spec)
for r in run["results"]:
    note = (r.get("config") if r["status"] == "ok" else r.get("reason")) or ""
    print(f"  {r['dtype']:5} {r['path']:22} {r['status']:7} {fmt(r.get('tflops'), '.1f'):>8} "
          f"x{fmt(r.get('ratio_cublas'), '.2f'):<5} x{fmt(r.get('ratio_cusparselt'), '.2f'):<5} {note[:150]}")
PY
[ "$tests" -ne 0 ] && exit "$tests"
exit "$bench"
