"""``vkcoop explain``: what a tensor layout and view do to each matrix cell, in the terminal, as JSON, as a
picture, as GLSL, and (``--check``) on a coopmat2 device.

The cli wires it with :func:`add_arguments` and :func:`run` (``vkcoop explain``); :func:`main` runs it
alone, in-process. Data and printing are apart: :func:`build_request` turns the options into a
:class:`Request`, :func:`compute` gives the :class:`vkcoop.tensor.explain.Explanation` (and the check
result), and the printers only present them.

Exit status: 0 fine, 1 the hardware disagrees with the reference outside the known findings, 2 bad usage
or input (one ``vkcoop: error: ...`` line, before anything runs; after the usage lines when no layout is given
and standard input is a terminal, which is read only when piped or named by ``--glsl -``), 3 something the
environment lacks (matplotlib for ``--png``, a coopmat2 device or toolchain for ``--check``).
"""
from __future__ import annotations

import argparse
import importlib
import json
import re
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path

from ..tensor import ClampMode, TensorLayout, TensorSpecError, TensorView
from ..tensor.explain import Explanation, default_shape, explain, grid_table, legend_text, state_table, title
from ..tensor.glsl import GlslError, parse, to_glsl

#: One line for the command's help (the cli can use it for its subcommand).
DESCRIPTION = ("show what a tensor layout and view do to each matrix cell: a coloured grid, --json, --png, "
               "--glsl-out, and --check on a coopmat2 device")
EXAMPLE = "vkcoop explain --dims 6,8 --clamp Repeat --slice=-1,6,4,8"
MAX_SIDE = 1024        # cooperativeMatrixFlexibleDimensionsMaxDimension on the H200
MAX_CELLS = 1 << 16
LAYOUT_OPTIONS = ("dims", "clamp", "block", "stride", "slice", "clamp_value")
VIEW_OPTIONS = ("view_perm", "view_dims", "view_stride", "clip")


class UsageError(ValueError):
    """Bad options or input; the message reads ``<what>; <what to do>``."""


class NoLayoutGiven(UsageError):
    """No layout option, no --glsl, and standard input is a terminal: the usage is shown, nothing is read."""


class EnvironmentMissing(RuntimeError):
    """Something this machine lacks for the asked output."""


_LAYOUT_OPTION_HELP = (
    ("--dims", "D0,D1,..", "setTensorLayoutDimensionNV: 1 to 5 dimensions, outermost first (also sets span = "
                           "dims, offset = 0 and packed strides)"),
    ("--clamp", "MODE", "createTensorLayoutNV clamp mode: Undefined (default), Constant, ClampToEdge, Repeat or "
                        "MirrorRepeat"),
    ("--block", "B0,B1,..", "setTensorLayoutBlockSizeNV (applied before --dims)"),
    ("--stride", "S0,S1,..", "setTensorLayoutStrideNV, in blocks when blockSize > 1"),
    ("--slice", "O0,S0,O1,S1,..", "sliceTensorLayoutNV: offset and span per dimension, interleaved; offsets may "
                                  "be negative"),
    ("--clamp-value", "BITS", "setTensorLayoutClampValueNV: the raw 32-bit value (decimal or 0x hex)"),
    ("--view-perm", "P0,P1,..", "createTensorViewNV permutation (a view is made when any --view-*/--clip option "
                                "is given)"),
    ("--view-dims", "D0,D1,..", "setTensorViewDimensionsNV (makes hasDimensions true)"),
    ("--view-stride", "S0,S1,..", "setTensorViewStrideNV"),
    ("--clip", "RO,RS,CO,CS", "setTensorViewClipNV: row offset, row span, column offset, column span"),
)
_OTHER_OPTION_HELP = (
    ("--glsl", "FILE", "read the layout and view from a GLSL snippet of those built-in calls ('-': standard "
                       "input, also read when no layout option is given and it is piped)"),
    ("--matrix", "RxC", "the matrix shape (default: one that covers the span or the view once)"),
    ("--png", "FILE", "draw the matrix and the tensor side by side (matplotlib)"),
    ("--json", "FILE", "write the per-cell maps as JSON ('-': standard output only)"),
    ("--device", "D", "device index or name substring for --check"),
)
_SWITCH_HELP = (
    ("--store", "explain coopMatStoreTensorNV instead of a load"),
    ("--glsl-out", "print only the GLSL that builds this layout and view"),
    ("--decode", "also show blockCoord/coordInBlock per cell, the decode function's arguments (block loads)"),
    ("--check", "run the same access on a coopmat2 device and mark every cell where it disagrees with the "
                "reference (known findings F1/F2 named)"),
)


def add_command(sub) -> None:
    """``vkcoop explain`` among the commands."""
    from .commands import command_help
    from .common import add_module_command

    add_module_command(sub, "explain", sys.modules[__name__], command_help("explain"), DESCRIPTION)


def add_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Register every option of ``vkcoop explain`` on ``parser``. Values are checked by :func:`run`, so
    the errors read the same whichever parser took them."""
    # Lists such as "--slice -1,6,0,8" start with a minus: let argparse take "-1,6,0,8" as a (negative
    # number) value rather than an unknown option. The matcher is argparse's own hook for this.
    if hasattr(parser, "_negative_number_matcher"):
        parser._negative_number_matcher = re.compile(r"^-\d[\d,\s-]*$|^-\d*\.\d+$")
    group = parser.add_argument_group("layout and view, as options (the GLSL built-in each one calls)")
    for flag, metavar, text in _LAYOUT_OPTION_HELP:
        group.add_argument(flag, metavar=metavar, help=text)
    for flag, metavar, text in _OTHER_OPTION_HELP:
        parser.add_argument(flag, metavar=metavar, help=text)
    for flag, text in _SWITCH_HELP:
        parser.add_argument(flag, action="store_true", help=text)
    return parser


# --------------------------------------------------------------------------- options -> request

@dataclass(frozen=True)
class Request:
    layout: TensorLayout
    view: TensorView | None
    rows: int
    cols: int
    op: str
    source: str     # "options", a file name or "<stdin>"


def _ints(text: str | None, option: str, count: int | None = None) -> tuple[int, ...] | None:
    if text is None:
        return None
    try:
        values = tuple(int(part, 0) for part in text.replace(" ", "").split(","))
    except ValueError:
        raise UsageError(f"{option} {text!r} is not a comma-separated list of integers; e.g. {option} "
                         f"{'0,3,0,4' if option == '--clip' else '6,8'}") from None
    if count is not None and len(values) != count:
        raise UsageError(f"{option} needs {count} values, got {len(values)}; give one per "
                         f"{'clip field' if option == '--clip' else 'dimension'}")
    return values


def _mode(text: str | None) -> ClampMode:
    if text is None:
        return ClampMode.Undefined
    key = text.strip().removeprefix("gl_CooperativeMatrixClampMode").removesuffix("NV").replace("_", "").lower()
    for name, mode in ClampMode.__members__.items():
        if name.replace("_", "").lower() == key or key == str(mode.value):
            return mode
    raise UsageError(f"--clamp {text!r} is not a clamp mode; use Undefined, Constant, ClampToEdge, Repeat or "
                     f"MirrorRepeat")


def _matrix(text: str | None) -> tuple[int, int] | None:
    if text is None:
        return None
    match = re.fullmatch(r"\s*(\d+)\s*[xX×]\s*(\d+)\s*", text)
    if not match:
        raise UsageError(f"--matrix {text!r} is not ROWSxCOLS; e.g. --matrix 16x16")
    rows, cols = int(match[1]), int(match[2])
    if rows < 1 or cols < 1:
        raise UsageError(f"--matrix {text} has no cells; a matrix has at least 1 row and 1 column")
    limit = _limit_exceeded(rows, cols)
    if limit:
        raise UsageError(f"--matrix {text}: {limit}")
    return rows, cols


def _limit_exceeded(rows: int, cols: int, exact: bool = True) -> str | None:
    """``<the limit exceeded>; <what to do>`` for a matrix too big to explain, else None (``exact`` False: a
    side over MAX_SIDE is only known to be over it)."""
    for count, what in ((rows, "rows"), (cols, "columns")):
        if count > MAX_SIDE:
            amount = f"{count} {what}, over" if exact else f"more {what} than"
            return (f"{amount} the {MAX_SIDE} a side may have (cooperativeMatrixFlexibleDimensionsMaxDimension); "
                    f"choose at most {MAX_SIDE} {what}")
    if rows * cols > MAX_CELLS:
        return (f"{rows * cols} cells, over the {MAX_CELLS} explain shows; choose at most {MAX_CELLS} cells, e.g. "
                f"--matrix {max(1, MAX_CELLS // cols)}x{cols}")
    return None


def _options_layout(args) -> TensorLayout:
    dims = _ints(args.dims, "--dims")
    if not 1 <= len(dims) <= 5:
        raise UsageError(f"--dims has {len(dims)} values; a tensor layout has 1..5 dimensions")
    n = len(dims)
    t = TensorLayout.create(n, _mode(args.clamp))
    if args.block is not None:
        t = t.set_block_size(_ints(args.block, "--block", n))
    t = t.set_dimension(dims)
    if args.stride is not None:
        t = t.set_stride(_ints(args.stride, "--stride", n))
    if args.slice is not None:
        pairs = _ints(args.slice, "--slice", 2 * n)
        t = t.slice(pairs[0::2], pairs[1::2])
    if args.clamp_value is not None:
        t = t.set_clamp_value(_ints(args.clamp_value, "--clamp-value", 1)[0])
    return t


def _options_view(args, layout: TensorLayout) -> TensorView | None:
    if all(getattr(args, name) is None for name in VIEW_OPTIONS):
        return None
    perm = _ints(args.view_perm, "--view-perm")
    dims = _ints(args.view_dims, "--view-dims")
    stride = _ints(args.view_stride, "--view-stride")
    vdim = len(dims) if dims else len(perm) if perm else len(stride) if stride else layout.dim
    v = TensorView.create(vdim, dims is not None, perm)
    if dims is not None:
        v = v.set_dimensions(dims)
    if stride is not None:
        v = v.set_stride(_ints(args.view_stride, "--view-stride", vdim))
    if args.clip is not None:
        v = v.set_clip(*_ints(args.clip, "--clip", 4))
    return v


def _read_glsl(args, stdin) -> tuple[str, str]:
    name = args.glsl or "-"
    if name == "-":
        # Standard input is read when piped, or on a terminal only when asked for by name (--glsl -).
        if stdin is None or (args.glsl is None and stdin.isatty()):
            raise NoLayoutGiven(f"no layout given; give --dims (e.g. {EXAMPLE}), --glsl FILE, or pipe a GLSL "
                                f"snippet on standard input")
        if stdin.isatty():
            print("reading the GLSL snippet from the terminal; end it with Ctrl-D", file=sys.stderr)
        return stdin.read(), "<stdin>"
    try:
        return Path(name).read_text(), name
    except (OSError, UnicodeDecodeError) as error:
        raise UsageError(f"cannot read --glsl {name}: {error.strerror if isinstance(error, OSError) else error}; "
                         f"give a readable text file, or - for standard input") from None


def build_request(args, stdin=None) -> Request:
    """The explained access from the options (or the GLSL snippet); raises UsageError."""
    option_form = [n for n in LAYOUT_OPTIONS + VIEW_OPTIONS if getattr(args, n, None) is not None]
    try:
        if args.glsl is not None and option_form:
            raise UsageError(f"--glsl and --{option_form[0].replace('_', '-')} both describe the layout; use "
                             f"one form")
        if args.dims is None and option_form:
            raise UsageError(f"--{option_form[0].replace('_', '-')} needs --dims (the layout's dimensions); add "
                             f"--dims D0,D1,.. or give the whole layout with --glsl FILE")
        if args.dims is not None:
            layout, source = _options_layout(args), "options"
            view = _options_view(args, layout)
        else:
            text, source = _read_glsl(args, stdin)
            try:
                program = parse(text)
            except GlslError as error:
                raise UsageError(f"{source}: {error}; only the tensor layout/view built-ins with integer "
                                 f"literals and assigned names are understood") from None
            layout, view = program.layout, program.view
        _check_view_dimensions(layout, view)
    except TensorSpecError as error:
        raise UsageError(f"{error}; check the layout and view options") from None
    op = "store" if args.store else "load"
    if op == "store" and any(b != 1 for b in layout.block_size):
        raise UsageError("block sizes > 1 cannot be stored (SPV_NV_cooperative_matrix2); drop --store or the "
                         "block size")
    if args.decode and op == "store":
        raise UsageError("--decode shows decode-function arguments, which only loads have; drop --store or "
                         "--decode")
    if args.glsl_out and args.json == "-":
        raise UsageError("--glsl-out and --json - both want standard output; write the JSON to a file")
    if args.device is not None and not args.check:
        raise UsageError("--device picks the device for --check; add --check or drop --device")
    for option, target in (("--json", args.json), ("--png", args.png)):
        if target not in (None, "-") and not Path(target).resolve().parent.is_dir():
            raise UsageError(f"{option} {target}: the directory {Path(target).resolve().parent} does not exist; "
                             f"create it or write elsewhere")
    shape = _matrix(args.matrix) or _default_matrix(layout, view)
    return Request(layout, view, shape[0], shape[1], op, source)


def _check_view_dimensions(layout: TensorLayout, view: TensorView | None) -> None:
    """A view with hasDimensions false takes its dimensions from the layout's span (linearToViewCoord), one
    per dimension: refuse one whose dimension count differs, saying which way out the spec gives."""
    if view is None or view.has_dimensions or view.dim == layout.dim:
        return
    ignored = " (its setTensorViewDimensionsNV values are unused)" if any(view.view_dimension) else ""
    raise UsageError(f"a {view.dim}-D tensor view with hasDimensions false{ignored} reads its dimensions from the "
                     f"{layout.dim}-D layout's span, so it must have {layout.dim}; create it with hasDimensions true "
                     f"(createTensorViewNV({view.dim}, true) and setTensorViewDimensionsNV, or --view-dims) or with "
                     f"{layout.dim} dimensions")


def _default_matrix(layout: TensorLayout, view: TensorView | None) -> tuple[int, int]:
    try:
        rows, cols = default_shape(layout, view, limit=MAX_SIDE + 1)
    except TensorSpecError as error:   # e.g. a view dimension of 0
        raise UsageError(f"{error}; fix the layout or view") from None
    limit = _limit_exceeded(rows, cols, exact=False)
    if limit:
        covered = "span" if view is None or not view.has_dimensions else "view"
        raise UsageError(f"the matrix that covers the {covered} once has "
                         f"{limit.replace('; choose', '; give --matrix RxC with', 1)}")
    return rows, cols


def compute(request: Request) -> Explanation:
    try:
        return explain(request.layout, request.rows, request.cols, request.view, request.op)
    except TensorSpecError as error:   # e.g. a zero span or a view that does not fit the layout
        raise UsageError(f"{error}; fix the layout or view") from None


# --------------------------------------------------------------------------- printers

def print_check(check, console) -> None:
    findings = check.findings()
    console.print(f"--check on {check.device} ({check.variant}): "
                  + ("no cell differs from the reference" if not findings else
                     ", ".join(f"{n} cell(s) {name}" for name, n in findings.items())))
    if check.position_mismatch:
        console.print("[red]the store wrote positions the reference does not write[/red]")
    for name, note in (("F1", "packed strides use floor(dim/blockSize), the spec says ceiling"),
                       ("F2", "MirrorRepeat with a layout dimension of 1 addresses coordinate -1")):
        if name in findings:
            console.print(f"  {name}: known driver finding, docs/spec-notes.md: {note}")


def print_terminal(e: Explanation, console, *, decode: bool = False, check=None) -> None:
    console.print(f"[bold]{title(e)}[/bold]")
    console.print(grid_table(e, check=check))
    if decode:
        console.print(grid_table(e, decode=True, check=check))
    console.print(legend_text(e))
    console.print(state_table(e))
    if check is not None:
        print_check(check, console)


def json_text(data: dict, indent: str = " ") -> str:
    """JSON with one line per key, and per row of the rows x cols arrays (readable, and diff-friendly)."""
    parts = []
    for key, value in data.items():
        if isinstance(value, dict) and any(isinstance(v, list) for v in value.values()):
            text = json_text(value, indent + " ")
        elif isinstance(value, list) and value and isinstance(value[0], list):
            text = "[\n" + ",\n".join(f"{indent}  {json.dumps(row)}" for row in value) + f"\n{indent}]"
        else:
            text = json.dumps(value)
        parts.append(f"{indent}{json.dumps(key)}: {text}")
    return "{\n" + ",\n".join(parts) + "\n" + indent[:-1] + "}"


def write_json(e: Explanation, target: str, check=None) -> None:
    data = e.to_json()
    if check is not None:
        data["check"] = check.to_json()
    text = json_text(data)
    if target == "-":
        sys.stdout.write(text + "\n")
    else:
        Path(target).write_text(text + "\n")


# --------------------------------------------------------------------------- run

def command_line(args) -> str:
    """The ``vkcoop explain`` command that makes this explanation (without the output options)."""
    words = ["vkcoop", "explain"]
    for name in ("glsl",) + LAYOUT_OPTIONS + VIEW_OPTIONS + ("matrix",):
        value = getattr(args, name, None)
        if value is not None:
            words += [f"--{name.replace('_', '-')}", value]
    if args.store:
        words.append("--store")
    return shlex.join(words)


def _needs(args) -> None:
    """Raise EnvironmentMissing for what the asked outputs need and this machine lacks (not --check: that
    needs the reference first, to refuse an access the hardware shader cannot run as a usage error)."""
    if args.png:
        try:
            importlib.import_module("matplotlib")
        except ImportError as error:
            raise EnvironmentMissing(f"--png needs matplotlib ({error}); pip install matplotlib, or leave "
                                     f"out --png") from None


def run(args, *, stdin=None) -> int:
    """Do what ``args`` (from a parser set up by :func:`add_arguments`) ask; returns the exit status."""
    from rich.console import Console
    stdin = sys.stdin if stdin is None else stdin
    check = None
    try:
        request = build_request(args, stdin if (args.glsl == "-" or args.dims is None) else None)
        _needs(args)
        e = compute(request)
        if args.check:
            from ..fuzz.explain_check import CheckUnavailable, CheckUnsupported, run_check
            try:
                check = run_check(e, _device(args.device))
            except CheckUnsupported as error:
                raise UsageError(str(error)) from None
            except CheckUnavailable as error:
                raise EnvironmentMissing(str(error)) from None
    except UsageError as error:
        if isinstance(error, NoLayoutGiven):
            sys.stderr.write(usage())
        print(f"vkcoop: error: {error}", file=sys.stderr)
        return 2
    except EnvironmentMissing as error:
        print(f"vkcoop: error: {error}", file=sys.stderr)
        return 3
    if args.glsl_out:
        sys.stdout.write(to_glsl(e.layout, e.view))
    elif args.json != "-":
        console = Console(highlight=False)
        if not console.is_terminal:   # piped: wide enough for the grid instead of wrapping it at 80
            console = Console(highlight=False, width=max(100, 8 + 7 * min(e.cols, 32)))
        print_terminal(e, console, decode=args.decode, check=check)
    if args.json:
        write_json(e, args.json, check)
    if args.png:
        from ..tensor.figure import render
        render(e, args.png, command=command_line(args))
        print(f"wrote {args.png}", file=sys.stderr)
    return 1 if check is not None and check.unexplained else 0


def usage() -> str:
    """The ``usage: vkcoop explain ...`` lines of ``--help``."""
    return add_arguments(_Parser(prog="vkcoop explain")).format_usage()


def _device(text: str | None):
    return int(text) if text is not None and text.isdigit() else text


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line and exit status 2 (no usage block)."""

    def error(self, message):
        print(f"vkcoop: error: {message}; see vkcoop explain --help", file=sys.stderr)
        raise SystemExit(2)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = add_arguments(_Parser(prog="vkcoop explain", description=DESCRIPTION))
    args = parser.parse_args(argv)
    return run(args)
