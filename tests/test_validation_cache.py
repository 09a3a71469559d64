"""spirv-val passes are remembered beside the SPIR-V cache, keyed by what decides the answer (the module's bytes,
the target, the options, spirv-val's version), so an unchanged shader is not validated again; a failure always
runs again. Offline: spirv-val is a shell script that logs each run and rejects modules whose bound is 13. The
last test runs the real toolchain: a second shader check spawns neither glslc nor spirv-val."""
from __future__ import annotations

import struct

import pytest

import spirv_tools
from spirv_tools import compiler, toolchain
from spirv_tools.binary import MAGIC
from support import corrupt, toolchain_or_skip

SPIRV_VAL = """#!/bin/sh
for last; do :; done
echo run >> "$(dirname "$0")/runs"
if [ "$(od -An -tu4 -j12 -N4 "$last" | tr -d ' ')" = 13 ]; then echo "error: id bound 13 is refused" >&2; exit 1; fi
"""


def _module(bound: int) -> bytes:
    return struct.pack("<5I", MAGIC, 0x00010600, 0, bound, 0)


@pytest.fixture
def fake(tmp_path, monkeypatch):
    """A toolchain whose spirv-val logs its runs; the cache in tmp_path. Yields (toolchain, runs so far)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "spirv-val").write_text(SPIRV_VAL)
    (bin_dir / "spirv-val").chmod(0o755)
    monkeypatch.setenv("SPIRV_TOOLS_CACHE_DIR", str(tmp_path / "cache"))
    tc = toolchain.Toolchain("vulkan-sdk", bin_dir, versions={"spirv-tools": "v2031.1"})

    def runs() -> int:
        log = bin_dir / "runs"
        return len(log.read_text().splitlines()) if log.exists() else 0

    with toolchain.using(tc):
        yield tc, runs


def test_a_pass_is_not_validated_again(fake):
    _, runs = fake
    spirv_tools.validate(_module(5))
    spirv_tools.validate(_module(5))
    assert runs() == 1


def test_another_module_target_or_option_is_validated(fake):
    _, runs = fake
    spirv_tools.validate(_module(5))
    spirv_tools.validate(_module(6))
    spirv_tools.validate(_module(5), "vulkan1.2")
    spirv_tools.validate(_module(5), options=["--scalar-block-layout"])
    assert runs() == 4


def test_another_spirv_val_version_validates_again(fake):
    tc, runs = fake
    spirv_tools.validate(_module(5))
    tc.versions["spirv-tools"] = "v2031.2"
    spirv_tools.validate(_module(5))
    assert runs() == 2


def test_a_spirv_val_of_unknown_version_is_told_apart_by_its_place(fake, tmp_path):
    tc, _ = fake
    tc.versions.clear()
    elsewhere = toolchain.Toolchain("vulkan-sdk", tmp_path / "other")
    here = compiler.validation_entry(_module(5), "vulkan1.3", ())
    with toolchain.using(elsewhere):
        assert compiler.validation_entry(_module(5), "vulkan1.3", ()) != here


def test_a_failure_is_never_remembered(fake):
    _, runs = fake
    for _ in range(2):
        with pytest.raises(spirv_tools.SpirvValidationError, match="id bound 13"):
            spirv_tools.validate(_module(13))
    assert runs() == 2


def test_use_cache_false_always_runs_spirv_val(fake):
    _, runs = fake
    spirv_tools.validate(_module(5))
    spirv_tools.validate(_module(5), use_cache=False)
    assert runs() == 2


@pytest.mark.parametrize("kind", ["empty", "truncated", "bit-flipped"])
def test_a_damaged_pass_entry_validates_again(fake, kind):
    _, runs = fake
    spirv_tools.validate(_module(5))
    spirv_tools.validate(_module(5))
    assert runs() == 1
    entry = compiler.validation_entry(_module(5), "vulkan1.3", ())
    entry.write_bytes(corrupt(kind, entry.read_bytes()))
    spirv_tools.validate(_module(5))
    assert runs() == 2 and entry.exists()   # run again, and remembered again


def test_not_spirv_is_refused_before_any_lookup(fake):
    _, runs = fake
    with pytest.raises(spirv_tools.SpirvFormatError):
        spirv_tools.validate(b"\x00" * 20)
    assert runs() == 0


@pytest.mark.toolchain
def test_a_second_shader_check_runs_no_tool(tmp_path, monkeypatch):
    """What `vkcoop demo` and `vkcoop shaders check` do twice: the second time every answer comes from a cache."""
    toolchain_or_skip()
    from vkcoop import shaders
    from vkcoop.cli.toolchain import check_shaders

    monkeypatch.setenv("SPIRV_TOOLS_CACHE_DIR", str(tmp_path / "cache"))
    ran: list[str] = []
    real_run, real_library = toolchain.Toolchain.run, compiler.ShadercLibrary.compile
    monkeypatch.setattr(toolchain.Toolchain, "run", lambda self, name, *a, **k: (ran.append(name),
                                                                                 real_run(self, name, *a, **k))[1])
    monkeypatch.setattr(compiler.ShadercLibrary, "compile", lambda self, *a, **k: (ran.append("libshaderc"),
                                                                                   real_library(self, *a, **k))[1])
    variants = shaders.all_variants("elementwise")[:3]
    first = check_shaders("check", variants, reflect=False)
    assert all(r.ok for r in first) and "spirv-val" in ran and len(ran) >= 2 * len(variants)
    ran.clear()
    second = check_shaders("check", variants, reflect=False)
    assert [r.ok for r in second] == [True] * len(variants) and ran == []
    assert [r.spirv_bytes for r in second] == [r.spirv_bytes for r in first]

