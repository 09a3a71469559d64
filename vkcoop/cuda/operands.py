"""The operands of the CUDA paths on the GPU: torch (imported lazily, with the warnings these paths cause on purpose
silenced), numpy arrays uploaded bit for bit, and :class:`DeviceSparse`, a structured-sparse A (the 2:4 format of
fp16, bf16 and the 8-bit types, or tf32's 1:2) with the per-lane metadata the hand-written kernels read.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from vkcoop.sparse import Compressed1to2, Compressed2to4, decompress_1to2, decompress_2to4

from .layout import lane_order

#: torch's warnings about what these paths do on purpose: upload from read-only arrays (the bench's operands, shared
#: between cases, are never written), and measure the semi-structured tensor, which torch calls a prototype.
QUIET_TORCH_WARNINGS = ("The given NumPy array is not writable",
                        "The PyTorch API of SparseSemiStructuredTensor is in prototype stage")


def _torch():
    import warnings

    import torch  # imported lazily: vkcoop.cuda must import on machines without torch

    for message in QUIET_TORCH_WARNINGS:   # a repeated filter replaces its twin, so this may run every call
        warnings.filterwarnings("ignore", message=message, category=UserWarning)
    return torch


def to_torch(array: np.ndarray, device: str = "cuda"):
    """numpy (incl. ml_dtypes bfloat16, float8_e4m3fn and float8_e5m2) -> torch tensor on ``device``, bits
    preserved."""
    torch = _torch()
    array = np.ascontiguousarray(array)
    if array.dtype == np.uint32:
        return torch.from_numpy(array.view(np.int32)).to(device)
    if array.dtype.itemsize == 2:
        target = torch.float16 if array.dtype == np.float16 else torch.bfloat16
        return torch.from_numpy(array.view(np.int16)).to(device).view(target)
    if array.dtype.name.startswith("float8"):   # torch names the 8-bit floats as ml_dtypes does
        return torch.from_numpy(array.view(np.uint8)).to(device).view(getattr(torch, array.dtype.name))
    return torch.from_numpy(array).to(device)


@dataclass
class DeviceSparse:
    """A structured-sparse A on the GPU.

    ``values`` [M][K/2] (the kept entries, in A's dtype), ``metadata`` (int32 holding the uint32 words: [M][K/32]
    for 2:4, [M][K/16] for 1:2), ``mma_metadata`` (the per-lane order of :mod:`vkcoop.cuda.layout` for A's type:
    [M/16][K/64][32] for 16- and 8-bit types, [M/16][K/32][32] for tf32; ``None`` when M or K don't allow it),
    ``dense`` [M][K], the pruned matrix for the baselines and the reference, and ``sparsity`` ("2:4" or "1:2").
    """

    values: object
    metadata: object
    mma_metadata: object
    dense: object
    shape: tuple[int, int] = field(default=(0, 0))
    sparsity: str = "2:4"

    @property
    def dtype(self):
        return self.values.dtype

    @classmethod
    def from_compressed(cls, compressed: Compressed2to4 | Compressed1to2, device: str = "cuda") -> "DeviceSparse":
        """Upload a :class:`vkcoop.sparse.Compressed2to4` (fp16, bf16, float8_e4m3fn, float8_e5m2, int8, uint8) or
        :class:`vkcoop.sparse.Compressed1to2` (tf32 in float32); a 2:4 float32 A has no CUDA kernel: TypeError."""
        if isinstance(compressed, Compressed1to2):
            sparsity, dense = "1:2", decompress_1to2(compressed)
        elif isinstance(compressed, Compressed2to4):
            sparsity, dense = "2:4", decompress_2to4(compressed)
            if compressed.dtype == np.float32:
                raise TypeError("the CUDA paths take a float32 (tf32) A 1:2 sparse (vkcoop.sparse.compress_1to2), "
                                "not 2:4")
        else:
            raise TypeError(f"compressed must be a Compressed2to4 or Compressed1to2, got {type(compressed).__name__}")
        m, k = compressed.shape
        reorder, k_multiple = lane_order(compressed.dtype)
        reordered = None
        if m % 16 == 0 and k % k_multiple == 0:
            reordered = to_torch(reorder(compressed.metadata), device)
        return cls(values=to_torch(compressed.values, device),
                   metadata=to_torch(compressed.metadata, device),
                   mma_metadata=reordered,
                   dense=to_torch(dense, device),
                   shape=(m, k), sparsity=sparsity)
