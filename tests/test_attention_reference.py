"""The float64 attention reference (hypothesis properties), the shader's block loop in numpy, and the tolerance."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vkcoop import attention as attn
from vkcoop.gemm import BF16

DTYPES = {"fp16": np.float16, "bf16": BF16}


def arrays(b, hq, hkv, sq, skv, d=64, dtype=np.float16, seed=0, limit=2.0):
    rng = np.random.default_rng(seed)

    def make(shape):
        return (rng.integers(-16, 17, size=shape) * (limit / 16)).astype(np.float32).astype(dtype)

    return make((b, hq, sq, d)), make((b, hkv, skv, d)), make((b, hkv, skv, d))


shapes = st.tuples(st.integers(1, 2), st.sampled_from([(1, 1), (2, 1), (4, 2), (3, 3)]), st.integers(1, 40),
                   st.integers(1, 40), st.integers(0, 10_000))


@settings(max_examples=30, deadline=None)
@given(shapes, st.booleans())
def test_softmax_rows_sum_to_one(shape, causal):
    b, (hq, hkv), sq, skv, seed = shape
    q, k, v = arrays(b, hq, hkv, sq, skv, seed=seed)
    out, lse = attn.reference_attention(q, k, v, causal=causal, scale=0.3)
    ones = attn.reference_attention(q, k, np.ones_like(v), causal=causal, scale=0.3)[0]
    np.testing.assert_allclose(ones, 1.0, rtol=0, atol=1e-12)
    # lse is the log of the row sum of exp(scores) it normalised by
    scores = np.einsum("bhqd,bhkd->bhqk", q.astype(np.float64), np.repeat(k.astype(np.float64), hq // hkv, 1)) * 0.3
    if causal:
        scores = np.where(np.arange(skv)[None] > np.arange(sq)[:, None], -np.inf, scores)
    np.testing.assert_allclose(lse, np.log(np.exp(scores).sum(-1)), rtol=1e-12, atol=1e-12)


@settings(max_examples=30, deadline=None)
@given(shapes)
def test_causal_rows_ignore_future_keys(shape):
    b, (hq, hkv), sq, skv, seed = shape
    q, k, v = arrays(b, hq, hkv, sq, skv, seed=seed)
    k2, v2 = k.copy(), v.copy()
    cut = min(sq, skv)
    k2[:, :, cut:] = np.float16(7.0)
    v2[:, :, cut:] = np.float16(-3.0)
    rows = np.arange(cut)  # row i < cut only sees keys 0..i < cut
    np.testing.assert_array_equal(attn.reference_attention(q, k, v, causal=True)[0][:, :, rows],
                                  attn.reference_attention(q, k2, v2, causal=True)[0][:, :, rows])


@settings(max_examples=30, deadline=None)
@given(shapes)
def test_gqa_equals_repeated_kv_heads_and_rows_select(shape):
    b, (hq, hkv), sq, skv, seed = shape
    q, k, v = arrays(b, hq, hkv, sq, skv, seed=seed)
    group = hq // hkv
    out, lse = attn.reference_attention(q, k, v, causal=True)
    full, full_lse = attn.reference_attention(q, np.repeat(k, group, 1), np.repeat(v, group, 1), causal=True)
    np.testing.assert_array_equal(out, full)
    rows = np.arange(sq)[::2]
    picked, picked_lse = attn.reference_attention(q, k, v, causal=True, rows=rows)
    np.testing.assert_allclose(picked, out[:, :, rows], rtol=0, atol=1e-14)
    np.testing.assert_allclose(picked_lse, lse[:, :, rows], rtol=1e-14, atol=1e-14)


# --------------------------------------------------------------------------- the shader's loop in numpy
@settings(max_examples=60, deadline=None)
@given(shapes, st.booleans(), st.sampled_from([(32, 16), (64, 32), (32, 48), (16, 16)]), st.integers(1, 4),
       st.booleans())
def test_the_block_loop_computes_the_reference(shape, causal, tile, splits, gqa_rows):
    b, (hq, hkv), sq, skv, seed = shape
    q, k, v = arrays(b, hq, hkv, sq, skv, seed=seed)
    out, lse = attn.blocked_attention(q, k, v, attn.AttentionTile(128, *tile), causal=causal, kv_splits=splits,
                                      gqa_rows=gqa_rows)
    ref, ref_lse = attn.reference_attention(q, k, v, causal=causal)
    np.testing.assert_allclose(out, ref, rtol=0, atol=1e-12)
    np.testing.assert_allclose(lse, ref_lse, rtol=1e-12, atol=1e-12)


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 300), st.integers(1, 300), st.sampled_from([(16, 16), (32, 64), (64, 32)]), st.booleans(),
       st.integers(1, 6))
def test_block_ranges_cover_each_tiles_keys_once_and_skip_the_mask_only_where_safe(row0, seq_kv, tile, causal, splits):
    br, bc = tile
    row0 -= row0 % br
    ranges = [attn.block_ranges(row0, seq_kv, br, bc, causal, splits, s) for s in range(splits)]
    covered = [block for r in ranges for block in r.blocks]
    last_key = min(seq_kv, row0 + br) if causal else seq_kv
    assert sorted(covered) == list(range(-(-last_key // bc)))      # every needed block once
    counts = [len(r.blocks) for r in ranges]
    assert max(counts) - min(counts) <= 1                           # the slices share the blocks evenly
    keys = np.concatenate([attn.slice_keys(r, bc, seq_kv) for r in ranges])
    assert np.array_equal(np.sort(keys), np.arange(min(seq_kv, len(covered) * bc)))   # each key once
    for r in ranges:
        for block in (b for b in r.blocks if b < r.unmasked):
            keys = np.arange(block * bc, block * bc + bc)
            assert keys[-1] < seq_kv                          # no padded key
            assert not causal or keys[-1] <= row0             # visible to the tile's first row, so to all


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 9), st.integers(1, 40), st.sampled_from([16, 32, 64]), st.booleans(), st.data())
def test_a_tiles_query_span_holds_exactly_the_queries_of_its_rows(group, seq_q, br, gqa_rows, data):
    rows = (group if gqa_rows else 1) * seq_q
    row0 = data.draw(st.integers(0, rows - 1)) // br * br
    first, last = attn.query_span(row0, br, rows, seq_q, gqa_rows)
    real = np.arange(row0, min(row0 + br, rows))
    queries = real % seq_q if gqa_rows else real
    assert first == queries.min()                       # the mask is skipped only where every row sees the block
    assert last >= queries.max()                        # no row loses a key it may see
    if gqa_rows:
        assert last == queries.max()                    # and a stacked tile reads no key no row needs


# --------------------------------------------------------------------------- the tolerance
def _emulated(q, k, v, causal, tile=attn.AttentionTile(128, 64, 64), splits=1):
    out, lse = attn.blocked_attention(q, k, v, tile, causal=causal, kv_splits=splits, emulate=True)
    return out.astype(q.dtype), lse.astype(np.float32)


@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("causal, splits", [(False, 1), (True, 1), (False, 3)])
def test_an_fp32_emulation_of_the_kernel_stays_within_the_tolerance(dtype, d, causal, splits):
    q, k, v = arrays(1, 4, 2, 70, 200, d, DTYPES[dtype], seed=d)
    out, lse = _emulated(q, k, v, causal, splits=splits)
    ref, ref_lse = attn.reference_attention(q, k, v, causal=causal)
    tolerance = attn.tolerance_for(q, k, v)
    ok, worst, why = attn.check_attention(out, ref, tolerance)
    assert ok, why
    assert worst > 0.05 * tolerance.atol            # a bound, but not a vacuous one
    assert attn.check_attention(lse, ref_lse, tolerance, lse=True)[0]


def test_the_tolerance_catches_an_off_by_one_causal_mask():
    q, k, v = arrays(1, 2, 2, 40, 40, 64, np.float16, seed=3)
    ref = attn.reference_attention(q, k, v, causal=True)[0]
    shifted = np.concatenate([np.zeros_like(q[:, :, :1]), q], axis=2)   # row i + 1 of `shifted` is row i of q
    one_more_key = attn.reference_attention(shifted, k, v, causal=True, rows=np.arange(1, 41))[0]
    ok, _, why = attn.check_attention(one_more_key.astype(np.float16), ref, attn.tolerance_for(q, k, v))
    assert not ok and "O elements outside the tolerance" in why


def test_the_tolerance_grows_with_type_head_dim_and_keys_and_refuses_nan():
    small = attn.attention_tolerance("fp16", 64, 128, scale=0.125)
    assert attn.attention_tolerance("bf16", 64, 128, scale=0.125).atol > 4 * small.atol
    assert attn.attention_tolerance("fp16", 128, 128, scale=0.125).atol > small.atol
    assert attn.attention_tolerance("fp16", 64, 4096, scale=0.125).atol > small.atol
    assert small.rtol == 2.0 ** -10 and 2.0 ** -10 < small.atol < 2 * 2.0 ** -10   # 1 to 2 fp16 ulp for unit inputs
    ref = np.zeros((2, 3))
    got = ref.copy()
    got[1, 2] = np.nan
    ok, worst, why = attn.check_attention(got, ref, small)
    assert not ok and worst == np.inf and "(1, 2)" in why
    assert not attn.check_attention(got[:1], ref, small)[0]


def test_uniform_scores_are_exact_in_the_emulation():
    from vkcoop.samples.attention import uniform_score_inputs
    for dtype in (np.float16, BF16):
        q, k, v, out = uniform_score_inputs(np.random.default_rng(1), dtype, 1, 4, 2, 65, 32, 128)
        got, _ = _emulated(q, k, v, False)
        assert np.array_equal(got.view(np.uint16), out.view(np.uint16))
        assert np.array_equal(attn.reference_attention(q, k, v)[0].astype(dtype).view(np.uint16), out.view(np.uint16))
