"""The Constant clamp mode's 32-bit clampValue and the component value it stands for.

GL_NV_cooperative_matrix2, setTensorLayoutClampValueNV: "out of bounds loads return the bit pattern in the LSBs
of value". :func:`clamp_value_bits` encodes a value of a component type into those bits and refuses values the
type cannot hold exactly (unless ``rounding=True``); :func:`clamp_value_as` decodes the bits again.
"""
from __future__ import annotations

import math
import numbers
import warnings

import ml_dtypes
import numpy as np

from .state import UINT32_MAX, TensorLayout, TensorSpecError, TensorTypeError, _uint32


def component_dtype(dtype, name: str = "dtype") -> tuple[np.dtype, str]:
    """``dtype`` as a numpy dtype and its kind, "int" or "float" (numpy's and ml_dtypes' types)."""
    try:
        dt = np.dtype(dtype)
    except TypeError:
        raise TensorTypeError(f"{name} {dtype!r} is not a numpy dtype") from None
    if dt.kind in "iu":
        return dt, "int"
    try:
        ml_dtypes.finfo(dt)
        return dt, "float"
    except ValueError:
        pass
    try:
        ml_dtypes.iinfo(dt)
        return dt, "int"
    except ValueError:
        raise TensorTypeError(f"{name} {dt} is not an integer or floating-point component type") from None


def clamp_value_as(clamp_value, dtype) -> np.generic:
    """The Constant-mode load result: the low bits of the 32-bit clampValue as ``dtype``.

    ``clamp_value`` is the raw uint32 (or a TensorLayout, whose clamp value is taken). 8/16-bit types take
    the low 8/16 bits; 32-bit types all 32 bits; 64-bit types get the value zero-extended (the spec does not
    say; see docs/spec-notes.md).
    """
    if isinstance(clamp_value, TensorLayout):
        clamp_value = clamp_value.clamp_value
    bits = _uint32(clamp_value, "clamp_value")
    dt, _ = component_dtype(dtype)
    size = dt.itemsize
    raw = (bits & ((1 << (8 * size)) - 1) if size < 4 else bits).to_bytes(size, "little")
    return np.frombuffer(raw, dtype=dt)[0]


def clamp_value_bits(value, dtype, *, rounding: bool = False) -> int:
    """The uint32 clampValue whose low bits encode ``value`` in ``dtype`` (e.g. -0.5 as fp16 -> 0xB800).

    ``value`` must be exactly representable in ``dtype``: 0.5 is no int32 and 0.1 no fp16. ``rounding=True``
    takes the nearest representable value instead (ties to even). A value outside the type's range is an
    error either way (1e10 as fp16 would be inf, 300 as int8 would wrap).
    """
    dt, kind = component_dtype(dtype)
    if dt.itemsize > 4:
        raise TensorSpecError(f"dtype {dt} is wider than the 32-bit clampValue")
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TensorTypeError(f"value must be a real number, got {type(value).__name__} {value!r}")
    converted = _encode_int(value, dt, rounding) if kind == "int" else _encode_float(value, dt, rounding)
    return int.from_bytes(converted.tobytes(), "little") & UINT32_MAX


def _encode_int(value, dt: np.dtype, rounding: bool) -> np.ndarray:
    info = ml_dtypes.iinfo(dt) if dt.kind not in "iu" else np.iinfo(dt)
    if not isinstance(value, (int, np.integer)):
        if not math.isfinite(value):
            raise TensorSpecError(f"value {value!r} is not representable in {dt}")
        if value != math.floor(value):
            if not rounding:
                raise TensorSpecError(f"value {value!r} is not an integer, so not exactly representable in {dt} "
                                      "(pass rounding=True for the nearest)")
            value = round(value)  # ties to even
    value = int(value)
    if not info.min <= value <= info.max:
        raise TensorSpecError(f"value {value} is outside the range of {dt} ({info.min}..{info.max})")
    return np.asarray(value, dtype=dt).reshape(())


def _encode_float(value, dt: np.dtype, rounding: bool) -> np.ndarray:
    try:
        as_float = float(value)
    except OverflowError:
        raise TensorSpecError(f"value {value} is outside the range of {dt}") from None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # overflow to inf is reported below, as an error
        converted = np.asarray(as_float, dtype=dt).reshape(())
    back = float(converted.astype(np.float64))
    if math.isnan(as_float):
        if not math.isnan(back):
            raise TensorSpecError(f"value nan is not representable in {dt}")
        return converted
    if math.isinf(as_float) != math.isinf(back) or math.isnan(back):
        what = "has no infinity" if math.isinf(as_float) else \
            f"ends at {float(ml_dtypes.finfo(dt).max)!r}"
        raise TensorSpecError(f"value {value!r} is outside the range of {dt} ({dt} {what})")
    if back != value and not rounding:
        raise TensorSpecError(f"value {value!r} is not exactly representable in {dt} (nearest: {back!r}; pass "
                              "rounding=True to take it)")
    return converted
