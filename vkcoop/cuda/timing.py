"""Timing GPU work with CUDA events: warm-up, then the median of N timed runs.

Each timed run sits between its own pair of events, and the GPU is kept busy (``torch.cuda._sleep``) while the host
enqueues the start event, the run and the end event. Without that, a short run is timed from the moment the GPU
reaches the start event, idle, to the end of the host's launch work and the kernels after it: on the H100 a
hand-written 2:4 kernel launched through ``cuLaunchKernel`` from Python measured about 31 µs at 4096x16x4096
whatever the kernel did, and cuBLAS through ``torch.mm`` about 20 µs. The Vulkan paths time GPU timestamps, so the
lead makes both APIs count the same thing: GPU time.
"""
from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Callable

from ..gemm.warmup import mark_busy, minimum_warmup, settle, timed_series

#: Bytes read between iterations to evict L2 (H200 has 60 MiB of L2; 4x is safe). Reading leaves clean lines; a
#: flush that wrote them left dirty ones, whose write-back the timed run then waited for.
L2_FLUSH_BYTES = 256 * 1024 * 1024
#: The GPU busy-wait before each timed run: twice the host's measured enqueue time of one run, within these bounds.
LEAD_MIN_US, LEAD_MAX_US = 50.0, 20_000.0
#: The busy-wait counts SM cycles; counted at this clock, above any GPU's SM clock, it lasts at least its length
#: however low the clock is (a calibration made while the clocks were still low on the H100 gave a lead of 9 µs
#: instead of 50 at full clock, and the first CUDA path of a `bench sparse` process measured 33 µs instead of 12).
LEAD_CLOCK_MHZ = 3000


@dataclass
class Timing:
    median_ms: float
    min_ms: float
    mean_ms: float
    iters: int
    flushed_l2: bool
    times_ms: tuple = ()          # every timed run, in order
    lead_us: float = 0.0          # the GPU busy-wait before each timed run (0: none; the host's work was timed)

    def tflops(self, m: int, n: int, k: int) -> float:
        """Dense-equivalent throughput, 2*M*N*K FLOPs per run."""
        return 2.0 * m * n * k / (self.median_ms * 1e-3) / 1e12


class Lead:
    """A GPU busy-wait of at least ``us`` microseconds (``torch.cuda._sleep`` of ``us`` x :data:`LEAD_CLOCK_MHZ`
    cycles) enqueued before each timed run; ``us`` 0 where torch has no ``_sleep``."""

    def __init__(self, torch, host_us: float):
        self.sleep = getattr(torch.cuda, "_sleep", None)
        self.us = min(max(2.0 * host_us, LEAD_MIN_US), LEAD_MAX_US) if self.sleep is not None else 0.0
        self.cycles = int(self.us * LEAD_CLOCK_MHZ)

    def __call__(self) -> None:
        if self.cycles:
            self.sleep(self.cycles)


def _event_times(fn, count: int, flush, lead: Lead | None = None) -> list[float]:
    """Milliseconds of ``count`` runs of ``fn``, each between its own pair of CUDA events (``flush`` read before
    each, outside them, then ``lead``'s busy-wait, so the events see GPU work only)."""
    import torch

    starts = [torch.cuda.Event(enable_timing=True) for _ in range(count)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(count)]
    for start, end in zip(starts, ends):
        if flush is not None:
            flush.max()   # a reduction reads every line; its result is not needed
        if lead is not None:
            lead()
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
    own pair of CUDA events on the current stream, behind a GPU busy-wait longer than the host takes to enqueue one
    run (:class:`Lead`).  With ``flush_l2`` a 256 MiB buffer of zeros is read before every timed run (outside the
    events) so operands come from HBM."""
    import torch

    if warmup < 0 or iters < 1 or not warmup_seconds >= 0:
        raise ValueError(f"need warmup >= 0, iters >= 1 and warmup_seconds >= 0, got warmup={warmup}, "
                         f"iters={iters}, warmup_seconds={warmup_seconds}")
    flush = torch.zeros(L2_FLUSH_BYTES // 4, dtype=torch.int32, device="cuda") if flush_l2 else None
    warmup_seconds = minimum_warmup(warmup_seconds, "cuda")
    started, runs, host_s = time.perf_counter(), 0, []
    while runs < warmup or time.perf_counter() - started < warmup_seconds:
        enqueued = time.perf_counter()
        fn()
        host_s.append(time.perf_counter() - enqueued)
        runs += 1
        if runs % 8 == 0 or runs >= warmup:   # a short queue, so the wall time measures GPU work
            torch.cuda.synchronize()
    torch.cuda.synchronize()
    lead = Lead(torch, statistics.median(host_s) * 1e6 if host_s else 0.0)
    if warmup_seconds > 0:
        settle(lambda: _event_times(fn, min(iters, 10), flush, lead))
    times = timed_series(lambda: _event_times(fn, min(iters, 10), flush, lead), iters)
    mark_busy()
    return Timing(median_ms=statistics.median(times), min_ms=min(times),
                  mean_ms=statistics.fmean(times), iters=len(times), flushed_l2=flush_l2,
                  times_ms=tuple(times), lead_us=lead.us)
