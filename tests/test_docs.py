"""The docs as a reader meets them: every reference doc fits in 400 lines; the test command is spelled one way
(`.venv/bin/python -m pytest`, as `.ci/run` runs it) in the README, the docs, `.ci/run` and the scripts; and from a
clone the extras install with `pip install -e '.[...]'`, never by the package name."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
MAX_DOC_LINES = 400
TEST_COMMAND = ".venv/bin/python"
#: An offline GPU host has no .venv: a doc that sets one up (`source scripts/gpu_env.sh` as a command) runs `python3`.
GPU_HOST_SETUP = "source scripts/gpu_env.sh"
PYTEST_RUN = re.compile(r"(\S+)\s+-m\s+pytest\b")
PIP_BY_NAME = re.compile(r"pip install\s+['\"]?vkcoop\[")


def reference_docs() -> list[Path]:
    return sorted((REPO / "docs").glob("*.md"))


def command_files() -> list[Path]:
    """Where a reader or CI finds the test command (the generated result sets under docs/results are records)."""
    scripts = [p for p in sorted((REPO / "scripts").iterdir()) if p.is_file()]
    return [REPO / "README.md", REPO / "lab" / "README.md", REPO / ".ci" / "run", *reference_docs(), *scripts]


def long_docs(docs: dict[str, str]) -> list[str]:
    return [f"{name}: {text.count(chr(10))} lines" for name, text in docs.items()
            if text.count("\n") > MAX_DOC_LINES]


def other_spellings(name: str, text: str) -> list[str]:
    """Each pytest run in ``text`` whose interpreter is not the test command's (``python3`` allowed on a GPU host)."""
    gpu_host = any(line.strip().startswith(GPU_HOST_SETUP) for line in text.splitlines())
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        for match in PYTEST_RUN.finditer(line):
            interpreter = match.group(1).lstrip("`(\"'")
            if interpreter != TEST_COMMAND and not (gpu_host and interpreter == "python3"):
                found.append(f"{name}:{number}: {match.group(0)}")
    return found


def pip_by_name(name: str, text: str) -> list[str]:
    return [f"{name}:{number}: {line.strip()}" for number, line in enumerate(text.splitlines(), 1)
            if PIP_BY_NAME.search(line)]


def test_every_reference_doc_fits_in_400_lines():
    assert reference_docs(), "no docs/*.md found"
    assert long_docs({p.name: p.read_text() for p in reference_docs()}) == []


def test_the_test_command_is_spelled_one_way():
    assert (REPO / ".ci" / "run").read_text().count(f"{TEST_COMMAND} -m pytest") == 1
    found = [hit for path in command_files() for hit in other_spellings(str(path.relative_to(REPO)),
                                                                         path.read_text())]
    assert found == []


def test_extras_install_from_the_clone():
    found = [hit for path in command_files() for hit in pip_by_name(str(path.relative_to(REPO)), path.read_text())]
    assert found == []


@pytest.mark.parametrize("text", ["`python -m pytest` runs everything", "python3 -m pytest -m gpu",
                                  "(`pytest` aside) `/usr/bin/python3.11 -m pytest -q`"])
def test_the_spelling_check_catches_another_interpreter(text):
    assert other_spellings("planted.md", text)


def test_python3_passes_only_where_the_doc_sets_up_a_gpu_host():
    assert other_spellings("prose.md", "after `source scripts/gpu_env.sh`: python3 -m pytest -m gpu")
    assert not other_spellings("host.md", "```sh\nsource scripts/gpu_env.sh\npython3 -m pytest -m gpu\n```")
    assert not other_spellings("ok.md", "bash scripts/setup.sh && .venv/bin/python -m pytest")


def test_the_length_and_pip_checks_catch_their_planted_faults():
    assert long_docs({"long.md": "line\n" * (MAX_DOC_LINES + 1)}) and not long_docs({"ok.md": "line\n" * 400})
    assert pip_by_name("a.md", "torch (`pip install 'vkcoop[cuda]'`)")
    assert not pip_by_name("b.md", "`.venv/bin/python -m pip install -e '.[cuda]'`")
