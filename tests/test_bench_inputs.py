"""The benchmarks' large random inputs (:mod:`vkcoop.bench.random_fill`) and the rule for a disturbed timing
(:func:`vkcoop.bench.stats.unsteady`, :func:`vkcoop.bench.stats.steadier`)."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from vkcoop.bench import random_fill
from vkcoop.bench.stats import UNSTEADY_BAND, band, steadier, unsteady
from vkcoop.errors import InputError


@pytest.fixture
def small_chunks(monkeypatch):
    monkeypatch.setattr(random_fill, "CHUNK", 1000)   # many chunks in a small array


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16, np.float32])
def test_the_values_depend_on_the_seed_and_not_on_the_thread_count(small_chunks, dtype):
    seed = np.random.SeedSequence(7)
    one = random_fill.clipped_normal((3, 5, 701), dtype, seed, workers=1)
    many = random_fill.clipped_normal((3, 5, 701), dtype, seed, workers=5)
    assert one.shape == (3, 5, 701) and one.dtype == np.dtype(dtype)
    assert one.tobytes() == many.tobytes()
    other = random_fill.clipped_normal((3, 5, 701), dtype, np.random.SeedSequence(8), workers=5)
    assert one.tobytes() != other.tobytes()


def test_each_chunk_draws_its_own_values_clipped_to_the_limit(small_chunks):
    values = random_fill.clipped_normal((20_000,), np.float32, np.random.SeedSequence(0), limit=2.5)
    chunks = values.reshape(20, 1000)
    assert len({chunk.tobytes() for chunk in chunks}) == 20          # no chunk repeats another's stream
    assert values.max() == 2.5 and values.min() == -2.5              # a normal sample of 20,000 passes ±2.5
    inside = np.abs(values) < 2.5
    assert abs(values[inside].mean()) < 0.05 and 0.9 < values.std() < 1.0   # clipping narrows it a little


def test_a_chunk_is_what_the_generator_seeded_from_it_draws(small_chunks):
    seed = np.random.SeedSequence(3)
    values = random_fill.clipped_normal((2500,), np.float32, seed, limit=1e9)
    children = np.random.SeedSequence(3).spawn(3)
    expected = np.concatenate([np.random.default_rng(child).standard_normal(size, np.float32)
                               for child, size in zip(children, (1000, 1000, 500))])
    assert np.array_equal(values, expected)


def test_the_band_is_the_p10_to_p90_width_over_the_median():
    assert band([1.0] * 10) == 0.0
    assert band([1.0, 2.0, 3.0, 4.0, 5.0]) == pytest.approx((4.6 - 1.4) / 3.0)
    with pytest.raises(InputError, match="the band of a series needs a positive median"):
        band([0.0, 0.0])


def test_a_decaying_series_is_unsteady_and_a_steady_one_is_kept():
    disturbed = [1.05, 0.60, 0.39, 0.27, 0.27, 0.29, 0.25, 0.23, 0.16, 0.20] + [0.15, 0.14, 0.16, 0.11] * 2
    steady = [0.041, 0.040, 0.042, 0.041, 0.040, 0.041, 0.043, 0.040, 0.041, 0.041]
    assert unsteady(disturbed) and band(disturbed) > 1.0
    assert not unsteady(steady) and band(steady) < UNSTEADY_BAND / 5
    assert steadier(disturbed, steady) is steady and steadier(steady, disturbed) is steady
    assert steadier(steady, list(steady)) is steady                   # a tie keeps the first
