"""Throughput of vkcoop.tensor.index_map (elements per second, one core).

The measured case is the one the reference is tuned for: a 2-D layout with
Constant clamping, sliced so that a border of the matrix falls outside the tensor,
read through a column-major (permuted) view -- every stage of
matrixCoordToTensorElementWithView does real work.

    OMP_NUM_THREADS=1 .venv/bin/python -m lab.bench_index_map [--rows 2048 --cols 2048 --repeats 7]
"""
from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")  # numpy ufuncs are single-threaded anyway

import numpy as np  # noqa: E402

from vkcoop.tensor import ClampMode, ElementStatus, TensorLayout, TensorView, index_map  # noqa: E402


def build_case(rows: int, cols: int):
    # Column-major tensor (outer dimension = columns), not a power of two anywhere,
    # offset by (-5, -3) so the first columns/rows are clamped.
    layout = (TensorLayout.create(2, ClampMode.Constant)
              .set_dimension(cols + 37, rows + 11)
              .slice((-5, -3), (cols, rows))
              .set_clamp_value(0x3C00))
    view = TensorView.create(2, False, (1, 0))
    return layout, view


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--cols", type=int, default=1999)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    layout, view = build_case(args.rows, args.cols)
    n = args.rows * args.cols

    m = index_map(layout, args.rows, args.cols, view)  # warm-up, and a sanity check
    clamped = int((m.status == ElementStatus.CLAMP_VALUE).sum())
    assert clamped == n - (args.rows - 3) * (args.cols - 5), clamped

    times = []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        index_map(layout, args.rows, args.cols, view)
        times.append(time.perf_counter() - t0)
    best, median = min(times), sorted(times)[len(times) // 2]
    print(f"index_map 2-D layout + permuted view + Constant clamp, {args.rows}x{args.cols} "
          f"= {n / 1e6:.2f} M elements")
    print(f"  best   {best * 1e3:8.1f} ms  {n / best / 1e6:7.1f} M elements/s")
    print(f"  median {median * 1e3:8.1f} ms  {n / median / 1e6:7.1f} M elements/s")
    print(f"  ({clamped} clamped elements; numpy {np.__version__})")


if __name__ == "__main__":
    main()
