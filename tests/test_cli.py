"""The vkcoop command line, run as a user would (in-process through cli.main)."""
from __future__ import annotations

import json

import pytest

import spirv_tools
from vkcoop import cli, samples, vk

try:
    spirv_tools.find_toolchain()
    _NO_TOOLCHAIN = None
except spirv_tools.ToolchainError as exc:
    _NO_TOOLCHAIN = str(exc)
needs_toolchain = pytest.mark.skipif(_NO_TOOLCHAIN is not None, reason=f"no coopmat2 toolchain: {_NO_TOOLCHAIN}")


def _vulkan_caps():
    try:
        return vk.capabilities()
    except Exception as exc:  # noqa: BLE001 - any failure means no usable device here
        return exc


_CAPS = _vulkan_caps()
needs_vulkan = pytest.mark.skipif(isinstance(_CAPS, Exception), reason=f"no Vulkan device: {_CAPS}")


def run_cli(capsys, *argv):
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@needs_toolchain
def test_toolchain_json_names_the_chosen_toolchain(capsys):
    code, out, _ = run_cli(capsys, "toolchain", "--json")
    data = json.loads(out)
    assert code == 0
    assert data["chosen"] and data["backend"]["compile_backend"] in ("libshaderc", "glslc")
    assert any(c["capable"] for c in data["candidates"])


@needs_toolchain
def test_shaders_check_and_reflect(capsys):
    code, out, _ = run_cli(capsys, "shaders", "check", "tensor/load_store", "--json")
    results = json.loads(out)
    assert code == 0 and len(results) == 30 and all(r["ok"] for r in results)
    code, out, _ = run_cli(capsys, "shaders", "reflect", "tensor/load_store", "--first", "--json")
    info = json.loads(out)
    assert code == 0 and "TensorAddressingNV" in info["capabilities"]


def test_shaders_with_an_unknown_pattern_fail(capsys):
    code, _, err = run_cli(capsys, "shaders", "list", "no-such-shader-anywhere")
    assert code == 1 and "no shader matches" in err


def test_list_names_every_sample_with_its_needs(capsys):
    code, out, _ = run_cli(capsys, "list", "--json")
    listed = json.loads(out)
    assert code == 0
    assert [s["name"] for s in listed] == [s.name for s in samples.all_samples()]
    assert all(s["requires"]["extensions"] for s in listed)


def test_run_needs_names_or_all(capsys):
    code, _, err = run_cli(capsys, "run")
    assert code == 2 and "--all" in err


def test_run_unknown_sample_names_the_known_ones(capsys):
    code, _, err = run_cli(capsys, "run", "no-such-sample")
    assert code == 2
    assert samples.all_samples()[0].name in err


@needs_vulkan
def test_run_all_never_claims_a_pass_without_coopmat2(capsys):
    if _CAPS["cooperative_matrix2"]["supported"]:
        pytest.skip("this device has coopmat2; the gpu tests cover real runs")
    code, out, err = run_cli(capsys, "run", "--all", "--json")
    results = json.loads(out)
    errors = [line for line in err.splitlines() if line.startswith("vkcoop: error:")]
    assert code == 3 and len(errors) == 1 and errors[0].startswith("vkcoop: error: no sample could run here: ")
    assert {r["status"] for r in results} == {"skip"}
    assert all("VK_NV_cooperative_matrix2" in r["reason"] or "lacks" in r["reason"] for r in results)


@needs_vulkan
def test_info_json_reports_the_device(capsys):
    code, out, _ = run_cli(capsys, "info", "--json")
    data = json.loads(out)
    assert code == 0 and data["name"] == _CAPS["name"]
    assert set(data["cooperative_matrix2"]["features"]) >= {"cooperativeMatrixWorkgroupScope",
                                                             "cooperativeMatrixTensorAddressing"}


def test_bench_help_names_the_command(capsys):
    assert cli.main(["bench", "sparse", "--help"]) == 0
    assert "vkcoop bench sparse" in capsys.readouterr().out


@needs_vulkan
@pytest.mark.parametrize("argv, mode", [(["--validate"], "api"), (["--validate=gpu"], "gpu"),
                                        (["--validate", "gpu"], "gpu"), ([], False)])
def test_run_validate_takes_an_optional_mode(monkeypatch, capsys, argv, mode):
    from vkcoop.cli import device as device_command
    from vkcoop.samples.case import SampleResult
    seen = []

    def run_samples(chosen, device, validate, on_result, progress):
        seen.append(validate)
        on_result(SampleResult(chosen[0].name, "pass", cases=1))
    monkeypatch.setattr(device_command, "run_samples", run_samples)
    code, _, _ = run_cli(capsys, "run", samples.all_samples()[0].name, *argv)
    assert code == 0 and seen == [mode]


@needs_vulkan
def test_a_piped_run_says_each_sample_as_it_finishes(capsys):
    """Through a pipe `vkcoop run` writes a line per sample to stderr (a skip on a device without coopmat2, a pass
    on one with it); --quiet writes none. Without coopmat2 both samples skip: nothing ran, exit 3 and its one line."""
    names = [sample.name for sample in samples.all_samples()][:2]   # the quickest on a GPU too
    ran = _CAPS["cooperative_matrix2"]["supported"]
    code, out, err = run_cli(capsys, "run", *names, "--progress", "lines")
    lines = err.splitlines()
    error = [] if ran else ["vkcoop: error: no sample could run here: "]
    assert code == (0 if ran else 3) and len(lines) == len(names) + len(error), err
    for index, (line, name) in enumerate(zip(lines, names), 1):
        assert line.startswith(f"[{index}/{len(names)} ") and f"] {name}: " in line, line
    assert [line[:len(e)] for line, e in zip(lines[len(names):], error)] == error
    quiet = run_cli(capsys, "run", *names, "--quiet")[2]
    assert quiet == "" if ran else quiet.startswith(error[0]) and quiet.count("\n") == 1


def test_run_validate_refuses_an_unknown_mode_in_one_line(capsys):
    code, out, err = run_cli(capsys, "run", "--validate=gpu-av", "--all")
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "invalid choice: 'gpu-av'" in err and "'api', 'gpu'" in err


@needs_vulkan
@needs_toolchain
def test_the_demo_passes_on_a_device_without_coopmat2(capsys):
    """The README's first command, as CI and a GPU-less machine run it: the shaders and the portable port pass, the
    coopmat2 samples are named as skipped, and the exit code is 0 (run --all alone exits 3 there)."""
    if _CAPS["cooperative_matrix2"]["supported"]:
        pytest.skip("this device has coopmat2; the gpu tests cover the sample suite")
    code, out, err = run_cli(capsys, "demo")
    assert code == 0, out[-3000:] + err
    assert "0 mismatches" in out and "has no VK_NV_cooperative_matrix2" in out
    assert out.rstrip().endswith("demo passed (step 3 skipped: see why above)") and "vkcoop: error" not in err
