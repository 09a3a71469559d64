"""The mma.sync and capped paths of ``vkcoop bench sparse``, as :class:`vkcoop.gemm.path.GemmPath` objects:

=================  ===============================================================================================
cuda-mma.sync      the dense mma.sync kernel (:class:`vkcoop.cuda.dense.MmaDenseGemm`) with any of its tiles, up to
                   the block's opt-in shared memory (227 KB on the H100) and with thread-block clusters: what the
                   instruction set costs against wgmma (cuBLAS)
cuda-mma.sync-cap  the same kernel with only the tiles Vulkan's limits admit (:mod:`vkcoop.cuda.vulkan_cap`: shared
                   memory, workgroup size, flexible-dimensions granularity): what the cap costs
cuda-mma.sp-cap    the mma.sp 2:4 kernel (:class:`vkcoop.cuda.gemm.MmaSpGemm`) with only the tiles the same limits
                   admit: the 2:4 rung at Vulkan's cap
=================  ===============================================================================================

They are configured as ``cuda-mma.sp`` is: not tuning, the class's "auto" tile among those the path admits; tuning,
every admitted key that runs the problem, so that ``vkcoop.bench.tuning`` caches a key per tuning class. The capped
paths read the cap once (from the Vulkan driver, else the recorded H100 report) and keep it in ``cap``; the bench
writes it into its JSON environment (:func:`run_environment`).
"""
from __future__ import annotations

from ..gemm import WARMUP_SECONDS
from ..gemm.path import GemmProblem
from .dense import MmaDenseGemm
from .gemm import MmaSpGemm
from .paths import CudaUploads, HandWrittenPath, cuda_paths, shared_memory_per_block
from .vulkan_cap import VulkanCap, read_cap

PATH_NAMES = ("cuda-mma.sync", "cuda-mma.sync-cap", "cuda-mma.sp-cap")
#: A problem's dtype as the kernel classes name it (their ``supports`` takes the name; no torch needed).
KERNEL_DTYPES = {"fp16": "float16", "bf16": "bfloat16"}


class _KeyedPath(HandWrittenPath):
    """A hand-written kernel class whose configurations this path may use are a subset of its keys (``allowed``)."""

    kernel_class: type = MmaDenseGemm
    dense = True

    def __init__(self, name: str, uploads: CudaUploads, warmup_seconds: float = WARMUP_SECONDS,
                 shared_memory: int | None = None, cap: VulkanCap | None = None):
        self.name, self.uploads, self.warmup_seconds = name, uploads, warmup_seconds
        self.shared_memory, self.cap = shared_memory, cap
        self.runner = self.kernel_class()

    def allowed(self, key: str, dtype: str) -> bool:
        config = self.kernel_class.CONFIGS[key]
        smem = getattr(config, "total_smem_bytes", config.smem_bytes)
        if self.shared_memory is not None and smem > self.shared_memory:
            return False
        return self.cap is None or self.cap.admits(config, dtype)[0]

    def _supported_keys(self, problem: GemmProblem) -> list[str]:
        dtype = KERNEL_DTYPES[problem.dtype]
        return [key for key in self.kernel_class.CONFIGS if self.allowed(key, problem.dtype)
                and self.kernel_class(key).supports(problem.m, problem.n, problem.k, dtype)[0]]

    def supports(self, problem: GemmProblem) -> tuple[bool, str]:
        if problem.dtype not in KERNEL_DTYPES:
            return False, f"{self.kernel_class.name} takes {', '.join(KERNEL_DTYPES)}, not {problem.dtype}"
        keys = self._supported_keys(problem)
        if keys:
            return True, f"{len(keys)} tiles, auto {self._auto_key(problem)}"
        why = self.kernel_class().supports(problem.m, problem.n, problem.k, KERNEL_DTYPES[problem.dtype])[1]
        limits = f" within {self.cap.device}'s Vulkan limits" if self.cap else ""
        return False, f"no {self.kernel_class.name} tile{limits} runs {problem.label} ({why})"

    def _auto_key(self, problem: GemmProblem) -> str:
        keys = self._supported_keys(problem)
        return self._auto_from(problem, keys) or (keys[0] if keys else "")

    def _auto_from(self, problem: GemmProblem, keys: list[str]) -> str | None:
        return self.kernel_class.auto_key(problem.n, keys)

    def _bind(self, a, b, config):
        return self.kernel_class(config).bind(a.dense if self.dense else a, b)


class MmaSyncPath(_KeyedPath):
    """``cuda-mma.sync``: every tile of the dense kernel that fits the block's shared memory."""


class MmaSyncCapPath(_KeyedPath):
    """``cuda-mma.sync-cap``: the dense kernel's tiles within Vulkan's limits."""

    def _auto_from(self, problem, keys):
        return self.kernel_class.auto_key(problem.n, keys, self.kernel_class.CAP_AUTO_ORDER)


class MmaSpCapPath(_KeyedPath):
    """``cuda-mma.sp-cap``: the mma.sp kernel's tiles within Vulkan's limits (A in the 2:4 format)."""

    kernel_class = MmaSpGemm
    dense = False

    def _auto_from(self, problem, keys):
        return next((key for key in MmaSpGemm.CAP_AUTO_ORDER if key in keys), None)


PATH_TYPES = {"cuda-mma.sync": MmaSyncPath, "cuda-mma.sync-cap": MmaSyncCapPath, "cuda-mma.sp-cap": MmaSpCapPath}


def all_cuda_paths(names, warmup_seconds: float = WARMUP_SECONDS, cap: VulkanCap | None = None, device=None) -> list:
    """The CUDA paths of ``names`` (those of :func:`vkcoop.cuda.paths.cuda_paths` and of :data:`PATH_NAMES`) in that
    order, sharing one upload per problem; the capped ones at ``cap`` (default: :func:`read_cap` of the Vulkan
    ``device``)."""
    uploads = CudaUploads()
    names = list(names)
    theirs = {p.name: p for p in cuda_paths([n for n in names if n not in PATH_TYPES], warmup_seconds,
                                            uploads=uploads)}
    shared = shared_memory_per_block()
    if cap is None and any(n.endswith("-cap") for n in names):
        cap = read_cap(device)
    ours = {n: PATH_TYPES[n](n, uploads, warmup_seconds, shared, cap if n.endswith("-cap") else None)
            for n in names if n in PATH_TYPES}
    return [theirs.get(n) or ours[n] for n in names]


def run_environment(paths) -> dict:
    """What a bench run's JSON records of these paths: the Vulkan cap the capped ones ran at, if any."""
    cap = next((p.cap for p in paths if getattr(p, "cap", None) is not None), None)
    return {"vulkan_cap": cap.to_dict()} if cap is not None else {}
