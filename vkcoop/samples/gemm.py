"""Samples 6 and 7 and the Vulkan 2:4 path: GEMMs checked bit for bit against an exact reference.

* ``coopmat2-gemm`` (sample 6): workgroup-scope coopmat2 GEMM with tensor layouts and flexible dimensions
  (``shaders/gemm/coopmat2_gemm.comp``) for fp16->fp16, fp16->fp32, bf16->fp32 and s8->s32. Tile sizes
  come from the driver's flexible-dimensions table (:func:`gemm_kernels.choose_workgroup_tile`); problem
  sizes are deliberately not tile multiples (edge tiles use Constant clamp, stores drop what falls outside),
  and column-major B goes through a transposing tensor view.
* ``khr-shmem-gemm`` (sample 7): the coopmat1 baseline, subgroup-scope KHR matrices through shared memory.
* ``sparse24-gemm``: the 2:4 decode path, A from (values, metadata) through a decode function.

Inputs are exact (see :func:`gemm_kernels.exact_inputs`): every kernel must reproduce the float64 / int64
product converted to the result type bit for bit, whatever its summation order.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from .. import sparse as sparse24
from . import gemm_kernels as kernels
from .base import BFLOAT16, INT8, Binding, Case, DeviceCaps, Requirements, Sample, SampleInputError, register

COOPMAT2_SHADER = "gemm/coopmat2_gemm.comp"
KHR_SHADER = "gemm/khr_shmem_gemm.comp"
SPARSE_SHADER = "gemm/coopmat2_sparse24.comp"

_FP16 = Requirements(features=("shaderFloat16", "storageBuffer16BitAccess"))
#: local_size_x_id (ExecutionMode LocalSizeId) needs maintenance4 (Vulkan 1.3 core feature).
_LOCAL_SIZE_ID = Requirements(features=("maintenance4",))
COOPMAT2_GEMM_REQUIRES = (Requirements(
    extensions=("VK_KHR_cooperative_matrix", "VK_NV_cooperative_matrix2"),
    features=("cooperativeMatrix", "cooperativeMatrixWorkgroupScope", "cooperativeMatrixFlexibleDimensions",
              "cooperativeMatrixTensorAddressing", "vulkanMemoryModel")) + _FP16 + INT8 + BFLOAT16 + _LOCAL_SIZE_ID)
KHR_GEMM_REQUIRES = (Requirements(extensions=("VK_KHR_cooperative_matrix",),
                                  features=("cooperativeMatrix", "vulkanMemoryModel")) + _FP16 + INT8 + BFLOAT16
                     + _LOCAL_SIZE_ID)
SPARSE_GEMM_REQUIRES = COOPMAT2_GEMM_REQUIRES + Requirements(
    features=("cooperativeMatrixBlockLoads", "bufferDeviceAddress", "shaderInt16"))


def flexible_rows(caps: DeviceCaps) -> list[dict]:
    """DeviceCaps' flexible-dimensions entries in the dict form gemm_kernels reads."""
    return [{"MGranularity": e.M, "NGranularity": e.N, "KGranularity": e.K, "AType": e.A, "BType": e.B,
             "CType": e.C, "ResultType": e.result, "scope": e.scope, "workgroupInvocations": e.workgroup_invocations,
             "saturatingAccumulation": 0} for e in caps.flexible if e.flexible]


def khr_rows(caps: DeviceCaps) -> list[dict]:
    return [{"MSize": e.M, "NSize": e.N, "KSize": e.K, "AType": e.A, "BType": e.B, "CType": e.C,
             "ResultType": e.result, "scope": e.scope, "saturatingAccumulation": 0} for e in caps.khr]


def _u32(*values) -> tuple:
    return tuple(np.uint32(v) for v in values)


# --------------------------------------------------------------------------- sample 6
def coopmat2_gemm_case(name: str, types, tile: kernels.WorkgroupTile, a: np.ndarray, b: np.ndarray, *,
                       b_column_major: bool = False) -> Case:
    """One dispatch of coopmat2_gemm.comp: C = A @ B (B given [K][N]; stored [N][K] when column-major)."""
    t = kernels.gemm_types(types)
    for label, array in (("A", a), ("B", b)):
        if not isinstance(array, np.ndarray) or array.ndim != 2:
            raise SampleInputError(f"case {name}: {label} must be a 2-D numpy array")
        if array.dtype != t.input_dtype:
            raise SampleInputError(f"case {name}: {label} has dtype {array.dtype}; {t.key} takes {t.input_dtype}")
    (m, k), (kb, n) = a.shape, b.shape
    if kb != k:
        raise SampleInputError(f"case {name}: A is {a.shape} and B is {b.shape}; B must be [K][N] with K={k}")
    expected = kernels.reference_gemm(a, b, t.output_dtype)
    stored_b = np.ascontiguousarray(b.T) if b_column_major else b
    tiles = -(-m // tile.tile_m) * -(-n // tile.tile_n)
    return Case(name, COOPMAT2_SHADER, {"GEMM_TYPES": t.define, **tile.defines()},
                [Binding("A", a), Binding("B", stored_b),
                 Binding("C", np.zeros((m, n), t.output_dtype), expected=expected)],
                specialization=tile.specialization(b_column_major),
                groups=(tiles, 1, 1), push=_u32(m, n, k, k, stored_b.shape[1], n))


def split_k_partials(a: np.ndarray, b: np.ndarray, tile: kernels.WorkgroupTile) -> np.ndarray:
    """[SPLIT_K][M][N] fp32: the product of each K slice, as the split-K kernels cut K (whole TILE_K steps)."""
    k = a.shape[1]
    chunk = -(-(-(-k // tile.split_k)) // tile.tile_k) * tile.tile_k
    planes = []
    for split in range(tile.split_k):
        begin, end = min(k, split * chunk), min(k, split * chunk + chunk)
        planes.append((a[:, begin:end].astype(np.float64) @ b[begin:end].astype(np.float64)).astype(np.float32))
    return np.stack(planes)


def coopmat2_split_k_case(name: str, types, tile: kernels.WorkgroupTile, a: np.ndarray, b: np.ndarray) -> Case:
    """The split-K GEMM pass alone: its output is the [SPLIT_K][M][N] partial sums (written through a 3-D
    tensor layout, one plane per slice), compared with each slice's exact product."""
    t = kernels.gemm_types(types)
    if t.output_dtype != np.float32 or tile.split_k < 2:
        raise SampleInputError(f"case {name}: split-K needs fp32 results and split_k >= 2")
    (m, k), n = a.shape, b.shape[1]
    expected = split_k_partials(a, b, tile)
    tiles = -(-m // tile.tile_m) * -(-n // tile.tile_n)
    return Case(name, COOPMAT2_SHADER, {"GEMM_TYPES": t.define, **tile.defines()},
                [Binding("A", a), Binding("B", b), Binding("partial sums", np.zeros_like(expected), expected=expected)],
                specialization=tile.specialization(False), groups=(tiles, tile.split_k, 1),
                push=_u32(m, n, k, k, n, n))


def edge_shapes(tile, elements_per_16_bytes: int) -> dict[str, tuple[int, int, int]]:
    """Problem sizes around a tile: all tile multiples; ragged everything (unaligned strides, so every tile
    takes the clamped path); and ragged M/N with an aligned K that is not a TILE_K multiple (interior tiles
    take the fast path, then a clamped K tail)."""
    tm, tn, tk = tile.tile_m, tile.tile_n, tile.tile_k
    aligned_tail = _round_up(tk // 2 + 1, elements_per_16_bytes)
    return {"aligned": (2 * tm, 2 * tn, 4 * tk),
            "ragged": (2 * tm + 17, tn + 9, 2 * tk + 5),
            "mixed": (tm + 1, 2 * tn + 3, 3 * tk + aligned_tail)}


def _round_up(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple


@register
class CoopMat2GemmSample(Sample):
    name = "coopmat2-gemm"
    description = ("workgroup-scope coopmat2 GEMM with tensor layouts and flexible dimensions: fp16->fp16, "
                   "fp16->fp32, bf16->fp32, s8->s32; any M, N, K (Constant clamp on edge tiles); tile sizes "
                   "from the flexible-dimensions table; column-major B through a tensor view")
    requires = COOPMAT2_GEMM_REQUIRES
    order = 60
    #: target tile (M, N, K), rounded up to the chosen granularity row's multiples.
    target_tile = (128, 128, 32)

    def cases(self, caps: DeviceCaps) -> list[Case]:
        rows = flexible_rows(caps)
        cases = []
        for key, types in kernels.GEMM_TYPES.items():
            try:
                tile = kernels.choose_workgroup_tile(rows, types, target=self.target_tile,
                                                     max_dimension=caps.max_flexible_dimension or None)
            except kernels.GemmInputError as error:
                raise SampleInputError(f"{self.name}: {error}") from None
            for shape_name, (m, n, k) in edge_shapes(tile, types.elements_per_16_bytes).items():
                a, b = kernels.exact_inputs(types, m, n, k, seed=m * 7 + n)
                cases.append(coopmat2_gemm_case(f"{key} {shape_name} {m}x{n}x{k} tile {tile.label()}",
                                                types, tile, a, b))
                if shape_name == "mixed":
                    cases.append(coopmat2_gemm_case(f"{key} {shape_name} {m}x{n}x{k} column-major B",
                                                    types, tile, a, b, b_column_major=True))
                if shape_name in ("ragged", "mixed"):
                    for variant in self.variant_tiles(tile, caps):
                        cases.append(coopmat2_gemm_case(f"{key} {shape_name} {m}x{n}x{k} tile {variant.label()}",
                                                        types, variant, a, b, b_column_major=shape_name == "mixed"))
                if shape_name == "ragged" and types.output_dtype == np.float32:
                    split = kernels.WorkgroupTile(tile.workgroup_size, tile.tile_m, tile.tile_n, tile.tile_k,
                                                  tile.k_unroll, tile.group_m, split_k=3)
                    a3, b3 = kernels.exact_inputs(types, m, n, 7 * tile.tile_k + 5, seed=m)
                    cases.append(coopmat2_split_k_case(f"{key} {shape_name} split-K 3 partial sums", types, split,
                                                       a3, b3))
        return cases

    @staticmethod
    def variant_tiles(tile: kernels.WorkgroupTile, caps: DeviceCaps) -> list:
        """The other shapes of the kernel on the same tile: two accumulators along N and, where subgroups are 32
        wide, subgroup-scope matrices (2 subgroups along M)."""
        variants = []
        if tile.tile_n % 2 == 0:
            variants.append(replace(tile, n_parts=2))
        subgroups = tile.workgroup_size // kernels.SUBGROUP_SIZE
        if caps.subgroup_size == kernels.SUBGROUP_SIZE and subgroups % 2 == 0:
            variants.append(replace(tile, subgroups_m=2))
        rows = flexible_rows(caps)
        good = []
        for variant in variants:
            try:
                kernels.check_workgroup_tile(rows, kernels.GEMM_TYPES["fp16->fp32"], variant)
                good.append(variant)
            except kernels.GemmInputError:
                pass
        return good


# --------------------------------------------------------------------------- sample 7
def khr_gemm_case(name: str, types, tile: kernels.SubgroupTile, a: np.ndarray, b: np.ndarray) -> Case:
    t = kernels.gemm_types(types)
    if a.dtype != t.input_dtype or b.dtype != t.input_dtype:
        raise SampleInputError(f"case {name}: A and B must be {t.input_dtype}, got {a.dtype} and {b.dtype}")
    (m, k), (kb, n) = a.shape, b.shape
    e = t.elements_per_16_bytes
    if kb != k:
        raise SampleInputError(f"case {name}: A is {a.shape} and B is {b.shape}; B must be [K][N] with K={k}")
    if k % e or n % e:
        raise SampleInputError(f"case {name}: K ({k}) and N ({n}) must be multiples of {e} for {t.key} "
                               "(16-byte copies)")
    kernels.check_subgroup_tile(tile, t)
    expected = kernels.reference_gemm(a, b, t.output_dtype)
    return Case(name, KHR_SHADER, {"GEMM_TYPES": t.define},
                [Binding("A", a), Binding("B", b), Binding("C", np.zeros((m, n), t.output_dtype), expected=expected)],
                specialization={0: tile.workgroup_size, 1: tile.lm, 2: tile.ln, 3: tile.lk, 4: tile.tile_m,
                                5: tile.tile_n, 6: tile.tile_k, 7: tile.subgroups_m, 8: tile.subgroups_n,
                                9: kernels.SUBGROUP_SIZE},
                groups=(-(-n // tile.tile_n), -(-m // tile.tile_m), 1), push=_u32(m, n, k, k, n, n))


@register
class KhrSharedMemoryGemmSample(Sample):
    name = "khr-shmem-gemm"
    description = ("coopmat1 baseline: subgroup-scope VK_KHR_cooperative_matrix GEMM through shared memory "
                   "(shape from the KHR table), fp16->fp16, fp16->fp32, bf16->fp32, s8->s32, ragged M")
    requires = KHR_GEMM_REQUIRES
    order = 70

    def cases(self, caps: DeviceCaps) -> list[Case]:
        table = khr_rows(caps)
        cases = []
        for key, types in kernels.GEMM_TYPES.items():
            try:
                tile = kernels.choose_subgroup_tile(table, types)
            except kernels.GemmInputError as error:
                raise SampleInputError(f"{self.name}: {error}") from None
            e = types.elements_per_16_bytes
            shapes = {"aligned": (2 * tile.tile_m, 2 * tile.tile_n, 4 * tile.tile_k),
                      "ragged": (2 * tile.tile_m + 17, tile.tile_n + 2 * e, 3 * tile.tile_k + e)}
            for shape_name, (m, n, k) in shapes.items():
                a, b = kernels.exact_inputs(types, m, n, k, seed=m + 3 * n)
                cases.append(khr_gemm_case(f"{key} {shape_name} {m}x{n}x{k} {tile.label()}", types, tile, a, b))
        return cases


# --------------------------------------------------------------------------- the 2:4 decode path
def sparse24_case(name: str, dtype: str, tile: kernels.WorkgroupTile, a: np.ndarray, b: np.ndarray, *,
                  b_column_major: bool = False, meta_words: int = 0) -> Case:
    """C (fp32) = prune_2to4(A) @ B, with A handed to the shader compressed (vkcoop.sparse format), as two
    bindings (``meta_words`` 0) or regrouped into interleaved blocks (:func:`gemm_kernels.interleave_2to4`)."""
    if dtype not in kernels.SPARSE24_TYPES:
        raise SampleInputError(f"case {name}: dtype {dtype!r} is not one of {', '.join(kernels.SPARSE24_TYPES)}")
    define, element_dtype, _ = kernels.SPARSE24_TYPES[dtype]
    if a.dtype != element_dtype or b.dtype != element_dtype:
        raise SampleInputError(f"case {name}: A and B must be {element_dtype}, got {a.dtype} and {b.dtype}")
    (m, k), (kb, n) = a.shape, b.shape
    if k % sparse24.K_ALIGNMENT:
        raise SampleInputError(f"case {name}: K={k} must be a multiple of {sparse24.K_ALIGNMENT} for the 2:4 path")
    if kb != k:
        raise SampleInputError(f"case {name}: A is {a.shape} and B is {b.shape}; B must be [K][N] with K={k}")
    if tile.tile_k % sparse24.K_ALIGNMENT:
        raise SampleInputError(f"case {name}: tile_k={tile.tile_k} must be a multiple of {sparse24.K_ALIGNMENT}")
    compressed = sparse24.compress_2to4(a)
    expected = kernels.sparse24_reference(compressed.values, compressed.metadata, b)
    if meta_words not in kernels.META_WORDS_CHOICES:
        raise SampleInputError(f"case {name}: meta_words={meta_words} is not one of {kernels.META_WORDS_CHOICES}")
    stored_b = np.ascontiguousarray(b.T) if b_column_major else b
    tiles = -(-m // tile.tile_m) * -(-n // tile.tile_n)
    if meta_words:
        a_bindings = [Binding("interleaved A", kernels.interleave_2to4(compressed.values, compressed.metadata,
                                                                       meta_words))]
    else:
        a_bindings = [Binding("values", compressed.values), Binding("metadata", compressed.metadata)]
    return Case(name, SPARSE_SHADER, {"ELEMENT": define, "META_WORDS": str(meta_words)},
                a_bindings + [Binding("B", stored_b), Binding("C", np.zeros((m, n), np.float32), expected=expected)],
                specialization=tile.specialization(b_column_major),
                groups=(tiles, 1, 1), push=_u32(m, n, k, stored_b.shape[1], n))


@register
class Sparse24GemmSample(Sample):
    name = "sparse24-gemm"
    description = ("2:4 structured sparsity on Vulkan: A loaded from (values, metadata) by a "
                   "coopMatLoadTensorNV decode function (buffer_reference blocks of 1x32, or interleaved "
                   "metadata+values blocks of 32/128 columns), fp16/bf16 in, fp32 out; checked against the fp32 "
                   "product of the pruned A")
    requires = SPARSE_GEMM_REQUIRES
    order = 75
    target_tile = (128, 128, 64)

    def cases(self, caps: DeviceCaps) -> list[Case]:
        rows = flexible_rows(caps)
        cases = []
        for dtype, (_, element_dtype, types_key) in kernels.SPARSE24_TYPES.items():
            try:
                tile = kernels.choose_workgroup_tile(rows, types_key, target=self.target_tile)
            except kernels.GemmInputError as error:
                raise SampleInputError(f"{self.name}: {error}") from None
            tile = kernels.WorkgroupTile(tile.workgroup_size, tile.tile_m, tile.tile_n,
                                         _round_up(tile.tile_k, sparse24.K_ALIGNMENT), tile.k_unroll, tile.group_m)
            shapes = {"aligned": (2 * tile.tile_m, 2 * tile.tile_n, 4 * tile.tile_k),
                      "ragged": (tile.tile_m + 7, 2 * tile.tile_n + 5, 3 * tile.tile_k + 32)}
            for shape_name, (m, n, k) in shapes.items():
                a, b = kernels.exact_inputs(types_key, m, n, k, seed=5 * m + n)
                cases.append(sparse24_case(f"{dtype} {shape_name} {m}x{n}x{k} tile {tile.label()}", dtype, tile,
                                           a, b))
                if shape_name == "ragged":
                    cases.append(sparse24_case(f"{dtype} {shape_name} {m}x{n}x{k} column-major B", dtype, tile,
                                               a, b, b_column_major=True))
                # Interleaved layouts: blocks of 128 columns (K ends inside a padded block) and of 32.
                for meta_words in (4, 1):
                    cases.append(sparse24_case(f"{dtype} {shape_name} {m}x{n}x{k} interleaved {meta_words}",
                                               dtype, tile, a, b, b_column_major=shape_name == "ragged",
                                               meta_words=meta_words))
        return cases
