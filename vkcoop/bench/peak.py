"""``vkcoop bench peak``: the measured roofline of the device, in one process.

* **Matrix-multiply ceilings (Vulkan).** ``shaders/peak/coopmat_peak.comp`` multiplies register-resident A and B
  into ``chains`` independent accumulators, ``iterations`` times, with no memory traffic in the loop. Forms:
  ``coopmat2-workgroup`` (workgroup-scope matrices at the tiles ``vkcoop bench sparse`` uses, kept where the
  device's flexible-dimensions table admits them), ``coopmat2-subgroup`` (flexible-dimension subgroup matrices)
  and ``khr-subgroup`` (every shape of the KHR table); types fp16->fp16, fp16->fp32, bf16->fp32, s8->s32.
* **Bandwidth.** ``shaders/peak/bandwidth.comp`` streams a buffer (READ) or copies it (COPY).
* **CUDA** (:mod:`vkcoop.cuda.peak`, where it runs): mma.sync, mma.sp, wgmma and wgmma.sp (the last two in every
  type of the wgmma.sp kernel: fp16, bf16, tf32, e4m3, e5m2, s8, u8), a cudaMemcpy-class copy.

Work is counted exactly. An MMA row does, per dispatch,
``groups x instances x iterations x chains x 2*M*N*K`` operations, where ``instances`` is 1 for a workgroup-scope
matrix and ``workgroup_size / 32`` (subgroups) otherwise; int8 rows are integer operations (TOP/s). Sparse CUDA
rows count the dense-equivalent 2*M*N*K of their shape (K the dense K), as ``vkcoop bench sparse`` does. A
bandwidth row moves ``16 * count`` bytes (READ) or ``32 * count`` (COPY: read + write). Rates are work over the
median of ``repeats`` timed dispatches (GPU timestamps; CUDA events), after a warm-up of at least 0.25 s; the
iteration count is calibrated so one dispatch takes about ``target_ms``.

Before timing, every MMA pipeline runs once with A = B = 1 and 2 iterations, and every element it stores must
equal ``chains*(chains-1)/2 + 2*chains*K``: a check that the kernel does the multiplies that are counted (a
``random`` row is checked on loaded small integers against numpy instead: :mod:`.peak_operands`).

**Operands.** ``zeros`` times A = B = 0 (push constants, every element the same). ``random`` loads A and B
from a buffer of random values before the loop (two sets, alternating between the chains), so the tensor cores
switch as they do in a GEMM. That costs power: on the H100 (700 W) a zeros row runs at its top clock far below the
limit, while a GEMM on real data is held at the power limit at a lower clock (docs/gemm.md, "Where the time goes"). The
ceilings (:func:`ceilings_from`) keep the two apart: ``mma`` (zeros, the ceiling ``vkcoop bench sparse`` divides
by) and ``mma_random``.
"""
from __future__ import annotations

import dataclasses
import math
import statistics
import time

import numpy as np

from . import peak_operands
from ..vk.tables import (COMPONENT_BFLOAT16, COMPONENT_FLOAT16, COMPONENT_FLOAT32, COMPONENT_SINT8,
                         COMPONENT_SINT32, SCOPE_SUBGROUP, SCOPE_WORKGROUP)

#: types -> (PEAK_TYPES define, input component, accumulator component, accumulator dtype)
TYPES = {"fp16->fp16": ("F16_F16", COMPONENT_FLOAT16, COMPONENT_FLOAT16, np.float16),
         "fp16->fp32": ("F16_F32", COMPONENT_FLOAT16, COMPONENT_FLOAT32, np.float32),
         "bf16->fp32": ("BF16_F32", COMPONENT_BFLOAT16, COMPONENT_FLOAT32, np.float32),
         "s8->s32": ("S8_S32", COMPONENT_SINT8, COMPONENT_SINT32, np.int32)}
#: The types only CUDA's wgmma forms run (vkcoop.cuda.peak.FORMS; a test holds the two lists together).
CUDA_ONLY_TYPES = ("tf32->fp32", "e4m3->fp32", "e5m2->fp32", "u8->s32")
FORMS = ("coopmat2-workgroup", "coopmat2-subgroup", "khr-subgroup")
#: What A and B hold while a form is timed: "zeros" (uniform) or "random" (loaded; see the module docstring).
OPERANDS = ("zeros", "random")
#: (invocations, M, N, K, chains) of workgroup-scope matrices: the tiles of vkcoop bench sparse's configurations.
WORKGROUP_TILES = ((256, 128, 256, 32, 1), (256, 128, 128, 32, 1), (128, 128, 128, 32, 1), (64, 32, 32, 128, 4))
#: (invocations, M, N, K, chains) of subgroup-scope flexible matrices.
SUBGROUP_TILES = ((256, 64, 64, 32, 1), (256, 32, 32, 32, 4))
KHR_WORKGROUP, KHR_CHAINS, SUBGROUP_SIZE = 256, 8, 32
MODES = ("read", "copy")
WARMUP_SECONDS = 0.25
NO_STORE = 0xFFFFFFFF          # store_group no workgroup has
SHADER, BANDWIDTH_SHADER = "peak/coopmat_peak.comp", "peak/bandwidth.comp"


@dataclasses.dataclass(frozen=True)
class MmaForm:
    form: str
    types: str
    workgroup_size: int
    m: int
    n: int
    k: int
    chains: int
    operands: str = "zeros"

    @property
    def scope(self) -> str:
        return "WORKGROUP" if self.form == "coopmat2-workgroup" else "SUBGROUP"

    @property
    def instances(self) -> int:
        """Matrices of each accumulator per workgroup: one workgroup-scope matrix, else one per subgroup."""
        return 1 if self.scope == "WORKGROUP" else self.workgroup_size // SUBGROUP_SIZE

    @property
    def shape(self) -> str:
        return f"{self.m}x{self.n}x{self.k}"

    @property
    def label(self) -> str:
        suffix = " random operands" if self.operands == "random" else ""
        return f"{self.form} {self.types} {self.shape} wg{self.workgroup_size} c{self.chains}{suffix}"

    @property
    def defines(self) -> dict:
        return {"PEAK_TYPES": TYPES[self.types][0], "SCOPE": self.scope,
                "OPERANDS": "LOADED" if self.operands == "random" else "UNIFORM"}

    def work(self, groups: int, iterations: int) -> int:
        return groups * self.instances * iterations * self.chains * 2 * self.m * self.n * self.k

    def expected_element(self, iterations: int) -> int:
        """Each stored element after ``iterations`` with A = B = 1: sum over chains c of (c + iterations*K)."""
        return self.chains * (self.chains - 1) // 2 + self.chains * iterations * self.k

    def specialization(self) -> dict:
        return {0: self.workgroup_size, 1: self.m, 2: self.n, 3: self.k, 4: self.chains}


@dataclasses.dataclass
class PeakRow:
    api: str                 # "Vulkan" | "CUDA"
    kind: str                # "mma" | "bandwidth"
    form: str                # coopmat2-workgroup, khr-subgroup, mma.sync, wgmma.sp, read, copy, ...
    types: str               # "fp16->fp32", ... ("" for bandwidth)
    shape: str               # "128x256x32 wg256 c1", buffer size for bandwidth
    status: str              # "ok" | "failed" | "skipped" | "error"
    reason: str = ""
    median_ms: float | None = None
    work: float | None = None          # operations or bytes per dispatch
    rate: float | None = None          # TFLOP/s (TOP/s for int8) or GB/s
    unit: str = ""
    operands: str = ""                 # mma rows: "zeros" or "random" (OPERANDS)


@dataclasses.dataclass
class PeakResult:
    environment: dict
    rows: list

    def to_dict(self) -> dict:
        return {"environment": self.environment, "rows": [dataclasses.asdict(r) for r in self.rows],
                "ceilings": ceilings_from(self)}


def _types_match(entry, a: int, c: int) -> bool:
    """A and B of component ``a``, C and Result of ``c``, no saturation (any ShapeEntry-like row)."""
    return (entry.A == a and entry.B == a and entry.C == c and entry.result == c
            and not getattr(entry, "saturating", False))


def _divides(entry, m: int, n: int, k: int) -> bool:
    return m % entry.M == 0 and n % entry.N == 0 and k % entry.K == 0


def mma_forms(khr, flexible, *, max_dimension: int | None = None, types=None, forms=None,
              operands=("zeros",)) -> list[MmaForm]:
    """The forms to measure, from the driver's KHR and flexible-dimensions tables (ShapeEntry rows), each with
    every ``operands`` mode."""
    found = _table_forms(khr, flexible, max_dimension, types, forms)
    return [dataclasses.replace(form, operands=mode) for form in found for mode in operands]


def _table_forms(khr, flexible, max_dimension, types, forms) -> list[MmaForm]:
    result = []
    for key in types or TYPES:
        _define, a, c, _dtype = TYPES[key]
        wanted = set(forms or FORMS)
        rows = [e for e in flexible if e.flexible and _types_match(e, a, c)]
        tiles = [("coopmat2-workgroup", SCOPE_WORKGROUP, t) for t in WORKGROUP_TILES] + \
                [("coopmat2-subgroup", SCOPE_SUBGROUP, t) for t in SUBGROUP_TILES]
        for form, scope, (invocations, m, n, k, chains) in tiles:
            if form not in wanted or (max_dimension is not None and max(m, n, k) > max_dimension):
                continue
            if any(e.scope == scope and _divides(e, m, n, k)
                   and (scope == SCOPE_SUBGROUP or e.workgroup_invocations == invocations) for e in rows):
                result.append(MmaForm(form, key, invocations, m, n, k, chains))
        if "khr-subgroup" in wanted:
            shapes = dict.fromkeys((e.M, e.N, e.K) for e in khr
                                   if not e.flexible and e.scope == SCOPE_SUBGROUP and _types_match(e, a, c))
            result += [MmaForm("khr-subgroup", key, KHR_WORKGROUP, m, n, k, KHR_CHAINS) for m, n, k in shapes]
    return result


def form_features(form: MmaForm, spirv: bytes) -> list[str]:
    """Device features the peak shader variant needs: its SPIR-V capabilities', the scope's, local_size_id's."""
    import spirv_tools

    from ..samples import CAPABILITY_FEATURES
    needed = [CAPABILITY_FEATURES[c] for c in spirv_tools.reflect(spirv).capabilities if c in CAPABILITY_FEATURES]
    needed.append("maintenance4")
    if form.form == "coopmat2-workgroup":
        needed += ["cooperativeMatrixWorkgroupScope", "cooperativeMatrixFlexibleDimensions"]
    else:
        needed += ["subgroupSizeControl", "computeFullSubgroups"]
        if form.form == "coopmat2-subgroup":
            needed.append("cooperativeMatrixFlexibleDimensions")
    return list(dict.fromkeys(needed))


def _spirv(shader: str, defines: dict) -> bytes:
    from .. import shaders as catalog
    return catalog.compile_variant(catalog.ShaderVariant(shader, tuple(sorted(defines.items()))))


def _time(device, pipeline, buffers, groups, push, repeats: int) -> list[float]:
    """Milliseconds of ``repeats`` dispatches recorded in one command buffer (GPU timestamps)."""
    with device.command_buffer(timestamps=True, max_dispatches=repeats) as commands:
        with commands.recording():
            for _ in range(repeats):
                commands.dispatch(pipeline, buffers, groups=groups, push=push)
        commands.submit()
        return [ns / 1e6 for ns in commands.dispatch_times_ns()]


def _warm(device, pipeline, buffers, groups, push) -> None:
    started = time.perf_counter()
    while time.perf_counter() - started < WARMUP_SECONDS:
        _time(device, pipeline, buffers, groups, push, 4)


def _mma_row(form: MmaForm, status: str, reason: str = "", **values) -> PeakRow:
    unit = "TOP/s" if form.types == "s8->s32" else "TFLOP/s"
    return PeakRow("Vulkan", "mma", form.form, form.types, f"{form.shape} wg{form.workgroup_size} c{form.chains}",
                   status, reason, unit=unit, operands=form.operands, **values)


def _check_store(got: np.ndarray, expected) -> str:
    """Empty string when every stored element equals ``expected`` (a number or an array), else what differs."""
    wrong = got != expected
    if not np.any(wrong):
        return ""
    first = np.broadcast_to(np.asarray(expected), got.shape)[wrong][0]
    return f"{int(wrong.sum())} of {got.size} stored elements are wrong (first {got[wrong][0]!r}, expected {first!r})"


def _check(device, pipeline, out, form: MmaForm) -> str:
    """Run 2 iterations and check the store: A = B = 1 (zeros rows), or small integers loaded from binding 1
    (random rows; :mod:`.peak_operands`). Returns what differs, or ""."""
    if form.operands != "random":
        device.run(pipeline, [out], groups=(1, 1, 1), push=(2, 1.0, 1.0, 0))
        return _check_store(out.read(), form.expected_element(2))
    values = peak_operands.check_operands(form)
    check = device.upload(peak_operands.operand_words(form, values), name="peak check operands")
    try:
        device.run(pipeline, [out, check], groups=(1, 1, 1), push=(2, 0.0, 0.0, 0))
    finally:
        check.close()
    got = out.read()
    return _check_store(got, peak_operands.expected_store(form, values, 2).astype(got.dtype))


def measure_mma(device, form: MmaForm, spirv: bytes, *, groups: int, target_ms: float, repeats: int) -> PeakRow:
    """Check one form (2 iterations: every stored element must be exact), then time it with its operands (zeros,
    or random values loaded before the loop)."""
    subgroup = {} if form.scope == "WORKGROUP" else {"required_subgroup_size": SUBGROUP_SIZE, "full_subgroups": True}
    pipeline = device.pipeline(spirv, specialization=form.specialization(), name=form.label, **subgroup)
    out = device.empty((form.instances * form.m * form.n,), TYPES[form.types][3], name="peak out")
    timed = []
    try:
        problem = _check(device, pipeline, out, form)
        if problem:
            return _mma_row(form, "failed", problem)
        if form.operands == "random":
            words = peak_operands.operand_words(form, peak_operands.random_operands(form))
            timed = [device.upload(words, name="peak random operands")]
        push, buffers = (64, 0.0, 0.0, NO_STORE), [out] + timed
        _warm(device, pipeline, buffers, (groups, 1, 1), push)
        probe = statistics.median(_time(device, pipeline, buffers, (groups, 1, 1), push, 3))
        iterations = int(min(1 << 24, max(64, math.ceil(64 * target_ms / max(probe, 1e-6)))))
        times = _time(device, pipeline, buffers, (groups, 1, 1), (iterations, 0.0, 0.0, NO_STORE), repeats)
        median = statistics.median(times)
        work = form.work(groups, iterations)
        return _mma_row(form, "ok", f"{iterations} iterations x {groups} groups", median_ms=median, work=work,
                        rate=work / (median * 1e-3) / 1e12)
    finally:
        for buffer in [out] + timed:
            buffer.close()
        pipeline.close()


def check_bandwidth_kernel(device, pipeline, mode: str) -> str:
    """Empty string when a small READ/COPY dispatch returns what numpy computes, else what differs."""
    groups, rounds = 2, 7
    invocations = groups * 256
    source = np.arange(invocations * rounds * 4, dtype=np.uint32).reshape(-1, 4) * np.uint32(2654435761)
    src = device.upload(source, name="check src")
    dst = device.empty((invocations, 4) if mode == "read" else source.shape, np.uint32, name="check dst")
    try:
        device.run(pipeline, [src, dst], groups=(groups, 1, 1), push=(source.shape[0], 1, 0))
        expected = (np.bitwise_xor.reduce(source.reshape(rounds, invocations, 4), axis=0) if mode == "read"
                    else source)
        return "" if np.array_equal(dst.read(), expected) else f"the {mode} kernel's check output differs from numpy"
    finally:
        src.close()
        dst.close()


def measure_bandwidth(device, mode: str, *, megabytes: int, groups: int, repeats: int) -> PeakRow:
    limits = device.physical.limits
    limit = min(int(limits.maxStorageBufferRange), megabytes << 20)
    count = (limit // 16) & ~1023
    pipeline = device.pipeline(_spirv(BANDWIDTH_SHADER, {"MODE": mode.upper()}), specialization={0: 256, 1: 4},
                               name=f"bandwidth {mode}")
    buffers = []
    try:
        problem = check_bandwidth_kernel(device, pipeline, mode)
        shape = f"{count * 16 >> 20} MiB"
        if problem:
            return PeakRow("Vulkan", "bandwidth", mode, "", shape, "failed", problem, unit="GB/s")
        buffers = [device.empty((count, 4), np.uint32, name="src"),
                   device.empty((count, 4) if mode == "copy" else (groups * 256, 4), np.uint32, name="dst")]
        push = (count, 0, 1)   # zeros never fold to all-ones: READ stores nothing
        _warm(device, pipeline, buffers, (groups, 1, 1), push)
        median = statistics.median(_time(device, pipeline, buffers, (groups, 1, 1), push, repeats))
        moved = count * 16 * (2 if mode == "copy" else 1)
        return PeakRow("Vulkan", "bandwidth", mode, "", shape, "ok", median_ms=median, work=moved,
                       rate=moved / (median * 1e-3) / 1e9, unit="GB/s")
    finally:
        for buffer in buffers:
            buffer.close()
        pipeline.close()


def _tables(physical):
    khr = physical.khr_shapes() if physical.has_extension("VK_KHR_cooperative_matrix") else ()
    flexible = physical.flexible_shapes() if physical.has_extension("VK_NV_cooperative_matrix2") else ()
    properties = physical.cooperative_matrix2_properties() or {}
    return khr, flexible, properties.get("cooperativeMatrixFlexibleDimensionsMaxDimension")


def _plan(physical, types, forms, operands) -> tuple[list, list[PeakRow]]:
    """(form, spirv, features) for every form the device can run; skipped rows for the rest."""
    khr, flexible, max_dimension = _tables(physical)
    supported = physical.features
    planned, skipped = [], []
    if not khr and not flexible:
        skipped.append(PeakRow("Vulkan", "mma", "all", "", "", "skipped",
                               f"{physical.name} lists no cooperative-matrix shapes", unit="TFLOP/s"))
    for form in mma_forms(khr, flexible, max_dimension=max_dimension, types=types, forms=forms, operands=operands):
        spirv = _spirv(SHADER, form.defines)
        needed = form_features(form, spirv)
        missing = [f for f in needed if not supported.get(f)]
        if missing:
            skipped.append(_mma_row(form, "skipped", f"{physical.name} lacks {', '.join(missing)}"))
        else:
            planned.append((form, spirv, needed))
    return planned, skipped


def measure_vulkan(device=None, *, types=None, forms=None, modes=MODES, groups: int = 64 * 132,
                   target_ms: float = 10.0, repeats: int = 5, megabytes: int = 1024, progress=None,
                   operands=OPERANDS):
    """(device name, rows): every MMA form the device lists with each operand mode, then the bandwidth modes."""
    from .. import vk
    with vk.Instance() as instance:
        physical = instance.select(device)
        name = physical.name
        planned, rows = _plan(physical, types, forms, operands)
    features = list(dict.fromkeys(["maintenance4"] + [f for _, _, needed in planned for f in needed]))
    with vk.Device(device, features=features) as gpu:
        for form, spirv, _ in planned:
            try:
                rows.append(measure_mma(gpu, form, spirv, groups=groups, target_ms=target_ms, repeats=repeats))
            except vk.VulkanError as error:
                rows.append(_mma_row(form, "error", f"{type(error).__name__}: {error}"))
            if progress:
                progress(rows[-1])
        for mode in modes:
            try:
                rows.append(measure_bandwidth(gpu, mode, megabytes=megabytes, groups=groups, repeats=repeats))
            except vk.VulkanError as error:
                rows.append(PeakRow("Vulkan", "bandwidth", mode, "", "", "error", str(error), unit="GB/s"))
            if progress:
                progress(rows[-1])
    return name, rows


def ceilings_from(result: PeakResult) -> dict:
    """``{"vulkan": {...}, "cuda": {...}}``, each ``{"device": name, "mma": {form: {types: {"tflops", "shape",
    "unit"}}}, "bandwidth": {mode: {"gb_per_s", "bytes"}}}``: the best rate of each form and type over its
    shapes (timed on zeros), and each bandwidth mode; rows timed on random operands go to ``mma_random`` the same
    way (present where any was measured). Only rows with status "ok" count; an API with none is absent."""
    out: dict = {}
    for row in result.rows:
        if row.status != "ok":
            continue
        api = out.setdefault(row.api.lower(), {"device": result.environment.get(f"{row.api.lower()}_device"),
                                               "mma": {}, "bandwidth": {}})
        if row.kind == "bandwidth":
            api["bandwidth"][row.form] = {"gb_per_s": row.rate, "bytes": row.work}
            continue
        table = api.setdefault("mma_random", {}) if row.operands == "random" else api["mma"]
        best = table.setdefault(row.form, {}).get(row.types)
        if best is None or row.rate > best["tflops"]:
            table[row.form][row.types] = {"tflops": row.rate, "shape": row.shape, "unit": row.unit}
    return out


def _sm_count() -> int:
    """torch's SM count of GPU 0, else 132 (H100 SXM and H200)."""
    try:
        import torch
        return int(torch.cuda.get_device_properties(0).multi_processor_count) if torch.cuda.is_available() else 132
    except ImportError:
        return 132


def _check_inputs(types, forms, modes, target_ms, repeats, megabytes, sms, operands=()) -> None:
    for values, known, what in ((types, (*TYPES, *CUDA_ONLY_TYPES), "--types"), (forms, FORMS, "--forms"),
                                (modes, MODES, "--modes"), (operands, OPERANDS, "--operands")):
        for value in values or ():
            if value not in known:
                raise ValueError(f"{what} {value!r}: choose from {', '.join(known)}")
    if not (target_ms > 0 and repeats >= 1 and megabytes >= 1 and (sms is None or sms >= 1)):
        raise ValueError("--target-ms, --repeats, --bandwidth-mib and --sms must be positive")


def run_peak(*, device=None, vulkan: bool = True, cuda: bool = True, types=None, forms=None, modes=MODES,
             sms: int | None = None, target_ms: float = 10.0, repeats: int = 5, megabytes: int = 1024,
             progress=None, operands=OPERANDS) -> PeakResult:
    """Measure everything asked for (the Vulkan forms with each of ``operands``; the CUDA ones time zeros);
    ValueError on bad input before any device work."""
    from .report import environment
    _check_inputs(types, forms, modes, target_ms, repeats, megabytes, sms, operands)
    sms = sms or _sm_count()
    rows, vulkan_name, cuda_name = [], None, None
    if vulkan:
        from .. import vk
        try:
            vulkan_name, vulkan_rows = measure_vulkan(device, types=types, forms=forms, modes=modes,
                                                      groups=64 * sms, target_ms=target_ms, repeats=repeats,
                                                      megabytes=megabytes, progress=progress, operands=operands)
            rows += vulkan_rows
        except (vk.NoDeviceError, vk.MissingFeatureError) as error:
            rows.append(PeakRow("Vulkan", "mma", "all", "", "", "skipped", str(error)))
    if cuda:
        from .. import cuda as cuda_paths
        usable, why = cuda_paths.available()
        if usable:
            from ..cuda import peak as cuda_peak
            cuda_name = why
            rows += [PeakRow(**row, operands="zeros" if row["kind"] == "mma" else "")
                     for row in cuda_peak.measure(target_ms=target_ms, repeats=repeats, megabytes=megabytes,
                                                  types=types)]
        else:
            rows.append(PeakRow("CUDA", "mma", "all", "", "", "skipped", why))
    return PeakResult(environment(vulkan_name, cuda_name), rows)


def ceilings(**options) -> dict:
    """Measure (the options of :func:`run_peak`) and return :func:`ceilings_from`'s dict."""
    return ceilings_from(run_peak(**options))
