"""What tuning measures: the configurations of flash_attention.comp a device's table allows for one shape.

``vkcoop bench attention --tune`` times each candidate on the case in hand and caches the fastest per device
(:mod:`vkcoop.bench.attention_tuning`). The candidates come from the same rules as the default choice
(:func:`vkcoop.attention.tiles.choose_config_for`), around it:

* decode: the decode tile with half, one and twice the keys per step, merged by waiting workgroups
  (``waiting_merge``), and the default tile merged by the separate combine pass;
* prefill: FlashAttention-2's split (:func:`vkcoop.attention.tiles.choose_split_config`'s form) at every keys per
  step from :func:`keys_per_step` down to :data:`MIN_SPLIT_KEYS` whose staged rows fit the shared memory, and the
  workgroup-scope tiles of :data:`PREFILL_TILES`, K and V staged where :func:`vkcoop.attention.kernel.stages_kv`
  says and the staged rows fit.

The default comes first, and the list holds no duplicates. Key splits, GQA rows and the causal order stay open:
they follow each shape (:func:`vkcoop.attention.kernel.launch_choices`), so one winner serves a whole class.
"""
from __future__ import annotations

from ..gemm import SUBGROUP_SIZE
from .kernel import stages_kv
from .shapes import AttentionInputError
from .tiles import (PREFERRED_INVOCATIONS, SPLIT_MAX_HEAD_DIM, SPLIT_ROWS, AttentionConfig, AttentionTile,
                    check_attention_tile, choose_attention_tile, choose_config_for, is_decode, keys_per_step,
                    staged_shared_bytes)

#: The workgroup-scope prefill candidates: (query rows, keys per step as a multiple of :func:`keys_per_step`).
#: 128 rows with twice the keys is left out: its score tile alone takes 256 fp32 registers per invocation.
PREFILL_TILES = ((64, 0.5), (64, 1), (64, 2), (128, 0.5), (128, 1))
#: Decode's keys per step, as multiples of the decode tile's BC.
KEY_FACTORS = (0.5, 1, 2)
#: The fewest keys per step a FlashAttention-2 split candidate takes.
MIN_SPLIT_KEYS = 32


def tuning_candidates(flexible, shape, dtype: str, max_dimension: int | None = None,
                      staging_bytes: int | None = None) -> list[AttentionConfig]:
    """The configurations tuning measures for an :class:`vkcoop.attention.AttentionShape` (module docstring),
    the default first; each fits the table, the dimension limit and ``staging_bytes``."""
    default = choose_config_for(flexible, shape, dtype, max_dimension, staging_bytes)
    if is_decode(shape):
        tile = default.tile
        tiles = [AttentionTile(tile.workgroup_size, tile.br, int(tile.bc * f)) for f in KEY_FACTORS]
        others = [AttentionConfig(t, waiting_merge=True) for t in tiles] + [AttentionConfig(tile)]
    else:
        others = _split_candidates(flexible, dtype, shape.head_dim, staging_bytes, max_dimension)
        others += _prefill_tiles(flexible, dtype, shape.head_dim, staging_bytes, max_dimension)
    fitting = [c for c in others if _fits(flexible, dtype, shape.head_dim, c, max_dimension, staging_bytes)]
    return list(dict.fromkeys([default] + fitting))


def _split_candidates(flexible, dtype: str, head_dim: int, staging_bytes: int | None,
                      max_dimension: int | None) -> list[AttentionConfig]:
    if head_dim > SPLIT_MAX_HEAD_DIM or not staging_bytes:
        return []
    rows = PREFERRED_INVOCATIONS // SUBGROUP_SIZE * SPLIT_ROWS
    found, bc = [], keys_per_step(head_dim)
    while bc >= MIN_SPLIT_KEYS:
        found.append(AttentionConfig(AttentionTile(PREFERRED_INVOCATIONS, rows, bc), kv_staged=True,
                                     subgroup_rows=True))
        bc //= 2
    return found


def _prefill_tiles(flexible, dtype: str, head_dim: int, staging_bytes: int | None,
                   max_dimension: int | None) -> list[AttentionConfig]:
    found = []
    for rows, factor in PREFILL_TILES:
        try:
            tile = choose_attention_tile(flexible, dtype, head_dim, target=(rows, keys_per_step(head_dim) * factor),
                                         max_dimension=max_dimension)
        except AttentionInputError:
            continue
        # the kernel's own rule (None) unless its staged rows would not fit: then unstaged
        too_big = staging_bytes and staged_shared_bytes(tile, head_dim, False, True) > staging_bytes
        found.append(AttentionConfig(tile, kv_staged=False if stages_kv(tile, head_dim) and too_big else None))
    return found


def _fits(flexible, dtype: str, head_dim: int, config: AttentionConfig, max_dimension: int | None,
          staging_bytes: int | None) -> bool:
    """Whether the table takes the configuration's tile (every size positive) and its staged rows fit the shared
    memory."""
    try:
        check_attention_tile(flexible, dtype, head_dim, config.tile, max_dimension, config.subgroup_rows)
    except AttentionInputError:
        return False
    kv_staged = stages_kv(config.tile, head_dim) if config.kv_staged is None else config.kv_staged
    staged = staged_shared_bytes(config.tile, head_dim, config.subgroup_rows, kv_staged)
    return not staging_bytes or staged <= staging_bytes


__all__ = ["KEY_FACTORS", "PREFILL_TILES", "tuning_candidates"]
