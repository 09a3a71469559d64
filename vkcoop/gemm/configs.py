"""Launch configurations of the Vulkan GEMM paths: their labels, the tuning classes, and candidates derived from
what the driver reports.

A :class:`VulkanConfig` is a tile (:class:`vkcoop.gemm.tiles.WorkgroupTile`), B's layout, for the 2:4 path A's
layout, and the kernel: direct tensor loads, or staged through shared memory (``t``: coopmat2_staged_gemm.comp /
coopmat2_staged_sparse24.comp, whose prefetch depth is the tile's K unroll; ``tp``/``tn``: the staged 2:4 kernel on
the tile-major layout of vkcoop.gemm.tile_major); its label parses back
(:func:`parse_config`). Problems share a tuned configuration when they share
a *tuning class* (:func:`tuning_class`): ``compute`` (N above :data:`NARROW_N`: compute-bound), ``small`` and
``medium`` (compute-bound, but too few 128x128 tiles to fill half of an H100's SMs, or two waves of two a SM) or
``narrowB`` (N <= B, memory-bound: A dominates the traffic).

Candidates (:func:`derive_workgroup_configs`, :func:`derive_khr_configs`) come from the device, not from
constants: every workgroup-scope row of the flexible-dimension table for the types (granularity, invocations),
the shared memory left after the driver's reservation, ``cooperativeMatrixFlexibleDimensionsMaxDimension`` and
the SM count: narrow problems split K so that the grid fills one wave of a few workgroups per SM
(:meth:`vkcoop.gemm.tiles.WorkgroupTile.fill_split`, resolved per problem by :meth:`VulkanConfig.for_problem`), and
the ``compute`` class tries the best tile with a tail split (:func:`tail_candidate`). The rules only prune and order the candidates: the measurement (``vkcoop.bench.tuning``) decides.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

from ..vk.tables import (COMPONENT_BFLOAT16, COMPONENT_FLOAT16, COMPONENT_FLOAT32, COMPONENT_SINT8,
                         COMPONENT_SINT32, COMPONENT_UINT8, COMPONENT_UINT32, SCOPES, ShapeEntry)
from .expanded import ExpandedSparse24Kernel
from .launch import CoopMat2Kernel, Sparse24Kernel
from .staging import KhrKernel, StagedKernel, StagedSparse24Kernel, TiledSparse24Kernel, check_coopmat2_kernel
from .path import GemmProblem
from .tiles import WorkgroupTile, granularity_rows, parse_subgroup_tile, parse_tile
from .types import GemmInputError, accumulating_types, gemm_types

#: N up to this is the memory-bound ("narrow") class; the N buckets below split it.
NARROW_N = 256
#: 32 is its own bucket: a 32-wide tile is whole at N = 32, and at N = 64 a 64-wide tile won on the H100
#: (8192x64x8192: 0.074 against 0.085 ms)
N_BUCKETS = (16, 32, 64, 256)
#: How many candidates a tuning measures at most per path and class (seeds come on top).
MAX_CANDIDATES = 12
#: Accumulator registers per invocation of a compute-bound workgroup tile: [min, max] (one fp32 or two fp16
#: accumulators a register).
ACCUMULATOR_REGISTERS = (32, 128)
#: Narrow problems: the workgroups per SM a split-K fills (``w`` of a label), most first: on the H100 the direct
#: kernel's 64-invocation tiles keep 4 resident, the staged kernel's 128-invocation ones 3 (docs/gemm.md).
NARROW_FILLS = (4, 3)
#: The split-K of a narrow candidate where the SM count is unknown.
NARROW_FALLBACK_SPLIT = 2
#: A compute-bound problem whose grid of SMALL_TILE_SIDE-square tiles has at most SMALL_TILES of them is ``small``.
#: H100 (docs/gemm.md): 64x64 tiles beat the square seed's 128x128 at 16 to 64 such tiles (512x512x4096 98 against
#: 33 TFLOP/s, 1024^3 124 against 89) and lost from 100 on (1280^3 121 against 133).
SMALL_TILES = 64
SMALL_TILE_SIDE = 128
#: Up to this many such tiles a compute-bound problem is ``medium``: on the H100 the fp16-accumulating path's
#: 256x256 tiles lose to 128x128 ones there (2048^3 161 against 262 TFLOP/s) and win from 1,024 tiles on (4096^3).
MEDIUM_TILES = 256


@dataclass(frozen=True)
class VulkanConfig:
    """One launch configuration of a Vulkan coopmat2 path: the tile, B's layout, (2:4 path) A's layout and whether
    the staged kernel runs it."""
    tile: WorkgroupTile
    b_column_major: bool = False
    meta_words: int = 0   # 2:4 path: 0 = values + metadata bindings, > 0 = interleaved blocks (interleave_2to4)
    staged: bool = False  # A and B through shared memory in 16-byte vectors (row-major B, K and N whole vectors)
    #: staged 2:4 path: "" = vkcoop's format as it is, else the tile-major layout's code (:data:`TILE_MAJOR_CODES`)
    tile_major: str = ""

    def label(self) -> str:
        return self.tile.label() + (f"i{self.meta_words}" if self.meta_words else "") + \
            ("c" if self.b_column_major else "") + ("t" if self.staged else "") + self.tile_major

    def for_problem(self, problem: GemmProblem, sm_count: int | None) -> "VulkanConfig":
        """What runs ``problem``: the split-K of a ``w`` tile resolved from the problem and the SM count."""
        return replace(self, tile=self.tile.fill_split(problem.m, problem.n, problem.k, sm_count))


#: The letter after ``t`` that runs the staged 2:4 kernel on the tile-major layout (vkcoop.gemm.tile_major), and
#: its chunk code: ``p`` pattern codes (masks and a select), ``n`` the PTX nibbles (64-bit shifts).
TILE_MAJOR_CODES = {"p": "patterns", "n": "nibbles"}


def parse_config(text: str) -> VulkanConfig:
    """The inverse of :meth:`VulkanConfig.label`: a tile label, then ``iMETA_WORDS``, ``c`` (column-major B) and
    ``t`` (the staged kernel), ``tp`` or ``tn`` (the staged 2:4 kernel on the tile-major layout)."""
    tile, rest = parse_tile(text)
    meta_words, column, staged, tile_major = 0, False, False, ""
    if rest.startswith("i") and rest[1:2].isdigit():
        digits = len(rest) - len(rest[1:].lstrip("0123456789"))
        meta_words, rest = int(rest[1:digits]), rest[digits:]
    if rest.startswith("c"):
        column, rest = True, rest[1:]
    if rest[:1] == "t" and (len(rest) == 1 or rest[1:] in TILE_MAJOR_CODES):
        staged, tile_major, rest = True, rest[1:], ""
    if rest:
        raise GemmInputError(f"configuration {text!r}: cannot read {rest!r} after the tile "
                             "(expected [iMETA_WORDS][c][t[p|n]])")
    return VulkanConfig(tile, column, meta_words, staged, tile_major)


def tuning_class(problem: GemmProblem) -> str:
    """``narrowB`` for N <= :data:`NARROW_N`, B the first of :data:`N_BUCKETS` >= N; else ``small`` where the
    problem is at most :data:`SMALL_TILES` tiles of :data:`SMALL_TILE_SIDE` squared, ``medium`` at most
    :data:`MEDIUM_TILES`, else ``compute``."""
    if problem.n <= NARROW_N:
        return f"narrow{next(b for b in N_BUCKETS if problem.n <= b)}"
    tiles = -(-problem.m // SMALL_TILE_SIDE) * -(-problem.n // SMALL_TILE_SIDE)
    return "small" if tiles <= SMALL_TILES else "medium" if tiles <= MEDIUM_TILES else "compute"


def is_narrow(cls: str) -> bool:
    """Whether a tuning class (``narrowB``) or a seed family (``llm``) is memory-bound."""
    return cls == "llm" or cls.startswith("narrow")


def seed_family(cls: str) -> str:
    """The shape class of the shipped seed tables a tuning class falls back to ("square" or "llm")."""
    return "llm" if is_narrow(cls) else "square"


@dataclass(frozen=True)
class DeviceLimits:
    """What the derivation reads besides the flexible-dimension table."""
    shared_memory: int = 49152           # maxComputeSharedMemorySize
    reserved_shared_memory: int = 0      # cooperativeMatrixWorkgroupScopeReservedSharedMemory
    max_dimension: int = 0               # cooperativeMatrixFlexibleDimensionsMaxDimension (0: not reported)
    max_workgroup: int = 256             # cooperativeMatrixWorkgroupScopeMaxWorkgroupSize
    sm_count: int | None = None          # VK_NV_shader_sm_builtins or CUDA; None: unknown

    @classmethod
    def of(cls, physical, sm_count: int | None = None) -> "DeviceLimits":
        """From a :class:`vkcoop.vk.PhysicalDevice`; the SM count is the driver's (VK_NV_shader_sm_builtins)
        unless given."""
        from ..vk import sm_count as driver_sm_count
        coopmat2 = physical.cooperative_matrix2_properties() or {}
        return cls(shared_memory=int(physical.limits.maxComputeSharedMemorySize),
                   reserved_shared_memory=int(coopmat2.get("cooperativeMatrixWorkgroupScopeReservedSharedMemory", 0)),
                   max_dimension=int(coopmat2.get("cooperativeMatrixFlexibleDimensionsMaxDimension", 0)),
                   max_workgroup=int(coopmat2.get("cooperativeMatrixWorkgroupScopeMaxWorkgroupSize", 256) or 256),
                   sm_count=driver_sm_count(physical) if sm_count is None else sm_count)

    @property
    def staging_bytes(self) -> int:
        return self.shared_memory - self.reserved_shared_memory


def _fits(limits: DeviceLimits, tm: int, tn: int, tk: int, element_bytes: int) -> bool:
    """One K step of A and B fits the shared memory left to the driver's staging, and no side exceeds the
    flexible-dimension maximum."""
    if limits.max_dimension and max(tm, tn, tk) > limits.max_dimension:
        return False
    return (tm + tn) * tk * element_bytes <= limits.staging_bytes


def _compute_tiles(row, limits: DeviceLimits, types):
    """Large tiles for N > NARROW_N: (rank, tile), best guess first (most accumulator reuse, widest
    workgroup, shortest K step, deepest unroll)."""
    invocations = row.workgroup_invocations
    low, high = ACCUMULATOR_REGISTERS
    for tm in (64, 128, 256):
        for tn in (64, 128, 256):
            registers = tm * tn // invocations * types.output_dtype.itemsize // 4
            if not low <= registers <= high or tm % row.M or tn % row.N:
                continue
            for tk in (32, 64):
                if tk % row.K or not _fits(limits, tm, tn, tk, types.bytes_per_input):
                    continue
                for unroll in (8, 4):
                    rank = (-tm * tn // invocations, -invocations, tk, -unroll, -tn)
                    yield rank, WorkgroupTile(invocations, tm, tn, tk, k_unroll=unroll, group_m=8)


def _narrow_tiles(row, problem: GemmProblem, limits: DeviceLimits, types):
    """Thin tiles for N <= NARROW_N: N rounded to the granularity, K deep, split-K filling NARROW_FILLS workgroups
    per SM (resolved per problem; the last slice of each tile adds the slices up in the result type)."""
    element_bytes = types.bytes_per_input
    invocations = row.workgroup_invocations
    widths = sorted({max(row.N, -(-min(problem.n, w) // row.N) * row.N) for w in (32, 64)})
    for tm in (32, 64, 128):
        for tn in widths:
            if tm % row.M or tn % row.N:
                continue
            for tk in (128, 64):
                if tk % row.K or not _fits(limits, tm, tn, tk, element_bytes):
                    continue
                for order, fill in enumerate(NARROW_FILLS):
                    # about 16 accumulators per invocation measured best on the H200 (32x32 on 64 invocations)
                    rank = (abs(math.log2(tm * tn / invocations / 16)), -tk, tn, order)
                    yield rank, WorkgroupTile(invocations, tm, tn, tk, k_unroll=2, group_m=1,
                                              split_k=NARROW_FALLBACK_SPLIT if fill else 1, per_sm=fill)


#: (B column-major, meta_words) per A format (2:4 or dense) and class (narrow or not), best guess first.
LAYOUTS = {
    (False, False): ((False, 0),),
    (False, True): ((True, 0), (False, 0)),
    (True, False): ((False, 1), (False, 0)),
    (True, True): ((True, 4), (True, 1), (True, 0)),
}
#: Invocations of the direct kernel an SM keeps resident at a compute-bound tile: its pipelines hold 255 registers an
#: invocation, and 65,536 registers keep 256 of them (on the H100 two 128-invocation workgroups an SM, one of 256;
#: docs/gemm.md). A tail-split candidate's ``w``, which sizes the wave whose partial last part it splits, is this
#: over its workgroup size.
RESIDENT_INVOCATIONS = 256
#: Prefetch depths (the tile's K unroll) tried for the staged kernel, and how many staged candidates a tuning sees.
STAGED_PREFETCH = (2, 1)
STAGED_CANDIDATES = 2
#: The same for the staged 2:4 kernel on the tile-major layout (``tp``), a narrow 2:4 class's candidates.
TILE_MAJOR_PREFETCH = (4,)
TILE_MAJOR_CANDIDATES = 2


#: What each coopmat2 path of ``vkcoop bench sparse`` runs: (A in the 2:4 format, the accumulator types; None: the
#: dtype's fp32 accumulation). fp16 accumulation is ggml's default and the form of the fp16->fp16 ceiling.
PATH_KERNELS = {"vk-coopmat2-dense": (False, None), "vk-coopmat2-dense-fp16acc": (False, "fp16->fp16"),
                "vk-coopmat2-2:4": (True, None), "vk-coopmat2-2:4-expand": (False, None)}
#: Paths that read A in the 2:4 format and expand it into a dense workspace before the dense kernel of their
#: configuration runs (:mod:`.expanded`): their tiles and layouts are the dense kernel's.
EXPANDED_PATHS = frozenset({"vk-coopmat2-2:4-expand"})


def path_types(path_name: str, dtype: str):
    """The :class:`vkcoop.gemm.types.GemmTypes` a coopmat2 path computes ``dtype`` inputs with."""
    return gemm_types(PATH_KERNELS[path_name][1] or accumulating_types(dtype))


def path_kernel(path_name: str, config: VulkanConfig, dtype: str):
    """:func:`launch_kernel` for one of :data:`PATH_KERNELS`."""
    sparse, types = PATH_KERNELS[path_name]
    if path_name in EXPANDED_PATHS:
        if config.staged:
            raise GemmInputError(f"{config.label()}: {path_name} runs the direct dense kernel (no t)")
        return ExpandedSparse24Kernel(dtype, launch_kernel(config, dtype, sparse=False, types=types))
    return launch_kernel(config, dtype, sparse=sparse, types=types)


def launch_kernel(config: VulkanConfig, dtype: str, *, sparse: bool, types=None):
    """The one place a configuration picks its kernel: the 2:4 (``sparse``) or dense kernel, direct or staged
    (``t``; the 2:4 one also on the tile-major layout, ``tp``/``tn``), for ``dtype`` inputs; ``types`` overrides a
    dense kernel's fp32 accumulation (e.g. "fp16->fp16").
    Raises GemmInputError for a configuration the kernel cannot take (a staged kernel reads row-major B and
    takes no interleaved 2:4 layout). The coopmat2 kernels it builds pad a problem that is not whole tiles
    (``pad_to_tiles``), so every configuration runs every problem with its ALIGNED pipeline; the expand path's
    dense kernel pads through :class:`ExpandedSparse24Kernel`."""
    if config.staged and (config.b_column_major or config.meta_words):
        raise GemmInputError(f"{config.label()}: the staged kernels read row-major B and take no interleaving")
    if config.tile_major:
        if not (sparse and config.staged):
            raise GemmInputError(f"{config.label()}: the tile-major layout (t{config.tile_major}) is the staged 2:4 "
                                 "kernel's")
        return TiledSparse24Kernel(dtype, config.tile, code=TILE_MAJOR_CODES[config.tile_major])
    if sparse:
        if config.staged:
            return StagedSparse24Kernel(dtype, config.tile, pad_to_tiles=True)
        return Sparse24Kernel(dtype, config.tile, b_column_major=config.b_column_major, meta_words=config.meta_words)
    types = types or accumulating_types(dtype)
    if config.staged:
        return StagedKernel(types, config.tile, pad_to_tiles=True)
    return CoopMat2Kernel(types, config.tile, b_column_major=config.b_column_major, pad_to_tiles=True)


def _valid(path_name: str, problem: GemmProblem, flexible, limits: DeviceLimits, config: VulkanConfig) -> bool:
    try:
        check_coopmat2_kernel(path_kernel(path_name, config, problem.dtype), flexible, limits)
    except GemmInputError:
        return False
    return True


def tail_candidate(tile: WorkgroupTile) -> WorkgroupTile:
    """``tile`` with a tail split (``x``, the count chosen per problem) and the ``w`` that sizes its wave
    (:data:`RESIDENT_INVOCATIONS`). Only the direct dense kernel has a tail split, and a launch plans one only behind
    :data:`vkcoop.gemm.tiles.MIN_TAIL_WAVES` whole waves: elsewhere it runs as the tile without it. On the H100 the
    square seed's tail split (``x5``) gains 1-2 % at 8192^3 (docs/gemm.md, "The tail split")."""
    return replace(tile, tail=True, tail_split=0, per_sm=max(1, RESIDENT_INVOCATIONS // tile.workgroup_size))


def derive_workgroup_configs(path_name: str, problem: GemmProblem, flexible, limits: DeviceLimits,
                             limit: int = MAX_CANDIDATES) -> list[VulkanConfig]:
    """Candidate configurations of a coopmat2 path (one of :data:`PATH_KERNELS`) for
    ``problem``'s tuning class, from the flexible-dimension rows (:class:`vkcoop.vk.ShapeEntry`) and ``limits``;
    best guess first, at most ``limit``. The best tile comes with every layout of the path and, in the ``compute``
    class, with its tail split (:func:`tail_candidate`); then the staged kernel (for a narrow 2:4 class also on the
    tile-major layout), the other tiles with the first layout, then their other layouts: a budget that ends a tuning early has seen the best tiles and the layout
    question for the best one."""
    types = path_types(path_name, problem.dtype)
    narrow = is_narrow(tuning_class(problem))
    ranked = []
    for row in granularity_rows(flexible, types):
        if row.workgroup_invocations <= limits.max_workgroup:
            ranked += list(_narrow_tiles(row, problem, limits, types) if narrow else _compute_tiles(row, limits, types))
    tiles = list(dict.fromkeys(tile for _, tile in sorted(ranked, key=lambda item: item[0])))
    layouts = LAYOUTS[(PATH_KERNELS[path_name][0], narrow)]
    order = [VulkanConfig(tiles[0], column, meta) for column, meta in layouts] if tiles else []
    if tiles and tuning_class(problem) == "compute":
        order.append(VulkanConfig(tail_candidate(tiles[0]), *layouts[0]))
    # the staged kernel right after the best tile's: its shared memory admits only some tiles
    staged = (VulkanConfig(replace(tile, k_unroll=depth), staged=True) for tile in tiles for depth in STAGED_PREFETCH)
    order += [c for c in staged if _valid(path_name, problem, flexible, limits, c)][:STAGED_CANDIDATES]
    if narrow and PATH_KERNELS[path_name][0]:
        tiled = (VulkanConfig(replace(tile, k_unroll=depth), staged=True, tile_major="p")
                 for tile in tiles for depth in TILE_MAJOR_PREFETCH)
        order += [c for c in tiled if _valid(path_name, problem, flexible, limits, c)][:TILE_MAJOR_CANDIDATES]
    order += [VulkanConfig(tile, *layouts[0]) for tile in tiles[1:]]
    order += [VulkanConfig(tile, column, meta) for tile in tiles[1:] for column, meta in layouts[1:]]
    return [c for c in dict.fromkeys(order) if _valid(path_name, problem, flexible, limits, c)][:limit]


#: KHR shared-memory tiles per class (narrow or not), as :meth:`vkcoop.gemm.tiles.SubgroupTile.code` strings, the
#: class's default first. H100, 8192^3 fp16->fp32: 128x128x32 on 2x2 subgroups double-buffered with raster groups
#: of 8 rows 315 TFLOP/s; one shared copy on 2x4 subgroups 135 (docs/gemm.md).
KHR_TILES = {
    False: ("128x128x32:2x2d2g8", "128x256x16:2x4d2g8", "128x128x32:2x4", "64x128x32:1x2d2g8"),
    True: ("128x32x32:4x1", "128x32x32:4x1d2", "64x32x32:2x1d2", "128x64x32:4x1d2"),
}


def derive_khr_configs(problem: GemmProblem, khr, limits: DeviceLimits) -> list:
    """Candidate tiles of the KHR shared-memory path, from the KHR table's largest shape, within the shared memory;
    the first is the class's default."""
    types = accumulating_types(problem.dtype)
    found = []
    for code in KHR_TILES[is_narrow(tuning_class(problem))]:
        try:
            tile = parse_subgroup_tile(code, khr, types)
            KhrKernel(types, tile).check_shared_memory(limits.shared_memory)
        except GemmInputError:
            continue
        found.append(tile)
    return found


_COMPONENTS = {"float16": COMPONENT_FLOAT16, "float32": COMPONENT_FLOAT32, "bfloat16": COMPONENT_BFLOAT16,
               "sint8": COMPONENT_SINT8, "sint32": COMPONENT_SINT32, "uint8": COMPONENT_UINT8,
               "uint32": COMPONENT_UINT32}


def _recorded_row(row: dict) -> dict:
    """A row of a recorded report (component and scope names) back as the driver's integers."""
    named = dict(row)
    for key in ("AType", "BType", "CType", "ResultType"):
        named[key] = _COMPONENTS.get(row[key], -1)   # a type this library does not use matches nothing
    named["scope"] = SCOPES.get(row["scope"], -1)
    return named


def recorded_device(report) -> tuple[str, tuple, tuple, DeviceLimits]:
    """(name, flexible rows, KHR rows, limits) of a recorded ``vkcoop info --json`` report (a device or a list
    whose first entry is used), e.g. docs/h200-capabilities.json; ``sm_count`` is read when the report has it."""
    device = report[0] if isinstance(report, list) else report
    coopmat2 = device.get("cooperative_matrix2", {})
    flexible = tuple(ShapeEntry.from_flexible(_recorded_row(r)) for r in coopmat2.get("flexible_dimensions", []))
    khr = tuple(ShapeEntry.from_khr(_recorded_row(r))
                for r in device.get("cooperative_matrix_khr", {}).get("properties", []))
    properties = coopmat2.get("properties") or {}
    limits = DeviceLimits(
        shared_memory=int(device.get("limits", {}).get("maxComputeSharedMemorySize", 49152)),
        reserved_shared_memory=int(properties.get("cooperativeMatrixWorkgroupScopeReservedSharedMemory", 0)),
        max_dimension=int(properties.get("cooperativeMatrixFlexibleDimensionsMaxDimension", 0)),
        max_workgroup=int(properties.get("cooperativeMatrixWorkgroupScopeMaxWorkgroupSize", 256) or 256),
        sm_count=device.get("sm_count"))
    return device.get("name", "?"), flexible, khr, limits
