"""``vkcoop inspect`` (vkcoop.cli.inspect): bad input exits 2 before any device work, a missing tool exits 3 with
one line; on any Vulkan device (lavapipe in CI) the child process builds the pipeline and the run stops at the
driver check; VK_KHR_pipeline_executable_properties where a device exposes it."""
from __future__ import annotations

import argparse
import stat

import pytest

from support import toolchain_or_skip
from vkcoop.cli import inspect as app
from vkcoop.inspect import core, executables, targets


def run_cli(argv):
    parser = argparse.ArgumentParser()
    app.add_arguments(parser)
    return app.run(parser.parse_args(argv))


@pytest.mark.parametrize("command, message", [
    ("--shader nope/missing.comp", "no shader 'nope/missing.comp'"),
    ("--shader gemm/coopmat2_gemm.comp", "not a declared @variants combination"),
    ("--shader gemm/coopmat2_gemm.comp -D GEMM_TYPES=F16_F32", "not a declared @variants"),
    ("--shader test/increment.comp --spec 1=banana", "not true/false, an integer or a number"),
    ("--shader test/increment.comp --spec noequals", "write NAME=VALUE"),
    ("--shader test/increment.comp --spec bad-name=1", "constant_id or a constant's name"),
    ("--shader test/increment.comp --feature warpDrive", "not a Vulkan feature name"),
    ("--shader test/increment.comp --subgroup-size 24", "not a power of two"),
    ("--sample no-such-sample", "no sample 'no-such-sample'"),
    ("--gemm fastest", "--gemm 'fastest'"),
    ("--gemm dense --dtype fp8", "--dtype 'fp8'"),
    ("--gemm dense --shape tall", "--shape 'tall'"),
    ("--gemm dense --config -1", "--config -1"),
    ("--gemm dense --config 256:128y256", "--config"),
    ("--gemm khr --config 128x128x64:2x2z8", "the KHR path takes a tile code"),
    ("--gemm khr --config 256:128x256x32u8g8", "the KHR path takes a tile code"),
    ("--gemm khr24", "--gemm 'khr24'"),
    ("--gemm 2:4-expand --shape llm", "--shape must be square"),
])
def test_bad_input_exits_2_before_device_work(command, message, capsys, monkeypatch):
    def no_device_work(*args, **kwargs):
        raise AssertionError("inspect_pipeline must not be reached on bad input")
    monkeypatch.setattr(core, "inspect_pipeline", no_device_work)
    assert run_cli(command.split()) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1


def test_targets_round_trip_through_json():
    target = targets.shader_target("gemm/coopmat2_gemm.comp",
                                   ["GEMM_TYPES=F16_F32", "SPLIT_SUM=NONE"], ["0=256", "TILE_M=128", "4=true", "9=0.5"])
    assert target.specialization == {0: 256, "TILE_M": 128, 4: True, 9: 0.5}
    import json
    again = targets.Target.from_dict(json.loads(json.dumps(target.to_dict())))
    assert again == target
    assert "F16_F32" in again.label and "0=256" in again.label
    assert targets.gemm_target("2:4").gemm_path == "vk-coopmat2-2:4"


def test_missing_tools_exit_3_with_one_line(capsys, monkeypatch, tmp_path):
    monkeypatch.setattr(core.cache_reader, "require_zstandard", lambda: (_ for _ in ()).throw(
        core.cache_reader.MissingZstandardError("the zstandard package is not installed")))
    assert run_cli(["--shader", "test/increment.comp"]) == 3
    assert capsys.readouterr().err.strip() == "vkcoop: error: unavailable: zstandard: the zstandard package is not installed"
    monkeypatch.setattr(core.cache_reader, "require_zstandard", lambda: None)
    assert run_cli(["--shader", "test/increment.comp", "--nvdisasm", str(tmp_path / "absent")]) == 3
    err = capsys.readouterr().err.strip()
    assert err.startswith("vkcoop: error: unavailable: nvdisasm:") and len(err.splitlines()) == 1


def vulkan_device_or_reason():
    """None when a Vulkan device is usable here, else why not (also used by test_peak)."""
    try:
        from vkcoop import vk
        with vk.Instance() as instance:
            instance.physical_devices()[0]
    except Exception as error:  # noqa: BLE001 - no loader, no driver
        return f"no Vulkan device: {error}"
    return None


NO_VULKAN = vulkan_device_or_reason()


@pytest.mark.vulkan
@pytest.mark.skipif(NO_VULKAN is not None, reason=str(NO_VULKAN))
def test_child_builds_the_pipeline_and_the_query_reads_it_back():
    """The build child returns a recipe per pipeline; the query (here in this process, on the real device)
    re-creates the pipeline from it and reports, or says which extension is missing."""
    toolchain_or_skip()
    from vkcoop.inspect import child, query
    target = targets.shader_target("test/spec_types.comp", specialization=["1=7", "BOOL_VALUE=true"])
    result = child.run_request({"target": target.to_dict(), "device": None})
    assert result["error"] is None, result["error"]
    assert result["device"]["name"]
    assert [p["label"] for p in result["pipelines"]] == [target.label]
    assert result["pipelines"][0]["spirv_bytes"] > 0
    (recipe,) = [executables.PipelineRecipe.from_dict(r) for r in result["recipes"]]
    assert recipe.label == target.label and len(recipe.spirv) == result["pipelines"][0]["spirv_bytes"]
    assert {s.constant_id for s in recipe.specialization} == {1, 4}
    calls = []
    answer = query.run_query({"device": None, "extensions": result["extensions"], "features": result["features"],
                              "pipelines": result["recipes"]}, lambda call, context="": calls.append(call))
    assert answer["error"] is None, answer["error"]
    (report,) = answer["executables"]
    assert report["pipeline"] == target.label
    assert report["available"] in (True, False)
    assert calls[0] == "vkCreateInstance"


@pytest.mark.vulkan
@pytest.mark.skipif(NO_VULKAN is not None, reason=str(NO_VULKAN))
def test_child_refuses_an_unknown_constant_as_input():
    toolchain_or_skip()
    from vkcoop.inspect import child
    target = targets.shader_target("test/spec_types.comp", specialization=["77=1"])
    result = child.run_request({"target": target.to_dict(), "device": None})
    assert result["error"]["kind"] == "input" and "constant_id 77" in result["error"]["message"]


@pytest.mark.vulkan
@pytest.mark.skipif(NO_VULKAN is not None, reason=str(NO_VULKAN))
def test_end_to_end_on_a_non_nvidia_device_stops_at_the_driver(tmp_path, capsys):
    pytest.importorskip("zstandard")
    toolchain_or_skip()
    from vkcoop import vk
    with vk.Instance() as instance:
        if instance.select(None).vendor_id == core.NVIDIA_VENDOR_ID:
            pytest.skip("the default device is NVIDIA's: see the gpu-marked test instead")
    tool = tmp_path / "nvdisasm"
    tool.write_text("#!/bin/sh\nexit 1\n")
    tool.chmod(tool.stat().st_mode | stat.S_IXUSR)
    assert run_cli(["--shader", "test/increment.comp", "--nvdisasm", str(tool), "--no-executables"]) == 3
    err = capsys.readouterr().err.strip()
    assert err.startswith("vkcoop: error: unavailable: driver:") and "not an NVIDIA GPU" in err


def test_statistic_values_by_format():
    import vulkan
    statistic = vulkan.ffi.new("VkPipelineExecutableStatisticKHR*")
    for fmt, member, value, expected in ((0, "b32", 1, True), (1, "i64", -5, -5), (2, "u64", 2 ** 40, 2 ** 40),
                                         (3, "f64", 0.25, 0.25)):
        statistic.format = fmt
        setattr(statistic.value, member, value)
        assert executables.statistic_value(statistic) == expected and type(expected) is type(
            executables.statistic_value(statistic))
    statistic.format = 99
    assert executables.statistic_value(statistic) is None


@pytest.mark.vulkan
@pytest.mark.skipif(NO_VULKAN is not None, reason=str(NO_VULKAN))
def test_pipeline_executable_properties_where_exposed():
    """On a device with the extension: the capture re-creates the pipeline and returns statistics. Elsewhere the
    report says which extension is missing. (Debian 12's lavapipe, Mesa 22.3, does not list it.)"""
    spirv_tools = toolchain_or_skip()
    from vkcoop import vk
    from vkcoop.paths import shader_path
    spirv = spirv_tools.compile(path=shader_path("test/increment.comp"))
    with vk.Device() as device:
        pipeline = device.pipeline(spirv)
        report = executables.pipeline_executables(device.physical, spirv, pipeline)
        if executables.EXTENSION not in device.physical.extensions:
            assert report == {"available": False,
                              "reason": f"{device.physical.name} does not expose {executables.EXTENSION}"}
            pytest.skip(f"{device.physical.name} does not expose {executables.EXTENSION}")
    assert report["available"], report
    assert report["executables"] and all(x["stages"] & 0x20 for x in report["executables"])
    assert any(x["statistics"] for x in report["executables"])


@pytest.mark.vulkan
@pytest.mark.skipif(NO_VULKAN is not None, reason=str(NO_VULKAN))
def test_replay_recreates_a_specialized_pipeline_on_a_second_device():
    """The capture path without its flags: a second VkDevice with the vkcoop device's features re-creates the
    pipeline from the same SPIR-V, bindings, push range, specialization data and subgroup options."""
    spirv_tools = toolchain_or_skip()
    from vkcoop import vk
    from vkcoop.paths import shader_path
    spirv = spirv_tools.compile(path=shader_path("test/spec_types.comp"))
    features = ["maintenance4", "subgroupSizeControl", "computeFullSubgroups"]
    with vk.Device(features=features) as device:
        size = device.physical.subgroup_properties()["subgroupSize"]
        pipeline = device.pipeline(spirv, specialization={1: 7, 2: -3, 3: 0.5, 4: True},
                                   required_subgroup_size=size, local_size=(size, 1, 1))
        with executables.CaptureDevice(device.physical, features=list(device.enabled_features),
                                       capture=False) as capture:
            with capture.replay(spirv, pipeline) as handle:
                assert handle != vulkan_null()
            assert capture.handle is not None
        assert capture.handle is None


def vulkan_null():
    import vulkan
    return vulkan.ffi.NULL


def test_a_cache_dir_with_files_in_it_is_refused(tmp_path, capsys):
    (tmp_path / "precious.txt").write_text("keep me")
    assert run_cli(["--shader", "test/increment.comp", "--cache-dir", str(tmp_path)]) == 2
    assert "is not an empty directory" in capsys.readouterr().err
    assert (tmp_path / "precious.txt").read_text() == "keep me"


def test_a_gemm_configuration_label_is_a_target_the_child_builds(monkeypatch):
    """``--config LABEL``: what the explore tool or the tuning cache names, bound the way bench sparse binds it."""
    target = targets.gemm_target("2:4", "fp16", "llm", "64:32x32x128u2g1s2w4i4c")
    assert target.config == "64:32x32x128u2g1s2w4i4c" and targets.Target.from_dict(target.to_dict()) == target
    assert targets.gemm_target("dense", config="3").config == 3
    assert targets.gemm_target("2:4", "fp16", "llm", "128:64x16x64u4g1w4tp").config == "128:64x16x64u4g1w4tp"
    # the KHR path takes SubgroupTile codes, which are not VulkanConfig labels: passed on as written
    khr = targets.gemm_target("khr", "fp16", "square", "128x128x64:2x2g8")
    assert (khr.gemm_path, khr.config) == ("vk-khr-subgroup", "128x128x64:2x2g8")
    # ... or the label bench sparse prints for a tile (what the tuning cache stores)
    from vkcoop.gemm.tiles import SubgroupTile
    for tile in (SubgroupTile(16, 16, 16, 128, 128, 64, 2, 2, group_m=8),
                 SubgroupTile(16, 16, 16, 128, 128, 32, 2, 2, stages=2, group_m=8)):
        assert targets.gemm_target("khr", config=tile.label()).config == tile.label()
        assert targets.gemm_target("khr", config=tile.code()).config == tile.code()
    from types import SimpleNamespace

    from vkcoop.gemm import paths
    from vkcoop.gemm.configs import parse_config
    from vkcoop.inspect import child
    bound = []

    class Path:
        name = "vk-coopmat2-2:4"

        def config_from_label(self, label, problem):
            return parse_config(label) if problem.n == 32 and "x32x" in label else None

        def bind(self, operands, config):
            bound.append((operands.problem, config))
            return SimpleNamespace(release=lambda: None)

    class Group:
        def __init__(self, dtypes, device):
            self.paths, self.device = [Path()], SimpleNamespace(pipeline=lambda *a, **k: None)

        def close(self):
            pass
    monkeypatch.setattr(paths, "VulkanDevicePaths", Group)
    from vkcoop.gemm import path as gemm_path
    monkeypatch.setattr(gemm_path.GemmOperands, "make", staticmethod(lambda problem: SimpleNamespace(problem=problem)))
    with child._gemm(target, None):
        pass
    ((problem, config),) = bound
    assert (problem.m, problem.n, problem.k) == (8192, 32, 8192) and config.label() == target.config
    with pytest.raises(ValueError, match="cannot run llm"):
        with child._gemm(targets.gemm_target("2:4", "fp16", "llm", "256:128x256x32u8g8"), None):
            pass


def test_the_report_title_says_under_which_buffer_robustness_the_pipelines_were_built():
    from io import StringIO

    from rich.console import Console

    from vkcoop.cli.inspect import print_report
    from vkcoop.inspect import core

    CACHE = {"files": 0, "frames": 0, "objects": {}}

    def title(device):
        text = StringIO()
        print_report(core.InspectResult("--shader test/axpy.comp", device, [], [], CACHE, []),
                     Console(file=text, width=300))
        return text.getvalue().splitlines()[0]

    built = {"name": "NVIDIA H100 80GB HBM3", "driver_version": "580.159.04", "buffer_robustness": "disabled"}
    assert "(driver 580.159.04, buffer robustness disabled)" in title(built)
    del built["buffer_robustness"]                     # a cache on disk: nobody knows how it was built
    assert "(driver 580.159.04)" in title(built) and "robustness" not in title(built)
