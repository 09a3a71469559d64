"""The one measurement loop every GEMM path goes through: check, then time, per configuration.

For each configuration a path offers (one unless tuning), the path is bound to the problem's exact operands,
its output rows are checked with :func:`vkcoop.gemm.check_output` (a failing configuration is never timed),
and it is timed; with several configurations the fastest is timed again with the full iteration count.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from ..gemm import check_output
from ..gemm.path import GemmOperands, GemmPath, GemmProblem


@dataclass
class PathResult:
    path: str
    case: str
    dtype: str
    shape_class: str
    m: int
    n: int
    k: int
    status: str                      # "ok", "failed" (check), "skipped" (cannot run here), "error"
    reason: str = ""
    config: str = ""
    median_ms: float | None = None
    min_ms: float | None = None
    tflops: float | None = None
    max_abs_error: float | None = None
    ratio_cublas: float | None = None
    ratio_cusparselt: float | None = None
    tuning: list = field(default_factory=list)


def path_result(path: str, problem: GemmProblem, status: str, reason: str = "") -> PathResult:
    return PathResult(path, problem.label, problem.dtype, problem.shape_class, problem.m, problem.n, problem.k,
                      status, reason)


def _label(config) -> str:
    return config.label() if hasattr(config, "label") else str(config)


def _try_config(path: GemmPath, operands: GemmOperands, config, probe_iters: int, warmup: int, flush_l2: bool):
    """(entry for the tuning log, (median s, max abs error, bound label) or None)."""
    label = _label(config)
    bound = path.bind(operands, config)
    try:
        ok, max_abs, why = check_output(bound.output_rows(operands.rows), operands.reference)
        if not ok:
            return {"config": label, "status": "failed", "reason": why, "max_abs_error": max_abs}, None
        times = bound.time(probe_iters, warmup, flush_l2)
        median = statistics.median(times)
        entry = {"config": label, "bound": bound.config, "median_ms": median * 1e3,
                 "tflops": operands.problem.flops / median / 1e12}
        return entry, (median, max_abs, bound.config, times)
    finally:
        bound.release()


def measure_path(path: GemmPath, operands: GemmOperands, *, iters: int, warmup: int, flush_l2: bool,
                 tune: bool) -> PathResult:
    """Check and time ``path`` on ``operands``; one bad configuration never sinks the others."""
    problem = operands.problem
    result = path_result(path.name, problem, "ok")
    supported, why = path.supports(problem)
    if not supported:
        result.status, result.reason = "skipped", why
        return result
    configs = path.configs(problem, tune)
    probe_iters = iters if len(configs) == 1 else max(3, iters // 4)
    best = None
    for config in configs:
        try:
            entry, measured = _try_config(path, operands, config, probe_iters, warmup, flush_l2)
        except Exception as error:  # noqa: BLE001 - report the configuration and go on with the next
            entry, measured = {"config": _label(config), "status": "error",
                               "reason": f"{type(error).__name__}: {error}"}, None
        result.tuning.append(entry)
        if measured is not None and (best is None or measured[0] < best[1][0]):
            best = (config, measured)
        elif best is None and result.status == "ok":   # the first failure explains a path with no winner
            result.status = "failed" if entry.get("status") == "failed" else "error"
            result.reason, result.config = entry["reason"], entry["config"]
            result.max_abs_error = entry.get("max_abs_error")
    if best is None:
        return result
    config, (median, max_abs, bound_label, times) = best
    if len(configs) > 1:  # re-time the winner with the full iteration count
        bound = path.bind(operands, config)
        try:
            times = bound.time(iters, warmup, flush_l2)
        finally:
            bound.release()
    result.status, result.reason, result.max_abs_error = "ok", "", max_abs
    result.config = bound_label
    result.median_ms = statistics.median(times) * 1e3
    result.min_ms = min(times) * 1e3
    result.tflops = problem.flops / (result.median_ms * 1e-3) / 1e12
    return result
