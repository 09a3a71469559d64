"""``vkcoop bench attention`` on the command line: options, files and exit codes around
:func:`vkcoop.bench.attention.run_attention_bench` (which measures) and its table and plot."""
from __future__ import annotations

import argparse
import sys

from ..attention import parse_attention_tile
from ..attention.shapes import HEAD_DIMS
from ..bench import report
from ..bench.attention import (DECODE_HEADS, DECODE_SEQS, DECODE_WARMUP_SECONDS, DEFAULT_TUNE_BUDGET, KINDS,
                               PATH_NAMES, PREFILL_SEQS, PREFILL_TOKENS, WARMUP_SECONDS, AttentionBenchSettings,
                               run_attention_bench)
from ..bench.attention_report import plot, print_table
from ..gemm import DTYPES
from ..paths import output_file
from .common import (Exit, add_progress_arguments, add_validate_argument, chosen_progress, ending_after_output,
                     positive_seconds, seconds_at_least_zero)


def _list_of(kind, allowed=None):
    """An argparse type: comma-separated values of ``kind``, each in ``allowed`` if given."""
    def parse(text: str) -> list:
        try:
            values = [kind(v) for v in text.split(",") if v.strip()]
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of {kind.__name__}") from None
        bad = [v for v in values if allowed is not None and v not in allowed]
        if not values or bad or (kind is int and min(values) < 1):
            choices = f" from {','.join(map(str, allowed))}" if allowed else " (positive)"
            raise argparse.ArgumentTypeError(f"{text!r}: choose{choices}")
        return values
    return parse


def _head_pairs(text: str) -> list[tuple[int, int]]:
    """An argparse type: comma-separated Q/KV head counts, each Q a positive multiple of KV."""
    pairs = []
    for item in (part.strip() for part in text.split(",") if part.strip()):
        q, _, kv = item.partition("/")
        if not (q.isdigit() and kv.isdigit() and int(kv) > 0 and int(q) > 0 and int(q) % int(kv) == 0):
            raise argparse.ArgumentTypeError(f"{item!r}: give Q/KV head counts, Q a positive multiple of KV "
                                             "(e.g. 32/8)")
        pairs.append((int(q), int(kv)))
    if not pairs:
        raise argparse.ArgumentTypeError(f"{text!r}: give at least one Q/KV pair (e.g. 32/8,32/32)")
    return pairs


def add_arguments(parser) -> None:
    """The options of ``vkcoop bench attention`` on an argparse (sub)parser."""
    parser.add_argument("--kinds", type=_list_of(str, KINDS), default=list(KINDS), help="prefill,decode")
    parser.add_argument("--dtype", type=_list_of(str, tuple(DTYPES)), default=["fp16"], help="fp16,bf16")
    parser.add_argument("--head-dims", type=_list_of(int, HEAD_DIMS), default=list(HEAD_DIMS), help="64,128")
    parser.add_argument("--seqs", type=_list_of(int), default=list(PREFILL_SEQS), help="prefill seq_q = seq_kv")
    parser.add_argument("--decode-seqs", type=_list_of(int), default=list(DECODE_SEQS), help="decode seq_kv")
    parser.add_argument("--causal", choices=("both", "on", "off"), default="both", help="prefill masks")
    parser.add_argument("--paths", type=_list_of(str, PATH_NAMES), default=None, help=",".join(PATH_NAMES))
    parser.add_argument("--iters", type=int, default=20, help="timed runs per path (default: %(default)s)")
    parser.add_argument("--warmup", type=int, default=5, help="untimed runs first (default: %(default)s)")
    parser.add_argument("--warmup-seconds", type=seconds_at_least_zero, default=None, metavar="SECONDS",
                        help=f"and at least this long (default: {WARMUP_SECONDS:g} for prefill, where on the H100 a "
                             "shorter warm-up left the first timing 5-15 %% slow, and "
                             f"{DECODE_WARMUP_SECONDS:g} for decode; docs/attention.md experiments 21 and 49)")
    parser.add_argument("--tokens", type=int, default=PREFILL_TOKENS, help="prefill batch x seq (default: %(default)s)")
    parser.add_argument("--decode-batch", type=int, default=1, help="decode batch (default: %(default)s)")
    parser.add_argument("--decode-heads", type=_head_pairs, default=list(DECODE_HEADS), metavar="Q/KV,...",
                        help="decode q heads / kv heads (default: 32/8,32/32: GQA and without)")
    parser.add_argument("--tile", type=parse_attention_tile, default=None,
                        help="Vulkan tile INVOCATIONS:BRxBC (default: the tuning cache's entry, the device's seed, "
                             "else the choice from the flexible-dimensions table and its shared memory: "
                             "FlashAttention-2's split for prefill where it fits)")
    parser.add_argument("--ceiling", type=float, default=None, metavar="TFLOPS",
                        help="coopmat2 ceiling from `vkcoop bench peak`, for the 'x ceiling' column")
    parser.add_argument("--bandwidth", type=float, default=None, metavar="GB/S",
                        help="memory bandwidth for decode's 'x bandwidth' (default: measured with --ceilings, "
                             "else the spec sheet's by GPU name)")
    parser.add_argument("--ceilings", action="store_true",
                        help="then measure the coopmat2 fp16->fp32 ceiling and the read bandwidth (bench peak) in "
                             "this process for the 'x ceiling' and 'x bandwidth' columns, and one plain read of each "
                             "decode case's K and V bytes for 'x read floor'")
    parser.add_argument("--tune", action="store_true",
                        help="tune the Vulkan kernel for each class (kind, head_dim, mask, GQA) the tuning cache "
                             "lacks on this device: check and time every candidate the device's table allows, cache "
                             "the fastest (`vkcoop bench tuning` lists them)")
    parser.add_argument("--retune", action="store_true", help="tune every class again, replacing cached winners")
    parser.add_argument("--tune-budget", type=positive_seconds, default=DEFAULT_TUNE_BUDGET, metavar="SECONDS",
                        help="seconds all tunings of the run share (default: %(default)s)")
    parser.add_argument("--flush-l2", action="store_true",
                        help="read 256 MiB before every timed run, so that no path finds its inputs in the L2 (decode "
                             "K and V up to about 40 MB otherwise stay there between runs); the read floors too")
    parser.add_argument("--device", default=None, help="Vulkan device index or name substring")
    add_validate_argument(parser, "run the Vulkan path")
    parser.add_argument("--json", dest="json_path", metavar="FILE", help="write every result as JSON")
    parser.add_argument("--plot", dest="plot_path", metavar="FILE.png", help="write the bar charts")
    add_progress_arguments(parser, "a line per finished case")


def bench_attention_settings(args) -> AttentionBenchSettings:
    """The :class:`vkcoop.bench.attention_settings.AttentionBenchSettings` of ``bench attention``'s options."""
    causal = {"both": (False, True), "on": (True,), "off": (False,)}[args.causal]
    return AttentionBenchSettings(kinds=args.kinds, dtypes=args.dtype, head_dims=args.head_dims, seqs=args.seqs,
                                  decode_seqs=args.decode_seqs, causal=causal, paths=args.paths, iters=args.iters,
                                  warmup=args.warmup, warmup_seconds=args.warmup_seconds, tokens=args.tokens,
                                  decode_batch=args.decode_batch, decode_heads=args.decode_heads, tile=args.tile,
                                  ceiling_tflops=args.ceiling, bandwidth_gbs=args.bandwidth, ceilings=args.ceilings,
                                  tune=args.tune, retune=args.retune, tune_budget=args.tune_budget,
                                  flush_l2=args.flush_l2, device=args.device, validate=args.validate)


def run(args, console=None) -> int:
    """Run, print, write files; the exit code (:class:`vkcoop.cli.common.Exit`; 3 when every path was skipped). Bad
    arguments raise ValueError before any GPU work."""
    output_file(args.json_path)          # bad output paths fail before the run, with their folders made
    output_file(args.plot_path, "--plot")
    outcome = run_attention_bench(bench_attention_settings(args), console=console, progress=chosen_progress(args))
    print_table(outcome, console)
    if args.json_path:
        print(f"wrote {report.write_json(outcome, args.json_path)}", file=sys.stderr)
    if args.plot_path and any(r.tflops for r in outcome.results):
        print(f"wrote {plot(outcome, args.plot_path)}", file=sys.stderr)
    if outcome.interrupted:
        return Exit.INTERRUPTED
    if outcome.failed:
        return Exit.FAILED
    return ending_after_output(outcome.results, "path")
