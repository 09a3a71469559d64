"""lab/sweep_sparse24_narrow.py: its arguments are checked before any GPU work, each shape measures dense, the 2:4
seed and the tile-major configurations through the bench's paths, the summary holds the fastest workspace-free 2:4
configuration to the target, and the inspect step reads the K loop out of a recorded report."""
import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from support import child_env

from lab import sweep_sparse24_narrow as sweep
from vkcoop.gemm.configs import parse_config

REPO = Path(__file__).resolve().parents[2]


def _run(*args):
    return subprocess.run([sys.executable, "-m", "lab.sweep_sparse24_narrow", *args], capture_output=True, text=True,
                          timeout=120, env=child_env(), cwd=REPO)


@pytest.mark.parametrize("args, message", [
    (("--shapes", "8192x16",), "write MxNxK"),
    (("--shapes", "8192x16x100",), "K must be a multiple of 32"),
    (("--shapes", "8192x128x8192",), "no tile-major configurations for N=128"),
    (("--configs", "16=128:64x16x64u4g1w4t",), "not a tile-major configuration"),
    (("--configs", "16=128:32x16x32u4g1tp",), "an even number"),
    (("--configs", "sixteen=128:64x16x64u4g1tp",), "write N=LABEL"),
    (("--iters", "1"), "at least 3"),
    (("--dtype", "fp32"), "invalid choice")])
def test_bad_arguments_get_one_line_and_exit_2(args, message):
    proc = _run(*args)
    assert proc.returncode == 2 and message in proc.stderr
    assert "Traceback" not in proc.stderr


def test_the_defaults_are_the_nine_skinny_shapes_and_valid_tile_major_labels():
    args = sweep.parse_args([])
    assert len(args.shape_list) == 9 and {n for _, n, _ in args.shape_list} == {16, 32, 64}
    assert {(m, k) for m, _, k in args.shape_list} == {(8192, 8192), (14336, 4096), (4096, 4096)}
    for labels in args.config_lists.values():
        assert labels and all(parse_config(label).tile_major in "pn" for label in labels)
    assert sweep.parse_args(["--configs", "16=128:64x16x64u2g1tn"]).config_lists[16] == ("128:64x16x64u2g1tn",)


class _Bound:
    def __init__(self, config, us, ok=True):
        self.config, self.us, self.ok = config, us, ok

    def output_rows(self, rows):
        return None

    def time(self, iterations, warmup, flush_l2):
        assert flush_l2 and iterations == 5
        return [self.us * 1e-6] * iterations

    def release(self):
        pass


class _Path:
    """A bench path whose configurations take the microseconds it is given (by label; the first is its default)."""

    def __init__(self, name, times):
        self.name, self.times = name, times

    def configs(self, problem, tune):
        return [parse_config(next(iter(self.times)))]

    def bind(self, operands, config):
        return _Bound(config.label(), self.times[config.label()])

    def _for_problem(self, config, problem):
        return config

    def kernel(self, dtype, config):
        self.created.append(config.label())


def _check_and_time(bound, operands, iterations, warmup, flush_l2):
    """The measurement loop's step on a fake bound GEMM: a ``tn`` configuration fails its check."""
    if bound.config.endswith("tn"):
        return {"reason": "planted mismatch"}, None
    times = bound.time(iterations, warmup, flush_l2)
    return {}, (times[0], 0.0, bound.config, times)


def _paths():
    dense = _Path(sweep.DENSE, {"64:64x16x128u2g1w4c": 58.0})
    sparse = _Path(sweep.SPARSE, {"128:64x16x64u3g1w4t": 56.0, "128:64x16x64u4g1w4tp": 40.0,
                                  "128:64x16x64u4g1w4tn": 45.0})
    dense.created, sparse.created = [], []
    return {p.name: p for p in (dense, sparse)}


def test_a_shape_measures_dense_the_seed_and_each_tile_major_configuration(monkeypatch):
    monkeypatch.setattr(sweep.GemmOperands, "make", lambda problem: SimpleNamespace(problem=problem))
    checked = []

    def check_and_time(bound, *args):
        checked.append(bound.config)
        return _check_and_time(bound, *args)

    monkeypatch.setattr(sweep, "check_and_time", check_and_time)
    paths = _paths()
    args = SimpleNamespace(dtype="fp16", iters=5, flush_l2=True,
                           config_lists={16: ("128:64x16x64u4g1w4tp", "128:64x16x64u4g1w4tn")})
    records = sweep.sweep_shape((8192, 16, 8192), sweep.shape_jobs(paths, (8192, 16, 8192), args), args)
    assert checked == ["64:64x16x128u2g1w4c", "128:64x16x64u3g1w4t", "128:64x16x64u4g1w4tp", "128:64x16x64u4g1w4tn"]
    assert [r["role"] for r in records] == ["dense", "2:4 seed", "tile-major", "tile-major"]
    assert records[2]["median_us"] == pytest.approx(40.0) and records[3] == {
        "shape": [8192, 16, 8192], "role": "tile-major", "path": sweep.SPARSE, "config": "128:64x16x64u4g1w4tn",
        "ran": "128:64x16x64u4g1w4tn", "ok": False, "reason": "planted mismatch"}


def test_a_run_creates_every_kernel_first_then_writes_its_table_and_json(monkeypatch, tmp_path, capsys):
    from vkcoop.gemm import paths as gemm_paths
    made = _paths()
    group = SimpleNamespace(paths=list(made.values()), name="fake H100", close=lambda: None)
    monkeypatch.setattr(gemm_paths, "VulkanDevicePaths", lambda dtypes: group)
    monkeypatch.setattr(sweep.GemmOperands, "make", lambda problem: SimpleNamespace(problem=problem))
    monkeypatch.setattr(sweep, "check_and_time", _check_and_time)
    code = sweep.main(["--out", str(tmp_path), "--shapes", "8192x16x8192,4096x16x4096", "--iters", "5",
                       "--configs", "16=128:64x16x64u4g1w4tp,128:64x16x64u4g1w4tn", "--inspect", "none"])
    assert code == 1                                                   # the planted mismatch
    assert made[sweep.SPARSE].created == ["128:64x16x64u3g1w4t", "128:64x16x64u4g1w4tp", "128:64x16x64u4g1w4tn"]
    document = json.loads((tmp_path / sweep.RESULTS).read_text())
    assert document["device"] == "fake H100" and document["flush_l2"] and len(document["records"]) == 8
    best = document["summary"]["shapes"][0]
    assert best["best_2to4"] == "128:64x16x64u4g1w4tp" and best["best_2to4_x_dense"] == pytest.approx(58 / 40)
    out = capsys.readouterr().out
    assert "8 configurations on fake H100" in out and "1.45x" in out and ": holds" in out


def _record(shape, role, config, us):
    return {"shape": list(shape), "role": role, "config": config, "ran": config, "ok": us is not None,
            "median_us": us}


def _records(large_ratio, small_ratio, seed_wins=False):
    """Dense 100 µs everywhere; the tile-major configuration dense / ratio, the seed faster where ``seed_wins``."""
    records = []
    for m, k in sweep.ROWS_AND_DEPTHS:
        ratio = large_ratio if m >= sweep.LARGE_ROWS else small_ratio
        shape = (m, 16, k)
        records += [_record(shape, "dense", "d", 100.0),
                    _record(shape, "2:4 seed", "s", 100.0 / ratio * (0.9 if seed_wins else 1.2)),
                    _record(shape, "tile-major", "p", 100.0 / ratio), _record(shape, "tile-major", "q", None)]
    return records


def test_the_summary_takes_the_fastest_workspace_free_configuration_and_holds_it_to_the_target():
    summary = sweep.summarize(_records(1.5, 1.15))
    target = summary["target"]
    assert target["geomean_large"] == pytest.approx(1.5) and target["least_large"] == pytest.approx(1.5)
    assert target["least_small"] == pytest.approx(1.15) and target["holds"]
    assert all(s["best_2to4"] == "p" and s["tile_major"] == "p" for s in summary["shapes"])
    seed = sweep.summarize(_records(1.5, 1.15, seed_wins=True))
    assert all(s["best_2to4"] == "s" and s["best_2to4_x_dense"] > s["tile_major_x_dense"] for s in seed["shapes"])
    # each planted shortfall fails the target: the mean, one large shape, a 4096-row shape
    assert not sweep.summarize(_records(1.35, 1.15))["target"]["holds"]
    low = _records(1.8, 1.15)
    low[5]["median_us"], low[6]["median_us"] = 100.0, 100.0 / 1.15       # 14336 rows: the best at 1.15x
    assert low[6]["shape"][0] == 14336 and low[6]["role"] == "tile-major"
    assert sweep.summarize(low)["target"]["geomean_large"] >= sweep.TARGET_GEOMEAN
    assert not sweep.summarize(low)["target"]["holds"]
    assert not sweep.summarize(_records(1.5, 1.05))["target"]["holds"]


def test_the_inspect_step_reads_the_k_loop_of_a_recorded_report():
    report = json.loads((REPO / "docs" / "results" / "h100" / "inspect-2-4.json").read_text())
    loop = sweep.loop_counts(report)
    assert (loop["instructions"], loop["mma"], loop["registers"]) == (365, 64, 244)
    assert loop["instructions_per_mma"] == pytest.approx(5.7) and loop["opcodes"]["HMMA"] == 64
    assert sweep.loop_counts({"objects": []}) == {"error": "no loop issues an MMA"}
    summary = sweep.summarize(_records(1.5, 1.15))
    records = _records(1.5, 1.15)
    assert sweep.inspect_labels(records, summary, "best") == ["s", "p"]
    assert sweep.inspect_labels(records, summary, "all") == ["s", "p"]
    assert sweep.inspect_labels(records, summary, "none") == []
