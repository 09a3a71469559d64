"""Samples 1-5 and the sample framework: shader variants, case generation against the H200's tables,
reference sanity (checked through independent paths), bad input, the framework end to end on any Vulkan
device (lavapipe) with a plain compute shader, and (marked gpu) every sample on a coopmat2 device."""
from __future__ import annotations

import json

import ml_dtypes
import numpy as np
import pytest

from vkcoop import shaders, tensor
from vkcoop.samples import (Binding, Case, LayoutRecipe, Requirements, Sample, SampleInputError, ViewRecipe,
                            all_samples, get_sample, index_pattern)
from vkcoop.samples import caps, case, decode, elementwise, reductions, tensor_load_store, tensor_views
from vkcoop.samples.fixtures import H200_CAPS
from vkcoop.tensor import ClampMode, ElementStatus
from support import toolchain_or_skip

MY_SAMPLES = ["tensor-load-store", "tensor-views", "decode", "reductions", "elementwise"]
MY_SHADER_DIRS = ["samples/tensor_load_store/", "samples/tensor_views/", "samples/decode/", "samples/reductions/",
                  "samples/elementwise/", "samples/selftest/"]


def cases_of(name):
    return {c.name: c for c in get_sample(name).prepared_cases(H200_CAPS)}


def output(case):
    return next(b for b in case.bindings if b.is_output)


# --------------------------------------------------------------------------- shaders



def _my_variants():
    return [v for v in shaders.all_variants() if any(v.shader.startswith(d) for d in MY_SHADER_DIRS)]


@pytest.mark.toolchain
@pytest.mark.parametrize("variant", _my_variants(), ids=lambda v: v.label)
def test_every_sample_shader_variant_compiles_and_validates(variant):
    spirv_tools = toolchain_or_skip()
    spirv = shaders.compile_variant(variant)
    spirv_tools.validate(spirv)
    info = spirv_tools.reflect(spirv)
    assert info.local_size == (32, 1, 1) or variant.shader.startswith("samples/selftest/")


@pytest.mark.toolchain
@pytest.mark.parametrize("name", MY_SAMPLES)
def test_declared_requirements_cover_the_shader_capabilities(name):
    """Every capability a dispatched variant declares maps to a feature the sample enables."""
    toolchain_or_skip()
    sample = get_sample(name)
    seen = set()
    for case in sample.prepared_cases(H200_CAPS):
        if case.variant() in seen:
            continue
        seen.add(case.variant())
        sample.check_capabilities(shaders.compile_variant(case.variant()), case)
    assert seen


@pytest.mark.toolchain
def test_capability_check_names_the_missing_feature():
    toolchain_or_skip()

    class Undeclared(Sample):
        name = "undeclared"
        requires = caps.COOPMAT2_BASE  # lacks cooperativeMatrixReductions

    case = cases_of("reductions")["F16/row/sum"]
    with pytest.raises(SampleInputError, match="cooperativeMatrixReductions"):
        Undeclared().check_capabilities(shaders.compile_variant(case.variant()), case)


def test_tensor_shader_layout_kinds_match_the_python_tables():
    """view.comp's VIEW_KIND table and the Python VIEW_KINDS agree (parsed from the shader text)."""
    text = (shaders.shader_root() / tensor_views.SHADER).read_text()
    for kind, (ldim, vdim, has_dims, perm) in tensor_views.VIEW_KINDS.items():
        block = text.split(f"#if VIEW_KIND == {kind}")[-1] if f"#if VIEW_KIND == {kind}" in text else \
            text.split(f"#elif VIEW_KIND == {kind}")[1]
        block = block.split("#elif")[0].split("#else")[0]
        assert f"define LDIM {ldim}" in block
        assert f"define VDIM {vdim}" in block
        args = ", ".join([str(vdim), "true" if has_dims else "false"] + [str(p) for p in perm])
        short = ", ".join([str(vdim), "false"])
        assert f"createTensorViewNV({args})" in block or (perm == tuple(range(vdim)) and
                                                          f"createTensorViewNV({short})" in block)


# --------------------------------------------------------------------------- registry and cases

def test_registry_lists_samples_in_suite_order():
    names = [s.name for s in all_samples()]
    assert names[:5] == MY_SAMPLES
    with pytest.raises(KeyError, match="tensor-load-store"):
        get_sample("no-such-sample")


@pytest.mark.parametrize("name", MY_SAMPLES)
def test_cases_are_declared_variants_with_outputs(name):
    sample = get_sample(name)
    assert sample.description and sample.requires.features
    cases = sample.prepared_cases(H200_CAPS)  # Case.check: declared @variants, output dtypes/shapes
    assert len(cases) >= 10
    for case in cases:
        out = output(case)
        # An expected output equal to the zero-filled destination would prove nothing.
        assert not np.array_equal(out.expected.view(np.uint8), np.zeros_like(out.data).view(np.uint8)), case.name
    json.dumps(sample.requires.to_dict())


def test_load_store_covers_every_clamp_mode_type_and_dimension():
    cases = cases_of("tensor-load-store")
    for element in ("F16", "F32", "BF16", "S8", "U8", "S32"):
        for mode in ("constant", "clamp-to-edge", "repeat", "mirror-repeat", "undefined"):
            assert any(n.startswith(f"load/{element}/{mode}/") for n in cases)
            assert any(n.startswith(f"store/{element}/{mode}/") for n in cases)
    for dim in (1, 3, 4, 5):
        assert f"load/F16/{dim}d/repeat/strided" in cases and f"store/F16/{dim}d/constant/packed" in cases
    # Shapes come from the table: int8 matrices are 16x32 on the H200, fp32 accumulators 16x16.
    assert cases["load/S8/constant/negative-offsets"].specialization["COLS"] == 32
    assert cases["load/F32/constant/negative-offsets"].specialization["ROWS"] == 16


@pytest.mark.parametrize("element", ["F16", "F32", "BF16", "S8", "U8", "S32"])
def test_constant_clamp_cases_read_the_typed_clamp_value(element):
    case = cases_of("tensor-load-store")[f"load/{element}/constant/negative-offsets"]
    dtype = caps.element_type(element).dtype
    got = output(case).expected
    clamp = np.array([tensor_load_store.CLAMP_VALUES[element]]).astype(np.float64).astype(dtype)[0]
    clamped = got.view(f"u{dtype.itemsize}") == np.array([clamp], dtype=dtype).view(f"u{dtype.itemsize}")[0]
    assert 0 < clamped.sum() < got.size   # some clamped, some read from the tensor


def test_clamp_modes_differ_from_each_other():
    cases = cases_of("tensor-load-store")
    outputs = {mode: output(cases[f"load/F16/{mode}/negative-offsets"]).expected.tobytes()
               for mode in ("constant", "clamp-to-edge", "repeat", "mirror-repeat")}
    assert len(set(outputs.values())) == 4


def test_load_reference_agrees_with_the_scalar_spec_functions():
    """The vectorized expectation of a Repeat case, recomputed element by element with vkcoop.tensor.spec."""
    case = cases_of("tensor-load-store")["load/F16/repeat/negative-offsets"]
    layout = tensor_load_store.layouts_2d(ClampMode.Repeat, 16, 16, "F16")["negative-offsets"].layout()
    source = case.bindings[1].data
    expected = output(case).expected.reshape(16, 16)
    for row in range(16):
        for col in range(16):
            address = tensor.element_address(layout, row, col, 16)
            assert address.status == ElementStatus.IN_BOUNDS
            assert expected[row, col] == source[address.index]


def _layout_from_record(case, dim: int, mode: ClampMode) -> tensor.TensorLayout:
    """The layout a tensor shader builds from the case's record words (block 1, dimension at word 5, stride at
    10 when EXPLICIT_STRIDE, offset at 15, span at 20), rebuilt here rather than taken from the sample."""
    words = case.bindings[0].data
    t = tensor.TensorLayout.create(dim, mode).set_dimension(*(int(w) for w in words[5:5 + dim]))
    if case.specialization["EXPLICIT_STRIDE"]:
        t = t.set_stride(*(int(w) for w in words[10:10 + dim]))
    return t.slice(tuple(int(w) for w in words[15:15 + dim].view(np.int32)), tuple(int(w) for w in words[20:20 + dim]))


def test_store_writes_exactly_the_in_bounds_elements_at_their_addresses():
    """Each store case's expected destination, element by element: every matrix element the scalar spec
    functions place IN_BOUNDS holds that element's value at its address, and everything else keeps the
    sentinel. (The test this replaced only counted the written elements.)"""
    modes = {name: mode for mode, name in tensor_load_store.CLAMP_MODE_NAMES.items()}
    checked = 0
    for name, case in cases_of("tensor-load-store").items():
        if not name.startswith("store/"):
            continue
        out = output(case)
        rows, cols = case.specialization["ROWS"], case.specialization["COLS"]
        dim = int(case.defines.get("LDIM", 2))
        layout = _layout_from_record(case, dim, modes.get(case.defines.get("CLAMP_MODE"), ClampMode.Constant))
        matrix = case.bindings[1].data.reshape(rows, cols)
        expected = out.data.copy()  # the sentinel-filled destination
        for row in range(rows):
            for col in range(cols):
                address = tensor.element_address(layout, row, col, cols, op="store")
                if address.status == ElementStatus.IN_BOUNDS:
                    expected[address.index] = matrix[row, col]
        assert expected.tobytes() == out.expected.tobytes(), name
        if "constant" in name and "packed" not in name and "inside" not in name:
            assert (expected == out.data).sum() > (out.data.size - rows * cols), name  # some were discarded
        checked += 1
    assert checked >= 30


def test_layout_recipe_matches_the_glsl_builder_sequence():
    recipe = LayoutRecipe((7, 9, 11), ClampMode.Repeat, stride=(200, 20, 1), offsets=(-2, 3, -4), spans=(4, 4, 16),
                          clamp_value=5)
    t = tensor.createTensorLayoutNV(3, tensor.gl_CooperativeMatrixClampModeRepeatNV)
    t = tensor.setTensorLayoutDimensionNV(t, 7, 9, 11)
    t = tensor.setTensorLayoutStrideNV(t, 200, 20, 1)
    t = tensor.sliceTensorLayoutNV(t, -2, 4, 3, 4, -4, 16)
    t = tensor.setTensorLayoutClampValueNV(t, 5)
    assert recipe.layout() == t
    words = recipe.words()
    assert list(words[5:8]) == [7, 9, 11] and list(words[10:13]) == [200, 20, 1]
    assert list(words[15:18].view(np.int32)) == [-2, 3, -4] and list(words[20:23]) == [4, 4, 16]
    assert words[25] == 5 and list(words[0:3]) == [1, 1, 1]


def test_view_recipe_matches_the_glsl_builder_sequence():
    recipe = ViewRecipe(5, True, (0, 2, 1, 3, 4), dimensions=(4, 2, 4, 2, 4), clip=(1, 2, 3, 4))
    v = tensor.createTensorViewNV(5, True, 0, 2, 1, 3, 4)
    v = tensor.setTensorViewDimensionsNV(v, 4, 2, 4, 2, 4)
    v = tensor.setTensorViewClipNV(v, 1, 2, 3, 4)
    assert recipe.view() == v
    assert list(recipe.words()[10:14]) == [1, 2, 3, 4]


def test_view_cases_cover_transpose_clip_and_space_to_depth():
    cases = cases_of("tensor-views")
    for label in ("transpose", "transpose-dims/stride", "identity/clip", "permute3", "reshape4/tiles",
                  "space-to-depth", "space-to-depth/slice"):
        assert f"load/{label}" in cases and f"store/{label}" in cases
    # A transposed load of a column-major tensor is the transpose of a plain read (independent numpy check).
    case = cases["load/transpose"]
    source = case.bindings[1].data
    column_major = source[:(16 + 3) * (16 + 5)].reshape(16 + 3, 16 + 5)[2:18, 1:17]  # (cols, rows) slice
    np.testing.assert_array_equal(output(case).expected.reshape(16, 16), column_major.T)
    # Space-to-depth: matrix row (i, j) column (di, dj, ch) reads HWC element (2i+di, 2j+dj, ch).
    case = cases["load/space-to-depth"]
    h, w, ch = tensor_views.space_to_depth_geometry(16, 16)
    hwc = case.bindings[1].data[:h * w * ch].reshape(h, w, ch)
    reference = hwc.reshape(h // 2, 2, w // 2, 2, ch).transpose(0, 2, 1, 3, 4).reshape(16, 16)
    np.testing.assert_array_equal(output(case).expected.reshape(16, 16), reference)
    # Clipped loads keep the previous value outside the clip.
    clipped = output(cases["load/identity/clip"]).expected.reshape(16, 16)
    assert (clipped[:2] == tensor_views.PREVIOUS).all() and (clipped[2:13, 3:13] != tensor_views.PREVIOUS).all()


def test_decode_references_match_independent_decoders():
    cases = cases_of("decode")
    # Q8_0: element (r, c) of an aligned slice from row 1 is d * qs[c] of block (r + 1, 0).
    case = cases["q8_0/aligned"]
    blocks = case.bindings[1].data[:decode.Q8_0.itemsize * decode.block_count(
        decode.decode_layouts(H200_CAPS)[0][2])].view(decode.Q8_0)
    got = output(case).expected.reshape(16, 16)
    for r in (0, 7, 15):
        for c in (0, 5, 15):
            block = blocks[(r + 1) * 2]
            assert got[r, c] == np.float16(block["d"]) * np.float16(block["qs"][c])
    # fp8: all 256 codes of each format, E5M2 bit-identical to an fp16's top byte.
    e5m2 = output(cases["e5m2/all-codes"]).expected
    np.testing.assert_array_equal(e5m2.view(np.uint16), (np.arange(256, dtype=np.uint16) << 8)
                                  * ~np.isnan(e5m2) + e5m2.view(np.uint16) * np.isnan(e5m2))
    e4m3 = output(cases["e4m3/all-codes"]).expected
    assert np.isnan(e4m3).sum() == 2 and np.nanmax(e4m3) == 448
    codes = np.arange(256, dtype=np.uint8).view(ml_dtypes.float8_e4m3fn).astype(np.float32)
    assert sorted(e4m3[~np.isnan(e4m3)].astype(np.float32).tolist()) == sorted(codes[~np.isnan(codes)].tolist())
    # int4 nibbles: signed values -8..7 only, plus the clamp value of the clamped case.
    assert set(np.unique(output(cases["int4/in-bounds"]).expected)) <= set(range(-8, 8))
    assert -128 in output(cases["int4/clamped"]).expected


def test_decode_block_coordinates_agree_with_the_scalar_spec():
    for label, fmt, recipe, (rows, cols) in decode.decode_layouts(H200_CAPS):
        if not fmt.startswith("FORMAT_COORDS"):
            continue
        case = cases_of("decode")[f"{fmt.removeprefix('FORMAT_').lower()}/{label}"]
        tags, block_coord, coord_in_block = output(case).expected.reshape(3, rows, cols)
        layout = recipe.layout()
        for row in range(0, rows, 3):
            for col in range(0, cols, 5):
                address = tensor.element_address(layout, row, col, cols)
                if address.status == ElementStatus.CLAMP_VALUE:
                    assert tags[row, col] == np.uint32(recipe.clamp_value).view(np.int32)
                    continue
                assert tags[row, col] == 1000 + address.index
                shifts = (16, 0) if layout.dim == 2 else (20, 10, 0)
                assert block_coord[row, col] == sum(c << s for c, s in zip(address.block_coord, shifts))
                assert coord_in_block[row, col] == sum(c << s for c, s in zip(address.coord_in_block, shifts))
                assert all(0 <= c < b for c, b in zip(address.coord_in_block, layout.block_size))


def test_known_issue_cases_have_passing_twins():
    decode_cases = cases_of("decode")
    for name in ("coords2/blocks-4x8", "coords3/blocks-2x1x4"):
        assert decode_cases[name].known_issue and decode_cases[name].specialization["EXPLICIT_STRIDE"] is False
        twin = decode_cases[name + "-explicit-stride"]
        assert twin.known_issue is None and twin.specialization["EXPLICIT_STRIDE"] is True
        np.testing.assert_array_equal(output(twin).expected, output(decode_cases[name]).expected)
    known = [c for c in cases_of("tensor-load-store").values() if c.known_issue]
    assert [c.name for c in known] == ["load/F16/mirror-repeat/unit-dimension"]


def _reduction_input_by_hand(case) -> np.ndarray:
    """The matrix a reduction case loads, without vkcoop.tensor: a packed 2-D tensor (height x width) read through
    a slice at (row0, col0); elements outside the tensor are the Constant clamp value's low bits."""
    rows, cols = case.specialization["ROWS"], case.specialization["COLS"]
    assert case.specialization["EXPLICIT_STRIDE"] == 0
    words, source = case.bindings[0].data, case.bindings[1].data
    height, width = int(words[5]), int(words[6])
    row0, col0 = (int(w) for w in words[15:17].view(np.int32))
    bits = np.array([words[25]], np.uint32)
    clamp = (bits.astype(np.uint16) if source.itemsize == 2 else bits).view(source.dtype)[0]
    matrix = np.full((rows, cols), clamp, dtype=source.dtype)
    for row in range(rows):
        for col in range(cols):
            r, c = row + row0, col + col0
            if 0 <= r < height and 0 <= c < width:
                matrix[row, col] = source[r * width + c]
    return matrix


def test_reduction_references_are_consistent():
    """Every reduction case's expectation recomputed from its own inputs: sum, max and min each by their numpy
    function over the rows, columns, everything or 2x2 blocks. (The test this replaced only checked that results were
    constant along the reduced axes, so it passed with every reduction computing max.)"""
    combines = {"sum": np.sum, "max": np.max, "min": np.min}
    results = {}
    for name, case in cases_of("reductions").items():
        element, mode, combine = name.split("/")
        m = _reduction_input_by_hand(case).astype(np.float64)
        out_rows, out_cols = case.specialization["OUT_ROWS"], case.specialization["OUT_COLS"]
        op = combines[combine]
        if mode == "row":
            want = np.repeat(op(m, axis=1)[:, None], out_cols, axis=1)
        elif mode == "column":
            want = np.repeat(op(m, axis=0)[None, :], out_rows, axis=0)
        elif mode == "row-and-column":
            want = np.full((out_rows, out_cols), op(m))
        else:
            want = np.array([[op(m[2 * i:2 * i + 2, 2 * j:2 * j + 2]) for j in range(out_cols)]
                             for i in range(out_rows)])
        got = output(case).expected
        assert got.tobytes() == want.astype(got.dtype).reshape(-1).tobytes(), name
        results[name] = got.tobytes()
    # The three combines give three different answers for every element type and mode.
    for name in results:
        if name.endswith("/sum"):
            stem = name[:-len("sum")]
            assert len({results[stem + c] for c in combines}) == 3, stem


def test_sum_inputs_are_exact_so_order_does_not_matter():
    case = cases_of("reductions")["F16/row-and-column/sum"]
    source = case.bindings[1].data.astype(np.float64)
    assert set(np.unique(source)) <= {-0.5, 0.0, 0.5, 1.0}
    assert np.abs(source).sum() < 1024  # every partial sum is a multiple of 0.5 below 2048: exact in fp16


def test_elementwise_references():
    cases = cases_of("elementwise")
    mask = output(cases["per-element/F16/causal-mask"]).expected.reshape(16, 16)
    above = np.triu(np.ones((16, 16), bool), k=elementwise.DIAGONAL + 1)
    assert np.isneginf(mask[above]).all() and not np.isinf(mask[~above]).any()
    for name, case in cases.items():
        if name.startswith("convert/"):
            out = output(case)
            assert out.expected.astype(np.float64).tolist() == \
                out.expected.astype(np.float64).astype(out.data.dtype).astype(np.float64).tolist()
    assert "convert/s32-acc-to-s8-a" in cases and "convert/f32-acc-to-bf16-b" in cases
    assert {"transpose/16x16", "transpose/16x32"} <= set(cases)
    t = output(cases["transpose/16x32"]).expected.reshape(32, 16)
    source = cases["transpose/16x32"].bindings[1].data
    assert t[0, 1] == source[(1 + 1) * 30 + 0]   # element (row 1, col 0) of the 16x32 matrix, tensor row 2


# --------------------------------------------------------------------------- bad input

def test_bad_input_is_rejected_before_dispatch():
    layout = LayoutRecipe((16, 16))
    with pytest.raises(SampleInputError, match="source has dtype float32"):
        tensor_load_store.load_case("x", "F16", layout, 16, 16, source=np.zeros(256, np.float32))
    with pytest.raises(SampleInputError, match="matrix must be 2-D"):
        tensor_load_store.store_case("x", "F16", layout, np.zeros(256, np.float16))
    with pytest.raises(SampleInputError, match="element type"):
        tensor_load_store.load_case("x", "F64", layout, 16, 16)
    with pytest.raises(SampleInputError, match="share a store address"):
        tensor_load_store.store_case("x", "F16", LayoutRecipe((100,), spans=(50,)), np.zeros((16, 16), np.float16))
    with pytest.raises(SampleInputError, match="floating-point accumulator"):
        reductions.reduce_case("x", "S32", "row", "sum", layout, 16, 16, np.zeros(256, np.int32))
    with pytest.raises(SampleInputError, match="halves both"):
        reductions.reduce_case("x", "F16", "2x2", "sum", layout, 16, 16, np.zeros(256, np.float16), (16, 16))
    with pytest.raises(SampleInputError, match="decodes blocks of"):
        decode.decode_case("x", "FORMAT_Q8_0", LayoutRecipe((16, 64), block_size=(1, 16)), 16, 16)
    with pytest.raises(SampleInputError, match="blocks has dtype"):
        decode.decode_case("x", "FORMAT_Q8_0", LayoutRecipe((16, 64), block_size=(1, 32)), 16, 16,
                           blocks=np.zeros(32, np.uint8))
    with pytest.raises(SampleInputError, match="3-D layout"):
        tensor_views.view_case("x", "VIEW_SPACE_TO_DEPTH", layout, tensor_views.make_view("VIEW_TRANSPOSE"),
                               16, 16, store=False)
    with pytest.raises(SampleInputError, match="y has shape"):
        elementwise.per_element_case("x", "F16", "OP_AFFINE", 16, 16, np.zeros(300, np.float16),
                                     np.zeros((8, 8), np.float16), layout)
    with pytest.raises(SampleInputError, match="multiple of 4"):
        tensor_views.view_layouts(16, 10)
    with pytest.raises(SampleInputError, match="has_dimensions=True needs dimensions"):
        ViewRecipe(2, True, (1, 0))


def test_case_check_rejects_undeclared_variants_and_mismatched_outputs():
    good = cases_of("reductions")["F16/row/sum"]
    bad_variant = Case("v", good.shader, {**good.defines, "COMBINE": "COMBINE_PRODUCT"}, good.bindings)
    with pytest.raises(SampleInputError, match="not a declared @variants"):
        bad_variant.check()
    out = output(good)
    bad_output = Case("o", good.shader, good.defines,
                      good.bindings[:-1] + [Binding("result", out.data, expected=out.expected.astype(np.float32))])
    with pytest.raises(SampleInputError, match="expected 'result' has dtype float32"):
        bad_output.check()


def test_layout_parameters_are_checked():
    with pytest.raises(SampleInputError, match="1..5 dimensions"):
        LayoutRecipe((1, 2, 3, 4, 5, 6))
    with pytest.raises(SampleInputError, match="stride needs 2 values"):
        LayoutRecipe((4, 4), stride=(1,))
    with pytest.raises(tensor.TensorSpecError, match="offsets"):
        LayoutRecipe((4, 4), offsets=(1 << 31, 0))


def test_compare_bits_finds_differences_and_nan_policy():
    a = np.array([1.0, np.nan, -0.0], np.float16)
    b = np.array([1.0, np.nan, 0.0], np.float16)
    b[1] = np.frombuffer(np.uint16(0x7E01).tobytes(), np.float16)[0]  # another NaN payload
    assert case.compare_bits(a, b).tolist() == [False, True, True]
    assert case.compare_bits(a, b, nan_equal=True).tolist() == [False, False, True]


# --------------------------------------------------------------------------- the framework on any Vulkan device

def _vulkan_or_skip():
    vk = pytest.importorskip("vkcoop.vk")
    try:
        with vk.Instance() as instance:
            instance.physical_devices()[0]
    except (vk.VulkanError, OSError, IndexError) as error:
        pytest.skip(f"no Vulkan device: {error}")
    toolchain_or_skip()
    return vk


class ScaleSelfTest(Sample):
    """Not registered: samples/selftest/scale.comp runs anywhere (no cooperative matrices)."""
    name = "selftest-scale"
    requires = Requirements()

    def __init__(self, wrong: bool = False, known_issue: str | None = None):
        self.wrong, self.known_issue = wrong, known_issue

    def cases(self, caps):
        x = index_pattern(100, np.float32)
        expected = x * 2 + 3
        if self.wrong:
            expected = expected.copy()
            expected[[5, 50]] += 1
        return [Case("offset-3", "samples/selftest/scale.comp", {"OFFSET": "3"},
                     [Binding("source", x), Binding("destination", np.zeros_like(x), expected=expected)],
                     specialization={"SCALE": 2.0}, groups=(2, 1, 1), known_issue=self.known_issue)]


@pytest.mark.vulkan
def test_framework_dispatches_and_compares_bit_for_bit():
    _vulkan_or_skip()
    result = ScaleSelfTest().run()
    assert result.status == "pass", result.to_dict()
    assert result.cases == 1 and result.gpu_time_ms > 0 and not result.mismatches
    failed = ScaleSelfTest(wrong=True).run()
    assert failed.status == "fail" and failed.mismatch_count == 2
    assert [m.index for m in failed.mismatches] == [(5,), (50,)]
    assert failed.mismatches[0].got == float(index_pattern(100, np.float32)[5] * 2 + 3)
    json.dumps(failed.to_dict())


@pytest.mark.vulkan
def test_known_issue_mismatches_are_reported_not_failed():
    _vulkan_or_skip()
    result = ScaleSelfTest(wrong=True, known_issue="deliberate").run()
    assert result.status == "pass" and result.mismatch_count == 0
    assert result.known_issues[0]["reproduced"] and result.known_issues[0]["mismatches"] == 2
    clean = ScaleSelfTest(known_issue="deliberate").run()
    assert clean.status == "pass" and clean.known_issues[0]["reproduced"] is False


@pytest.mark.vulkan
def test_samples_skip_with_a_reason_without_coopmat2():
    vk = _vulkan_or_skip()
    with vk.Instance() as instance:
        if any("VK_NV_cooperative_matrix2" in p.extensions for p in instance.physical_devices()):
            pytest.skip("this machine has a coopmat2 device; the skip path is not reachable")
    result = get_sample("tensor-load-store").run()
    assert result.status == "skip" and result.cases == 0
    assert "VK_NV_cooperative_matrix2" in result.reason
    assert json.loads(json.dumps(result.to_dict()))["status"] == "skip"


# --------------------------------------------------------------------------- on a coopmat2 device

def _coopmat2_or_skip():
    vk = _vulkan_or_skip()
    with vk.Instance() as instance:
        if not any("VK_NV_cooperative_matrix2" in p.extensions for p in instance.physical_devices()):
            pytest.skip("no Vulkan device with VK_NV_cooperative_matrix2")
    return vk


@pytest.mark.gpu
@pytest.mark.parametrize("name", MY_SAMPLES)
def test_sample_passes_on_a_coopmat2_device(name):
    vk = _coopmat2_or_skip()
    validate = True
    try:
        vk.Instance(validate=True).close()
    except vk.VulkanError:  # not installed, or listed but not loadable
        validate = False
    result = get_sample(name).run(validate=validate)
    assert result.status == "pass", json.dumps(result.to_dict(), indent=1)[:4000]
    assert result.cases > 0 and result.failed_cases == []
    assert result.validation_messages == []
