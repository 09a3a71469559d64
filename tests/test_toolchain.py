"""The toolchain's trust and reproducibility: signatures, the mirror from apt's configuration, the lock file,
first use without a toolchain. No network: apt configurations and keyrings are temporary files."""
from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

import spirv_tools
from spirv_tools import debian, install, lock, toolchain

REPO = Path(__file__).resolve().parent.parent
DEBIAN_ENTRY = "deb http://127.0.0.1:3142/debian bookworm main\n"


@pytest.fixture(autouse=True)
def fresh_selection():
    yield
    toolchain.set_private_dir(None)


def _etc(tmp_path: Path, sources_list: str = "", **parts: str) -> Path:
    etc = tmp_path / "etc-apt"
    (etc / "sources.list.d").mkdir(parents=True)
    (etc / "sources.list").write_text(sources_list)
    for name, text in parts.items():
        (etc / "sources.list.d" / name.replace("_", ".")).write_text(text)
    return etc


def _one_line(exc: pytest.ExceptionInfo) -> str:
    text = str(exc.value)
    assert "\n" not in text, text
    return text


# --- signatures ----------------------------------------------------------------------------------------

def test_a_missing_keyring_refuses_to_fetch(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(debian, "_apt", lambda *a, **k: calls.append(a))
    etc = _etc(tmp_path, DEBIAN_ENTRY)
    state = tmp_path / "apt"
    with pytest.raises(toolchain.ToolchainError) as exc:
        debian.download_packages(tmp_path / "debs", state, suite="forky", packages=["glslc"], etc=etc,
                                 keyring=tmp_path / "no-such-keyring.gpg", log=lambda m: None)
    message = _one_line(exc)
    assert "debian-archive-keyring" in message and "apt-get install debian-archive-keyring" in message
    assert "signatures cannot be checked" in message
    assert calls == [] and not (state / "sources.list").exists()


def test_install_without_the_keyring_stops_before_any_download(tmp_path, monkeypatch):
    monkeypatch.setattr(debian, "DEBIAN_KEYRING", tmp_path / "gone.gpg")
    monkeypatch.setattr(debian, "APT_ETC", _etc(tmp_path, DEBIAN_ENTRY))
    monkeypatch.setattr(debian, "download_packages", lambda *a, **k: pytest.fail("fetched without a keyring"))
    with pytest.raises(toolchain.ToolchainError) as exc:
        install.install_private(tmp_path / "prefix", log=lambda m: None)
    assert "debian-archive-keyring" in _one_line(exc)
    assert not (tmp_path / "prefix").exists()


def test_every_sources_line_is_signed_by_the_keyring(tmp_path):
    keyring = tmp_path / "debian-archive-keyring.gpg"
    keyring.write_bytes(b"")
    line = debian.sources_line("forky", etc=_etc(tmp_path, DEBIAN_ENTRY), keyring=keyring)
    assert line == f"deb [signed-by={keyring}] http://127.0.0.1:3142/debian forky main\n"


def test_the_code_never_disables_signatures_nor_names_a_registry_host():
    for path in sorted((REPO / "spirv_tools").glob("*.py")) + [REPO / "scripts" / "setup.sh"]:
        text = path.read_text()
        assert "trusted=yes" not in text and "allow-unauthenticated" not in text, path
        assert not re.search(r"(https?|ftp)://[A-Za-z]", text), f"{path} names a host"


# --- the mirror comes from the system's apt configuration ---------------------------------------------

def test_mirror_from_one_line_sources(tmp_path):
    etc = _etc(tmp_path,
               "# a comment\n"
               "deb-src http://127.0.0.1:1/debian bookworm main\n"
               "deb http://127.0.0.1:2/debian-security bookworm-security main\n"
               "deb [arch=amd64 signed-by=/etc/apt/keyrings/x.gpg] http://127.0.0.1:3142/debian/ bookworm main contrib\n",
               other_list="deb http://127.0.0.1:4/ubuntu jammy main\n")
    assert debian.debian_mirror(etc) == "http://127.0.0.1:3142/debian"
    parsed = debian.parse_one_line("deb [ arch=amd64 ] file:/srv/mirror trixie main\n")
    assert parsed == [debian.AptSource("file:/srv/mirror", "trixie", ("main",), "")]


def test_mirror_from_deb822_sources(tmp_path):
    etc = _etc(tmp_path, debian_sources=(
        "Types: deb\nURIs: http://127.0.0.1:5/debian\nSuites: bookworm\nComponents: main\nEnabled: no\n\n"
        "Types: deb-src\nURIs: http://127.0.0.1:6/debian\nSuites: bookworm\nComponents: main\n\n"
        "# the mirror in use\n"
        "Types: deb deb-src\nURIs: file:/srv/debian-mirror\nSuites: bookworm-updates\n bookworm\n"
        "Components: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n"))
    assert debian.debian_mirror(etc) == "file:/srv/debian-mirror"
    entries = debian.system_sources(etc)
    assert [(e.suite, e.is_debian) for e in entries] == [("bookworm-updates", False), ("bookworm", True)]


def test_sources_list_comes_before_sources_list_d(tmp_path):
    etc = _etc(tmp_path, "deb http://127.0.0.1:7/debian trixie main\n", a_sources=(
        "Types: deb\nURIs: http://127.0.0.1:8/debian\nSuites: trixie\nComponents: main\n"))
    assert debian.debian_mirror(etc) == "http://127.0.0.1:7/debian"


def test_no_debian_source_is_a_clear_error(tmp_path):
    etc = _etc(tmp_path, "deb http://127.0.0.1:4/ubuntu jammy main\n", node_sources=(
        "Types: deb\nURIs: http://127.0.0.1:9/node\nSuites: nodistro\nComponents: main\n"))
    with pytest.raises(toolchain.ToolchainError) as exc:
        debian.debian_mirror(etc)
    message = _one_line(exc)
    assert message.startswith("no Debian source") and str(etc) in message and "; add a Debian mirror" in message


def test_unreachable_mirror_is_a_clear_error(tmp_path, monkeypatch):
    if shutil.which("apt-get") is None:
        pytest.skip("needs apt-get")
    # apt retries a refused connection after 1, 2 and 4 s; once is enough to see what the refusal says.
    (tmp_path / "apt.conf").write_text('Acquire::Retries "0";\n')
    monkeypatch.setenv("APT_CONFIG", str(tmp_path / "apt.conf"))
    keyring = tmp_path / "keyring.gpg"
    keyring.write_bytes(b"")
    etc = _etc(tmp_path, "deb http://127.0.0.1:9/debian bookworm main\n")
    with pytest.raises(toolchain.ToolchainError) as exc:
        debian.download_packages(tmp_path / "debs", tmp_path / "apt", suite="forky", packages=["glslc"], etc=etc,
                                 keyring=keyring, log=lambda m: None)
    assert "cannot fetch the signed Debian forky index from http://127.0.0.1:9/debian: Err:" in _one_line(exc)
    assert (tmp_path / "apt" / "sources.list").read_text().startswith(f"deb [signed-by={keyring}] ")


# --- the lock file -------------------------------------------------------------------------------------

def test_the_lock_file_pins_every_private_package():
    found = lock.read_lock()
    assert found["suite"] == "forky"
    assert set(found["packages"]) == set(toolchain.PRIVATE_PACKAGES)
    for entry in found["packages"].values():
        assert entry["version"] and re.fullmatch(r"[0-9a-f]{64}", entry["sha256"])
    assert lock.pins(found)["glslc"] == found["packages"]["glslc"]["version"]


def test_an_unreadable_lock_file_is_a_clear_error(tmp_path):
    bad = tmp_path / "lock.json"
    bad.write_text(json.dumps({"suite": "forky", "packages": {"glslc": {"version": "1"}}}))
    with pytest.raises(toolchain.ToolchainError) as exc:
        lock.read_lock(bad)
    assert str(bad) in _one_line(exc) and "restore it" in str(exc.value)


def test_lock_differences_name_each_package():
    locked = {"suite": "forky", "packages": {
        "glslc": {"version": "1", "sha256": "a" * 64}, "libc6": {"version": "2", "sha256": "b" * 64},
        "spirv-tools": {"version": "3", "sha256": "c" * 64}}}
    same = [{"package": n, "version": e["version"], "sha256": e["sha256"]} for n, e in locked["packages"].items()]
    assert lock.lock_differences(same, locked) == []
    resolved = [{"package": "glslc", "version": "1.1", "sha256": "a" * 64},
                {"package": "libc6", "version": "2", "sha256": "d" * 64},
                {"package": "extra", "version": "9", "sha256": "e" * 64}]
    assert lock.lock_differences(resolved, locked) == [
        "extra 9 (not in the lock)", "glslc 1.1 (lock: 1)",
        f"libc6 2 has SHA256 {'d' * 16}… (lock: {'b' * 16}…)", "spirv-tools missing (lock: 3)"]


def test_manifest_of_a_prefix_with_nothing_installed_is_none(tmp_path):
    assert lock.manifest(tmp_path) is None


# --- which variants need bf16, and the shader check that skips them -----------------------------------

def test_needs_bfloat16_recognises_every_bf16_define():
    assert install.needs_bfloat16({"GEMM_TYPES": "BF16_F32"}) and install.needs_bfloat16({"ELEMENT": "BF16"})
    assert install.needs_bfloat16((("ELEMENT_TYPE", "bfloat16_t"),))
    assert install.needs_bfloat16({"CONVERSION": "CONV_F32_ACC_TO_BF16_B"})
    for plain in ({"ELEMENT": "F16"}, {"GEMM_TYPES": "F16_F32"}, {"ELEMENT_TYPE": "float16_t"}, {}):
        assert not install.needs_bfloat16(plain)


def test_the_catalog_has_bf16_variants_to_skip():
    shaders = pytest.importorskip("vkcoop.shaders")
    bf16 = [v.label for v in shaders.all_variants() if install.needs_bfloat16(v.defines)]
    assert any("coopmat2_gemm.comp [GEMM_TYPES=BF16_F32" in label for label in bf16)
    assert any("ELEMENT_TYPE=bfloat16_t" in label for label in bf16)
    assert not any("=F16," in label or label.endswith("=F16]") for label in bf16)


def test_check_shaders_skips_bf16_variants_by_name_without_bf16():
    variants = [SimpleNamespace(label="a.comp", defines=()),
                SimpleNamespace(label="b.comp [ELEMENT=BF16]", defines=(("ELEMENT", "BF16"),)),
                SimpleNamespace(label="c.comp", defines=(("X", "1"),))]
    checked = []

    def check(v):
        checked.append(v.label)
        return SimpleNamespace(ok=v.label != "c.comp", error="c.comp:3: error: nope\nmore")

    report = install.check_shaders(variants, check, {"coopmat2": True, "bfloat16": False})
    assert checked == ["a.comp", "c.comp"]
    assert report.passed == ["a.comp"] and report.failed == [("c.comp", "c.comp:3: error: nope")]
    assert report.skipped == [("b.comp [ELEMENT=BF16]", "needs GL_EXT_bfloat16, which this toolchain cannot compile")]
    assert not report.ok and report.to_dict()["skipped"][0]["variant"] == "b.comp [ELEMENT=BF16]"
    with_bf16 = install.check_shaders(variants[:2], check, {"coopmat2": True, "bfloat16": True})
    assert with_bf16.passed == ["a.comp", "b.comp [ELEMENT=BF16]"] and not with_bf16.skipped


def test_fallback_order_is_locked_testing_stable(monkeypatch):
    monkeypatch.delenv("VKCOOP_TOOLCHAIN_SUITE", raising=False)
    order = install.fallback_sources()
    assert [(s.name, s.suite, s.pinned, s.bf16_required) for s in order] == [
        ("locked", "forky", True, True), ("testing", "forky", False, True), ("stable", "trixie", False, False)]
    monkeypatch.setenv("VKCOOP_TOOLCHAIN_SUITE", "trixie")
    assert [(s.name, s.suite, s.pinned) for s in install.fallback_sources()] == [("suite", "trixie", False)]


# --- first use with no toolchain -----------------------------------------------------------------------

def _no_toolchain(monkeypatch, tmp_path, found=()):
    monkeypatch.setattr(toolchain, "candidates", lambda: list(found))
    monkeypatch.setenv("VKCOOP_TOOLCHAIN_DIR", str(tmp_path / "tc"))
    monkeypatch.delenv("VKCOOP_AUTO_TOOLCHAIN", raising=False)
    toolchain.reset_selection()


def test_require_toolchain_without_one_raises_a_one_line_missing_error(monkeypatch, tmp_path):
    _no_toolchain(monkeypatch, tmp_path)
    monkeypatch.setattr(install, "install_private", lambda **k: pytest.fail("installed without being asked"))
    with pytest.raises(spirv_tools.ToolchainMissingError) as exc:
        spirv_tools.require_toolchain(auto_install=False)
    message = _one_line(exc)
    assert message.startswith("no shader toolchain that can compile GL_NV_cooperative_matrix2")
    assert "`vkcoop toolchain install`" in message and str(tmp_path / "tc") in message
    assert "VKCOOP_AUTO_TOOLCHAIN=1" in message
    assert isinstance(exc.value, spirv_tools.ToolchainError)
    with pytest.raises(spirv_tools.ToolchainMissingError):
        spirv_tools.require_toolchain()  # VKCOOP_AUTO_TOOLCHAIN unset: no install either


def test_rejected_candidates_are_named_in_one_line(monkeypatch, tmp_path):
    tc = toolchain.Toolchain("path", None)
    _no_toolchain(monkeypatch, tmp_path, [tc])
    monkeypatch.setattr(toolchain, "probe", lambda t: toolchain.Candidate(t, False, "glslc cannot compile X\nmore"))
    with pytest.raises(spirv_tools.ToolchainMissingError) as exc:
        spirv_tools.require_toolchain(auto_install=False)
    assert "rejected: path" in _one_line(exc)
    assert exc.value.rejected == ["path (PATH): glslc cannot compile X\nmore"]


@pytest.mark.parametrize("how", ["argument", "environment"])
def test_require_toolchain_installs_when_asked(monkeypatch, tmp_path, how):
    _no_toolchain(monkeypatch, tmp_path)
    installed = toolchain.Toolchain("private", tmp_path / "tc/usr/bin")
    calls = []

    def fake_install(**kwargs):
        calls.append(kwargs)
        monkeypatch.setattr(toolchain, "candidates", lambda: [installed])

    monkeypatch.setattr(install, "install_private", fake_install)
    monkeypatch.setattr(toolchain, "probe", lambda t: toolchain.Candidate(t, True, "ok"))
    monkeypatch.setattr(toolchain, "_tool_versions", lambda t: {})
    accept = object()
    if how == "environment":
        monkeypatch.setenv("VKCOOP_AUTO_TOOLCHAIN", "1")
    got = spirv_tools.require_toolchain(True if how == "argument" else None, accept=accept, log=lambda m: None)
    assert got is installed and len(calls) == 1 and calls[0]["accept"] is accept
