"""A thin, checked ctypes binding of the few CUDA driver calls the launchers need.

Why ctypes and not cuda.core / cuda.bindings for launching: the TMA kernels take
128-byte ``CUtensorMap`` parameters by value, and the exact Python spelling for
that differs between cuda-core / cuda-bindings releases; the driver ABI does not.
Every call goes through :func:`check`, which raises :class:`CudaError` naming the
call and the driver's error name.

The modules loaded here live in the device's primary context, the one torch
and the CUDA runtime use. Nothing may assume torch has made it current first: a
runtime call such as ``cudaGetDeviceProperties`` no longer creates a context
(lazy loading), so a fresh process that loads a module before any torch tensor
exists would get CUDA_ERROR_INVALID_CONTEXT. :func:`ensure_context` retains the
primary context and makes it current on the calling thread when none is.
"""
from __future__ import annotations

import ctypes
import ctypes.util
from typing import Sequence

from ..errors import Error

CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8
CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75
CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76
CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16

# CUtensorMapDataType / swizzle enums (cuda.h)
TENSOR_MAP_UINT8 = 0
TENSOR_MAP_UINT16 = 1
TENSOR_MAP_UINT32 = 2
SWIZZLE_NONE, SWIZZLE_32B, SWIZZLE_64B, SWIZZLE_128B = 0, 1, 2, 3
L2_PROMOTION_128B = 2


class CudaError(Error, RuntimeError):
    """A CUDA driver call failed."""


_lib = None


def _libcuda():
    global _lib
    if _lib is None:
        name = ctypes.util.find_library("cuda") or "libcuda.so.1"
        try:
            _lib = ctypes.CDLL(name)
        except OSError as exc:
            raise CudaError(f"cannot load the CUDA driver library ({name}): {exc}") from exc
        check(_lib.cuInit(0), "cuInit")
    return _lib


def check(result: int, what: str) -> None:
    """Raise :class:`CudaError` unless a driver call returned CUDA_SUCCESS."""
    if result == 0:
        return
    name = ctypes.c_char_p()
    text = ctypes.c_char_p()
    lib = _lib
    if lib is not None:
        lib.cuGetErrorName(result, ctypes.byref(name))
        lib.cuGetErrorString(result, ctypes.byref(text))
    label = name.value.decode() if name.value else f"error {result}"
    detail = f": {text.value.decode()}" if text.value else ""
    raise CudaError(f"{what} failed with {label}{detail}")


def ensure_context(ordinal: int = 0) -> int:
    """The calling thread's current context (as an int handle); when it has none, device ``ordinal``'s primary
    context is retained (for the life of the process, as the runtime does) and made current."""
    lib = _libcuda()
    current = ctypes.c_void_p()
    check(lib.cuCtxGetCurrent(ctypes.byref(current)), "cuCtxGetCurrent")
    if current.value:
        return current.value
    device = ctypes.c_int()
    check(lib.cuDeviceGet(ctypes.byref(device), ordinal), f"cuDeviceGet({ordinal})")
    check(lib.cuDevicePrimaryCtxRetain(ctypes.byref(current), device), "cuDevicePrimaryCtxRetain")
    check(lib.cuCtxSetCurrent(current), "cuCtxSetCurrent")
    return current.value


def _attribute(attribute: int, ordinal: int) -> int:
    device, value = ctypes.c_int(), ctypes.c_int()
    check(_libcuda().cuDeviceGet(ctypes.byref(device), ordinal), f"cuDeviceGet({ordinal})")
    check(_libcuda().cuDeviceGetAttribute(ctypes.byref(value), attribute, device),
          f"cuDeviceGetAttribute({attribute})")
    return value.value


def sm_count(ordinal: int = 0) -> int:
    """The device's multiprocessors (CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)."""
    return _attribute(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, ordinal)


def compute_capability(ordinal: int = 0) -> tuple[int, int]:
    return (_attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, ordinal),
            _attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, ordinal))


def device_name(ordinal: int = 0) -> str:
    device, name = ctypes.c_int(), ctypes.create_string_buffer(256)
    check(_libcuda().cuDeviceGet(ctypes.byref(device), ordinal), f"cuDeviceGet({ordinal})")
    check(_libcuda().cuDeviceGetName(name, 256, device), "cuDeviceGetName")
    return name.value.decode(errors="replace")


def synchronize() -> None:
    """cuCtxSynchronize: wait for every launch of the current context (a fault in one surfaces here)."""
    check(_libcuda().cuCtxSynchronize(), "cuCtxSynchronize")


class DeviceMemory:
    """``nbytes`` of device memory from cuMemAlloc, exactly that size (a tool that checks bounds sees the buffer
    the kernel was given); what runs without torch allocates through this. ``address`` is the device pointer."""

    def __init__(self, nbytes: int):
        ensure_context()
        pointer = ctypes.c_uint64()
        check(_libcuda().cuMemAlloc_v2(ctypes.byref(pointer), ctypes.c_size_t(nbytes)), f"cuMemAlloc({nbytes})")
        self.address, self.nbytes = pointer.value, nbytes

    @classmethod
    def holding(cls, array) -> "DeviceMemory":
        """A buffer holding a copy of the (C-contiguous numpy) ``array``."""
        memory = cls(array.nbytes)
        memory.write(array)
        return memory

    def write(self, array) -> None:
        if array.nbytes != self.nbytes or not array.flags.c_contiguous:
            raise CudaError(f"write: {array.nbytes} contiguous bytes into a buffer of {self.nbytes}")
        check(_libcuda().cuMemcpyHtoD_v2(ctypes.c_uint64(self.address), ctypes.c_void_p(array.ctypes.data),
                                         ctypes.c_size_t(self.nbytes)), "cuMemcpyHtoD")

    def fill_zero(self) -> None:
        check(_libcuda().cuMemsetD8_v2(ctypes.c_uint64(self.address), ctypes.c_ubyte(0),
                                       ctypes.c_size_t(self.nbytes)), "cuMemsetD8")

    def read(self, dtype):
        """The buffer as a new numpy array of ``dtype``."""
        import numpy as np
        out = np.empty(self.nbytes // np.dtype(dtype).itemsize, dtype=dtype)
        check(_libcuda().cuMemcpyDtoH_v2(ctypes.c_void_p(out.ctypes.data), ctypes.c_uint64(self.address),
                                         ctypes.c_size_t(out.nbytes)), "cuMemcpyDtoH")
        return out

    def free(self) -> None:
        if self.address:
            check(_libcuda().cuMemFree_v2(ctypes.c_uint64(self.address)), "cuMemFree")
            self.address = 0


def driver_version() -> int:
    version = ctypes.c_int()
    check(_libcuda().cuDriverGetVersion(ctypes.byref(version)), "cuDriverGetVersion")
    return version.value


class Module:
    """A loaded cubin; :meth:`function` returns kernel handles (cached)."""

    def __init__(self, cubin: bytes, label: str = "module"):
        lib = _libcuda()
        ensure_context()
        self._image = ctypes.create_string_buffer(cubin, len(cubin))
        self._handle = ctypes.c_void_p()
        check(lib.cuModuleLoadData(ctypes.byref(self._handle), self._image),
              f"cuModuleLoadData({label})")
        self._functions: dict[str, ctypes.c_void_p] = {}
        self.label = label

    def function(self, name: str, dynamic_smem: int = 0) -> ctypes.c_void_p:
        if name not in self._functions:
            func = ctypes.c_void_p()
            check(_libcuda().cuModuleGetFunction(ctypes.byref(func), self._handle, name.encode()),
                  f"cuModuleGetFunction({self.label}:{name})")
            if dynamic_smem > 48 * 1024:
                check(_libcuda().cuFuncSetAttribute(
                    func, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, dynamic_smem),
                    f"cuFuncSetAttribute({name}, max dynamic smem = {dynamic_smem})")
            self._functions[name] = func
        return self._functions[name]


class _LaunchAttribute(ctypes.Structure):
    """CUlaunchAttribute (cuda.h): the id, padding to 8 bytes, and a 64-byte value union, of which only
    ``clusterDim`` (three unsigned ints) is written here."""
    _fields_ = [("id", ctypes.c_int), ("pad", ctypes.c_char * 4), ("value", ctypes.c_uint * 16)]


class _LaunchConfig(ctypes.Structure):
    """CUlaunchConfig (cuda.h)."""
    _fields_ = [("gridDimX", ctypes.c_uint), ("gridDimY", ctypes.c_uint), ("gridDimZ", ctypes.c_uint),
                ("blockDimX", ctypes.c_uint), ("blockDimY", ctypes.c_uint), ("blockDimZ", ctypes.c_uint),
                ("sharedMemBytes", ctypes.c_uint), ("hStream", ctypes.c_void_p),
                ("attrs", ctypes.POINTER(_LaunchAttribute)), ("numAttrs", ctypes.c_uint)]


CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION = 4


def _cluster_config(grid_x: int, threads: int, smem: int, stream: int, cluster: int):
    """A CUlaunchConfig of a 1-D grid in clusters of ``cluster`` blocks along x (the attribute it points to is
    returned with it and must outlive it)."""
    attribute = _LaunchAttribute(id=CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION)
    attribute.value[0], attribute.value[1], attribute.value[2] = cluster, 1, 1
    config = _LaunchConfig(grid_x, 1, 1, threads, 1, 1, smem, ctypes.c_void_p(stream), ctypes.pointer(attribute), 1)
    return config, attribute


def max_active_clusters(func: ctypes.c_void_p, cluster: int, threads: int, smem: int, name: str) -> int:
    """How many clusters of ``cluster`` blocks of ``func`` the device runs at once (cuOccupancyMaxActiveClusters):
    a cluster's blocks share one GPC, so this can be less than the SMs' slots divided by ``cluster``."""
    config, _attribute = _cluster_config(cluster, threads, smem, 0, cluster)
    count = ctypes.c_int()
    check(_libcuda().cuOccupancyMaxActiveClusters(ctypes.byref(count), func, ctypes.byref(config)),
          f"cuOccupancyMaxActiveClusters({name}, cluster {cluster})")
    return count.value


def launch(func: ctypes.c_void_p, grid: Sequence[int], block: Sequence[int], smem: int,
           stream: int, args: Sequence[ctypes._SimpleCData | ctypes.Array], name: str, cluster: int = 1) -> None:
    """cuLaunchKernel with ``args`` given as ctypes objects (their addresses become kernelParams); with
    ``cluster`` > 1, cuLaunchKernelEx with thread-block clusters of that many consecutive blocks along x (the grid's
    x must be a multiple)."""
    params = (ctypes.c_void_p * len(args))(*[ctypes.cast(ctypes.pointer(a), ctypes.c_void_p) for a in args])
    gx, gy, gz = (list(grid) + [1, 1])[:3]
    bx, by, bz = (list(block) + [1, 1])[:3]
    if cluster == 1:
        check(_libcuda().cuLaunchKernel(func, gx, gy, gz, bx, by, bz, smem, ctypes.c_void_p(stream),
                                        params, None), f"cuLaunchKernel({name})")
        return
    if (gy, gz, by, bz) != (1, 1, 1, 1):
        raise CudaError(f"{name}: clusters run 1-D grids of 1-D blocks here, got grid {tuple(grid)} and block "
                        f"{tuple(block)}")
    if cluster < 1 or gx % cluster:
        raise CudaError(f"{name}: a cluster of {cluster} blocks does not divide the grid's {gx}")
    config, _attribute = _cluster_config(gx, bx, smem, stream, cluster)
    check(_libcuda().cuLaunchKernelEx(ctypes.byref(config), func, params, None),
          f"cuLaunchKernelEx({name}, cluster {cluster})")


def encode_tiled_2d(data_type: int, address: int, inner: int, outer: int, row_stride_bytes: int,
                    box_inner: int, box_outer: int, swizzle: int) -> ctypes.Array:
    """cuTensorMapEncodeTiled for a 2-D row-major array ``[outer][inner]``.

    Returns a 64-byte aligned 128-byte buffer suitable as a by-value kernel parameter.
    """
    # ctypes does not honour 64-byte alignment for Structure; over-allocate and
    # build the map in an aligned window, then copy into a fresh aligned view.
    raw = (ctypes.c_uint8 * (128 + 64))()
    offset = (-ctypes.addressof(raw)) % 64
    view = (ctypes.c_uint8 * 128).from_buffer(raw, offset)
    dims = (ctypes.c_uint64 * 2)(inner, outer)
    strides = (ctypes.c_uint64 * 1)(row_stride_bytes)
    box = (ctypes.c_uint32 * 2)(box_inner, box_outer)
    elem_strides = (ctypes.c_uint32 * 2)(1, 1)
    check(_libcuda().cuTensorMapEncodeTiled(
        ctypes.byref(view), data_type, 2, ctypes.c_void_p(address), dims, strides, box,
        elem_strides, 0, swizzle, L2_PROMOTION_128B, 0),
        f"cuTensorMapEncodeTiled(dims=({inner},{outer}), box=({box_inner},{box_outer}), "
        f"swizzle={swizzle})")
    view._keepalive = raw  # the view borrows raw's memory
    return view
