"""``vkcoop inspect --attention JOB``: a job (:func:`vkcoop.attention.parse_job`) with one configuration becomes an
inspect target on the benchmark's own case, and the build child makes exactly the pipelines the runner would time
(checked here with a stand-in device; the driver's code for them is what the GPU run reads)."""
from __future__ import annotations

import numpy as np
import pytest
from support import toolchain_or_skip
from test_attention_runner import Device
from test_inspect_nvuc import FIXTURES, fake_build, run_cli

from vkcoop import vk
from vkcoop.attention import COMBINE_SHADER, AttentionShape, VulkanAttention, parse_attention_config, parse_job
from vkcoop.bench.attention import make_cases
from vkcoop.gemm import DTYPES
from vkcoop.inspect import child, core, targets


class ContextDevice(Device):
    """The attention runner tests' stand-in device, usable in a ``with``."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _captured_target(monkeypatch, argv):
    seen = []
    build = fake_build(FIXTURES / "peak")

    def run_child(target, cache_dir, **kwargs):
        seen.append(target)
        return build(target, cache_dir, **kwargs)
    monkeypatch.setattr(core, "run_child", run_child)
    assert run_cli(argv) == 0
    (target,) = seen
    return target


def test_a_job_becomes_the_benchmarks_case_with_one_configuration(monkeypatch, capsys):
    target = _captured_target(monkeypatch, ["--attention", "prefill/bf16/64/4096c/128:64x128k", "--no-executables"])
    (case,) = make_cases(["prefill"], ["bf16"], [64], [4096], [4096], [True])
    assert target.kind == "attention" and target.dtype == "bf16"
    assert AttentionShape(**target.attention["shape"]) == case.shape and target.attention["causal"] is True
    assert target.attention["config"] == "128:64x128k" and target.attention["target_workgroups"] is None
    assert targets.Target.from_dict(target.to_dict()) == target            # travels to the child as JSON
    assert "attention prefill bf16" in target.label and "128:64x128k" in capsys.readouterr().out


@pytest.mark.parametrize("job, message", [
    ("prefill/fp16/128/4096/128:64x64,64:16x64", "2 configurations"),
    ("prefill/fp16/96/4096/128:64x64", "96"),
    ("prefill/fp16/128/4096/128:64y64", "128:64y64"),
    ("decode/fp16/128/32768c/64:16x64", "decode is not causal"),
    ("prefill/fp16/128", "KIND/DTYPE/HEAD_DIM/SEQ"),
])
def test_bad_attention_jobs_are_one_line_errors_before_any_build(monkeypatch, capsys, job, message):
    monkeypatch.setattr(core, "run_child", lambda *a, **k: pytest.fail("nothing may be built"))
    assert run_cli(["--attention", job, "--no-executables"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("vkcoop: error:") and len(err.splitlines()) == 1 and message in err


def test_a_target_with_a_bad_shape_or_dtype_is_refused():
    shape = {"batch": 1, "q_heads": 4, "kv_heads": 2, "seq_q": 64, "seq_kv": 64, "head_dim": 128}
    with pytest.raises(targets.TargetError, match="fp8"):
        targets.attention_target("c", "fp8", shape, False, "128:64x64")
    with pytest.raises(targets.TargetError):
        targets.attention_target("c", "fp16", {**shape, "heads": 3}, False, "128:64x64")
    with pytest.raises(targets.TargetError, match="target-workgroups"):
        targets.attention_target("c", "fp16", shape, False, "128:64x64", target_workgroups=0)


def _zero_inputs(case):
    """q, k, v of a benchmark case, all zero: pipelines depend on the shapes only."""
    s, element = case.shape, DTYPES[case.dtype]
    kv = np.zeros((s.batch, s.kv_heads, s.seq_kv, s.head_dim), element)
    return np.zeros((s.batch, s.q_heads, s.seq_q, s.head_dim), element), kv, kv


def _built(monkeypatch, job):
    """(pipelines the build child made, the launch the runner would time) for one job."""
    toolchain_or_skip()
    monkeypatch.setattr(vk, "Device", ContextDevice)
    from vkcoop.cli.inspect import attention_target
    target = attention_target(job, None)
    with child._attention(target, None) as (device, recorder):
        made = [pipeline.specialization for _, _, pipeline in recorder.created]
    case, _ = parse_job(job)
    config = parse_attention_config(target.attention["config"])
    runner = VulkanAttention.from_config(ContextDevice(), case.dtype, case.shape, config, causal=case.causal)
    return made, runner.kernel.launch(*_zero_inputs(case))


def test_the_child_builds_the_pipelines_the_runner_times_for_prefill(monkeypatch):
    made, launch = _built(monkeypatch, "prefill/fp16/128/4096/128:64x64")
    assert made == [d.specialization for d in launch.dispatches]
    (flash,) = made
    assert flash["ALIGNED"] is True and flash["KV_SPLITS"] == 1      # 4096 is a multiple of 64: no clamped tile


def test_the_child_builds_both_passes_of_a_split_decode(monkeypatch):
    made, launch = _built(monkeypatch, "decode/fp16/128/32768/64:16x64")
    assert made == [d.specialization for d in launch.dispatches]
    assert [d.shader for d in launch.dispatches][1] == COMBINE_SHADER
    assert made[0]["KV_SPLITS"] > 1 and made[0]["GQA_ROWS"] is True  # one query row per head: the group stacks


@pytest.mark.parametrize("kind, seq, heads", [("decode", "2048", (32, 8)), ("decode", "2048n", (32, 32)),
                                              ("prefill", "512", None)])
def test_the_benchs_config_label_is_a_job_that_inspect_takes_back(monkeypatch, kind, seq, heads):
    toolchain_or_skip()
    from vkcoop.bench import attention_paths
    monkeypatch.setattr(vk, "Device", ContextDevice)
    length = int(seq.rstrip("n"))
    (case,) = make_cases([kind], ["fp16"], [128], [length], [length], [False], decode_heads=[heads or (1, 1)])
    path = attention_paths.VulkanPath(["fp16"])
    try:
        bound = path.bind(case, _zero_inputs(case))
        kernel = bound.runner.kernel
    finally:
        path.close()
    job = f"{kind}/fp16/128/{seq}/{bound.config}"
    (again,), (config,) = [parse_job(job)[0]], parse_job(job)[1]
    assert again == case
    assert (config.tile, config.kv_splits, config.gqa_rows, config.stats_cols, config.kv_staged) == \
        (kernel.tile, kernel.kv_splits, kernel.gqa_rows, kernel.stats_cols, kernel.kv_staged)
