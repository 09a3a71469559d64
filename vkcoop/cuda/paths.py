"""The CUDA GEMM paths as :class:`vkcoop.gemm.path.GemmPath` objects, sharing one upload of each problem."""
from __future__ import annotations

import numpy as np

from ..gemm.path import GemmOperands, GemmProblem
from ..gemm.types import DTYPES
from .gemm import CublasGemm, CuSparseLtGemm, DeviceSparse, MmaSpGemm, WgmmaSpGemm, to_torch
from .timing import time_cuda

#: Benchmark path name -> the class behind it.
PATH_CLASSES = {"cuda-mma.sp": MmaSpGemm, "cuda-wgmma.sp": WgmmaSpGemm, "cuSPARSELt": CuSparseLtGemm,
                "cuBLAS": CublasGemm}


class _BoundCuda:
    def __init__(self, op, config: str):
        self.op, self.config = op, config

    def output_rows(self, rows: np.ndarray) -> np.ndarray:
        import torch

        output = self.op()
        torch.cuda.synchronize()
        sampled = output.index_select(0, torch.as_tensor(rows, device=output.device)).float().cpu().numpy()
        dtype = {torch.float16: DTYPES["fp16"], torch.bfloat16: DTYPES["bf16"]}.get(output.dtype, np.float32)
        return sampled.astype(dtype)

    def time(self, iterations: int, warmup: int, flush_l2: bool) -> list[float]:
        timing = time_cuda(self.op, warmup=warmup, iters=iterations, flush_l2=flush_l2)
        return [t * 1e-3 for t in timing.times_ms]

    def release(self) -> None:
        self.op = None


class CudaPath:
    """One CUDA path (a kernel class of :mod:`vkcoop.cuda.gemm`) behind the GemmPath protocol."""

    def __init__(self, name: str, uploads: "CudaUploads"):
        self.name, self.uploads = name, uploads
        self.runner = PATH_CLASSES[name]()

    def supports(self, problem: GemmProblem) -> tuple[bool, str]:
        import torch

        dtype = torch.float16 if problem.dtype == "fp16" else torch.bfloat16
        return self.runner.supports(problem.m, problem.n, problem.k, dtype)

    def configs(self, problem: GemmProblem, tune: bool) -> list:
        return [self.runner.config if hasattr(self.runner, "config") else "default"]

    def bind(self, operands: GemmOperands, config) -> _BoundCuda:
        a, b = self.uploads.of(operands)
        op = self.runner.bind(a, b)
        return _BoundCuda(op, getattr(op, "description", "") or str(config))

    def close(self) -> None:
        self.uploads.clear()


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


def cuda_paths(names) -> list[CudaPath]:
    """GemmPath objects for the named CUDA paths, sharing one upload per problem."""
    uploads = CudaUploads()
    return [CudaPath(name, uploads) for name in names]
