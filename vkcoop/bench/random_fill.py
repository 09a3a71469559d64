"""Large random inputs, made on every core and the same whatever the core count.

``bench attention``'s decode cases carry up to 1 GB of K and V; numpy draws one stream on one core, which took
12 s for the largest case on this project's 2-core machine and made input generation a large part of a benchmark
run. :func:`clipped_normal` follows numpy's recipe for multithreaded generation ("Multithreaded Generation" in
numpy's random documentation): the array is cut into fixed chunks, each chunk has its own generator, seeded as
``SeedSequence.spawn`` seeds it, and the threads fill the chunks in place (numpy's generators release the GIL while
they fill). The chunks, not the threads, decide the values, so a result repeats bit for bit on any machine.
"""
from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np

#: Values per chunk: each has its own generator, so this size is part of what the values are.
CHUNK = 1 << 22


def _children(seed: np.random.SeedSequence, count: int) -> list[np.random.SeedSequence]:
    """What ``seed.spawn(count)`` gives on a fresh ``seed``, without counting them as spawned: the values depend on
    the seed alone, not on what was drawn from it before."""
    return [np.random.SeedSequence(seed.entropy, spawn_key=(*seed.spawn_key, i), pool_size=seed.pool_size)
            for i in range(count)]


def clipped_normal(shape, dtype, seed: np.random.SeedSequence, limit: float = 3.0, workers: int | None = None):
    """Standard normal values clipped to ±``limit``, drawn as float32 and rounded to ``dtype``; deterministic in
    ``seed`` (``workers`` only decides how many threads fill the chunks: default, the usable cores)."""
    out = np.empty(shape, dtype)
    flat = out.reshape(-1)
    starts = range(0, flat.size, CHUNK)
    seeds = _children(seed, len(starts))

    def fill(index: int) -> None:
        start = starts[index]
        part = np.random.default_rng(seeds[index]).standard_normal(min(CHUNK, flat.size - start), np.float32)
        np.clip(part, -limit, limit, out=part)
        flat[start:start + part.size] = part

    workers = workers or len(os.sched_getaffinity(0))
    with ThreadPoolExecutor(max_workers=max(1, min(workers, len(starts)))) as pool:
        list(pool.map(fill, range(len(starts))))
    return out


__all__ = ["CHUNK", "clipped_normal"]
