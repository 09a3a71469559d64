"""vkcoop.cuda.timing.time_cuda with a fake torch: the warm-up goes on until two timed rounds agree (the Vulkan
paths' rule), so runs made while the clocks come up are never the reported ones."""
from __future__ import annotations

import sys
import time

import pytest
from fake_torch import FakeTorch, install

from vkcoop.cuda import timing
from vkcoop.gemm import warmup as vulkan_rule


def _ramping(fake, schedule):
    """A function whose n-th call takes schedule[n] ms of GPU time (the last value from then on)."""
    calls = [0]

    def run():
        fake.clock_ms += schedule[min(calls[0], len(schedule) - 1)]
        calls[0] += 1
    return run, calls


def test_timing_starts_once_the_warm_up_rounds_agree(monkeypatch):
    fake = install(monkeypatch, FakeTorch())
    monkeypatch.setattr(vulkan_rule, "_last_busy", [time.perf_counter()])    # the GPU was busy just now: no cold start
    monkeypatch.setattr(vulkan_rule, "_warmed_apis", {"cuda"})
    # one counted warm-up run, then timed rounds of 5 coming down to a steady 3.7 ms
    run, calls = _ramping(fake, [9.8] + [7.0] * 5 + [5.0] * 5 + [3.7])
    result = timing.time_cuda(run, warmup=1, iters=5, warmup_seconds=1e-6)
    assert result.times_ms == pytest.approx((3.7,) * 5)
    assert calls[0] == 1 + 4 * 5 + 5   # rounds 7.0, 5.0, 3.7, 3.7 (settled), then the timed five
    assert vulkan_rule._last_busy[0] > time.perf_counter() - 1.0


def test_after_an_idle_gap_the_warm_up_lasts_the_cold_minimum(monkeypatch):
    fake = install(monkeypatch, FakeTorch())
    monkeypatch.setattr(vulkan_rule, "_last_busy", [float("-inf")])
    monkeypatch.setattr(vulkan_rule, "COLD_WARMUP_SECONDS", 0.05)
    run, calls = _ramping(fake, [9.8, 3.7])
    started = time.perf_counter()
    timing.time_cuda(run, warmup=1, iters=3, warmup_seconds=1e-6)
    assert time.perf_counter() - started >= 0.05 and calls[0] > 10


def test_a_count_only_warm_up_times_right_away(monkeypatch):
    fake = install(monkeypatch, FakeTorch())
    run, calls = _ramping(fake, [9.8, 3.7])
    result = timing.time_cuda(run, warmup=1, iters=3, warmup_seconds=0)
    assert calls[0] == 4 and result.times_ms == pytest.approx((3.7,) * 3)


def _launched(fake, gpu_ms):
    """A run that costs the fake's host time per launch, then ``gpu_ms`` on the GPU."""
    return lambda: fake.spend(gpu_ms, lambda: None)


def test_the_busy_wait_keeps_the_hosts_launch_time_out_of_the_events(monkeypatch):
    # host work 0.03 ms a launch, 0.01 ms of GPU work: events around a lone launch see 0.04 ms
    fake = install(monkeypatch, FakeTorch(host_ms=0.03, gpu_sleep=True))
    result = timing.time_cuda(_launched(fake, 0.01), warmup=2, iters=5, warmup_seconds=0)
    assert result.times_ms == pytest.approx((0.01,) * 5)
    assert timing.LEAD_MIN_US <= result.lead_us <= timing.LEAD_MAX_US


def test_without_a_busy_wait_the_events_see_the_hosts_launch_time(monkeypatch):
    fake = install(monkeypatch, FakeTorch(host_ms=0.03, gpu_sleep=False))
    result = timing.time_cuda(_launched(fake, 0.01), warmup=2, iters=5, warmup_seconds=0)
    assert result.times_ms == pytest.approx((0.04,) * 5) and result.lead_us == 0.0


def test_the_lead_lasts_at_least_its_length_at_any_clock_up_to_the_counted_one(monkeypatch):
    install(monkeypatch, FakeTorch(gpu_sleep=True))
    torch = sys.modules["torch"]
    lead = timing.Lead(torch, host_us=400.0)
    assert lead.us == 800.0 and lead.cycles == 800 * timing.LEAD_CLOCK_MHZ
    assert timing.Lead(torch, host_us=1.0).us == timing.LEAD_MIN_US
    assert timing.Lead(torch, host_us=1e9).us == timing.LEAD_MAX_US
    assert timing.LEAD_CLOCK_MHZ >= 1980      # the H100's top SM clock: a lead never ends early there


def test_at_a_low_clock_the_lead_still_hides_the_launch(monkeypatch):
    # the fake GPU runs its busy-wait at 345 MHz (the H100's idle clock): the lead only gets longer
    fake = install(monkeypatch, FakeTorch(host_ms=0.04, gpu_sleep=True))
    fake.SLEEP_CYCLES_PER_MS = 345e3
    result = timing.time_cuda(_launched(fake, 0.01), warmup=2, iters=5, warmup_seconds=0)
    assert result.times_ms == pytest.approx((0.01,) * 5)
