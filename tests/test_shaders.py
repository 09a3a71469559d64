"""The shader catalog: every declared variant of every shader compiles and validates."""
from __future__ import annotations

import pytest

import spirv_tools
from vkcoop import shaders

try:
    spirv_tools.find_toolchain()
    _NO_TOOLCHAIN = None
except spirv_tools.ToolchainError as exc:
    _NO_TOOLCHAIN = str(exc)


def test_variant_lines_form_a_cross_product(tmp_path, monkeypatch):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "x.comp").write_text(
        "#version 450\n// @variants T=float|int\n// @variants MODE=1|2|3\nvoid main() {}\n")
    (tmp_path / "plain.comp").write_text("#version 450\nvoid main() {}\n")
    monkeypatch.setenv("VKCOOP_SHADER_DIR", str(tmp_path))
    assert shaders.shader_files() == ["a/x.comp", "plain.comp"]
    variants = shaders.declared_variants("a/x.comp")
    assert len(variants) == 6
    assert {v.defines for v in variants} == {(("MODE", m), ("T", t)) for t in ("float", "int") for m in "123"}
    assert shaders.declared_variants("plain.comp") == [shaders.ShaderVariant("plain.comp")]


@pytest.mark.toolchain
@pytest.mark.skipif(_NO_TOOLCHAIN is not None, reason=f"no coopmat2 shader toolchain: {_NO_TOOLCHAIN}")
@pytest.mark.parametrize("variant", shaders.all_variants(), ids=lambda v: v.label)
def test_every_variant_compiles_and_validates(variant):
    result = shaders.check_variant(variant)
    assert result.ok, result.error
    assert result.reflection["entry_point"] == "main"
