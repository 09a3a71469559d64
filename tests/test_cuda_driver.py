"""vkcoop.cuda.driver without a GPU: a module load owns a current context (the primary one) instead of assuming
torch made one current, and a failing driver call becomes a CudaError naming the call."""
from __future__ import annotations

import ctypes

import pytest

from vkcoop.cuda import driver

PRIMARY = 0x5000


class FakeDriver:
    """The few libcuda entry points ensure_context and Module use; ``current`` is the thread's context."""

    def __init__(self, current: int = 0, retain_result: int = 0):
        self.current, self.retain_result, self.calls = current, retain_result, []

    def _out(self, pointer, value):
        ctypes.cast(pointer, ctypes.POINTER(ctypes.c_void_p))[0] = value

    def cuCtxGetCurrent(self, out):
        self.calls.append("cuCtxGetCurrent")
        self._out(out, self.current or None)
        return 0

    def cuDeviceGet(self, out, ordinal):
        self.calls.append(f"cuDeviceGet({ordinal})")
        ctypes.cast(out, ctypes.POINTER(ctypes.c_int))[0] = ordinal
        return 0

    def cuDevicePrimaryCtxRetain(self, out, device):
        self.calls.append("cuDevicePrimaryCtxRetain")
        if self.retain_result:
            return self.retain_result
        self._out(out, PRIMARY)
        return 0

    def cuCtxSetCurrent(self, context):
        self.calls.append("cuCtxSetCurrent")
        self.current = context.value
        return 0

    def cuModuleLoadData(self, out, image):
        self.calls.append("cuModuleLoadData")
        if not self.current:
            return 201   # CUDA_ERROR_INVALID_CONTEXT: what a fresh process got before the fix
        self._out(out, 0x77)
        return 0

    def cuGetErrorName(self, code, out):
        names = {201: b"CUDA_ERROR_INVALID_CONTEXT", 3: b"CUDA_ERROR_NOT_INITIALIZED"}
        ctypes.cast(out, ctypes.POINTER(ctypes.c_char_p))[0] = names.get(code, b"CUDA_ERROR_UNKNOWN")
        return 0

    def cuGetErrorString(self, code, out):
        return 0


@pytest.fixture
def fake(monkeypatch):
    lib = FakeDriver()
    monkeypatch.setattr(driver, "_lib", lib)
    return lib


def test_a_fresh_process_gets_the_primary_context_made_current(fake):
    assert driver.ensure_context() == PRIMARY
    assert fake.calls == ["cuCtxGetCurrent", "cuDeviceGet(0)", "cuDevicePrimaryCtxRetain", "cuCtxSetCurrent"]
    assert fake.current == PRIMARY


def test_a_current_context_is_used_as_it_is(fake):
    fake.current = 0x1234   # torch made one current first
    assert driver.ensure_context() == 0x1234
    assert fake.calls == ["cuCtxGetCurrent"]


def test_a_module_loads_in_a_process_where_nothing_made_a_context_current(fake):
    module = driver.Module(b"\x7fELF fake cubin", label="peak.cu")
    assert module._handle.value == 0x77
    assert fake.calls.index("cuCtxSetCurrent") < fake.calls.index("cuModuleLoadData")


def test_a_failing_retain_names_the_call_and_the_error(fake):
    fake.retain_result = 3
    with pytest.raises(driver.CudaError, match=r"cuDevicePrimaryCtxRetain failed with CUDA_ERROR_NOT_INITIALIZED"):
        driver.Module(b"cubin", label="peak.cu")
    assert "cuModuleLoadData" not in fake.calls
