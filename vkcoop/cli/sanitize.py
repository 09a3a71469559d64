"""``vkcoop sanitize vulkan`` and ``vkcoop sanitize cuda``: what ships, under the tools that check what a kernel
reads and writes (docs/sanitizers.md). Progress goes to stderr; the report to stdout, or as JSON to a file; exit 0
clean, 1 with findings, 3 where the tool, the layer or the GPU is missing."""
from __future__ import annotations

import json
import re

from rich.table import Table

from .commands import command_help
from .common import (CliError, Exit, add_device_argument, check_device, choice_list, console, emit_json,
                     err_console, nothing_ran, nothing_ran_error, output_path, positive_int, positive_seconds)


def _progress(text: str) -> None:
    err_console.print(f"[dim]{text}[/dim]", highlight=False)


# --- vulkan -------------------------------------------------------------------------------------------------
def print_gpu_av(report) -> None:
    table = Table(title=f"GPU-assisted validation on {report.device}")
    for column in ("what", "runs", "ok", "failed", "skipped", "messages", "not instrumented"):
        table.add_column(column)
    for kind in ("sample", "gemm", "attention", "flush"):
        runs = [r for r in report.runs if r.kind == kind]
        if runs:
            table.add_row(kind, str(len(runs)), str(sum(r.status == "ok" for r in runs)),
                          str(sum(r.status in ("failed", "error") for r in runs)),
                          str(sum(r.status == "skipped" for r in runs)), str(sum(len(r.messages) for r in runs)),
                          str(sum(len(r.not_instrumented) for r in runs)))
    console.print(table)
    for run in report.runs:
        if run.status in ("failed", "error") or run.messages:
            console.print(f"[red]{run.kind} {run.name} {run.config} {run.shape}[/red]: {run.status} "
                          f"{run.reason[:300]}", highlight=False)
            for message in run.messages[:3]:
                console.print(f"  {message[:600]}", highlight=False)
    for note in report.not_instrumented()[:10]:
        console.print(f"[yellow]not instrumented[/yellow]: {note[:600]}", highlight=False)
    console.print(report.line(), highlight=False, soft_wrap=True)


def cmd_vulkan(args) -> int:
    from .. import vk
    from ..sanitize import vulkan as gpu_av

    target = output_path(args.json)
    check_device(args.device)

    def checkpoint(report):   # after each part: a run cut short keeps the parts it finished
        if target is not None:
            target.write_text(json.dumps(report.to_dict(), indent=2, default=str) + "\n")

    try:
        report = gpu_av.run_gpu_av(args.device, dtype=args.dtype, parts=args.parts, progress=_progress,
                                   checkpoint=checkpoint)
    except vk.LayerNotFoundError as error:
        raise CliError(str(error), "install vulkan-validationlayers (1.4: scripts/gpu_env.sh points "
                       "VK_ADD_LAYER_PATH at it)", Exit.ENVIRONMENT) from None
    if args.json:
        emit_json(report.to_dict(), args.json)
    if args.json != "-":
        print_gpu_av(report)
    else:   # stdout holds the JSON: the summary goes beside the progress
        err_console.print(report.line(), highlight=False, soft_wrap=True)
    if nothing_ran(r.status for r in report.runs):
        raise nothing_ran_error(f"part of the GPU-AV pass on {report.device}", [r.reason for r in report.runs],
                                "it needs a device with VK_NV_cooperative_matrix2")
    return Exit.OK if report.ok else Exit.FAILED


# --- cuda ---------------------------------------------------------------------------------------------------
def chosen_jobs(pattern: str | None) -> list[dict]:
    """The shipped jobs whose label matches ``pattern`` (all without one); a usage error where none does."""
    from ..cuda.sanitize_jobs import job_label, shipped_jobs
    jobs = shipped_jobs()
    if pattern is None:
        return jobs
    try:
        wanted = re.compile(pattern)
    except re.error as error:
        raise CliError(f"--kernels {pattern!r} is not a regular expression ({error})",
                       "give a Python regular expression, e.g. 'mma_sp_f16_.*_cs '") from None
    chosen = [job for job in jobs if wanted.search(job_label(job))]
    if not chosen:
        raise CliError(f"--kernels {pattern!r} matches none of the {len(jobs)} launches",
                       "labels look like `mma_sp_f16_128x128_k64_2x2_s4 384x256x384 (...)` or `peak_mma_f16_f32`")
    return chosen


def print_sanitizer(report) -> None:
    table = Table(title=f"compute-sanitizer {report.version} on {report.device}")
    for column in ("tool", "kernels", "launches", "errors", "wrong results", "clean"):
        table.add_column(column)
    for run in report.runs:
        counts = run.statuses()
        errors = "-" if run.log is None or run.log.errors is None else str(run.log.errors + run.log.warnings)
        table.add_row(run.tool, str(len(run.kernels())), f"{len(run.results)}/{len(run.jobs)}", errors,
                      str(counts["failed"]), "[green]yes[/green]" if run.ok else "[red]no[/red]")
    console.print(table)
    for run in report.runs:
        for record in (run.log.records if run.log else [])[:5]:
            console.print(f"[red]{run.tool}[/red] {record.kernel or '?'}: {record.kind}", highlight=False)
        for problem in (run.log.run_problems if run.log else [])[:3]:
            console.print(f"[red]{run.tool}[/red] {problem[:300]}", highlight=False)
        for result in run.results:
            if result["status"] in ("failed", "error"):
                console.print(f"[red]{run.tool}[/red] {result['label']}: {result['status']} {result['detail'][:300]}",
                              highlight=False)
    for line in report.lines():
        console.print(line, highlight=False, soft_wrap=True)


def cmd_cuda(args) -> int:
    from pathlib import Path

    from ..cuda import sanitizer

    output_path(args.json)
    logs = Path(args.logs)
    if logs.exists() and not logs.is_dir():
        raise CliError(f"--logs {logs} is a file", "name a folder (it is created)")
    jobs = chosen_jobs(args.kernels)
    try:
        report = sanitizer.run_pass(args.tools, jobs, logs, parallel=args.parallel, timeout_s=args.timeout,
                                    progress=_progress)
    except sanitizer.SanitizerUnavailableError as error:
        raise CliError(str(error), "run it on the GPU host (an H100 or H200 with the CUDA toolkit)",
                       Exit.ENVIRONMENT) from None
    if args.json:
        emit_json(report.to_dict(), args.json)
    if args.json != "-":
        print_sanitizer(report)
    else:   # stdout holds the JSON: the summaries go beside the progress
        for line in report.lines():
            err_console.print(line, highlight=False, soft_wrap=True)
    return Exit.OK if report.ok else Exit.FAILED


def add_sanitize_parser(sub) -> None:
    from ..cuda.sanitizer import DEFAULT_TIMEOUT_S, TOOLS
    from ..sanitize.vulkan import PARTS

    sanitize = sub.add_parser("sanitize", help=command_help("sanitize"),
                              description="docs/sanitizers.md: what each tool covers and what it cannot.")
    targets = sanitize.add_subparsers(dest="target", required=True, metavar="TARGET")
    p = targets.add_parser("vulkan", help="every sample, GEMM seed and attention seed under GPU-assisted validation",
                           description="Every sample's pipelines, and each shipped seed configuration of each Vulkan "
                                       "GEMM path and of the attention kernel on an aligned and a ragged problem, "
                                       "under VK_LAYER_KHRONOS_validation with GPU-AV: any message fails.")
    p.add_argument("--parts", type=choice_list(PARTS), default=list(PARTS), help="what to run")
    p.add_argument("--dtype", choices=("fp16", "bf16"), default="fp16", help="the GEMM and attention inputs")
    add_device_argument(p)
    p.add_argument("--json", nargs="?", const="-", metavar="FILE", help="write the report as JSON (- for stdout)")
    p.set_defaults(func=cmd_vulkan, needs_toolchain=True)
    p = targets.add_parser("cuda", help="the hand-written CUDA kernels under compute-sanitizer's four tools",
                           description="Every mma.sp, wgmma.sp, dense mma.sync and peak kernel configuration, at "
                                       "problems that reach split-K, cluster sums, TMA rings, partial raster groups "
                                       "and ragged edges, under "
                                       "memcheck, racecheck, synccheck and initcheck (one process each, at once).")
    p.add_argument("--tools", type=choice_list(TOOLS), default=list(TOOLS), help="which tools")
    p.add_argument("--kernels", metavar="REGEX", help="only the launches whose label matches")
    p.add_argument("--logs", default="sanitizer-logs", metavar="DIR", help="folder for each tool's report")
    p.add_argument("--parallel", type=positive_int, default=len(TOOLS), help="tools run at once")
    p.add_argument("--timeout", type=positive_seconds, default=DEFAULT_TIMEOUT_S, metavar="SECONDS",
                   help="each tool's time limit")
    p.add_argument("--json", nargs="?", const="-", metavar="FILE", help="write the report as JSON (- for stdout)")
    p.set_defaults(func=cmd_cuda)
