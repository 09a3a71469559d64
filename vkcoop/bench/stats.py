"""The statistics of a timed figure: median with its spread over the timed iterations, and the noise of a figure.

Every reported time is the median of the timed iterations, with min, max and the 10th / 90th percentiles
(linear interpolation between order statistics, numpy's default). The *relative noise* of a figure is half the
width of its p10-p90 band over the median; results written before the percentiles were recorded fall back to
(median - min) / median.

A timed series is *unsteady* when its p10-p90 band is wider than :data:`UNSTEADY_BAND` of its median: something
outside the kernel (a host stall, another process) disturbed it. A benchmark times such a series once more and
reports the steadier of the two (:func:`steadier`).
"""
from __future__ import annotations

import math
import statistics

from ..errors import InputError

SPREAD_FIELDS = ("median_ms", "min_ms", "max_ms", "p10_ms", "p90_ms")
#: The p10-p90 width, over the median, past which a series is unsteady. Steady series on the H100 stay under 0.15
#: (decode launches of 15 µs) and mostly under 0.05; a disturbed one measured 1.86 (docs/attention.md, experiment 49).
UNSTEADY_BAND = 0.5
#: What a table's footer says of a row marked ``*`` (a result with ``unsteady_ms``).
UNSTEADY_NOTE = (f"* timed twice: the first series was unsteady (its p10-p90 band wider than {UNSTEADY_BAND:g} of its "
                 "median), the steadier is shown; the JSON keeps the other's median (unsteady_ms)")


def percentile(values, q: float) -> float:
    """The ``q``-th percentile (0..100) of ``values``, linearly interpolated between order statistics."""
    ordered = sorted(float(v) for v in values)
    if not ordered:
        raise InputError("percentile of no values")
    if not 0 <= q <= 100:
        raise InputError(f"percentile {q} is outside 0..100")
    position = (len(ordered) - 1) * q / 100
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def spread_ms(times_s) -> dict:
    """Median, min, max, p10, p90 (milliseconds) and the count of a list of times in seconds."""
    times = [float(t) * 1e3 for t in times_s]
    if not times:
        raise InputError("no timed iterations")
    return {"median_ms": statistics.median(times), "min_ms": min(times), "max_ms": max(times),
            "p10_ms": percentile(times, 10), "p90_ms": percentile(times, 90), "iterations": len(times)}


def _get(result, name):
    return result.get(name) if isinstance(result, dict) else getattr(result, name, None)


def relative_noise(result) -> float | None:
    """Half the p10-p90 width over the median of a result (a dict or a PathResult); None without a median."""
    median = _get(result, "median_ms")
    if not median:
        return None
    p10, p90 = _get(result, "p10_ms"), _get(result, "p90_ms")
    if p10 is not None and p90 is not None:
        return max(0.0, (p90 - p10) / 2 / median)
    fastest = _get(result, "min_ms")
    return max(0.0, (median - fastest) / median) if fastest is not None else 0.0


def band(times) -> float:
    """The p10-p90 width of ``times`` over their median (any unit)."""
    median = statistics.median(times) if times else 0.0
    if median <= 0:
        raise InputError("the band of a series needs a positive median")
    return (percentile(times, 90) - percentile(times, 10)) / median


def unsteady(times) -> bool:
    """Whether a timed series is wider than :data:`UNSTEADY_BAND`."""
    return band(times) > UNSTEADY_BAND


def steadier(first, second):
    """Of two timed series of the same work, the one with the narrower band (the first on a tie)."""
    return second if band(second) < band(first) else first


def retime_if_unsteady(times, time_again):
    """(series, unsteady_ms): ``times`` and None if it is steady; else ``time_again()`` is called once and the
    steadier of the two is kept, with the other's median in milliseconds (``times`` in seconds). Both benches report
    a figure this way (``unsteady_ms`` in their results)."""
    if not unsteady(times):
        return times, None
    again = time_again()
    kept = steadier(times, again)
    return kept, statistics.median(again if kept is times else times) * 1e3
