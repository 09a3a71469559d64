"""The attention configurations measured best on each device, by class (docs/attention.md).

A class is what decides the configuration and leaves the rest to the shape: the kind (prefill or decode), the
head_dim, for prefill the causal mask, and for decode whether q heads share kv heads (GQA) or not (``-mha``: each
tile then holds one query row). A seed is a configuration label whose shape-dependent choices (key splits, GQA rows,
the causal order) stay open, so one seed serves every sequence length of its class.

:func:`vkcoop.attention.attention` runs a device's seed where its table takes it, else the table's rule;
``vkcoop bench attention`` puts its per-device tuning cache before both.
"""
from __future__ import annotations

from .shapes import AttentionInputError
from .tiles import AttentionConfig, check_attention_tile, choose_config_for, is_decode, parse_attention_config

#: On the H100 (docs/attention.md, experiments table): FlashAttention-2's split at head_dim 64 (subgroup rows with Q
#: in shared memory, K and V staged), 64 rows by 64 keys at 128, and the 16-row decode tile merged by waiting
#: workgroups, its keys per step those of one 16 KB block, with GQA and without (since the key slices fit one wave,
#: 128 keys beat 256 by 6-10 % at head_dim 64). A tuning of every candidate kept them.
ATTENTION_SEEDS = {
    "NVIDIA H100 80GB HBM3": {
        "prefill-d64": "128:128x64rk", "prefill-d64-causal": "128:128x64rk",
        "prefill-d128": "128:64x64", "prefill-d128-causal": "128:64x64",
        "decode-d64": "64:16x128m", "decode-d128": "64:16x64m",
        "decode-d64-mha": "64:16x128m", "decode-d128-mha": "64:16x64m",
    },
}


def attention_class(shape, causal: bool = False, decode: bool | None = None) -> str:
    """The class of ``shape`` (module docstring); ``decode`` defaults to :func:`vkcoop.attention.tiles.is_decode`."""
    if is_decode(shape) if decode is None else decode:
        return f"decode-d{shape.head_dim}{'' if shape.group > 1 else '-mha'}"
    return f"prefill-d{shape.head_dim}{'-causal' if causal else ''}"


def seed_config(device_name: str, shape, causal: bool = False, decode: bool | None = None) -> AttentionConfig | None:
    """The seed of ``device_name`` for the class of ``shape``, or None where the device has none."""
    label = ATTENTION_SEEDS.get(device_name, {}).get(attention_class(shape, causal, decode))
    return parse_attention_config(label) if label else None


def seeded_config_for(device_name: str, flexible, shape, dtype: str, causal: bool = False,
                      max_dimension: int | None = None,
                      staging_bytes: int | None = None) -> tuple[AttentionConfig, str]:
    """(configuration, source) for ``shape`` on a device: its seed where the table takes it (``"seed"``), else
    :func:`vkcoop.attention.tiles.choose_config_for` (``"default"``)."""
    seed = seed_config(device_name, shape, causal)
    if seed is not None:
        try:
            check_attention_tile(flexible, dtype, shape.head_dim, seed.tile, max_dimension, seed.subgroup_rows)
            return seed, "seed"
        except AttentionInputError:
            pass   # a table this device's name does not usually come with: the rule decides
    return choose_config_for(flexible, shape, dtype, max_dimension, staging_bytes), "default"


__all__ = ["ATTENTION_SEEDS", "attention_class", "seed_config", "seeded_config_for"]
