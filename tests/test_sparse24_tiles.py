"""The tile-major 2:4 layout of the narrow staged 2:4 kernel (vkcoop.gemm.tile_major; ``tp`` / ``tn`` labels): the
host packer round-trips vkcoop's format exactly and refuses what it cannot hold in one line; its numpy model of the
shader's expansion gives the pruned A; the GEMM's own fetch and expansion code (shaders/gemm/sparse24_tiles.glsl),
run by a non-coopmat test shader on any Vulkan device (lavapipe here), gives it bit for bit; and, marked gpu, the
kernel's products equal the exact reference."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vkcoop import gemm, sparse
from vkcoop.gemm import tile_major
from vkcoop.gemm.configs import launch_kernel, parse_config
from vkcoop.gemm.tile_major import TileMajorLayout, expand_tile_major, tile_major_2to4, untile_2to4
from support import coopmat2_reason, toolchain_or_skip

ROOT = Path(__file__).resolve().parent.parent
TEST_SHADER = Path(__file__).resolve().parent / "shaders" / "sparse24_tiles_expand.comp"
FORMATS = {"patterns": "TILES_PATTERNS", "nibbles": "TILES_NIBBLES"}
#: (TILE_M, TILE_K, invocations): the narrow seeds' 64x64 on 128, a deep K step on 64, 32 on one warp, 8 vectors each
LAYOUTS = [(64, 64, 128), (32, 128, 64), (32, 32, 32), (64, 128, 64)]
SIX = [(i, j) for i in range(4) for j in range(i + 1, 4)]


def random_compressed(rng, m: int, k: int, bf16: bool = False):
    """Random 16-bit patterns (signed zeros, subnormals, every mantissa; no NaN or infinity, which magnitude pruning
    refuses) pruned to 2:4 at random."""
    bits = rng.integers(0, 1 << 16, size=(m, k), dtype=np.uint32).astype(np.uint16)
    exponent = np.uint16(0x7F80 if bf16 else 0x7C00)
    bits = np.where((bits & exponent) == exponent, bits & np.uint16(0xBFFF), bits)
    return sparse.compress_2to4(bits.view(gemm.BF16 if bf16 else np.float16))


def every_pattern_everywhere(m: int, k: int):
    """Row r keeps pattern SIX[(r + chunk) % 6] in each chunk, values numbering the chunk: all six patterns in every
    chunk position of a metadata word and of a vector."""
    dense = np.zeros((m, k), np.float16)
    for row in range(m):
        for chunk in range(k // 4):
            i, j = SIX[(row + chunk) % 6]
            dense[row, 4 * chunk + i], dense[row, 4 * chunk + j] = 1 + chunk % 50, -(1 + row % 50)
    return sparse.compress_2to4(dense)


# --------------------------------------------------------------------------- the host layout
@settings(max_examples=30, deadline=None)
@given(layout=st.sampled_from(LAYOUTS), rows=st.integers(1, 3), steps=st.integers(1, 3),
       code=st.sampled_from(tile_major.CODES), bf16=st.booleans(), seed=st.integers(0, 2**32 - 1))
def test_the_layout_round_trips_and_its_model_expands_to_the_pruned_a(layout, rows, steps, code, bf16, seed):
    shape = TileMajorLayout(*layout)
    m, k = rows * shape.tile_m, steps * shape.tile_k
    compressed = random_compressed(np.random.default_rng(seed), m, k, bf16)
    blocks = tile_major_2to4(compressed.values, compressed.metadata, shape, code)
    assert blocks.dtype == np.uint32 and blocks.shape == (rows * steps, shape.block_words)
    assert blocks.nbytes * 64 == compressed.values.nbytes * 72      # 0.5625x the dense bytes, like the row format
    values, metadata = untile_2to4(blocks, m, k, shape, compressed.dtype, code)
    assert values.dtype == compressed.dtype
    assert np.array_equal(values.view(np.uint16), compressed.values.view(np.uint16))
    assert np.array_equal(metadata, compressed.metadata)
    expected = sparse.decompress_2to4(compressed).view(np.uint16)
    assert np.array_equal(expand_tile_major(blocks, m, k, shape, code), expected)


def test_a_block_is_one_k_step_of_one_tile_read_in_invocation_order():
    """Block 1 of a 2-step operand is columns 64..127 of rows 0..63; invocation t's second vector is vector t + 128
    of the block, and its metadata word (the block's first after the values) describes vectors t and t + 128."""
    shape = TileMajorLayout(64, 64, 128)
    compressed = every_pattern_everywhere(64, 128)
    blocks = tile_major_2to4(compressed.values, compressed.metadata, shape, "nibbles")
    pairs = compressed.values.view(np.uint16).astype(np.uint32)
    words = pairs[:, 0::2] | (pairs[:, 1::2] << 16)                  # [M][K/4]: chunk pairs, the lower K low
    t = 5                                                             # second vector: p = 133, row 33, group 1
    assert np.array_equal(blocks[1, 4 * 133:4 * 134], words[33, 16 + 4:16 + 8])
    nibbles = sparse.metadata_nibbles(compressed.metadata)
    first = nibbles[1, 20:24]                                          # vector 5: row 1, group 1 of step 1
    second = nibbles[33, 20:24]
    expected = sum(int(v) << (4 * c) for c, v in enumerate([*first, *second]))
    assert int(blocks[1, 4 * shape.vectors + t]) == expected


def store_conflicts(shape: TileMajorLayout) -> int:
    """Phases of 8 invocations whose first 16-byte store to the skewed shared tile (rows of 2G + 1 vectors) meets a
    bank quad twice: each vector's (row, group) read back from a packed operand of position numbers."""
    g = shape.groups_per_row
    ids = np.arange(shape.tile_m * shape.tile_k // 4, dtype=np.uint32).reshape(shape.tile_m, -1) // 4
    position = shape.to_blocks(ids)[0, :, 0]                              # vector p -> row * G + group
    slots = ((position // g) * (2 * g + 1) + 2 * (position % g)) % 8
    phases = slots.reshape(shape.per_invocation, -1, 8)                   # [iteration][phase][invocation]
    return sum(len(set(phase)) < 8 for rows in phases for phase in rows.tolist())


def test_each_phase_of_the_shared_stores_meets_eight_bank_quads():
    """Eight 16-column groups of a row (TILE_K 128) would meet on four quads; the runs of four rows apart do not.
    Planted fault: a row's groups all in a run."""
    for layout in ((64, 64, 128), (32, 128, 64), (64, 128, 128), (32, 256, 128)):
        assert store_conflicts(TileMajorLayout(*layout)) == 0, layout

    class WholeRows(TileMajorLayout):
        @property
        def run(self) -> int:
            return self.groups_per_row

    assert store_conflicts(WholeRows(32, 128, 64)) > 0


def test_the_pattern_code_swaps_the_pairs_of_1_2_and_1_3_only():
    compressed = every_pattern_everywhere(32, 32)
    shape = TileMajorLayout(32, 32, 32)
    patterns = tile_major_2to4(compressed.values, compressed.metadata, shape, "patterns")
    nibbles = tile_major_2to4(compressed.values, compressed.metadata, shape, "nibbles")
    pairs, plain = patterns[0, :256], nibbles[0, :256]
    fields = tile_major.chunk_fields(nibbles, shape, "nibbles").reshape(-1)
    swapped = np.isin(fields, [0b1001, 0b1101])                          # (1,2) and (1,3)
    assert 0 < swapped.sum() < len(fields)
    assert np.array_equal(pairs[~swapped], plain[~swapped])
    assert np.array_equal(pairs[swapped], (plain[swapped] << 16) | (plain[swapped] >> 16))


@pytest.mark.parametrize("args, message", [
    ((64, 48, 128), "TILE_K must be a multiple of 32"),
    ((32, 32, 128), "an even number"),          # 64 groups: half a vector each
    ((64, 32, 128), "an even number"),          # 128 groups: one vector each, half a metadata word
])
def test_a_tile_the_layout_cannot_take_is_one_line(args, message):
    with pytest.raises(gemm.GemmInputError, match=message) as refused:
        TileMajorLayout(*args)
    assert "\n" not in str(refused.value)


def test_bad_operands_are_refused_in_one_line():
    shape = TileMajorLayout(32, 32, 32)
    compressed = every_pattern_everywhere(32, 64)
    bad = compressed.metadata.copy()
    bad[3, 1] &= ~np.uint32(0xF << 8)                                    # nibble 0b0000: PTX-invalid
    refusals = [(lambda: tile_major_2to4(compressed.values, bad, shape), sparse.SparseFormatError, "row 3"),
                (lambda: tile_major_2to4(compressed.values[:16], compressed.metadata[:16], shape),
                 gemm.GemmInputError, "whole 32x32 tiles"),
                (lambda: tile_major_2to4(compressed.values, compressed.metadata, shape, "bits"),
                 gemm.GemmInputError, "choose from patterns, nibbles"),
                (lambda: tile_major_2to4(np.zeros((32, 16), np.float32), compressed.metadata[:, :1], shape),
                 gemm.GemmInputError, "16-bit values")]
    for make, error, message in refusals:
        with pytest.raises(error, match=message) as refused:
            make()
        assert "\n" not in str(refused.value)


@pytest.mark.parametrize("corrupt, message", [(1 << 8, "chunk 0 is no pattern"),               # diagonal, no half
                                              (1 << 24, "bits 24-31 are 0")])
def test_a_word_that_holds_no_pattern_code_is_refused_in_one_line(corrupt, message):
    shape = TileMajorLayout(32, 32, 32)
    compressed = every_pattern_everywhere(32, 32)
    blocks = tile_major_2to4(compressed.values, compressed.metadata, shape)
    word = 4 * shape.vectors + 7
    blocks[0, word] = (blocks[0, word] & ~np.uint32(0x010101)) | np.uint32(corrupt)   # chunk 0 keeps no half
    for read in (lambda: untile_2to4(blocks, 32, 32, shape, np.float16),
                 lambda: expand_tile_major(blocks, 32, 32, shape)):
        with pytest.raises(gemm.GemmInputError, match=message) as refused:
            read()
        assert "word 7 (invocation 7)" in str(refused.value) and "\n" not in str(refused.value)
    with pytest.raises(gemm.GemmInputError, match="uint32 \\(1, 288\\)"):
        untile_2to4(blocks[:, :100], 32, 32, shape, np.float16)


def test_the_kernel_packs_its_operand_padded_to_whole_tiles():
    kernel = launch_kernel(parse_config("128:64x16x64u6g1s3tp"), "fp16", sparse=True)
    assert isinstance(kernel, gemm.TiledSparse24Kernel) and kernel.code == "patterns"
    operands = gemm.GemmOperands.make(gemm.GemmProblem("fp16", "test", 100, 20, 224))
    launch = kernel.launch(operands.compressed.values, operands.compressed.metadata, operands.b)
    (dispatch,) = launch.dispatches
    assert dispatch.defines["A_FORMAT"] == "TILES_PATTERNS" and dispatch.buffers[:2] == ("A blocks", "B")
    assert dispatch.specialization["PREFETCH"] == 6 and dispatch.specialization["ALIGNED"] is True
    assert launch.shape == (128, 32, 256) and launch.view == (100, 20)
    values, metadata = untile_2to4(launch.inputs["A blocks"], 128, 256, kernel.layout, np.float16)
    dense = sparse.decompress_2to4(sparse.Compressed2to4(values, metadata))
    assert np.array_equal(dense[:100, :224], sparse.decompress_2to4(operands.compressed))
    assert not dense[100:].any() and not dense[:, 224:].any()
    assert launch_kernel(parse_config("128:64x16x64u4g1tn"), "bf16", sparse=True).defines()["A_FORMAT"] == \
        "TILES_NIBBLES"


def test_a_narrow_2to4_tuning_measures_tile_major_candidates_and_no_other_class_does():
    import json

    from vkcoop.gemm.configs import derive_workgroup_configs, recorded_device
    _, flexible, _, limits = recorded_device(json.loads((ROOT / "docs" / "h100-capabilities.json").read_text()))

    def tiled(path, n):
        configs = derive_workgroup_configs(path, gemm.GemmProblem("fp16", "llm", 8192, n, 8192), flexible, limits)
        return [c for c in configs if c.tile_major]

    for n in (16, 32, 64):
        found = tiled("vk-coopmat2-2:4", n)
        assert found and all(c.tile_major == "p" and c.tile.k_unroll == 4 for c in found)
        for config in found:
            kernel = launch_kernel(config, "fp16", sparse=True)
            gemm.staging.check_coopmat2_kernel(kernel, flexible, limits)
    assert not tiled("vk-coopmat2-2:4", 4096) and not tiled("vk-coopmat2-dense", 16)
    assert not tiled("vk-coopmat2-2:4-expand", 4096)


# --------------------------------------------------------------------------- the shader's expansion, on any device
class Expander:
    """A device and the test shader's SPIR-V per code."""

    def __init__(self, device, modules: dict):
        self.device, self.modules = device, modules

    def __repr__(self) -> str:
        return f"Expander({self.device.physical.name})"


@pytest.fixture(scope="module")
def expander():
    """The device and SPIR-V of the test shader that runs the GEMM's fetch_a and stash_a."""
    spirv_tools = toolchain_or_skip()
    from vkcoop import vk
    includes = [ROOT / "shaders" / "gemm", ROOT / "shaders" / "include"]
    modules = {}
    for code, a_format in FORMATS.items():
        modules[code] = spirv_tools.compile(path=TEST_SHADER, defines={"A_FORMAT": a_format}, include_dirs=includes)
        spirv_tools.validate(modules[code])
    try:
        device = vk.Device(features=["shaderInt64", "maintenance4"])   # 64-bit shifts (nibbles); local_size_x_id
    except vk.VulkanError as error:
        pytest.skip(f"no Vulkan device: {error}")
    with device:
        yield Expander(device, modules)


def expand_on_device(expander, blocks, m: int, k: int, layout: TileMajorLayout, code: str) -> np.ndarray:
    device, modules = expander.device, expander.modules
    spec = {"WORKGROUP_SIZE": layout.workgroup_size, "TILE_M": layout.tile_m, "TILE_K": layout.tile_k}
    buffers = [device.upload(blocks, name="blocks"), device.empty((m, k // 2), np.uint32, name="dense")]
    try:
        with device.pipeline(modules[code], name=f"tiles expand {code}", specialization=spec) as pipeline:
            device.run(pipeline, buffers, groups=(m // layout.tile_m, k // layout.tile_k, 1),
                       push=(np.uint32(m), np.uint32(0), np.uint32(k)))
        return buffers[1].read().view(np.uint16).reshape(m, k)
    finally:
        for buffer in buffers:
            buffer.close()


@pytest.mark.vulkan
@pytest.mark.toolchain
@settings(max_examples=20, deadline=None)
@given(layout=st.sampled_from(LAYOUTS), rows=st.integers(1, 2), steps=st.integers(1, 3),
       code=st.sampled_from(tile_major.CODES), bf16=st.booleans(), seed=st.integers(0, 2**32 - 1))
def test_the_gemms_expansion_code_gives_the_pruned_a_bit_for_bit(expander, layout, rows, steps, code, bf16, seed):
    shape = TileMajorLayout(*layout)
    m, k = rows * shape.tile_m, steps * shape.tile_k
    compressed = random_compressed(np.random.default_rng(seed), m, k, bf16)
    blocks = tile_major_2to4(compressed.values, compressed.metadata, shape, code)
    got = expand_on_device(expander, blocks, m, k, shape, code)
    assert np.array_equal(got, sparse.decompress_2to4(compressed).view(np.uint16))


@pytest.mark.vulkan
@pytest.mark.toolchain
@pytest.mark.parametrize("code", tile_major.CODES)
def test_every_pattern_in_every_chunk_position_expands_on_the_device(expander, code):
    shape = TileMajorLayout(64, 64, 128)
    compressed = every_pattern_everywhere(128, 128)
    blocks = tile_major_2to4(compressed.values, compressed.metadata, shape, code)
    got = expand_on_device(expander, blocks, 128, 128, shape, code)
    assert np.array_equal(got, sparse.decompress_2to4(compressed).view(np.uint16))


@pytest.mark.vulkan
@pytest.mark.toolchain
def test_the_device_check_catches_a_layout_the_shader_does_not_read(expander, monkeypatch):
    """Planted faults: metadata words stored per invocation (word t * W / 2 + j instead of j * W + t) round-trip in
    numpy and expand right in its model, but not on the device; and pattern codes read as nibbles."""
    shape = TileMajorLayout(32, 128, 64)                                # 4 vectors each: two words per invocation
    compressed = every_pattern_everywhere(32, 128)
    expected = sparse.decompress_2to4(compressed).view(np.uint16)
    blocks = tile_major_2to4(compressed.values, compressed.metadata, shape)
    assert not np.array_equal(expand_on_device(expander, blocks, 32, 128, shape, "nibbles"), expected)

    def per_invocation(self, fields):
        count = fields.shape[0]
        return fields.reshape(count, self.per_invocation // 2, 2, self.workgroup_size, 4).transpose(0, 3, 1, 2, 4) \
            .reshape(count, self.vectors // 2, 8)

    def back(self, fields):
        count = fields.shape[0]
        return fields.reshape(count, self.workgroup_size, self.per_invocation // 2, 2, 4).transpose(0, 2, 3, 1, 4) \
            .reshape(count, self.vectors, 4)

    monkeypatch.setattr(TileMajorLayout, "by_word", per_invocation)
    monkeypatch.setattr(TileMajorLayout, "from_words", back)
    planted = tile_major_2to4(compressed.values, compressed.metadata, shape)
    assert not np.array_equal(planted, blocks)
    assert np.array_equal(expand_tile_major(planted, 32, 128, shape), expected)       # numpy cannot see it
    assert not np.array_equal(expand_on_device(expander, planted, 32, 128, shape, "patterns"), expected)


# --------------------------------------------------------------------------- the GEMM, on a coopmat2 device
_NO_GPU = coopmat2_reason()


@pytest.mark.gpu
@pytest.mark.skipif(_NO_GPU is not None, reason=str(_NO_GPU))
@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
@pytest.mark.parametrize("label", ["128:64x16x64u4g1s3tp", "128:64x32x64u8g1s2tp", "64:32x32x128u4g1tn",
                                   "128:64x64x64u6g1tp"])
def test_the_tile_major_kernel_is_bit_exact_on_the_gpu(dtype, label):
    """Ragged M, N and K (padded to whole tiles), split-K summed by the last slice, the deepest rings."""
    from vkcoop import vk
    kernel = launch_kernel(parse_config(label), dtype, sparse=True)
    with vk.Device(features=gemm.features_for("sparse24", gemm.accumulating_types(dtype))) as device:
        for m, n, k in ((300, 40, 544), (64, kernel.tile.tile_n, 1024)):
            operands = gemm.GemmOperands.make(gemm.GemmProblem(dtype, "test", m, n, k))
            with gemm.vulkan.coopmat2_gemm(device, kernel) as runner:
                got = runner.run(operands.compressed.values, operands.compressed.metadata, operands.b)
            expected = gemm.sparse24_reference(operands.compressed.values, operands.compressed.metadata, operands.b)
            assert got.shape == (m, n) and np.array_equal(got, expected), (label, m, n, k)
