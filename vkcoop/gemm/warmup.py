"""The warm-up rule every timing loop follows, Vulkan (``vkcoop.gemm.vulkan.time_dispatches``) and CUDA
(``vkcoop.cuda.timing.time_cuda``) alike: the GPU's clocks must be up before anything is timed.

1. At least ``warmup`` runs lasting at least the path's minimum (:data:`WARMUP_SECONDS` for the GEMM benches), or
   :data:`COLD_WARMUP_SECONDS` the first time an API times in this process and whenever the GPU sat idle for
   :data:`IDLE_SECONDS` (:func:`minimum_warmup`): the full warm-up runs once per API, the rest are brief;
2. then timed warm-up batches until two in a row agree (:func:`settled`), for at most
   :data:`MAX_SETTLE_SECONDS` more (:func:`settle`). The limit counts from the end of step 1, so a long minimum
   (``bench attention`` asks for 3 s) still ends with two batches that agree.

Why (docs/gemm.md, "Timing"): an idle H100 runs its SMs at 345 MHz and 1980 MHz under load, and a fixed 0.25 s
warm-up was not always enough for the first configuration timed in a process: it measured 9.8 ms (median; min 3.7)
where the same pipeline measured 3.6 ms later, and 0.21 ms against 0.067 ms at 8192x32x8192. Once up, the clocks
stay up through short gaps: after 1 s of cuBLAS work the H100 still reported 1980 MHz after 4 s idle, and the
first runs after gaps of 0.05 to 4 s timed alike (within 3 %), so the paths of a run need only a brief warm-up
between them.
"""
from __future__ import annotations

import statistics
import time

#: Minimum wall time of the untimed warm-up while the GPU is already warm (the settle step follows it).
WARMUP_SECONDS = 0.1
#: Two consecutive warm-up batches settle when their medians agree within this fraction (or their own jitter).
SETTLE_TOLERANCE = 0.02
#: The most the settle step may add to the minimum warm-up (0.25 + 1.25 s keeps the warm total at 1.5 s).
MAX_SETTLE_SECONDS = 1.25
#: A GPU left idle for long drops its clocks (an idle H100 reports 345 MHz), and under load they come back only
#: after a few hundred milliseconds, so the first warm-up of each API in a process, and the first after a gap of
#: IDLE_SECONDS, lasts at least COLD_WARMUP_SECONDS. Two batches agreeing proves nothing while the clock sits
#: low, which is why the settle rule alone is not enough. The H100 held 1980 MHz through 4 s of idle.
IDLE_SECONDS = 3.0
COLD_WARMUP_SECONDS = 1.0
_last_busy = [float("-inf")]     # perf_counter() when this process last finished timing GPU work
_warmed_apis: set = set()        # the APIs ("vulkan", "cuda") that have had their full warm-up in this process


def minimum_warmup(warmup_seconds: float, api: str = "vulkan") -> float:
    """The least warm-up wall time for timing through ``api`` now: ``warmup_seconds``, or COLD_WARMUP_SECONDS the
    first time ``api`` times in this process and after an idle gap (0 stays 0: a count-only warm-up)."""
    if warmup_seconds <= 0:
        return 0.0
    cold = api not in _warmed_apis or time.perf_counter() - _last_busy[0] > IDLE_SECONDS
    _warmed_apis.add(api)
    return max(warmup_seconds, COLD_WARMUP_SECONDS) if cold else warmup_seconds


#: A timed series stops at its run count or, once it holds MIN_TIMED_RUNS, after SERIES_CAP_SECONDS of wall time,
#: as nvbench and triton.testing.do_bench bound theirs: a slow configuration must not cost minutes.
SERIES_CAP_SECONDS = 2.0
MIN_TIMED_RUNS = 5


def timed_series(measure, iterations: int) -> list:
    """``iterations`` per-run times from repeated ``measure()`` batches (each a list), or fewer (at least
    MIN_TIMED_RUNS, or one batch) once SERIES_CAP_SECONDS have passed."""
    started, times = time.perf_counter(), []
    while len(times) < iterations:
        times += measure()
        if len(times) >= min(MIN_TIMED_RUNS, iterations) and time.perf_counter() - started > SERIES_CAP_SECONDS:
            break
    return times[:iterations]


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
