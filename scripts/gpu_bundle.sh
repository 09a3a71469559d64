#!/usr/bin/env bash
# Gathers into .bundle/ (git-ignored) everything the offline GPU host needs to run vkcoop:
#   .bundle/host-debs/       the amd64 Vulkan loader and glvnd libraries (Debian 12), unpacked into / there
#   .bundle/toolchain-debs/  the shader toolchain and validation layers at the versions of
#                            spirv_tools/toolchain.lock.json, unpacked into a private prefix there
#   .bundle/wheels/          cp312 manylinux wheels of what the host's Python lacks: vulkan, cffi, pycparser and
#                            zstandard, and the optional extras nvmath-python (cuSPARSELt / cuBLASLt through
#                            NVIDIA's bindings) and nvidia-cuda-nvdisasm (vkcoop inspect)
# Run it after scripts/setup.sh (it uses .venv's interpreter; PYTHON=... picks another one that has vkcoop's
# dependencies). Carry `.bundle` with every device run and start the command with `source scripts/gpu_env.sh`.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
bundle=$root/.bundle
if [ -n "${PYTHON:-}" ]; then
  py=$PYTHON
elif [ -x "$root/.venv/bin/python" ]; then
  py=$root/.venv/bin/python
else
  py=python3
fi
# What this script runs: spirv_tools's Debian and lock readers, and pip for the wheels.
if ! PYTHONPATH=$root "$py" -c 'import spirv_tools.debian, spirv_tools.lock, spirv_tools.toolchain, pip' 2>/dev/null; then
  echo "gpu_bundle: $py cannot import spirv_tools and pip (the bundle needs vkcoop's environment);" \
       "run scripts/setup.sh first, or set PYTHON to an interpreter that has them" >&2
  exit 1
fi
mkdir -p "$bundle/host-debs" "$bundle/toolchain-debs" "$bundle/wheels"

apt_state=$(mktemp -d)
trap 'rm -rf "$apt_state"' EXIT
# Private apt configurations: nothing here touches the system's sources or package state.
apt_with_suite() {  # $1 = suite, rest = apt-get args
  local suite=$1; shift
  local dir="$apt_state/$suite"
  mkdir -p "$dir/lists/partial" "$dir/cache/archives/partial"
  # The system's own Debian mirror, signed by the archive keyring (spirv_tools.debian refuses otherwise).
  PYTHONPATH=$root "$py" -c 'import sys; from spirv_tools.debian import sources_line; print(sources_line(sys.argv[1]), end="")' \
    "$suite" >"$dir/sources.list" || return 1
  apt-get -q -o Dir::Etc::SourceList="$dir/sources.list" -o Dir::Etc::SourceParts=/dev/null \
    -o Dir::State::Lists="$dir/lists" -o Dir::Cache="$dir/cache" -o Debug::NoLocking=1 \
    -o APT::Architecture=amd64 -o APT::Architectures=amd64 -o APT::Sandbox::User=root "$@"
}
if ! apt_with_suite bookworm update >/dev/null; then
  echo "gpu_bundle: cannot reach Debian's package registry; the bundle needs it once" >&2
  exit 1
fi
(cd "$bundle/host-debs" && apt_with_suite bookworm download libvulkan1 libglvnd0 libegl1 libgl1 libglx0 libopengl0 libgles2 >/dev/null)
PYTHONPATH=$root "$py" -c '
import sys
from pathlib import Path
from spirv_tools.debian import download_packages
from spirv_tools.lock import pins, read_lock
from spirv_tools.toolchain import PRIVATE_PACKAGES
lock = read_lock()
download_packages(Path(sys.argv[1]), Path(sys.argv[2]), suite=lock["suite"], packages=PRIVATE_PACKAGES,
                  pins=pins(lock), log=lambda m: None)' "$bundle/toolchain-debs" "$apt_state/toolchain"

rm -f "$bundle"/wheels/*.whl
"$py" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  -d "$bundle/wheels" vulkan==1.3.275.1 cffi pycparser zstandard nvmath-python==1.0.0 nvidia-cuda-nvdisasm \
  2>&1 | grep -v '^WARNING: Location' || true
for wheel in vulkan cffi pycparser zstandard nvmath_python nvidia_cuda_nvdisasm; do
  ls "$bundle"/wheels/"$wheel"-*.whl >/dev/null
done
du -sh "$bundle"
