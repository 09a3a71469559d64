"""The attention seeds (vkcoop.attention.seeds) without a GPU: the class of a shape, and what ``attention()`` runs on
a recorded device table: its seed where the table takes it, else the table's own choice."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from vkcoop.attention import AttentionConfig, AttentionShape, AttentionTile, choose_config_for
from vkcoop.attention.seeds import ATTENTION_SEEDS, attention_class, seed_config, seeded_config_for
from vkcoop.gemm.configs import recorded_device

DOCS = Path(__file__).resolve().parents[1] / "docs"
H100_NAME = "NVIDIA H100 80GB HBM3"


def _device(name: str):
    found, flexible, _, limits = recorded_device(json.loads((DOCS / f"{name}-capabilities.json").read_text()))
    return found, flexible, limits.max_dimension or None, limits.staging_bytes


def _cases(head_dim: int):
    """(class, shape, causal) for each class at ``head_dim``."""
    heads = 2048 // head_dim
    prefill = AttentionShape(4, heads, heads, 4096, 4096, head_dim)
    return [(f"prefill-d{head_dim}", prefill, False), (f"prefill-d{head_dim}-causal", prefill, True),
            (f"decode-d{head_dim}", AttentionShape(1, 32, 8, 1, 16384, head_dim), False),
            (f"decode-d{head_dim}-mha", AttentionShape(1, 32, 32, 1, 16384, head_dim), False)]


def test_a_shape_s_class_follows_its_kind_head_dim_mask_and_gqa():
    for head_dim in (64, 128):
        for cls, shape, causal in _cases(head_dim):
            assert attention_class(shape, causal) == cls
    # a decode step needs not be one query: 2 queries of 4 stacked q heads are 8 rows, which the decode tile holds
    assert attention_class(AttentionShape(1, 32, 8, 2, 4096, 64)) == "decode-d64"
    assert attention_class(AttentionShape(1, 32, 8, 64, 4096, 64), True) == "prefill-d64-causal"
    # the caller's kind wins over the rule (the bench names its cases' kind)
    assert attention_class(AttentionShape(1, 32, 8, 1, 4096, 64), decode=False) == "prefill-d64"
    assert attention_class(AttentionShape(1, 32, 32, 1, 4096, 128), True) == "decode-d128-mha"   # no mask in decode


@pytest.mark.parametrize("head_dim", [64, 128])
def test_the_h100_runs_its_seed_in_every_class(head_dim):
    name, flexible, limit, staging = _device("h100")
    assert name == H100_NAME
    for cls, shape, causal in _cases(head_dim):
        config, source = seeded_config_for(name, flexible, shape, "fp16", causal, limit, staging)
        assert source == "seed", cls
        assert config.label() == ATTENTION_SEEDS[H100_NAME][cls] == seed_config(name, shape, causal).label()


@pytest.mark.parametrize("head_dim", [64, 128])
def test_a_device_without_seeds_runs_the_table_s_choice(head_dim):
    name, flexible, limit, staging = _device("h200")
    assert name not in ATTENTION_SEEDS
    for cls, shape, causal in _cases(head_dim):
        assert seed_config(name, shape, causal) is None
        config, source = seeded_config_for(name, flexible, shape, "bf16", causal, limit, staging)
        assert (config, source) == (choose_config_for(flexible, shape, "bf16", limit, staging), "default"), cls


def test_a_seed_the_table_does_not_take_is_passed_over(monkeypatch):
    name, flexible, limit, staging = _device("h100")
    shape = AttentionShape(1, 32, 8, 1, 16384, 128)
    # BC 24 is no multiple of any N granularity of the H100's table (16 or 32)
    monkeypatch.setitem(ATTENTION_SEEDS, name, {"decode-d128": AttentionConfig(AttentionTile(64, 16, 24)).label()})
    config, source = seeded_config_for(name, flexible, shape, "fp16", False, limit, staging)
    assert source == "default"
    assert config == choose_config_for(flexible, shape, "fp16", limit, staging)
    assert config.tile != AttentionTile(64, 16, 24)
    # another class of the same device has no seed now: the table decides there too
    assert seeded_config_for(name, flexible, AttentionShape(1, 32, 8, 1, 16384, 64), "fp16")[1] == "default"
