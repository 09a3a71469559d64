"""vkcoop.tensor builders: the spec's default and update rules, GLSL aliases, and errors.

Expected values are derived by hand from the rules quoted in each test's docstring
(SPV_NV_tensor_addressing OpCreateTensorLayoutNV ... OpTensorViewSetClipNV and
GL_NV_cooperative_matrix2 4.1.X).
"""
import dataclasses

import numpy as np
import pytest

from vkcoop import tensor as vt
from vkcoop.tensor import ClampMode, TensorLayout, TensorSpecError, TensorView


# --------------------------------------------------------------------------- layout builders

def test_create_layout_defaults():
    """createTensorLayoutNV: dims/stride/span/offset zero, blockSize one, clampValue zero."""
    t = TensorLayout.create(3)
    assert t.dim == 3
    assert t.clamp_mode is ClampMode.Undefined
    assert t.block_size == (1, 1, 1)
    assert t.layout_dimension == (0, 0, 0)
    assert t.stride == (0, 0, 0)
    assert t.offset == (0, 0, 0)
    assert t.span == (0, 0, 0)
    assert t.clamp_value == 0
    assert TensorLayout.create(1, ClampMode.Repeat).clamp_mode is ClampMode.Repeat
    assert TensorLayout.create(5, 4).clamp_mode is ClampMode.RepeatMirrored


def test_set_dimension_sets_span_resets_offset_and_packs_strides_in_blocks():
    """setTensorLayoutDimensionNV: layoutDimension = span = dims, offset = 0,
    stride[N-1] = 1, stride[i] = stride[i+1] * ceil(dim[i+1] / blockSize[i+1])."""
    t = (TensorLayout.create(3).set_block_size(1, 2, 3)
         .slice((5, 6, 7), (1, 1, 1))            # offsets that set_dimension must reset
         .set_dimension(4, 6, 10))
    assert t.layout_dimension == (4, 6, 10)
    assert t.span == (4, 6, 10)
    assert t.offset == (0, 0, 0)
    # stride[2] = 1; stride[1] = 1 * ceil(10/3) = 4; stride[0] = 4 * ceil(6/2) = 12
    assert t.stride == (12, 4, 1)


def test_set_dimension_odd_sizes_round_block_counts_up():
    t = TensorLayout.create(2).set_block_size(4, 32).set_dimension(7, 33)
    assert t.stride == (2, 1)  # ceil(33/32) = 2


def test_set_dimension_stride_product_wraps_uint32():
    """The implicit stride is uint32 arithmetic: 0x10000 * 0x10000 wraps to 0."""
    t = TensorLayout.create(3).set_dimension(7, 0x10000, 0x10000)
    assert t.stride == (0, 0x10000, 1)


def test_set_block_size_after_dimension_keeps_strides():
    """The block size should be set first: setting it later does not recompute strides."""
    t = TensorLayout.create(2).set_dimension(8, 8).set_block_size(2, 2)
    assert t.block_size == (2, 2)
    assert t.stride == (8, 1)


def test_slice_adds_offsets_and_replaces_spans():
    """sliceTensorLayoutNV: offset[i] += offset param, span[i] = span param."""
    t = TensorLayout.create(2).set_dimension(10, 20).slice((1, 2), (3, 4)).slice((5, -1), (2, 2))
    assert t.offset == (6, 1)
    assert t.span == (2, 2)
    assert t.layout_dimension == (10, 20)
    assert t.stride == (20, 1)


def test_slice_offset_sum_wraps_int32():
    t = TensorLayout.create(1).set_dimension(4).slice((0x7FFFFFFF,), (1,)).slice((1,), (1,))
    assert t.offset == (-0x80000000,)


def test_set_stride_and_clamp_value():
    t = TensorLayout.create(2).set_dimension(3, 5).set_stride(8, 1).set_clamp_value(0xDEADBEEF)
    assert t.stride == (8, 1)
    assert t.layout_dimension == (3, 5)
    assert t.clamp_value == 0xDEADBEEF


def test_builders_accept_a_single_sequence_and_numpy_ints():
    a = TensorLayout.create(2).set_dimension((np.int64(3), np.uint32(5)))
    b = TensorLayout.create(2).set_dimension(3, 5)
    assert a == b


def test_layout_is_immutable_and_builders_copy():
    t = TensorLayout.create(2)
    t2 = t.set_dimension(2, 2)
    assert t.layout_dimension == (0, 0)  # original untouched
    with pytest.raises(dataclasses.FrozenInstanceError):
        t2.span = (1, 1)


def test_usage_violations_reports_the_stride_rule():
    good = TensorLayout.create(2).set_dimension(3, 5)
    assert good.usage_violations() == []
    bad = good.set_stride(4, 1)  # needs stride[0] >= 1 * ceil(5/1) = 5
    problems = bad.usage_violations()
    assert len(problems) == 1 and "stride[0]" in problems[0]


# --------------------------------------------------------------------------- view builders

def test_create_view_defaults():
    """createTensorViewNV: viewDimension/viewStride zero, clip offsets 0, spans 0xFFFFFFFF."""
    v = TensorView.create(3)
    assert v.dim == 3
    assert v.has_dimensions is False
    assert v.permutation == (0, 1, 2)
    assert v.view_dimension == (0, 0, 0)
    assert v.view_stride == (0, 0, 0)
    assert (v.clip_row_offset, v.clip_row_span, v.clip_col_offset, v.clip_col_span) == \
        (0, 0xFFFFFFFF, 0, 0xFFFFFFFF)


def test_view_set_dimensions_packs_strides():
    """setTensorViewDimensionsNV: viewStride[i] = product of dim[i+1..N-1], viewStride[N-1] = 1."""
    v = TensorView.create(4, True, (3, 2, 1, 0)).set_dimensions(2, 3, 4, 5)
    assert v.view_dimension == (2, 3, 4, 5)
    assert v.view_stride == (60, 20, 5, 1)
    assert v.permutation == (3, 2, 1, 0)


def test_view_set_stride_then_set_dimensions_overwrites_stride():
    v = TensorView.create(2, True).set_stride(7, 9).set_dimensions(3, 4)
    assert v.view_stride == (4, 1)
    v = v.set_stride(1, 3)
    assert v.view_stride == (1, 3) and v.view_dimension == (3, 4)


def test_view_set_clip():
    v = TensorView.create(2).set_clip(1, 2, 3, 4)
    assert (v.clip_row_offset, v.clip_row_span, v.clip_col_offset, v.clip_col_span) == (1, 2, 3, 4)


# --------------------------------------------------------------------------- GLSL spellings

def test_glsl_layout_names_match_pythonic_builders():
    t = vt.createTensorLayoutNV(2, vt.gl_CooperativeMatrixClampModeConstantNV)
    t = vt.setTensorLayoutBlockSizeNV(t, 1, 2)
    t = vt.setTensorLayoutDimensionNV(t, 10, 12)
    t = vt.setTensorLayoutStrideNV(t, 9, 1)
    t = vt.sliceTensorLayoutNV(t, 1, 4, -2, 6)  # offset0, span0, offset1, span1
    t = vt.setTensorLayoutClampValueNV(t, 0x3C00)
    expected = (TensorLayout.create(2, ClampMode.Constant).set_block_size(1, 2).set_dimension(10, 12)
                .set_stride(9, 1).slice((1, -2), (4, 6)).set_clamp_value(0x3C00))
    assert t == expected
    assert t.offset == (1, -2) and t.span == (4, 6)


def test_glsl_view_names_match_pythonic_builders():
    v = vt.createTensorViewNV(3, True, 2, 0, 1)
    v = vt.setTensorViewDimensionsNV(v, 2, 3, 4)
    v = vt.setTensorViewStrideNV(v, 1, 2, 6)
    v = vt.setTensorViewClipNV(v, 0, 5, 1, 7)
    expected = TensorView.create(3, True, (2, 0, 1)).set_dimensions(2, 3, 4).set_stride(1, 2, 6).set_clip(0, 5, 1, 7)
    assert v == expected


def test_create_view_glsl_default_permutation_completes_trailing_entries():
    assert vt.createTensorViewNV(3).permutation == (0, 1, 2)
    assert vt.createTensorViewNV(2, False, 1, 0).permutation == (1, 0)
    with pytest.raises(TensorSpecError, match="permutation"):
        vt.createTensorViewNV(3, False, 1)  # (1, 1, 2) is not a permutation


def test_clamp_mode_values_and_aliases():
    assert [int(m) for m in (ClampMode.Undefined, ClampMode.Constant, ClampMode.ClampToEdge,
                             ClampMode.Repeat, ClampMode.RepeatMirrored)] == [0, 1, 2, 3, 4]
    assert ClampMode.MirrorRepeat is ClampMode.RepeatMirrored
    assert ClampMode.CLAMP_TO_EDGE is ClampMode.ClampToEdge
    assert len(list(ClampMode)) == 5
    assert int(vt.gl_CooperativeMatrixClampModeMirrorRepeatNV) == 4


def test_element_status_values():
    S = vt.ElementStatus
    assert [S.IN_BOUNDS, S.CLAMP_VALUE, S.DISCARDED, S.SKIPPED_BY_CLIP, S.UNDEFINED] == [0, 1, 2, 3, 4]


# --------------------------------------------------------------------------- errors name the parameter

@pytest.mark.parametrize("dim", [0, 6, -1])
def test_dimension_count_out_of_range(dim):
    with pytest.raises(TensorSpecError, match=r"dim.*1\.\.5"):
        TensorLayout.create(dim)
    with pytest.raises(TensorSpecError, match=r"dim.*1\.\.5"):
        TensorView.create(dim)


def test_dimension_count_wrong_type():
    with pytest.raises(TensorSpecError, match="dim"):
        TensorLayout.create(2.0)


def test_zero_block_size():
    with pytest.raises(TensorSpecError, match="block_size"):
        TensorLayout.create(2).set_block_size(0, 1)


def test_wrong_value_counts_name_the_builder_parameter():
    t = TensorLayout.create(2)
    with pytest.raises(TensorSpecError, match="dimension needs exactly 2"):
        t.set_dimension(1, 2, 3)
    with pytest.raises(TensorSpecError, match="stride needs exactly 2"):
        t.set_stride(1)
    with pytest.raises(TensorSpecError, match="offsets needs exactly 2"):
        t.slice((1,), (1, 1))
    with pytest.raises(TensorSpecError, match="sliceTensorLayoutNV needs 4"):
        vt.sliceTensorLayoutNV(t, 0, 1, 0)
    with pytest.raises(TensorSpecError, match="dimension needs exactly 3"):
        TensorView.create(3, True).set_dimensions(1, 2)


def test_not_a_permutation():
    with pytest.raises(TensorSpecError, match="permutation"):
        TensorView.create(2, False, (0, 0))
    with pytest.raises(TensorSpecError, match="permutation"):
        TensorView.create(3, False, (0, 1, 3))


def test_out_of_range_integers():
    t = TensorLayout.create(1)
    with pytest.raises(TensorSpecError, match=r"offsets\[0\] must fit int32"):
        t.slice((2**31,), (1,))
    with pytest.raises(TensorSpecError, match=r"offsets\[0\] must fit int32"):
        t.slice((-2**31 - 1,), (1,))
    with pytest.raises(TensorSpecError, match=r"spans\[0\] must fit uint32"):
        t.slice((0,), (-1,))
    with pytest.raises(TensorSpecError, match=r"dimension\[0\] must fit uint32"):
        t.set_dimension(2**32)
    with pytest.raises(TensorSpecError, match="clamp_value must fit uint32"):
        t.set_clamp_value(-1)
    with pytest.raises(TensorSpecError, match="clip_row_span must fit uint32"):
        TensorView.create(1).set_clip(0, 2**32, 0, 1)
    with pytest.raises(TensorSpecError, match="must be an integer"):
        t.set_dimension(2.5)


def test_bad_clamp_mode():
    with pytest.raises(TensorSpecError, match="clamp_mode"):
        TensorLayout.create(2, 5)
