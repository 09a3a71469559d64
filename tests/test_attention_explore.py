"""The attention sweep tool's job language and its configuration labels (CPU only; the sweeps ran on the H100)."""
from __future__ import annotations

import pytest

from vkcoop import attention as attn
from vkcoop.attention.kernel import launch_choices
from vkcoop.bench import attention_explore as explore
from vkcoop.samples.fixtures import H200_CAPS


def test_a_job_names_the_bench_case_and_its_configurations():
    case, configs = explore.parse_job("decode/bf16/128/32768/64:16x64s66g,128:64x64n,64:16x64w64")
    assert (case.kind, case.dtype, case.causal) == ("decode", "bf16", False)
    assert case.shape == attn.AttentionShape(1, 32, 8, 1, 32768, 128)
    assert [c.label() for c in configs] == ["64:16x64s66g", "128:64x64n", "64:16x64w64"]
    case, _ = explore.parse_job("prefill/fp16/64/4096c/128:64x64")
    assert case.causal and case.shape == attn.AttentionShape(4, 32, 32, 4096, 4096, 64)
    case, _ = explore.parse_job("decode/fp16/64/8192n/64:16x128m")   # n: the bench's decode case without GQA
    assert case.shape == attn.AttentionShape(1, 32, 32, 1, 8192, 64)
    case, _ = explore.parse_job("decode/fp16/128/8192b40/64:16x64s2m")   # b: the batch of --decode-batch
    assert case.shape == attn.AttentionShape(40, 32, 8, 1, 8192, 128)
    case, _ = explore.parse_job("decode/fp16/64/8192nb3/64:16x128m")
    assert case.shape == attn.AttentionShape(3, 32, 32, 1, 8192, 64)


@pytest.mark.parametrize("job, message", [
    ("decode/fp16/128/32768", "is not KIND/DTYPE/HEAD_DIM/SEQ"),
    ("decode/fp16/128/32768c/64:16x64", "decode is not causal"),
    ("prefill/fp16/128/4096n/128:64x64", "n (no GQA) names a decode case"),
    ("prefill/fp16/128/4096b2/128:64x64", "b (batch) names a decode case"),
    ("decode/fp16/128/8192b/64:16x64", "is not KIND/DTYPE/HEAD_DIM/SEQ"),
    ("decode/fp16/128/8192bn2/64:16x64", "is not KIND/DTYPE/HEAD_DIM/SEQ"),
    ("decode/fp16/128/8192b0/64:16x64", "--decode-batch must be >= 1"),
    ("train/fp16/128/4096/64:16x64", "--kinds 'train'"),
    ("prefill/fp32/128/4096/64:16x64", "--dtype 'fp32'"),
    ("prefill/fp16/96/4096/64:16x64", "--head-dims 96"),
    ("prefill/fp16/128/0/64:16x64", "--seqs must be >= 1"),
    ("prefill/fp16/128/4096/", "names no configuration"),
    ("prefill/fp16/128/4096/64:16x64s0", "is not INVOCATIONS:BRxBC"),
])
def test_bad_jobs_are_one_line_errors_before_any_gpu_work(job, message, capsys):
    with pytest.raises(SystemExit) as stopped:
        explore.main(["--job", job])
    assert stopped.value.code == 2
    err = capsys.readouterr().err.strip()
    assert message in err and err.startswith("attention_explore: ") and "\n" not in err


def test_configuration_labels_parse_back_and_bad_ones_are_refused():
    for label in ("128:64x64", "64:16x128s32g", "64:16x64n", "256:128x64s3w32", "64:16x64gw16", "128:64x64w16qv",
                  "64:16x64s66gv", "128:64x64k", "64:16x64s9gfk", "128:64x64u", "128:64x64rk", "64:32x64s9gfr",
                  "64:16x64s66gmk", "128:64x128c19", "128:64x64w16c3qk", "128:64x64t9",
                  "128:64x64s1c4t9k"):
        assert attn.parse_attention_config(label).label() == label
    config = attn.parse_attention_config(" 64:16x128s32gw16 ")
    assert config == attn.AttentionConfig(attn.AttentionTile(64, 16, 128), 32, True, 16)
    assert attn.parse_attention_config("128:64x64q") == attn.AttentionConfig(attn.AttentionTile(128, 64, 64),
                                                                           q_shared=True)
    staged = [attn.parse_attention_config(f"128:64x128{flag}").kv_staged for flag in ("k", "u", "")]
    assert staged == [True, False, None]
    assert attn.parse_attention_config("128:128x64rk") == attn.AttentionConfig(
        attn.AttentionTile(128, 128, 64), kv_staged=True, subgroup_rows=True)
    assert attn.parse_attention_config("64:16x64s66gm") == attn.AttentionConfig(
        attn.AttentionTile(64, 16, 64), 66, True, waiting_merge=True)
    assert attn.parse_attention_config("128:64x128c19").order_chunk == 19
    assert attn.parse_attention_config("128:64x64c4t9").order_tail == 9
    for bad in ("64:16x64w0", "64:16x64s", "64:16x64gn", "64x16:64", "64:16x64x", "128:64x64vq", "128:64x64kf",
                "64:16x64fm", "64:16x64mf", "128:64x64c0", "128:64x64c", "128:64x64qc2", "128:64x64t0",
                "128:64x64t3c2",
                "128:64x64ku", "128:64x64kr", "128:64x64rr"):
        with pytest.raises(attn.AttentionInputError, match="INVOCATIONS:BRxBC"):
            attn.parse_attention_config(bad)


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
