"""A library row is the best of what its search found, re-timed in the measuring process (vkcoop.bench.measure):
every survivor, and every pinned candidate (a remembered deep winner) that ran in the search, is timed with the
full iteration count and the fastest series is the row; the x cuSPARSELt ratio is over the faster route. Stub
paths with scripted timings: no GPU, no torch."""
from __future__ import annotations

from io import StringIO

import numpy as np
import pytest
from rich.console import Console

from vkcoop.bench import measure, report
from vkcoop.bench import sparse as bench
from vkcoop.gemm.path import GemmOperands, GemmProblem

PROBLEM = GemmProblem("fp16", "llm", 64, 32, 64)


class StubLibrary:
    """A library path of labelled candidates: its search probes them at ``probe`` (ms; a label absent there fails
    its check) and keeps the ``keep`` fastest; each time a candidate is timed here its next series of ``series``
    (seconds per run) comes back, so a re-timing can differ from the first timing, as on a GPU."""
    name = "cuBLAS"

    def __init__(self, exact, probe: dict, series: dict, keep: int = 3):
        self.exact, self.probe, self.keep = exact, probe, keep
        self.series = {label: list(values) for label, values in series.items()}
        self.timings: list = []          # (label, iterations) of every timing here
        self.searched_with: dict = {}

    def supports(self, problem):
        return True, ""

    def configs(self, problem, tune):
        return list(self.probe)

    def search(self, operands, configs, *, deadline=None, progress=None, **options):
        self.searched_with = options
        record = [{"config": c, "status": "ok", "median_ms": self.probe[c], "where": "search process"}
                  if c in self.probe else {"config": c, "status": "failed", "reason": "wrong result",
                                           "where": "search process"} for c in configs]
        ranked = sorted((c for c in configs if c in self.probe), key=self.probe.get)
        return ranked[:self.keep], record

    def bind(self, operands, config):
        path = self

        class Bound:
            def __init__(self):
                self.config = f"bound {config}"

            def output_rows(self, rows):
                return path.exact[rows]

            def time(self, iterations, warmup, flush_l2):
                path.timings.append((config, iterations))
                return [path.series[config].pop(0)] * iterations

            def release(self):
                pass

        return Bound()


@pytest.fixture(scope="module")
def operands():
    return GemmOperands.make(PROBLEM)


def _exact(operands):
    return (operands.pruned.astype(np.float64) @ operands.b.astype(np.float64)).astype(np.float32)


def _measure(path, operands, configs, search=True, iters=8):
    return measure.measure_path(path, operands, iters=iters, warmup=0, flush_l2=False, tune=False,
                                configs=configs, search=search)


def test_the_row_is_the_fastest_series_timed_here_not_a_further_run_of_the_probes_winner(operands):
    # the probe ranks A first; timed here, B is faster; any second timing of either would be slower still
    path = StubLibrary(_exact(operands), probe={"A": 1.0, "B": 1.1},
                       series={"A": [1.2e-3, 2.0e-3], "B": [1.0e-3, 1.3e-3]})
    result = _measure(path, operands, ["A", "B"])
    timed = {e["config"]: e["median_ms"] for e in result.tuning if "where" not in e}
    assert result.status == "ok" and result.config == "bound B"
    assert result.median_ms == pytest.approx(min(timed.values())) == pytest.approx(1.0)
    assert path.timings == [("A", 8), ("B", 8)]        # each once, with the full iteration count
    assert result.times_ms == pytest.approx([1.0] * 8) and result.iterations == 8


def test_a_pinned_candidate_is_timed_here_beside_the_survivors_when_it_ran_in_the_search(operands):
    probe = {"A": 1.0, "B": 1.1, "C": 1.2, "D": 1.3}        # D, the remembered deep winner, probes last
    series = {label: [1.5e-3] for label in probe} | {"D": [0.9e-3]}
    path = StubLibrary(_exact(operands), probe, series, keep=3)
    result = _measure(path, operands, ["A", "B", "C", "D", "E"],
                      search={"staged": False, "refused": {}, "pinned": ["D", "E"]})
    assert "pinned" not in path.searched_with and path.searched_with["staged"] is False
    assert [label for label, _ in path.timings] == ["A", "B", "C", "D"]   # E failed its check there: not timed
    assert result.config == "bound D" and result.median_ms == pytest.approx(0.9)


def test_without_a_pin_only_the_survivors_are_timed(operands):
    probe = {"A": 1.0, "B": 1.1, "C": 1.2, "D": 1.3}
    path = StubLibrary(_exact(operands), probe, {label: [1.5e-3] for label in probe}, keep=3)
    _measure(path, operands, list(probe), search={"staged": False})
    assert [label for label, _ in path.timings] == ["A", "B", "C"]


def test_a_library_path_timed_without_a_search_also_reports_its_fastest_candidate(operands):
    path = StubLibrary(_exact(operands), probe={"A": 1.0, "B": 1.1}, series={"A": [1.4e-3, 0.5e-3],
                                                                            "B": [1.1e-3, 0.5e-3]})
    result = _measure(path, operands, ["A", "B"], search=False)     # a cache hit with the deep winner beside it
    assert path.timings == [("A", 8), ("B", 8)] and result.median_ms == pytest.approx(1.1)


def test_the_x_cusparselt_ratio_is_over_the_faster_route():
    rows = [measure.path_result(name, PROBLEM, "ok") for name in ("cuSPARSELt", "cuSPARSELt-nvmath", "cuBLAS")]
    for row, tflops, library in zip(rows, (1241.0, 1165.0, 779.0), ("torch 2.11", "nvmath-python 1.0", "")):
        row.tflops, row.library = tflops, library
    bench.add_ratios(rows)
    assert rows[2].ratio_cusparselt == pytest.approx(779.0 / 1241.0)
    assert rows[2].cusparselt_reference == "cuSPARSELt (torch 2.11)"
    rows[1].tflops = 1300.0
    bench.add_ratios(rows)
    assert rows[2].ratio_cusparselt == pytest.approx(779.0 / 1300.0)
    assert rows[2].cusparselt_reference == "cuSPARSELt-nvmath (nvmath-python 1.0)"
    assert measure.fastest_cusparselt({"cuBLAS": rows[2]}) is None


def test_the_bench_table_names_what_found_each_library_row():
    row = measure.path_result("cuBLAS", PROBLEM, "ok")
    row.tflops, row.median_ms, row.config, row.config_source, row.found_by = 80.0, 0.05, "torch.mm mm", "search", \
        "shipped"
    vulkan = measure.path_result("vk-coopmat2-dense", PROBLEM, "ok")
    vulkan.tflops, vulkan.median_ms, vulkan.config, vulkan.config_source = 70.0, 0.06, "128:64x32", "seed"
    text = StringIO()
    report.print_table(bench.BenchResult([row, vulkan], {}, {}), Console(file=text, width=200))
    assert "torch.mm mm [shipped]" in text.getvalue() and "128:64x32 [seed]" in text.getvalue()
    assert "[search]" not in text.getvalue()


class RefusingLibrary(StubLibrary):
    """A library whose search ends every candidate in the library's own error, or (``wrong``) one in a wrong
    result."""

    def __init__(self, exact, wrong: str = "", raised: str = "RuntimeError"):
        super().__init__(exact, probe={}, series={})
        self.wrong, self.raised = wrong, raised

    def configs(self, problem, tune):
        return ["alg 0", "alg 1"]

    def search(self, operands, configs, *, deadline=None, progress=None, **options):
        return [], [{"config": c, "status": "failed" if c == self.wrong else "error",
                     "reason": "wrong result" if c == self.wrong else f"{self.raised}: CUDA error: internal error",
                     "raised": self.raised, "where": "search process"} for c in configs]


def test_a_library_that_refuses_every_candidate_is_skipped_in_its_own_words(operands):
    result = _measure(RefusingLibrary(_exact(operands)), operands, None)
    assert result.status == "skipped"
    assert "library refused every candidate" in result.reason and "internal error" in result.reason
    assert not bench.BenchResult(results=[result], environment={}, settings=None).failed   # exit 0, not 1


def test_a_wrong_result_among_library_errors_still_fails(operands):
    result = _measure(RefusingLibrary(_exact(operands), wrong="alg 1"), operands, None)
    assert result.status != "skipped"
    assert bench.BenchResult(results=[result], environment={}, settings=None).failed   # exit 1


@pytest.mark.parametrize("raised", ["TypeError", "", "AttributeError"])
def test_errors_of_our_own_code_or_of_a_search_process_still_fail(operands, raised):
    """A programming error, or an error no library call raised (a search process that died), is not a refusal."""
    result = _measure(RefusingLibrary(_exact(operands), raised=raised), operands, None)
    assert result.status == "error"
