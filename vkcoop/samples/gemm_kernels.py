"""The GEMM kernels behind samples 6 and 7 and the Vulkan paths of ``vkcoop bench sparse``.

Three shaders (``shaders/gemm/``), each one SPIR-V module per element type, tile sizes as specialization
constants (the approach of NVIDIA's vk_cooperative_matrix_perf; the shaders are vkcoop's own):

* :class:`CoopMat2Gemm` -- ``coopmat2_gemm.comp``: workgroup-scope VK_NV_cooperative_matrix2 matrices loaded
  through tensor layouts; any M, N, K (Constant clamp on edge tiles); optional column-major B through a
  transposing tensor view. Tile sizes are multiples of a flexible-dimensions granularity row
  (vkGetPhysicalDeviceCooperativeMatrixFlexibleDimensionsPropertiesNV) of matching types, scope and
  workgroupInvocations: :func:`choose_workgroup_tile`.
* :class:`KhrSharedMemoryGemm` -- ``khr_shmem_gemm.comp``: subgroup-scope VK_KHR_cooperative_matrix matrices
  (a shape from vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR) fed from explicit shared memory.
* :class:`Sparse24Gemm` -- ``coopmat2_sparse24.comp``: A in vkcoop's 2:4 format (:mod:`vkcoop.sparse`) expanded
  by a coopMatLoadTensorNV decode function; fp16/bf16 in, fp32 out. A arrives either as the format's two arrays or
  regrouped once on the host into interleaved (metadata, values) blocks (:func:`interleave_2to4`).

:class:`CoopMat2Gemm` also has subgroup-scope and two-accumulator variants (``WorkgroupTile.subgroups_m`` /
``n_parts``); docs/gemm-notes.md records what each measured on the H200.

Each kernel object owns its pipeline; :meth:`run` does one checked GEMM from numpy arrays, :meth:`bind` +
:meth:`time` keep inputs on the GPU and time repeated dispatches with GPU timestamps.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from .. import sparse as sparse24
from ..paths import shader_path

try:
    import ml_dtypes

    BF16 = np.dtype(ml_dtypes.bfloat16)
except ImportError:  # pragma: no cover - ml_dtypes is a dependency
    BF16 = None

# VkComponentTypeKHR (Vulkan spec, "VkComponentTypeKHR"); bf16 from VK_KHR_shader_bfloat16.
COMPONENT_FLOAT16, COMPONENT_FLOAT32, COMPONENT_SINT8, COMPONENT_SINT32 = 0, 1, 3, 5
COMPONENT_BFLOAT16 = 1000141000
# VkScopeKHR
SCOPE_WORKGROUP, SCOPE_SUBGROUP = 2, 3
SUBGROUP_SIZE = 32


class GemmInputError(ValueError):
    """A GEMM was handed arrays, shapes or tile sizes it cannot take. Raised before anything is dispatched."""


@dataclass(frozen=True)
class GemmTypes:
    """One element-type combination: A/B type -> accumulator/result type."""
    key: str                    # "fp16->fp32"
    define: str                 # GEMM_TYPES value in gemm_types.glsl
    input_dtype: np.dtype
    output_dtype: np.dtype
    input_component: int        # VkComponentTypeKHR of A and B
    output_component: int       # of C and Result
    features: tuple = ()        # device features the element types need

    @property
    def bytes_per_input(self) -> int:
        return self.input_dtype.itemsize

    @property
    def elements_per_16_bytes(self) -> int:
        return 16 // self.input_dtype.itemsize


_F16_FEATURES = ("shaderFloat16", "storageBuffer16BitAccess")
GEMM_TYPES: dict[str, GemmTypes] = {t.key: t for t in (
    GemmTypes("fp16->fp16", "F16_F16", np.dtype(np.float16), np.dtype(np.float16), COMPONENT_FLOAT16,
              COMPONENT_FLOAT16, _F16_FEATURES),
    GemmTypes("fp16->fp32", "F16_F32", np.dtype(np.float16), np.dtype(np.float32), COMPONENT_FLOAT16,
              COMPONENT_FLOAT32, _F16_FEATURES),
    GemmTypes("bf16->fp32", "BF16_F32", BF16, np.dtype(np.float32), COMPONENT_BFLOAT16, COMPONENT_FLOAT32,
              ("shaderFloat16", "shaderBFloat16Type", "shaderBFloat16CooperativeMatrix")),
    GemmTypes("s8->s32", "S8_S32", np.dtype(np.int8), np.dtype(np.int32), COMPONENT_SINT8, COMPONENT_SINT32,
              ("shaderInt8", "storageBuffer8BitAccess")),
)}

#: Features every GEMM kernel here needs besides the element types'.
COOPMAT2_GEMM_FEATURES = ("cooperativeMatrix", "cooperativeMatrixWorkgroupScope",
                          "cooperativeMatrixFlexibleDimensions", "cooperativeMatrixTensorAddressing",
                          "vulkanMemoryModel", "maintenance4")
SPARSE24_FEATURES = COOPMAT2_GEMM_FEATURES + ("cooperativeMatrixBlockLoads", "bufferDeviceAddress", "shaderInt16")
KHR_GEMM_FEATURES = ("cooperativeMatrix", "vulkanMemoryModel", "subgroupSizeControl", "computeFullSubgroups",
                     "maintenance4")
# maintenance4: the shaders size their workgroups with local_size_x_id (ExecutionMode LocalSizeId).


def gemm_types(key) -> GemmTypes:
    """Look a type combination up by key ("fp16->fp32", ...) or pass a GemmTypes through."""
    if isinstance(key, GemmTypes):
        return key
    try:
        return GEMM_TYPES[key]
    except KeyError:
        raise GemmInputError(f"types={key!r} is not one of {', '.join(GEMM_TYPES)}") from None


def features_for(kernel: str, types) -> list[str]:
    """Device features a kernel ("coopmat2", "khr", "sparse24") needs for a type combination."""
    base = {"coopmat2": COOPMAT2_GEMM_FEATURES, "khr": KHR_GEMM_FEATURES, "sparse24": SPARSE24_FEATURES}[kernel]
    return list(dict.fromkeys(base + gemm_types(types).features))


# ----------------------------------------------------------------------------------------------------------
# tile selection
@dataclass(frozen=True)
class WorkgroupTile:
    """Launch parameters of the workgroup-scope kernels (spec constants 0..6 of coopmat2_gemm.comp)."""
    workgroup_size: int
    tile_m: int
    tile_n: int
    tile_k: int
    k_unroll: int = 2
    group_m: int = 8
    split_k: int = 1   # > 1: K is cut into slices whose fp32 partial sums a second dispatch adds up
    #: 0: one workgroup-scope matrix per workgroup; > 0: subgroup-scope matrices, this many subgroups along M
    #: (the rest along N), each owning (tile_m / subgroups_m) x (tile_n / subgroups_n). coopmat2_gemm.comp only.
    subgroups_m: int = 0
    n_parts: int = 1   # accumulators along N sharing one A load per K step (coopmat2_gemm.comp only)

    @property
    def subgroup_scope(self) -> bool:
        return self.subgroups_m > 0

    @property
    def subgroups_n(self) -> int:
        return self.workgroup_size // SUBGROUP_SIZE // self.subgroups_m if self.subgroup_scope else 1

    def matrix_shape(self) -> tuple[int, int, int]:
        """(M, N, K) of one cooperative matrix multiply: what the granularity rules apply to."""
        if self.subgroup_scope:
            return (self.tile_m // self.subgroups_m, self.tile_n // self.subgroups_n // self.n_parts, self.tile_k)
        return (self.tile_m, self.tile_n // self.n_parts, self.tile_k)

    def label(self) -> str:
        split = f"s{self.split_k}" if self.split_k > 1 else ""
        scope = f"sg{self.subgroups_m}" if self.subgroup_scope else ""
        parts = f"p{self.n_parts}" if self.n_parts > 1 else ""
        return f"{self.tile_m}x{self.tile_n}x{self.tile_k}/{self.workgroup_size}u{self.k_unroll}{split}{scope}{parts}"

    def defines(self) -> dict:
        """Compile-time defines of coopmat2_gemm.comp beyond GEMM_TYPES."""
        return {"SCOPE": "SUBGROUP" if self.subgroup_scope else "WORKGROUP", "N_PARTS": str(self.n_parts)}

    def specialization(self, b_column_major: bool) -> dict:
        """Specialization constants 0..8 of coopmat2_gemm.comp (0..7 of coopmat2_sparse24.comp)."""
        constants = {0: self.workgroup_size, 1: self.tile_m, 2: self.tile_n, 3: self.tile_k,
                     4: bool(b_column_major), 5: self.k_unroll, 6: self.group_m, 7: self.split_k}
        if self.subgroup_scope:
            constants[8] = self.subgroups_m
        return constants


def granularity_rows(flexible_properties, types, scope: int = SCOPE_WORKGROUP) -> list[dict]:
    """Rows of the flexible-dimensions table whose A/B/C/Result types and scope match ``types``."""
    t = gemm_types(types)
    return [row for row in flexible_properties
            if row["AType"] == t.input_component and row["BType"] == t.input_component
            and row["CType"] == t.output_component and row["ResultType"] == t.output_component
            and row["scope"] == scope and not row.get("saturatingAccumulation", 0)]


def _round_up(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple


def choose_workgroup_tile(flexible_properties, types, *, invocations: int | None = None,
                          target=(128, 128, 32), k_unroll: int = 2, group_m: int = 8,
                          max_dimension: int | None = None) -> WorkgroupTile:
    """Tile sizes for the workgroup-scope kernels from the driver's flexible-dimensions table.

    Picks the granularity row with ``workgroupInvocations == invocations`` (default: the largest the driver
    lists for these types) and rounds ``target`` (M, N, K) up to multiples of its M/N/K granularity. Raises
    :class:`GemmInputError` when no row matches (the device cannot run these types at workgroup scope).
    """
    t = gemm_types(types)
    rows = granularity_rows(flexible_properties, t)
    if not rows:
        raise GemmInputError(f"the device lists no workgroup-scope flexible-dimensions row for {t.key}")
    if invocations is None:
        invocations = max(row["workgroupInvocations"] for row in rows)
    matching = [row for row in rows if row["workgroupInvocations"] == invocations]
    if not matching:
        listed = sorted({row["workgroupInvocations"] for row in rows})
        raise GemmInputError(f"no flexible-dimensions row for {t.key} with workgroupInvocations={invocations} "
                             f"(listed: {listed})")
    row = matching[0]
    tile = [_round_up(max(1, int(v)), int(g)) for v, g in
            zip(target, (row["MGranularity"], row["NGranularity"], row["KGranularity"]))]
    if max_dimension is not None and max(tile) > max_dimension:
        raise GemmInputError(f"tile {tile} exceeds cooperativeMatrixFlexibleDimensionsMaxDimension "
                             f"({max_dimension})")
    return WorkgroupTile(invocations, tile[0], tile[1], tile[2], k_unroll=k_unroll, group_m=group_m)


def check_workgroup_tile(flexible_properties, types, tile: WorkgroupTile) -> None:
    """Raise GemmInputError unless each matrix of ``tile`` is a multiple of a matching granularity row.

    Workgroup scope: the row's workgroupInvocations must equal workgroup_size. Subgroup scope
    (``subgroups_m`` > 0): a subgroup-scope row, and the tile must divide evenly among the subgroups.
    """
    if tile.n_parts not in (1, 2):
        raise GemmInputError(f"n_parts={tile.n_parts}: coopmat2_gemm.comp has variants for 1 or 2 accumulators")
    scope = SCOPE_WORKGROUP
    if tile.subgroup_scope:
        scope = SCOPE_SUBGROUP
        subgroups = tile.workgroup_size // SUBGROUP_SIZE
        if tile.workgroup_size % SUBGROUP_SIZE or subgroups % tile.subgroups_m:
            raise GemmInputError(f"tile {tile.label()}: workgroup_size {tile.workgroup_size} must be whole "
                                 f"subgroups of {SUBGROUP_SIZE}, a multiple of subgroups_m={tile.subgroups_m}")
        if tile.tile_m % tile.subgroups_m or tile.tile_n % (tile.subgroups_n * tile.n_parts):
            raise GemmInputError(f"tile {tile.label()}: {tile.tile_m}x{tile.tile_n} does not divide among "
                                 f"{tile.subgroups_m}x{tile.subgroups_n} subgroups and {tile.n_parts} parts")
    elif tile.tile_n % tile.n_parts:
        raise GemmInputError(f"tile {tile.label()}: tile_n must be a multiple of n_parts={tile.n_parts}")
    m, n, k = tile.matrix_shape()
    for row in granularity_rows(flexible_properties, types, scope):
        invocations_match = scope == SCOPE_SUBGROUP or row["workgroupInvocations"] == tile.workgroup_size
        if (invocations_match and m % row["MGranularity"] == 0 and n % row["NGranularity"] == 0
                and k % row["KGranularity"] == 0):
            return
    what = "subgroup-scope matrix" if tile.subgroup_scope else "tile"
    raise GemmInputError(f"{what} {m}x{n}x{k} of {tile.label()} for {gemm_types(types).key} matches no "
                         "flexible-dimensions row (sizes must be multiples of MGranularity/NGranularity/KGranularity "
                         "of a row of that scope" + ("" if tile.subgroup_scope else
                                                     " with workgroupInvocations == workgroup_size") + ")")


@dataclass(frozen=True)
class SubgroupTile:
    """Launch parameters of the KHR shared-memory kernel (spec constants 0..9 of khr_shmem_gemm.comp)."""
    lm: int
    ln: int
    lk: int
    tile_m: int = 128
    tile_n: int = 128
    tile_k: int = 32
    subgroups_m: int = 2
    subgroups_n: int = 4

    @property
    def workgroup_size(self) -> int:
        return SUBGROUP_SIZE * self.subgroups_m * self.subgroups_n

    def label(self) -> str:
        return (f"{self.tile_m}x{self.tile_n}x{self.tile_k} of {self.lm}x{self.ln}x{self.lk} "
                f"({self.subgroups_m}x{self.subgroups_n} subgroups)")


def choose_subgroup_tile(khr_properties, types, *, tile=(128, 128, None), subgroups=(2, 4)) -> SubgroupTile:
    """The largest subgroup-scope KHR shape for ``types`` and a shared-memory tile built from it."""
    t = gemm_types(types)
    shapes = [row for row in khr_properties
              if row["AType"] == t.input_component and row["BType"] == t.input_component
              and row["CType"] == t.output_component and row["ResultType"] == t.output_component
              and row["scope"] == SCOPE_SUBGROUP and not row.get("saturatingAccumulation", 0)]
    # The shared tiles are copied 16 bytes at a time: N and K of a shape must be 16-byte multiples.
    shapes = [s for s in shapes if s["NSize"] % t.elements_per_16_bytes == 0
              and s["KSize"] % t.elements_per_16_bytes == 0]
    if not shapes:
        raise GemmInputError(f"the device lists no subgroup-scope KHR cooperative matrix shape for {t.key}")
    best = max(shapes, key=lambda s: (s["MSize"] * s["NSize"] * s["KSize"], s["NSize"]))
    tile_k = tile[2] if tile[2] else max(best["KSize"], 2 * best["KSize"] if t.bytes_per_input == 2 else best["KSize"])
    result = SubgroupTile(best["MSize"], best["NSize"], best["KSize"], tile[0], tile[1], tile_k, *subgroups)
    check_subgroup_tile(result, t)
    return result


def check_subgroup_tile(tile: SubgroupTile, types) -> None:
    t = gemm_types(types)
    e = t.elements_per_16_bytes
    problems = []
    if tile.tile_m % (tile.subgroups_m * tile.lm) or tile.tile_n % (tile.subgroups_n * tile.ln):
        problems.append("tile_m/tile_n must be multiples of subgroups_m*lm / subgroups_n*ln")
    if tile.tile_k % tile.lk or tile.tile_k % e:
        problems.append(f"tile_k must be a multiple of lk and of {e}")
    if (tile.tile_m * tile.tile_k // e) % tile.workgroup_size or (tile.tile_k * tile.tile_n // e) % tile.workgroup_size:
        problems.append("each invocation must copy a whole number of 16-byte vectors of the A and B tiles")
    if problems:
        raise GemmInputError(f"KHR tile {tile.label()} for {t.key}: " + "; ".join(problems))


# ----------------------------------------------------------------------------------------------------------
# inputs and reference
def exact_inputs(types, m: int, n: int, k: int, *, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """A [M][K] and B [K][N] whose product every kernel computes exactly, in any summation order.

    Floats come from {-0.5, 0, 0.5, 1}: products are multiples of 1/4, and while every partial sum stays below
    2048 quarter-steps (|sum| <= K < 512 for fp16 results), fp16 and fp32 hold them exactly. Integers come from
    [-3, 3]. Raises GemmInputError if K is too large for that guarantee.
    """
    t = gemm_types(types)
    rng = np.random.default_rng(seed)
    if t.input_dtype.kind == "i":
        a = rng.integers(-3, 4, size=(m, k)).astype(t.input_dtype)
        b = rng.integers(-3, 4, size=(k, n)).astype(t.input_dtype)
        return a, b
    limit = 512 if t.output_dtype == np.float16 else 1 << 21
    if k >= limit:
        raise GemmInputError(f"K={k} is too large for exact {t.key} results (|sum| must stay below {limit})")
    grid = np.array([-0.5, 0.0, 0.5, 1.0], dtype=np.float32)
    a = rng.choice(grid, size=(m, k)).astype(t.input_dtype)
    b = rng.choice(grid, size=(k, n)).astype(t.input_dtype)
    return a, b


def reference_gemm(a: np.ndarray, b: np.ndarray, output_dtype) -> np.ndarray:
    """A @ B computed exactly (float64 / int64) and converted to the result type."""
    if a.dtype.kind == "i":
        return (a.astype(np.int64) @ b.astype(np.int64)).astype(output_dtype)
    return (a.astype(np.float64) @ b.astype(np.float64)).astype(output_dtype)


def first_mismatches(result: np.ndarray, expected: np.ndarray, limit: int = 5) -> list[dict]:
    """Up to ``limit`` differing elements (bitwise for floats: -0.0 vs 0.0 counts as equal)."""
    differ = np.argwhere(result != expected) if result.dtype.kind != "f" else np.argwhere(
        ~((result == expected) | (np.isnan(result.astype(np.float32)) & np.isnan(expected.astype(np.float32)))))
    return [{"index": tuple(int(i) for i in idx), "got": float(result[tuple(idx)]),
             "expected": float(expected[tuple(idx)])} for idx in differ[:limit]]


def _check_matrix(name: str, array, dtype, ndim: int = 2) -> np.ndarray:
    if not isinstance(array, np.ndarray):
        raise GemmInputError(f"{name} must be a numpy array, got {type(array).__name__}")
    if array.dtype != dtype:
        raise GemmInputError(f"{name} has dtype {array.dtype}; this kernel takes {dtype}")
    if array.ndim != ndim or 0 in array.shape:
        raise GemmInputError(f"{name} must be a non-empty {ndim}-D array, got shape {array.shape}")
    return np.ascontiguousarray(array)


def _spirv(relative: str, defines: dict) -> bytes:
    import spirv_tools

    from ..shaders import include_dirs
    return spirv_tools.compile(path=shader_path(relative), defines=defines, include_dirs=include_dirs())


#: Minimum wall time of the untimed warm-up. An idle H200 reports a low clock (345 MHz SM), and a warm-up of a
#: few 0.07 ms dispatches is over in ~1.5 ms. In one sweep a memory-bound kernel measured 0.24-0.35 ms instead of
#: 0.067 ms after the first configuration; that was not reproduced later, so this is a precaution against idle
#: clocks, not a proven fix (docs/gemm-notes.md, "Ordering effect").
WARMUP_SECONDS = 0.25


def _time_dispatches(device, dispatches, iterations: int, warmup: int, flush=None, name: str = "gemm",
                     warmup_seconds: float = WARMUP_SECONDS) -> list[float]:
    """GPU seconds of ``iterations`` runs of ``dispatches`` (a list of (pipeline, buffers, groups, push)) after
    at least ``warmup`` untimed ones that together last at least ``warmup_seconds`` of wall time (so the GPU
    clocks are up); each run's time is the sum of its dispatches' timestamps.

    ``flush`` = (pipeline, buffers, groups, push) of a dispatch run before every timed run (L2 flush); its own
    time is left out.
    """
    per_iteration = len(dispatches) + (1 if flush else 0)
    times = []
    batch = max(1, min(iterations, 64 // per_iteration))
    with device.command_buffer(timestamps=True, max_dispatches=batch * per_iteration,
                               name=f"{name} timing") as commands:
        with commands.recording():
            for _ in range(batch):
                if flush:
                    commands.dispatch(*flush, label="l2 flush")
                for pipeline, buffers, groups, push in dispatches:
                    commands.dispatch(pipeline, buffers, groups, push, label=pipeline.name)
        started = time.perf_counter()
        submitted = 0
        while submitted < -(-warmup // batch) or time.perf_counter() - started < warmup_seconds:
            commands.submit()
            submitted += 1
        skip = 1 if flush else 0
        while len(times) < iterations:
            commands.submit()
            ns = commands.dispatch_times_ns()
            for i in range(batch):
                run = ns[i * per_iteration + skip:(i + 1) * per_iteration]
                times.append(sum(run) * 1e-9)
    return times[:iterations]


class L2Flush:
    """A compute dispatch that writes a buffer larger than the L2 cache, run before each timed GEMM."""

    def __init__(self, device, megabytes: int = 256):
        words = megabytes * (1 << 20) // 4
        self.buffer = device.empty((words,), np.uint32, name="l2 flush")
        self.pipeline = device.pipeline(_spirv("gemm/l2_flush.comp", {}), name="l2_flush")
        self.groups = (min(words // 256, 65535), 1, 1)
        self.push = (words,)

    def dispatch_args(self):
        return (self.pipeline, [self.buffer], self.groups, self.push)

    def close(self):
        self.pipeline.close()
        self.buffer.close()


# ----------------------------------------------------------------------------------------------------------
# kernels
@dataclass
class _Bound:
    dispatches: list          # [(pipeline, buffers, groups, push)], run in order
    shape: tuple
    output: object = None
    owned: list = field(default_factory=list)


class _Kernel:
    name = "gemm"
    pipeline = None
    _bound: _Bound | None = None

    def time(self, iterations: int = 10, warmup: int = 3, flush: L2Flush | None = None,
             warmup_seconds: float = WARMUP_SECONDS) -> list[float]:
        """GPU seconds of each of ``iterations`` dispatches on the bound inputs, after a warm-up of at least
        ``warmup`` runs and ``warmup_seconds``."""
        if self._bound is None:
            raise GemmInputError(f"{self.name}: bind() inputs before timing")
        return _time_dispatches(self.device, self._bound.dispatches, iterations, warmup,
                                flush.dispatch_args() if flush else None, name=self.name,
                                warmup_seconds=warmup_seconds)

    def result(self) -> np.ndarray:
        """Run the bound GEMM once and read C back."""
        if self._bound is None:
            raise GemmInputError(f"{self.name}: bind() inputs first")
        with self.device.command_buffer(max_dispatches=len(self._bound.dispatches), name=self.name) as commands:
            with commands.recording():
                for pipeline, buffers, groups, push in self._bound.dispatches:
                    commands.dispatch(pipeline, buffers, groups, push, label=pipeline.name)
            commands.submit()
        return self._bound.output.read()

    def release(self):
        if self._bound is not None:
            for buffer in self._bound.owned:
                buffer.close()
        self._bound = None

    def close(self):
        self.release()
        for attribute in ("pipeline", "reduce_pipeline"):
            pipeline = getattr(self, attribute, None)
            if pipeline is not None:
                pipeline.close()
                setattr(self, attribute, None)

    def _split_k_setup(self, fp32_output: bool):
        """The reduce pipeline for split-K tiles (fp32 results only)."""
        self.reduce_pipeline = None
        if self.tile.split_k < 1:
            raise GemmInputError(f"split_k={self.tile.split_k} must be >= 1")
        if self.tile.split_k > 1:
            if not fp32_output:
                raise GemmInputError(f"split_k={self.tile.split_k} needs fp32 results (the partial sums are added "
                                     "in fp32)")
            self.reduce_pipeline = self.device.pipeline(_spirv("gemm/splitk_reduce.comp", {}), name="splitk_reduce")

    def _gemm_dispatches(self, inputs: list, m: int, n: int, tiles: int, push: tuple, output_dtype):
        """(dispatches, output buffer, owned buffers) for one GEMM, with a reduce pass when split_k > 1."""
        dev, split = self.device, self.tile.split_k
        c_buf = dev.empty((m, n), output_dtype, name="C")
        if split == 1:
            return [(self.pipeline, inputs + [c_buf], (tiles, 1, 1), push)], c_buf, inputs + [c_buf]
        partial = dev.empty((split, m, n), np.float32, name="partial sums")
        count = m * n
        reduce = (self.reduce_pipeline, [partial, c_buf], (min(-(-count // 256), 65535), 1, 1),
                  (np.uint32(count), np.uint32(split)))
        return ([(self.pipeline, inputs + [partial], (tiles, split, 1), push), reduce], c_buf,
                inputs + [partial, c_buf])

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class CoopMat2Gemm(_Kernel):
    """Workgroup-scope coopmat2 GEMM (sample 6's kernel): C = A @ B, any M, N, K."""

    def __init__(self, device, types, tile: WorkgroupTile, *, b_column_major: bool = False,
                 flexible_properties=None):
        self.device, self.types, self.tile = device, gemm_types(types), tile
        self.b_column_major = bool(b_column_major)
        if flexible_properties is None:
            flexible_properties = device.physical.flexible_dimensions_properties()
        check_workgroup_tile(flexible_properties, self.types, tile)
        self.name = f"coopmat2 {self.types.key} {tile.label()}{' Bcol' if b_column_major else ''}"
        self._split_k_setup(self.types.output_dtype == np.float32)
        spirv = _spirv("gemm/coopmat2_gemm.comp", {"GEMM_TYPES": self.types.define, **tile.defines()})
        # Subgroup scope splits the tile by gl_SubgroupID assuming 32-wide subgroups: ask for exactly that.
        subgroup = {"required_subgroup_size": SUBGROUP_SIZE, "full_subgroups": True} if tile.subgroup_scope else {}
        self.pipeline = device.pipeline(spirv, name=self.name, specialization=tile.specialization(b_column_major),
                                        **subgroup)

    def bind(self, a, b, *, b_is_transposed: bool | None = None):
        """Upload A [M][K] and B ([K][N], or [N][K] for a column-major-B kernel) and allocate C [M][N]."""
        t = self.types
        a = _check_matrix("A", a, t.input_dtype)
        b = _check_matrix("B", b, t.input_dtype)
        m, k = a.shape
        if self.b_column_major:
            n, kb = b.shape
        else:
            kb, n = b.shape
        if kb != k:
            layout = "[N][K] (column-major B)" if self.b_column_major else "[K][N]"
            raise GemmInputError(f"B has shape {b.shape}; with A {a.shape} it must be {layout} with K={k}")
        self.release()
        dev = self.device
        a_buf, b_buf = dev.upload(a, name="A"), dev.upload(b, name="B")
        tiles = -(-m // self.tile.tile_m) * -(-n // self.tile.tile_n)
        push = (np.uint32(m), np.uint32(n), np.uint32(k), np.uint32(k), np.uint32(b.shape[1]), np.uint32(n))
        dispatches, c_buf, owned = self._gemm_dispatches([a_buf, b_buf], m, n, tiles, push, t.output_dtype)
        self._bound = _Bound(dispatches, (m, n, k), c_buf, owned)
        return self

    def run(self, a, b) -> np.ndarray:
        """C = A @ B (B given as [K][N]; transposed here for a column-major-B kernel)."""
        b = np.ascontiguousarray(b.T) if self.b_column_major and isinstance(b, np.ndarray) else b
        self.bind(a, b)
        try:
            return self.result()
        finally:
            self.release()


class KhrSharedMemoryGemm(_Kernel):
    """Subgroup-scope KHR coopmat GEMM through shared memory (sample 7's kernel). K and N must be multiples
    of 16 bytes of elements (8 fp16/bf16, 16 int8); M is free."""

    def __init__(self, device, types, tile: SubgroupTile):
        self.device, self.types, self.tile = device, gemm_types(types), tile
        check_subgroup_tile(tile, self.types)
        shared = ((tile.tile_m * (tile.tile_k + self.types.elements_per_16_bytes)
                   + tile.tile_k * (tile.tile_n + self.types.elements_per_16_bytes)) * self.types.bytes_per_input
                  + tile.subgroups_m * tile.subgroups_n * tile.lm * tile.ln * self.types.output_dtype.itemsize)
        limit = int(device.physical.limits.maxComputeSharedMemorySize)
        if shared > limit:
            raise GemmInputError(f"KHR tile {tile.label()} needs {shared} bytes of shared memory, above "
                                 f"maxComputeSharedMemorySize ({limit})")
        self.name = f"khr {self.types.key} {tile.label()}"
        spirv = _spirv("gemm/khr_shmem_gemm.comp", {"GEMM_TYPES": self.types.define})
        self.pipeline = device.pipeline(spirv, name=self.name, required_subgroup_size=SUBGROUP_SIZE,
                                        full_subgroups=True, specialization={
            0: tile.workgroup_size, 1: tile.lm, 2: tile.ln, 3: tile.lk, 4: tile.tile_m, 5: tile.tile_n,
            6: tile.tile_k, 7: tile.subgroups_m, 8: tile.subgroups_n, 9: SUBGROUP_SIZE})

    def bind(self, a, b):
        t = self.types
        a = _check_matrix("A", a, t.input_dtype)
        b = _check_matrix("B", b, t.input_dtype)
        (m, k), (kb, n) = a.shape, b.shape
        if kb != k:
            raise GemmInputError(f"B has shape {b.shape}; with A {a.shape} it must be [K][N] with K={k}")
        e = t.elements_per_16_bytes
        if k % e or n % e:
            raise GemmInputError(f"the KHR shared-memory GEMM copies 16-byte vectors: K ({k}) and N ({n}) must be "
                                 f"multiples of {e} for {t.key}")
        self.release()
        dev = self.device
        a_buf, b_buf = dev.upload(a, name="A"), dev.upload(b, name="B")
        c_buf = dev.empty((m, n), t.output_dtype, name="C")
        groups = (-(-n // self.tile.tile_n), -(-m // self.tile.tile_m), 1)
        push = (np.uint32(m), np.uint32(n), np.uint32(k), np.uint32(k), np.uint32(n), np.uint32(n))
        self._bound = _Bound([(self.pipeline, [a_buf, b_buf, c_buf], groups, push)], (m, n, k), c_buf,
                             [a_buf, b_buf, c_buf])
        return self

    def run(self, a, b) -> np.ndarray:
        self.bind(a, b)
        try:
            return self.result()
        finally:
            self.release()


SPARSE24_TYPES = {"fp16": ("F16", np.dtype(np.float16), "fp16->fp32"),
                  "bf16": ("BF16", BF16, "bf16->fp32")}


#: Interleaved-layout block sizes the 2:4 shader has variants for (metadata words per block; 0 = split layout).
META_WORDS_CHOICES = (0, 1, 2, 4)


def interleave_2to4(values: np.ndarray, metadata: np.ndarray, meta_words: int) -> np.ndarray:
    """The 2:4 format regrouped for one-pointer decoding: ``uint32 [M][blocks][9 * meta_words]``.

    Block ``c`` of row ``r`` covers columns ``32*meta_words*c ..``: first metadata words
    ``metadata[r, meta_words*c : meta_words*(c+1)]``, then the value pairs of those columns
    (``values[r, 16*meta_words*c : ...]`` as uint32, two 16-bit values each, lower K first). A last partial
    block is padded with zero words. Pure numpy; done once before any dispatch. Inverse:
    :func:`deinterleave_2to4`.
    """
    if meta_words not in META_WORDS_CHOICES[1:]:
        raise GemmInputError(f"meta_words={meta_words}: choose from {META_WORDS_CHOICES[1:]}")
    values = np.ascontiguousarray(values)
    metadata = np.ascontiguousarray(metadata)
    if values.dtype.itemsize != 2 or values.ndim != 2:
        raise GemmInputError(f"values must be a 2-D array of 16-bit elements, got {values.dtype} {values.shape}")
    m, words = metadata.shape
    if metadata.dtype != np.uint32 or values.shape != (m, 16 * words):
        raise GemmInputError(f"metadata {metadata.dtype} {metadata.shape} does not match values {values.shape} "
                             "(want uint32 [M][K/32] with values [M][K/2])")
    blocks = -(-words // meta_words)
    padded_words = blocks * meta_words
    meta = np.zeros((m, padded_words), np.uint32)
    meta[:, :words] = metadata
    pairs = np.zeros((m, padded_words * 8), np.uint32)
    pairs[:, :words * 8] = _pairs_as_words(values, m, words)
    return np.ascontiguousarray(np.concatenate(
        [meta.reshape(m, blocks, meta_words), pairs.reshape(m, blocks, 8 * meta_words)], axis=2))


def _pairs_as_words(values: np.ndarray, m: int, words: int) -> np.ndarray:
    """Two consecutive 16-bit values as one little-endian uint32 (the first in the low half)."""
    halves = values.view(np.uint16).reshape(m, words * 8, 2).astype(np.uint32)
    return halves[..., 0] | (halves[..., 1] << 16)


def deinterleave_2to4(blocks: np.ndarray, k: int, meta_words: int, dtype) -> tuple[np.ndarray, np.ndarray]:
    """(values [M][K/2], metadata [M][K/32]) back from :func:`interleave_2to4`'s blocks."""
    m = blocks.shape[0]
    words = k // sparse24.K_ALIGNMENT
    meta = blocks[:, :, :meta_words].reshape(m, -1)[:, :words]
    pairs = blocks[:, :, meta_words:].reshape(m, -1)[:, :words * 8]
    halves = np.stack([pairs & 0xFFFF, pairs >> 16], axis=-1).astype(np.uint16).reshape(m, k // 2)
    return halves.view(np.dtype(dtype)), np.ascontiguousarray(meta)


class Sparse24Gemm(_Kernel):
    """The Vulkan 2:4 path: C (fp32) = decompress(values, metadata) @ B with a decode-function tensor load.

    ``dtype``: "fp16" or "bf16". K must be a multiple of 32 and TILE_K a multiple of 32 (one metadata word).
    ``meta_words``: 0 reads values and metadata from two bindings (the shared format as it is); 1, 2 or 4
    regroups them on the host (:func:`interleave_2to4`, in :meth:`bind`, before any timing) into blocks of
    ``32 * meta_words`` columns whose metadata precedes their values, so one block pointer serves both reads.
    """

    def __init__(self, device, dtype: str, tile: WorkgroupTile, *, b_column_major: bool = False,
                 flexible_properties=None, meta_words: int = 0):
        if dtype not in SPARSE24_TYPES:
            raise GemmInputError(f"dtype={dtype!r}: the 2:4 path takes {', '.join(SPARSE24_TYPES)}")
        if meta_words not in META_WORDS_CHOICES:
            raise GemmInputError(f"meta_words={meta_words}: choose from {META_WORDS_CHOICES}")
        if tile.subgroup_scope or tile.n_parts != 1:
            raise GemmInputError(f"tile {tile.label()}: the 2:4 kernel has one workgroup-scope accumulator "
                                 "(subgroups_m=0, n_parts=1)")
        define, self.input_dtype, types_key = SPARSE24_TYPES[dtype]
        self.device, self.dtype, self.tile, self.meta_words = device, dtype, tile, meta_words
        self.types = gemm_types(types_key)
        self.b_column_major = bool(b_column_major)
        if tile.tile_k % sparse24.K_ALIGNMENT:
            raise GemmInputError(f"tile_k={tile.tile_k}: the 2:4 path needs a multiple of {sparse24.K_ALIGNMENT} "
                                 "(the decode block is one metadata word, 32 columns)")
        if flexible_properties is None:
            flexible_properties = device.physical.flexible_dimensions_properties()
        check_workgroup_tile(flexible_properties, self.types, tile)
        layout = f" i{meta_words}" if meta_words else ""
        self.name = f"coopmat2 2:4 {dtype} {tile.label()}{layout}{' Bcol' if b_column_major else ''}"
        self._split_k_setup(True)
        spirv = _spirv("gemm/coopmat2_sparse24.comp", {"ELEMENT": define, "META_WORDS": str(meta_words)})
        self.pipeline = device.pipeline(spirv, name=self.name, specialization=tile.specialization(b_column_major))

    def bind(self, values, metadata, b):
        """values [M][K/2] and metadata [M][K/32] uint32 (vkcoop.sparse format), B [K][N] or [N][K]."""
        values = _check_matrix("values", values, self.input_dtype)
        metadata = _check_matrix("metadata", metadata, np.dtype(np.uint32))
        b = _check_matrix("B", b, self.input_dtype)
        m, half_k = values.shape
        k = 2 * half_k
        if k % sparse24.K_ALIGNMENT:
            raise GemmInputError(f"K={k} (values have {half_k} columns): the 2:4 path needs K to be a multiple of "
                                 f"{sparse24.K_ALIGNMENT}")
        if metadata.shape != (m, k // sparse24.K_ALIGNMENT):
            raise GemmInputError(f"metadata has shape {metadata.shape}; for values {values.shape} it must be "
                                 f"{(m, k // sparse24.K_ALIGNMENT)}")
        n, kb = (b.shape if self.b_column_major else b.shape[::-1])
        if kb != k:
            raise GemmInputError(f"B has shape {b.shape}; it must be {'[N][K]' if self.b_column_major else '[K][N]'} "
                                 f"with K={k}")
        self.release()
        dev = self.device
        if self.meta_words:
            blocks = interleave_2to4(values, metadata, self.meta_words)
            buffers = [dev.upload(blocks, name="interleaved A"), dev.upload(b, name="B")]
        else:
            buffers = [dev.upload(values, name="values"), dev.upload(metadata, name="metadata"),
                       dev.upload(b, name="B")]
        tiles = -(-m // self.tile.tile_m) * -(-n // self.tile.tile_n)
        push = (np.uint32(m), np.uint32(n), np.uint32(k), np.uint32(b.shape[1]), np.uint32(n))
        dispatches, c_buf, owned = self._gemm_dispatches(buffers, m, n, tiles, push, np.float32)
        self._bound = _Bound(dispatches, (m, n, k), c_buf, owned)
        return self

    def run(self, values, metadata, b) -> np.ndarray:
        """C = decompress(values, metadata) @ B; B is given as [K][N]."""
        b = np.ascontiguousarray(b.T) if self.b_column_major and isinstance(b, np.ndarray) else b
        self.bind(values, metadata, b)
        try:
            return self.result()
        finally:
            self.release()


def sparse24_reference(values: np.ndarray, metadata: np.ndarray, b: np.ndarray) -> np.ndarray:
    """fp32 matmul of the decompressed (pruned) A with B: what the 2:4 path must produce."""
    dense = sparse24.decompress_2to4(sparse24.Compressed2to4(values, metadata))
    return dense.astype(np.float32) @ b.astype(np.float32)
