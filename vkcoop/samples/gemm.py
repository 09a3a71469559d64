"""The GEMM samples: each kernel of :mod:`vkcoop.gemm` checked bit for bit against an exact reference.

* ``coopmat2-gemm``: workgroup-scope coopmat2 GEMM with tensor layouts and flexible dimensions
  (``shaders/gemm/coopmat2_gemm.comp``) for fp16->fp16, fp16->fp32, bf16->fp32 and s8->s32. Tile sizes come from
  the driver's flexible-dimensions table (:func:`vkcoop.gemm.choose_workgroup_tile`); problem sizes are
  deliberately not tile multiples (edge tiles use Constant clamp, stores drop what falls outside), and
  column-major B goes through a transposing tensor view.
* ``khr-shmem-gemm``: the coopmat1 baseline, subgroup-scope KHR matrices through shared memory.
* ``sparse24-gemm``: the 2:4 decode path, A from (values, metadata) through a decode function.

A case is the kernel's own :class:`vkcoop.gemm.Launch` (what the benchmark dispatches too) with its output
compared to an exact reference (:func:`vkcoop.gemm.exact_inputs`): every kernel must reproduce the float64 /
int64 product converted to the result type bit for bit, whatever its summation order.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from .. import gemm
from .. import sparse as sparse24
from ..gemm.tiles import round_up
from .caps import BFLOAT16, INT8, DeviceCaps, Requirements, SampleInputError
from .case import Binding, Case
from .runner import Sample, register

_ALL_TYPE_FEATURES = tuple(dict.fromkeys(f for t in gemm.GEMM_TYPES.values() for f in t.features))
COOPMAT2_GEMM_REQUIRES = Requirements(
    extensions=("VK_KHR_cooperative_matrix", "VK_NV_cooperative_matrix2"),
    features=gemm.types.COOPMAT2_GEMM_FEATURES + _ALL_TYPE_FEATURES) + INT8 + BFLOAT16
# The sample dispatches the KHR kernel without the bench's required subgroup size of 32 (as it always has), so
# it needs no subgroupSizeControl.
KHR_GEMM_REQUIRES = Requirements(extensions=("VK_KHR_cooperative_matrix",),
                                 features=gemm.types.KHR_CORE_FEATURES + _ALL_TYPE_FEATURES) + INT8 + BFLOAT16
SPARSE_GEMM_REQUIRES = COOPMAT2_GEMM_REQUIRES + Requirements(features=gemm.types.SPARSE24_FEATURES)


def launch_case(name: str, launch: gemm.Launch, expected: dict, dispatch: int = 0) -> Case:
    """A Case from one dispatch of a kernel's Launch: its inputs uploaded, its outputs compared with
    ``expected`` (buffer name -> array)."""
    d = launch.dispatches[dispatch]
    bindings = []
    for buffer in d.buffers:
        if buffer in launch.inputs:
            bindings.append(Binding(buffer, launch.inputs[buffer]))
        else:
            shape, dtype = launch.outputs[buffer]
            bindings.append(Binding(buffer, np.zeros(shape, dtype), expected=expected[buffer]))
    return Case(name, d.shader, dict(d.defines), bindings, specialization=dict(d.specialization), groups=d.groups,
                push=d.push)


def _as_sample_error(name: str, error: Exception) -> SampleInputError:
    return SampleInputError(f"case {name}: {error}")


def _check_pair(name: str, t: gemm.GemmTypes, a, b) -> None:
    for label, array in (("A", a), ("B", b)):
        if not isinstance(array, np.ndarray) or array.ndim != 2:
            raise SampleInputError(f"case {name}: {label} must be a 2-D numpy array")
        if array.dtype != t.input_dtype:
            raise SampleInputError(f"case {name}: {label} has dtype {array.dtype}; {t.key} takes {t.input_dtype}")
    if b.shape[0] != a.shape[1]:
        raise SampleInputError(f"case {name}: A is {a.shape} and B is {b.shape}; B must be [K][N] with "
                               f"K={a.shape[1]}")


# --------------------------------------------------------------------------- coopmat2-gemm
def coopmat2_gemm_case(name: str, types, tile: gemm.WorkgroupTile, a: np.ndarray, b: np.ndarray, *,
                       b_column_major: bool = False) -> Case:
    """One dispatch of coopmat2_gemm.comp: C = A @ B (B given [K][N]; stored [N][K] when column-major)."""
    t = gemm.gemm_types(types)
    _check_pair(name, t, a, b)
    try:
        kernel = gemm.CoopMat2Kernel(t, tile, b_column_major=b_column_major)
        launch = kernel.launch(a, kernel.store_b(b))
    except gemm.GemmInputError as error:
        raise _as_sample_error(name, error) from None
    return launch_case(name, launch, {"C": gemm.reference_gemm(a, b, t.output_dtype)})


def split_k_partials(a: np.ndarray, b: np.ndarray, tile: gemm.WorkgroupTile, dtype=np.float32) -> np.ndarray:
    """[SPLIT_K][M][N] of ``dtype``: the exact product of each K slice, as the split-K kernels cut K (whole TILE_K
    steps)."""
    k = a.shape[1]
    chunk = -(-(-(-k // tile.split_k)) // tile.tile_k) * tile.tile_k
    planes = []
    for split in range(tile.split_k):
        begin, end = min(k, split * chunk), min(k, split * chunk + chunk)
        planes.append((a[:, begin:end].astype(np.float64) @ b[begin:end].astype(np.float64)).astype(dtype))
    return np.stack(planes)


def slice_order_sum(planes: np.ndarray) -> np.ndarray:
    """The planes added from zero in slice order in their own type, as split_sum.glsl adds them."""
    total = np.zeros(planes.shape[1:], planes.dtype)
    for plane in planes:
        total = total + plane
    return total


def coopmat2_split_k_case(name: str, types, tile: gemm.WorkgroupTile, a: np.ndarray, b: np.ndarray) -> Case:
    """The split-K GEMM dispatch: the [SPLIT_K][M][N] partial sums (written through a 3-D tensor layout, one plane
    per slice), compared with each slice's exact product, and C, which the last slice of each tile adds up
    (split_sum.glsl, in the result type), and the arrival counts, which the last slice sets back to zero."""
    t = gemm.gemm_types(types)
    if tile.split_k < 2:
        raise SampleInputError(f"case {name}: split-K needs split_k >= 2")
    launch = gemm.CoopMat2Kernel(t, tile).launch(a, b)
    planes = split_k_partials(a, b, tile, t.output_dtype)
    expected = {"partial sums": planes, "C": slice_order_sum(planes),
                "arrivals": np.zeros(*launch.outputs["arrivals"])}
    return launch_case(name, launch, expected)


def edge_shapes(tile, elements_per_16_bytes: int) -> dict[str, tuple[int, int, int]]:
    """Problem sizes around a tile: all tile multiples; ragged everything (unaligned strides, so every tile
    takes the clamped path); and ragged M/N with an aligned K that is not a TILE_K multiple (interior tiles
    take the fast path, then a clamped K tail)."""
    tm, tn, tk = tile.tile_m, tile.tile_n, tile.tile_k
    aligned_tail = round_up(tk // 2 + 1, elements_per_16_bytes)
    return {"aligned": (2 * tm, 2 * tn, 4 * tk),
            "ragged": (2 * tm + 17, tn + 9, 2 * tk + 5),
            "mixed": (tm + 1, 2 * tn + 3, 3 * tk + aligned_tail)}


def _choose_tile(sample: str, flexible, types, target, max_dimension=None) -> gemm.WorkgroupTile:
    try:
        return gemm.choose_workgroup_tile(flexible, types, target=target, max_dimension=max_dimension)
    except gemm.GemmInputError as error:
        raise SampleInputError(f"{sample}: {error}") from None


class _TiledGemmSample(Sample):
    """A GEMM sample whose tile comes from the flexible-dimensions table: per type combination a tile, per
    problem shape around it the cases of :meth:`shape_cases`."""
    #: target tile (M, N, K), rounded up to the chosen granularity row's multiples.
    target_tile = (128, 128, 32)

    def type_combinations(self) -> list[tuple[str, gemm.GemmTypes]]:
        raise NotImplementedError

    def tile_for(self, caps: DeviceCaps, types) -> gemm.WorkgroupTile:
        return _choose_tile(self.name, caps.flexible, types, self.target_tile, caps.max_flexible_dimension or None)

    def shapes(self, tile: gemm.WorkgroupTile, types) -> dict:
        raise NotImplementedError

    def shape_cases(self, caps, key, types, tile, shape_name, shape) -> list[Case]:
        raise NotImplementedError

    def cases(self, caps: DeviceCaps) -> list[Case]:
        cases = []
        for key, types in self.type_combinations():
            tile = self.tile_for(caps, types)
            for shape_name, shape in self.shapes(tile, types).items():
                cases += self.shape_cases(caps, key, types, tile, shape_name, shape)
        return cases


@register
class CoopMat2GemmSample(_TiledGemmSample):
    name = "coopmat2-gemm"
    description = ("workgroup-scope coopmat2 GEMM with tensor layouts and flexible dimensions: fp16->fp16, "
                   "fp16->fp32, bf16->fp32, s8->s32; any M, N, K (Constant clamp on edge tiles); tile sizes "
                   "from the flexible-dimensions table; column-major B through a tensor view")
    requires = COOPMAT2_GEMM_REQUIRES
    order = 60

    def type_combinations(self):
        return list(gemm.GEMM_TYPES.items())

    def shapes(self, tile, types) -> dict:
        return edge_shapes(tile, types.elements_per_16_bytes)

    def shape_cases(self, caps, key, types, tile, shape_name, shape) -> list[Case]:
        m, n, k = shape
        a, b = gemm.exact_inputs(types, m, n, k, seed=m * 7 + n)
        label = f"{key} {shape_name} {m}x{n}x{k}"
        cases = [coopmat2_gemm_case(f"{label} tile {tile.label()}", types, tile, a, b)]
        if shape_name == "mixed":
            cases.append(coopmat2_gemm_case(f"{label} column-major B", types, tile, a, b, b_column_major=True))
        if shape_name == "ragged":
            a3, b3 = gemm.exact_inputs(types, m, n, 7 * tile.tile_k + 5, seed=m)
            cases.append(coopmat2_split_k_case(f"{key} {shape_name} split-K 3 summed by the last slice", types,
                                               replace(tile, split_k=3), a3, b3))
        return cases


# --------------------------------------------------------------------------- khr-shmem-gemm
def khr_gemm_case(name: str, types, tile: gemm.SubgroupTile, a: np.ndarray, b: np.ndarray) -> Case:
    t = gemm.gemm_types(types)
    if a.dtype != t.input_dtype or b.dtype != t.input_dtype:
        raise SampleInputError(f"case {name}: A and B must be {t.input_dtype}, got {a.dtype} and {b.dtype}")
    try:
        launch = gemm.KhrKernel(t, tile).launch(a, b)
    except gemm.GemmInputError as error:
        raise _as_sample_error(name, error) from None
    return launch_case(name, launch, {"C": gemm.reference_gemm(a, b, t.output_dtype)})


@register
class KhrSharedMemoryGemmSample(Sample):
    name = "khr-shmem-gemm"
    description = ("coopmat1 baseline: subgroup-scope VK_KHR_cooperative_matrix GEMM through shared memory "
                   "(shape from the KHR table), fp16->fp16, fp16->fp32, bf16->fp32, s8->s32, ragged M; one shared "
                   "copy and double-buffered with grouped raster")
    requires = KHR_GEMM_REQUIRES
    order = 70

    def cases(self, caps: DeviceCaps):
        for key, types in gemm.GEMM_TYPES.items():
            try:   # the one-copy 2x4 tile, and the double-buffered 2x2 tile with grouped raster (bench's default)
                tiles = (gemm.choose_subgroup_tile(caps.khr, types),
                         gemm.choose_subgroup_tile(caps.khr, types, subgroups=(2, 2), stages=2, group_m=8))
            except gemm.GemmInputError as error:
                raise SampleInputError(f"{self.name}: {error}") from None
            for tile in tiles:
                yield from self._tile_cases(key, types, tile)

    @staticmethod
    def _tile_cases(key, types, tile):
        """Whole tiles (the ALIGNED pipeline) and ragged M, N, K (the bounds-tested one)."""
        e = types.elements_per_16_bytes
        shapes = {"aligned": (2 * tile.tile_m, 2 * tile.tile_n, 4 * tile.tile_k),
                  "ragged": (2 * tile.tile_m + 17, tile.tile_n + 2 * e, 3 * tile.tile_k + e)}
        for shape_name, (m, n, k) in shapes.items():
            a, b = gemm.exact_inputs(types, m, n, k, seed=m + 3 * n)
            yield khr_gemm_case(f"{key} {shape_name} {m}x{n}x{k} {tile.label()}", types, tile, a, b)


# --------------------------------------------------------------------------- sparse24-gemm
def sparse24_case(name: str, dtype: str, tile: gemm.WorkgroupTile, a: np.ndarray, b: np.ndarray, *,
                  b_column_major: bool = False, meta_words: int = 0) -> Case:
    """C (fp32) = prune_2to4(A) @ B, with A handed to the shader compressed (vkcoop.sparse format), as two
    bindings (``meta_words`` 0) or regrouped into interleaved blocks (:func:`vkcoop.gemm.interleave_2to4`)."""
    if dtype not in gemm.SPARSE24_TYPES:
        raise SampleInputError(f"case {name}: dtype {dtype!r} is not one of {', '.join(gemm.SPARSE24_TYPES)}")
    try:
        kernel = gemm.Sparse24Kernel(dtype, tile, b_column_major=b_column_major, meta_words=meta_words)
    except gemm.GemmInputError as error:
        raise _as_sample_error(name, error) from None
    _check_pair(name, kernel.types, a, b)
    if a.shape[1] % sparse24.K_ALIGNMENT:
        raise SampleInputError(f"case {name}: K={a.shape[1]} must be a multiple of {sparse24.K_ALIGNMENT} for the "
                               "2:4 path")
    compressed = sparse24.compress_2to4(a)
    expected = gemm.sparse24_reference(compressed.values, compressed.metadata, b)
    launch = kernel.launch(compressed.values, compressed.metadata, kernel.store_b(b))
    return launch_case(name, launch, {"C": expected})


@register
class Sparse24GemmSample(_TiledGemmSample):
    name = "sparse24-gemm"
    description = ("2:4 structured sparsity on Vulkan: A loaded from (values, metadata) by a "
                   "coopMatLoadTensorNV decode function (buffer_reference blocks of 1x32, or interleaved "
                   "metadata+values blocks of 32/128 columns), fp16/bf16 in, fp32 out; checked against the fp32 "
                   "product of the pruned A")
    requires = SPARSE_GEMM_REQUIRES
    order = 75
    target_tile = (128, 128, 64)

    def type_combinations(self):
        return [(dtype, gemm.accumulating_types(dtype)) for dtype in gemm.SPARSE24_TYPES]

    def tile_for(self, caps: DeviceCaps, types) -> gemm.WorkgroupTile:
        tile = _choose_tile(self.name, caps.flexible, types, self.target_tile)
        return replace(tile, tile_k=round_up(tile.tile_k, sparse24.K_ALIGNMENT))

    def shapes(self, tile, types) -> dict:
        return {"aligned": (2 * tile.tile_m, 2 * tile.tile_n, 4 * tile.tile_k),
                "ragged": (tile.tile_m + 7, 2 * tile.tile_n + 5, 3 * tile.tile_k + 32)}

    def shape_cases(self, caps, dtype, types, tile, shape_name, shape) -> list[Case]:
        m, n, k = shape
        a, b = gemm.exact_inputs(types, m, n, k, seed=5 * m + n)
        label, ragged = f"{dtype} {shape_name} {m}x{n}x{k}", shape_name == "ragged"
        cases = [sparse24_case(f"{label} tile {tile.label()}", dtype, tile, a, b)]
        if ragged:
            cases.append(sparse24_case(f"{label} column-major B", dtype, tile, a, b, b_column_major=True))
        # Interleaved layouts: blocks of 128 columns (K ends inside a padded block) and of 32.
        for meta_words in (4, 1):
            cases.append(sparse24_case(f"{label} interleaved {meta_words}", dtype, tile, a, b,
                                       b_column_major=ragged, meta_words=meta_words))
        cases.append(sparse24_expansion_case(f"{label} expanded to dense (first pass of the expand path)", dtype, a))
        return cases


def sparse24_expansion_case(name: str, dtype: str, a: np.ndarray) -> Case:
    """The first dispatch of the expand path (vkcoop.gemm.expanded): A written dense from its 2:4 form, bit for
    bit the pruned A (the second dispatch is the dense kernel that ``coopmat2-gemm`` checks)."""
    compressed = sparse24.compress_2to4(a)
    dense = gemm.CoopMat2Kernel(gemm.accumulating_types(dtype), gemm.WorkgroupTile(256, 128, 128, 32))
    launch = gemm.ExpandedSparse24Kernel(dtype, dense).launch(compressed.values, compressed.metadata,
                                                              np.zeros((a.shape[1], 8), a.dtype))
    expected = sparse24.decompress_2to4(compressed).view(np.uint16)
    return launch_case(name, launch, {"A": expected}, dispatch=0)
