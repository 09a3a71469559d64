"""lab/gemm_fixed_cost.py: its argument checks (before any GPU work) and its report on given timings."""
import subprocess
import sys
from pathlib import Path

import pytest
from support import child_env

from lab import gemm_fixed_cost

REPO = Path(__file__).resolve().parents[2]


def _run(*args):
    return subprocess.run([sys.executable, "-m", "lab.gemm_fixed_cost", *args], capture_output=True, text=True,
                          timeout=120, env=child_env(), cwd=REPO)


@pytest.mark.parametrize("args, message", [
    (("--ks", "2048,4096"), "at least two sizes must move more than 64 MiB"),   # 33.5 and 67 MB: one fits
    (("--ks", "8192,100"), "K a multiple of 32"),
    (("--ks", "8192,x"), "K values are positive integers"),
    (("--config", "9x9", "--ks", "8192,16384"), "is not INVOCATIONS:MxNxK"),
    (("--dtype", "fp8", "--ks", "8192,16384"), "dtype must be one of"),
    (("--kernel", "khr16",), "invalid choice")])
def test_bad_arguments_get_one_line_and_exit_2(args, message, capsys):
    with pytest.raises(SystemExit) as exit_:     # argparse's refusal, before any GPU work
        gemm_fixed_cost.main(list(args))
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and message in err
    assert "Traceback" not in err


def test_a_bad_argument_as_a_process_exits_2_without_a_traceback():
    proc = _run("--ks", "8192,100")
    assert proc.returncode == 2 and "K a multiple of 32" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_the_report_fits_the_sizes_past_the_threshold_only(capsys):
    args = gemm_fixed_cost.parse_args(["--m", "8192", "--n", "32", "--ks", "2048,8192,16384", "--read-gbps", "3000"])
    # Times built from 6 us + bytes at 2.5 TB/s for the two fitted sizes; the L2-sized one is off the line.
    from vkcoop.bench import roofline
    moved = {k: roofline.bytes_moved("vk-coopmat2-dense", 8192, 32, k) for k in (2048, 8192, 16384)}
    records = [{"shape": [8192, 32, k], "median_ms": (6e-6 + moved[k] / 2.5e12) * 1e3 * (0.5 if k == 2048 else 1)}
               for k in (2048, 8192, 16384)]
    fit = gemm_fixed_cost.report(args, records)
    assert fit["fixed_us"] == pytest.approx(6.0, rel=1e-6) and fit["bytes_per_s"] == pytest.approx(2.5e12, rel=1e-6)
    assert fit["fitted_k"] == [8192, 16384]
    out = capsys.readouterr().out
    assert "(not fitted)" in out and "0.83x of 3000 GB/s" in out
