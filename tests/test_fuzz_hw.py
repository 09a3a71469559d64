"""The fuzzer's hardware target without hardware: an emulated device (vkcoop.tensor.load/store doing what
shaders/fuzz/tensor_hw.comp does) checks the decoding of loads, stores and decode loads, and that planted
driver bugs are found and shrunk. Plus: the real hw target skips with a reason where there is no coopmat2
device, and runs where there is one (gpu)."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from vkcoop import tensor
from vkcoop.fuzz import cases as fc
from vkcoop.fuzz import compare, hw
from vkcoop.fuzz import shrinking as shrink
from vkcoop.fuzz.targets import _HwTarget
from vkcoop.tensor import ClampMode, ElementStatus


class EmulatedHwRunner(hw.HwRunner):
    """HwRunner whose dispatch is emulated with vkcoop.tensor; ``layout_hook(case) -> layout`` plants bugs."""

    def __init__(self, layout_hook=None):
        self.layout_hook = layout_hook or (lambda case: case.layout)
        super().__init__(device=None)

    def prepare(self, variants):
        for variant in variants:
            self.pipelines[variant] = "emulated"
        return 0.0

    def _upload_source(self, data, name):
        return data

    def _execute(self, variant, cases, records, source, count, dtype):
        rows, cols = variant.hw_shape
        elements = rows * cols
        out = np.zeros(count, dtype=dtype)
        load_digits, store_digits, _ = hw.DIGITS[variant.component]
        component_dtype = fc.COMPONENT_DTYPES[variant.component]
        for i, case in enumerate(cases):
            layout = self.layout_hook(case)
            if variant.kind == "load":
                previous = np.full((rows, cols), hw.as_component([fc.PREVIOUS_VALUE], variant.component)[0])
                for k in range(load_digits + 1):
                    region = source[k * fc.SOURCE_ELEMENTS:(k + 1) * fc.SOURCE_ELEMENTS]
                    m = tensor.load(region, layout, rows, cols, case.view, dtype=component_dtype, previous=previous)
                    start = (i * (load_digits + 1) + k) * elements
                    out[start:start + elements] = m.reshape(-1)
            elif variant.kind == "store":
                for k in range(store_digits + 1):
                    matrix = source[k * elements:(k + 1) * elements].reshape(rows, cols)
                    start = (i * (store_digits + 1) + k) * fc.STORE_REGION
                    tensor.store(matrix, out[start:start + fc.STORE_REGION], layout, case.view)
            else:
                loads = 2 + 2 * variant.ldim
                functions = [lambda b, idx, bc, cib: idx, lambda b, idx, bc, cib: np.ones_like(idx)]
                for d in range(variant.ldim):
                    functions += [lambda b, idx, bc, cib, d=d: bc[:, d], lambda b, idx, bc, cib, d=d: cib[:, d]]
                previous = np.full((rows, cols), fc.PREVIOUS_VALUE, dtype=np.int32)
                for slot, function in enumerate(functions):
                    m = tensor.load(source, layout, rows, cols, case.view, dtype=np.int32, decode=function,
                                    previous=previous)
                    start = (i * loads + slot) * elements
                    out[start:start + elements] = m.reshape(-1)
        return out


def emulated_target(layout_hook=None) -> _HwTarget:
    target = _HwTarget.__new__(_HwTarget)
    target.runner = EmulatedHwRunner(layout_hook)
    target.max_new_pipelines = 1000
    return target


def pool_cases(seed: int, count: int, pool):
    return [fc.generate_case(seed, i, pool[i % len(pool)], hw=True) for i in range(count)]


def test_emulated_hardware_agrees_with_the_reference_for_every_kind_and_component():
    pool = fc.variant_pool(5, 30)
    assert {v.kind for v in pool} == set(fc.KINDS) and {v.component for v in pool} == set(fc.COMPONENTS)
    cases = pool_cases(5, 240, pool)
    ref = compare.reference_batch(cases, 512)
    bad, details = emulated_target().evaluate(cases, ref)
    assert not bad.any(), [cases[k].variant.label for k in np.nonzero(bad)[0]]
    # The comparison was not vacuous: loads saw in-bounds, clamped and clipped elements, stores wrote.
    statuses = set(np.unique(ref[1]).tolist())
    assert {ElementStatus.IN_BOUNDS, ElementStatus.CLAMP_VALUE, ElementStatus.DISCARDED,
            ElementStatus.SKIPPED_BY_CLIP} <= statuses


def _repeat_instead_of_mirror(case):
    layout = case.layout
    if layout.clamp_mode == ClampMode.RepeatMirrored:
        return dataclasses.replace(layout, clamp_mode=ClampMode.Repeat)
    return layout


def test_planted_driver_bug_is_found_and_shrunk_to_one_dimension():
    pool = [fc.Variant("load", "fp16", 3, ClampMode.RepeatMirrored, (3, False, (2, 0, 1))),
            fc.Variant("load", "int8", 2, ClampMode.Constant, None)]
    target = emulated_target(_repeat_instead_of_mirror)
    cases = pool_cases(11, 40, pool)
    bad, details = target.evaluate(cases, compare.reference_batch(cases, 512))
    assert bad.any()
    assert all(cases[k].variant.clamp_mode == ClampMode.RepeatMirrored for k in np.nonzero(bad)[0])
    first = cases[int(np.nonzero(bad)[0][0])]
    result = shrink.shrink(first, target.fails_many, hw=True, fixed_shape=True)
    minimal = result.case
    assert result.complete and target.fails_many([minimal]) == [True]
    assert minimal.layout.dim == 1 and minimal.view is None and not minimal.explicit_stride
    assert minimal.layout.offset[0] != 0 or minimal.layout.span[0] > minimal.layout.layout_dimension[0]
    # 1-minimal: no single simplification still fails.
    assert not any(target.fails_many(shrink.candidates(minimal, hw=True, fixed_shape=True)))


def test_planted_store_bug_writing_discarded_elements_is_found():
    # A "driver" that ignores the slice offset stores out-of-bounds elements it should discard.
    def no_offset(case):
        return dataclasses.replace(case.layout, offset=(0,) * case.layout.dim)
    variant = fc.Variant("store", "uint8", 2, ClampMode.Constant, None)
    target = emulated_target(no_offset)
    cases = pool_cases(3, 30, [variant])
    bad, _ = target.evaluate(cases, compare.reference_batch(cases, 512))
    shifted = [any(o != 0 for o in c.layout.offset) for c in cases]
    assert bad.any()
    assert not any(b and not s for b, s in zip(bad, shifted))   # unshifted cases still agree


def _floor_strides(case):
    """A "driver" whose setTensorLayoutDimensionNV strides use floor(dim / blockSize) instead of the ceiling."""
    t = case.layout
    if case.explicit_stride:
        return t
    strides, s = [0] * t.dim, 1
    for i in range(t.dim - 1, -1, -1):
        strides[i] = s
        s *= t.layout_dimension[i] // t.block_size[i]
    return dataclasses.replace(t, stride=tuple(strides))


def test_mismatches_are_explained_by_the_matching_alternative_model():
    from vkcoop.fuzz.models import MODELS, explain
    floor_model = next(name for name in MODELS if "floor" in name)
    variant = fc.Variant("decode", "fp32", 2, ClampMode.Repeat, None)
    target = emulated_target(_floor_strides)
    cases = pool_cases(4, 60, [variant])
    bad, details = target.evaluate(cases, compare.reference_batch(cases, 512))
    assert bad.any()
    for k, (obs, _) in details.items():
        assert explain(cases[k], "decode", obs, 256) == floor_model
    # A different bug is not explained by that model.
    target = emulated_target(_repeat_instead_of_mirror)
    mirror = [fc.generate_case(11, i, fc.Variant("decode", "fp32", 1, ClampMode.RepeatMirrored), hw=True)
              for i in range(40)]
    bad, details = target.evaluate(mirror, compare.reference_batch(mirror, 512))
    assert bad.any() and all(explain(mirror[k], "decode", obs, 256) is None for k, (obs, _) in details.items())


# --------------------------------------------------------------------------- real devices

def _vulkan_available():
    try:
        from vkcoop import vk
        with vk.Instance() as instance:
            return instance.physical_devices()[0] is not None
    except Exception:
        return False


def _coopmat2_device():
    try:
        from vkcoop import vk
        with vk.Instance() as instance:
            for physical in instance.physical_devices():
                if "VK_NV_cooperative_matrix2" in physical.extensions:
                    return True
    except Exception:
        return False
    return False


@pytest.mark.vulkan
def test_hw_target_without_coopmat2_is_skipped_with_a_reason():
    if not _vulkan_available():
        pytest.skip("no Vulkan device")
    if _coopmat2_device():
        pytest.skip("this machine has a coopmat2 device")
    from vkcoop import fuzz
    report = fuzz.run(cases=10, seed=0, target="hw", progress=False, workers=0)
    assert report.targets["hw"].skipped and "cooperative" in report.targets["hw"].skipped.lower()
    assert report.targets["hw"].cases == 0 and not report.ok


@pytest.mark.gpu
def test_hw_target_on_coopmat2_hardware_has_no_unexplained_mismatch():
    """Every hardware mismatch must be explained by a known alternative model (docs/spec-notes.md F1: the
    H200 driver's packed strides use floor(dim / blockSize); F2: MirrorRepeat with a layout dimension of 1
    addresses outside the tensor); anything else is a new finding."""
    if not _coopmat2_device():
        pytest.skip("no Vulkan device with VK_NV_cooperative_matrix2")
    from vkcoop import fuzz
    report = fuzz.run(cases=2000, seed=3, target="hw", progress=False, variants=12, workers=0, shrink=False)
    assert report.targets["hw"].skipped is None and report.targets["hw"].cases == 2000
    assert "unexplained" not in report.explanations.get("hw", {}), report.mismatch_variants


def test_mirror_repeat_with_a_unit_dimension_is_tagged():
    from vkcoop.fuzz.models import TAGS, explain, tags
    tag = next(iter(TAGS))
    unit = fc.FuzzCase(0, fc.Variant("load", "fp16", 2, ClampMode.RepeatMirrored), 16, 16,
                       tensor.TensorLayout.create(2, ClampMode.RepeatMirrored).set_dimension(1, 5))
    wide = fc.FuzzCase(0, fc.Variant("load", "fp16", 2, ClampMode.RepeatMirrored), 16, 16,
                       tensor.TensorLayout.create(2, ClampMode.RepeatMirrored).set_dimension(2, 5))
    repeat = fc.FuzzCase(0, fc.Variant("load", "fp16", 2, ClampMode.Repeat), 16, 16,
                         tensor.TensorLayout.create(2, ClampMode.Repeat).set_dimension(1, 5))
    assert tags(unit) == [tag] and tags(wide) == [] and tags(repeat) == []
    ref = tuple(a[0] for a in compare.reference_batch([unit], 256))
    garbage = (np.full(256, -1), np.full(256, hw.STATUS_GARBAGE, dtype=np.uint8), None, None)
    assert explain(unit, "load", garbage, 256) == tag
    assert explain(wide, "load", garbage, 256) is None
    assert ref[1].max() == ElementStatus.IN_BOUNDS     # the reference: every element in bounds
