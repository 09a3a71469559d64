"""The library baselines in tf32, e4m3, e5m2 and int8 (vkcoop.cuda.typed_libraries, vkcoop.cuda.cublaslt_imma)
against the fakes of tests/fake_torch.py and tests/fake_nvmath.py: which path takes which type and says why not,
the result types and layouts each library is asked for, cuBLASLt's int8 GEMM and everything it makes, a library's
refusal reported in its own words, and the exact check of each result. The last tests need a GPU."""
from __future__ import annotations

import sys
import time

import numpy as np
import pytest

import fake_nvmath
from fake_torch import FakeTorch, install
from vkcoop.bench import measure
from vkcoop.bench import sparse as bench
from vkcoop.bench.tuning import TuningCache
from vkcoop.cuda.baselines import BlasConfig
from vkcoop.cuda.mma_sync_paths import all_cuda_paths
from vkcoop.cuda.paths import cuda_paths
from vkcoop.gemm.path import GemmOperands, GemmProblem, check_bound

LIBRARIES = ("cuSPARSELt", "cuSPARSELt-nvmath", "cuBLAS")


def _problem(dtype):
    return GemmProblem(dtype, "llm", 64, 32, 128)


def _measure(name, dtype, quick=True):
    path = cuda_paths([name], warmup_seconds=0)[0]
    problem = _problem(dtype)
    configs = path.quick_configs(problem) if quick else path.configs(problem, True)
    result = measure.measure_path(path, GemmOperands.make(problem), iters=3, warmup=1, flush_l2=False, tune=False,
                                  configs=configs, deadline=time.monotonic() + 120, search={"staged": not quick})
    path.close()
    return result


@pytest.fixture
def fakes(monkeypatch):
    fake = install(monkeypatch, FakeTorch(host_ms=0.01, broken_alg=None))
    return fake, fake_nvmath.install(monkeypatch)


def test_each_path_says_which_types_it_takes(fakes):
    for dtype in ("tf32", "e4m3", "e5m2", "int8"):
        for name in LIBRARIES:
            ok, why = cuda_paths([name])[0].supports(_problem(dtype))
            assert ok and why.endswith({"tf32": "float32 -> float32", "int8": "int8 -> int32"}.get(
                dtype, "-> bfloat16")), (name, dtype, why)
    for name in LIBRARIES:
        assert cuda_paths([name])[0].supports(_problem("uint8")) == (False, "uint8: neither cuSPARSELt nor cuBLASLt "
                                                                     "has uint8 kernels (their 8-bit integer type is int8)")
    semi = cuda_paths(["torch-semi-structured"])[0]
    assert semi.supports(_problem("tf32"))[0]
    ok, why = semi.supports(_problem("int8"))
    assert not ok and "returns int8, not the int32 the other rows compute" in why
    ok, why = cuda_paths(["cuda-mma.sp"])[0].supports(_problem("tf32"))
    assert not ok and why.startswith("tf32: dtype float32 unsupported")
    wgmma = cuda_paths(["cuda-wgmma.sp"])[0]          # the hand-written wgmma.sp kernel runs every type
    assert all(wgmma.supports(GemmProblem(dtype, "square", 256, 256, 256))[0] for dtype in ("tf32", "e4m3", "uint8"))
    for path in all_cuda_paths(["cuda-mma.sync", "cuda-mma.sp-cap"], cap=None):
        ok, why = path.supports(_problem("e4m3"))
        assert not ok and why.endswith("takes fp16, bf16, not e4m3")


def test_cusparselt_through_torch_runs_the_8_bit_types_in_the_tn_form_and_row_major_b_is_refused_in_its_words(fakes):
    result = _measure("cuSPARSELt", "e4m3", quick=False)
    assert result.status == "ok" and result.max_abs_error == 0, result.reason
    assert "'out_dtype': torch.bfloat16" in result.config
    probed = {e["config"]: e for e in result.tuning if e.get("where") == "search process"}
    assert probed["search-bcol"]["status"] == "ok"
    refused = probed["search"]
    assert refused["status"] == "error" and "CUSPARSE_STATUS_NOT_SUPPORTED" in refused["reason"]
    assert "\n" not in refused["reason"]
    assert list(probed)[0] == "search-bcol"                 # B column-major is tried first


def test_cusparselt_through_nvmath_describes_int8_in_int32_and_its_result_is_exact(fakes):
    _, library = fakes
    path = cuda_paths(["cuSPARSELt-nvmath"], warmup_seconds=0)[0]
    operands = GemmOperands.make(_problem("int8"))
    bound = path.bind(operands, path.quick_configs(operands.problem)[0])
    assert library.described[-1] == (3, 3, 10, 0, 1)      # int8 A and B, int32 D, CUSPARSE_COMPUTE_32I, B under T
    rows = bound.output_rows(operands.rows)
    assert rows.dtype == np.int32 and check_bound(bound, operands)[0] is None
    bound.release()
    path.close()
    assert library.live() == []


def test_cublaslt_int8_takes_the_tn_form_picks_the_fastest_heuristic_algorithm_and_frees_everything(fakes):
    lt = sys.modules["nvmath.bindings.cublasLt"].library
    path = cuda_paths(["cuBLAS"], warmup_seconds=0)[0]
    operands = GemmOperands.make(_problem("int8"))
    bound = path.bind(operands, BlasConfig(op="imma", b_column_major=True))
    m, n, k = 64, 32, 128
    assert [(x["type"], x["rows"], x["cols"], x["ld"]) for x in lt.layouts] == [(3, k, n, k), (3, k, m, k),
                                                                                  (10, n, m, n)]
    assert "heuristic algorithm 2 of 4, autotuned" in bound.config          # the fake's fastest
    lt.runs.clear()
    rows = bound.output_rows(operands.rows)
    assert lt.runs == [2] and rows.dtype == np.int32 and check_bound(bound, operands)[0] is None
    bound.release()
    assert lt.live() == []
    with pytest.raises(fake_nvmath.CuBLASLtError, match="CUBLAS_STATUS_NOT_SUPPORTED"):
        path.bind(operands, BlasConfig(op="imma"))          # B row-major: the NN form, which IMMA refuses
    assert lt.live() == []


def test_a_wrong_int32_result_fails_the_check_and_is_never_timed(monkeypatch):
    """Planted fault: the fastest cuBLASLt algorithm adds one to one element; the row must fail, not be timed."""
    install(monkeypatch, FakeTorch(host_ms=0.01, broken_alg=None))
    fake_nvmath.install(monkeypatch, cublaslt={"wrong_algo": 2})
    result = _measure("cuBLAS", "int8")
    assert result.status == "failed" and result.tflops is None
    assert "1 mismatches; first at row 0, column 0" in result.reason


def test_a_combination_both_libraries_refuse_is_reported_in_their_own_words(fakes):
    fake, _ = fakes
    result = _measure("cuBLAS", "e5m2")
    # a refusal, not a failure of ours: the row is skipped, its reason the libraries' own words
    assert result.status == "skipped" and result.tflops is None and "\n" not in result.reason
    assert result.reason.startswith("the library refused every candidate: ")
    reasons = " / ".join(e["reason"] for e in result.tuning if e.get("status") == "error")
    assert "Multiplication of two Float8_e5m2 matrices is not supported" in reasons
    assert "Unsupported combination of dtypes for operands A (float8_e5m2)" in reasons
    assert not fake.poisoned                         # the refusals happened in the search process
    assert _measure("cuBLAS", "e4m3").status == "ok"


def test_tf32_turns_tf32_on_for_its_call_only(fakes):
    fake, _ = fakes
    path = cuda_paths(["cuBLAS"], warmup_seconds=0)[0]
    operands = GemmOperands.make(_problem("tf32"))
    bound = path.bind(operands, BlasConfig())
    fake.tf32_calls.clear()
    assert check_bound(bound, operands)[0] is None and bound.output_rows(operands.rows).dtype == np.float32
    assert fake.tf32_calls and all(fake.tf32_calls) and fake.matmul.allow_tf32 is False
    bound.release()


def test_typed_operands_reach_the_gpu_bit_for_bit(fakes):
    path = cuda_paths(["cuBLAS"])[0]
    for dtype in ("e5m2", "int8", "tf32"):
        operands = GemmOperands.make(_problem(dtype))
        a, b = path.uploads.of(operands)
        assert a.dense.array.dtype == operands.pruned.dtype and b.array.dtype == operands.b.dtype
        assert (a.dense.array.view(np.uint8) == operands.pruned.view(np.uint8)).all()
        assert (b.array.view(np.uint8) == operands.b.view(np.uint8)).all()
        assert a.sparsity == ("1:2" if dtype == "tf32" else "2:4")


# --- on the GPU --------------------------------------------------------------------------------------------------
@pytest.fixture
def cuda_ready():
    from vkcoop.cuda import available
    ok, why = available()
    if not ok:
        pytest.skip(why)


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", ("tf32", "e4m3", "e5m2", "int8"))
def test_on_the_gpu_each_library_runs_the_type_or_says_why_in_one_line(dtype, cuda_ready, tmp_path):
    settings = bench.SparseBenchSettings(dtypes=[dtype], sizes=[1024], shapes=["square", "llm"], llm_tokens=16,
                                         iters=3, warmup=1, paths=list(LIBRARIES) + ["torch-semi-structured"],
                                         search="quick")
    outcome = bench.run_sparse_bench(settings, progress=False, cache=TuningCache(tmp_path / "tuning"))
    for r in outcome.results:
        assert "\n" not in r.reason and r.status != "failed", (r.path, r.case, r.reason)
        if r.status == "ok":
            assert r.max_abs_error is not None and r.tflops > 0
    ran = {r.path for r in outcome.results if r.status == "ok"}
    assert ran & {"cuSPARSELt", "cuSPARSELt-nvmath"}, [(r.path, r.reason) for r in outcome.results]
    if dtype != "e5m2":
        assert "cuBLAS" in ran, [(r.path, r.reason) for r in outcome.results if r.path == "cuBLAS"]


@pytest.mark.cuda
def test_on_the_gpu_cublaslt_int8_is_exact_in_the_tn_form(cuda_ready):
    path = cuda_paths(["cuBLAS"], warmup_seconds=0)[0]
    operands = GemmOperands.make(GemmProblem("int8", "square", 512, 256, 1024))
    bound = path.bind(operands, BlasConfig(op="imma", b_column_major=True))
    try:
        assert check_bound(bound, operands)[0] is None
        assert bound.output_rows(operands.rows).dtype == np.int32
    finally:
        bound.release()
        path.close()
