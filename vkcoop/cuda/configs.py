"""The launch configurations of the hand-written kernels (2:4: mma.sp, wgmma.sp; dense: mma.sync): tile sizes,
pipeline depth, the shared memory they take and the name of their instantiation. The tables of configurations
(``MmaSpGemm.CONFIGS``, ``WgmmaSpGemm.CONFIGS``, ``MmaDenseGemm.CONFIGS``) are the one source: ``python -m vkcoop.cuda.gen_instances`` writes the kernels'
instantiation headers from them, each with a ``static_assert`` that :attr:`smem_bytes` is what the kernel lays out.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from vkcoop.gemm.tiles import wave_split

from .wgmma_types import SIXTEEN_BIT, WGMMA_SP_TYPES, WgmmaSpType, wgmma_type

#: The most CTAs of a portable thread-block cluster (CUDA: 8 on every GPU with clusters): a cluster-summed split-K
#: launch splits K at most this many ways.
MAX_CLUSTER_SPLITS = 8


def k_splits(tiles: int, slices: int, sm_count: int, per_sm: int, cluster_sum: bool,
             max_cluster: int = MAX_CLUSTER_SPLITS) -> int:
    """The K splits of a launch of ``tiles`` output tiles, ``slices`` K slices each: the most whose CTAs fit one wave
    of ``per_sm`` per SM (a second wave of a few CTAs costs as much as the first; the Vulkan kernels' ``w`` rule,
    :func:`wave_split`), at most ``max_cluster`` (:data:`MAX_CLUSTER_SPLITS`, or fewer where the device runs too few
    clusters at once) where a cluster adds them up, then evened out so that no split is left without a slice."""
    wanted = wave_split(tiles, slices, sm_count, per_sm)
    if cluster_sum:
        wanted = max(1, min(wanted, max_cluster, MAX_CLUSTER_SPLITS))
    per_split = -(-slices // wanted)
    return -(-slices // per_split)


class _WarpTiledSplitK:
    """What the mma.sp and the dense mma.sync tiles share (fields ``warps_m``, ``warps_n``, ``per_sm``,
    ``cluster_sum``): a warp grid, and the split kernels of warp_tiled.cuh, whose flag saying which CTA of a
    tile came last takes static shared memory where no cluster adds the splits up."""

    @property
    def threads(self) -> int:
        return 32 * self.warps_m * self.warps_n

    @property
    def static_smem_bytes(self) -> int:
        """The split kernel's flag: 4 bytes that ptxas pads to the 128-byte alignment of the dynamic ring
        (``ptxas -v``: 128 bytes smem)."""
        return 128 if self.per_sm and not self.cluster_sum else 0

    @property
    def total_smem_bytes(self) -> int:
        return self.smem_bytes + self.static_smem_bytes


@dataclass(frozen=True)
class MmaSpConfig(_WarpTiledSplitK):
    bm: int
    bn: int
    warps_m: int
    warps_n: int
    stages: int
    bk: int = 64  # dense K per pipeline stage (64 or 128)
    pipelined: bool = False  # PipelinedKernel: spread copies, A double-buffered, early barrier
    slide_a: bool = False  # pipelined with B double-buffered and A reloaded row by row instead
    per_sm: int = 0  # > 0: split-K (SplitKernel), as many K splits as fill one wave of per_sm CTAs per SM
    #: with per_sm: the splits of a tile are one thread-block cluster and add their partials up through
    #: distributed shared memory (ClusterSplitKernel), at most MAX_CLUSTER_SPLITS of them
    cluster_sum: bool = False

    @property
    def smem_bytes(self) -> int:
        """Checked against the kernel's SMEM_BYTES by a static_assert in the generated instances header."""
        return self.stages * (self.bm * self.bk + self.bn * self.bk * 2
                              + (self.bm // 16) * (self.bk // 64) * 128)

    def kernel_name(self, dtype_name: str) -> str:
        short = "f16" if dtype_name == "float16" else "bf16"
        return (f"mma_sp_{short}_{self.bm}x{self.bn}_k{self.bk}_{self.warps_m}x{self.warps_n}"
                f"_s{self.stages}" + ("_pa" if self.slide_a else "_p" if self.pipelined else "")
                + ("_cs" if self.cluster_sum else "_sk" if self.per_sm else ""))

    def splits(self, m: int, n: int, k: int, sm_count: int, max_cluster: int = MAX_CLUSTER_SPLITS) -> int:
        """The K splits of an M x N x K launch (:func:`k_splits`); 1 without ``per_sm``."""
        if not self.per_sm:
            return 1
        return k_splits((m // self.bm) * (n // self.bn), k // self.bk, sm_count, self.per_sm, self.cluster_sum,
                        max_cluster)

    def partial_floats(self, m: int, n: int, splits: int) -> int:
        """fp32 elements of the split kernel's partial tiles in global memory: one M x N plane per split (none
        where a cluster adds them up in shared memory)."""
        return 0 if self.cluster_sum else splits * m * n


@dataclass(frozen=True)
class WgmmaSpConfig:
    """A tile of the wgmma.sp kernel (kernels/wgmma_sp.cu) for one element type (``dtype``, a key of
    :data:`WGMMA_SP_TYPES`). The tables write their tiles for float16 (bf16 lays the ring out alike); :meth:`of`
    binds one to another type, whose K slice and metadata the shared memory and the K splits follow."""
    bn: int
    consumers: int
    stages: int
    setmaxnreg: bool = True  # rebalance registers from producer to consumer warpgroups
    fp16_only: bool = False  # diagnostic instantiations exist for fp16 only
    wait_depth: int = 1  # wgmma groups left in flight before releasing a slice
    msub: int = 1  # m64 sub-tiles per consumer warpgroup (2: 128 rows each)
    #: > 0: split-K for skinny problems, as many K splits as fill one wave of per_sm CTAs per SM; the splits of a
    #: tile are one thread-block cluster and add their partials up through distributed shared memory
    per_sm: int = 0
    #: instantiated for every type of WGMMA_SP_TYPES (tf32, the 8-bit floats and integers too), not only fp16, bf16
    every_type: bool = False
    #: C staged by each warp on its own, 16 rows x 256 bytes at a time, in a region after the ring
    warp_store: bool = False
    #: one CTA an SM walks the tiles, the next tile's slices loading while C is stored (needs warp_store: the ring
    #: is busy then)
    persistent: bool = False
    dtype: str = "float16"

    @property
    def element(self) -> WgmmaSpType:
        return wgmma_type(self.dtype)

    @property
    def dtypes(self) -> tuple[str, ...]:
        """The element types this tile is instantiated for."""
        if self.fp16_only:
            return ("float16",)
        return tuple(WGMMA_SP_TYPES) if self.every_type else SIXTEEN_BIT

    def of(self, dtype_name: str) -> "WgmmaSpConfig":
        """This tile for ``dtype_name``; ValueError where it is not instantiated for that type."""
        if dtype_name not in self.dtypes:
            raise ValueError(f"{self.kernel_name('float16')} is instantiated for {', '.join(self.dtypes)} only, "
                             f"not {dtype_name}")
        return replace(self, dtype=dtype_name)

    @property
    def bm(self) -> int:
        return 64 * self.consumers * self.msub

    @property
    def bk(self) -> int:
        """Dense K of one slice (one 128-byte row of B): 64 for 16-bit types, 128 for 8-bit, 32 for tf32."""
        return self.element.bk

    @property
    def threads(self) -> int:
        return 128 * (self.consumers + 1)

    @property
    def smem_bytes(self) -> int:
        """Checked against the kernel's SMEM_BYTES by a static_assert in the generated instances header: a stage
        holds 64 bytes of compressed A a row, 128 bytes of B a column and 128 bytes of metadata words per 16 rows
        and metadata word a lane, rounded up to 1024 bytes."""
        stage = self.bm * 64 + self.bn * 128 + (self.bm // 16) * 128 * self.element.meta_words
        stage = (stage + 1023) // 1024 * 1024
        return self.stages * stage + 1024 + self.stages * 16 + self.warp_regions_bytes

    @property
    def warp_regions_bytes(self) -> int:
        """warp_store's regions, one a consumer warp: 16 rows of 256 bytes, each padded by 8 outputs (distinct
        banks)."""
        out_bytes = 4 if self.element.output == "int32" else 2
        return self.consumers * 4 * 16 * (256 + 8 * out_bytes) if self.warp_store else 0

    def kernel_name(self, dtype_name: str | None = None) -> str:
        """The entry point for ``dtype_name`` (this configuration's own type where None)."""
        short = wgmma_type(dtype_name or self.dtype).ptx
        suffix = (("" if self.setmaxnreg else "_nr") + ("" if self.wait_depth == 1 else f"_w{self.wait_depth}")
                  + ("" if self.msub == 1 else f"_m{self.msub}") + ("_cs" if self.per_sm else "")
                  + ("_ws" if self.warp_store else "") + ("_p" if self.persistent else ""))
        return f"wgmma_sp_{short}_bn{self.bn}_c{self.consumers}_s{self.stages}{suffix}"

    @property
    def cluster_sum(self) -> bool:
        return bool(self.per_sm)

    def splits(self, m: int, n: int, k: int, sm_count: int, max_cluster: int = MAX_CLUSTER_SPLITS) -> int:
        """The K splits of an M x N x K launch (:func:`k_splits` over ``bk``-deep K slices); 1 without ``per_sm``."""
        if not self.per_sm:
            return 1
        return k_splits((m // self.bm) * (n // self.bn), k // self.bk, sm_count, self.per_sm, True, max_cluster)


@dataclass(frozen=True)
class MmaDenseConfig(_WarpTiledSplitK):
    """A tile of the dense mma.sync kernel (kernels/mma_dense.cu): BM x BN outputs per CTA, BK of K per pipeline
    stage, WARPS_M x WARPS_N warps, STAGES shared-memory stages, raster groups of GROUP_M row tiles; ``per_sm`` > 0
    splits K as :class:`MmaSpConfig` does (``cluster_sum``: the splits of a tile are one thread-block cluster)."""
    bm: int
    bn: int
    bk: int
    warps_m: int
    warps_n: int
    stages: int
    group_m: int = 8
    per_sm: int = 0
    cluster_sum: bool = False

    @property
    def smem_bytes(self) -> int:
        """Dynamic shared memory: the ring of A and B stages (checked against the kernel's SMEM_BYTES by a
        static_assert in the generated instances header)."""
        return self.stages * (self.bm + self.bn) * self.bk * 2

    @property
    def warp_tile(self) -> tuple[int, int]:
        return self.bm // self.warps_m, self.bn // self.warps_n

    def kernel_name(self, dtype_name: str) -> str:
        short = "f16" if dtype_name == "float16" else "bf16"
        return (f"mma_dense_{short}_{self.bm}x{self.bn}_k{self.bk}_{self.warps_m}x{self.warps_n}_s{self.stages}"
                f"_g{self.group_m}" + ("_cs" if self.cluster_sum else "_sk" if self.per_sm else ""))

    def tiles(self, m: int, n: int) -> int:
        """Output tiles of an M x N problem, edge tiles included."""
        return -(-m // self.bm) * -(-n // self.bn)

    def splits(self, m: int, n: int, k: int, sm_count: int, max_cluster: int = MAX_CLUSTER_SPLITS) -> int:
        """The K splits of an M x N x K launch (:func:`k_splits`, over whole and edge tiles and slices); 1
        without ``per_sm``."""
        if not self.per_sm:
            return 1
        return k_splits(self.tiles(m, n), -(-k // self.bk), sm_count, self.per_sm, self.cluster_sum, max_cluster)

    def partial_floats(self, m: int, n: int, splits: int) -> int:
        """fp32 elements of the split kernel's partial tiles in global memory (none where a cluster sums)."""
        return 0 if self.cluster_sum else splits * self.tiles(m, n) * self.bm * self.bn
