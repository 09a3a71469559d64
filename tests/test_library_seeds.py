"""The library searches' shipped winners (vkcoop.bench.library_seeds): the packaged file is what the generator makes
of the committed deep runs, every entry reads back as the library cache reads its own, and a run's winner is the
fastest candidate timed in its measuring process."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from vkcoop.bench import library_seeds
from vkcoop.bench.library_cache import LibraryEntry
from vkcoop.cuda.baselines import BlasConfig, CsltConfig
from vkcoop.cuda.isolated import decode, label_of
from vkcoop.errors import InputError

REPO = Path(__file__).resolve().parent.parent
DEEP_RUNS = sorted((REPO / "docs" / "results").glob(f"*/{library_seeds.DEEP_RUN}"))


def test_the_committed_result_sets_hold_deep_runs():
    assert {p.parent.name for p in DEEP_RUNS} >= {"h100", "h200"}


def test_the_shipped_file_is_what_the_generator_makes_of_the_committed_deep_runs():
    made = library_seeds.render(library_seeds.generate(DEEP_RUNS, root=REPO))
    assert library_seeds.SHIPPED_FILE.read_text() == made


def test_every_shipped_entry_reads_back_and_its_configuration_is_its_label():
    document = json.loads(library_seeds.SHIPPED_FILE.read_text())
    assert document["runs"] == [p.relative_to(REPO).as_posix() for p in DEEP_RUNS]
    devices = library_seeds.load()
    assert set(devices) == {"NVIDIA H100 80GB HBM3", "NVIDIA H200"}
    for table in devices.values():
        assert {key.split("|")[0] for key in table} == set(library_seeds.LIBRARY_PATHS)
        for key, raw in table.items():
            entry = LibraryEntry.from_dict(raw)
            assert entry.depth == "deep" and label_of(decode(entry.config)) == entry.label, key


def test_the_shipped_winner_is_the_deep_runs_fastest_candidate_timed_in_its_measuring_process():
    run = json.loads((REPO / "docs/results/h100" / library_seeds.DEEP_RUN).read_text())
    result = next(r for r in run["results"] if r["path"] == "cuBLAS" and r["dtype"] == "fp16" and r["n"] == 8192)
    timed = {e["config"]: e["median_ms"] for e in result["tuning"] if "where" not in e and e["status"] == "ok"}
    probed = {e["config"]: e["median_ms"] for e in result["tuning"] if e.get("where") and e["status"] == "ok"}
    fastest_timed, fastest_probed = min(timed, key=timed.get), min(probed, key=probed.get)
    assert fastest_timed != fastest_probed     # the run's probe and its measuring process disagree here
    shipped = library_seeds.load()["NVIDIA H100 80GB HBM3"]["cuBLAS|fp16|8192x8192x8192"]
    assert shipped["label"] == fastest_timed and shipped["median_ms"] == result["median_ms"]


def _run(search="deep", results=(), device="NVIDIA H200"):
    return {"settings": {"search": search}, "results": list(results),
            "environment": {"devices": {"cuda": {"name": device, "uuid": "cd" * 16}},
                            "timestamp_utc": "2026-11-28T08:30:34+00:00"}}


def _result(path, tuning, median_ms=1.0, status="ok"):
    return {"path": path, "dtype": "fp16", "m": 64, "n": 32, "k": 128, "status": status, "median_ms": median_ms,
            "tflops": 1.0, "library": "torch 2.11", "tuning": tuning}


def test_a_winner_comes_from_the_measuring_process_and_a_failed_row_ships_nothing():
    tuning = [{"config": "alg3", "status": "ok", "median_ms": 0.1, "where": "search process"},
              {"config": "search-tr", "status": "ok", "median_ms": 0.3},
              {"config": "alg7-sk2-mode1", "status": "ok", "median_ms": 0.2},
              {"config": "alg5", "status": "failed", "reason": "wrong", "median_ms": 0.01}]
    device, winners = library_seeds.winners_of_run(_run(results=[
        _result("cuSPARSELt-nvmath", tuning), _result("cuBLAS", [], status="error"),
        _result("torch-semi-structured", [{"config": "graph", "status": "ok", "median_ms": 0.5}]),
        _result("cuda-wgmma.sp", [{"config": "128x256", "status": "ok", "median_ms": 0.1}])]), "run.json")
    assert device == "NVIDIA H200"
    assert sorted(winners) == ["cuSPARSELt-nvmath|fp16|64x32x128", "torch-semi-structured|fp16|64x32x128"]
    cslt = winners["cuSPARSELt-nvmath|fp16|64x32x128"]
    assert cslt["label"] == "alg7-sk2-mode1" and decode(cslt["config"]) == CsltConfig(7, 2, 1)
    assert winners["torch-semi-structured|fp16|64x32x128"]["config"] == "graph"


def test_two_runs_of_one_gpu_keep_the_faster_winner(tmp_path):
    slow = _run(results=[_result("cuBLAS", [{"config": "mm", "status": "ok", "median_ms": 2.0}], median_ms=2.0)])
    fast = _run(results=[_result("cuBLAS", [{"config": "nvmath-bcol", "status": "ok", "median_ms": 1.0}],
                                 median_ms=1.0)])
    paths = []
    for name, run in (("a.json", slow), ("b.json", fast)):
        (tmp_path / name).write_text(json.dumps(run))
        paths.append(tmp_path / name)
    document = library_seeds.generate(paths, root=tmp_path)
    assert document["runs"] == ["a.json", "b.json"]
    entry = document["devices"]["NVIDIA H200"]["cuBLAS|fp16|64x32x128"]
    assert entry["label"] == "nvmath-bcol" and decode(entry["config"]) == BlasConfig("nvmath", b_column_major=True)


@pytest.mark.parametrize("run, message", [
    (_run(search="quick"), "not deep; only deep winners are shipped"),
    (_run(device=""), "names no CUDA device"),
])
def test_a_run_that_cannot_ship_winners_is_refused_in_one_line(run, message):
    with pytest.raises(InputError, match=message) as error:
        library_seeds.winners_of_run(run, "run.json")
    assert str(error.value).startswith("run.json: ") and "\n" not in str(error.value)


@pytest.mark.parametrize("path, label", [("cuBLAS", "mm-graph-bcol"), ("cuSPARSELt", "alg3-tr-sk2"),
                                         ("cuSPARSELt", "search-x"), ("torch-semi-structured", "alg3"),
                                         ("cuda-mma.sp", "search")])
def test_a_label_out_of_the_grammar_is_refused(path, label):
    with pytest.raises(ValueError, match=repr(label)):
        library_seeds.config_of(path, label)


def test_every_label_a_search_writes_parses_back():
    configs = [CsltConfig(), CsltConfig(0), CsltConfig(7, 4, 2, True, True, True), CsltConfig(None, 1, -1, True),
               CsltConfig(3, 2, -1, False, True)]
    assert all(CsltConfig.from_label(c.label()) == c for c in configs)
    blas = [BlasConfig(), BlasConfig("nvmath", b_column_major=True), BlasConfig(library="cublaslt", graph=True),
            BlasConfig("scaled_mm", "cublas", True, True)]
    assert all(BlasConfig.from_label(c.label()) == c for c in blas)
