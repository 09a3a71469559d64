"""vkcoop.bench sparse: argument checks, inputs, the result check, skipping, table/JSON/plot output."""
from __future__ import annotations

import json
import time
from dataclasses import replace
from io import StringIO

import numpy as np
import pytest
import support
from rich.console import Console

from vkcoop import gemm
from vkcoop import sparse as sparse24
from vkcoop.bench import measure
from vkcoop.bench import report
from vkcoop.bench import sparse as bench
from vkcoop.bench.sparse_settings import SparseBenchSettings
from vkcoop.bench.tuning import TuningCache
from vkcoop.gemm.path import GemmOperands, GemmProblem
from vkcoop.gemm.paths import SEED_CONFIGS, parse_config


def test_cases_cover_dtypes_sizes_and_shapes():
    cases = bench.make_cases(["fp16", "bf16"], [4096, 8192], ["square", "llm"], llm_tokens=32)
    assert len(cases) == 8
    square = [c for c in cases if c.shape_class == "square"]
    assert all(c.m == c.n == c.k for c in square)
    llm = [c for c in cases if c.shape_class == "llm"]
    assert all(c.n == 32 and c.m == c.k for c in llm)
    assert cases[0].flops == 2.0 * cases[0].m * cases[0].n * cases[0].k


@pytest.mark.parametrize("kwargs, message", [
    ({"dtypes": ["fp8"]}, "--dtype"), ({"shapes": ["tall"]}, "--shapes"), ({"sizes": [1000]}, "multiples of 64")])
def test_bad_arguments_name_the_option(kwargs, message):
    args = {"dtypes": ["fp16"], "sizes": [4096], "shapes": ["square"]}
    args.update(kwargs)
    with pytest.raises(ValueError, match=message):
        bench.make_cases(args["dtypes"], args["sizes"], args["shapes"])


def test_run_rejects_unknown_paths_and_iterations_before_any_gpu_work():
    small = SparseBenchSettings(dtypes=["fp16"], sizes=[64], shapes=["llm"])
    with pytest.raises(ValueError, match="unknown path"):
        bench.run_sparse_bench(replace(small, paths=["cuda-magic"]), progress=False)
    with pytest.raises(ValueError, match="--iters"):
        bench.run_sparse_bench(replace(small, iters=0), progress=False)
    with pytest.raises(ValueError, match="--baseline"):
        bench.run_sparse_bench(replace(small, baseline="cuda-magic"), progress=False)


@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
def test_inputs_are_pruned_2to4_and_the_compressed_form_round_trips(dtype):
    operands = GemmOperands.make(GemmProblem(dtype, "llm", 64, 32, 128))
    pruned, compressed, b = operands.pruned, operands.compressed, operands.b
    assert pruned.shape == (64, 128) and b.shape == (128, 32)
    assert np.array_equal(sparse24.decompress_2to4(compressed).view(np.uint16), pruned.view(np.uint16))
    assert np.all(np.count_nonzero(pruned.astype(np.float32).reshape(64, 32, 4), axis=-1) <= 2)
    # multiples of 1/8 in [-1, 1]: the exactness argument of the module docstring
    assert np.all(np.abs(pruned.astype(np.float32)) <= 1) and np.all((pruned.astype(np.float32) * 8) % 1 == 0)


def test_check_rows_include_both_edges():
    rows = gemm.check_rows(1000)
    assert rows[0] == 0 and rows[-1] == 999 and len(np.unique(rows)) == len(rows)


def test_output_check_is_exact_for_fp32_and_one_ulp_for_half():
    ref = np.array([[1.0, -3.0, 1000.25]], dtype=np.float32)
    assert gemm.check_output(ref.copy(), ref)[0]
    off = ref.copy()
    off[0, 2] = np.nextafter(np.float32(1000.25), np.float32(2000))
    ok, max_abs, why = gemm.check_output(off, ref)
    assert not ok and "column 2" in why and max_abs > 0
    half = ref.astype(np.float16)  # 1000.25 rounds to 1000.0 in fp16: within the final rounding
    assert gemm.check_output(half, ref)[0]
    wrong = half.copy()
    wrong[0, 0] = np.float16(1.5)
    assert not gemm.check_output(wrong, ref)[0]
    nan = ref.copy()
    nan[0, 1] = np.nan
    assert "non-finite" in gemm.check_output(nan, ref)[2]


def test_ratios_use_the_same_case_only():
    case = GemmProblem("fp16", "square", 64, 64, 64)
    other = GemmProblem("fp16", "square", 128, 128, 128)
    rows = [measure.path_result("cuBLAS", case, "ok"), measure.path_result("vk-coopmat2-dense", case, "ok"),
            measure.path_result("cuSPARSELt", case, "ok"), measure.path_result("vk-coopmat2-dense", other, "ok")]
    rows[0].tflops, rows[1].tflops, rows[2].tflops, rows[3].tflops = 400.0, 200.0, 800.0, 100.0
    bench.add_ratios(rows)
    assert rows[1].ratio_cublas == pytest.approx(0.5) and rows[1].ratio_cusparselt == pytest.approx(0.25)
    assert rows[3].ratio_cublas is None


def test_without_hardware_every_path_is_skipped_with_a_reason(tmp_path):
    settings = SparseBenchSettings(dtypes=["fp16"], sizes=[64], shapes=["llm"], iters=1, warmup=0, llm_tokens=32)
    outcome = bench.run_sparse_bench(settings, progress=False, cache=TuningCache(tmp_path / "tuning"))
    report.write_json(outcome, tmp_path / "bench.json")
    statuses = {r.path: r.status for r in outcome.results}
    assert set(statuses) == set(bench.PATH_NAMES)
    for r in outcome.results:
        if r.status == "skipped":
            assert r.reason and r.tflops is None
    data = json.loads((tmp_path / "bench.json").read_text())
    assert data["settings"]["sizes"] == [64] and len(data["results"]) == len(bench.PATH_NAMES)
    assert "nvidia_smi" in data["environment"]
    assert data["settings"]["timing"].startswith("GPU work only")    # what the figures measure, for machines


def _nothing_can_run_here() -> None:
    """Skip unless neither a coopmat2 Vulkan device nor CUDA is here (this machine's case, and CI's)."""
    if support.coopmat2_reason() is None or bench.cuda_status()[0]:
        pytest.skip("a coopmat2 Vulkan device or CUDA is here: some path can run")


@pytest.fixture
def inputs_made(monkeypatch) -> list:
    """The problems whose inputs a run made (GemmOperands.make), recorded as it makes them."""
    made, real = [], GemmOperands.make

    def make(problem, seed=0):
        made.append(problem)
        return real(problem, seed)
    monkeypatch.setattr(GemmOperands, "make", staticmethod(make))
    return made


def test_where_no_path_can_run_the_default_run_makes_no_inputs(inputs_made, tmp_path):
    _nothing_can_run_here()
    outcome = bench.run_sparse_bench(SparseBenchSettings(), progress=False, cache=TuningCache(tmp_path / "tuning"))
    assert outcome.nothing_ran and not inputs_made
    assert len(outcome.results) == len(outcome.settings.cases()) * len(bench.PATH_NAMES)
    reasons = {r.path: r.reason for r in outcome.results}
    assert reasons["cuBLAS"] == bench.cuda_status()[1] and reasons["vk-coopmat2-dense"]


def test_where_no_path_can_run_bench_sparse_refuses_in_one_line_within_seconds(inputs_made, tmp_path, capsys):
    """The default preset's inputs (8192^3, both dtypes) take seconds to make: a refusal must come before them."""
    from vkcoop import cli
    from vkcoop.cli.common import Exit
    _nothing_can_run_here()
    support.toolchain_or_skip()
    started = time.perf_counter()
    code = cli.main(["bench", "sparse", "--json", str(tmp_path / "r.json"), "--plot", str(tmp_path / "r.png")])
    seconds = time.perf_counter() - started
    out, err = capsys.readouterr()
    assert code == Exit.ENVIRONMENT and not inputs_made and seconds < 5.0, (code, inputs_made, seconds)
    assert out == "" and len(err.splitlines()) == 1, err
    line = err.strip()
    assert line.startswith("vkcoop: error: no path could run here: ") and line.endswith("; run it on a GPU host")
    assert line.count(bench.cuda_status()[1][:60]) == 1          # each reason once, not once per path
    assert not (tmp_path / "r.json").exists() and not (tmp_path / "r.png").exists()


@pytest.mark.gpu
@pytest.mark.cuda
def test_small_bench_on_the_gpu_checks_and_times_every_available_path(tmp_path):
    # a throwaway tuning cache: on a device without seeds the first run tunes, within these budgets
    settings = SparseBenchSettings(dtypes=["fp16"], sizes=[256], shapes=["square"], iters=3, warmup=1,
                                   tune_budget_s=30, search_budget_s=3)
    outcome = bench.run_sparse_bench(settings, progress=False, cache=TuningCache(tmp_path / "tuning"))
    if all(r.status == "skipped" for r in outcome.results):
        pytest.skip("neither a coopmat2 Vulkan device nor the CUDA paths are available: "
                    + "; ".join(sorted({r.reason for r in outcome.results}))[:300])
    assert not outcome.failed, [(r.path, r.reason) for r in outcome.failed]
    for r in outcome.results:
        if r.status == "ok":
            assert r.tflops and r.tflops > 0


def test_default_vulkan_configs_are_valid_tiles_for_the_h200():
    from vkcoop.gemm.configs import path_kernel, path_types
    from vkcoop.samples.fixtures import H200_CAPS
    flex = H200_CAPS.flexible
    for path_name, table in SEED_CONFIGS.items():
        # the seed families (vkcoop.gemm.configs.seed_family); the expand path runs compute-bound shapes only; the
        # 2:4 path's narrow classes take the H100's tile-major seeds
        narrow = {"narrow16", "narrow32", "narrow64"} if path_name == "vk-coopmat2-2:4" else set()
        assert set(table) == ({"square"} if path_name == "vk-coopmat2-2:4-expand" else {"square", "llm"} | narrow)
        for configs in table.values():
            for config in configs:
                gemm.check_workgroup_tile(flex, path_types(path_name, "fp16"), config.tile)
                path_kernel(path_name, config, "fp16")   # the kernel takes it
                assert config.meta_words in gemm.META_WORDS_CHOICES
                assert parse_config(config.label()) == config   # labels round-trip (the tuning cache keeps them)
    assert all(c.meta_words == 0 for configs in SEED_CONFIGS["vk-coopmat2-dense"].values() for c in configs)
    for configs in SEED_CONFIGS["vk-coopmat2-2:4"].values():
        assert len({c.label() for c in configs}) == len(configs)
    from vkcoop.gemm.paths import H100_SEED_CONFIGS
    for cls in ("narrow16", "narrow32", "narrow64"):
        assert SEED_CONFIGS["vk-coopmat2-2:4"][cls] == H100_SEED_CONFIGS["vk-coopmat2-2:4"][cls]


def test_tuning_times_every_config_checks_first_and_keeps_the_fastest():
    """measure_path with --tune on a fake path: a failing config is recorded and skipped, the winner re-timed."""
    operands = GemmOperands.make(GemmProblem("fp16", "llm", 64, 32, 64))
    exact = (operands.pruned.astype(np.float64) @ operands.b.astype(np.float64)).astype(np.float32)
    configs = SEED_CONFIGS["vk-coopmat2-2:4"]["llm"]
    speeds = {config: 1e-3 * (len(configs) - index) for index, config in enumerate(configs)}  # last is fastest

    class FakeBound:
        def __init__(self, config):
            self.config = config.label()
            self.broken = config.meta_words == 4   # pretend this layout is broken
            self.speed = speeds[config]

        def output_rows(self, rows):
            return np.zeros((len(rows), 32), np.float32) if self.broken else exact[rows]

        def time(self, iterations, warmup, flush_l2):
            return [self.speed] * iterations

        def release(self):
            pass

    class FakePath:
        name = "vk-coopmat2-2:4"

        def supports(self, problem):
            return True, ""

        def configs(self, problem, tune):
            return list(configs) if tune else list(configs[:1])

        def bind(self, operands, config):
            return FakeBound(config)

        def close(self):
            pass

    assert isinstance(FakePath(), gemm.GemmPath)
    result = measure.measure_path(FakePath(), operands, iters=4, warmup=1, flush_l2=False, tune=True)
    assert result.status == "ok" and result.config == configs[-1].label()
    assert result.median_ms == pytest.approx(1.0)
    statuses = [t.get("status", "ok") for t in result.tuning]
    assert len(result.tuning) == len(configs) and statuses.count("failed") == sum(
        1 for c in configs if c.meta_words == 4)
    # without tuning only the default config runs; it is the broken one here, so the path fails and is not timed
    single = measure.measure_path(FakePath(), operands, iters=4, warmup=1, flush_l2=False, tune=False)
    assert single.config == configs[0].label() and len(single.tuning) == 1
    assert single.status == "failed" and single.median_ms is None


def _one_config_path(series, exact):
    """A fake path of one configuration whose successive timings return ``series`` in turn (seconds)."""
    config = SEED_CONFIGS["vk-coopmat2-dense"]["llm"][0]
    pending = [list(s) for s in series]

    class Bound:
        def __init__(self):
            self.config = config.label()

        def output_rows(self, rows):
            return exact[rows]

        def time(self, iterations, warmup, flush_l2):
            path.timed += 1
            return pending.pop(0)

        def release(self):
            pass

    class Path:
        name, timed = "vk-coopmat2-dense", 0

        def supports(self, problem):
            return True, ""

        def configs(self, problem, tune):
            return [config]

        def bind(self, operands, config):
            return Bound()

        def close(self):
            pass

    path = Path()
    return path


def test_a_disturbed_gemm_series_is_timed_again_the_steadier_kept_and_the_table_marks_it():
    operands = GemmOperands.make(GemmProblem("fp16", "llm", 64, 32, 64))
    exact = (operands.pruned.astype(np.float64) @ operands.b.astype(np.float64)).astype(np.float32)
    disturbed = [1e-3, 6e-4, 4e-4, 3e-4, 2e-4, 1e-4, 1e-4, 1e-4, 1e-4, 1e-4]   # seconds, decaying
    steady = [1e-4, 1e-4, 1.1e-4, 1e-4, 1e-4, 1e-4, 1e-4, 1e-4, 1e-4, 1.2e-4]

    def measured(*series):
        path = _one_config_path(series, exact)
        return path, measure.measure_path(path, operands, iters=10, warmup=0, flush_l2=False, tune=False)

    path, result = measured(disturbed, steady)
    assert path.timed == 2 and result.times_ms == pytest.approx([t * 1e3 for t in steady])
    assert result.median_ms == pytest.approx(0.1) and result.unsteady_ms == pytest.approx(0.15)
    path, result = measured(steady, disturbed)
    assert path.timed == 1 and result.unsteady_ms is None          # a steady series is timed once
    wider = [3e-3, 2e-3, 1e-3, 5e-4, 2e-4, 1e-4, 1e-4, 1e-4, 1e-4, 1e-4]
    path, result = measured(disturbed, wider)                     # timed again, but the first was the steadier
    assert path.timed == 2 and result.times_ms == pytest.approx([t * 1e3 for t in disturbed])
    assert result.unsteady_ms == pytest.approx(float(np.median(wider)) * 1e3)

    outcome = bench.BenchResult([result], {}, {})
    text = StringIO()
    report.print_table(outcome, Console(file=text, width=200))
    assert "0.150 *" in text.getvalue() and "* timed twice: the first series was unsteady" in text.getvalue()
    result.unsteady_ms = None
    text = StringIO()
    report.print_table(outcome, Console(file=text, width=200))
    assert "timed twice" not in text.getvalue() and " *" not in text.getvalue()
