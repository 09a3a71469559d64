"""Tile sizes of the Vulkan GEMM kernels, chosen from and checked against the driver's tables.

A workgroup-scope tile's matrices must be multiples of a flexible-dimensions granularity row of matching types,
scope and ``workgroupInvocations`` (VK_NV_cooperative_matrix2, "Flexible Dimensions"); the KHR kernel's
matrices are exact KHR-table shapes. Rows are :class:`vkcoop.vk.ShapeEntry` (``PhysicalDevice.flexible_shapes()``,
``khr_shapes()``).

A tile's :meth:`WorkgroupTile.label` is its own parse form: ``INVOCATIONS:MxNxK uUNROLL gGROUP_M [sSPLIT_K]
[wWORKGROUPS_PER_SM] [x[TAIL_SPLIT]]`` without spaces (``x``: a tail split, :meth:`WorkgroupTile.tail_plan`), read
back by :func:`parse_tile`.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, replace

from ..vk.tables import SCOPE_SUBGROUP, SCOPE_WORKGROUP, ShapeEntry
from .types import GemmInputError, gemm_types

SUBGROUP_SIZE = 32
#: The most K slices a tile is split into (each writes a partial plane that the tile's last slice adds up).
MAX_SPLIT_K = 16
#: The most K slices a tail tile is cut into (:func:`tail_split`): each slice stores and reloads a partial tile.
MAX_TAIL_SPLIT = 8
#: A tail split runs only behind at least this many whole waves. Measured on the H100 (128x128 tiles, two an SM):
#: 8192^3 (15 waves + 0.52) gained 1-2 % with 3 to 7 slices, 6144^3 (8 + 0.73) moved -1 to +2 %, and 4096^3
#: (3 + 0.88) lost 8-19 % with 2 to 8: where the slices' partial tiles are a large share of the work, they cost
#: more than the wave they fill (docs/gemm.md, "The tail split").
MIN_TAIL_WAVES = 8


def round_up(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple


def wave_split(tiles: int, steps: int, sm_count: int, per_sm: int) -> int:
    """The largest split-K whose ``tiles`` x split workgroups all fit one wave of ``per_sm`` per SM: at least 1, at
    most one K step per slice and :data:`MAX_SPLIT_K`. The Vulkan ``w`` tiles and the CUDA split-K tiles share it."""
    return max(1, min(sm_count * per_sm // tiles, steps, MAX_SPLIT_K))


def tail_split(tail: int, slots: int, steps: int) -> int:
    """K slices for the ``tail`` tiles of a grid's partial last wave of ``slots`` workgroups: the count (at most
    :data:`MAX_TAIL_SPLIT` and ``steps``) whose slices finish soonest if each slot runs one slice after another,
    ceil(tail x s / slots) / s of a whole tile's time; 1 where no count beats the whole tiles. A model only: on the
    H100 every count from 3 to 8 gained at 8192^3, and 2 gained at 6144^3 where it predicts none (docs/gemm.md,
    "The tail split"); a label may name the count instead."""
    best, best_time = 1, 1.0
    for count in range(2, min(MAX_TAIL_SPLIT, steps) + 1):
        time = -(-tail * count // slots) / count
        if time < best_time - 1e-9:
            best, best_time = count, time
    return best


@dataclass(frozen=True)
class WorkgroupTile:
    """Launch parameters of the workgroup-scope kernels (the spec constants of coopmat2_gemm.comp)."""
    workgroup_size: int
    tile_m: int
    tile_n: int
    tile_k: int
    k_unroll: int = 2
    group_m: int = 8
    #: > 1: K is cut into slices whose partial sums the last slice of each tile to finish adds up, in the same
    #: dispatch (split_sum.glsl)
    split_k: int = 1
    #: > 0: split K so that the grid holds this many workgroups per SM (:meth:`fill_split`, from the problem and the
    #: SM count; what the kernel's registers let an SM keep resident); ``split_k`` is the split where the SM count
    #: is unknown. 0: ``split_k`` as given.
    per_sm: int = 0
    #: Tail split (``x``, coopmat2_gemm.comp): with one K slice, the tiles of the grid's partial last wave run as
    #: ``tail_split`` K slices each (0: chosen per problem, :func:`tail_split`), after the whole tiles, so that the
    #: last wave holds shorter work (:meth:`tail_plan`). ``wave`` is the workgroups of one wave, SMs x ``per_sm``,
    #: which :meth:`fill_split` sets from the SM count (0: unknown, and no tail split runs).
    tail: bool = False
    tail_split: int = 0
    wave: int = 0

    def label(self) -> str:
        split = f"s{self.split_k}" if self.split_k > 1 else ""
        fill = f"w{self.per_sm}" if self.per_sm else ""
        tail = f"x{self.tail_split or ''}" if self.tail else ""
        return (f"{self.workgroup_size}:{self.tile_m}x{self.tile_n}x{self.tile_k}"
                f"u{self.k_unroll}g{self.group_m}{split}{fill}{tail}")

    def fill_split(self, m: int, n: int, k: int, sm_count: int | None) -> "WorkgroupTile":
        """This tile for an M x N x K problem: with ``per_sm`` and a known SM count, ``split_k`` becomes the largest
        split whose workgroups all fit one wave of ``per_sm`` per SM (at least 1, at most one K step per slice and
        :data:`MAX_SPLIT_K`). A second wave of a few workgroups costs as much as the first (measured on the H100,
        8192x32x8192, 3 resident per SM: split 3 0.065 ms, split 4 0.073), and a power of two rarely fills it.
        A tail-split tile (``x``) keeps its split: its ``w`` only sizes the wave (``wave``), from which each launch
        plans its tail (filling a wave by split-K took 1000x1000x1024 from 85 to 52 TFLOP/s on the H100)."""
        if not self.per_sm or not sm_count:
            return self
        if self.tail:
            return replace(self, wave=sm_count * self.per_sm)
        tiles = -(-m // self.tile_m) * -(-n // self.tile_n)
        steps = max(1, -(-k // self.tile_k))
        return replace(self, split_k=wave_split(tiles, steps, sm_count, self.per_sm))

    def tail_plan(self, m: int, n: int, k: int) -> tuple[int, int]:
        """(tail tiles, K slices each) of an M x N x K launch: the tiles of the grid's partial last wave and the
        count :func:`tail_split` picks (or the label's, at most the K steps); (0, 1) without a tail split, a known
        wave, one K slice, :data:`MIN_TAIL_WAVES` whole waves before the tail or a partial last wave."""
        tiles = -(-m // self.tile_m) * -(-n // self.tile_n)
        if not (self.tail and self.wave and self.split_k == 1 and tiles // self.wave >= MIN_TAIL_WAVES
                and tiles % self.wave):
            return 0, 1
        steps = max(1, -(-k // self.tile_k))
        tail = tiles % self.wave
        count = min(self.tail_split, steps) if self.tail_split else tail_split(tail, self.wave, steps)
        return (tail, count) if count > 1 else (0, 1)

    def split_sum_define(self, tail: bool = False) -> dict:
        """The SPLIT_SUM define of every coopmat2 GEMM shader (split_sum.glsl): LAST where K slices are added up by
        the last slice of each tile (a split, or a launch with a ``tail`` split), else NONE (one K slice, C stored
        directly). The launch adds it to each kernel's own defines."""
        return {"SPLIT_SUM": "LAST" if self.split_k > 1 or tail else "NONE"}

    def specialization(self, b_column_major: bool) -> dict:
        """The named specialization constants of coopmat2_gemm.comp and coopmat2_sparse24.comp."""
        return {"WORKGROUP_SIZE": self.workgroup_size, "TILE_M": self.tile_m, "TILE_N": self.tile_n,
                "TILE_K": self.tile_k, "B_COLUMN_MAJOR": bool(b_column_major), "K_UNROLL": self.k_unroll,
                "GROUP_M": self.group_m, "SPLIT_K": self.split_k}


_TILE = re.compile(r"(\d+):(\d+)x(\d+)x(\d+)(?:u(\d+))?(?:g(\d+))?(?:s(\d+))?(?:w(\d+))?(x(\d*))?")
TILE_GRAMMAR = "INVOCATIONS:MxNxK[uUNROLL][gGROUP_M][sSPLIT_K][wWORKGROUPS_PER_SM][x[TAIL_SPLIT]]"


def parse_tile(text: str) -> tuple[WorkgroupTile, str]:
    """(tile, the rest of ``text``) from a label that starts with :data:`TILE_GRAMMAR`."""
    match = _TILE.match(text.strip())
    if not match:
        raise GemmInputError(f"tile {text!r} is not {TILE_GRAMMAR}")
    inv, m, n, k, unroll, group, split, fill, tail, tail_count = match.groups()
    tile = WorkgroupTile(int(inv), int(m), int(n), int(k), k_unroll=int(unroll or 2), group_m=int(group or 8),
                         split_k=int(split or 1), per_sm=int(fill or 0), tail=bool(tail),
                         tail_split=int(tail_count or 0))
    return tile, text.strip()[match.end():]


def granularity_rows(flexible: list[ShapeEntry], types, scope: int = SCOPE_WORKGROUP) -> list[ShapeEntry]:
    """Rows of the flexible-dimensions table whose A/B/C/Result types and scope match ``types``."""
    t = gemm_types(types)
    return [row for row in flexible if row.flexible and row.scope == scope
            and row.types_match(t.input_component, t.output_component)]


def choose_workgroup_tile(flexible: list[ShapeEntry], types, *, invocations: int | None = None,
                          target=(128, 128, 32), k_unroll: int = 2, group_m: int = 8,
                          max_dimension: int | None = None) -> WorkgroupTile:
    """Tile sizes for the workgroup-scope kernels from the driver's flexible-dimensions table.

    Picks the granularity row with ``workgroupInvocations == invocations`` (default: the largest the driver
    lists for these types) and rounds ``target`` (M, N, K) up to multiples of its M/N/K granularity. Raises
    :class:`GemmInputError` when no row matches (the device cannot run these types at workgroup scope).
    """
    t = gemm_types(types)
    rows = granularity_rows(flexible, t)
    if not rows:
        raise GemmInputError(f"the device lists no workgroup-scope flexible-dimensions row for {t.key}")
    if invocations is None:
        invocations = max(row.workgroup_invocations for row in rows)
    matching = [row for row in rows if row.workgroup_invocations == invocations]
    if not matching:
        listed = sorted({row.workgroup_invocations for row in rows})
        raise GemmInputError(f"no flexible-dimensions row for {t.key} with workgroupInvocations={invocations} "
                             f"(listed: {listed})")
    row = matching[0]
    tile = [round_up(max(1, int(v)), int(g)) for v, g in zip(target, (row.M, row.N, row.K))]
    if max_dimension is not None and max(tile) > max_dimension:
        raise GemmInputError(f"tile {tile} exceeds cooperativeMatrixFlexibleDimensionsMaxDimension "
                             f"({max_dimension})")
    return WorkgroupTile(invocations, tile[0], tile[1], tile[2], k_unroll=k_unroll, group_m=group_m)


def check_workgroup_tile(flexible: list[ShapeEntry], types, tile: WorkgroupTile) -> None:
    """Raise GemmInputError unless the tile's matrices are multiples of a workgroup-scope granularity row of
    matching types whose workgroupInvocations equals workgroup_size."""
    for row in granularity_rows(flexible, types):
        if (row.workgroup_invocations == tile.workgroup_size and tile.tile_m % row.M == 0
                and tile.tile_n % row.N == 0 and tile.tile_k % row.K == 0):
            return
    raise GemmInputError(f"tile {tile.tile_m}x{tile.tile_n}x{tile.tile_k} of {tile.label()} for "
                         f"{gemm_types(types).key} matches no flexible-dimensions row (sizes must be multiples of "
                         "MGranularity/NGranularity/KGranularity of a workgroup-scope row with workgroupInvocations "
                         "== workgroup_size)")


@dataclass(frozen=True)
class SubgroupTile:
    """Launch parameters of the KHR shared-memory kernel (the spec constants of khr_shmem_gemm.comp)."""
    lm: int
    ln: int
    lk: int
    tile_m: int = 128
    tile_n: int = 128
    tile_k: int = 32
    subgroups_m: int = 2
    subgroups_n: int = 4
    stages: int = 1     # shared copies of the A and B tiles: 2 double-buffers them (one barrier per K step)
    group_m: int = 1    # tile rows per raster group (raster.glsl)

    @property
    def workgroup_size(self) -> int:
        return SUBGROUP_SIZE * self.subgroups_m * self.subgroups_n

    def label(self) -> str:
        stages = f", {self.stages} stages" if self.stages > 1 else ""
        group = f", groups of {self.group_m} rows" if self.group_m > 1 else ""
        return (f"{self.tile_m}x{self.tile_n}x{self.tile_k} of {self.lm}x{self.ln}x{self.lk} "
                f"({self.subgroups_m}x{self.subgroups_n} subgroups{stages}{group})")

    def code(self) -> str:
        """The short form :func:`parse_subgroup_tile` reads: ``MxNxK:SMxSN[dSTAGES][gGROUP_M]``."""
        stages = f"d{self.stages}" if self.stages > 1 else ""
        group = f"g{self.group_m}" if self.group_m > 1 else ""
        return f"{self.tile_m}x{self.tile_n}x{self.tile_k}:{self.subgroups_m}x{self.subgroups_n}{stages}{group}"

    def specialization(self) -> dict:
        return {"WORKGROUP_SIZE": self.workgroup_size, "LM": self.lm, "LN": self.ln, "LK": self.lk,
                "TILE_M": self.tile_m, "TILE_N": self.tile_n, "TILE_K": self.tile_k,
                "SUBGROUPS_M": self.subgroups_m, "SUBGROUPS_N": self.subgroups_n, "SUBGROUP_SIZE": SUBGROUP_SIZE,
                "STAGES": self.stages, "GROUP_M": self.group_m}

    def shared_memory_bytes(self, types) -> int:
        """Shared memory of khr_shmem_gemm.comp: ``stages`` copies of the A and B tiles with one 16-byte pad per
        row, plus one staging matrix per subgroup."""
        t = gemm_types(types)
        pad = t.elements_per_16_bytes
        return (self.stages * (self.tile_m * (self.tile_k + pad) + self.tile_k * (self.tile_n + pad))
                * t.bytes_per_input + self.subgroups_m * self.subgroups_n * self.lm * self.ln * t.output_dtype.itemsize)


SUBGROUP_CODE = re.compile(r"(\d+)x(\d+)x(\d+):(\d+)x(\d+)(?:d(\d+))?(?:g(\d+))?")


def parse_subgroup_tile(code: str, khr: list[ShapeEntry], types) -> SubgroupTile:
    """``MxNxK:SMxSN[dSTAGES][gGROUP_M]`` (:meth:`SubgroupTile.code`) as a checked tile of the table's largest
    shape."""
    match = SUBGROUP_CODE.fullmatch(code)
    if not match:
        raise GemmInputError(f"KHR tile {code!r} is not MxNxK:SMxSN[dSTAGES][gGROUP_M] (e.g. 128x128x32:2x2d2g8)")
    tm, tn, tk, sm, sn = (int(v) for v in match.groups()[:5])
    stages, group_m = int(match.group(6) or 1), int(match.group(7) or 1)
    if stages not in (1, 2) or group_m < 1:
        raise GemmInputError(f"KHR tile {code!r}: stages must be 1 or 2 and GROUP_M at least 1")
    return choose_subgroup_tile(khr, types, tile=(tm, tn, tk), subgroups=(sm, sn), stages=stages, group_m=group_m)


def choose_subgroup_tile(khr: list[ShapeEntry], types, *, tile=(128, 128, None), subgroups=(2, 4),
                         stages: int = 1, group_m: int = 1) -> SubgroupTile:
    """The largest subgroup-scope KHR shape for ``types`` and a shared-memory tile built from it."""
    t = gemm_types(types)
    shapes = [row for row in khr if not row.flexible and row.scope == SCOPE_SUBGROUP
              and row.types_match(t.input_component, t.output_component)]
    # The shared tiles are copied 16 bytes at a time: N and K of a shape must be 16-byte multiples.
    shapes = [s for s in shapes if s.N % t.elements_per_16_bytes == 0 and s.K % t.elements_per_16_bytes == 0]
    if not shapes:
        raise GemmInputError(f"the device lists no subgroup-scope KHR cooperative matrix shape for {t.key}")
    best = max(shapes, key=lambda s: (s.M * s.N * s.K, s.N))
    tile_k = tile[2] if tile[2] else (2 * best.K if t.bytes_per_input == 2 else best.K)
    result = SubgroupTile(best.M, best.N, best.K, tile[0], tile[1], tile_k, *subgroups, stages=stages,
                          group_m=group_m)
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
