"""vkcoop.fuzz without a GPU: generator invariants, the shrinker on planted predicates, the comparison, the GLSL
repro (compiled with glslang when the toolchain is present) and argument errors."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from vkcoop import fuzz
from vkcoop.fuzz import cases as fc
from vkcoop.fuzz import compare
from vkcoop.fuzz import shrinking
from vkcoop.tensor import ClampMode, ElementStatus, TensorLayout, TensorView

SEED = 20261121


@pytest.fixture(scope="module")
def portable_cases():
    return [fc.generate_case(SEED, i, with_reference=True) for i in range(600)]


@pytest.fixture(scope="module")
def hw_cases():
    pool = fc.variant_pool(SEED, 24)
    return pool, [fc.generate_case(SEED, i, pool[i % 24], hw=True, with_reference=True) for i in range(480)]


# --------------------------------------------------------------------------- generator

def test_generation_is_deterministic_per_seed_and_case_id():
    assert fc.generate_case(7, 123) == fc.generate_case(7, 123)
    assert fc.generate_case(7, 123) != fc.generate_case(8, 123)


def test_undefined_clamp_mode_only_where_every_element_is_in_bounds(portable_cases):
    undefined = [(c, m) for c, m in portable_cases if c.layout.clamp_mode == ClampMode.Undefined]
    assert len(undefined) > 30
    for case, reference in undefined:
        t = case.layout
        assert all(0 <= o and o + s <= L for o, s, L in zip(t.offset, t.span, t.layout_dimension))
        assert set(np.unique(reference.status)) <= {ElementStatus.IN_BOUNDS, ElementStatus.SKIPPED_BY_CLIP}


def test_no_generated_case_has_undefined_elements(portable_cases, hw_cases):
    for case, reference in portable_cases + hw_cases[1]:
        case.check()
        assert not (reference.status == ElementStatus.UNDEFINED).any()


def test_generator_covers_the_issue_space(portable_cases):
    cases = [c for c, _ in portable_cases]
    assert {c.layout.dim for c in cases} == {1, 2, 3, 4, 5}
    assert {c.layout.clamp_mode for c in cases} == set(ClampMode.__members__.values())
    assert {c.variant.kind for c in cases} == set(fc.KINDS)
    assert {c.component for c in cases} == set(fc.COMPONENTS)
    views = [c.view for c in cases if c.view is not None]
    assert {v.has_dimensions for v in views} == {True, False}
    assert {v.dim for v in views} == {1, 2, 3, 4, 5}
    assert any(v.permutation != tuple(range(v.dim)) for v in views)
    assert any(v.clip_col_offset > 0 and v.clip_col_span == 0xFFFFFFFF for v in views)
    offsets = [o for c in cases for o in c.layout.offset]
    assert min(offsets) < -1000 and max(offsets) > 1000 and any(o < 0 for o in offsets)
    assert any(s > L for c in cases for s, L in zip(c.layout.span, c.layout.layout_dimension))
    assert any(b > 1 for c in cases for b in c.layout.block_size)
    assert all(b == 1 for c in cases if c.variant.kind != "decode" for b in c.layout.block_size)


def test_clamp_values_match_the_component_width_and_avoid_hw_markers(hw_cases):
    _, cases = hw_cases
    for case, _ in cases:
        component = "int32" if case.variant.kind == "decode" else case.component
        dtype = fc.COMPONENT_DTYPES[component]
        low = case.layout.clamp_value & ((1 << (8 * dtype.itemsize)) - 1)
        assert low not in (fc._bits(fc.MARK_VALUE, dtype), fc._bits(fc.PREVIOUS_VALUE, dtype))
        if dtype.kind == "f":
            assert np.isfinite(np.frombuffer(low.to_bytes(dtype.itemsize, "little"), dtype=dtype)[0])


def test_hw_cases_fit_the_hardware_buffers_and_shapes(hw_cases):
    _, cases = hw_cases
    for case, reference in cases:
        assert fc.hw_violation(case, reference.status, reference.indices) is None
        assert (case.rows, case.cols) == case.variant.hw_shape


def test_variant_pool_deals_every_kind_component_dimension_and_mode():
    pool = fc.variant_pool(1, 24)
    assert len(set(pool)) == 24
    assert {v.kind for v in pool} == set(fc.KINDS)
    assert {v.component for v in pool} == set(fc.COMPONENTS)
    assert {v.ldim for v in pool} == {1, 2, 3, 4, 5}
    assert {v.clamp_mode for v in pool} == set(fc.MODES)
    for v in pool:
        if v.view is not None and not v.view[1]:
            assert v.view[0] == v.ldim


# --------------------------------------------------------------------------- shrinker

def _big_case():
    variant = fc.Variant("decode", "fp16", 4, ClampMode.Repeat, (4, True, (3, 1, 0, 2)))
    layout = (TensorLayout.create(4, ClampMode.Repeat).set_block_size(2, 3, 1, 2).set_dimension(9, 7, 12, 5)
              .set_stride(500, 40, 3, 1).slice((-5, 3, 17, -2), (11, 9, 6, 8)).set_clamp_value(0x1234))
    view = TensorView.create(4, True, (3, 1, 0, 2)).set_dimensions(3, 4, 5, 6).set_stride(1, 7, 19, 3) \
        .set_clip(2, 10, 1, 0xFFFFFFFF)
    return fc.FuzzCase(0, variant, 16, 16, layout, view, True, True)


def test_shrinker_reaches_the_minimal_case_of_a_planted_predicate():
    # Planted "bug": fails whenever the layout has >= 2 dimensions and its last dimension is >= 3.
    def fails(case):
        t = case.layout
        return t.dim >= 2 and t.layout_dimension[-1] >= 3

    start = _big_case()
    start.check()
    assert fails(start)
    result = shrinking.shrink(start, lambda cases: [fails(c) for c in cases])
    m = result.case
    assert result.complete and fails(m)
    assert m.layout.dim == 2 and m.layout.layout_dimension == (1, 3)
    assert m.view is None and not m.explicit_stride
    assert m.layout.offset == (0, 0) and m.layout.span == (1, 1) and m.layout.block_size == (1, 1)
    assert m.layout.clamp_value == 0 and (m.rows, m.cols) == (1, 1)
    assert not any(fails(c) for c in shrinking.candidates(m))


def test_shrinker_keeps_the_view_feature_the_predicate_needs():
    # Fails only with a non-identity permutation of a view with dimensions.
    def fails(case):
        v = case.view
        return v is not None and v.has_dimensions and v.permutation != tuple(range(v.dim))

    result = shrinking.shrink(_big_case(), lambda cases: [fails(c) for c in cases])
    m = result.case
    assert fails(m) and m.layout.dim == 1
    assert m.view.dim == 2 and m.view.permutation == (1, 0) and m.view.view_dimension == (1, 1)
    assert (m.view.clip_row_offset, m.view.clip_row_span, m.view.clip_col_offset, m.view.clip_col_span) == \
        (0, 0xFFFFFFFF, 0, 0xFFFFFFFF)


def test_shrinker_candidates_respect_the_invariants():
    start = dataclasses.replace(_big_case(), variant=dataclasses.replace(_big_case().variant))
    for candidate in shrinking.candidates(start, hw=True, fixed_shape=True):
        candidate.check()
        reference = candidate.reference()
        assert fc.hw_violation(candidate, reference.status, reference.indices) is None
        assert (candidate.rows, candidate.cols) == (16, 16)


def test_shrinker_stops_at_its_evaluation_budget():
    calls = []

    def fails_many(cases):
        calls.append(len(cases))
        return [True] * len(cases)
    result = shrinking.shrink(_big_case(), fails_many, max_evaluations=10)
    assert sum(calls) <= 10 and not result.complete


# --------------------------------------------------------------------------- comparison and repro

def test_comparison_flags_exactly_a_planted_difference(portable_cases):
    cases = [c for c, _ in portable_cases[:50]]
    ref = compare.reference_batch(cases, 512)
    obs = tuple(a.copy() for a in ref)
    assert not compare.case_mismatches("portable", "", ref, obs)[0].any()
    k = next(i for i, c in enumerate(cases) if (ref[1][i] == ElementStatus.IN_BOUNDS).any())
    e = int(np.nonzero(ref[1][k] == ElementStatus.IN_BOUNDS)[0][0])
    obs[0][k, e] += 1
    bad, elements = compare.case_mismatches("portable", "", ref, obs)
    assert np.nonzero(bad)[0].tolist() == [k] and np.argwhere(elements).tolist() == [[k, e]]
    # hw loads ignore coordinates but not statuses
    obs = tuple(a.copy() for a in ref)
    obs[2][k, e, 0] += 5
    assert not compare.case_mismatches("hw", "load", ref, obs)[0].any()
    assert compare.case_mismatches("hw", "decode", ref, obs)[0].tolist().count(True) == 1


def test_store_comparison_allows_either_winner_of_a_shared_index():
    layout = TensorLayout.create(1, ClampMode.Constant).set_dimension(4)     # span 4 < 8 elements: wraps
    variant = fc.Variant("store", "int32", 1, ClampMode.Constant)
    case = fc.FuzzCase(0, variant, 1, 8, layout)
    ref = compare.reference_batch([case], 8)
    assert ref[0][0].tolist() == [0, 1, 2, 3, 0, 1, 2, 3]
    written = np.zeros((1, fc.STORE_REGION), dtype=bool)
    written[0, :4] = True
    first_wins = np.array([[0, 1, 2, 3, -1, -1, -1, -1]])
    second_wins = np.array([[-1, -1, -1, -1, 0, 1, 2, 3]])
    for indices in (first_wins, second_wins):
        status = np.where(indices >= 0, 0, 2).astype(np.uint8)
        bad, _ = compare.case_mismatches("hw", "store", ref, (indices, status, ref[2], ref[3]), written)
        assert not bad.any()
    wrong = np.array([[1, -1, 2, 3, -1, -1, -1, -1]])   # element 0 landed on index 1
    bad, _ = compare.case_mismatches("hw", "store", ref, (wrong, (wrong < 0).astype(np.uint8) * 2, ref[2], ref[3]),
                                     written)
    assert bad.all()


def test_glsl_repro_compiles_with_glslang():
    spirv_tools = pytest.importorskip("spirv_tools")
    try:
        spirv_tools.compile("#version 450\nvoid main() {}\n")
    except Exception as error:  # noqa: BLE001 - no toolchain
        pytest.skip(f"no shader toolchain: {error}")
    snippet = fuzz.glsl_snippet(_big_case())
    assert "setTensorLayoutBlockSizeNV(t, 2, 3, 1, 2);" in snippet
    assert "tensorViewNV<4, true, 3, 1, 0, 2>" in snippet and "setTensorViewClipNV(v, 2u, 10u, 1u, 0xFFFFFFFFu)" in snippet
    source = ("#version 450\n#extension GL_KHR_memory_scope_semantics : enable\n"
              "#extension GL_KHR_cooperative_matrix : enable\n#extension GL_NV_cooperative_matrix2 : enable\n"
              "#extension GL_EXT_shader_explicit_arithmetic_types : enable\n#extension GL_EXT_buffer_reference : enable\n"
              "layout(local_size_x = 32) in;\nlayout(binding = 0) buffer B { float16_t buf[]; };\n"
              "layout(buffer_reference, std430, buffer_reference_align = 2) buffer Block { float16_t v; };\n"
              "int32_t decode(const in Block b, const in uint32_t bc[4], const in uint32_t cib[4]) { return 0; }\n"
              "void main() {\n" + snippet + "\n}\n")
    spirv_tools.compile(source)


def test_reference_view_marks_mismatching_elements():
    case = fc.FuzzCase(0, fc.Variant("load", "int32", 1, ClampMode.Constant), 2, 3,
                       TensorLayout.create(1, ClampMode.Constant).set_dimension(4).slice((2,), (6,)))
    ref = tuple(a[0] for a in compare.reference_batch([case], 6))
    assert ref[0].tolist() == [2, 3, -1, -1, -1, -1]
    obs = tuple(a.copy() for a in ref)
    obs[0][1] = 9
    bad = np.zeros(6, dtype=bool)
    bad[1] = True
    lines = fuzz.reference_view(case, ref, obs, bad).splitlines()
    assert lines[1].split() == ["2", "3!", "C"] and lines[2].split() == ["C", "C", "C"]
    assert lines[3].startswith("  (0,1): reference IN_BOUNDS index 3; observed IN_BOUNDS index 9")


@pytest.mark.parametrize("kwargs, word", [({"cases": 0}, "cases"), ({"target": "gpu"}, "target"),
                                          ({"seed": -1}, "seed"), ({"variants": 0}, "variants"),
                                          ({"chunk_size": 0}, "chunk_size")])
def test_bad_arguments_are_rejected_before_anything_runs(kwargs, word):
    with pytest.raises(fuzz.FuzzInputError, match=word):
        fuzz.run(**kwargs)


def test_ctrl_c_in_the_fuzz_loop_is_a_flag_that_the_loop_raises_at_its_next_task():
    """The first SIGINT only sets the flag (an exception raised inside a finalizer would be dropped), the loop's
    check raises it, a second SIGINT raises at once, and the previous handler comes back."""
    import os
    import signal
    import time

    from vkcoop.fuzz.runner import _chunks, _CtrlC

    def deliver():   # the handler runs between bytecodes of this thread, soon after the signal
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.05)

    # Python's handler, as an interactive run has it (a background CI job starts with SIGINT ignored)
    outer = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with _CtrlC() as ctrl_c:
            deliver()
            assert ctrl_c.hit
            with pytest.raises(KeyboardInterrupt):
                next(_chunks(iter([([], None)] * 3), 3, 1, ctrl_c.check))
            with pytest.raises(KeyboardInterrupt):
                deliver()
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGINT, outer)
