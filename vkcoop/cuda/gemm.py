"""The CUDA 2:4 paths: hand-written mma.sp and wgmma.sp kernels, cuSPARSELt and cuBLAS.

Every path has the same shape of API::

    path = MmaSpGemm()                      # or WgmmaSpGemm(), CuSparseLtGemm(), CublasGemm()
    path.supports(M, N, K, dtype)           # -> (bool, reason), no GPU work
    op = path.bind(a, b)                    # one-time prep: layouts, tensor maps, algorithm search
    c = op()                                # the timed work only; returns C [M][N]

``a`` is a :class:`DeviceSparse` (the shared 2:4 format of :mod:`vkcoop.sparse`
uploaded to the GPU, plus the pruned dense copy the dense/cuSPARSELt baselines
need); ``b`` is a torch tensor ``[K][N]`` on the GPU.  The hand-written kernels
read B column-major (``b.t()`` contiguous, i.e. ``[N][K]`` row-major, the usual
layout of LLM activations); ``bind`` makes that copy once if ``b`` is not
already a transposed view.  On fp16 and bf16 every path accumulates in fp32 and
returns C in the input dtype. wgmma.sp also runs the other types of its
instruction (:mod:`vkcoop.cuda.wgmma_types`): tf32 (A 1:2), e4m3 and e5m2 with C in
bf16, int8 and uint8 with C in int32.
"""
from __future__ import annotations

import ctypes
import math
from typing import Callable

import numpy as np

from vkcoop.errors import InputError
from vkcoop.gemm.types import BF16, RESULT_TOLERANCE

from . import driver, launches
from .configs import MmaSpConfig, WgmmaSpConfig
from .operands import QUIET_TORCH_WARNINGS, DeviceSparse, _torch, to_torch  # noqa: F401 - the paths' names for them
from .wgmma_types import WGMMA_SP_TYPES, wgmma_type

SUPPORTED = ("float16", "bfloat16")


def _dtype_name(dtype) -> str:
    return str(dtype).replace("torch.", "")


def unsupported_dtype(dtype) -> str:
    """Why a path of fp16 and bf16 (:data:`SUPPORTED`) does not run ``dtype``."""
    return f"dtype {_dtype_name(dtype)} unsupported here (fp16, bf16 only)"


def tile_misfits(cfg, m: int, n: int, k: int) -> list[str]:
    """What keeps an M x N x K problem from whole tiles of ``cfg`` (the tile's rows and columns, one K slice), one
    phrase each; empty where it fits."""
    steps = (("M", m, cfg.bm), ("N", n, cfg.bn), ("K", k, getattr(cfg, "bk", 64)))
    return [f"{dim}={v} is not a multiple of {step}" for dim, v, step in steps if v % step]


class ShapeError(InputError):
    """A problem shape or dtype a path cannot run (raised before any launch)."""


def _check_operands(path: str, a: DeviceSparse, b) -> tuple[int, int, int]:
    torch = _torch()
    if not isinstance(a, DeviceSparse):
        raise TypeError(f"{path}: a must be a vkcoop.cuda.DeviceSparse, got {type(a).__name__}")
    if not isinstance(b, torch.Tensor):
        raise TypeError(f"{path}: b must be a torch tensor [K][N], got {type(b).__name__}")
    if b.dim() != 2:
        raise ShapeError(f"{path}: b must be 2-D [K][N], got shape {tuple(b.shape)}")
    if not b.is_cuda or not a.values.is_cuda:
        raise ShapeError(f"{path}: a and b must be on a CUDA device")
    m, k = a.shape
    if b.shape[0] != k:
        raise ShapeError(f"{path}: b has K={b.shape[0]} rows but a has K={k} columns")
    if b.dtype != a.dtype:
        raise ShapeError(f"{path}: dtype mismatch, a is {_dtype_name(a.dtype)} and b is {_dtype_name(b.dtype)}")
    return m, int(b.shape[1]), k


def _supported_shape(path, a: DeviceSparse, b) -> tuple[int, int, int]:
    """_check_operands plus the path's own supports() verdict, as a ShapeError before any launch."""
    m, n, k = _check_operands(path.name, a, b)
    ok, reason = path.supports(m, n, k, a.dtype)
    if not ok:
        raise ShapeError(reason)
    return m, n, k


def _b_column_major(b):
    """[N][K] contiguous storage of b [K][N] (no copy when b is already a transposed view)."""
    b_t = b.t()
    return b_t if b_t.is_contiguous() else b_t.contiguous()


def _stream() -> int:
    return _torch().cuda.current_stream().cuda_stream


def bind_plan(plan, operands: list[int], keep: list, c, device) -> Callable[[], object]:
    """The op that runs ``plan`` (a :class:`launches.SplitPlan`) on the operands' addresses and returns ``c``: the
    fp32 partial tiles and arrival counters a global-memory split-K needs are allocated here, once."""
    torch = _torch()
    scratch = {}
    if plan.split_buffers:
        partials = torch.empty(plan.partial_floats, dtype=torch.float32, device=device)
        arrivals = torch.zeros(plan.tiles, dtype=torch.int32, device=device)   # the kernel leaves them zero
        scratch = {"partials": partials.data_ptr(), "arrivals": arrivals.data_ptr()}
        keep = [*keep, partials, arrivals]
    launch = plan.launch(*operands, **scratch)

    def run():
        launch(_stream())
        return c

    run.keep = tuple(keep)  # the tensors the raw pointers refer to stay alive with the op
    run.description = launch.description
    return run


# --------------------------------------------------------------------------- mma.sp


class HandWrittenSpGemm:
    """What the hand-written 2:4 kernels share: a named or "auto" configuration, the shape rules, the operand
    checks. Subclasses set ``name``, ``CONFIGS``, ``AUTO_ORDER`` and ``config_type``, and write ``bind``."""

    name = ""
    CONFIGS: dict = {}
    AUTO_ORDER: tuple = ()
    config_type: type = object

    def __init__(self, config="auto"):
        if not (config == "auto" or config in self.CONFIGS or isinstance(config, self.config_type)):
            raise ValueError(f"unknown {self.name} config {config!r}; choose auto or {sorted(self.CONFIGS)}")
        self.config = config

    def _pick(self, m: int, n: int, k: int = 0):
        """The configured tile, or for "auto" the first of AUTO_ORDER that divides the problem."""
        if not isinstance(self.config, str):
            return self.config
        if self.config != "auto":
            return self.CONFIGS[self.config]
        fits = (cfg for cfg in map(self.CONFIGS.get, self.AUTO_ORDER) if not tile_misfits(cfg, m, n, k))
        return next(fits, self.CONFIGS[self.AUTO_ORDER[-1]])

    def supports(self, m: int, n: int, k: int, dtype) -> tuple[bool, str]:
        if _dtype_name(dtype) not in SUPPORTED:
            return False, unsupported_dtype(dtype)
        cfg = self._pick(m, n, k)
        if getattr(cfg, "fp16_only", False) and _dtype_name(dtype) != "float16":
            return False, f"{cfg.kernel_name('float16')} is instantiated for fp16 only"
        problems = tile_misfits(cfg, m, n, k)
        if problems:
            return False, f"{self.name} tile {cfg.bm}x{cfg.bn}: " + "; ".join(problems)
        return True, f"tile {cfg.bm}x{cfg.bn}, {cfg.stages} stages"

    def _prepare(self, a: DeviceSparse, b):
        """Checks shared by both kernels' bind(): shapes, the tile, B column-major, and an output tensor."""
        torch = _torch()
        m, n, k = _supported_shape(self, a, b)
        cfg = self._pick(m, n, k)
        c = torch.empty((m, n), dtype=a.dtype, device=b.device)
        return m, n, k, cfg, _b_column_major(b), c


class MmaSpGemm(HandWrittenSpGemm):
    """``mma.sp::ordered_metadata`` m16n8k32 kernel (kernels/mma_sp.cu).

    Needs ``M % bm == 0``, ``N % bn == 0``, ``K % bk == 0`` for the chosen tile
    (``bk`` = 64 or 128, the dense K of one pipeline stage).  Configs whose name
    contains ``p`` use the software-pipelined kernel (``pa``: its A-sliding form).
    """

    name = "mma.sp"
    source = "mma_sp"      # kernels/mma_sp.cu
    config_type = MmaSpConfig
    # mma_sp.cu's kernel list: `python -m vkcoop.cuda.gen_instances` writes kernels/mma_sp_instances.cuh
    CONFIGS = {
        "128x128": MmaSpConfig(128, 128, 2, 2, 4),
        "128x256": MmaSpConfig(128, 256, 2, 4, 3),
        "256x128": MmaSpConfig(256, 128, 4, 2, 3),
        "128x128k128": MmaSpConfig(128, 128, 2, 2, 3, bk=128),
        "128x256k128": MmaSpConfig(128, 256, 2, 4, 2, bk=128),
        "256x128k128": MmaSpConfig(256, 128, 4, 2, 3, bk=128),
        "64x16": MmaSpConfig(64, 16, 4, 1, 6),
        # tuning candidates
        "128x128k128w8": MmaSpConfig(128, 128, 2, 4, 2, bk=128),
        "256x128s4": MmaSpConfig(256, 128, 4, 2, 4),
        "128x128k128s2": MmaSpConfig(128, 128, 2, 2, 2, bk=128),
        # software-pipelined kernel (PipelinedKernel in mma_sp.cu)
        "256x128k128p": MmaSpConfig(256, 128, 4, 2, 3, bk=128, pipelined=True),
        "256x128p4": MmaSpConfig(256, 128, 4, 2, 4, pipelined=True),
        "256x128p5": MmaSpConfig(256, 128, 4, 2, 5, pipelined=True),
        "128x256p4": MmaSpConfig(128, 256, 2, 4, 4, pipelined=True),
        "128x256p5": MmaSpConfig(128, 256, 2, 4, 5, pipelined=True),
        "128x128k128p2": MmaSpConfig(128, 128, 2, 2, 2, bk=128, pipelined=True),
        "128x128p4": MmaSpConfig(128, 128, 2, 2, 4, pipelined=True),
        "128x128p3": MmaSpConfig(128, 128, 2, 2, 3, pipelined=True),
        "256x128k128pa": MmaSpConfig(256, 128, 4, 2, 3, bk=128, pipelined=True, slide_a=True),
        "256x128pa4": MmaSpConfig(256, 128, 4, 2, 4, pipelined=True, slide_a=True),
        "128x128pa4": MmaSpConfig(128, 128, 2, 2, 4, pipelined=True, slide_a=True),
        "128x256pa4": MmaSpConfig(128, 256, 2, 4, 4, pipelined=True, slide_a=True),
        # split-K for skinny problems (SplitKernel): wN is the wave of CTAs per SM the split fills; measured on
        # the H100 at M = K = 4096 and 8192, N = 16, 32, 64 (docs/cuda-sparse.md, experiments C16-C18)
        "128x32k128w2": MmaSpConfig(128, 32, 4, 1, 3, bk=128, per_sm=2),
        "128x16k128w3": MmaSpConfig(128, 16, 4, 1, 3, bk=128, per_sm=3),
        "128x64k128w2": MmaSpConfig(128, 64, 4, 1, 3, bk=128, per_sm=2),
        "64x32k128w3": MmaSpConfig(64, 32, 4, 1, 4, bk=128, per_sm=3),
        "256x32k128w1": MmaSpConfig(256, 32, 8, 1, 3, bk=128, per_sm=1),
        "128x32w4": MmaSpConfig(128, 32, 4, 1, 4, per_sm=4),
        "128x16w4": MmaSpConfig(128, 16, 4, 1, 4, per_sm=4),
        # the same splits added up in a thread-block cluster through distributed shared memory (ClusterSplitKernel)
        "128x32k128w2cs": MmaSpConfig(128, 32, 4, 1, 3, bk=128, per_sm=2, cluster_sum=True),
        "128x16k128w3cs": MmaSpConfig(128, 16, 4, 1, 3, bk=128, per_sm=3, cluster_sum=True),
        "128x64k128w2cs": MmaSpConfig(128, 64, 4, 1, 3, bk=128, per_sm=2, cluster_sum=True),
        "64x32k128w3cs": MmaSpConfig(64, 32, 4, 1, 4, bk=128, per_sm=3, cluster_sum=True),
        "128x32w4cs": MmaSpConfig(128, 32, 4, 1, 4, per_sm=4, cluster_sum=True),
        # within Vulkan's limits on the H100 (cuda-mma.sp-cap, vkcoop.cuda.vulkan_cap): <= 49,152 bytes of shared
        # memory, <= 256 threads, sides of the flexible-dimensions table's granularity
        "128x64p2": MmaSpConfig(128, 64, 2, 2, 2, pipelined=True),
        "128x64p2t256": MmaSpConfig(128, 64, 4, 2, 2, pipelined=True),
        "64x128p2": MmaSpConfig(64, 128, 2, 2, 2, pipelined=True),
        "128x32w4s3": MmaSpConfig(128, 32, 4, 1, 3, per_sm=4),
    }
    # measured on the H200 at 8192^3 (docs/cuda-sparse.md, "Configurations"): the pipelined 256x128/BK128 tile first, then pipelined
    # BK64 tiles for K not a multiple of 128; for N of 16 to 64 split-K summed in a cluster (the H100's best mma.sp
    # tiles at M = K = 4096 and 8192, N = 16, 32 and 64, 2-18 % faster than the same splits summed through global
    # memory; docs/cuda-sparse.md, experiment C21), with BK 64 where K needs it; then the small-N tile
    AUTO_ORDER = ("256x128k128p", "256x128p5", "128x128p4", "128x64k128w2cs", "128x32k128w2cs", "128x16k128w3cs",
                  "128x32w4", "128x16w4", "64x16")
    #: The same among the tiles within Vulkan's limits (cuda-mma.sp-cap): the widest warp tiles first, then N = 32
    #: split-K, then the small-N tile. First guesses, before any measurement.
    CAP_AUTO_ORDER = ("128x64p2t256", "128x64p2", "64x128p2", "128x32w4s3", "64x16")

    def bind(self, a: DeviceSparse, b) -> Callable[[], object]:
        torch = _torch()
        m, n, k, cfg, b_t, c = self._prepare(a, b)
        sms = torch.cuda.get_device_properties(b.device).multi_processor_count
        plan = launches.mma_sp_plan(cfg, _dtype_name(a.dtype), m, n, k, sms)
        operands = [a.values.data_ptr(), a.mma_metadata.data_ptr(), b_t.data_ptr(), c.data_ptr()]
        return bind_plan(plan, operands, [a, b_t], c, b.device)


# --------------------------------------------------------------------------- wgmma.sp


class WgmmaSpGemm(HandWrittenSpGemm):
    """Hopper ``wgmma.mma_async.sp`` kernel with TMA + mbarrier pipeline (kernels/wgmma_sp.cu), one template over
    the instruction's types (:mod:`vkcoop.cuda.wgmma_types`): fp16 and bf16 (m64nNk32), tf32 with A 1:2 sparse
    (m64nNk16; float32 operands, C bf16), float8_e4m3fn and float8_e5m2 (m64nNk64, C bf16), int8 and uint8
    (m64nNk64, C int32). The tiles of ``AUTO_ORDER`` run every type, the others fp16 and bf16.

    Needs sm_90a and ``M % bm == 0``, ``N % bn == 0``, ``K % bk == 0`` (a slice: 64 for 16-bit types, 128 for
    8-bit, 32 for tf32).
    """

    name = "wgmma.sp"
    source = "wgmma_sp"    # kernels/wgmma_sp.cu
    config_type = WgmmaSpConfig
    # with DIAGNOSTIC_CONFIGS, wgmma_sp.cu's kernel list (generated: kernels/wgmma_sp_instances.cuh)
    # every_type: the tiles of AUTO_ORDER run every type of vkcoop.cuda.wgmma_types (tf32, e4m3, e5m2, s8, u8 too)
    CONFIGS = {
        "128x256": WgmmaSpConfig(256, 2, 4, every_type=True, warp_store=True, persistent=True),
        "256x128": WgmmaSpConfig(128, 2, 4, msub=2),
        "256x128s5": WgmmaSpConfig(128, 2, 5, msub=2),
        "256x128s6": WgmmaSpConfig(128, 2, 6, msub=2),
        "128x128": WgmmaSpConfig(128, 2, 6, every_type=True),
        "128x16": WgmmaSpConfig(16, 2, 8),
        "64x16": WgmmaSpConfig(16, 1, 8, every_type=True),
        # split-K for skinny problems, the splits of a tile summed in a cluster
        "128x16cs": WgmmaSpConfig(16, 2, 8, per_sm=1, every_type=True),
        "128x32cs": WgmmaSpConfig(32, 2, 8, per_sm=1, every_type=True),
        "128x64cs": WgmmaSpConfig(64, 2, 8, per_sm=1, every_type=True),
    }
    # measured on the H200 (docs/cuda-sparse.md, "Configurations"): 128x256 for the compute-bound shapes; for N of
    # 16 to 64 a tile as wide as N, its K split over a cluster (1.00-1.08x cuSPARSELt at M = 4096 to 14336, where
    # the unsplit 128x16 tile left half the SMs idle and read A once per 16 columns); then the small-N tile
    AUTO_ORDER = ("128x256", "128x128", "128x64cs", "128x32cs", "128x16cs", "64x16")
    #: extra instantiations (fp16 only) used to localise problems
    DIAGNOSTIC_CONFIGS = tuple(
        WgmmaSpConfig(bn, cons, st, setmaxnreg=nreg, fp16_only=True, wait_depth=wait)
        for bn, cons, st, nreg, wait in (
            (64, 1, 8, True, 1), (128, 1, 6, True, 1), (256, 1, 4, True, 1),
            (64, 2, 8, True, 1), (128, 2, 6, False, 1), (256, 2, 4, False, 1), (128, 2, 4, True, 1),
            (256, 2, 3, True, 1), (256, 1, 5, True, 1), (128, 2, 6, True, 0), (256, 2, 4, True, 0),
            (256, 2, 5, True, 1)))

    def _pick(self, m: int, n: int, k: int = 0, dtype_name: str = "float16") -> WgmmaSpConfig:
        """The configured tile, or for "auto" the first of AUTO_ORDER that divides the problem (K in
        ``dtype_name``'s slices); bound to ``dtype_name`` where it is instantiated for it."""
        if self.config == "auto":
            typed = [cfg.of(dtype_name) for cfg in map(self.CONFIGS.get, self.AUTO_ORDER) if dtype_name in cfg.dtypes]
            fits = (cfg for cfg in typed if not tile_misfits(cfg, m, n, k))
            return next(fits, typed[-1])
        cfg = self.CONFIGS[self.config] if isinstance(self.config, str) else self.config
        return cfg.of(dtype_name) if dtype_name in cfg.dtypes else cfg

    def supports(self, m: int, n: int, k: int, dtype) -> tuple[bool, str]:
        name = _dtype_name(dtype)
        if name not in WGMMA_SP_TYPES:
            return False, f"dtype {name} unsupported ({', '.join(WGMMA_SP_TYPES)} only)"
        cfg = self._pick(m, n, k, name)
        if name not in cfg.dtypes:
            return False, f"{cfg.kernel_name(name)} is not instantiated: that tile runs {', '.join(cfg.dtypes)} only"
        problems = tile_misfits(cfg, m, n, k)
        if problems:
            return False, f"{self.name} {cfg.element.ptx} tile {cfg.bm}x{cfg.bn}: " + "; ".join(problems)
        return True, f"tile {cfg.bm}x{cfg.bn}, {cfg.stages} stages"

    def bind(self, a: DeviceSparse, b) -> Callable[[], object]:
        torch = _torch()
        m, n, k = _supported_shape(self, a, b)
        element = wgmma_type(_dtype_name(a.dtype))
        if a.sparsity != element.sparsity:
            raise ShapeError(f"{self.name} {element.ptx} takes A {element.sparsity} sparse; this A is {a.sparsity}")
        cfg = self._pick(m, n, k, element.dtype)
        b_t = _b_column_major(b)
        c = torch.empty((m, n), dtype=getattr(torch, element.output), device=b.device)
        for label, t in (("a.values", a.values), ("b", b_t), ("a.mma_metadata", a.mma_metadata)):
            if t.data_ptr() % 16:
                raise ShapeError(f"{self.name}: {label} is not 16-byte aligned (TMA needs it)")
        sms = _torch().cuda.get_device_properties(b.device).multi_processor_count
        launch = launches.wgmma_sp_launch(cfg, _dtype_name(a.dtype), m, n, k, a.values.data_ptr(), b_t.data_ptr(),
                                          a.mma_metadata.data_ptr(), c.data_ptr(), sms)

        def run():
            launch(_stream())
            return c

        run.keep = (a, b_t)
        run.description = launch.description
        return run


# The library baselines (cuSPARSELt, torch's semi-structured tensor, cuBLAS) are in vkcoop.cuda.baselines.


def mma_sp_peak_tflops(iters: int = 4096, ctas_per_sm: int = 4) -> float:
    """Throughput of register-only mma.sp m16n8k32 fp16 (kernel mma_sp_peak_f16), dense-equivalent
    TFLOP/s: the ceiling for any mma.sp GEMM on this GPU."""
    torch = _torch()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    out = torch.zeros(1, dtype=torch.float32, device="cuda")
    func = launches.module("mma_sp").function("mma_sp_peak_f16")
    grid = (sms * ctas_per_sm,)
    args = [ctypes.c_void_p(out.data_ptr()), ctypes.c_int(iters)]
    from .timing import time_cuda
    timing = time_cuda(lambda: driver.launch(func, grid, (256,), 0, _stream(), args, "mma_sp_peak_f16"),
                       warmup=2, iters=5)
    flops = grid[0] * 8 * iters * 8 * (2 * 16 * 8 * 32)
    return flops / (timing.median_ms * 1e-3) / 1e12


def reference(a: DeviceSparse, b):
    """fp32 matmul of the pruned dense A with B (TF32 off): the correctness yardstick."""
    torch = _torch()
    previous = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        return torch.mm(a.dense.float(), b.float())
    finally:
        torch.backends.cuda.matmul.allow_tf32 = previous


def compare(c, ref) -> dict:
    """Error of C against the fp32 reference: max abs error, relative to max |ref|, exact fraction."""
    torch = _torch()
    c32 = c.float()
    finite = bool(torch.isfinite(c32).all())
    diff = (c32 - ref).abs()
    scale = float(ref.abs().max()) or 1.0
    rounded = ref.to(c.dtype).float()
    return {
        "finite": finite,
        "max_abs_err": float(diff.max()),
        "max_rel_err": float(diff.max()) / scale,
        "exact_fraction": float((c32 == rounded).float().mean()),
    }


#: numpy's dtype of each output type of the paths, for its tolerance.
_OUTPUTS = {"float16": np.dtype(np.float16), "bfloat16": BF16, "int32": np.dtype(np.int32)}


def output_dtype(dtype) -> np.dtype:
    """The type C is stored in for inputs of ``dtype``: fp16 and bf16 their own, tf32 (float32) and the 8-bit floats
    bf16, the 8-bit integers int32 (:mod:`vkcoop.cuda.wgmma_types`)."""
    return _OUTPUTS[wgmma_type(_dtype_name(dtype)).output]


def passes(stats: dict, dtype) -> bool:
    """Within vkcoop.gemm's tolerance for the type C is stored in (:func:`output_dtype` of the input ``dtype``):
    fp16 2^-10, bf16 2^-7, int32 exact, relative to max |reference|."""
    tol = RESULT_TOLERANCE[output_dtype(dtype)]
    return stats["finite"] and stats["max_rel_err"] <= tol and math.isfinite(stats["max_abs_err"])
