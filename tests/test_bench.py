"""vkcoop.bench sparse: argument checks, inputs, the result check, skipping, table/JSON/plot output."""
from __future__ import annotations

import json

import numpy as np
import pytest

from vkcoop import sparse as sparse24
from vkcoop.bench import sparse as bench


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
    case = bench.Case(dtype, "llm", 64, 32, 128)
    pruned, compressed, b = bench.make_inputs(case)
    assert pruned.shape == (64, 128) and b.shape == (128, 32)
    assert np.array_equal(sparse24.decompress_2to4(compressed).view(np.uint16), pruned.view(np.uint16))
    assert np.all(np.count_nonzero(pruned.astype(np.float32).reshape(64, 32, 4), axis=-1) <= 2)
    # multiples of 1/8 in [-1, 1]: the exactness argument of the module docstring
    assert np.all(np.abs(pruned.astype(np.float32)) <= 1) and np.all((pruned.astype(np.float32) * 8) % 1 == 0)


def test_check_rows_include_both_edges():
    rows = bench.check_rows(1000)
    assert rows[0] == 0 and rows[-1] == 999 and len(np.unique(rows)) == len(rows)


def test_output_check_is_exact_for_fp32_and_one_ulp_for_half():
    ref = np.array([[1.0, -3.0, 1000.25]], dtype=np.float32)
    assert bench.check_output(ref.copy(), ref)[0]
    off = ref.copy()
    off[0, 2] = np.nextafter(np.float32(1000.25), np.float32(2000))
    ok, max_abs, why = bench.check_output(off, ref)
    assert not ok and "column 2" in why and max_abs > 0
    half = ref.astype(np.float16)  # 1000.25 rounds to 1000.0 in fp16: within the final rounding
    assert bench.check_output(half, ref)[0]
    wrong = half.copy()
    wrong[0, 0] = np.float16(1.5)
    assert not bench.check_output(wrong, ref)[0]
    nan = ref.copy()
    nan[0, 1] = np.nan
    assert "non-finite" in bench.check_output(nan, ref)[2]


def test_ratios_use_the_same_case_only():
    case = bench.Case("fp16", "square", 64, 64, 64)
    other = bench.Case("fp16", "square", 128, 128, 128)
    rows = [bench._result("cuBLAS", case, "ok"), bench._result("vk-coopmat2-dense", case, "ok"),
            bench._result("cuSPARSELt", case, "ok"), bench._result("vk-coopmat2-dense", other, "ok")]
    rows[0].tflops, rows[1].tflops, rows[2].tflops, rows[3].tflops = 400.0, 200.0, 800.0, 100.0
    bench._add_ratios(rows)
    assert rows[1].ratio_cublas == pytest.approx(0.5) and rows[1].ratio_cusparselt == pytest.approx(0.25)
    assert rows[3].ratio_cublas is None


def test_without_hardware_every_path_is_skipped_with_a_reason(tmp_path):
    outcome = bench.run_sparse_bench(dtypes=["fp16"], sizes=[64], shapes=["llm"], iters=1, warmup=0,
                                     json_path=tmp_path / "bench.json", plot_path=tmp_path / "bench.png",
                                     progress=False)
    statuses = {r.path: r.status for r in outcome.results}
    assert set(statuses) == set(bench.PATH_NAMES)
    for r in outcome.results:
        if r.status == "skipped":
            assert r.reason and r.tflops is None
    data = json.loads((tmp_path / "bench.json").read_text())
    assert data["settings"]["sizes"] == [64] and len(data["results"]) == len(bench.PATH_NAMES)
    assert "nvidia_smi" in data["environment"]
    assert (tmp_path / "bench.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.gpu
@pytest.mark.cuda
def test_small_bench_on_the_gpu_checks_and_times_every_available_path(tmp_path):
    outcome = bench.run_sparse_bench(dtypes=["fp16"], sizes=[256], shapes=["square"], iters=3, warmup=1,
                                     progress=False)
    if all(r.status == "skipped" for r in outcome.results):
        pytest.skip("neither a coopmat2 Vulkan device nor the CUDA paths are available: "
                    + "; ".join(sorted({r.reason for r in outcome.results}))[:300])
    assert not outcome.failed, [(r.path, r.reason) for r in outcome.failed]
    for r in outcome.results:
        if r.status == "ok":
            assert r.tflops and r.tflops > 0


def test_default_vulkan_configs_are_valid_tiles_for_the_h200():
    from vkcoop.samples import gemm as gemm_samples
    from vkcoop.samples import gemm_kernels as kernels
    from vkcoop.samples.fixtures import H200_CAPS
    flex = gemm_samples.flexible_rows(H200_CAPS)
    for table in (bench.DENSE_CONFIGS, bench.SPARSE_CONFIGS):
        assert set(table) == set(bench.SHAPES)
        for configs in table.values():
            for config in configs:
                kernels.check_workgroup_tile(flex, "fp16->fp32", config.tile)
                assert config.meta_words in kernels.META_WORDS_CHOICES
    assert all(c.meta_words == 0 for configs in bench.DENSE_CONFIGS.values() for c in configs)
    labels = [c.label() for configs in bench.SPARSE_CONFIGS.values() for c in configs]
    assert len(labels) == len(set(labels))


def test_explore_parses_jobs_and_tiles_before_any_gpu_work():
    from vkcoop.bench import explore
    tile, column, meta_words = explore.parse_tile("256:64x32x128u2s4sg2p2i4c")
    assert (tile.workgroup_size, tile.tile_m, tile.tile_n, tile.tile_k) == (256, 64, 32, 128)
    assert (tile.k_unroll, tile.split_k, tile.subgroups_m, tile.n_parts) == (2, 4, 2, 2)
    assert column and meta_words == 4
    tile, column, meta_words = explore.parse_tile("128:128x128x32")
    assert tile.k_unroll == 2 and tile.group_m == 8 and not column and meta_words == 0 and not tile.subgroup_scope
    kernel, dtype, shape, tiles = explore.parse_job("sparse/bf16/8192,32,8192/256:64x32x128i4,64:32x32x128")
    assert (kernel, dtype, shape, tiles) == ("sparse", "bf16", (8192, 32, 8192), ["256:64x32x128i4", "64:32x32x128"])
    for bad, message in (("dense/fp16/8,8,8/128:128", "is not INVOCATIONS"), ("magic/fp16/8,8,8/1:1x1x1", "kernel"),
                         ("dense16/bf16/8,8,8/1:1x1x1", "dtype"), ("dense/fp16/8x8/1:1x1x1", "KERNEL/DTYPE")):
        with pytest.raises(ValueError, match=message):
            explore.parse_job(bad)
    with pytest.raises(SystemExit):   # argparse: --job is required
        explore.main([])


def test_tuning_times_every_config_checks_first_and_keeps_the_fastest():
    """run_vulkan_path with --tune on fake kernels: a failing config is recorded and skipped, the winner re-timed."""
    case = bench.Case("fp16", "llm", 64, 32, 64)
    inputs = bench.make_inputs(case)
    pruned, compressed, b = inputs
    rows = bench.check_rows(case.m)
    reference = (pruned[rows].astype(np.float64) @ b.astype(np.float64)).astype(np.float32)
    speeds = {}

    class FakeKernel:
        def __init__(self, config):
            self.config = config

        def bind(self, *arrays):
            self.arrays = arrays

        def result(self):
            if self.config.meta_words == 4:   # pretend this layout is broken
                return np.zeros((case.m, case.n), np.float32)
            return (pruned.astype(np.float64) @ b.astype(np.float64)).astype(np.float32)

        def time(self, iters, warmup, flush=None):
            return [speeds[self.config]] * iters

        def release(self):
            pass

    class FakeVulkan:
        def configs(self, path, case, tune):
            return bench.VulkanPaths.configs(self, path, case, tune)

        def kernel(self, path, dtype, config):
            return FakeKernel(config)

    configs = bench.SPARSE_CONFIGS["llm"]
    for index, config in enumerate(configs):
        speeds[config] = 1e-3 * (len(configs) - index)   # the last config is the fastest
    result = bench.run_vulkan_path(FakeVulkan(), "vk-coopmat2-2:4", case, inputs, rows, reference, iters=4,
                                   warmup=1, flush_l2=False, tune=True)
    assert result.status == "ok" and result.config == configs[-1].label()
    assert result.median_ms == pytest.approx(1.0)
    statuses = [t.get("status", "ok") for t in result.tuning]
    assert len(result.tuning) == len(configs) and statuses.count("failed") == sum(
        1 for c in configs if c.meta_words == 4)
    # without tuning only the default config runs
    single = bench.run_vulkan_path(FakeVulkan(), "vk-coopmat2-2:4", case, inputs, rows, reference, iters=4,
                                   warmup=1, flush_l2=False, tune=False)
    assert single.config == configs[0].label() and len(single.tuning) == 1
