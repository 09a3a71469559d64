"""The 2:4 format with the 8-bit A types of wgmma.mma_async.sp m64nNk64: e4m3, e5m2, s8, u8."""
import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vkcoop.sparse import (INVALID_NIBBLES, Compressed2to4, SparseFormatError, SparseTypeError, check_2to4,
                           compress_2to4, decompress_2to4, k_alignment, metadata_nibbles, prune_2to4,
                           validate_compressed)

E4M3, E5M2 = np.dtype(ml_dtypes.float8_e4m3fn), np.dtype(ml_dtypes.float8_e5m2)
DTYPES8 = [E4M3, E5M2, np.dtype(np.int8), np.dtype(np.uint8)]
FLOATS8 = [E4M3, E5M2]


def _bytes(a: np.ndarray) -> bytes:
    return a.view(np.uint8).tobytes()


def _random_bytes(rng, shape, dtype) -> np.ndarray:
    """Any bit pattern of ``dtype`` but NaN (the NaN patterns replaced by zero)."""
    dense = rng.integers(0, 256, size=shape, dtype=np.uint8).view(dtype)
    if dtype in FLOATS8:
        dense[np.isnan(dense)] = 0
    return dense


def _magnitude(dense: np.ndarray) -> np.ndarray:
    return np.abs(dense.astype(np.float64))


@pytest.mark.parametrize("dtype", DTYPES8)
def test_compress_layout_by_hand(dtype):
    """16 chunks of 4 over the 64 columns of one k64 step; nibble j of word c is idx0 | idx1 << 2 of chunk
    8c + j, and the values are each chunk's pair in column order."""
    patterns = [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)] * 3
    dense = np.zeros((1, 64), dtype=dtype)
    expected_values = []
    for j, (i0, i1) in enumerate(patterns[:16]):
        first, second = 1 + j % 5, 2 + j % 3      # small values every 8-bit type holds exactly
        dense[0, 4 * j + i0], dense[0, 4 * j + i1] = first, second
        expected_values += [first, second]
    c = compress_2to4(dense, accept_sparse=True)
    assert c.values.dtype == dtype and c.values.shape == (1, 32)
    assert c.metadata.shape == (1, 2) and c.metadata.dtype == np.uint32
    assert c.values[0].astype(np.float64).tolist() == expected_values
    words = [0, 0]
    for j, (i0, i1) in enumerate(patterns[:16]):
        words[j // 8] |= (i0 | i1 << 2) << (4 * (j % 8))
    assert c.metadata[0].tolist() == words


def test_the_format_is_the_same_whatever_the_element_width():
    """The chunk is four elements for every type: an int8 matrix and its float16 copy (exact) prune and
    compress to the same metadata and the same kept values."""
    rng = np.random.default_rng(3)
    dense = rng.integers(-128, 128, size=(8, 128), dtype=np.int16).astype(np.int8)
    as_int8, as_half = compress_2to4(dense), compress_2to4(dense.astype(np.float16))
    assert as_int8.metadata.tobytes() == as_half.metadata.tobytes()
    assert np.array_equal(as_int8.values.astype(np.float16), as_half.values)


def test_integers_keep_their_two_largest_magnitudes():
    signed = np.zeros((1, 64), dtype=np.int8)
    signed[0, :8] = [5, -128, 127, -5, 3, -3, 3, 0]         # |-128| is the largest; the tie -3/3 keeps the first
    assert prune_2to4(signed)[0, :8].tolist() == [0, -128, 127, 0, 3, -3, 0, 0]
    unsigned = np.zeros((1, 64), dtype=np.uint8)
    unsigned[0, :8] = [200, 1, 255, 254, 7, 7, 7, 7]         # unsigned: no sign to clear; ties to the lower index
    assert prune_2to4(unsigned)[0, :8].tolist() == [0, 0, 255, 254, 7, 7, 0, 0]


@pytest.mark.parametrize("dtype", FLOATS8)
def test_a_nan_is_refused_with_its_place(dtype):
    """e4m3 has no infinity: its NaN is the all-ones pattern just above its largest finite value (448), which
    a check against infinity's bits would let through."""
    dense = np.ones((3, 64), dtype=dtype)
    dense[0, 3] = ml_dtypes.finfo(dtype).max
    if dtype == E5M2:
        dense[0, 7] = np.inf                              # an infinity is a magnitude, not NaN
    dense[1, 37] = np.nan
    dense[2, 5] = -np.array(np.nan, dtype=dtype)
    for prune in (prune_2to4, compress_2to4):
        with pytest.raises(SparseFormatError, match=r"dense holds NaN \(first at row 1, column 37\)"):
            prune(dense)
    dense[1, 37] = dense[2, 5] = 0
    kept = prune_2to4(dense)
    assert kept[0, 3] == ml_dtypes.finfo(dtype).max and (dtype != E5M2 or kept[0, 7] == np.inf)


@pytest.mark.parametrize("dtype", DTYPES8)
def test_k_must_cover_whole_k64_steps(dtype):
    assert k_alignment(dtype) == 64
    with pytest.raises(SparseFormatError, match=r"K=32 columns; K must be a multiple of 64 \(one wgmma"):
        compress_2to4(np.ones((2, 32), dtype=dtype))
    c = compress_2to4(np.ones((2, 64), dtype=dtype))
    with pytest.raises(SparseFormatError, match="K/2 must be a multiple of 32"):
        validate_compressed(c.values[:, :16].copy(), c.metadata[:, :1].copy())


@pytest.mark.parametrize("dtype", DTYPES8)
def test_accept_sparse_refuses_a_third_nonzero_and_takes_a_sparse_matrix_as_it_is(dtype):
    dense = np.zeros((4, 64), dtype=dtype)
    dense[2, 40:43] = 1
    with pytest.raises(SparseFormatError, match=r"row 2, columns 40\.\.43 \(3 nonzeros\)"):
        compress_2to4(dense, accept_sparse=True)
    dense[2, 41] = 0
    dense[3, 7] = 2                                         # one nonzero: the first zero fills its pair
    c = compress_2to4(dense, accept_sparse=True)
    assert _bytes(decompress_2to4(c)) == _bytes(dense)
    assert metadata_nibbles(c.metadata)[3, 1] == 0 | 3 << 2


@pytest.mark.parametrize("dtype", FLOATS8)
def test_negative_zero_survives_in_the_8bit_floats(dtype):
    dense = np.zeros((1, 64), dtype=dtype)
    dense[0, 0] = dense[0, 6] = -0.0       # chunk 0 keeps its 1 and, of the tied zeros, the first: -0.0
    dense[0, 2] = 1
    for accept in (False, True):
        back = decompress_2to4(compress_2to4(dense, accept_sparse=accept))
        assert back.view(np.uint8)[0, 0] == 0x80, f"accept_sparse={accept}"
    assert decompress_2to4(compress_2to4(dense, accept_sparse=True)).view(np.uint8)[0, 6] == 0x80


@settings(max_examples=120, deadline=None)
@given(st.sampled_from(DTYPES8), st.integers(1, 5), st.integers(1, 3), st.integers(0, 2**32 - 1))
def test_property_round_trip_is_bit_exact_and_keeps_the_largest(dtype, m, steps, seed):
    rng = np.random.default_rng(seed)
    dense = _random_bytes(rng, (m, 64 * steps), dtype)
    dense[rng.random(dense.shape) < 0.3] = 0                 # ties among zeros too
    compressed, pruned = compress_2to4(dense, return_pruned=True)
    nibbles = metadata_nibbles(compressed.metadata)
    assert not np.isin(nibbles, INVALID_NIBBLES).any() and ((nibbles & 3) < (nibbles >> 2)).all()
    assert _bytes(decompress_2to4(compressed)) == _bytes(pruned) == _bytes(prune_2to4(dense))
    # the kept positions are what a stable sort of float64 magnitudes puts first
    magnitude = _magnitude(dense).reshape(m, -1, 4)
    expected = np.sort(np.argsort(-magnitude, axis=-1, kind="stable")[..., :2], axis=-1)
    assert np.array_equal(np.stack([nibbles & 3, nibbles >> 2], axis=-1), expected)
    # taking the pruned matrix as it is gives it back, bit for bit
    check_2to4(pruned)
    assert _bytes(decompress_2to4(compress_2to4(pruned, accept_sparse=True))) == _bytes(pruned)


def test_compressed_pairs_of_8bit_types_are_checked():
    c = compress_2to4(np.ones((2, 64), dtype=np.int8))
    assert c.shape == (2, 64) and c.dtype == np.int8
    with pytest.raises(SparseFormatError, match=r"needs \[M\]\[K/32\]"):
        Compressed2to4(c.values, c.metadata[:, :1].copy())
    with pytest.raises(SparseTypeError, match="int16"):
        Compressed2to4(c.values.astype(np.int16), c.metadata)
    with pytest.raises(SparseTypeError, match="the 2:4 format supports"):
        compress_2to4(np.ones((2, 64), dtype=ml_dtypes.float8_e4m3b11fnuz))
