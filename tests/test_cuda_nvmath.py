"""cuSPARSELt and cuBLASLt through nvmath-python (vkcoop.cuda.cusparselt_nvmath, the cuBLAS path's nvmath
candidate) against fakes (tests/fake_nvmath.py on tests/fake_torch.py): what supports() says without nvmath,
the order of the binding calls, that every descriptor and plan is destroyed (also when a call fails), the
search through the search process, and the x cuSPARSELt ratio over the best cuSPARSELt row."""
from __future__ import annotations

import sys
import time

import pytest

import fake_nvmath
from fake_torch import FakeTorch, install
from vkcoop.bench import measure, report
from vkcoop.bench.sparse import add_ratios
from vkcoop.cuda.baselines import CsltConfig
from vkcoop.cuda.cusparselt_nvmath import NvmathCuSparseLtGemm
from vkcoop.cuda.paths import cuda_paths
from vkcoop.gemm.path import GemmOperands, GemmProblem

PROBLEM = GemmProblem("fp16", "llm", 64, 32, 128)
DESCRIPTORS = ["structured_descriptor_init", "dense_descriptor_init", "dense_descriptor_init",
               "matmul_descriptor_init", "matmul_alg_selection_init"]
DESTROYS = ["matmul_plan_destroy", "matmul_alg_selection_destroy", "matmul_descriptor_destroy",
            "mat_descriptor_destroy", "mat_descriptor_destroy", "mat_descriptor_destroy"]


def _operands():
    path = cuda_paths(["cuSPARSELt-nvmath"], warmup_seconds=0)[0]
    operands = GemmOperands.make(PROBLEM)
    return path, operands, path.uploads.of(operands)


def test_without_nvmath_supports_says_why_in_one_line_naming_the_extra(monkeypatch):
    install(monkeypatch, FakeTorch())
    monkeypatch.setitem(sys.modules, "nvmath", None)
    ok, why = NvmathCuSparseLtGemm().supports(64, 32, 128, "float16")
    assert not ok and "nvmath-python" in why and "vkcoop[cuda]" in why and "\n" not in why
    result = measure.measure_path(cuda_paths(["cuSPARSELt-nvmath"])[0], GemmOperands.make(PROBLEM), iters=1,
                                  warmup=0, flush_l2=False, tune=False)
    assert result.status == "skipped" and "vkcoop[cuda]" in result.reason


def test_a_library_nvmath_cannot_load_is_a_reason_too(monkeypatch):
    install(monkeypatch, FakeTorch())
    library = fake_nvmath.install(monkeypatch)

    def missing(which):
        raise RuntimeError("libcusparseLt.so.0: cannot open shared object file")

    monkeypatch.setattr(sys.modules["nvmath.bindings.cusparseLt"], "get_property", missing)
    ok, why = NvmathCuSparseLtGemm().supports(64, 32, 128, "float16")
    assert not ok and "cannot load libcusparseLt" in why and "cannot open shared object" in why
    assert library.calls == []


@pytest.mark.parametrize("dtype", ["float16", "int8"])
def test_a_shape_off_sixteen_is_refused_naming_each_bad_dimension(monkeypatch, dtype):
    from vkcoop.cuda.typed_libraries import TypedNvmathCuSparseLtGemm
    install(monkeypatch, FakeTorch())
    fake_nvmath.install(monkeypatch)
    ok, why = TypedNvmathCuSparseLtGemm().supports(64, 24, 136, dtype)
    assert not ok and why == "cuSPARSELt needs multiples of 16: N=24, K=136"
    ok, why = TypedNvmathCuSparseLtGemm().supports(64, 32, 128, dtype)
    assert ok and why.startswith("nvmath-python, ")


def test_a_bind_makes_its_descriptors_and_plan_in_order_and_destroys_each_once(monkeypatch):
    install(monkeypatch, FakeTorch(max_alg=6, broken_alg=None))
    library = fake_nvmath.install(monkeypatch, cusparselt={"max_alg": 6})
    path, operands, (a, b) = _operands()
    bound = path.bind(operands, CsltConfig(alg_id=2, split_k=2, split_k_mode=2, transpose_result=True))
    calls = library.calls
    assert calls[:2] == ["init", "get_version"] and calls[2:7] == DESCRIPTORS
    assert calls[7:12] == ["matmul_alg_get_attribute"] + ["matmul_alg_set_attribute"] * 3 + ["matmul_plan_init"]
    assert calls[12:15] == ["sp_mma_compressed_size", "sp_mma_compress", "matmul_get_workspace"]
    assert calls[-1] == "matmul" and "matmul_search" not in calls
    assert sorted(library.live()) == ["handle", "matmul", "matrix", "matrix", "matrix", "plan", "selection"]
    rows = bound.output_rows(operands.rows)
    assert (rows.astype(float) == operands.reference).all()
    assert bound.config.startswith("cusparseLtMatmul {'alg_id': 2, 'split_k': 2, 'split_k_mode': 2}")
    library.calls.clear()
    bound.release()
    assert library.calls == DESTROYS and library.live() == ["handle"]
    # A is compressed once: a second configuration reuses it; cuSPARSELt's own search runs on the plan
    library.calls.clear()
    path.bind(operands, CsltConfig()).release()
    assert "sp_mma_compress" not in library.calls and "matmul_search" in library.calls
    assert library.calls.index("matmul_search") < library.calls.index("matmul")
    path.close()
    assert library.live() == [] and library.calls[-1] == "destroy"


@pytest.mark.parametrize("fail_on", ["matmul_alg_selection_init", "matmul_plan_init", "matmul"])
def test_a_call_that_fails_leaves_nothing_behind(monkeypatch, fail_on):
    install(monkeypatch, FakeTorch())
    library = fake_nvmath.install(monkeypatch, cusparselt={"fail_on": fail_on})
    path, operands, _ = _operands()
    with pytest.raises(fake_nvmath.CuSparseLtError, match=fail_on):
        path.bind(operands, CsltConfig(alg_id=1))
    assert library.live() == ["handle"]
    made = sum(call.endswith("_init") for call in library.calls) - (fail_on.endswith("_init"))
    destroyed = sum(call.endswith("destroy") for call in library.calls)
    assert made == destroyed > 0
    path.close()
    assert library.live() == []


def test_the_nvmath_search_runs_in_the_search_process_and_reports_the_library_version(monkeypatch):
    fake = install(monkeypatch, FakeTorch(max_alg=8, best_alg=3, broken_alg=None, host_ms=0.5))
    library = fake_nvmath.install(monkeypatch, cusparselt={"max_alg": 8, "poison_alg": 5, "broken_alg": 6})
    path = cuda_paths(["cuSPARSELt-nvmath"], warmup_seconds=0)[0]
    result = measure.measure_path(path, GemmOperands.make(PROBLEM), iters=5, warmup=1, flush_l2=False,
                                  tune=False, deadline=time.monotonic() + 120)
    probed = {e["config"]: e for e in result.tuning if e.get("where") == "search process"}
    assert {f"alg{a}-tr" for a in range(8)} <= set(probed) and not any(k.startswith("alg8") for k in probed)
    assert probed["alg5-tr"]["status"] == "error" and probed["alg5-tr"]["reason"].startswith("alg 5")
    assert "CUSPARSE_STATUS_INTERNAL_ERROR" in probed["alg5-tr"]["reason"]
    assert probed["alg6-tr"]["status"] == "failed"
    assert probed["alg7-tr"]["status"] == "ok" and "alg3-sk2-mode2-tr-graph" in probed
    assert result.status == "ok" and "in a CUDA graph" in result.config and "'alg_id': 3" in result.config
    assert result.library == "nvmath-python 1.0.0-fake, cuSPARSELt 0.8.1 (cusparseLtGetVersion 801)"
    assert not fake.poisoned and "matmul_search" not in library.calls   # this process ran the survivors only
    path.close()
    assert library.live() == []


def test_cublas_reports_nvmath_when_its_matmul_is_fastest_and_frees_it(monkeypatch):
    install(monkeypatch, FakeTorch(host_ms=0.01))
    fake_nvmath.install(monkeypatch, matmul_factor=0.5)
    freed = fake_nvmath.Matmul.freed
    path = cuda_paths(["cuBLAS"], warmup_seconds=0)[0]
    result = measure.measure_path(path, GemmOperands.make(PROBLEM), iters=5, warmup=1, flush_l2=False,
                                  tune=False, deadline=time.monotonic() + 120)
    probed = {e["config"] for e in result.tuning if e.get("where") == "search process"}
    assert {"mm", "mm-cublaslt", "nvmath", "nvmath-bcol", "nvmath-graph"} <= probed
    assert result.status == "ok" and result.config.startswith("nvmath.linalg.advanced.Matmul")
    assert "nvmath-python 1.0.0-fake" in result.library
    assert fake_nvmath.Matmul.freed > freed    # every Matmul bound here was freed on release


def _row(path, tflops, library="", case="fp16 llm 64x32x128"):
    r = measure.path_result(path, GemmProblem("fp16", "llm", 64, 32, 128), "ok" if tflops else "error")
    r.case, r.tflops, r.library = case, tflops, library
    return r


def test_the_cusparselt_ratio_is_over_the_fastest_cusparselt_row_and_names_it():
    rows = [_row("cuSPARSELt", 1000.0, "torch 2.11 _cslt_*, cuSPARSELt 0.8.0"),
            _row("cuSPARSELt-nvmath", 1250.0, "nvmath-python 1.0.0, cuSPARSELt 0.8.1"),
            _row("cuda-wgmma.sp", 1125.0), _row("cuBLAS", 900.0),
            _row("cuSPARSELt", 800.0, "torch 2.11 _cslt_*, cuSPARSELt 0.8.0", case="other"),
            _row("cuSPARSELt-nvmath", None, "nvmath-python 1.0.0, cuSPARSELt 0.8.1", case="other"),
            _row("cuda-wgmma.sp", 400.0, case="other")]
    add_ratios(rows)
    wgmma, other = rows[2], rows[6]
    assert wgmma.ratio_cusparselt == pytest.approx(0.9) and wgmma.ratio_cublas == pytest.approx(1.25)
    assert wgmma.cusparselt_reference == "cuSPARSELt-nvmath (nvmath-python 1.0.0, cuSPARSELt 0.8.1)"
    assert other.ratio_cusparselt == pytest.approx(0.5)     # nvmath's row failed there: over torch's
    assert other.cusparselt_reference == "cuSPARSELt (torch 2.11 _cslt_*, cuSPARSELt 0.8.0)"
    notes = report.library_notes(rows)
    assert "cuSPARSELt-nvmath: nvmath-python 1.0.0, cuSPARSELt 0.8.1" in notes
    assert ("x cuSPARSELt is over cuSPARSELt-nvmath (nvmath-python 1.0.0, cuSPARSELt 0.8.1): fp16 llm 64x32x128"
            in notes)


@pytest.mark.cuda
def test_the_nvmath_paths_check_and_time_on_the_gpu():
    from vkcoop.cuda import available
    from vkcoop.cuda.baselines import nvmath_version

    ok, why = available()
    if not ok:
        pytest.skip(f"CUDA paths unavailable: {why}")
    if nvmath_version() is None:
        pytest.skip("nvmath-python is not installed (pip install 'vkcoop[cuda]')")
    from vkcoop.cuda.baselines import BlasConfig, CsltConfig

    problem = GemmProblem("fp16", "square", 256, 256, 256)
    operands = GemmOperands.make(problem)
    results = {}
    # one search of the candidates this test is about (no stages): the library's own search and a planted id on
    # the plan, and nvmath's Matmul, each through the search process and then timed here
    planted = {"cuSPARSELt-nvmath": [CsltConfig(), CsltConfig(alg_id=0)], "cuBLAS": [BlasConfig(op="nvmath")]}
    for name, configs in planted.items():
        path = cuda_paths([name], warmup_seconds=0)[0]
        try:
            results[name] = measure.measure_path(path, operands, iters=5, warmup=1, flush_l2=False, tune=False,
                                                 configs=configs, deadline=time.monotonic() + 120,
                                                 search={"staged": False})
        finally:
            path.close()
        bad = [e for e in results[name].tuning if e["status"] not in ("ok", "budget")]
        assert results[name].status == "ok", (results[name].reason, bad[:8])
    nvmath = results["cuSPARSELt-nvmath"]
    assert "cuSPARSELt " in nvmath.library and "cusparseLtGetVersion" in nvmath.library
    probed = {e["config"]: e for e in nvmath.tuning if e.get("where") == "search process"}
    assert probed["search"]["status"] == "ok", probed["search"]     # cusparseLtMatmulSearch on the plan
    assert probed["alg0"]["status"] == "ok", probed["alg0"]
    blas = {e["config"]: e for e in results["cuBLAS"].tuning if e.get("where") == "search process"}
    assert blas["nvmath"]["status"] == "ok", blas["nvmath"]          # nvmath.linalg.advanced.Matmul
