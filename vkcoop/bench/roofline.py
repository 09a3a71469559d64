"""Each path against its own ceiling: a roofline from ``vkcoop bench peak`` measured in the same process.

A path's attainable throughput is min(ceiling of its instruction form, arithmetic intensity x measured
bandwidth): compute-bound cases are held to the register-only rate of the form the path issues (coopmat2
workgroup scope, KHR subgroup scope, mma.sp, wgmma, wgmma.sp), memory-bound cases to the bytes they must move
over the streaming-read bandwidth. ``ratio_own_ceiling`` is the measured TFLOP/s over that.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..gemm.dtypes import bench_type

#: (API, instruction form in vkcoop.bench.peak) that bounds each path. cuBLAS and cuSPARSELt issue wgmma on
#: Hopper; the Vulkan paths get what the driver emits for their matrices (HMMA, GPU_HOST.md).
PATH_FORMS = {"vk-coopmat2-dense": ("vulkan", "coopmat2-workgroup"),
              "vk-coopmat2-dense-fp16acc": ("vulkan", "coopmat2-workgroup"),
              "vk-coopmat2-2:4": ("vulkan", "coopmat2-workgroup"),
              "vk-coopmat2-2:4-expand": ("vulkan", "coopmat2-workgroup"),
              "vk-khr-subgroup": ("vulkan", "khr-subgroup"), "cuda-mma.sp": ("cuda", "mma.sp"),
              "cuda-wgmma.sp": ("cuda", "wgmma.sp"), "cuSPARSELt": ("cuda", "wgmma.sp"),
              "cuSPARSELt-nvmath": ("cuda", "wgmma.sp"), "torch-semi-structured": ("cuda", "wgmma.sp"),
              "cuBLAS": ("cuda", "wgmma"), "cuda-mma.sync": ("cuda", "mma.sync"),
              "cuda-mma.sync-cap": ("cuda", "mma.sync"), "cuda-mma.sp-cap": ("cuda", "mma.sp")}
#: Paths that read A in the 2:4 format: half the values plus one 32-bit metadata word per 32 columns.
SPARSE_A = {"vk-coopmat2-2:4", "vk-coopmat2-2:4-expand", "cuda-mma.sp", "cuda-mma.sp-cap", "cuda-wgmma.sp",
            "cuSPARSELt", "cuSPARSELt-nvmath", "torch-semi-structured"}
#: Paths that also write A dense into a workspace and read it back (vkcoop.gemm.expanded).
EXPANDED_A = {"vk-coopmat2-2:4-expand"}
#: Each --dtype as the peak rows name its inputs (vkcoop.bench.peak, vkcoop.cuda.peak).
PEAK_INPUT = {"fp16": "fp16", "bf16": "bf16", "tf32": "tf32", "e4m3": "e4m3", "e5m2": "e5m2", "int8": "s8",
              "uint8": "u8"}
#: Paths that accumulate in (and store) another type than fp32: its ceiling is the form's row of that type.
ACCUMULATOR = {"vk-coopmat2-dense-fp16acc": "fp16"}


def _accumulator(path: str, dtype: str) -> str:
    return ACCUMULATOR.get(path) or ("s32" if bench_type(dtype).integer else "fp32")


def c_bytes(path: str, dtype: str) -> int:
    """Bytes of one C element: the Vulkan paths store fp32 (s32 for int8); the CUDA ones the input type for fp16
    and bf16, int32 for the integers, and at least the two bytes of the bf16 our kernel writes for the others."""
    if path in ACCUMULATOR:
        return 2
    if PATH_FORMS[path][0] == "vulkan" or bench_type(dtype).integer:
        return 4
    return 2


def bytes_moved(path: str, m: int, n: int, k: int, dtype: str = "fp16") -> int:
    """The bytes a GEMM must read and write at least once: A (dense, or its kept half and metadata: 4 bits a group
    of four for 2:4, a pair for tf32's 1:2), B and C."""
    kind = bench_type(dtype)
    size = kind.input_dtype.itemsize
    a = m * k * size
    if path in SPARSE_A:
        a = m * k * size // 2 + m * k // (4 if kind.pattern == "1:2" else 8)
    if path in EXPANDED_A:
        a += 2 * (m * k * size)    # the workspace written, then read by the dense kernel
    return a + k * n * size + m * n * c_bytes(path, dtype)


def attainable_tflops(path: str, dtype: str, m: int, n: int, k: int, ceilings: dict) -> float | None:
    """min(form ceiling, intensity x bandwidth) in TFLOP/s (TOP/s for the integers); None where the ceilings lack
    this path's form in its type."""
    if path not in PATH_FORMS or dtype not in PEAK_INPUT:
        return None
    api, form = PATH_FORMS[path]
    measured = ceilings.get(api, {})
    peak = measured.get("mma", {}).get(form, {}).get(f"{PEAK_INPUT[dtype]}->{_accumulator(path, dtype)}")
    bandwidth = measured.get("bandwidth", {}).get("read")
    if peak is None or bandwidth is None:
        return None
    intensity = 2.0 * m * n * k / bytes_moved(path, m, n, k, dtype)   # operations per byte
    return min(peak["tflops"], intensity * bandwidth["gb_per_s"] * 1e9 / 1e12)


def add_ceiling_ratios(results, ceilings: dict) -> None:
    """Set ``ratio_own_ceiling`` (and ``ceiling_tflops``) on every timed result."""
    for r in results:
        if r.tflops is None:
            continue
        attainable = attainable_tflops(r.path, r.dtype, r.m, r.n, r.k, ceilings)
        if attainable:
            r.ceiling_tflops, r.ratio_own_ceiling = attainable, r.tflops / attainable


@dataclass(frozen=True)
class FixedCost:
    """A launch's time as a fixed cost plus its bytes at a streaming rate (:func:`fit_fixed_cost`)."""
    fixed_s: float        # the time a launch would take with no bytes to move (the line's intercept)
    bytes_per_s: float    # the rate at which each further byte streams (the inverse of its slope)

    def seconds(self, moved: float) -> float:
        return self.fixed_s + moved / self.bytes_per_s


def fit_fixed_cost(moved, seconds) -> FixedCost:
    """The least-squares line time = fixed + bytes / rate (``numpy.polyfit``) through timings of one kernel at
    several sizes. Fit it over sizes whose operands cannot stay in L2 between runs, or the rate is L2's."""
    moved, seconds = np.asarray(moved, dtype=float), np.asarray(seconds, dtype=float)
    if moved.shape != seconds.shape or np.unique(moved).size < 2:
        raise ValueError("a fixed cost needs timings at two or more sizes")
    slope, intercept = np.polyfit(moved, seconds, 1)
    if slope <= 0:
        raise ValueError("the time does not grow with the bytes moved: there is no streaming rate to fit")
    return FixedCost(float(intercept), float(1.0 / slope))
