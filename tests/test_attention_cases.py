"""The job that names a benchmark case with configurations (``vkcoop inspect --attention`` and the lab's explore tool
read it), and the configuration labels it carries; CPU only."""
from __future__ import annotations

import pytest

from vkcoop import attention as attn
from vkcoop.attention.kernel import launch_choices
from vkcoop.bench.attention import make_cases
from vkcoop.samples.fixtures import H200_CAPS


def test_a_job_names_the_bench_case_and_its_configurations():
    case, configs = attn.parse_job("decode/bf16/128/32768/64:16x64s66g,128:64x64n,64:16x64w64")
    assert (case.kind, case.dtype, case.causal) == ("decode", "bf16", False)
    assert case.shape == attn.AttentionShape(1, 32, 8, 1, 32768, 128)
    assert [c.label() for c in configs] == ["64:16x64s66g", "128:64x64n", "64:16x64w64"]
    case, _ = attn.parse_job("prefill/fp16/64/4096c/128:64x64")
    assert case.causal and case.shape == attn.AttentionShape(4, 32, 32, 4096, 4096, 64)
    case, _ = attn.parse_job("decode/fp16/64/8192n/64:16x128m")   # n: the bench's decode case without GQA
    assert case.shape == attn.AttentionShape(1, 32, 32, 1, 8192, 64)
    case, _ = attn.parse_job("decode/fp16/128/8192b40/64:16x64s2m")   # b: the batch of --decode-batch
    assert case.shape == attn.AttentionShape(40, 32, 8, 1, 8192, 128)
    case, _ = attn.parse_job("decode/fp16/64/8192nb3/64:16x128m")
    assert case.shape == attn.AttentionShape(3, 32, 32, 1, 8192, 64)


@pytest.mark.parametrize("job, cases", [
    ("prefill/bf16/64/2048c/128:64x64", (["prefill"], ["bf16"], [64], [2048], [2048], [True])),
    ("prefill/fp16/128/1000/128:64x64", (["prefill"], ["fp16"], [128], [1000], [1000], [False])),
    ("decode/fp16/128/16384n/64:16x64", (["decode"], ["fp16"], [128], [16384], [16384], [False])),
    ("decode/bf16/64/8192b7/64:16x128", (["decode"], ["bf16"], [64], [8192], [8192], [False]))])
def test_a_jobs_case_is_the_one_bench_attention_times(job, cases):
    heads = [(32, 32)] if "n/" in job else [(32, 8)]
    batch = 7 if "b7" in job else 1
    (bench_case,) = make_cases(*cases, decode_heads=heads, decode_batch=batch)
    assert attn.parse_job(job)[0] == bench_case


@pytest.mark.parametrize("job, message", [
    ("decode/fp16/128/32768", "is not KIND/DTYPE/HEAD_DIM/SEQ"),
    ("decode/fp16/128/32768c/64:16x64", "decode is not causal"),
    ("prefill/fp16/128/4096n/128:64x64", "n (no GQA) names a decode case"),
    ("prefill/fp16/128/4096b2/128:64x64", "b (batch) names a decode case"),
    ("decode/fp16/128/8192b/64:16x64", "is not KIND/DTYPE/HEAD_DIM/SEQ"),
    ("decode/fp16/128/8192bn2/64:16x64", "is not KIND/DTYPE/HEAD_DIM/SEQ"),
    ("decode/fp16/128/8192b0/64:16x64", "the sequence length and the batch must be >= 1"),
    ("train/fp16/128/4096/64:16x64", "kind 'train': choose from prefill, decode"),
    ("prefill/fp32/128/4096/64:16x64", "dtype='fp32'"),
    ("prefill/fp16/96/4096/64:16x64", "head_dim=96"),
    ("prefill/fp16/128/0/64:16x64", "the sequence length and the batch must be >= 1"),
    ("prefill/fp16/128/4096/", "names no configuration"),
    ("prefill/fp16/128/4096/64:16x64s0", "is not INVOCATIONS:BRxBC"),
])
def test_bad_jobs_are_one_line_input_errors(job, message):
    with pytest.raises(attn.AttentionInputError) as info:
        attn.parse_job(job)
    assert message in str(info.value) and "\n" not in str(info.value)


def test_configuration_labels_parse_back_and_bad_ones_are_refused():
    for label in ("128:64x64", "64:16x128s32g", "64:16x64n", "256:128x64s3w32", "64:16x64gw16", "128:64x64w16",
                  "128:64x64k", "128:64x64u", "128:64x64rk", "128:128x64rk", "64:32x64s9gmr", "64:16x64s66gmk",
                  "128:64x128c19", "128:64x64w16c3rk", "128:64x64t9", "128:64x64s1c4t9k"):
        assert attn.parse_attention_config(label).label() == label
    config = attn.parse_attention_config(" 64:16x128s32gw16 ")
    assert config == attn.AttentionConfig(attn.AttentionTile(64, 16, 128), 32, True, 16)
    staged = [attn.parse_attention_config(f"128:64x128{flag}").kv_staged for flag in ("k", "u", "")]
    assert staged == [True, False, None]
    assert attn.parse_attention_config("128:128x64rk") == attn.AttentionConfig(
        attn.AttentionTile(128, 128, 64), kv_staged=True, subgroup_rows=True)
    assert attn.parse_attention_config("64:16x64s66gm") == attn.AttentionConfig(
        attn.AttentionTile(64, 16, 64), 66, True, waiting_merge=True)
    assert attn.parse_attention_config("128:64x128c19").order_chunk == 19
    assert attn.parse_attention_config("128:64x64c4t9").order_tail == 9
    for bad in ("64:16x64w0", "64:16x64s", "64:16x64gn", "64x16:64", "64:16x64x", "128:64x64c0", "128:64x64c",
                "128:64x64rc2", "128:64x64t0", "128:64x64t3c2", "128:64x64ku", "128:64x64kr", "128:64x64rr",
                "128:64x64rm", "64:16x64mm"):
        with pytest.raises(attn.AttentionInputError, match="INVOCATIONS:BRxBC"):
            attn.parse_attention_config(bad)


@pytest.mark.parametrize("label", ["128:128x64qrk", "128:64x64qk", "128:64x64v", "64:16x64s66gf", "64:16x64s9gfk"])
def test_the_knobs_that_left_the_kernel_are_no_labels(label):
    """Q in shared memory is part of the subgroup rows (``r``); V issued early (``v``) and the merge by the last
    slices (``f``) are gone: their labels are refused (a tuning cache that holds one drops it)."""
    with pytest.raises(attn.AttentionInputError, match="INVOCATIONS:BRxBC"):
        attn.parse_attention_config(label)


def test_m_and_l_need_a_row_the_tile_fits():
    with pytest.raises(attn.AttentionInputError, match="tile 96:64x64 matches no workgroup-scope"):
        attn.stats_columns(H200_CAPS.flexible, "fp16", attn.AttentionTile(96, 64, 64))


def test_launch_choices_keep_what_is_given_and_choose_the_rest():
    decode = attn.AttentionShape(1, 32, 8, 1, 32768, 128)
    tile = attn.AttentionTile(64, 16, 64)
    assert launch_choices(decode, tile) == (True, 66)                     # 8 stacked tiles -> 528 workgroups
    assert launch_choices(decode, tile, gqa_rows=False) == (False, 16)     # 32 one-head tiles, one wave
    assert launch_choices(decode, tile, kv_splits=5, target_workgroups=8) == (True, 5)
    assert launch_choices(decode, tile, target_workgroups=64) == (True, 8)
