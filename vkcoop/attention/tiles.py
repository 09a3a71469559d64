"""Tiles (BR query rows x BC keys) of flash_attention.comp, chosen from and checked against the driver's table.

The kernel multiplies two pairs of workgroup-scope matrices, S = Q Kᵀ (BR x HEAD_DIM by HEAD_DIM x BC) and
O += P V (BR x BC by BC x HEAD_DIM), so one flexible-dimensions row (fp16/bf16 -> fp32, workgroup scope,
``workgroupInvocations == workgroup_size``) must divide all of them: BR by its M granularity, BC and HEAD_DIM by
both its N and K granularities. On the H200 that is 32/16/16 at 128 invocations and 32/32/16 at 256.

A tile's :meth:`AttentionTile.label` (``INVOCATIONS:BRxBC``) parses back with :func:`parse_attention_tile`.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass

from ..gemm import accumulating_types, granularity_rows
from ..gemm.tiles import round_up
from .shapes import AttentionInputError, check_dtype, check_head_dim

#: Query rows x keys per step before rounding to the table: 64 rows over 4 warps is FlashAttention-2's split.
DEFAULT_TARGET = (64, 64)
#: Preferred invocations when the table lists them (4 warps per 64 rows); otherwise the largest listed.
PREFERRED_INVOCATIONS = 128


@dataclass(frozen=True)
class AttentionTile:
    """The launch shape of flash_attention.comp: workgroup size and the BR x BC score tile."""
    workgroup_size: int
    br: int
    bc: int

    def label(self) -> str:
        return f"{self.workgroup_size}:{self.br}x{self.bc}"


#: An AttentionTile label, ``INVOCATIONS:BRxBC``.
_LABEL = re.compile(r"^(\d+):(\d+)x(\d+)$")


def parse_attention_tile(text: str) -> AttentionTile:
    """The inverse of :meth:`AttentionTile.label`."""
    match = _LABEL.match(text.strip())
    if not match:
        raise AttentionInputError(f"tile {text!r} is not INVOCATIONS:BRxBC (e.g. 128:64x64)")
    return AttentionTile(*(int(g) for g in match.groups()))


def _fits(row, tile: AttentionTile, head_dim: int) -> bool:
    n_and_k = math.lcm(row.N, row.K)
    return (row.workgroup_invocations == tile.workgroup_size and tile.br % row.M == 0
            and tile.bc % n_and_k == 0 and head_dim % n_and_k == 0)


def check_attention_tile(flexible, dtype: str, head_dim: int, tile: AttentionTile,
                         max_dimension: int | None = None) -> None:
    """Raise AttentionInputError unless one granularity row divides every matrix of the kernel."""
    check_dtype(dtype)
    check_head_dim(head_dim)
    if min(tile.workgroup_size, tile.br, tile.bc) < 1:
        raise AttentionInputError(f"tile {tile.label()}: every size must be positive")
    if max_dimension and max(tile.br, tile.bc, head_dim) > max_dimension:
        raise AttentionInputError(f"tile {tile.label()} with head_dim {head_dim} exceeds "
                                  f"cooperativeMatrixFlexibleDimensionsMaxDimension ({max_dimension})")
    rows = granularity_rows(flexible, accumulating_types(dtype))
    if not any(_fits(row, tile, head_dim) for row in rows):
        listed = ", ".join(f"{r.workgroup_invocations}: {r.M}/{r.N}/{r.K}" for r in rows) or "none"
        raise AttentionInputError(f"tile {tile.label()} with head_dim {head_dim} matches no workgroup-scope "
                                  f"flexible-dimensions row for {dtype} (BR a multiple of M, BC and head_dim of N "
                                  f"and K, invocations equal; listed: {listed})")


def choose_attention_tile(flexible, dtype: str, head_dim: int, *, invocations: int | None = None,
                          target=DEFAULT_TARGET, max_dimension: int | None = None) -> AttentionTile:
    """``target`` (BR, BC) rounded up to the granularity row with ``invocations`` (default: 128 if listed, else
    the largest listed)."""
    check_dtype(dtype)
    check_head_dim(head_dim)
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
