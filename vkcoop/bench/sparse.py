"""``vkcoop bench sparse``: every 2:4 and dense GEMM path on the same inputs, in one process.

Paths (fp16 or bf16 in, fp32 accumulation unless named; the other types of ``--dtype``, tf32, e4m3, e5m2, int8 and
uint8 (:mod:`vkcoop.gemm.dtypes`), run on the paths that take them: the libraries, :mod:`vkcoop.cuda.typed_libraries`,
and the dense Vulkan path in int8; the others are skipped with the reason):

=========================  ========  ===============================================================
name                       API       what
=========================  ========  ===============================================================
vk-coopmat2-dense          Vulkan    workgroup-scope coopmat2 GEMM on the pruned dense A
vk-coopmat2-dense-fp16acc  Vulkan    the same accumulating in fp16 (fp16->fp16; fp16 inputs only),
                                     checked bit for bit on B cut to 32 terms per column
vk-coopmat2-2:4            Vulkan    the same with A loaded from the 2:4 format by a decode function
vk-coopmat2-2:4-expand     Vulkan    A expanded from the 2:4 format into a dense workspace by one pass,
                                     then the dense kernel (compute-bound shapes only)
vk-khr-subgroup            Vulkan    subgroup-scope KHR coopmat GEMM through shared memory
cuda-mma.sp                CUDA      hand-written ``mma.sp`` kernel (vkcoop.cuda.MmaSpGemm)
cuda-wgmma.sp              CUDA      hand-written ``wgmma.mma_async.sp`` kernel (vkcoop.cuda.WgmmaSpGemm)
cuSPARSELt                 CUDA      torch's ``_cslt_sparse_mm`` (torch's cuSPARSELt), best of a search
cuSPARSELt-nvmath          CUDA      cuSPARSELt through nvmath-python (whichever version it loads), best
                                     of the same search (the ``cuda`` extra)
torch-semi-structured      CUDA      ``torch.sparse.to_sparse_semi_structured`` (cuSPARSELt backend) @ B
cuBLAS                     CUDA      best of ``torch.mm`` (cuBLAS, cuBLASLt, B layouts) and nvmath-python's
                                     cuBLASLt ``Matmul``; the label says which won
cuda-mma.sync              CUDA      hand-written dense ``mma.sync`` kernel (vkcoop.cuda.MmaDenseGemm), any tile
cuda-mma.sync-cap          CUDA      the same with only the tiles within Vulkan's limits (vkcoop.cuda.vulkan_cap)
cuda-mma.sp-cap            CUDA      ``mma.sp`` with only the tiles within Vulkan's limits
=========================  ========  ===============================================================

With no options a run answers the question in about a minute (:data:`vkcoop.bench.shapes.PRESETS`: both
dtypes, 8192^3 and 8192x32x8192); ``preset="full"`` is the wider grid. What a run measures is one frozen
:class:`~vkcoop.bench.sparse_settings.SparseBenchSettings`, recorded in its JSON. Which paths can run is decided
first, from the devices alone: where none can, the run makes no inputs. The Vulkan pipelines a run needs are
created first, on several threads (the driver compiles them concurrently), and the library searches of the run
share one child process, started before the first inputs are made.

Every path is a :class:`vkcoop.gemm.GemmPath` and goes through one loop (:func:`vkcoop.bench.measure.measure_path`):
the inputs of a case are made once (:meth:`vkcoop.gemm.GemmOperands.make`: multiples of 1/8, A pruned 2:4, so
any fp32 accumulation is exact; each other type's exact values, :mod:`vkcoop.gemm.dtypes`, recorded in the JSON's
``environment["dtypes"]``), each configuration is checked on a sample of rows that includes the first and
last ones (one that fails is reported and never timed), then timed after a warm-up of at least ``warmup`` runs
and :data:`vkcoop.gemm.WARMUP_SECONDS` (1 s the first time each API times, and after an idle gap), continued
until two timed warm-up batches agree (``vkcoop.gemm.warmup``) (Vulkan: GPU timestamps; CUDA: CUDA events behind a GPU busy-wait, so neither counts
the host's launch work: :mod:`vkcoop.cuda.timing`), optionally with an L2 flush before each run. Each figure is the median of ``iters`` timed runs with its spread (:mod:`.stats`). Throughput
is dense-equivalent: 2*M*N*K / median time. Which configurations a path tries is decided per device by
:mod:`.tuning` (cached, seeded, or tuned within a time budget); the shapes come from :mod:`.shapes`. The library
baselines try their candidates in a child process first (``vkcoop.cuda.isolated``): one that crashes or poisons
the CUDA context is recorded with its reason, and only those that ran and checked correctly are timed here. What
such a search found is remembered per device, case and library versions (:mod:`.library_cache`); ``search``
(quick, deep or cached) says how far a run searches where nothing is remembered.

The **x cuSPARSELt** ratio of a case is over the fastest cuSPARSELt row that ran on it (torch's or nvmath's);
``PathResult.cusparselt_reference`` names that row and its library version.
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass, is_dataclass

from ..errors import InputError
from ..gemm.dtypes import bench_type
from ..gemm.path import GemmOperands
from .clocks import ClockTrace
from .measure import PathResult, fastest_cusparselt, measure_path, path_result
from ..progress import PROGRESS_MODES, RunProgress, progress_mode
from .shapes import LLM_TOKENS, PRESETS, SHAPES, make_cases
from .sparse_settings import (CUDA_PATHS, DEFAULT_SEARCH_BUDGET, DEFAULT_TUNE_BUDGET, PATH_NAMES, SEARCH_DEPTHS,
                              VULKAN_PATHS, SparseBenchSettings)
from .tuning import Tuner, TuningCache, cache_dir

__all__ = ["run_sparse_bench", "run_cases", "make_cases", "add_ratios", "BenchResult", "SparseBenchSettings",
           "PATH_NAMES", "SHAPES", "LLM_TOKENS", "PRESETS", "SEARCH_DEPTHS", "VULKAN_PATHS", "CUDA_PATHS",
           "DEFAULT_TUNE_BUDGET", "DEFAULT_SEARCH_BUDGET"]


def cuda_status() -> tuple[bool, str]:
    try:
        from .. import cuda
    except Exception as error:  # noqa: BLE001 - any import failure means "not here"
        return False, f"vkcoop.cuda cannot be imported: {type(error).__name__}: {error}"
    try:
        return cuda.available()
    except Exception as error:  # noqa: BLE001
        return False, f"vkcoop.cuda.available() failed: {error}"


def add_ratios(results: list[PathResult], baseline: str = "cuBLAS") -> None:
    """Each result's throughput over the cuBLAS result, the fastest cuSPARSELt result (named in
    ``cusparselt_reference`` with its library version) and the ``baseline`` result of the same case."""
    by_case = {}
    for r in results:
        by_case.setdefault(r.case, {})[r.path] = r
    for paths in by_case.values():
        cusparselt = fastest_cusparselt(paths)
        for r in paths.values():
            if r.tflops is None:
                continue
            for base, attribute in ((paths.get("cuBLAS"), "ratio_cublas"), (cusparselt, "ratio_cusparselt"),
                                    (paths.get(baseline), "ratio_baseline")):
                if base is not None and base.tflops:
                    setattr(r, attribute, r.tflops / base.tflops)
            if cusparselt is not None:
                r.cusparselt_reference = cusparselt.path + (f" ({cusparselt.library})" if cusparselt.library else "")


@dataclass
class BenchResult:
    """A run's results, its environment and its settings: a :class:`SparseBenchSettings` or an
    :class:`~vkcoop.bench.attention_settings.AttentionBenchSettings` (a recorded run read back: its JSON dict)."""
    results: list
    environment: dict
    settings: object
    interrupted: bool = False     # Ctrl-C stopped the run: ``results`` holds what was measured

    @property
    def failed(self) -> list:
        return [r for r in self.results if r.status in ("failed", "error")]

    @property
    def nothing_ran(self) -> bool:
        """Every path was skipped on every case: nothing could run here (or nothing was asked)."""
        return not self.interrupted and all(r.status == "skipped" for r in self.results)

    def to_dict(self) -> dict:
        settings = asdict(self.settings) if is_dataclass(self.settings) else dict(self.settings)
        return {"environment": self.environment, "settings": settings, "interrupted": self.interrupted,
                "results": [asdict(r) for r in self.results]}


class _Paths:
    """The GemmPath objects a run needs, or for each unavailable path the reason it is skipped; the device
    identity each API reports (the tuning cache's key) and the SM count."""

    def __init__(self, wanted, dtypes, device, validate):
        from . import identity, report

        self.objects, self.skipped, self.vulkan, self.identities, self.sm_count = {}, {}, None, {}, None
        if any(p in VULKAN_PATHS for p in wanted):
            try:
                from ..gemm.paths import VulkanDevicePaths
                self.vulkan = VulkanDevicePaths(dtypes, device=device, validate=validate)
                self.objects.update({p.name: p for p in self.vulkan.paths if p.name in wanted})
                physical = self.vulkan.device.physical
                self.identities["vulkan"] = identity.vulkan_identity(physical)
                self.sm_count = self.vulkan.limits.sm_count   # the driver's (VK_NV_shader_sm_builtins)
            except Exception as error:  # noqa: BLE001 - no Vulkan / no coopmat2: skip those paths, say why
                self.skipped.update({p: f"{type(error).__name__}: {error}" for p in VULKAN_PATHS})
        self.cuda_ok, self.cuda_reason = cuda_status() if any(p in CUDA_PATHS for p in wanted) else (False, "")
        if self.cuda_ok:
            from ..cuda.mma_sync_paths import all_cuda_paths
            self.objects.update({p.name: p for p in all_cuda_paths([p for p in wanted if p in CUDA_PATHS],
                                                                    device=device)})
            self.identities["cuda"] = identity.cuda_identity(report.nvidia_smi().get("driver_version"))
            self.sm_count = self.sm_count or identity.cuda_sm_count()
        else:
            self.skipped.update({p: self.cuda_reason for p in CUDA_PATHS})
        if self.vulkan is not None:
            self.vulkan.set_sm_count(self.sm_count)

    def close(self):
        for path in self.objects.values():
            if self.vulkan is None or path not in self.vulkan.paths:
                path.close()
        if self.vulkan is not None:
            self.vulkan.close()


def _cuda_environment(paths) -> dict:
    """What the CUDA paths record in the run's environment (the Vulkan cap of the capped paths)."""
    from ..cuda.mma_sync_paths import run_environment
    return run_environment([p for p in paths if getattr(p, "api", "") == "cuda"])


def _measure(path, operands, tuner: Tuner, progress: RunProgress, settings: SparseBenchSettings) -> PathResult:
    problem = operands.problem
    if not path.supports(problem)[0]:   # measure_path reports the reason
        return measure_path(path, operands, iters=1, warmup=0, flush_l2=False, tune=False)
    plan = tuner.plan(path, problem)
    progress.detail(f"{path.name}: {plan.source}")

    def on_config(done, total, label):
        progress.detail(f"{path.name} ({plan.source}): {label}", done, total)

    result = measure_path(path, operands, iters=settings.iters, warmup=settings.warmup,
                          flush_l2=settings.flush_l2, tune=plan.source == "tuned", configs=plan.configs,
                          deadline=plan.deadline, on_config=on_config, search=plan.search)
    result.config_source = plan.source
    tuner.finish(plan, problem, result, path)
    return result


def summary_line(result: PathResult) -> str:
    """One finished path in words: case, path, status, figure, where the configuration came from."""
    head = f"{result.case}  {result.path}  {result.status}"
    if result.tflops is not None:
        return (f"{head}  {result.tflops:.1f} TFLOP/s ({result.median_ms:.3f} ms)  "
                f"[{result.found_by or result.config_source}] "
                f"{result.config}")[:220]
    return f"{head}: {result.reason}"[:220]


def run_cases(cases, objects: dict, skipped: dict, wanted, tuner: Tuner, settings: SparseBenchSettings, *,
              console=None, progress: str | bool = "auto", trace=None) -> tuple[list[PathResult], bool]:
    """Measure every wanted path on every case: (results, interrupted). ``objects``: name -> GemmPath;
    ``skipped``: name -> why it cannot run here; ``progress``: a :data:`PROGRESS_MODES` mode (True: auto);
    ``trace``: a running :class:`~vkcoop.bench.clocks.ClockTrace`, whose window over each measurement becomes
    the result's ``clocks``."""
    results: list[PathResult] = []
    try:
        with RunProgress(len(cases) * len(wanted), progress, console=console, title="bench sparse") as shown:
            tuner.count_tunings([objects[n] for n in wanted if n in objects], cases)
            for problem in cases:
                shown.step(f"{problem.label}: inputs")
                started = time.perf_counter()
                operands = GemmOperands.make(problem)
                shown.note(f"{problem.label}: inputs prepared in {time.perf_counter() - started:.1f} s")
                for name in wanted:
                    shown.step(f"{problem.label}: {name}")
                    if name in objects:
                        began = time.monotonic()
                        results.append(_measure(objects[name], operands, tuner, shown, settings))
                        if trace is not None and results[-1].status == "ok":
                            results[-1].clocks = trace.window(began, time.monotonic())
                    else:
                        results.append(path_result(name, problem, "skipped", skipped[name]))
                    shown.finished(summary_line(results[-1]))
    except KeyboardInterrupt:
        return results, True    # report what was measured
    return results, False


def _start_searcher(objects: dict, cases, tuner: Tuner):
    """The run's search process, started now (torch loads in it while the inputs are made) when some library
    path will search on some case; None when none will. Every library path is handed it."""
    library = [path for path in objects.values() if getattr(path, "always_search", False)]
    searching = [path.name for path in library
                 if any(tuner.needs_search(path, case) for case in cases if path.supports(case)[0])]
    if not searching:
        return None
    from ..cuda.isolated import SearchProcess
    from ..gemm import WARMUP_SECONDS

    searcher = SearchProcess(warmup_seconds=WARMUP_SECONDS, paths=searching)
    searcher.start()
    for path in library:
        path.searcher = searcher
    return searcher


def kernel_sources(wanted) -> set[str]:
    """The hand-written kernels' sources (``kernels/<source>.cu``) the CUDA paths of ``wanted`` launch."""
    from ..cuda.mma_sync_paths import PATH_TYPES
    from ..cuda.paths import PATH_CLASSES

    kernels = [PATH_CLASSES.get(name) or getattr(PATH_TYPES.get(name), "kernel_class", None) for name in wanted]
    return {getattr(kernel, "source", None) for kernel in kernels} - {None}


def _prepare_cuda(wanted) -> None:
    """Start compiling the hand-written CUDA kernels the run will launch, first thing (one nvcc per source, in the
    background, while the devices are opened, the Vulkan pipelines created and the inputs made); their first launch
    waits for its own. On a fresh H100 mma_sp.cu took about 25 s, and started later the first case waited 14 s."""
    if not any(name in CUDA_PATHS for name in wanted) or not cuda_status()[0]:
        return      # no CUDA here: its paths are skipped, with their reason, later
    from ..cuda import build

    if "torch-semi-structured" in wanted:
        from ..cuda.baselines import warm_semi_structured
        warm_semi_structured()
    sources = kernel_sources(wanted)
    if sources and build.find_nvcc() is not None:
        build.compile_in_background(sorted(sources))


def _prepare_vulkan(available: "_Paths", wanted, cases, tuner: Tuner, console=None) -> None:
    """Create up front, on several threads, the kernels (pipelines) each Vulkan path will time on each case from
    its cached or seed configuration (a tuning's candidates are created as they are tried)."""
    if available.vulkan is None:
        return
    from .. import vk

    makers = {}
    for path in (available.objects[n] for n in wanted if n in available.objects and n in VULKAN_PATHS):
        for problem in cases:
            if not path.supports(problem)[0] or tuner.needs_tuning(path, problem):
                continue
            for config in tuner.plan(path, problem).configs[:1]:
                resolved = path._for_problem(config, problem)
                makers[(path.name, problem.dtype, resolved)] = (
                    lambda path=path, dtype=problem.dtype, resolved=resolved: path.kernel(dtype, resolved))
    started = time.perf_counter()
    failed = sum(isinstance(r, Exception) for r in vk.create_concurrently(makers.values()))
    if console is not None and makers:
        console.log(f"Vulkan kernels of the run created in {time.perf_counter() - started:.1f} s "
                    f"({len(makers)} kernels{f', {failed} failed: their paths report why' if failed else ''})")


def _traced_uuid(available: _Paths) -> str:
    """The UUID of the GPU the run measures (Vulkan's, else CUDA's), for the clock trace."""
    for api in ("vulkan", "cuda"):
        identity = available.identities.get(api)
        if identity is not None and identity.uuid:
            return identity.uuid
    return ""


def _environment(available: _Paths) -> dict:
    """Where the run ran: the devices each API reports, why an API's paths are skipped, the CUDA paths' cap."""
    from . import report

    environment = report.environment(available.vulkan.name if available.vulkan else None,
                                     available.cuda_reason if available.cuda_ok else None)
    environment.update(vulkan_skip_reason=available.skipped.get(VULKAN_PATHS[0]),
                       cuda_skip_reason=None if available.cuda_ok else available.cuda_reason or None,
                       devices={api: i.to_dict() for api, i in available.identities.items() if i},
                       sm_count=available.sm_count,
                       buffer_robustness=available.vulkan.device.buffer_robustness if available.vulkan else None,
                       **_cuda_environment(available.objects.values()))
    return environment


def run_sparse_bench(settings: SparseBenchSettings = SparseBenchSettings(), *, console=None,
                     progress: str | bool = "auto", cache: TuningCache | None = None) -> BenchResult:
    """Run the comparison ``settings`` describe and return every result (printing and files are the caller's:
    :mod:`.report`). ``progress``: :data:`PROGRESS_MODES` (:mod:`vkcoop.progress`); ``cache``: the tuning cache
    (default: the user's). Bad settings raise an InputError before any GPU work. Which paths can run here is decided
    first, from the devices alone; one that cannot is "skipped" with the reason, and where none can, no input is
    made. A path that fails its check is "failed" and not timed. With ``settings.ceilings``, ``vkcoop bench peak``'s ceilings are measured afterwards in this process and set each
    result's ``ratio_own_ceiling`` (:mod:`vkcoop.bench.roofline`).
    """
    progress = progress_mode(progress)
    if progress not in PROGRESS_MODES:
        raise InputError(f"--progress {progress!r}: choose from {', '.join(PROGRESS_MODES)}")
    settings = settings.resolved()
    cases = settings.cases()
    _prepare_cuda(settings.paths)
    available = _Paths(settings.paths, settings.dtypes, settings.device, settings.validate)
    environment = _environment(available)
    environment["dtypes"] = {dtype: bench_type(dtype).to_dict() for dtype in settings.dtypes}
    if not available.objects:     # nothing can run here: make no inputs, start no search
        available.close()
        return BenchResult([path_result(name, problem, "skipped", available.skipped[name])
                            for problem in cases for name in settings.paths], environment, settings)
    cache = cache or TuningCache(log=console.log if console is not None else None)
    tuner = Tuner(cache, available.identities, tune=settings.tune, retune=settings.retune,
                  budget=settings.tune_budget_s, search_budget=settings.search_budget_s, search_depth=settings.search)
    searcher = None
    try:
        searcher = _start_searcher(available.objects, cases, tuner)
        _prepare_vulkan(available, settings.paths, cases, tuner, console if progress != "none" else None)
        trace = ClockTrace.open(_traced_uuid(available)) if settings.clock_trace else \
            ClockTrace(reason="no clock samples: --no-clock-trace")
        with trace:
            results, interrupted = run_cases(cases, available.objects, available.skipped, settings.paths, tuner,
                                             settings, console=console, progress=progress, trace=trace)
        environment["clocks"] = {"interval_s": trace.interval_s, "max_mem_mhz": trace.max_mem_mhz,
                                 "reason": trace.reason}
    finally:
        if searcher is not None:
            searcher.close()
        available.close()
    environment["tuning"] = {"cache_dir": str(cache.root if cache else cache_dir()), "messages": cache.messages,
                             "stored": sorted(set(tuner.stored))}
    environment["search_processes"] = searcher.started if searcher is not None else 0
    add_ratios(results, settings.baseline)
    if settings.ceilings and not interrupted:
        from .peak import ceilings as measure_ceilings
        from .roofline import add_ceiling_ratios
        environment["ceilings"] = measure_ceilings(device=settings.device)
        add_ceiling_ratios(results, environment["ceilings"])
    return BenchResult(results, environment, settings, interrupted)
