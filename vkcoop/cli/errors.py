"""Which exit code and one-line message each error class gets (see :class:`vkcoop.cli.common.Exit`)."""
from __future__ import annotations

from .common import CliError, Exit


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def _table():
    """(error classes, exit code, what to do) in match order; imported lazily so --help stays fast."""
    import spirv_tools
    from .. import errors, sparse, tensor, vk

    return [
        ((spirv_tools.ToolchainError,), Exit.ENVIRONMENT, "run `vkcoop toolchain install`"),
        ((vk.NoDeviceError, vk.MissingFeatureError, vk.LayerNotFoundError), Exit.ENVIRONMENT,
         "`vkcoop info` shows what this device has"),
        ((spirv_tools.ShaderCompileError, spirv_tools.SpirvValidationError), Exit.FAILED,
         "the shader needs fixing (file:line above)"),
        ((errors.InputError, sparse.SparseFormatError, tensor.TensorSpecError), Exit.USAGE, "check the arguments"),
        ((vk.VulkanError, errors.Error), Exit.FAILED, "rerun with --debug for the details"),
        ((IsADirectoryError, NotADirectoryError, FileNotFoundError, PermissionError), Exit.USAGE,
         "check the path"),
        ((ValueError,), Exit.USAGE, "check the arguments"),
    ]


def classify(error: Exception) -> tuple[int, str]:
    """(exit code, ``<what>; <what to do>``) for an error that reached the top."""
    if isinstance(error, CliError):
        return int(error.code), error.line()
    if isinstance(error, OSError) and error.filename is not None:
        return int(Exit.USAGE), f"{error.filename}: {error.strerror}; check the path"
    for classes, code, todo in _table():
        if isinstance(error, classes):
            what = _first_line(error)
            # Many messages already say what to do (`<what>; <what to do>`): keep theirs.
            return int(code), what if "; " in what else f"{what}; {todo}"
    return int(Exit.FAILED), (f"unexpected {type(error).__name__}: {_first_line(error)}; "
                              "rerun with --debug and report the traceback")
