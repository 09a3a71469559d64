"""Remembered library searches (vkcoop.bench.library_cache) and the run's one search process
(vkcoop.cuda.isolated.SearchProcess), against the fake torch of tests/fake_torch.py, which the search processes
run too: no GPU, no torch."""
from __future__ import annotations

import json

import pytest

from fake_torch import FakeTorch, install
from vkcoop import cli
from vkcoop.bench import measure
from vkcoop.bench.identity import DeviceIdentity
from vkcoop.bench.library_cache import LibraryCache, LibraryEntry, library_key
from vkcoop.bench.tuning import Tuner, TuningCache, cached_entries
from vkcoop.cuda import isolated
from vkcoop.cuda.baselines import CsltConfig
from vkcoop.cuda.paths import cuda_paths
from vkcoop.gemm.path import GemmOperands, GemmProblem

PROBLEM = GemmProblem("fp16", "llm", 64, 32, 128)
GPU = DeviceIdentity("NVIDIA H100 80GB HBM3", "ab" * 16, "580.159.4")


class Run:
    """One bench run's library side: a tuner over a cache folder, its search process, a path."""

    def __init__(self, tmp_path, depth="quick", name="cuSPARSELt", messages=None):
        self.cache = TuningCache(tmp_path, log=(messages.append if messages is not None else None))
        self.tuner = Tuner(self.cache, {"cuda": GPU}, search_budget=60.0, search_depth=depth)
        self.path = cuda_paths([name], warmup_seconds=0)[0]
        self.searcher = isolated.SearchProcess(warmup_seconds=0)
        self.path.searcher = self.searcher

    def measure(self, problem=PROBLEM, operands=None):
        plan = self.tuner.plan(self.path, problem)
        result = measure.measure_path(self.path, operands or GemmOperands.make(problem), iters=5, warmup=1,
                                      flush_l2=False, tune=False, configs=plan.configs, deadline=plan.deadline,
                                      search=plan.search)
        result.config_source = plan.source
        self.tuner.finish(plan, problem, result, self.path)
        return plan, result

    def close(self):
        self.searcher.close()
        self.path.close()


def measured_once(tmp_path, depth="quick", messages=None):
    """(plan, result, run) of one run measuring PROBLEM; the run is closed."""
    run = Run(tmp_path, depth=depth, messages=messages)
    try:
        plan, result = run.measure()
    finally:
        run.close()
    return plan, result, run


def no_child_start(self):
    raise AssertionError("a search process was started")


@pytest.fixture
def no_child(monkeypatch):
    """Make any start of a search process fail the test."""
    monkeypatch.setattr(isolated.SearchProcess, "start", no_child_start)


def _probed(result) -> list:
    return [e["config"] for e in result.tuning if e.get("where") == "search process" and "config" in e]


def _entry(tmp_path) -> dict:
    data = json.loads((tmp_path / f"{GPU.file_stem}.json").read_text())
    return data["library"][library_key("cuSPARSELt", PROBLEM)]


def test_a_quick_search_tries_the_librarys_own_choice_and_is_remembered(monkeypatch, tmp_path):
    install(monkeypatch, FakeTorch(max_alg=5, best_alg=3, broken_alg=4))
    plan, result, run = measured_once(tmp_path)
    assert plan.source == "search" and plan.configs == [CsltConfig()] and plan.search["staged"] is False
    assert result.status == "ok" and _probed(result) == ["search"]     # cuSPARSELt's own search, nothing more
    entry = _entry(tmp_path)
    assert entry["depth"] == "quick" and entry["label"] == "search" and entry["device"] == GPU.uuid
    assert entry["versions"] == run.path.version() and "cuSPARSELt 0.8.0" in entry["versions"]
    assert entry["median_ms"] == pytest.approx(result.median_ms) and entry["config"] == isolated.encode(CsltConfig())
    assert run.searcher.started == 1


def test_a_remembered_winner_runs_here_without_a_search_process(monkeypatch, tmp_path):
    install(monkeypatch, FakeTorch(max_alg=5, best_alg=3, broken_alg=4))
    _, searched, _ = measured_once(tmp_path, depth="deep")
    assert searched.found_by == "deep"             # a later stage's winner (the graph), the deep search's own
    monkeypatch.setattr(isolated.SearchProcess, "start", no_child_start)
    for depth in ("quick", "deep", "cached"):      # a deep winner serves every depth
        plan, result, again = measured_once(tmp_path, depth=depth)
        assert plan.source == "cache" and plan.search is False and result.status == "ok"
        assert result.found_by == "cached"
        assert _probed(result) == [] and result.config == searched.config   # the same bound configuration
    assert _entry(tmp_path)["label"] == "alg3-sk2-mode2-tr-graph"


def test_a_quick_winner_does_not_serve_a_deep_run(monkeypatch, tmp_path):
    install(monkeypatch, FakeTorch(max_alg=5, best_alg=3, broken_alg=4))
    for depth, source, stored in (("quick", "search", "quick"), ("quick", "cache", "quick"),
                                  ("deep", "search", "deep"), ("quick", "cache", "deep")):
        plan, _, run = measured_once(tmp_path, depth=depth)
        assert (depth, plan.source) == (depth, source) and _entry(tmp_path)["depth"] == stored


def test_the_cached_depth_searches_nothing(monkeypatch, tmp_path, no_child):
    install(monkeypatch, FakeTorch())
    plan, result, run = measured_once(tmp_path, depth="cached")
    assert plan.source == "default" and plan.configs == [CsltConfig()] and plan.search is False
    assert result.status == "ok" and _probed(result) == []
    assert not (tmp_path / f"{GPU.file_stem}.json").exists()     # nothing searched, nothing remembered


def _plant(tmp_path, entry: dict, key=None) -> None:
    cache = TuningCache(tmp_path)
    cache.section(GPU, "library")[key or library_key("cuSPARSELt", PROBLEM)] = entry
    cache.save(GPU)


def _good_entry(versions: str, **changes) -> dict:
    entry = LibraryEntry(isolated.encode(CsltConfig(3)), "alg3", versions, "quick", GPU.uuid, 0.1).to_dict()
    entry.update(changes)
    return entry


def test_a_refused_candidate_is_never_tried_again_under_the_same_versions(monkeypatch, tmp_path):
    install(monkeypatch, FakeTorch(max_alg=5, best_alg=3, broken_alg=4))
    versions = cuda_paths(["cuSPARSELt"], warmup_seconds=0)[0].version()
    _plant(tmp_path, _good_entry(versions, refused={"alg4-tr": "alg 4-tr: wrong result"}))
    plan, result, run = measured_once(tmp_path, depth="deep")   # the quick entry does not serve a deep run: it searches
    assert plan.search["refused"] == {"alg4-tr": "alg 4-tr: wrong result"}
    assert "alg4-tr" not in _probed(result) and {"alg3-tr", "alg2-tr"} <= set(_probed(result))
    skipped = [e for e in result.tuning if e["status"] == "skipped"]
    assert len(skipped) == 1 and "refused under these library versions" in skipped[0]["reason"]
    assert "alg4-tr" in _entry(tmp_path)["refused"]      # kept for the next search


def test_an_entry_of_other_library_versions_is_ignored_with_its_refusals(monkeypatch, tmp_path):
    install(monkeypatch, FakeTorch(max_alg=5, best_alg=3, broken_alg=4))
    _plant(tmp_path, _good_entry("torch 0.1 _cslt_*, cuSPARSELt 0.1.0", depth="deep",
                                 refused={"alg4-tr": "refused by an older cuSPARSELt"}))
    messages = []
    plan, result, run = measured_once(tmp_path, depth="deep", messages=messages)
    assert plan.source == "search" and plan.search["refused"] == {} and "alg4-tr" in _probed(result)
    assert messages == []                             # ignored, not an error
    entry = _entry(tmp_path)
    assert entry["versions"] == run.path.version() and "mismatches" in entry["refused"]["alg4-tr"]


@pytest.mark.parametrize("damage, why", [
    (lambda e: e.update(config=17), "configuration is not a label or a record"),
    (lambda e: e.update(config={"type": "NoSuchConfig", "fields": {}}), "does not read back"),
    (lambda e: e.pop("median_ms"), "lacks median_ms"),
    (lambda e: e.update(depth="shallow"), "depth 'shallow'"),
    (lambda e: e.update(device="cd" * 16), "measured on another device"),
])
def test_a_damaged_or_foreign_entry_is_dropped_with_one_line_and_searched_again(monkeypatch, tmp_path, damage, why):
    install(monkeypatch, FakeTorch())
    versions = cuda_paths(["cuSPARSELt"], warmup_seconds=0)[0].version()
    entry = _good_entry(versions)
    damage(entry)
    _plant(tmp_path, entry)
    messages = []
    plan, result, run = measured_once(tmp_path, messages=messages)
    assert plan.source == "search" and result.status == "ok"
    assert len(messages) == 1 and why in messages[0] and "searched again" in messages[0]
    assert "\n" not in messages[0]
    assert LibraryEntry.from_dict(_entry(tmp_path)).label == "search"    # replaced by the new search


def test_a_truncated_cache_file_is_rejected_and_rebuilt(monkeypatch, tmp_path):
    install(monkeypatch, FakeTorch())
    _plant(tmp_path, _good_entry("v"))
    file = tmp_path / f"{GPU.file_stem}.json"
    file.write_text(file.read_text()[:40])
    messages = []
    plan, _, run = measured_once(tmp_path, messages=messages)
    assert plan.source == "search" and len(messages) == 1 and "is not JSON" in messages[0]
    assert (tmp_path / f"{file.name}.corrupt").exists() and _entry(tmp_path)["depth"] == "quick"


def test_one_search_process_serves_every_search_and_a_killed_one_is_replaced(monkeypatch, tmp_path):
    install(monkeypatch, FakeTorch(max_alg=6, best_alg=3, broken_alg=None, segv_alg=2))
    first, second = GemmOperands.make(PROBLEM), GemmOperands.make(GemmProblem("fp16", "llm", 128, 32, 128))
    paths = {name: cuda_paths([name], warmup_seconds=0)[0] for name in ("cuSPARSELt", "cuBLAS")}
    with isolated.SearchProcess(warmup_seconds=0) as searcher:
        for path in paths.values():
            path.searcher = searcher
        quick = paths["cuBLAS"].quick_configs(PROBLEM)
        _, record = paths["cuBLAS"].search(first, quick, staged=False)
        _, record2 = paths["cuSPARSELt"].search(first, [CsltConfig()], staged=False)
        _, record3 = paths["cuBLAS"].search(second, quick, staged=False)
        assert searcher.started == 1                 # two paths, two cases: one child
        assert all(e["status"] == "ok" for e in record + record2 + record3)
        _, killed = paths["cuSPARSELt"].search(second, [CsltConfig(2), CsltConfig(3)], staged=False)
        assert [e["status"] for e in killed] == ["error", "ok"] and "SIGSEGV" in killed[0]["reason"]
        _, after = paths["cuBLAS"].search(first, quick, staged=False)
        assert searcher.started == 2 and all(e["status"] == "ok" for e in after)
    for path in paths.values():
        path.close()


def test_bench_tuning_lists_the_library_searches(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("VKCOOP_CACHE_DIR", str(tmp_path))
    _plant(tmp_path / "tuning", _good_entry("torch 2.11 _cslt_*, cuSPARSELt 0.8.0",
                                            runners_up=[{"config": "alg2", "median_ms": 0.2}],
                                            refused={"alg47": "internal error"}))
    rows = cached_entries(tmp_path / "tuning")
    assert [(r["kind"], r["path"], r["shape"], r["label"]) for r in rows] == [
        ("library", "cuSPARSELt", "64x32x128", "alg3")]
    assert cli.main(["bench", "tuning"]) == 0
    out = capsys.readouterr().out
    assert "remembered library searches" in out and "64x32x128" in out and "cuSPARSELt 0.8.0" in out
    assert cli.main(["bench", "tuning", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert listed[0]["refused"] == {"alg47": "internal error"} and listed[0]["depth"] == "quick"


def test_the_library_cache_reads_back_what_it_wrote(tmp_path):
    cache = LibraryCache(TuningCache(tmp_path))
    entry = LibraryEntry(isolated.encode(CsltConfig(7, 2, 1, True)), "alg7-sk2-mode1-tr", "v1", "deep", GPU.uuid,
                         0.25, 512.0, [{"config": "alg3", "median_ms": 0.3}], {"alg47": "refused"})
    cache.store(GPU, "cuSPARSELt", PROBLEM, entry)
    again = LibraryCache(TuningCache(tmp_path)).lookup(GPU, "cuSPARSELt", PROBLEM, "v1")
    assert again == entry and isolated.decode(again.config) == CsltConfig(7, 2, 1, True)
    assert LibraryCache(TuningCache(tmp_path)).lookup(GPU, "cuSPARSELt", PROBLEM, "v2") is None
    assert again.serves("quick") and again.serves("deep") and again.serves("cached")


def test_ctrl_c_mid_run_keeps_what_was_measured_and_the_cache_readable(monkeypatch, tmp_path):
    from vkcoop.bench import sparse as bench

    install(monkeypatch, FakeTorch())
    run = Run(tmp_path)
    cases = [PROBLEM, GemmProblem("fp16", "llm", 128, 32, 128)]
    real_make = GemmOperands.make

    def make(problem, seed=0):
        if problem is cases[1]:
            raise KeyboardInterrupt     # Ctrl-C while the second case's inputs are made
        return real_make(problem, seed)

    monkeypatch.setattr(GemmOperands, "make", staticmethod(make))
    settings = bench.SparseBenchSettings(iters=3, warmup=0)
    try:
        results, interrupted = bench.run_cases(cases, {"cuSPARSELt": run.path}, {}, ["cuSPARSELt"], run.tuner,
                                               settings, progress=False)
    finally:
        run.close()
    assert interrupted and [r.case for r in results] == [PROBLEM.label] and results[0].status == "ok"
    assert [r["label"] for r in cached_entries(tmp_path)] == ["search"]   # the finished case was remembered


def test_a_save_stopped_halfway_leaves_the_old_file_whole(monkeypatch, tmp_path):
    cache = LibraryCache(TuningCache(tmp_path))
    entry = LibraryEntry("default", "default", "v1", "quick", GPU.uuid, 0.5)
    cache.store(GPU, "torch-semi-structured", PROBLEM, entry)
    before = (tmp_path / f"{GPU.file_stem}.json").read_text()

    def interrupted(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr("vkcoop.bench.tuning.os.replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        cache.store(GPU, "cuBLAS", PROBLEM, LibraryEntry("mm", "mm", "v1", "quick", GPU.uuid, 0.4))
    assert (tmp_path / f"{GPU.file_stem}.json").read_text() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"{GPU.file_stem}.json"]     # no half-written file


def test_the_bench_command_prints_the_partial_table_on_ctrl_c(monkeypatch, capsys):
    from vkcoop.bench import sparse as bench
    from vkcoop.bench.measure import PathResult

    done = PathResult("cuBLAS", "fp16 llm 64x32x128", "fp16", "llm", 64, 32, 128, status="ok", median_ms=0.01,
                      tflops=0.05, config="torch.mm mm")
    monkeypatch.setattr(bench, "run_sparse_bench",
                        lambda settings, **kwargs: bench.BenchResult([done], {"nvidia_smi": {}}, settings,
                                                                     interrupted=True))
    monkeypatch.setattr("vkcoop.cli.bench.check_device", lambda device: None)
    assert cli.main(["bench", "sparse", "--quiet"]) == 130
    out = capsys.readouterr().out
    assert "fp16 llm 64x32x128" in out and "interrupted: the table holds the paths measured so far" in out


# --- the shipped deep winners (vkcoop.bench.library_seeds) -------------------------------------------------------

def _ship(monkeypatch, config, *, device=GPU.name, key=None, raw=None) -> None:
    """Make ``config`` the package's deep winner for PROBLEM on ``device`` (``raw``: the entry as shipped)."""
    entry = raw or LibraryEntry(isolated.encode(config), isolated.label_of(config), "torch 2.11 _cslt_*", "deep",
                                "ef" * 16, 0.1).to_dict()
    monkeypatch.setattr("vkcoop.bench.library_seeds.load",
                        lambda: {device: {key or library_key("cuSPARSELt", PROBLEM): entry}})


def _timed(result) -> list:
    return [e["config"] for e in result.tuning if "where" not in e and "config" in e]


def test_a_bare_machine_tries_the_shipped_winner_beside_the_librarys_choice_and_keeps_the_faster(monkeypatch,
                                                                                                   tmp_path):
    install(monkeypatch, FakeTorch(max_alg=5, library_pick=(1, 1, -1), best_alg=3, broken_alg=4))
    _ship(monkeypatch, CsltConfig(3))                              # faster than the library's pick, algorithm 1
    plan, result, run = measured_once(tmp_path)
    assert plan.source == "search" and plan.configs == [CsltConfig(), CsltConfig(3)]
    assert plan.found == {"search": "quick", "alg3": "shipped"} and plan.search["pinned"] == ["alg3"]
    assert _probed(result) == ["search", "alg3"] and sorted(_timed(result)) == ["alg3", "search"]
    assert result.found_by == "shipped" and "'alg_id': 3" in result.config
    entry = _entry(tmp_path)
    assert entry["label"] == "alg3" and entry["depth"] == "quick"
    assert [r["config"] for r in entry["runners_up"]] == ["search"]
    monkeypatch.setattr(isolated.SearchProcess, "start", no_child_start)
    plan, again, _ = measured_once(tmp_path)                       # remembered: no search, the same winner
    assert plan.source == "cache" and plan.configs == [CsltConfig(3)] and again.found_by == "cached"


def test_a_slower_shipped_winner_loses_and_is_timed_beside_the_cached_one_without_a_search(monkeypatch, tmp_path):
    install(monkeypatch, FakeTorch(max_alg=5, library_pick=(3, 1, -1), best_alg=3, broken_alg=4))
    _ship(monkeypatch, CsltConfig(0))                              # slower than the library's pick, algorithm 3
    plan, result, run = measured_once(tmp_path)
    assert result.found_by == "quick" and "'alg_id': 3" in result.config
    entry = _entry(tmp_path)
    assert entry["label"] == "search" and "alg0" in [r["config"] for r in entry["runners_up"]]
    monkeypatch.setattr(isolated.SearchProcess, "start", no_child_start)
    plan, again, _ = measured_once(tmp_path)       # it ran in a search here under these versions: timed directly
    assert plan.source == "cache" and plan.search is False and plan.configs == [CsltConfig(), CsltConfig(0)]
    assert sorted(_timed(again)) == ["alg0", "search"] and again.found_by == "cached"


def test_a_cached_quick_winner_and_a_shipped_one_never_tried_here_go_through_the_search_process(monkeypatch,
                                                                                                tmp_path):
    install(monkeypatch, FakeTorch(max_alg=5, best_alg=3, broken_alg=4))
    versions = cuda_paths(["cuSPARSELt"], warmup_seconds=0)[0].version()
    _plant(tmp_path, _good_entry(versions, config=isolated.encode(CsltConfig(2)), label="alg2"))
    _ship(monkeypatch, CsltConfig(3))
    plan, result, run = measured_once(tmp_path)
    assert plan.source == "search" and plan.search["staged"] is False
    assert plan.found == {"alg2": "cached", "alg3": "shipped"} and plan.search["pinned"] == ["alg2", "alg3"]
    assert _probed(result) == ["alg2", "alg3"] and sorted(_timed(result)) == ["alg2", "alg3"]
    assert result.found_by == "shipped" and _entry(tmp_path)["label"] == "alg3"


def test_the_cached_depth_times_only_what_ran_here(monkeypatch, tmp_path, no_child):
    install(monkeypatch, FakeTorch())
    _ship(monkeypatch, CsltConfig(3))
    plan, result, _ = measured_once(tmp_path, depth="cached")      # nothing remembered: the library's own choice
    assert plan.configs == [CsltConfig()] and result.found_by == "default"
    versions = cuda_paths(["cuSPARSELt"], warmup_seconds=0)[0].version()
    _plant(tmp_path, _good_entry(versions, config=isolated.encode(CsltConfig(2)), label="alg2"))
    plan, result, _ = measured_once(tmp_path, depth="cached")      # the shipped winner never ran here
    assert plan.source == "cache" and plan.configs == [CsltConfig(2)] and result.found_by == "cached"


def test_a_deep_winner_of_this_machine_is_not_joined_by_the_shipped_one(monkeypatch, tmp_path, no_child):
    install(monkeypatch, FakeTorch())
    versions = cuda_paths(["cuSPARSELt"], warmup_seconds=0)[0].version()
    _plant(tmp_path, _good_entry(versions, config=isolated.encode(CsltConfig(2)), label="alg2", depth="deep"))
    _ship(monkeypatch, CsltConfig(3))
    plan, result, _ = measured_once(tmp_path)
    assert plan.configs == [CsltConfig(2)] and plan.found == {"alg2": "cached"}


def test_a_deep_search_probes_the_shipped_winner_in_its_first_stage(monkeypatch, tmp_path):
    install(monkeypatch, FakeTorch(max_alg=5, best_alg=3, broken_alg=4))
    _ship(monkeypatch, CsltConfig(3, 2, 2, True, False, True))
    plan, result, _ = measured_once(tmp_path, depth="deep")
    assert plan.configs[-1] == CsltConfig(3, 2, 2, True, False, True) and plan.search["staged"] is True
    assert plan.found["alg3-sk2-mode2-tr-graph"] == "shipped" and "search-tr" in plan.found
    assert "alg3-sk2-mode2-tr-graph" in _probed(result)[:6]
    assert result.found_by == "shipped"        # the deep search's own stages found nothing faster


@pytest.mark.parametrize("ship, why", [
    (dict(device="NVIDIA H200"), None),                                               # another GPU model's
    (dict(key=library_key("cuSPARSELt", GemmProblem("fp16", "llm", 128, 32, 128))), None),   # another case's
    (dict(raw={"config": {"type": "NoSuchConfig", "fields": {}}, "label": "alg9", "versions": "v", "depth": "deep",
               "device": "", "median_ms": 0.1}), "does not read back"),
])
def test_a_shipped_winner_of_another_gpu_or_case_or_damaged_is_not_tried(monkeypatch, tmp_path, ship, why):
    install(monkeypatch, FakeTorch())
    _ship(monkeypatch, CsltConfig(3), **ship)
    messages = []
    plan, result, _ = measured_once(tmp_path, messages=messages)
    assert plan.configs == [CsltConfig()] and _probed(result) == ["search"] and result.found_by == "quick"
    assert (messages == []) if why is None else (len(messages) == 1 and why in messages[0])


def test_a_shipped_winner_refused_here_is_not_tried_again(monkeypatch, tmp_path):
    install(monkeypatch, FakeTorch())
    versions = cuda_paths(["cuSPARSELt"], warmup_seconds=0)[0].version()
    _plant(tmp_path, _good_entry(versions, refused={"alg3": "alg 3: refused"}))
    _ship(monkeypatch, CsltConfig(3))
    plan, result, _ = measured_once(tmp_path, depth="deep")
    assert "alg3" not in plan.found and CsltConfig(3) not in plan.configs
