"""vkcoop.tensor.explain: the per-cell model equals index_map, its finer statuses follow the spec's own
functions, and the picture (size, colours where the statuses are) and the Jupyter reprs work."""
from __future__ import annotations

import io

import numpy as np
import pytest
from hypothesis import given, strategies as st

from test_tensor_properties import SETTINGS, cases
from vkcoop import tensor as vt
from vkcoop.tensor import ClampMode, ElementStatus, TensorLayout, TensorView
from vkcoop.tensor.explain import STYLES, CellStatus, default_shape, explain, explain_text

REMAP = {ClampMode.ClampToEdge: CellStatus.CLAMPED_TO_EDGE, ClampMode.Repeat: CellStatus.REPEATED,
         ClampMode.RepeatMirrored: CellStatus.MIRRORED}


def _int32(x: int) -> int:
    return (x + 2**31) % 2**32 - 2**31


def expected_status(t, v, row, col, cols, op):
    """The cell's status straight from the spec's scalar functions: the clip test, then whether the span
    coordinate plus offset leaves the tensor in some dimension, then what the clamp mode does about it."""
    if v is None:
        index = vt.matrix_coord_to_linear(t, row, col, cols)
    else:
        index = vt.matrix_coord_to_linear_with_view(t, v, row, col, cols)
        if index is None:
            return CellStatus.CLIPPED
        index = vt.view_coord_to_linear(t, v, vt.linear_to_view_coord(t, v, index))
    span_coord = vt.linear_to_span_coord(t, index)
    out = any(not 0 <= _int32(s + o) < L for s, o, L in zip(span_coord, t.offset, t.layout_dimension))
    if not out:
        return CellStatus.IN_BOUNDS
    if t.clamp_mode == ClampMode.Undefined:
        return CellStatus.UNDEFINED
    if op == "store":
        return CellStatus.DISCARDED
    if t.clamp_mode == ClampMode.Constant:
        return CellStatus.CLAMP_VALUE
    return CellStatus.UNDEFINED if 0 in t.layout_dimension else REMAP[t.clamp_mode]


@SETTINGS
@given(cases(), st.sampled_from(["load", "store"]))
def test_explain_grid_equals_index_map_and_statuses_follow_the_spec(case, op):
    t, v, rows, cols = case
    e = explain(t, rows, cols, v, op)
    m = vt.index_map(t, rows, cols, v, op)
    np.testing.assert_array_equal(e.index, m.indices)
    np.testing.assert_array_equal(e.block_coord, m.block_coord)
    np.testing.assert_array_equal(e.coord_in_block, m.coord_in_block)
    for r in range(rows):
        for c in range(cols):
            assert e.status[r, c] == expected_status(t, v, r, c, cols, op), (r, c)
            # A cell has a tensor element exactly when index_map says IN_BOUNDS.
            assert (e.index[r, c] >= 0) == (m.status[r, c] == ElementStatus.IN_BOUNDS)
    has = e.index >= 0
    expect = m.block_coord * np.array(t.block_size) + m.coord_in_block
    np.testing.assert_array_equal(e.tensor_coord[has], expect[has])
    assert sum(e.counts().values()) == rows * cols


def test_text_grid_shows_every_cell_and_the_state():
    t = TensorLayout.create(1, ClampMode.Constant).set_dimension(3).slice([-1], [5])
    text = explain_text(explain(t, 1, 5))
    grid = text.splitlines()[2].split()
    # c = -1 .. 3 against a 3-element tensor: clamp value, 0, 1, 2, clamp value.
    assert grid == ["0", "C", "0", "1", "2", "C"]
    assert "constant clamp value (2)" in text and "offset: (-1)" in text and "span: (5)" in text


def test_default_shape_covers_the_span_or_the_view_once():
    t = TensorLayout.create(3).set_dimension(2, 3, 5)
    assert default_shape(t) == (6, 5)
    v = TensorView.create(3, False, (2, 0, 1))       # innermost in addressing order: dimension 1
    assert default_shape(t, v) == (10, 3)
    v = TensorView.create(2, True, (1, 0)).set_dimensions(4, 7)
    assert default_shape(t, v) == (7, 4)
    v = TensorView.create(5, True).set_dimensions(2, 1, 3, 1, 4)      # more dimensions than the layout: its own
    assert default_shape(t, v) == (6, 4)


@pytest.mark.parametrize("view", [TensorView.create(5), TensorView.create(2), TensorView.create(2, True)],
                         ids=["5-D on 3-D without dimensions", "2-D on 3-D without dimensions", "zero dimensions"])
def test_default_shape_refuses_a_view_the_layout_cannot_take(view):
    with pytest.raises(vt.TensorSpecError, match="view dim|view_dimension"):
        default_shape(TensorLayout.create(3).set_dimension(2, 3, 5), view)


# --------------------------------------------------------------------------- picture

def _layout(mode):
    """2 x 4 tensor, column offset -1: in the matrix's row 0 column 0 is out of bounds, columns 1..3 read
    tensor elements 0..2; the view's clip keeps only row 0."""
    t = TensorLayout.create(2, mode).set_dimension(2, 4).slice((0, -1), (2, 4))
    return t, TensorView.create(2).set_clip(0, 1, 0, 0xFFFFFFFF)


PICTURES = {  # (mode, op) -> the status of cell (0, 0), worked out from the layout above
    (ClampMode.ClampToEdge, "load"): CellStatus.CLAMPED_TO_EDGE,
    (ClampMode.Repeat, "load"): CellStatus.REPEATED,
    (ClampMode.RepeatMirrored, "load"): CellStatus.MIRRORED,
    (ClampMode.Constant, "load"): CellStatus.CLAMP_VALUE,
    (ClampMode.Undefined, "load"): CellStatus.UNDEFINED,
    (ClampMode.Constant, "store"): CellStatus.DISCARDED,
}
# The tensor element cell (0, 0) reads after remapping column -1 of a 4-wide row: edge 0, repeat 3, mirror 1;
# cells (0, 1..3) read elements 0..2 in bounds, and an element read in bounds is drawn "in bounds".
SOURCE = {ClampMode.ClampToEdge: (0, CellStatus.IN_BOUNDS), ClampMode.Repeat: (3, CellStatus.REPEATED),
          ClampMode.RepeatMirrored: (1, CellStatus.IN_BOUNDS)}


def _pixel(image, box):
    x0, y0 = int(np.ceil(box[0])) + 3, int(np.ceil(box[1])) + 3   # inside the cell, clear of grid and text
    return image[y0, x0, :3]


def _rgb(colour):
    return np.array([int(colour[i:i + 2], 16) for i in (1, 3, 5)]) / 255


@pytest.mark.parametrize("mode, op", list(PICTURES))
def test_png_has_its_size_and_each_status_colour_where_expected(mode, op):
    mpl_image = pytest.importorskip("matplotlib.image")
    from vkcoop.tensor.figure import render
    t, v = _layout(mode)
    e = explain(t, 2, 4, v, op)
    buffer = io.BytesIO()
    geometry = render(e, buffer, command="vkcoop explain ...")
    image = mpl_image.imread(io.BytesIO(buffer.getvalue()), format="png")
    assert (image.shape[1], image.shape[0]) == geometry.size
    assert 400 <= geometry.size[0] <= 2000 and 200 <= geometry.size[1] <= 2000
    expected = {(0, 0): PICTURES[mode, op], (0, 1): CellStatus.IN_BOUNDS, (0, 3): CellStatus.IN_BOUNDS,
                **{(1, c): CellStatus.CLIPPED for c in range(4)}}
    for (r, c), status in expected.items():
        assert np.allclose(_pixel(image, geometry.cells[r, c]), _rgb(STYLES[status].colour), atol=2 / 255), \
            (r, c, status)
    # The tensor side: the elements row 0 reaches carry its colours, others stay white.
    if mode in SOURCE and op == "load":
        column, status = SOURCE[mode]
        assert np.allclose(_pixel(image, geometry.tensor[0, column]), _rgb(STYLES[status].colour), atol=2 / 255)
    assert np.allclose(_pixel(image, geometry.tensor[1, 2]), 1.0)
    # Element 2 is reached only by cell (0, 3), in bounds (the remapped column -1 lands on 0, 3 or 1).
    assert np.allclose(_pixel(image, geometry.tensor[0, 2]), _rgb(STYLES[CellStatus.IN_BOUNDS].colour),
                       atol=2 / 255)


def test_status_colours_are_distinct_and_not_white():
    colours = [s.colour.lower() for s in STYLES.values()]
    assert len(set(colours)) == len(CellStatus) and "#ffffff" not in colours


# --------------------------------------------------------------------------- methods on the state

def test_layout_and_view_explain_and_jupyter_reprs():
    pytest.importorskip("matplotlib")
    t = TensorLayout.create(2, ClampMode.Repeat).set_dimension(3, 4).slice((0, -1), (3, 4))
    text = t.explain()
    assert text.startswith("load of a 3x4 matrix") and "3r" in text   # column -1 repeats element 3
    assert t.explain(rows=1, cols=2, op="store").splitlines()[2].split() == ["0", "x", "0"]
    assert t._repr_png_().startswith(b"\x89PNG")
    assert "<img" in t._repr_html_() and "layoutDimension" in t._repr_html_()
    v = TensorView.create(2, False, (1, 0))
    assert "tensorViewNV<2, false, 1, 0>" in v.explain(t) and v._repr_png_().startswith(b"\x89PNG")
    # Without a layout, the view is shown against a packed one of its size.
    alone = TensorView.create(2, True, (1, 0)).set_dimensions(2, 3)
    assert alone.explain().splitlines()[2].split() == ["0", "0", "3"]


def test_reprs_of_a_layout_that_addresses_nothing_yet_do_not_raise():
    t = TensorLayout.create(2)            # span 0: index_map refuses it
    assert t._repr_png_() is None
    assert "<img" not in t._repr_html_() and "span" in t._repr_html_()
