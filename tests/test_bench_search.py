"""The library searches of the CUDA baselines (cuSPARSELt, torch's semi-structured tensor, cuBLAS) through the
one measurement loop, against a fake torch (tests/fake_torch.py): no GPU, no torch. The candidates are tried in
a search process (vkcoop.cuda.isolated) that runs the same fake; only the survivors are timed here."""
from __future__ import annotations

import pytest

from fake_torch import FakeTorch, install
from vkcoop.bench import measure
from vkcoop.bench.tuning import Tuner, TuningCache
from vkcoop.cuda import paths
from vkcoop.cuda.baselines import CsltConfig
from vkcoop.cuda.paths import FALLBACK_ALG_ID_COUNT, SPLIT_K_CHOICES, SPLIT_K_MODES, cuda_paths
from vkcoop.gemm.path import GemmOperands, GemmProblem

PROBLEM = GemmProblem("fp16", "llm", 64, 32, 128)


def _search(name: str, problem=PROBLEM, budget: float = 60.0, tmp_path=None, depth: str = "deep"):
    path = cuda_paths([name], warmup_seconds=0)[0]
    tuner = Tuner(TuningCache(tmp_path), {"cuda": None}, search_budget=budget, search_depth=depth)
    plan = tuner.plan(path, problem)
    result = measure.measure_path(path, GemmOperands.make(problem), iters=5, warmup=1, flush_l2=False,
                                  tune=False, configs=plan.configs, deadline=plan.deadline, search=plan.search)
    return plan, result


def probed(result) -> dict:
    """The search process's entries, by label."""
    return {e["config"]: e for e in result.tuning if e.get("where") == "search process" and "config" in e}


def timed(result) -> dict:
    """The entries of the configurations timed in this process, by label."""
    return {e["config"]: e for e in result.tuning if "where" not in e and "config" in e}


def test_cusparselt_search_tries_every_algorithm_checks_each_first_and_reports_the_best(monkeypatch, tmp_path):
    fake = install(monkeypatch, FakeTorch(max_alg=5, library_pick=(1, 1, -1), best_alg=3, broken_alg=4,
                                          host_ms=0.5, base_ms=0.2))
    plan, result = _search("cuSPARSELt", tmp_path=tmp_path)
    assert plan.source == "search"
    tried = probed(result)
    # stage 0: the library's own pick for each B layout and result layout, and the default algorithm
    assert {"search", "search-tr", "search-bcol", "search-tr-bcol", "alg0"} <= set(tried)
    # stage 1: every algorithm id below the limit mm_search reports (5: ids 0..4), with the best layout
    assert {f"alg{a}-tr" for a in range(5)} <= set(tried) and not any(label.startswith("alg5") for label in tried)
    # the broken algorithm fails its check and is never timed, and never reaches this process
    assert tried["alg4-tr"]["status"] == "failed" and "median_ms" not in tried["alg4-tr"]
    assert fake.calls[4] == 0 and not any("alg4" in label for label in timed(result))
    # stage 2: split-K and its two modes for the two best algorithm ids
    for split in SPLIT_K_CHOICES:
        for mode in SPLIT_K_MODES:
            assert f"alg3-sk{split}-mode{mode}-tr" in tried
    # stage 3: the winner replayed from a CUDA graph, without the 0.5 ms of host work per call
    assert "alg3-sk2-mode2-tr-graph" in tried
    # this process timed only the fastest survivors, the graph first
    assert list(timed(result))[0] == "alg3-sk2-mode2-tr-graph" and len(timed(result)) == 3
    assert all(e["status"] == "ok" for e in timed(result).values())
    assert result.status == "ok" and "in a CUDA graph" in result.config and "'alg_id': 3" in result.config
    library = tried["search-tr"]["median_ms"]
    assert result.median_ms < library / 2          # far better than what the library's own search picked
    assert all(e["status"] in ("ok", "failed", "error") for e in result.tuning)
    assert result.p10_ms <= result.median_ms <= result.p90_ms and result.iterations == 5
    assert "torch" in result.library and "cuSPARSELt 0.8.0" in result.library


def test_cusparselt_search_without_mm_search_tries_ids_until_the_library_refuses(monkeypatch, tmp_path):
    # Each refused id costs a new search process (a second or two here): 6 ids show what 16 would.
    fallback = 6
    assert FALLBACK_ALG_ID_COUNT > fallback
    monkeypatch.setattr(paths, "FALLBACK_ALG_ID_COUNT", fallback)
    install(monkeypatch, FakeTorch(max_alg=3, library_pick=(0, 1, -1), best_alg=2, broken_alg=-1,
                                   with_mm_search=False))
    _, result = _search("cuSPARSELt", tmp_path=tmp_path)
    tried = probed(result)
    assert {f"alg{a}" for a in range(fallback)} <= set(tried) or {f"alg{a}-tr" for a in range(fallback)} <= set(tried)
    assert not any(label.startswith(f"alg{fallback}") for label in tried)
    refused = [e for e in result.tuning if e["status"] == "error"]
    assert len(refused) == fallback - 3 and all("INVALID_VALUE" in e["reason"] for e in refused)
    assert result.status == "ok" and "'alg_id': 2" in result.config


def test_the_search_budget_bounds_the_cusparselt_search(monkeypatch, tmp_path):
    install(monkeypatch, FakeTorch())
    _, result = _search("cuSPARSELt", budget=1e-6, tmp_path=tmp_path)
    assert result.status == "ok"
    statuses = [e["status"] for e in result.tuning]
    assert statuses == ["ok", "budget", "ok"]   # one candidate probed, the rest counted, the survivor timed
    assert "4 configuration(s) not tried" in result.tuning[1]["reason"]


def test_cusparselt_shape_rules_skip_with_the_reason(monkeypatch, tmp_path):
    install(monkeypatch, FakeTorch())
    _, result = _search("cuSPARSELt", GemmProblem("fp16", "llm", 64, 1, 128), tmp_path=tmp_path)
    assert result.status == "skipped" and "N=1" in result.reason


def test_semi_structured_path_is_timed_plain_and_from_a_graph(monkeypatch, tmp_path):
    install(monkeypatch, FakeTorch(host_ms=0.5))
    _, result = _search("torch-semi-structured", tmp_path=tmp_path)
    assert list(probed(result)) == ["default", "graph"] and list(timed(result)) == ["graph", "default"]
    assert result.status == "ok" and "in a CUDA graph" in result.config
    assert "SemiStructured" in result.config


def test_cublas_search_tries_the_backends_and_restores_the_process_wide_choice(monkeypatch, tmp_path):
    monkeypatch.setitem(__import__("sys").modules, "nvmath", None)   # nvmath-python not installed
    fake = install(monkeypatch, FakeTorch(host_ms=0.01))
    _, result = _search("cuBLAS", tmp_path=tmp_path)
    tried = probed(result)
    # no _scaled_mm: torch 2.11 refuses fp16/bf16 there (fp8 only), and each refusal cost a search process
    assert set(tried) == {"mm", "mm-cublaslt", "mm-bcol", "mm-cublaslt-graph"}
    assert all(entry["status"] == "ok" for entry in tried.values())
    assert result.status == "ok" and "cublaslt" in result.config
    assert fake.blas_library == "cublas"     # the process-wide backend choice is put back


def test_cusparselt_labels_name_every_option():
    assert CsltConfig().label() == "search"
    assert CsltConfig(7, 4, 2, True, True, True).label() == "alg7-sk4-mode2-tr-bcol-graph"


def test_hand_written_kernels_offer_their_keys_auto_first(monkeypatch):
    install(monkeypatch, FakeTorch())
    mma, wgmma = cuda_paths(["cuda-mma.sp", "cuda-wgmma.sp"], warmup_seconds=0)
    square = GemmProblem("bf16", "square", 4096, 4096, 4096)
    assert mma.configs(square, False) == ["256x128k128p"]
    keys = wgmma.configs(square, True)
    assert keys[0] == "128x256" and len(keys) > 3 and len(set(keys)) == len(keys)
    assert wgmma.config_from_label("128x128", square) == "128x128"
    assert wgmma.config_from_label("9x9", square) is None
    narrow = GemmProblem("fp16", "llm", 4096, 16, 4096)
    from vkcoop.cuda import WgmmaSpGemm
    narrow_keys = wgmma.configs(narrow, True)
    assert narrow_keys[0] == "128x16cs" and all(WgmmaSpGemm.CONFIGS[key].bn == 16 for key in narrow_keys)
    ok, why = wgmma.supports(GemmProblem("fp16", "llm", 4096, 1, 4096))
    assert not ok and "N=1" in why
    mlp = GemmProblem("fp16", "mlp", 4096, 11008, 4096)
    assert wgmma.supports(mlp)[0] and "128x256" in wgmma.configs(mlp, True)


@pytest.mark.parametrize("budget", [0.0, -1.0])
def test_budgets_must_be_positive(budget):
    from vkcoop.bench import sparse
    with pytest.raises(ValueError, match="budget"):
        sparse.run_sparse_bench(sparse.SparseBenchSettings(dtypes=["fp16"], sizes=[64], shapes=["llm"],
                                                           tune_budget_s=budget), progress=False)
