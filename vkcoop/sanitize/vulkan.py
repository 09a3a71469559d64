"""GPU-assisted validation over what vkcoop ships for Vulkan (``vkcoop sanitize vulkan``).

Every pipeline vkcoop creates promises that no buffer access leaves its buffer (robustness ``DISABLED``,
:mod:`vkcoop.vk.robustness`), so an access that does is silent. Under GPU-AV (``validate="gpu"``,
:mod:`vkcoop.vk.validation`) the layer instruments each shader and reports such an access on the GPU. This runs,
under it:

* every sample (:mod:`vkcoop.samples`), each of its cases checked as ``vkcoop run`` checks it;
* each shipped seed configuration of each Vulkan GEMM path (:data:`vkcoop.gemm.paths.SEEDS`, every device's table,
  each family it is listed under) and the KHR paths' first derived configuration, on an aligned and a ragged
  problem of its family (:func:`gemm_shapes`; a tail-split configuration also on a grid whose partial last wave
  follows eight whole ones), each result checked against the exact reference;
* each attention seed (:data:`vkcoop.attention.seeds.ATTENTION_SEEDS`) on an aligned and a ragged shape of its
  class, checked against the float64 reference;
* the L2 flush the benchmarks dispatch.

Every message the layer reports is attributed to the run in flight: a message is a finding unless the layer says it
could not instrument something (``not_instrumented``, :func:`vkcoop.vk.validation.classify`).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from .. import vk
from ..attention import AttentionConfig, AttentionShape, VulkanAttention, attention_features
from ..attention.reference import check_attention, reference_attention, tolerance_for
from ..attention.seeds import ATTENTION_SEEDS
from ..attention.tiles import parse_attention_config
from ..attention.vulkan import EXTENSIONS, device_target_workgroups
from ..gemm import GemmOperands, GemmProblem
from ..gemm.path import check_bound
from ..gemm.paths import SEEDS, VULKAN_PATH_NAMES, VulkanDevicePaths
from ..gemm.tiles import MIN_TAIL_WAVES

#: The Vulkan GEMM paths; the KHR one ships no seeds and runs its first derived configuration.
GEMM_PATHS = VULKAN_PATH_NAMES
#: The aligned problem (M, N, K) of each seed family or class; the ragged one has RAGGED fewer of each.
FAMILY_SHAPES = {"square": (512, 512, 512), "small": (512, 512, 512), "medium": (1024, 1024, 256),
                 "llm": (1024, 32, 2048), "narrow16": (1024, 16, 2048), "narrow32": (1024, 32, 2048),
                 "narrow64": (1024, 64, 2048)}
#: Rows, columns and K taken off the aligned problem: no tile divides it, and K stays whole 2:4 metadata words.
RAGGED = (5, 3, 32)
#: Attention shapes of each kind: (batch, q_heads, kv_heads, seq_q, seq_kv) aligned, and the ragged seq lengths.
PREFILL, DECODE_GQA, DECODE_MHA = (1, 4, 4, 256, 256), (1, 32, 8, 1, 4096), (1, 8, 8, 1, 4096)
RAGGED_PREFILL, RAGGED_KV = 250, 4000


@dataclass
class GpuAvRun:
    """One sample, or one configuration on one problem, under GPU-AV."""
    kind: str                  # "sample", "gemm", "attention" or "flush"
    name: str                  # the sample or the path
    config: str = ""           # the seed's label ("" for a sample)
    shape: str = ""            # "aligned 512x512x512", ...
    status: str = "ok"         # "ok", "failed" (its check), "skipped" (cannot run here), "error"
    reason: str = ""
    sources: list = field(default_factory=list)   # which seed tables list it: "<device> <family>"
    messages: list = field(default_factory=list)
    not_instrumented: list = field(default_factory=list)
    pipelines: int = 0         # a sample's pipelines (each instrumented)

    def take(self, instance) -> "GpuAvRun":
        """Attribute the instance's messages to this run."""
        for message in instance.take_messages():
            gap = vk.validation.classify(message) == "not-instrumented"
            (self.not_instrumented if gap else self.messages).append(str(message))
        return self

    def to_dict(self) -> dict:
        return dict(self.__dict__)


@dataclass
class GpuAvReport:
    device: str = ""
    layer: str = ""            # VK_LAYER_KHRONOS_validation's version
    extensions: list = field(default_factory=list)   # how GPU-AV was turned on
    runs: list = field(default_factory=list)
    seconds: float = 0.0

    def totals(self) -> dict:
        ran = [r for r in self.runs if r.status in ("ok", "failed")]
        return {"samples": sum(r.kind == "sample" for r in ran), "pipelines": sum(r.pipelines for r in ran),
                "gemm_configurations": len({(r.name, r.config) for r in ran if r.kind == "gemm"}),
                "attention_configurations": len({r.config for r in ran if r.kind == "attention"}),
                "runs": len(ran), "failed": sum(r.status == "failed" for r in self.runs),
                "errors": sum(r.status == "error" for r in self.runs),
                "skipped": sum(r.status == "skipped" for r in self.runs),
                "messages": sum(len(r.messages) for r in self.runs),
                "not_instrumented": len(self.not_instrumented())}

    def not_instrumented(self) -> list[str]:
        """Each distinct note of what the layer could not instrument (its own words), once."""
        return list(dict.fromkeys(note for r in self.runs for note in r.not_instrumented))

    @property
    def ok(self) -> bool:
        totals = self.totals()
        return totals["runs"] > 0 and not (totals["messages"] or totals["failed"] or totals["errors"])

    def line(self) -> str:
        t = self.totals()
        gaps = f"; {t['not_instrumented']} notes of what it could not instrument" if t["not_instrumented"] else ""
        return (f"GPU-AV ({self.layer}): {t['samples']} samples ({t['pipelines']} pipelines), "
                f"{t['gemm_configurations']} GEMM and {t['attention_configurations']} attention configurations "
                f"in {t['runs']} runs; {t['messages']} messages, {t['failed']} failed checks, {t['errors']} errors, "
                f"{t['skipped']} skipped{gaps}")

    def to_dict(self) -> dict:
        return {"tool": "gpu-av", "device": self.device, "layer": self.layer, "extensions": self.extensions,
                "seconds": round(self.seconds, 1), "ok": self.ok, "summary": self.line(), "totals": self.totals(),
                "not_instrumented": self.not_instrumented(), "runs": [r.to_dict() for r in self.runs]}


# --- what runs ---------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class GemmJob:
    path: str
    config: object             # a VulkanConfig, or None: the path's first derived configuration
    family: str
    sources: tuple = ()


def gemm_jobs() -> list[GemmJob]:
    """Each seed configuration of each path once per problem of the families it is listed under (every device's
    table), then the KHR paths' own configuration per family of the seeds."""
    jobs: dict = {}
    for device, table in SEEDS.items():
        for path in GEMM_PATHS:
            for family, configs in table.get(path, {}).items():
                for config in configs:
                    key = (path, config.label(), FAMILY_SHAPES[family])
                    first = jobs.get(key, GemmJob(path, config, family))
                    jobs[key] = GemmJob(path, config, first.family, first.sources + (f"{device} {family}",))
    seeded = {path for path, _, _ in jobs}
    families = ("square", "llm")
    for path in GEMM_PATHS:
        if path not in seeded:
            for family in families:
                jobs[(path, "", FAMILY_SHAPES[family])] = GemmJob(path, None, family, ("derived",))
    return list(jobs.values())


def gemm_shapes(family: str, config=None, sm_count: int | None = None) -> list[tuple[str, int, int, int]]:
    """(name, M, N, K): the family's aligned problem and the ragged one; for a tail-split tile (``x``) with a
    known SM count also a grid of whole tiles whose last wave is partial after :data:`MIN_TAIL_WAVES` whole ones."""
    m, n, k = FAMILY_SHAPES[family]
    shapes = [("aligned", m, n, k), ("ragged", m - RAGGED[0], n - RAGGED[1], k - RAGGED[2])]
    tile = getattr(config, "tile", None)
    if tile is not None and tile.tail and tile.per_sm and sm_count:
        wave = sm_count * tile.per_sm
        tiles_n = 48
        tiles_m = -(-(MIN_TAIL_WAVES * wave + wave // 2) // tiles_n)
        shapes.append(("tail", tiles_m * tile.tile_m, tiles_n * tile.tile_n, 4 * tile.tile_k))
    return shapes


def attention_jobs() -> list[tuple[str, str, tuple]]:
    """(class, seed label, sources) of every device's attention seeds, each (class, label) once."""
    jobs: dict = {}
    for device, table in ATTENTION_SEEDS.items():
        for cls, label in table.items():
            jobs.setdefault((cls, label), []).append(device)
    return [(cls, label, tuple(devices)) for (cls, label), devices in jobs.items()]


def attention_shapes(cls: str) -> list[tuple[str, AttentionShape, bool]]:
    """(name, shape, causal) of a class: aligned (whole key blocks) and ragged (neither rows nor keys whole)."""
    head_dim = int(cls.split("-d")[1].split("-")[0])
    if cls.startswith("prefill"):
        causal = cls.endswith("-causal")
        b, hq, hkv, sq, skv = PREFILL
        return [("aligned", AttentionShape(b, hq, hkv, sq, skv, head_dim), causal),
                ("ragged", AttentionShape(b, hq, hkv, RAGGED_PREFILL, RAGGED_PREFILL, head_dim), causal)]
    b, hq, hkv, sq, skv = DECODE_MHA if cls.endswith("-mha") else DECODE_GQA
    return [("aligned", AttentionShape(b, hq, hkv, sq, skv, head_dim), False),
            ("ragged", AttentionShape(b, hq, hkv, sq, RAGGED_KV, head_dim), False)]


# --- running -----------------------------------------------------------------------------------------------------
def _reason(error: BaseException) -> str:
    text = str(error).strip()
    return f"{type(error).__name__}: {text.splitlines()[0] if text else ''}"


def _lost(kind: str, name: str, error: BaseException) -> GpuAvRun:
    """The run that lost the device: the part stops there (nothing after it could run)."""
    return GpuAvRun(kind, name, status="error", reason=f"{_reason(error)}; the part stopped here")


def _layer_version() -> str:
    import vulkan
    for layer in vulkan.vkEnumerateInstanceLayerProperties():
        if layer.layerName == vk.validation.VALIDATION_LAYER:   # the first listed is the one the loader enables
            version = layer.specVersion
            return f"{version >> 22 & 0x7F}.{version >> 12 & 0x3FF}.{version & 0xFFF}"
    return "not installed"


def _gemm_run(group: VulkanDevicePaths, job: GemmJob, shape: tuple, dtype: str, operands: dict) -> GpuAvRun:
    """One configuration on one problem: bound, run once, its output rows checked."""
    name, m, n, k = shape
    path = next(p for p in group.paths if p.name == job.path)
    run = GpuAvRun("gemm", job.path, job.config.label() if job.config else "", f"{name} {m}x{n}x{k}",
                   sources=list(job.sources))
    problem = GemmProblem(dtype, job.family, m, n, k)
    ok, why = path.supports(problem)
    if not ok:
        run.status, run.reason = "skipped", why
        return run
    try:
        config = job.config or path.configs(problem, False)[0]
        run.config = run.config or config.label()
        if (dtype, m, n, k) not in operands:
            operands[(dtype, m, n, k)] = GemmOperands.make(problem)
        checked_on = operands[(dtype, m, n, k)]
        checked_on = path.check_operands(checked_on) if hasattr(path, "check_operands") else checked_on
        bound = path.bind(checked_on, config)
        try:
            failure, _ = check_bound(bound, checked_on)
        finally:
            bound.release()
        if failure is not None:
            run.status, run.reason = "failed", failure["reason"]
    except vk.DeviceLostError:
        raise
    except Exception as error:  # noqa: BLE001 - one configuration's failure is its run's result, not the pass's end
        run.status, run.reason = "error", _reason(error)
    return run.take(group.device.instance)


def _gemm_runs(device, dtype: str, progress) -> list[GpuAvRun]:
    try:
        group = VulkanDevicePaths([dtype], device=device, validate="gpu")
    except (vk.MissingFeatureError, vk.NoDeviceError) as error:
        return [GpuAvRun("gemm", "all paths", status="skipped", reason=str(error))]
    runs, operands = [], {}
    try:
        jobs = gemm_jobs()
        for index, job in enumerate(jobs):
            progress(f"GEMM {index + 1}/{len(jobs)} {job.path} {job.config.label() if job.config else ''}")
            for shape in gemm_shapes(job.family, job.config, group.limits.sm_count):
                runs.append(_gemm_run(group, job, shape, dtype, operands))
        flush = GpuAvRun("flush", "l2_flush", shape="256 MiB")
        group.device.run(*group.flush().dispatch_args())
        runs.append(flush.take(group.device.instance))
    except vk.DeviceLostError as error:
        runs.append(_lost("gemm", f"after {len(runs)} runs", error))
    finally:
        instance = group.device.instance
        group.close()
        if instance.messages:
            runs.append(GpuAvRun("gemm", "closing the device").take(instance))
    return runs


def _attention_inputs(shape: AttentionShape, dtype: str, seed: int):
    rng = np.random.default_rng(seed)
    np_dtype = vk.as_dtype(dtype)
    q = rng.uniform(-1, 1, (shape.batch, shape.q_heads, shape.seq_q, shape.head_dim)).astype(np_dtype)
    k, v = (rng.uniform(-1, 1, (shape.batch, shape.kv_heads, shape.seq_kv, shape.head_dim)).astype(np_dtype)
            for _ in range(2))
    return q, k, v


def _attention_run(device, cls: str, label: str, sources, case, dtype: str) -> GpuAvRun:
    name, shape, causal = case
    run = GpuAvRun("attention", "vk-coopmat2-attention", label, f"{name} {shape.label()}"
                   + (" causal" if causal else ""), sources=list(sources))
    q, k, v = _attention_inputs(shape, dtype, seed=shape.seq_kv)
    try:
        config: AttentionConfig = parse_attention_config(label)
        with VulkanAttention.from_config(device, dtype, shape, config, causal=causal,
                                         flexible=device.physical.flexible_shapes(),
                                         target_workgroups=device_target_workgroups(device.physical)) as runner:
            out, lse = runner.run(q, k, v)
        ref_out, ref_lse = reference_attention(q, k, v, causal=causal)
        tolerance = tolerance_for(q, k, v)
        for got, ref, is_lse in ((out, ref_out, False), (lse, ref_lse, True)):
            ok, _, why = check_attention(got, ref, tolerance, lse=is_lse)
            if not ok:
                run.status, run.reason = "failed", why
                break
    except vk.DeviceLostError:
        raise
    except Exception as error:  # noqa: BLE001 - one configuration's failure is its run's result, not the pass's end
        run.status, run.reason = "error", _reason(error)
    return run.take(device.instance)


def _attention_runs(device, dtype: str, progress) -> list[GpuAvRun]:
    try:
        gpu = vk.Device(device, extensions=EXTENSIONS, features=attention_features((dtype,)), validate="gpu")
    except (vk.MissingFeatureError, vk.NoDeviceError) as error:
        return [GpuAvRun("attention", "vk-coopmat2-attention", status="skipped", reason=str(error))]
    runs = []
    with gpu:
        try:
            for cls, label, sources in attention_jobs():
                progress(f"attention {cls} {label}")
                for case in attention_shapes(cls):
                    runs.append(_attention_run(gpu, cls, label, sources, case, dtype))
        except vk.DeviceLostError as error:
            runs.append(_lost("attention", f"after {len(runs)} runs", error))
    return runs


def _sample_runs(device, progress) -> list[GpuAvRun]:
    from ..samples import all_samples
    runs = []
    with vk.Instance(validate="gpu") as instance:
        for sample in all_samples():
            progress(f"sample {sample.name}")
            result = sample.run(device, validate="gpu", instance=instance)
            status = {"pass": "ok", "fail": "failed", "skip": "skipped"}[result.status]
            runs.append(GpuAvRun("sample", sample.name, shape=f"{result.cases} cases", status=status,
                                 reason=result.reason, messages=list(result.validation_messages),
                                 not_instrumented=list(result.not_instrumented), pipelines=result.pipelines))
    return runs


PARTS = ("samples", "gemm", "attention")


def run_gpu_av(device=None, *, dtype: str = "fp16", parts=PARTS, progress=None, checkpoint=None) -> GpuAvReport:
    """Every part of ``parts`` under GPU-AV on ``device`` (index, name or None); ``progress(text)`` hears what
    starts, ``checkpoint(report)`` gets the report so far after each part (a run cut short keeps what it did).
    LayerNotFoundError where the layer or its GPU-AV is missing, NoDeviceError without a device."""
    progress = progress or (lambda text: None)
    started = time.monotonic()
    with vk.Instance(validate="gpu") as instance:
        report = GpuAvReport(device=instance.select(device).name, layer=_layer_version(),
                             extensions=list(instance.extensions))
    steps = {"samples": lambda: _sample_runs(device, progress), "gemm": lambda: _gemm_runs(device, dtype, progress),
             "attention": lambda: _attention_runs(device, dtype, progress)}
    for part in PARTS:
        if part in parts:
            report.runs += steps[part]()
            report.seconds = time.monotonic() - started
            if checkpoint is not None:
                checkpoint(report)
    return report
