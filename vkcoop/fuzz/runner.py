"""The fuzz loop: generate (in worker processes), dispatch per target, compare, shrink, report.

A :class:`FuzzSession` owns everything a run accumulates (per target: the mismatch count, the first mismatches,
counts by variant and by explaining model, the mismatching case ids); :func:`run` drives it chunk by chunk.
Ctrl-C stops the loop cleanly: the cases that ran are reported, marked ``interrupted``.
"""
from __future__ import annotations

import dataclasses
import json
import multiprocessing
import os
import signal
import threading
import time
from pathlib import Path

import numpy as np

from ..errors import InputError
from ..progress import HEARTBEAT_SECONDS, RunProgress
from . import compare
from .cases import PORTABLE_MAX_SIDE, FuzzCase, generate_case, variant_pool
from .models import explain, tags
from .repro import glsl_snippet, python_snippet, reference_view
from .report import Mismatch, Report, TargetStats
from .shrinking import shrink as shrink_case
from .targets import open_targets

TARGETS = ("hw", "portable", "both")
DEFAULT_VARIANTS = 24
MAX_SHRINKS_PER_TARGET = 6
FIRST_MISMATCHES_KEPT = 8
_TASK_CASES = 256


class FuzzInputError(InputError):
    """Bad arguments to :func:`run` (names the parameter)."""


def _generate_task(args):
    seed, start, stop, pool, elements = args
    cases = []
    for case_id in range(start, stop):
        variant = pool[case_id % len(pool)] if pool else None
        cases.append(generate_case(seed, case_id, variant, hw=bool(pool)))
    return cases, compare.reference_batch(cases, elements)


def _merge(parts):
    cases = [c for part in parts for c in part[0]]
    arrays = tuple(np.concatenate([part[1][i] for part in parts]) for i in range(4))
    return cases, arrays


def _positive_int(name: str, value, minimum: int = 1) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        kind = "a positive" if minimum == 1 else "a non-negative"
        raise FuzzInputError(f"{name} must be {kind} int, got {value!r}")


def _check_arguments(cases, seed, target, variants, chunk_size, workers):
    _positive_int("cases", cases)
    _positive_int("seed", seed, 0)
    if target not in TARGETS:
        raise FuzzInputError(f"target must be one of {', '.join(TARGETS)}, got {target!r}")
    _positive_int("variants", variants)
    _positive_int("chunk_size", chunk_size)
    if workers is not None:
        _positive_int("workers", workers, 0)


@dataclasses.dataclass
class _Tally:
    """What one target accumulates over a run."""
    count: int = 0
    found: list = dataclasses.field(default_factory=list)        # (case, ref_k, obs, element_bad), the first ones
    by_variant: dict = dataclasses.field(default_factory=dict)   # variant label -> mismatching cases
    explained: dict = dataclasses.field(default_factory=dict)    # model name -> mismatching cases (hw)
    case_ids: list = dataclasses.field(default_factory=list)

    def add(self, name: str, case: FuzzCase, ref_k, obs, element_bad) -> None:
        self.case_ids.append(case.case_id)
        label = case.variant.label
        first_of_variant = label not in self.by_variant
        self.by_variant[label] = self.by_variant.get(label, 0) + 1
        if name == "hw":
            model = explain(case, case.variant.kind, obs, case.rows * case.cols) or "unexplained"
            self.explained[model] = self.explained.get(model, 0) + 1
        if first_of_variant or len(self.found) < FIRST_MISMATCHES_KEPT:
            self.found.append((case, ref_k, obs, element_bad))

    def to_shrink(self, limit: int) -> list:
        """The first mismatch of each variant first, then the rest, up to ``limit``."""
        seen, ordered, rest = set(), [], []
        for item in self.found:
            (ordered if item[0].variant not in seen else rest).append(item)
            seen.add(item[0].variant)
        return (ordered + rest)[:limit]


class FuzzSession:
    """One fuzz run's targets, statistics and tallies."""

    def __init__(self, seed: int, names: list, pool: list):
        self.seed, self.names, self.pool = seed, names, pool
        self.stats = {name: TargetStats(name) for name in names}
        self.tallies = {name: _Tally() for name in names}
        self.tag_totals: dict[str, int] = {}
        self.generation_seconds = 0.0
        self.cases_done = 0
        self.opened, self.owned = {}, []

    def open(self, device) -> None:
        self.opened, self.owned = open_targets(self.names, device, self.pool, self.stats)
        for name, target in self.opened.items():
            self.stats[name].compile_seconds = target.compile_seconds
            if name == "hw":
                self.stats[name].variants = len(self.pool)

    def compile_seconds(self) -> float:
        return sum(t.compile_seconds for t in self.opened.values())

    def evaluate(self, chunk_cases: list, ref) -> None:
        """Run one chunk on every open target and tally what differs from the reference."""
        if "hw" in self.opened:
            for case in chunk_cases:
                for tag in tags(case):
                    self.tag_totals[tag] = self.tag_totals.get(tag, 0) + 1
        for name, target in self.opened.items():
            started = time.perf_counter()
            bad, details = target.evaluate(chunk_cases, ref)
            self.stats[name].seconds += time.perf_counter() - started
            self.stats[name].cases += len(chunk_cases)
            tally = self.tallies[name]
            tally.count += int(bad.sum())
            for k, (obs, element_bad) in details.items():
                tally.add(name, chunk_cases[k], tuple(a[k] for a in ref), obs, element_bad)
        self.cases_done += len(chunk_cases)

    def tally_line(self) -> str:
        """Each open target and its mismatches so far: ``portable 0 mismatches``."""
        return ", ".join(f"{name} {self.tallies[name].count} mismatches" for name in self.opened)

    def shrink(self, max_shrinks: int, do_shrink: bool) -> list:
        reported = []
        for name, tally in self.tallies.items():
            target = self.opened.get(name)
            for case, ref_k, obs, element_bad in tally.to_shrink(max_shrinks if target is not None else 0):
                reported.append(_report_mismatch(target, self.seed, case, ref_k, obs, element_bad, do_shrink))
        return reported

    def close(self) -> None:
        for name, target in self.opened.items():
            stats = self.stats[name]
            stats.mismatches = self.tallies[name].count
            stats.compile_seconds = round(target.compile_seconds, 3)
            stats.gpu_seconds = round(target.gpu_seconds, 3)
            stats.seconds = round(stats.seconds, 3)
            target.close()
        for device in self.owned:
            device.close()
        self.opened, self.owned = {}, []

    def report(self, cases: int, target: str, reported: list, run_seconds: float, total_seconds: float,
               interrupted: bool) -> Report:
        t = self.tallies
        return Report(self.seed, self.cases_done if interrupted else cases, target, self.stats, reported,
                      {n: t[n].count for n in self.names}, self.generation_seconds, run_seconds, total_seconds,
                      self.pool, {n: t[n].by_variant for n in self.names}, {n: t[n].explained for n in self.names},
                      {n: t[n].case_ids for n in self.names}, self.tag_totals, interrupted=interrupted)


class _CtrlC:
    """Ctrl-C as a flag for the fuzz loop, which raises KeyboardInterrupt at its next generator task (:meth:`check`).
    Python's own handler raises the exception wherever the main thread is, and one raised inside a finalizer
    (``__del__``, a GC callback) is printed and dropped: a fresh-clone CI run saw a fuzz run carry on 120 s after
    SIGINT. A flag cannot be dropped. A second Ctrl-C raises at once. Only where SIGINT has Python's default handler
    and this is the main thread (an ignored SIGINT stays ignored)."""

    def __init__(self):
        self.hit, self._previous = False, None

    def __enter__(self) -> "_CtrlC":
        if (threading.current_thread() is threading.main_thread()
                and signal.getsignal(signal.SIGINT) is signal.default_int_handler):
            self._previous = signal.signal(signal.SIGINT, self._handle)
        return self

    def _handle(self, signum, frame):
        if self.hit:
            raise KeyboardInterrupt
        self.hit = True

    def check(self) -> None:
        if self.hit:
            raise KeyboardInterrupt

    def __exit__(self, *exc) -> bool:
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)
        return False


def _chunks(results, tasks: int, per_chunk: int, check=lambda: None):
    """Merged (cases, reference) chunks of ``per_chunk`` generator tasks, and the seconds spent waiting; ``check``
    runs before each task (it raises KeyboardInterrupt after a Ctrl-C, :class:`_CtrlC`)."""
    done = 0
    while done < tasks:
        started = time.perf_counter()
        parts = []
        for _ in range(min(per_chunk, tasks - done)):
            check()
            parts.append(next(results))
            done += 1
        cases, ref = _merge(parts)
        yield cases, ref, time.perf_counter() - started


def run(cases: int = 1000, seed: int = 0, target: str = "portable", json_path=None, progress=True, *,
        device=None, variants: int = DEFAULT_VARIANTS, shrink: bool = True,
        max_shrinks: int = MAX_SHRINKS_PER_TARGET, workers: int | None = None, chunk_size: int = 4096,
        console=None) -> "Report":
    """Run the differential fuzzer; see the package docstring."""
    _check_arguments(cases, seed, target, variants, chunk_size, workers)
    from rich.console import Console
    console = console or Console(stderr=True)
    started = time.perf_counter()
    names = ["hw", "portable"] if target == "both" else [target]
    session = FuzzSession(seed, names, variant_pool(seed, variants) if "hw" in names else [])
    elements = max(16 * 32, PORTABLE_MAX_SIDE ** 2)  # the largest matrix a case can have
    if workers is None:
        workers = min(16, os.cpu_count() or 1) if cases >= 2 * _TASK_CASES else 0
    tasks = [(seed, start, min(cases, start + _TASK_CASES), session.pool, elements)
             for start in range(0, cases, _TASK_CASES)]
    # Generators start as fresh interpreters ("spawn"): a forked child would inherit whatever Vulkan or CUDA
    # driver state this process already holds (tests and the CLI load drivers before fuzzing).
    process_pool = multiprocessing.get_context("spawn").Pool(workers) if workers else None
    results = process_pool.imap(_generate_task, tasks) if process_pool else map(_generate_task, tasks)
    interrupted, run_seconds, reported = False, 0.0, []
    loop_started = time.perf_counter()
    try:
        try:
            with _CtrlC() as ctrl_c:
                session.open(device)
                loop_started, compile_before = time.perf_counter(), session.compile_seconds()
                with RunProgress(cases, progress, console=console, title="fuzz",
                                 line_every_s=HEARTBEAT_SECONDS) as shown:
                    shown.step(f"fuzz: {session.tally_line()}")
                    for chunk_cases, ref, waited in _chunks(results, len(tasks), max(1, chunk_size // _TASK_CASES),
                                                            ctrl_c.check):
                        session.generation_seconds += waited
                        session.evaluate(chunk_cases, ref)
                        tally = session.tally_line()
                        shown.step(f"fuzz: {tally}")
                        shown.finished(tally, units=len(chunk_cases))
                ctrl_c.check()
            run_seconds = time.perf_counter() - loop_started - (session.compile_seconds() - compile_before)
        except KeyboardInterrupt:
            interrupted = True   # report what ran; shrinking is skipped below
            run_seconds = time.perf_counter() - loop_started
        reported = session.shrink(max_shrinks, shrink and not interrupted)
    finally:
        if process_pool:
            process_pool.terminate()
        session.close()
    report = session.report(cases, target, reported, run_seconds, time.perf_counter() - started, interrupted)
    if json_path is not None:
        Path(json_path).write_text(json.dumps(report.to_json(), indent=2))
    return report


def _report_mismatch(t, seed, case, ref_k, obs, element_bad, do_shrink) -> Mismatch:
    minimal, steps, evaluations = case, 0, 0
    view_text = reference_view(case, ref_k, obs, element_bad)
    if do_shrink:
        result = shrink_case(case, t.fails_many, hw=t.hw, fixed_shape=t.hw)
        minimal, steps, evaluations = result.case, result.steps, result.evaluations
        elements = minimal.rows * minimal.cols
        ref = compare.reference_batch([minimal], elements)
        bad, details = t.evaluate([minimal], ref)
        if details:
            obs_m, bad_m = details[0]
            view_text = reference_view(minimal, tuple(a[0] for a in ref), obs_m, bad_m)
        else:  # should not happen: the shrinker only accepts failing cases
            view_text = "(the minimal case no longer fails when run alone)\n" + view_text
    return Mismatch(t.name, seed, case, minimal, steps, evaluations, glsl_snippet(minimal), python_snippet(minimal),
                    view_text)


