"""vkcoop.cuda: the CUDA side of the 2:4 sparse comparison.

All paths read the one shared 2:4 format of :mod:`vkcoop.sparse`.

Python API
----------
``available() -> (bool, reason)``
    Whether the CUDA paths can run here (torch with a CUDA device of compute
    capability 9.0 for the sm_90a cubins, and nvcc or cuda.core/NVRTC to build
    them).  ``reason`` says what is missing, or names the device.

``DeviceSparse.from_compressed(compressed, device="cuda")``
    Upload a :class:`vkcoop.sparse.Compressed2to4` (or, for tf32, a
    :class:`vkcoop.sparse.Compressed1to2`): values, metadata, the per-lane
    metadata reordering the kernels read (done here, once, outside any timing;
    see :mod:`vkcoop.cuda.layout`) and the pruned dense copy the baselines use.

Paths (each: ``supports(M, N, K, dtype) -> (bool, reason)`` and
``bind(a: DeviceSparse, b: torch.Tensor[K][N]) -> op``; ``op()`` runs only the
GEMM and returns C [M][N], in the input dtype for fp16 and bf16):

* :class:`MmaSpGemm` (``config="auto"`` or a key of ``MmaSpGemm.CONFIGS``, e.g.
  ``"256x128k128"``, ``"128x128"``, ``"64x16"``): ``mma.sp::ordered_metadata``
  m16n8k32, cp.async multi-stage pipeline, ldmatrix, selector alternated
  between the k32 steps of a K slice. Skinny problems split K (``...wN``); the
  ``...cs`` keys add the splits of a tile up in a thread-block cluster through
  distributed shared memory, launched with cluster dimensions
  (:func:`vkcoop.cuda.driver.launch`).
* :class:`WgmmaSpGemm` (``config="auto"`` or a key of ``WgmmaSpGemm.CONFIGS``,
  e.g. ``"128x256"``, ``"128x16"``): ``wgmma.mma_async.sp``, TMA loads
  on an mbarrier ring, one producer and two consumer warpgroups.
  ``"auto"`` picks the first tile of ``AUTO_ORDER`` that divides (M, N, K).
  Besides fp16 and bf16 it runs tf32 (float32, A 1:2), float8_e4m3fn and
  float8_e5m2 (C bfloat16), int8 and uint8 (C int32) on the tiles of
  ``AUTO_ORDER`` (:mod:`vkcoop.cuda.wgmma_types`).
* :class:`CuSparseLtGemm`: ``torch._cslt_compress`` + ``_cslt_sparse_mm`` after
  ``torch._C._cusparselt.mm_search`` (algorithm and split-k), all in ``bind``; ``bind(a, b, CsltConfig(...))``
  picks an algorithm id, split-K, transposed result, B layout or CUDA-graph replay
  (:mod:`vkcoop.cuda.baselines`).
* :class:`NvmathCuSparseLtGemm`: cuSPARSELt through nvmath-python (``nvmath.bindings.cusparseLt``, the
  ``cuda`` extra), with whichever libcusparseLt it loads; the same ``CsltConfig`` options
  (:mod:`vkcoop.cuda.cusparselt_nvmath`).
* :class:`SemiStructuredGemm`: ``torch.sparse.to_sparse_semi_structured`` (cuSPARSELt backend) + ``torch.mm``.
* :class:`CublasGemm`: ``torch.mm`` on the pruned dense A; ``bind(a, b, BlasConfig(...))`` for the cuBLASLt
  backend, a column-major B, ``torch._scaled_mm``, nvmath-python's cuBLASLt ``Matmul`` or CUDA-graph replay.
* The bench's library paths take tf32, e4m3, e5m2 and int8 too (:mod:`vkcoop.cuda.typed_libraries`; int8's cuBLAS
  row is cuBLASLt's IMMA through nvmath's bindings, :mod:`vkcoop.cuda.cublaslt_imma`).

The benchmark searches the library paths' options in a child process (:mod:`vkcoop.cuda.isolated`, child
:mod:`vkcoop.cuda.search_child`): a candidate that crashes or poisons the CUDA context is recorded there, and
only those that ran and checked correctly are timed in the measuring process.

Shapes: the hand-written kernels need ``K % 64 == 0`` (128 for the ``k128``
mma.sp tiles and wgmma.sp's 8-bit types, 32 for tf32) and ``M``, ``N`` multiples
of the tile (see ``supports``); mma.sp and the classes above run fp16 and bf16 only (the bench's library runners take
the other types: :mod:`vkcoop.cuda.typed_libraries`).  ``mma_sp_peak_tflops()`` measures the register-only mma.sp
throughput ceiling.  Bad operands raise
:class:`ShapeError` / ``TypeError`` before anything is launched.

``reference(a, b)`` (fp32 matmul of the pruned A), ``compare(c, ref)`` and
``passes(stats, dtype)`` check results; ``time_cuda(op, warmup=10, iters=50,
flush_l2=False) -> Timing`` times with CUDA events (median of ``iters``).

Example::

    from vkcoop import sparse, cuda
    comp = sparse.compress_2to4(a_fp16)                  # numpy, [M][K]
    a = cuda.DeviceSparse.from_compressed(comp)
    op = cuda.WgmmaSpGemm().bind(a, b)                   # b: torch [K][N] on the GPU
    stats = cuda.compare(op(), cuda.reference(a, b))
    t = cuda.time_cuda(op, flush_l2=True); print(t.tflops(M, N, K))
"""
from __future__ import annotations

from .build import KernelBuildError, find_nvcc
from .driver import CudaError
from .baselines import BlasConfig, CsltConfig, CublasGemm, CuSparseLtGemm, SemiStructuredGemm
from .cusparselt_nvmath import NvmathCuSparseLtGemm
from .gemm import (DeviceSparse, MmaSpGemm, ShapeError, WgmmaSpGemm, compare, mma_sp_peak_tflops, passes,
                   reference)
from .timing import Timing, time_cuda

ALL_PATHS = (MmaSpGemm, WgmmaSpGemm, CuSparseLtGemm, CublasGemm)

__all__ = [
    "available", "DeviceSparse", "MmaSpGemm", "WgmmaSpGemm", "CuSparseLtGemm", "NvmathCuSparseLtGemm", "CublasGemm",
    "SemiStructuredGemm", "CsltConfig", "BlasConfig", "ALL_PATHS", "ShapeError", "CudaError", "KernelBuildError",
    "reference", "compare", "passes",
    "time_cuda", "Timing", "mma_sp_peak_tflops",
]


def available() -> tuple[bool, str]:
    """``(True, device description)`` when the CUDA paths can run, else ``(False, why not)``."""
    try:
        import torch
    except ImportError:
        return False, "torch is not installed (pip install vkcoop[cuda])"
    if not torch.cuda.is_available():
        return False, "torch sees no CUDA device"
    major, minor = torch.cuda.get_device_capability()
    if (major, minor) != (9, 0):
        return False, (f"the kernels are built for sm_90a (Hopper); this GPU is sm_{major}{minor}")
    if find_nvcc() is None:
        try:
            import cuda.core  # noqa: F401
        except ImportError:
            return False, "neither nvcc nor cuda.core (NVRTC) is available to build the kernels"
    return True, f"{torch.cuda.get_device_name()} (sm_{major}{minor}, torch {torch.__version__})"
