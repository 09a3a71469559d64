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

API: :func:`run_attention_bench` returns a :class:`vkcoop.bench.sparse.BenchResult` of :class:`AttentionResult`;
:func:`print_table` and :func:`plot` render it. The command itself (options, files, exit codes) is
:mod:`vkcoop.cli.attention`.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..attention import AttentionShape, check_attention, reference_attention, tolerance_for
from ..attention.cases import (DECODE_HEADS, HIDDEN, KINDS, PREFILL_TOKENS, AttentionCase, decode_shape,
                               prefill_shape)
from ..attention.shapes import HEAD_DIMS, check_dtype
from ..gemm import DTYPES
from ..gemm import WARMUP_SECONDS as BUSY_WARMUP_SECONDS
from ..progress import RunProgress
from . import report
from .attention_paths import TORCH_BACKENDS, VULKAN_PATH, TorchInputs, TorchSdpaPath, Unsupported, VulkanPath
from .attention_paths import torch_status
from .attention_tuning import AttentionTuner, tune_case
from .measure import Outcome
from .random_fill import clipped_normal
from .stats import retime_if_unsteady
from .sparse import BenchResult

PATH_NAMES = (VULKAN_PATH,) + tuple(TORCH_BACKENDS)
PREFILL_SEQS = (1024, 2048, 4096, 8192, 16384)
DECODE_SEQS = (8192, 16384, 32768, 65536)
#: Least warm-up wall time before a path is timed (vkcoop.gemm.warmup's rule takes 1 s after an idle gap). On the
#: H100 the first timing after a case's inputs were made and checked measured prefill 5-15 % slow for all of its
#: 20 or 100 runs after that 1 s, in 5 of 5 explore jobs, while the same configuration timed again seconds later was
#: steady (docs/attention.md, experiment 21); 3 s of the same work first removes it.
WARMUP_SECONDS = 3.0
#: Decode's: every path timed the same after 1 s as after 3 s, within 1 % (docs/attention.md, experiment 49).
DECODE_WARMUP_SECONDS = 1.0
#: Spec-sheet HBM bandwidth in GB/s by a substring of the GPU's name (more specific first).
BANDWIDTH_GBS = (("H200", 4800.0), ("H100 PCIe", 2000.0), ("H100 NVL", 3900.0), ("H100", 3350.0),
                 ("A100-SXM4-80GB", 2039.0), ("A100", 1555.0))
#: Seconds all tunings of a run share (``--tune-budget``).
DEFAULT_TUNE_BUDGET = 600.0
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


def make_cases(kinds=KINDS, dtypes=("fp16",), head_dims=HEAD_DIMS, seqs=PREFILL_SEQS, decode_seqs=DECODE_SEQS,
               causal=(False, True), tokens: int = PREFILL_TOKENS, hidden: int = HIDDEN,
               decode_batch: int = 1, decode_heads=DECODE_HEADS) -> list[AttentionCase]:
    """The prefill and decode cases; ValueError naming the option for anything out of range."""
    _choices("--kinds", kinds, KINDS)
    _choices("--dtype", dtypes, tuple(DTYPES))
    _choices("--head-dims", head_dims, HEAD_DIMS)
    head_counts = [h for pair in decode_heads for h in pair]
    for option, values in (("--seqs", seqs), ("--decode-seqs", decode_seqs), ("--tokens", [tokens]),
                           ("--decode-batch", [decode_batch]), ("--decode-heads", head_counts)):
        _at_least(option, values, 1)
    for q, kv in decode_heads:
        if q % kv:
            raise ValueError(f"--decode-heads {q}/{kv}: the q heads must be a multiple of the kv heads")
    cases = []
    for dtype in dtypes:
        check_dtype(dtype)
        for d in head_dims:
            if "prefill" in kinds:
                cases += [AttentionCase("prefill", dtype, bool(c), prefill_shape(s, d, tokens, hidden))
                          for s in seqs for c in causal]
            if "decode" in kinds:
                cases += [AttentionCase("decode", dtype, False, decode_shape(s, d, heads, decode_batch))
                          for heads in decode_heads for s in decode_seqs]
    return cases


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


def _choices(option: str, values, allowed) -> list:
    bad = [v for v in values if v not in allowed]
    if bad:
        raise ValueError(f"{option} {bad[0]!r}: choose from {', '.join(map(str, allowed))}")
    return list(values)


def warmup_seconds_for(kind: str, given: float | None = None) -> float:
    """The least warm-up before a path is timed on a case of ``kind``: ``given``, else :data:`WARMUP_SECONDS` for
    prefill and :data:`DECODE_WARMUP_SECONDS` for decode."""
    if given is not None:
        return given
    return DECODE_WARMUP_SECONDS if kind == "decode" else WARMUP_SECONDS


def _at_least(option: str, values, minimum: int) -> None:
    if any(int(v) < minimum for v in values):
        raise ValueError(f"{option} must be >= {minimum} (got {', '.join(map(str, values))})")


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


def run_attention_bench(*, kinds=KINDS, dtypes=("fp16",), head_dims=HEAD_DIMS, seqs=PREFILL_SEQS,
                        decode_seqs=DECODE_SEQS, causal=(False, True), paths=None, iters: int = 20, warmup: int = 5,
                        tokens: int = PREFILL_TOKENS, decode_batch: int = 1, decode_heads=DECODE_HEADS, tile=None,
                        ceiling_tflops: float | None = None, bandwidth_gbs: float | None = None, device=None,
                        validate: bool = False, console=None, progress: str | bool = "auto", ceilings: bool = False,
                        tune: bool = False, retune: bool = False, tune_budget: float = DEFAULT_TUNE_BUDGET,
                        tuning_root=None, warmup_seconds: float | None = None,
                        flush_l2: bool = False) -> BenchResult:
    """Check and time every path on every case; bad arguments raise ValueError before any GPU work. ``ceilings``:
    afterwards measure the coopmat2 ceiling and the read bandwidth in this process (:func:`measured_ceilings`) for
    the ratios that ``ceiling_tflops`` and ``bandwidth_gbs`` do not give, and the read floor of each decode case's
    K and V bytes (:func:`measured_read_floors`). The Vulkan configuration of each case comes from
    :mod:`.attention_tuning` (``tune``, ``retune``: tune within ``tune_budget`` seconds; ``tuning_root``: the tuning
    cache's folder, default ``vkcoop.bench.tuning.cache_dir()``). Every path is timed after ``warmup`` runs lasting
    at least ``warmup_seconds`` (default: :func:`warmup_seconds_for` each case's kind), and with ``flush_l2`` after
    reading 256 MiB, so that no path finds its inputs in the L2 (the read floors too)."""
    wanted = _choices("--paths", PATH_NAMES if paths is None else paths, PATH_NAMES)
    _at_least("--iters", [iters], 1)
    _at_least("--warmup", [warmup], 0)
    if not tune_budget > 0:
        raise ValueError(f"--tune-budget must be > 0 seconds (got {tune_budget})")
    if warmup_seconds is not None and not 0 <= warmup_seconds < float("inf"):
        raise ValueError(f"--warmup-seconds must be >= 0 and finite (got {warmup_seconds})")
    cases = make_cases(kinds, dtypes, head_dims, seqs, decode_seqs, causal, tokens, decode_batch=decode_batch,
                       decode_heads=decode_heads)
    settings = {"kinds": list(kinds), "dtypes": list(dtypes), "head_dims": list(head_dims), "seqs": list(seqs),
                "decode_seqs": list(decode_seqs), "causal": list(causal), "paths": wanted, "iters": iters,
                "warmup": warmup, "warmup_seconds": {kind: warmup_seconds_for(kind, warmup_seconds) for kind in kinds},
                "tokens": tokens, "decode_batch": decode_batch,
                "decode_heads": [f"{q}/{kv}" for q, kv in decode_heads],
                "tile": tile.label() if tile else None, "ceiling_tflops": ceiling_tflops, "timing": report.TIMING,
                "tune": tune, "retune": retune, "tune_budget": tune_budget, "flush_l2": bool(flush_l2)}
    available = _Paths(wanted, dtypes, device, validate, tile, bool(flush_l2))
    environment = report.environment(available.vulkan_name, available.torch_name)
    environment["skip_reasons"] = dict(available.skipped)
    vulkan_device = getattr(available.objects.get(VULKAN_PATH), "device", None)
    environment["buffer_robustness"] = getattr(vulkan_device, "buffer_robustness", None)
    tuner = _tuner(available, cases, tune, retune, tune_budget, tuning_root)
    environment["tuning"] = {"cache_dir": str(tuner.cache.root), "messages": tuner.cache.messages,
                             "stored": tuner.stored}
    results, interrupted = [], False
    try:
        with RunProgress(len(cases), progress, console=console, title="bench attention") as shown:
            for case in cases:
                shown.step(case.label)

                def tuning(done, total, label):
                    shown.detail(f"tuning {label}", done + 1, total)
                measured = _run_case(case, wanted, available, iters, warmup, tuner, tuning,
                                     warmup_seconds_for(case.kind, warmup_seconds))
                results += measured
                shown.finished(f"{case.label}: " + ", ".join(_said(r) for r in measured))
    except KeyboardInterrupt:
        interrupted = True   # report what was measured
    finally:
        available.close()
    source = "given" if bandwidth_gbs else "spec sheet"
    floors = {}
    if ceilings and not interrupted:
        try:
            environment["ceilings"], measured_tflops, measured_gbs = measured_ceilings(device)
        except Exception as error:  # noqa: BLE001 - the cases' results stand without the ceilings
            environment["ceilings_error"] = report.error_line(error)
            measured_tflops = measured_gbs = None
        ceiling_tflops = ceiling_tflops or measured_tflops
        if not bandwidth_gbs and measured_gbs:
            bandwidth_gbs, source = measured_gbs, "measured read bandwidth"
        floors = _read_floors(cases, device, environment, bool(flush_l2))
    bandwidth_gbs = bandwidth_gbs or bandwidth_for(environment["nvidia_smi"].get("name") or available.vulkan_name)
    settings.update(bandwidth_gbs=bandwidth_gbs, bandwidth_source=source, ceiling_tflops=ceiling_tflops)
    add_ratios(results, ceiling_tflops, bandwidth_gbs, floors)
    return BenchResult(results, environment, settings, interrupted)


def _tuner(available, cases, tune: bool, retune: bool, budget: float, root) -> AttentionTuner:
    """The run's :class:`AttentionTuner`: the Vulkan device's identity (None without the path: nothing is tuned)."""
    from .tuning import TuningCache
    vulkan = available.objects.get(VULKAN_PATH)
    identity = vulkan.identity if vulkan is not None else None
    tuner = AttentionTuner(TuningCache(root), identity, tune=tune, retune=retune, budget=budget)
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
