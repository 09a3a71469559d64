"""What every ``vkcoop`` command shares: exit codes, one-line errors, argument types, output files, consoles."""
from __future__ import annotations

import argparse
import enum
import json
import sys
from pathlib import Path

from rich.console import Console

from ..errors import InputError
from ..paths import output_file

console = Console()
err_console = Console(stderr=True)


class Exit(enum.IntEnum):
    """The documented exit codes (README, ``vkcoop --help``)."""
    OK = 0            # what ran passed, and something ran
    FAILED = 1        # a check failed (a mismatch, a failed shader, a validation message, a regression)
    USAGE = 2         # bad arguments or input; nothing was run
    ENVIRONMENT = 3   # something this needs is missing (toolchain, device, feature, tool): nothing could run
    KNOWN_DEVIATION = 4   # fuzz: only known driver deviations from the spec were reproduced
    INTERRUPTED = 130     # Ctrl-C: what ran is summarised


EXIT_CODES_HELP = """exit codes:
  0  all passed (what could not run here is named)
  1  a check failed
  2  usage: bad arguments or input (nothing ran)
  3  nothing could run: an environment need is missing (toolchain, device, feature)
  4  fuzz: only known driver deviations were reproduced
  130  interrupted (Ctrl-C), after a partial summary"""


class CliError(Exception):
    """A one-line user-facing error: ``vkcoop: error: <what>; <what to do>`` and an exit code."""

    def __init__(self, what: str, todo: str = "", code: Exit = Exit.USAGE):
        super().__init__(what)
        self.what, self.todo, self.code = what, todo, code

    def line(self) -> str:
        return f"{self.what}; {self.todo}" if self.todo else self.what


#: What a sample (``skip``) or a benchmark row (``skipped``) says when it could not run here.
SKIPPED = ("skip", "skipped")


def nothing_ran(statuses) -> bool:
    """True when no status is other than skipped: nothing was dispatched (an empty run counts as nothing)."""
    return all(status in SKIPPED for status in statuses)


def nothing_ran_error(what: str, reasons, todo: str) -> CliError:
    """The one error (exit 3) of a command whose every ``what`` (sample, path, target, part) was skipped. A partial
    run is judged by what ran instead. Of many reasons the shortest is said; the table above says each."""
    distinct = sorted({str(r).splitlines()[0] for r in reasons if r}, key=len)
    said = distinct[0] if distinct else "no reason given"
    if len(distinct) > 1:
        said += f" (and {len(distinct) - 1} other reasons above)"
    return CliError(f"no {what} could run here: {said}"[:400], todo, Exit.ENVIRONMENT)


def ending_after_output(rows, what: str) -> int:
    """The end of a command that writes its table and files whatever ran: Exit.OK, or where no row (each with a
    ``status`` and a ``reason``) ran, the nothing-ran error said on stderr below them, and its code."""
    rows = list(rows)
    if not nothing_ran(r.status for r in rows):
        return Exit.OK
    error = nothing_ran_error(what, [r.reason for r in rows], "run it on a GPU host")
    print(f"vkcoop: error: {error.line()}", file=sys.stderr)
    return error.code


def add_progress_arguments(p, lines: str) -> None:
    """``--progress`` (:data:`vkcoop.progress.PROGRESS_MODES`) and ``--quiet``, read back by :func:`chosen_progress`."""
    from ..progress import PROGRESS_MODES
    p.add_argument("--progress", choices=PROGRESS_MODES, default="auto",
                   help=f"auto: a bar with the time left on a terminal, else {lines} on stderr and a heartbeat "
                        "every 10 s; bar, lines or none")
    p.add_argument("--quiet", action="store_true", help="no progress (--progress none)")


def chosen_progress(args) -> str:
    """The mode ``--progress`` and ``--quiet`` chose (:data:`vkcoop.progress.PROGRESS_MODES`)."""
    return "none" if args.quiet else args.progress


# --- output files ---------------------------------------------------------------------------------------------
def output_path(value: str | None, what: str = "--json") -> Path | None:
    """:func:`vkcoop.paths.output_file` (checked and its folder made before any work), failing as a CliError."""
    try:
        return output_file(value, what)
    except InputError as error:
        raise CliError(str(error)) from None


def emit_json(data, target: str | None) -> None:
    """JSON to stdout (``target`` None or ``-``) or to a file (printing ``wrote FILE`` on stderr)."""
    text = json.dumps(data, indent=2, default=str)
    path = output_path(target)
    if path is None:
        print(text)
    else:
        path.write_text(text + "\n")
        wrote(path)


def wrote(path) -> None:
    """``wrote FILE`` on stderr, on one line however long the path (scripts read it)."""
    err_console.print(f"wrote {path}", soft_wrap=True, markup=False, highlight=False)


# --- argument types -------------------------------------------------------------------------------------------
def _whole_number(text: str, minimum: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < minimum:
        raise argparse.ArgumentTypeError(f"{value} must be at least {minimum}")
    return value


def positive_int(text: str) -> int:
    return _whole_number(text, 1)


def non_negative_int(text: str) -> int:
    return _whole_number(text, 0)


def choice_list(choices) -> callable:
    """A comma-separated list of ``choices`` (at least one)."""
    def parse(text: str) -> list[str]:
        items = [item.strip() for item in text.split(",") if item.strip()]
        if not items:
            raise argparse.ArgumentTypeError(f"give at least one of {','.join(choices)}")
        bad = [item for item in items if item not in choices]
        if bad:
            raise argparse.ArgumentTypeError(f"{','.join(bad)} not among {','.join(choices)}")
        return list(dict.fromkeys(items))
    parse.__name__ = "list"
    return parse


def size_list(multiple: int = 1) -> callable:
    """A comma-separated list of positive sizes, each a multiple of ``multiple``."""
    def parse(text: str) -> list[int]:
        items = [item.strip() for item in text.split(",") if item.strip()]
        if not items:
            raise argparse.ArgumentTypeError("give at least one size")
        values = [positive_int(item) for item in items]
        bad = [v for v in values if v % multiple]
        if bad:
            raise argparse.ArgumentTypeError(f"{bad[0]} is not a multiple of {multiple}")
        return values
    parse.__name__ = "sizes"
    return parse


#: ``--validate`` alone: the validation layer's API checks; ``--validate=gpu``: GPU-assisted validation as well.
VALIDATE_MODES = ("api", "gpu")


def add_validate_argument(parser: argparse.ArgumentParser, what: str) -> None:
    """``--validate[=gpu]``: ``args.validate`` is False, "api" or "gpu" (:mod:`vkcoop.vk.validation`)."""
    parser.add_argument("--validate", nargs="?", const="api", default=False, choices=VALIDATE_MODES,
                        metavar="gpu", help=f"{what} under VK_LAYER_KHRONOS_validation; --validate=gpu adds "
                        "GPU-assisted validation (every buffer access bounds-checked on the GPU)")


def add_device_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--device", default=None,
                        help="Vulkan device: index or name (default: $VKCOOP_DEVICE, else the first GPU)")


def check_device(device) -> None:
    """Reject a --device / $VKCOOP_DEVICE that names no Vulkan device, before anything runs (exit 3). With
    neither given there is nothing to check: each command says what it can't run on the default device."""
    import os

    from .. import vk
    if device is None and not os.environ.get("VKCOOP_DEVICE"):
        return
    try:
        with vk.Instance() as instance:
            instance.select(device)
    except vk.NoDeviceError as error:
        raise CliError(str(error), "pick one from `vkcoop info --all`", Exit.ENVIRONMENT) from None
    except vk.VulkanError as error:
        raise CliError(f"no Vulkan: {error}", "install a Vulkan loader and driver", Exit.ENVIRONMENT) from None


def add_module_command(sub, name: str, module, help: str, description: str, *, needs_toolchain: bool = False):
    """A command whose options and behaviour live in ``module`` (``add_arguments(parser)``, ``run(args)``)."""
    parser = sub.add_parser(name, help=help, description=description)
    module.add_arguments(parser)
    parser.set_defaults(func=module.run, needs_toolchain=needs_toolchain)
    return parser


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if value != value or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text} must be a finite number of seconds")
    return value


def positive_seconds(text: str) -> float:
    value = _seconds(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text} must be a positive number of seconds")
    return value


def seconds_at_least_zero(text: str) -> float:
    value = _seconds(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text} must be 0 or more seconds")
    return value
