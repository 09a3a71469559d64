"""vkcoop.bench sparse: argument checks, inputs, the result check, skipping, table/JSON/plot output."""
from __future__ import annotations

import json
from io import StringIO

import numpy as np
import pytest
from rich.console import Console

from vkcoop import gemm
from vkcoop import sparse as sparse24
from vkcoop.bench import measure
from vkcoop.bench import report
from vkcoop.bench import sparse as bench
from vkcoop.bench.tuning import TuningCache
from vkcoop.gemm.path import GemmOperands, GemmProblem
from vkcoop.gemm.paths import SEED_CONFIGS, parse_config
from vkcoop.vk.tables import COMPONENT_FLOAT16, COMPONENT_FLOAT32


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
    with pytest.raises(ValueError, match="unknown path"):
        bench.run_sparse_bench(dtypes=["fp16"], sizes=[64], shapes=["llm"], paths=["cuda-magic"], progress=False)
    with pytest.raises(ValueError, match="--iters"):
        bench.run_sparse_bench(dtypes=["fp16"], sizes=[64], shapes=["llm"], iters=0, progress=False)


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
    outcome = bench.run_sparse_bench(dtypes=["fp16"], sizes=[64], shapes=["llm"], iters=1, warmup=0,
                                     llm_tokens=32, progress=False, cache=TuningCache(tmp_path / "tuning"))
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


@pytest.mark.gpu
@pytest.mark.cuda
def test_small_bench_on_the_gpu_checks_and_times_every_available_path(tmp_path):
    # a throwaway tuning cache: on a device without seeds the first run tunes, within these budgets
    outcome = bench.run_sparse_bench(dtypes=["fp16"], sizes=[256], shapes=["square"], iters=3, warmup=1,
                                     tune_budget=30, search_budget=3, progress=False,
                                     cache=TuningCache(tmp_path / "tuning"))
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
        # the seed families (vkcoop.gemm.configs.seed_family); the expand path runs compute-bound shapes only
        assert set(table) == ({"square"} if path_name == "vk-coopmat2-2:4-expand" else {"square", "llm"})
        for configs in table.values():
            for config in configs:
                gemm.check_workgroup_tile(flex, path_types(path_name, "fp16"), config.tile)
                path_kernel(path_name, config, "fp16")   # the kernel takes it (fp16 results: no split-K)
                assert config.meta_words in gemm.META_WORDS_CHOICES
                assert parse_config(config.label()) == config   # labels round-trip through explore's parser
    assert all(c.meta_words == 0 for configs in SEED_CONFIGS["vk-coopmat2-dense"].values() for c in configs)
    labels = [c.label() for configs in SEED_CONFIGS["vk-coopmat2-2:4"].values() for c in configs]
    assert len(labels) == len(set(labels))


def test_explore_parses_jobs_and_tiles_before_any_gpu_work():
    from vkcoop.bench import explore
    config = parse_config("256:64x32x128u2s4w4i4c")
    tile, column, meta_words = config.tile, config.b_column_major, config.meta_words
    assert (tile.workgroup_size, tile.tile_m, tile.tile_n, tile.tile_k) == (256, 64, 32, 128)
    assert (tile.k_unroll, tile.split_k, tile.per_sm) == (2, 4, 4)
    assert column and meta_words == 4
    config = parse_config("128:128x128x32")
    tile, column, meta_words = config.tile, config.b_column_major, config.meta_words
    assert tile.k_unroll == 2 and tile.group_m == 8 and not column and meta_words == 0 and not tile.tail
    tile = parse_config("128:128x128x64u8g4w2x5c").tile
    assert tile.tail and tile.tail_split == 5 and tile.per_sm == 2
    kernel, dtype, shape, tiles = explore.parse_job("sparse/bf16/8192,32,8192/256:64x32x128i4,64:32x32x128")
    assert (kernel, dtype, shape, tiles) == ("sparse", "bf16", (8192, 32, 8192), ["256:64x32x128i4", "64:32x32x128"])
    for bad, message in (("dense/fp16/8,8,8/128:128", "is not INVOCATIONS"), ("magic/fp16/8,8,8/1:1x1x1", "kernel"),
                         ("dense16/bf16/8,8,8/1:1x1x1", "dtype"), ("dense/fp16/8x8/1:1x1x1", "KERNEL/DTYPE")):
        with pytest.raises(ValueError, match=message):
            explore.parse_job(bad)
    for bad in ("dense/bf16/3000,5000,2000/128:128x128x64", "dense/fp16/0,32,64/128:128x128x64"):
        with pytest.raises(ValueError, match="K a multiple of 32"):   # the operands are made in the 2:4 format
            explore.parse_job(bad)
    with pytest.raises(SystemExit):   # argparse: --job is required
        explore.main([])


def test_a_bad_explore_job_is_one_line_and_exit_code_2_before_any_gpu_work(capsys):
    from vkcoop.bench import explore
    with pytest.raises(SystemExit) as stopped:
        explore.main(["--job", "dense/bf16/3000,5000,2000/128:128x128x64u8g4c"])
    assert stopped.value.code == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert "K a multiple of 32" in last and "Traceback" not in last


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


def test_explore_refuses_a_khr_job_whose_tile_is_not_a_code():
    from vkcoop.bench import explore
    with pytest.raises(ValueError, match="is not MxNxK:SMxSN"):
        explore.parse_job("khr/fp16/256,256,256/256:128x128x32u4")
    with pytest.raises(ValueError, match="dense16, khr16: fp16"):
        explore.parse_job("khr16/bf16/256,256,256/128x128x32:2x2d2")
    assert explore.parse_job("khr16/fp16/256,256,256/128x128x32:2x2d2g8")[3] == ["128x128x32:2x2d2g8"]


def test_explore_maps_its_kernel_kinds_onto_the_bench_paths_rule(monkeypatch):
    """A job's kind decides 2:4 or dense, "staged*" or a "t" label the staged kernel, dense16 and khr16 fp16
    accumulation, khr* the KHR shared-memory kernel with the tile its code names."""
    from types import SimpleNamespace
    from vkcoop.bench import explore
    from vkcoop.gemm import launch, staging, vulkan
    from vkcoop.vk.tables import SCOPE_SUBGROUP, ShapeEntry
    monkeypatch.setattr(vulkan, "coopmat2_gemm", lambda device, kernel, flexible=None: kernel)
    monkeypatch.setattr(vulkan, "KhrSharedMemoryGemm", lambda device, types, tile, pad_to_tiles:
                        staging.KhrKernel(types, tile, pad_to_tiles=pad_to_tiles))
    khr = [ShapeEntry(16, 16, 16, a, a, c, c, SCOPE_SUBGROUP) for a, c in
           ((COMPONENT_FLOAT16, COMPONENT_FLOAT32), (COMPONENT_FLOAT16, COMPONENT_FLOAT16))]
    device = SimpleNamespace(physical=SimpleNamespace(khr_shapes=lambda: khr))
    problem = GemmProblem("fp16", "explore", 64, 64, 64)
    made = {kind: explore._kernel(device, (), kind, "fp16", label, problem, 132)
            for kind, label in (("dense", "64:32x32x128"), ("dense16", "64:32x32x128"), ("staged", "64:32x32x128"),
                                ("sparse", "64:32x32x128t"), ("staged24", "64:32x32x128"),
                                ("khr", "128x256x16:2x4d2"), ("khr16", "128x128x32:2x4"))}
    made = {kind: kernel for kind, (kernel, _) in made.items()}
    assert type(made["dense"]) is launch.CoopMat2Kernel and made["dense"].types.key == "fp16->fp32"
    assert type(made["dense16"]) is launch.CoopMat2Kernel and made["dense16"].types.key == "fp16->fp16"
    assert type(made["staged"]) is staging.StagedKernel
    assert type(made["khr"]) is staging.KhrKernel and made["khr"].types.key == "fp16->fp32"
    assert (made["khr"].tile.tile_n, made["khr"].tile.tile_k, made["khr"].tile.stages) == (256, 16, 2)
    assert made["khr16"].types.key == "fp16->fp16" and made["khr16"].tile.stages == 1
    assert made["khr"].pad_to_tiles and made["khr16"].pad_to_tiles   # as the bench's KHR paths
    assert type(made["sparse"]) is staging.StagedSparse24Kernel and type(made["staged24"]) is staging.StagedSparse24Kernel


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
