"""The portable GLSL port of tensor addressing (shaders/portable/tensor_addressing.comp) on any Vulkan device
(lavapipe in CI): a fixed-seed fuzz run against vkcoop.tensor, the demo's showcase, edge cases of the
32-bit-only clamp arithmetic, and input errors (which need no device)."""
from __future__ import annotations

import numpy as np
import pytest

from vkcoop import portable
from vkcoop.cli import demo
from vkcoop.cli.demo import portable_demo
from vkcoop.tensor import ClampMode, ElementStatus, TensorLayout, TensorView

L = TensorLayout.create


def _vulkan_reason():
    try:
        from vkcoop import vk
        with vk.Instance() as instance:
            instance.physical_devices()[0]
    except Exception as error:  # noqa: BLE001 - any failure means no usable device
        return f"no Vulkan device: {error}"
    try:
        import spirv_tools
        spirv_tools.compile("#version 450\nvoid main() {}\n")
    except Exception as error:  # noqa: BLE001
        return f"no shader toolchain: {error}"
    return None


NO_VULKAN = _vulkan_reason()
needs_vulkan = pytest.mark.skipif(NO_VULKAN is not None, reason=NO_VULKAN or "")


@pytest.fixture(scope="module")
def runner():
    with portable.PortableRunner() as r:
        yield r


# --------------------------------------------------------------------------- no device needed

def test_records_hold_the_state_words():
    t = L(3, ClampMode.Repeat).set_block_size(1, 2, 1).set_dimension(5, 6, 7).slice((-2, 1, 3), (4, 5, 6)) \
        .set_clamp_value(0xB800)
    v = TensorView.create(2, True, (1, 0)).set_dimensions(3, 9).set_clip(1, 2, 3, 4)
    w = portable.encode_records([portable.AddressingCase(t, 4, 8, v, "store", True, False)])[0]
    assert w[portable.R_LDIM] == 3 and w[portable.R_MODE] == 3 and w[portable.R_OP] == 1
    assert (w[portable.R_ROWS], w[portable.R_COLS], w[portable.R_CLAMP_VALUE]) == (4, 8, 0xB800)
    assert w[portable.R_OFFSET:portable.R_OFFSET + 3].tolist() == [0xFFFFFFFE, 1, 3]
    assert w[portable.R_BLOCK:portable.R_BLOCK + 3].tolist() == [1, 2, 1]
    assert w[portable.R_FLAGS] == portable.FLAG_VIEW | portable.FLAG_HAS_DIMENSIONS | portable.FLAG_EXPLICIT_STRIDE
    assert w[portable.R_PERM:portable.R_PERM + 2].tolist() == [1, 0]
    assert w[portable.R_CLIP:portable.R_CLIP + 4].tolist() == [1, 2, 3, 4]


@pytest.mark.parametrize("case, word", [
    (portable.AddressingCase(L(2).set_dimension(4, 4), 4, 4, op="copy"), "op"),
    (portable.AddressingCase(L(2), 4, 4), "span"),
    (portable.AddressingCase(L(2).set_dimension(4, 4), 0, 4), "rows"),
    (portable.AddressingCase(L(2).set_dimension(4, 4), 4, 4, TensorView.create(3)), "view dim"),
    (portable.AddressingCase(L(2).set_dimension(4, 4), 4, 4, TensorView.create(2, True)), "view_dimension"),
])
def test_bad_cases_are_rejected_before_dispatch(case, word):
    with pytest.raises(portable.PortableInputError, match=word):
        portable.encode_records([case])


# --------------------------------------------------------------------------- on a Vulkan device

def _agree(runner, cases):
    result = runner.run(cases)
    for k, case in enumerate(cases):
        expected = portable.reference_arrays(case, result.indices.shape[1])
        for name, want, got in zip(("indices", "status", "block_coord", "coord_in_block"), expected, result):
            np.testing.assert_array_equal(got[k], want, err_msg=f"case {k} {name}")
    return result


@pytest.mark.vulkan
@needs_vulkan
def test_showcase_matches_the_reference(runner):
    result = _agree(runner, [case for _, case in demo._showcase()])
    statuses = set(np.unique(result.status).tolist())
    assert {ElementStatus.IN_BOUNDS, ElementStatus.CLAMP_VALUE, ElementStatus.DISCARDED,
            ElementStatus.SKIPPED_BY_CLIP} <= statuses


@pytest.mark.vulkan
@needs_vulkan
def test_extreme_dimensions_and_offsets_in_32_bit_arithmetic(runner):
    # Layout dimensions above 2^31 (MirrorRepeat's period 2L-2 does not fit 32 bits), int32-extreme
    # offsets, stride 0xFFFFFFFF: the shader's 32-bit formulas must give the reference's exact values.
    big = 0x80000005
    cases = [portable.AddressingCase(L(1, mode).set_dimension(big).slice((offset,), (span,)), 4, 8)
             for mode in (ClampMode.RepeatMirrored, ClampMode.Repeat, ClampMode.ClampToEdge)
             for offset, span in ((-(1 << 31), 32), (-7, 32), ((1 << 31) - 3, 32))]
    cases += [portable.AddressingCase(L(1, ClampMode.RepeatMirrored).set_dimension(0x80000001)
                                      .slice((-(1 << 31),), (1,)), 1, 1),
              portable.AddressingCase(L(2, ClampMode.Repeat).set_dimension(3, 5).set_stride(0xFFFFFFFF, 0x80000000)
                                      .slice((-(1 << 31), 2), (7, 9)), 8, 8),
              portable.AddressingCase(L(1, ClampMode.Undefined).set_dimension(4).slice((2,), (4,)), 2, 4)]
    result = _agree(runner, cases)
    assert (result.status == ElementStatus.UNDEFINED).any()        # the last case leaves bounds


@pytest.mark.vulkan
@needs_vulkan
def test_fixed_seed_fuzz_run_has_no_mismatch(runner):
    from vkcoop import fuzz
    report = fuzz.run(cases=3000, seed=20261121, target="portable", progress=False, device=runner.device,
                      workers=0)
    stats = report.targets["portable"]
    assert stats.skipped is None and stats.cases == 3000
    assert report.mismatch_count == 0, "\n".join(m.describe() for m in report.mismatches)


@pytest.mark.vulkan
@needs_vulkan
def test_demo_summary(runner):
    summary = portable_demo(runner.device, cases=200, seed=5)
    assert summary["mismatches"] == 0 and summary["cases"] == 200 + len(demo.SHOWCASE)
    assert all(s["ok"] for s in summary["showcase"]) and summary["device"] == runner.device.physical.name
    assert summary.ok and "0 mismatches" in summary.describe()
