"""The product speaks of itself: no file names a run of its making, an issue or a branch, in its text or its name.
Git keeps the history; the docs say why something is so in product terms."""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
#: A run, an issue or a branch of the project's making, in words or in a file name (``bench-s30.json``).
#: "Issues" followed by a number is mostly the verb ("the loop issues 2.1 instructions"); as a noun it lists them.
PROCESS_WORDS = re.compile(r"\bsessions?\s+#?\d+\b|\bissue\s+#?\d+\b|\bissues\s+#?\d+\s*(?:and|,)\s*#?\d+\b"
                           r"|\bexperiment/[\w-]+|\b(?:first|second) week\b", re.IGNORECASE)
RUN_FILE_NAME = re.compile(r"-s\d{1,3}(?:[-.]|$)")
#: This test names the patterns it looks for.
SELF = Path(__file__).resolve()


def product_files() -> list[Path]:
    """Every file of the repository that git tracks or would track (the working tree less the ignored files)."""
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                            capture_output=True, text=True, check=True).stdout.splitlines()
    return [REPO / name for name in listed if (REPO / name).is_file()]


def offences(path: Path, text: str) -> list[str]:
    """What in ``path`` (its name and its text) speaks of the process."""
    found = [f"{path.name}: a file named after a run"] if RUN_FILE_NAME.search(path.stem + path.suffix) else []
    for number, line in enumerate(text.splitlines(), 1):
        match = PROCESS_WORDS.search(line)
        if match:
            found.append(f"{path.name}:{number}: {match.group(0)!r}")
    return found


def test_the_checker_catches_each_kind_of_process_word():
    planted = {"a.py": "# measured in session 17", "b.md": "as issue 20 asked", "c.json": '{"branch": '
               '"experiment/claimed-slices"}', "bench-s30.json": "{}", "d.glsl": "// Issues #4 and 5"}
    for name, text in planted.items():
        assert offences(Path(name), text), name
    clean = {"e.py": "# the session's device time", "f.md": "a decode step issues 2.1 instructions per MMA",
             "sessions.py": "first, second", "g.md": "experiment 46 (docs/attention.md)"}
    for name, text in clean.items():
        assert not offences(Path(name), text), name


def test_no_product_file_names_a_run_an_issue_or_a_branch():
    found = []
    for path in product_files():
        if path == SELF:
            continue
        try:
            text = path.read_text()
        except UnicodeDecodeError:     # images, cubins, caches: their names still count
            text = ""
        found += [f"{path.relative_to(REPO).parent}/{line}" for line in offences(path, text)]
    assert not found, "\n".join(found[:40])
