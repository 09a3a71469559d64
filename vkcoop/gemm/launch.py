"""What a Vulkan GEMM dispatches, as data: one :class:`Launch` per problem, shared by the samples and the bench.

A kernel description (:class:`CoopMat2Kernel`, :class:`Sparse24Kernel`; the shared-memory kernels are in
:mod:`.staging`) checks its operands
and returns a Launch: the dispatches in order (shader variant, named specialization constants, buffer names in
binding order, workgroup count, push constants), the host arrays to upload, and the buffers the GEMM writes.
The samples turn a Launch into a checked :class:`vkcoop.samples.Case`; :class:`vkcoop.gemm.vulkan.VulkanGemm`
runs and times it. Nothing here touches a device.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from .. import sparse as sparse24
from .interleave import META_WORDS_CHOICES, interleave_2to4
from .tiles import WorkgroupTile
from .types import SPARSE24_TYPES, GemmInputError, gemm_types, sparse24_types

COOPMAT2_SHADER = "gemm/coopmat2_gemm.comp"
SPARSE24_SHADER = "gemm/coopmat2_sparse24.comp"


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
    ``result`` names the buffer holding C [M][N]; ``view`` (rows, columns), where it is larger: a problem padded to
    whole tiles (:meth:`CoopMat2Kernel.launch`) holds C in its first rows and columns."""
    dispatches: list
    inputs: dict
    outputs: dict
    result: str
    shape: tuple                      # (M, N, K) of the dispatched problem (padded, where view is set)
    view: tuple | None = None


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
    rows, columns = matrix.shape
    return padded_to(matrix, rows, columns + -columns % elements_per_16_bytes)


def padded_to(matrix: np.ndarray, rows: int, columns: int, fill=0) -> np.ndarray:
    """``matrix`` with rows and columns of ``fill`` appended up to (rows, columns) (itself when it has that shape)."""
    pad = ((0, rows - matrix.shape[0]), (0, columns - matrix.shape[1]))
    return np.pad(matrix, pad, constant_values=fill) if any(after for _, after in pad) else matrix


def padded_shape(tile: WorkgroupTile, m: int, n: int, k: int, k_multiple: int = 1) -> tuple[int, int, int]:
    """(M, N, K) grown to whole tiles: M and N to the tile's, K to whole TILE_K steps that are also multiples of
    ``k_multiple`` (32 for the metadata words of the 2:4 format)."""
    k_step = math.lcm(tile.tile_k, k_multiple)
    return -(-m // tile.tile_m) * tile.tile_m, -(-n // tile.tile_n) * tile.tile_n, -(-k // k_step) * k_step


#: A metadata word whose nibbles all keep columns 0 and 1 (idx0 = 0, idx1 = 1): the padding of a ragged 2:4 operand,
#: a valid pattern over zero values, which expands to zeros (0b0000 is PTX-invalid in the shared format)
PADDING_METADATA = 0x44444444


def padded_compressed(values: np.ndarray, metadata: np.ndarray, m: int, k: int) -> tuple:
    """A 2:4 operand (vkcoop.sparse format) grown to M rows and K dense columns: zero values under
    :data:`PADDING_METADATA`, so its dense form is the operand with zeros around it."""
    return (padded_to(values, m, k // 2),
            padded_to(metadata, m, k // sparse24.K_ALIGNMENT, PADDING_METADATA))


def _k_of_b(b: np.ndarray, column_major: bool) -> tuple[int, int]:
    """(N, K) of B stored [K][N], or [N][K] when column-major."""
    return (b.shape[0], b.shape[1]) if column_major else (b.shape[1], b.shape[0])


def _tiles(tile: WorkgroupTile, m: int, n: int) -> int:
    return -(-m // tile.tile_m) * -(-n // tile.tile_n)


def check_split(tile: WorkgroupTile, tail_split: bool = False) -> None:
    """A tile's K split must be >= 1 (the last slice's sum, split_sum.glsl, adds planes of the result type). A tail
    split (``x``) needs a kernel that has one (``tail_split``: coopmat2_gemm.comp) and ``w``, which sizes the
    wave."""
    if tile.tail and not tail_split:
        raise GemmInputError(f"tile {tile.label()}: the tail split (x) is the direct dense kernel's "
                             "(coopmat2_gemm.comp) only")
    if tile.tail and not tile.per_sm:
        raise GemmInputError(f"tile {tile.label()}: a tail split (x) needs w (workgroups per SM), which sizes the wave")
    if tile.split_k < 1:
        raise GemmInputError(f"split_k={tile.split_k} must be >= 1")


def _split_launch(shader: str, defines: dict, specialization: dict, inputs: dict, tile: WorkgroupTile,
                  shape: tuple, push: tuple, output_dtype) -> Launch:
    """The GEMM dispatch of ``tile`` over ``inputs`` for ``shape`` = (M, N, K), and how its K slices are added up:
    with one slice it writes C; with more, the partial sums [split][M][N] (of the result type), which the last slice
    of each tile to finish adds up into C (split_sum.glsl, over a zero-filled arrival count per tile). A tile with a
    tail split (:meth:`WorkgroupTile.tail_plan`) sums its tail tiles' slices the same way."""
    m, n, k = shape
    split, tiles = tile.split_k, _tiles(tile, m, n)
    outputs = {"C": ((m, n), np.dtype(output_dtype))}
    groups = (tiles, split, 1)
    tail, slices = tile.tail_plan(m, n, k)
    if tail:
        # A tail split (coopmat2_gemm.comp): the last `tail` tiles run as `slices` K slices each, after the whole
        # tiles; the last slice of each adds their partial tiles [slices][tail][TILE_M][TILE_N] up into C.
        outputs["partial sums"] = ((slices, tail, tile.tile_m * tile.tile_n), np.dtype(output_dtype))
        targets = ("partial sums",)
        groups = (tiles + tail * (slices - 1), 1, 1)
        specialization = {**specialization, "TAIL_SPLIT": slices}
    elif split == 1:
        targets = ("C",)
    else:
        outputs["partial sums"] = ((split, m, n), np.dtype(output_dtype))
        targets = ("partial sums",)
    if split > 1 or tail:
        outputs["arrivals"] = ((tail or tiles,), np.dtype(np.uint32))
        targets += ("C", "arrivals")
    dispatch = Dispatch(shader, {**defines, **tile.split_sum_define(tail > 0)}, specialization,
                        tuple(inputs) + targets, groups, push)
    return Launch([dispatch], inputs, outputs, "C", (m, n, k))


class _WorkgroupKernel:
    """What the coopmat2 dense and 2:4 kernels share: the tile, B's layout and the split-K epilogue."""
    shader = ""
    tile: WorkgroupTile
    b_column_major: bool

    def store_b(self, b: np.ndarray) -> np.ndarray:
        """B [K][N] in the layout this kernel reads ([N][K] when column-major)."""
        return np.ascontiguousarray(b.T) if self.b_column_major else b

    def padded_b(self, b: np.ndarray, n: int, k: int) -> np.ndarray:
        """B in this kernel's layout (:meth:`store_b`) grown with zeros to N columns and K rows of the product."""
        return padded_to(b, n, k) if self.b_column_major else padded_to(b, k, n)

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
        return _split_launch(self.shader, defines, specialization, inputs, self.tile, (m, n, k), push, output_dtype)


class CoopMat2Kernel(_WorkgroupKernel):
    """coopmat2_gemm.comp: workgroup-scope coopmat2 matrices through tensor layouts; any M, N, K."""
    shader = COOPMAT2_SHADER

    def __init__(self, types, tile: WorkgroupTile, *, b_column_major: bool = False, pad_to_tiles: bool = False):
        self.types, self.tile, self.b_column_major = gemm_types(types), tile, bool(b_column_major)
        self.pad_to_tiles = bool(pad_to_tiles)
        check_split(self.tile, tail_split=True)
        self.name = f"coopmat2 {self.types.key} {tile.label()}{' Bcol' if self.b_column_major else ''}"

    def defines(self) -> dict:
        return {"GEMM_TYPES": self.types.define}

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
        if self.pad_to_tiles and not self.aligned(m, n, k):
            return self._padded_launch(a, b, m, n, k)
        e = t.elements_per_16_bytes
        a, b = whole_vector_rows(a, e), whole_vector_rows(b, e)
        return self.launch_over({"A": a, "B": b}, m, n, k)

    def _padded_launch(self, a, b, m: int, n: int, k: int) -> Launch:
        """The problem grown with zeros to whole tiles, run by the ALIGNED pipeline; C is its first m rows and n
        columns. The tile grid is the same as the clamped pipeline's, so no more MMA is issued: only the loads of
        the edge tiles change, from per-element clamped loads to the interior's vector loads. The zero columns of
        A meet the zero rows of B, so K's padding adds exact zeros."""
        pad_m, pad_n, pad_k = padded_shape(self.tile, m, n, k)
        a = padded_to(a, pad_m, pad_k)
        b = self.padded_b(b, pad_n, pad_k)
        launch = self.launch_over({"A": a, "B": b}, pad_m, pad_n, pad_k)
        launch.view = (m, n)
        return launch

    def launch_over(self, inputs: dict, m: int, n: int, k: int) -> Launch:
        """The launch over ``inputs`` {"A", "B"} (checked, padded); A None where an earlier dispatch writes it
        (rows of K elements, :mod:`.expanded`)."""
        a_stride = k if inputs["A"] is None else inputs["A"].shape[1]
        push = _u32(m, n, k, a_stride, inputs["B"].shape[1], n)
        return self._launch(inputs, m, n, k, push, self.defines(), self.types.output_dtype,
                            {"ALIGNED": self.aligned(m, n, k)})


class Sparse24Kernel(_WorkgroupKernel):
    """coopmat2_sparse24.comp: A from vkcoop's 2:4 format through a decode function; fp16/bf16 in, fp32 out.

    ``meta_words`` 0 reads values and metadata from two bindings; 1 or 4 regroups them on the host
    (:func:`vkcoop.gemm.interleave.interleave_2to4`) so one block pointer serves both reads."""
    shader = SPARSE24_SHADER

    def __init__(self, dtype: str, tile: WorkgroupTile, *, b_column_major: bool = False, meta_words: int = 0):
        self.types = sparse24_types(dtype)
        if meta_words not in META_WORDS_CHOICES:
            raise GemmInputError(f"meta_words={meta_words}: choose from {META_WORDS_CHOICES}")
        if tile.tile_k % sparse24.K_ALIGNMENT:
            raise GemmInputError(f"tile_k={tile.tile_k}: the 2:4 path needs a multiple of {sparse24.K_ALIGNMENT} "
                                 "(the decode block is one metadata word, 32 columns)")
        self.dtype, self.tile, self.meta_words = dtype, tile, meta_words
        self.b_column_major = bool(b_column_major)
        check_split(self.tile)
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
