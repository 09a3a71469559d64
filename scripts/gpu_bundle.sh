#!/usr/bin/env bash
# Gathers into .bundle/ (git-ignored) everything the offline GPU host needs to run vkcoop:
#   .bundle/host-debs/       the amd64 Vulkan loader and glvnd libraries (Debian 12), unpacked into / there
#   .bundle/toolchain-debs/  the shader toolchain and validation layers (spirv_tools.toolchain's package list),
#                            unpacked into a private prefix there
#   .bundle/wheels/          cp312 manylinux wheels of the pure-Python deps the host lacks
# Carry `.bundle` with every device run and start the command with `source scripts/gpu_env.sh`.
set -euo pipefail
cd "$(dirname "$0")/.."
bundle=.bundle
mkdir -p "$bundle/host-debs" "$bundle/toolchain-debs" "$bundle/wheels"

apt_state=$(mktemp -d)
trap 'rm -rf "$apt_state"' EXIT
mkdir -p "$apt_state/lists/partial" "$apt_state/cache/archives/partial"
py=${PYTHON:-python3}
# Private apt configurations: nothing here touches the system's sources or package state.
apt_with_suite() {  # $1 = suite, rest = apt-get args
  local suite=$1; shift
  local dir="$apt_state/$suite"
  mkdir -p "$dir/lists/partial" "$dir/cache/archives/partial"
  # The system's own Debian mirror, signed by the archive keyring (spirv_tools.debian refuses otherwise).
  PYTHONPATH=$PWD "$py" -c 'import sys; from spirv_tools.debian import sources_line; print(sources_line(sys.argv[1]), end="")' \
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
PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} "$py" -c '
import sys
from pathlib import Path
from spirv_tools.debian import download_packages
from spirv_tools.lock import read_lock
from spirv_tools.toolchain import PRIVATE_PACKAGES
download_packages(Path(sys.argv[1]), Path(sys.argv[2]), suite=read_lock()["suite"], packages=PRIVATE_PACKAGES,
                  log=lambda m: None)' "$bundle/toolchain-debs" "$apt_state/toolchain"

"$py" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  -d "$bundle/wheels" vulkan==1.3.275.1 cffi pycparser zstandard 2>&1 | grep -v '^WARNING: Location' || true
ls "$bundle"/wheels/vulkan-* "$bundle"/wheels/cffi-* "$bundle"/wheels/pycparser-* "$bundle"/wheels/zstandard-* >/dev/null
du -sh "$bundle"
