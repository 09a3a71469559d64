"""The element types of ``wgmma.mma_async.sp`` that the hand-written kernel runs (PTX ISA 9.7.15.6), one row each:
the one table that the instruction wrappers and C++ traits (``gen_wgmma_ops``), the configurations' shared memory
and K slices (``configs``), the tensor maps (``launches``) and the operands' checks (``gemm``) read.

Every type moves the same bytes a K slice: one 128-byte row of B per column of the tile and 64 bytes of compressed
A per row, two instructions of ``k`` dense K each. So a slice is ``bk = 128 / elem_bytes`` deep (64 for f16 and
bf16, 128 for the 8-bit types, 32 for tf32), and the shared-memory layouts, swizzles and matrix descriptors are the
same bytes for every type; what differs is the instruction, the metadata registers a slice takes, the accumulators
and C:

* ``meta_words``: metadata words a lane reads per slice. f16, bf16 and tf32 pair lanes (the selector picks a pair),
  so one register serves both instructions, selector 0 then 1; the 8-bit types fill every lane, selector 0, so each
  instruction takes a register of its own (``vkcoop.cuda.layout``).
* C: fp16 and bf16 keep their type; tf32, e4m3 and e5m2 accumulate in fp32 and store bf16, which keeps fp32's
  exponent range (fp16 would overflow past 65,504, a sum an 8-bit or tf32 product reaches); s8 and u8 accumulate
  in s32 and store s32, so an integer product stays exact.
"""
from __future__ import annotations

from dataclasses import dataclass

from . import driver

#: The tensor maps' element type by element size: they copy bits, whatever the bits mean (tf32 included: the
#: tensor core reads the sign, exponent and top ten mantissa bits of each float32).
TMA_DATA_TYPES = {1: driver.TENSOR_MAP_UINT8, 2: driver.TENSOR_MAP_UINT16, 4: driver.TENSOR_MAP_UINT32}
#: The bytes of B a K slice loads per column of the tile (one 128-byte swizzle span); A's compressed row is half.
SLICE_BYTES = 128


@dataclass(frozen=True)
class WgmmaSpType:
    """One type family: A and B in ``dtype`` (numpy and torch name it alike), ``ptx`` in the instruction and the
    kernel names, ``k`` dense K an instruction, ``sparsity`` of A (2:4 or 1:2), C stored as ``output``."""

    dtype: str
    ptx: str
    bench: str          # the benchmarks' name of the type (--dtype)
    k: int
    elem_bytes: int
    meta_words: int
    accumulator: str    # f32 or s32
    output: str
    sparsity: str = "2:4"

    @property
    def bk(self) -> int:
        """Dense K of one slice: a 128-byte row of B."""
        return SLICE_BYTES // self.elem_bytes

    @property
    def traits(self) -> str:
        """The C++ traits struct of the kernel template (``wgsp::F16``)."""
        return f"wgsp::{self.ptx.upper()}"

    @property
    def tma_data_type(self) -> int:
        return TMA_DATA_TYPES[self.elem_bytes]


WGMMA_SP_TYPES: dict[str, WgmmaSpType] = {t.dtype: t for t in (
    WgmmaSpType("float16", "f16", "fp16", 32, 2, 1, "f32", "float16"),
    WgmmaSpType("bfloat16", "bf16", "bf16", 32, 2, 1, "f32", "bfloat16"),
    WgmmaSpType("float32", "tf32", "tf32", 16, 4, 1, "f32", "bfloat16", sparsity="1:2"),
    WgmmaSpType("float8_e4m3fn", "e4m3", "e4m3", 64, 1, 2, "f32", "bfloat16"),
    WgmmaSpType("float8_e5m2", "e5m2", "e5m2", 64, 1, 2, "f32", "bfloat16"),
    WgmmaSpType("int8", "s8", "int8", 64, 1, 2, "s32", "int32"),
    WgmmaSpType("uint8", "u8", "uint8", 64, 1, 2, "s32", "int32"),
)}
#: The types every configuration is instantiated for; the others only for the configurations that say so.
SIXTEEN_BIT = ("float16", "bfloat16")


def wgmma_type(dtype_name: str) -> WgmmaSpType:
    """The row of ``dtype_name`` (a numpy or torch dtype name); KeyError names the types there are."""
    try:
        return WGMMA_SP_TYPES[dtype_name]
    except KeyError:
        raise KeyError(f"wgmma.sp runs {', '.join(WGMMA_SP_TYPES)}; not {dtype_name}") from None
