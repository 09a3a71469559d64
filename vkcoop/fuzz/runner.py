"""The fuzz loop: generate (in worker processes), dispatch per target, compare, shrink, report."""
from __future__ import annotations

import dataclasses
import json
import multiprocessing
import os
import time
from pathlib import Path

import numpy as np

from . import compare
from .models import explain, tags
from .cases import PORTABLE_MAX_SIDE, FuzzCase, generate_case, variant_pool
from .repro import glsl_snippet, python_snippet, reference_view
from .shrinking import shrink as shrink_case

TARGETS = ("hw", "portable", "both")
DEFAULT_VARIANTS = 24
MAX_SHRINKS_PER_TARGET = 6
_TASK_CASES = 256


class FuzzInputError(ValueError):
    """Bad arguments to :func:`run` (names the parameter)."""


# --------------------------------------------------------------------------- report

@dataclasses.dataclass
class Mismatch:
    target: str
    seed: int
    case: FuzzCase
    minimal: FuzzCase
    shrink_steps: int
    shrink_evaluations: int
    glsl: str
    python: str
    reference_view: str

    def to_json(self) -> dict:
        return {"target": self.target, "seed": self.seed, "case_id": self.case.case_id,
                "variant": self.minimal.variant.to_json(), "original_variant": self.case.variant.to_json(),
                "shrink_steps": self.shrink_steps, "shrink_evaluations": self.shrink_evaluations,
                "glsl": self.glsl, "python": self.python, "reference_view": self.reference_view}

    def describe(self) -> str:
        return (f"[{self.target}] case {self.seed}:{self.case.case_id} ({self.case.variant.label}), shrunk in "
                f"{self.shrink_steps} steps to {self.minimal.variant.label}:\n{self.glsl}\n{self.reference_view}")


@dataclasses.dataclass
class TargetStats:
    name: str
    cases: int = 0
    mismatches: int = 0
    seconds: float = 0.0            # dispatch + readback + decode + compare
    compile_seconds: float = 0.0    # pipeline creation (excluded from the rates)
    gpu_seconds: float = 0.0
    variants: int = 0
    skipped: str | None = None
    device: str | None = None

    def to_json(self) -> dict:
        data = dataclasses.asdict(self)
        data["cases_per_s"] = round(self.cases / self.seconds, 1) if self.seconds else None
        return data


@dataclasses.dataclass
class Report:
    seed: int
    cases: int
    target: str
    targets: dict
    mismatches: list
    mismatch_counts: dict
    generation_seconds: float = 0.0     # generating cases and the reference (worker processes)
    run_seconds: float = 0.0            # wall time of the whole loop, pipeline compiles excluded
    total_seconds: float = 0.0          # everything, compiles and shrinking included
    variants: list = dataclasses.field(default_factory=list)
    mismatch_variants: dict = dataclasses.field(default_factory=dict)   # {target: {variant label: count}}
    explanations: dict = dataclasses.field(default_factory=dict)        # {target: {model name: count}}
    mismatch_case_ids: dict = dataclasses.field(default_factory=dict)   # {target: [case ids]}
    tag_totals: dict = dataclasses.field(default_factory=dict)          # {tag: cases with it (hw runs)}

    @property
    def mismatch_count(self) -> int:
        return sum(self.mismatch_counts.values())

    @property
    def ok(self) -> bool:
        return self.mismatch_count == 0 and any(s.skipped is None for s in self.targets.values())

    @property
    def cases_per_s(self) -> float | None:
        return round(self.cases / self.run_seconds, 1) if self.run_seconds else None

    def to_json(self) -> dict:
        return {"seed": self.seed, "cases": self.cases, "target": self.target, "ok": self.ok,
                "mismatch_count": self.mismatch_count, "mismatch_counts": self.mismatch_counts,
                "cases_per_s": self.cases_per_s, "generation_seconds": round(self.generation_seconds, 3),
                "run_seconds": round(self.run_seconds, 3), "total_seconds": round(self.total_seconds, 3),
                "targets": {k: v.to_json() for k, v in self.targets.items()},
                "variants": [v.to_json() for v in self.variants],
                "mismatch_variants": self.mismatch_variants, "explanations": self.explanations,
                "tag_totals": self.tag_totals, "mismatch_case_ids": self.mismatch_case_ids,
                "mismatches": [m.to_json() for m in self.mismatches]}


# --------------------------------------------------------------------------- generation (worker processes)

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


# --------------------------------------------------------------------------- targets

class _Target:
    name = ""
    hw = False

    def evaluate(self, cases, ref):
        """-> ((n,) bool case mismatch, {k: (obs tuple of case k, (E,) bool element mismatch)} for mismatches)."""
        raise NotImplementedError

    def fails_many(self, cases):
        elements = max(c.rows * c.cols for c in cases)
        ref = compare.reference_batch(cases, elements)
        bad, _ = self.evaluate(cases, ref)
        return [bool(b) for b in bad]


class _PortableTarget(_Target):
    name = "portable"

    def __init__(self, device):
        from ..portable import PortableRunner
        self.runner = PortableRunner(device)

    def evaluate(self, cases, ref):
        result = self.runner.run(cases)
        elements = result.indices.shape[1]
        ref = tuple(a[:, :elements] for a in ref)
        obs = (result.indices, result.status, result.block_coord, result.coord_in_block)
        bad, element_bad = compare.case_mismatches("portable", "", ref, obs)
        details = {int(k): (tuple(a[k] for a in obs), element_bad[k]) for k in np.nonzero(bad)[0]}
        return bad, details

    @property
    def gpu_seconds(self):
        return self.runner.gpu_ns * 1e-9

    compile_seconds = 0.0

    def close(self):
        self.runner.close()


class _HwTarget(_Target):
    name = "hw"
    hw = True

    def __init__(self, device, variants, max_new_pipelines=16):
        from .hw import HwRunner
        self.runner = HwRunner(device, variants)
        self.max_new_pipelines = max_new_pipelines

    def evaluate(self, cases, ref):
        n = len(cases)
        bad = np.zeros(n, dtype=bool)
        details = {}
        groups: dict = {}
        for k, case in enumerate(cases):
            groups.setdefault(case.variant, []).append(k)
        for variant, rows in groups.items():
            rows = np.array(rows)
            obs = self.runner.run(variant, [cases[k] for k in rows])
            elements = variant.hw_shape[0] * variant.hw_shape[1]
            sub_ref = compare.slice_reference(ref, rows, elements)
            obs_tuple = (obs.indices, obs.status, obs.block_coord, obs.coord_in_block)
            if obs.block_coord is None:
                compare_obs = (obs.indices, obs.status, sub_ref[2], sub_ref[3])
            else:
                compare_obs = obs_tuple
            case_bad, element_bad = compare.case_mismatches("hw", variant.kind, sub_ref, compare_obs,
                                                            obs.written, obs.corrupt)
            bad[rows] = case_bad
            for j in np.nonzero(case_bad)[0]:
                details[int(rows[j])] = (tuple(None if a is None else a[j] for a in obs_tuple), element_bad[j])
        return bad, details

    def fails_many(self, cases):
        # Candidates whose variant has no pipeline yet cost a compile each: allow a bounded number.
        new = [c.variant for c in cases if c.variant not in self.runner.pipelines]
        allowed = set(list(dict.fromkeys(new))[:self.max_new_pipelines])
        self.max_new_pipelines -= len(allowed)
        runnable = [k for k, c in enumerate(cases) if c.variant in self.runner.pipelines or c.variant in allowed]
        result = [False] * len(cases)
        if runnable:
            for k, failed in zip(runnable, super().fails_many([cases[k] for k in runnable])):
                result[k] = failed
        return result

    @property
    def gpu_seconds(self):
        return self.runner.gpu_ns * 1e-9

    @property
    def compile_seconds(self):
        return self.runner.compile_seconds

    def close(self):
        self.runner.close()


# --------------------------------------------------------------------------- run

def _check_arguments(cases, seed, target, variants, chunk_size, workers):
    if isinstance(cases, bool) or not isinstance(cases, int) or cases < 1:
        raise FuzzInputError(f"cases must be a positive int, got {cases!r}")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise FuzzInputError(f"seed must be a non-negative int, got {seed!r}")
    if target not in TARGETS:
        raise FuzzInputError(f"target must be one of {', '.join(TARGETS)}, got {target!r}")
    if isinstance(variants, bool) or not isinstance(variants, int) or variants < 1:
        raise FuzzInputError(f"variants must be a positive int, got {variants!r}")
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1:
        raise FuzzInputError(f"chunk_size must be a positive int, got {chunk_size!r}")
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 0):
        raise FuzzInputError(f"workers must be None or a non-negative int, got {workers!r}")


def _open_targets(names, device, pool, stats):
    """Open the device(s) and targets; a target that cannot run gets ``stats[name].skipped``."""
    from .. import vk
    from .hw import HW_FEATURES
    opened = {}
    owned = []
    shared = device if isinstance(device, vk.Device) else None
    if "hw" in names:
        try:
            hw_device = shared
            if hw_device is None:
                hw_device = vk.Device(device, features=list(HW_FEATURES))
                owned.append(hw_device)
            else:
                missing = [f for f in HW_FEATURES if not hw_device.enabled_features.get(f)]
                if missing:
                    raise vk.MissingFeatureError(hw_device.physical.name, missing_features=missing,
                                                 reason="the given device was not created with them")
            opened["hw"] = _HwTarget(hw_device, pool)
            stats["hw"].device = hw_device.physical.name
            shared = shared or hw_device
        except (vk.MissingFeatureError, vk.NoDeviceError, OSError) as error:
            stats["hw"].skipped = f"no coopmat2 device: {error}"
    if "portable" in names:
        try:
            portable_device = shared
            if portable_device is None:
                portable_device = vk.Device(device, features=["maintenance4"])
                owned.append(portable_device)
            opened["portable"] = _PortableTarget(portable_device)
            stats["portable"].device = portable_device.physical.name
        except (vk.MissingFeatureError, vk.NoDeviceError, OSError) as error:
            stats["portable"].skipped = f"no Vulkan device: {error}"
    return opened, owned


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
    stats = {name: TargetStats(name) for name in names}
    pool = variant_pool(seed, variants) if "hw" in names else []
    elements = max(16 * 32, PORTABLE_MAX_SIDE ** 2)  # the largest matrix a case can have
    if workers is None:
        workers = min(16, os.cpu_count() or 1) if cases >= 2 * _TASK_CASES else 0
    tasks = [(seed, start, min(cases, start + _TASK_CASES), pool, elements)
             for start in range(0, cases, _TASK_CASES)]
    # Generators start as fresh interpreters ("spawn"): a forked child would inherit whatever Vulkan or CUDA
    # driver state this process already holds (tests and the CLI load drivers before fuzzing).
    process_pool = multiprocessing.get_context("spawn").Pool(workers) if workers else None
    results = process_pool.imap(_generate_task, tasks) if process_pool else map(_generate_task, tasks)
    opened, owned = {}, []
    mismatches_found: dict[str, list] = {name: [] for name in names}
    by_variant: dict[str, dict] = {name: {} for name in names}
    explained: dict[str, dict] = {name: {} for name in names}
    mismatch_ids: dict[str, list] = {name: [] for name in names}
    tag_totals: dict[str, int] = {}
    counts = {name: 0 for name in names}
    generation_seconds = 0.0
    try:
        opened, owned = _open_targets(names, device, pool, stats)
        for name, t in opened.items():
            stats[name].compile_seconds = t.compile_seconds
            if name == "hw":
                stats[name].variants = len(pool)
        loop_started = time.perf_counter()
        compile_before = sum(t.compile_seconds for t in opened.values())
        per_chunk = max(1, chunk_size // _TASK_CASES)
        progress_bar = _progress(console, progress)
        with progress_bar:
            task_ids = {name: progress_bar.add_task(f"{name}", total=cases) for name in opened}
            done = 0
            while done < len(tasks):
                t0 = time.perf_counter()
                parts = []
                for _ in range(min(per_chunk, len(tasks) - done)):
                    parts.append(next(results))
                    done += 1
                chunk_cases, ref = _merge(parts)
                generation_seconds += time.perf_counter() - t0
                if "hw" in opened:
                    for case in chunk_cases:
                        for tag in tags(case):
                            tag_totals[tag] = tag_totals.get(tag, 0) + 1
                for name, t in opened.items():
                    t1 = time.perf_counter()
                    bad, details = t.evaluate(chunk_cases, ref)
                    stats[name].seconds += time.perf_counter() - t1
                    stats[name].cases += len(chunk_cases)
                    counts[name] += int(bad.sum())
                    for k, (obs, element_bad) in details.items():
                        case = chunk_cases[k]
                        mismatch_ids[name].append(case.case_id)
                        label = case.variant.label
                        first_of_variant = label not in by_variant[name]
                        by_variant[name][label] = by_variant[name].get(label, 0) + 1
                        if name == "hw":
                            model = explain(case, case.variant.kind, obs, case.rows * case.cols) or "unexplained"
                            explained[name][model] = explained[name].get(model, 0) + 1
                        if first_of_variant or len(mismatches_found[name]) < 8:
                            ref_k = tuple(a[k] for a in ref)
                            mismatches_found[name].append((case, ref_k, obs, element_bad))
                    progress_bar.update(task_ids[name], advance=len(chunk_cases),
                                        description=f"{name} ({counts[name]} mismatches)")
        compile_during = sum(t.compile_seconds for t in opened.values()) - compile_before
        run_seconds = time.perf_counter() - loop_started - compile_during

        reported = []
        for name, found in mismatches_found.items():
            t = opened.get(name)
            # The first mismatch of each variant first, then the rest, up to max_shrinks.
            seen, ordered, rest = set(), [], []
            for item in found:
                (ordered if item[0].variant not in seen else rest).append(item)
                seen.add(item[0].variant)
            for case, ref_k, obs, element_bad in (ordered + rest)[:max_shrinks if t is not None else 0]:
                reported.append(_report_mismatch(t, seed, case, ref_k, obs, element_bad, shrink))
        for name, t in opened.items():
            stats[name].mismatches = counts[name]
            stats[name].compile_seconds = round(t.compile_seconds, 3)
            stats[name].gpu_seconds = round(t.gpu_seconds, 3)
            stats[name].seconds = round(stats[name].seconds, 3)
    finally:
        if process_pool:
            process_pool.terminate()
        for t in opened.values():
            t.close()
        for d in owned:
            d.close()
    report = Report(seed, cases, target, stats, reported, {n: counts[n] for n in names},
                    generation_seconds, run_seconds, time.perf_counter() - started, pool, by_variant, explained,
                    mismatch_ids, tag_totals)
    if json_path is not None:
        Path(json_path).write_text(json.dumps(report.to_json(), indent=2))
    return report


def _progress(console, enabled):
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    console=console, disable=not enabled, transient=False)


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


def print_report(report: Report, console=None) -> None:
    """A human summary: per-target table, the rate, and every reported mismatch's repro."""
    from rich.console import Console
    from rich.table import Table
    console = console or Console()
    table = Table(title=f"vkcoop fuzz: {report.cases} cases, seed {report.seed}, target {report.target}")
    for column in ("target", "device", "cases", "mismatches", "compare s", "compile s", "GPU s", "status"):
        table.add_column(column)
    for s in report.targets.values():
        table.add_row(s.name, s.device or "-", str(s.cases), str(s.mismatches), f"{s.seconds:.2f}",
                      f"{s.compile_seconds:.2f}", f"{s.gpu_seconds:.3f}", "skipped: " + s.skipped if s.skipped else
                      ("ok" if s.mismatches == 0 else "MISMATCH"))
    console.print(table)
    console.print(f"{report.cases} cases in {report.run_seconds:.2f} s without pipeline compiles "
                  f"({report.cases_per_s} cases/s; generation + reference {report.generation_seconds:.2f} s); "
                  f"total {report.total_seconds:.2f} s")
    for name, variants in report.mismatch_variants.items():
        for label, count in sorted(variants.items(), key=lambda item: -item[1]):
            console.print(f"  {name}: {count} mismatching cases in variant {label}", markup=False, highlight=False)
    for name, models in report.explanations.items():
        for model, count in models.items():
            console.print(f"  {name}: {count} mismatching cases explained by: {model}", markup=False, highlight=False)
    for tag, total in report.tag_totals.items():
        console.print(f"  cases with '{tag}': {total}", markup=False, highlight=False)
    for m in report.mismatches:
        console.print(m.describe(), markup=False, highlight=False)
