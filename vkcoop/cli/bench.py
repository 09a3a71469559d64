"""``vkcoop bench sparse`` and ``vkcoop fuzz``: the GEMM comparison and the differential fuzzer."""
from __future__ import annotations

from .common import (Exit, CliError, add_device_argument, check_device, choice_list, console, non_negative_int,
                     output_path, positive_int, size_list, wrote)


# --- bench ----------------------------------------------------------------------------------------------------
def cmd_bench_sparse(args) -> int:
    from ..bench import report
    from ..bench.sparse import run_sparse_bench

    json_path, plot_path = output_path(args.json_path), output_path(args.plot_path, "--plot")
    check_device(args.device)
    outcome = run_sparse_bench(dtypes=args.dtype, sizes=args.sizes, shapes=args.shapes, iters=args.iters,
                               warmup=args.warmup, flush_l2=args.flush_l2, paths=args.paths, tune=args.tune,
                               llm_tokens=args.llm_tokens, device=args.device, validate=args.validate,
                               console=console)
    report.print_table(outcome)
    if outcome.interrupted:
        console.print("[yellow]interrupted: the table holds the paths measured so far[/yellow]")
    if json_path:
        wrote(report.write_json(outcome, json_path))
    timed = [r for r in outcome.results if r.tflops]
    if plot_path and timed:
        wrote(report.plot(outcome, plot_path))
    elif plot_path:
        console.print(f"no plot written to {plot_path}: no path was timed")
    if outcome.interrupted:
        return Exit.INTERRUPTED
    if all(r.status == "skipped" for r in outcome.results):
        reasons = sorted({r.reason for r in outcome.results})
        raise CliError("no path could run here: " + " / ".join(reasons)[:300], "run it on a GPU host",
                       Exit.ENVIRONMENT)
    return Exit.FAILED if outcome.failed else Exit.OK


def add_bench_parser(sub) -> None:
    from ..gemm import DTYPES
    from ..bench.sparse import LLM_TOKENS, PATH_NAMES, SHAPES

    bench = sub.add_parser("bench", help="benchmarks: `vkcoop bench sparse --help`")
    kinds = bench.add_subparsers(dest="bench", required=True, metavar="BENCH")
    p = kinds.add_parser("sparse", help="2:4 sparse and dense GEMM paths, Vulkan and CUDA, checked then timed",
                         description="Every 2:4 sparse and dense GEMM path on the same exact inputs, in one "
                                     "process: each is checked, then timed.")
    p.add_argument("--dtype", type=choice_list(tuple(DTYPES)), default=list(DTYPES),
                   help="input types (default: %(default)s)")
    p.add_argument("--sizes", type=size_list(64), default=[4096, 8192],
                   help="M = K of each case, multiples of 64 (default: %(default)s)")
    p.add_argument("--shapes", type=choice_list(SHAPES), default=list(SHAPES),
                   help="square: N = size; llm: N = --llm-tokens (default: %(default)s)")
    p.add_argument("--paths", type=choice_list(PATH_NAMES), default=None,
                   help=f"a subset of {','.join(PATH_NAMES)} (default: all)")
    p.add_argument("--iters", type=positive_int, default=20, help="timed runs per path (default: %(default)s)")
    p.add_argument("--warmup", type=non_negative_int, default=5, help="untimed runs first (default: %(default)s)")
    p.add_argument("--flush-l2", action="store_true", help="flush the L2 cache before every timed run")
    p.add_argument("--tune", action="store_true", help="try every Vulkan tile configuration, keep the best")
    p.add_argument("--llm-tokens", type=positive_int, default=LLM_TOKENS,
                   help="N of the llm shapes (default: %(default)s)")
    add_device_argument(p)
    p.add_argument("--validate", action="store_true", help="run the Vulkan paths under the validation layer")
    p.add_argument("--json", dest="json_path", metavar="FILE", help="write every result as JSON")
    p.add_argument("--plot", dest="plot_path", metavar="FILE.png", help="write a bar chart of the timed paths")
    p.set_defaults(func=cmd_bench_sparse)
    _add_attention_parser(kinds)


def _add_attention_parser(kinds) -> None:
    from ..bench import attention

    p = kinds.add_parser("attention", help="the coopmat2 flash-attention kernel against torch SDPA's backends",
                         description="The coopmat2 flash-attention kernel and every torch SDPA backend on the same "
                                     "inputs, prefill and decode shapes: each is checked, then timed.")
    attention.add_arguments(p)
    p.set_defaults(func=attention.run)


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
                      progress=not args.quiet, device=args.device, variants=args.variants,
                      shrink=not args.no_shrink, workers=args.workers)
    fuzz.print_report(report)
    if json_path:
        wrote(json_path)
    if report.interrupted:
        return Exit.INTERRUPTED
    if all(s.skipped for s in report.targets.values()):
        reasons = "; ".join(f"{s.name}: {s.skipped}" for s in report.targets.values())
        raise CliError(f"no fuzz target can run here ({reasons})"[:400], "use --target portable on any Vulkan "
                       "device, hw needs VK_NV_cooperative_matrix2", Exit.ENVIRONMENT)
    return fuzz_exit_code(report)


def add_fuzz_parser(sub) -> None:
    p = sub.add_parser("fuzz", help="differential fuzzing of tensor addressing against the reference",
                       description="Random tensor layouts and views, run on the hardware (hw) and/or the portable "
                                   "GLSL port, compared element by element with vkcoop.tensor.")
    p.add_argument("--cases", type=positive_int, default=1000, help="cases per target (default: %(default)s)")
    p.add_argument("--seed", type=non_negative_int, default=0, help="random seed (default: %(default)s)")
    p.add_argument("--target", choices=["hw", "portable", "both"], default="portable",
                   help="what to run the cases on (default: %(default)s)")
    p.add_argument("--json", dest="json_path", metavar="FILE", help="write the report as JSON")
    p.add_argument("--variants", type=positive_int, default=24,
                   help="hardware pipelines in the variant pool (default: %(default)s)")
    p.add_argument("--no-shrink", action="store_true", help="report mismatches without shrinking them")
    p.add_argument("--workers", type=non_negative_int, default=None,
                   help="generator processes (0: none; default: up to 16 for large runs)")
    add_device_argument(p)
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_fuzz)
