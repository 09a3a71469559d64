"""Fuzzing reflect and Device.pipeline with damaged modules (tests/spirv_fuzz_worker.py, in a subprocess): 2,100
hypothesis examples of truncations and bit flips of real modules, 500 of them through Device.pipeline on
lavapipe under the validation layer. Only the package's errors may come back: no signal, no other exception."""
from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from support import child_env, toolchain_or_skip, vulkan_probe

REPO = Path(__file__).resolve().parent.parent
pytestmark = [pytest.mark.vulkan, pytest.mark.toolchain]
REFLECT_EXAMPLES, PIPELINE_EXAMPLES = 1600, 500


def test_damaged_modules_give_package_errors_only():
    toolchain_or_skip()
    have_device, reason, validate = vulkan_probe()
    if not have_device:
        pytest.skip(reason)
    env = child_env()
    proc = subprocess.run([sys.executable, str(REPO / "tests" / "spirv_fuzz_worker.py"), str(REFLECT_EXAMPLES),
                           str(PIPELINE_EXAMPLES), "1" if validate else "0"],
                          capture_output=True, text=True, cwd=REPO, env=env, timeout=600)
    if proc.returncode < 0:
        pytest.fail(f"the fuzz worker died of {signal.Signals(-proc.returncode).name}:\n{proc.stderr[-3000:]}")
    assert proc.returncode == 0, proc.stderr[-3000:]
    counts = json.loads(proc.stdout.strip().splitlines()[-1])
    assert counts["reflect examples"] == REFLECT_EXAMPLES and counts["pipeline examples"] == PIPELINE_EXAMPLES
    assert counts["reflect examples"] + counts["pipeline examples"] >= 2000
    # Both outcomes occur: the damage is neither always caught nor never.
    assert counts["reflect rejected"] > 0 and counts["reflect parsed"] > 0
    assert counts.get("pipeline PipelineInputError", 0) > 0 and counts.get("pipeline created", 0) > 0
