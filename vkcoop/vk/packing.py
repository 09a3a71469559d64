"""Bytes for the driver: specialization constants typed by reflection, and push constants.

Vulkan spec 10.9 "Specialization Constants" (VkSpecializationMapEntry: a bool constant is read as a VkBool32)
and 6.8 / 10.x "Push Constants". Every value is checked for type, range and (for specialization constants)
exact representability before it is packed; nothing here raises struct.error or OverflowError.
"""
from __future__ import annotations

import math
import numbers
import struct
from dataclasses import dataclass

import numpy as np

from .errors import PipelineInputError

# Specialization constant types the reflector reports -> numpy dtype of the bytes Vulkan reads.
_SPEC_DTYPES = {
    "bool": np.dtype(np.uint32), "int8": np.dtype(np.int8), "uint8": np.dtype(np.uint8),
    "int16": np.dtype(np.int16), "uint16": np.dtype(np.uint16), "int32": np.dtype(np.int32),
    "uint32": np.dtype(np.uint32), "int64": np.dtype(np.int64), "uint64": np.dtype(np.uint64),
    "float16": np.dtype(np.float16), "float32": np.dtype(np.float32), "float64": np.dtype(np.float64),
}
_FLOAT32_MAX = float(np.finfo(np.float32).max)


@dataclass(frozen=True)
class SpecValue:
    """One packed specialization constant."""
    constant_id: int
    data: bytes


def pack_spec_value(key, value, reflected_type: str) -> bytes:
    """``value`` as the bytes of the shader's type for constant ``key`` (a name or constant_id)."""
    where = f"specialization constant {key!r}"
    if reflected_type not in _SPEC_DTYPES:
        raise PipelineInputError(f"{where} has SPIR-V type {reflected_type}, which cannot be specialized")
    if reflected_type == "bool":
        if not isinstance(value, (bool, np.bool_)):
            raise PipelineInputError(f"{where} is a bool in the shader; pass True or False, got {value!r}")
        return struct.pack("<I", int(bool(value)))
    dtype = _SPEC_DTYPES[reflected_type]
    if isinstance(value, (bool, np.bool_)):
        raise PipelineInputError(f"{where} is {reflected_type} in the shader; got the bool {value!r}")
    if not isinstance(value, numbers.Real):
        raise PipelineInputError(f"{where} is {reflected_type} in the shader; got {type(value).__name__} "
                                 f"{value!r}")
    if dtype.kind in "iu":
        if not isinstance(value, (int, np.integer)):
            raise PipelineInputError(f"{where} is {reflected_type} in the shader; got the float {value!r}")
        info = np.iinfo(dtype)
        if not info.min <= int(value) <= info.max:
            raise PipelineInputError(f"{where} = {value} is out of range for {reflected_type}")
        return np.array(int(value), dtype=dtype).tobytes()
    try:
        as_float = float(value)
    except OverflowError:
        raise PipelineInputError(f"{where} = {value} is out of range for {reflected_type}") from None
    with np.errstate(over="ignore"):
        converted = np.array(as_float, dtype=dtype)
    if math.isfinite(as_float) and float(converted) != value:
        raise PipelineInputError(f"{where} = {value!r} is not exactly representable as {reflected_type}")
    return converted.tobytes()


def pack_push_constants(*values) -> bytes:
    """Pack scalars with natural alignment (each at a multiple of its size, as std430/scalar layout place
    scalars). Python ints become uint32 (int32 if negative), floats float32, bools uint32; numpy scalars keep
    their type (np.uint64 for device addresses)."""
    out = bytearray()
    for position, value in enumerate(values):
        data = _push_scalar(value, f"push constant {position} ({value!r})")
        padding = (-len(out)) % len(data)
        out += b"\0" * padding + data
    return bytes(out)


def _push_scalar(value, where: str) -> bytes:
    if isinstance(value, (bool, np.bool_)):
        return struct.pack("<I", int(bool(value)))
    if isinstance(value, (np.integer, np.floating)):
        return value.tobytes()
    if isinstance(value, int):
        if not -(1 << 31) <= value < (1 << 32):
            raise PipelineInputError(f"{where} does not fit 32 bits; pass a np.int64 or np.uint64")
        return struct.pack("<i" if value < 0 else "<I", value)
    if isinstance(value, float):
        if math.isfinite(value) and abs(value) > _FLOAT32_MAX:
            raise PipelineInputError(f"{where} is outside the float32 range; pass a np.float64")
        return struct.pack("<f", value)
    raise PipelineInputError(f"{where}: use bool, int, float or a numpy number")


def push_constant_bytes(push) -> bytes:
    """bytes/bytearray/memoryview/numpy array/structured scalar/tuple of scalars -> bytes."""
    if push is None:
        return b""
    if isinstance(push, (bytes, bytearray, memoryview)):
        return bytes(push)
    if isinstance(push, (np.ndarray, np.void)):
        if push.dtype.hasobject:
            raise PipelineInputError(f"push constants of dtype {push.dtype} hold Python objects, not data")
        return np.ascontiguousarray(push).tobytes() if isinstance(push, np.ndarray) else push.tobytes()
    if isinstance(push, (tuple, list)):
        return pack_push_constants(*push)
    raise PipelineInputError(f"push constants must be bytes, a numpy array or a tuple of scalars, got "
                             f"{type(push).__name__}")
