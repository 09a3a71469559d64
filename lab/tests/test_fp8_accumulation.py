"""lab/fp8_accumulation.py without a GPU: the probe's operands hold the sums it reads, the summary finds the bits a
modelled accumulator keeps, and the command's refusals."""
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from support import child_env

from lab import fp8_accumulation as probe
from vkcoop import sparse
from vkcoop.cuda import available

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("dtype_name", list(probe.TYPES.values()))
def test_the_operands_are_exact_normal_sparse_and_sum_to_the_small_term(dtype_name):
    import ml_dtypes
    a, b, exact, exponent = probe.probe_operands(dtype_name)
    assert a.dtype == probe._np_dtype(dtype_name) and b.dtype == a.dtype
    wide_a, wide_b = a.astype(np.float64), b.astype(np.float64)
    assert np.array_equal(wide_a @ wide_b, exact)                                   # 2^s + 2^-(i+j) - 2^s, exactly
    tiny = np.finfo(np.float32).tiny if dtype_name == "float32" else ml_dtypes.finfo(a.dtype).smallest_normal
    nonzero = np.abs(np.concatenate([wide_a.ravel(), wide_b.ravel()]))
    assert (nonzero[nonzero > 0] >= float(tiny)).all()                              # no subnormal factor
    compress = sparse.compress_1to2 if dtype_name == "float32" else sparse.compress_2to4
    decompress = sparse.decompress_1to2 if dtype_name == "float32" else sparse.decompress_2to4
    assert np.array_equal(decompress(compress(a, accept_sparse=True)), a)           # nothing pruned away
    largest = np.abs(wide_a).max(axis=1, keepdims=True)                             # 2^s of each row
    assert np.array_equal(2.0 ** -exponent.astype(np.float64), exact / largest)      # e bits below 2^s
    assert exponent.min() == 0 and exponent.max() >= 20
    k_step = probe.instruction_k(dtype_name)
    across = wide_a[probe.M // 2:]                                                  # one term an instruction
    assert (np.count_nonzero(across.reshape(probe.M // 2, -1, k_step), axis=2) == [1, 1, 1, 0]).all()


def _modelled(exact: np.ndarray, exponent: np.ndarray, bits: int) -> np.ndarray:
    """C of an accumulation that keeps ``bits`` fraction bits below its largest addend: the small term survives
    while it lies at most ``bits`` below."""
    return np.where(exponent <= bits, exact, 0.0)


@pytest.mark.parametrize("bits", [0, 5, 13, 14])
def test_the_summary_finds_the_bits_a_modelled_accumulator_keeps(bits):
    _, _, exact, exponent = probe.probe_operands("float8_e5m2")
    report = probe.summarize(_modelled(exact, exponent, bits), exact, exponent)
    for case in probe.CASES:
        assert report[case]["bits"] == bits
        counts = report[case]["by_exponent"]
        assert all(c["other"] == 0 for c in counts.values())
        assert all((c["dropped"] > 0) == (e > bits) for e, c in counts.items())


def test_the_summary_catches_a_wrong_sum():
    """Planted fault: one output of e = 3 twice the term (a rounding, not a drop) ends the run of kept terms."""
    _, _, exact, exponent = probe.probe_operands("float8_e4m3fn")
    c = _modelled(exact, exponent, 20)
    row, col = np.argwhere(exponent == 3)[0]
    c[row, col] *= 2
    report = probe.summarize(c, exact, exponent)
    case = probe.CASES[0] if row < probe.M // 2 else probe.CASES[1]
    assert report[case]["bits"] == 2 and report[case]["by_exponent"][3]["other"] == 1


def _run(*args):
    return subprocess.run([sys.executable, "-m", "lab.fp8_accumulation", *args], capture_output=True, text=True,
                          timeout=120, env=child_env(), cwd=REPO)


def test_an_unknown_type_is_refused():
    proc = _run("--types", "e4m3,fp4")
    assert proc.returncode == 2 and "unknown type(s) fp4" in proc.stderr


@pytest.mark.skipif(available()[0], reason="a usable CUDA GPU is present")
def test_without_cuda_it_says_why_and_exits_2():
    proc = _run()
    assert proc.returncode == 2 and "CUDA paths unavailable" in proc.stderr
