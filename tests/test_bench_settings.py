"""The settings objects of ``bench sparse`` and ``bench attention`` (vkcoop.bench.sparse_settings,
attention_settings): built by the command line from every option, checked before any GPU work, recorded in the run's
JSON; and the committed runs, recorded before them, still read by compare, waterfall and summary."""
from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest

from vkcoop.attention import AttentionTile
from vkcoop.bench import compare, report, results_summary, waterfall
from vkcoop.bench.attention_settings import AttentionBenchSettings
from vkcoop.bench.measure import PathResult
from vkcoop.bench.shapes import PRESETS, UserShape
from vkcoop.bench.sparse import BenchResult
from vkcoop.bench.sparse_settings import PATH_NAMES, SparseBenchSettings
from vkcoop.cli import build_parser
from vkcoop.cli import attention as attention_command
from vkcoop.cli import bench as bench_command

REPO = Path(__file__).resolve().parent.parent
RESULT_SETS = [REPO / "docs" / "results" / gpu for gpu in ("h100", "h200")]


def _init_fields(cls) -> list[str]:
    return [f.name for f in dataclasses.fields(cls) if f.init]


# --------------------------------------------------------------------------- the objects
def test_settings_are_frozen_and_hold_no_lists():
    settings = SparseBenchSettings(dtypes=["fp16"], sizes=[256], paths=["cuBLAS"], llm_tokens=32)
    assert settings.dtypes == ("fp16",) and settings.sizes == (256,) and settings.llm_tokens == (32,)
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.iters = 3
    attention = AttentionBenchSettings(kinds=["decode"], decode_heads=[[32, 8]], warmup_seconds=0.5)
    assert attention.decode_heads == ((32, 8),) and attention.warmup_by_kind == {"decode": 0.5}
    assert hash(settings) != hash(dataclasses.replace(settings, iters=3)) and hash(attention)


def test_resolving_fills_in_the_preset_and_every_path_and_keeps_what_was_given():
    full = SparseBenchSettings(preset="full", dtypes=["bf16"]).resolved()
    assert full.dtypes == ("bf16",) and full.sizes == tuple(PRESETS["full"]["sizes"])
    assert full.shapes == tuple(PRESETS["full"]["shapes"]) and full.paths == PATH_NAMES
    assert full.resolved() == full                                    # resolving twice changes nothing
    assert len(full.cases()) == len(full.sizes) * (1 + len(full.llm_tokens))
    for bad, option in ((dict(preset="huge"), "--preset"), (dict(search="far"), "--search"),
                        (dict(search_budget_s=0), "--search-budget"), (dict(sizes=[100]), "--sizes"),
                        (dict(shapes=["tall"]), "--shapes"), (dict(warmup=-1), "--warmup")):
        with pytest.raises(ValueError, match=option):
            SparseBenchSettings(**bad).resolved()
    with pytest.raises(ValueError, match="--decode-batch"):
        AttentionBenchSettings(decode_batch=0).resolved()


def test_the_json_records_the_resolved_settings_with_every_key_a_committed_run_recorded(tmp_path):
    user = UserShape("qkv", 4096, 12288, 4096, "shapes.csv")
    settings = SparseBenchSettings(dtypes=["fp16"], shapes=["square", user], flush_l2=True, device=1).resolved()
    written = json.loads(report.write_json(BenchResult([], {}, settings), tmp_path / "r.json").read_text())
    recorded = written["settings"]
    assert written["schema_version"] == report.SCHEMA_VERSION and recorded["flush_l2"] is True
    assert recorded["shapes"] == ["square", user.to_dict()] and recorded["paths"] == list(PATH_NAMES)
    assert recorded["device"] == 1 and recorded["timing"] == report.TIMING
    for run in _committed_runs():
        old = json.loads(run.read_text()).get("settings") or {}
        assert set(old) <= set(recorded), (run.name, set(old) - set(recorded))
    tile = AttentionTile(128, 64, 64)
    attention = json.loads(json.dumps(BenchResult([], {}, AttentionBenchSettings(tile=tile)).to_dict()))
    assert attention["settings"]["tile"] == dataclasses.asdict(tile)
    assert attention["settings"]["warmup_by_kind"] == {"prefill": 3.0, "decode": 1.0}


# --------------------------------------------------------------------------- the command line builds them
def _every_option_changed(argv_changes: dict, build, parse) -> None:
    """Each option set away from its default must change its own field of the settings the command builds."""
    default = build(parse([]))
    for field, argv in argv_changes.items():
        changed = build(parse(argv))
        differs = [f for f in _init_fields(type(default)) if getattr(changed, f) != getattr(default, f)]
        assert differs == [field], (argv, differs)


def test_every_option_of_bench_sparse_reaches_its_setting(tmp_path):
    shapes = tmp_path / "shapes.csv"
    shapes.write_text("label,m,n,k\nqkv,4096,12288,4096\n")
    parser = build_parser()

    def parse(argv):
        return parser.parse_args(["bench", "sparse", *argv])
    changes = {"preset": ["--preset", "full"], "dtypes": ["--dtype", "bf16"], "sizes": ["--sizes", "256"],
               "shapes": ["--shapes", f"square,{shapes}"], "llm_tokens": ["--llm-tokens", "8"],
               "paths": ["--paths", "cuBLAS"], "iters": ["--iters", "3"], "warmup": ["--warmup", "0"],
               "flush_l2": ["--flush-l2"], "tune": ["--tune"], "retune": ["--retune"],
               "tune_budget_s": ["--tune-budget", "9"], "search": ["--search", "deep"],
               "search_budget_s": ["--search-budget", "2"], "baseline": ["--baseline", "cuda-mma.sync"],
               "ceilings": ["--ceilings"], "clock_trace": ["--no-clock-trace"], "device": ["--device", "1"],
               "validate": ["--validate"]}
    assert sorted(changes) == sorted(_init_fields(SparseBenchSettings))
    _every_option_changed(changes, bench_command.bench_sparse_settings, parse)
    assert bench_command.bench_sparse_settings(parse(changes["shapes"])).shapes[1].label == "qkv"


def test_every_option_of_bench_attention_reaches_its_setting():
    import argparse
    parser = argparse.ArgumentParser()
    attention_command.add_arguments(parser)
    changes = {"kinds": ["--kinds", "decode"], "dtypes": ["--dtype", "bf16"], "head_dims": ["--head-dims", "128"],
               "seqs": ["--seqs", "512"], "decode_seqs": ["--decode-seqs", "4096"], "causal": ["--causal", "on"],
               "paths": ["--paths", "vk-coopmat2"], "iters": ["--iters", "3"], "warmup": ["--warmup", "1"],
               "tokens": ["--tokens", "4096"], "decode_batch": ["--decode-batch", "2"],
               "decode_heads": ["--decode-heads", "16/16"], "tile": ["--tile", "128:64x32"],
               "ceiling_tflops": ["--ceiling", "300"], "bandwidth_gbs": ["--bandwidth", "2000"],
               "ceilings": ["--ceilings"], "tune": ["--tune"], "retune": ["--retune"],
               "tune_budget": ["--tune-budget", "9"], "flush_l2": ["--flush-l2"], "device": ["--device", "1"],
               "validate": ["--validate"]}
    # --warmup-seconds changes the warm-up of each kind as well: a field of its own, checked apart
    assert sorted([*changes, "warmup_seconds"]) == sorted(_init_fields(AttentionBenchSettings))
    _every_option_changed(changes, attention_command.bench_attention_settings, parser.parse_args)
    given = attention_command.bench_attention_settings(parser.parse_args(["--warmup-seconds", "0.5"]))
    assert given.warmup_seconds == 0.5 and set(given.warmup_by_kind.values()) == {0.5}


# --------------------------------------------------------------------------- runs recorded before them
def _committed_runs() -> list[Path]:
    """Every bench run committed under docs/results/h100 and h200 (the JSON files with a results list of a bench)."""
    runs = []
    for folder in RESULT_SETS:
        for path in sorted(folder.glob("*.json")):
            data = json.loads(path.read_text())
            if isinstance(data, dict) and isinstance(data.get("results"), list) and data["results"] \
                    and compare.result_bench(data["results"][0]):
                runs.append(path)
    return runs


def _rewritten(run: dict, path: Path) -> Path:
    """The run's results written again as this version writes a run, with settings made from the recorded ones."""
    given = {k: v for k, v in run.get("settings", {}).items() if k in _init_fields(SparseBenchSettings)}
    outcome = BenchResult([PathResult(**row) for row in run["results"]], run["environment"],
                          SparseBenchSettings(**given))
    return report.write_json(outcome, path)


def test_the_committed_runs_are_there():
    names = {(p.parent.name, p.name) for p in _committed_runs()}
    assert {("h100", "bench-default.json"), ("h200", "bench-default.json"), ("h100", "before-8b9e2f6.json"),
            ("h200", "waterfall-bench.json")} <= names


@pytest.mark.parametrize("path", _committed_runs(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_a_committed_run_loads_and_compares_with_a_run_written_now(path, tmp_path):
    old = compare.load_run(path)
    new = compare.load_run(_rewritten(old, tmp_path / "new.json"))
    assert new["schema_version"] == report.SCHEMA_VERSION
    rows = compare.compare_runs(old, new)
    assert len(rows) == len(old["results"]) and not any(r.regressed for r in rows)
    assert all(r.ratio == pytest.approx(1.0) for r in rows if r.ratio is not None)
    assert [w.case for w in waterfall.waterfalls(new)] == [w.case for w in waterfall.waterfalls(old)]


@pytest.mark.parametrize("folder", RESULT_SETS, ids=lambda p: p.name)
def test_a_committed_set_sums_up_the_same_with_its_runs_written_now(folder, tmp_path):
    copy = shutil.copytree(folder, tmp_path / folder.name)
    rewritten = 0
    for path in _committed_runs():
        if path.parent == folder:
            _rewritten(json.loads(path.read_text()), copy / path.name)
            rewritten += 1
    assert rewritten and results_summary.summary_markdown(copy) == results_summary.summary_markdown(folder)
