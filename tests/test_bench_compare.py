"""Statistics of a figure (vkcoop.bench.stats), comparing two runs (vkcoop.bench.compare, `vkcoop bench
compare`), the x-baseline plot and the table: no GPU."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from vkcoop import cli
from vkcoop.bench import compare, report
from vkcoop.bench.measure import path_result
from vkcoop.bench.sparse import BenchResult, add_ratios
from vkcoop.bench.stats import percentile, relative_noise, spread_ms
from vkcoop.gemm.path import GemmProblem

FIXTURES = Path(__file__).resolve().parent / "fixtures"
#: An H200 run in the first format (schema 1): median and min only, no percentiles.
H200_RUN = FIXTURES / "bench-schema1-h200.json"


# --- statistics -------------------------------------------------------------------------------------------------
def test_percentiles_match_numpy_linear_interpolation():
    rng = np.random.default_rng(3)
    for n in (1, 2, 5, 20, 101):
        values = rng.random(n)
        for q in (0, 10, 50, 90, 100):
            assert percentile(values, q) == pytest.approx(float(np.percentile(values, q)))
    with pytest.raises(ValueError):
        percentile([], 50)
    with pytest.raises(ValueError):
        percentile([1.0], 101)


def test_spread_of_timed_iterations():
    times = [1e-3, 2e-3, 3e-3, 4e-3, 100e-3]    # one outlier: the median does not move
    spread = spread_ms(times)
    assert spread["median_ms"] == pytest.approx(3.0) and spread["min_ms"] == pytest.approx(1.0)
    assert spread["max_ms"] == pytest.approx(100.0) and spread["iterations"] == 5
    assert spread["p10_ms"] == pytest.approx(1.4) and spread["p90_ms"] == pytest.approx(61.6)
    assert relative_noise(spread) == pytest.approx((61.6 - 1.4) / 2 / 3.0)
    assert relative_noise({"median_ms": 2.0, "min_ms": 1.5}) == pytest.approx(0.25)   # older runs: min only
    assert relative_noise({"median_ms": None}) is None


# --- comparison arithmetic --------------------------------------------------------------------------------------
def _row(path, tflops, *, n=32, status="ok", p10=None, p90=None, median=1.0, dtype="fp16"):
    return {"path": path, "case": f"{dtype} llm 4096x{n}x4096", "dtype": dtype, "m": 4096, "n": n, "k": 4096,
            "status": status, "tflops": tflops if status == "ok" else None,
            "median_ms": median if status == "ok" else None, "p10_ms": p10, "p90_ms": p90,
            "min_ms": median if status == "ok" else None}


def _run(*rows, device="GPU"):
    return {"environment": {"nvidia_smi": {"name": device}}, "results": list(rows)}


def test_ratio_noise_band_and_verdicts():
    a = _run(_row("x", 100.0, p10=0.99, p90=1.01), _row("y", 100.0, p10=0.9, p90=1.1), _row("z", 100.0),
             _row("w", 100.0), _row("v", 100.0), _row("only-a", 10.0), _row("skipped", None, status="skipped"))
    b = _run(_row("x", 90.0, p10=0.99, p90=1.01), _row("y", 90.0, p10=0.9, p90=1.1), _row("z", 103.0),
             _row("w", None, status="failed"), _row("v", None, status="skipped"), _row("skipped", 5.0),
             _row("only-b", 1.0))
    rows = {r.path: r for r in compare.compare_runs(a, b)}
    x, y, z = rows["x"], rows["y"], rows["z"]
    assert x.ratio == pytest.approx(0.9) and x.band == pytest.approx(0.02) and x.verdict == "regression"
    # +-10 % spread on both sides: a 10 % drop is within the noise
    assert y.band == pytest.approx(0.2) and y.verdict == "within noise"
    # no spread recorded and min == median: the minimum band applies
    assert z.band == compare.MIN_NOISE and z.ratio == pytest.approx(1.03) and z.verdict == "faster"
    assert rows["w"].verdict == "lost" and rows["w"].regressed
    assert rows["v"].verdict == "not comparable" and not rows["v"].regressed
    assert rows["skipped"].verdict == "not comparable"
    assert rows["only-a"].verdict == "only in A" and rows["only-b"].verdict == "only in B"
    assert sum(r.regressed for r in rows.values()) == 2
    means = compare.geometric_means(list(rows.values()))
    assert means["x"] == pytest.approx(0.9) and "w" not in means
    assert compare.compare_runs(a, b, min_noise=0.15)[0].verdict == "within noise"


def test_cases_match_by_shape_not_by_label():
    a = _run(dict(_row("p", 100.0), case="fp16 llm 4096x32x4096"))
    b = _run(dict(_row("p", 200.0), case="fp16 narrow-user 4096x32x4096"))
    (row,) = compare.compare_runs(a, b)
    assert row.ratio == pytest.approx(2.0) and row.verdict == "faster"


def test_load_run_rejects_what_is_not_a_bench_json(tmp_path):
    (tmp_path / "bad.json").write_text("{oops")
    (tmp_path / "other.json").write_text('{"cases": []}')
    (tmp_path / "rows.json").write_text('{"results": [{"path": "x"}]}')
    for name, message in (("missing.json", "cannot read"), ("bad.json", "not JSON"),
                          ("other.json", "no results list"), ("rows.json", "result 1 lacks")):
        with pytest.raises(ValueError, match=message) as error:
            compare.load_run(tmp_path / name)
        assert str(tmp_path / name) in str(error.value) and "\n" not in str(error.value)


# --- the command ------------------------------------------------------------------------------------------------
def _write(path: Path, run: dict) -> Path:
    path.write_text(json.dumps(run))
    return path


def test_bench_compare_exits_1_on_a_regression_and_0_without(tmp_path, capsys):
    a = _write(tmp_path / "a.json", _run(_row("cuBLAS", 100.0), _row("vk-coopmat2-dense", 50.0)))
    same = _write(tmp_path / "same.json", _run(_row("cuBLAS", 101.0), _row("vk-coopmat2-dense", 50.5)))
    worse = _write(tmp_path / "worse.json", _run(_row("cuBLAS", 100.0), _row("vk-coopmat2-dense", 40.0)))
    assert cli.main(["bench", "compare", str(a), str(same)]) == 0
    out = capsys.readouterr().out
    assert "1.010" in out and "within noise" in out and "no regression" in out
    out_json = tmp_path / "cmp" / "compare.json"
    assert cli.main(["bench", "compare", str(a), str(worse), "--json", str(out_json)]) == 1
    captured = capsys.readouterr()
    assert "regression" in captured.out and "0.800" in captured.out
    assert "wrote" in captured.err and "compare.json" in captured.err
    data = json.loads(out_json.read_text())
    assert data["regressions"] == 1 and len(data["cases"]) == 2


def test_bench_compare_unreadable_file_is_one_line_exit_2(tmp_path, capsys):
    a = _write(tmp_path / "a.json", _run(_row("cuBLAS", 100.0)))
    assert cli.main(["bench", "compare", str(a), str(tmp_path / "nope.json")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "nope.json" in err[0] and err[0].startswith("vkcoop: error:")
    assert cli.main(["bench", "compare", str(a), str(a), "--min-noise", "2"]) == 2


def test_the_recorded_h200_run_compares_with_itself():
    run = compare.load_run(H200_RUN)
    rows = compare.compare_runs(run, run)
    assert rows and all(r.verdict == "within noise" and r.ratio == pytest.approx(1.0) for r in rows)


# --- attention runs ---------------------------------------------------------------------------------------------


def _attention_row(path, tflops, case="decode fp16 b1 h32 q1 kv8192 d128", status="ok", median=1.0):
    return {"path": path, "case": case, "kind": case.split()[0], "dtype": case.split()[1], "causal": False,
            "shape": {"batch": 1, "q_heads": 32, "kv_heads": 32, "seq_q": 1, "seq_kv": 8192, "head_dim": 128},
            "status": status, "tflops": tflops if status == "ok" else None,
            "median_ms": median if status == "ok" else None, "min_ms": median if status == "ok" else None}


def test_attention_runs_match_by_path_and_case(tmp_path, capsys):
    prefill = "prefill bf16 b4 h16 q4096 kv4096 d128 causal"
    a = _run(_attention_row("vk-coopmat2", 2.0), _attention_row("torch-cudnn", 2.5),
             _attention_row("vk-coopmat2", 200.0, prefill))
    b = _run(_attention_row("vk-coopmat2", 2.6), _attention_row("torch-cudnn", 2.5),
             _attention_row("vk-coopmat2", 150.0, prefill), _attention_row("torch-flash", 2.2))
    rows = {(r.path, r.case): r for r in compare.compare_runs(a, b)}
    decode = rows[("vk-coopmat2", "decode fp16 b1 h32 q1 kv8192 d128")]
    assert decode.ratio == pytest.approx(1.3) and decode.verdict == "faster" and decode.m is None
    assert rows[("torch-cudnn", "decode fp16 b1 h32 q1 kv8192 d128")].verdict == "within noise"
    assert rows[("vk-coopmat2", prefill)].verdict == "regression" and rows[("vk-coopmat2", prefill)].dtype == "bf16"
    assert rows[("torch-flash", "decode fp16 b1 h32 q1 kv8192 d128")].verdict == "only in B"
    assert cli.main(["bench", "compare", str(_write(tmp_path / "a.json", a)), str(_write(tmp_path / "b.json", b))]) == 1
    out = capsys.readouterr().out
    assert prefill in out and "1.300" in out


def test_a_gemm_run_and_an_attention_run_do_not_compare(tmp_path, capsys):
    gemm = _write(tmp_path / "gemm.json", _run(_row("cuBLAS", 100.0)))
    attention = _write(tmp_path / "attention.json", _run(_attention_row("vk-coopmat2", 2.0)))
    assert cli.main(["bench", "compare", str(gemm), str(attention)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "bench sparse run" in err[0] and "bench attention run" in err[0]
    mixed = _write(tmp_path / "mixed.json", _run(_row("cuBLAS", 100.0), _attention_row("vk-coopmat2", 2.0)))
    with pytest.raises(ValueError, match="mixes bench sparse and bench attention"):
        compare.load_run(mixed)


def test_recorded_attention_runs_show_the_one_wave_key_split():
    """Decode without GQA with 17 key slices a head against 16 (one wave): docs/attention.md, experiment 46."""
    before, after = compare.load_run(FIXTURES / "attention-decode-17-slices.json"), compare.load_run(
        FIXTURES / "attention-decode-one-wave.json")
    rows = {(r.path, r.case): r for r in compare.compare_runs(before, after)}
    case = ("vk-coopmat2", "decode fp16 b1 h32 q1 kv65536 d128")
    tflops = [next(r["tflops"] for r in run["results"] if (r["path"], r["case"]) == case) for run in (before, after)]
    assert rows[case].ratio == pytest.approx(tflops[1] / tflops[0]) and rows[case].ratio > 1.2
    assert rows[case].verdict == "faster"
    assert rows[("vk-coopmat2", "prefill fp16 b4 h32 q4096 kv4096 d64")].verdict == "only in A"


# --- table and plot ---------------------------------------------------------------------------------------------
def _outcome():
    results = []
    for problem in (GemmProblem("fp16", "square", 4096, 4096, 4096), GemmProblem("fp16", "llm", 4096, 1, 4096),
                    GemmProblem("fp16", "mlp", 5120, 13824, 5120), GemmProblem("bf16", "qkv", 4096, 12288, 4096)):
        for path, tflops in (("cuBLAS", 800.0), ("cuSPARSELt", 1200.0), ("vk-coopmat2-dense", 30.0),
                             ("cuda-mma.sp", None)):
            r = path_result(path, problem, "ok" if tflops else "skipped", "" if tflops else "N=1 is not a multiple")
            if tflops:
                r.tflops, r.median_ms, r.p10_ms, r.p90_ms, r.config = tflops, 1.0, 0.95, 1.1, "c"
                r.config_source = "search"
            results.append(r)
    add_ratios(results, "cuSPARSELt")
    return BenchResult(results, {"nvidia_smi": {"name": "Fake GPU"}, "tuning": {"messages": ["m1"]}},
                       {"baseline": "cuSPARSELt"})


def test_ratios_over_a_chosen_baseline():
    outcome = _outcome()
    dense = [r for r in outcome.results if r.path == "vk-coopmat2-dense"][0]
    assert dense.ratio_baseline == pytest.approx(30 / 1200) and dense.ratio_cublas == pytest.approx(30 / 800)


def test_plot_has_one_log_panel_per_shape_class(tmp_path, monkeypatch):
    import matplotlib.pyplot as plt

    figures = []
    monkeypatch.setattr(plt, "close", lambda fig: figures.append(fig))
    written = report.plot(_outcome(), tmp_path / "plots" / "bench.png")
    assert written.exists() and written.stat().st_size > 1000
    axes = figures[0].axes
    assert [ax.get_yscale() for ax in axes] == ["log"] * 4
    assert [ax.get_title().split(" on ")[0] for ax in axes] == ["square", "llm", "mlp", "user shapes"]
    assert "x cuSPARSELt" in axes[0].get_ylabel()


def test_table_shows_spread_source_and_skip_notes():
    from rich.console import Console

    console = Console(width=220, record=True)
    report.print_table(_outcome(), console)
    text = console.export_text()
    assert "p10-p90" in text and "±7.5%" in text and "[search]" in text and "x cuSPARSELt" in text
    assert "note 1: skipped because N=1" in text and "m1" in text


def test_a_run_recorded_before_the_percentiles_still_plots(tmp_path):
    from vkcoop.bench.measure import PathResult

    data = json.loads(H200_RUN.read_text())
    outcome = BenchResult([PathResult(**row) for row in data["results"]], data["environment"], data["settings"])
    assert report.plot(outcome, tmp_path / "h200.png").stat().st_size > 1000


def test_what_differs_between_the_runs_is_said_under_the_table_and_in_the_json(tmp_path, capsys):
    a_run = _run(_row("vk-coopmat2-dense", 50.0))
    b_run = _run(_row("vk-coopmat2-dense", 50.5))
    a_run["environment"].update(buffer_robustness="default", torch="2.11.0")
    a_run["environment"]["nvidia_smi"]["driver_version"] = "580.159.04"
    b_run["environment"].update(buffer_robustness="disabled", torch="2.11.0")   # torch the same: not said
    b_run["environment"]["nvidia_smi"]["driver_version"] = "580.160.01"
    assert compare.environment_differences(a_run, b_run) == [
        "driver: 580.159.04 -> 580.160.01", "buffer robustness: default -> disabled"]
    assert compare.environment_differences(a_run, _run(_row("vk-coopmat2-dense", 50.0))) == []   # not recorded in B
    a, b, out_json = _write(tmp_path / "a.json", a_run), _write(tmp_path / "b.json", b_run), tmp_path / "c.json"
    assert cli.main(["bench", "compare", str(a), str(b), "--json", str(out_json)]) == 0
    out = capsys.readouterr().out
    assert "the runs differ in driver: 580.159.04 -> 580.160.01" in out and "buffer robustness: default" in out
    assert json.loads(out_json.read_text())["environment_differences"][1] == "buffer robustness: default -> disabled"
    assert cli.main(["bench", "compare", str(a), str(a)]) == 0
    assert "the runs differ" not in capsys.readouterr().out


# --- runs on two GPUs -------------------------------------------------------------------------------------------
# The runs below are written by the benches' own writers (report.environment, path_result / result_for, set_times,
# report.write_json); only the GPU's nvidia-smi record is stood in, since that is what the comparison reads.
H100, H200 = "NVIDIA H100 80GB HBM3", "NVIDIA H200"
GEMM_PROBLEMS = (GemmProblem("fp16", "square", 8192, 8192, 8192), GemmProblem("fp16", "llm", 8192, 32, 8192))


def _environment(monkeypatch, gpu: str | None) -> dict:
    monkeypatch.setattr(report, "nvidia_smi", lambda: {} if gpu is None else {"name": gpu,
                                                                               "driver_version": "580.159.04"})
    return report.environment(gpu, None)


def _timed(result, problem_flops: float, milliseconds: float):
    """``result`` timed at about ``milliseconds`` per run (a 1 % spread), its TFLOP/s as the benches set them."""
    result.set_times([milliseconds * 1e-3 * f for f in (0.99, 1.0, 1.0, 1.0, 1.01)])
    result.tflops = problem_flops / (result.median_ms * 1e-3) / 1e12
    return result


def _written_gemm_run(monkeypatch, path: Path, gpu: str | None, milliseconds: dict) -> Path:
    """A `bench sparse --json` file: {path name: ms per run, or a status ("failed", "skipped")} on each problem."""
    results = []
    for problem in GEMM_PROBLEMS:
        for name, figure in milliseconds.items():
            if isinstance(figure, str):
                results.append(path_result(name, problem, figure, f"{figure} here"))
            else:
                results.append(_timed(path_result(name, problem, "ok"), problem.flops, figure * problem.m / 8192))
    outcome = BenchResult(results, _environment(monkeypatch, gpu), {"baseline": "cuBLAS"})
    return report.write_json(outcome, path)


def _written_attention_run(monkeypatch, path: Path, gpu: str, milliseconds: float) -> Path:
    from vkcoop.bench import attention as attention_bench

    cases = attention_bench.make_cases(kinds=("decode",), head_dims=(128,), decode_seqs=(8192,))
    results = [_timed(attention_bench.result_for("vk-coopmat2", case, "ok"), case.shape.flops(case.causal),
                      milliseconds) for case in cases]
    return report.write_json(BenchResult(results, _environment(monkeypatch, gpu), {}), path)


def _compare(tmp_path, a: Path, b: Path, capsys) -> tuple[int, str, dict]:
    out_json = tmp_path / f"{a.stem}-{b.stem}.json"
    code = cli.main(["bench", "compare", str(a), str(b), "--json", str(out_json)])
    return code, capsys.readouterr().out, json.loads(out_json.read_text())


def test_a_slower_run_on_the_same_gpu_is_a_regression(tmp_path, monkeypatch, capsys):
    a = _written_gemm_run(monkeypatch, tmp_path / "a.json", H100, {"cuBLAS": 1.0, "vk-coopmat2-dense": 2.0})
    b = _written_gemm_run(monkeypatch, tmp_path / "b.json", H100, {"cuBLAS": 1.0, "vk-coopmat2-dense": 2.5})
    code, out, data = _compare(tmp_path, a, b, capsys)
    assert code == 1 and "regression(s) beyond the noise band" in out and "compare the two GPUs" not in out
    assert data["across_devices"] is False and data["devices"] == {"a": H100, "b": H100}
    verdicts = {(c["path"], c["n"]): c["verdict"] for c in data["cases"]}
    assert verdicts == {("cuBLAS", 8192): "within noise", ("cuBLAS", 32): "within noise",
                        ("vk-coopmat2-dense", 8192): "regression", ("vk-coopmat2-dense", 32): "regression"}
    assert data["regressions"] == 2


def test_runs_on_two_gpus_show_their_ratios_and_judge_no_regression(tmp_path, monkeypatch, capsys):
    a = _written_gemm_run(monkeypatch, tmp_path / "h100.json", H100, {"cuBLAS": 1.0, "vk-coopmat2-dense": 2.0,
                                                                      "cuda-mma.sp": 1.0})
    b = _written_gemm_run(monkeypatch, tmp_path / "h200.json", H200, {"cuBLAS": 0.8, "vk-coopmat2-dense": 2.5,
                                                                      "cuda-mma.sp": "failed"})
    code, out, data = _compare(tmp_path, a, b, capsys)
    assert code == 0 and data["across_devices"] is True and data["regressions"] == 0
    assert data["devices"] == {"a": H100, "b": H200}
    said = [line for line in out.splitlines() if "differ" in line or "GPUs" in line]
    assert said == [f"A ran on {H100} and B on {H200}: the ratios compare the two GPUs, so no case is judged a "
                    "regression"], out
    assert "regression(s) beyond" not in out and "the runs differ in GPU" not in out
    written = {name: json.loads(path.read_text()) for name, path in (("a", a), ("b", b))}
    for case in data["cases"]:
        rows = [next(r for r in written[side]["results"] if (r["path"], r["n"]) == (case["path"], case["n"]))
                for side in "ab"]
        if case["path"] == "cuda-mma.sp":
            assert case["verdict"] == "failed in B" and case["ratio"] is None
            continue
        assert case["ratio"] == pytest.approx(rows[1]["tflops"] / rows[0]["tflops"])
        assert case["verdict"] == ("faster" if case["path"] == "cuBLAS" else "slower")
    assert f"{data['cases'][0]['ratio']:.3f}" in out


def test_the_same_runs_on_one_gpu_exit_1(tmp_path, monkeypatch, capsys):
    """The fixture above with B relabelled as an H100: every slower case and the lost path are regressions."""
    a = _written_gemm_run(monkeypatch, tmp_path / "h100.json", H100, {"cuBLAS": 1.0, "cuda-mma.sp": 1.0})
    b = _written_gemm_run(monkeypatch, tmp_path / "also-h100.json", H100, {"cuBLAS": 1.25, "cuda-mma.sp": "failed"})
    code, _, data = _compare(tmp_path, a, b, capsys)
    assert code == 1 and data["regressions"] == 4
    assert {c["verdict"] for c in data["cases"]} == {"regression", "lost"}


def test_a_run_that_names_no_gpu_is_judged_as_on_the_same_one(tmp_path, monkeypatch, capsys):
    a = _written_gemm_run(monkeypatch, tmp_path / "named.json", H100, {"cuBLAS": 1.0})
    b = _written_gemm_run(monkeypatch, tmp_path / "unnamed.json", None, {"cuBLAS": 1.5})
    code, out, data = _compare(tmp_path, a, b, capsys)
    assert code == 1 and data["across_devices"] is False and data["devices"]["b"] is None
    assert "regression(s) beyond the noise band" in out


def test_attention_runs_on_two_gpus_exit_0(tmp_path, monkeypatch, capsys):
    a = _written_attention_run(monkeypatch, tmp_path / "attention-h100.json", H100, 0.05)
    b = _written_attention_run(monkeypatch, tmp_path / "attention-h200.json", H200, 0.07)
    code, out, data = _compare(tmp_path, a, b, capsys)
    assert code == 0 and data["across_devices"] and data["cases"]
    assert {c["verdict"] for c in data["cases"]} == {"slower"}
    same = _written_attention_run(monkeypatch, tmp_path / "attention-h100-again.json", H100, 0.07)
    assert _compare(tmp_path, a, same, capsys)[0] == 1


def test_a_run_recorded_in_the_first_format_compares_with_another_gpu(tmp_path, monkeypatch, capsys):
    """The recorded H200 run (schema 1, nvidia-smi's name) against an H100 run as the bench writes it today."""
    recorded = compare.load_run(H200_RUN)
    b_row = next(r for r in recorded["results"] if r["status"] == "ok")
    problem = GemmProblem(b_row["dtype"], b_row["shape_class"], b_row["m"], b_row["n"], b_row["k"])
    result = _timed(path_result(b_row["path"], problem, "ok"), problem.flops, 1.0)
    h100 = report.write_json(BenchResult([result], _environment(monkeypatch, H100), {}), tmp_path / "h100.json")
    code, out, data = _compare(tmp_path, h100, H200_RUN, capsys)
    assert code == 0 and data["devices"] == {"a": H100, "b": recorded["environment"]["nvidia_smi"]["name"]}
    row = data["cases"][0]   # A's one case comes first
    assert (row["path"], row["dtype"], row["m"], row["n"], row["k"]) == (b_row["path"], b_row["dtype"], b_row["m"],
                                                                         b_row["n"], b_row["k"])
    assert row["ratio"] == pytest.approx(b_row["tflops"] / result.tflops)


def test_the_recorded_h100_and_h200_result_sets_compare_across_gpus(tmp_path, capsys):
    """docs/results: the two GPUs' default runs, as recorded."""
    results = Path(__file__).resolve().parent.parent / "docs" / "results"
    a, b = results / "h100" / "bench-default.json", results / "h200" / "bench-default.json"
    code, out, data = _compare(tmp_path, a, b, capsys)
    assert code == 0 and data["across_devices"] and data["regressions"] == 0
    assert any(c["verdict"] == "slower" for c in data["cases"]) and "compare the two GPUs" in out
    assert cli.main(["bench", "compare", str(b), str(b)]) == 0
