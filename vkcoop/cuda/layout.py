"""Host-side (numpy) reordering of the structured-sparse metadata (``vkcoop.sparse``) into the
per-lane layout the CUDA kernels load with one 32-bit read per lane.  Runs once, outside any timed region.

PTX ISA background (section 9.7.14.6, "Sparse matrix storage" and the m16n8k32
.f16/.bf16 metadata figure; section 9.7.15.6 for wgmma.mma_async.sp m64nNk32):
for half-precision A with K=32 per instruction, a 16-row slab needs
16 rows x 8 nibbles = 512 metadata bits, i.e. one 32-bit register from 16 of the 32
lanes.  The sparsity selector ``s`` (0 or 1) picks which pair of each group of four
lanes supplies it: lane ``4*g + t`` with ``t in {2s, 2s+1}`` holds

    bits  0..15: row g,     the 16 K-columns ``16*(t & 1) .. +15`` of the k32 step
    bits 16..31: row g + 8, the same 16 K-columns

(groupID ``g = lane >> 2``).  ``wgmma.mma_async.sp`` m64nNk32 uses the same rule per
warp of the warpgroup, warp ``w`` covering rows ``16w .. 16w+15`` of the 64-row tile.

Alternating the selector between the two k32 steps of a 64-wide K slice lets one
register serve both: lanes ``t = 0, 1`` describe k-step 0 (selector 0) and lanes
``t = 2, 3`` k-step 1 (selector 1).  The reordered array therefore holds, for every
16-row block ``mb`` and 64-column block ``kb``, the 32 lane words:

    reordered[mb][kb][4*g + t] = half(meta[16*mb + g][2*kb + (t >> 1)], t & 1)
                              | half(meta[16*mb + g + 8][2*kb + (t >> 1)], t & 1) << 16

where ``half(w, h)`` is the low (h = 0) or high (h = 1) 16 bits of a shared-format
metadata word.  A warp reads its 32 words with one coalesced 128-byte access.

The other types of ``wgmma.mma_async.sp`` (PTX ISA section 9.7.15.6.2, "Matrix fragments for
warpgroup-level multiply-accumulate operation with sparse matrix A"; each warp ``w`` again
covers rows ``16w .. 16w+15``):

* ``.tf32`` m64nNk16, figure ``sparse-wgmma-metadata-64n16-tf32``: 16 columns a row = eight
  1:2 chunks = one 32-bit word of ``vkcoop.sparse.compress_1to2``. The selector picks a lane
  pair as for f16, and lane ``4g + 2s + h`` holds row g (bits 0..15) and row g + 8 (bits
  16..31) for the columns ``8h .. 8h+7`` (four nibbles). That is the f16 rule on words of 16
  columns instead of 32, so :func:`reorder_metadata_tf32_for_wgmma` gives ``[M/16][K/32][32]``:
  selector 0 for the first k16 step of each 32 columns, 1 for the second.
* ``.e4m3``/``.e5m2``/``.s8``/``.u8`` m64nNk64, figures ``sparse-wgmma-metadata-64n64-e4m3-e5m2-
  s8-u8-first32col`` and ``-last32col``: 64 columns a row = sixteen 2:4 chunks = two words, and
  all four lanes of a group hold metadata (selector 0 only). Lane ``4g + t`` holds one whole
  word: row ``g + 8 (t & 1)``, columns ``32 (t >> 1) .. +31``, nibble j for columns
  ``32 (t >> 1) + 4j .. +3``. :func:`reorder_metadata_8bit_for_wgmma` gives ``[M/16][K/64][32]``:

    reordered[mb][kb][4*g + t] = meta[16*mb + g + 8*(t & 1)][2*kb + (t >> 1)]
"""
from __future__ import annotations

import numpy as np

#: K columns covered by one reordered block of 32 lane words (two k32 MMA steps).
K_BLOCK = 64
#: Rows covered by one reordered block (one m16 MMA / one warp's slice of m64).
M_BLOCK = 16
#: tf32 (1:2): K columns covered by one reordered block of 32 lane words (two m64nNk16 steps).
K_BLOCK_TF32 = 32
#: 8-bit (2:4): K columns covered by one reordered block of 32 lane words (one m64nNk64 step).
K_BLOCK_8BIT = 64


def reorder_metadata_for_mma(metadata: np.ndarray) -> np.ndarray:
    """Shared-format metadata ``[M][K/32]`` uint32 -> ``[M/16][K/64][32]`` uint32 (see module doc).

    Requires ``M % 16 == 0`` and ``K % 64 == 0``.
    """
    return _pair_lanes(_checked(metadata, 32, K_BLOCK, "the CUDA kernels need"))


def reorder_metadata_tf32_for_wgmma(metadata: np.ndarray) -> np.ndarray:
    """1:2 tf32 metadata ``[M][K/16]`` uint32 (``vkcoop.sparse.compress_1to2``) -> ``[M/16][K/32][32]`` uint32,
    the lane words of ``wgmma.mma_async.sp`` m64nNk16 ``.tf32``, selector 0 then 1 (see module doc).

    Requires ``M % 16 == 0`` and ``K % 32 == 0``.
    """
    return _pair_lanes(_checked(metadata, 16, K_BLOCK_TF32, "the tf32 wgmma.sp layout needs"))


def reorder_metadata_8bit_for_wgmma(metadata: np.ndarray) -> np.ndarray:
    """2:4 metadata of an 8-bit A ``[M][K/32]`` uint32 -> ``[M/16][K/64][32]`` uint32, the lane words of
    ``wgmma.mma_async.sp`` m64nNk64 ``.e4m3``/``.e5m2``/``.s8``/``.u8``, selector 0 (see module doc).

    Requires ``M % 16 == 0`` and ``K % 64 == 0``.
    """
    metadata = _checked(metadata, 32, K_BLOCK_8BIT, "the 8-bit wgmma.sp layout needs")
    m, words = metadata.shape
    # [mb][row-half r (g or g+8)][g][kb][word c of the step] -> [mb][kb][g][c][r]: lane = 4g + 2c + r
    lanes = metadata.reshape(m // 16, 2, 8, words // 2, 2).transpose(0, 3, 2, 4, 1)
    return np.ascontiguousarray(lanes).reshape(m // 16, words // 2, 32)


def lane_order(dtype) -> tuple:
    """``(reorder, k_block)`` for A of ``dtype``: the function that gives the kernels' per-lane metadata and the
    multiple of K it needs. 16-bit types: :func:`reorder_metadata_for_mma` (mma.sp, wgmma.sp k32); 8-bit:
    :func:`reorder_metadata_8bit_for_wgmma` (k64); float32 (tf32, 1:2): :func:`reorder_metadata_tf32_for_wgmma`
    (k16)."""
    itemsize = np.dtype(dtype).itemsize
    return {2: (reorder_metadata_for_mma, K_BLOCK), 1: (reorder_metadata_8bit_for_wgmma, K_BLOCK_8BIT),
            4: (reorder_metadata_tf32_for_wgmma, K_BLOCK_TF32)}[itemsize]


def _checked(metadata, columns_per_word: int, k_block: int, needs: str) -> np.ndarray:
    if not isinstance(metadata, np.ndarray) or metadata.dtype != np.uint32 or metadata.ndim != 2:
        raise TypeError(f"metadata must be a 2-D uint32 numpy array [M][K/{columns_per_word}]")
    m, words = metadata.shape
    if m % M_BLOCK:
        raise ValueError(f"metadata has M={m} rows; {needs} M % {M_BLOCK} == 0")
    if words % (k_block // columns_per_word):
        raise ValueError(f"metadata has K/{columns_per_word}={words} words per row; {needs} K % {k_block} == 0")
    return metadata


def _pair_lanes(metadata: np.ndarray) -> np.ndarray:
    """The lane-pair layout of 16-bit (k32) and tf32 (k16) metadata: two words a row per block (module doc)."""
    m, words = metadata.shape
    # [mb][row-half r (g or g+8)][g][kb][step s][half h] of 16-bit values
    halves = metadata.view(np.uint16).reshape(m // 16, 2, 8, words // 2, 2, 2)
    # target [mb][kb][g][s][h][r]: lane = 4g + 2s + h, r picks the low/high 16 bits
    lanes = halves.transpose(0, 3, 2, 4, 5, 1)
    if not np.little_endian:  # pragma: no cover
        raise RuntimeError("the 16-bit view assumes a little-endian host")
    return np.ascontiguousarray(lanes).view(np.uint32).reshape(m // 16, words // 2, 32)


def lane_metadata_reference(metadata: np.ndarray, mb: int, kb: int, lane: int) -> int:
    """One lane word spelled out the slow way, straight from the PTX description (for tests)."""
    g, t = lane >> 2, lane & 3
    step, half = t >> 1, t & 1
    word_col = 2 * kb + step
    value = 0
    for r, row in enumerate((16 * mb + g, 16 * mb + g + 8)):
        for j in range(4):  # four chunks of 4 columns = the 16 columns of this half
            chunk = 8 * word_col + 4 * half + j  # chunk index along K (4 columns each)
            nibble = (int(metadata[row, chunk // 8]) >> (4 * (chunk % 8))) & 0xF
            value |= nibble << (16 * r + 4 * j)
    return value
