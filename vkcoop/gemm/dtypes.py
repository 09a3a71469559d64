"""The element types of ``vkcoop bench sparse`` (``--dtype``): what A and B hold, what the exact reference holds,
A's sparsity pattern, K's multiple and the values exact inputs are drawn from.

=====  ==============  =========  =======  ====  ==============================================================
name   A and B         reference  pattern  K     values (every product and partial sum exact in the reference)
=====  ==============  =========  =======  ====  ==============================================================
fp16   float16         float32    2:4      32    multiples of 1/8 in [-1, 1] (:func:`vkcoop.gemm.exact.eighths_inputs`)
bf16   bfloat16        float32    2:4      32    the same
tf32   float32         float32    1:2      32    the same in fp32 storage: 4 significant bits, which tf32 keeps
e4m3   float8_e4m3fn   float32    2:4      64    halves in [-1, 1]
e5m2   float8_e5m2     float32    2:4      64    halves in [-1, 1]
int8   int8            int32      2:4      64    integers in [-3, 3]
uint8  uint8           int32      2:4      64    integers in [0, 3]
=====  ==============  =========  =======  ====  ==============================================================

The halves of the 8-bit floats are exact in both formats, their products are multiples of 1/4 of magnitude at most
1, and a partial sum over the K/2 kept terms of a row is a multiple of 1/4 below K/2: exact in fp32, and at 8192^3
its typical size (about 32, some 7 bits of quarters) leaves room in an accumulator narrower than fp32. Every
integer sum is exact in int32 (|sum| <= 9 K / 2). K is a multiple of 64 for the 8-bit types (one
``wgmma.mma_async.sp`` m64nNk64 step, two metadata words a row; :mod:`vkcoop.sparse`), else of 32 (one 2:4 metadata
word; the 1:2 format of tf32 needs 16).

A path computes each type in the result type its library or kernel offers (bf16 for the 8-bit floats in the
libraries, int32 for the integers, fp32 for tf32) and is checked against the exact reference with that result
type's tolerance (:data:`vkcoop.gemm.types.RESULT_TOLERANCE`).
"""
from __future__ import annotations

from dataclasses import dataclass

import ml_dtypes
import numpy as np

from .types import BF16, GemmInputError

_EIGHTHS = tuple(i / 8 for i in range(-8, 9))
_HALVES = (-1.0, -0.5, 0.0, 0.5, 1.0)


@dataclass(frozen=True)
class BenchType:
    """One ``--dtype`` of the bench (module docstring)."""
    name: str
    input_dtype: np.dtype       # A and B
    reference_dtype: np.dtype   # the exact product's
    pattern: str                # A's sparsity: "2:4" or "1:2"
    k_multiple: int
    values: tuple               # what A and B are drawn from, uniformly

    @property
    def integer(self) -> bool:
        return self.input_dtype.kind in "iu"

    @property
    def value_array(self) -> np.ndarray:
        """:attr:`values` in the input type, the array the exact inputs are drawn from."""
        return np.array(self.values, dtype=np.float64).astype(self.input_dtype)

    def to_dict(self) -> dict:
        """What a run's JSON records of the type (``environment["dtypes"]``)."""
        return {"input": self.input_dtype.name, "reference": self.reference_dtype.name, "pattern": self.pattern,
                "k_multiple": self.k_multiple, "values": [float(v) if isinstance(v, float) else v
                                                          for v in self.values]}


BENCH_TYPES: dict[str, BenchType] = {t.name: t for t in (
    BenchType("fp16", np.dtype(np.float16), np.dtype(np.float32), "2:4", 32, _EIGHTHS),
    BenchType("bf16", BF16, np.dtype(np.float32), "2:4", 32, _EIGHTHS),
    BenchType("tf32", np.dtype(np.float32), np.dtype(np.float32), "1:2", 32, _EIGHTHS),
    BenchType("e4m3", np.dtype(ml_dtypes.float8_e4m3fn), np.dtype(np.float32), "2:4", 64, _HALVES),
    BenchType("e5m2", np.dtype(ml_dtypes.float8_e5m2), np.dtype(np.float32), "2:4", 64, _HALVES),
    BenchType("int8", np.dtype(np.int8), np.dtype(np.int32), "2:4", 64, (-3, -2, -1, 0, 1, 2, 3)),
    BenchType("uint8", np.dtype(np.uint8), np.dtype(np.int32), "2:4", 64, (0, 1, 2, 3)),
)}
#: The names ``--dtype`` takes, in the order tables list them.
BENCH_DTYPES = tuple(BENCH_TYPES)
#: The types the bench measured first: fp32 accumulation into an fp16 or bf16 result, every path.
HALF_DTYPES = ("fp16", "bf16")


def bench_type(name: str) -> BenchType:
    """The :class:`BenchType` of ``name``; GemmInputError naming the choices for any other."""
    try:
        return BENCH_TYPES[name]
    except (KeyError, TypeError):
        raise GemmInputError(f"dtype={name!r}: choose from {', '.join(BENCH_DTYPES)}") from None


def numpy_dtype(name: str) -> np.dtype:
    """A numpy dtype by its name, ml_dtypes' too (``bfloat16``, ``float8_e4m3fn``): how saved operands name it."""
    custom = getattr(ml_dtypes, name, None)
    return np.dtype(custom) if custom is not None else np.dtype(name)
