"""`vkcoop --version` answers before any command module loads: in a child process, after main() returned, none
of numpy, vulkan or torch is in sys.modules. The child imports vkcoop from this checkout, as the console script
does from an installed one."""
from __future__ import annotations

import contextlib
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

import vkcoop
from vkcoop import cli
from vkcoop.cli.common import CliError

ROOT = Path(__file__).resolve().parent.parent
HEAVY = ("numpy", "vulkan", "torch")

# argv[1] is a module to import first ("" for none): the check's own planted fault; the rest is vkcoop's argv.
CHILD = f"""
import importlib, json, sys
if sys.argv[1]:
    importlib.import_module(sys.argv[1])
from vkcoop.cli import main
code = main(sys.argv[2:])
print(json.dumps({{"code": code, "loaded": [m for m in {HEAVY!r} if m in sys.modules]}}))
"""


def _child(*argv: str, first: str = "") -> tuple[str, dict]:
    proc = subprocess.run([sys.executable, "-c", CHILD, first, *argv], cwd=ROOT, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    *printed, last = proc.stdout.strip().splitlines()
    return "\n".join(printed), json.loads(last)


def test_version_loads_no_numpy_vulkan_or_torch():
    printed, result = _child("--version")
    assert printed == f"vkcoop {vkcoop.__version__}" and result["code"] == 0
    assert result["loaded"] == [], f"`vkcoop --version` imported {result['loaded']}"


def test_the_check_sees_a_module_loaded_before_the_version():
    """The planted fault: numpy loaded in the child must show in what the check reads."""
    pytest.importorskip("numpy")
    _, result = _child("--version", first="numpy")
    assert result["loaded"] == ["numpy"]


def test_a_command_still_loads_its_modules():
    """The other side: past --version the command modules (numpy with them) do load."""
    _, result = _child("explain", "--help")
    assert "numpy" in result["loaded"] and result["code"] == 0


def _argparse_says_version(argv: list[str]) -> bool:
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            cli.build_parser().parse_args(argv)
    except SystemExit:
        return out.getvalue().strip() == f"vkcoop {vkcoop.__version__}"
    except CliError:
        return False
    return False


@pytest.mark.parametrize("argv", [["--version"], ["--debug", "--version"], ["--yes", "--debug", "--version"],
                                  ["--version", "demo"], ["-h", "--version"], ["--help", "--version"],
                                  ["demo", "--version"], ["explain", "--version"], ["bogus", "--version"],
                                  ["--", "--version"], ["--debug"], []])
def test_the_early_answer_agrees_with_argparse(argv):
    assert cli.asks_version(argv) == _argparse_says_version(argv), argv


def test_the_command_list_and_a_usage_error_load_no_command_module():
    """Only the named command's module loads: the list of commands and an unknown command answer without numpy."""
    for argv in (["--help"], ["frobnicate"], ["toolchain", "--help"]):
        _, result = _child(*argv)
        assert result["loaded"] == [], f"`vkcoop {' '.join(argv)}` imported {result['loaded']}"
    _, result = _child("frobnicate")
    assert result["code"] == 2


@pytest.mark.parametrize("argv", [["--help"], ["frobnicate"], ["--debug", "run", "--help"], ["list"], ["shaders"]])
def test_the_commands_listed_without_their_modules_read_as_when_every_module_is_loaded(argv):
    """The one-line help of each command in cli.COMMANDS is the one its module's parser carries: the listing built
    for one command (the others as placeholders) is the listing of the parser with every command."""
    assert cli.build_parser(argv).format_help() == cli.build_parser().format_help()
    full = cli.build_parser()._subparsers._group_actions[0].choices
    assert list(full) == list(cli.COMMANDS)
