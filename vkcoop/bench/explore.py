"""Tile exploration for the Vulkan GEMM kernels (how docs/gemm-notes.md was measured).

``python -m vkcoop.bench.explore --kernel dense --dtype fp16 --shape 8192,8192,8192 --tiles 256:128x256x32u2,...``
times each workgroup tile (``INVOCATIONS:MxNxK[uUNROLL][gGROUP_M][sSPLIT_K][c]``, ``c`` = column-major B) on the same
exact inputs after checking its result, and prints one line per configuration. ``--types fp16->fp16`` times
the dense kernel with fp16 accumulation instead.
"""
from __future__ import annotations

import argparse
import re
import statistics

import numpy as np

from ..samples import gemm_kernels as kernels
from . import sparse as bench

_TILE = re.compile(r"^(\d+):(\d+)x(\d+)x(\d+)(?:u(\d+))?(?:g(\d+))?(?:s(\d+))?(c?)$")


def parse_tile(text: str) -> tuple[kernels.WorkgroupTile, bool]:
    match = _TILE.match(text.strip())
    if not match:
        raise ValueError(f"tile {text!r} is not INVOCATIONS:MxNxK[uUNROLL][gGROUP_M][sSPLIT_K][c]")
    inv, m, n, k, unroll, group, split, column = match.groups()
    tile = kernels.WorkgroupTile(int(inv), int(m), int(n), int(k), k_unroll=int(unroll or 2),
                                 group_m=int(group or 8), split_k=int(split or 1))
    return tile, column == "c"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m vkcoop.bench.explore")
    parser.add_argument("--kernel", choices=("dense", "sparse"), default="dense")
    parser.add_argument("--dtype", choices=("fp16", "bf16"), default="fp16")
    parser.add_argument("--types", default=None, help="dense only: fp16->fp16 to accumulate in fp16")
    parser.add_argument("--shape", default="8192,8192,8192")
    parser.add_argument("--tiles", required=True)
    parser.add_argument("--iters", type=int, default=10)
    args = parser.parse_args(argv)
    from .. import vk

    m, n, k = (int(v) for v in args.shape.split(","))
    case = bench.Case(args.dtype, "explore", m, n, k)
    pruned, compressed, b = bench.make_inputs(case)
    types = args.types or ("fp16->fp32" if args.dtype == "fp16" else "bf16->fp32")
    rows = bench.check_rows(m)
    reference = (pruned[rows].astype(np.float64) @ b.astype(np.float64)).astype(np.float32)
    features = kernels.features_for("sparse24", types) + kernels.features_for("coopmat2", types)
    with vk.Device(features=list(dict.fromkeys(features))) as device:
        flexible = device.physical.flexible_dimensions_properties()
        for text in args.tiles.split(","):
            try:
                tile, column = parse_tile(text)
                b_arg = np.ascontiguousarray(b.T) if column else b
                if args.kernel == "dense":
                    kernel = kernels.CoopMat2Gemm(device, types, tile, b_column_major=column,
                                                  flexible_properties=flexible)
                    kernel.bind(pruned, b_arg)
                else:
                    kernel = kernels.Sparse24Gemm(device, args.dtype, tile, b_column_major=column,
                                                  flexible_properties=flexible)
                    kernel.bind(compressed.values, compressed.metadata, b_arg)
                out = kernel.result()[rows]
                ok, _, why = bench.check_output(out, reference)
                times = kernel.time(args.iters, 3)
                median = statistics.median(times)
                print(f"{args.kernel} {types} {m}x{n}x{k} {text:>24}: {median * 1e3:8.3f} ms "
                      f"{2.0 * m * n * k / median / 1e12:7.1f} TFLOP/s check={'ok' if ok else why[:80]}",
                      flush=True)
                kernel.close()
            except Exception as error:  # noqa: BLE001 - report and go on to the next tile
                print(f"{args.kernel} {text}: {type(error).__name__}: {str(error)[:200]}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
