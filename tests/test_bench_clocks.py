"""The clock trace beside a benchmark (vkcoop.bench.clocks): windows over samples given here, a sampler that fails,
the bench's note under its table, each result's clocks in run_cases, and NVML on the GPU host."""
from __future__ import annotations

import itertools
import time
from types import SimpleNamespace

import pytest

from vkcoop.bench import report, shapes
from vkcoop.bench import sparse as bench
from vkcoop.bench.clocks import ClockTrace, Nvml, nvml_uuid
from vkcoop.bench.sparse_settings import SparseBenchSettings
from vkcoop.bench.tuning import TuningCache


def trace_of(samples, max_mem=3201) -> ClockTrace:
    trace = ClockTrace(max_mem_mhz=max_mem)
    trace.samples = list(samples)
    return trace


def test_a_window_keeps_the_least_clocks_the_states_and_the_share_below_the_top():
    trace = trace_of([(1.0, 1980, 3201, "P0"), (2.0, 1980, 1593, "P2"), (3.0, 1755, 3201, "P0"),
                      (4.0, 1980, 810, "P5")])
    assert trace.window(1.5, 3.5) == {"samples": 2, "sm_mhz_min": 1755, "mem_mhz_min": 1593,
                                      "mem_below_max": 0.5, "states": ["P0", "P2"]}
    assert trace.window(0.0, 9.0)["mem_below_max"] == 0.5 and trace.window(0.0, 9.0)["mem_mhz_min"] == 810
    assert trace.window(1.0, 1.0)["mem_below_max"] == 0.0          # all at the top: nothing to flag
    assert trace.window(3.2, 3.3) == {"samples": 1, "sm_mhz_min": 1980, "mem_mhz_min": 810,   # shorter than the
                                      "mem_below_max": 1.0, "states": ["P5"]}                  # interval: next one
    assert trace.window(5.0, 6.0) is None
    assert trace_of([(1.0, None, None, "")], max_mem=None).window(0, 2) == {
        "samples": 1, "sm_mhz_min": None, "mem_mhz_min": None, "mem_below_max": None, "states": []}


def test_the_thread_samples_until_closed_and_a_failing_sampler_stops_the_trace_not_the_run():
    counter = itertools.count()
    with ClockTrace(lambda: (1980, 3201 - next(counter), "P0"), max_mem_mhz=3201, interval_s=0.01) as trace:
        time.sleep(0.2)
    taken = len(trace.samples)
    assert taken >= 5 and trace.reason == ""
    time.sleep(0.05)
    assert len(trace.samples) == taken                       # closed: no more samples
    assert trace.window(0, time.monotonic())["mem_below_max"] == pytest.approx((taken - 1) / taken)

    def broken():
        raise RuntimeError("NVML error 15")
    with ClockTrace(broken, interval_s=0.01) as failing:
        time.sleep(0.05)
    assert failing.samples == [] and failing.reason == "clock sampling stopped: NVML error 15"


def test_without_nvml_the_trace_records_nothing_and_says_why(monkeypatch):
    def missing(*args, **kwargs):
        raise OSError("cannot load library 'libnvidia-ml.so.1'")
    monkeypatch.setattr("vkcoop.bench.clocks.Nvml", missing)
    with ClockTrace.open("00" * 16) as trace:
        time.sleep(0.02)
    assert trace.samples == [] and trace.window(0, time.monotonic()) is None
    assert trace.reason == "no clock samples: NVML is unavailable (cannot load library 'libnvidia-ml.so.1')"
    assert report.clock_notes([], {"reason": trace.reason}) == [trace.reason]


def test_nvml_names_a_device_by_its_uuid_in_groups():
    assert nvml_uuid("3959B62B13B2861403B4DBC351217E0F") == "GPU-3959b62b-13b2-8614-03b4-dbc351217e0f"


def test_the_note_under_the_table_names_each_figure_measured_below_the_top_memory_clock():
    low = SimpleNamespace(case="fp16 w14336-n16", path="vk-coopmat2-dense",
                          clocks={"samples": 4, "mem_mhz_min": 1593, "mem_below_max": 0.75})
    top = SimpleNamespace(case="fp16 w14336-n16", path="vk-coopmat2-2:4",
                          clocks={"samples": 3, "mem_mhz_min": 3201, "mem_below_max": 0.0})
    assert report.clock_notes([low, top, SimpleNamespace(case="x", path="y", clocks=None)],
                              {"max_mem_mhz": 3201, "reason": ""}) == [
        "memory clock below its maximum (3201 MHz) while measuring: fp16 w14336-n16 vk-coopmat2-dense "
        "(least 1593 MHz, 75 % of 4 samples)"]
    assert report.clock_notes([top], {"max_mem_mhz": 3201, "reason": ""}) == []


def test_each_measured_result_keeps_the_clocks_of_its_own_window(tmp_path):
    memory = [3201]

    class Slow:   # each measurement takes a while; the memory clock drops as the second case begins
        name, bound = "vk-coopmat2-dense", 0

        def supports(self, problem):
            return True, ""

        def configs(self, problem, tune):
            return ["only"]

        def bind(self, operands, config):
            Slow.bound += 1
            memory[0] = 3201 if Slow.bound == 1 else 1593
            time.sleep(0.15)
            return SimpleNamespace(config="only", output_rows=lambda rows: operands.reference,
                                   time=lambda iterations, warmup, flush: [1e-4] * iterations, release=lambda: None)

    cases = shapes.make_cases(["fp16"], [128, 256], ["square"])
    with ClockTrace(lambda: (1980, memory[0], "P0"), max_mem_mhz=3201, interval_s=0.01) as trace:
        results, _ = bench.run_cases(cases, {"vk-coopmat2-dense": Slow()}, {"vk-coopmat2-2:4": "not here"},
                                     ["vk-coopmat2-dense", "vk-coopmat2-2:4"], bench.Tuner(TuningCache(tmp_path), {}),
                                     SparseBenchSettings(iters=2, warmup=0), progress=False, trace=trace)
    first, skipped, second = results[0], results[1], results[2]
    assert Slow.bound == 2 and first.status == second.status == "ok"
    assert first.clocks["mem_mhz_min"] == 3201 and first.clocks["mem_below_max"] == 0.0
    assert second.clocks["mem_mhz_min"] == 1593 and second.clocks["mem_below_max"] > 0.5
    assert skipped.status == "skipped" and skipped.clocks is None


@pytest.mark.gpu
def test_on_the_gpu_host_nvml_reads_the_clocks_of_the_gpu():
    try:
        nvml = Nvml()
    except (OSError, RuntimeError) as error:
        pytest.skip(f"no NVML here: {error}")
    try:
        sm, mem, state = nvml.sample()
        assert sm and mem and 0 < mem <= nvml.max_mem_mhz and state.startswith("P")
    finally:
        nvml.close()
