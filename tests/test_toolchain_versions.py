"""The toolchain table shows what each binary says of itself (``glslang --version`` for glslang), and the glslang
built into glslc only beside it; the SPIR-V cache key holds glslc's own report, the glslang that compiles.
Offline: the tools are shell scripts that print a version."""
from __future__ import annotations

from pathlib import Path

import pytest

from spirv_tools import compiler, toolchain
from vkcoop.cli import toolchain as toolchain_command

GLSLC = """#!/bin/sh
echo "shaderc 2031.2-5"
echo "spirv-tools "
echo "glslang 17.0.0-2"
echo
echo "Target: SPIR-V 1.0"
"""
GLSLANG = """#!/bin/sh
echo "Glslang Version: 11:17.3.1"
echo "ESSL Version: OpenGL ES GLSL 3.20 glslang Khronos. 17.3.1"
echo "SPIR-V Version 0x00010600, Revision 1"
"""
SPIRV_VAL = """#!/bin/sh
echo "SPIRV-Tools v2031.1 unknown hash, 2031-01-01T00:00:00+00:00"
echo "Targets:"
echo "  SPIR-V 1.0"
"""


def _fake_toolchain(where: Path, tools: dict) -> toolchain.Toolchain:
    where.mkdir(parents=True, exist_ok=True)
    for name, script in tools.items():
        (where / name).write_text(script)
        (where / name).chmod(0o755)
    return toolchain.Toolchain("vulkan-sdk", where)


def test_glslang_is_what_the_glslang_binary_reports(tmp_path):
    tc = _fake_toolchain(tmp_path, {"glslc": GLSLC, "glslang": GLSLANG, "spirv-val": SPIRV_VAL})
    versions = toolchain._tool_versions(tc)
    assert versions["glslang"] == "17.3.1"
    assert versions[toolchain.GLSLC_GLSLANG] == "17.0.0-2"
    assert versions["shaderc"] == "2031.2-5" and versions["spirv-tools"] == "v2031.1"


def test_the_table_leads_with_the_binaries_and_names_glslcs_glslang_as_built_in(tmp_path):
    tc = _fake_toolchain(tmp_path, {"glslc": GLSLC, "glslang": GLSLANG, "spirv-val": SPIRV_VAL})
    text = toolchain_command.versions_text(toolchain._tool_versions(tc))
    assert text.startswith("glslang 17.3.1, ")
    assert "shaderc 2031.2-5" in text and "spirv-tools v2031.1" in text
    assert text.endswith("(glslc built with glslang 17.0.0-2)") and text.count("17.0.0-2") == 1


def test_older_toolchains_answer_through_glslangvalidator(tmp_path):
    tc = _fake_toolchain(tmp_path, {"glslc": GLSLC, "glslangValidator": GLSLANG.replace("17.3.1", "15.1.0"),
                                    "spirv-val": SPIRV_VAL})
    assert toolchain._tool_versions(tc)["glslang"] == "15.1.0"


def test_a_toolchain_without_a_glslang_program_shows_none(tmp_path):
    """Nothing here runs the glslang program, so its absence is no error and no made-up version."""
    tc = _fake_toolchain(tmp_path, {"glslc": GLSLC, "spirv-val": SPIRV_VAL})
    versions = toolchain._tool_versions(tc)
    assert "glslang" not in versions and versions[toolchain.GLSLC_GLSLANG] == "17.0.0-2"


def test_a_missing_glslc_or_spirv_val_is_named_unavailable(tmp_path):
    versions = toolchain._tool_versions(_fake_toolchain(tmp_path, {"glslang": GLSLANG}))
    assert versions["glslc"].startswith("unavailable") and versions["spirv-val"].startswith("unavailable")
    assert versions["glslang"] == "17.3.1"


def test_the_cache_key_holds_the_glslang_that_compiles(tmp_path, monkeypatch):
    """glslc compiles with its built-in glslang: the backend's identity names that one, not the glslang binary's."""
    tc = _fake_toolchain(tmp_path, {"glslc": GLSLC, "glslang": GLSLANG, "spirv-val": SPIRV_VAL})
    tc.versions.update(toolchain._tool_versions(tc))
    monkeypatch.setattr(compiler, "try_load_shaderc", lambda path: (None, "no libshaderc in this test"))
    with toolchain.using(tc):
        identity = compiler.backend().identity
    assert "17.0.0-2" in identity and "2031.2-5" in identity and "17.3.1" not in identity


@pytest.mark.parametrize("text, expected", [("Glslang Version: 10:11.13.0\n", "11.13.0"),
                                            ("Glslang Version: 16.6.0\n", "16.6.0")])
def test_glslang_version_lines_with_and_without_the_generator_number(text, expected):
    assert toolchain._parse_versions("glslang", text) == {"glslang": expected}
