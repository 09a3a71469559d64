"""Installing the private toolchain: the fallback order, the lock comparison, the shader check before the prefix
is accepted, and ``dest`` honoured. Offline: the downloads are replaced by small real .debs built here (a
shell-script glslc, spirv-val and loader), unpacked with dpkg and probed for real."""
from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from pathlib import Path
from types import SimpleNamespace

import pytest

import spirv_tools
from spirv_tools import debian, install, lock, toolchain

pytestmark = pytest.mark.skipif(shutil.which("dpkg-deb") is None, reason="needs dpkg-deb (Debian or Ubuntu)")

FAKE_GLSLC = """#!/bin/sh
out=""; src=""
while [ $# -gt 0 ]; do
  case "$1" in
    --version) echo "shaderc @VERSION@"; echo "glslang @VERSION@"; exit 0;;
    -o) out=$2; shift;;
    *.comp) src=$1;;
  esac
  shift
done
if [ @BROKEN@ = 1 ]; then echo "$src:4: error: 'coopmat' : undeclared identifier" >&2; exit 1; fi
if [ @BF16@ = 0 ] && grep -q GL_EXT_bfloat16 "$src"; then
  echo "$src:2: error: '#extension' : extension not supported: GL_EXT_bfloat16" >&2; exit 1
fi
printf 'SPV:%s' "$(dirname "$0")" > "$out"
"""
FAKE_SPIRV_VAL = "#!/bin/sh\nexit 0\n"
FAKE_LOADER = "#!/bin/sh\nshift 2\nexec \"$@\"\n"  # ld-linux --library-path DIR EXE ARGS...


def _deb(out: Path, package: str, version: str, files: dict) -> Path:
    root = out / f"{package}-{version}-root"
    (root / "DEBIAN").mkdir(parents=True)
    (root / "DEBIAN" / "control").write_text(
        f"Package: {package}\nVersion: {version}\nArchitecture: amd64\nMaintainer: vkcoop tests <tests@localhost>\n"
        f"Description: a stand-in for the toolchain tests\n")
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        path.chmod(0o755)
    deb = out / f"{package}_{version}_amd64.deb"
    subprocess.run(["dpkg-deb", "--root-owner-group", "-Zgzip", "--build", str(root), str(deb)], check=True,
                   capture_output=True)
    shutil.rmtree(root)
    return deb


def _build(out: Path, version: str, *, bf16: bool = True, broken: bool = False) -> list[Path]:
    """A two-package toolchain: glslc (with spirv-val) and libc6 (the loader)."""
    out.mkdir(parents=True)
    glslc = FAKE_GLSLC.replace("@VERSION@", version).replace("@BF16@", str(int(bf16)))
    glslc = glslc.replace("@BROKEN@", str(int(broken)))
    return [_deb(out, "glslc", version, {"usr/bin/glslc": glslc, "usr/bin/spirv-val": FAKE_SPIRV_VAL}),
            _deb(out, "libc6", version, {"usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2": FAKE_LOADER})]


@pytest.fixture(scope="module")
def builds(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("debs")
    return {"locked": _build(root / "locked", "1-locked"), "testing": _build(root / "testing", "2-testing"),
            "broken": _build(root / "broken", "2-broken", broken=True),
            "stable": _build(root / "stable", "3-stable", bf16=False),
            "tampered": _build(root / "tampered", "1-locked", bf16=False)}


@pytest.fixture
def env(tmp_path, monkeypatch, builds):
    """A signed-looking apt setup, a lock of the 'locked' build, and a download that serves builds by suite."""
    keyring = tmp_path / "debian-archive-keyring.gpg"
    keyring.write_bytes(b"")
    etc = tmp_path / "etc-apt"
    etc.mkdir()
    (etc / "sources.list").write_text("deb file:/srv/debian-mirror bookworm main\n")
    monkeypatch.setattr(debian, "DEBIAN_KEYRING", keyring)
    monkeypatch.setattr(debian, "APT_ETC", etc)
    monkeypatch.delenv("VKCOOP_TOOLCHAIN_SUITE", raising=False)
    monkeypatch.setenv("SPIRV_TOOLS_CACHE_DIR", str(tmp_path / "spirv-cache"))
    lock_path = tmp_path / "lock.json"
    locked = [debian.package_info(d) for d in builds["locked"]]
    lock_path.write_text(json.dumps(lock.lock_from_packages(locked, "forky", "the test's locked build")))
    served, calls, logs = {}, [], []

    def download(debs_dir, state, *, suite, packages, pins=None, log=print, **kwargs):
        calls.append((suite, bool(pins)))
        what = served[(suite, bool(pins))]
        if isinstance(what, Exception):
            raise what
        Path(debs_dir).mkdir(parents=True)
        for deb in builds[what]:
            shutil.copy(deb, debs_dir)
        return Path(debs_dir)

    monkeypatch.setattr(debian, "download_packages", download)
    yield SimpleNamespace(served=served, calls=calls, logs=logs, lock=lock_path, log=logs.append)
    toolchain.set_private_dir(None)


VARIANTS = [SimpleNamespace(label="plain.comp", defines=(("ELEMENT", "F16"),)),
            SimpleNamespace(label="bf16.comp [ELEMENT=BF16]", defines=(("ELEMENT", "BF16"),))]


def _compile_with_the_selected_toolchain(variant, seen: list):
    """A check that compiles through find_toolchain(), as vkcoop.shaders.check_variant does."""
    tc = spirv_tools.find_toolchain()
    seen.append(tc.bin_dir)
    extension = "#extension GL_EXT_bfloat16 : require\n" if install.needs_bfloat16(variant.defines) else ""
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / variant.label.split()[0]
        src.write_text("#version 450\n" + extension)
        proc = tc.run("glslc", [str(src), "-o", str(src) + ".spv"])
    return SimpleNamespace(ok=proc.returncode == 0, error=proc.stderr.decode())


def _accept(seen: list):
    return lambda tc, feats: install.check_shaders(VARIANTS, lambda v: _compile_with_the_selected_toolchain(v, seen),
                                                   feats)


NOT_FOUND = toolchain.ToolchainError("apt-get download failed: E: Version '1-locked' for 'glslc' was not found")


def test_the_locked_set_comes_first_and_matches_the_lock(env, tmp_path):
    env.served[("forky", True)] = "locked"
    seen = []
    report = install.install_private(tmp_path / "tc", accept=_accept(seen), lock_path=env.lock, log=env.log)
    assert env.calls == [("forky", True)]
    assert report.prefix == (tmp_path / "tc").resolve() and not report.warnings
    assert report.shader_check.passed == ["plain.comp", "bf16.comp [ELEMENT=BF16]"]
    data = report.manifest
    assert data["source"] == "locked" and data["suite"] == "forky" and data["mirror"] == "file:/srv/debian-mirror"
    assert data["lock"] == {"suite": "forky", "matches": True, "differences": []}
    assert {p["package"]: p["version"] for p in data["packages"]} == {"glslc": "1-locked", "libc6": "1-locked"}
    assert data["features"] == {"coopmat2": True, "bfloat16": True} and data["recorded"]
    assert all(str(d).startswith(str(tmp_path / ".tc-staging-")) for d in seen)  # checked before it moved


def test_fallback_goes_locked_then_testing_then_stable_and_skips_bf16_by_name(env, tmp_path):
    env.served.update({("forky", True): NOT_FOUND, ("forky", False): "broken", ("trixie", False): "stable"})
    report = install.install_private(tmp_path / "tc", accept=_accept([]), lock_path=env.lock, log=env.log)
    assert env.calls == [("forky", True), ("forky", False), ("trixie", False)]
    assert report.manifest["source"] == "stable" and report.manifest["features"]["bfloat16"] is False
    check = report.shader_check
    assert check.passed == ["plain.comp"] and check.failed == []
    assert check.skipped == [("bf16.comp [ELEMENT=BF16]", "needs GL_EXT_bfloat16, which this toolchain cannot compile")]
    assert report.manifest["shader_check"]["skipped"][0]["variant"] == "bf16.comp [ELEMENT=BF16]"
    log = "\n".join(env.logs)
    assert "locked toolchain (forky) not accepted: apt-get download failed" in log
    assert "testing toolchain (forky) not accepted: it fails the coopmat2 probe: glslc cannot compile" in log
    assert "skipped bf16.comp [ELEMENT=BF16]: needs GL_EXT_bfloat16" in log
    assert "private toolchain ready" in log and "(stable: trixie)" in log


def test_a_differing_resolution_warns_and_is_still_checked(env, tmp_path):
    env.served.update({("forky", True): NOT_FOUND, ("forky", False): "testing"})
    seen = []
    report = install.install_private(tmp_path / "tc", accept=_accept(seen), lock_path=env.lock, log=env.log)
    expected = "resolved packages differ from the lock file: glslc 2-testing (lock: 1-locked), libc6 2-testing (lock: 1-locked)"
    assert report.warnings == [expected] and f"warning: {expected}" in env.logs
    assert report.manifest["source"] == "testing" and report.manifest["lock"]["matches"] is False
    assert len(seen) == 2 and report.shader_check.ok


def test_testing_without_bf16_is_not_accepted(env, tmp_path):
    env.served.update({("forky", True): NOT_FOUND, ("forky", False): "stable", ("trixie", False): "stable"})
    report = install.install_private(tmp_path / "tc", accept=_accept([]), lock_path=env.lock, log=env.log)
    assert report.manifest["source"] == "stable"
    assert any("testing toolchain (forky) not accepted: it cannot compile GL_EXT_bfloat16" in m for m in env.logs)


def test_a_locked_version_with_another_sha256_is_refused(env, tmp_path):
    env.served.update({("forky", True): "tampered", ("forky", False): "testing"})
    report = install.install_private(tmp_path / "tc", lock_path=env.lock, log=env.log)
    assert report.manifest["source"] == "testing"
    assert any("locked toolchain (forky) not accepted: the fetched packages do not match the lock file: glslc "
               "1-locked has SHA256" in m for m in env.logs)


def test_a_failing_shader_check_keeps_the_working_prefix(env, tmp_path):
    env.served.update({("forky", True): "locked", ("forky", False): "testing", ("trixie", False): "stable"})
    dest = tmp_path / "tc"
    install.install_private(dest, lock_path=env.lock, log=env.log)

    def reject(tc, feats):
        return install.ShaderCheckReport(failed=[("plain.comp", "plain.comp:1: error: nope")])

    with pytest.raises(toolchain.ToolchainError) as exc:
        install.install_private(dest, force=True, accept=reject, lock_path=env.lock, log=env.log)
    message = str(exc.value)
    assert "\n" not in message and message.startswith("no toolchain source passed its checks")
    assert "locked: 1 shader variants fail, first plain.comp: plain.comp:1: error: nope" in message
    assert lock.manifest(dest)["source"] == "locked" and (dest / "usr/bin/glslc").exists()
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".tc")) == []  # no staging left


def test_install_dest_is_reported_and_selected(env, tmp_path, monkeypatch):
    env.served[("forky", True)] = "locked"
    monkeypatch.setenv("VKCOOP_TOOLCHAIN_DIR", str(tmp_path / "elsewhere"))
    monkeypatch.delenv("VULKAN_SDK", raising=False)
    monkeypatch.setattr(toolchain, "_path_toolchain", lambda: None)
    dest = tmp_path / "chosen"
    report = install.install_private(dest, lock_path=env.lock, log=env.log)
    assert report.prefix == dest.resolve() and report.toolchain.bin_dir == dest.resolve() / "usr/bin"
    assert toolchain.default_private_dir() == dest.resolve()
    assert spirv_tools.find_toolchain().bin_dir == dest.resolve() / "usr/bin"
    assert spirv_tools.manifest()["prefix"] == str(dest.resolve())
    again = install.install_private(dest, lock_path=env.lock, log=env.log)
    assert again.already_installed and again.prefix == dest.resolve() and env.calls == [("forky", True)]


def test_a_directory_that_is_not_a_toolchain_is_never_replaced(env, tmp_path):
    dest = tmp_path / "home"
    dest.mkdir()
    (dest / "notes.txt").write_text("mine")
    with pytest.raises(toolchain.ToolchainError, match="is not empty and holds no toolchain"):
        install.install_private(dest, lock_path=env.lock, log=env.log)
    assert env.calls == [] and (dest / "notes.txt").read_text() == "mine"


def test_install_from_the_real_prefix_debs_runs_the_shader_check(tmp_path, monkeypatch):
    """The real packages of the current private prefix (offline), checked with vkcoop's own shader catalog."""
    debs = toolchain.default_private_dir() / "debs"
    if not sorted(debs.glob("*.deb")):
        pytest.skip(f"no private toolchain .debs in {debs}")
    shaders = pytest.importorskip("vkcoop.shaders")
    monkeypatch.setenv("SPIRV_TOOLS_CACHE_DIR", str(tmp_path / "spirv-cache"))
    # One variant of each element type, the clamp modes in turn (six compiles where all thirty took 7 s); every
    # variant of every shader is compiled with this prefix's toolchain by test_shaders and the setup's check.
    every = shaders.all_variants("tensor/load_store")
    variants = [every[i * 5 + i % 5] for i in range(len(every) // 5)]
    for name in ("ELEMENT_TYPE", "CLAMP_MODE"):
        assert {dict(v.defines)[name] for v in variants} == {dict(v.defines)[name] for v in every}, name
    try:
        report = install.install_private(
            tmp_path / "tc", debs_dir=debs, log=lambda m: None,
            accept=lambda tc, feats: install.check_shaders(variants, shaders.check_variant, feats))
    finally:
        toolchain.set_private_dir(None)
    assert report.shader_check.ok and len(report.shader_check.passed) == len(variants)
    data = report.manifest
    assert data["source"] == "debs" and data["features"] == {"coopmat2": True, "bfloat16": True}
    assert data["lock"]["differences"] == lock.lock_differences(data["packages"], lock.read_lock())
    assert {p["package"] for p in data["packages"]} >= {"glslc", "libc6", "glslang-tools"}
