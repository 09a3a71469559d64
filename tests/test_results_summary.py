"""A GPU's result set summed up from its own JSON (vkcoop.bench.results_summary), and the README's results, which
must be exactly what the committed set's JSON says."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from vkcoop import cli
from vkcoop.bench import results_summary as summary

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "docs" / "results"


def _result(path, dtype, m, n, k, tflops, ratio):
    return {"path": path, "dtype": dtype, "m": m, "n": n, "k": k, "status": "ok", "tflops": tflops,
            "ratio_cublas": ratio}


def _set(folder: Path) -> Path:
    folder.mkdir(parents=True)
    results = [_result("vk-coopmat2-dense", "fp16", 8192, 8192, 8192, 353.4, 0.48),
               _result("cuBLAS", "fp16", 8192, 8192, 8192, 731.7, 1.0),
               _result("vk-coopmat2-dense", "bf16", 8192, 32, 8192, 74.6, 0.89),
               _result("vk-coopmat2-dense", "fp16", 4096, 4096, 4096, 300.0, 0.4)]     # not a headline case
    (folder / "bench-default.json").write_text(json.dumps({"environment": {"nvidia_smi": {
        "name": "NVIDIA H100 80GB HBM3", "driver_version": "580.159.04"}, "torch": "2.11.0+cu130"},
        "results": results}))
    (folder / "set.json").write_text(json.dumps({"commit": "abc1234", "gpu": "NVIDIA H100 80GB HBM3",
                                                 "date": "2026-11-28"}))
    (folder / "run.json").write_text(json.dumps([{"name": "gemm", "status": "pass", "cases": 12,
                                                  "validation_messages": []},
                                                 {"name": "decode", "status": "fail", "cases": 3,
                                                  "validation_messages": ["VUID-x"]}]))
    (folder / "steps.json").write_text(json.dumps([{"name": "bench", "command": "python3 -m vkcoop bench sparse",
                                                    "seconds": 61, "exit": 0}]))
    (folder / "pytest-gpu.log").write_text("....\n314 passed, 5 skipped in 171.20s (0:02:51)\n")
    return folder


def test_the_readme_table_holds_the_headline_figures_of_bench_json(tmp_path):
    table = summary.readme_table(_set(tmp_path / "h100"))
    assert "**NVIDIA H100 80GB HBM3**, driver 580.159.04, commit `abc1234`, 2026-11-28" in table
    dense = next(line for line in table.splitlines() if line.startswith("| Vulkan coopmat2, dense |"))
    assert dense == "| Vulkan coopmat2, dense | 353 (0.48×) | - | - | 75 (0.89×) |"
    assert "| cuBLAS, dense | 732 (1.00×) | - | - | - |" in table
    assert "300" not in table          # 4096^3 is not a headline case


def test_the_summary_says_what_each_file_says(tmp_path):
    text = summary.summary_markdown(_set(tmp_path / "h100"))
    assert text.startswith("# NVIDIA H100 80GB HBM3: the current result set")
    assert "1 of 2 samples pass, 15 cases, 1 validation messages" in text
    assert "314 passed, 5 skipped in 171.20s (0:02:51)" in text
    assert "| bench | 61 | 0 | `python3 -m vkcoop bench sparse` |" in text
    assert "![each path over cuBLAS](bench-default.png)" in text
    assert "Not in this set: the part(s) grid, peak, sparse-grid, attention, core, waterfall, gpu-av, sanitizer of" in text     # what the folder lacks is said


def test_the_readme_block_is_replaced_and_a_readme_without_one_is_refused(tmp_path):
    folder = _set(tmp_path / "h100")
    readme = "intro\n" + summary.README_BEGIN.format(gpu="h100") + "\nold figures\n" + \
        summary.README_END.format(gpu="h100") + "\nrest\n"
    replaced = summary.replace_readme_block(readme, folder, "h100")
    assert "old figures" not in replaced and "353 (0.48×)" in replaced and replaced.endswith("rest\n")
    with pytest.raises(ValueError, match="no results block for h200"):
        summary.replace_readme_block(readme, folder, "h200")


def test_the_summary_command_writes_the_file_and_refuses_a_missing_set(tmp_path, capsys):
    folder = _set(tmp_path / "h100")
    assert cli.main(["bench", "summary", str(folder)]) == 0
    assert (folder / "SUMMARY.md").read_text() == summary.summary_markdown(folder)
    assert cli.main(["bench", "summary", str(tmp_path / "nowhere")]) == 2
    assert "no such folder" in capsys.readouterr().err
    (folder / "bench-default.json").unlink()
    assert cli.main(["bench", "summary", str(folder)]) == 2
    assert "no bench-default.json" in capsys.readouterr().err


def _committed_sets() -> list[Path]:
    return sorted(p for p in RESULTS.iterdir() if (p / "set.json").is_file()) if RESULTS.is_dir() else []


@pytest.mark.parametrize("folder", _committed_sets(), ids=lambda p: p.name)
def test_the_committed_summary_and_readme_agree_with_their_json(folder):
    assert (folder / "SUMMARY.md").read_text() == summary.summary_markdown(folder)
    readme = (REPO / "README.md").read_text()
    assert summary.readme_block(folder.relative_to(REPO), folder.name) in readme


def test_every_result_set_the_readme_cites_is_committed():
    readme = (REPO / "README.md").read_text()
    cited = {line.split()[2] for line in readme.splitlines() if line.startswith("<!-- results ")}
    assert cited <= {p.name + ":" for p in _committed_sets()} | {p.name for p in _committed_sets()}


def test_a_set_made_by_two_commits_names_each_step_s_commit(tmp_path):
    folder = _set(tmp_path / "h100")
    (folder / "steps.json").write_text(json.dumps([
        {"name": "bench", "command": "python3 -m vkcoop bench sparse", "seconds": 61, "exit": 0, "commit": "abc1234"},
        {"name": "pytest-gpu", "command": "python3 -m pytest", "seconds": 150, "exit": 0, "commit": "def5678"}]))
    lines = summary._steps(folder)
    assert lines[0] == "| step | seconds | exit | command | commit |"
    assert lines[2].endswith("| abc1234 |") and lines[3].endswith("| def5678 |")
    (folder / "steps.json").write_text(json.dumps([
        {"name": "bench", "command": "python3 -m vkcoop bench sparse", "seconds": 61, "exit": 0, "commit": "abc1234"}]))
    assert summary._steps(folder)[0] == "| step | seconds | exit | command |"   # one commit: set.json says it


def test_the_waterfall_and_the_sanitizers_are_summed_up_from_their_json(tmp_path):
    folder = _set(tmp_path / "h200")
    steps = [{"rung": "cuBLAS (wgmma)", "what": "", "path": "cuBLAS", "tflops": 794.0, "ratio": None},
             {"rung": "mma.sync", "what": "the instruction set", "path": "cuda-mma.sync", "tflops": 503.0,
              "ratio": 503 / 794},
             {"rung": "Vulkan coopmat2", "what": "the driver's compiler and the API", "path": "vk-coopmat2-dense",
              "tflops": 294.0, "ratio": 294 / 503}]
    fall = {"family": "dense", "dtype": "fp16", "regime": "compute-bound", "case": "fp16 square8192 8192x8192x8192",
            "steps": steps, "total": 294 / 794}
    (folder / "waterfall.json").write_text(json.dumps({"waterfalls": [dict(fall, dtype="bf16"), fall]}))
    (folder / "sanitizer.json").write_text(json.dumps({"version": "2025.3.1.0", "summary": [
        "memcheck: 3 kernels in 4 of 4 launches; 0 errors", "racecheck: 3 kernels in 4 of 4 launches; 1 errors"]}))
    (folder / "gpu-av-seeds.json").write_text(json.dumps({"summary": "GPU-AV (1.4.363): 2 runs; 0 messages",
                                                          "not_instrumented": ["OpCooperativeMatrixLoadTensorNV"]}))
    table = summary.readme_table(folder)
    assert ("cuBLAS (wgmma) 794 → mma.sync 503 (0.63×: the instruction set) → Vulkan coopmat2 294 (0.58×: the "
            "driver's compiler and the API).") in table
    text = summary.summary_markdown(folder)
    assert "| dense | fp16 square8192 8192x8192x8192 | cuBLAS 794 | cuda-mma.sync 503 (0.63×) | " in text
    assert "racecheck: 3 kernels in 4 of 4 launches; 1 errors" in text
    assert "- `gpu-av-seeds.json`: GPU-AV (1.4.363): 2 runs; 0 messages; not instrumented: OpCooperative" in text


def _library_set(folder: Path, rows, settings=None) -> Path:
    """A set whose default run holds ``rows`` (path, dtype, n, tflops, extra fields) at M = K = 8192."""
    _set(folder)
    results = [dict(_result(path, dtype, 8192, n, 8192, tflops, tflops / 800.0), **extra)
               for path, dtype, n, tflops, extra in rows]
    run = json.loads((folder / "bench-default.json").read_text())
    run.update(results=results, **({"settings": settings} if settings is not None else {}))
    (folder / "bench-default.json").write_text(json.dumps(run))
    return folder


def _row(table: str, what: str) -> str:
    return next(line for line in table.splitlines() if line.startswith(f"| {what} |"))


def test_the_cusparselt_row_shows_the_faster_route_per_case_and_names_it(tmp_path):
    searched = {"config_source": "search"}
    folder = _library_set(tmp_path / "h100", [
        ("cuSPARSELt", "fp16", 8192, 1241.0, searched), ("cuSPARSELt-nvmath", "fp16", 8192, 1165.0, searched),
        ("cuSPARSELt", "fp16", 32, 124.0, searched), ("cuSPARSELt-nvmath", "fp16", 32, 126.0, searched),
        ("cuSPARSELt-nvmath", "bf16", 8192, 1176.0, searched)], settings={"search": "quick"})
    row = _row(summary.readme_table(folder), "cuSPARSELt (the faster route), 2:4")
    assert row == ("| cuSPARSELt (the faster route), 2:4 | 1241 (1.55×) [torch, quick] | 1176 (1.47×) [nvmath, quick] "
                   "| 126 (0.16×) [nvmath, quick] | - |")


def test_each_library_figure_says_what_found_it_in_new_runs_and_in_runs_that_predate_the_field(tmp_path):
    rows = [("cuBLAS", "fp16", 8192, 850.0, {"config_source": "search", "found_by": "shipped"}),
            ("cuBLAS", "bf16", 8192, 860.0, {"config_source": "cache"}),
            ("cuBLAS", "fp16", 32, 85.0, {"config_source": "search"}),
            ("cuBLAS", "bf16", 32, 84.0, {"config_source": "default"}),
            ("vk-coopmat2-dense", "fp16", 8192, 350.0, {"config_source": "seed"})]
    table = summary.readme_table(_library_set(tmp_path / "deep", rows, settings={"search": "deep"}))
    assert _row(table, "cuBLAS, dense") == ("| cuBLAS, dense | 850 (1.06×) [shipped] | 860 (1.07×) [cached] "
                                            "| 85 (0.11×) [deep] | 84 (0.10×) [default] |")
    assert _row(table, "Vulkan coopmat2, dense").endswith("| 350 (0.44×) | - | - | - |")    # not a library row
    legend = next(line for line in table.splitlines() if line.startswith("In brackets"))
    for word in ("deep", "cached", "shipped", "default"):
        assert f"{word}: {summary.FOUND_WORDS[word]}" in legend
    assert "quick:" not in legend              # only the words the table uses
    unrecorded = summary.readme_table(_library_set(tmp_path / "old", rows[2:3]))   # no settings: depth unknown
    assert _row(unrecorded, "cuBLAS, dense").startswith("| cuBLAS, dense | - | - | 85 (0.11×) [search] |")
