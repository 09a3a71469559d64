"""What a Vulkan GEMM dispatches, as data: one :class:`Launch` per problem, shared by the samples and the bench.

A kernel description (:class:`CoopMat2Kernel`, :class:`KhrKernel`, :class:`Sparse24Kernel`) checks its operands
and returns a Launch: the dispatches in order (shader variant, named specialization constants, buffer names in
binding order, workgroup count, push constants), the host arrays to upload, and the buffers the GEMM writes.
The samples turn a Launch into a checked :class:`vkcoop.samples.Case`; :class:`vkcoop.gemm.vulkan.VulkanGemm`
runs and times it. Nothing here touches a device.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .. import sparse as sparse24
from .interleave import META_WORDS_CHOICES, interleave_2to4
from .tiles import SUBGROUP_SIZE, SubgroupTile, WorkgroupTile, check_subgroup_tile, check_workgroup_tile
from .types import SPARSE24_TYPES, GemmInputError, GemmTypes, gemm_types, sparse24_types

COOPMAT2_SHADER = "gemm/coopmat2_gemm.comp"
KHR_SHADER = "gemm/khr_shmem_gemm.comp"
KHR_SPARSE24_SHADER = "gemm/khr_sparse24_gemm.comp"
SPARSE24_SHADER = "gemm/coopmat2_sparse24.comp"
SPLIT_K_REDUCE_SHADER = "gemm/splitk_reduce.comp"
STAGED_SHADER = "gemm/coopmat2_staged_gemm.comp"
STAGED_SPARSE24_SHADER = "gemm/coopmat2_staged_sparse24.comp"
REDUCE_WORKGROUP = 256  # local_size_x of splitk_reduce.comp
MAX_PREFETCH = 4        # register sets of the staged kernels (PREFETCH in staged_gemm.glsl)


@dataclass(frozen=True)
class Dispatch:
    """One compute dispatch of a GEMM."""
    shader: str                       # relative to shaders/
    defines: dict                     # a declared @variants combination of the shader
    specialization: dict              # constant name -> value
    buffers: tuple                    # buffer names, in binding order
    groups: tuple
    push: tuple                       # np.uint32 scalars, in the block's member order
    pipeline_options: dict = field(default_factory=dict)   # e.g. required_subgroup_size

    def pipeline_key(self) -> tuple:
        return (self.shader, tuple(sorted(self.defines.items())), tuple(sorted(self.specialization.items())),
                tuple(sorted(self.pipeline_options.items())))


@dataclass
class Launch:
    """A GEMM as dispatches over named buffers: ``inputs`` are uploaded, ``outputs`` (shape, dtype) allocated;
    ``result`` names the buffer holding C [M][N]."""
    dispatches: list
    inputs: dict
    outputs: dict
    result: str
    shape: tuple                      # (M, N, K)


def _u32(*values) -> tuple:
    return tuple(np.uint32(v) for v in values)


def check_matrix(name: str, array, dtype) -> np.ndarray:
    """A non-empty 2-D numpy array of ``dtype``, made contiguous; GemmInputError naming ``name`` otherwise."""
    if not isinstance(array, np.ndarray):
        raise GemmInputError(f"{name} must be a numpy array, got {type(array).__name__}")
    if array.dtype != dtype:
        raise GemmInputError(f"{name} has dtype {array.dtype}; this kernel takes {np.dtype(dtype)}")
    if array.ndim != 2 or 0 in array.shape:
        raise GemmInputError(f"{name} must be a non-empty 2-D array, got shape {array.shape}")
    return np.ascontiguousarray(array)


def compressed_operands(values, metadata, dtype) -> tuple:
    """(values, metadata, M, K) of A in vkcoop's 2:4 format: values [M][K/2] of ``dtype``, metadata uint32
    [M][K/32], K a multiple of 32."""
    values = check_matrix("values", values, dtype)
    metadata = check_matrix("metadata", metadata, np.dtype(np.uint32))
    m, half_k = values.shape
    k = 2 * half_k
    if k % sparse24.K_ALIGNMENT:
        raise GemmInputError(f"K={k} (values have {half_k} columns): the 2:4 path needs K to be a multiple of "
                             f"{sparse24.K_ALIGNMENT}")
    if metadata.shape != (m, k // sparse24.K_ALIGNMENT):
        raise GemmInputError(f"metadata has shape {metadata.shape}; for values {values.shape} it must be "
                             f"{(m, k // sparse24.K_ALIGNMENT)}")
    return values, metadata, m, k


def whole_vector_rows(matrix: np.ndarray, elements_per_16_bytes: int) -> np.ndarray:
    """``matrix`` with its rows padded with zeros to whole 16-byte vectors (itself when they already are). The
    direct kernels' fast path needs 16-byte-aligned row strides; the logical size stays in the push constants, so
    the padding is never read as data (an odd N or K would otherwise put every tile on the clamped path)."""
    pad = -matrix.shape[1] % elements_per_16_bytes
    return np.pad(matrix, ((0, 0), (0, pad))) if pad else matrix


def _k_of_b(b: np.ndarray, column_major: bool) -> tuple[int, int]:
    """(N, K) of B stored [K][N], or [N][K] when column-major."""
    return (b.shape[0], b.shape[1]) if column_major else (b.shape[1], b.shape[0])


def _tiles(tile: WorkgroupTile, m: int, n: int) -> int:
    return -(-m // tile.tile_m) * -(-n // tile.tile_n)


def check_split(tile: WorkgroupTile, fp32_output: bool) -> None:
    """A tile's K split must be >= 1, and the reduce pass (splitk_reduce.comp) adds fp32 planes only; the last
    slice's sum (split_sum.glsl) adds planes of the result type."""
    if tile.split_k < 1:
        raise GemmInputError(f"split_k={tile.split_k} must be >= 1")
    if tile.split_k > 1 and tile.reduce_pass and not fp32_output:
        raise GemmInputError(f"split_k={tile.split_k} with a reduce pass (r) needs fp32 results (the pass adds fp32 "
                             "planes); without r the last slice of each tile adds them in the result type")


def _split_launch(shader: str, defines: dict, specialization: dict, inputs: dict, tile: WorkgroupTile,
                  shape: tuple, push: tuple, output_dtype, options: dict | None = None) -> Launch:
    """The GEMM dispatch of ``tile`` over ``inputs`` for ``shape`` = (M, N, K), and how its K slices are added up:
    with one slice it writes C; with more, the partial sums [split][M][N] (of the result type) and then either the
    last slice of each tile to finish adds them up into C (split_sum.glsl, over a zero-filled arrival count per tile)
    or, for a ``reduce_pass`` tile (fp32 results), splitk_reduce.comp does in a second dispatch."""
    m, n, k = shape
    split, tiles = tile.split_k, _tiles(tile, m, n)
    outputs = {"C": ((m, n), np.dtype(output_dtype))}
    if split == 1:
        targets = ("C",)
    else:
        outputs["partial sums"] = ((split, m, n), np.dtype(output_dtype))   # fp32 wherever a reduce pass runs
        targets = ("partial sums",)
    if tile.sums_in_dispatch:
        outputs["arrivals"] = ((tiles,), np.dtype(np.uint32))
        targets += ("C", "arrivals")
    dispatches = [Dispatch(shader, {**defines, **tile.split_sum_define()}, specialization,
                           tuple(inputs) + targets, (tiles, split, 1), push, options or {})]
    if split > 1 and tile.reduce_pass:
        count = m * n
        dispatches.append(Dispatch(SPLIT_K_REDUCE_SHADER, {}, {}, ("partial sums", "C"),
                                   (min(-(-count // REDUCE_WORKGROUP), 65535), 1, 1), _u32(count, split)))
    return Launch(dispatches, inputs, outputs, "C", (m, n, k))


class _WorkgroupKernel:
    """What the coopmat2 dense and 2:4 kernels share: the tile, B's layout and the split-K epilogue."""
    shader = ""
    tile: WorkgroupTile
    b_column_major: bool

    def store_b(self, b: np.ndarray) -> np.ndarray:
        """B [K][N] in the layout this kernel reads ([N][K] when column-major)."""
        return np.ascontiguousarray(b.T) if self.b_column_major else b

    def aligned(self, m: int, n: int, k: int) -> bool:
        """Whether the ALIGNED pipeline may run (m, n, k): every tile whole in M and N, K whole TILE_K steps, and
        the rows of A and B (strides K and B's row length) 16-byte multiples."""
        e = self.types.elements_per_16_bytes
        b_row = k if self.b_column_major else n
        return (m % self.tile.tile_m == 0 and n % self.tile.tile_n == 0 and k % self.tile.tile_k == 0
                and k % e == 0 and b_row % e == 0)

    def _check_b(self, b, k: int) -> int:
        n, kb = _k_of_b(b, self.b_column_major)
        if kb != k:
            layout = "[N][K] (column-major B)" if self.b_column_major else "[K][N]"
            raise GemmInputError(f"B has shape {b.shape}; it must be {layout} with K={k}")
        return n

    def _launch(self, inputs: dict, m: int, n: int, k: int, push: tuple, defines: dict, output_dtype,
                extra_specialization: dict | None = None) -> Launch:
        """The GEMM dispatch and, for split_k > 1, the partial sums and how they are added up
        (:func:`_split_launch`)."""
        specialization = {**self.tile.specialization(self.b_column_major), **(extra_specialization or {})}
        return _split_launch(self.shader, defines, specialization, inputs, self.tile, (m, n, k), push, output_dtype,
                             self.pipeline_options())

    def pipeline_options(self) -> dict:
        return {}


class CoopMat2Kernel(_WorkgroupKernel):
    """coopmat2_gemm.comp: workgroup- (or subgroup-) scope coopmat2 matrices through tensor layouts; any M, N, K."""
    shader = COOPMAT2_SHADER

    def __init__(self, types, tile: WorkgroupTile, *, b_column_major: bool = False):
        self.types, self.tile, self.b_column_major = gemm_types(types), tile, bool(b_column_major)
        check_split(self.tile, self.types.output_dtype == np.float32)
        self.name = f"coopmat2 {self.types.key} {tile.label()}{' Bcol' if self.b_column_major else ''}"

    def defines(self) -> dict:
        return {"GEMM_TYPES": self.types.define, **self.tile.defines()}

    def pipeline_options(self) -> dict:
        # Subgroup scope splits the tile by gl_SubgroupID assuming 32-wide subgroups: ask for exactly that.
        if self.tile.subgroup_scope:
            return {"required_subgroup_size": SUBGROUP_SIZE, "full_subgroups": True}
        return {}

    def template_launch(self) -> Launch:
        """The smallest launch: its dispatches name every pipeline this kernel needs (the edge-handling one; an
        aligned problem adds its ALIGNED pipeline when it is bound)."""
        one = np.zeros((1, 1), self.types.input_dtype)
        return self.launch(one, one)

    def launch(self, a, b) -> Launch:
        """C = A @ B, with B already in this kernel's layout (:meth:`store_b`); the ALIGNED pipeline when
        :meth:`aligned` allows it. Rows of A and B that are not whole 16-byte vectors are uploaded padded
        (:func:`whole_vector_rows`)."""
        t = self.types
        a, b = check_matrix("A", a, t.input_dtype), check_matrix("B", b, t.input_dtype)
        m, k = a.shape
        n = self._check_b(b, k)
        e = t.elements_per_16_bytes
        a, b = whole_vector_rows(a, e), whole_vector_rows(b, e)
        return self.launch_over({"A": a, "B": b}, m, n, k)

    def launch_over(self, inputs: dict, m: int, n: int, k: int) -> Launch:
        """The launch over ``inputs`` {"A", "B"} (checked, padded); A None where an earlier dispatch writes it
        (rows of K elements, :mod:`.expanded`)."""
        a_stride = k if inputs["A"] is None else inputs["A"].shape[1]
        push = _u32(m, n, k, a_stride, inputs["B"].shape[1], n)
        return self._launch(inputs, m, n, k, push, self.defines(), self.types.output_dtype,
                            {"ALIGNED": self.aligned(m, n, k)})


class Sparse24Kernel(_WorkgroupKernel):
    """coopmat2_sparse24.comp: A from vkcoop's 2:4 format through a decode function; fp16/bf16 in, fp32 out.

    ``meta_words`` 0 reads values and metadata from two bindings; 1, 2 or 4 regroups them on the host
    (:func:`vkcoop.gemm.interleave.interleave_2to4`) so one block pointer serves both reads."""
    shader = SPARSE24_SHADER

    def __init__(self, dtype: str, tile: WorkgroupTile, *, b_column_major: bool = False, meta_words: int = 0):
        self.types = sparse24_types(dtype)
        if meta_words not in META_WORDS_CHOICES:
            raise GemmInputError(f"meta_words={meta_words}: choose from {META_WORDS_CHOICES}")
        if tile.subgroup_scope or tile.n_parts != 1:
            raise GemmInputError(f"tile {tile.label()}: the 2:4 kernel has one workgroup-scope accumulator "
                                 "(subgroups_m=0, n_parts=1)")
        if tile.tile_k % sparse24.K_ALIGNMENT:
            raise GemmInputError(f"tile_k={tile.tile_k}: the 2:4 path needs a multiple of {sparse24.K_ALIGNMENT} "
                                 "(the decode block is one metadata word, 32 columns)")
        self.dtype, self.tile, self.meta_words = dtype, tile, meta_words
        self.b_column_major = bool(b_column_major)
        check_split(self.tile, True)
        layout = f"i{meta_words}" if meta_words else ""
        self.name = f"coopmat2 2:4 {dtype} {tile.label()}{layout}{' Bcol' if b_column_major else ''}"

    def defines(self) -> dict:
        return {"ELEMENT": SPARSE24_TYPES[self.dtype][0], "META_WORDS": str(self.meta_words)}

    def template_launch(self) -> Launch:
        k = sparse24.K_ALIGNMENT
        b = np.zeros((1, k) if self.b_column_major else (k, 1), self.types.input_dtype)
        return self.launch(np.zeros((1, k // 2), self.types.input_dtype), np.zeros((1, 1), np.uint32), b)

    def launch(self, values, metadata, b) -> Launch:
        """values [M][K/2] and metadata [M][K/32] uint32 (vkcoop.sparse format), B in this kernel's layout."""
        values, metadata, m, k = compressed_operands(values, metadata, self.types.input_dtype)
        b = check_matrix("B", b, self.types.input_dtype)
        n = self._check_b(b, k)
        b = whole_vector_rows(b, self.types.elements_per_16_bytes)
        if self.meta_words:
            inputs = {"interleaved A": interleave_2to4(values, metadata, self.meta_words), "B": b}
        else:
            inputs = {"values": values, "metadata": metadata, "B": b}
        push = _u32(m, n, k, b.shape[1], n)
        return self._launch(inputs, m, n, k, push, self.defines(), np.float32, {"ALIGNED": self.aligned(m, n, k)})


class _SharedMemoryKernel:
    """What the kernels that stage A and B through shared memory in 16-byte vectors share: row-major operands
    whose K and N are whole vectors, a shared-memory budget, and one dispatch over A, B, C."""
    shader = ""
    what = ""

    def shared_memory_bytes(self) -> int:
        raise NotImplementedError

    def check_shared_memory(self, limit: int) -> None:
        needed = self.shared_memory_bytes()
        if needed > limit:
            raise GemmInputError(f"{self.what} tile {self.tile.label()} needs {needed} bytes of shared memory, "
                                 f"above maxComputeSharedMemorySize ({limit})")

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
    16 bytes of elements (8 fp16/bf16, 16 int8); M is free."""
    shader = KHR_SHADER
    what = "KHR shared-memory"

    def __init__(self, types, tile: SubgroupTile):
        self.types, self.tile = gemm_types(types), tile
        check_subgroup_tile(tile, self.types)
        self.name = f"khr {self.types.key} {tile.label()}"

    def shared_memory_bytes(self) -> int:
        return self.tile.shared_memory_bytes(self.types)

    def launch(self, a, b) -> Launch:
        a, b, m, n, k = self._operands(a, b)
        return self._tiled_launch({"A": a, "B": b}, m, n, k)

    def _tiled_launch(self, inputs: dict, m: int, n: int, k: int) -> Launch:
        t = self.types
        groups = (-(-n // self.tile.tile_n), -(-m // self.tile.tile_m), 1)
        specialization = {**self.tile.specialization(), "ALIGNED": self.tile.aligned(m, n, k)}
        dispatch = Dispatch(self.shader, {"GEMM_TYPES": t.define}, specialization, (*inputs, "C"), groups,
                            _u32(m, n, k, k, n, n), {"required_subgroup_size": SUBGROUP_SIZE, "full_subgroups": True})
        return Launch([dispatch], inputs, {"C": ((m, n), t.output_dtype)}, "C", (m, n, k))


class _ExpandsTwoToFour:
    """What the kernels that expand a 2:4 A into shared memory share: the dtype and tile checks, and the
    operands (values [M][K/2] and metadata [M][K/32] in vkcoop.sparse format, B row-major [K][N])."""

    @staticmethod
    def expanded_types(dtype: str, tile) -> GemmTypes:
        types = sparse24_types(dtype)
        if tile.tile_k % sparse24.K_ALIGNMENT or (tile.tile_m * tile.tile_k // 16) % tile.workgroup_size:
            raise GemmInputError(f"tile {tile.label()}: tile_k must be a multiple of {sparse24.K_ALIGNMENT} and "
                                 "each invocation must expand a whole number of 16-column groups")
        return types

    def template_launch(self) -> Launch:
        k, dtype = sparse24.K_ALIGNMENT, self.types.input_dtype
        return self.launch(np.zeros((1, k // 2), dtype), np.zeros((1, 1), np.uint32), np.zeros((k, 8), dtype))

    def _compressed_inputs(self, values, metadata, b) -> tuple:
        """({values, metadata, B}, M, N, K) once the shapes agree."""
        t = self.types
        values, metadata, m, k = compressed_operands(values, metadata, t.input_dtype)
        b = check_matrix("B", b, t.input_dtype)
        if b.shape[0] != k or b.shape[1] % t.elements_per_16_bytes:
            raise GemmInputError(f"B has shape {b.shape}; it must be [K][N] with K={k} and N a multiple of "
                                 f"{t.elements_per_16_bytes}")
        return {"values": values, "metadata": metadata, "B": b}, m, b.shape[1], k


class KhrSparse24Kernel(_ExpandsTwoToFour, KhrKernel):
    """khr_sparse24_gemm.comp: the KHR shared-memory kernel with A read in vkcoop's 2:4 format and expanded to
    dense rows on its way into shared memory (as :class:`StagedSparse24Kernel` does for workgroup scope)."""
    shader = KHR_SPARSE24_SHADER
    what = "KHR 2:4"

    def __init__(self, dtype: str, tile: SubgroupTile):
        super().__init__(self.expanded_types(dtype, tile), tile)
        self.dtype, self.name = dtype, f"khr 2:4 {dtype} {tile.label()}"

    def launch(self, values, metadata, b) -> Launch:
        """values [M][K/2] and metadata [M][K/32] (vkcoop.sparse format), B row-major [K][N]."""
        return self._tiled_launch(*self._compressed_inputs(values, metadata, b))


class StagedKernel(_SharedMemoryKernel):
    """coopmat2_staged_gemm.comp (docs/gemm-notes.md): A and B copied to shared memory in 16-byte vectors,
    double-buffered, and the workgroup-scope matrices loaded from there. 16-bit inputs; K, N and the A/B strides
    whole 16-byte vectors; any M. ``split_k`` > 1 adds the slices up as the direct kernel does;
    the ALIGNED pipeline runs when every tile is whole; the tile's ``k_unroll`` is the prefetch depth (1-4)."""
    shader = STAGED_SHADER
    what = "staged"

    def __init__(self, types, tile: WorkgroupTile):
        self.types, self.tile = gemm_types(types), tile
        if self.types.bytes_per_input != 2:
            raise GemmInputError(f"the staged kernel takes 16-bit inputs, not {self.types.key}")
        if tile.subgroup_scope or tile.n_parts != 1:
            raise GemmInputError(f"tile {tile.label()}: the staged kernel has one workgroup-scope accumulator")
        if not 1 <= tile.k_unroll <= MAX_PREFETCH:
            raise GemmInputError(f"k_unroll={tile.k_unroll}: the staged kernel's prefetch depth is 1 to {MAX_PREFETCH}")
        check_split(tile, self.types.output_dtype == np.float32)
        e, invocations = self.types.elements_per_16_bytes, tile.workgroup_size
        if (tile.tile_m * tile.tile_k // e) % invocations or (tile.tile_k * tile.tile_n // e) % invocations:
            raise GemmInputError(f"tile {tile.label()}: each invocation must copy a whole number of 16-byte "
                                 "vectors of the A and B tiles")
        self.name = f"coopmat2 staged {self.types.key} {tile.label()}"

    def shared_memory_bytes(self) -> int:
        """Two stages of A and B, each shared row one 16-byte vector longer (the bank skew)."""
        e, tile = self.types.elements_per_16_bytes, self.tile
        return 2 * 16 * (tile.tile_m * (tile.tile_k // e + 1) + tile.tile_k * (tile.tile_n // e + 1))

    def aligned(self, m: int, n: int, k: int) -> bool:
        """Whether the ALIGNED pipeline may run: M and N whole tiles, K whole TILE_K steps."""
        tile = self.tile
        return m % tile.tile_m == 0 and n % tile.tile_n == 0 and k % tile.tile_k == 0

    def specialization(self, m: int, n: int, k: int) -> dict:
        """The named constants of staged_gemm.glsl for a problem: the tile's sizes, its K split, ALIGNED, and the
        tile's K unroll as PREFETCH (K steps whose loads are in flight while one multiplies)."""
        tile = self.tile
        return {"WORKGROUP_SIZE": tile.workgroup_size, "TILE_M": tile.tile_m, "TILE_N": tile.tile_n,
                "TILE_K": tile.tile_k, "GROUP_M": tile.group_m, "SPLIT_K": tile.split_k,
                "ALIGNED": self.aligned(m, n, k), "PREFETCH": tile.k_unroll}

    def _staged_launch(self, inputs: dict, m: int, n: int, k: int, push: tuple) -> Launch:
        return _split_launch(self.shader, {"GEMM_TYPES": self.types.define}, self.specialization(m, n, k), inputs,
                             self.tile, (m, n, k), push, self.types.output_dtype)

    def launch(self, a, b) -> Launch:
        a, b, m, n, k = self._operands(a, b)
        return self._staged_launch({"A": a, "B": b}, m, n, k, _u32(m, n, k, k, n, n))


class StagedSparse24Kernel(_ExpandsTwoToFour, StagedKernel):
    """coopmat2_staged_sparse24.comp: the staged kernel with A read in vkcoop's 2:4 format and expanded to dense
    rows on its way into shared memory (16 columns per 128-bit load of values)."""
    shader = STAGED_SPARSE24_SHADER
    what = "staged 2:4"

    def __init__(self, dtype: str, tile: WorkgroupTile):
        super().__init__(self.expanded_types(dtype, tile), tile)
        self.dtype = dtype
        self.name = f"coopmat2 staged 2:4 {dtype} {tile.label()}"

    def launch(self, values, metadata, b) -> Launch:
        """values [M][K/2] and metadata [M][K/32] (vkcoop.sparse format), B row-major [K][N]."""
        inputs, m, n, k = self._compressed_inputs(values, metadata, b)
        return self._staged_launch(inputs, m, n, k, _u32(m, n, k, n, n))


def check_coopmat2_kernel(kernel, flexible, shared_memory: int) -> None:
    """Raise GemmInputError unless a workgroup-scope kernel's tile matches a flexible-dimensions row and, for a
    staged kernel, its shared memory fits ``shared_memory`` bytes: what a tuning's candidates and a device GEMM
    are both held to."""
    check_workgroup_tile(flexible, kernel.types, kernel.tile)
    if isinstance(kernel, StagedKernel):
        kernel.check_shared_memory(shared_memory)
