"""The benchmark's inputs (vkcoop.gemm.exact.eighths_inputs) and their fp32 reference: the values, the 2:4 A, the
A shared between N, and a reference that is exact where fp32 holds every partial sum."""
from __future__ import annotations

import numpy as np
import pytest

from vkcoop import sparse
from vkcoop.gemm import exact
from vkcoop.gemm.types import DTYPES


@pytest.mark.parametrize("dtype", list(DTYPES))
def test_the_draws_are_the_seventeen_eighths_as_the_float32_route_gives_them(dtype):
    rng, again = np.random.default_rng(11), np.random.default_rng(11)
    got = exact._draw_eighths(rng, (64, 256), dtype)
    draws = again.integers(-8, 9, size=(64, 256), dtype=np.int8)
    expected = (draws.astype(np.float32) / 8).astype(DTYPES[dtype])
    assert got.dtype == DTYPES[dtype] and got.view(np.uint16).tobytes() == expected.view(np.uint16).tobytes()
    assert set(got.astype(np.float32).ravel()) == {v / 8 for v in range(-8, 9)}


@pytest.mark.parametrize("dtype", list(DTYPES))
def test_a_is_pruned_2to4_and_the_same_whatever_n(dtype):
    exact._eighths_a.cache_clear()
    pruned, compressed, b = exact.eighths_inputs(dtype, 64, 48, 128, seed=5)
    sparse.check_2to4(pruned)
    assert np.array_equal(sparse.decompress_2to4(compressed).astype(np.float32), pruned.astype(np.float32))
    exact._eighths_a.cache_clear()
    other, _, wider = exact.eighths_inputs(dtype, 64, 96, 128, seed=5)
    assert other.tobytes() == pruned.tobytes() and b.shape == (128, 48) and wider.shape == (128, 96)


def test_the_fp32_reference_is_exact_even_where_every_partial_sum_is_largest():
    ones = np.ones((4, 4096), np.float32)
    worst = np.concatenate([ones, -ones]).astype(np.float16)          # sums reach +-K
    pruned, _, b = exact.eighths_inputs("fp16", 96, 40, 4096, seed=9)
    for a, bb in ((pruned, b), (worst, np.ones((4096, 8), np.float16))):
        assert np.array_equal(exact.eighths_reference(a, bb), exact.reference_gemm(a, bb, np.float32))


def test_beyond_the_exact_k_the_reference_is_float64(monkeypatch):
    seen = []
    monkeypatch.setattr(exact, "EIGHTHS_EXACT_K", 64)
    monkeypatch.setattr(exact, "reference_gemm", lambda a, b, t: seen.append(a.shape) or np.zeros((1, 1)))
    a = np.ones((2, 128), np.float16)
    exact.eighths_reference(a, np.ones((128, 2), np.float16))
    exact.eighths_reference(a[:, :64], np.ones((64, 2), np.float16))
    assert seen == [(2, 128)]
