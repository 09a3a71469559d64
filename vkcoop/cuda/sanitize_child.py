"""The program compute-sanitizer runs: ``python -m vkcoop.cuda.sanitize_child JOBS.json``.

It launches each job of the list (:mod:`vkcoop.cuda.sanitize_jobs`, or a test's own ``raw`` kernels) through the
CUDA driver API alone, with no torch (whose start-up and own kernels a sanitizer would pay for and check too), on
buffers of exactly the size the kernel is given, then checks what it wrote. One JSON line per job on stdout:
``{"index", "kernel", "label", "status", "detail"}``, status ``ok``, ``failed`` (a wrong result), ``ran`` (a raw
kernel: nothing to check) or ``error`` (a CUDA error: the context may be lost, so the jobs after it are not run).
Exit status 0 when every job ran.

A raw job names a ``source`` (.cu), its entry point ``name``, ``grid``, ``threads``, optional ``smem`` and
``cluster``, and ``buffers`` (``{"bytes": N, "fill": "zero" | "none"}``, passed first, in order) and ``ints``.
"""
from __future__ import annotations

import ctypes
import json
import sys

import numpy as np

from ..gemm.dtypes import numpy_dtype
from . import build, driver, launches
from .dense import MmaDenseGemm
from .gemm import MmaSpGemm
from .layout import lane_order
from .peak import FORMS, META_POSITIONS_0_1
from .sanitize_jobs import PERSISTENT_CTAS, job_label, wgmma_config
from .wgmma_types import wgmma_type

VALUES = np.array([-1.0, -0.5, -0.0, 0.0, 0.5, 1.0])   # every product and fp32 partial sum stays exact
#: The 8-bit integers' values: small enough that every s32 sum is exact, and the float reference too.
INTEGER_VALUES = {"int8": np.array([-2, -1, 0, 1, 2]), "uint8": np.array([0, 1, 2, 3])}


class _Buffers:
    """Device buffers of one job, freed together."""

    def __init__(self):
        self.items = []

    def holding(self, array) -> int:
        self.items.append(driver.DeviceMemory.holding(np.ascontiguousarray(array)))
        return self.items[-1].address

    def empty(self, nbytes: int, zero: bool = False) -> driver.DeviceMemory:
        memory = driver.DeviceMemory(max(nbytes, 1))
        if zero:
            memory.fill_zero()
        self.items.append(memory)
        return memory

    def free(self):
        for memory in self.items:
            memory.free()


def _exact_operands(job: dict):
    """A [M][K] and B [K][N] in the job's type, their elements drawn from VALUES (seeded by the shape)."""
    m, n, k, dtype = job["m"], job["n"], job["k"], numpy_dtype(job["dtype"])
    rng = np.random.default_rng(m + n + k)
    values = INTEGER_VALUES.get(job["dtype"], VALUES)
    a = rng.choice(values, size=(m, k)).astype(dtype)
    b = rng.choice(values, size=(k, n)).astype(dtype)
    return a, b


def _exact_product(a, b, output=None):
    """C's expected bits: the exact product, rounded once to ``output`` (the input type where None), as the
    kernels round their fp32 sums; an s32 sum is exact."""
    return (a.astype(np.float64) @ b.astype(np.float64)).astype(output or a.dtype)


def _gemm_operands(job: dict, buffers: _Buffers):
    """(values, metadata, B^T, C) addresses, C's buffer and the expected C bits for a structured-sparse M x N x K
    job: 2:4, or 1:2 for tf32 (float32), the metadata in the per-lane order of A's type."""
    from ..sparse import compress_1to2, compress_2to4, decompress_1to2, decompress_2to4
    dense_a, b = _exact_operands(job)
    tf32 = dense_a.dtype == np.float32
    a = compress_1to2(dense_a) if tf32 else compress_2to4(dense_a)
    pruned = decompress_1to2(a) if tf32 else decompress_2to4(a)
    expected = _exact_product(pruned, b, numpy_dtype(wgmma_type(job["dtype"]).output))
    reorder, _ = lane_order(dense_a.dtype)
    c = buffers.empty(job["m"] * job["n"] * expected.itemsize)
    return (buffers.holding(a.values), buffers.holding(reorder(a.metadata)),
            buffers.holding(np.ascontiguousarray(b.T)), c, expected)


def _check_c(c: driver.DeviceMemory, expected) -> str:
    got = c.read(np.dtype(f"u{expected.itemsize}")).view(expected.dtype).reshape(expected.shape)
    wrong = int((got.astype(np.float32) != expected.astype(np.float32)).sum())   # -0.0 equals 0.0
    return f"{wrong} of {got.size} elements of C differ from the exact product" if wrong else ""


def _run_twice(launch: launches.KernelLaunch, c: driver.DeviceMemory, expected) -> tuple[str, str]:
    """Launch, check C, and again: a split kernel must leave its arrival counters at zero for the next launch."""
    for _ in range(2):
        launch(0)
        driver.synchronize()
        if problem := _check_c(c, expected):
            return "failed", f"{launch.description}: {problem}"
    return "ok", launch.description


def _split_scratch(plan: launches.SplitPlan, buffers: _Buffers) -> dict:
    """The partial tiles and the zeroed arrival counters of a global-memory split-K launch (none otherwise)."""
    if not plan.split_buffers:
        return {}
    return {"partials": buffers.empty(4 * plan.partial_floats).address,
            "arrivals": buffers.empty(4 * plan.tiles, zero=True).address}


def _mma_sp(job: dict, buffers: _Buffers) -> tuple[str, str]:
    values, meta, b_t, c, expected = _gemm_operands(job, buffers)
    cfg = MmaSpGemm.CONFIGS[job["config"]]
    plan = launches.mma_sp_plan(cfg, job["dtype"], job["m"], job["n"], job["k"], driver.sm_count())
    return _run_twice(plan.launch(values, meta, b_t, c.address, **_split_scratch(plan, buffers)), c, expected)


def _mma_sync(job: dict, buffers: _Buffers) -> tuple[str, str]:
    """The dense kernel on A [M][K] and B column-major (B^T [N][K]), as :meth:`MmaDenseGemm.bind` passes them."""
    a, b = _exact_operands(job)
    m, n, k = job["m"], job["n"], job["k"]
    c = buffers.empty(m * n * 2)
    plan = launches.mma_dense_plan(MmaDenseGemm.CONFIGS[job["config"]], job["dtype"], m, n, k, driver.sm_count())
    launch = plan.launch(buffers.holding(a), buffers.holding(b.T), c.address, **_split_scratch(plan, buffers))
    return _run_twice(launch, c, _exact_product(a, b))


def _wgmma_sp(job: dict, buffers: _Buffers) -> tuple[str, str]:
    values, meta, b_t, c, expected = _gemm_operands(job, buffers)
    cfg = wgmma_config(job["config"])
    # A persistent walk on PERSISTENT_CTAS CTAs, so that each walks several of the problem's tiles.
    sms = PERSISTENT_CTAS if cfg.persistent else driver.sm_count()
    launch = launches.wgmma_sp_launch(cfg, job["dtype"], job["m"], job["n"], job["k"], values, b_t, meta, c.address,
                                      sms)
    return _run_twice(launch, c, expected)


def _peak(job: dict, buffers: _Buffers) -> tuple[str, str]:
    """Two blocks of a register-only peak kernel, two iterations each, storing every thread's sum."""
    form = next(f for f in FORMS if f.kernel == job["name"])
    out = buffers.empty(2 * 256 * 4)
    func = launches.module("peak").function(form.kernel)
    args = [ctypes.c_void_p(out.address), ctypes.c_int(2), ctypes.c_uint32(form.ones),
            ctypes.c_uint32(META_POSITIONS_0_1), ctypes.c_int(1)]
    driver.launch(func, (2,), (256,), 0, 0, args, form.kernel)
    driver.synchronize()
    got = out.read(np.float32)
    wrong = int((got != form.expected_sum(2)).sum())
    return ("failed", f"{wrong} threads stored another sum than {form.expected_sum(2)}") if wrong else ("ok", "")


def _stream_read(job: dict, buffers: _Buffers) -> tuple[str, str]:
    """The bandwidth kernel over 4096 zero vectors, every thread storing its (zero) fold."""
    count, blocks = 4096, 4
    src = buffers.empty(count * 16, zero=True)
    dst = buffers.empty(blocks * 256 * 16)
    args = [ctypes.c_void_p(src.address), ctypes.c_uint64(count), ctypes.c_void_p(dst.address), ctypes.c_int(1),
            ctypes.c_uint32(1)]
    driver.launch(launches.module("peak").function(job["name"]), (blocks,), (256,), 0, 0, args, job["name"])
    driver.synchronize()
    return ("ok", "") if not dst.read(np.uint32).any() else ("failed", "a fold of zeros was not zero")


def _mma_sp_peak(job: dict, buffers: _Buffers) -> tuple[str, str]:
    out = buffers.empty(4, zero=True)
    func = launches.module("mma_sp").function(job["name"])
    driver.launch(func, (2,), (256,), 0, 0, [ctypes.c_void_p(out.address), ctypes.c_int(2)], job["name"])
    driver.synchronize()
    return "ok", ""


def _raw(job: dict, buffers: _Buffers) -> tuple[str, str]:
    """A test's kernel: launched as described, nothing checked (the sanitizer's report is the result)."""
    module = driver.Module(build.compile_file(job["source"])[0], label=job["source"])
    func = module.function(job["name"], job.get("smem", 0))
    args = [ctypes.c_void_p(buffers.empty(b["bytes"], zero=b.get("fill") == "zero").address)
            for b in job.get("buffers", [])]
    args += [ctypes.c_int(value) for value in job.get("ints", [])]
    driver.launch(func, (job["grid"],), (job["threads"],), job.get("smem", 0), 0, args, job["name"],
                  cluster=job.get("cluster", 1))
    driver.synchronize()
    return "ran", ""


RUNNERS = {"mma.sp": _mma_sp, "wgmma.sp": _wgmma_sp, "mma.sync": _mma_sync, "peak": _peak, "stream_read": _stream_read,
           "mma_sp_peak": _mma_sp_peak, "raw": _raw}


def run_jobs(jobs: list[dict], out=sys.stdout) -> bool:
    """Run each job, one JSON line each on ``out``; False where a CUDA error stopped the list."""
    for index, job in enumerate(jobs):
        label = job["name"] if job["kernel"] == "raw" else job_label(job)
        buffers = _Buffers()
        try:
            status, detail = RUNNERS[job["kernel"]](job, buffers)
            buffers.free()
        except (driver.CudaError, build.KernelBuildError) as error:
            status, detail = "error", str(error).splitlines()[0]
        print(json.dumps({"index": index, "kernel": label.split(" ")[0], "label": label, "status": status,
                          "detail": detail}), file=out, flush=True)
        if status == "error":
            return False
    return True


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    with open(argv[0]) as file:
        jobs = json.load(file)
    return 0 if run_jobs(jobs) else 1


if __name__ == "__main__":
    sys.exit(main())
