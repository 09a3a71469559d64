#!/usr/bin/env bash
# Everything the open issues still need from a GPU host, one step per device command (each under the 10-minute
# limit), from the repository root with .bundle carried (scripts/gpu_bundle.sh builds it here first):
#
#   bash benchmarks/gpu-session.sh STEP [ARG]
#
#   verify            issue 10: the gpu/cuda/vulkan tests, `vkcoop run --all --validate`, and a bench sparse run
#                     at 8192 (square, llm with N=32) to hold against docs/results/h200
#   explain           issue 15: `vkcoop explain --check` on a MirrorRepeat layout with a unit dimension (F2)
#   staged            issue 13: the staged dense and 2:4 GEMMs' bit-exact tests, then each against the direct
#                     kernels on 8192^3 and 8192x32x8192
#   instruments [S]   issue 13: bench peak and inspect (benchmarks/gpu-next-session-instruments.sh, steps S)
#   bench S           issue 14: benchmarks/gpu-next-session-bench.sh S (check, facts, tune, run, mlp, compare)
#   attention S [T]   issue 16: benchmarks/gpu-next-session-attention.sh S [T] (run, tests, targets, bench)
#
# Each step works in out/session/STEP and packs it into $OUT/STEP.tgz: one file comes back whatever the step
# writes (the device tool returns at most 8 files, two folders deep).
set -uo pipefail
cd "$(dirname "$0")/.."
step=${1:-}
shift || true
final=${OUT:-$PWD/out}
work=$PWD/out/session/${step:-none}
rm -rf "$work"
mkdir -p "$work" "$final"
# shellcheck disable=SC1091
source scripts/gpu_env.sh
export OUT=$work PYTHONUNBUFFERED=1
py=${PYTHON:-python3}

run() {  # name, command...: log to $work/name.log, record the exit status, never stop the step
  local name=$1
  shift
  echo "== $name: $*" | tee -a "$work/steps.log"
  local started=$SECONDS
  timeout "${STEP_TIMEOUT:-540}" "$@" >"$work/$name.log" 2>&1
  echo "   exit $? after $((SECONDS - started)) s" | tee -a "$work/steps.log"
  tail -n 4 "$work/$name.log" | sed 's/^/   | /' | tee -a "$work/steps.log"
}

case "$step" in
  verify)
    run tests "$py" -m pytest -q -p no:cacheprovider -m "gpu or cuda or vulkan" tests
    run samples "$py" -m vkcoop run --all --validate --json "$work/run.json"
    run bench "$py" -m vkcoop bench sparse --dtype fp16 --sizes 8192 --shapes square,llm --llm-tokens 32 \
      --ceilings --json "$work/bench.json" ;;
  explain)
    run explain "$py" -m vkcoop explain --dims 1,16 --clamp MirrorRepeat --slice -3,8,0,16 --matrix 8x16 --check \
      --json "$work/explain.json" ;;
  staged)
    run test "$py" -m pytest -q -p no:cacheprovider -m gpu -k staged tests/test_samples_gemm.py
    run explore "$py" -m vkcoop.bench.explore --json "$work/staged.json" \
      --job staged/fp16/8192,8192,8192/256:128x128x32u2g8,128:128x128x32u2g8,128:64x64x32u2g8 \
      --job dense/fp16/8192,8192,8192/256:128x256x32u8g8,256:128x128x32u2g8 \
      --job staged24/fp16/8192,8192,8192/256:128x128x32u2g8,128:64x64x64u2g8 \
      --job sparse/fp16/8192,8192,8192/256:128x256x32u8g8i1 \
      --job staged24/fp16/8192,32,8192/128:64x32x64u2g1,64:32x32x64u2g1 \
      --job sparse/fp16/8192,32,8192/64:32x32x128u2g1s2i4c \
      --job dense/fp16/8192,32,8192/64:32x32x128u2g1s2c ;;
  instruments)
    run instruments bash benchmarks/gpu-next-session-instruments.sh "$@" ;;
  bench)
    run "bench-${1:-run}" bash benchmarks/gpu-next-session-bench.sh "$@" ;;
  attention)
    run "attention-${1:-run}" bash benchmarks/gpu-next-session-attention.sh "$@" ;;
  *)
    echo "usage: $0 verify|explain|staged|instruments [STEPS]|bench STEP|attention STEP [TYPE]" >&2
    exit 2 ;;
esac
tar -czf "$final/$step.tgz" -C "$work/.." "$(basename "$work")"
echo "packed $final/$step.tgz"
