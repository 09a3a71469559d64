"""The GEMM kernels that stage their operands through shared memory in 16-byte vectors, as launch descriptions
(:mod:`.launch`'s :class:`~vkcoop.gemm.launch.Launch`): the KHR subgroup-scope kernel (the coopmat1 baseline) and
the staged coopmat2 kernels, dense and 2:4 (A expanded on its way into shared memory), which the H100's 2:4 seeds
and its narrow seeds run (``t`` in a label); and the check every coopmat2 kernel of a device GEMM passes
(:func:`check_coopmat2_kernel`). Nothing here touches a device.
"""
from __future__ import annotations

import numpy as np

from .. import sparse as sparse24
from .launch import (PADDING_METADATA, Dispatch, Launch, _split_launch, _u32, check_matrix, check_split,
                     compressed_operands, padded_compressed, padded_shape, padded_to)
from .tile_major import TileMajorLayout, tile_major_2to4
from .tiles import SUBGROUP_SIZE, SubgroupTile, WorkgroupTile, check_subgroup_tile, check_workgroup_tile
from .types import GemmInputError, gemm_types, sparse24_types

KHR_SHADER = "gemm/khr_shmem_gemm.comp"
STAGED_SHADER = "gemm/coopmat2_staged_gemm.comp"
STAGED_SPARSE24_SHADER = "gemm/coopmat2_staged_sparse24.comp"
MAX_PREFETCH = 4        # register sets of the staged kernels (PREFETCH in staged_gemm.glsl)
MAX_TILED_PREFETCH = 8  # those of the tile-major 2:4 kernel: up to 8 narrow K steps in flight


class _SharedMemoryKernel:
    """What the kernels that stage A and B through shared memory in 16-byte vectors share: row-major operands
    whose K and N are whole vectors, a shared-memory budget, and one dispatch over A, B, C. With ``pad_to_tiles``
    (the bench's kernels) any other problem, an odd K or N among them, is grown with zeros to whole tiles and runs
    the ALIGNED pipeline; C is the first M x N of its result (the launch's ``view``)."""
    shader = ""
    what = ""
    pad_to_tiles = False

    def aligned(self, m: int, n: int, k: int) -> bool:
        """Whether the ALIGNED pipeline may run: M and N whole tiles, K whole TILE_K steps (the staged and the KHR
        tiles alike)."""
        tile = self.tile
        return m % tile.tile_m == 0 and n % tile.tile_n == 0 and k % tile.tile_k == 0

    def _needs_padding(self, m: int, n: int, k: int) -> bool:
        e = self.types.elements_per_16_bytes
        return self.pad_to_tiles and not (self.aligned(m, n, k) and k % e == 0 and n % e == 0)

    def _padded_dense(self, a, b) -> tuple:
        """(A, B, view): the operands grown to whole tiles where the kernel pads and the problem needs it, with the
        (M, N) of C to read back; view None otherwise."""
        if not self.pad_to_tiles:
            return a, b, None
        a, b = check_matrix("A", a, self.types.input_dtype), check_matrix("B", b, self.types.input_dtype)
        (m, k), (kb, n) = a.shape, b.shape
        if kb != k or not self._needs_padding(m, n, k):   # a K that disagrees is _operands' error
            return a, b, None
        pad_m, pad_n, pad_k = padded_shape(self.tile, m, n, k)
        return padded_to(a, pad_m, pad_k), padded_to(b, pad_k, pad_n), (m, n)

    def shared_memory_bytes(self) -> int:
        raise NotImplementedError

    def check_shared_memory(self, limit: int, reserved: int = 0) -> None:
        """``limit`` is maxComputeSharedMemorySize; a shader with workgroup-scope matrices may use it less the
        driver's ``reserved`` bytes (cooperativeMatrixWorkgroupScopeReservedSharedMemory; VUID-RuntimeSpirv-
        maxComputeSharedMemorySize-10168)."""
        needed = self.shared_memory_bytes()
        if needed > limit - reserved:
            what = (f"the {limit - reserved} that maxComputeSharedMemorySize ({limit}) leaves beside the driver's "
                    f"workgroup-scope reserve ({reserved})") if reserved else f"maxComputeSharedMemorySize ({limit})"
            raise GemmInputError(f"{self.what} tile {self.tile.label()} needs {needed} bytes of shared memory, "
                                 f"above {what}")

    def store_b(self, b: np.ndarray) -> np.ndarray:
        return b

    def template_launch(self) -> Launch:
        e = self.types.elements_per_16_bytes
        return self.launch(np.zeros((1, e), self.types.input_dtype), np.zeros((e, e), self.types.input_dtype))

    def _operands(self, a, b):
        """(A, B, M, N, K) for row-major A [M][K] and B [K][N] with K and N whole 16-byte vectors."""
        t = self.types
        a, b = check_matrix("A", a, t.input_dtype), check_matrix("B", b, t.input_dtype)
        (m, k), (kb, n) = a.shape, b.shape
        if kb != k:
            raise GemmInputError(f"B has shape {b.shape}; with A {a.shape} it must be [K][N] with K={k}")
        e = t.elements_per_16_bytes
        if k % e or n % e:
            raise GemmInputError(f"the {self.what} GEMM copies 16-byte vectors: K ({k}) and N ({n}) must be "
                                 f"multiples of {e} for {t.key}")
        return a, b, m, n, k


class KhrKernel(_SharedMemoryKernel):
    """khr_shmem_gemm.comp: subgroup-scope KHR matrices fed from shared memory. K and N must be multiples of
    16 bytes of elements (8 fp16/bf16, 16 int8), unless ``pad_to_tiles``; M is free."""
    shader = KHR_SHADER
    what = "KHR shared-memory"

    def __init__(self, types, tile: SubgroupTile, *, pad_to_tiles: bool = False):
        self.types, self.tile, self.pad_to_tiles = gemm_types(types), tile, bool(pad_to_tiles)
        check_subgroup_tile(tile, self.types)
        self.name = f"khr {self.types.key} {tile.label()}"

    def shared_memory_bytes(self) -> int:
        return self.tile.shared_memory_bytes(self.types)

    def launch(self, a, b) -> Launch:
        a, b, view = self._padded_dense(a, b)
        a, b, m, n, k = self._operands(a, b)
        launch = self._tiled_launch({"A": a, "B": b}, m, n, k)
        launch.view = view
        return launch

    def _tiled_launch(self, inputs: dict, m: int, n: int, k: int) -> Launch:
        t = self.types
        groups = (-(-n // self.tile.tile_n), -(-m // self.tile.tile_m), 1)
        specialization = {**self.tile.specialization(), "ALIGNED": self.aligned(m, n, k)}
        dispatch = Dispatch(self.shader, {"GEMM_TYPES": t.define}, specialization, (*inputs, "C"), groups,
                            _u32(m, n, k, k, n, n), {"required_subgroup_size": SUBGROUP_SIZE, "full_subgroups": True})
        return Launch([dispatch], inputs, {"C": ((m, n), t.output_dtype)}, "C", (m, n, k))


class StagedKernel(_SharedMemoryKernel):
    """coopmat2_staged_gemm.comp (docs/gemm.md): A and B copied to shared memory in 16-byte vectors,
    double-buffered, and the workgroup-scope matrices loaded from there (the H100's fp16-accumulating N = 64
    default, and later seeds of its narrow classes). 16-bit inputs; K, N and the A/B strides whole 16-byte vectors;
    any M. ``split_k`` > 1 adds the slices up as the direct kernel does; the ALIGNED pipeline runs when every tile is
    whole; the tile's ``k_unroll`` is the prefetch depth (1-4); ``pad_to_tiles`` as for every shared-memory kernel."""
    shader = STAGED_SHADER
    what = "staged"
    max_prefetch = MAX_PREFETCH

    def __init__(self, types, tile: WorkgroupTile, *, pad_to_tiles: bool = False):
        self.types, self.tile, self.pad_to_tiles = gemm_types(types), tile, bool(pad_to_tiles)
        if self.types.bytes_per_input != 2:
            raise GemmInputError(f"the staged kernel takes 16-bit inputs, not {self.types.key}")
        if not 1 <= tile.k_unroll <= self.max_prefetch:
            raise GemmInputError(f"k_unroll={tile.k_unroll}: the {self.what} kernel's prefetch depth is 1 to "
                                 f"{self.max_prefetch}")
        check_split(tile)
        e, invocations = self.types.elements_per_16_bytes, tile.workgroup_size
        if (tile.tile_m * tile.tile_k // e) % invocations or (tile.tile_k * tile.tile_n // e) % invocations:
            raise GemmInputError(f"tile {tile.label()}: each invocation must copy a whole number of 16-byte "
                                 "vectors of the A and B tiles")
        self.name = f"coopmat2 staged {self.types.key} {tile.label()}"

    def shared_memory_bytes(self) -> int:
        """Two stages of A and B, each shared row one 16-byte vector longer (the bank skew)."""
        e, tile = self.types.elements_per_16_bytes, self.tile
        return 2 * 16 * (tile.tile_m * (tile.tile_k // e + 1) + tile.tile_k * (tile.tile_n // e + 1))

    def specialization(self, m: int, n: int, k: int) -> dict:
        """The named constants of staged_gemm.glsl for a problem: the tile's sizes, its K split, ALIGNED, and the
        tile's K unroll as PREFETCH (K steps whose loads are in flight while one multiplies)."""
        tile = self.tile
        return {"WORKGROUP_SIZE": tile.workgroup_size, "TILE_M": tile.tile_m, "TILE_N": tile.tile_n,
                "TILE_K": tile.tile_k, "GROUP_M": tile.group_m, "SPLIT_K": tile.split_k,
                "ALIGNED": self.aligned(m, n, k), "PREFETCH": tile.k_unroll}

    def defines(self) -> dict:
        return {"GEMM_TYPES": self.types.define}

    def _staged_launch(self, inputs: dict, m: int, n: int, k: int, push: tuple) -> Launch:
        return _split_launch(self.shader, self.defines(), self.specialization(m, n, k), inputs, self.tile, (m, n, k),
                             push, self.types.output_dtype)

    def launch(self, a, b) -> Launch:
        a, b, view = self._padded_dense(a, b)
        a, b, m, n, k = self._operands(a, b)
        launch = self._staged_launch({"A": a, "B": b}, m, n, k, _u32(m, n, k, k, n, n))
        launch.view = view
        return launch


class StagedSparse24Kernel(StagedKernel):
    """coopmat2_staged_sparse24.comp: the staged kernel with A read in vkcoop's 2:4 format (values [M][K/2] and
    metadata [M][K/32], B row-major [K][N]) and expanded to dense rows on its way into shared memory (16 columns per
    128-bit load of values); the H100's default 2:4 kernel."""
    shader = STAGED_SPARSE24_SHADER
    what = "staged 2:4"

    def __init__(self, dtype: str, tile: WorkgroupTile, *, pad_to_tiles: bool = False):
        if tile.tile_k % sparse24.K_ALIGNMENT or (tile.tile_m * tile.tile_k // 16) % tile.workgroup_size:
            raise GemmInputError(f"tile {tile.label()}: tile_k must be a multiple of {sparse24.K_ALIGNMENT} and "
                                 "each invocation must expand a whole number of 16-column groups")
        super().__init__(sparse24_types(dtype), tile, pad_to_tiles=pad_to_tiles)
        self.dtype = dtype
        self.name = f"coopmat2 staged 2:4 {dtype} {tile.label()}"

    def defines(self) -> dict:
        return {**super().defines(), "A_FORMAT": "ROWS"}

    def template_launch(self) -> Launch:
        k, dtype = sparse24.K_ALIGNMENT, self.types.input_dtype
        return self.launch(np.zeros((1, k // 2), dtype), np.zeros((1, 1), np.uint32), np.zeros((k, 8), dtype))

    def _padded_compressed(self, values, metadata, b) -> tuple:
        """(values, metadata, B, view): :meth:`_padded_dense` for a 2:4 A, K in whole tiles and metadata words."""
        if not self.pad_to_tiles:
            return values, metadata, b, None
        values, metadata, m, k = compressed_operands(values, metadata, self.types.input_dtype)
        b = check_matrix("B", b, self.types.input_dtype)
        n = b.shape[1]
        if b.shape[0] != k or not self._needs_padding(m, n, k):   # a K that disagrees is _compressed_inputs' error
            return values, metadata, b, None
        pad_m, pad_n, pad_k = padded_shape(self.tile, m, n, k, sparse24.K_ALIGNMENT)
        values, metadata = padded_compressed(values, metadata, pad_m, pad_k)
        return values, metadata, padded_to(b, pad_k, pad_n), (m, n)

    def _compressed_inputs(self, values, metadata, b) -> tuple:
        """({values, metadata, B}, M, N, K) once the shapes agree."""
        t = self.types
        values, metadata, m, k = compressed_operands(values, metadata, t.input_dtype)
        b = check_matrix("B", b, t.input_dtype)
        if b.shape[0] != k or b.shape[1] % t.elements_per_16_bytes:
            raise GemmInputError(f"B has shape {b.shape}; it must be [K][N] with K={k} and N a multiple of "
                                 f"{t.elements_per_16_bytes}")
        return {"values": values, "metadata": metadata, "B": b}, m, b.shape[1], k

    def launch(self, values, metadata, b) -> Launch:
        """values [M][K/2] and metadata [M][K/32] (vkcoop.sparse format), B row-major [K][N]."""
        values, metadata, b, view = self._padded_compressed(values, metadata, b)
        inputs, m, n, k = self._compressed_inputs(values, metadata, b)
        launch = self._staged_launch(inputs, m, n, k, _u32(m, n, k, n, n))
        launch.view = view
        return launch


class TiledSparse24Kernel(StagedSparse24Kernel):
    """coopmat2_staged_sparse24.comp with A in the tile-major 2:4 layout (:mod:`.tile_major`, made here from vkcoop's
    format on every launch): each K step of a tile one block that the invocations read in their order, with the
    pattern codes (``tp``, A_FORMAT TILES_PATTERNS: masks and a select) or the PTX nibbles (``tn``, TILES_NIBBLES:
    the row layout's 64-bit shifts). For the narrow classes, where the row layout's loop is issue-bound. The layout
    needs whole tiles, so the problem is always padded to them; each invocation expands an even number of 16-column
    groups (a metadata word per two); the prefetch depth (the tile's K unroll) is 1 to :data:`MAX_TILED_PREFETCH`."""
    what = "tile-major 2:4"
    max_prefetch = MAX_TILED_PREFETCH
    FORMATS = {"patterns": "TILES_PATTERNS", "nibbles": "TILES_NIBBLES"}

    def __init__(self, dtype: str, tile: WorkgroupTile, *, code: str = "patterns"):
        if code not in self.FORMATS:
            raise GemmInputError(f"tile-major 2:4 code {code!r}: choose from {', '.join(self.FORMATS)}")
        self.layout = TileMajorLayout(tile.tile_m, tile.tile_k, tile.workgroup_size)
        super().__init__(dtype, tile, pad_to_tiles=True)
        self.code = code
        self.name = f"coopmat2 tile-major 2:4 {code} {dtype} {tile.label()}"

    def defines(self) -> dict:
        return {**super().defines(), "A_FORMAT": self.FORMATS[self.code]}

    def template_launch(self) -> Launch:
        k, dtype = self.tile.tile_k, self.types.input_dtype
        values = np.zeros((1, k // 2), dtype)
        metadata = np.full((1, k // sparse24.K_ALIGNMENT), PADDING_METADATA, np.uint32)
        return self.launch(values, metadata, np.zeros((k, 8), dtype))

    def launch(self, values, metadata, b) -> Launch:
        """values [M][K/2] and metadata [M][K/32] (vkcoop.sparse format), B row-major [K][N]: padded to whole tiles,
        A rearranged into its blocks (binding 0)."""
        values, metadata, b, view = self._padded_compressed(values, metadata, b)
        inputs, m, n, k = self._compressed_inputs(values, metadata, b)
        blocks = tile_major_2to4(inputs["values"], inputs["metadata"], self.layout, self.code)
        launch = self._staged_launch({"A blocks": blocks, "B": inputs["B"]}, m, n, k, _u32(m, n, k, n, n))
        launch.view = view
        return launch


def check_coopmat2_kernel(kernel, flexible, limits) -> None:
    """Raise GemmInputError unless a workgroup-scope kernel's tile matches a flexible-dimensions row and, for a
    staged kernel, its shared memory fits the device's ``limits`` (:class:`vkcoop.gemm.configs.DeviceLimits`:
    maxComputeSharedMemorySize less the driver's workgroup-scope reserve): what a tuning's candidates and a device
    GEMM are both held to."""
    check_workgroup_tile(flexible, kernel.types, kernel.tile)
    if isinstance(kernel, StagedKernel):
        kernel.check_shared_memory(limits.shared_memory, limits.reserved_shared_memory)
