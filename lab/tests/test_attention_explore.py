"""The lab's attention sweep tool: its command line refuses a bad job in one line before any GPU work (the job
grammar itself is the product's, tests/test_attention_cases.py)."""
from __future__ import annotations

import pytest

from lab import attention_explore as explore


@pytest.mark.parametrize("job, message", [
    ("decode/fp16/128/32768", "is not KIND/DTYPE/HEAD_DIM/SEQ"),
    ("decode/fp16/128/32768c/64:16x64", "decode is not causal"),
    ("prefill/fp16/96/4096/64:16x64", "head_dim=96"),
    ("prefill/fp16/128/4096/64:16x64s0", "is not INVOCATIONS:BRxBC"),
    ("prefill/fp16/64/4096/128:128x64qrk", "is not INVOCATIONS:BRxBC"),
])
def test_bad_jobs_are_one_line_errors_before_any_gpu_work(job, message, capsys, monkeypatch):
    from vkcoop import vk
    monkeypatch.setattr(vk, "Device", lambda *a, **k: pytest.fail("a device was opened"))
    with pytest.raises(SystemExit) as stopped:
        explore.main(["--job", "prefill/fp16/128/4096/128:64x64", "--job", job])
    assert stopped.value.code == 2
    err = capsys.readouterr().err.strip()
    assert message in err and err.startswith("attention_explore: ") and "\n" not in err


def test_the_tool_runs_as_a_module_of_the_lab_and_the_product_does_not_ship_it():
    import vkcoop.bench
    assert explore.main.__module__ == "lab.attention_explore"
    assert not hasattr(vkcoop.bench, "attention_explore")
    with pytest.raises(ImportError):
        __import__("vkcoop.bench.attention_explore")
