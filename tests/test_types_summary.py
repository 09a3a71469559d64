"""The types table of a result set (vkcoop.bench.types_summary) from a set written by hand
(tests/fixtures/types-set: an e4m3 compute run, an int8 compute and skinny run), the README's types blocks, and
`bench compare` of a run of the new types against a committed run older than them."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

from vkcoop.bench import compare
from vkcoop.bench import results_summary as summary
from vkcoop.bench import types_summary

REPO = Path(__file__).resolve().parent.parent
FIXTURE = REPO / "tests" / "fixtures" / "types-set"


def test_the_table_holds_each_type_s_paths_with_both_ratios_and_names_what_failed():
    table = types_summary.types_table(FIXTURE, link="docs/results/h100")
    lines = table.splitlines()
    assert lines[0].startswith("**NVIDIA H100 80GB HBM3**, driver 580.159.04, commit `5d6e7f8`: TFLOP/s (TOPS for")
    assert "[`sparse-types-compute-e4m3.json`](docs/results/h100/sparse-types-compute-e4m3.json)" in lines[0]
    assert lines[2:] == [
        "| type | path | 8192³ | 8192×16×8192 |",
        "|---|---|---:|---:|",
        "| e4m3 | cuSPARSELt | failed | - |",
        "| e4m3 | cuSPARSELt-nvmath | 2890 (1.85× / 1.00×) | - |",
        "| e4m3 | cuBLAS | 1562 (1.00× / 0.54×) | - |",
        "| int8 | vk-coopmat2-dense | 612 (0.41× / 0.29×) | 41 (0.77× / -) |",
        "| int8 | cuda-wgmma.sp | 1733 (1.16× / 0.82×) | failed |",
        "| int8 | cuSPARSELt | 2105 (1.41× / 1.00×) | error |",
        "| int8 | cuBLAS | 1490 (1.00× / 0.71×) | 54 (1.00× / -) |",
        "",
        "Skipped, without the type: e4m3: vk-coopmat2-dense; int8: vk-coopmat2-2:4, cuda-mma.sp."]


def test_a_set_without_the_part_says_so_and_the_summary_gains_the_section_only_with_it(tmp_path):
    assert types_summary.types_table(tmp_path) == types_summary.NO_RUN
    folder = tmp_path / "h100"
    shutil.copytree(FIXTURE, folder)
    (folder / "bench-default.json").write_text(json.dumps({"environment": {}, "results": []}))
    text = summary.summary_markdown(folder)
    assert "## The other types (`sparse-types-*.json`)" in text
    assert "| int8 | cuBLAS | 1490 (1.00× / 0.71×) | 54 (1.00× / -) |" in text
    assert "[`sparse-types-skinny-int8.json`](./sparse-types-skinny-int8.json)" in text
    for name in folder.glob("sparse-types-*.json"):
        name.unlink()
    assert "The other types" not in summary.summary_markdown(folder)


def test_the_readme_s_types_block_is_replaced_with_its_results_block(tmp_path):
    folder = tmp_path / "h100"
    shutil.copytree(FIXTURE, folder)
    (folder / "bench-default.json").write_text(json.dumps({"environment": {}, "results": []}))
    readme = "\n".join([summary.README_BEGIN.format(gpu="h100"), "old", summary.README_END.format(gpu="h100"),
                        types_summary.README_BEGIN.format(gpu="h100"), types_summary.NO_RUN,
                        types_summary.README_END.format(gpu="h100"), "rest"])
    replaced = summary.replace_readme_block(readme, folder, "h100")
    assert types_summary.NO_RUN not in replaced and "| int8 | cuSPARSELt | 2105 (1.41× / 1.00×) | error |" in replaced
    assert replaced.endswith("rest")


def test_the_readme_s_types_blocks_agree_with_the_committed_sets():
    readme = (REPO / "README.md").read_text()
    sets = sorted(p for p in (REPO / "docs" / "results").iterdir() if (p / "set.json").is_file())
    assert sets
    for folder in sets:
        assert types_summary.types_block(folder.relative_to(REPO), folder.name) in readme, folder.name


def test_compare_reads_a_committed_run_older_than_the_types_beside_one_that_has_them(tmp_path):
    older = compare.load_run(REPO / "docs" / "results" / "h100" / "bench-default.json")
    fp16 = next(r for r in older["results"] if r["dtype"] == "fp16" and r["path"] == "cuBLAS" and r.get("tflops"))
    newer = {"environment": older["environment"], "settings": {"dtypes": ["fp16", "int8"]},
             "results": [dict(fp16), dict(fp16, dtype="int8", case="int8 square 8192x8192x8192", tflops=1490.0)]}
    path = tmp_path / "newer.json"
    path.write_text(json.dumps(newer))
    rows = compare.compare_runs(older, compare.load_run(path), 0.02)
    verdicts = {(r.path, r.dtype, r.m, r.n): r.verdict for r in rows}
    assert verdicts[("cuBLAS", "fp16", fp16["m"], fp16["n"])] == "within noise"
    assert verdicts[("cuBLAS", "int8", fp16["m"], fp16["n"])] == "only in B"
