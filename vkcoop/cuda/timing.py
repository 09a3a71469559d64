"""Timing GPU work with CUDA events: warm-up, then the median of N timed runs."""
from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Callable

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


def time_cuda(fn: Callable[[], object], *, warmup: int = 10, iters: int = 50,
              flush_l2: bool = False) -> Timing:
    """Run ``fn`` ``warmup`` times, then time ``iters`` runs, each between its own pair of
    CUDA events on the current stream.  With ``flush_l2`` a 256 MiB buffer is zeroed
    before every timed run (outside the events) so operands come from HBM."""
    import torch

    if warmup < 0 or iters < 1:
        raise ValueError(f"need warmup >= 0 and iters >= 1, got warmup={warmup}, iters={iters}")
    flush = torch.empty(L2_FLUSH_BYTES, dtype=torch.uint8, device="cuda") if flush_l2 else None
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    for start, end in zip(starts, ends):
        if flush is not None:
            flush.zero_()
        start.record()
        fn()
        end.record()
    torch.cuda.synchronize()
    times = [s.elapsed_time(e) for s, e in zip(starts, ends)]
    return Timing(median_ms=statistics.median(times), min_ms=min(times),
                  mean_ms=statistics.fmean(times), iters=iters, flushed_l2=flush_l2,
                  times_ms=tuple(times))
