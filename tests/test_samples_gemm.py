"""Samples 6/7 and the Vulkan 2:4 path: shader variants, tile selection, case generation, references, bad
input, and (marked gpu) the dispatches themselves on a coopmat2 device."""
from __future__ import annotations

import numpy as np
import pytest

from vkcoop import sparse as sparse24
from vkcoop.samples import SampleInputError, get_sample
from vkcoop.samples import gemm as gemm_samples
from vkcoop import gemm as kernels
from vkcoop.gemm import vulkan as kernel_runner
from vkcoop.gemm import warmup as warmup_rule
from vkcoop.samples.fixtures import H200_CAPS
from support import coopmat2_reason, toolchain_or_skip

FLEX = H200_CAPS.flexible
KHR = H200_CAPS.khr
GEMM_SHADERS = ["gemm/coopmat2_gemm.comp", "gemm/khr_shmem_gemm.comp", "gemm/coopmat2_sparse24.comp",
                "gemm/coopmat2_staged_gemm.comp", "gemm/coopmat2_staged_sparse24.comp",
                "gemm/l2_flush.comp"]


# --------------------------------------------------------------------------- shaders


@pytest.mark.toolchain
@pytest.mark.parametrize("shader", GEMM_SHADERS)
def test_every_declared_variant_compiles_and_validates(shader):
    spirv_tools = toolchain_or_skip()
    from vkcoop import shaders
    variants = shaders.declared_variants(shader)
    assert variants
    for variant in variants:
        spirv = shaders.compile_variant(variant)
        spirv_tools.validate(spirv)


@pytest.mark.toolchain
@pytest.mark.toolchain
def test_spec_constants_are_reflected_under_their_declared_names():
    """glslang also names aliases such as `const uint OWN_M = TILE_M;` on TILE_M's id: the declared name wins,
    so the named specialization constants of the launches reach the right ids."""
    import spirv_tools
    from vkcoop import shaders
    toolchain_or_skip()
    for shader, names in (("gemm/coopmat2_gemm.comp", {1: "TILE_M", 2: "TILE_N", 10: "TAIL_SPLIT"}),
                          ("gemm/khr_shmem_gemm.comp", {4: "TILE_M", 7: "SUBGROUPS_M"})):
        spirv = shaders.compile_variant(shaders.declared_variants(shader)[0])
        reflected = {c.spec_id: c.name for c in spirv_tools.reflect(spirv).spec_constants}
        assert {i: reflected[i] for i in names} == names


def test_sparse_shader_uses_a_decode_function_on_block_loads():
    spirv_tools = toolchain_or_skip()
    from vkcoop import shaders
    spirv = shaders.compile_variant(shaders.declared_variants("gemm/coopmat2_sparse24.comp")[0])
    info = spirv_tools.reflect(spirv)
    assert "CooperativeMatrixBlockLoadsNV" in info.capabilities
    assert "OpTensorLayoutSetBlockSizeNV" in info.opcodes
    assert "PhysicalStorageBufferAddresses" in info.capabilities


@pytest.mark.toolchain
@pytest.mark.parametrize("name", ["coopmat2-gemm", "khr-shmem-gemm", "sparse24-gemm"])
def test_requirements_cover_the_shader_capabilities(name):
    toolchain_or_skip()
    from vkcoop import shaders
    sample = get_sample(name)
    seen = set()
    for case in sample.prepared_cases(H200_CAPS):
        if case.variant() not in seen:
            seen.add(case.variant())
            sample.check_capabilities(shaders.compile_variant(case.variant()), case)
    assert seen


# --------------------------------------------------------------------------- tile selection
def test_workgroup_tile_is_a_multiple_of_the_matching_granularity_row():
    for types in kernels.GEMM_TYPES.values():
        for invocations in (64, 128, 256):
            tile = kernels.choose_workgroup_tile(FLEX, types, invocations=invocations, target=(100, 70, 20))
            row = [r for r in kernels.granularity_rows(FLEX, types) if r.workgroup_invocations == invocations][0]
            assert tile.workgroup_size == invocations
            assert tile.tile_m % row.M == 0 and tile.tile_m >= 100
            assert tile.tile_n % row.N == 0 and tile.tile_n >= 70
            assert tile.tile_k % row.K == 0 and tile.tile_k >= 20
            kernels.check_workgroup_tile(FLEX, types, tile)


def test_int8_tiles_follow_the_int8_k_granularity():
    tile = kernels.choose_workgroup_tile(FLEX, "s8->s32", target=(128, 128, 16))
    assert tile.tile_k == 32  # the H200 lists K granularity 32 for int8


def test_default_invocations_is_the_largest_listed():
    assert kernels.choose_workgroup_tile(FLEX, "fp16->fp32").workgroup_size == 256


def test_tile_not_matching_any_row_is_rejected():
    with pytest.raises(kernels.GemmInputError, match="granularity|MGranularity"):
        kernels.check_workgroup_tile(FLEX, "fp16->fp32", kernels.WorkgroupTile(256, 48, 128, 32))
    with pytest.raises(kernels.GemmInputError, match="workgroupInvocations=96"):
        kernels.choose_workgroup_tile(FLEX, "fp16->fp32", invocations=96)


def test_no_flexible_rows_means_a_clear_error():
    with pytest.raises(kernels.GemmInputError, match="no workgroup-scope"):
        kernels.choose_workgroup_tile([], "bf16->fp32")


def test_khr_tile_picks_the_largest_table_shape():
    tile = kernels.choose_subgroup_tile(KHR, "fp16->fp32")
    assert (tile.lm, tile.ln, tile.lk) == (16, 16, 16)
    assert kernels.choose_subgroup_tile(KHR, "s8->s32").lk == 32
    with pytest.raises(kernels.GemmInputError, match="subgroup-scope KHR"):
        kernels.choose_subgroup_tile([], "fp16->fp16")


def test_khr_tile_that_cannot_be_copied_evenly_is_rejected():
    bad = kernels.SubgroupTile(16, 16, 16, tile_m=128, tile_n=32, tile_k=32, subgroups_m=4, subgroups_n=2)
    with pytest.raises(kernels.GemmInputError, match="whole number of 16-byte vectors"):
        kernels.check_subgroup_tile(bad, "fp16->fp32")


def test_khr_tile_codes_round_trip_and_bad_codes_are_refused():
    from vkcoop.gemm.tiles import parse_subgroup_tile
    for code in ("128x128x32:2x4", "128x128x32:2x2d2g8", "128x256x16:2x4d2", "64x128x32:1x2g4"):
        tile = parse_subgroup_tile(code, KHR, "fp16->fp32")
        assert tile.code() == code
    tile = parse_subgroup_tile("128x128x32:2x2d2g8", KHR, "fp16->fp32")
    assert (tile.tile_m, tile.tile_n, tile.tile_k, tile.subgroups_m, tile.subgroups_n) == (128, 128, 32, 2, 2)
    assert (tile.stages, tile.group_m, tile.workgroup_size) == (2, 8, 128)
    assert "2 stages" in tile.label() and "groups of 8 rows" in tile.label()
    for bad, why in (("128x128:2x2", "is not"), ("128x128x32:2x2d3", "stages must be 1 or 2"),
                     ("128x128x32:2x2g0", "GROUP_M at least 1")):
        with pytest.raises(kernels.GemmInputError, match=why):
            parse_subgroup_tile(bad, KHR, "fp16->fp32")


def test_a_second_khr_stage_doubles_the_shared_tiles():
    one = kernels.SubgroupTile(16, 16, 16, tile_m=128, tile_n=128, tile_k=32, subgroups_m=2, subgroups_n=2)
    two = kernels.SubgroupTile(16, 16, 16, tile_m=128, tile_n=128, tile_k=32, subgroups_m=2, subgroups_n=2, stages=2)
    tiles = (128 * (32 + 8) + 32 * (128 + 8)) * 2          # A and B with one 16-byte pad per row, fp16
    assert two.shared_memory_bytes("fp16->fp32") - one.shared_memory_bytes("fp16->fp32") == tiles
    assert one.shared_memory_bytes("fp16->fp32") == tiles + 4 * 16 * 16 * 4    # one fp32 edge matrix per subgroup
    assert two.specialization()["STAGES"] == 2 and one.specialization()["GROUP_M"] == 1


def test_the_khr_launch_picks_the_aligned_pipeline_only_for_whole_tiles():
    tile = kernels.SubgroupTile(16, 16, 16, tile_m=128, tile_n=128, tile_k=32, subgroups_m=2, subgroups_n=2,
                                stages=2, group_m=8)
    kernel = kernels.KhrKernel("fp16->fp32", tile)
    for (m, n, k), aligned in (((256, 128, 64), True), ((255, 128, 64), False), ((256, 136, 64), False),
                               ((256, 128, 72), False)):
        a, b = np.zeros((m, k), np.float16), np.zeros((k, n), np.float16)
        (dispatch,) = kernel.launch(a, b).dispatches
        assert dispatch.specialization["ALIGNED"] is aligned, (m, n, k)
        assert dispatch.specialization["GROUP_M"] == 8 and dispatch.specialization["STAGES"] == 2


def test_the_khr_derivation_starts_with_the_double_buffered_tile_and_fits_48_kb():
    from vkcoop.gemm.configs import DeviceLimits, derive_khr_configs
    from vkcoop.gemm.path import GemmProblem
    limits = DeviceLimits(shared_memory=49152)
    square = derive_khr_configs(GemmProblem("fp16", "square", 8192, 8192, 8192), KHR, limits)
    assert square[0].code() == "128x128x32:2x2d2g8"
    assert all(t.shared_memory_bytes("fp16->fp32") <= 49152 for t in square)
    narrow = derive_khr_configs(GemmProblem("bf16", "llm", 8192, 32, 8192), KHR, limits)
    assert narrow[0].tile_n == 32 and {t.stages for t in narrow} == {1, 2}
    tight = derive_khr_configs(GemmProblem("fp16", "square", 8192, 8192, 8192), KHR, DeviceLimits(shared_memory=30000))
    assert tight and all(t.shared_memory_bytes("fp16->fp32") <= 30000 for t in tight)


def test_the_khr_path_refuses_what_it_cannot_run_with_one_line():
    from types import SimpleNamespace
    from vkcoop.gemm.configs import DeviceLimits
    from vkcoop.gemm.path import GemmProblem
    from vkcoop.gemm.paths import KhrPath
    tight = SimpleNamespace(khr=KHR, limits=DeviceLimits(shared_memory=4096), name="tight")
    with pytest.raises(kernels.GemmInputError, match="no KHR shared-memory tile of vk-khr-subgroup fits fp16"):
        KhrPath(tight).configs(GemmProblem("fp16", "square", 256, 256, 256), tune=True)
    roomy = SimpleNamespace(khr=KHR, limits=DeviceLimits(), name="roomy")
    # its kernels pad to whole tiles: an odd N and K run
    assert KhrPath(roomy).supports(GemmProblem("fp16", "ragged", 8191, 8190, 8189)) == (True, "roomy")


def test_unknown_types_key_names_the_choices():
    with pytest.raises(kernels.GemmInputError, match="fp16->fp32"):
        kernels.gemm_types("fp8->fp32")


# --------------------------------------------------------------------------- inputs and references
@pytest.mark.parametrize("key", list(kernels.GEMM_TYPES))
def test_exact_inputs_give_an_order_independent_product(key):
    types = kernels.GEMM_TYPES[key]
    a, b = kernels.exact_inputs(types, 33, 17, 300, seed=3)
    assert a.dtype == types.input_dtype and b.dtype == types.input_dtype
    forward = kernels.reference_gemm(a, b, types.output_dtype)
    # Summing in reverse K order in the result type must give the same bits (the exactness argument).
    if types.input_dtype.kind == "i":
        backward = (a[:, ::-1].astype(np.int64) @ b[::-1].astype(np.int64)).astype(types.output_dtype)
    else:
        acc = np.zeros((33, 17), dtype=types.output_dtype)
        for kk in range(299, -1, -1):
            acc = (acc + np.outer(a[:, kk].astype(np.float32), b[kk].astype(np.float32)).astype(
                types.output_dtype)).astype(types.output_dtype)
        backward = acc
    assert np.array_equal(forward.view(np.uint8), backward.view(np.uint8))


def test_exact_inputs_refuse_a_k_that_would_round_fp16():
    with pytest.raises(kernels.GemmInputError, match="too large"):
        kernels.exact_inputs("fp16->fp16", 4, 4, 512)


def test_sparse_reference_is_the_product_of_the_pruned_matrix():
    rng = np.random.default_rng(0)
    a = rng.choice([-1.0, -0.5, 0.5, 1.0], size=(8, 64)).astype(np.float16)
    b = rng.choice([-1.0, 0.5, 1.0], size=(64, 5)).astype(np.float16)
    compressed = sparse24.compress_2to4(a)
    got = kernels.sparse24_reference(compressed.values, compressed.metadata, b)
    pruned = sparse24.prune_2to4(a)
    # every chunk of 4 along K keeps exactly 2 entries, the rest are zero
    assert np.all(np.count_nonzero(pruned.reshape(8, 16, 4), axis=-1) <= 2)
    assert np.array_equal(got, pruned.astype(np.float32) @ b.astype(np.float32))
    assert not np.array_equal(got, a.astype(np.float32) @ b.astype(np.float32))


# --------------------------------------------------------------------------- cases
def test_coopmat2_cases_cover_types_ragged_shapes_and_column_major_b():
    cases = get_sample("coopmat2-gemm").prepared_cases(H200_CAPS)
    defines = {c.defines["GEMM_TYPES"] for c in cases}
    assert defines == {"F16_F16", "F16_F32", "BF16_F32", "S8_S32"}
    assert len([c for c in cases if c.specialization["B_COLUMN_MAJOR"] is True]) == 4
    ragged = 0
    for case in cases:
        spec = case.specialization
        m, n, k = (int(v) for v in case.push[:3])
        if m % spec["TILE_M"] or n % spec["TILE_N"] or k % spec["TILE_K"]:
            ragged += 1
        outputs = {binding.name: binding.expected.shape for binding in case.bindings if binding.expected is not None}
        split = spec["SPLIT_K"]
        tiles = -(-m // spec["TILE_M"]) * -(-n // spec["TILE_N"])
        if split == 1:
            assert outputs == {"C": (m, n)} and case.defines["SPLIT_SUM"] == "NONE"
        else:   # the planes, their sum by the last slice and the counts set back to zero
            assert outputs == {"partial sums": (split, m, n), "C": (m, n), "arrivals": (tiles,)}
            assert case.defines["SPLIT_SUM"] == "LAST"
        assert case.groups == (tiles, split, 1)
    assert ragged >= 8
    # split-K summed by the last slice for every type
    splits = sorted((c.defines["SPLIT_SUM"], c.defines["GEMM_TYPES"]) for c in cases if c.specialization["SPLIT_K"] > 1)
    assert splits == [("LAST", "BF16_F32"), ("LAST", "F16_F16"), ("LAST", "F16_F32"), ("LAST", "S8_S32")]


def test_split_k_partials_cover_k_once_in_whole_tile_steps():
    tile = kernels.WorkgroupTile(256, 128, 128, 32, split_k=3)
    a, b = kernels.exact_inputs("fp16->fp32", 5, 4, 229, seed=2)
    planes = gemm_samples.split_k_partials(a, b, tile)
    assert planes.shape == (3, 5, 4)
    assert np.array_equal(planes.astype(np.float64).sum(axis=0), kernels.reference_gemm(a, b, np.float64))
    # slice 0 is exactly the first 96 columns (ceil(ceil(229/3)/32)*32)
    assert np.array_equal(planes[0], (a[:, :96].astype(np.float32) @ b[:96].astype(np.float32)))


def test_a_split_k_case_needs_two_slices_and_sums_in_the_result_type():
    a, b = kernels.exact_inputs("fp16->fp16", 8, 8, 64)
    with pytest.raises(SampleInputError, match="split_k >= 2"):
        gemm_samples.coopmat2_split_k_case("x", "fp16->fp16", kernels.WorkgroupTile(256, 128, 128, 32), a, b)
    # fp16 results: the planes and their sum are fp16, added in slice order
    case = gemm_samples.coopmat2_split_k_case("x", "fp16->fp16", kernels.WorkgroupTile(256, 128, 128, 32, split_k=2),
                                              a, b)
    expected = {binding.name: binding.expected for binding in case.bindings if binding.expected is not None}
    assert expected["partial sums"].dtype == np.float16 and expected["C"].dtype == np.float16
    assert np.array_equal(expected["C"], kernels.reference_gemm(a, b, np.float16))


def test_column_major_case_stores_b_transposed_and_keeps_the_same_expected():
    cases = get_sample("coopmat2-gemm").prepared_cases(H200_CAPS)
    pairs = {}
    for c in cases:
        if "mixed" in c.name and c.defines["GEMM_TYPES"] == "F16_F32":
            pairs[c.specialization["B_COLUMN_MAJOR"]] = c
    row, col = pairs[False], pairs[True]
    n, k = col.bindings[1].data.shape            # B is [N][K] when column-major; N = 259 is no whole 16-byte row
    assert n % 8 and int(row.push[1]) == int(col.push[1]) == n
    assert np.array_equal(row.bindings[1].data[:, :n], col.bindings[1].data.T)
    assert np.array_equal(col.bindings[2].expected, row.bindings[2].expected)
    assert int(col.push[4]) == k                 # B's row stride is K when B is [N][K]
    # a row-major B's rows of N elements are uploaded padded with zeros to whole 16-byte vectors, and the padded
    # length is the stride the kernel gets, so its fast path keeps aligned rows
    padded = -(-n // 8) * 8
    assert not row.bindings[1].data[:, n:].any() and int(row.push[4]) == row.bindings[1].data.shape[1] == padded


def test_khr_cases_respect_the_copy_alignment():
    for case in get_sample("khr-shmem-gemm").prepared_cases(H200_CAPS):
        m, n, k = (int(v) for v in case.push[:3])
        e = 16 // case.bindings[0].data.dtype.itemsize
        assert n % e == 0 and k % e == 0


def test_sparse_cases_ship_the_compressed_format():
    every = get_sample("sparse24-gemm").prepared_cases(H200_CAPS)
    cases = [c for c in every if c.shader == "gemm/coopmat2_sparse24.comp"]
    expansions = [c for c in every if c.shader == "gemm/sparse24_decompress.comp"]
    assert len(expansions) == 4 and len(cases) + len(expansions) == len(every)   # 2 dtypes x 2 shapes
    assert {c.defines["ELEMENT"] for c in cases} == {"F16", "BF16"}
    assert {c.defines["META_WORDS"] for c in cases} == {"0", "1", "4"}
    for case in cases:
        m, n, k = (int(v) for v in case.push[:3])
        meta_words = int(case.defines["META_WORDS"])
        if meta_words == 0:
            values, metadata = case.bindings[0].data, case.bindings[1].data
            assert len(case.bindings) == 4
        else:  # one interleaved binding that regroups the same format
            assert len(case.bindings) == 3
            element = np.float16 if case.defines["ELEMENT"] == "F16" else kernels.BF16
            values, metadata = kernels.deinterleave_2to4(case.bindings[0].data, k, meta_words, element)
        assert values.shape == (m, k // 2) and metadata.shape == (m, k // 32) and metadata.dtype == np.uint32
        sparse24.validate_compressed(values, metadata)
        assert case.specialization["TILE_K"] % 32 == 0
        expected = kernels.sparse24_reference(values, metadata, _stored_b_as_kn(case))
        assert np.array_equal(case.bindings[-1].expected, expected)


def _stored_b_as_kn(case):
    b = case.bindings[-2].data
    if case.specialization["B_COLUMN_MAJOR"]:
        return np.ascontiguousarray(b.T)
    return b[:, :int(case.push[1])]   # [K][N] rows are uploaded padded to whole 16-byte vectors


# --------------------------------------------------------------------------- interleaved 2:4 layout
def test_interleaved_blocks_follow_the_documented_layout():
    # Built by hand from the format's definition, not by the function under test.
    values = np.arange(1, 1 + 2 * 48, dtype=np.uint16).reshape(2, 48).view(np.float16)   # K = 96: 3 words
    metadata = np.array([[0x11111111, 0x22222222, 0x33333333], [0x44444444, 0x55555555, 0x66666666]], np.uint32)
    blocks = kernels.interleave_2to4(values, metadata, 4)     # 4 words per block -> 1 block, its last word padded
    assert blocks.shape == (2, 1, 36) and blocks.dtype == np.uint32
    raw = values.view(np.uint16).astype(np.uint32)
    row = 1
    assert list(blocks[row, 0, :4]) == [0x44444444, 0x55555555, 0x66666666, 0]   # a padding metadata word
    assert blocks[row, 0, 4] == raw[row, 0] | raw[row, 1] << 16            # first pair, lower K in the low half
    assert blocks[row, 0, 19] == raw[row, 30] | raw[row, 31] << 16         # 16th pair
    assert blocks[row, 0, 20] == raw[row, 32] | raw[row, 33] << 16         # 17th: the third word's first pair
    assert blocks[row, 0, 27] == raw[row, 46] | raw[row, 47] << 16         # the last real pair
    assert np.all(blocks[row, 0, 28:] == 0)                                 # padding pairs
    single = kernels.interleave_2to4(values, metadata, 1)     # 1 word per block -> 3 blocks, none padded
    assert single.shape == (2, 3, 9) and single[row, 2, 0] == 0x66666666
    assert single[row, 2, 1] == raw[row, 32] | raw[row, 33] << 16


@pytest.mark.parametrize("meta_words", [1, 4])
@pytest.mark.parametrize("k", [32, 96, 128, 160, 512])
def test_interleaving_round_trips(meta_words, k):
    rng = np.random.default_rng(k + meta_words)
    for dtype in (np.float16, kernels.BF16):
        dense = rng.choice(np.array([-1.0, -0.0, 0.5, 2.0], np.float32), size=(3, k)).astype(dtype)
        compressed = sparse24.compress_2to4(dense)
        blocks = kernels.interleave_2to4(compressed.values, compressed.metadata, meta_words)
        assert blocks.shape == (3, -(-k // (32 * meta_words)), 9 * meta_words)
        values, metadata = kernels.deinterleave_2to4(blocks, k, meta_words, dtype)
        assert np.array_equal(values.view(np.uint16), compressed.values.view(np.uint16))  # -0.0 kept
        assert np.array_equal(metadata, compressed.metadata)


def test_interleaving_refuses_bad_arguments():
    values, metadata = np.zeros((2, 32), np.float16), np.zeros((2, 2), np.uint32)
    for unsupported in (2, 3):   # the 2:4 shader has variants for 1 and 4 words a block
        with pytest.raises(kernels.GemmInputError, match=f"meta_words={unsupported}"):
            kernels.interleave_2to4(values, metadata, unsupported)
    with pytest.raises(kernels.GemmInputError, match="does not match"):
        kernels.interleave_2to4(values, np.zeros((2, 3), np.uint32), 1)
    with pytest.raises(kernels.GemmInputError, match="16-bit"):
        kernels.interleave_2to4(values.astype(np.float32), metadata, 1)
    with pytest.raises(SampleInputError, match="meta_words=8"):
        gemm_samples.sparse24_case("x", "fp16", kernels.WorkgroupTile(256, 128, 128, 64),
                                   np.zeros((16, 64), np.float16), np.zeros((64, 16), np.float16), meta_words=8)


# --------------------------------------------------------------------------- bad input
def test_bad_inputs_are_refused_before_dispatch():
    tile = kernels.WorkgroupTile(256, 128, 128, 32)
    a16 = np.zeros((64, 64), np.float16)
    with pytest.raises(SampleInputError, match="dtype float32"):
        gemm_samples.coopmat2_gemm_case("x", "fp16->fp32", tile, a16.astype(np.float32), a16)
    with pytest.raises(SampleInputError, match="B must be"):
        gemm_samples.coopmat2_gemm_case("x", "fp16->fp32", tile, a16, np.zeros((32, 8), np.float16))
    with pytest.raises(SampleInputError, match="multiple of 32"):
        gemm_samples.sparse24_case("x", "fp16", kernels.WorkgroupTile(256, 128, 128, 64),
                                   np.zeros((16, 48), np.float16), np.zeros((48, 16), np.float16))
    with pytest.raises(SampleInputError, match="dtype 'fp32'"):
        gemm_samples.sparse24_case("x", "fp32", tile, a16, a16)
    with pytest.raises(SampleInputError, match="tile_k=16"):
        gemm_samples.sparse24_case("x", "fp16", kernels.WorkgroupTile(256, 128, 128, 16), a16, a16)
    khr_tile = kernels.choose_subgroup_tile(KHR, "fp16->fp32")
    with pytest.raises(SampleInputError, match="multiples of 8"):
        gemm_samples.khr_gemm_case("x", "fp16->fp32", khr_tile, np.zeros((16, 20), np.float16),
                                   np.zeros((20, 16), np.float16))


def test_kernel_classes_refuse_wrong_operands_without_a_device():
    class NoDevice:  # the checks run before anything touches the device
        pass

    kernel = kernels.Sparse24Kernel("fp16", kernels.WorkgroupTile(256, 128, 128, 64))   # what bind() launches
    with pytest.raises(kernels.GemmInputError, match="multiple of 32"):
        kernel.launch(np.zeros((4, 24), np.float16), np.zeros((4, 1), np.uint32), np.zeros((48, 8), np.float16))
    with pytest.raises(kernels.GemmInputError, match="dtype float32"):
        kernel.launch(np.zeros((4, 16), np.float32), np.zeros((4, 1), np.uint32), np.zeros((32, 8), np.float16))
    with pytest.raises(kernels.GemmInputError, match="metadata has shape"):
        kernel.launch(np.zeros((4, 16), np.float16), np.zeros((4, 2), np.uint32), np.zeros((32, 8), np.float16))
    with pytest.raises(kernels.GemmInputError, match=r"dtype='fp32'"):
        kernels.Sparse24Gemm(NoDevice(), "fp32", kernels.WorkgroupTile(256, 128, 128, 64))
    with pytest.raises(kernels.GemmInputError, match="meta_words=3"):
        kernels.Sparse24Gemm(NoDevice(), "fp16", kernels.WorkgroupTile(256, 128, 128, 64), meta_words=3)
    with pytest.raises(kernels.GemmInputError, match="prefetch depth is 1 to 4"):
        kernels.StagedKernel("fp16->fp32", kernels.WorkgroupTile(256, 128, 128, 32, k_unroll=5))


# --------------------------------------------------------------------------- on the GPU
_NO_GPU = coopmat2_reason()


@pytest.mark.gpu
@pytest.mark.skipif(_NO_GPU is not None, reason=str(_NO_GPU))
@pytest.mark.parametrize("name", ["coopmat2-gemm", "khr-shmem-gemm", "sparse24-gemm"])
def test_sample_passes_bit_exact_on_the_gpu(name):
    import os
    validate = os.environ.get("VKCOOP_VALIDATE", "") == "1"
    result = get_sample(name).run(validate=validate)
    assert result.status == "pass", (result.reason, [m.to_dict() for m in result.mismatches],
                                     result.validation_messages[:5])
    assert result.cases > 0
    assert not result.validation_messages


@pytest.mark.gpu
@pytest.mark.skipif(_NO_GPU is not None, reason=str(_NO_GPU))
def test_split_k_summed_by_the_last_slice_holds_launch_after_launch():
    """The last slice of each tile adds the planes up and sets the tile's count back to zero, so every launch (C
    cleared before each, and after a timing loop of many) gives the exact reference's bits, ragged tiles included."""
    from vkcoop import vk
    features = list(dict.fromkeys(kernels.features_for("sparse24", "fp16->fp32")))
    split = dict(split_k=5, k_unroll=2, group_m=1)
    with vk.Device(features=features) as device:
        for m, n, k in ((300, 136, 1000), (256, 64, 1024)):
            a, b = kernels.exact_inputs("fp16->fp32", m, n, k, seed=m + k)
            dense_expected = kernels.reference_gemm(a, b, np.float32)
            runners = [(kernels.CoopMat2Gemm(device, "fp16->fp32", kernels.WorkgroupTile(64, 32, 32, 64, **split)),
                        (a, b), dense_expected),
                       (kernels.StagedCoopMat2Gemm(device, "fp16->fp32",
                                                   kernels.WorkgroupTile(128, 64, 32, 64, **split)),
                        (a, b), dense_expected)]
            if k % 32 == 0:   # the 2:4 format's K
                compressed = sparse24.compress_2to4(a)
                sparse_expected = kernels.sparse24_reference(compressed.values, compressed.metadata, b)
                runners.append((kernels.StagedSparse24Gemm(device, "fp16", kernels.WorkgroupTile(128, 64, 32, 64,
                                                                                                   **split)),
                                (compressed.values, compressed.metadata, b), sparse_expected))
            for runner, operands, expected in runners:
                with runner:
                    runner.bind(*operands)
                    for _ in range(2):
                        runner.bound_buffer("C").fill_zero()
                        assert np.array_equal(runner.result(), expected), runner.name
                        assert not runner.bound_buffer("arrivals").read().any(), runner.name
                    runner.time(iterations=20, warmup=2, warmup_seconds=0)
                    runner.bound_buffer("C").fill_zero()
                    assert np.array_equal(runner.result(), expected), runner.name


@pytest.mark.gpu
@pytest.mark.skipif(_NO_GPU is not None, reason=str(_NO_GPU))
def test_kernel_objects_match_the_reference_and_time():
    from vkcoop import vk
    features = kernels.features_for("sparse24", "fp16->fp32") + kernels.features_for("khr", "fp16->fp32")
    with vk.Device(features=list(dict.fromkeys(features))) as device:
        flex = device.physical.flexible_shapes()
        tile = kernels.choose_workgroup_tile(flex, "fp16->fp32", target=(128, 128, 64))
        a, b = kernels.exact_inputs("fp16->fp32", 300, 200, 256, seed=9)
        with kernels.CoopMat2Gemm(device, "fp16->fp32", tile, b_column_major=True) as dense:
            assert np.array_equal(dense.run(a, b), kernels.reference_gemm(a, b, np.float32))
            dense.bind(a, np.ascontiguousarray(b.T))
            times = dense.time(iterations=3, warmup=1, flush=kernels.L2Flush(device, megabytes=16))
            assert len(times) == 3 and all(t > 0 for t in times)
        compressed = sparse24.compress_2to4(a)
        with kernels.Sparse24Gemm(device, "fp16", tile) as sparse_kernel:
            got = sparse_kernel.run(compressed.values, compressed.metadata, b)
        assert np.array_equal(got, kernels.sparse24_reference(compressed.values, compressed.metadata, b))
        split = kernels.WorkgroupTile(tile.workgroup_size, tile.tile_m, tile.tile_n, tile.tile_k, split_k=3)
        with kernels.CoopMat2Gemm(device, "fp16->fp32", split) as dense_split:
            assert np.array_equal(dense_split.run(a, b), kernels.reference_gemm(a, b, np.float32))
        with kernels.Sparse24Gemm(device, "fp16", split, b_column_major=True) as sparse_split:
            got = sparse_split.run(compressed.values, compressed.metadata, b)
        assert np.array_equal(got, kernels.sparse24_reference(compressed.values, compressed.metadata, b))
        for meta_words in (1, 4):
            with kernels.Sparse24Gemm(device, "fp16", split, b_column_major=True, meta_words=meta_words) as packed:
                got = packed.run(compressed.values, compressed.metadata, b)
            assert np.array_equal(got, kernels.sparse24_reference(compressed.values, compressed.metadata, b))
        khr_tile = kernels.choose_subgroup_tile(device.physical.khr_shapes(), "fp16->fp32")
        with kernels.KhrSharedMemoryGemm(device, "fp16->fp32", khr_tile) as khr:
            assert np.array_equal(khr.run(a, b), kernels.reference_gemm(a, b, np.float32))


class _FakeCommands:
    """What time_dispatches uses of a command buffer; subclasses say how long submissions and runs take."""

    def __init__(self):
        self.submits, self.recorded = 0, 0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def recording(self):
        return self

    def dispatch(self, *args, **kwargs):
        self.recorded += 1


def test_timing_warms_up_for_a_minimum_time_and_returns_each_iteration():
    """The warm-up keeps submitting until both the count and the wall time are reached (GPU clocks come up)."""
    import time as clock

    class FakeCommands(_FakeCommands):
        def submit(self):
            self.submits += 1
            clock.sleep(0.002)

        def span_times_ns(self, spans):
            # dispatch i runs from 2000 i ns for 1000 (i + 1) ns: the gaps between them are idle
            begin = [2000.0 * i for i in range(self.recorded)]
            end = [begin[i] + 1000.0 * (i + 1) for i in range(self.recorded)]
            return [end[last] - begin[first] for first, last in spans]

    class FakeDevice:
        def command_buffer(self, **kwargs):
            self.commands = FakeCommands()
            return self.commands

    class FakePipeline:
        name = "fake"

    device = FakeDevice()
    dispatches = [(FakePipeline(), [], (1, 1, 1), None), (FakePipeline(), [], (1, 1, 1), None)]
    started = clock.perf_counter()
    times = kernel_runner.time_dispatches(device, dispatches, 3, warmup=1, warmup_seconds=0.05)
    assert clock.perf_counter() - started >= 0.05
    assert device.commands.submits >= 1 + 0.05 / 0.01   # many warm-up submissions, then one timed
    assert device.commands.recorded == 3 * 2
    # each run spans its two dispatches, the idle gap between them included (the sums would be 3, 7, 11 us)
    assert times == pytest.approx([4e-6, 6e-6, 8e-6])
    device = FakeDevice()
    kernel_runner.time_dispatches(device, dispatches, 3, warmup=1, warmup_seconds=0.0)
    assert device.commands.submits == 2   # count only: one warm-up, one timed


class _RampingCommands(_FakeCommands):
    """A command buffer whose runs take ``schedule[submit]`` microseconds each (a clock coming up)."""

    def __init__(self, schedule, clock):
        super().__init__()
        self.schedule, self.clock = schedule, clock

    def submit(self):
        self.submits += 1
        self.clock[0] += 0.1      # each submission lasts 0.1 s of (fake) wall time

    def span_times_ns(self, spans):
        value = self.schedule[min(self.submits, len(self.schedule)) - 1]
        return [1000.0 * value] * len(spans)


def _time_with(schedule, monkeypatch, warmup_seconds=0.25, **limits):
    clock = [0.0]
    monkeypatch.setattr(kernel_runner.time, "perf_counter", lambda: clock[0])
    monkeypatch.setattr(warmup_rule, "_last_busy", [limits.pop("last_busy", 0.0)])   # busy until now: warm
    monkeypatch.setattr(warmup_rule, "_warmed_apis", set(limits.pop("warmed", {"vulkan"})))
    for name, value in limits.items():
        monkeypatch.setattr(warmup_rule, name, value)

    class Device:
        def command_buffer(self, **kwargs):
            self.commands = _RampingCommands(schedule, clock)
            return self.commands

    class Pipeline:
        name = "fake"

    device = Device()
    times = kernel_runner.time_dispatches(device, [(Pipeline(), [], (1, 1, 1), None)], 4, warmup=1,
                                          warmup_seconds=warmup_seconds)
    return device.commands.submits, times


def test_the_warm_up_goes_on_until_two_batches_agree(monkeypatch):
    # 9.8 us while the clock is low (the first 0.25 s), then coming down to a steady 3.7 us: a fixed warm-up
    # would time 7.0 us runs; this one starts timing once two batches agree
    submits, times = _time_with([9.8, 9.8, 7.0, 5.0, 3.9, 3.7, 3.7, 3.7, 3.7], monkeypatch)
    assert times == pytest.approx([3.7e-6] * 4)
    assert submits == 8          # warm-up batches 1-7 (3.7 twice in a row at 6 and 7), then one timed
    assert warmup_rule.settled([3.70, 3.71], [3.72]) and not warmup_rule.settled([3.7], [3.9])


def test_a_gpu_left_idle_gets_the_long_warm_up_first(monkeypatch):
    # idle since t = -5 s: at least COLD_WARMUP_SECONDS (0.95 s: 10 batches of 0.1 s here) although the first
    # batches agree with each other, at the idle clock
    submits, times = _time_with([9.8] * 8 + [3.7], monkeypatch, last_busy=-5.0, COLD_WARMUP_SECONDS=0.95)
    assert submits == 11 and times == pytest.approx([3.7e-6] * 4)
    assert warmup_rule._last_busy[0] == pytest.approx(1.1)   # marked busy when timing ended


def test_the_first_timing_of_an_api_gets_the_long_warm_up_and_later_ones_a_brief_one(monkeypatch):
    # the GPU is busy (CUDA timed just now) but Vulkan has not timed in this process: the full warm-up first
    submits, _ = _time_with([3.7] * 20, monkeypatch, warmed={"cuda"}, COLD_WARMUP_SECONDS=0.95)
    assert submits == 11 and warmup_rule._warmed_apis == {"cuda", "vulkan"}
    # then, within IDLE_SECONDS of the last timing, only the brief minimum (3 batches of 0.1 s) and the settle
    submits, _ = _time_with([3.7] * 20, monkeypatch, last_busy=0.0, warmed={"cuda", "vulkan"},
                            COLD_WARMUP_SECONDS=0.95, warmup_seconds=0.25)
    assert submits == 4
    # an idle gap longer than IDLE_SECONDS cools the GPU again
    submits, _ = _time_with([3.7] * 20, monkeypatch, last_busy=-(warmup_rule.IDLE_SECONDS + 0.5),
                            COLD_WARMUP_SECONDS=0.95)
    assert submits == 11


def test_a_series_stops_at_its_count_or_after_its_time_cap(monkeypatch):
    clock = [0.0]
    monkeypatch.setattr(warmup_rule.time, "perf_counter", lambda: clock[0])

    def batch(seconds_each, size=2):
        def measure():
            clock[0] += seconds_each * size
            return [seconds_each] * size
        return measure

    assert len(warmup_rule.timed_series(batch(0.001), 20)) == 20      # fast runs: the count
    slow = warmup_rule.timed_series(batch(1.0), 20)                    # 1 s runs: the cap, after MIN_TIMED_RUNS
    assert len(slow) == warmup_rule.MIN_TIMED_RUNS + 1
    assert len(warmup_rule.timed_series(batch(5.0, size=1), 3)) == 3   # never fewer than asked below the minimum


def test_a_warm_up_that_never_settles_stops_at_its_limit(monkeypatch):
    flapping = [1.0, 2.0] * 10000
    submits, times = _time_with(flapping, monkeypatch, MAX_SETTLE_SECONDS=0.65)
    assert submits == 11 and len(times) == 4      # 3 + 7 warm-up batches of 0.1 s, then one timed


def test_a_long_minimum_warm_up_still_ends_with_two_batches_that_agree(monkeypatch):
    # 2 s of minimum warm-up (20 batches) with the clock still coming down at its end: the settle step gets its
    # own time after the minimum, instead of a limit that the minimum has already used up
    schedule = [9.8] * 19 + [7.0, 5.0, 3.9, 3.7, 3.7, 3.7]
    submits, times = _time_with(schedule, monkeypatch, warmup_seconds=2.0)
    assert times == pytest.approx([3.7e-6] * 4)
    assert submits == 25          # 20 minimum, then 5.0, 3.9, 3.7, 3.7 (settled), then one timed


# --------------------------------------------------------------------------- the staged kernels
def test_staged_kernel_launch_and_its_limits():
    tile = kernels.WorkgroupTile(256, 128, 128, 32, group_m=4)
    kernel = kernels.StagedKernel("fp16->fp32", tile)
    a, b = kernels.exact_inputs("fp16->fp32", 300, 136, 96, seed=4)
    launch = kernel.launch(a, b)
    (dispatch,) = launch.dispatches
    assert dispatch.shader == "gemm/coopmat2_staged_gemm.comp" and dispatch.buffers == ("A", "B", "C")
    assert dispatch.groups == (3 * 2, 1, 1) and [int(v) for v in dispatch.push] == [300, 136, 96, 96, 136, 136]
    assert dispatch.specialization == {"WORKGROUP_SIZE": 256, "TILE_M": 128, "TILE_N": 128, "TILE_K": 32,
                                       "GROUP_M": 4, "SPLIT_K": 1, "ALIGNED": False, "PREFETCH": 2}
    # two stages of (128 rows x 5 vectors) + (32 rows x 17 vectors), 16 bytes each
    assert kernel.shared_memory_bytes() == 2 * 16 * (128 * 5 + 32 * 17)
    kernel.check_shared_memory(49152)
    with pytest.raises(kernels.GemmInputError, match="shared memory"):
        kernels.StagedKernel("fp16->fp32", kernels.WorkgroupTile(256, 128, 256, 32)).check_shared_memory(49152)
    # two stages of (64 rows x 5 vectors) + (32 rows x 33 vectors): 44,032 bytes fit 49,152, not the 40,960 left
    # beside the driver's 8,192-byte workgroup-scope reserve
    wide = kernels.StagedKernel("fp16->fp32", kernels.WorkgroupTile(128, 64, 256, 32))
    assert wide.shared_memory_bytes() == 44032
    wide.check_shared_memory(49152)
    with pytest.raises(kernels.GemmInputError, match="the 40960 that maxComputeSharedMemorySize .49152. leaves"):
        wide.check_shared_memory(49152, 8192)
    with pytest.raises(kernels.GemmInputError, match="multiples of 8"):
        kernel.launch(a[:, :90], b[:90])
    with pytest.raises(kernels.GemmInputError, match="16-bit"):
        kernels.StagedKernel("s8->s32", tile)
    with pytest.raises(kernels.GemmInputError, match="whole number"):
        kernels.StagedKernel("fp16->fp32", kernels.WorkgroupTile(256, 32, 32, 16))
    fp16_split = kernels.StagedKernel("fp16->fp16", kernels.WorkgroupTile(256, 128, 128, 32, split_k=2))
    assert fp16_split.launch(*kernels.exact_inputs("fp16->fp16", 128, 128, 64, seed=1)).outputs["partial sums"] == \
        ((2, 128, 128), np.dtype(np.float16))
    with pytest.raises(kernels.GemmInputError, match="prefetch depth is 1 to 4"):
        kernels.StagedKernel("fp16->fp32", kernels.WorkgroupTile(256, 128, 128, 32, k_unroll=5))


def test_staged_split_k_sums_in_the_dispatch_and_aligned_needs_whole_tiles():
    kernel = kernels.StagedKernel("fp16->fp32", kernels.WorkgroupTile(64, 32, 32, 128, split_k=3))
    a, b = kernels.exact_inputs("fp16->fp32", 64, 32, 640, seed=5)
    launch = kernel.launch(a, b)
    (gemm,) = launch.dispatches       # the last slice of each tile adds the planes up: one dispatch
    assert gemm.groups == (2, 3, 1) and gemm.buffers == ("A", "B", "partial sums", "C", "arrivals")
    assert gemm.defines == {"GEMM_TYPES": "F16_F32", "SPLIT_SUM": "LAST"}
    assert launch.outputs["arrivals"] == ((2,), np.dtype(np.uint32)) and launch.result == "C"
    assert gemm.specialization["SPLIT_K"] == 3 and gemm.specialization["ALIGNED"] is True
    assert kernel.launch(a[:48], b).dispatches[0].specialization["ALIGNED"] is False     # a half tile of rows
    assert kernel.launch(a[:, :600], b[:600]).dispatches[0].specialization["ALIGNED"] is False   # K off TILE_K
    sparse = kernels.StagedSparse24Kernel("fp16", kernels.WorkgroupTile(64, 32, 32, 128, split_k=2))
    compressed = sparse24.compress_2to4(a)
    (gemm,) = sparse.launch(compressed.values, compressed.metadata, b).dispatches
    assert gemm.buffers == ("values", "metadata", "B", "partial sums", "C", "arrivals") and gemm.groups == (2, 2, 1)


def test_bound_buffers_are_named_and_an_unknown_name_is_refused():
    """``bound_buffer`` hands out what the bound launch holds (a split-K launch's arrival counts among them) and names
    them when asked for one it does not have; before a bind it says to bind first."""
    toolchain_or_skip()

    class FakeBuffer:
        def __init__(self, name):
            self.name = name

        def close(self):
            pass

    class FakeDevice:
        def pipeline(self, spirv, **options):
            return FakeBuffer(options.get("name"))

        def upload(self, array, name):
            return FakeBuffer(name)

        def empty(self, shape, dtype, name):
            return FakeBuffer(name)

    a, b = kernels.exact_inputs("fp16->fp32", 64, 32, 256, seed=3)
    kernel = kernels.CoopMat2Kernel("fp16->fp32", kernels.WorkgroupTile(64, 32, 32, 64, split_k=2))
    with kernel_runner.VulkanGemm(FakeDevice(), kernel) as runner:
        with pytest.raises(kernels.GemmInputError, match="bind\\(\\) inputs first"):
            runner.bound_buffer("C")
        runner.bind_launch(kernel.launch(a, b))
        assert runner.bound_buffer("arrivals").name == "arrivals"
        with pytest.raises(kernels.GemmInputError, match="no buffer 'D' \\(it has A, B, C, partial sums, arrivals\\)"):
            runner.bound_buffer("D")


def test_a_split_sums_in_the_dispatch_and_one_slice_stores_c():
    tile, rest = kernels.parse_tile("64:32x32x128u2g1s2w4")
    assert tile.split_k == 2 and tile.per_sm == 4 and rest == "" and tile.label() == "64:32x32x128u2g1s2w4"
    assert tile.split_sum_define() == {"SPLIT_SUM": "LAST"}
    one = kernels.WorkgroupTile(64, 32, 32, 128)
    assert one.split_sum_define() == {"SPLIT_SUM": "NONE"} and one.split_sum_define(tail=True) == {"SPLIT_SUM": "LAST"}
    # no other suffix reads back: a reduce pass (r), subgroup scope (sg) and two accumulators (p) are not kernels
    from vkcoop.gemm.configs import parse_config
    for label, rest in (("64:32x32x128u2g1s2w4r", "r"), ("256:128x256x32u4sg2", "sg2"), ("256:128x256x32u4p2", "p2")):
        with pytest.raises(kernels.GemmInputError, match=f"cannot read '{rest}'"):
            parse_config(label)


def test_direct_kernels_sum_split_k_in_the_dispatch():
    a, b = kernels.exact_inputs("bf16->fp32", 100, 40, 512, seed=8)
    tile = kernels.WorkgroupTile(64, 32, 32, 64, split_k=4)
    (gemm,) = kernels.CoopMat2Kernel("bf16->fp32", tile).launch(a, b).dispatches
    assert gemm.buffers == ("A", "B", "partial sums", "C", "arrivals") and gemm.defines["SPLIT_SUM"] == "LAST"
    assert gemm.groups == (4 * 2, 4, 1)
    compressed = sparse24.compress_2to4(a)
    launch = kernels.Sparse24Kernel("bf16", tile, meta_words=1).launch(compressed.values, compressed.metadata, b)
    (gemm,) = launch.dispatches
    assert gemm.buffers == ("interleaved A", "B", "partial sums", "C", "arrivals")
    assert gemm.defines == {"ELEMENT": "BF16", "META_WORDS": "1", "SPLIT_SUM": "LAST"}


@pytest.mark.gpu
@pytest.mark.skipif(_NO_GPU is not None, reason=str(_NO_GPU))
@pytest.mark.parametrize("types", ["fp16->fp32", "bf16->fp32", "fp16->fp16"])
def test_staged_kernel_is_bit_exact_on_the_gpu(types):
    """Ragged M and N (the clamped copies), a whole-tile problem (ALIGNED) and, for fp32 results, split-K with
    an empty last slice (K = 256 is 8 steps of 32; 5 slices of 2 steps leave slice 4 empty)."""
    from vkcoop import vk
    features = kernels.features_for("coopmat2", types)
    fp32 = types != "fp16->fp16"
    cases = [(kernels.WorkgroupTile(256, 128, 128, 32, k_unroll=1), (300, 136)),
             (kernels.WorkgroupTile(128, 64, 64, 32, k_unroll=3), (300, 136)),
             (kernels.WorkgroupTile(128, 64, 64, 32), (256, 128))]
    if fp32:
        cases.append((kernels.WorkgroupTile(64, 32, 32, 32, k_unroll=4, split_k=5), (96, 40)))
    with vk.Device(features=features) as device:
        for tile, (m, n) in cases:
            a, b = kernels.exact_inputs(types, m, n, 256 if fp32 else 96, seed=11)
            with kernels.StagedCoopMat2Gemm(device, types, tile) as staged:
                got = staged.run(a, b)
            assert np.array_equal(got, kernels.reference_gemm(a, b, kernels.gemm_types(types).output_dtype)), tile


def test_staged_sparse_kernel_launch_and_its_limits():
    tile = kernels.WorkgroupTile(128, 64, 64, 64)
    kernel = kernels.StagedSparse24Kernel("bf16", tile)
    a, b = kernels.exact_inputs("bf16->fp32", 100, 48, 192, seed=6)
    compressed = sparse24.compress_2to4(a)
    (dispatch,) = kernel.launch(compressed.values, compressed.metadata, b).dispatches
    assert dispatch.shader == "gemm/coopmat2_staged_sparse24.comp"
    assert dispatch.defines == {"GEMM_TYPES": "BF16_F32", "SPLIT_SUM": "NONE", "A_FORMAT": "ROWS"}
    assert dispatch.buffers == ("values", "metadata", "B", "C") and dispatch.groups == (2 * 1, 1, 1)
    assert [int(v) for v in dispatch.push] == [100, 48, 192, 48, 48]
    with pytest.raises(kernels.GemmInputError, match="metadata has shape"):
        kernel.launch(compressed.values, compressed.metadata[:, :2], b)
    with pytest.raises(kernels.GemmInputError, match="N a multiple of 8"):
        kernel.launch(compressed.values, compressed.metadata, b[:, :44])
    with pytest.raises(kernels.GemmInputError, match="multiple of 32"):
        kernels.StagedSparse24Kernel("fp16", kernels.WorkgroupTile(128, 64, 64, 16))
    with pytest.raises(kernels.GemmInputError, match="dtype='fp32'"):
        kernels.StagedSparse24Kernel("fp32", tile)


@pytest.mark.gpu
@pytest.mark.skipif(_NO_GPU is not None, reason=str(_NO_GPU))
@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
def test_staged_sparse_kernel_is_bit_exact_on_the_gpu(dtype):
    """Ragged M and N, a whole-tile problem (ALIGNED) and split-K with an empty last slice."""
    from vkcoop import vk
    types = kernels.accumulating_types(dtype)
    cases = [(kernels.WorkgroupTile(256, 128, 128, 32, k_unroll=1), (300, 136)),
             (kernels.WorkgroupTile(128, 64, 64, 64, k_unroll=3), (300, 136)),
             (kernels.WorkgroupTile(128, 64, 64, 64), (128, 64)),
             (kernels.WorkgroupTile(64, 32, 32, 32, k_unroll=4, split_k=5), (96, 40))]
    with vk.Device(features=kernels.features_for("coopmat2", types)) as device:
        for tile, (m, n) in cases:
            a, b = kernels.exact_inputs(types, m, n, 256, seed=12)
            compressed = sparse24.compress_2to4(a)
            with kernels.StagedSparse24Gemm(device, dtype, tile) as staged:
                got = staged.run(compressed.values, compressed.metadata, b)
            assert np.array_equal(got, kernels.sparse24_reference(compressed.values, compressed.metadata, b)), tile


def test_the_aligned_pipeline_is_chosen_only_when_every_tile_is_whole():
    tile = kernels.WorkgroupTile(256, 128, 256, 32)
    row_major = kernels.CoopMat2Kernel("fp16->fp32", tile)
    assert row_major.aligned(8192, 8192, 8192)
    assert not row_major.aligned(8192 - 128 // 2, 8192, 8192)     # a half tile of rows
    assert not row_major.aligned(8192, 8192 + 8, 8192)            # N off the tile (but 16-byte rows)
    assert not row_major.aligned(8192, 8192, 8192 + 16)           # K off TILE_K
    column_major = kernels.CoopMat2Kernel("fp16->fp32", tile, b_column_major=True)
    assert column_major.aligned(256, 512, 96)
    a, b = np.zeros((256, 96), np.float16), np.zeros((96, 512), np.float16)
    spec = row_major.launch(a, b).dispatches[0].specialization
    assert spec["ALIGNED"] is True and spec["TILE_N"] == 256
    assert row_major.launch(a[:, :80], b[:80]).dispatches[0].specialization["ALIGNED"] is False


def test_the_sample_dispatches_both_pipelines_so_the_gpu_checks_both():
    cases = get_sample("coopmat2-gemm").cases(H200_CAPS)
    aligned = [case.specialization.get("ALIGNED") for case in cases]
    assert aligned.count(True) >= 2 and aligned.count(False) >= 2


def test_the_sparse_kernel_picks_its_aligned_pipeline_the_same_way():
    kernel = kernels.Sparse24Kernel("fp16", kernels.WorkgroupTile(256, 128, 128, 32))
    values, metadata = np.zeros((256, 64), np.float16), np.zeros((256, 4), np.uint32)     # K = 128
    assert kernel.launch(values, metadata, np.zeros((128, 256), np.float16)).dispatches[0].specialization["ALIGNED"]
    ragged = kernel.launch(values, metadata, np.zeros((128, 200), np.float16)).dispatches[0].specialization
    assert ragged["ALIGNED"] is False
    cases = get_sample("sparse24-gemm").cases(H200_CAPS)
    aligned = [case.specialization.get("ALIGNED") for case in cases]
    assert aligned.count(True) >= 1 and aligned.count(False) >= 2


def test_batches_agree_within_their_own_jitter():
    # a few-microsecond kernel timed by events jitters by 10 %: its medians agree within that, not within 2 %
    assert warmup_rule.settled([10.0, 12.0, 9.0, 11.0], [11.0, 9.0, 12.0, 10.5])
    assert not warmup_rule.settled([10.0, 10.1, 9.9, 10.0], [11.0, 11.1, 10.9, 11.0])
