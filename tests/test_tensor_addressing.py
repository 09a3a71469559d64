"""vkcoop.tensor addressing: clamp modes, views, clip, blocks, spans, 1-D..5-D, the spec's examples.

Every expected value is derived independently of the code under test: by hand from
the spec text, or by plain numpy slicing/transposition of the source tensor.
"""
import ml_dtypes
import numpy as np
import pytest

from vkcoop import tensor as vt
from vkcoop.tensor import ClampMode, ElementStatus as S, TensorLayout, TensorSpecError, TensorView


def f16_buffer(n):
    """n distinct, exactly representable fp16 values."""
    return (np.arange(n, dtype=np.float32) * 0.5 - 3.0).astype(np.float16)


# --------------------------------------------------------------------------- clamp modes (scalar)

@pytest.mark.parametrize("c, expected", [
    (-9, 3), (-5, 3), (-4, 0), (-1, 3), (0, 0), (3, 3), (4, 0), (9, 1), (-2**31, 0), (2**31 - 1, 3)])
def test_repeat_is_floor_mod_for_any_negative(c, expected):
    assert vt.clamp_coordinate(ClampMode.Repeat, c, 4) == expected


@pytest.mark.parametrize("c, expected", [(-9, 0), (-1, 0), (0, 0), (3, 3), (4, 3), (1000, 3)])
def test_clamp_to_edge(c, expected):
    assert vt.clamp_coordinate(ClampMode.ClampToEdge, c, 4) == expected


def test_mirror_repeat_l4_pattern():
    """L = 4: period 2L-2 = 6, reflecting about 0 and 3 without repeating the edges."""
    cs = range(-7, 9)
    expected = [1, 0, 1, 2, 3, 2, 1, 0, 1, 2, 3, 2, 1, 0, 1, 2]
    assert [vt.clamp_coordinate(ClampMode.RepeatMirrored, c, 4) for c in cs] == expected


def test_mirror_repeat_far_negative_uses_layout_dimension():
    # -1000003 = -125001 * 8 + 5 -> 5 >= L=5 -> 8 - 5 = 3.  With the spec's literal `dim`
    # (the loop index, e.g. 0) the second line would give 2*0-2-5 = -7, out of bounds.
    assert vt.clamp_coordinate(ClampMode.RepeatMirrored, -1000003, 5) == 3


def test_mirror_repeat_l1_and_l2():
    assert [vt.clamp_coordinate(ClampMode.RepeatMirrored, c, 1) for c in (-5, -1, 1, 7)] == [0, 0, 0, 0]
    assert [vt.clamp_coordinate(ClampMode.RepeatMirrored, c, 2) for c in (-3, -2, -1, 2, 3)] == [1, 0, 1, 0, 1]


def test_smod_follows_divisor_sign():
    assert vt.smod(-9, 4) == 3 and vt.smod(9, 4) == 1 and vt.smod(-8, 4) == 0


def test_zero_layout_dimension_remap_is_undefined():
    for mode in (ClampMode.ClampToEdge, ClampMode.Repeat, ClampMode.RepeatMirrored):
        assert vt.clamp_coordinate(mode, 0, 0) is None
    t = TensorLayout.create(2, ClampMode.Repeat).set_dimension(0, 4).slice((0, 0), (2, 4))
    m = vt.index_map(t, 2, 4)
    assert (m.status == S.UNDEFINED).all()
    assert (vt.index_map(t, 2, 4, op="store").status == S.DISCARDED).all()


# --------------------------------------------------------------------------- clamp modes (whole loads)

def one_d(mode, offset, span, length=4):
    return TensorLayout.create(1, mode).set_dimension(length).slice((offset,), (span,))


def test_repeat_load_far_negative_1d():
    buf = np.array([10, 11, 12, 13], dtype=np.int32)
    # coordinates -9..-2 mod 4 -> 3, 0, 1, 2, 3, 0, 1, 2
    got = vt.load(buf, one_d(ClampMode.Repeat, -9, 8), 1, 8)
    assert got.tolist() == [[13, 10, 11, 12, 13, 10, 11, 12]]


def test_clamp_to_edge_load_1d():
    buf = np.array([10, 11, 12, 13], dtype=np.int32)
    got = vt.load(buf, one_d(ClampMode.ClampToEdge, -3, 10), 1, 10)
    assert got.tolist() == [[10, 10, 10, 10, 11, 12, 13, 13, 13, 13]]


def test_mirror_load_1d():
    buf = np.array([10, 11, 12, 13], dtype=np.int32)
    got = vt.load(buf, one_d(ClampMode.RepeatMirrored, -7, 16), 1, 16)
    assert got.tolist() == [[11, 10, 11, 12, 13, 12, 11, 10, 11, 12, 13, 12, 11, 10, 11, 12]]


def test_constant_load_2d_fp16():
    T = np.arange(12, dtype=np.float16).reshape(3, 4) * np.float16(0.5)
    bits = vt.clamp_value_bits(-0.5, np.float16)
    assert bits == 0xB800
    t = (TensorLayout.create(2, ClampMode.Constant).set_dimension(3, 4)
         .slice((-1, 2), (3, 3)).set_clamp_value(bits))
    got = vt.load(T.ravel(), t, 3, 3)
    expected = np.full((3, 3), -0.5, dtype=np.float16)
    expected[1:, :2] = T[0:2, 2:4]  # rows -1..1, cols 2..4 of T; row -1 and col 4 are outside
    np.testing.assert_array_equal(got, expected)
    m = vt.index_map(t, 3, 3)
    assert (m.status[0] == S.CLAMP_VALUE).all() and (m.status[:, 2] == S.CLAMP_VALUE).all()
    assert (m.status[1:, :2] == S.IN_BOUNDS).all()
    assert (m.indices[m.status != S.IN_BOUNDS] == -1).all()


@pytest.mark.parametrize("dtype, bits, expected", [
    (np.float16, 0x1234BC00, -1.0),
    (ml_dtypes.bfloat16, 0xABCDBF80, -1.0),
    (np.float32, 0x3F000000, 0.5),
    (np.int8, 0x123456FF, -1),
    (np.uint8, 0x123456FF, 255),
    (np.int16, 0x00018000, -32768),
    (np.int32, 0xFFFFFFFE, -2),
    (np.uint32, 0xFFFFFFFE, 0xFFFFFFFE),
    (ml_dtypes.float8_e4m3fn, 0x00000038, 1.0),
])
def test_clamp_value_truncated_to_component_width(dtype, bits, expected):
    got = vt.clamp_value_as(bits, dtype)
    assert got.dtype == np.dtype(dtype)
    assert float(got) == expected
    # and through a whole Constant-mode load of that component type
    t = TensorLayout.create(1, ClampMode.Constant).set_dimension(1).slice((-1,), (2,)).set_clamp_value(bits)
    buf = np.zeros(16, dtype=dtype)
    out = vt.load(buf, t, 1, 2)
    assert out.dtype == np.dtype(dtype) and float(out[0, 0]) == expected and float(out[0, 1]) == 0


def test_clamp_value_64_bit_component_is_zero_extended():
    assert vt.clamp_value_as(0xFFFFFFFF, np.int64) == 0xFFFFFFFF


def test_undefined_mode_out_of_bounds_is_reported_not_valued():
    t = TensorLayout.create(1).set_dimension(4).slice((2,), (4,))
    m = vt.index_map(t, 1, 4)
    assert m.status.tolist() == [[S.IN_BOUNDS, S.IN_BOUNDS, S.UNDEFINED, S.UNDEFINED]]
    assert m.indices.tolist() == [[2, 3, -1, -1]]
    with pytest.raises(vt.UndefinedBehaviorError, match="row 0, col 2"):
        vt.load(np.zeros(16, np.float32), t, 1, 4)
    with pytest.raises(vt.UndefinedBehaviorError):
        vt.store(np.zeros((1, 4), np.float32), np.zeros(16, np.float32), t)


# --------------------------------------------------------------------------- stores

@pytest.mark.parametrize("mode", [ClampMode.Constant, ClampMode.ClampToEdge, ClampMode.Repeat,
                                  ClampMode.RepeatMirrored])
def test_store_discards_out_of_bounds_in_every_mode_but_undefined(mode):
    t = TensorLayout.create(2, mode).set_dimension(3, 4).slice((1, -1), (3, 3))
    buf = np.full(16, 7.0, dtype=np.float32)
    mat = np.arange(1, 10, dtype=np.float32).reshape(3, 3)
    m = vt.store(mat, buf, t)
    expected = np.full(16, 7.0, dtype=np.float32)
    grid = expected[:12].reshape(3, 4)
    grid[1:3, 0:2] = mat[0:2, 1:3]  # tensor rows 1..3, cols -1..1; row 3 and col -1 are outside
    np.testing.assert_array_equal(buf, expected)
    assert (m.status[2] == S.DISCARDED).all() and (m.status[:, 0] == S.DISCARDED).all()


def test_store_rejects_block_size():
    t = TensorLayout.create(1).set_block_size(2).set_dimension(4)
    with pytest.raises(TensorSpecError, match="block_size"):
        vt.store(np.zeros((1, 4), np.float32), np.zeros(8, np.float32), t)


def test_store_with_element_offset_and_alignment():
    t = TensorLayout.create(1).set_dimension(2)
    buf = np.zeros(8, dtype=np.float32)
    vt.store(np.array([[1.5, 2.5]], np.float32), buf, t, element_offset=4)
    assert buf.tolist() == [0, 0, 0, 0, 1.5, 2.5, 0, 0]
    with pytest.raises(TensorSpecError, match="multiple of 16"):
        vt.store(np.zeros((1, 2), np.float32), buf, t, element_offset=1)


def test_load_index_beyond_buffer_is_an_error():
    t = TensorLayout.create(1).set_dimension(8)
    with pytest.raises(IndexError, match="beyond the buffer"):
        vt.load(np.zeros(4, np.float32), t, 1, 8)


# --------------------------------------------------------------------------- GLSL spec examples

def test_example_row_major_load():
    rows_, cols_, M, N, r0, c0 = 6, 7, 3, 4, 2, 1
    A = f16_buffer(rows_ * cols_).reshape(rows_, cols_)
    t = vt.createTensorLayoutNV(2)
    t = vt.setTensorLayoutDimensionNV(t, rows_, cols_)
    t = vt.sliceTensorLayoutNV(t, r0, M, c0, N)
    np.testing.assert_array_equal(vt.load(A.ravel(), t, M, N), A[r0:r0 + M, c0:c0 + N])


def test_example_column_major_load_through_permuted_view():
    """tensorViewNV<2, false, 1, 0>: dims (NumCols, NumRows), slice (col, N, row, M)."""
    num_rows, num_cols, M, N, row, col = 6, 5, 3, 2, 2, 1
    A = f16_buffer(num_rows * num_cols).reshape(num_rows, num_cols)
    buf = np.ascontiguousarray(A.T).ravel()  # column-major storage
    t = vt.createTensorLayoutNV(2)
    t = vt.setTensorLayoutDimensionNV(t, num_cols, num_rows)
    t = vt.sliceTensorLayoutNV(t, col, N, row, M)
    v = vt.createTensorViewNV(2, False, 1, 0)
    np.testing.assert_array_equal(vt.load(buf, t, M, N, v), A[row:row + M, col:col + N])


def test_example_hwc_patch_8x8x32():
    H, W, C, row, col = 12, 10, 32, 3, 2
    T = (np.arange(H * W * C) % 251).astype(np.float16).reshape(H, W, C)
    t = vt.createTensorLayoutNV(3)
    t = vt.setTensorLayoutDimensionNV(t, H, W, C)
    t = vt.sliceTensorLayoutNV(t, row, 8, col, 8, 0, 32)
    got = vt.load(T.ravel(), t, 64, 32)
    np.testing.assert_array_equal(got, T[row:row + 8, col:col + 8, :].reshape(64, 32))


def test_example_space_to_depth():
    H, W, C = 4, 6, 3
    T = f16_buffer(H * W * C).reshape(H, W, C)
    t = vt.setTensorLayoutDimensionNV(vt.createTensorLayoutNV(3), H, W, C)
    v = vt.createTensorViewNV(5, True, 0, 2, 1, 3, 4)
    v = vt.setTensorViewDimensionsNV(v, H // 2, 2, W // 2, 2, C)
    got = vt.load(T.ravel(), t, (H // 2) * (W // 2), 4 * C, v)
    expected = np.empty_like(got)
    for h2 in range(H // 2):
        for w2 in range(W // 2):
            for dh in range(2):
                for dw in range(2):
                    expected[h2 * (W // 2) + w2, (dh * 2 + dw) * C:(dh * 2 + dw + 1) * C] = T[2 * h2 + dh, 2 * w2 + dw]
    np.testing.assert_array_equal(got, expected)


def test_example_block_quantized_load_with_decode():
    """Issue (4) example: blockSize (2, 4), strides in blocks, decode(blockRef, blockCoord, coordInBlock)."""
    num_rows, num_cols, br, bc = 6, 8, 2, 4
    rng = np.random.default_rng(3)
    block_t = np.dtype([("scale", np.float32), ("q", np.int8, (br, bc))])
    blocks = np.zeros((num_rows // br) * (num_cols // bc), dtype=block_t)
    blocks["scale"] = rng.choice([0.5, 1.0, 2.0], size=blocks.size)
    blocks["q"] = rng.integers(-8, 8, size=(blocks.size, br, bc))
    dense = np.empty((num_rows, num_cols), np.float32)  # what the blocks encode
    for r in range(num_rows):
        for c in range(num_cols):
            blk = blocks[(r // br) * (num_cols // bc) + c // bc]
            dense[r, c] = blk["scale"] * blk["q"][r % br, c % bc]

    t = vt.createTensorLayoutNV(2)
    t = vt.setTensorLayoutBlockSizeNV(t, br, bc)
    t = vt.setTensorLayoutDimensionNV(t, num_rows, num_cols)
    assert t.stride == (2, 1)
    row0, col0, M, N = 1, 3, 4, 5
    t = vt.sliceTensorLayoutNV(t, row0, M, col0, N)

    def decode(blk, idx, block_coord, coord_in_block):
        s = blk[idx]
        return s["scale"] * s["q"][np.arange(len(idx)), coord_in_block[:, 0], coord_in_block[:, 1]]

    got = vt.load(blocks, t, M, N, dtype=np.float16, decode=decode)
    np.testing.assert_array_equal(got, dense[row0:row0 + M, col0:col0 + N].astype(np.float16))

    m = vt.index_map(t, M, N)
    for r in range(M):
        for c in range(N):
            tr, tc = row0 + r, col0 + c
            assert tuple(m.block_coord[r, c]) == (tr // br, tc // bc)
            assert tuple(m.coord_in_block[r, c]) == (tr % br, tc % bc)
            assert m.indices[r, c] == (tr // br) * 2 + tc // bc


def test_decode_sees_clamped_coordinates_and_constant_skips_decode():
    t = TensorLayout.create(1, ClampMode.ClampToEdge).set_block_size(2).set_dimension(4).slice((-2,), (8,))
    calls = []

    def decode(blk, idx, bcoord, cib):
        calls.append(len(idx))
        return (bcoord[:, 0] * 2 + cib[:, 0]).astype(np.float32)

    got = vt.load(np.zeros(4, np.float32), t, 1, 8, dtype=np.float32, decode=decode)
    assert got.tolist() == [[0, 0, 0, 1, 2, 3, 3, 3]]  # coords -2..5 clamped to 0..3
    tc = t.set_clamp_value(vt.clamp_value_bits(9.0, np.float32))
    tc = TensorLayout(tc.dim, ClampMode.Constant, tc.block_size, tc.layout_dimension, tc.stride,
                      tc.offset, tc.span, tc.clamp_value)
    calls.clear()
    got = vt.load(np.zeros(4, np.float32), tc, 1, 8, dtype=np.float32, decode=decode)
    assert got.tolist() == [[9, 9, 0, 1, 2, 3, 9, 9]]
    assert calls == [4]  # only the in-bounds elements were decoded


def test_decode_requires_dtype():
    t = TensorLayout.create(1).set_dimension(2)
    with pytest.raises(TensorSpecError, match="dtype"):
        vt.load(np.zeros(4, np.float32), t, 1, 2, decode=lambda *a: a[1])


# --------------------------------------------------------------------------- views

def test_view_permutation_3d_matches_numpy_transpose():
    """perm (2, 0, 1): coordinates are peeled as p[2]=1 (innermost), p[1]=0, p[0]=2."""
    T = f16_buffer(24).reshape(2, 3, 4)
    t = TensorLayout.create(3).set_dimension(2, 3, 4)
    v = TensorView.create(3, False, (2, 0, 1))
    got = vt.load(T.ravel(), t, 4, 6, v)
    np.testing.assert_array_equal(got, T.transpose(2, 0, 1).reshape(4, 6))


def test_view_identity_permutation_is_layout_only():
    t = TensorLayout.create(2, ClampMode.Constant).set_dimension(4, 5).slice((1, -1), (2, 4))
    a = vt.index_map(t, 2, 4)
    b = vt.index_map(t, 2, 4, TensorView.create(2))
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)


def test_view_with_dimensions_and_stride_reads_transposed():
    """hasDimensions true: dims (3, 4), viewStride (1, 3) -> element (r, c) reads buf[r + 3c]."""
    buf = f16_buffer(12)
    t = TensorLayout.create(1).set_dimension(12)
    v = TensorView.create(2, True).set_dimensions(3, 4).set_stride(1, 3)
    np.testing.assert_array_equal(vt.load(buf, t, 3, 4, v), buf.reshape(4, 3).T)


def test_view_dim_must_match_layout_without_dimensions():
    t = TensorLayout.create(2).set_dimension(2, 2)
    with pytest.raises(TensorSpecError, match="view dim"):
        vt.index_map(t, 2, 2, TensorView.create(3))
    with pytest.raises(TensorSpecError, match="view dim"):
        vt.element_address(t, 0, 0, 2, TensorView.create(1))
    with pytest.raises(TensorSpecError, match="view_dimension"):
        vt.index_map(t, 2, 2, TensorView.create(2, True))  # dimensions never set


def test_clip_keeps_previous_and_uses_clip_width():
    """clip rows 1..2, cols 0..2 of a 4x4 matrix: index = (row-1) * min(N=4, 3) + col."""
    buf = f16_buffer(12)
    t = TensorLayout.create(2).set_dimension(4, 3)
    v = TensorView.create(2).set_clip(1, 2, 0, 3)
    prev = np.full((4, 4), -7, dtype=np.float16)
    got = vt.load(buf, t, 4, 4, v, previous=prev)
    expected = prev.copy()
    for r in (1, 2):
        for c in (0, 1, 2):
            expected[r, c] = buf[(r - 1) * 3 + c]
    np.testing.assert_array_equal(got, expected)
    m = vt.index_map(t, 4, 4, v)
    assert ((m.status == S.SKIPPED_BY_CLIP) == (expected == -7)).all()


def test_clip_col_offset_with_default_span_keeps_width_n():
    """width = min(N, clipColSpan) = N, so rows stay N apart even though one column is clipped."""
    t = TensorLayout.create(1).set_dimension(64)
    v = TensorView.create(1).set_clip(0, 0xFFFFFFFF, 1, 0xFFFFFFFF)
    m = vt.index_map(t, 2, 4, v)
    assert m.indices.tolist() == [[-1, 0, 1, 2], [-1, 4, 5, 6]]


def test_clip_offset_plus_default_span_does_not_wrap():
    """Decision (docs/spec-notes.md): offset + 0xFFFFFFFF is not wrapped to offset - 1."""
    t = TensorLayout.create(1).set_dimension(64)
    v = TensorView.create(1).set_clip(2, 0xFFFFFFFF, 0, 0xFFFFFFFF)
    m = vt.index_map(t, 4, 2, v)
    assert m.status[:2].tolist() == [[S.SKIPPED_BY_CLIP] * 2] * 2
    assert m.indices[2:].tolist() == [[0, 1], [2, 3]]
    assert not vt.clip_contains(v, 1, 0) and vt.clip_contains(v, 3, 1)


def test_clip_store_writes_only_inside():
    t = TensorLayout.create(2).set_dimension(2, 2)
    v = TensorView.create(2).set_clip(0, 1, 0, 2)
    buf = np.zeros(4, np.int32)
    m = vt.store(np.array([[1, 2], [3, 4]], np.int32), buf, t, v)
    assert buf.tolist() == [1, 2, 0, 0]
    assert (m.status[1] == S.SKIPPED_BY_CLIP).all()


# --------------------------------------------------------------------------- spans, strides, dimensions

def test_span_smaller_than_matrix_wraps_outermost():
    T = f16_buffer(64).reshape(8, 8)
    t = TensorLayout.create(2).set_dimension(8, 8).slice((1, 2), (2, 4))
    got = vt.load(T.ravel(), t, 4, 4)
    expected = np.stack([T[1 + (r % 2), 2:6] for r in range(4)])
    np.testing.assert_array_equal(got, expected)


def test_explicit_row_pitch():
    buf = f16_buffer(24)
    t = TensorLayout.create(2).set_dimension(3, 5).set_stride(8, 1)
    np.testing.assert_array_equal(vt.load(buf, t, 3, 5), buf.reshape(3, 8)[:, :5])


def test_index_arithmetic_wraps_uint32():
    """stride[0] = 0xFFFFFFFF acts as -1: row 1, col c -> (c - 1) mod 2**32."""
    t = TensorLayout.create(2).set_dimension(2, 4).set_stride(0xFFFFFFFF, 1)
    m = vt.index_map(t, 2, 4)
    assert m.indices[1].tolist() == [0xFFFFFFFF, 0, 1, 2]
    assert vt.matrix_coord_to_tensor_element(t, 1, 0, 4).index == 0xFFFFFFFF


def test_offset_overflow_wraps_int32_coordinate():
    """offset 0x7FFFFFFF, Repeat, L = 7: span coord 0 -> c = 2147483647 = 7*306783378 + 1 -> 1;
    span coord 1 -> c wraps to int32 -2**31; 2**31 = 7*306783378 + 2, so -2**31 smod 7 = 5
    (an unwrapped +2**31 would give 2)."""
    t = TensorLayout.create(1, ClampMode.Repeat).set_dimension(7).slice((0x7FFFFFFF,), (2,))
    assert vt.index_map(t, 1, 2).indices.tolist() == [[1, 5]]
    assert vt.matrix_coord_to_tensor_element(t, 0, 1, 2).index == 5


@pytest.mark.parametrize("D", [1, 2, 3, 4, 5])
def test_whole_tensor_and_slices_1d_to_5d(D):
    dims = (2, 3, 4, 3, 2)[:D]
    T = f16_buffer(int(np.prod(dims))).reshape(dims)
    t = TensorLayout.create(D).set_dimension(*dims)
    cols = dims[-1]
    np.testing.assert_array_equal(vt.load(T.ravel(), t, T.size // cols, cols), T.reshape(-1, cols))
    offs = tuple(1 if d % 2 == 0 else 0 for d in range(D))
    spans = tuple(dims[d] - offs[d] for d in range(D))
    ts = t.slice(offs, spans)
    sub = T[tuple(slice(o, o + s) for o, s in zip(offs, spans))]
    got = vt.load(T.ravel(), ts, sub.size // spans[-1], spans[-1])
    np.testing.assert_array_equal(got, sub.reshape(-1, spans[-1]))


def test_zero_span_is_an_error():
    with pytest.raises(TensorSpecError, match=r"span\[0\] is 0"):
        vt.index_map(TensorLayout.create(2), 2, 2)


def test_index_map_rejects_bad_matrix_shape_and_op():
    t = TensorLayout.create(1).set_dimension(4)
    with pytest.raises(TensorSpecError, match="rows"):
        vt.index_map(t, 0, 4)
    with pytest.raises(TensorSpecError, match="op"):
        vt.index_map(t, 1, 4, op="copy")


def test_large_matrix_uses_several_chunks_consistently():
    """More elements than one internal chunk: results must not depend on chunking."""
    t = (TensorLayout.create(2, ClampMode.Constant).set_dimension(300, 300)
         .slice((-3, 5), (300, 300)))
    v = TensorView.create(2, False, (1, 0)).set_clip(1, 250, 0, 299)
    m = vt.index_map(t, 300, 300, v)
    rng = np.random.default_rng(0)
    for r, c in rng.integers(0, 300, size=(200, 2)):
        e = vt.element_address(t, int(r), int(c), 300, v)
        assert m.status[r, c] == e.status
        assert m.indices[r, c] == (-1 if e.index is None else e.index)


# --------------------------------------------------------------------------- buffers

def test_buffer_bytes_are_reinterpreted_as_the_component_type():
    """The index is scaled by the matrix component size from &buf[elementOffset]."""
    values = np.array([0.5, -1.0, 2.0, 0.25, 3.0, -0.5, 1.5, 4.0], dtype=np.float16)
    raw = np.frombuffer(values.tobytes(), dtype=np.uint8).copy()  # a byte buffer
    t = TensorLayout.create(2).set_dimension(2, 4)
    np.testing.assert_array_equal(vt.load(raw, t, 2, 4, dtype=np.float16), values.reshape(2, 4))
    # element_offset counts buffer elements (bytes here): 16 bytes = 8 fp16 further on
    raw2 = np.concatenate([np.zeros(16, np.uint8), raw])
    np.testing.assert_array_equal(vt.load(raw2, t, 2, 4, dtype=np.float16, element_offset=16),
                                  values.reshape(2, 4))


def test_bf16_load_and_multidimensional_buffers():
    T = (np.arange(12, dtype=np.float32) - 6).astype(ml_dtypes.bfloat16).reshape(3, 4)
    t = TensorLayout.create(2).set_dimension(3, 4).slice((1, 1), (2, 3))
    np.testing.assert_array_equal(vt.load(T, t, 2, 3), T[1:3, 1:4])  # 2-D buffer is flat memory
    out = np.zeros((3, 4), dtype=ml_dtypes.bfloat16)
    vt.store(T[1:3, 1:4], out, t)
    np.testing.assert_array_equal(out[1:3, 1:4], T[1:3, 1:4])
    assert (out[0] == 0).all() and (out[:, 0] == 0).all()


def test_buffer_must_be_contiguous_numpy():
    t = TensorLayout.create(1).set_dimension(2)
    with pytest.raises(TensorSpecError, match="C-contiguous"):
        vt.load(np.zeros((4, 4), np.float32)[:, 1], t, 1, 2)
    with pytest.raises(TensorSpecError, match="buffer must be a numpy array, got list"):
        vt.store(np.zeros((1, 2), np.float32), [0.0, 0.0], t)
    with pytest.raises(TensorSpecError, match="writeable numpy array"):
        vt.store(np.zeros((1, 2), np.float32), np.frombuffer(b"\0" * 8, np.float32), t)  # read-only
