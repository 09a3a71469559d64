"""``vkcoop bench sparse``: every 2:4 and dense GEMM path on the same inputs, in one process.

Paths (fp16 or bf16 in, fp32 accumulation):

=====================  ========  =================================================================
name                   API       what
=====================  ========  =================================================================
vk-coopmat2-dense      Vulkan    workgroup-scope coopmat2 GEMM on the pruned dense A
vk-coopmat2-2:4        Vulkan    the same with A loaded from the 2:4 format by a decode function
vk-khr-subgroup        Vulkan    subgroup-scope KHR coopmat GEMM through shared memory
cuda-mma.sp            CUDA      hand-written ``mma.sp`` kernel (vkcoop.cuda.MmaSpGemm)
cuda-wgmma.sp          CUDA      hand-written ``wgmma.mma_async.sp`` kernel (vkcoop.cuda.WgmmaSpGemm)
cuSPARSELt             CUDA      torch ``_cslt_sparse_mm`` after its algorithm search
cuBLAS                 CUDA      ``torch.mm`` on the pruned dense A
=====================  ========  =================================================================

Every path is a :class:`vkcoop.gemm.GemmPath` and goes through one loop (:func:`vkcoop.bench.measure.measure_path`):
the inputs of a case are made once (:meth:`vkcoop.gemm.GemmOperands.make`: multiples of 1/8, A pruned 2:4, so
any fp32 accumulation is exact), each path is checked on a sample of rows that includes the first and last
ones (a path that fails is reported as failed and never timed), then ``warmup`` runs and the median of ``iters``
timed runs (Vulkan: GPU timestamps; CUDA: CUDA events), optionally with an L2 flush before each. Throughput is
dense-equivalent: 2*M*N*K / median time.
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass

from ..gemm import DTYPES
from ..gemm.path import GemmOperands, GemmProblem
from .measure import PathResult, measure_path, path_result

PATH_NAMES = ("vk-coopmat2-dense", "vk-coopmat2-2:4", "vk-khr-subgroup", "cuda-mma.sp", "cuda-wgmma.sp",
              "cuSPARSELt", "cuBLAS")
VULKAN_PATHS = PATH_NAMES[:3]
CUDA_PATHS = PATH_NAMES[3:]
SHAPES = ("square", "llm")
#: N of the LLM-like shapes: a batch of tokens times a weight matrix (memory-bound: A dominates the traffic).
LLM_TOKENS = 32
BASELINES = (("cuBLAS", "ratio_cublas"), ("cuSPARSELt", "ratio_cusparselt"))


def make_cases(dtypes, sizes, shapes, llm_tokens: int = LLM_TOKENS) -> list[GemmProblem]:
    cases = []
    for dtype in dtypes:
        if dtype not in DTYPES:
            raise ValueError(f"--dtype {dtype!r}: choose from {', '.join(DTYPES)}")
        for shape in shapes:
            if shape not in SHAPES:
                raise ValueError(f"--shapes {shape!r}: choose from {', '.join(SHAPES)}")
            for size in sizes:
                size = int(size)
                if size <= 0 or size % 64:
                    raise ValueError(f"--sizes {size}: sizes must be positive multiples of 64")
                n = size if shape == "square" else llm_tokens
                cases.append(GemmProblem(dtype, shape, size, n, size))
    return cases


def cuda_status() -> tuple[bool, str]:
    try:
        from .. import cuda
    except Exception as error:  # noqa: BLE001 - any import failure means "not here"
        return False, f"vkcoop.cuda cannot be imported: {type(error).__name__}: {error}"
    try:
        return cuda.available()
    except Exception as error:  # noqa: BLE001
        return False, f"vkcoop.cuda.available() failed: {error}"


def add_ratios(results: list[PathResult]) -> None:
    """Each result's throughput over the cuBLAS and cuSPARSELt results of the same case."""
    by_case = {}
    for r in results:
        by_case.setdefault(r.case, {})[r.path] = r
    for paths in by_case.values():
        for r in paths.values():
            if r.tflops is None:
                continue
            for baseline, attribute in BASELINES:
                base = paths.get(baseline)
                if base is not None and base.tflops:
                    setattr(r, attribute, r.tflops / base.tflops)


@dataclass
class BenchResult:
    results: list
    environment: dict
    settings: dict
    interrupted: bool = False     # Ctrl-C stopped the run: ``results`` holds what was measured

    @property
    def failed(self) -> list:
        return [r for r in self.results if r.status in ("failed", "error")]

    def to_dict(self) -> dict:
        return {"environment": self.environment, "settings": self.settings, "interrupted": self.interrupted,
                "results": [asdict(r) for r in self.results]}


class _Paths:
    """The GemmPath objects a run needs, or for each unavailable path the reason it is skipped."""

    def __init__(self, wanted, dtypes, device, validate):
        self.objects, self.skipped, self.vulkan = {}, {}, None
        if any(p in VULKAN_PATHS for p in wanted):
            try:
                from ..gemm.paths import VulkanDevicePaths
                self.vulkan = VulkanDevicePaths(dtypes, device=device, validate=validate)
                self.objects.update({p.name: p for p in self.vulkan.paths})
            except Exception as error:  # noqa: BLE001 - no Vulkan / no coopmat2: skip those paths, say why
                self.skipped.update({p: f"{type(error).__name__}: {error}" for p in VULKAN_PATHS})
        self.cuda_ok, self.cuda_reason = cuda_status() if any(p in CUDA_PATHS for p in wanted) else (False, "")
        if self.cuda_ok:
            from ..cuda.paths import cuda_paths
            self.objects.update({p.name: p for p in cuda_paths([p for p in wanted if p in CUDA_PATHS])})
        else:
            self.skipped.update({p: self.cuda_reason for p in CUDA_PATHS})

    def close(self):
        for path in self.objects.values():
            if self.vulkan is None or path not in self.vulkan.paths:
                path.close()
        if self.vulkan is not None:
            self.vulkan.close()


def _check_settings(iters, warmup, paths) -> list[str]:
    if iters < 1 or warmup < 0:
        raise ValueError(f"--iters must be >= 1 and --warmup >= 0 (got {iters}, {warmup})")
    wanted = list(PATH_NAMES) if paths is None else list(paths)
    unknown = [p for p in wanted if p not in PATH_NAMES]
    if unknown:
        raise ValueError(f"unknown path(s) {', '.join(unknown)}; choose from {', '.join(PATH_NAMES)}")
    return wanted


def run_sparse_bench(*, dtypes=("fp16", "bf16"), sizes=(4096, 8192), shapes=("square", "llm"), iters: int = 20,
                     warmup: int = 5, flush_l2: bool = False, paths=None, tune: bool = False,
                     llm_tokens: int = LLM_TOKENS, device=None, validate: bool = False, console=None,
                     progress: bool = True) -> BenchResult:
    """Run the comparison and return every result (printing and files are the caller's: :mod:`.report`).

    ``paths``: a subset of :data:`PATH_NAMES` (default all). ``tune``: try every Vulkan launch configuration of
    the shape class and keep the fastest (each try is recorded). Bad arguments raise ValueError before any GPU
    work. A path that cannot run here is "skipped" with the reason; one that fails its check is "failed" and not
    timed.
    """
    from . import report

    wanted = _check_settings(iters, warmup, paths)
    cases = make_cases(dtypes, sizes, shapes, llm_tokens)
    settings = {"dtypes": list(dtypes), "sizes": [int(s) for s in sizes], "shapes": list(shapes), "iters": iters,
                "warmup": warmup, "flush_l2": flush_l2, "tune": tune, "llm_tokens": llm_tokens, "paths": wanted}
    available = _Paths(wanted, dtypes, device, validate)
    environment = report.environment(available.vulkan.name if available.vulkan else None,
                                     available.cuda_reason if available.cuda_ok else None)
    environment["vulkan_skip_reason"] = available.skipped.get(VULKAN_PATHS[0])
    environment["cuda_skip_reason"] = None if available.cuda_ok else available.cuda_reason or None
    results: list[PathResult] = []
    interrupted = False
    try:
        with report.progress_bar(console, enabled=progress) as bar:
            task = bar.add_task("bench sparse", total=len(cases) * len(wanted))
            for problem in cases:
                bar.update(task, description=f"{problem.label}: inputs")
                started = time.perf_counter()
                operands = GemmOperands.make(problem)
                if progress and console is not None:
                    console.log(f"{problem.label}: inputs prepared in {time.perf_counter() - started:.1f} s")
                for name in wanted:
                    bar.update(task, description=f"{problem.label}: {name}")
                    if name in available.objects:
                        results.append(measure_path(available.objects[name], operands, iters=iters, warmup=warmup,
                                                    flush_l2=flush_l2, tune=tune))
                    else:
                        results.append(path_result(name, problem, "skipped", available.skipped[name]))
                    bar.advance(task)
    except KeyboardInterrupt:
        interrupted = True   # report what was measured
    finally:
        available.close()
    add_ratios(results)
    return BenchResult(results, environment, settings, interrupted)
