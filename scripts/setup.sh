#!/usr/bin/env bash
# Sets up vkcoop on a fresh Debian 12 machine (or anything with apt, python3 >= 3.10 and dpkg):
#   1. system packages: the Vulkan loader, lavapipe (Mesa's CPU Vulkan) and the validation layers, for the
#      portable port and the runtime tests (as root, or through sudo when it exists);
#   2. a virtual environment in .venv with vkcoop installed (editable) with its dev and plot extras;
#   3. the shader toolchain: a VULKAN_SDK or capable tools on PATH are used as they are; otherwise a private
#      prefix of newer Debian packages is unpacked into .toolchain/ (nothing system-wide; the system libc is untouched).
# Idempotent and quiet: a second run does no work unless pyproject.toml or setup.py changed (a stamp in .venv
# records their hash) or the toolchain is gone, and then prints one line.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
for pkg in libvulkan1 mesa-vulkan-drivers vulkan-validationlayers debian-archive-keyring; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need_apt+=("$pkg")
done
python3 -c 'import ensurepip, venv' 2>/dev/null || need_apt+=(python3-venv)
if [ ${#need_apt[@]} -gt 0 ]; then
  if [ "$(id -u)" -eq 0 ]; then
    as_root=()
  elif command -v sudo >/dev/null 2>&1; then
    as_root=(sudo)
  else
    echo "setup: needs the system packages ${need_apt[*]}, and installing them needs root;" \
         "run as root: apt-get install ${need_apt[*]}" >&2
    exit 1
  fi
  echo "setup: installing ${need_apt[*]} (apt)"
  "${as_root[@]}" apt-get update -qq
  "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

python3 - <<'PY'
import sys
if sys.version_info < (3, 10):
    sys.exit(f"setup: vkcoop needs Python >= 3.10, found {sys.version.split()[0]}")
PY
[ -x .venv/bin/python ] || python3 -m venv .venv

# The editable install only changes with the project metadata (and the interpreter).
stamp=.venv/.vkcoop-setup-stamp
want=$( (cat pyproject.toml setup.py; .venv/bin/python -VV) | sha256sum | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ] || ! .venv/bin/python -c 'import vkcoop, spirv_tools, vulkan' 2>/dev/null; then
  echo "setup: installing vkcoop into .venv (editable, with the dev and plot extras)"
  .venv/bin/python -m pip install -qq --upgrade pip
  .venv/bin/python -m pip install -qq -e '.[dev,plot]'  # -qq: errors only, not setuptools' editable-mode notes
  .venv/bin/python -c 'import vkcoop, spirv_tools, vulkan'
  echo "$want" >"$stamp"
fi

# A capable VULKAN_SDK or PATH toolchain wins; only otherwise is the private prefix installed.
if ! .venv/bin/python -c 'import spirv_tools; spirv_tools.find_toolchain()' >/dev/null 2>&1; then
  .venv/bin/vkcoop toolchain install
fi
echo "setup: ready ($(.venv/bin/python -c 'import spirv_tools; print(spirv_tools.find_toolchain().describe())'))"
