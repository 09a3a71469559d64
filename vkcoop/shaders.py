"""The shader catalog: every .comp under shaders/ and the variants it declares.

A shader lists its variants in header comments, one define per line; all lines of a file form a
cross product (one source, many variants)::

    // @variants ELEMENT_TYPE=float16_t|float
    // @variants CLAMP_MODE=gl_CooperativeMatrixClampModeConstantNV|gl_CooperativeMatrixClampModeRepeatNV

A shader without such lines has one variant, with no defines. ``shaders/include`` is always on the
include path.
"""
from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field
from pathlib import Path

import spirv_tools

from .paths import shader_root

_VARIANTS_LINE = re.compile(r"^\s*//\s*@variants\s+(?P<name>\w+)=(?P<values>\S+)\s*$", re.M)
INCLUDE_DIR = "include"


@dataclass(frozen=True)
class ShaderVariant:
    shader: str                     # path relative to shaders/, e.g. "tensor/load_store.comp"
    defines: tuple = ()             # sorted (name, value) pairs

    @property
    def label(self) -> str:
        if not self.defines:
            return self.shader
        return self.shader + " [" + ", ".join(f"{k}={_short(v)}" for k, v in self.defines) + "]"


def _short(value: str) -> str:
    return value.replace("gl_CooperativeMatrixClampMode", "").replace("NV", "") if "ClampMode" in value else value


@dataclass
class CheckResult:
    variant: ShaderVariant
    ok: bool
    error: str = ""
    spirv_bytes: int = 0
    reflection: dict = field(default_factory=dict)


def include_dirs() -> list[Path]:
    inc = shader_root() / INCLUDE_DIR
    return [inc] if inc.is_dir() else []


def shader_files() -> list[str]:
    """Every readable ``.comp`` under the shader root (a dangling link is no shader)."""
    root = shader_root()
    return sorted(str(p.relative_to(root)) for p in root.rglob("*.comp") if p.is_file())


def declared_variants(shader: str) -> list[ShaderVariant]:
    text = (shader_root() / shader).read_text()
    axes = [(m["name"], m["values"].split("|")) for m in _VARIANTS_LINE.finditer(text)]
    if not axes:
        return [ShaderVariant(shader)]
    names = [name for name, _ in axes]
    return [ShaderVariant(shader, tuple(sorted(zip(names, combo))))
            for combo in itertools.product(*(values for _, values in axes))]


def all_variants(pattern: str | None = None) -> list[ShaderVariant]:
    return [v for s in shader_files() if pattern is None or pattern in s for v in declared_variants(s)]


def compile_variant(variant: ShaderVariant, extra_defines: dict | None = None) -> bytes:
    defines = dict(variant.defines)
    defines.update(extra_defines or {})
    return spirv_tools.compile(path=shader_root() / variant.shader, defines=defines, include_dirs=include_dirs())


def check_variant(variant: ShaderVariant, reflect: bool = True) -> CheckResult:
    """Compile, validate and (unless told not to: it is pure Python, the slowest step once both caches answer)
    reflect one variant. The SPIR-V cache answers the compile and spirv_tools' remembered passes the
    validation, so an unchanged variant runs neither tool again."""
    try:
        spirv = compile_variant(variant)
        spirv_tools.validate(spirv)
        info = spirv_tools.reflect(spirv).to_dict() if reflect else {}
    except (spirv_tools.ShaderCompileError, spirv_tools.SpirvValidationError) as exc:
        return CheckResult(variant, False, str(exc))
    return CheckResult(variant, True, spirv_bytes=len(spirv), reflection=info)
