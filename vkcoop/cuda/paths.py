"""The CUDA GEMM paths as :class:`vkcoop.gemm.path.GemmPath` objects, sharing one upload of each problem.

* The hand-written kernels (``cuda-mma.sp``, ``cuda-wgmma.sp``) offer their configuration keys
  (``MmaSpGemm.CONFIGS``...): not tuning, the ``auto`` choice (the H200-measured ``AUTO_ORDER``); tuning, every
  key that divides the problem and fits the GPU's shared memory, so ``vkcoop.bench.tuning`` can cache a key per
  tuning class, as for the Vulkan paths.
* The library baselines search what the library offers on every case (``always_search``), in stages that
  ``refine`` from what was measured: cuSPARSELt (its own search per B layout and result layout, then every
  algorithm id of the best layout, then split-K for the two best algorithms, then a CUDA-graph replay of the
  winner), torch's semi-structured tensor (plain and graph), cuBLAS (default, cuBLASLt, column-major B,
  ``_scaled_mm``, then a graph replay of the winner).

Timing follows the Vulkan paths' warm-up rule: at least ``warmup`` untimed runs lasting at least
``vkcoop.gemm.WARMUP_SECONDS`` together, then CUDA events around each timed run.
"""
from __future__ import annotations

import numpy as np

from ..gemm import WARMUP_SECONDS
from ..gemm.path import GemmOperands, GemmProblem
from ..gemm.types import DTYPES
from .baselines import BlasConfig, CsltConfig, CublasGemm, CuSparseLtGemm, SemiStructuredGemm
from .gemm import DeviceSparse, MmaSpGemm, WgmmaSpGemm, to_torch
from .timing import time_cuda

#: Benchmark path name -> the class behind it.
PATH_CLASSES = {"cuda-mma.sp": MmaSpGemm, "cuda-wgmma.sp": WgmmaSpGemm, "cuSPARSELt": CuSparseLtGemm,
                "torch-semi-structured": SemiStructuredGemm, "cuBLAS": CublasGemm}
#: When cuSPARSELt does not report its largest algorithm id, ids up to this are tried.
FALLBACK_MAX_ALG_ID = 15
SPLIT_K_CHOICES = (2, 4, 8)
SPLIT_K_MODES = (1, 2)


class _BoundCuda:
    def __init__(self, op, config: str, warmup_seconds: float):
        self.op, self.config, self.warmup_seconds = op, config, warmup_seconds

    def output_rows(self, rows: np.ndarray) -> np.ndarray:
        import torch

        output = self.op()
        torch.cuda.synchronize()
        sampled = output.index_select(0, torch.as_tensor(rows, device=output.device)).float().cpu().numpy()
        dtype = {torch.float16: DTYPES["fp16"], torch.bfloat16: DTYPES["bf16"]}.get(output.dtype, np.float32)
        return sampled.astype(dtype)

    def time(self, iterations: int, warmup: int, flush_l2: bool) -> list[float]:
        timing = time_cuda(self.op, warmup=warmup, iters=iterations, flush_l2=flush_l2,
                           warmup_seconds=self.warmup_seconds)
        return [t * 1e-3 for t in timing.times_ms]

    def release(self) -> None:
        self.op = None


def _torch_dtype(problem: GemmProblem):
    import torch

    return torch.float16 if problem.dtype == "fp16" else torch.bfloat16


class CudaPath:
    """One CUDA path (a class of :mod:`vkcoop.cuda.gemm` or :mod:`vkcoop.cuda.baselines`) as a GemmPath."""
    api = "cuda"

    def __init__(self, name: str, uploads: "CudaUploads", warmup_seconds: float = WARMUP_SECONDS):
        self.name, self.uploads, self.warmup_seconds = name, uploads, warmup_seconds
        self.runner = PATH_CLASSES[name]()

    def supports(self, problem: GemmProblem) -> tuple[bool, str]:
        return self.runner.supports(problem.m, problem.n, problem.k, _torch_dtype(problem))

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


def _best(tried: list, where=lambda label: True) -> list[dict]:
    timed = [e for e in tried if e.get("status") == "ok" and where(e.get("config", ""))]
    return sorted(timed, key=lambda e: e["median_ms"])


class CuSparseLtPath(CudaPath):
    """cuSPARSELt, searched on every case in stages (see the module docstring)."""
    always_search = True

    def __init__(self, name, uploads, warmup_seconds: float = WARMUP_SECONDS):
        super().__init__(name, uploads, warmup_seconds)
        self._by_label: dict[str, CsltConfig] = {}
        self._stage: dict[GemmProblem, int] = {}

    def _named(self, configs) -> list[CsltConfig]:
        configs = list(configs)
        self._by_label.update({c.label(): c for c in configs})
        return configs

    def configs(self, problem: GemmProblem, tune: bool) -> list:
        self._stage[problem] = 0
        layouts = [CsltConfig(transpose_result=t, b_column_major=c) for c in (False, True) for t in (False, True)]
        return self._named(layouts + [CsltConfig(alg_id=0)])

    def refine(self, problem: GemmProblem, tried: list) -> list:
        stage = self._stage.get(problem, 0) + 1
        self._stage[problem] = stage
        best = _best(tried)
        if not best:
            return []
        top = self._by_label.get(best[0]["config"], CsltConfig())
        if stage == 1:   # every algorithm id with the best layouts
            last = self.runner.max_alg_id if self.runner.max_alg_id is not None else FALLBACK_MAX_ALG_ID
            return self._named(CsltConfig(alg, 1, -1, top.transpose_result, top.b_column_major)
                               for alg in range(last + 1))
        if stage == 2:   # split-K for the two best algorithm ids
            algs = list(dict.fromkeys(self._by_label[e["config"]].alg_id for e in best
                                      if self._by_label.get(e["config"], CsltConfig()).alg_id is not None))[:2]
            return self._named(CsltConfig(alg, split, mode, top.transpose_result, top.b_column_major)
                               for alg in algs for split in SPLIT_K_CHOICES for mode in SPLIT_K_MODES)
        if stage == 3 and not top.graph:   # the winner without torch's per-call host work
            return self._named([CsltConfig(top.alg_id, top.split_k, top.split_k_mode, top.transpose_result,
                                           top.b_column_major, graph=True)])
        return []

    def _bind(self, a, b, config):
        return self.runner.bind(a, b, config)


class SemiStructuredPath(CudaPath):
    always_search = True

    def configs(self, problem: GemmProblem, tune: bool) -> list:
        return ["default", "graph"]

    def _bind(self, a, b, config):
        return self.runner.bind(a, b, config)


class CublasPath(CudaPath):
    always_search = True

    def configs(self, problem: GemmProblem, tune: bool) -> list:
        return [BlasConfig(), BlasConfig(library="cublaslt"), BlasConfig(b_column_major=True),
                BlasConfig(op="scaled_mm"), BlasConfig(op="scaled_mm", b_column_major=True)]

    def refine(self, problem: GemmProblem, tried: list) -> list:
        labels = {c.label(): c for c in self.configs(problem, True)}
        best = _best(tried, lambda label: label in labels)
        if not best or any(e.get("config", "").endswith("graph") for e in tried):
            return []
        top = labels[best[0]["config"]]
        return [BlasConfig(top.op, top.library, top.b_column_major, graph=True)]

    def _bind(self, a, b, config):
        return self.runner.bind(a, b, config)


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
              "torch-semi-structured": SemiStructuredPath, "cuBLAS": CublasPath}


def shared_memory_per_block() -> int | None:
    try:
        import torch

        properties = torch.cuda.get_device_properties(0)
    except Exception:  # noqa: BLE001
        return None
    value = getattr(properties, "shared_memory_per_block_optin", None)
    return int(value) if value else None


def cuda_paths(names, warmup_seconds: float = WARMUP_SECONDS) -> list[CudaPath]:
    """GemmPath objects for the named CUDA paths, sharing one upload per problem."""
    uploads = CudaUploads()
    paths = []
    for name in names:
        if PATH_TYPES[name] is HandWrittenPath:
            paths.append(HandWrittenPath(name, uploads, warmup_seconds, shared_memory_per_block()))
        else:
            paths.append(PATH_TYPES[name](name, uploads, warmup_seconds))
    return paths
