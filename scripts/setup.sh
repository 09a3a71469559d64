#!/usr/bin/env bash
# Sets up vkcoop on a fresh Debian 12 machine (or anything with apt, python3 >= 3.10 and dpkg):
#   1. system packages: the Vulkan loader, lavapipe (Mesa's CPU Vulkan) and the validation layers, for the
#      portable port and the runtime tests;
#   2. a virtual environment in .venv with vkcoop installed (editable) with its dev and plot extras;
#   3. the shader toolchain: a VULKAN_SDK or capable tools on PATH are used as they are; otherwise a private
#      prefix of newer Debian packages is unpacked into .toolchain/ (nothing system-wide; the system libc is untouched).
# Idempotent: running it again only checks.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
dpkg -s libvulkan1 >/dev/null 2>&1 || need_apt+=(libvulkan1)
dpkg -s mesa-vulkan-drivers >/dev/null 2>&1 || need_apt+=(mesa-vulkan-drivers)
dpkg -s vulkan-validationlayers >/dev/null 2>&1 || need_apt+=(vulkan-validationlayers)
python3 -c 'import ensurepip, venv' 2>/dev/null || need_apt+=(python3-venv)
if [ ${#need_apt[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "setup: installing ${need_apt[*]} (apt)"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

python3 - <<'PY'
import sys
if sys.version_info < (3, 10):
    sys.exit(f"setup: vkcoop needs Python >= 3.10, found {sys.version.split()[0]}")
PY
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip 2>&1 | grep -v '^WARNING: Location' || true
.venv/bin/python -m pip install -q -e '.[dev,plot]' 2>&1 | grep -v '^WARNING: Location' || true
.venv/bin/python -c 'import vkcoop, spirv_tools, vulkan' 

# A capable VULKAN_SDK or PATH toolchain wins; only otherwise is the private prefix installed.
if ! .venv/bin/vkcoop toolchain >/dev/null 2>&1; then
  .venv/bin/vkcoop toolchain install
fi
.venv/bin/vkcoop toolchain | tail -n 3
