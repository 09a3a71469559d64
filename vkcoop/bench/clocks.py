"""The GPU's clocks while a benchmark measures, sampled through NVML beside the run.

Why: a figure is only as good as the clocks it ran at, and they move. In a ``bench sparse --flush-l2`` process
that ran only the Vulkan paths, later skinny cases took 3-4.5x their time in a run of every path, with steady
series and the same configurations (docs/gemm.md, "Skinny figures need CUDA in the process"). A sample every
``interval_s`` (0.1 s) from a background thread records the SM and memory clocks and the performance state; each
result keeps what was seen while its path measured its case (:func:`ClockTrace.window`): the least SM and memory
clock, the performance states, and the share of samples with the memory clock below its maximum.

NVML is the driver's own management library (``libnvidia-ml.so.1``, what ``nvidia-smi`` reads), reached through a
small cffi ABI binding: no package to install. Where it is missing (no NVIDIA driver) the trace records nothing and
says why once.
"""
from __future__ import annotations

import threading
import time

import cffi

_CDEF = """
typedef struct nvmlDevice_st* nvmlDevice_t;
int nvmlInit_v2(void);
int nvmlShutdown(void);
int nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device);
int nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *device);
int nvmlDeviceGetClockInfo(nvmlDevice_t device, int type, unsigned int *clock);
int nvmlDeviceGetMaxClockInfo(nvmlDevice_t device, int type, unsigned int *clock);
int nvmlDeviceGetPerformanceState(nvmlDevice_t device, int *state);
"""
NVML_SUCCESS, NVML_CLOCK_SM, NVML_CLOCK_MEM = 0, 1, 2


def nvml_uuid(uuid_hex: str) -> str:
    """NVML's spelling of a device UUID (``GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx``) from 32 hex digits."""
    h = uuid_hex.lower()
    return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


class Nvml:
    """The few NVML calls a trace needs, on one device: by UUID (32 hex digits, as vkcoop.bench.identity writes
    them) where given and known to NVML, else the first GPU. Raises OSError or RuntimeError where NVML cannot
    open it."""

    def __init__(self, uuid_hex: str = "", library: str = "libnvidia-ml.so.1"):
        self.ffi = cffi.FFI()
        self.ffi.cdef(_CDEF)
        self.lib = self.ffi.dlopen(library)
        self._check(self.lib.nvmlInit_v2(), "nvmlInit_v2")
        handle = self.ffi.new("nvmlDevice_t *")
        if not uuid_hex or self.lib.nvmlDeviceGetHandleByUUID(nvml_uuid(uuid_hex).encode(), handle) != NVML_SUCCESS:
            self._check(self.lib.nvmlDeviceGetHandleByIndex_v2(0, handle), "nvmlDeviceGetHandleByIndex_v2")
        self.device = handle[0]
        self.max_mem_mhz = self._clock(self.lib.nvmlDeviceGetMaxClockInfo, NVML_CLOCK_MEM)

    @staticmethod
    def _check(code: int, call: str) -> None:
        if code != NVML_SUCCESS:
            raise RuntimeError(f"{call} returned NVML error {code}")

    def _clock(self, function, kind: int) -> int | None:
        value = self.ffi.new("unsigned int *")
        return int(value[0]) if function(self.device, kind, value) == NVML_SUCCESS else None

    def sample(self) -> tuple[int | None, int | None, str]:
        """(SM MHz, memory MHz, performance state such as "P0"), None or "" where NVML does not say."""
        state = self.ffi.new("int *")
        pstate = f"P{state[0]}" if self.lib.nvmlDeviceGetPerformanceState(self.device, state) == NVML_SUCCESS \
            and 0 <= state[0] <= 15 else ""
        return (self._clock(self.lib.nvmlDeviceGetClockInfo, NVML_CLOCK_SM),
                self._clock(self.lib.nvmlDeviceGetClockInfo, NVML_CLOCK_MEM), pstate)

    def close(self) -> None:
        self.lib.nvmlShutdown()


class ClockTrace:
    """Samples ``sampler()`` -> (SM MHz, memory MHz, state) every ``interval_s`` on a daemon thread from
    :meth:`start` to :meth:`close`; ``max_mem_mhz``: the memory clock a sample is measured against. A context
    manager. :meth:`open` builds one on NVML, or one that records nothing, with ``reason`` saying why."""

    def __init__(self, sampler=None, max_mem_mhz: int | None = None, interval_s: float = 0.1, reason: str = "",
                 on_close=None):
        self.sampler, self.max_mem_mhz, self.interval_s, self.reason = sampler, max_mem_mhz, interval_s, reason
        self.samples: list[tuple[float, int | None, int | None, str]] = []
        self._on_close = on_close
        self._stop = threading.Event()
        self._thread = None

    @classmethod
    def open(cls, uuid_hex: str = "", interval_s: float = 0.1) -> "ClockTrace":
        try:
            nvml = Nvml(uuid_hex)
        except (OSError, RuntimeError, AttributeError) as error:   # the loader's first sentence is enough
            return cls(reason=f"no clock samples: NVML is unavailable ({str(error).split('.  ')[0]})")
        return cls(nvml.sample, nvml.max_mem_mhz, interval_s, on_close=nvml.close)

    def start(self) -> "ClockTrace":
        if self.sampler is not None and self._thread is None:
            self._thread = threading.Thread(target=self._run, name="vkcoop-clocks", daemon=True)
            self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.samples.append((time.monotonic(), *self.sampler()))
            except Exception as error:   # a sampler that fails stops the trace, never the run
                self.reason = f"clock sampling stopped: {error}"
                return
            self._stop.wait(self.interval_s)

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self._on_close is not None:
            self._on_close()
            self._on_close = None

    def __enter__(self) -> "ClockTrace":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    def window(self, begin: float, end: float) -> dict | None:
        """What the samples between ``begin`` and ``end`` (``time.monotonic()``) saw: {"samples", "sm_mhz_min",
        "mem_mhz_min", "mem_below_max" (the share of samples under ``max_mem_mhz``), "states"}. A window shorter
        than the interval takes the first sample after it began. None where no sample falls in or after it."""
        samples = list(self.samples)   # the sampling thread appends meanwhile
        inside = [s for s in samples if begin <= s[0] <= end] or [s for s in samples if s[0] >= begin][:1]
        if not inside:
            return None
        sm = [s[1] for s in inside if s[1] is not None]
        mem = [s[2] for s in inside if s[2] is not None]
        below = None if self.max_mem_mhz is None or not mem else \
            sum(m < self.max_mem_mhz for m in mem) / len(mem)
        return {"samples": len(inside), "sm_mhz_min": min(sm, default=None), "mem_mhz_min": min(mem, default=None),
                "mem_below_max": below, "states": sorted({s[3] for s in inside if s[3]})}
