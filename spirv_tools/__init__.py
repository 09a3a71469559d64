"""SPIR-V tooling for vkcoop: compile GLSL through shaderc, validate, disassemble and reflect.

This package knows nothing of Vulkan. The toolchain search (:mod:`spirv_tools.toolchain`) finds tools that
can compile GL_NV_cooperative_matrix2, installing a private Debian prefix on Debian 12 if asked
(:mod:`spirv_tools.install`, recorded by :mod:`spirv_tools.lock`).
Every error raised on purpose derives from :class:`spirv_tools.Error` (``vkcoop.Error``); bad arguments raise
:class:`InputError` (a ValueError) or :class:`InputTypeError` (also a TypeError), naming the argument.
"""
from .compiler import (ShaderCompileError, SpirvValidationError, backend, compile, disassemble,
                       parse_compile_error, validate)
from .errors import Error, InputError, InputTypeError
from .reflect import Reflection, SpirvFormatError, reflect
from .install import (InstallReport, ShaderCheckReport, check_shaders, install_private, needs_bfloat16,
                      require_toolchain)
from .lock import manifest, read_lock
from .toolchain import Toolchain, ToolchainError, ToolchainMissingError, find_toolchain, survey

__all__ = [
    "compile", "validate", "disassemble", "reflect", "backend",
    "Error", "InputError", "InputTypeError",
    "ShaderCompileError", "SpirvValidationError", "SpirvFormatError", "ToolchainError",
    "Reflection", "Toolchain", "find_toolchain", "install_private", "survey", "parse_compile_error",
    "ToolchainMissingError", "require_toolchain", "InstallReport", "ShaderCheckReport", "check_shaders",
    "needs_bfloat16", "manifest", "read_lock",
]
