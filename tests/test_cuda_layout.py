"""The per-lane metadata reordering the CUDA kernels read, checked on the CPU against
the PTX ISA's description of mma.sp / wgmma.sp m*k32 half-precision metadata."""
import numpy as np
import pytest

from vkcoop.cuda.layout import lane_metadata_reference, reorder_metadata_for_mma
from vkcoop.sparse import compress_2to4, prune_2to4


def _lane_word_from_mask(mask: np.ndarray, mb: int, kb: int, lane: int) -> int:
    """PTX rule, from the prune mask alone: lane 4g+t serves selector s = t>>1; its low
    16 bits describe row g, its high 16 bits row g+8 (rows of the 16-row block), each for
    the 16 K-columns 16*(t&1)..+15 of k32 step s, one nibble idx0|idx1<<2 per 4 columns."""
    g, t = lane >> 2, lane & 3
    k_base = 64 * kb + 32 * (t >> 1) + 16 * (t & 1)
    word = 0
    for r, row in enumerate((16 * mb + g, 16 * mb + g + 8)):
        for j in range(4):
            kept = np.flatnonzero(mask[row, k_base + 4 * j: k_base + 4 * j + 4])
            assert len(kept) == 2
            word |= (int(kept[0]) | int(kept[1]) << 2) << (16 * r + 4 * j)
    return word


@pytest.mark.parametrize("m,k", [(16, 64), (32, 192), (48, 128)])
def test_reorder_matches_ptx_lane_layout(m, k):
    rng = np.random.default_rng(m * k)
    dense = rng.standard_normal((m, k)).astype(np.float16)
    _, mask = prune_2to4(dense, return_mask=True)
    reordered = reorder_metadata_for_mma(compress_2to4(dense).metadata)
    assert reordered.shape == (m // 16, k // 64, 32) and reordered.dtype == np.uint32
    for mb in range(m // 16):
        for kb in range(k // 64):
            for lane in range(32):
                assert int(reordered[mb, kb, lane]) == _lane_word_from_mask(mask, mb, kb, lane), (mb, kb, lane)


def test_slow_reference_agrees_with_mask_rule():
    rng = np.random.default_rng(7)
    dense = rng.standard_normal((32, 128)).astype(np.float32)
    _, mask = prune_2to4(dense, return_mask=True)
    meta = compress_2to4(dense).metadata
    for lane in range(32):
        assert lane_metadata_reference(meta, 1, 1, lane) == _lane_word_from_mask(mask, 1, 1, lane)


@pytest.mark.parametrize("shape, dtype, error, message", [
    ((8, 2), np.uint32, ValueError, "M % 16"), ((16, 3), np.uint32, ValueError, "K % 64"),
    ((16, 2), np.int64, TypeError, "uint32")])
def test_reorder_rejects_bad_shapes(shape, dtype, error, message):
    with pytest.raises(error, match=message):
        reorder_metadata_for_mma(np.zeros(shape, dtype=dtype))
