"""Timing GPU work with CUDA events: warm-up, then the median of N timed runs."""
from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Callable

from ..gemm.warmup import mark_busy, minimum_warmup, settle

#: Bytes written between iterations to evict L2 (H200 has 60 MiB of L2; 4x is safe).
L2_FLUSH_BYTES = 256 * 1024 * 1024


@dataclass
class Timing:
    median_ms: float
    min_ms: float
    mean_ms: float
    iters: int
    flushed_l2: bool
    times_ms: tuple = ()          # every timed run, in order

    def tflops(self, m: int, n: int, k: int) -> float:
        """Dense-equivalent throughput, 2*M*N*K FLOPs per run."""
        return 2.0 * m * n * k / (self.median_ms * 1e-3) / 1e12


def _event_times(fn, count: int, flush) -> list[float]:
    """Milliseconds of ``count`` runs of ``fn``, each between its own pair of CUDA events (``flush`` zeroed
    before each, outside them)."""
    import torch

    starts = [torch.cuda.Event(enable_timing=True) for _ in range(count)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(count)]
    for start, end in zip(starts, ends):
        if flush is not None:
            flush.zero_()
        start.record()
        fn()
        end.record()
    torch.cuda.synchronize()
    return [s.elapsed_time(e) for s, e in zip(starts, ends)]


def time_cuda(fn: Callable[[], object], *, warmup: int = 10, iters: int = 50,
              flush_l2: bool = False, warmup_seconds: float = 0.0) -> Timing:
    """Run ``fn`` at least ``warmup`` times and until ``warmup_seconds`` of wall time have passed (longer after
    an idle gap) and, when ``warmup_seconds`` > 0, until two consecutive timed warm-up rounds agree (the Vulkan
    paths' rule, :mod:`vkcoop.gemm.warmup`, so the GPU clocks are up), then time ``iters`` runs, each between its
    own pair of CUDA events on the current stream.  With ``flush_l2`` a 256 MiB buffer is zeroed before every timed run (outside
    the events) so operands come from HBM."""
    import torch

    if warmup < 0 or iters < 1 or not warmup_seconds >= 0:
        raise ValueError(f"need warmup >= 0, iters >= 1 and warmup_seconds >= 0, got warmup={warmup}, "
                         f"iters={iters}, warmup_seconds={warmup_seconds}")
    flush = torch.empty(L2_FLUSH_BYTES, dtype=torch.uint8, device="cuda") if flush_l2 else None
    warmup_seconds = minimum_warmup(warmup_seconds)
    started, runs = time.perf_counter(), 0
    while runs < warmup or time.perf_counter() - started < warmup_seconds:
        fn()
        runs += 1
        if runs % 8 == 0 or runs >= warmup:   # a short queue, so the wall time measures GPU work
            torch.cuda.synchronize()
    torch.cuda.synchronize()
    if warmup_seconds > 0:
        settle(lambda: _event_times(fn, min(iters, 10), flush))
    times = _event_times(fn, iters, flush)
    mark_busy()
    return Timing(median_ms=statistics.median(times), min_ms=min(times),
                  mean_ms=statistics.fmean(times), iters=iters, flushed_l2=flush_l2,
                  times_ms=tuple(times))
