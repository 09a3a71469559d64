"""Running a :class:`vkcoop.gemm.launch.Launch` on a Vulkan device: pipelines, buffers, one checked run, timing.

:class:`CoopMat2Gemm`, :class:`Sparse24Gemm` and :class:`KhrSharedMemoryGemm` pair a kernel description with a
device: ``bind(...)`` uploads the operands once, ``result()`` runs the GEMM and reads C back, ``time()`` times
repeated runs with GPU timestamps, ``run(...)`` does bind + result + release. Each owns its pipelines and
buffers and releases them in ``close()`` (or as a context manager).
"""
from __future__ import annotations

import time

import numpy as np

from .. import shaders as shader_catalog
from .configs import DeviceLimits
from .expanded import ExpandedSparse24Kernel
from .launch import CoopMat2Kernel, Dispatch, Launch, Sparse24Kernel
from .staging import KhrKernel, StagedKernel, StagedSparse24Kernel, check_coopmat2_kernel
from .tiles import SubgroupTile, WorkgroupTile
from .types import GemmInputError
from .warmup import WARMUP_SECONDS, mark_busy, minimum_warmup, settle, timed_series

def compile_dispatch(dispatch: Dispatch) -> bytes:
    """The SPIR-V of a dispatch's declared shader variant."""
    variant = shader_catalog.ShaderVariant(dispatch.shader, tuple(sorted((str(k), str(v))
                                                                         for k, v in dispatch.defines.items())))
    return shader_catalog.compile_variant(variant)


def time_dispatches(device, dispatches, iterations: int, warmup: int, flush=None, name: str = "gemm",
                    warmup_seconds: float = WARMUP_SECONDS) -> list[float]:
    """GPU seconds of ``iterations`` runs of ``dispatches`` (a list of (pipeline, buffers, groups, push)) after
    at least ``warmup`` untimed ones that together last at least ``warmup_seconds`` of wall time (longer after
    an idle gap) and, when ``warmup_seconds`` > 0, until two consecutive warm-up batches agree
    (:mod:`vkcoop.gemm.warmup`), so the GPU clocks are up; each run's time comes from its dispatches'
    timestamps: from the start of its first dispatch to the end of its last, so the barriers between them count.

    ``flush`` = (pipeline, buffers, groups, push) of a dispatch run before every timed run (L2 flush); its own
    time is left out.
    """
    per_iteration = len(dispatches) + (1 if flush else 0)
    warmup_seconds = minimum_warmup(warmup_seconds, "vulkan")
    batch = max(1, min(iterations, 64 // per_iteration))
    with device.command_buffer(timestamps=True, max_dispatches=batch * per_iteration,
                               name=f"{name} timing") as commands:
        with commands.recording():
            for _ in range(batch):
                if flush:
                    commands.dispatch(*flush, label="l2 flush")
                for pipeline, buffers, groups, push in dispatches:
                    commands.dispatch(pipeline, buffers, groups, push, label=pipeline.name)
        skip = 1 if flush else 0

        def runs() -> list[float]:   # from a run's first dispatch to its last: barriers between them count
            spans = [(i * per_iteration + skip, (i + 1) * per_iteration - 1) for i in range(batch)]
            return [ns * 1e-9 for ns in commands.span_times_ns(spans)]

        def submitted_runs() -> list[float]:
            commands.submit()
            return runs()

        started, submitted, recent = time.perf_counter(), 0, [None, None]
        while submitted < -(-warmup // batch) or time.perf_counter() - started < warmup_seconds:
            commands.submit()
            submitted += 1
            if warmup_seconds > 0:
                recent = [recent[1], runs()]
        if warmup_seconds > 0:
            settle(submitted_runs, *recent)
        times = timed_series(submitted_runs, iterations)
    mark_busy()
    return times


#: What l2_flush.comp's folded loads would have to equal for it to store anything: its buffer is zero, so never.
L2_FLUSH_NEVER = 0xFFFFFFFF


class L2Flush:
    """A compute dispatch that reads a zero-filled buffer larger than the L2 cache, run before each timed GEMM: the
    L2 then holds clean lines only (a flush that wrote left dirty ones for the timed run to write back)."""

    def __init__(self, device, megabytes: int = 256):
        quads = megabytes * (1 << 20) // 16
        self.buffer = device.upload(np.zeros((quads, 4), np.uint32), name="l2 flush")
        flush = Dispatch("gemm/l2_flush.comp", {}, {}, ("buffer",), (min(-(-quads // 256), 65535), 1, 1),
                         (np.uint32(quads), np.uint32(L2_FLUSH_NEVER)))
        self.pipeline = device.pipeline(compile_dispatch(flush), name="l2_flush")
        self.groups, self.push = flush.groups, flush.push

    def dispatch_args(self):
        return (self.pipeline, [self.buffer], self.groups, self.push)

    def close(self):
        self.pipeline.close()
        self.buffer.close()


class VulkanGemm:
    """A kernel description on a device: pipelines made once per distinct dispatch, buffers per bind."""

    def __init__(self, device, kernel):
        self.device, self.kernel, self.name = device, kernel, kernel.name
        self._pipelines: dict = {}
        self._bound: tuple | None = None      # (launch, resolved dispatches, buffers by name)
        try:
            self.prepare(kernel.template_launch())   # pipeline creation fails here, before any bind
        except Exception:
            self.close()
            raise

    def _pipeline(self, dispatch: Dispatch):
        key = dispatch.pipeline_key()
        if key not in self._pipelines:
            self._pipelines[key] = self.device.pipeline(compile_dispatch(dispatch), name=self.name,
                                                        specialization=dict(dispatch.specialization),
                                                        **dispatch.pipeline_options)
        return self._pipelines[key]

    def prepare(self, launch: Launch) -> None:
        """Create the launch's pipelines without binding anything (pipeline creation fails early)."""
        for dispatch in launch.dispatches:
            self._pipeline(dispatch)

    def bind_launch(self, launch: Launch):
        """Upload the launch's inputs and allocate its outputs; replaces what was bound before."""
        self.release()
        self.prepare(launch)
        buffers = {}
        try:
            for name, array in launch.inputs.items():
                buffers[name] = self.device.upload(array, name=name)
            for name, (shape, dtype) in launch.outputs.items():
                buffers[name] = self.device.empty(shape, dtype, name=name)
        except Exception:
            for buffer in buffers.values():
                buffer.close()
            raise
        resolved = [(self._pipeline(d), [buffers[b] for b in d.buffers], d.groups, d.push)
                    for d in launch.dispatches]
        self._bound = (launch, resolved, buffers)
        return self

    def bound_buffer(self, name: str):
        """The device buffer ``name`` of the bound launch (an input, C, or what a split-K GEMM writes besides)."""
        buffers = self._require_bound()[2]
        if name not in buffers:
            raise GemmInputError(f"{self.name}: the bound launch has no buffer {name!r} (it has {', '.join(buffers)})")
        return buffers[name]

    def _require_bound(self):
        if self._bound is None:
            raise GemmInputError(f"{self.name}: bind() inputs first")
        return self._bound

    def result(self) -> np.ndarray:
        """Run the bound GEMM once and read C back."""
        launch, resolved, buffers = self._require_bound()
        with self.device.command_buffer(max_dispatches=len(resolved), name=self.name) as commands:
            with commands.recording():
                for pipeline, bound, groups, push in resolved:
                    commands.dispatch(pipeline, bound, groups, push, label=pipeline.name)
            commands.submit()
        c = buffers[launch.result].read()
        return c[:launch.view[0], :launch.view[1]] if launch.view else c

    def time(self, iterations: int = 10, warmup: int = 3, flush: L2Flush | None = None,
             warmup_seconds: float = WARMUP_SECONDS) -> list[float]:
        """GPU seconds of each of ``iterations`` runs on the bound inputs, after a warm-up of at least ``warmup``
        runs and ``warmup_seconds``."""
        _, resolved, _ = self._require_bound()
        return time_dispatches(self.device, resolved, iterations, warmup, flush.dispatch_args() if flush else None,
                               name=self.name, warmup_seconds=warmup_seconds)

    def dispatch_times(self, iterations: int = 10, warmup: int = 3) -> list[list[float]]:
        """GPU seconds of each bound dispatch run on its own (``iterations`` runs each): where a multi-pass launch
        spends its time; their sum leaves out the barriers between the passes that :meth:`time` counts."""
        _, resolved, _ = self._require_bound()
        return [time_dispatches(self.device, [one], iterations, warmup, name=f"{self.name} pass {index}")
                for index, one in enumerate(resolved)]

    def release(self):
        if self._bound is not None:
            for buffer in self._bound[2].values():
                buffer.close()
        self._bound = None

    def close(self):
        self.release()
        for pipeline in self._pipelines.values():
            pipeline.close()
        self._pipelines.clear()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class _TwoOperandGemm(VulkanGemm):
    """A GEMM of two dense operands: ``bind(A, B in the kernel's layout)``, ``run(A, B [K][N])``."""

    def bind(self, a, b):
        """Upload A [M][K] and B (in the kernel's layout: :meth:`store_b`) and allocate C [M][N]."""
        return self.bind_launch(self.kernel.launch(a, b))

    def run(self, a, b) -> np.ndarray:
        """C = A @ B, B given as [K][N] (transposed here for a column-major-B kernel)."""
        self.bind(a, self.kernel.store_b(b) if isinstance(b, np.ndarray) else b)
        try:
            return self.result()
        finally:
            self.release()


def _checked(device, kernel, flexible):
    """``kernel`` once it fits the device (:func:`vkcoop.gemm.staging.check_coopmat2_kernel`)."""
    check_coopmat2_kernel(kernel, device.physical.flexible_shapes() if flexible is None else flexible,
                          DeviceLimits.of(device.physical))
    return kernel


def coopmat2_gemm(device, kernel, *, flexible=None) -> "VulkanGemm":
    """The device GEMM of a launch-level coopmat2 kernel (``vkcoop.gemm.configs.launch_kernel`` picks one for a
    configuration): the compressed-A form for the 2:4 kernels, the two-operand form for the dense ones."""
    compressed = isinstance(kernel, (Sparse24Kernel, StagedSparse24Kernel, ExpandedSparse24Kernel))
    return (_CompressedGemm if compressed else _TwoOperandGemm)(device, _checked(device, kernel, flexible))


class CoopMat2Gemm(_TwoOperandGemm):
    """Workgroup-scope coopmat2 GEMM (sample ``coopmat2-gemm``'s kernel): C = A @ B, any M, N, K."""

    def __init__(self, device, types, tile: WorkgroupTile, *, b_column_major: bool = False, flexible=None):
        super().__init__(device, _checked(device, CoopMat2Kernel(types, tile, b_column_major=b_column_major), flexible))


class _CompressedGemm(VulkanGemm):
    """A GEMM whose A arrives in vkcoop's 2:4 format: ``bind(values, metadata, B)``, ``run(values, metadata, B)``."""

    def bind(self, values, metadata, b):
        """values [M][K/2] and metadata [M][K/32] uint32 (vkcoop.sparse format), B in the kernel's layout."""
        return self.bind_launch(self.kernel.launch(values, metadata, b))

    def run(self, values, metadata, b) -> np.ndarray:
        """C = decompress(values, metadata) @ B; B is given as [K][N]."""
        self.bind(values, metadata, self.kernel.store_b(b) if isinstance(b, np.ndarray) else b)
        try:
            return self.result()
        finally:
            self.release()


class Sparse24Gemm(_CompressedGemm):
    """The Vulkan 2:4 path: C (fp32) = decompress(values, metadata) @ B with a decode-function tensor load."""

    def __init__(self, device, dtype: str, tile: WorkgroupTile, *, b_column_major: bool = False, flexible=None,
                 meta_words: int = 0):
        kernel = Sparse24Kernel(dtype, tile, b_column_major=b_column_major, meta_words=meta_words)
        super().__init__(device, _checked(device, kernel, flexible))


class KhrSharedMemoryGemm(_TwoOperandGemm):
    """Subgroup-scope KHR coopmat GEMM through shared memory (sample ``khr-shmem-gemm``'s kernel)."""

    def __init__(self, device, types, tile: SubgroupTile, *, pad_to_tiles: bool = False):
        kernel = KhrKernel(types, tile, pad_to_tiles=pad_to_tiles)
        kernel.check_shared_memory(int(device.physical.limits.maxComputeSharedMemorySize))
        super().__init__(device, kernel)


class StagedCoopMat2Gemm(_TwoOperandGemm):
    """The staged coopmat2 GEMM (:class:`vkcoop.gemm.staging.StagedKernel`): A, B through shared memory in 16-byte
    vectors, then workgroup-scope matrix loads from there."""

    def __init__(self, device, types, tile: WorkgroupTile, *, flexible=None):
        super().__init__(device, _checked(device, StagedKernel(types, tile), flexible))


class StagedSparse24Gemm(_CompressedGemm):
    """The staged 2:4 GEMM (:class:`vkcoop.gemm.staging.StagedSparse24Kernel`): A expanded from the 2:4 format into
    shared memory, then workgroup-scope matrix loads; B row-major."""

    def __init__(self, device, dtype: str, tile: WorkgroupTile, *, flexible=None):
        super().__init__(device, _checked(device, StagedSparse24Kernel(dtype, tile), flexible))
