"""``vkcoop bench peak`` on the command line: options, the table, JSON and exit codes around
:func:`vkcoop.bench.peak.run_peak` (``python -m vkcoop bench peak``)."""
from __future__ import annotations

import json
import sys

from ..paths import output_file
from ..bench.peak import CUDA_ONLY_TYPES, FORMS, MODES, OPERANDS, TYPES, PeakResult, PeakRow, run_peak
from .common import Exit, ending_after_output


def print_table(result: PeakResult, console=None) -> None:
    from rich.console import Console
    from rich.table import Table
    console = console or Console(width=None if Console().is_terminal else 170)
    env = result.environment
    table = Table(title=f"vkcoop bench peak: {env.get('vulkan_device') or '-'} / {env.get('cuda_device') or '-'}")
    for column in ("api", "form", "types", "shape", "operands", "status", "ms", "rate", "note"):
        table.add_column(column, justify="right" if column in ("ms", "rate") else "left", overflow="fold")
    for r in result.rows:
        rate = "-" if r.rate is None else f"{r.rate:,.1f} {r.unit}"
        ms = "-" if r.median_ms is None else f"{r.median_ms:.3f}"
        table.add_row(r.api, r.form, r.types, r.shape, r.operands, r.status, ms,
                      rate, r.reason[:120], style={"ok": None, "skipped": "dim"}.get(r.status, "red"))
    console.print(table)


def _list(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]


def add_arguments(parser) -> None:
    parser.add_argument("--types", type=_list, default=None,
                        help="type combinations to measure, of " + ",".join(TYPES) + " and, CUDA's wgmma forms only, "
                             + ",".join(CUDA_ONLY_TYPES) + " (default: all the driver lists)")
    parser.add_argument("--forms", type=_list, default=None,
                        help="matrix forms to measure, of " + ",".join(FORMS) + " (default: all)")
    parser.add_argument("--modes", type=_list, default=list(MODES), help="bandwidth: read,copy")
    parser.add_argument("--operands", type=_list, default=list(OPERANDS),
                        help="what A and B hold while a Vulkan form is timed: zeros (the ceiling bench sparse divides "
                             "by), random (the tensor cores switch as in a GEMM, and draw its power); default both")
    parser.add_argument("--no-vulkan", action="store_true", help="leave out the Vulkan forms and bandwidth")
    parser.add_argument("--no-cuda", action="store_true", help="leave out the CUDA forms and bandwidth")
    parser.add_argument("--device", default=None, help="Vulkan device index or name")
    parser.add_argument("--sms", type=int, default=None, help="SM count (groups = 64 x SMs; default: torch, else 132)")
    parser.add_argument("--target-ms", type=float, default=10.0, help="calibrated length of one timed dispatch")
    parser.add_argument("--repeats", type=int, default=5, help="timed dispatches per row (median)")
    parser.add_argument("--bandwidth-mib", type=int, default=1024, help="bytes streamed per bandwidth dispatch")
    parser.add_argument("--json", dest="json_path", default=None, help="write every row and the ceilings as JSON")


def _report_progress(row: PeakRow) -> None:
    rate = "" if row.rate is None else f" {row.rate:,.1f} {row.unit}"
    operands = f" ({row.operands})" if row.operands else ""
    print(f"{row.api} {row.form} {row.types} {row.shape}{operands}: {row.status}{rate}", file=sys.stderr, flush=True)


def run(args) -> int:
    """``vkcoop bench peak``: 0 when every measured row passed its check, 1 when one failed, 3 when nothing could
    be measured here. Bad arguments raise ValueError (one line through the CLI) before any device work."""
    try:
        if args.no_vulkan and args.no_cuda:
            raise ValueError("--no-vulkan and --no-cuda leave nothing to measure")
        path = output_file(args.json_path)   # a bad --json path fails now, not after the measurements
        result = run_peak(device=args.device, vulkan=not args.no_vulkan, cuda=not args.no_cuda, types=args.types,
                          forms=args.forms, modes=args.modes, sms=args.sms, target_ms=args.target_ms,
                          repeats=args.repeats, megabytes=args.bandwidth_mib, progress=_report_progress,
                          operands=args.operands)
    except ValueError as error:
        print(f"vkcoop: error: {error}; see `vkcoop bench peak --help`", file=sys.stderr)
        return Exit.USAGE
    print_table(result)
    if path is not None:
        path.write_text(json.dumps(result.to_dict(), indent=2, default=str) + "\n")
        print(f"wrote {path}", file=sys.stderr)
    if any(r.status in ("failed", "error") for r in result.rows):
        return Exit.FAILED
    return ending_after_output(result.rows, "form or bandwidth")

