"""The 2:4 expansion of the staged and expand-path 2:4 GEMMs (shaders/gemm/sparse24_expand.glsl), run on any
Vulkan device through the expand path's first pass (shaders/gemm/sparse24_decompress.comp, dispatched as
vkcoop.gemm.decompress_dispatch makes it) and compared bit for bit with vkcoop.sparse.decompress_2to4."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vkcoop import shaders, sparse, vk
from vkcoop.gemm import BF16, decompress_dispatch
from support import toolchain_or_skip

pytestmark = [pytest.mark.vulkan, pytest.mark.toolchain]


@pytest.fixture(scope="module")
def expander():
    toolchain_or_skip()
    try:
        device = vk.Device(features=["shaderInt64"])   # the expansion's 64-bit shifts
    except vk.VulkanError as error:
        pytest.skip(f"no Vulkan device: {error}")
    with device:
        spirv = shaders.compile_variant(shaders.declared_variants("gemm/sparse24_decompress.comp")[0])
        with device.pipeline(spirv, name="sparse24 expand") as pipeline:
            yield device, pipeline


def expand_on_device(device, pipeline, compressed, groups: int | None = None) -> np.ndarray:
    """The pass as the expand path dispatches it; ``groups`` fewer workgroups than that to make each invocation
    stride over several 16-column groups."""
    m, k = compressed.shape
    dispatch = decompress_dispatch(m, k)
    buffers = [device.upload(np.ascontiguousarray(compressed.values).view(np.uint32), name="values"),
               device.upload(compressed.metadata, name="metadata"),
               device.empty((m, k // 2), np.uint32, name="dense")]
    try:
        device.run(pipeline, buffers, groups=groups or dispatch.groups[0], push=dispatch.push)
        return buffers[2].read().view(np.uint16).reshape(m, k)
    finally:
        for buffer in buffers:
            buffer.close()


@settings(max_examples=25, deadline=None)
@given(m=st.integers(1, 9), words=st.integers(1, 4), seed=st.integers(0, 2**32 - 1), bf16=st.booleans())
def test_expansion_matches_the_reference_bit_for_bit(expander, m, words, seed, bf16):
    rng = np.random.default_rng(seed)
    k = 32 * words
    # Random bit patterns (signed zeros, subnormals, every mantissa) and random prunings; no NaN or infinity,
    # which the format refuses (magnitude pruning is undefined for NaN): an all-ones exponent loses its top bit.
    bits = rng.integers(0, 1 << 16, size=(m, k), dtype=np.uint32).astype(np.uint16)
    exponent = np.uint16(0x7F80 if bf16 else 0x7C00)
    bits = np.where((bits & exponent) == exponent, bits & np.uint16(0xBFFF), bits)
    dense = bits.view(BF16 if bf16 else np.float16)
    compressed = sparse.compress_2to4(dense)
    expected = sparse.decompress_2to4(compressed).view(np.uint16)
    assert np.array_equal(expand_on_device(*expander, compressed), expected)


def test_every_valid_nibble_places_both_values(expander):
    """All six kept-position pairs, each in every chunk slot of a 16-column group."""
    pairs = [(i, j) for i in range(4) for j in range(i + 1, 4)]
    dense = np.zeros((len(pairs), 32), np.float16)
    for row, (i, j) in enumerate(pairs):
        for chunk in range(8):
            dense[row, 4 * chunk + i] = 1 + chunk
            dense[row, 4 * chunk + j] = -(1 + chunk)
    compressed = sparse.compress_2to4(dense)
    assert np.array_equal(expand_on_device(*expander, compressed), dense.view(np.uint16))


def test_one_workgroup_strides_over_every_group_of_a_larger_operand(expander):
    """1,100 rows of 64 columns are 4,400 16-column groups: one workgroup of 256 invocations must stride 18 times
    (the dispatch caps its workgroups at 65,535 and relies on this for operands of 16.8 M groups and more)."""
    rng = np.random.default_rng(7)
    dense = (rng.integers(-64, 64, size=(1100, 64)) / 8).astype(np.float16)
    compressed = sparse.compress_2to4(dense)
    expected = sparse.decompress_2to4(compressed).view(np.uint16)
    assert decompress_dispatch(1100, 64).groups == (18, 1, 1)
    assert np.array_equal(expand_on_device(*expander, compressed, groups=1), expected)
