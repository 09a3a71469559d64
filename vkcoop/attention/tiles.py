"""Tiles (BR query rows x BC keys) of flash_attention.comp, chosen from and checked against the driver's table.

The kernel multiplies two pairs of workgroup-scope matrices, S = Q Kᵀ (BR x HEAD_DIM by HEAD_DIM x BC) and
O += P V (BR x BC by BC x HEAD_DIM), so one flexible-dimensions row (fp16/bf16 -> fp32, workgroup scope,
``workgroupInvocations == workgroup_size``) must divide all of them: BR by its M granularity, BC and HEAD_DIM by
both its N and K granularities. On the H200 that is 32/16/16 at 128 invocations and 32/32/16 at 256. With
``subgroup_rows`` (SCOPE=SUBGROUP) each 32-wide subgroup owns BR / subgroups rows as subgroup-scope matrices, and
the subgroup-scope row of the table (16/16/16 on the H100) divides those rows, BC and HEAD_DIM.

A tile's :meth:`AttentionTile.label` (``INVOCATIONS:BRxBC``) parses back with :func:`parse_attention_tile`.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass

from ..gemm import SUBGROUP_SIZE, accumulating_types, granularity_rows
from ..gemm.tiles import round_up
from ..vk.tables import SCOPE_SUBGROUP
from .shapes import AttentionInputError, check_dtype, check_head_dim

#: Query rows per tile before rounding to the table: 64 rows over 4 warps is FlashAttention-2's split.
DEFAULT_ROWS = 64
#: Keys per step are sized so that a block of K (or V) holds this many elements, 16 KB in fp16: BC 64 at head_dim
#: 128 and 128 at head_dim 64. On the H100 (docs/attention.md) 64x128 beat 64x64 at head_dim 64 (prefill 218 against
#: 205 TFLOP/s, decode kv 32768 0.037 against 0.039 ms) and lost at head_dim 128 (208 against 218).
KV_BLOCK_ELEMENTS = 8192
MIN_KEYS_PER_STEP = 64
#: Preferred invocations when the table lists them (4 warps per 64 rows); otherwise the largest listed.
PREFERRED_INVOCATIONS = 128
#: Decode (a tile's rows hold at most DECODE_ROWS queries): the smallest tile, 2 warps over 16 rows. On the H100,
#: 64:16x64 read K and V at 2.0 TB/s at kv 32768 against 1.6 for 128:64x64 and 1.5 for 32:16x64 (docs/attention.md).
DECODE_ROWS = 16
DECODE_INVOCATIONS = 64
#: FlashAttention-2's split of prefill: each 32-wide subgroup owns SPLIT_ROWS query rows as subgroup-scope matrices,
#: Q waits in shared memory (both are the ``r`` of a label) and K and V are staged (``k``). A subgroup's O then takes
#: head_dim fp32 registers per invocation, so the split applies up to SPLIT_MAX_HEAD_DIM. On the H100
#: (docs/attention.md, experiments table) 128:128x64rk beat 128:64x128 at head_dim 64 by 7-10 % (36 % at seq 1000)
#: and tied it causal; at head_dim 128 the driver spills (64:64x32rk: 13.5 KB of scratch, 154 against 224 TFLOP/s).
SPLIT_ROWS = 32
SPLIT_MAX_HEAD_DIM = 64


def keys_per_step(head_dim: int) -> int:
    """BC before rounding to the table: :data:`KV_BLOCK_ELEMENTS` per block of K, at least
    :data:`MIN_KEYS_PER_STEP` keys."""
    return max(MIN_KEYS_PER_STEP, KV_BLOCK_ELEMENTS // head_dim)


@dataclass(frozen=True)
class AttentionTile:
    """The launch shape of flash_attention.comp: workgroup size and the BR x BC score tile."""
    workgroup_size: int
    br: int
    bc: int

    def label(self) -> str:
        return f"{self.workgroup_size}:{self.br}x{self.bc}"

    def subgroup_rows(self) -> int | None:
        """Rows of each subgroup's matrices when the subgroups split BR (SCOPE=SUBGROUP); None where they cannot."""
        subgroups, rest = divmod(self.workgroup_size, SUBGROUP_SIZE)
        return self.br // subgroups if subgroups and not rest and self.br % subgroups == 0 else None


#: An AttentionTile label, ``INVOCATIONS:BRxBC``.
_LABEL = re.compile(r"^(\d+):(\d+)x(\d+)$")


def parse_attention_tile(text: str) -> AttentionTile:
    """The inverse of :meth:`AttentionTile.label`."""
    match = _LABEL.match(text.strip())
    if not match:
        raise AttentionInputError(f"tile {text!r} is not INVOCATIONS:BRxBC (e.g. 128:64x64)")
    return AttentionTile(*(int(g) for g in match.groups()))


@dataclass(frozen=True)
class AttentionConfig:
    """A tile plus the launch choices around it: ``kv_splits`` key slices, ``gqa_rows`` (the group's q heads
    stacked in one tile) and ``stats_cols`` (columns of the running max and sum); None leaves each to
    :func:`vkcoop.attention.kernel.choose_kv_splits`, :func:`vkcoop.attention.kernel.use_gqa_rows` and
    :func:`stats_columns`. ``kv_staged`` passes K and V through the shader's own shared memory (KV_STAGED; None:
    :func:`vkcoop.attention.kernel.stages_kv`, label ``k`` on and ``u`` off); ``waiting_merge`` merges the key slices
    in the same dispatch, by workgroups after the slices that wait for them (SPLIT_MERGE=WAIT, label ``m``);
    ``subgroup_rows`` is FlashAttention-2's split (label ``r``): each subgroup owns its rows as subgroup-scope
    matrices (SCOPE=SUBGROUP) and Q waits in shared memory, a staging choice that the H100's head_dim 64 prefill seed
    ships (``128:128x64rk``); ``order_chunk`` and ``order_tail`` are the (head, batch) pairs whose causal query tiles
    start heaviest first together, before the last chunk and in it (None:
    :func:`vkcoop.attention.kernel.causal_order`). Label: :data:`CONFIG_GRAMMAR`."""
    tile: AttentionTile
    kv_splits: int | None = None
    gqa_rows: bool | None = None
    stats_cols: int | None = None
    kv_staged: bool | None = None
    subgroup_rows: bool = False
    waiting_merge: bool = False
    order_chunk: int | None = None
    order_tail: int | None = None

    def label(self) -> str:
        splits = f"s{self.kv_splits}" if self.kv_splits else ""
        rows = {True: "g", False: "n", None: ""}[self.gqa_rows]
        stats = f"w{self.stats_cols}" if self.stats_cols else ""
        order = "".join(f"{flag}{value}" for flag, value in (("c", self.order_chunk), ("t", self.order_tail)) if value)
        flags = "".join(flag for flag, on in (("m", self.waiting_merge), ("r", self.subgroup_rows),
                                              ("k", self.kv_staged is True), ("u", self.kv_staged is False)) if on)
        return f"{self.tile.label()}{splits}{rows}{stats}{order}{flags}"


#: What an :class:`AttentionConfig` label holds, in order.
CONFIG_GRAMMAR = "INVOCATIONS:BRxBC[sSPLITS][g|n][wSTATS_COLS][cORDER_CHUNK][tORDER_TAIL][m][r][k|u]"
_CONFIG = re.compile(r"^(\d+:\d+x\d+)(?:s(\d+))?([gn]?)(?:w(\d+))?(?:c(\d+))?(?:t(\d+))?(m?)(r?)([ku]?)$")


def parse_attention_config(text: str) -> AttentionConfig:
    """The inverse of :meth:`AttentionConfig.label`."""
    match = _CONFIG.match(text.strip())
    if not match or any(match.group(i) and int(match.group(i)) < 1 for i in (2, 4, 5, 6)):
        raise AttentionInputError(f"configuration {text!r} is not {CONFIG_GRAMMAR} (e.g. 64:16x128s32g)")
    splits, stats, chunk, tail = (int(match.group(i)) if match.group(i) else None for i in (2, 4, 5, 6))
    return AttentionConfig(parse_attention_tile(match.group(1)), splits, {"g": True, "n": False}.get(match.group(3)),
                           stats, kv_staged={"k": True, "u": False}.get(match.group(9)),
                           subgroup_rows=bool(match.group(8)), waiting_merge=bool(match.group(7)),
                           order_chunk=chunk, order_tail=tail)


def _fits(row, tile: AttentionTile, head_dim: int, subgroup_rows: bool = False) -> bool:
    n_and_k = math.lcm(row.N, row.K)
    if subgroup_rows:
        rows = tile.subgroup_rows()
        fits_rows = rows is not None and rows % row.M == 0
    else:
        fits_rows = row.workgroup_invocations == tile.workgroup_size and tile.br % row.M == 0
    return fits_rows and tile.bc % n_and_k == 0 and head_dim % n_and_k == 0


def _scope_rows(flexible, dtype: str, subgroup_rows: bool) -> list:
    types = accumulating_types(dtype)
    return granularity_rows(flexible, types, SCOPE_SUBGROUP) if subgroup_rows else granularity_rows(flexible, types)


def check_attention_tile(flexible, dtype: str, head_dim: int, tile: AttentionTile,
                         max_dimension: int | None = None, subgroup_rows: bool = False) -> None:
    """Raise AttentionInputError unless one granularity row divides every matrix of the kernel (with
    ``subgroup_rows``: a subgroup-scope row, over the rows each 32-wide subgroup owns)."""
    check_dtype(dtype)
    check_head_dim(head_dim)
    if min(tile.workgroup_size, tile.br, tile.bc) < 1:
        raise AttentionInputError(f"tile {tile.label()}: every size must be positive")
    if max_dimension and max(tile.br, tile.bc, head_dim) > max_dimension:
        raise AttentionInputError(f"tile {tile.label()} with head_dim {head_dim} exceeds "
                                  f"cooperativeMatrixFlexibleDimensionsMaxDimension ({max_dimension})")
    rows = _scope_rows(flexible, dtype, subgroup_rows)
    if subgroup_rows and not any(_fits(row, tile, head_dim, True) for row in rows):
        listed = ", ".join(f"{r.M}/{r.N}/{r.K}" for r in rows) or "none"
        raise AttentionInputError(f"tile {tile.label()} with head_dim {head_dim}: subgroup rows need whole "
                                  f"{SUBGROUP_SIZE}-wide subgroups sharing BR evenly, their rows a multiple of M and "
                                  f"BC and head_dim of N and K of a subgroup-scope flexible-dimensions row for "
                                  f"{dtype} (listed: {listed})")
    if not subgroup_rows and not any(_fits(row, tile, head_dim) for row in rows):
        listed = ", ".join(f"{r.workgroup_invocations}: {r.M}/{r.N}/{r.K}" for r in rows) or "none"
        raise AttentionInputError(f"tile {tile.label()} with head_dim {head_dim} matches no workgroup-scope "
                                  f"flexible-dimensions row for {dtype} (BR a multiple of M, BC and head_dim of N "
                                  f"and K, invocations equal; listed: {listed})")


def stats_columns(flexible, dtype: str, tile: AttentionTile, subgroup_rows: bool = False) -> int:
    """The narrowest width the running row max and row sum can have: the N granularity of the row that ``tile``
    fits (every column of them holds the row's value, so more columns only cost registers)."""
    own_rows = tile.subgroup_rows() if subgroup_rows else tile.br
    rows = [row for row in _scope_rows(flexible, dtype, subgroup_rows)
            if (subgroup_rows or row.workgroup_invocations == tile.workgroup_size) and own_rows
            and own_rows % row.M == 0 and tile.bc % row.N == 0]
    if not rows:
        scope = "subgroup" if subgroup_rows else "workgroup"
        raise AttentionInputError(f"tile {tile.label()} matches no {scope}-scope flexible-dimensions row for "
                                  f"{dtype}")
    return min(row.N for row in rows)


def staged_shared_bytes(tile: AttentionTile, head_dim: int, subgroup_rows: bool, kv_staged: bool) -> int:
    """The shared memory flash_attention.comp declares for Q (``subgroup_rows``: SCOPE=SUBGROUP keeps Q there) and
    one block each of K and V (KV_STAGED): rows of head_dim + 8 elements (a 16-byte bank skew), 2 bytes each."""
    rows = (tile.br if subgroup_rows else 0) + (2 * tile.bc if kv_staged else 0)
    return rows * (head_dim + 8) * 2


def choose_split_config(flexible, dtype: str, head_dim: int, staging_bytes: int,
                        max_dimension: int | None = None) -> AttentionConfig | None:
    """FlashAttention-2's split (:data:`SPLIT_ROWS` rows per subgroup, Q shared, K and V staged) at
    :data:`PREFERRED_INVOCATIONS`, with the most keys per step (from :func:`keys_per_step` down to
    :data:`MIN_KEYS_PER_STEP`) whose staged rows fit ``staging_bytes``; None where the head dimension, the
    shared memory or the subgroup-scope table rule it out."""
    if head_dim > SPLIT_MAX_HEAD_DIM:
        return None
    br = PREFERRED_INVOCATIONS // SUBGROUP_SIZE * SPLIT_ROWS
    bc = keys_per_step(head_dim)
    while bc >= MIN_KEYS_PER_STEP:
        tile = AttentionTile(PREFERRED_INVOCATIONS, br, bc)
        if staged_shared_bytes(tile, head_dim, True, True) <= staging_bytes:
            try:
                check_attention_tile(flexible, dtype, head_dim, tile, max_dimension, subgroup_rows=True)
            except AttentionInputError:
                return None
            return AttentionConfig(tile, kv_staged=True, subgroup_rows=True)
        bc //= 2
    return None


def choose_config_for(flexible, shape, dtype: str, max_dimension: int | None = None,
                      staging_bytes: int | None = None) -> AttentionConfig:
    """The configuration for an :class:`vkcoop.attention.AttentionShape`: the decode tile for decode steps; for
    prefill the split of :func:`choose_split_config` where ``staging_bytes`` (shared memory a workgroup may fill)
    allows it, else the prefill tile. Key splits and GQA rows stay open (None). Decode merges its key slices in the
    same dispatch, by workgroups that wait for them (``waiting_merge``; on the H100 9-18 % faster than the combine
    pass at kv 8k-16k and 1-5 % at 32k-64k, docs/attention.md, experiments table)."""
    if is_decode(shape):
        return AttentionConfig(choose_tile_for(flexible, shape, dtype, max_dimension), waiting_merge=True)
    if staging_bytes:
        split = choose_split_config(flexible, dtype, shape.head_dim, staging_bytes, max_dimension)
        if split is not None:
            return split
    return AttentionConfig(choose_tile_for(flexible, shape, dtype, max_dimension))


def is_decode(shape) -> bool:
    """A step with so few query rows per kv head (stacked GQA heads included) that the decode tile fits them."""
    return shape.seq_q == 1 or shape.seq_q * shape.group <= DECODE_ROWS


def choose_tile_for(flexible, shape, dtype: str, max_dimension: int | None = None) -> AttentionTile:
    """The tile for an :class:`vkcoop.attention.AttentionShape`: the decode tile for decode steps, else the
    prefill one."""
    if is_decode(shape):
        return choose_decode_tile(flexible, dtype, shape.head_dim, max_dimension)
    return choose_attention_tile(flexible, dtype, shape.head_dim, max_dimension=max_dimension)


def choose_decode_tile(flexible, dtype: str, head_dim: int, max_dimension: int | None = None) -> AttentionTile:
    """The tile for a few query rows (decode): :data:`DECODE_ROWS` rows at :data:`DECODE_INVOCATIONS` when the
    table lists them, else the prefill choice."""
    rows = granularity_rows(flexible, accumulating_types(dtype))
    if any(row.workgroup_invocations == DECODE_INVOCATIONS for row in rows):
        return choose_attention_tile(flexible, dtype, head_dim, invocations=DECODE_INVOCATIONS,
                                     target=(DECODE_ROWS, keys_per_step(head_dim)), max_dimension=max_dimension)
    return choose_attention_tile(flexible, dtype, head_dim, max_dimension=max_dimension)


def choose_attention_tile(flexible, dtype: str, head_dim: int, *, invocations: int | None = None,
                          target=None, max_dimension: int | None = None) -> AttentionTile:
    """``target`` (BR, BC; default :data:`DEFAULT_ROWS` by :func:`keys_per_step`) rounded up to the granularity
    row with ``invocations`` (default: 128 if listed, else the largest listed)."""
    check_dtype(dtype)
    check_head_dim(head_dim)
    target = target or (DEFAULT_ROWS, keys_per_step(head_dim))
    rows = granularity_rows(flexible, accumulating_types(dtype))
    if not rows:
        raise AttentionInputError(f"the device lists no workgroup-scope flexible-dimensions row for {dtype}")
    listed = sorted({row.workgroup_invocations for row in rows})
    if invocations is None:
        invocations = PREFERRED_INVOCATIONS if PREFERRED_INVOCATIONS in listed else listed[-1]
    matching = [row for row in rows if row.workgroup_invocations == invocations]
    if not matching:
        raise AttentionInputError(f"no flexible-dimensions row for {dtype} with workgroupInvocations="
                                  f"{invocations} (listed: {listed})")
    row = matching[0]
    n_and_k = math.lcm(row.N, row.K)
    tile = AttentionTile(invocations, round_up(max(1, int(target[0])), row.M),
                         round_up(max(1, int(target[1])), n_and_k))
    check_attention_tile(flexible, dtype, head_dim, tile, max_dimension)
    return tile
