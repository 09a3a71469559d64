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
def test_the_operands_are_exact_sparse_and_sum_to_the_small_term(dtype_name):
    a, b, exponent = probe.probe_operands(dtype_name)
    assert a.dtype == probe._np_dtype(dtype_name) and b.dtype == a.dtype
    wide_a, wide_b = a.astype(np.float64), b.astype(np.float64)
    assert set(np.unique(np.abs(wide_a))) <= {0.0} | {2.0 ** -i for i in range(probe.LOWEST[dtype_name] + 1)}
    assert np.array_equal(wide_a @ wide_b, 2.0 ** -exponent.astype(np.float64))    # 1 + 2^-e - 1, exactly
    compress = sparse.compress_1to2 if dtype_name == "float32" else sparse.compress_2to4
    decompress = sparse.decompress_1to2 if dtype_name == "float32" else sparse.decompress_2to4
    assert np.array_equal(decompress(compress(a, accept_sparse=True)), a)           # nothing pruned away
    lowest = probe.LOWEST[dtype_name]            # i over the 32 rows of a case, j over the 16 columns
    assert exponent.max() == min(probe.M // 2 - 1, lowest) + min(probe.N - 1, lowest) and exponent.min() == 0
    k_step = probe.instruction_k(dtype_name)
    across = wide_a[probe.M // 2:]                                                  # one term an instruction
    assert (np.count_nonzero(across.reshape(probe.M // 2, -1, k_step), axis=2) == [1, 1, 1, 0]).all()


def _modelled(exponent: np.ndarray, bits: int) -> np.ndarray:
    """C of an accumulation that keeps ``bits`` fraction bits below its largest addend (1.0): the small term
    2^-e survives while e <= bits."""
    return np.where(exponent <= bits, 2.0 ** -exponent.astype(np.float64), 0.0)


@pytest.mark.parametrize("bits", [0, 5, 13, 14])
def test_the_summary_finds_the_bits_a_modelled_accumulator_keeps(bits):
    _, _, exponent = probe.probe_operands("float8_e5m2")
    report = probe.summarize(_modelled(exponent, bits), exponent)
    for case in probe.CASES:
        assert report[case]["bits"] == bits
        counts = report[case]["by_exponent"]
        assert all(c["other"] == 0 for c in counts.values())
        assert all((c["dropped"] > 0) == (e > bits) for e, c in counts.items())


def test_the_summary_catches_a_wrong_sum():
    """Planted fault: one output of e = 3 twice the term (a rounding, not a drop) ends the run of kept terms."""
    _, _, exponent = probe.probe_operands("float8_e4m3fn")
    c = _modelled(exponent, 20)
    row, col = np.argwhere(exponent == 3)[0]
    c[row, col] *= 2
    report = probe.summarize(c, exponent)
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
