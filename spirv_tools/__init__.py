"""SPIR-V tooling for vkcoop: compile GLSL through shaderc, validate, disassemble and reflect.

This package knows nothing of Vulkan. The toolchain search (:mod:`spirv_tools.toolchain`) finds tools that
can compile GL_NV_cooperative_matrix2, installing a private Debian prefix on Debian 12 if asked
(:mod:`spirv_tools.install`, recorded by :mod:`spirv_tools.lock`).
Every error raised on purpose derives from :class:`spirv_tools.Error` (``vkcoop.Error``); bad arguments raise
:class:`InputError` (a ValueError) or :class:`InputTypeError` (also a TypeError), naming the argument.
"""
import importlib

# Loaded now: the function `reflect` has its module's name, and a later import of spirv_tools.reflect would
# otherwise bind the module where the function belongs.
from .reflect import Reflection, SpirvFormatError, reflect

# Each public name and the module it lives in, loaded on first use: a process that needs only the errors
# (a CUDA search child, `vkcoop --version`) does not pay for the compiler, the toolchain search and the installer.
_HOMES = {name: module for module, names in {
    ".compiler": "ShaderCompileError SpirvValidationError backend compile disassemble parse_compile_error validate",
    ".errors": "Error InputError InputTypeError",
    ".install": "InstallReport ShaderCheckReport check_shaders install_private needs_bfloat16 require_toolchain",
    ".lock": "manifest read_lock",
    ".toolchain": "Toolchain ToolchainError ToolchainMissingError find_toolchain survey",
}.items() for name in names.split()}

__all__ = [
    "compile", "validate", "disassemble", "reflect", "backend",
    "Error", "InputError", "InputTypeError",
    "ShaderCompileError", "SpirvValidationError", "SpirvFormatError", "ToolchainError",
    "Reflection", "Toolchain", "find_toolchain", "install_private", "survey", "parse_compile_error",
    "ToolchainMissingError", "require_toolchain", "InstallReport", "ShaderCheckReport", "check_shaders",
    "needs_bfloat16", "manifest", "read_lock",
]


def __getattr__(name: str):
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(home, __name__), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_HOMES))
