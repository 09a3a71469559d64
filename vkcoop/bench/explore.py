"""Tile exploration for the Vulkan GEMM kernels (how docs/gemm-notes.md was measured).

One process, many jobs, so every number of a sweep comes from the same device state::

    python -m vkcoop.bench.explore --job dense/fp16/8192,8192,8192/256:128x256x32u4,256:128x256x32u4p2 \\
                                   --job sparse/fp16/8192,32,8192/256:64x32x128u2s4i4c

A job is ``KERNEL/DTYPE/M,N,K/TILE[,TILE...]``; KERNEL is ``dense`` (fp32 accumulation), ``dense16`` (fp16->fp16,
fp16 accumulation) or ``sparse`` (the 2:4 decode path). A tile is
``INVOCATIONS:MxNxK[uUNROLL][gGROUP_M][sSPLIT_K][sgSUBGROUPS_M][pN_PARTS][iMETA_WORDS][c]``: ``sg`` selects
subgroup-scope matrices, ``p2`` two accumulators along N, ``i`` the interleaved 2:4 layout (sparse only), ``c``
column-major B. Each configuration is checked against the reference before it is timed, and the first
configuration of each job is timed again at its end (``repeat``), which exposes drift or a shared GPU.
(``dense16`` accumulates in fp16, so at large K its check reports rounding differences; it is timed anyway.)
Output: one line per configuration, and ``--json`` writes them all.
"""
from __future__ import annotations

import argparse
import json
import re
import statistics
import time

import numpy as np

from ..samples import gemm_kernels as kernels
from . import sparse as bench

_TILE = re.compile(r"^(\d+):(\d+)x(\d+)x(\d+)(?:u(\d+))?(?:g(\d+))?(?:s(\d+))?(?:sg(\d+))?(?:p(\d+))?(?:i(\d+))?(c?)$")
KERNELS = ("dense", "dense16", "sparse")


def parse_tile(text: str) -> tuple[kernels.WorkgroupTile, bool, int]:
    """(tile, column-major B, meta_words) from ``INVOCATIONS:MxNxK[u..][g..][s..][sg..][p..][i..][c]``."""
    match = _TILE.match(text.strip())
    if not match:
        raise ValueError(f"tile {text!r} is not INVOCATIONS:MxNxK[uUNROLL][gGROUP_M][sSPLIT_K][sgSUBGROUPS_M]"
                         "[pN_PARTS][iMETA_WORDS][c]")
    inv, m, n, k, unroll, group, split, subgroups, parts, meta, column = match.groups()
    tile = kernels.WorkgroupTile(int(inv), int(m), int(n), int(k), k_unroll=int(unroll or 2),
                                 group_m=int(group or 8), split_k=int(split or 1), subgroups_m=int(subgroups or 0),
                                 n_parts=int(parts or 1))
    return tile, column == "c", int(meta or 0)


def parse_job(text: str) -> tuple[str, str, tuple[int, int, int], list[str]]:
    try:
        kernel, dtype, shape, tiles = text.split("/")
        m, n, k = (int(v) for v in shape.split(","))
    except ValueError:
        raise ValueError(f"job {text!r} is not KERNEL/DTYPE/M,N,K/TILE[,TILE...]") from None
    if kernel not in KERNELS:
        raise ValueError(f"job {text!r}: kernel must be one of {', '.join(KERNELS)}")
    if dtype not in bench.DTYPES or (kernel == "dense16" and dtype != "fp16"):
        raise ValueError(f"job {text!r}: dtype must be one of {', '.join(bench.DTYPES)} (dense16: fp16)")
    tile_list = [t for t in tiles.split(",") if t]
    for t in tile_list:
        parse_tile(t)
    return kernel, dtype, (m, n, k), tile_list


def _measure(device, flexible, kernel_kind, dtype, inputs, reference, rows, text, iters, warmup_seconds):
    pruned, compressed, b = inputs
    tile, column, meta_words = parse_tile(text)
    b_arg = np.ascontiguousarray(b.T) if column else b
    started = time.perf_counter()
    if kernel_kind == "sparse":
        kernel = kernels.Sparse24Gemm(device, dtype, tile, b_column_major=column, flexible_properties=flexible,
                                      meta_words=meta_words)
        kernel.bind(compressed.values, compressed.metadata, b_arg)
    else:
        types = "fp16->fp16" if kernel_kind == "dense16" else ("fp16->fp32" if dtype == "fp16" else "bf16->fp32")
        kernel = kernels.CoopMat2Gemm(device, types, tile, b_column_major=column, flexible_properties=flexible)
        kernel.bind(pruned, b_arg)
    build_s = time.perf_counter() - started
    try:
        out = kernel.result()[rows]
        ok, _, why = bench.check_output(out, reference)
        times = kernel.time(iters, 3, warmup_seconds=warmup_seconds)
    finally:
        kernel.close()
    return ok, why, statistics.median(times), min(times), build_s


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m vkcoop.bench.explore")
    parser.add_argument("--job", action="append", required=True, help="KERNEL/DTYPE/M,N,K/TILE[,TILE...]")
    parser.add_argument("--iters", type=int, default=10)
    parser.add_argument("--warmup-seconds", type=float, default=kernels.WARMUP_SECONDS,
                        help="minimum warm-up wall time before timing (GPU clocks)")
    parser.add_argument("--json", dest="json_path", default=None)
    args = parser.parse_args(argv)
    jobs = [parse_job(j) for j in args.job]   # all argument errors before any GPU work
    from .. import vk

    features = (kernels.features_for("sparse24", "fp16->fp16") + kernels.features_for("sparse24", "bf16->fp32")
                + kernels.features_for("khr", "fp16->fp32"))
    records, inputs_cache = [], {}
    with vk.Device(features=list(dict.fromkeys(features))) as device:
        flexible = device.physical.flexible_dimensions_properties()
        for kernel_kind, dtype, (m, n, k), tiles in jobs:
            key = (dtype, m, n, k)
            if key not in inputs_cache:
                inputs_cache.clear()   # one shape's inputs at a time
                case = bench.Case(dtype, "explore", m, n, k)
                pruned, compressed, b = bench.make_inputs(case)
                rows = bench.check_rows(m)
                reference = (pruned[rows].astype(np.float64) @ b.astype(np.float64)).astype(np.float32)
                inputs_cache[key] = ((pruned, compressed, b), rows, reference)
            inputs, rows, reference = inputs_cache[key]
            for index, text in enumerate(tiles + tiles[:1]):
                repeat = index == len(tiles)
                record = {"kernel": kernel_kind, "dtype": dtype, "shape": [m, n, k], "config": text, "repeat": repeat}
                try:
                    ok, why, median, fastest, build_s = _measure(
                        device, flexible, kernel_kind, dtype, inputs, reference, rows, text, args.iters,
                        args.warmup_seconds)
                    record.update(ok=ok, reason=why, median_ms=median * 1e3, min_ms=fastest * 1e3,
                                  tflops=2.0 * m * n * k / median / 1e12, build_s=build_s)
                    print(f"{kernel_kind:>7} {dtype} {m}x{n}x{k} {text:>28}{' (repeat)' if repeat else '':9}: "
                          f"{median * 1e3:8.4f} ms {record['tflops']:7.1f} TFLOP/s "
                          f"check={'ok' if ok else why[:80]} build {build_s:.1f}s", flush=True)
                except Exception as error:  # noqa: BLE001 - report and go on to the next tile
                    record.update(ok=False, reason=f"{type(error).__name__}: {error}")
                    print(f"{kernel_kind:>7} {dtype} {m}x{n}x{k} {text}: {type(error).__name__}: {str(error)[:200]}",
                          flush=True)
                records.append(record)
                if args.json_path:
                    with open(args.json_path, "w") as handle:
                        json.dump(records, handle, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
