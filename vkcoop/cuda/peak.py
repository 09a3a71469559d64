"""CUDA ceilings for ``vkcoop bench peak``: register-only mma.sync, mma.sp, wgmma and wgmma.sp throughput
(``kernels/peak.cu``; wgmma and wgmma.sp in every type of :data:`.wgmma_types.WGMMA_SP_TYPES`, so that each type of
the sparse comparison has its dense and sparse ceiling), a cudaMemcpy-class device-to-device copy (torch ``copy_``)
and a streaming read.

Work per launch (exact): ``grid x instances x iters x per_iteration x 2*M*N*K`` where ``instances`` is the warps
(mma) or warpgroups (wgmma) of a block and ``per_iteration`` the instructions each issues per loop trip (8 chains
for mma, 4 wgmmas). Sparse forms count their dense-equivalent K (mma.sp m16n8k32, wgmma.sp m64n256k32), as
``vkcoop bench sparse`` does. Before timing, each kernel runs with A = B = 1 and ``iters = 2`` in one block, and
every thread's stored sum must equal :meth:`CudaForm.expected_sum`.

``measure(target_ms=10, repeats=5, megabytes=1024, types=None) -> list[dict]``: one dict per row, with the
fields of :class:`vkcoop.bench.peak.PeakRow`.
"""
from __future__ import annotations

import ctypes
import math
import time
from dataclasses import dataclass

from . import build, driver
from .timing import time_cuda
from .wgmma_types import WGMMA_SP_TYPES, WgmmaSpType

#: 1.0 (or 1) in every lane of a register: one tf32, two 16-bit or four 8-bit values
ONES = {"fp16": 0x3C003C00, "bf16": 0x3F803F80, "tf32": 0x3F800000, "e4m3": 0x38383838, "e5m2": 0x3C3C3C3C,
        "s8": 0x01010101, "u8": 0x01010101}
META_POSITIONS_0_1 = 0x44444444                                       # 2:4 metadata: keep elements 0 and 1 of 4
WARMUP_SECONDS = 0.25


@dataclass(frozen=True)
class CudaForm:
    form: str              # mma.sync | mma.sp | wgmma | wgmma.sp
    types: str
    kernel: str
    m: int
    n: int
    k: int                 # dense-equivalent K of one instruction
    products: int          # products summed into each output element per instruction (K, or K/2 when sparse)

    @property
    def wgmma(self) -> bool:
        return self.form.startswith("wgmma")

    @property
    def instances(self) -> int:
        return 2 if self.wgmma else 8            # warpgroups or warps of a 256-thread block

    @property
    def per_iteration(self) -> int:
        return 4 if self.wgmma else 8            # wgmmas per trip, or accumulator chains

    @property
    def blocks_per_sm(self) -> int:
        return 1 if self.wgmma else 8

    @property
    def ones(self) -> int:
        return ONES[self.types.split("->")[0]]

    def work(self, grid: int, iters: int) -> int:
        return grid * self.instances * iters * self.per_iteration * 2 * self.m * self.n * self.k

    def expected_sum(self, iters: int) -> float:
        """What each thread stores with A = B = 1: wgmma, 128 accumulators from 0 (fp32, or s32 for the integer
        types); mma, 4 elements of each of 8 chains, chain j from j."""
        if self.wgmma:
            return 128.0 * iters * self.per_iteration * self.products
        return 4.0 * (8 * 7 // 2) + 4.0 * 8 * iters * self.products


def wgmma_forms(sparse: bool) -> list[CudaForm]:
    """The m64n256 wgmma (dense K half the sparse instruction's) or wgmma.sp form of every type, named as the
    kernels of peak.cu are: peak_wgmma[_sp]_<ptx>_<accumulator>."""
    def form(t: WgmmaSpType) -> CudaForm:
        types = f"{'fp16' if t.ptx == 'f16' else t.ptx}->{'s32' if t.accumulator == 's32' else 'fp32'}"
        k = t.k if sparse else t.k // 2
        return CudaForm("wgmma.sp" if sparse else "wgmma", types,
                        f"peak_wgmma_{'sp_' if sparse else ''}{t.ptx}_{t.accumulator}", 64, 256, k, t.k // 2)
    return [form(t) for t in WGMMA_SP_TYPES.values()]


FORMS = (
    CudaForm("mma.sync", "fp16->fp32", "peak_mma_f16_f32", 16, 8, 16, 16),
    CudaForm("mma.sync", "fp16->fp16", "peak_mma_f16_f16", 16, 8, 16, 16),
    CudaForm("mma.sync", "bf16->fp32", "peak_mma_bf16_f32", 16, 8, 16, 16),
    CudaForm("mma.sync", "s8->s32", "peak_mma_s8_s32", 16, 8, 32, 32),
    CudaForm("mma.sp", "fp16->fp32", "peak_mma_sp_f16_f32", 16, 8, 32, 16),
    CudaForm("mma.sp", "bf16->fp32", "peak_mma_sp_bf16_f32", 16, 8, 32, 16),
    *wgmma_forms(sparse=False),
    *wgmma_forms(sparse=True),
)


def _row(form: str, types: str, shape: str, status: str, reason: str = "", *, kind: str = "mma",
         median_ms=None, work=None, rate=None, unit: str = "TFLOP/s") -> dict:
    return {"api": "CUDA", "kind": kind, "form": form, "types": types, "shape": shape, "status": status,
            "reason": reason, "median_ms": median_ms, "work": work, "rate": rate, "unit": unit}


def _warm(fn) -> None:
    import torch
    started = time.perf_counter()
    while time.perf_counter() - started < WARMUP_SECONDS:
        fn()
        torch.cuda.synchronize()


def measure_form(module: driver.Module, form: CudaForm, sms: int, *, target_ms: float, repeats: int) -> dict:
    import torch
    grid = sms * form.blocks_per_sm * 8
    out = torch.zeros(256, dtype=torch.float32, device="cuda")
    func = module.function(form.kernel)
    stream = torch.cuda.current_stream().cuda_stream
    shape = f"m{form.m}n{form.n}k{form.k}"
    unit = "TOP/s" if form.types.endswith("s32") else "TFLOP/s"

    def launch(blocks: int, iters: int, ones: int, store: int):
        args = [ctypes.c_void_p(out.data_ptr()), ctypes.c_int(iters), ctypes.c_uint32(ones),
                ctypes.c_uint32(META_POSITIONS_0_1), ctypes.c_int(store)]
        driver.launch(func, (blocks,), (256,), 0, stream, args, form.kernel)

    launch(1, 2, form.ones, 1)
    got = out.cpu()
    expected = form.expected_sum(2)
    if not bool((got == expected).all()):
        return _row(form.form, form.types, shape, "failed", f"check: threads stored {sorted(set(got.tolist()))[:3]}, "
                    f"expected {expected}", unit=unit)
    _warm(lambda: launch(grid, 64, 0, 0))
    probe = time_cuda(lambda: launch(grid, 64, 0, 0), warmup=1, iters=3).median_ms
    iters = int(min(1 << 24, max(64, math.ceil(64 * target_ms / max(probe, 1e-6)))))
    median = time_cuda(lambda: launch(grid, iters, 0, 0), warmup=1, iters=repeats).median_ms
    work = form.work(grid, iters)
    return _row(form.form, form.types, shape, "ok", f"{iters} iterations x {grid} blocks", median_ms=median,
                work=work, rate=work / (median * 1e-3) / 1e12, unit=unit)


def measure_bandwidth(module: driver.Module, sms: int, *, megabytes: int, repeats: int) -> list[dict]:
    """copy: torch ``dst.copy_(src)`` (cudaMemcpyAsync device to device), 2 x bytes moved; read: peak_stream_read."""
    import torch
    size = (megabytes << 20) & ~0xFFFF
    src = torch.zeros(size, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    shape = f"{size >> 20} MiB"
    _warm(lambda: dst.copy_(src))
    copy_ms = time_cuda(lambda: dst.copy_(src), warmup=1, iters=repeats).median_ms
    rows = [_row("copy", "", shape, "ok", "torch copy_ (cudaMemcpyAsync)", kind="bandwidth", median_ms=copy_ms,
                 work=2 * size, rate=2 * size / (copy_ms * 1e-3) / 1e9, unit="GB/s")]
    grid = sms * 64
    folded = torch.empty((grid * 256, 4), dtype=torch.int32, device="cuda")
    func = module.function("peak_stream_read")
    stream = torch.cuda.current_stream().cuda_stream
    args = [ctypes.c_void_p(src.data_ptr()), ctypes.c_uint64(size // 16), ctypes.c_void_p(folded.data_ptr()),
            ctypes.c_int(0), ctypes.c_uint32(1)]

    def read():
        driver.launch(func, (grid,), (256,), 0, stream, args, "peak_stream_read")

    _warm(read)
    read_ms = time_cuda(read, warmup=1, iters=repeats).median_ms
    rows.append(_row("read", "", shape, "ok", "peak_stream_read", kind="bandwidth", median_ms=read_ms, work=size,
                     rate=size / (read_ms * 1e-3) / 1e9, unit="GB/s"))
    return rows


def measure(*, target_ms: float = 10.0, repeats: int = 5, megabytes: int = 1024, types=None) -> list[dict]:
    """Every form (of ``types``, default all) and the two bandwidth rows; errors become rows with status
    "error"."""
    import torch
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    try:
        module = driver.Module(build.compile_kernel("peak")[0], label="peak.cu")
    except (build.KernelBuildError, driver.CudaError) as error:
        return [_row("all", "", "", "error", f"{type(error).__name__}: {error}")]
    rows = []
    for form in FORMS:
        if types and form.types not in types:
            continue
        try:
            rows.append(measure_form(module, form, sms, target_ms=target_ms, repeats=repeats))
        except driver.CudaError as error:
            rows.append(_row(form.form, form.types, "", "error", str(error)))
    try:
        rows += measure_bandwidth(module, sms, megabytes=megabytes, repeats=repeats)
    except (driver.CudaError, RuntimeError) as error:
        rows.append(_row("bandwidth", "", "", "error", str(error), kind="bandwidth", unit="GB/s"))
    return rows
