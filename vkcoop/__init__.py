"""vkcoop: samples, a reference and benchmarks for Vulkan cooperative_matrix2 from Python."""

__version__ = "0.1.0"
__all__ = ["Error", "InputError", "InputTypeError", "__version__"]


def __getattr__(name: str):
    # The error classes live in spirv_tools, whose import is most of a bare `import vkcoop`: they load on first
    # use, so that `vkcoop --version` starts in the time of Python itself.
    if name in ("Error", "InputError", "InputTypeError"):
        from . import errors

        return getattr(errors, name)
    raise AttributeError(f"module 'vkcoop' has no attribute {name!r}")
