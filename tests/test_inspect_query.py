"""The VK_KHR_pipeline_executable_properties query of ``vkcoop inspect``, in its own process, on a stand-in driver
(tests/fake_vulkan_driver.py) since no GPU is here: every Vulkan call is announced in the progress file before it
is made, the structs a create-info points at are alive during the call, and a crash inside the driver (a planted
SIGSEGV) becomes one line of an otherwise complete report, with the faulthandler stack in the JSON."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pytest

import fake_vulkan_driver
from test_inspect_nvuc import FIXTURES, fake_build
from vkcoop.cli import inspect as app
from vkcoop.inspect import core, executables, launch, query

SCRIPT = Path(fake_vulkan_driver.__file__)
FEATURES = ["shaderFloat16", "cooperativeMatrixWorkgroupScope", "subgroupSizeControl", "computeFullSubgroups"]


def recipe(label="gemm", subgroup=32) -> executables.PipelineRecipe:
    return executables.PipelineRecipe(label, b"\x03\x02\x23\x07" + bytes(60), {0: 7, 1: 7, 2: 7}, 16,
                                      [executables.SpecEntry(0, (256).to_bytes(4, "little")),
                                       executables.SpecEntry(4, (1).to_bytes(4, "little"))], subgroup, True)


def request(*recipes) -> dict:
    return {"device": None, "extensions": [], "features": FEATURES,
            "pipelines": [r.to_dict() for r in recipes or [recipe()]]}


def test_recipes_survive_json():
    original = recipe()
    again = executables.PipelineRecipe.from_dict(json.loads(json.dumps(original.to_dict())))
    assert again == original


def test_every_vulkan_call_is_announced_before_it_is_made(monkeypatch):
    events = []
    driver = fake_vulkan_driver.install(monkeypatch.setattr, events=events)
    result = query.run_query(request(recipe("a"), recipe("b", None)), lambda call, context="": events.append(
        ("mark", call)))
    assert result["error"] is None
    assert [e["pipeline"] for e in result["executables"]] == ["a", "b"]
    calls = [i for i, (kind, _) in enumerate(events) if kind == "call"]
    assert calls and all(events[i - 1] == ("mark", events[i][1]) for i in calls), events
    for name in ("vkCreateDevice", "vkCreateComputePipelines", "vkGetPipelineExecutablePropertiesKHR",
                 "vkGetPipelineExecutableStatisticsKHR", "vkGetPipelineExecutableInternalRepresentationsKHR",
                 "vkDestroyPipeline", "vkDestroyDevice"):
        assert name in driver.calls, name
    assert driver.calls.count("vkGetPipelineExecutableInternalRepresentationsKHR") == 2 * 3  # three calls each
    assert driver.dangling == []


def test_the_capture_device_keeps_its_create_info_arrays_alive(monkeypatch):
    """cffi frees an array given only as a struct field's initializer; the extension-name array must live
    through vkCreateDevice (it did not: ppEnabledExtensionNames pointed at freed memory)."""
    driver = fake_vulkan_driver.install(monkeypatch.setattr)
    physical = fake_vulkan_driver.FakePhysical()
    with executables.CaptureDevice(physical, features=FEATURES) as capture:
        report = capture.executables(recipe().spirv, recipe(), "gemm")
    assert driver.dangling == []
    assert {"VK_KHR_pipeline_executable_properties", "VK_NV_cooperative_matrix2",
            "VK_KHR_cooperative_matrix"} <= set(driver.extension_names)
    (executable,) = report
    assert executable["name"] == "Compute Shader" and executable["stages"] == 0x20
    assert [(s["name"], s["value"]) for s in executable["statistics"]] == [
        (name, bool(value) if fmt == 0 else value) for name, fmt, value in fake_vulkan_driver.STATISTICS]
    (representation,) = executable["internal_representations"]
    assert representation["text"] == fake_vulkan_driver.REPRESENTATION.decode()


def test_the_query_process_reports_what_the_driver_said(monkeypatch):
    monkeypatch.setattr(launch, "QUERY_MODULE", [str(SCRIPT)])
    monkeypatch.delenv(fake_vulkan_driver.CRASH_ENV, raising=False)
    outcome = launch.query(request(recipe("a"), recipe("b")))
    assert outcome.failure is None
    assert [(e["pipeline"], e["available"]) for e in outcome.executables] == [("a", True), ("b", True)]
    assert outcome.executables[0]["executables"][0]["statistics"][0]["value"] == 151


@pytest.mark.parametrize("crash_in", ["vkCreateDevice", "vkCreateComputePipelines",
                                      "vkGetPipelineExecutablePropertiesKHR", "vkGetPipelineExecutableStatisticsKHR",
                                      "vkGetPipelineExecutableInternalRepresentationsKHR"])
def test_a_crash_in_the_driver_names_the_call(monkeypatch, crash_in):
    monkeypatch.setattr(launch, "QUERY_MODULE", [str(SCRIPT)])
    monkeypatch.setenv(fake_vulkan_driver.CRASH_ENV, crash_in)
    failure = launch.query(request()).failure
    assert failure["message"].startswith(f"the driver crashed in {crash_in} (SIGSEGV)")
    assert (failure["signal"], failure["last_call"], failure["returncode"]) == ("SIGSEGV", crash_in, -11)
    assert "Fatal Python error: Segmentation fault" in failure["stderr"]     # faulthandler's stack
    assert "fake_vulkan_driver.py" in failure["stderr"] and "executables.py" in failure["stderr"]


def test_what_was_read_before_a_crash_is_kept(monkeypatch):
    monkeypatch.setattr(launch, "QUERY_MODULE", [str(SCRIPT)])
    monkeypatch.setenv(fake_vulkan_driver.CRASH_ENV, "vkCreateComputePipelines#2")
    outcome = launch.query(request(recipe("first"), recipe("second")))
    assert [e["pipeline"] for e in outcome.executables] == ["first"]
    assert outcome.failure["message"] == "the driver crashed in vkCreateComputePipelines (SIGSEGV) [pipeline second]"


def test_the_query_child_never_writes_the_shader_cache_that_is_read(monkeypatch, tmp_path):
    seen = {}

    def run(command, env=None, **kwargs):
        seen.update(command=command, env=env)
        raise launch.subprocess.TimeoutExpired(command, 1, stderr=b"")
    monkeypatch.setattr(launch.subprocess, "run", run)
    monkeypatch.setenv(launch.DISK_CACHE_PATH_ENV, str(tmp_path / "the real one"))
    failure = launch.query(request(), timeout_s=1).failure
    assert seen["command"][:3] == [sys.executable, "-X", "faulthandler"]
    assert seen["env"]["__GL_SHADER_DISK_CACHE"] == "0"
    assert seen["env"][launch.DISK_CACHE_PATH_ENV] != str(tmp_path / "the real one")
    assert failure["message"] == "the query took longer than 1 s" and failure["signal"] is None


@pytest.mark.parametrize("returncode, calls, stderr, error, message", [
    (0, [("vkCreateDevice", "")], "", None, None),
    (-6, [], "", None, "the query process died by SIGABRT before its first Vulkan call"),
    (-11, [("vkCreateInstance", ""), ("vkCreateDevice", "")], "", None, "the driver crashed in vkCreateDevice (SIGSEGV)"),
    (1, [("vkCreateDevice", "")], "Traceback\nImportError: no vulkan\n", None,
     "the query process exited 1: ImportError: no vulkan"),
    (0, [], "", {"kind": "RuntimeError", "message": "vkCreateDevice (capture) failed with VkResult -3"},
     "RuntimeError: vkCreateDevice (capture) failed with VkResult -3"),
])
def test_query_failure_is_one_line(returncode, calls, stderr, error, message):
    failure = launch.query_failure(returncode, calls, stderr, error)
    if message is None:
        assert failure is None
    else:
        assert failure["message"] == message and "\n" not in failure["message"]


def run_cli(argv):
    parser = argparse.ArgumentParser()
    app.add_arguments(parser)
    return app.run(parser.parse_args(argv))


def test_a_driver_crash_in_the_query_leaves_the_report_standing(monkeypatch, capsys, tmp_path):
    """The whole command, with the build child replaced by the real H100 cache and nvdisasm by a stand-in that
    prints the fixture's peak listing: exit 0, the table, one line about the crash, the stack in the JSON."""
    def build(target, cache_dir, *, device=None, timeout_s=900.0):
        outcome = fake_build(FIXTURES / "peak")(target, cache_dir)
        outcome.update(recipes=[recipe(target.label).to_dict()], features=FEATURES)
        return outcome
    monkeypatch.setattr(core, "run_child", build)
    monkeypatch.setattr(launch, "QUERY_MODULE", [str(SCRIPT)])
    monkeypatch.setenv(fake_vulkan_driver.CRASH_ENV, "vkGetPipelineExecutableStatisticsKHR")
    tool = tmp_path / "nvdisasm"
    tool.write_text(f"#!/bin/sh\ncat '{FIXTURES / 'peak.expected.sass'}'\n")
    tool.chmod(0o755)
    out = tmp_path / "report.json"
    assert run_cli(["--shader", "test/increment.comp", "--nvdisasm", str(tool), "--json", str(out)]) == 0
    captured = capsys.readouterr()
    assert captured.err == ""
    assert "HMMA.16816.F32 x64" in captured.out and "│ 151" in captured.out
    crash_lines = [line for line in captured.out.splitlines() if "crashed" in line]
    assert len(crash_lines) == 1
    assert "the driver crashed in vkGetPipelineExecutableStatisticsKHR (SIGSEGV)" in crash_lines[0]
    report = json.loads(out.read_text())
    assert report["total"]["total"] == 392
    failure = report["executables_failure"]
    assert failure["last_call"] == "vkGetPipelineExecutableStatisticsKHR" and failure["signal"] == "SIGSEGV"
    assert "Fatal Python error: Segmentation fault" in failure["stderr"] and "_statistics" in failure["stderr"]
    assert failure["calls"][-1].startswith("vkGetPipelineExecutableStatisticsKHR\tpipeline ")
