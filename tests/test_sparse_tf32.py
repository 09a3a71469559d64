"""The 1:2 format of tf32 (fp32 storage) for wgmma.mma_async.sp m64nNk16."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vkcoop.sparse import (Compressed1to2, SparseFormatError, SparseTypeError, check_1to2, compress_1to2,
                           decompress_1to2, metadata_nibbles, prune_1to2, validate_metadata_1to2)

#: PTX ISA "Sparse matrix storage" (wgmma.mma_async.sp, .tf32): the only meaningful 4-bit indices.
PTX_TF32_NIBBLES = {0b0100, 0b1110}


def _bits(a: np.ndarray) -> bytes:
    return a.view(np.uint32).tobytes()


def _nibble_of_halves(kept_second: bool) -> int:
    """The tf32 chunk read as four 16-bit halves, two per element: the 2:4 nibble idx0 | idx1 << 2 of the two
    halves of the kept element."""
    low_half = 2 if kept_second else 0
    return low_half | (low_half + 1) << 2


def test_the_two_nibbles_are_the_2to4_nibbles_of_the_halves():
    assert {_nibble_of_halves(False), _nibble_of_halves(True)} == PTX_TF32_NIBBLES
    assert _nibble_of_halves(False) == 0b0100 and _nibble_of_halves(True) == 0b1110


def test_compress_layout_by_hand():
    """Chunk j (columns 2j, 2j+1) is nibble j % 8 of word j // 8; 0b0100 keeps the first, 0b1110 the second."""
    keep_second = [False, True, True, False, True, False, False, False,
                   True, True, True, True, False, True, False, True]
    dense = np.zeros((1, 32), dtype=np.float32)
    for j, second in enumerate(keep_second):
        dense[0, 2 * j + second] = j + 1.5
    c = compress_1to2(dense, accept_sparse=True)
    assert c.values.shape == (1, 16) and c.metadata.shape == (1, 2) and c.shape == (1, 32)
    assert c.values[0].tolist() == [j + 1.5 for j in range(16)]
    words = [0, 0]
    for j, second in enumerate(keep_second):
        words[j // 8] |= _nibble_of_halves(second) << (4 * (j % 8))
    assert c.metadata[0].tolist() == words


def test_pruning_keeps_the_larger_magnitude_ties_to_the_first():
    dense = np.zeros((1, 16), dtype=np.float32)
    dense[0, :10] = [1, -3, 2, 2, -0.5, 0.5, 0, 0, np.inf, -np.inf]
    assert prune_1to2(dense)[0, :10].tolist() == [0, -3, 2, 0, -0.5, 0, 0, 0, np.inf, 0]


def test_a_nan_is_refused_with_its_place():
    dense = np.ones((2, 32), dtype=np.float32)
    dense[1, 17] = np.nan
    for prune in (prune_1to2, compress_1to2):
        with pytest.raises(SparseFormatError, match=r"NaN \(first at row 1, column 17\); 1:2 pruning"):
            prune(dense)


def test_accept_sparse_refuses_two_nonzeros_in_a_chunk():
    dense = np.zeros((3, 16), dtype=np.float32)
    dense[2, 6:8] = [1, -1]
    with pytest.raises(SparseFormatError, match=r"not 1:2 sparse: 1 chunk\(s\).*row 2, columns 6\.\.7"):
        compress_1to2(dense, accept_sparse=True)
    with pytest.raises(SparseFormatError, match="not 1:2"):
        check_1to2(dense)
    dense[2, 6] = 0
    assert _bits(decompress_1to2(compress_1to2(dense, accept_sparse=True))) == _bits(dense)


def test_negative_zero_survives_round_trip():
    dense = np.zeros((1, 16), dtype=np.float32)
    dense[0, 1] = -0.0                     # a chunk of two zeros: as-is mode keeps the signed one
    dense[0, 2] = -0.0
    back = decompress_1to2(compress_1to2(dense, accept_sparse=True))
    assert np.signbit(back[0, 1]) and np.signbit(back[0, 2])
    assert np.signbit(decompress_1to2(compress_1to2(dense))[0, 2])     # magnitude mode: tie, the first


@pytest.mark.parametrize("bad, error, message", [
    (np.ones((2, 24), np.float32), SparseFormatError, r"K=24 columns; K must be a multiple of 16 \(one wgmma"),
    (np.ones((2, 32), np.float16), SparseTypeError, r"float16; the 1:2 \(tf32 in fp32 storage\) format"),
    (np.ones(32, np.float32), SparseFormatError, "2-D"),
    (np.ones((0, 32), np.float32), SparseFormatError, "empty"),
    ([[1.0] * 16], SparseTypeError, "numpy array")])
def test_bad_inputs_get_one_line_errors(bad, error, message):
    with pytest.raises(error, match=message) as caught:
        compress_1to2(bad)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("nibble", sorted(set(range(16)) - PTX_TF32_NIBBLES))
def test_every_other_nibble_is_refused_where_it_is(nibble):
    c = compress_1to2(np.ones((2, 32), dtype=np.float32))
    bad = c.metadata.copy()
    bad[1, 1] = (bad[1, 1] & ~np.uint32(0xF << 20)) | np.uint32(nibble << 20)
    with pytest.raises(SparseFormatError, match=rf"row 1, word 1, nibble 5 \(columns 26\.\.27\): 0b{nibble:04b}"):
        validate_metadata_1to2(bad)
    with pytest.raises(SparseFormatError, match="invalid 1:2 nibble"):
        decompress_1to2(_unchecked(c.values, bad))


def _unchecked(values, metadata) -> Compressed1to2:
    """A pair built around the constructor's check, to show decompress checks again."""
    pair = object.__new__(Compressed1to2)
    object.__setattr__(pair, "values", values)
    object.__setattr__(pair, "metadata", metadata)
    return pair


def test_compressed_pairs_are_checked_when_built():
    c = compress_1to2(np.ones((2, 32), dtype=np.float32))
    with pytest.raises(SparseFormatError, match=r"needs \[M\]\[K/16\]"):
        Compressed1to2(c.values, c.metadata[:, :1].copy())
    with pytest.raises(SparseTypeError, match="stores float32"):
        Compressed1to2(c.values.astype(np.float16), c.metadata)
    with pytest.raises(SparseTypeError, match="uint32"):
        Compressed1to2(c.values, c.metadata.astype(np.int32))
    with pytest.raises(SparseTypeError, match="compressed must be a Compressed1to2"):
        decompress_1to2((c.values, c.metadata))
    with pytest.raises(SparseTypeError, match="accept_sparse must be True or False"):
        compress_1to2(np.ones((2, 32), dtype=np.float32), accept_sparse="yes")


@settings(max_examples=150, deadline=None)
@given(st.integers(1, 5), st.integers(1, 3), st.integers(0, 2**32 - 1))
def test_property_round_trip_is_bit_exact_and_keeps_the_larger(m, steps, seed):
    rng = np.random.default_rng(seed)
    dense = rng.integers(0, 2**32, size=(m, 16 * steps), dtype=np.uint32).view(np.float32)
    specials = np.array([0.0, -0.0, np.inf, -np.inf, 1.0, -1.0, 1e-45], dtype=np.float32)
    picks = rng.random(dense.shape) < 0.5
    dense[picks] = rng.choice(specials, size=int(picks.sum()))
    dense[np.isnan(dense)] = 0
    compressed, pruned = compress_1to2(dense, return_pruned=True)
    pruned_again, mask = prune_1to2(dense, return_mask=True)
    assert _bits(decompress_1to2(compressed)) == _bits(pruned) == _bits(pruned_again)
    assert (mask.reshape(m, -1, 2).sum(-1) == 1).all()
    nibbles = metadata_nibbles(compressed.metadata)
    magnitude = np.abs(dense.astype(np.float64)).reshape(m, -1, 2)
    second = magnitude[..., 1] > magnitude[..., 0]             # ties keep the first
    assert np.array_equal(nibbles, np.where(second, 0b1110, 0b0100))
    assert np.array_equal(mask.reshape(m, -1, 2)[..., 1], second)
    check_1to2(pruned)
    assert _bits(decompress_1to2(compress_1to2(pruned, accept_sparse=True))) == _bits(pruned)
