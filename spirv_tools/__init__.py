"""SPIR-V tooling for vkcoop: compile GLSL through shaderc, validate, disassemble and reflect.

This package knows nothing of Vulkan. The toolchain search (:mod:`spirv_tools.toolchain`) finds tools that
can compile GL_NV_cooperative_matrix2, installing a private Debian prefix on Debian 12 if asked.
"""
from .compiler import (ShaderCompileError, SpirvValidationError, backend, compile, disassemble,
                       parse_compile_error, validate)
from .reflect import Reflection, SpirvFormatError, reflect
from .toolchain import Toolchain, ToolchainError, find_toolchain, install_private, survey

__all__ = [
    "compile", "validate", "disassemble", "reflect", "backend",
    "ShaderCompileError", "SpirvValidationError", "SpirvFormatError", "ToolchainError",
    "Reflection", "Toolchain", "find_toolchain", "install_private", "survey", "parse_compile_error",
]
