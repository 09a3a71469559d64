"""The launches of the hand-written kernels (2:4: mma.sp, wgmma.sp; dense: mma.sync) from raw device pointers,
with no torch: what :meth:`vkcoop.cuda.MmaSpGemm.bind`, :meth:`vkcoop.cuda.WgmmaSpGemm.bind` and
:meth:`vkcoop.cuda.dense.MmaDenseGemm.bind` run on torch tensors, and what the compute-sanitizer child
(:mod:`vkcoop.cuda.sanitize_child`) runs on its own allocations.

``mma_sp_plan(cfg, dtype_name, m, n, k, sms)`` and ``mma_dense_plan(...)`` resolve the kernel, its K splits (and,
for a cluster sum, the splits whose clusters all run at once) and the scratch a global-memory split-K needs; their
``launch(...)`` takes the operands' addresses. ``wgmma_sp_launch(cfg, dtype_name, m, n, k, ...)`` encodes the three
TMA tensor maps for any type of :mod:`vkcoop.cuda.wgmma_types`.
"""
from __future__ import annotations

import ctypes
from dataclasses import dataclass

from . import build, driver
from .configs import MmaDenseConfig, MmaSpConfig, WgmmaSpConfig

_MODULES: dict[str, driver.Module] = {}


def module(name: str) -> driver.Module:
    """``kernels/<name>.cu`` built (or taken from the cubin cache) and loaded once per process."""
    if name not in _MODULES:
        cubin, _how = build.compile_kernel(name)
        _MODULES[name] = driver.Module(cubin, label=f"{name}.cu")
    return _MODULES[name]


@dataclass
class KernelLaunch:
    """One launch of a hand-written kernel: what cuLaunchKernel (or cuLaunchKernelEx with a cluster) takes."""
    func: object
    name: str
    grid: int
    threads: int
    smem: int
    args: list
    cluster: int = 1
    description: str = ""

    def __call__(self, stream: int) -> None:
        driver.launch(self.func, (self.grid,), (self.threads,), self.smem, stream, self.args, self.name,
                      cluster=self.cluster)


def splits_whose_clusters_fit(func, cfg: MmaSpConfig | MmaDenseConfig | WgmmaSpConfig, name: str, tiles: int, problem: tuple,
                              splits: int) -> int:
    """The most K splits, at most ``splits``, whose clusters (one a tile) all run at once: a cluster's CTAs share one
    GPC, so the GPCs may hold fewer clusters than the SMs' slots suggest, and a second wave of a few clusters
    would cost as much as the first."""
    while splits > 1 and driver.max_active_clusters(func, splits, cfg.threads, cfg.smem_bytes, name) < tiles:
        splits = cfg.splits(*problem, max_cluster=splits - 1)
    return splits


@dataclass
class SplitPlan:
    """A launch of a kernel that may split K (mma.sp or the dense mma.sync), resolved for one problem on one
    device: its entry point, output tiles and K splits."""
    cfg: MmaSpConfig | MmaDenseConfig
    name: str
    func: object
    m: int
    n: int
    k: int
    tiles: int
    splits: int

    @property
    def split_buffers(self) -> bool:
        """Whether the launch needs fp32 partial tiles and per-tile arrival counters in global memory (split-K
        summed by the last CTA; a cluster adds its splits up on chip)."""
        return bool(self.cfg.per_sm) and not self.cfg.cluster_sum

    @property
    def partial_floats(self) -> int:
        return self.cfg.partial_floats(self.m, self.n, self.splits)

    def _launch(self, operands: list[int], partials: int, arrivals: int) -> KernelLaunch:
        """The entry points' parameters: the operands' addresses, [partials, arrivals], M, N, K, [splits]."""
        cfg = self.cfg
        args = [ctypes.c_void_p(address) for address in operands]
        if self.split_buffers:
            args += [ctypes.c_void_p(partials), ctypes.c_void_p(arrivals)]
        args += [ctypes.c_int(self.m), ctypes.c_int(self.n), ctypes.c_int(self.k)]
        if self.split_buffers:
            args.append(ctypes.c_int(self.splits))
        grid = self.tiles * self.splits
        description = (f"{self.name} grid={grid}" + (f" splits={self.splits}" if cfg.per_sm else "")
                       + (" (one cluster a tile)" if cfg.cluster_sum else ""))
        return KernelLaunch(self.func, self.name, grid, cfg.threads, cfg.smem_bytes, args,
                            self.splits if cfg.cluster_sum else 1, description)


class MmaSpPlan(SplitPlan):
    """An mma.sp launch resolved for one problem on one device."""

    def launch(self, values: int, meta: int, b_t: int, c: int, partials: int = 0, arrivals: int = 0) -> KernelLaunch:
        """The launch on these addresses; ``partials`` (``partial_floats`` fp32) and ``arrivals`` (``tiles`` int32,
        zero before the first launch: the kernel leaves them zero) where :attr:`split_buffers`."""
        return self._launch([values, meta, b_t, c], partials, arrivals)


class MmaDensePlan(SplitPlan):
    """A dense mma.sync launch resolved for one problem on one device (edge tiles counted)."""

    def launch(self, a: int, b_t: int, c: int, partials: int = 0, arrivals: int = 0) -> KernelLaunch:
        """The launch on A [M][K], B^T [N][K] (B column-major) and C [M][N]; ``partials`` and ``arrivals`` as for
        :meth:`MmaSpPlan.launch`."""
        return self._launch([a, b_t, c], partials, arrivals)


def _resolve(source: str, cfg, dtype_name: str, tiles: int, problem: tuple) -> tuple[str, object, int]:
    """The entry point of ``cfg`` in ``kernels/<source>.cu``, its function and its K splits on ``problem`` (M, N,
    K, SMs): for a cluster sum, the splits whose clusters all run at once."""
    name = cfg.kernel_name(dtype_name)
    func = module(source).function(name, cfg.smem_bytes)
    splits = cfg.splits(*problem)
    if cfg.cluster_sum:
        splits = splits_whose_clusters_fit(func, cfg, name, tiles, problem, splits)
    return name, func, splits


def mma_sp_plan(cfg: MmaSpConfig, dtype_name: str, m: int, n: int, k: int, sms: int) -> MmaSpPlan:
    """The kernel of ``cfg`` for ``dtype_name`` ("float16" or "bfloat16") and its K splits on ``sms`` SMs."""
    tiles = (m // cfg.bm) * (n // cfg.bn)
    name, func, splits = _resolve("mma_sp", cfg, dtype_name, tiles, (m, n, k, sms))
    return MmaSpPlan(cfg, name, func, m, n, k, tiles, splits)


def mma_dense_plan(cfg: MmaDenseConfig, dtype_name: str, m: int, n: int, k: int, sms: int) -> MmaDensePlan:
    """The dense kernel of ``cfg`` for ``dtype_name`` and its K splits on ``sms`` SMs, over whole and edge tiles."""
    tiles = cfg.tiles(m, n)
    name, func, splits = _resolve("mma_dense", cfg, dtype_name, tiles, (m, n, k, sms))
    return MmaDensePlan(cfg, name, func, m, n, k, tiles, splits)


def wgmma_sp_launch(cfg: WgmmaSpConfig, dtype_name: str, m: int, n: int, k: int, values: int, b_t: int,
                    meta: int, c: int, sms: int = 0) -> KernelLaunch:
    """The wgmma.sp launch of ``cfg`` for ``dtype_name`` (a type of :mod:`vkcoop.cuda.wgmma_types`) on these
    addresses (each 16-byte aligned, as TMA needs): A's values [M][K/2], B^T [N][K], A's per-lane metadata
    (:class:`vkcoop.cuda.DeviceSparse.mma_metadata`) and C [M][N] in the type's output; a split-K configuration
    splits K for ``sms`` SMs, one cluster a tile. A slice's boxes: 64 bytes of each row of A, 128 of each column of
    B, and the metadata words of ``bk`` columns (one 32-word block a 16-row group, two for the 8-bit types)."""
    cfg = cfg.of(dtype_name)
    if (cfg.per_sm or cfg.persistent) and sms <= 0:
        kind = "split-K" if cfg.per_sm else "persistent"
        raise ValueError(f"{cfg.kernel_name()}: a {kind} launch needs the device's SM count")
    element, bk = cfg.element, cfg.bk
    size = element.elem_bytes
    tm_a = driver.encode_tiled_2d(element.tma_data_type, values, k // 2, m, k // 2 * size, bk // 2, cfg.bm,
                                  driver.SWIZZLE_64B)
    tm_b = driver.encode_tiled_2d(element.tma_data_type, b_t, k, n, k * size, bk, cfg.bn,
                                  driver.SWIZZLE_128B)
    words = 32 * element.meta_words      # metadata words a 16-row group takes per slice
    meta_cols = (k // bk) * words
    tm_meta = driver.encode_tiled_2d(driver.TENSOR_MAP_UINT32, meta, meta_cols, m // 16, meta_cols * 4, words,
                                     cfg.bm // 16, driver.SWIZZLE_NONE)
    name = cfg.kernel_name()
    func = module("wgmma_sp").function(name, cfg.smem_bytes)
    tiles = (m // cfg.bm) * (n // cfg.bn)
    splits = 1
    if cfg.per_sm:
        splits = splits_whose_clusters_fit(func, cfg, name, tiles, (m, n, k, sms), cfg.splits(m, n, k, sms))
    args = [tm_a, tm_b, tm_meta, ctypes.c_void_p(c), ctypes.c_int(m), ctypes.c_int(n), ctypes.c_int(k)]
    grid = tiles * splits
    if cfg.persistent:   # one CTA an SM walks the tiles
        grid = min(tiles, sms)
    description = f"{name} grid={grid}" + (f" splits={splits} (one cluster a tile)" if cfg.per_sm else "")
    return KernelLaunch(func, name, grid, cfg.threads, cfg.smem_bytes, args, splits, description)
