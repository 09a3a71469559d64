"""``vkcoop bench sparse|compare|tuning`` and ``vkcoop fuzz``: the GEMM comparison, run-to-run comparison, the
tuning cache, and the differential fuzzer."""
from __future__ import annotations

import argparse
import json

from . import attention
from . import peak as peak_command
from .commands import command_help
from .common import (CliError, Exit, add_device_argument, add_module_command, add_progress_arguments,
                     add_validate_argument, check_device, choice_list, chosen_progress, console, emit_json,
                     err_console, non_negative_int, nothing_ran, nothing_ran_error, output_path, positive_int,
                     positive_seconds, size_list, wrote)


# --- bench ---------------------------------------------------------------------------------------------------
def fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError(f"{text} must be at least 0 and below 1")
    return value


def shape_items(text: str) -> list:
    """``--shapes``: shape classes and shape files, comma-separated (a file is read now: errors exit 2)."""
    from ..bench.shapes import parse_shapes

    items = [item.strip() for item in text.split(",") if item.strip()]
    if not items:
        raise argparse.ArgumentTypeError("give at least one shape class or file")
    try:
        return parse_shapes(items)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


shape_items.__name__ = "shapes"


def bench_sparse_settings(args):
    """The :class:`vkcoop.bench.sparse_settings.SparseBenchSettings` of ``bench sparse``'s options."""
    from ..bench.sparse_settings import SparseBenchSettings

    return SparseBenchSettings(preset=args.preset, dtypes=args.dtype, sizes=args.sizes, shapes=args.shapes,
                               llm_tokens=args.llm_tokens, paths=args.paths, iters=args.iters, warmup=args.warmup,
                               flush_l2=args.flush_l2, tune=args.tune, retune=args.retune,
                               tune_budget_s=args.tune_budget, search=args.search,
                               search_budget_s=args.search_budget, baseline=args.baseline, ceilings=args.ceilings,
                               clock_trace=not args.no_clock_trace, device=args.device, validate=args.validate)


def refuse_when_nothing_ran(outcome) -> None:
    """Exit 3 in one line, before any table or file, when no path could run on any case: each reason once."""
    if outcome.nothing_ran:
        reasons = " / ".join(reason[:160] for reason in sorted({r.reason for r in outcome.results}))
        raise CliError(f"no path could run here: {reasons}"[:400], "run it on a GPU host", Exit.ENVIRONMENT)


def cmd_bench_sparse(args) -> int:
    from ..bench import report
    from ..bench.sparse import run_sparse_bench

    json_path, plot_path = output_path(args.json_path), output_path(args.plot_path, "--plot")
    check_device(args.device)
    outcome = run_sparse_bench(bench_sparse_settings(args), console=err_console, progress=chosen_progress(args))
    refuse_when_nothing_ran(outcome)
    report.print_table(outcome)
    if outcome.interrupted:
        console.print("[yellow]interrupted: the table holds the paths measured so far[/yellow]")
    if json_path:
        wrote(report.write_json(outcome, json_path))
    timed = [r for r in outcome.results if r.tflops]
    if plot_path and timed:
        wrote(report.plot(outcome, plot_path, args.baseline))
    elif plot_path:
        console.print(f"no plot written to {plot_path}: no path was timed")
    for stored in outcome.environment.get("tuning", {}).get("stored", []):
        wrote(stored)
    if outcome.interrupted:
        return Exit.INTERRUPTED
    return Exit.FAILED if outcome.failed else Exit.OK


def cmd_bench_compare(args) -> int:
    from ..bench import compare

    json_path = output_path(args.json_path)
    try:
        a, b = compare.load_run(args.a), compare.load_run(args.b)
    except ValueError as error:
        raise CliError(str(error), "give two `vkcoop bench sparse --json` or two `bench attention --json` files") \
            from None
    try:
        rows = compare.compare_runs(a, b, args.min_noise)
    except ValueError as error:
        raise CliError(str(error), "compare two runs of the same bench") from None
    compare.print_comparison(rows, a, b, args.a, args.b, console)
    if json_path:
        document = compare.to_dict(rows, a, b, args.a, args.b)
        json_path.write_text(json.dumps(document, indent=2) + "\n")
        wrote(json_path)
    return Exit.FAILED if any(r.regressed for r in rows) else Exit.OK


def cmd_bench_waterfall(args) -> int:
    from ..bench import waterfall
    from ..errors import InputError

    json_path, plot_path = output_path(args.json_path), output_path(args.plot_path, "--plot")
    try:
        falls, sources = waterfall.load_waterfalls(args.runs)
    except InputError as error:
        raise CliError(str(error), "give `vkcoop bench sparse --json` or `bench attention --json` files") from None
    from rich.console import Console
    wide = console if console.is_terminal else Console(width=190)
    for table in waterfall.tables(falls):
        wide.print(table)
    for source in sources:
        cap = source.get("vulkan_cap")
        if cap:
            console.print(f"{source['file']}: Vulkan's cap {cap['shared_memory']} bytes of shared memory (the driver "
                          f"keeps {cap['reserved']}, the shader's share {cap['shader_share']}), at most "
                          f"{cap['max_workgroup']} invocations; read from {cap['source']}", highlight=False)
    if json_path:
        json_path.write_text(json.dumps(waterfall.to_dict(falls, sources), indent=2) + "\n")
        wrote(json_path)
    if plot_path:
        wrote(waterfall.plot(falls, plot_path))
    return Exit.OK


def _tuned_table(rows, title: str):
    from rich.markup import escape
    from rich.table import Table

    table = Table(title=title)
    for column in ("device", "driver", "path", "dtype", "class", "config", "TFLOP/s", "measured on", "tried",
                   "when"):
        table.add_column(column, justify="right" if column in ("TFLOP/s", "tried") else "left")
    for r in rows:
        tflops = r.get("tflops")
        table.add_row(escape(f"{r['device']} ({(r.get('uuid') or '')[:8]})"), r.get("driver") or "?", r["path"],
                      r["dtype"], r["class"], escape(r["config"]), "-" if tflops is None else f"{tflops:.1f}",
                      r.get("problem", "?"), str(r.get("candidates", "?")), r.get("when", "?"))
    return table


def _library_table(rows):
    from rich.markup import escape
    from rich.table import Table

    table = Table(title="remembered library searches (bench sparse --search)")
    for column in ("path", "dtype", "shape", "winner", "ms", "depth", "runners-up", "refused", "versions", "when"):
        table.add_column(column, justify="right" if column in ("ms", "runners-up", "refused") else "left")
    for r in rows:
        median = r.get("median_ms")
        table.add_row(r["path"], r["dtype"], r["shape"], escape(str(r.get("label", "?"))),
                      "-" if not isinstance(median, (int, float)) else f"{median:.3f}", str(r.get("depth", "?")),
                      str(len(r.get("runners_up") or [])), str(len(r.get("refused") or {})),
                      escape(str(r.get("versions", "?"))), str(r.get("when", "?")))
    return table


def cmd_bench_tuning(args) -> int:
    from rich.console import Console

    from ..bench.tuning import cache_dir, cached_entries

    rows = cached_entries(log=lambda line: err_console.print(f"vkcoop: {line}"))
    if args.json:
        emit_json(rows, args.json)
        return Exit.OK
    if not rows:
        console.print(f"no tuned configurations or library searches under {cache_dir()} (run `vkcoop bench "
                      "sparse`, `vkcoop bench sparse --tune` or `vkcoop bench attention --tune`)")
        return Exit.OK
    out = console if console.is_terminal else Console(width=190)
    tuned = [r for r in rows if r["kind"] == "tuned"]
    library = [r for r in rows if r["kind"] == "library"]
    if tuned:
        out.print(_tuned_table(tuned, f"tuned configurations ({cache_dir()})"))
    if library:
        out.print(_library_table(library))
    return Exit.OK


def cmd_bench_summary(args) -> int:
    from pathlib import Path

    from ..bench import results_summary

    folder = Path(args.folder)
    if not folder.is_dir():
        raise CliError(f"{folder}: no such folder", "give a result set, e.g. docs/results/h100", Exit.USAGE)
    try:
        text = results_summary.summary_markdown(folder)
        readme = None
        if args.readme:
            readme = Path(args.readme)
            updated = results_summary.replace_readme_block(readme.read_text(), folder, folder.name)
    except (ValueError, OSError) as error:
        raise CliError(str(error), "run benchmarks/gpu/results.sh on the GPU host first", Exit.USAGE) from None
    (folder / "SUMMARY.md").write_text(text)
    wrote(folder / "SUMMARY.md")
    if readme is not None:
        readme.write_text(updated)
        wrote(readme)
    return Exit.OK


def _grid_help(preset: dict, name: str) -> str:
    value = preset[name]
    return ",".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value)


def _add_sparse_parser(kinds) -> None:
    from ..bench.shapes import PRESETS, SHAPES
    from ..bench.sparse import DEFAULT_SEARCH_BUDGET, DEFAULT_TUNE_BUDGET, PATH_NAMES, SEARCH_DEPTHS
    from ..gemm.dtypes import BENCH_DTYPES

    default, full = PRESETS["default"], PRESETS["full"]
    p = kinds.add_parser("sparse", help="2:4 sparse and dense GEMM paths, Vulkan and CUDA, checked then timed",
                         description="Every 2:4 sparse and dense GEMM path on the same exact inputs, in one "
                                     "process: each is checked, then timed. Launch configurations come from the "
                                     "per-device tuning cache (`vkcoop bench tuning`), the shipped seeds (H100, "
                                     "H200) or, on a device with neither, a tuning run. The library paths' searches "
                                     "are remembered per device, case and library versions.")
    p.add_argument("--preset", choices=list(PRESETS), default="default",
                   help="the grid: default (both dtypes, 8192^3 and 8192x32x8192, about a minute) or full (sizes "
                        f"{_grid_help(full, 'sizes')}, N = {_grid_help(full, 'llm_tokens')}); --dtype, --sizes, "
                        "--shapes and --llm-tokens replace its own")
    p.add_argument("--dtype", type=choice_list(BENCH_DTYPES), default=None,
                   help=f"input types, from {','.join(BENCH_DTYPES)}: every path that takes a type runs it, the "
                        f"others are skipped with the reason (default: the preset's, {_grid_help(default, 'dtypes')})")
    p.add_argument("--sizes", type=size_list(64), default=None,
                   help=f"M = K of the square and llm cases, multiples of 64 (default: the preset's, "
                        f"{_grid_help(default, 'sizes')})")
    p.add_argument("--shapes", type=shape_items, default=None, metavar="SHAPES",
                   help=f"classes ({','.join(SHAPES)}) and/or shape files (.json/.csv of label,m,n,k): square: "
                        "N = size; llm: N = --llm-tokens; mlp: LLaMA MLP projections 5120x13824x5120 and "
                        f"4096x11008x4096 (default: the preset's, {_grid_help(default, 'shapes')})")
    p.add_argument("--paths", type=choice_list(PATH_NAMES), default=None,
                   help=f"a subset of {','.join(PATH_NAMES)} (default: all)")
    p.add_argument("--iters", type=positive_int, default=20, help="timed runs per path")
    p.add_argument("--warmup", type=non_negative_int, default=5, help="untimed runs first")
    p.add_argument("--flush-l2", action="store_true", help="flush the L2 cache before every timed run")
    p.add_argument("--no-clock-trace", action="store_true",
                   help="do not sample the GPU's clocks through NVML beside the run (each result's `clocks`)")
    p.add_argument("--ceilings", action="store_true",
                   help="then measure the register-only and bandwidth ceilings (bench peak) and add x own ceiling")
    p.add_argument("--tune", action="store_true",
                   help="tune the paths whose configuration the tuning cache lacks for this device, and store the "
                        "winners")
    p.add_argument("--retune", action="store_true", help="tune every path again, replacing cached winners")
    p.add_argument("--tune-budget", type=positive_seconds, default=DEFAULT_TUNE_BUDGET, metavar="SECONDS",
                   help="wall time all tunings of the run share")
    p.add_argument("--search", choices=SEARCH_DEPTHS, default="quick",
                   help="how far the library paths (cuSPARSELt, cuBLAS...) search where the library cache has no "
                        "winner for the case: quick, the library's own choice; deep, every option within "
                        "--search-budget; cached, none (the library's own choice, timed directly). Winners are "
                        "remembered; a deep one serves later quick runs")
    p.add_argument("--search-budget", type=positive_seconds, default=DEFAULT_SEARCH_BUDGET, metavar="SECONDS",
                   help="wall time of a deep search of one library path on one case, in the search process; its "
                        "survivors are then timed")
    p.add_argument("--llm-tokens", type=size_list(1), default=None,
                   help=f"N of the llm shapes, 1 to 256 for the memory-bound class (default: the preset's, "
                        f"{_grid_help(default, 'llm_tokens')})")
    p.add_argument("--baseline", choices=PATH_NAMES, default="cuBLAS", metavar="PATH",
                   help="the path the plot (and an extra column) divides by")
    add_device_argument(p)
    add_validate_argument(p, "run the Vulkan paths")
    add_progress_arguments(p, "one line per finished path")
    p.add_argument("--json", dest="json_path", metavar="FILE", help="write every result as JSON")
    p.add_argument("--plot", dest="plot_path", metavar="FILE.png",
                   help="write the x-baseline chart (log axis, one panel per shape class)")
    p.set_defaults(func=cmd_bench_sparse, needs_toolchain=True)
    add_module_command(kinds, "attention", attention, "the coopmat2 flash-attention kernel against torch SDPA's backends",
                       "The coopmat2 flash-attention kernel and every torch SDPA backend on the same inputs, prefill "
                       "and decode shapes: each is checked, then timed.", needs_toolchain=True)
    add_module_command(kinds, "peak", peak_command, "a measured roofline: register-only matrix throughput and memory bandwidth",
                       "Register-only throughput of each cooperative-matrix form and type the driver lists (and, "
                       "with CUDA, mma.sync / mma.sp / wgmma), and device-memory bandwidth: the ceilings the GEMM "
                       "paths are held to.", needs_toolchain=True)


def add_bench_parser(sub) -> None:
    bench = sub.add_parser("bench", help=command_help("bench"))
    kinds = bench.add_subparsers(dest="bench", required=True, metavar="BENCH")
    _add_sparse_parser(kinds)
    p = kinds.add_parser("compare", help="per-case throughput ratios B/A of two `bench sparse --json` runs, or of "
                                         "two `bench attention --json` runs",
                         description="Per-case throughput ratios B/A with the noise band from both runs' spreads; "
                                     "exit 1 when any case regressed beyond it (or lost a passing path). Runs on two "
                                     "different GPUs (an H100 run and an H200 run) show the same ratios, say that "
                                     "the GPUs differ and judge no regression: exit 0.")
    p.add_argument("a", metavar="A.json", help="the reference run")
    p.add_argument("b", metavar="B.json", help="the run compared with it")
    p.add_argument("--min-noise", type=fraction, default=0.02, metavar="FRACTION",
                   help="the smallest noise band, as a fraction")
    p.add_argument("--json", dest="json_path", metavar="FILE", help="write the comparison as JSON")
    p.set_defaults(func=cmd_bench_compare)
    p = kinds.add_parser("waterfall", help="what Vulkan costs per case: cuBLAS, mma.sync, mma.sync at Vulkan's cap, "
                                           "Vulkan (and 2:4, attention), from bench JSON files",
                         description="Per case, the rungs from the fastest path down to Vulkan's and what each step "
                                     "costs (vkcoop.bench.waterfall), from `bench sparse --json` and `bench attention "
                                     "--json` files: a table, and optionally JSON and one PNG.")
    p.add_argument("runs", nargs="+", metavar="RUN.json", help="bench sparse or bench attention JSON files")
    p.add_argument("--json", dest="json_path", metavar="FILE", help="write the waterfalls as JSON")
    p.add_argument("--plot", dest="plot_path", metavar="FILE.png", help="write the waterfalls as one chart")
    p.set_defaults(func=cmd_bench_waterfall)
    p = kinds.add_parser("tuning", help="the per-device tuning cache: tuned configuration per path, dtype and class",
                         description="What `vkcoop bench sparse --tune` and `vkcoop bench attention --tune` stored "
                                     "under the tuning cache (~/.cache/vkcoop/tuning; $VKCOOP_CACHE_DIR/tuning).")
    p.add_argument("--json", nargs="?", const="-", metavar="FILE", help="print (or write) the entries as JSON")
    p.set_defaults(func=cmd_bench_tuning)
    p = kinds.add_parser("summary", help="SUMMARY.md of a result set (docs/results/<gpu>/), from its JSON",
                         description="Writes FOLDER/SUMMARY.md from the JSON of a result set that "
                                     "benchmarks/gpu/results.sh wrote; with --readme, also replaces that GPU's "
                                     "results block in the README, so neither can drift from the run.")
    p.add_argument("folder", metavar="FOLDER", help="the result set, e.g. docs/results/h100")
    p.add_argument("--readme", metavar="README.md", help="replace the results block for this GPU in that file")
    p.set_defaults(func=cmd_bench_summary)


# --- fuzz -----------------------------------------------------------------------------------------------------
def fuzz_exit_code(report) -> Exit:
    """0: no mismatch; 4: every hardware mismatch is a known driver deviation; 1: anything else differs."""
    if report.mismatch_count == 0:
        return Exit.OK
    portable = report.mismatch_counts.get("portable", 0)
    explained = report.explanations.get("hw", {})
    unexplained = explained.get("unexplained", 0)
    if portable == 0 and unexplained == 0 and sum(explained.values()) == report.mismatch_counts.get("hw", 0):
        return Exit.KNOWN_DEVIATION
    return Exit.FAILED


def cmd_fuzz(args) -> int:
    from .. import fuzz

    json_path = output_path(args.json_path)
    check_device(args.device)
    report = fuzz.run(cases=args.cases, seed=args.seed, target=args.target, json_path=json_path,
                      progress=chosen_progress(args), device=args.device, variants=args.variants,
                      shrink=not args.no_shrink, workers=args.workers)
    fuzz.print_report(report)
    if json_path:
        wrote(json_path)
    if report.interrupted:
        return Exit.INTERRUPTED
    if nothing_ran("skipped" if s.skipped else "ran" for s in report.targets.values()):
        raise nothing_ran_error("fuzz target", [f"{s.name}: {s.skipped}" for s in report.targets.values()],
                                "use --target portable on any Vulkan device, hw needs VK_NV_cooperative_matrix2")
    return fuzz_exit_code(report)


def add_fuzz_parser(sub) -> None:
    p = sub.add_parser("fuzz", help=command_help("fuzz"),
                       description="Random tensor layouts and views, run on the hardware (hw) and/or the portable "
                                   "GLSL port, compared element by element with vkcoop.tensor.")
    p.add_argument("--cases", type=positive_int, default=1000, help="cases per target")
    p.add_argument("--seed", type=non_negative_int, default=0, help="random seed")
    p.add_argument("--target", choices=["hw", "portable", "both"], default="portable",
                   help="what to run the cases on")
    p.add_argument("--json", dest="json_path", metavar="FILE", help="write the report as JSON")
    p.add_argument("--variants", type=positive_int, default=24,
                   help="hardware pipelines in the variant pool")
    p.add_argument("--no-shrink", action="store_true", help="report mismatches without shrinking them")
    p.add_argument("--workers", type=non_negative_int, default=None,
                   help="generator processes (0: none; default: up to 16 for large runs)")
    add_device_argument(p)
    add_progress_arguments(p, "a line every 10 s with the cases done and the mismatches")
    p.set_defaults(func=cmd_fuzz, needs_toolchain=True)
