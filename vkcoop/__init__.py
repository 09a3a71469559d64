"""vkcoop: samples, a reference and benchmarks for Vulkan cooperative_matrix2 from Python."""

from .errors import Error, InputError, InputTypeError

__version__ = "0.1.0"
__all__ = ["Error", "InputError", "InputTypeError", "__version__"]
