"""One exit code for "nothing could run" (3) across every command whose samples, paths, targets or parts can all be
skipped, the same order everywhere (a failure before nothing-ran), `vkcoop demo`'s own rule, and the README's table
of codes beside the command's. Each command runs in-process through cli.main on what its measuring function returns
(stood in here, so no GPU is needed); the real skips on this machine are in test_cli.py and test_cli_errors.py."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from vkcoop import cli
from vkcoop.cli.common import EXIT_CODES_HELP, CliError, Exit, nothing_ran, nothing_ran_error

REPO = Path(__file__).resolve().parent.parent
REASON = "this device lacks VK_NV_cooperative_matrix2"


@pytest.fixture
def command(monkeypatch, capsys):
    """cli.main without the toolchain check (each command's own skips are what is tested) -> (code, out, err)."""
    monkeypatch.setattr(cli, "require_toolchain", lambda auto_install: None)
    monkeypatch.delenv("VKCOOP_DEVICE", raising=False)

    def run(*argv):
        code = cli.main(list(argv))
        out, err = capsys.readouterr()
        return code, out, err
    return run


# --- each command, stood in with results of three kinds ---------------------------------------------------------
# A scenario is a list of outcomes, each "ok", "skipped" or "failed"; every command gets the same three.
SCENARIOS = {"all skipped": (["skipped", "skipped"], Exit.ENVIRONMENT),
             "one ran": (["ok", "skipped"], Exit.OK),
             "one failed": (["failed", "skipped"], Exit.FAILED)}


def _samples(monkeypatch, outcomes):
    from vkcoop.cli import device as device_command
    from vkcoop.samples.case import SampleResult

    words = {"ok": "pass", "skipped": "skip", "failed": "fail"}
    results = [SampleResult(f"s{i}", words[o], reason=REASON if o == "skipped" else "", cases=int(o != "skipped"))
               for i, o in enumerate(outcomes)]

    def run_samples(chosen, device, validate, on_result, progress):
        for result in results:
            on_result(result)
        return results
    monkeypatch.setattr(device_command, "run_samples", run_samples)
    return ["run", "--all"]


def _gemm(monkeypatch, outcomes):
    from vkcoop.bench import sparse
    from vkcoop.bench.measure import path_result
    from vkcoop.gemm.path import GemmProblem

    problem = GemmProblem("fp16", "square", 256, 256, 256)
    results = []
    for i, outcome in enumerate(outcomes):
        r = path_result(f"path{i}", problem, outcome, REASON if outcome == "skipped" else "")
        if outcome == "ok":
            r.set_times([1e-3] * 3)
            r.tflops = problem.flops / 1e-3 / 1e12
        results.append(r)
    monkeypatch.setattr(sparse, "run_sparse_bench", lambda *settings, **options: sparse.BenchResult(results, {}, {}))
    return ["bench", "sparse"]


def _attention(monkeypatch, outcomes):
    from vkcoop.bench import attention as bench
    from vkcoop.bench.sparse import BenchResult
    from vkcoop.cli import attention as attention_command

    (case,) = bench.make_cases(kinds=("decode",), head_dims=(64,), decode_seqs=(64,), decode_heads=((8, 8),))
    results = []
    for i, outcome in enumerate(outcomes):
        r = bench.result_for(f"path{i}", case, outcome, REASON if outcome == "skipped" else "")
        if outcome == "ok":
            r.set_times([1e-3] * 3)
            r.tflops = case.shape.flops(case.causal) / 1e-3 / 1e12
        results.append(r)
    monkeypatch.setattr(attention_command, "run_attention_bench", lambda *settings, **options: BenchResult(results, {}, {}))
    return ["bench", "attention"]


def _peak(monkeypatch, outcomes):
    from vkcoop.bench.peak import PeakResult, PeakRow
    from vkcoop.cli import peak as peak_command

    rows = [PeakRow("Vulkan", "mma", "fp16->fp32", "16x16x16", "", outcome, REASON if outcome == "skipped" else "",
                    median_ms=1.0 if outcome == "ok" else None, rate=1.0 if outcome == "ok" else None)
            for outcome in outcomes]
    monkeypatch.setattr(peak_command, "run_peak", lambda **options: PeakResult({}, rows))
    return ["bench", "peak"]


def _fuzz(monkeypatch, outcomes):
    from vkcoop import fuzz
    from vkcoop.fuzz.report import Report, TargetStats

    targets = {name: TargetStats(name, cases=0 if o == "skipped" else 10, mismatches=int(o == "failed"),
                                 skipped=REASON if o == "skipped" else None)
               for name, o in zip(("hw", "portable"), outcomes)}
    counts = {name: s.mismatches for name, s in targets.items() if s.mismatches}
    report = Report(seed=0, cases=10, target="both", targets=targets, mismatches=[], mismatch_counts=counts)
    monkeypatch.setattr(fuzz, "run", lambda **options: report)
    return ["fuzz", "--target", "both"]


def _gpu_av(monkeypatch, outcomes):
    from vkcoop.sanitize import vulkan as gpu_av

    runs = [gpu_av.GpuAvRun("sample", f"s{i}", status=o, reason=REASON if o == "skipped" else "")
            for i, o in enumerate(outcomes)]
    report = gpu_av.GpuAvReport(device="a GPU", layer="1.4", runs=runs)
    monkeypatch.setattr(gpu_av, "run_gpu_av", lambda device, dtype, parts, progress, checkpoint: report)
    return ["sanitize", "vulkan"]


COMMANDS = {"run": _samples, "bench sparse": _gemm, "bench attention": _attention, "bench peak": _peak,
            "fuzz": _fuzz, "sanitize vulkan": _gpu_av}


@pytest.mark.parametrize("scenario", list(SCENARIOS))
@pytest.mark.parametrize("name", list(COMMANDS))
def test_every_command_ends_alike(monkeypatch, command, name, scenario):
    outcomes, expected = SCENARIOS[scenario]
    code, out, err = command(*COMMANDS[name](monkeypatch, outcomes))
    errors = [line for line in err.splitlines() if line.startswith("vkcoop: error:")]
    assert code == expected, (name, scenario, code, err[-2000:])
    if expected == Exit.ENVIRONMENT:
        assert len(errors) == 1 and " could run here: " in errors[0] and REASON in errors[0], err
        assert "; " in errors[0].split(REASON, 1)[1], errors[0]   # <what>; <what to do>
    else:
        assert errors == [], err


def test_the_shortest_of_many_reasons_is_said_with_a_count():
    error = nothing_ran_error("sample", ["a long reason, with more words", "short", "short", ""], "do this")
    assert error.code == Exit.ENVIRONMENT
    assert error.line() == "no sample could run here: short (and 1 other reasons above); do this"
    assert nothing_ran_error("path", [], "x").line() == "no path could run here: no reason given; x"
    assert nothing_ran(["skip", "skipped"]) and nothing_ran([]) and not nothing_ran(["skip", "pass"])
    assert not nothing_ran(["error"])   # an error is something that ran and failed


def test_run_judges_a_partial_run_by_what_ran():
    from vkcoop.cli.device import run_exit_code
    from vkcoop.samples.case import SampleResult

    skip, passed, failed = (SampleResult("a", "skip", REASON), SampleResult("b", "pass"), SampleResult("c", "fail"))
    assert run_exit_code([skip, passed]) == Exit.OK and run_exit_code([failed, skip]) == Exit.FAILED
    with pytest.raises(CliError) as nothing:
        run_exit_code([skip, skip])
    assert nothing.value.code == Exit.ENVIRONMENT and REASON in nothing.value.line()


def test_peak_with_both_apis_left_out_is_a_usage_error(command):
    code, _, err = command("bench", "peak", "--no-vulkan", "--no-cuda")
    assert code == Exit.USAGE and err.count("\n") == 1 and "leave nothing to measure" in err


def test_peak_refuses_an_unknown_type_in_one_line_naming_the_cuda_only_ones(command):
    code, _, err = command("bench", "peak", "--no-vulkan", "--types", "fp16->fp32,fp17->fp32")
    assert code == Exit.USAGE and err.count("\n") == 1
    assert "--types 'fp17->fp32': choose from" in err and "tf32->fp32" in err and "u8->s32" in err


def test_peak_takes_the_types_only_cuda_runs():
    from vkcoop.bench import peak

    peak._check_inputs(["tf32->fp32", "e4m3->fp32", "e5m2->fp32", "u8->s32", "s8->s32"], None, ("read",), 1.0, 1,
                       1, None)     # no error: each is a row of CUDA's wgmma forms
    with pytest.raises(ValueError, match="--types 'u8->fp32'"):
        peak._check_inputs(["u8->s32", "u8->fp32"], None, ("read",), 1.0, 1, 1, None)


def test_an_attention_run_with_no_result_ran_nothing(monkeypatch, command):
    _attention(monkeypatch, [])
    code, _, err = command("bench", "attention")
    assert code == Exit.ENVIRONMENT and "no path could run here: no reason given" in err


def test_gpu_av_errors_are_failures_not_an_empty_run(monkeypatch, command):
    _gpu_av(monkeypatch, ["error", "skipped"])
    code, _, err = command("sanitize", "vulkan")
    assert code == Exit.FAILED and "could run here" not in err


# --- vkcoop demo ------------------------------------------------------------------------------------------------
def _caps(coopmat2: bool) -> dict:
    return {"name": "a Vulkan device", "driver_info": "test", "cooperative_matrix2": {"supported": coopmat2}}


@pytest.fixture
def demo_parts(monkeypatch):
    """The demo's steps stood in: shaders, the device's report, the portable port and the sample suite."""
    from vkcoop.cli import demo
    from vkcoop.samples.case import SampleResult

    parts = {"shaders_failed": 0, "caps": _caps(False), "mismatches": 0, "samples": ["pass"]}
    monkeypatch.setattr(demo, "_shader_step", lambda: parts["shaders_failed"])

    def device_reports(device):
        if isinstance(parts["caps"], Exception):
            raise parts["caps"]
        return [parts["caps"]]
    monkeypatch.setattr(demo, "device_reports", device_reports)
    monkeypatch.setattr(demo, "portable_demo", lambda device, validate: demo.DemoSummary(
        device="a Vulkan device", cases=10, mismatches=parts["mismatches"], seconds=1.0, cases_per_s=10.0,
        showcase=[], first_mismatch=None, validation_messages=[]))
    monkeypatch.setattr(demo, "run_samples", lambda chosen, device, validate: [
        SampleResult(f"s{i}", status, cases=1) for i, status in enumerate(parts["samples"])])
    return parts


def test_demo_without_coopmat2_passes_on_what_it_dispatched(command, demo_parts):
    code, out, err = command("demo")
    assert code == Exit.OK and "demo passed (step 3 skipped: see why above)" in out and err == ""
    assert "has no VK_NV_cooperative_matrix2" in out


def test_demo_on_a_coopmat2_device_runs_the_suite(command, demo_parts):
    demo_parts["caps"] = _caps(True)
    code, out, _ = command("demo")
    assert code == Exit.OK and out.rstrip().endswith("demo passed") and "1 passed" in out
    demo_parts["samples"] = ["pass", "fail"]
    assert command("demo")[0] == Exit.FAILED


def test_demo_fails_on_a_mismatch_and_on_a_shader(command, demo_parts):
    demo_parts["mismatches"] = 1
    code, out, _ = command("demo")
    assert code == Exit.FAILED and "demo failed (1 step(s))" in out
    demo_parts["mismatches"], demo_parts["shaders_failed"] = 0, 1
    assert command("demo")[0] == Exit.FAILED


def test_demo_without_a_vulkan_device_dispatched_nothing(command, demo_parts):
    from vkcoop import vk

    demo_parts["caps"] = vk.NoDeviceError("no Vulkan physical devices")
    code, out, err = command("demo")
    assert code == Exit.ENVIRONMENT and "demo passed" not in out
    assert err.count("\n") == 1 and "no Vulkan dispatch could run here" in err
    demo_parts["shaders_failed"] = 1   # a failure is said before an empty run
    assert command("demo")[0] == Exit.FAILED


# --- the documented codes ---------------------------------------------------------------------------------------
def _readme_codes() -> dict[int, str]:
    text = (REPO / "README.md").read_text()
    table = text[text.index("**Exit codes:**"):]
    table = table[:table.index("\n\n", table.index("| code |"))]
    return {int(m.group(1)): m.group(2) for m in re.finditer(r"^\| (\d+) \| (.+) \|$", table, re.MULTILINE)}


def test_the_readme_and_the_help_list_every_exit_code():
    documented = _readme_codes()
    helped = {int(m.group(1)) for m in re.finditer(r"^  (\d+)  ", EXIT_CODES_HELP, re.MULTILINE)}
    assert set(documented) == helped == {int(code) for code in Exit}
    assert "nothing could run" in documented[Exit.ENVIRONMENT] and "nothing could run" in EXIT_CODES_HELP
