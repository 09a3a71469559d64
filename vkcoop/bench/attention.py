"""``vkcoop bench attention``: the Vulkan flash attention kernel against torch's SDPA backends, in one process.

Paths: ``vk-coopmat2`` (``shaders/attention/flash_attention.comp``, tile from the flexible-dimensions table, key
splits for decode) and ``torch-flash``, ``torch-efficient``, ``torch-cudnn``, ``torch-math``
(``scaled_dot_product_attention`` under ``sdpa_kernel([backend])``), each reported separately; a backend that
refuses a case is reported as skipped with torch's reason.

Cases: prefill (seq_q = seq_kv from 1k to 16k, batch = ``tokens`` // seq so every case carries the same number of
query rows, q heads = ``hidden`` // head_dim, causal and not) and decode (seq_q = 1, long seq_kv, 32 q heads on 8 kv
heads (GQA) and on 32 (without GQA), ``decode_heads``).
Every path is checked first on rows of the first and last (batch, head) planes against the float64 reference
with the documented tolerance (:mod:`vkcoop.attention.reference`); one that fails is reported as failed and not
timed. Throughput: 4·b·h·s_q·s_kv·d FLOPs (halved when causal) over the median time; decode also reports GB/s
of K and V read and the fraction of the memory bandwidth (``bandwidth_gbs``; with ``ceilings`` the read bandwidth
measured in the same process, else the spec sheet's by the GPU's name). Ratios: to the fastest torch backend of the
case, and to a coopmat2 ceiling in TFLOP/s (given, or measured with ``ceilings``).

API: :func:`run_attention_bench` takes one :class:`~vkcoop.bench.attention_settings.AttentionBenchSettings` (the
cases, the paths, the timing rules; recorded in the run's JSON) and returns a :class:`vkcoop.bench.sparse.BenchResult`
of :class:`AttentionResult`; :func:`vkcoop.bench.attention_report.print_table` and ``plot`` render it. The command
itself (options, files, exit codes) is :mod:`vkcoop.cli.attention`.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..attention import AttentionShape, check_attention, reference_attention, tolerance_for
from ..attention.cases import DECODE_HEADS, HIDDEN, KINDS, PREFILL_TOKENS, AttentionCase
from ..gemm import DTYPES
from ..gemm import WARMUP_SECONDS as BUSY_WARMUP_SECONDS
from ..progress import RunProgress
from . import report
from .attention_paths import TORCH_BACKENDS, VULKAN_PATH, TorchInputs, TorchSdpaPath, Unsupported, VulkanPath
from .attention_paths import torch_status
from .attention_settings import (DECODE_SEQS, DECODE_WARMUP_SECONDS, DEFAULT_TUNE_BUDGET, PATH_NAMES, PREFILL_SEQS,
                                 WARMUP_SECONDS, AttentionBenchSettings, make_cases, warmup_seconds_for)
from .attention_tuning import AttentionTuner, tune_case
from .measure import Outcome
from .random_fill import clipped_normal
from .stats import retime_if_unsteady
from .sparse import BenchResult

__all__ = ["run_attention_bench", "AttentionBenchSettings", "AttentionResult", "make_cases", "make_inputs",
           "check_planes", "measure", "warmup_seconds_for", "PATH_NAMES", "PREFILL_SEQS", "DECODE_SEQS", "KINDS",
           "DECODE_HEADS", "PREFILL_TOKENS", "HIDDEN", "WARMUP_SECONDS", "DECODE_WARMUP_SECONDS",
           "DEFAULT_TUNE_BUDGET"]
#: Spec-sheet HBM bandwidth in GB/s by a substring of the GPU's name (more specific first).
BANDWIDTH_GBS = (("H200", 4800.0), ("H100 PCIe", 2000.0), ("H100 NVL", 3900.0), ("H100", 3350.0),
                 ("A100-SXM4-80GB", 2039.0), ("A100", 1555.0))
#: Exit codes, the CLI's (vkcoop.cli.common.Exit): all ran and passed, a check failed, nothing could run, Ctrl-C.
EXIT_OK, EXIT_FAILED, EXIT_ENVIRONMENT, EXIT_INTERRUPTED = 0, 1, 3, 130


@dataclass
class AttentionResult(Outcome):
    """One path on one case; JSON through ``dataclasses.asdict`` (the shape becomes a nested object).
    ``tflops`` counts 4·b·h·s_q·s_kv·d (halved when causal) per median time."""
    path: str
    case: str
    kind: str
    dtype: str
    causal: bool
    shape: AttentionShape
    gbs: float | None = None         # K and V bytes read per second
    ratio_best_torch: float | None = None
    ratio_ceiling: float | None = None
    roofline: float | None = None    # decode: gbs / the GPU's bandwidth
    read_floor: float | None = None  # decode: one READ dispatch of the same K and V bytes (--ceilings) / this time
    config_source: str = ""          # vk-coopmat2: "given", "tuned", "cache", "seed" or "default" (attention_tuning)
    tuning: list = field(default_factory=list)   # a tuned case: every candidate, what it ran as and its time


def make_inputs(case: AttentionCase, seed: int = 0):
    """q, k, v: standard normal values clipped to ±3, in the case's dtype, drawn on every core
    (:func:`vkcoop.bench.random_fill.clipped_normal`: the same values on any machine)."""
    s, dtype = case.shape, DTYPES[case.dtype]
    shapes = ((s.batch, s.q_heads, s.seq_q, s.head_dim), (s.batch, s.kv_heads, s.seq_kv, s.head_dim),
              (s.batch, s.kv_heads, s.seq_kv, s.head_dim))
    seeds = np.random.SeedSequence(seed).spawn(len(shapes))
    return tuple(clipped_normal(shape, dtype, part) for shape, part in zip(shapes, seeds))


def check_planes(case: AttentionCase, inputs, rows_per_plane: int = 48, seed: int = 1):
    """[((b, h, rows), reference O rows)] for the first and last (batch, head) planes: the first and last 8 rows
    and a random sample; and the tolerance of these inputs."""
    q, k, v = inputs
    s = case.shape
    rng = np.random.default_rng(seed)
    rows = np.unique(np.concatenate([np.arange(min(8, s.seq_q)), np.arange(max(0, s.seq_q - 8), s.seq_q),
                                     rng.integers(0, s.seq_q, rows_per_plane)]))
    planes = []
    for b, h in dict.fromkeys([(0, 0), (s.batch - 1, s.q_heads - 1)]):
        kv = h // s.group
        ref, _ = reference_attention(q[b:b + 1, h:h + 1], k[b:b + 1, kv:kv + 1], v[b:b + 1, kv:kv + 1],
                                     causal=case.causal, rows=rows)
        planes.append(((b, h, rows), ref[0, 0]))
    return planes, tolerance_for(q, k, v)


def result_for(path: str, case: AttentionCase, status: str, reason: str = "") -> AttentionResult:
    return AttentionResult(path, case.label, case.kind, case.dtype, case.causal, case.shape, status=status,
                           reason=reason)


def measure(path, case: AttentionCase, inputs, planes, tolerance, iters: int, warmup: int,
            warmup_seconds: float = WARMUP_SECONDS, config=None) -> AttentionResult:
    """Bind (the Vulkan path: to ``config`` if given), check the sampled rows, then time after a warm-up of
    ``warmup`` runs lasting at least ``warmup_seconds``; a series wider than :data:`vkcoop.bench.stats.UNSTEADY_BAND`
    is timed once more and the steadier kept (``unsteady_ms``: the other's median). Every failure is a result, never an
    exception."""
    result = result_for(path.name, case, "ok")
    try:
        bound = path.bind(case, inputs) if config is None else path.bind(case, inputs, config)
    except Unsupported as why:
        result.status, result.reason = "skipped", str(why)
        return result
    try:
        result.config = bound.config
        worst = 0.0
        for (b, h, rows), reference in planes:
            ok, error, why = check_attention(bound.rows(b, h, rows), reference, tolerance)
            worst = max(worst, error)
            if not ok:
                result.status, result.reason, result.max_abs_error = "failed", f"plane b{b} h{h}: {why}", worst
                return result
        result.max_abs_error = worst
        times, result.unsteady_ms = retime_if_unsteady(bound.time(iters, warmup, warmup_seconds),
                                                       lambda: bound.time(iters, warmup, BUSY_WARMUP_SECONDS))
    finally:
        bound.release()
    result.set_times(times)
    result.tflops = case.shape.flops(case.causal) / (result.median_ms * 1e-3) / 1e12
    result.gbs = case.shape.kv_bytes(DTYPES[case.dtype].itemsize) / (result.median_ms * 1e-3) / 1e9
    return result


def measure_vulkan(path, case: AttentionCase, inputs, planes, tolerance, iters: int, warmup: int,
                   tuner, progress=None, warmup_seconds: float = WARMUP_SECONDS) -> AttentionResult:
    """The Vulkan path on one case, in the configuration ``tuner`` plans (:mod:`.attention_tuning`); a tuning checks
    and times every candidate (``progress(done, total, label)`` hears of each), stores the winner, and times it
    again with the run's own warm-up."""
    try:
        plan = tuner.plan(case, path)
    except Unsupported as why:
        return result_for(path.name, case, "skipped", str(why))
    config, tried = plan.configs[0], []
    if plan.source == "tuned":
        def measure_one(candidate, seconds):
            return measure(path, case, inputs, planes, tolerance, iters, warmup, seconds, candidate)
        winner, tried = tune_case(plan, measure_one, progress)
        tuner.finish(plan, case, tried, winner)
        config = winner or config
    result = measure(path, case, inputs, planes, tolerance, iters, warmup, warmup_seconds, config=config)
    result.config_source, result.tuning = plan.source, tried
    return result


def add_ratios(results, ceiling_tflops: float | None = None, bandwidth_gbs: float | None = None,
               read_floors: dict | None = None) -> None:
    """Each timed result over the fastest torch backend of its case, the ceiling, and (decode) the bandwidth and
    the read floor of its K and V bytes (``read_floors``: {bytes: µs})."""
    best = {}
    for r in results:
        if r.path in TORCH_BACKENDS and r.tflops:
            best[r.case] = max(best.get(r.case, 0.0), r.tflops)
    for r in results:
        if not r.tflops:
            continue
        if best.get(r.case):
            r.ratio_best_torch = r.tflops / best[r.case]
        if ceiling_tflops:
            r.ratio_ceiling = r.tflops / ceiling_tflops
        if bandwidth_gbs and r.kind == "decode":
            r.roofline = r.gbs / bandwidth_gbs
        floor_us = (read_floors or {}).get(r.shape.kv_bytes(DTYPES[r.dtype].itemsize)) if r.kind == "decode" else None
        if floor_us:
            r.read_floor = floor_us / (r.median_ms * 1e3)


def bandwidth_for(name: str | None) -> float | None:
    for key, value in BANDWIDTH_GBS:
        if name and key in name:
            return value
    return None


class _Paths:
    """The path objects of a run, or for each one that cannot run here the reason."""

    def __init__(self, wanted, dtypes, device, validate, tile, flush_l2=False):
        self.objects, self.skipped, self.vulkan_name, self.torch_name = {}, {}, None, None
        if VULKAN_PATH in wanted:
            try:
                path = VulkanPath(dtypes, device=device, validate=validate, tile=tile, flush_l2=flush_l2)
                self.objects[VULKAN_PATH], self.vulkan_name = path, path.device.physical.name
            except Exception as error:  # noqa: BLE001 - no Vulkan / no coopmat2: skip the path, say why
                self.skipped[VULKAN_PATH] = f"{type(error).__name__}: {error}"
        torch_wanted = [p for p in wanted if p in TORCH_BACKENDS]
        ok, why = torch_status() if torch_wanted else (False, "")
        for name in torch_wanted:
            if ok:
                self.objects[name] = TorchSdpaPath(name, flush_l2)
            else:
                self.skipped[name] = why
        self.torch_name = why if ok else None

    def close(self):
        for path in self.objects.values():
            path.close()


def _said(result: AttentionResult) -> str:
    """One path's outcome in a progress line: ``vk-coopmat2 ok 312.4 TFLOP/s``."""
    figure = f" {result.gbs:.0f} GB/s" if result.kind == "decode" and result.gbs else (
        f" {result.tflops:.1f} TFLOP/s" if result.tflops else "")
    return f"{result.path} {result.status}{figure}"


def _run_case(case, wanted, available, iters, warmup, tuner, progress=None,
              warmup_seconds: float = WARMUP_SECONDS) -> list[AttentionResult]:
    if not any(name in available.objects for name in wanted):   # nothing runs here: make no inputs either
        return [result_for(name, case, "skipped", available.skipped[name]) for name in wanted]
    inputs = make_inputs(case)
    planes, tolerance = check_planes(case, inputs)
    results, device_inputs = [], None
    try:
        for name in wanted:
            if name not in available.objects:
                results.append(result_for(name, case, "skipped", available.skipped[name]))
                continue
            if name in TORCH_BACKENDS and device_inputs is None:
                device_inputs = TorchInputs(inputs)
            try:
                if name == VULKAN_PATH:
                    results.append(measure_vulkan(available.objects[name], case, inputs, planes, tolerance, iters,
                                                  warmup, tuner, progress, warmup_seconds))
                else:
                    results.append(measure(available.objects[name], case, device_inputs, planes, tolerance, iters,
                                           warmup, warmup_seconds))
            except Exception as error:  # noqa: BLE001 - report it and go on with the next path
                results.append(result_for(name, case, "error", f"{type(error).__name__}: {error}"))
    finally:
        if device_inputs is not None:
            device_inputs.close()
    return results


def measured_ceilings(device=None) -> tuple[dict, float | None, float | None]:
    """(``vkcoop bench peak``'s ceilings dict for Vulkan, the workgroup-scope fp16->fp32 ceiling in TFLOP/s, the read
    bandwidth in GB/s), measured now on ``device``; a figure that could not be measured is None."""
    from .peak import ceilings
    found = ceilings(device=device, cuda=False, types=["fp16->fp32"], forms=["coopmat2-workgroup"], modes=["read"])
    vulkan = found.get("vulkan", {})
    mma = vulkan.get("mma", {}).get("coopmat2-workgroup", {}).get("fp16->fp32", {})
    return found, mma.get("tflops"), vulkan.get("bandwidth", {}).get("read", {}).get("gb_per_s")


def measured_read_floors(cases, device=None, flush_l2: bool = False) -> dict[int, float]:
    """{K and V bytes: µs of one READ dispatch of them} for the decode cases, measured now on ``device``, after an
    L2 flush if ``flush_l2`` (:func:`vkcoop.bench.read_floor.read_floors`)."""
    from .read_floor import read_floors
    return read_floors([c.shape.kv_bytes(DTYPES[c.dtype].itemsize) for c in cases if c.kind == "decode"], device,
                       flush_l2=flush_l2)


def run_attention_bench(settings: AttentionBenchSettings = AttentionBenchSettings(), *, console=None,
                        progress: str | bool = "auto", tuning_root=None) -> BenchResult:
    """Check and time every path on every case ``settings`` name; bad settings raise ValueError before any GPU work.
    The Vulkan configuration of each case comes from :mod:`.attention_tuning` (``tuning_root``: the tuning cache's
    folder, default ``vkcoop.bench.tuning.cache_dir()``). Every path is timed after ``settings.warmup`` runs lasting
    at least each kind's warm-up, and with ``settings.flush_l2`` after reading 256 MiB, so that no path finds its
    inputs in the L2 (the read floors too). ``settings.ceilings``: afterwards measure the coopmat2 ceiling and the
    read bandwidth in this process (:func:`measured_ceilings`) for the ratios that ``ceiling_tflops`` and
    ``bandwidth_gbs`` do not give, and the read floor of each decode case's K and V bytes
    (:func:`measured_read_floors`); the figures the ratios are over are ``environment["ratios_over"]``."""
    settings = settings.resolved()
    cases = settings.cases()
    available = _Paths(settings.paths, settings.dtypes, settings.device, settings.validate, settings.tile,
                       settings.flush_l2)
    environment = report.environment(available.vulkan_name, available.torch_name)
    environment["skip_reasons"] = dict(available.skipped)
    vulkan_device = getattr(available.objects.get(VULKAN_PATH), "device", None)
    environment["buffer_robustness"] = getattr(vulkan_device, "buffer_robustness", None)
    tuner = _tuner(available, cases, settings, tuning_root)
    environment["tuning"] = {"cache_dir": str(tuner.cache.root), "messages": tuner.cache.messages,
                             "stored": tuner.stored}
    try:
        results, interrupted = _run_cases(cases, settings, available, tuner, console, progress)
    finally:
        available.close()
    floors = _ratios_over(settings, cases, environment, available.vulkan_name, measuring=not interrupted)
    over = environment["ratios_over"]
    add_ratios(results, over["ceiling_tflops"], over["bandwidth_gbs"], floors)
    return BenchResult(results, environment, settings, interrupted)


def _run_cases(cases, settings: AttentionBenchSettings, available, tuner, console, progress) -> tuple[list, bool]:
    """Every case in turn, a progress line each: (results, whether Ctrl-C stopped the run)."""
    results = []
    try:
        with RunProgress(len(cases), progress, console=console, title="bench attention") as shown:
            for case in cases:
                shown.step(case.label)

                def tuning(done, total, label):
                    shown.detail(f"tuning {label}", done + 1, total)
                measured = _run_case(case, settings.paths, available, settings.iters, settings.warmup, tuner, tuning,
                                     settings.warmup_by_kind[case.kind])
                results += measured
                shown.finished(f"{case.label}: " + ", ".join(_said(r) for r in measured))
    except KeyboardInterrupt:
        return results, True   # report what was measured
    return results, False


def _ratios_over(settings: AttentionBenchSettings, cases, environment: dict, vulkan_name,
                 measuring: bool = True) -> dict[int, float]:
    """Measure what ``settings.ceilings`` asks for (unless not ``measuring``: Ctrl-C stopped the run) and record in
    ``environment["ratios_over"]`` the ceiling and the bandwidth the ratios are over (given, else measured, else
    the bandwidth from the spec sheet) and where the bandwidth came from; the read floors, {K and V bytes: µs}."""
    ceiling, bandwidth = settings.ceiling_tflops, settings.bandwidth_gbs
    source, floors = "given" if bandwidth else "spec sheet", {}
    if settings.ceilings and measuring:
        try:
            environment["ceilings"], measured_tflops, measured_gbs = measured_ceilings(settings.device)
        except Exception as error:  # noqa: BLE001 - the cases' results stand without the ceilings
            environment["ceilings_error"] = report.error_line(error)
            measured_tflops = measured_gbs = None
        ceiling = ceiling or measured_tflops
        if not bandwidth and measured_gbs:
            bandwidth, source = measured_gbs, "measured read bandwidth"
        floors = _read_floors(cases, settings.device, environment, settings.flush_l2)
    bandwidth = bandwidth or bandwidth_for(environment["nvidia_smi"].get("name") or vulkan_name)
    environment["ratios_over"] = {"ceiling_tflops": ceiling, "bandwidth_gbs": bandwidth, "bandwidth_source": source}
    return floors


def _tuner(available, cases, settings: AttentionBenchSettings, root) -> AttentionTuner:
    """The run's :class:`AttentionTuner`: the Vulkan device's identity (None without the path: nothing is tuned)."""
    from .tuning import TuningCache
    vulkan = available.objects.get(VULKAN_PATH)
    identity = vulkan.identity if vulkan is not None else None
    tuner = AttentionTuner(TuningCache(root), identity, tune=settings.tune, retune=settings.retune,
                           budget=settings.tune_budget)
    tuner.count_tunings(cases)
    return tuner


def _read_floors(cases, device, environment, flush_l2: bool) -> dict[int, float]:
    """:func:`measured_read_floors`, recorded in ``environment`` (or why they could not be measured)."""
    try:
        floors = measured_read_floors(cases, device, flush_l2)
    except Exception as error:  # noqa: BLE001 - the cases' results stand without the floors
        environment["read_floor_error"] = report.error_line(error)
        return {}
    environment["read_floor_us"] = {str(count): us for count, us in floors.items()}
    return floors
