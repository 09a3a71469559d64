"""A non-editable install carries every shader and include, and finds them from outside the repository."""
from __future__ import annotations

import subprocess
import sys
import venv
import zipfile
import json
from pathlib import Path

import pytest

import spirv_tools

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(REPO)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.fail(f"pip wheel failed:\n{proc.stderr[-3000:]}")
    (built,) = out.glob("vkcoop-*.whl")
    return built


def _repo_shader_files() -> set[str]:
    root = REPO / "shaders"
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and p.suffix != ".spv"}


def test_wheel_contains_every_shader_and_both_packages_and_not_the_lab(wheel):
    archive = zipfile.ZipFile(wheel)
    names = set(archive.namelist())
    shipped = {n.removeprefix("vkcoop/_shaders/") for n in names if n.startswith("vkcoop/_shaders/")}
    assert _repo_shader_files() <= shipped
    changed = [name for name in _repo_shader_files()
               if archive.read(f"vkcoop/_shaders/{name}") != (REPO / "shaders" / name).read_bytes()]
    assert changed == []
    assert "spirv_tools/__init__.py" in names and "vkcoop/cli/__init__.py" in names
    # the library searches' shipped winners, byte for byte as in the checkout
    shipped = REPO / "vkcoop" / "bench" / "library_seeds.json"
    assert zipfile.ZipFile(wheel).read("vkcoop/bench/library_seeds.json") == shipped.read_bytes()
    assert any(n.endswith("entry_points.txt") for n in names)
    # the lab's tools and tests, and the suite's, stay in the repository
    tops = {n.split("/")[0] for n in names}
    assert (REPO / "lab" / "explore.py").is_file() and not tops & {"lab", "tests", "benchmarks"}, sorted(tops)


def _venv_with_the_wheel(wheel: Path, env_dir: Path) -> tuple[Path, Path]:
    """(python, site-packages) of a new venv outside the repository holding the wheel alone, without pip and without
    its dependencies (nothing is fetched)."""
    venv.EnvBuilder(with_pip=False).create(env_dir)
    py = env_dir / "bin" / "python"
    install = subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "install", "-q", "--no-deps",
                              str(wheel)], capture_output=True, text=True)
    assert install.returncode == 0, install.stderr[-3000:]
    site = Path(subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    return py, site


def _venv_with_this_environments_dependencies(wheel: Path, env_dir: Path) -> Path:
    """A venv outside the repository holding the wheel alone, whose dependencies (numpy, vulkan, cffi, ...) come
    from this test's environment through a path file, so nothing is fetched. A path file adds the folder only:
    the editable install's own path file there is not run, so ``vkcoop`` is the wheel's."""
    py, site = _venv_with_the_wheel(wheel, env_dir)
    import numpy
    (site / "dependencies.pth").write_text(str(Path(numpy.__file__).parents[1]) + "\n")
    return py


def test_installed_package_finds_and_compiles_its_shaders_outside_the_repo(wheel, tmp_path):
    env_dir = tmp_path / "venv"
    py = _venv_with_this_environments_dependencies(wheel, env_dir)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    probe = ("import vkcoop.paths as p, vkcoop.shaders as s, json; "
             "print(json.dumps([str(p.shader_root()), s.shader_files()]))")
    proc = subprocess.run([str(py), "-c", probe], capture_output=True, text=True, cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr
    root, files = json.loads(proc.stdout)
    assert root.startswith(str(env_dir)) and root.endswith("vkcoop/_shaders")
    expected = sorted(str(p.relative_to(REPO / "shaders")) for p in (REPO / "shaders").rglob("*.comp"))
    assert files == expected
    # a bare machine starts from the shipped library winners: the installed copy reads them
    probe = ("import vkcoop.bench.library_seeds as s, json; "
             "print(json.dumps([str(s.SHIPPED_FILE), sorted(s.load())]))")
    proc = subprocess.run([str(py), "-c", probe], capture_output=True, text=True, cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr
    shipped_file, devices = json.loads(proc.stdout)
    assert shipped_file.startswith(str(env_dir)) and {"NVIDIA H100 80GB HBM3", "NVIDIA H200"} <= set(devices)

    # First use with no toolchain, through the installed console script: the demo says so in one line and exits 3
    # (test_cli_errors has every command that compiles say so).
    empty = tmp_path / "no-toolchain"
    empty.mkdir()
    bare = {**env, "VKCOOP_TOOLCHAIN_DIR": str(empty)}
    first = subprocess.run([str(env_dir / "bin" / "vkcoop"), "demo"], capture_output=True, text=True, cwd=tmp_path,
                           env=bare)
    assert first.returncode == 3, first.stderr[-2000:]
    assert "Traceback" not in first.stderr and first.stderr.count("\n") == 1, first.stderr
    assert first.stderr.startswith("vkcoop: error: no coopmat2-capable shader toolchain")
    assert "vkcoop toolchain install" in first.stderr and "--yes" in first.stderr
    assert list(empty.iterdir()) == []   # nothing installed without being asked

    # Compile and validate the installed shaders (with their includes) through the installed console script.
    try:
        tc = spirv_tools.find_toolchain()
    except spirv_tools.ToolchainError as exc:
        pytest.skip(f"no coopmat2 toolchain to compile with: {exc}")
    if tc.name == "private":
        env["VKCOOP_TOOLCHAIN_DIR"] = str(tc.bin_dir.parent.parent)
    elif tc.bin_dir is not None:
        env["PATH"] = f"{tc.bin_dir}:{env['PATH']}"
    # The first variant of each file that includes another: every include a file names is found in the wheel.
    # The wheel's files are the repository's, byte for byte (the wheel test), and the repository's tests compile
    # and validate every variant of every file.
    including = [name for name in expected if "#include" in (REPO / "shaders" / name).read_text()]
    assert including
    probe = ("import json, sys, vkcoop.shaders as s; print(json.dumps([[r.variant.label, r.ok, r.error] for r in "
             "(s.check_variant(s.declared_variants(f)[0]) for f in sys.argv[1:])]))")
    check = subprocess.run([str(py), "-c", probe, *including], capture_output=True, text=True, cwd=tmp_path, env=env)
    assert check.returncode == 0, check.stderr[-2000:]
    results = json.loads(check.stdout)
    assert len(results) == len(including) and all(ok for _, ok, _ in results), [r for r in results if not r[1]]


# --- first use of an installed wheel with no toolchain (the toolchain part) ------------------------------

FIRST_USE = """
import json, spirv_tools
out = {"file": spirv_tools.__file__, "locked": sorted(spirv_tools.read_lock()["packages"])}
try:
    spirv_tools.require_toolchain(auto_install=False)
except spirv_tools.ToolchainMissingError as exc:
    out["error"], out["message"] = type(exc).__name__, str(exc)
print(json.dumps(out))
"""


def _bare_venv_with(wheel: Path, where: Path) -> Path:
    """A venv outside the repository holding the wheel, plus the test's own cffi and pycparser (the only
    third-party modules spirv_tools imports), linked in so that nothing is fetched."""
    py, site = _venv_with_the_wheel(wheel, where)
    import _cffi_backend
    import cffi
    import pycparser
    for module in (cffi, pycparser):
        (site / Path(module.__file__).parent.name).symlink_to(Path(module.__file__).parent)
    (site / Path(_cffi_backend.__file__).name).symlink_to(_cffi_backend.__file__)
    return py


@pytest.mark.slow
def test_installed_wheel_without_a_toolchain_says_so_in_one_line(wheel, tmp_path):
    py = _bare_venv_with(wheel, tmp_path / "venv")
    empty, bare_bin = tmp_path / "no-toolchain", tmp_path / "bin"
    empty.mkdir()
    bare_bin.mkdir()
    env = {"PATH": str(bare_bin), "HOME": str(tmp_path), "VKCOOP_TOOLCHAIN_DIR": str(empty)}
    proc = subprocess.run([str(py), "-c", FIRST_USE], capture_output=True, text=True, cwd=tmp_path, env=env)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    out = json.loads(proc.stdout)
    assert out["file"].startswith(str(tmp_path / "venv"))  # the wheel's copy, not the checkout's
    assert "glslc" in out["locked"]  # the lock file ships in the wheel
    assert out["error"] == "ToolchainMissingError"
    message = out["message"]
    assert "\n" not in message and message.startswith("no shader toolchain that can compile")
    assert "`vkcoop toolchain install`" in message and str(empty) in message
    assert list(empty.iterdir()) == []  # nothing installed without being asked
