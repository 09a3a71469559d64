"""Hypothesis properties of vkcoop.tensor: the vectorized path equals the scalar spec
functions, and the clamp/store/clip rules relate to each other as the spec says."""
import dataclasses

import numpy as np
from hypothesis import HealthCheck, given, settings, strategies as st

from vkcoop import tensor as vt
from vkcoop.tensor import ClampMode, ElementStatus as S, TensorLayout, TensorView

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

small_offset = st.one_of(st.integers(-12, 12), st.sampled_from([-2**31, 2**31 - 1, -2**31 + 3]))


@st.composite
def layouts(draw, modes=tuple(ClampMode)):
    D = draw(st.integers(1, 5))
    t = TensorLayout.create(D, draw(st.sampled_from(modes)))
    if draw(st.booleans()):
        t = t.set_block_size(*[draw(st.sampled_from([1, 1, 2, 3, 4])) for _ in range(D)])
    t = t.set_dimension(*[draw(st.integers(0, 6)) for _ in range(D)])
    if draw(st.integers(0, 3)) == 0:
        t = t.set_stride(*[draw(st.sampled_from([0, 1, 3, 7, 2**31, 2**32 - 1])) for _ in range(D)])
    if draw(st.booleans()) or 0 in t.span:
        t = t.slice([draw(small_offset) for _ in range(D)], [draw(st.integers(1, 6)) for _ in range(D)])
    return t.set_clamp_value(draw(st.integers(0, 2**32 - 1)))


@st.composite
def views(draw, layout):
    if draw(st.integers(0, 3)) == 0:
        return None
    if draw(st.booleans()):
        perm = draw(st.permutations(range(layout.dim)))
        v = TensorView.create(layout.dim, False, perm)
    else:
        VD = draw(st.integers(1, 5))
        v = TensorView.create(VD, True, draw(st.permutations(range(VD))))
        v = v.set_dimensions(*[draw(st.integers(1, 5)) for _ in range(VD)])
        if draw(st.booleans()):
            v = v.set_stride(*[draw(st.sampled_from([0, 1, 2, 5, 13, 2**32 - 1])) for _ in range(VD)])
    if draw(st.booleans()):
        span = st.sampled_from([0, 1, 2, 3, 5, 0xFFFFFFFF])
        v = v.set_clip(draw(st.integers(0, 4)), draw(span), draw(st.integers(0, 4)), draw(span))
    return v


@st.composite
def cases(draw, modes=tuple(ClampMode)):
    t = draw(layouts(modes))
    return t, draw(views(t)), draw(st.integers(1, 6)), draw(st.integers(1, 6))


def with_mode(t, mode):
    return dataclasses.replace(t, clamp_mode=mode)


@SETTINGS
@given(cases(), st.sampled_from(["load", "store"]))
def test_vectorized_equals_scalar_spec_functions(case, op):
    t, v, M, N = case
    m = vt.index_map(t, M, N, v, op)
    assert m.indices.shape == (M, N) and m.block_coord.shape == (M, N, t.dim)
    for r in range(M):
        for c in range(N):
            e = vt.element_address(t, r, c, N, v, op)
            assert m.status[r, c] == e.status
            if e.status == S.IN_BOUNDS:
                assert m.indices[r, c] == e.index
                assert 0 <= e.index <= 0xFFFFFFFF
                assert tuple(m.block_coord[r, c]) == e.block_coord
                assert tuple(m.coord_in_block[r, c]) == e.coord_in_block
            else:
                assert m.indices[r, c] == -1 and (m.block_coord[r, c] == -1).all()


@SETTINGS
@given(cases(modes=(ClampMode.Constant, ClampMode.ClampToEdge, ClampMode.Repeat, ClampMode.RepeatMirrored)))
def test_store_discards_exactly_what_a_constant_load_would_clamp(case):
    t, v, M, N = case
    store_status = vt.index_map(t, M, N, v, "store").status
    constant_load = vt.index_map(with_mode(t, ClampMode.Constant), M, N, v, "load").status
    np.testing.assert_array_equal(store_status == S.DISCARDED, constant_load == S.CLAMP_VALUE)
    np.testing.assert_array_equal(store_status == S.SKIPPED_BY_CLIP, constant_load == S.SKIPPED_BY_CLIP)
    assert not (store_status == S.CLAMP_VALUE).any()


@SETTINGS
@given(cases(modes=(ClampMode.Constant,)))
def test_undefined_mode_is_undefined_exactly_where_constant_clamps(case):
    t, v, M, N = case
    const = vt.index_map(t, M, N, v).status
    for op in ("load", "store"):
        undef = vt.index_map(with_mode(t, ClampMode.Undefined), M, N, v, op).status
        np.testing.assert_array_equal(undef == S.UNDEFINED, const == S.CLAMP_VALUE)


@SETTINGS
@given(cases(modes=(ClampMode.ClampToEdge, ClampMode.Repeat, ClampMode.RepeatMirrored)))
def test_remapping_modes_stay_in_bounds_and_agree_where_in_bounds(case):
    t, v, M, N = case
    m = vt.index_map(t, M, N, v)
    const = vt.index_map(with_mode(t, ClampMode.Constant), M, N, v)
    if 0 in t.layout_dimension:
        assert ((m.status == S.UNDEFINED) == (const.status == S.CLAMP_VALUE)).all()
        return
    assert not (m.status == S.CLAMP_VALUE).any()
    ok = m.status == S.IN_BOUNDS
    coord = m.block_coord[ok] * np.array(t.block_size) + m.coord_in_block[ok]
    assert (coord >= 0).all() and (coord < np.array(t.layout_dimension)).all()
    both = const.status == S.IN_BOUNDS
    np.testing.assert_array_equal(m.indices[both], const.indices[both])


@SETTINGS
@given(cases())
def test_clip_skips_exactly_outside_the_clip_rectangle(case):
    t, v, M, N = case
    if v is None:
        v = TensorView.create(t.dim)  # default clip: nothing skipped
    for op in ("load", "store"):
        status = vt.index_map(t, M, N, v, op).status
        rows = np.arange(M)[:, None]
        cols = np.arange(N)[None, :]
        inside = ((rows >= v.clip_row_offset) & (rows - v.clip_row_offset < v.clip_row_span)
                  & (cols >= v.clip_col_offset) & (cols - v.clip_col_offset < v.clip_col_span))
        np.testing.assert_array_equal(status == S.SKIPPED_BY_CLIP, ~inside)


@SETTINGS
@given(cases(modes=(ClampMode.Constant,)))
def test_store_then_load_round_trips_uniquely_addressed_elements(case):
    t, v, M, N = case
    if any(b != 1 for b in t.block_size):
        t = dataclasses.replace(t, block_size=(1,) * t.dim)
    m = vt.index_map(t, M, N, v, "store")
    ok = m.status == S.IN_BOUNDS
    idx = m.indices[ok]
    if idx.size and idx.max() > 4096:
        return  # huge wrapped strides: not worth a giant buffer
    size = int(idx.max()) + 1 if idx.size else 1
    buf = np.zeros(max(size, 4), dtype=np.int32)
    mat = np.arange(1, M * N + 1, dtype=np.int32).reshape(M, N)
    vt.store(mat, buf, t, v)
    back = vt.load(buf, t, M, N, v, previous=np.full((M, N), -5, np.int32))
    unique_targets = np.zeros((M, N), bool)
    values, counts = np.unique(idx, return_counts=True)
    single = set(values[counts == 1].tolist())
    unique_targets[ok] = [i in single for i in idx.tolist()]
    np.testing.assert_array_equal(back[unique_targets], mat[unique_targets])
    # every written element holds the value of *some* matrix element that maps to it
    for i in values.tolist():
        assert buf[i] in set(mat[ok][idx == i].tolist())
    skipped = m.status == S.SKIPPED_BY_CLIP
    assert (back[skipped] == -5).all()
