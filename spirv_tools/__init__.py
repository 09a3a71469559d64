"""SPIR-V tooling for vkcoop: compile GLSL through shaderc, validate, disassemble and reflect.

This package knows nothing of Vulkan. The toolchain search (:mod:`spirv_tools.toolchain`) finds tools that
can compile GL_NV_cooperative_matrix2, installing a private Debian prefix on Debian 12 if asked
(:mod:`spirv_tools.install`, recorded by :mod:`spirv_tools.lock`).
"""
from .compiler import (ShaderCompileError, SpirvValidationError, backend, compile, disassemble,
                       parse_compile_error, validate)
from .reflect import Reflection, SpirvFormatError, reflect
from .install import (InstallReport, ShaderCheckReport, check_shaders, install_private, needs_bfloat16,
                      require_toolchain)
from .lock import manifest, read_lock
from .toolchain import Toolchain, ToolchainError, ToolchainMissingError, find_toolchain, survey

__all__ = [
    "compile", "validate", "disassemble", "reflect", "backend",
    "ShaderCompileError", "SpirvValidationError", "SpirvFormatError", "ToolchainError",
    "Reflection", "Toolchain", "find_toolchain", "install_private", "survey", "parse_compile_error",
    "ToolchainMissingError", "require_toolchain", "InstallReport", "ShaderCheckReport", "check_shaders",
    "needs_bfloat16", "manifest", "read_lock",
]
