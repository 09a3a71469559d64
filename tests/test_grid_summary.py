"""The 2:4 grid of a result set (vkcoop.bench.grid_summary) on runs written here by hand, whose ratios are worked
out in the tests from the times they were given."""
from __future__ import annotations

import json
import math

import pytest

from vkcoop.bench import grid_summary as grid
from vkcoop.bench import results_summary as summary


def result(path, m, n, k, us, status="ok", dtype="fp16"):
    return {"path": path, "m": m, "n": n, "k": k, "dtype": dtype, "status": status,
            "median_ms": None if us is None else us / 1e3}


def write_run(folder, name, results, driver="580.159.04"):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(json.dumps({"environment": {"nvidia_smi": {"driver_version": driver}},
                                           "results": results}))


SKINNY = [  # (m, n, k): wgmma.sp, mma.sp, cuSPARSELt (torch), cuSPARSELt-nvmath, Vulkan dense, Vulkan 2:4 (µs)
    ((8192, 16, 8192), (20.0, 18.0, 22.0, 21.0, 50.0, 30.0)),
    ((14336, 64, 4096), (25.0, 30.0, 24.0, 26.0, 80.0, 64.0)),
    ((4096, 32, 4096), (11.0, 12.0, 13.2, 14.0, 20.0, 18.0)),
]
PATHS = ("cuda-wgmma.sp", "cuda-mma.sp", "cuSPARSELt", "cuSPARSELt-nvmath", "vk-coopmat2-dense", "vk-coopmat2-2:4")


def skinny_results(dtype="fp16", rows=SKINNY):
    return [result(path, *shape, us, dtype=dtype) for shape, times in rows for path, us in zip(PATHS, times)]


def goal(what_run, dtype, paths, over, cases, least, geomean=None):
    return grid.Goal("test", what_run, dtype, paths, over, cases, least, geomean)


def test_a_ratio_divides_the_faster_of_each_side_and_is_none_where_a_side_did_not_run():
    times = grid.cases({"results": skinny_results()})[(8192, 16, 8192)]
    assert grid.ratio(times, grid.HAND_WRITTEN, ("cuSPARSELt", "cuSPARSELt-nvmath")) == pytest.approx(21.0 / 18.0)
    assert grid.ratio(times, grid.VULKAN_SPARSE, grid.VULKAN_DENSE) == pytest.approx(50.0 / 30.0)
    failed = grid.cases({"results": [result("cuda-wgmma.sp", 8, 8, 8, 5.0, status="failed"),
                                     result("cuSPARSELt", 8, 8, 8, 6.0)]})[(8, 8, 8)]
    assert grid.ratio(failed, ("cuda-wgmma.sp",), ("cuSPARSELt",)) is None   # a failed check is not a time


def test_a_goal_takes_its_cases_and_reports_geomean_least_and_whether_it_holds():
    run = {"results": skinny_results()}
    large = grid.evaluate(goal("skinny", "fp16", grid.HAND_WRITTEN, ("cuSPARSELt", "cuSPARSELt-nvmath"), "large",
                               0.90, 1.00), run)
    expected = {(8192, 16, 8192): 21.0 / 18.0, (14336, 64, 4096): 24.0 / 25.0}
    assert large["cases"] == pytest.approx(expected)
    assert large["geomean"] == pytest.approx(math.sqrt(21.0 / 18.0 * 24.0 / 25.0))
    assert large["least_case"] == (14336, 64, 4096) and large["least"] == pytest.approx(0.96)
    assert large["holds"]
    # Planted: the same run held to a least of 1.0 misses on 14336x64, and a geomean of 1.1 misses too.
    assert not grid.evaluate(goal("skinny", "fp16", grid.HAND_WRITTEN, ("cuSPARSELt",), "large", 1.0), run)["holds"]
    assert not grid.evaluate(goal("skinny", "fp16", grid.HAND_WRITTEN, ("cuSPARSELt", "cuSPARSELt-nvmath"),
                                  "large", 0.9, 1.1), run)["holds"]
    small = grid.evaluate(goal("skinny", "fp16", grid.VULKAN_SPARSE, grid.VULKAN_DENSE, "small", 1.1), run)
    assert small["cases"] == pytest.approx({(4096, 32, 4096): 20.0 / 18.0}) and small["holds"]


def test_a_case_where_one_side_did_not_run_fails_the_goal_whatever_the_others_show():
    rows = skinny_results()
    rows = [r for r in rows if not (r["m"] == 14336 and r["path"] == "vk-coopmat2-2:4")]
    evaluation = grid.evaluate(goal("skinny", "fp16", grid.VULKAN_SPARSE, grid.VULKAN_DENSE, "large", 1.0),
                               {"results": rows})
    assert evaluation["cases"][(14336, 64, 4096)] is None and evaluation["least_case"] == (8192, 16, 8192)
    assert not evaluation["holds"]


def test_square_cases_are_6144_and_8192_cubed_only():
    run = {"results": [result(path, s, s, s, us) for s, (dense, sparse) in
                       ((4096, (10.0, 20.0)), (6144, (30.0, 36.0)), (8192, (80.0, 96.0)))
                       for path, us in (("vk-coopmat2-dense", dense), ("vk-coopmat2-2:4", sparse))]}
    evaluation = grid.evaluate(goal("compute", "fp16", grid.VULKAN_SPARSE, grid.VULKAN_DENSE, "square", 0.8), run)
    assert sorted(evaluation["cases"]) == [(6144, 6144, 6144), (8192, 8192, 8192)]
    assert evaluation["least"] == pytest.approx(80.0 / 96.0) and evaluation["holds"]


def test_the_table_shows_each_case_and_each_goal_of_the_runs_present(tmp_path):
    write_run(tmp_path, "sparse-skinny-fp16.json", skinny_results())
    (tmp_path / "steps.json").write_text(json.dumps([{"name": "sparse-skinny-fp16", "commit": "1a2b3c4"},
                                                     {"name": "bench", "commit": "9999999"}]))
    lines = grid.grid_table(tmp_path).splitlines()
    assert lines[0].startswith("Driver 580.159.04, commit `1a2b3c4`: median µs of each path, from "
                               "[`sparse-skinny-fp16.json`](./sparse-skinny-fp16.json).")
    assert "| fp16 | 8192×16×8192 | 20.0 | 18.0 | 21.0 (nvmath) | 1.17× | 50.0 | 30.0 | 1.67× |" in lines
    assert "| fp16 | 14336×64×4096 | 25.0 | 30.0 | 24.0 (torch) | 0.96× | 80.0 | 64.0 | 1.25× |" in lines
    goals = [line for line in lines if line.startswith("| ") and "skinny, M" in line]
    # fp16 skinny goals only: the hand-written one (holds), Vulkan at M >= 8192 (geomean 1.44, least 1.25) and
    # Vulkan below 8192 rows (1.11)
    assert goals == [
        "| the best hand-written 2:4 over the best cuSPARSELt | fp16 | skinny, M ≥ 8192 | 1.058× | "
        "0.960× (14336×64×4096) | geomean ≥ 1.00×, least ≥ 0.90× | yes |",
        "| Vulkan 2:4 over Vulkan dense | fp16 | skinny, M ≥ 8192 | 1.443× | 1.250× (14336×64×4096) | "
        "geomean ≥ 1.40×, least ≥ 1.20× | yes |",
        "| Vulkan 2:4 over Vulkan dense | fp16 | skinny, M < 8192 | 1.111× | 1.111× (4096×32×4096) | "
        "least ≥ 1.10× | yes |"]
    assert math.sqrt(50 / 30 * 80 / 64) == pytest.approx(1.443, abs=5e-4)


def test_the_summary_gains_the_section_only_with_the_part(tmp_path):
    (tmp_path / "bench-default.json").write_text(json.dumps({"environment": {}, "results": []}))
    assert "The 2:4 grid" not in summary.summary_markdown(tmp_path)
    assert grid.grid_table(tmp_path) == ""
    write_run(tmp_path, "sparse-compute-bf16.json", skinny_results("bf16", [((8192, 8192, 8192),
                                                                             (900, 1500, 880, 930, 3700, 5400))]))
    text = summary.summary_markdown(tmp_path)
    assert "## The 2:4 grid (`sparse-compute-*.json`, `sparse-skinny-*.json`)" in text
    assert ("| CUDA wgmma.sp over the best cuSPARSELt | bf16 | compute, every case | 0.978× | 0.978× (8192³) | "
            "geomean ≥ 1.00×, least ≥ 0.95× | **no** |") in text
    assert "sparse-grid" in text.split("Not in this set:")[1].splitlines()[0]   # the skinny runs are missing
