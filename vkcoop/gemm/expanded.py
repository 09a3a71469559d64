"""The 2:4 GEMM as two passes: A expanded from vkcoop's 2:4 format into a dense workspace, then the dense coopmat2
kernel (path ``vk-coopmat2-2:4-expand`` of ``vkcoop bench sparse``).

coopmat2 has no sparse MMA: every 2:4 kernel of this library multiplies dense tiles, and differs only in where A is
expanded. The decode-function kernel expands each element inside its tensor loads; the staged kernel expands a
tile on its way into shared memory, once per tile and K step. At compute-bound shapes that work sits in the
multiply loop and costs it 20 % or more (docs/gemm.md). Expanding once per call moves it out of the loop:
one memory-bound pass reads the 2:4 operand (0.56x of A's dense bytes) and writes A dense (1x), and the dense kernel
reads it back. That costs M x K x 2 bytes of device memory for the workspace and about 2.6x A's bytes of traffic,
which only pays where the multiply, not A's bytes, sets the time.
"""
from __future__ import annotations

import numpy as np

from .. import sparse as sparse24
from .launch import (CoopMat2Kernel, Dispatch, Launch, _u32, check_matrix, compressed_operands, padded_compressed,
                     padded_shape, whole_vector_rows)
from .types import GemmInputError, sparse24_types

DECOMPRESS_SHADER = "gemm/sparse24_decompress.comp"
DECOMPRESS_WORKGROUP = 256     # local_size_x of sparse24_decompress.comp
COLUMNS_PER_INVOCATION = 16    # one uvec4 of kept values, half a metadata word
MAX_GROUPS = 65535             # the shader strides over the rest


def decompress_dispatch(m: int, k: int) -> Dispatch:
    """The expansion pass of an M x K operand (K a multiple of 32), one invocation per 16 dense columns."""
    if k % sparse24.K_ALIGNMENT:
        raise GemmInputError(f"K={k}: the 2:4 format needs a multiple of {sparse24.K_ALIGNMENT}")
    vectors = m * k // COLUMNS_PER_INVOCATION
    groups = min(-(-vectors // DECOMPRESS_WORKGROUP), MAX_GROUPS)
    return Dispatch(DECOMPRESS_SHADER, {}, {}, ("values", "metadata", "A"), (groups, 1, 1), _u32(k, vectors))


class ExpandedSparse24Kernel:
    """C (fp32) = decompress(values, metadata) @ B in two dispatches: :func:`decompress_dispatch` writes A dense
    into a workspace buffer, then ``dense`` (a :class:`vkcoop.gemm.launch.CoopMat2Kernel` of the dtype's fp32
    accumulation, any tile, split-K or B layout) multiplies it."""

    def __init__(self, dtype: str, dense: CoopMat2Kernel):
        if not isinstance(dense, CoopMat2Kernel):
            raise GemmInputError(f"the expanded 2:4 path runs the direct coopmat2 kernel, not {dense.name}")
        self.types = sparse24_types(dtype)
        if dense.types != self.types:
            raise GemmInputError(f"the dense kernel computes {dense.types.key}; {dtype} 2:4 needs {self.types.key}")
        self.dtype, self.dense, self.tile = dtype, dense, dense.tile
        self.b_column_major = dense.b_column_major
        self.name = f"coopmat2 2:4 expanded {dtype} {dense.tile.label()}{' Bcol' if self.b_column_major else ''}"

    def store_b(self, b: np.ndarray) -> np.ndarray:
        return self.dense.store_b(b)

    def template_launch(self) -> Launch:
        k, dtype = sparse24.K_ALIGNMENT, self.types.input_dtype
        b = np.zeros((1, k) if self.b_column_major else (k, 1), dtype)
        return self.launch(np.zeros((1, k // 2), dtype), np.zeros((1, 1), np.uint32), b)

    def launch(self, values, metadata, b) -> Launch:
        """values [M][K/2] and metadata [M][K/32] uint32 (vkcoop.sparse format), B in the dense kernel's layout
        (:meth:`store_b`). The workspace "A" [M][K] is an output: the first dispatch writes it, the GEMM reads it."""
        values, metadata, m, k = compressed_operands(values, metadata, self.types.input_dtype)
        b = check_matrix("B", b, self.types.input_dtype)
        n = self.dense._check_b(b, k)
        view = None
        if self.dense.pad_to_tiles and not self.dense.aligned(m, n, k):
            # As the dense kernel pads (CoopMat2Kernel.launch): zero values expand to zeros under any valid metadata.
            view, (m, n, k) = (m, n), padded_shape(self.tile, m, n, k, sparse24.K_ALIGNMENT)
            values, metadata = padded_compressed(values, metadata, m, k)
            b = self.dense.padded_b(b, n, k)
        b = whole_vector_rows(b, self.types.elements_per_16_bytes)
        gemm = self.dense.launch_over({"A": None, "B": b}, m, n, k)
        outputs = {"A": ((m, k), np.dtype(np.uint16)), **gemm.outputs}   # 16-bit elements, written as uvec4
        return Launch([decompress_dispatch(m, k), *gemm.dispatches], {"values": values, "metadata": metadata, "B": b},
                      outputs, gemm.result, gemm.shape, view)


__all__ = ["DECOMPRESS_SHADER", "decompress_dispatch", "ExpandedSparse24Kernel"]
