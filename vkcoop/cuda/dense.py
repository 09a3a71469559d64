"""The hand-written dense mma.sync GEMM (kernels/mma_dense.cu): the instruction the NVIDIA Vulkan driver compiles
coopmat2 to on Hopper (HMMA.16816), with the shared memory and tiles of CUDA or of Vulkan's limits.

    path = MmaDenseGemm()                   # or MmaDenseGemm("128x128k32s3"), or a MmaDenseConfig
    path.supports(M, N, K, dtype)           # -> (bool, reason), no GPU work
    op = path.bind(a, b)                    # a: torch [M][K], b: torch [K][N], fp16 or bf16, on the GPU
    c = op()                                # C [M][N] in the input type, fp32 accumulation

The kernel reads B column-major (``b.t()`` contiguous, [N][K]), as the Vulkan dense seed does (its ``c``
configurations); ``bind`` makes that copy once unless ``b`` is a transposed view. Any M and N, K a multiple of 8.

``CONFIGS`` is the one list of tiles (``python -m vkcoop.cuda.gen_instances`` writes the kernel's instantiations from
it). Two families share it: tiles free to use up to 227 KB of shared memory and thread-block clusters, and tiles
within Vulkan's limits on the H100 (``CAP_KEYS``: at most 49,152 bytes of shared memory, at most 256 threads, sides
the flexible-dimensions table admits at that workgroup size; :mod:`vkcoop.cuda.vulkan_cap` checks a tile against the
limits a device reports). ``TWIN_KEY`` is the CUDA twin of the Vulkan dense seed ``128:128x128x64u8g4w2x5c``: 128
threads, a 128x128 tile, raster groups of 4, column-major B, within the same 49,152 bytes (three 32-deep stages; the
seed's 64-deep K step is two of them).
"""
from __future__ import annotations

from typing import Callable

from .configs import MmaDenseConfig
from .gemm import SUPPORTED, ShapeError, _b_column_major, _dtype_name, _torch, bind_plan, unsupported_dtype
from .launches import mma_dense_plan

#: N up to this runs a split-K tile in "auto" (a skinny problem leaves most SMs idle without it).
SKINNY_N = 64
#: The rows of each copied chunk: K must be whole 16-byte chunks of fp16 / bf16.
K_MULTIPLE = 8


def _dense(bm, bn, bk, warps_m, warps_n, stages, **options) -> MmaDenseConfig:
    return MmaDenseConfig(bm, bn, bk, warps_m, warps_n, stages, **options)


class MmaDenseGemm:
    """``mma.sync.aligned.m16n8k16`` fp16 / bf16 -> fp32 GEMM, cp.async multistage pipeline, ldmatrix.x4, swizzled
    shared memory (kernels/mma_dense.cu)."""

    name = "mma.sync"
    source = "mma_dense"   # kernels/mma_dense.cu
    config_type = MmaDenseConfig
    CONFIGS = {
        # free: up to 227 KB of shared memory; 8 warps of 64x64 unless the key says t128 (4 warps)
        "128x256k32s3": _dense(128, 256, 32, 2, 4, 3),
        "128x256k32s4": _dense(128, 256, 32, 2, 4, 4),
        "128x256k32s5": _dense(128, 256, 32, 2, 4, 5),
        "256x128k32s3": _dense(256, 128, 32, 4, 2, 3),
        "256x128k32s4": _dense(256, 128, 32, 4, 2, 4),
        "256x128k32s5": _dense(256, 128, 32, 4, 2, 5),
        "128x256k64s3": _dense(128, 256, 64, 2, 4, 3),
        "128x256k64s4": _dense(128, 256, 64, 2, 4, 4),
        "256x128k64s3": _dense(256, 128, 64, 4, 2, 3),
        "256x128k64s4": _dense(256, 128, 64, 4, 2, 4),
        "128x128k32s4": _dense(128, 128, 32, 2, 4, 4),
        "128x128k64s3": _dense(128, 128, 64, 2, 4, 3),
        "128x128k32s4t128": _dense(128, 128, 32, 2, 2, 4),
        "128x128k32s5t128": _dense(128, 128, 32, 2, 2, 5),
        "128x128k64s3t128": _dense(128, 128, 64, 2, 2, 3),
        "128x128k64s4t128": _dense(128, 128, 64, 2, 2, 4),
        # free, skinny: split K filling one wave of wN CTAs per SM; cs: the splits of a tile are one cluster
        "128x16k128s3w3cs": _dense(128, 16, 128, 4, 1, 3, per_sm=3, cluster_sum=True),
        "128x32k64s4w2cs": _dense(128, 32, 64, 4, 1, 4, per_sm=2, cluster_sum=True),
        "128x32k128s3w2cs": _dense(128, 32, 128, 4, 1, 3, per_sm=2, cluster_sum=True),
        "128x32k64s4w3": _dense(128, 32, 64, 4, 1, 4, per_sm=3),
        "128x64k64s4w2cs": _dense(128, 64, 64, 4, 1, 4, per_sm=2, cluster_sum=True),
        # Vulkan's limits on the H100: <= 49,152 bytes, <= 256 threads, sides the flexible table admits
        "128x128k32s3": _dense(128, 128, 32, 2, 4, 3),
        "128x256k32s2": _dense(128, 256, 32, 2, 4, 2),
        "256x128k32s2": _dense(256, 128, 32, 4, 2, 2),
        "128x64k64s2": _dense(128, 64, 64, 4, 2, 2),
        "128x128k32s3t128": _dense(128, 128, 32, 2, 2, 3),
        "128x128k32s3t128g4": _dense(128, 128, 32, 2, 2, 3, group_m=4),
        "128x32k64s2w3": _dense(128, 32, 64, 8, 1, 2, per_sm=3),
        "128x32k32s4w3": _dense(128, 32, 32, 8, 1, 4, per_sm=3),
        "128x32k64s2w3t128": _dense(128, 32, 64, 4, 1, 2, per_sm=3),
        "64x32k64s3w4": _dense(64, 32, 64, 4, 2, 3, per_sm=4),
    }
    #: "auto": the first key whose form fits N (a split tile for N up to SKINNY_N and at most its BN, else a whole-K
    #: tile). The whole-K heads are the fastest of lab/mma_sync_sweep.py at 8192^3 on an H100 (fp16 and bf16:
    #: 256x128k64s3 510.7 / 497.7 TFLOP/s, 0.785x / 0.765x of the mma.sync ceiling; within the cap 128x128k32s3t128
    #: 451.2 / 445.0); the split tiles are first guesses. The bench's tuning measures every key.
    AUTO_ORDER = ("256x128k64s3", "128x256k32s4", "128x16k128s3w3cs", "128x32k64s4w2cs", "128x64k64s4w2cs")
    #: The same within Vulkan's limits (``cuda-mma.sync-cap``).
    CAP_AUTO_ORDER = ("128x128k32s3t128", "128x128k32s3", "128x32k64s2w3")
    #: The keys of the capped family, and the twin of the Vulkan dense seed among them.
    CAP_KEYS = ("128x128k32s3", "128x256k32s2", "256x128k32s2", "128x64k64s2", "128x128k32s3t128",
                "128x128k32s3t128g4", "128x32k64s2w3", "128x32k32s4w3", "128x32k64s2w3t128", "64x32k64s3w4")
    TWIN_KEY = "128x128k32s3t128g4"

    def __init__(self, config="auto"):
        if not (config == "auto" or config in self.CONFIGS or isinstance(config, MmaDenseConfig)):
            raise ValueError(f"unknown {self.name} config {config!r}; choose auto or {sorted(self.CONFIGS)}")
        self.config = config

    @classmethod
    def auto_key(cls, n: int, keys=None, order=None) -> str | None:
        """The first key of ``order`` (AUTO_ORDER) among ``keys`` (all) whose form fits N, or None."""
        for key in order or cls.AUTO_ORDER:
            cfg = cls.CONFIGS[key]
            if (keys is None or key in keys) and (n <= min(cfg.bn, SKINNY_N) if cfg.per_sm else n > SKINNY_N):
                return key
        return None

    def _pick(self, m: int, n: int, k: int = 0) -> MmaDenseConfig:
        if isinstance(self.config, MmaDenseConfig):
            return self.config
        if self.config != "auto":
            return self.CONFIGS[self.config]
        return self.CONFIGS[self.auto_key(n) or self.AUTO_ORDER[0]]

    def supports(self, m: int, n: int, k: int, dtype) -> tuple[bool, str]:
        if _dtype_name(dtype) not in SUPPORTED:
            return False, unsupported_dtype(dtype)
        if min(m, n, k) < 1:
            return False, f"{self.name}: M, N and K must be positive (got {m}x{n}x{k})"
        if k % K_MULTIPLE:
            return False, f"{self.name}: K={k} is not a multiple of {K_MULTIPLE} (rows are copied in 16-byte chunks)"
        cfg = self._pick(m, n, k)
        return True, f"tile {cfg.bm}x{cfg.bn}x{cfg.bk}, {cfg.stages} stages"

    def _prepare(self, a, b):
        torch = _torch()
        for label, t in (("a", a), ("b", b)):
            if not isinstance(t, torch.Tensor):
                raise TypeError(f"{self.name}: {label} must be a torch tensor, got {type(t).__name__}")
            if t.dim() != 2 or not t.is_cuda:
                raise ShapeError(f"{self.name}: {label} must be a 2-D tensor on a CUDA device, got {tuple(t.shape)}")
        (m, k), n = a.shape, int(b.shape[1])
        if b.shape[0] != k:
            raise ShapeError(f"{self.name}: b has K={b.shape[0]} rows but a has K={k} columns")
        if a.dtype != b.dtype:
            raise ShapeError(f"{self.name}: dtype mismatch, a is {_dtype_name(a.dtype)} and b is {_dtype_name(b.dtype)}")
        ok, reason = self.supports(m, n, k, a.dtype)
        if not ok:
            raise ShapeError(reason)
        a = a if a.is_contiguous() else a.contiguous()
        return m, n, k, self._pick(m, n, k), a, _b_column_major(b), torch.empty((m, n), dtype=a.dtype, device=b.device)

    def bind(self, a, b) -> Callable[[], object]:
        """The launch of C = A @ B for these operands (one-time work here: B's layout, split buffers)."""
        torch = _torch()
        m, n, k, cfg, a, b_t, c = self._prepare(a, b)
        sms = torch.cuda.get_device_properties(b.device).multi_processor_count
        plan = mma_dense_plan(cfg, _dtype_name(a.dtype), m, n, k, sms)
        return bind_plan(plan, [a.data_ptr(), b_t.data_ptr(), c.data_ptr()], [a, b_t], c, b.device)
