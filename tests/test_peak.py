"""``vkcoop bench peak`` (vkcoop.bench.peak): which forms come out of the driver's tables, the exact work count,
the ceilings dict, bad input, the shaders; bandwidth on any Vulkan device (lavapipe in CI); the MMA forms on a
coopmat2 GPU (marked gpu)."""
from __future__ import annotations

import argparse
import dataclasses
import json

import numpy as np
import pytest

from support import toolchain_or_skip
from test_inspect_cli import NO_VULKAN
from vkcoop.bench import peak, peak_operands
from vkcoop.cli import peak as peak_command
from vkcoop.samples.fixtures import H200_CAPS
from vkcoop.vk.tables import SCOPE_WORKGROUP, ShapeEntry


def _labels(forms):
    return {f.label for f in forms}


def test_forms_from_the_h200_tables():
    forms = peak.mma_forms(H200_CAPS.khr, H200_CAPS.flexible, max_dimension=256)
    labels = _labels(forms)
    for types in peak.TYPES:
        assert f"coopmat2-workgroup {types} 128x256x32 wg256 c1" in labels
        assert f"coopmat2-workgroup {types} 32x32x128 wg64 c4" in labels
        assert f"coopmat2-subgroup {types} 64x64x32 wg256 c1" in labels
    khr = {(f.types, f.shape) for f in forms if f.form == "khr-subgroup"}
    assert khr == {("fp16->fp16", "16x16x16"), ("fp16->fp16", "16x8x16"), ("fp16->fp16", "16x8x8"),
                   ("fp16->fp32", "16x16x16"), ("fp16->fp32", "16x8x16"), ("fp16->fp32", "16x8x8"),
                   ("bf16->fp32", "16x16x16"), ("s8->s32", "16x16x32"), ("s8->s32", "16x8x32")}
    assert all(f.chains == peak.KHR_CHAINS and f.workgroup_size == peak.KHR_WORKGROUP
               for f in forms if f.form == "khr-subgroup")


def test_forms_follow_the_table_not_a_list():
    # Only a 256-invocation row with granularity 32/32/16, and a max dimension of 128.
    flexible = (ShapeEntry(32, 32, 16, 0, 0, 1, 1, SCOPE_WORKGROUP, True, 256),)
    forms = peak.mma_forms((), flexible, max_dimension=128, types=["fp16->fp32"])
    assert _labels(forms) == {"coopmat2-workgroup fp16->fp32 128x128x32 wg256 c1"}
    assert peak.mma_forms((), flexible, types=["bf16->fp32"]) == []
    assert peak.mma_forms(H200_CAPS.khr, H200_CAPS.flexible, types=["s8->s32"], forms=["khr-subgroup"]) == [
        peak.MmaForm("khr-subgroup", "s8->s32", 256, 16, 16, 32, 8), peak.MmaForm("khr-subgroup", "s8->s32", 256,
                                                                                  16, 8, 32, 8)]


def test_work_is_counted_per_matrix_instance():
    workgroup = peak.MmaForm("coopmat2-workgroup", "fp16->fp32", 256, 128, 256, 32, 1)
    assert workgroup.instances == 1
    assert workgroup.work(groups=10, iterations=3) == 10 * 3 * 2 * 128 * 256 * 32
    khr = peak.MmaForm("khr-subgroup", "fp16->fp32", 256, 16, 8, 16, 8)
    assert khr.instances == 8   # 256 invocations = 8 subgroups of 32, each with its own 8 chains
    assert khr.work(groups=4, iterations=5) == 4 * 8 * 5 * 8 * 2 * 16 * 8 * 16
    # A = B = 1 for 2 iterations: chain c holds c + 2*K in every element; the store is their sum.
    assert khr.expected_element(2) == sum(c + 2 * 16 for c in range(8))
    assert workgroup.specialization() == {0: 256, 1: 128, 2: 256, 3: 32, 4: 1}


def test_random_operand_forms_load_two_sets_where_chains_alternate():
    forms = peak.mma_forms(H200_CAPS.khr, H200_CAPS.flexible, max_dimension=256, types=["fp16->fp32"],
                           forms=["coopmat2-workgroup"], operands=peak.OPERANDS)
    assert [f.operands for f in forms[:2]] == ["zeros", "random"] and len(forms) == 2 * len(
        peak.mma_forms(H200_CAPS.khr, H200_CAPS.flexible, max_dimension=256, types=["fp16->fp32"],
                       forms=["coopmat2-workgroup"]))
    random = forms[1]
    assert random.label.endswith(" random operands") and random.defines["OPERANDS"] == "LOADED"
    assert forms[0].defines["OPERANDS"] == "UNIFORM"
    khr = peak.MmaForm("khr-subgroup", "fp16->fp32", 256, 16, 8, 16, 8, "random")
    assert peak_operands.operand_count(khr) == 2 * (16 * 16 + 16 * 8)
    assert peak_operands.operand_count(random) == 128 * 32 + 32 * 256   # one chain, one set
    words = peak_operands.operand_words(khr, np.arange(peak_operands.operand_count(khr)))
    assert words.dtype == np.uint32 and words.size == peak_operands.operand_count(khr) // 2
    assert words.view(np.float16)[:3].tolist() == [0.0, 1.0, 2.0]
    with pytest.raises(ValueError, match="expected 768"):
        peak_operands.operand_words(khr, np.zeros(10))


@pytest.mark.parametrize("types", list(peak.TYPES))
def test_random_operands_are_diverse_and_the_check_values_exact(types):
    form = peak.MmaForm("coopmat2-subgroup", types, 64, 32, 32, 32, 4, "random")
    values = peak_operands.random_operands(form)
    assert values.dtype == peak_operands.INPUT_DTYPES[types] and np.all(np.isfinite(values.astype(np.float64)))
    assert len(np.unique(values)) > 200   # full mantissas (or all of int8), not a handful of values
    check = peak_operands.check_operands(form)
    assert set(np.unique(check.astype(np.float64))) == {-1.0, 0.0, 1.0}
    expected = peak_operands.expected_store(form, check, 2)
    # two subgroup instances store the same tile; chain c (set c % 2) adds c + 2 * A_s B_s
    a = check.astype(np.float64).reshape(2, -1)
    tile = sum(c + 2 * (a[c % 2, :1024].reshape(32, 32) @ a[c % 2, 1024:].reshape(32, 32)) for c in range(4))
    assert expected.shape == (2 * 32 * 32,) and np.array_equal(expected[:1024], tile.reshape(-1))
    assert np.array_equal(expected[1024:], expected[:1024])
    # the sums are integers well inside every accumulator's exact range, so the check compares bit for bit
    assert np.all(expected == np.round(expected)) and np.abs(expected).max() <= 2048


def _result(*rows):
    return peak.PeakResult({"vulkan_device": "GPU", "cuda_device": "GPU (cuda)"}, list(rows))


def test_ceilings_take_the_best_shape_of_each_form_and_type():
    row = peak.PeakRow
    result = _result(
        row("Vulkan", "mma", "coopmat2-workgroup", "fp16->fp32", "128x256x32 wg256 c1", "ok", rate=640.0,
            unit="TFLOP/s"),
        row("Vulkan", "mma", "coopmat2-workgroup", "fp16->fp32", "128x128x32 wg256 c1", "ok", rate=650.0,
            unit="TFLOP/s"),
        row("Vulkan", "mma", "coopmat2-workgroup", "bf16->fp32", "128x128x32 wg256 c1", "failed", rate=None),
        row("Vulkan", "bandwidth", "read", "", "1024 MiB", "ok", work=2 ** 30, rate=4000.0, unit="GB/s"),
        row("CUDA", "mma", "wgmma.sp", "fp16->fp32", "m64n256k32", "ok", rate=1300.0, unit="TFLOP/s"),
        row("CUDA", "mma", "all", "", "", "skipped", "no CUDA"),
        row("Vulkan", "mma", "coopmat2-workgroup", "fp16->fp32", "128x128x32 wg256 c1", "ok", rate=660.0,
            unit="TFLOP/s", operands="random"))
    got = peak.ceilings_from(result)
    assert got["vulkan"].pop("mma_random") == {
        "coopmat2-workgroup": {"fp16->fp32": {"tflops": 660.0, "shape": "128x128x32 wg256 c1", "unit": "TFLOP/s"}}}
    assert got == {
        "vulkan": {"device": "GPU", "bandwidth": {"read": {"gb_per_s": 4000.0, "bytes": 2 ** 30}},
                   "mma": {"coopmat2-workgroup": {"fp16->fp32": {"tflops": 650.0, "shape": "128x128x32 wg256 c1",
                                                                 "unit": "TFLOP/s"}}}},
        "cuda": {"device": "GPU (cuda)", "bandwidth": {},
                 "mma": {"wgmma.sp": {"fp16->fp32": {"tflops": 1300.0, "shape": "m64n256k32", "unit": "TFLOP/s"}}}}}
    assert json.loads(json.dumps(result.to_dict()))["ceilings"]["cuda"] == got["cuda"]


def _run(argv):
    parser = argparse.ArgumentParser()
    peak_command.add_arguments(parser)
    return peak_command.run(parser.parse_args(argv))


@pytest.mark.parametrize("argv, message", [(["--types", "fp8->fp32"], "--types 'fp8->fp32'"),
                                           (["--forms", "hgmma"], "--forms 'hgmma'"),
                                           (["--modes", "write"], "--modes 'write'"),
                                           (["--operands", "ones"], "--operands 'ones'"),
                                           (["--repeats", "0"], "must be positive"),
                                           (["--target-ms", "-1"], "must be positive")])
def test_bad_input_exits_2_before_device_work(argv, message, capsys, monkeypatch):
    def no_device_work(*args, **kwargs):
        raise AssertionError("no device work on bad input")
    monkeypatch.setattr(peak, "measure_vulkan", no_device_work)
    assert _run(argv + ["--no-cuda"]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1


@pytest.mark.toolchain
def test_shader_variants_need_the_features_of_their_scope():
    toolchain_or_skip()
    workgroup = peak.MmaForm("coopmat2-workgroup", "bf16->fp32", 256, 128, 128, 32, 1)
    spirv = peak._spirv(peak.SHADER, {"PEAK_TYPES": "BF16_F32", "SCOPE": "WORKGROUP"})
    needed = peak.form_features(workgroup, spirv)
    assert {"cooperativeMatrix", "cooperativeMatrixWorkgroupScope", "cooperativeMatrixFlexibleDimensions",
            "shaderBFloat16Type", "shaderBFloat16CooperativeMatrix", "maintenance4"} <= set(needed)
    khr = peak.MmaForm("khr-subgroup", "s8->s32", 256, 16, 16, 32, 8)
    spirv = peak._spirv(peak.SHADER, {"PEAK_TYPES": "S8_S32", "SCOPE": "SUBGROUP"})
    needed = set(peak.form_features(khr, spirv))
    assert {"cooperativeMatrix", "shaderInt8", "subgroupSizeControl", "computeFullSubgroups"} <= needed
    assert "cooperativeMatrixWorkgroupScope" not in needed
    # the loaded operands are 32-bit words: no 8- or 16-bit storage feature
    loaded = dataclasses.replace(khr, operands="random")
    assert set(peak.form_features(loaded, peak._spirv(peak.SHADER, loaded.defines))) == needed




@pytest.mark.vulkan
@pytest.mark.skipif(NO_VULKAN is not None, reason=str(NO_VULKAN))
def test_bandwidth_rows_and_their_check_on_any_device():
    toolchain_or_skip()
    from vkcoop import vk
    with vk.Device(features=["maintenance4"]) as device:
        for mode in peak.MODES:
            row = peak.measure_bandwidth(device, mode, megabytes=2, groups=8, repeats=2)
            assert row.status == "ok", row.reason
            count = (2 << 20) // 16
            assert row.work == count * 16 * (2 if mode == "copy" else 1)
            assert row.rate == pytest.approx(row.work / (row.median_ms * 1e-3) / 1e9)
        # The check can fail: the READ kernel's output is not a copy.
        read = device.pipeline(peak._spirv(peak.BANDWIDTH_SHADER, {"MODE": "READ"}), specialization={0: 256})
        assert "differs from numpy" in peak.check_bandwidth_kernel(device, read, "copy")
        assert peak.check_bandwidth_kernel(device, read, "read") == ""


@pytest.mark.vulkan
@pytest.mark.skipif(NO_VULKAN is not None, reason=str(NO_VULKAN))
def test_cli_writes_json_with_ceilings(tmp_path, capsys):
    toolchain_or_skip()
    target = tmp_path / "nested" / "peak.json"
    code = _run(["--no-cuda", "--sms", "1", "--bandwidth-mib", "2", "--repeats", "2", "--json", str(target)])
    assert code == 0
    assert f"wrote {target}" in capsys.readouterr().err
    data = json.loads(target.read_text())
    assert {r["form"] for r in data["rows"] if r["kind"] == "bandwidth"} == {"read", "copy"}
    assert set(data["ceilings"]["vulkan"]["bandwidth"]) == {"read", "copy"}


def _coopmat2_or_reason():
    if NO_VULKAN:
        return NO_VULKAN
    from vkcoop import vk
    with vk.Instance() as instance:
        if not any(p.has_extension("VK_NV_cooperative_matrix2") for p in instance.physical_devices()):
            return "no Vulkan device lists VK_NV_cooperative_matrix2"
    return None


_NO_COOPMAT2 = _coopmat2_or_reason()


@pytest.mark.gpu
@pytest.mark.skipif(_NO_COOPMAT2 is not None, reason=str(_NO_COOPMAT2))
def test_mma_forms_check_and_time_on_the_gpu():
    name, rows = peak.measure_vulkan(types=["fp16->fp32", "s8->s32"], forms=["coopmat2-workgroup", "khr-subgroup"],
                                     modes=(), groups=264, target_ms=2.0, repeats=3)
    assert rows, name
    assert {r.operands for r in rows} == {"zeros", "random"}   # each random row passed its exact loaded check
    bad = [dataclasses.asdict(r) for r in rows if r.status != "ok"]
    assert not bad, bad
    for row in rows:
        assert row.rate > 1.0 and np.isfinite(row.rate)
