#!/usr/bin/env bash
# The GPU minutes of issue 13's instruments, on the GPU host, from the repository root:
#
#   source scripts/gpu_env.sh          # loader, toolchain, wheels (zstandard among them: see below)
#   bash benchmarks/gpu-next-session-instruments.sh [STEP ...]     # default: every step, in this order
#
# Steps: facts peak inspect-dense inspect-dense-llm inspect-2to4 inspect-2to4-llm inspect-peak tests.
# Logs, JSON, SASS listings and the driver's raw cache files go to $OUT (default out/gpu-next-session); each
# step's command, exit status and duration go to $OUT/steps.log. A failing step does not stop the others.
# `vkcoop inspect` needs the zstandard package (a cp312 wheel in .bundle/wheels) and nvdisasm (CUDA toolkit);
# without them it says which in one line and exits 3, and the step log shows that line.
set -u
out=${OUT:-out/gpu-next-session}
mkdir -p "$out"
py=${PYTHON:-python3}
step_timeout=${STEP_TIMEOUT:-540}

run_step() {  # name, command...
  local name=$1
  shift
  echo "== $name: $*" | tee -a "$out/steps.log"
  local started=$SECONDS
  timeout "$step_timeout" "$@" >"$out/$name.log" 2>&1
  local rc=$?
  echo "   $name: exit $rc after $((SECONDS - started)) s" | tee -a "$out/steps.log"
  tail -n 3 "$out/$name.log" | sed 's/^/   | /' | tee -a "$out/steps.log"
}

inspect_gemm() {  # name, path, shape
  rm -rf "${out:?}/$1-cache"
  run_step "$1" "$py" -m vkcoop.inspect --gemm "$2" --dtype fp16 --shape "$3" --json "$out/$1.json" \
    --sass "$out/$1.sass" --cache-dir "$out/$1-cache"
}

step() {
  case "$1" in
    facts)
      run_step facts sh -c "nvidia-smi; command -v nvdisasm && nvdisasm --version; \
        ls /usr/local/cuda/bin/nvdisasm; $py -c 'import zstandard; print(\"zstandard\", zstandard.__version__)'; \
        $py -m vkcoop.cli info" ;;
    peak)
      run_step peak "$py" -m vkcoop.bench.peak_command --json "$out/peak.json" ;;
    inspect-dense) inspect_gemm inspect-dense dense square ;;
    inspect-dense-llm) inspect_gemm inspect-dense-llm dense llm ;;
    inspect-2to4) inspect_gemm inspect-2to4 2:4 square ;;
    inspect-2to4-llm) inspect_gemm inspect-2to4-llm 2:4 llm ;;
    inspect-peak)
      # The ceiling's own code: is the loop all HMMA, and how many per iteration?
      run_step inspect-peak "$py" -m vkcoop.inspect --shader peak/coopmat_peak.comp -D PEAK_TYPES=F16_F32 \
        -D SCOPE=WORKGROUP --spec 0=256 --spec 1=128 --spec 2=256 --spec 3=32 --spec 4=1 \
        --json "$out/inspect-peak.json" --sass "$out/inspect-peak.sass" ;;
    tests)
      run_step tests "$py" -m pytest -q -p no:cacheprovider tests/test_peak.py tests/test_peak_cuda.py \
        tests/test_inspect_cli.py tests/test_inspect_sass.py tests/test_inspect_cache.py ;;
    *)
      echo "unknown step $1" | tee -a "$out/steps.log" ;;
  esac
}

if [ $# -eq 0 ]; then
  set -- facts peak inspect-dense inspect-dense-llm inspect-2to4 inspect-2to4-llm inspect-peak tests
fi
for name in "$@"; do
  step "$name"
done
echo "logs in $out"
