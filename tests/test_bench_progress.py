"""How a long bench run shows progress (vkcoop.progress), its default grid and presets, the A shared
between cases, and the Vulkan pipelines created on several threads (vkcoop.vk.create_concurrently)."""
from __future__ import annotations

import io
import threading
import time

import numpy as np
import pytest

from support import usage_error
from vkcoop import cli, vk
from vkcoop import progress as progress_module
from vkcoop.progress import RunProgress, resolve_mode
from vkcoop.bench.shapes import PRESETS, make_cases, preset_grid
from vkcoop.bench.sparse import summary_line
from vkcoop.bench.measure import PathResult
from vkcoop.gemm.path import GemmOperands, GemmProblem


class Pipe(io.StringIO):
    def isatty(self):
        return False


class Terminal(io.StringIO):
    def isatty(self):
        return True


def test_auto_is_a_bar_on_a_terminal_and_lines_through_a_pipe():
    assert resolve_mode("auto", Terminal()) == "bar" and resolve_mode("auto", Pipe()) == "lines"
    assert resolve_mode("none", Terminal()) == "none"


def test_piped_progress_is_one_line_per_finished_unit_with_the_time_left():
    out = Pipe()
    with RunProgress(4, "lines", stream=out) as shown:
        for index in range(4):
            shown.step(f"case {index}")
            shown.finished(f"fp16 square 64x64x64  path{index}  ok  1.0 TFLOP/s")
    lines = out.getvalue().splitlines()
    assert len(lines) == 4 and lines[0].startswith("[1/4 0:00, ~0:00 left] fp16 square")
    assert lines[-1].startswith("[4/4 0:00] ") and "path3  ok" in lines[-1]


def test_units_by_the_thousand_get_the_first_and_last_line_and_one_per_interval():
    lines = {}
    for every in (0.0, 60.0):
        out = Pipe()
        with RunProgress(10_000, "lines", stream=out, line_every_s=every) as shown:
            for _ in range(10):
                shown.finished("portable 0 mismatches", units=1000)
        lines[every] = [line.split()[0] for line in out.getvalue().splitlines()]
    assert lines[0.0] == [f"[{done}/10000" for done in range(1000, 10_001, 1000)]
    assert lines[60.0] == ["[1000/10000", "[10000/10000"]


def test_a_bar_advances_by_the_units_given():
    from rich.console import Console
    console = Console(file=Terminal(), force_terminal=True, width=120)
    with RunProgress(600, "bar", console=console, title="fuzz") as shown:
        shown.finished("portable 0 mismatches", units=256)
        shown.finished("portable 0 mismatches", units=344)
        assert shown.done == 600
    assert "600/600" in console.file.getvalue()


def test_a_long_step_gets_a_heartbeat_with_what_it_is_on(monkeypatch):
    out = Pipe()
    with RunProgress(2, "lines", stream=out, heartbeat_s=0.05) as shown:
        shown.step("fp16 square 8192x8192x8192: cuSPARSELt")
        shown.detail("cuSPARSELt (search): alg12-tr (search process, running)", 3, 9)
        time.sleep(0.4)
        shown.finished("done")
    beats = [line for line in out.getvalue().splitlines() if "still on" in line]
    assert beats and "still on fp16 square 8192x8192x8192: cuSPARSELt: cuSPARSELt (search): alg12-tr" in beats[0]
    assert "(3/9)" in beats[0] and beats[0].startswith("[0/2 0:00]")


def test_no_heartbeat_while_lines_keep_coming():
    out = Pipe()
    with RunProgress(50, "lines", stream=out, heartbeat_s=0.2) as shown:
        for _ in range(10):
            shown.step("busy")
            time.sleep(0.03)
            shown.finished("one more")
    assert "still on" not in out.getvalue()


def test_a_bar_on_a_terminal_says_the_time_left(monkeypatch):
    from rich.console import Console
    console = Console(file=Terminal(), force_terminal=True, width=120)
    with RunProgress(3, "bar", console=console, title="bench sparse") as shown:
        shown.step("fp16 square: vk-coopmat2-dense")
        shown.detail("vk-coopmat2-dense (seed): 128:128x128x64", 1, 1)
        shown.note("fp16 square: inputs prepared in 1.0 s")
        shown.finished("ignored on a bar")
        assert shown.done == 1
    text = console.file.getvalue()
    assert "inputs prepared" in text and "left" in text and "ignored on a bar" not in text


def test_none_prints_nothing():
    out = Pipe()
    with RunProgress(1, "none", stream=out) as shown:
        shown.step("x")
        shown.note("y")
        shown.finished("z")
    assert out.getvalue() == ""


def test_a_closed_pipe_does_not_end_the_run():
    out = Pipe()
    out.close()
    with RunProgress(1, "lines", stream=out) as shown:
        shown.finished("nobody reads this")
    assert shown.done == 1


def test_a_summary_line_says_case_path_status_figure_and_source():
    ok = PathResult("cuBLAS", "fp16 square 8192x8192x8192", "fp16", "square", 8192, 8192, 8192, status="ok",
                    median_ms=1.5, tflops=733.0, config="torch.mm mm", config_source="cache")
    assert summary_line(ok) == "fp16 square 8192x8192x8192  cuBLAS  ok  733.0 TFLOP/s (1.500 ms)  [cache] torch.mm mm"
    skipped = PathResult("vk-khr-subgroup", "bf16 llm 8192x32x8192", "bf16", "llm", 8192, 32, 8192,
                         status="skipped", reason="no Vulkan device")
    assert summary_line(skipped) == "bf16 llm 8192x32x8192  vk-khr-subgroup  skipped: no Vulkan device"


# --- the grid -----------------------------------------------------------------------------------------------------
def test_the_default_grid_is_both_dtypes_one_compute_bound_and_one_memory_bound_case():
    grid = preset_grid("default")
    cases = make_cases(grid["dtypes"], grid["sizes"], grid["shapes"], grid["llm_tokens"])
    assert [(c.dtype, c.m, c.n, c.k) for c in cases] == [
        ("fp16", 8192, 8192, 8192), ("fp16", 8192, 32, 8192), ("bf16", 8192, 8192, 8192), ("bf16", 8192, 32, 8192)]
    assert 8192 * 8192 * 2 > 60 * 2**20      # A (fp16) is larger than an H100's or H200's L2


def test_the_full_preset_is_the_wider_grid_and_given_options_replace_a_presets_own():
    full = preset_grid("full")
    assert len(make_cases(full["dtypes"], full["sizes"], full["shapes"], full["llm_tokens"])) == 24
    narrowed = preset_grid("full", dtypes=["bf16"], llm_tokens=[16])
    assert narrowed["dtypes"] == ["bf16"] and narrowed["sizes"] == PRESETS["full"]["sizes"]
    assert narrowed["llm_tokens"] == [16]
    with pytest.raises(ValueError, match="--preset 'huge': choose from default, full"):
        preset_grid("huge")


def test_cases_that_share_a_are_next_to_each_other():
    cases = make_cases(["fp16"], [4096, 8192], ["square", "llm"], [1, 32])
    keys = [(c.m, c.k) for c in cases]
    assert keys == [(4096, 4096)] * 3 + [(8192, 8192)] * 3
    assert [c.shape_class for c in cases[:3]] == ["square", "llm", "llm"]


def test_the_a_of_problems_with_the_same_dtype_m_and_k_is_made_once_and_b_is_unchanged():
    first = GemmOperands.make(GemmProblem("fp16", "square", 128, 128, 256), seed=5)
    second = GemmOperands.make(GemmProblem("fp16", "llm", 128, 32, 256), seed=5)
    assert second.pruned is first.pruned and not second.pruned.flags.writeable
    rng = np.random.default_rng(5)            # the generator's draws: A first, then B
    rng.integers(-8, 9, size=(128, 256), dtype=np.int8)
    expected_b = (rng.integers(-8, 9, size=(256, 32), dtype=np.int8).astype(np.float32) / 8).astype(np.float16)
    assert np.array_equal(second.b, expected_b)
    other = GemmOperands.make(GemmProblem("fp16", "llm", 128, 32, 256), seed=6)
    assert other.pruned is not first.pruned and not np.array_equal(other.pruned, first.pruned)


@pytest.mark.parametrize("argv, message", [
    (["--preset", "huge"], "invalid choice: 'huge'"),
    (["--search", "exhaustive"], "invalid choice: 'exhaustive'"),
    (["--progress", "dots"], "invalid choice: 'dots'"),
])
def test_bad_grid_and_progress_options_are_usage_errors(capsys, argv, message):
    assert message in usage_error(capsys, ["bench", "sparse", *argv])


def test_bench_sparse_help_names_the_preset_search_and_progress(capsys):
    assert cli.main(["bench", "sparse", "--help"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    for words in ("--preset {default,full}", "--search {quick,deep,cached}", "--progress {auto,bar,lines,none}",
                  "8192^3 and 8192x32x8192"):
        assert words in out


# --- pipelines on several threads ----------------------------------------------------------------------------------
def test_pipelines_are_created_on_several_threads_in_order_and_a_failure_comes_back():
    barrier = threading.Barrier(4, timeout=5)

    def maker(value):
        def make():
            barrier.wait()           # all four at once, or a timeout: they overlap
            if value == 2:
                raise RuntimeError("vkCreateComputePipelines failed")
            return value
        return make

    results = vk.create_concurrently([maker(i) for i in range(4)], workers=4)
    assert results[:2] == [0, 1] and results[3] == 3 and isinstance(results[2], RuntimeError)


def test_one_worker_creates_them_one_after_another():
    seen = []
    assert vk.create_concurrently([lambda i=i: seen.append(i) or i for i in range(3)], workers=1) == [0, 1, 2]
    assert seen == [0, 1, 2]


def test_a_sample_creates_its_distinct_pipelines_up_front_once_each(monkeypatch):
    from vkcoop.samples.runner import Sample

    made, threads = [], set()

    class Case:
        def __init__(self, shader, value):
            self.shader, self.specialization = shader, {"X": value}

        def variant(self):
            class Variant:
                defines, label = (), "v"
            return Variant()

    class FakeSample(Sample):
        name = "fake"

        def _pipeline(self, gpu, case, cache):
            key = self._pipeline_key(case)
            if key not in cache:
                made.append(key)
                threads.add(threading.get_ident())
                time.sleep(0.05)
                cache[key] = object()
            return cache[key]

    cache = {}
    cases = [Case("a.comp", 1), Case("a.comp", 1), Case("a.comp", 2), Case("b.comp", 1)]
    FakeSample()._create_pipelines(None, cases, cache)
    assert len(made) == 3 and len(cache) == 3 and len(threads) > 1
