"""cuBLASLt's int8 GEMM (IMMA: s8 x s8 -> s32) through NVIDIA's own Python bindings, ``nvmath.bindings.cublasLt``
(nvmath-python's ``linalg.advanced.Matmul`` takes no int8 operands: "The dtype of operand A (int8) is not
supported").

cuBLASLt is column-major; C = A @ B row-major is computed as its transpose, C^T = B^T A^T, with the operands'
storage read as they lie: B stored [N][K] (column-major [K][N], ``b.t()`` of a contiguous [N][K]) is cuBLASLt's
"A" of K x N, ld K, under operation T; A stored [M][K] row-major is its "B" of K x M, ld K, under operation N; D is
N x M, ld N, which is C row-major [M][N]. That is the TN form cuBLASLt documents for int8 with the regular (COL)
order. B stored row-major [K][N] is passed as N x K, ld N, under operation N (the NN form), so that a run asked for
it gets cuBLASLt's own answer. Compute type CUBLAS_COMPUTE_32I, scale type CUDA_R_32I (alpha 1, beta 0 as int32),
C = D int32.

The algorithms are cuBLASLt's heuristic's (``cublasLtMatmulAlgoGetHeuristic``, up to :data:`HEURISTIC_COUNT`
within :data:`WORKSPACE_BYTES` of workspace); each is timed a few runs with CUDA events and the fastest kept, as
nvmath-python's ``Matmul.autotune`` does for the other types. Every handle, descriptor, layout and preference is
destroyed by :meth:`ImmaMatmul.free` (newest first), or at once when a call in between fails.
"""
from __future__ import annotations

import contextlib

import numpy as np

from .baselines import CUDA_R_8I, CUDA_R_32I, nvmath_bindings
from .gemm import _torch

COMPUTE_32I = 72                     # cublasComputeType_t CUBLAS_COMPUTE_32I
OP_N, OP_T = 0, 1                    # cublasOperation_t
HEURISTIC_COUNT = 8
WORKSPACE_BYTES = 32 << 20
#: Untimed and timed runs of each heuristic algorithm when picking one.
AUTOTUNE_WARMUP, AUTOTUNE_RUNS = 2, 5


def bindings():
    """``nvmath.bindings.cublasLt`` (:func:`nvmath_bindings`)."""
    return nvmath_bindings("cublasLt")


def _set(setter, owner, attribute, value, dtype) -> None:
    data = np.array([value], dtype=dtype)
    setter(owner, attribute, data.ctypes.data, data.itemsize)


class ImmaMatmul:
    """C [M][N] int32 = A [M][K] int8 @ B [K][N] int8 on torch tensors (module docstring); ``__call__`` runs it on
    torch's current stream and returns C."""

    def __init__(self, a, b):
        torch = _torch()
        lt = bindings()
        self.lt, self.stack = lt, contextlib.ExitStack()
        (m, k), n = a.shape, b.shape[1]
        column_b = not b.is_contiguous()
        try:
            self.handle = self._made(lt.create(), lt.destroy)
            self.desc = self._made(lt.matmul_desc_create(COMPUTE_32I, CUDA_R_32I), lt.matmul_desc_destroy)
            _set(lt.matmul_desc_set_attribute, self.desc, lt.MatmulDescAttribute.TRANSA,
                 OP_T if column_b else OP_N, np.int32)
            _set(lt.matmul_desc_set_attribute, self.desc, lt.MatmulDescAttribute.TRANSB, OP_N, np.int32)
            layout = lt.matrix_layout_destroy
            self.first = self._made(lt.matrix_layout_create(CUDA_R_8I, k, n, k) if column_b
                                    else lt.matrix_layout_create(CUDA_R_8I, n, k, n), layout)
            self.second = self._made(lt.matrix_layout_create(CUDA_R_8I, k, m, k), layout)
            self.result = self._made(lt.matrix_layout_create(CUDA_R_32I, n, m, n), layout)
            self.out = torch.empty((m, n), dtype=torch.int32, device="cuda")
            self.workspace = torch.empty((WORKSPACE_BYTES,), dtype=torch.uint8, device="cuda")
            self.scalars = np.array([1, 0], dtype=np.int32)        # alpha, beta (host, the scale type)
            self.operands = (b, a)                                 # cuBLASLt's A and B: kept alive with the op
            self.algorithms = self._heuristic()
            self.picked = self._autotune()
        except BaseException:
            self.free()
            raise
        self.layout = "TN" if column_b else "NN"

    def _made(self, value, destroy):
        self.stack.callback(destroy, value)
        return value

    def _heuristic(self):
        """(results, count): cuBLASLt's heuristic algorithms for this problem, best guess first."""
        lt = self.lt
        preference = self._made(lt.matmul_preference_create(), lt.matmul_preference_destroy)
        _set(lt.matmul_preference_set_attribute, preference, lt.MatmulPreferenceAttribute.MAX_WORKSPACE_BYTES,
             WORKSPACE_BYTES, np.uint64)
        results, count = lt.MatmulHeuristicResult(HEURISTIC_COUNT), np.zeros(1, dtype=np.int32)
        lt.matmul_algo_get_heuristic(self.handle, self.desc, self.first, self.second, self.result, self.result,
                                     preference, HEURISTIC_COUNT, results.ptr, count.ctypes.data)
        if count[0] == 0:
            raise RuntimeError("cublasLtMatmulAlgoGetHeuristic found no int8 algorithm for this layout")
        return [results[index] for index in range(int(count[0]))]

    def _run(self, algorithm) -> None:
        torch = _torch()
        b, a = self.operands
        self.lt.matmul(self.handle, self.desc, self.scalars.ctypes.data, b.data_ptr(), self.first, a.data_ptr(),
                       self.second, self.scalars.ctypes.data + self.scalars.itemsize, self.out.data_ptr(),
                       self.result, self.out.data_ptr(), self.result, algorithm.ptr, self.workspace.data_ptr(),
                       WORKSPACE_BYTES, torch.cuda.current_stream().cuda_stream)

    def _autotune(self) -> int:
        """The index of the fastest heuristic algorithm over :data:`AUTOTUNE_RUNS` runs (the first where one)."""
        torch = _torch()
        if len(self.algorithms) == 1:
            self._run(self.algorithms[0])
            return 0
        times = []
        for algorithm in self.algorithms:
            for _ in range(AUTOTUNE_WARMUP):
                self._run(algorithm)
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(AUTOTUNE_RUNS):
                self._run(algorithm)
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end))
        return int(np.argmin(times))

    def __call__(self):
        self._run(self.algorithms[self.picked])
        return self.out

    def describe(self) -> str:
        return (f"cublasLtMatmul int8 {self.layout} (nvmath.bindings.cublasLt, heuristic algorithm {self.picked} of "
                f"{len(self.algorithms)}, autotuned)")

    def free(self) -> None:
        self.stack.close()
