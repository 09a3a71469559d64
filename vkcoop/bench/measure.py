"""The one measurement loop every GEMM path goes through: check, then time, per configuration.

For each configuration a path offers (one unless tuning or searching), the path is bound to the problem's exact
operands, its output rows are checked with :func:`vkcoop.gemm.check_output` (a failing configuration is never
timed), and it is timed; with several configurations the fastest is timed again with the full iteration count.
A path may refine its search from what was measured (an optional ``refine(problem, tried) -> [configs]``
method, called until it returns nothing). A ``deadline`` (``time.monotonic()``) bounds the configurations
tried; those left are counted in the log. Every try is kept in ``PathResult.tuning``; the reported figure is the
median over the timed iterations with its spread (:mod:`.stats`). A reported series that is unsteady (its p10-p90 band
wider than :data:`.stats.UNSTEADY_BAND` of its median) is timed once more and the steadier kept, as ``bench
attention`` does; ``PathResult.unsteady_ms`` keeps the other's median. A path whose results the case's operands cannot
check exactly (one that accumulates in fp16) offers ``check_operands(operands)``: operands on which it must be exact
(:attr:`vkcoop.gemm.GemmOperands.short_sums`); it is checked bound to those and timed bound to the case's.

A path whose candidates could crash the process or poison its CUDA context (the library baselines,
``vkcoop.cuda.paths.LibraryPath``) offers ``search(operands, configs, deadline=, progress=) -> (survivors,
record)``: it tries every candidate elsewhere first (a child process, ``vkcoop.cuda.isolated``) and returns only
those that ran and checked correctly, fastest first. Only the survivors go through the loop here; the search's
record (every candidate: ok with its probe time, failed or error with the reason) heads ``PathResult.tuning``,
each entry marked ``"where": "search process"``. The deadline bounds the search; the few survivors are all timed,
and so is every ``pinned`` candidate (a remembered deep winner, ``vkcoop.bench.library_cache``) that ran there.
A library path's candidates are each timed here with the full iteration count, one after the other in this
process, and the row reports the fastest of those series as it was timed: the figure is the best of what was
re-timed, not a further run of the probe's winner.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

from ..gemm.path import GemmOperands, GemmPath, GemmProblem, check_and_time, check_bound, time_bound
from .stats import retime_if_unsteady, spread_ms


@dataclass(kw_only=True)
class Outcome:
    """What every benchmark reports of one path on one case (GEMM and attention alike)."""
    status: str                      # "ok", "failed" (check), "skipped" (cannot run here), "error"
    reason: str = ""
    config: str = ""
    median_ms: float | None = None
    min_ms: float | None = None
    tflops: float | None = None
    max_abs_error: float | None = None
    max_ms: float | None = None
    p10_ms: float | None = None
    p90_ms: float | None = None
    iterations: int = 0
    times_ms: list = field(default_factory=list)   # every timed iteration of the reported figure, in order
    unsteady_ms: float | None = None   # the median of a disturbed series timed again (stats.retime_if_unsteady)

    def set_times(self, times_s) -> None:
        """The spread of ``times_s`` (seconds per run: :func:`vkcoop.bench.stats.spread_ms`) and the series
        itself, so that an outlier can be traced."""
        for name, value in spread_ms(times_s).items():
            setattr(self, name, value)
        self.times_ms = [t * 1e3 for t in times_s]


@dataclass
class PathResult(Outcome):
    path: str
    case: str
    dtype: str
    shape_class: str
    m: int
    n: int
    k: int
    ratio_cublas: float | None = None
    ratio_cusparselt: float | None = None
    tuning: list = field(default_factory=list)
    config_source: str = ""          # "seed", "cache", "tuned", "derived", "search", "default"
    ratio_baseline: float | None = None
    ceiling_tflops: float | None = None      # the roofline of this path's own form (vkcoop.bench.roofline)
    ratio_own_ceiling: float | None = None
    library: str = ""                # a library path: the library and version it ran on (``path.version()``)
    found_by: str = ""               # a library path: what found the winner (library_cache.FOUND_BY)
    cusparselt_reference: str = ""   # which cuSPARSELt row ratio_cusparselt is over ("path (library)")
    clocks: dict | None = None       # the GPU's clocks while this path measured this case (vkcoop.bench.clocks)


#: The two routes to cuSPARSELt, each with the word a table names it by.
CUSPARSELT_ROUTES = {"cuSPARSELt": "torch", "cuSPARSELt-nvmath": "nvmath"}


def fastest_cusparselt(rows: dict, tflops=lambda r: r.tflops):
    """The faster cuSPARSELt route of one case (``rows``: path -> result; ``tflops`` reads a result's figure), None
    where neither ran: the one rule behind the x cuSPARSELt ratio and the results summary's cuSPARSELt row."""
    ran = [rows[path] for path in CUSPARSELT_ROUTES if path in rows and tflops(rows[path])]
    return max(ran, key=tflops) if ran else None


def path_result(path: str, problem: GemmProblem, status: str, reason: str = "") -> PathResult:
    return PathResult(path, problem.label, problem.dtype, problem.shape_class, problem.m, problem.n, problem.k,
                      status=status, reason=reason)


def config_label(config) -> str:
    return config.label() if hasattr(config, "label") else str(config)


def _library(path) -> str:
    """What a library path says it runs on (``version()``), or ""."""
    version = getattr(path, "version", None)
    if version is None:
        return ""
    try:
        return str(version())
    except Exception as error:  # noqa: BLE001 - a description must not sink the measurement
        return f"version unknown ({type(error).__name__}: {error})"


def _try_config(path: GemmPath, operands: GemmOperands, config, probe_iters: int, warmup: int, flush_l2: bool):
    """(entry for the tuning log, (median s, max abs error, bound label, times) or None). A path with
    ``check_operands`` is checked on those (bound on their own) and timed on ``operands``."""
    checked_on = path.check_operands(operands) if hasattr(path, "check_operands") else operands
    bound = path.bind(checked_on, config)
    try:
        if checked_on is operands:
            entry, measured = check_and_time(bound, operands, probe_iters, warmup, flush_l2)
            return {"config": config_label(config), **entry}, measured
        failure, max_abs = check_bound(bound, checked_on)
    finally:
        bound.release()
    if failure is not None:
        return {"config": config_label(config), **failure}, None
    bound = path.bind(operands, config)
    try:
        entry, measured = time_bound(bound, operands, probe_iters, warmup, flush_l2, max_abs)
        return {"config": config_label(config), **entry}, measured
    finally:
        bound.release()


def _time_again(path, operands, config, iters: int, warmup: int, flush_l2: bool) -> list[float]:
    bound = path.bind(operands, config)
    try:
        return bound.time(iters, warmup, flush_l2)
    finally:
        bound.release()


def _searched(path, operands, configs, options, deadline, on_config):
    """(the configurations to time here, the search's record): the survivors of ``path.search``, then each
    ``pinned`` candidate (by label) that ran ok there and is not among them."""
    options = dict(options) if isinstance(options, dict) else {}
    pinned = set(options.pop("pinned", ()) or ())
    survivors, record = path.search(operands, configs, deadline=deadline, progress=on_config, **options)
    ran = {e.get("config") for e in record if e.get("status") == "ok"}
    kept = {config_label(c) for c in survivors}
    extra = [c for c in configs if config_label(c) in pinned & ran - kept]
    return list(survivors) + list({config_label(c): c for c in extra}.values()), record


class _Search:
    """The configurations of one measurement: tried in order, refined by the path, bounded by a deadline."""

    def __init__(self, path, problem, configs, deadline, on_config, searched: int = 0):
        self.path, self.problem, self.deadline, self.on_config = path, problem, deadline, on_config
        self.pending, self.tried, self.best, self.first_failure = list(configs), [], None, None
        self.total, self.searched = len(self.pending), searched   # searched: tries counted before (progress)

    def __iter__(self):
        refine = getattr(self.path, "refine", None)
        while True:
            while self.pending:
                if self.deadline is not None and time.monotonic() > self.deadline and self.best is not None:
                    self.tried.append({"status": "budget", "reason": f"{len(self.pending)} configuration(s) "
                                       "not tried: the time budget was spent"})
                    return
                yield self.pending.pop(0)
            more = refine(self.problem, self.tried) if refine else []
            more = [c for c in more if config_label(c) not in {e.get("config") for e in self.tried}]
            if not more:
                return
            self.pending, self.total = list(more), self.total + len(more)

    def record(self, config, entry, measured) -> None:
        self.tried.append(entry)
        if measured is not None and (self.best is None or measured[0] < self.best[1][0]):
            self.best = (config, measured)
        elif measured is None and self.first_failure is None:
            self.first_failure = entry
        if self.on_config is not None:
            done = len([e for e in self.tried if e.get("status") != "budget"])
            self.on_config(self.searched + done, self.searched + self.total, entry.get("config", ""))


#: Exceptions that name a fault of our own code, never a library's refusal.
PROGRAMMING_ERRORS = frozenset({"AssertionError", "AttributeError", "ImportError", "IndexError", "KeyError",
                                "ModuleNotFoundError", "NameError", "TypeError", "UnboundLocalError"})


def _refused(tried: list) -> bool:
    """Whether a library's candidates all stopped in an exception the library call raised (``raised``; not a search
    process that died or could not start, not one of :data:`PROGRAMMING_ERRORS`): no wrong result, nothing timed.
    The row then says that the library cannot run the combination here, in its own words."""
    return bool(tried) and all(e.get("status") == "error" and e.get("raised")
                               and e["raised"] not in PROGRAMMING_ERRORS for e in tried)


def measure_path(path: GemmPath, operands: GemmOperands, *, iters: int, warmup: int, flush_l2: bool,
                 tune: bool, configs=None, deadline: float | None = None, on_config=None,
                 search: bool | dict = True) -> PathResult:
    """Check and time ``path`` on ``operands``; one bad configuration never sinks the others.

    ``configs``: the configurations to try (default ``path.configs(problem, tune)``). ``on_config(done, total,
    label)`` is called after each try (progress). ``search``: whether a path with ``search`` tries ``configs``
    in its search process first (a dict: the options of that search); False times them here directly (a
    configuration that ran in a search before)."""
    problem = operands.problem
    result = path_result(path.name, problem, "ok")
    supported, why = path.supports(problem)
    if not supported:
        result.status, result.reason = "skipped", why
        return result
    configs = list(path.configs(problem, tune) if configs is None else configs)
    record = []
    library = hasattr(path, "search")
    if search and library and configs:   # try the candidates elsewhere first; time the survivors
        configs, record = _searched(path, operands, configs, search, deadline, on_config)
        deadline = None
    search = _Search(path, problem, configs, deadline, on_config, len(record))
    full = library or (len(configs) == 1 and not hasattr(path, "refine"))
    probe_iters = iters if full else max(3, iters // 4)
    for config in search:
        try:
            entry, measured = _try_config(path, operands, config, probe_iters, warmup, flush_l2)
        except Exception as error:  # noqa: BLE001 - report the configuration and go on with the next
            entry, measured = {"config": config_label(config), "status": "error",
                               "reason": f"{type(error).__name__}: {error}", "raised": type(error).__name__}, None
        search.record(config, entry, measured)
    result.tuning, result.library = record + search.tried, _library(path)   # (after binding: what it loaded)
    if search.best is None:
        failure = search.first_failure or next((e for e in record if e.get("status") in ("failed", "error")),
                                               {"status": "error", "reason": "no configuration to try", "config": ""})
        result.status = "failed" if failure.get("status") == "failed" else "error"
        result.reason, result.config = failure["reason"], failure["config"]
        if library and _refused(record + search.tried):
            result.status, result.reason = "skipped", f"the library refused every candidate: {failure['reason']}"
        result.max_abs_error = failure.get("max_abs_error")
        return result
    config, (_, max_abs, bound_label, times) = search.best
    if not library and (len(search.tried) > 1 or probe_iters != iters):  # the winner again, the full count
        times = _time_again(path, operands, config, iters, warmup, flush_l2)
    times, result.unsteady_ms = retime_if_unsteady(
        times, lambda: _time_again(path, operands, config, iters, warmup, flush_l2))
    result.status, result.reason, result.max_abs_error = "ok", "", max_abs
    result.config = bound_label
    result.set_times(times)
    result.tflops = problem.flops / (result.median_ms * 1e-3) / 1e12
    return result
