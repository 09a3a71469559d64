"""The warm-up rule every timing loop follows, Vulkan (``vkcoop.gemm.vulkan.time_dispatches``) and CUDA
(``vkcoop.cuda.timing.time_cuda``) alike: the GPU's clocks must be up before anything is timed.

1. At least ``warmup`` runs lasting at least :data:`WARMUP_SECONDS` of wall time, or
   :data:`COLD_WARMUP_SECONDS` when the GPU sat idle (:func:`minimum_warmup`);
2. then timed warm-up batches until two in a row agree (:func:`settled`), for at most
   :data:`MAX_SETTLE_SECONDS` more (:func:`settle`). The limit counts from the end of step 1, so a long minimum
   (``bench attention`` asks for 3 s) still ends with two batches that agree.

Why (docs/gemm-notes.md, "The ordering effect"): an idle H100 runs its SMs at 345 MHz and 1980 MHz under load,
and a fixed 0.25 s warm-up was not always enough: the first configuration timed in a process measured 9.8 ms
(median; min 3.7) where the same pipeline measured 3.6 ms later, and 0.21 ms against 0.067 ms at 8192x32x8192.
"""
from __future__ import annotations

import statistics
import time

#: Minimum wall time of the untimed warm-up while the GPU is already busy.
WARMUP_SECONDS = 0.25
#: Two consecutive warm-up batches settle when their medians agree within this fraction (or their own jitter).
SETTLE_TOLERANCE = 0.02
#: The most the settle step may add to the minimum warm-up (0.25 + 1.25 s keeps the warm total at 1.5 s).
MAX_SETTLE_SECONDS = 1.25
#: A GPU idle for longer than IDLE_SECONDS has dropped its clocks (seen on the H100: 1980 -> 345 MHz within a
#: second), and under load they came back only after a few hundred milliseconds, so the first warm-up after
#: such a gap lasts at least COLD_WARMUP_SECONDS. Two batches agreeing proves nothing while the clock sits
#: low, which is why the settle rule alone is not enough.
IDLE_SECONDS = 0.5
COLD_WARMUP_SECONDS = 1.0
_last_busy = [float("-inf")]     # perf_counter() when this process last finished timing GPU work


def minimum_warmup(warmup_seconds: float) -> float:
    """The least warm-up wall time for timing now: ``warmup_seconds``, or COLD_WARMUP_SECONDS after an idle gap
    (0 stays 0: a count-only warm-up)."""
    if warmup_seconds <= 0:
        return 0.0
    cold = time.perf_counter() - _last_busy[0] > IDLE_SECONDS
    return max(warmup_seconds, COLD_WARMUP_SECONDS) if cold else warmup_seconds


def mark_busy() -> None:
    """Timing has just kept the GPU busy (the next warm-up may be short)."""
    _last_busy[0] = time.perf_counter()


def settled(previous, current, tolerance: float = SETTLE_TOLERANCE) -> bool:
    """Whether two consecutive warm-up batches (lists of per-run times) have medians within ``tolerance``, or
    within the batch's own jitter (its interquartile range) where that is wider: a 10 us kernel timed by events
    jitters by more than 2 %, and must not wait out MAX_SETTLE_SECONDS for that."""
    if not previous or not current:
        return False
    a, b = statistics.median(previous), statistics.median(current)
    quartiles = statistics.quantiles(current, n=4) if len(current) > 1 else (b, b, b)
    return abs(a - b) <= max(tolerance * min(a, b), quartiles[2] - quartiles[0])


def settle(measure, previous=None, current=None) -> None:
    """Call ``measure()`` (one timed warm-up batch: a list of per-run times) until two batches in a row are
    :func:`settled` or MAX_SETTLE_SECONDS have passed since this call; ``previous`` and ``current`` are the last
    two batches already measured, if any (they are judged first)."""
    started = time.perf_counter()
    while not settled(previous, current):
        if time.perf_counter() - started >= MAX_SETTLE_SECONDS:
            return
        previous, current = current, measure()
