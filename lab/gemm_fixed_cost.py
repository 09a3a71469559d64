"""Where a Vulkan GEMM's time goes at a memory-bound shape: a fixed cost per launch, and a streaming rate.

Times one configuration at several K with M and N fixed, in one process (``python -m lab.explore``: each
size checked against the reference before it is timed), and fits time = fixed + bytes / rate
(:func:`vkcoop.bench.roofline.fit_fixed_cost`) over the sizes whose bytes exceed ``--fit-above``. The default, 64 MiB,
is past the H100's 50 MB L2, so those runs read A from memory every time; smaller sizes are timed and shown, not
fitted. With ``--read-gbps`` (``vkcoop bench peak``'s read bandwidth) the rate is also given as a share of it.
docs/gemm.md has the H100's figures.

    python -m lab.gemm_fixed_cost --kernel dense --m 8192 --n 32 --ks 2048,4096,8192,16384 \\
        --config 64:32x32x128u4g1s2w4c [--dtype fp16] [--read-gbps 3114] [--json out.json]

Exit status: 0, 1 when a size failed its check, 2 for bad arguments (before any GPU work).
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from rich.console import Console
from rich.table import Table

from lab import explore
from vkcoop.bench import roofline


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernel", default="dense", choices=sorted(explore.BENCH_PATHS))
    parser.add_argument("--dtype", default="fp16")
    parser.add_argument("--m", type=int, default=8192)
    parser.add_argument("--n", type=int, default=32)
    parser.add_argument("--ks", default="2048,4096,8192,16384", help="comma-separated K values")
    parser.add_argument("--config", default="64:32x32x128u4g1s2w4c", help="a configuration label, as explore reads it")
    parser.add_argument("--fit-above", type=float, default=64.0, help="MiB moved; smaller sizes are not fitted")
    parser.add_argument("--read-gbps", type=float, help="the read bandwidth to compare the rate with (GB/s)")
    parser.add_argument("--iters", type=int, default=30)
    parser.add_argument("--json", dest="json_path")
    args = parser.parse_args(argv)
    words = [k.strip() for k in args.ks.split(",") if k.strip()]
    if not all(word.isdigit() for word in words):
        parser.error(f"--ks {args.ks!r}: K values are positive integers, comma-separated")
    args.k_values = sorted({int(word) for word in words})
    try:
        for k in args.k_values:
            explore.parse_job(job_text(args, k))
    except ValueError as error:
        parser.error(str(error).splitlines()[0])
    fitted = [k for k in args.k_values if fitted_size(args, moved(args, k))]
    if len(fitted) < 2:
        parser.error(f"--ks: at least two sizes must move more than {args.fit_above:g} MiB (--fit-above); "
                     f"{len(fitted)} of {len(args.k_values)} do")
    return args


def job_text(args, k: int) -> str:
    return f"{args.kernel}/{args.dtype}/{args.m},{args.n},{k}/{args.config}"


def moved(args, k: int) -> int:
    """The bytes one launch of the sweep's kernel moves at this K (:func:`vkcoop.bench.roofline.bytes_moved`)."""
    return roofline.bytes_moved(explore.BENCH_PATHS[args.kernel], args.m, args.n, k)


def fitted_size(args, bytes_moved: int) -> bool:
    """Whether a size moves more than ``--fit-above`` MiB, and so enters the fit."""
    return bytes_moved > args.fit_above * 2**20


def measured(args) -> list[dict]:
    """explore's records of the sweep (the first timing of each size; explore also repeats the first size)."""
    with tempfile.NamedTemporaryFile(suffix=".json") as records:
        jobs = [item for k in args.k_values for item in ("--job", job_text(args, k))]
        explore.main([*jobs, "--iters", str(args.iters), "--warmup-seconds", "1", "--json", records.name])
        return [r for r in json.loads(Path(records.name).read_text()) if not r["repeat"]]


def report(args, records: list[dict]) -> dict:
    for record in records:
        record["bytes"] = moved(args, record["shape"][2])
    fitted = [r for r in records if fitted_size(args, r["bytes"])]
    fit = roofline.fit_fixed_cost([r["bytes"] for r in fitted], [r["median_ms"] * 1e-3 for r in fitted])
    table = Table(title=f"{args.kernel} {args.dtype} {args.m}x{args.n}xK {args.config}: time = fixed + bytes / rate")
    for column in ("K", "MB moved", "µs", "model µs", "fixed share", "GB/s"):
        table.add_column(column, justify="right")
    for r in records:
        seconds = r["median_ms"] * 1e-3
        table.add_row(str(r["shape"][2]), f"{r['bytes'] / 1e6:.1f}", f"{seconds * 1e6:.1f}",
                      f"{fit.seconds(r['bytes']) * 1e6:.1f}" + ("" if r in fitted else " (not fitted)"),
                      f"{fit.fixed_s / seconds:.0%}", f"{r['bytes'] / seconds / 1e9:.0f}")
    console = Console()
    console.print(table)
    share = f" ({fit.bytes_per_s / (args.read_gbps * 1e9):.2f}x of {args.read_gbps:g} GB/s)" if args.read_gbps else ""
    console.print(f"fixed cost {fit.fixed_s * 1e6:.1f} µs per launch; streaming rate {fit.bytes_per_s / 1e12:.2f} "
                  f"TB/s{share}, fitted over {len(fitted)} sizes above {args.fit_above:g} MiB")
    return {"fixed_us": fit.fixed_s * 1e6, "bytes_per_s": fit.bytes_per_s, "read_gbps": args.read_gbps,
            "fitted_k": [r["shape"][2] for r in fitted]}


def main(argv=None) -> int:
    args = parse_args(argv)
    records = measured(args)
    failed = [r for r in records if not r.get("ok")]
    if failed:
        print(f"gemm_fixed_cost: K={failed[0]['shape'][2]} failed: {failed[0].get('reason', '')[:200]}",
              file=sys.stderr)
        return 1
    fit = report(args, records)
    if args.json_path:
        with open(args.json_path, "w") as handle:
            json.dump({"kernel": args.kernel, "dtype": args.dtype, "m": args.m, "n": args.n, "config": args.config,
                       "fit": fit, "records": records}, handle, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
