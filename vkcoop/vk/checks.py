"""Argument checks shared by the runtime's public calls: one-line errors that name the parameter, raised before
anything reaches the driver."""
from __future__ import annotations

import math
import numbers
import os

import numpy as np

from .errors import VulkanInputError, VulkanTypeError

# vkWaitForFences takes a uint64 count of nanoseconds.
MAX_TIMEOUT_S = (2**64 - 1) / 1e9


def timeout_seconds(value, name: str, *, allow_zero: bool = False) -> float:
    """A finite, positive number of seconds that fits vkWaitForFences' uint64 nanoseconds (0 polls, where
    ``allow_zero``)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise VulkanTypeError(f"{name} must be a number of seconds, got {type(value).__name__} {value!r}")
    seconds = float(value)
    if not math.isfinite(seconds) or seconds < 0 or (seconds == 0 and not allow_zero) or seconds > MAX_TIMEOUT_S:
        low = "non-negative" if allow_zero else "positive"
        raise VulkanInputError(f"{name} must be finite, {low} and at most {MAX_TIMEOUT_S:.3g} s, got {value!r}")
    return seconds


def integer(value, name: str, *, minimum: int | None = None, maximum: int | None = None) -> int:
    """An int or numpy integer (not a bool, not a float: 2.7 would silently become 2) within the bounds."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise VulkanTypeError(f"{name} must be an integer, got {type(value).__name__} {value!r}")
    value = int(value)
    if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
        bounds = f"[{minimum if minimum is not None else '-inf'}, {maximum if maximum is not None else 'inf'}]"
        raise VulkanInputError(f"{name} = {value} is outside {bounds}")
    return value


def flag(value, name: str, *, allow_none: bool = False) -> bool | None:
    """True or False (or None where allowed): validate='no' must not switch the layer on."""
    if value is None and allow_none:
        return None
    if not isinstance(value, (bool, np.bool_)):
        allowed = "True, False or None" if allow_none else "True or False"
        raise VulkanTypeError(f"{name} must be {allowed}, got {type(value).__name__} {value!r}")
    return bool(value)


def device_selector(device) -> None:
    """``device`` must be an index, a (substring of a) name, or None."""
    if isinstance(device, (bool, np.bool_)) or not isinstance(device, (int, np.integer, str, type(None))):
        raise VulkanTypeError(f"device must be an index, a name or None, got {type(device).__name__} {device!r}")


def name_list(value, name: str) -> list[str]:
    """A list (or tuple) of strings; a single string is a caller's slip."""
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple, set, frozenset)):
        raise VulkanTypeError(f"{name} must be a list of names, got {type(value).__name__} {value!r}")
    for item in value:
        if not isinstance(item, str):
            raise VulkanTypeError(f"{name} must hold strings, got {type(item).__name__} {item!r}")
    return list(value)


def text(value, name: str) -> str:
    if not isinstance(value, str):
        raise VulkanTypeError(f"{name} must be a str, got {type(value).__name__} {value!r}")
    return value


def path_or_flag(value, name: str):
    """True, False, or a directory (str / os.PathLike)."""
    if isinstance(value, (bool, str, os.PathLike)):
        return value
    raise VulkanTypeError(f"{name} must be True, False or a directory, got {type(value).__name__} {value!r}")
