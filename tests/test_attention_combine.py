"""attention_combine.comp, the split-KV merge, run on any Vulkan device (lavapipe included: it uses no cooperative
matrix) with the grid the kernel description gives it, against vkcoop.attention.combine_splits in float64."""
from __future__ import annotations

import numpy as np
import pytest

from vkcoop import attention as attn
from vkcoop import shaders, vk
from vkcoop.gemm.vulkan import compile_dispatch
from support import toolchain_or_skip

pytestmark = [pytest.mark.vulkan, pytest.mark.toolchain]

FP16_ULP_AT_1 = 2.0 ** -10


@pytest.fixture(scope="module")
def device():
    toolchain_or_skip()
    try:
        gpu = vk.Device(features=["shaderFloat16", "storageBuffer16BitAccess"])
    except vk.VulkanError as error:
        pytest.skip(f"no Vulkan device with fp16 storage: {error}")
    with gpu:
        yield gpu


def combine_dispatch(splits: int, rows: int, head_dim: int):
    """The combine pass exactly as AttentionKernel launches it for `rows` decode rows (one query per q head)."""
    q = np.zeros((1, rows, 1, head_dim), np.float16)
    kv = np.zeros((1, 1, 64 * splits, head_dim), np.float16)
    kernel = attn.AttentionKernel("fp16", head_dim, attn.AttentionTile(64, 16, 64), kv_splits=splits, gqa_rows=True)
    _, combine = kernel.launch(q, kv, kv).dispatches
    assert combine.shader == attn.COMBINE_SHADER
    return combine


def run_combine(device, o_partial, lse_partial, groups=None):
    splits, rows, head_dim = o_partial.shape
    dispatch = combine_dispatch(splits, rows, head_dim)
    with device.pipeline(compile_dispatch(dispatch), name="combine") as pipeline:
        buffers = [device.upload(np.ascontiguousarray(o_partial, np.float32), name="O partial"),
                   device.upload(np.ascontiguousarray(lse_partial, np.float32), name="LSE partial"),
                   device.empty((rows, head_dim), np.float16, name="O"), device.empty((rows,), np.float32, name="LSE")]
        try:
            device.run(pipeline, buffers, groups=(groups or dispatch.groups[0], 1, 1), push=dispatch.push)
            return buffers[2].read(), buffers[3].read()
        finally:
            for buffer in buffers:
                buffer.close()


def test_equal_slices_merge_bit_for_bit(device):
    # lse equal in every slice: each weight is exactly 1 and their sum is 4, a power of two; O values are multiples
    # of 1/8 below 4, so every partial sum and the division are exact in fp32 and the result is exact in fp16
    rng = np.random.default_rng(7)
    o_partial = rng.integers(-32, 32, size=(4, 5, 128)).astype(np.float32) / 8
    lse_partial = np.full((4, 5), 1.5, np.float32)
    out, lse = run_combine(device, o_partial, lse_partial)
    expected, expected_lse = attn.combine_splits(o_partial.astype(np.float64), lse_partial.astype(np.float64))
    assert np.array_equal(out, expected.astype(np.float16))
    assert np.allclose(lse, expected_lse, rtol=0, atol=1e-6)   # 1.5 + log 4: log is within an ulp or two


@pytest.mark.parametrize("splits, rows, head_dim", [(3, 7, 64), (66, 4, 128), (70, 9, 64)])
def test_uneven_slices_with_empty_ones_merge_within_one_fp16_rounding(device, splits, rows, head_dim):
    rng = np.random.default_rng(splits * rows)
    o_partial = rng.uniform(-2, 2, size=(splits, rows, head_dim)).astype(np.float32)
    lse_partial = rng.uniform(-6, 6, size=(splits, rows)).astype(np.float32)
    empty = rng.random(splits) < 0.25
    empty[0] = False
    o_partial[empty], lse_partial[empty] = 0.0, -1.0e30   # what a slice with no keys writes (flash_attention.comp)
    out, lse = run_combine(device, o_partial, lse_partial)
    expected, expected_lse = attn.combine_splits(o_partial.astype(np.float64), lse_partial.astype(np.float64))
    # fp32 sums of at most 70 terms, then one rounding to fp16
    assert np.all(np.abs(out.astype(np.float64) - expected) <= FP16_ULP_AT_1 * np.maximum(np.abs(expected), 1) / 2
                  + 1e-5)
    assert np.allclose(lse, expected_lse, rtol=0, atol=1e-5)


def test_a_grid_smaller_than_the_work_strides_over_every_row_and_column(device):
    rng = np.random.default_rng(3)
    o_partial = rng.integers(-16, 16, size=(2, 6, 128)).astype(np.float32) / 4
    lse_partial = np.zeros((2, 6), np.float32)
    assert combine_dispatch(2, 6, 128).groups[0] == 6 * 128 // attn.kernel.COMBINE_COLUMNS
    out, _ = run_combine(device, o_partial, lse_partial, groups=5)
    assert np.array_equal(out, (o_partial.sum(axis=0) / 2).astype(np.float16))


def test_the_shader_compiles_for_both_element_types():
    toolchain_or_skip()
    for variant in shaders.declared_variants(attn.COMBINE_SHADER):
        assert shaders.check_variant(variant).ok, variant.label
