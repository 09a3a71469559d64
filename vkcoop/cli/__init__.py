"""The ``vkcoop`` command line: one module per group of commands, each a thin printer over a function that
returns data, and one error handler that turns every vkcoop error into one line and a documented exit code."""
from __future__ import annotations

import argparse
import os
import sys

from .. import __version__
from .commands import COMMANDS

# The command modules (and numpy, Vulkan, torch below them) load when a parser or handler needs them, not with
# this package: `vkcoop --version` loads none of them (tests/test_startup.py).


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Descriptions as written; every option's default appended to its help unless the help already says it."""

    def _get_help_string(self, action):
        text = action.help or ""
        if ("default" in text or action.default in (None, False, argparse.SUPPRESS) or not action.option_strings
                or action.default in ([], ())):
            return text
        if isinstance(action.default, (list, tuple)):   # comma lists, as they are typed
            return f"{text} (default: {','.join(str(v) for v in action.default)})"
        return f"{text} (default: %(default)s)"


class Parser(argparse.ArgumentParser):
    """argparse with one-line errors (exit 2) that point at the help of the command they concern, and defaults
    shown in every help."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)
        # The innermost command parsed sets it last: options it does not know are sent to its --help.
        self.set_defaults(command_prog=self.prog)

    def error(self, message):
        from .common import CliError

        # The handler prints "vkcoop: error: "; argparse's own "PROG: " prefix would say vkcoop twice.
        raise CliError(message, f"see `{self.prog} --help`")

    def _check_value(self, action, value):
        if isinstance(action, argparse._SubParsersAction) and value not in action.choices:
            raise argparse.ArgumentError(None, f"unknown command '{value}' ({self.prog} has "
                                               f"{', '.join(action.choices)})")
        super()._check_value(action, value)

    def parse_args(self, args=None, namespace=None):
        from .common import CliError

        parsed, unknown = self.parse_known_args(args, namespace)
        if unknown:
            raise CliError(f"unrecognized arguments: {' '.join(unknown)}",
                           f"see `{getattr(parsed, 'command_prog', self.prog)} --help`")
        return parsed


def command_word(argv) -> str | None:
    """The command ``argv`` names: its first word that is not one of the options before it (none take values)."""
    return next((word for word in argv if not word.startswith("-")), None)


def build_parser(argv=None) -> argparse.ArgumentParser:
    """The parser of every command, or with ``argv`` only of the command it names: the others are listed with
    their help, and their modules are not loaded."""
    import importlib

    from .common import EXIT_CODES_HELP

    parser = Parser(prog="vkcoop", description="Vulkan cooperative_matrix2 samples, reference and benchmarks",
                    epilog=EXIT_CODES_HELP)
    parser.add_argument("--version", action="version", version=f"vkcoop {__version__}")
    parser.add_argument("--debug", action="store_true", help="show the traceback of an error")
    parser.add_argument("--yes", action="store_true",
                        help="install what is missing (the shader toolchain) without asking; "
                             "also $VKCOOP_AUTO_TOOLCHAIN=1")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=Parser)
    chosen = COMMANDS.get(command_word(argv)) if argv is not None else None
    for name, (module, function, help) in COMMANDS.items():
        if name in sub.choices:            # added with another command of its module's function
            continue
        if argv is None or (chosen and chosen[:2] == (module, function)):
            getattr(importlib.import_module(module, __name__), function)(sub)
        else:
            sub.add_parser(name, help=help)
    return parser


def require_toolchain(auto_install: bool) -> None:
    """Exit 3 with one line when no coopmat2 toolchain exists, unless asked to install one."""
    import spirv_tools

    from .common import CliError, Exit, err_console
    from .toolchain import accept_by_shader_check
    try:
        spirv_tools.require_toolchain(auto_install or None, accept=accept_by_shader_check,
                                      log=lambda msg: err_console.print(msg))
    except spirv_tools.ToolchainMissingError as error:
        raise CliError(f"no coopmat2-capable shader toolchain ({str(error).splitlines()[0][:200]})",
                       "run `vkcoop toolchain install`, or add --yes", Exit.ENVIRONMENT) from None


def _dispatch(argv) -> int:
    args = build_parser(argv).parse_args(argv)
    # Each command that compiles shaders says so (`needs_toolchain`, a flag or a test of its arguments).
    needs = getattr(args, "needs_toolchain", False)
    if needs(args) if callable(needs) else needs:
        require_toolchain(args.yes)
    return int(args.func(args))


def asks_version(argv) -> bool:
    """Whether argparse would stop at --version: it comes among the options before the command (no -h first)."""
    for word in argv:
        if word == "--version":
            return True
        if word in ("-h", "--help", "--") or not word.startswith("-"):
            return False
    return False


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if asks_version(argv):   # answered before any command module loads
        print(f"vkcoop {__version__}")
        return 0
    from .common import Exit, err_console
    from .errors import classify

    debug = "--debug" in argv
    try:
        return _dispatch(argv)
    except SystemExit as done:   # --help / --version
        return done.code if isinstance(done.code, int) else 0
    except KeyboardInterrupt:
        err_console.print("vkcoop: interrupted")
        return Exit.INTERRUPTED
    except BrokenPipeError:
        # The reader went away (`vkcoop ... | head`): stop quietly, and keep Python from complaining at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return Exit.OK
    except Exception as error:  # noqa: BLE001 - every error becomes one line; --debug shows where
        if debug:
            raise
        try:
            code, line = classify(error)
        except Exception:  # noqa: BLE001 - never let the handler hide the original error
            code, line = Exit.FAILED, f"{type(error).__name__}: {error}; rerun with --debug"
        print(f"vkcoop: error: {line}", file=sys.stderr)
        return int(code)
