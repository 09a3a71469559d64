"""vkcoop.bench.read_floor: the time one READ dispatch needs for N bytes, the floor of a memory-bound launch."""
from __future__ import annotations

import numpy as np
import pytest

from support import toolchain_or_skip
from test_inspect_cli import NO_VULKAN
from vkcoop.bench import read_floor


def test_byte_counts_are_whole_numbers_sorted_once():
    assert read_floor.check_byte_counts([64, 0, np.int64(64), 16]) == [0, 16, 64]
    for bad in (-1, 1.5, True, "16"):
        with pytest.raises(ValueError, match="whole byte counts"):
            read_floor.check_byte_counts([16, bad])


def test_the_grid_is_four_workgroups_an_sm():
    assert read_floor.floor_grid(132) == 528 and read_floor.floor_grid(None) == 4 * read_floor.FALLBACK_SM_COUNT


def test_no_byte_counts_open_no_device():
    assert read_floor.read_floors([], device="no such device") == {}


@pytest.mark.vulkan
@pytest.mark.skipif(NO_VULKAN is not None, reason=str(NO_VULKAN))
def test_more_bytes_take_longer_than_an_empty_dispatch_on_any_device():
    toolchain_or_skip()
    floors = read_floor.read_floors([8 << 20, 0, 1 << 20], iterations=3, warmup=1, warmup_seconds=0.0)
    assert list(floors) == [0, 1 << 20, 8 << 20]
    assert all(us > 0 for us in floors.values())
    assert floors[8 << 20] > floors[0]
    with pytest.raises(ValueError, match="storage buffer range"):
        read_floor.read_floors([1 << 44], iterations=1, warmup=0, warmup_seconds=0.0)


@pytest.mark.vulkan
@pytest.mark.skipif(NO_VULKAN is not None, reason=str(NO_VULKAN))
def test_a_read_kernel_that_fails_its_check_is_not_timed(monkeypatch):
    toolchain_or_skip()
    from vkcoop.bench import peak
    monkeypatch.setattr(peak, "check_bandwidth_kernel", lambda device, pipeline, mode: "the read kernel's output "
                        "differs from numpy")
    with pytest.raises(RuntimeError, match="the read kernel's output differs from numpy"):
        read_floor.read_floors([1 << 20], iterations=1, warmup=0, warmup_seconds=0.0)



@pytest.mark.vulkan
@pytest.mark.skipif(NO_VULKAN is not None, reason=str(NO_VULKAN))
def test_a_flushed_floor_runs_the_flush_before_every_read(monkeypatch):
    """``flush_l2``: the L2 flush's dispatch goes before each timed READ (time_dispatches' ``flush``), and the flush
    is closed after."""
    toolchain_or_skip()
    from vkcoop.gemm import vulkan
    made, given = [], []
    real_flush, real_time = vulkan.L2Flush, vulkan.time_dispatches

    class CountedFlush(real_flush):
        def __init__(self, device, megabytes: int = 256):
            super().__init__(device, 1)
            made.append(self)

        def close(self):
            self.closed = True
            super().close()

    def recorded(device, dispatches, iterations, warmup, flush=None, **options):
        given.append(flush)
        return real_time(device, dispatches, iterations, warmup, flush, **options)
    monkeypatch.setattr(vulkan, "L2Flush", CountedFlush)
    monkeypatch.setattr(vulkan, "time_dispatches", recorded)
    floors = read_floor.read_floors([1 << 20, 2 << 20], iterations=2, warmup=0, warmup_seconds=0.0, flush_l2=True)
    assert list(floors) == [1 << 20, 2 << 20] and len(made) == 1 and made[0].closed
    assert len(given) == 2 and all(f is not None and f[0] is made[0].pipeline for f in given)
    given.clear()
    read_floor.read_floors([1 << 20], iterations=1, warmup=0, warmup_seconds=0.0)
    assert given == [None] and len(made) == 1
