"""What attention takes: dtypes, head dims, the [batch][heads][seq][head_dim] operands, checked before dispatch.

Every error is one line naming the parameter, raised as :class:`AttentionInputError` (a
:class:`vkcoop.gemm.GemmInputError`, so the CLI reports it as a usage error).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..gemm import DTYPES, GemmInputError

HEAD_DIMS = (64, 128)
#: Offsets in the shader are 32-bit element indices.
MAX_ELEMENTS = 1 << 32


class AttentionInputError(GemmInputError):
    """Attention was handed arrays, shapes, tiles or options it cannot take; raised before any dispatch."""


def check_dtype(dtype: str) -> np.dtype:
    if dtype not in DTYPES:
        raise AttentionInputError(f"dtype={dtype!r}: choose from {', '.join(DTYPES)}")
    return DTYPES[dtype]


def dtype_name(array_dtype) -> str:
    """"fp16" or "bf16" for a numpy dtype; AttentionInputError otherwise."""
    for name, dtype in DTYPES.items():
        if np.dtype(array_dtype) == dtype:
            return name
    raise AttentionInputError(f"dtype {np.dtype(array_dtype)}: attention takes float16 or bfloat16 "
                              "(ml_dtypes.bfloat16)")


def check_head_dim(head_dim: int) -> int:
    if head_dim not in HEAD_DIMS:
        raise AttentionInputError(f"head_dim={head_dim}: the kernel is built for {' or '.join(map(str, HEAD_DIMS))}")
    return head_dim


@dataclass(frozen=True)
class AttentionShape:
    batch: int
    q_heads: int
    kv_heads: int
    seq_q: int
    seq_kv: int
    head_dim: int

    @property
    def group(self) -> int:
        """Query heads per key/value head (GQA); query head h reads kv head h // group."""
        return self.q_heads // self.kv_heads

    def flops(self, causal: bool) -> float:
        """4·b·h·s_q·s_kv·d (two matrix products), halved for a causal mask."""
        full = 4.0 * self.batch * self.q_heads * self.seq_q * self.seq_kv * self.head_dim
        return full / 2 if causal else full

    def kv_bytes(self, itemsize: int = 2) -> int:
        """Bytes of K and V: what decode must read at least once."""
        return 2 * self.batch * self.kv_heads * self.seq_kv * self.head_dim * itemsize

    def label(self) -> str:
        heads = f"h{self.q_heads}" + (f"/{self.kv_heads}" if self.kv_heads != self.q_heads else "")
        return f"b{self.batch} {heads} q{self.seq_q} kv{self.seq_kv} d{self.head_dim}"


def _check_array(name: str, array, dtype=None) -> np.ndarray:
    if not isinstance(array, np.ndarray):
        raise AttentionInputError(f"{name} must be a numpy array, got {type(array).__name__}")
    if array.ndim != 4 or 0 in array.shape:
        raise AttentionInputError(f"{name} must be a non-empty 4-D array [batch][heads][seq][head_dim], "
                                  f"got shape {array.shape}")
    if dtype is not None and array.dtype != dtype:
        raise AttentionInputError(f"{name} has dtype {array.dtype}; q has {dtype} (all three must match)")
    return array


def check_inputs(q, k, v) -> tuple[str, AttentionShape]:
    """(dtype name, shape) of q [b][hq][sq][d], k and v [b][hkv][skv][d]; AttentionInputError otherwise."""
    q = _check_array("q", q)
    dtype = dtype_name(q.dtype)
    k, v = _check_array("k", k, q.dtype), _check_array("v", v, q.dtype)
    if k.shape != v.shape:
        raise AttentionInputError(f"v has shape {v.shape}; it must equal k's {k.shape}")
    batch, q_heads, seq_q, head_dim = q.shape
    kb, kv_heads, seq_kv, kd = k.shape
    if kb != batch:
        raise AttentionInputError(f"k has batch {kb}; q has {batch}")
    if kd != head_dim:
        raise AttentionInputError(f"k has head_dim {kd}; q has {head_dim}")
    check_head_dim(head_dim)
    if q_heads % kv_heads:
        raise AttentionInputError(f"k has {kv_heads} heads; q's {q_heads} heads must be a multiple of them (GQA)")
    shape = AttentionShape(batch, q_heads, kv_heads, seq_q, seq_kv, head_dim)
    if max(q.size, k.size) >= MAX_ELEMENTS:
        raise AttentionInputError(f"q has {q.size} and k {k.size} elements; the kernel indexes with 32 bits "
                                  f"(< {MAX_ELEMENTS})")
    return dtype, shape


def resolve_scale(scale, head_dim: int) -> float:
    """The softmax scale: 1/sqrt(head_dim) by default, else a finite number."""
    if scale is None:
        return 1.0 / math.sqrt(head_dim)
    if isinstance(scale, bool) or not isinstance(scale, (int, float, np.floating, np.integer)):
        raise AttentionInputError(f"scale must be a number, got {type(scale).__name__}")
    if not math.isfinite(float(scale)):
        raise AttentionInputError(f"scale={scale} must be finite")
    return float(scale)
