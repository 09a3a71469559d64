"""The per-lane metadata reordering the CUDA kernels read, checked on the CPU against
the PTX ISA's description of mma.sp / wgmma.sp m*k32 half-precision metadata, and of
wgmma.sp m64nNk16 tf32 and m64nNk64 8-bit metadata."""
import ml_dtypes
import numpy as np
import pytest

from vkcoop.cuda.layout import (lane_metadata_reference, reorder_metadata_8bit_for_wgmma, reorder_metadata_for_mma,
                                reorder_metadata_tf32_for_wgmma)
from vkcoop.sparse import compress_1to2, compress_2to4, prune_1to2, prune_2to4


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


# wgmma.mma_async.sp with the other A types (PTX ISA "Matrix fragments for warpgroup-level multiply-accumulate
# operation with sparse matrix A"). The rules below are read off the metadata figures, per (row of the warp's
# 16, chunk of the block): which lane holds the chunk's nibble, and at which bit; `_expected_lanes` places every
# chunk's nibble (built from the prune mask, not from the metadata) there, and checks no place is taken twice.

def _tf32_place(row: int, chunk: int) -> tuple[int, int]:
    """Figure sparse-wgmma-metadata-64n16-tf32, over 32 columns = two k16 steps (selector 0, then 1): chunk j
    of 2 columns is in step s = j // 8; its pair of lanes is 4g + 2s (g = row % 8), the first holding columns
    0..7 of the step and the second 8..15; bits 0..15 for row g, 16..31 for row g + 8, 4 bits a chunk."""
    step, within = divmod(chunk, 8)
    lane = 4 * (row % 8) + 2 * step + within // 4
    return lane, 16 * (row // 8) + 4 * (within % 4)


def _8bit_place(row: int, chunk: int) -> tuple[int, int]:
    """Figures sparse-wgmma-metadata-64n64-e4m3-e5m2-s8-u8-first32col / -last32col, over one k64 step (selector
    0, every lane): row g is in lane 4g (columns 0..31) and 4g + 2 (columns 32..63), row g + 8 in 4g + 1 and
    4g + 3; chunk j of 4 columns at bits 4 (j % 8) of its lane."""
    lane = 4 * (row % 8) + row // 8 + 2 * (chunk // 8)
    return lane, 4 * (chunk % 8)


def _tf32_nibble(kept: np.ndarray) -> int:
    return 0b1110 if kept[1] else 0b0100   # PTX "Sparse matrix storage", .tf32: the second or the first kept


def _2to4_nibble(kept: np.ndarray) -> int:
    first, second = np.flatnonzero(kept)
    return int(first) | int(second) << 2


def _expected_lanes(mask, chunk_width, k_block, place, nibble) -> np.ndarray:
    m, k = mask.shape
    chunks = k_block // chunk_width
    out = np.zeros((m // 16, k // k_block, 32), dtype=np.uint64)
    taken = np.zeros((m // 16, k // k_block, 32, 32), dtype=bool)
    for row in range(m):
        for chunk in range(k // chunk_width):
            kb, c = divmod(chunk, chunks)
            lane, bit = place(row % 16, c)
            assert not taken[row // 16, kb, lane, bit:bit + 4].any(), (row, chunk)
            taken[row // 16, kb, lane, bit:bit + 4] = True
            kept = mask[row, chunk * chunk_width:(chunk + 1) * chunk_width]
            out[row // 16, kb, lane] |= np.uint64(nibble(kept) << bit)
    return out


def _mismatches(reordered: np.ndarray, expected: np.ndarray) -> list:
    if reordered.shape != expected.shape:
        return [("shape", reordered.shape, expected.shape)]
    return [tuple(int(v) for v in at) for at in np.argwhere(reordered.astype(np.uint64) != expected)]


def _tf32_case(m, k, seed):
    dense = np.random.default_rng(seed).standard_normal((m, k)).astype(np.float32)
    _, mask = prune_1to2(dense, return_mask=True)
    return compress_1to2(dense).metadata, _expected_lanes(mask, 2, 32, _tf32_place, _tf32_nibble)


def _8bit_case(m, k, seed, dtype=np.int8):
    dense = np.random.default_rng(seed).integers(-100, 100, size=(m, k)).astype(dtype)
    _, mask = prune_2to4(dense, return_mask=True)
    return compress_2to4(dense).metadata, _expected_lanes(mask, 4, 64, _8bit_place, _2to4_nibble)


@pytest.mark.parametrize("m,k", [(16, 32), (32, 96), (64, 64)])
def test_tf32_reorder_matches_the_figure_lane_by_lane(m, k):
    metadata, expected = _tf32_case(m, k, m + k)
    reordered = reorder_metadata_tf32_for_wgmma(metadata)
    assert reordered.shape == (m // 16, k // 32, 32) and reordered.dtype == np.uint32
    assert _mismatches(reordered, expected) == []
    assert (expected != 0).all()                        # every lane holds metadata: both selectors are used


@pytest.mark.parametrize("m,k,dtype", [(16, 64, np.int8), (32, 192, np.uint8), (64, 128, ml_dtypes.float8_e4m3fn)])
def test_8bit_reorder_matches_the_figures_lane_by_lane(m, k, dtype):
    metadata, expected = _8bit_case(m, k, m * k, dtype)
    reordered = reorder_metadata_8bit_for_wgmma(metadata)
    assert reordered.shape == (m // 16, k // 64, 32) and reordered.dtype == np.uint32
    assert _mismatches(reordered, expected) == []


def test_the_lane_checks_catch_planted_faults():
    """Wrong layouts of the right shape: the f16 lane-pair rule on 8-bit metadata, the 8-bit rule on tf32
    metadata, and each right rule with its rows g and g + 8 (or its two selectors) swapped."""
    tf32_meta, tf32_expected = _tf32_case(32, 64, 1)
    int8_meta, int8_expected = _8bit_case(32, 128, 2)
    good_tf32, good_8bit = reorder_metadata_tf32_for_wgmma(tf32_meta), reorder_metadata_8bit_for_wgmma(int8_meta)
    faults = {
        "f16 rule on 8-bit": (reorder_metadata_for_mma(int8_meta), int8_expected),
        "8-bit rule on tf32": (reorder_metadata_8bit_for_wgmma(tf32_meta), tf32_expected),
        "8-bit rows g, g+8 swapped": (good_8bit.reshape(2, 2, 8, 2, 2)[..., ::-1].reshape(2, 2, 32), int8_expected),
        "tf32 row halves swapped": (((good_tf32 >> 16) | (good_tf32 << 16)).astype(np.uint32), tf32_expected),
        "tf32 selectors swapped": (good_tf32.reshape(2, 2, 8, 2, 2)[:, :, :, ::-1].reshape(2, 2, 32), tf32_expected),
    }
    for name, (reordered, expected) in faults.items():
        assert _mismatches(reordered, expected), name


@pytest.mark.parametrize("reorder, shape, message", [
    (reorder_metadata_tf32_for_wgmma, (16, 3), r"K/16=3 words per row; the tf32 wgmma.sp layout needs K % 32"),
    (reorder_metadata_tf32_for_wgmma, (8, 2), "M % 16"),
    (reorder_metadata_8bit_for_wgmma, (16, 1), r"K/32=1 words per row; the 8-bit wgmma.sp layout needs K % 64"),
    (reorder_metadata_8bit_for_wgmma, (24, 2), "M % 16")])
def test_the_other_reorders_reject_bad_shapes(reorder, shape, message):
    with pytest.raises(ValueError, match=message):
        reorder(np.zeros(shape, dtype=np.uint32))
    with pytest.raises(TypeError, match="uint32"):
        reorder(np.zeros(shape, dtype=np.int32))
