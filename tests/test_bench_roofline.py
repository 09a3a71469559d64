"""The roofline column of bench sparse: each path against its own form's ceiling or the bandwidth."""
from __future__ import annotations

import pytest

from vkcoop.bench import roofline
from vkcoop.bench.measure import PathResult

CEILINGS = {"vulkan": {"mma": {"coopmat2-workgroup": {"fp16->fp32": {"tflops": 600.0}}},
                       "bandwidth": {"read": {"gb_per_s": 4000.0}}},
            "cuda": {"mma": {"wgmma": {"fp16->fp32": {"tflops": 900.0}}, "wgmma.sp": {"fp16->fp32": {"tflops": 1800.0}}},
                     "bandwidth": {"read": {"gb_per_s": 4500.0}}}}


def test_bytes_moved_counts_a_in_its_format():
    m = n = k = 64
    dense = roofline.bytes_moved("vk-coopmat2-dense", m, n, k)
    sparse = roofline.bytes_moved("vk-coopmat2-2:4", m, n, k)
    assert dense == m * k * 2 + k * n * 2 + m * n * 4
    assert dense - sparse == m * k * 2 - (m * k + m * (k // 32) * 4)   # A shrinks to 0.5625 of its bytes
    assert roofline.bytes_moved("cuBLAS", m, n, k) == m * k * 2 + k * n * 2 + m * n * 2


def test_square_cases_meet_the_form_ceiling_and_narrow_ones_the_bandwidth():
    big = roofline.attainable_tflops("vk-coopmat2-dense", "fp16", 8192, 8192, 8192, CEILINGS)
    assert big == pytest.approx(600.0)
    narrow = roofline.attainable_tflops("vk-coopmat2-dense", "fp16", 8192, 32, 8192, CEILINGS)
    flops, moved = 2.0 * 8192 * 32 * 8192, roofline.bytes_moved("vk-coopmat2-dense", 8192, 32, 8192)
    assert narrow == pytest.approx(flops / moved * 4000e9 / 1e12) and narrow < 600
    # the 2:4 path moves fewer bytes, so its memory-bound ceiling is higher
    assert roofline.attainable_tflops("vk-coopmat2-2:4", "fp16", 8192, 32, 8192, CEILINGS) > narrow
    assert roofline.attainable_tflops("vk-khr-subgroup", "fp16", 64, 64, 64, CEILINGS) is None   # not measured
    assert roofline.attainable_tflops("cuSPARSELt", "bf16", 64, 64, 64, CEILINGS) is None


def test_the_other_types_move_their_own_bytes_and_meet_their_own_rows():
    m, n, k = 128, 64, 256
    # e4m3 2:4: half of A's bytes kept, 4 bits of metadata a group of four; C in bf16
    assert roofline.bytes_moved("cuda-wgmma.sp", m, n, k, "e4m3") == m * k // 2 + m * k // 8 + k * n + m * n * 2
    # tf32 1:2: half of A's 4-byte values, a 4-bit index a pair
    assert roofline.bytes_moved("cuSPARSELt", m, n, k, "tf32") == m * k * 2 + m * k // 4 + k * n * 4 + m * n * 2
    # int8 into int32, on both APIs
    assert roofline.bytes_moved("cuBLAS", m, n, k, "int8") == m * k + k * n + m * n * 4
    assert roofline.bytes_moved("vk-coopmat2-dense", m, n, k, "int8") == m * k + k * n + m * n * 4
    typed = {"cuda": {"mma": {"wgmma.sp": {"e4m3->fp32": {"tflops": 3000.0}, "s8->s32": {"tflops": 3100.0}},
                              "wgmma": {"u8->s32": {"tflops": 1900.0}}},
                      "bandwidth": {"read": {"gb_per_s": 4500.0}}}}
    assert roofline.attainable_tflops("cuda-wgmma.sp", "e4m3", 8192, 8192, 8192, typed) == pytest.approx(3000.0)
    assert roofline.attainable_tflops("cuSPARSELt", "int8", 8192, 8192, 8192, typed) == pytest.approx(3100.0)
    assert roofline.attainable_tflops("cuBLAS", "uint8", 8192, 8192, 8192, typed) == pytest.approx(1900.0)
    # a type whose row was not measured, and a planted one under another type's name, give no ceiling
    assert roofline.attainable_tflops("cuda-wgmma.sp", "e5m2", 8192, 8192, 8192, typed) is None
    assert roofline.attainable_tflops("cuBLAS", "int8", 8192, 8192, 8192, typed) is None


def test_ratios_are_set_on_timed_results_only():
    timed = PathResult("cuBLAS", "c", "fp16", "square", 8192, 8192, 8192, status="ok", tflops=450.0)
    skipped = PathResult("cuBLAS", "c", "fp16", "square", 8192, 8192, 8192, status="skipped")
    roofline.add_ceiling_ratios([timed, skipped], CEILINGS)
    assert timed.ceiling_tflops == pytest.approx(900.0) and timed.ratio_own_ceiling == pytest.approx(0.5)
    assert skipped.ratio_own_ceiling is None


def test_the_fixed_cost_fit_recovers_a_line_it_was_given():
    # 8 us per launch and 2.5 TB/s: sizes in whole MiB, times computed from them (not from the code under test)
    moved = [64 << 20, 128 << 20, 256 << 20]
    seconds = [8e-6 + b / 2.5e12 for b in moved]
    fit = roofline.fit_fixed_cost(moved, seconds)
    assert fit.fixed_s == pytest.approx(8e-6, rel=1e-9) and fit.bytes_per_s == pytest.approx(2.5e12, rel=1e-9)
    assert fit.seconds(512 << 20) == pytest.approx(8e-6 + (512 << 20) / 2.5e12, rel=1e-9)
    # noisy timings: least squares, between the two lines the noise spans
    noisy = roofline.fit_fixed_cost(moved, [seconds[0] * 1.01, seconds[1], seconds[2] * 0.99])
    assert 2.5e12 < noisy.bytes_per_s < 2.6e12 and noisy.fixed_s > 8e-6


def test_the_fixed_cost_fit_refuses_what_has_no_line():
    with pytest.raises(ValueError, match="two or more sizes"):
        roofline.fit_fixed_cost([1 << 20, 1 << 20], [1e-5, 2e-5])
    with pytest.raises(ValueError, match="two or more sizes"):
        roofline.fit_fixed_cost([1 << 20, 2 << 20], [1e-5])
    with pytest.raises(ValueError, match="does not grow"):
        roofline.fit_fixed_cost([1 << 20, 2 << 20], [2e-5, 1e-5])


def test_every_bench_type_names_a_peak_row_of_its_wgmma_forms():
    """The roofline's names of the types are those of the CUDA peak rows (vkcoop.cuda.peak.FORMS), so each type's
    CUDA paths find their ceiling."""
    from vkcoop.cuda import peak as cuda_peak
    from vkcoop.gemm.dtypes import BENCH_DTYPES

    rows = {form.types for form in cuda_peak.FORMS if form.form == "wgmma.sp"}
    assert set(roofline.PEAK_INPUT) == set(BENCH_DTYPES)
    assert {f"{roofline.PEAK_INPUT[d]}->{roofline._accumulator('cuBLAS', d)}" for d in BENCH_DTYPES} == rows
