"""lab/library_seeds.py: ``--check`` says whether the shipped library winners are what the committed deep runs say,
and writing makes them so."""
from __future__ import annotations

from lab import library_seeds as tool
from vkcoop.bench import library_seeds


def test_check_passes_on_the_committed_file_and_fails_on_a_changed_one(tmp_path, capsys):
    copy = tmp_path / "library_seeds.json"
    copy.write_text(library_seeds.SHIPPED_FILE.read_text())
    assert tool.main(["--check"], target=copy) == 0 and "as the runs say" in capsys.readouterr().out
    copy.write_text(copy.read_text().replace('"depth": "deep"', '"depth": "quick"', 1))
    assert tool.main(["--check"], target=copy) == 1 and "regenerate it" in capsys.readouterr().out
    assert tool.main([], target=copy) == 0
    assert f"written from {len(tool.deep_runs())} deep run(s)" in capsys.readouterr().out
    assert copy.read_text() == library_seeds.SHIPPED_FILE.read_text()      # written again from the runs
