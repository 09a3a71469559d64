"""The read floor: how long one dispatch of ``vkcoop bench peak``'s READ kernel (a grid-stride loop of 16-byte
loads and nothing else) takes to read N bytes on this device, timed the way the benchmarks time a launch: GPU
timestamps around dispatches run back to back in one command buffer, without an L2 flush unless asked for one
(`--flush-l2`).

A memory-bound kernel that must read the same bytes cannot expect to beat this, because the floor holds both the
streaming bandwidth and what any dispatch costs. On the H100 an empty dispatch spans 3.5 µs and 67 MB take 25.4 µs,
0.85x of the bandwidth roofline (docs/attention.md, "Where the time goes"). ``vkcoop bench attention --ceilings`` holds each
decode case to the floor of its K and V bytes.
"""
from __future__ import annotations

import statistics

import numpy as np

#: The grid of the fastest reads in a sweep of grids on the H100: 4 workgroups of 256 invocations per SM, each
#: invocation with 4 loads of 16 bytes in flight.
WORKGROUPS_PER_SM, INVOCATIONS, UNROLL = 4, 256, 4
FALLBACK_SM_COUNT = 132      # where the driver does not give its SM count (H100 SXM, H200)


def floor_grid(sm_count: int | None) -> int:
    """Workgroups of the READ dispatch on a device with ``sm_count`` SMs (None: unknown)."""
    return WORKGROUPS_PER_SM * (sm_count or FALLBACK_SM_COUNT)


def check_byte_counts(byte_counts) -> list[int]:
    """The byte counts, sorted and without repeats; ValueError for anything that is not a whole number >= 0."""
    counts = []
    for value in byte_counts:
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
            raise ValueError(f"a read floor needs whole byte counts >= 0, not {value!r}")
        counts.append(int(value))
    return sorted(set(counts))


def read_floors(byte_counts, device=None, *, iterations: int = 50, warmup: int = 5,
                warmup_seconds: float = 0.5, flush_l2: bool = False) -> dict[int, float]:
    """{bytes: median µs of one READ dispatch of that many bytes (rounded down to 16)} on ``device`` (a selector,
    as ``vkcoop.vk.Device`` takes it), each after an L2 flush if ``flush_l2``; the kernel's output is checked
    against numpy first."""
    from .. import shaders, vk
    from ..gemm.vulkan import L2Flush
    from .peak import BANDWIDTH_SHADER, check_bandwidth_kernel
    counts = check_byte_counts(byte_counts)
    if not counts:
        return {}
    spirv = shaders.compile_variant(shaders.ShaderVariant(BANDWIDTH_SHADER, (("MODE", "READ"),)))
    with vk.Device(device, features=["maintenance4"]) as gpu:
        largest = max(counts) // 16
        limit = int(gpu.physical.limits.maxStorageBufferRange) // 16
        if largest > limit:
            raise ValueError(f"a read floor of {max(counts):,} bytes passes the device's storage buffer range "
                             f"({limit * 16:,} bytes)")
        groups = floor_grid(vk.sm_count(gpu.physical))
        with gpu.pipeline(spirv, specialization={0: INVOCATIONS, 1: UNROLL}, name="read floor") as pipeline:
            problem = check_bandwidth_kernel(gpu, pipeline, "read")
            if problem:
                raise RuntimeError(problem)
            flush = L2Flush(gpu) if flush_l2 else None
            try:
                return _timed_floors(gpu, pipeline, counts, groups, flush, iterations, warmup, warmup_seconds)
            finally:
                if flush is not None:
                    flush.close()


def _timed_floors(gpu, pipeline, counts, groups, flush, iterations, warmup, warmup_seconds) -> dict[int, float]:
    from ..gemm.vulkan import time_dispatches
    with gpu.empty((max(max(counts) // 16, 1), 4), np.uint32, name="read floor source") as source, \
            gpu.empty((groups * INVOCATIONS, 4), np.uint32, name="read floor sink") as sink:
        floors = {}
        for count in counts:   # push: (vectors, 0, 1): zeros never fold to all-ones, so READ stores nothing
            times = time_dispatches(gpu, [(pipeline, [source, sink], (groups, 1, 1), (count // 16, 0, 1))],
                                    iterations, warmup, flush.dispatch_args() if flush else None,
                                    name="read floor", warmup_seconds=warmup_seconds)
            floors[count] = statistics.median(times) * 1e6
    return floors
