"""``vkcoop bench attention`` without a GPU: FLOP counting, the case lists, the check-then-time loop and the table
with fake paths, the CLI hooks; and (marked gpu, cuda) a small real run."""
from __future__ import annotations

import argparse
import contextlib
import io
import json
from dataclasses import replace

import numpy as np
import pytest

from vkcoop.attention import AttentionConfig, AttentionShape, AttentionTile, reference_attention
from vkcoop.bench import attention as bench
from vkcoop.bench import attention_report, report
from vkcoop.cli import attention as command


def test_flops_are_four_bhsd_and_halved_for_causal():
    shape = AttentionShape(2, 16, 4, 1024, 4096, 128)
    assert shape.flops(False) == 4 * 2 * 16 * 1024 * 4096 * 128
    assert shape.flops(True) == shape.flops(False) / 2
    assert shape.kv_bytes(2) == 2 * 2 * 4 * 4096 * 128 * 2 and shape.group == 4


def test_the_default_cases_fill_the_gpu_with_the_same_tokens():
    cases = bench.make_cases(dtypes=("fp16", "bf16"))
    prefill = [c for c in cases if c.kind == "prefill"]
    decode = [c for c in cases if c.kind == "decode"]
    assert len(prefill) == 2 * 2 * 5 * 2 and len(decode) == 2 * 2 * 2 * 4
    for c in prefill:
        s = c.shape
        assert s.batch * s.seq_q == bench.PREFILL_TOKENS and s.seq_q == s.seq_kv
        assert s.q_heads * s.head_dim == bench.HIDDEN and s.q_heads == s.kv_heads
    assert {c.shape.seq_q for c in prefill} == {1024, 2048, 4096, 8192, 16384}
    assert {c.causal for c in prefill} == {False, True} and not any(c.causal for c in decode)
    # decode with GQA (4 q heads per kv head) and without
    assert {(c.shape.seq_q, c.shape.q_heads, c.shape.kv_heads) for c in decode} == {(1, 32, 8), (1, 32, 32)}
    assert {c.shape.seq_kv for c in decode} == {8192, 16384, 32768, 65536}
    assert prefill[1].label == "prefill fp16 b16 h32 q1024 kv1024 d64 causal"


@pytest.mark.parametrize("kwargs, message", [
    ({"kinds": ["train"]}, "--kinds 'train'"), ({"dtypes": ["fp8"]}, "--dtype 'fp8'"),
    ({"head_dims": [96]}, "--head-dims 96"), ({"seqs": [0]}, "--seqs must be >= 1"),
    ({"decode_heads": [(32, 5)]}, "--decode-heads 32/5: the q heads must be a multiple"),
    ({"decode_heads": [(32, 0)]}, "--decode-heads must be >= 1")])
def test_bad_case_options_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        bench.make_cases(**kwargs)


def test_unknown_paths_and_iterations_are_refused_before_any_gpu_work():
    with pytest.raises(ValueError, match="--paths 'torch-fast'"):
        bench.run_attention_bench(bench.AttentionBenchSettings(paths=["torch-fast"]))
    with pytest.raises(ValueError, match="--iters"):
        bench.run_attention_bench(bench.AttentionBenchSettings(iters=0))
    with pytest.raises(ValueError, match="--seqs must be >= 1"):        # the cases' checks, before any GPU work
        bench.run_attention_bench(bench.AttentionBenchSettings(seqs=[0]))


# --------------------------------------------------------------------------- fake paths
class FakePath:
    """Returns the reference (or something off by ``error``) and fixed times."""

    tile, identity, device_name = None, None, "Fake GPU H200"   # the Vulkan path's: no tuning (no identity)

    def __init__(self, name, ms, error=0.0, unsupported=None, series=()):
        self.name, self.ms, self.error, self.unsupported, self.timed = name, ms, error, unsupported, 0
        self.warmups, self.series = {}, list(series)   # warm-up seconds by case kind; series to time, in turn

    def default_config(self, case):
        return AttentionConfig(AttentionTile(128, 64, 64))

    def bind(self, case, inputs, config=None):
        if self.unsupported:
            raise bench.Unsupported(self.unsupported)
        q, k, v = inputs if isinstance(inputs, tuple) else inputs.arrays
        path = self

        class Bound:
            config = "fake"

            def rows(self, b, h, rows):
                kv = h // case.shape.group
                ref = reference_attention(q[b:b + 1, h:h + 1], k[b:b + 1, kv:kv + 1], v[b:b + 1, kv:kv + 1],
                                          causal=case.causal, rows=rows)[0][0, 0]
                return (ref + path.error).astype(q.dtype)

            def time(self, iters, warmup, warmup_seconds):
                path.timed += 1
                path.warmups.setdefault(case.kind, warmup_seconds)
                if path.series:
                    return [ms * 1e-3 for ms in path.series.pop(0)]
                return [path.ms * 1e-3] * iters

            def release(self):
                pass
        return Bound()

    def close(self):
        pass


class FakeTorchInputs:
    def __init__(self, inputs):
        self.arrays = inputs

    def close(self):
        pass


def _fake_bench(monkeypatch, console=None, progress=False, **options):
    paths = {"vk-coopmat2": FakePath("vk-coopmat2", 2.0), "torch-flash": FakePath("torch-flash", 1.0),
             "torch-efficient": FakePath("torch-efficient", 1.5, error=0.5),
             "torch-cudnn": FakePath("torch-cudnn", 0.5, unsupported="No available kernel")}

    class FakePaths:
        def __init__(self, wanted, dtypes, device, validate, tile, flush_l2=False):
            self.objects = {n: p for n, p in paths.items() if n in wanted}
            for path in self.objects.values():
                path.flush_l2 = flush_l2
            self.skipped = {"torch-math": "not today"}
            self.vulkan_name, self.torch_name = "Fake GPU H200", "fake torch"

        def close(self):
            pass

    monkeypatch.setattr(bench, "_Paths", FakePaths)
    monkeypatch.setattr(bench, "TorchInputs", FakeTorchInputs)
    settings = bench.AttentionBenchSettings(kinds=("prefill", "decode"), head_dims=(64,), seqs=(64,),
                                            decode_seqs=(256,), causal=(True,), tokens=128, iters=3, warmup=0,
                                            ceiling_tflops=100.0, decode_heads=((32, 8),), **options)
    outcome = bench.run_attention_bench(settings, console=console, progress=progress)
    return outcome, paths


@pytest.fixture
def fake_run(monkeypatch):
    return _fake_bench(monkeypatch)


def test_a_piped_run_says_each_case_with_every_path_s_outcome(monkeypatch):
    import io

    from rich.console import Console
    piped = io.StringIO()
    outcome, _ = _fake_bench(monkeypatch, progress="lines", console=Console(file=piped, width=200))
    lines = [line for line in piped.getvalue().splitlines() if line.startswith("[")]
    labels = list(dict.fromkeys(r.case for r in outcome.results))
    assert len(lines) == len(labels) == 2, piped.getvalue()
    for index, (line, label) in enumerate(zip(lines, labels), 1):
        assert line.startswith(f"[{index}/2 ") and f"] {label}: vk-coopmat2 ok " in line, line
        assert "torch-cudnn skipped" in line and "torch-efficient failed" in line, line
    assert " TFLOP/s" in lines[0] and " GB/s" in lines[1]


def test_the_warm_up_time_is_the_caller_s_and_recorded(monkeypatch):
    outcome, paths = _fake_bench(monkeypatch, warmup_seconds=0.25)
    assert paths["vk-coopmat2"].warmups == paths["torch-flash"].warmups == {"prefill": 0.25, "decode": 0.25}
    assert outcome.settings.warmup_by_kind == {"prefill": 0.25, "decode": 0.25}
    assert outcome.to_dict()["settings"]["warmup_by_kind"] == {"prefill": 0.25, "decode": 0.25}
    for bad in (-1.0, float("inf"), float("nan")):
        with pytest.raises(ValueError, match="--warmup-seconds"):
            bench.run_attention_bench(bench.AttentionBenchSettings(warmup_seconds=bad))


def test_the_l2_flush_reaches_every_path_and_the_run_says_so(monkeypatch):
    from rich.console import Console
    outcome, paths = _fake_bench(monkeypatch, flush_l2=True)
    assert all(p.flush_l2 for p in paths.values()) and outcome.settings.flush_l2 is True
    text = io.StringIO()
    attention_report.print_table(outcome, Console(file=text, width=200))
    assert "--flush-l2: 256 MiB read before every timed run" in text.getvalue()
    outcome, paths = _fake_bench(monkeypatch)
    assert not any(p.flush_l2 for p in paths.values()) and outcome.settings.flush_l2 is False


def test_the_bound_paths_time_with_the_flush_they_were_given(monkeypatch):
    """The Vulkan runner gets the path's L2Flush (None without --flush-l2); torch's time_cuda gets flush_l2."""
    from vkcoop.bench import attention_paths
    from vkcoop.cuda import timing
    seen = []

    class Runner:
        def time(self, iters, warmup, flush=None, warmup_seconds=0.0):
            seen.append(("vulkan", flush))
            return [1e-3] * iters
    flush = object()
    assert attention_paths._BoundVulkan(Runner(), "label", flush).time(2, 0, 0.0) == [1e-3] * 2
    attention_paths._BoundVulkan(Runner(), "label").time(1, 0, 0.0)

    def fake_time_cuda(fn, *, warmup, iters, warmup_seconds, flush_l2):
        seen.append(("torch", flush_l2))
        return timing.Timing(1.0, 1.0, 1.0, iters, flush_l2, times_ms=(1.0,) * iters)
    monkeypatch.setattr(timing, "time_cuda", fake_time_cuda)
    for flushed in (True, False):
        bound = attention_paths._BoundTorch(lambda: None, None, contextlib.nullcontext, flushed)
        assert bound.time(3, 0, 0.0) == [1e-3] * 3
    assert seen == [("vulkan", flush), ("vulkan", None), ("torch", True), ("torch", False)]


def test_each_path_is_checked_then_timed_and_compared_to_the_best_torch_backend(fake_run):
    outcome, paths = fake_run
    by = {(r.case, r.path): r for r in outcome.results}
    case = "prefill fp16 b2 h32 q64 kv64 d64 causal"
    assert by[(case, "vk-coopmat2")].status == "ok" and by[(case, "vk-coopmat2")].median_ms == 2.0
    # the spread and the series behind it, as bench sparse records them (bench compare reads the spread)
    vk = by[(case, "vk-coopmat2")]
    assert vk.iterations == 3 and vk.times_ms == pytest.approx([2.0] * 3) and vk.p10_ms == vk.p90_ms == 2.0
    flops = AttentionShape(2, 32, 32, 64, 64, 64).flops(True)
    assert by[(case, "vk-coopmat2")].tflops == pytest.approx(flops / 2e-3 / 1e12)
    assert by[(case, "vk-coopmat2")].ratio_best_torch == pytest.approx(0.5)   # flash (1 ms) is the best torch
    assert by[(case, "vk-coopmat2")].ratio_ceiling == pytest.approx(flops / 2e-3 / 1e12 / 100)
    wrong = by[(case, "torch-efficient")]
    assert wrong.status == "failed" and "outside the tolerance" in wrong.reason and wrong.tflops is None
    assert paths["torch-efficient"].timed == 0                     # a failing path is never timed
    # prefill warms up 3 s (experiment 21), decode 1 s (experiment 49); the JSON says how long
    per_kind = {"prefill": bench.WARMUP_SECONDS, "decode": bench.DECODE_WARMUP_SECONDS}
    assert paths["vk-coopmat2"].warmups == paths["torch-flash"].warmups == per_kind
    assert bench.WARMUP_SECONDS >= 3 and 0 < bench.DECODE_WARMUP_SECONDS < bench.WARMUP_SECONDS
    assert outcome.settings.warmup_by_kind == per_kind and outcome.settings.warmup_seconds is None
    assert outcome.settings.timing.startswith("GPU work only")                 # and what it measured
    assert by[(case, "torch-cudnn")].status == "skipped" and by[(case, "torch-cudnn")].reason == "No available kernel"
    assert by[(case, "torch-math")].reason == "not today"
    decode = by[("decode fp16 b1 h32/8 q1 kv256 d64", "vk-coopmat2")]
    assert decode.gbs == pytest.approx(2 * 8 * 256 * 64 * 2 / 2e-3 / 1e9)
    assert decode.roofline == pytest.approx(decode.gbs / 4800.0)   # H200 by name
    assert len(outcome.failed) == 2 and outcome.environment["ratios_over"]["bandwidth_gbs"] == 4800.0
    json.dumps(outcome.to_dict(), default=str)


def test_ceilings_measured_in_the_same_process_replace_the_spec_sheet_but_not_given_figures(fake_run, monkeypatch):
    measured = {"vulkan": {"mma": {"coopmat2-workgroup": {"fp16->fp32": {"tflops": 600.0}}},
                           "bandwidth": {"read": {"gb_per_s": 3000.0}}}}
    monkeypatch.setattr(bench, "measured_ceilings", lambda device=None: (measured, 600.0, 3000.0))
    kv_bytes = 2 * 8 * 256 * 64 * 2
    asked = []
    monkeypatch.setattr(bench, "measured_read_floors",
                        lambda cases, device=None, flush_l2=False: asked.append(([c.label for c in cases], flush_l2))
                        or {kv_bytes: 1.5})
    settings = bench.AttentionBenchSettings(kinds=("decode",), head_dims=(64,), decode_seqs=(256,), iters=3, warmup=0,
                                            ceilings=True, decode_heads=((32, 8),))
    outcome = bench.run_attention_bench(settings, progress=False)
    decode = next(r for r in outcome.results if r.path == "vk-coopmat2")
    assert decode.roofline == pytest.approx(decode.gbs / 3000.0) and decode.ratio_ceiling == pytest.approx(
        decode.tflops / 600.0)
    assert asked == [(["decode fp16 b1 h32/8 q1 kv256 d64"], False)]
    assert decode.read_floor == pytest.approx(1.5e-3 / decode.median_ms)     # the floor's time over ours
    assert outcome.environment["read_floor_us"] == {str(kv_bytes): 1.5}
    assert outcome.environment["ratios_over"]["bandwidth_source"] == "measured read bandwidth"
    assert outcome.environment["ceilings"] is measured
    def broken(device=None):
        raise RuntimeError("no peak shader here\nsecond line")
    monkeypatch.setattr(bench, "measured_ceilings", broken)
    def no_floor(cases, device=None, flush_l2=False):
        raise ValueError("a read floor of 9 bytes passes the range\nmore")
    monkeypatch.setattr(bench, "measured_read_floors", no_floor)
    failed = bench.run_attention_bench(settings, progress=False)   # the cases stand; the spec sheet's bandwidth
    assert failed.environment["ceilings_error"] == "RuntimeError: no peak shader here"
    assert failed.environment["read_floor_error"] == "ValueError: a read floor of 9 bytes passes the range"
    assert all(r.read_floor is None for r in failed.results)
    assert failed.environment["ratios_over"] == {"ceiling_tflops": None, "bandwidth_gbs": 4800.0,
                                                 "bandwidth_source": "spec sheet"}
    assert all(r.status != "error" for r in failed.results if r.path == "vk-coopmat2")
    given = bench.run_attention_bench(replace(settings, bandwidth_gbs=2500.0, ceiling_tflops=100.0), progress=False)
    decode = next(r for r in given.results if r.path == "vk-coopmat2")
    assert decode.roofline == pytest.approx(decode.gbs / 2500.0)
    assert given.environment["ratios_over"] == {"ceiling_tflops": 100.0, "bandwidth_gbs": 2500.0,
                                                "bandwidth_source": "given"}


def test_the_table_numbers_skip_reasons_once_and_the_plot_is_written(fake_run, tmp_path):
    from rich.console import Console
    outcome, _ = fake_run
    rows, notes = attention_report.table_rows(outcome)
    assert notes == {"No available kernel": 1, "not today": 2}
    assert rows[0][:6] == ("prefill fp16 b2 h32 q64 kv64 d64 causal", "vk-coopmat2", "ok", "2.000",
                           rows[0][4], "1") and rows[1][0] == ""
    text = io.StringIO()
    attention_report.print_table(outcome, Console(file=text, width=200))
    assert "note 2: skipped because not today" in text.getvalue() and "2 path(s) failed" in text.getvalue()
    assert "x bandwidth: over 4,800 GB/s (spec sheet)" in text.getvalue()
    assert "x ceiling: over 100.0 TFLOP/s" in text.getvalue() and "could not be measured" not in text.getvalue()
    assert "inspect --attention KIND/DTYPE/HEAD_DIM/SEQ[c|n][bBATCH]/CONFIG" in text.getvalue()
    assert "x read floor:" not in text.getvalue()                  # no floors measured, no legend for them
    assert "timed twice" not in text.getvalue()                    # nothing was unsteady
    outcome.environment["ceilings_error"] = "RuntimeError: no peak shader here"
    outcome.environment["read_floor_us"] = {"4": 1.0}
    outcome.results[0].read_floor = 0.625
    text = io.StringIO()
    attention_report.print_table(outcome, Console(file=text, width=220))
    assert "the ceilings could not be measured: RuntimeError: no peak shader here" in text.getvalue()
    assert "x read floor: one dispatch of a plain read" in text.getvalue()
    assert attention_report.table_rows(outcome)[0][0][9] == "0.62"   # the column after x bandwidth
    outcome.results[0].unsteady_ms = 9.5                            # a series timed twice is marked, and said why
    assert attention_report.table_rows(outcome)[0][0][3] == "2.000 *"
    text = io.StringIO()
    attention_report.print_table(outcome, Console(file=text, width=220))
    assert "* timed twice: the first series was unsteady" in text.getvalue()
    assert attention_report.plot(outcome, tmp_path / "a" / "plot.png").stat().st_size > 1000
    assert report.write_json(outcome, tmp_path / "r.json").exists()


def test_times_keep_four_significant_digits_below_a_millisecond():
    assert [attention_report.time_ms(v) for v in (2.0, 12.3456, 0.3533, 0.0116, 0.00000123, None)] == \
        ["2.000", "12.346", "0.3533", "0.01160", "0.000001", "-"]


def test_bandwidth_comes_from_the_gpu_name():
    assert bench.bandwidth_for("NVIDIA H100 PCIe") == 2000.0 and bench.bandwidth_for("NVIDIA H100 80GB HBM3") == 3350.0
    assert bench.bandwidth_for("NVIDIA H200") == 4800.0 and bench.bandwidth_for("llvmpipe") is None


# --------------------------------------------------------------------------- the CLI hooks
def _parse(*argv):
    parser = argparse.ArgumentParser()
    command.add_arguments(parser)
    return parser.parse_args(list(argv))


def test_the_arguments_parse_lists_and_refuse_bad_values(capsys):
    args = _parse("--kinds", "decode", "--head-dims", "128", "--decode-seqs", "4096,8192", "--tile", "128:64x32")
    assert args.kinds == ["decode"] and args.head_dims == [128] and args.decode_seqs == [4096, 8192]
    assert args.tile.label() == "128:64x32" and args.paths is None and args.causal == "both"
    assert not args.tune and not args.retune and args.tune_budget == bench.DEFAULT_TUNE_BUDGET
    assert args.decode_heads == [(32, 8), (32, 32)]
    assert _parse("--decode-heads", "16/16, 64/8").decode_heads == [(16, 16), (64, 8)]
    tuning = _parse("--tune", "--retune", "--tune-budget", "90")
    assert tuning.tune and tuning.retune and tuning.tune_budget == 90.0
    assert args.warmup_seconds is None and _parse("--warmup-seconds", "0").warmup_seconds == 0.0   # None: per kind
    assert not args.flush_l2 and _parse("--flush-l2").flush_l2
    for bad in (["--head-dims", "96"], ["--seqs", "0"], ["--paths", "torch-fast"], ["--tile", "64x64"],
                ["--tune-budget", "0"], ["--tune-budget", "soon"], ["--decode-heads", "32/5"],
                ["--decode-heads", "32"], ["--decode-heads", ","], ["--warmup-seconds", "-1"],
                ["--warmup-seconds", "inf"]):
        with pytest.raises(SystemExit) as exited:
            _parse(*bad)
        assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "must be a positive number of seconds" in err and "must be 0 or more seconds" in err
    assert "must be a finite number of seconds" in err


def test_run_reports_an_environment_error_when_nothing_can_run(monkeypatch, tmp_path, capsys):
    class NothingRuns:
        def __init__(self, wanted, *rest):
            self.objects, self.skipped = {}, {name: "no GPU here" for name in wanted}
            self.vulkan_name = self.torch_name = None

        def close(self):
            pass

    monkeypatch.setattr(bench, "_Paths", NothingRuns)
    args = _parse("--kinds", "decode", "--decode-seqs", "64", "--json", str(tmp_path / "out" / "r.json"))
    assert command.run(args) == bench.EXIT_ENVIRONMENT
    assert "no path could run here: no GPU here" in capsys.readouterr().err
    assert json.loads((tmp_path / "out" / "r.json").read_text())["results"][0]["status"] == "skipped"


def test_run_passes_the_flush_to_the_paths_and_records_it(monkeypatch, tmp_path):
    made = []

    class NothingRuns:
        def __init__(self, wanted, *rest):
            made.append(rest)
            self.objects, self.skipped = {}, {name: "no GPU here" for name in wanted}
            self.vulkan_name = self.torch_name = None

        def close(self):
            pass

    monkeypatch.setattr(bench, "_Paths", NothingRuns)
    args = _parse("--kinds", "decode", "--decode-seqs", "64", "--flush-l2", "--json", str(tmp_path / "r.json"))
    assert command.run(args) == bench.EXIT_ENVIRONMENT
    assert made[-1][-1] is True and json.loads((tmp_path / "r.json").read_text())["settings"]["flush_l2"] is True


# --------------------------------------------------------------------------- on the GPU
@pytest.mark.gpu
@pytest.mark.cuda
def test_a_small_real_run_checks_and_times_every_path_that_can_run():
    ok, why = bench.torch_status()
    if not ok:
        pytest.skip(why)
    settings = bench.AttentionBenchSettings(head_dims=(128,), seqs=(1024,), decode_seqs=(8192,), iters=3, warmup=1)
    outcome = bench.run_attention_bench(settings, progress=False)
    assert not outcome.failed, [(r.case, r.path, r.reason) for r in outcome.failed]
    assert any(r.path == "vk-coopmat2" and r.tflops for r in outcome.results)
    assert any(r.path.startswith("torch-") and r.tflops for r in outcome.results)


def test_a_disturbed_series_is_timed_again_and_the_steadier_kept():
    case = bench.make_cases(["decode"], head_dims=[64], decode_seqs=[256], decode_heads=((4, 1),))[0]
    inputs = bench.make_inputs(case)
    planes, tolerance = bench.check_planes(case, inputs)
    disturbed = [1.0, 0.6, 0.4, 0.3, 0.2, 0.1, 0.1, 0.1, 0.1, 0.1]   # ms, decaying as torch-flash's first series did on the H100
    steady = [0.1, 0.1, 0.11, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.12]

    def measured(*series):
        path = FakePath("torch-flash", 0.1, series=series)
        return path, bench.measure(path, case, inputs, planes, tolerance, iters=10, warmup=0, warmup_seconds=0.0)

    path, result = measured(disturbed, steady)
    assert path.timed == 2 and result.times_ms == pytest.approx(steady) and result.median_ms == pytest.approx(0.1)
    assert result.unsteady_ms == pytest.approx(0.15)                 # the dropped series' median, on record
    path, result = measured(steady, disturbed)
    assert path.timed == 1 and result.unsteady_ms is None            # a steady series is timed once
    wider = [3.0, 2.0, 1.0, 0.5, 0.2, 0.1, 0.1, 0.1, 0.1, 0.1]
    path, result = measured(wider, disturbed)
    assert path.timed == 2 and result.times_ms == pytest.approx(disturbed)   # both disturbed: the narrower
