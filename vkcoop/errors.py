"""vkcoop's error root: :class:`Error` (``vkcoop.Error``) is ``spirv_tools.Error``, because spirv_tools is the
lowest layer and must not import vkcoop. Every error vkcoop raises on purpose derives from it (TensorSpecError,
SparseFormatError, VulkanError, ShaderCompileError, ...); bad arguments raise an :class:`InputError` (also a
ValueError) or an :class:`InputTypeError` (also a TypeError) whose one-line message names the parameter."""
from spirv_tools.errors import Error, InputError, InputTypeError

__all__ = ["Error", "InputError", "InputTypeError"]
