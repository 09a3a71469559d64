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


def test_wheel_contains_every_shader_and_both_packages(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    shipped = {n.removeprefix("vkcoop/_shaders/") for n in names if n.startswith("vkcoop/_shaders/")}
    assert _repo_shader_files() <= shipped
    assert "spirv_tools/__init__.py" in names and "vkcoop/cli/__init__.py" in names
    assert any(n.endswith("entry_points.txt") for n in names)


def test_installed_package_finds_and_compiles_its_shaders_outside_the_repo(wheel, tmp_path):
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    py = env_dir / "bin" / "python"
    install = subprocess.run([str(py), "-m", "pip", "install", "-q", str(wheel)], capture_output=True, text=True)
    assert install.returncode == 0, install.stderr[-3000:]
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    probe = ("import vkcoop.paths as p, vkcoop.shaders as s, json; "
             "print(json.dumps([str(p.shader_root()), s.shader_files()]))")
    proc = subprocess.run([str(py), "-c", probe], capture_output=True, text=True, cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr
    root, files = json.loads(proc.stdout)
    assert root.startswith(str(env_dir)) and root.endswith("vkcoop/_shaders")
    expected = sorted(str(p.relative_to(REPO / "shaders")) for p in (REPO / "shaders").rglob("*.comp"))
    assert files == expected

    # Compile and validate the installed shaders (with their includes) through the installed console script.
    try:
        tc = spirv_tools.find_toolchain()
    except spirv_tools.ToolchainError as exc:
        pytest.skip(f"no coopmat2 toolchain to compile with: {exc}")
    if tc.name == "private":
        env["VKCOOP_TOOLCHAIN_DIR"] = str(tc.bin_dir.parent.parent)
    elif tc.bin_dir is not None:
        env["PATH"] = f"{tc.bin_dir}:{env['PATH']}"
    check = subprocess.run([str(env_dir / "bin" / "vkcoop"), "shaders", "check", "--json"], capture_output=True,
                           text=True, cwd=tmp_path, env=env)
    assert check.returncode == 0, check.stdout[-2000:] + check.stderr[-2000:]
    results = json.loads(check.stdout)
    assert len(results) >= len(expected) and all(r["ok"] for r in results)
