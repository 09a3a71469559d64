# Sourced by the lab/gpu scripts, from the repository root: checks $OUT, empties $OUT/summary.txt and defines
#   step NAME LOG COMMAND...   run COMMAND (at most $STEP_TIMEOUT seconds, 900 unless set) with its output in
#                              $OUT/LOG, then record its exit status in $OUT/summary.txt
OUT="${OUT:?set OUT to the folder for the results}"
mkdir -p "$OUT"
: > "$OUT/summary.txt"
step() {
  local name=$1 log=$2
  shift 2
  timeout "${STEP_TIMEOUT:-900}" "$@" > "$OUT/$log" 2>&1
  echo "$name: exit $?" | tee -a "$OUT/summary.txt"
}
