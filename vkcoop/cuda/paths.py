"""The CUDA GEMM paths as :class:`vkcoop.gemm.path.GemmPath` objects, sharing one upload of each problem.

* The hand-written kernels (``cuda-mma.sp``, ``cuda-wgmma.sp``) offer their configuration keys
  (``MmaSpGemm.CONFIGS``...): not tuning, the ``auto`` choice (the H200-measured ``AUTO_ORDER``); tuning, every
  key that divides the problem and fits the GPU's shared memory, so ``vkcoop.bench.tuning`` can cache a key per
  tuning class, as for the Vulkan paths.
* The library baselines (:class:`LibraryPath`) search what the library offers on every case (``always_search``)
  in a child process (:mod:`vkcoop.cuda.isolated`), in stages that ``next_candidates`` derives from what the
  child reported: cuSPARSELt through torch (``cuSPARSELt``) and through nvmath-python (``cuSPARSELt-nvmath``):
  its own search per B layout and result layout and algorithm 0, then every algorithm id of the best layout
  (:func:`alg_ids`: ``range(max_alg_id)``), then split-K 2/4/8 in both modes for the two best algorithms, then
  a CUDA-graph replay of the winner; torch's semi-structured tensor (plain and graph); cuBLAS (torch.mm under
  the default and cuBLASLt backends, column-major B, nvmath-python's Matmul where installed,
  then a graph replay of the winner). Only the fastest few that ran and checked correctly in the child are timed
  in the measuring process (``search``, called by ``vkcoop.bench.measure.measure_path``).

Timing follows the Vulkan paths' warm-up rule: at least ``warmup`` untimed runs lasting at least
``vkcoop.gemm.WARMUP_SECONDS`` together, then CUDA events around each timed run. A bound op's ``close()``
(nvmath's descriptors and plans) runs when the measurement releases it.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from ..gemm import WARMUP_SECONDS
from ..gemm.dtypes import HALF_DTYPES
from ..gemm.path import GemmOperands, GemmProblem
from ..gemm.types import DTYPES
from . import isolated
from .baselines import BlasConfig, CsltConfig, nvmath_version
from .gemm import DeviceSparse, MmaSpGemm, WgmmaSpGemm, to_torch
from .timing import time_cuda
from .typed_libraries import (TORCH_NAMES, TypedCublasGemm, TypedCuSparseLtGemm, TypedNvmathCuSparseLtGemm,
                              TypedSemiStructuredGemm, blas_configs, cslt_configs)

#: Benchmark path name -> the class behind it (the libraries' runners take every type they have:
#: :mod:`.typed_libraries`).
PATH_CLASSES = {"cuda-mma.sp": MmaSpGemm, "cuda-wgmma.sp": WgmmaSpGemm, "cuSPARSELt": TypedCuSparseLtGemm,
                "cuSPARSELt-nvmath": TypedNvmathCuSparseLtGemm, "torch-semi-structured": TypedSemiStructuredGemm,
                "cuBLAS": TypedCublasGemm}
#: When cuSPARSELt does not report its algorithm id limit, this many ids (0 .. 15) are tried.
FALLBACK_ALG_ID_COUNT = 16
SPLIT_K_CHOICES = (2, 4, 8)
SPLIT_K_MODES = (1, 2)


class _BoundCuda:
    def __init__(self, op, config: str, warmup_seconds: float):
        self.op, self.config, self.warmup_seconds = op, config, warmup_seconds

    def output_rows(self, rows: np.ndarray) -> np.ndarray:
        """C's ``rows`` in the result's own type: fp16, bf16, int32 (exact), else fp32."""
        import torch

        output = self.op()
        torch.cuda.synchronize()
        sampled = output.index_select(0, torch.as_tensor(rows, device=output.device))
        if output.dtype == torch.int32:
            return sampled.cpu().numpy().astype(np.int32)
        dtype = {torch.float16: DTYPES["fp16"], torch.bfloat16: DTYPES["bf16"]}.get(output.dtype, np.float32)
        return sampled.float().cpu().numpy().astype(dtype)

    def time(self, iterations: int, warmup: int, flush_l2: bool) -> list[float]:
        timing = time_cuda(self.op, warmup=warmup, iters=iterations, flush_l2=flush_l2,
                           warmup_seconds=self.warmup_seconds)
        return [t * 1e-3 for t in timing.times_ms]

    def release(self) -> None:
        op, self.op = self.op, None
        close = getattr(op, "close", None)
        if close is not None:
            close()


def _torch_dtype(problem: GemmProblem):
    """The torch dtype of a problem's operands (tf32's are float32)."""
    import torch

    return getattr(torch, TORCH_NAMES[problem.dtype])


class CudaPath:
    """One CUDA path (a class of :mod:`vkcoop.cuda.gemm` or :mod:`vkcoop.cuda.baselines`) as a GemmPath."""
    api = "cuda"

    def __init__(self, name: str, uploads: "CudaUploads", warmup_seconds: float = WARMUP_SECONDS):
        self.name, self.uploads, self.warmup_seconds = name, uploads, warmup_seconds
        self.runner = PATH_CLASSES[name]()

    def supports(self, problem: GemmProblem) -> tuple[bool, str]:
        ok, why = self.runner.supports(problem.m, problem.n, problem.k, _torch_dtype(problem))
        if ok or problem.dtype in HALF_DTYPES:
            return ok, why
        return False, f"{problem.dtype}: {why}"      # the runner names the torch type (tf32's is float32)

    def configs(self, problem: GemmProblem, tune: bool) -> list:
        return ["default"]

    def _bind(self, a, b, config):
        return self.runner.bind(a, b, None if config == "default" else config)

    def bind(self, operands: GemmOperands, config) -> _BoundCuda:
        a, b = self.uploads.of(operands)
        op = self._bind(a, b, config)
        return _BoundCuda(op, getattr(op, "description", "") or str(config), self.warmup_seconds)

    def close(self) -> None:
        self.uploads.clear()
        close = getattr(self.runner, "close", None)
        if close is not None:
            close()


class HandWrittenPath(CudaPath):
    """mma.sp / wgmma.sp: a configuration is a key of the kernel class's ``CONFIGS``."""

    def __init__(self, name, uploads, warmup_seconds: float = WARMUP_SECONDS, shared_memory: int | None = None):
        super().__init__(name, uploads, warmup_seconds)
        self.kernel_class = PATH_CLASSES[name]
        self.shared_memory = shared_memory      # per-block opt-in limit; None: not checked

    def _supported_keys(self, problem: GemmProblem) -> list[str]:
        dtype = _torch_dtype(problem)
        keys = []
        for key, config in self.kernel_class.CONFIGS.items():
            if self.shared_memory is not None and config.smem_bytes > self.shared_memory:
                continue
            if self.kernel_class(key).supports(problem.m, problem.n, problem.k, dtype)[0]:
                keys.append(key)
        return keys

    def _auto_key(self, problem: GemmProblem) -> str:
        picked = self.runner._pick(problem.m, problem.n, problem.k)
        return next(key for key, config in self.kernel_class.CONFIGS.items() if config == picked)

    def supports(self, problem: GemmProblem) -> tuple[bool, str]:
        ok, why = super().supports(problem)
        if ok or not self._supported_keys(problem):
            return ok, why
        return True, f"not the auto tile ({why}), but another of {self.kernel_class.name}'s tiles"

    def configs(self, problem: GemmProblem, tune: bool) -> list:
        keys = self._supported_keys(problem)
        auto = self._auto_key(problem)
        ordered = ([auto] if auto in keys else []) + [k for k in keys if k != auto]
        return ordered if tune else ordered[:1]

    def config_from_label(self, label: str, problem: GemmProblem):
        return label if label in self._supported_keys(problem) else None

    def _bind(self, a, b, config):
        return self.kernel_class(config).bind(a, b)


def alg_ids(max_alg_id: int | None) -> range:
    """The cuSPARSELt algorithm ids to try: ``range(max_alg_id)``, exclusive.

    cuSPARSELt documents CUSPARSELT_MATMUL_ALG_CONFIG_MAX_ID as the "algorithm ID limit (query only)" of
    cusparseLtMatmulAlgAttribute_t (https://docs.nvidia.com/cuda/cusparselt/types.html); an older copy of that
    table gives CONFIG_ID's values as "[0, MAX]", which reads as inclusive, so the documents alone do not settle
    it, and neither does the library: on an H100 (torch 2.11, cuSPARSELt 0.8) ``mm_search`` reported 47 at
    4096^3 and 8192x32x8192, and id 47 was refused (once with "internal error when calling cusparseLtMatmul",
    which poisoned the CUDA context; once with "invalid value" at cusparseLtMatmulAlgSetAttribute), while at 256^3
    it reported 27 and id 27 ran. So the limit is treated as a count: ids 0 .. max_alg_id - 1 are never refused,
    at the cost of the limit id on shapes like 256^3. Where the library reports no limit, FALLBACK_ALG_ID_COUNT
    ids are tried (each in the search process, so one it refuses costs nothing else)."""
    return range(FALLBACK_ALG_ID_COUNT if max_alg_id is None else int(max_alg_id))


class LibraryPath(CudaPath):
    """A library baseline: its candidates are tried in a child process first (:mod:`vkcoop.cuda.isolated`): the
    quick ones (``quick_configs``: what the library picks itself), or every stage ``next_candidates`` offers (a
    deep search); the ``keep`` fastest that ran and checked correctly there are the configurations
    ``vkcoop.bench.measure.measure_path`` times in this process (``search``). ``searcher``: the run's
    :class:`vkcoop.cuda.isolated.SearchProcess` (None: each search starts its own)."""
    always_search = True
    keep = 3
    timeout_s = isolated.DEFAULT_TIMEOUT_S

    def __init__(self, name, uploads, warmup_seconds: float = WARMUP_SECONDS):
        super().__init__(name, uploads, warmup_seconds)
        self.searcher: isolated.SearchProcess | None = None
        self.tried: dict = {}      # label -> configuration, of every candidate searched (the library cache's)

    def configs(self, problem: GemmProblem, tune: bool) -> list:
        return ["default"]

    def quick_configs(self, problem: GemmProblem) -> list:
        """What a quick search tries: the library's own choice (default: the first of ``configs``)."""
        return self.configs(problem, True)[:1]

    def next_candidates(self, state: isolated.SearchState) -> list:
        """The next stage's candidates from what the search process reported so far (none: the search ends)."""
        return []

    def search(self, operands: GemmOperands, configs, *, deadline=None, progress=None, staged: bool = True,
               refused: dict | None = None):
        """(the survivors, fastest probe first; every entry of the search) for ``measure_path``."""
        state = isolated.staged_search(self, operands, configs, deadline=deadline, progress=progress,
                                       timeout_s=self.timeout_s, process=self.searcher, staged=staged,
                                       refused=refused)
        self.tried.update(state.configs)
        return state.ranked()[:self.keep], state.record

    def version(self) -> str:
        return self.runner.version()

    def search_info(self) -> dict:
        info = getattr(self.runner, "search_info", None)
        return info() if info is not None else {}

    def _bind(self, a, b, config):
        return self.runner.bind(a, b, None if config == "default" else config)


class CuSparseLtPath(LibraryPath):
    """cuSPARSELt (through torch, or through nvmath-python), searched on every case in stages (see the module
    docstring)."""

    def configs(self, problem: GemmProblem, tune: bool) -> list:
        if problem.dtype not in HALF_DTYPES:
            return cslt_configs(problem.dtype, deep=True)
        layouts = [CsltConfig(transpose_result=t, b_column_major=c) for c in (False, True) for t in (False, True)]
        return layouts + [CsltConfig(alg_id=0)]

    def quick_configs(self, problem: GemmProblem) -> list:
        if problem.dtype not in HALF_DTYPES:   # the 8-bit types start from B column-major (the TN form)
            return cslt_configs(problem.dtype, deep=False)
        return [CsltConfig()]   # cuSPARSELt's own search, as users call it

    def next_candidates(self, state: isolated.SearchState) -> list:
        ranked = [c for c in state.ranked() if isinstance(c, CsltConfig)]
        if not ranked:
            return []
        top = ranked[0]
        if state.stage == 1:   # every algorithm id with the best layout
            return [CsltConfig(alg, 1, -1, top.transpose_result, top.b_column_major)
                    for alg in alg_ids(state.info.get("max_alg_id"))]
        if state.stage == 2:   # split-K for the two best algorithm ids
            algs = list(dict.fromkeys(c.alg_id for c in ranked if c.alg_id is not None))[:2]
            return [CsltConfig(alg, split, mode, top.transpose_result, top.b_column_major)
                    for alg in algs for split in SPLIT_K_CHOICES for mode in SPLIT_K_MODES]
        if state.stage == 3 and not top.graph:   # the winner without the per-call host work
            return [dataclasses.replace(top, graph=True)]
        return []


class SemiStructuredPath(LibraryPath):
    def configs(self, problem: GemmProblem, tune: bool) -> list:
        return ["default", "graph"]


class CublasPath(LibraryPath):
    """cuBLAS: torch.mm (backends, B layouts), torch._scaled_mm, nvmath-python's Matmul where installed; then
    the winner as a CUDA graph. The row reports whichever was fastest, and its label says which."""

    def configs(self, problem: GemmProblem, tune: bool) -> list:
        if problem.dtype not in HALF_DTYPES:
            return blas_configs(problem.dtype, deep=True)
        configs = [BlasConfig(), BlasConfig(library="cublaslt"), BlasConfig(b_column_major=True)]
        if nvmath_version() is not None:
            configs += [BlasConfig(op="nvmath"), BlasConfig(op="nvmath", b_column_major=True)]
        # torch._scaled_mm is not offered: torch 2.11 takes fp8 operands only ("Invalid scaling configuration" for
        # fp16 and bf16 on the H100), and each refusal cost a new search process
        return configs

    def quick_configs(self, problem: GemmProblem) -> list:
        """torch.mm and nvmath-python's autotuned Matmul (cuBLASLt's own heuristics and timing): the Matmul beat
        torch.mm by 11 % at 4096^3 on the H100."""
        if problem.dtype not in HALF_DTYPES:
            return blas_configs(problem.dtype, deep=False)
        return [BlasConfig()] + ([BlasConfig(op="nvmath")] if nvmath_version() is not None else [])

    def next_candidates(self, state: isolated.SearchState) -> list:
        ranked = [c for c in state.ranked() if isinstance(c, BlasConfig)]
        if state.stage != 1 or not ranked or ranked[0].graph:
            return []
        return [dataclasses.replace(ranked[0], graph=True)]


class CudaUploads:
    """The device copies of the problem being measured (one problem at a time)."""

    def __init__(self):
        self._key, self._tensors = None, None

    def of(self, operands: GemmOperands):
        if self._key != id(operands):
            self.clear()
            self._tensors = (DeviceSparse.from_compressed(operands.compressed), to_torch(operands.b))
            self._key = id(operands)
        return self._tensors

    def clear(self) -> None:
        self._key, self._tensors = None, None


PATH_TYPES = {"cuda-mma.sp": HandWrittenPath, "cuda-wgmma.sp": HandWrittenPath, "cuSPARSELt": CuSparseLtPath,
              "cuSPARSELt-nvmath": CuSparseLtPath, "torch-semi-structured": SemiStructuredPath,
              "cuBLAS": CublasPath}


def shared_memory_per_block() -> int | None:
    try:
        import torch

        properties = torch.cuda.get_device_properties(0)
    except Exception:  # noqa: BLE001
        return None
    value = getattr(properties, "shared_memory_per_block_optin", None)
    return int(value) if value else None


def cuda_paths(names, warmup_seconds: float = WARMUP_SECONDS, uploads: "CudaUploads | None" = None) -> list[CudaPath]:
    """GemmPath objects for the named CUDA paths, sharing one upload per problem (``uploads``, or their own)."""
    uploads = uploads or CudaUploads()
    paths = []
    for name in names:
        if PATH_TYPES[name] is HandWrittenPath:
            paths.append(HandWrittenPath(name, uploads, warmup_seconds, shared_memory_per_block()))
        else:
            paths.append(PATH_TYPES[name](name, uploads, warmup_seconds))
    return paths
