"""The fp16-accumulating dense path of ``vkcoop bench sparse`` (fp16->fp16): the short-sum operands it is checked
on, the measurement loop's separate check binding, its configurations, and its roofline. No GPU, except the last
test."""
from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from vkcoop import gemm
from vkcoop.bench import measure, roofline
from vkcoop.bench import sparse as bench
from vkcoop.bench.tuning import TuningCache
from vkcoop.gemm.configs import DeviceLimits, derive_workgroup_configs, path_kernel, recorded_device
from vkcoop.gemm.exact import FP16_EXACT_TERMS, short_sum_b
from vkcoop.gemm.path import GemmOperands, GemmProblem
from vkcoop.gemm.paths import CoopMat2Fp16AccumulatingPath, seed_configs
from vkcoop.inspect.targets import TargetError, gemm_target

DOCS = Path(__file__).resolve().parents[1] / "docs"
PATH = "vk-coopmat2-dense-fp16acc"
H100 = "NVIDIA H100 80GB HBM3"


def _fp16_sum(terms: np.ndarray, order: np.ndarray) -> np.float16:
    """Terms added one by one in ``order``, each sum rounded to fp16 (what an fp16 accumulator does)."""
    total = np.float16(0)
    for i in order:
        total = np.float16(total + np.float16(terms[i]))
    return total


def test_short_sums_keep_at_most_32_entries_of_b_per_column_and_nothing_else():
    operands = GemmOperands.make(GemmProblem("fp16", "square", 64, 512, 4096))
    short = short_sum_b(operands.b)
    kept = short != 0
    assert kept.sum(axis=0).max() <= FP16_EXACT_TERMS
    assert kept.sum() > 0.8 * FP16_EXACT_TERMS * short.shape[1]    # a few draws repeat, most do not
    assert np.array_equal(short[kept], operands.b[kept])
    with pytest.raises(gemm.GemmInputError, match="1 to 32"):
        short_sum_b(operands.b, terms=33)


def test_fp16_accumulation_in_any_order_is_exact_on_short_sums_and_not_on_the_case():
    """The reason the path is checked on short sums: there every order of fp16 additions gives the exact product;
    on the case's own B (K = 4096 terms) rounding shows, so no exact check is possible there."""
    operands = GemmOperands.make(GemmProblem("fp16", "square", 64, 64, 4096))
    short = operands.short_sums
    rng = np.random.default_rng(7)
    a = operands.pruned[operands.rows].astype(np.float64)
    rounded = 0
    for row in range(0, len(operands.rows), 8):
        for column in range(0, 64, 8):
            order = rng.permutation(a.shape[1])
            terms = a[row] * short.b[:, column].astype(np.float64)
            assert _fp16_sum(terms, order) == short.reference[row, column]
            assert _fp16_sum(terms, order[::-1]) == short.reference[row, column]
            full = a[row] * operands.b[:, column].astype(np.float64)
            rounded += _fp16_sum(full, order) != operands.reference[row, column]
    assert rounded > 0


def test_short_sums_share_a_and_the_rows_and_are_made_once():
    operands = GemmOperands.make(GemmProblem("fp16", "square", 128, 64, 256))
    short = operands.short_sums
    assert short is operands.short_sums
    assert short.pruned is operands.pruned and short.rows is operands.rows and short.problem == operands.problem
    exact = operands.pruned[operands.rows].astype(np.float64) @ short.b.astype(np.float64)
    assert np.array_equal(short.reference, exact.astype(np.float32))
    assert not np.array_equal(short.reference, operands.reference)
    # checked bit for bit: one fp16 ulp off passes the result type's tolerance, not the short sums'
    assert short.tolerance == 0.0 and operands.tolerance is None
    reference = np.array([[1.875]], np.float32)
    off = np.nextafter(np.float16(1.875), np.float16(2)).reshape(1, 1)
    assert gemm.check_output(off, reference)[0]
    assert not gemm.check_output(off, reference, short.tolerance)[0]


class _Bound:
    def __init__(self, path, operands, config):
        self.path, self.operands, self.config = path, operands, config

    def output_rows(self, rows):
        got = self.path.result(self.operands)[rows]
        return got.astype(np.float16)

    def time(self, iterations, warmup, flush_l2):
        self.path.timed.append(self.operands)
        return [1e-3] * iterations

    def release(self):
        pass


class _ShortSumPath:
    """A path computing A @ B exactly, checked on short sums as the fp16-accumulating path is."""
    name = PATH

    def __init__(self, wrong=False):
        self.wrong, self.bound, self.timed = wrong, [], []

    def supports(self, problem):
        return True, ""

    def configs(self, problem, tune):
        return ["x"]

    def check_operands(self, operands):
        return operands.short_sums

    def result(self, operands):
        product = operands.pruned.astype(np.float64) @ operands.b.astype(np.float64)
        return product + (1.0 if self.wrong else 0.0)

    def bind(self, operands, config):
        self.bound.append(operands)
        return _Bound(self, operands, config)

    def close(self):
        pass


def test_the_loop_checks_on_the_paths_check_operands_and_times_on_the_case():
    operands = GemmOperands.make(GemmProblem("fp16", "square", 64, 64, 256))
    path = _ShortSumPath()
    result = measure.measure_path(path, operands, iters=3, warmup=0, flush_l2=False, tune=False)
    assert result.status == "ok" and result.max_abs_error == 0
    assert path.bound == [operands.short_sums, operands]
    assert path.timed == [operands]


def test_a_path_wrong_on_its_check_operands_is_never_timed():
    operands = GemmOperands.make(GemmProblem("fp16", "square", 64, 64, 256))
    path = _ShortSumPath(wrong=True)
    result = measure.measure_path(path, operands, iters=3, warmup=0, flush_l2=False, tune=False)
    assert result.status == "failed" and "mismatches" in result.reason and result.tflops is None
    assert path.bound == [operands.short_sums] and path.timed == []


def test_the_path_takes_fp16_inputs_only_and_inspect_says_so_before_any_device_work():
    path = CoopMat2Fp16AccumulatingPath(SimpleNamespace(name="X", limits=DeviceLimits(sm_count=132)))
    assert path.supports(GemmProblem("fp16", "square", 64, 64, 64)) == (True, "X")
    supported, why = path.supports(GemmProblem("bf16", "square", 64, 64, 64))
    assert not supported and "fp16 inputs only" in why
    assert gemm_target("dense16").gemm_path == PATH
    with pytest.raises(TargetError, match="--dtype must be fp16"):
        gemm_target("dense16", dtype="bf16")
    assert PATH in bench.VULKAN_PATHS and PATH not in bench.CUDA_PATHS


def test_its_configurations_keep_256x256_tiles_in_fp16_registers_and_add_fp16_split_k_planes():
    _, flexible, _, limits = recorded_device(json.loads((DOCS / "h100-capabilities.json").read_text()))
    square = GemmProblem("fp16", "square", 8192, 8192, 8192)
    derived = derive_workgroup_configs(PATH, square, flexible, limits)
    assert derived[0].label() == "256:256x256x32u8g8"     # 256 fp16 accumulators = 128 registers an invocation
    assert "256:256x256x32u8g8" not in {c.label() for c in derive_workgroup_configs("vk-coopmat2-dense", square,
                                                                                       flexible, limits)}
    llm = GemmProblem("fp16", "llm", 8192, 32, 8192)
    for problem in (square, llm, GemmProblem("fp16", "llm", 8192, 16, 8192)):
        configs = seed_configs(H100, PATH, problem) + derive_workgroup_configs(PATH, problem, flexible, limits)
        splits = set()
        for config in configs:
            ran = config.for_problem(problem, 132)
            splits.add(ran.tile.split_k)
            kernel = path_kernel(PATH, ran, "fp16")
            assert kernel.types.key == "fp16->fp16"
            if ran.tile.split_k > 1:           # the last slice adds the fp16 planes in fp16, in the same dispatch
                (dispatch,) = kernel.template_launch().dispatches
                assert dispatch.defines["SPLIT_SUM"] == "LAST" and "partial sums" in dispatch.buffers
            gemm.check_workgroup_tile(flexible, kernel.types, ran.tile)
        assert (splits == {1}) == (problem is square), (problem, splits)   # narrow ones fill a wave


def test_its_roofline_is_the_fp16_accumulating_ceiling_and_its_c_is_two_bytes():
    ceilings = {"vulkan": {"mma": {"coopmat2-workgroup": {"fp16->fp32": {"tflops": 650.0},
                                                          "fp16->fp16": {"tflops": 670.0}}},
                           "bandwidth": {"read": {"gb_per_s": 3000.0}}}}
    assert roofline.attainable_tflops(PATH, "fp16", 8192, 8192, 8192, ceilings) == 670.0
    assert roofline.attainable_tflops("vk-coopmat2-dense", "fp16", 8192, 8192, 8192, ceilings) == 650.0
    m, n, k = 8192, 32, 8192
    assert roofline.bytes_moved(PATH, m, n, k) == roofline.bytes_moved("vk-coopmat2-dense", m, n, k) - 2 * m * n
    assert roofline.attainable_tflops(PATH, "bf16", 8192, 8192, 8192, ceilings) is None


@pytest.mark.gpu
def test_on_the_gpu_the_fp16_accumulating_path_is_bit_exact_on_short_sums_and_timed(tmp_path):
    settings = bench.SparseBenchSettings(dtypes=["fp16", "bf16"], sizes=[512], shapes=["square", "llm"], iters=3,
                                         warmup=1, paths=[PATH], llm_tokens=32)
    outcome = bench.run_sparse_bench(settings, progress=False, cache=TuningCache(tmp_path / "tuning"))
    results = {(r.dtype, r.shape_class): r for r in outcome.results}
    if all(r.status == "skipped" and "fp16 inputs only" not in r.reason for r in results.values()):
        pytest.skip("no coopmat2 Vulkan device here: " + results["fp16", "square"].reason[:200])
    for shape in ("square", "llm"):
        r = results["fp16", shape]
        assert r.status == "ok", r.reason
        assert r.max_abs_error == 0 and r.tflops > 0
    assert results["bf16", "square"].status == "skipped"
