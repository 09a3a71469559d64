"""The shared 2:4 format: pruning, compression, metadata validity, round trips."""
import random

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import vkcoop
from vkcoop import sparse
from vkcoop.sparse import (Compressed2to4, SparseFormatError, check_2to4, compress_2to4,
                           decompress_2to4, metadata_nibbles, prune_2to4, validate_metadata)

DTYPES = [np.float16, ml_dtypes.bfloat16, np.float32]
# Exactly representable in every supported dtype.
EXACT_VALUES = np.array([-2.0, -1.0, -0.5, 0.0, 0.5, 1.0, 2.0, 4.0])


def _random_exact(rng, shape, dtype):
    return rng.choice(EXACT_VALUES, size=shape).astype(dtype)


def _bits(a):
    return a.view(np.uint32 if a.dtype.itemsize == 4 else np.uint16)


@pytest.mark.parametrize("dtype", DTYPES)
def test_prune_keeps_two_largest_magnitudes_per_chunk(dtype):
    row = np.array([[1, -3, 2, 0.5, 0, 0, 0, 0.25, -4, 4, 1, 1, 0.5, 0.5, 0.5, 0.5] * 2],
                   dtype=dtype)
    expected = np.array([[0, -3, 2, 0, 0, 0, 0, 0.25, -4, 4, 0, 0, 0.5, 0.5, 0, 0] * 2],
                        dtype=dtype)
    # chunk 2 (0,0,0,0.25): 0.25 plus the lowest-index zero; ties (chunk 4) go to the lower index
    assert np.array_equal(prune_2to4(row), expected)


@pytest.mark.parametrize("dtype", DTYPES)
def test_compress_layout_by_hand(dtype):
    # chunk j keeps positions (0,2) -> nibble 0b1000, (1,3) -> 0b1101, (0,1) -> 0b0100, (2,3) -> 0b1110
    chunk_patterns = [(0, 2), (1, 3), (0, 1), (2, 3)] * 2
    dense = np.zeros((1, 32), dtype=dtype)
    for j, (i0, i1) in enumerate(chunk_patterns):
        dense[0, 4 * j + i0] = j + 1
        dense[0, 4 * j + i1] = -(j + 1)
    c = compress_2to4(dense, accept_sparse=True)
    assert c.values.dtype == np.dtype(dtype) and c.values.shape == (1, 16)
    assert c.metadata.dtype == np.uint32 and c.metadata.shape == (1, 1)
    expected_values = [v for j in range(8) for v in (j + 1, -(j + 1))]
    assert np.array_equal(c.values[0].astype(np.float32), expected_values)
    codes = [0b1000, 0b1101, 0b0100, 0b1110] * 2
    expected_word = sum(code << (4 * j) for j, code in enumerate(codes))
    assert int(c.metadata[0, 0]) == expected_word


@pytest.mark.parametrize("dtype", DTYPES)
def test_chunks_with_fewer_than_two_nonzeros_get_valid_codes(dtype):
    dense = np.zeros((3, 64), dtype=dtype)
    dense[1, 3] = 1.0        # one nonzero at the last position
    dense[2, 0::4] = 0.5     # one nonzero at the first position of every chunk
    for accept in (False, True):
        c = compress_2to4(dense, accept_sparse=accept)
        nibbles = metadata_nibbles(c.metadata)
        assert not np.isin(nibbles, sparse.INVALID_NIBBLES).any()
        assert ((nibbles & 3) < (nibbles >> 2)).all()
        assert _bits(decompress_2to4(c)).tobytes() == _bits(dense).tobytes()


@pytest.mark.parametrize("dtype", DTYPES)
def test_negative_zero_survives_round_trip(dtype):
    dense = np.zeros((1, 32), dtype=dtype)
    dense[0, 0] = -0.0
    dense[0, 2] = 1.0
    dense[0, 5] = -0.0
    dense[0, 6] = -0.0
    for accept in (False, True):
        c = compress_2to4(dense, accept_sparse=accept)
        back = decompress_2to4(c)
        assert np.signbit(back[0, 0].astype(np.float32)), f"accept_sparse={accept}"
        if accept:  # as-is mode keeps zeros with the sign bit first
            assert np.signbit(back[0, 5].astype(np.float32)) and np.signbit(back[0, 6].astype(np.float32))
        assert _bits(back).tobytes() == _bits(prune_2to4(dense, accept_sparse=accept)).tobytes()


def test_accept_sparse_rejects_dense_chunk_with_location():
    dense = np.zeros((4, 32), dtype=np.float16)
    dense[2, 8:11] = 1.0
    with pytest.raises(SparseFormatError, match=r"row 2, columns 8\.\.11"):
        compress_2to4(dense, accept_sparse=True)
    with pytest.raises(SparseFormatError, match="not 2:4"):
        check_2to4(dense)
    check_2to4(prune_2to4(dense))


def test_bad_inputs_raise_clear_errors():
    with pytest.raises(SparseFormatError, match="multiple of 32"):
        compress_2to4(np.ones((2, 48), dtype=np.float16))
    with pytest.raises(TypeError, match="int32"):
        compress_2to4(np.ones((2, 32), dtype=np.int32))
    with pytest.raises(SparseFormatError, match="2-D"):
        compress_2to4(np.ones(32, dtype=np.float16))
    with pytest.raises(TypeError, match="numpy array"):
        compress_2to4([[1.0] * 32])
    with pytest.raises(SparseFormatError, match="NaN"):
        prune_2to4(np.full((1, 32), np.nan, dtype=np.float32))


@pytest.mark.parametrize("dtype", DTYPES)
def test_a_nan_is_refused_with_its_place_in_every_dtype(dtype):
    """NaN is found on the sign-less bits (above infinity's), whatever the type, and named where it first is."""
    dense = np.ones((3, 64), dtype=dtype)
    dense[1, 37] = -np.nan
    dense[2, 5] = np.nan
    dense[0, 3] = np.inf   # infinities are magnitudes, not NaN
    for prune in (prune_2to4, compress_2to4):
        with pytest.raises(SparseFormatError, match=r"dense holds NaN \(first at row 1, column 37\)"):
            prune(dense)
    dense[1, 37] = dense[2, 5] = 0
    assert prune_2to4(dense)[0, 3] == np.inf


@pytest.mark.parametrize("code", [0b0000, 0b0101, 0b1010, 0b1111, 0b0001, 0b1011])
def test_invalid_metadata_detected(code):
    c = compress_2to4(np.ones((2, 64), dtype=np.float16))
    bad = c.metadata.copy()
    bad[1, 1] = (bad[1, 1] & ~np.uint32(0xF << 12)) | np.uint32(code << 12)
    with pytest.raises(SparseFormatError, match=r"row 1, word 1, nibble 3"):
        validate_metadata(bad)
    with pytest.raises(SparseFormatError, match="invalid nibble"):
        decompress_2to4(Compressed2to4(c.values, bad))


def test_compressed_shape_and_dtype_checks():
    c = compress_2to4(np.ones((4, 64), dtype=np.float16))
    with pytest.raises(SparseFormatError, match=r"needs \[M\]\[K/32\]"):
        Compressed2to4(c.values, c.metadata[:, :1].copy()).validate()
    with pytest.raises(TypeError, match="uint32"):
        validate_metadata(c.metadata.astype(np.int64))
    assert c.shape == (4, 64)
    c.validate()


@st.composite
def dense_matrices(draw):
    dtype = draw(st.sampled_from(DTYPES))
    m = draw(st.integers(1, 6))
    k = 32 * draw(st.integers(1, 3))
    elements = st.sampled_from([-4.0, -1.0, -0.5, -0.0, 0.0, 0.25, 0.5, 1.0, 3.0])
    data = draw(hnp.arrays(np.float32, (m, k), elements=elements))
    return data.astype(dtype)


@settings(max_examples=150, deadline=None)
@given(dense_matrices())
def test_property_round_trip_and_validity(dense):
    pruned, mask = prune_2to4(dense, return_mask=True)
    c = compress_2to4(dense)
    validate_metadata(c.metadata)
    assert (mask.reshape(dense.shape[0], -1, 4).sum(-1) == 2).all()
    assert _bits(decompress_2to4(c)).tobytes() == _bits(pruned).tobytes()
    again_c, again_pruned = compress_2to4(dense, return_pruned=True)    # one prune for both
    assert _bits(again_pruned).tobytes() == _bits(pruned).tobytes()
    assert again_c.metadata.tobytes() == c.metadata.tobytes() and _bits(again_c.values).tobytes() == \
        _bits(c.values).tobytes()
    # the kept entries are never smaller in magnitude than the dropped ones of their chunk
    mag = np.abs(dense.astype(np.float32)).reshape(dense.shape[0], -1, 4)
    m4 = mask.reshape(mag.shape)
    kept_min = np.where(m4, mag, np.inf).min(-1)
    dropped_max = np.where(~m4, mag, -np.inf).max(-1)
    assert (kept_min >= dropped_max).all()
    # an already-2:4 matrix is taken as it is (numerically) and pruning is idempotent
    again = compress_2to4(pruned, accept_sparse=True)
    assert np.array_equal(decompress_2to4(again).astype(np.float32), pruned.astype(np.float32))
    assert _bits(prune_2to4(pruned)).tobytes() == _bits(pruned).tobytes() or \
        np.array_equal(prune_2to4(pruned).astype(np.float32), pruned.astype(np.float32))


#: The six nibbles idx0 | idx1 << 2 with idx0 < idx1.
VALID_NIBBLES = [i0 | i1 << 2 for i0 in range(4) for i1 in range(4) if i0 < i1]


def _word(nibbles, replace_at, replacement) -> int:
    """A metadata word from eight valid nibbles, one of them optionally replaced by any value. A uniform uint32
    is valid with p = (6/16)**8 < 0.0004, so a test drawing those almost never reaches its valid branch."""
    nibbles = list(nibbles)
    if replace_at is not None:
        nibbles[replace_at] = replacement
    return sum(n << (4 * j) for j, n in enumerate(nibbles))


def _valid_by_rule(word: int) -> bool:
    return all((n & 3) < (n >> 2) for n in ((word >> (4 * j)) & 0xF for j in range(8)))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(VALID_NIBBLES), min_size=8, max_size=8), st.none() | st.integers(0, 7),
       st.integers(0, 15))
def test_property_metadata_word_validity_matches_nibble_rule(nibbles, replace_at, replacement):
    word = _word(nibbles, replace_at, replacement)
    metadata = np.array([[word]], dtype=np.uint32)
    if _valid_by_rule(word):
        validate_metadata(metadata)
    else:
        with pytest.raises(SparseFormatError, match="invalid nibble"):
            validate_metadata(metadata)


def test_metadata_words_reach_both_branches():
    rng = random.Random(0)
    valid = [_valid_by_rule(_word([rng.choice(VALID_NIBBLES) for _ in range(8)], rng.choice([None, *range(8)]),
                                  rng.randrange(16))) for _ in range(300)]
    assert 60 < sum(valid) < 240


def test_compressed_pairs_are_checked_when_built():
    c = compress_2to4(np.ones((2, 64), dtype=np.float16))
    with pytest.raises(SparseFormatError, match=r"values must be 2-D \[M\]\[K/2\]"):
        Compressed2to4(c.values.reshape(-1), c.metadata)  # used to fail later with IndexError
    with pytest.raises(SparseFormatError, match="uint32"):
        Compressed2to4(c.values, c.metadata.astype(np.int32))
    with pytest.raises(sparse.SparseTypeError, match="compressed must be a Compressed2to4"):
        decompress_2to4((c.values, c.metadata))
    with pytest.raises(sparse.SparseTypeError, match="accept_sparse must be True or False"):
        compress_2to4(np.ones((2, 64), dtype=np.float16), accept_sparse="no")
    with pytest.raises(sparse.SparseTypeError, match="return_pruned must be True or False"):
        compress_2to4(np.ones((2, 64), dtype=np.float16), return_pruned=1)
    with pytest.raises(sparse.SparseTypeError, match="metadata must be a numpy array"):
        metadata_nibbles([[1]])
    assert issubclass(SparseFormatError, vkcoop.Error) and issubclass(sparse.SparseTypeError, TypeError)


def test_the_kept_positions_are_those_a_stable_sort_puts_first():
    from vkcoop import sparse as sparse_module

    rng = np.random.default_rng(7)
    for trial in range(40):
        priority = rng.integers(-2, 3, size=(33, 17, 4)).astype(np.float32)   # many ties
        if trial % 4 == 0:
            priority[...] = 0.0
        first_two = np.argsort(priority, axis=-1, kind="stable")[..., :2]
        expected = (1 << first_two[..., 0]) | (1 << first_two[..., 1])     # the mask of the two kept positions
        assert (sparse_module._first_two_code(priority) == expected).all()


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(DTYPES), st.integers(0, 2**32 - 1))
def test_pruning_by_bit_patterns_keeps_what_a_stable_sort_of_magnitudes_keeps(dtype, seed):
    """Pruning orders magnitudes by their sign-less bit patterns; on any bits (no NaN) with ties, zeros of both
    signs, subnormals and infinities it must keep what a stable sort of float64 magnitudes keeps."""
    dtype = np.dtype(dtype)
    unsigned = np.dtype(f"u{dtype.itemsize}")
    rng = np.random.default_rng(seed)
    special = np.array([0.0, -0.0, np.inf, -np.inf, 1.0, -1.0, np.finfo(np.float16).tiny / 4], dtype=dtype)
    dense = rng.integers(0, np.iinfo(unsigned).max, size=(6, 64), dtype=unsigned, endpoint=True).view(dtype)
    picks = rng.random(dense.shape) < 0.5
    dense[picks] = rng.choice(special, size=int(picks.sum()))
    sign_less = dense.view(unsigned) & unsigned.type((1 << (8 * dtype.itemsize - 1)) - 1)
    dense[sign_less > np.array(np.inf, dtype=dtype).view(unsigned)] = 0   # the NaNs
    magnitude = np.abs(dense.astype(np.float64)).reshape(6, 16, 4)
    expected = np.sort(np.argsort(-magnitude, axis=-1, kind="stable")[..., :2], axis=-1)
    nibbles = metadata_nibbles(compress_2to4(dense).metadata)
    assert np.array_equal(np.stack([nibbles & 3, nibbles >> 2], axis=-1), expected)
    mask = prune_2to4(dense, return_mask=True)[1].reshape(6, 16, 4)
    assert np.array_equal(np.sort(np.argwhere(mask)[:, 2].reshape(6, 16, 2), axis=-1), expected)
