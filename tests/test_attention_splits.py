"""How a launch splits its keys (vkcoop.attention.kernel.choose_kv_splits): one wave where it draws the bandwidth,
else the whole waves of least slot time (docs/attention.md, experiments 46 and 50-51). CPU only."""
from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vkcoop import attention as attn
from vkcoop.attention import kernel as kernel_module
from vkcoop.attention.kernel import target_workgroups


def test_key_splits_fill_the_gpu_for_decode_only():
    tile = attn.AttentionTile(128, 64, 64)
    prefill = attn.AttentionShape(4, 16, 16, 4096, 4096, 128)
    decode = attn.AttentionShape(1, 32, 8, 1, 32768, 128)
    assert attn.choose_kv_splits(prefill, tile) == 1
    assert attn.choose_kv_splits(decode, tile, gqa_rows=False) == 16   # 32 workgroups -> 512 of 528
    assert attn.use_gqa_rows(decode, tile) and not attn.use_gqa_rows(prefill, tile)
    assert attn.choose_kv_splits(decode, tile) == 66                   # 8 stacked tiles -> 528
    assert attn.choose_kv_splits(decode, tile, target_workgroups(114)) == 57   # 4 per SM of 114
    assert attn.choose_kv_splits(attn.AttentionShape(1, 1, 1, 1, 100, 64), tile) == 2   # one slice per block


def _waves_slot_time(workgroups, slots, saturating):
    """wave_cost counted wave by wave: each wave takes as long as max(its workgroups, saturating)."""
    time, left = 0, workgroups
    while left > 0:
        wave = min(left, slots)
        time += max(wave, saturating) if wave < slots else slots
        left -= wave
    return time / workgroups


@settings(max_examples=300, deadline=None)
@given(heads=st.integers(1, 64), group=st.sampled_from([1, 2, 4, 8]), seq_kv=st.integers(1, 1 << 17),
       sm_count=st.integers(1, 200), gqa=st.booleans(), batch=st.integers(1, 64))
def test_key_slices_fill_one_wave_unless_one_wave_cannot_draw_the_bandwidth(heads, group, seq_kv, sm_count, gqa,
                                                                              batch):
    """A slice left for a second wave runs alone after the others: the launch holds no more slices than the target
    where one wave of them holds 2/3 of the slots (then one more slice would spill). Where it cannot (the query
    tiles fill 265-351 of 528 slots), the split is the one of least slot time, counted wave by wave."""
    tile = attn.AttentionTile(64, 16, 64)
    shape = attn.AttentionShape(batch, heads * group, heads, 1, seq_kv, 128)
    target = target_workgroups(sm_count)
    splits = attn.choose_kv_splits(shape, tile, target, gqa)
    x, y = kernel_module.query_workgroups(shape, tile, gqa)
    tiles, blocks = x * y * batch, -(-seq_kv // tile.bc)
    assert 1 <= splits <= blocks
    if tiles >= target:
        assert splits == 1
        return
    one_wave = max(1, min(blocks, target // tiles))
    saturating = -(-2 * target // 3)
    if one_wave * tiles >= saturating or one_wave == blocks:
        assert splits == one_wave
        return
    cost = _waves_slot_time(splits * tiles, target, saturating)
    assert cost == pytest.approx(float(kernel_module.wave_cost(splits * tiles, target, saturating)))
    for other in range(1, min(blocks, -(-4 * target // tiles)) + 1):
        assert cost <= _waves_slot_time(other * tiles, target, saturating) + 1e-12
    assert cost < _waves_slot_time(one_wave * tiles, target, saturating) or splits == one_wave


def test_batched_decode_splits_as_measured_on_the_h100():
    """docs/attention.md, experiments 50-51 (528 slots): 320 query tiles (batch 40 on 8 kv heads) ran 8-9 % faster
    at kv 32k in 3 slices than in 1 (2 lost 18 %); 272 (batch 34) fastest in 7, 288 (batch 9 without GQA) in 5."""
    tile = attn.AttentionTile(64, 16, 64)
    def splits(batch, q_heads, kv_heads, seq_kv=32768):
        return attn.choose_kv_splits(attn.AttentionShape(batch, q_heads, kv_heads, 1, seq_kv, 128), tile)
    assert (splits(40, 32, 8), splits(34, 32, 8), splits(9, 32, 32)) == (3, 7, 5)
    assert (splits(16, 32, 8), splits(33, 32, 8), splits(50, 32, 8), splits(1, 32, 8)) == (4, 2, 1, 66)
    assert kernel_module.wave_cost(960, 528, 352) == 1
    assert kernel_module.wave_cost(320, 528, 352) == Fraction(352, 320)     # one wave short of the bandwidth
    assert kernel_module.wave_cost(640, 528, 352) == Fraction(528 + 352, 640)
