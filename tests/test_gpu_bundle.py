"""scripts/gpu_bundle.sh in a fresh copy of the checkout, run as a new user runs it: apt-get and pip are stubbed
(no network, no downloads), the interpreter sees cffi but not an installed vkcoop, so spirv_tools is importable
only from the checkout the script names. It once failed there: its apt helper ran ``PYTHONPATH=$PWD`` inside
``.bundle/host-debs``."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import cffi
import pytest

REPO = Path(__file__).resolve().parents[1]
KEYRING = Path("/usr/share/keyrings/debian-archive-keyring.gpg")

FAKE_APT = """#!/bin/sh
echo "$*" >>"$APT_LOG"
for arg in "$@"; do
  case "$arg" in -*) ;; update) exit 0 ;; download) downloading=1 ;; *) [ -n "$downloading" ] && \
    : >"$(printf %s "$arg" | cut -d= -f1)_1_amd64.deb" ;; esac
done
exit 0
"""

# pip download: make an empty wheel per requirement; anything else: the real interpreter without site-packages
# (so no installed vkcoop), cffi's folder appended to PYTHONPATH.
FAKE_PYTHON = """#!/bin/sh
if [ "$1 $2 $3" = "-m pip download" ]; then
  shift 3
  while [ $# -gt 0 ]; do
    case "$1" in
      -d) dir=$2; shift ;;
      --python-version|--implementation|--platform) shift ;;
      -*) ;;
      *) name=$(printf %s "$1" | sed 's/[=<>].*//; s/-/_/g'); : >"$dir/$name-1.0-py3-none-any.whl" ;;
    esac
    shift
  done
  exit 0
fi
PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}$CFFI_SITE" exec "$REAL_PYTHON" -S "$@"
"""


def _fresh_checkout(tmp_path: Path) -> Path:
    """The checkout's tracked files (as they are in the working tree) in a new folder: no .venv, no .bundle."""
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout
    copy = tmp_path / "vkcoop"
    for name in filter(None, listed.decode().split("\0")):
        source = REPO / name
        if source.is_file():
            (copy / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, copy / name)
    return copy


def _stubs(tmp_path: Path) -> Path:
    stubs = tmp_path / "stubs"
    stubs.mkdir()
    for name, text in (("apt-get", FAKE_APT), ("python-for-bundle", FAKE_PYTHON)):
        (stubs / name).write_text(text)
        (stubs / name).chmod(0o755)
    return stubs


def _run(checkout: Path, stubs: Path, tmp_path: Path, python: Path):
    import os
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    env.update(PATH=f"{stubs}{os.pathsep}{env.get('PATH', '')}", PYTHON=str(python), APT_LOG=str(tmp_path / "apt.log"),
               REAL_PYTHON=sys.executable, CFFI_SITE=str(Path(cffi.__file__).resolve().parents[1]))
    return subprocess.run(["bash", "scripts/gpu_bundle.sh"], cwd=checkout, env=env, capture_output=True, text=True,
                          timeout=300)


@pytest.mark.skipif(not KEYRING.is_file(), reason=f"{KEYRING} is missing (scripts/setup.sh installs it)")
@pytest.mark.skipif(shutil.which("dpkg") is None, reason="not a Debian-family system")
def test_a_fresh_checkout_bundles_without_an_installed_vkcoop(tmp_path):
    from spirv_tools.lock import pins, read_lock

    checkout, stubs = _fresh_checkout(tmp_path), _stubs(tmp_path)
    proc = _run(checkout, stubs, tmp_path, stubs / "python-for-bundle")
    assert proc.returncode == 0, proc.stderr[-2000:]
    bundle = checkout / ".bundle"
    assert {p.name for p in (bundle / "host-debs").glob("*.deb")} >= {"libvulkan1_1_amd64.deb", "libegl1_1_amd64.deb"}
    locked = pins(read_lock())
    assert {p.name.split("_")[0] for p in (bundle / "toolchain-debs").glob("*.deb")} == set(locked)
    log = (tmp_path / "apt.log").read_text()
    assert all(f"{name}={version}" in log for name, version in locked.items())   # the lock's versions, pinned
    wheels = {p.name.split("-")[0] for p in (bundle / "wheels").glob("*.whl")}
    assert wheels == {"vulkan", "cffi", "pycparser", "zstandard", "nvmath_python", "nvidia_cuda_nvdisasm"}


def test_an_interpreter_without_the_dependencies_gets_one_line(tmp_path):
    checkout, stubs = _fresh_checkout(tmp_path), _stubs(tmp_path)
    bare = stubs / "bare-python"
    bare.write_text(f'#!/bin/sh\nexec "{sys.executable}" -S "$@"\n')   # no site-packages: no cffi
    bare.chmod(0o755)
    proc = _run(checkout, stubs, tmp_path, bare)
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines() == [proc.stderr.strip()]
    assert "cannot import spirv_tools" in proc.stderr and "scripts/setup.sh" in proc.stderr
    assert not (tmp_path / "apt.log").exists()   # refused before anything was fetched


def test_the_results_script_refuses_an_unknown_part_before_touching_the_host():
    proc = subprocess.run(["bash", "benchmarks/gpu/results.sh", "core", "everything"], cwd=REPO,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.strip() == ("results.sh: unknown part 'everything' (fresh, grid, peak, sparse-grid, "
                                   "sparse-types, attention, core, waterfall, tests, gpu-av, sanitizer, before-after)")


@pytest.mark.parametrize("before, commit", [("", "bd9d9b0"), ("docs", "bd9d9b0"), (".", "")])
def test_the_before_after_part_needs_an_earlier_tree_and_its_name_before_touching_the_host(tmp_path, before, commit):
    env = {**os.environ, "BEFORE": str(REPO / before) if before else "", "BEFORE_COMMIT": commit}
    proc = subprocess.run(["bash", "benchmarks/gpu/results.sh", "core", "before-after"], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.strip().splitlines() == [proc.stderr.strip()]
    assert proc.stderr.startswith("results.sh: before-after needs BEFORE, a folder holding the earlier commit's tree")
