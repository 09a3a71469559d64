"""Device-local buffers filled and read back through host-visible staging buffers; numpy in and out."""
from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import vulkan as vk

from .errors import BufferDTypeError, BufferShapeError, MissingFeatureError, VulkanError, VulkanTypeError, check
from .resource import Resource

WHOLE_SIZE = 0xFFFFFFFFFFFFFFFF  # VK_WHOLE_SIZE as a VkDeviceSize (the package spells it -1)
BUFFER_USAGE_SHADER_DEVICE_ADDRESS = 0x00020000
MEMORY_ALLOCATE_DEVICE_ADDRESS = 0x2
DEVICE_LOCAL, HOST_VISIBLE, HOST_COHERENT, HOST_CACHED = 0x1, 0x2, 0x4, 0x8

_DTYPE_ALIASES = {
    "bf16": ml_dtypes.bfloat16, "bfloat16": ml_dtypes.bfloat16,
    "e4m3": ml_dtypes.float8_e4m3fn, "float8_e4m3": ml_dtypes.float8_e4m3fn, "float8_e4m3fn": ml_dtypes.float8_e4m3fn,
    "e5m2": ml_dtypes.float8_e5m2, "float8_e5m2": ml_dtypes.float8_e5m2,
    "fp16": np.float16, "fp32": np.float32, "fp64": np.float64,
}


def as_dtype(dtype) -> np.dtype:
    """numpy dtype from a dtype, a numpy/ml_dtypes scalar type or a name ("bf16", "e4m3", "float16"...)."""
    if isinstance(dtype, str) and dtype.lower() in _DTYPE_ALIASES:
        return np.dtype(_DTYPE_ALIASES[dtype.lower()])
    try:
        result = np.dtype(dtype)
    except TypeError as error:
        raise BufferDTypeError(f"dtype {dtype!r} is not a numpy dtype: {error}") from None
    if result.hasobject or result.itemsize == 0:
        raise BufferDTypeError(f"dtype {result} cannot live in a GPU buffer (needs fixed-size plain data)")
    return result


def _normalize_shape(shape) -> tuple[int, ...]:
    """Integer extents only: empty((2.7,)) used to make a buffer of shape (2,)."""
    if isinstance(shape, (int, np.integer)):
        shape = (shape,)
    if not isinstance(shape, (tuple, list)):
        raise BufferShapeError(f"shape must be an int or a tuple of ints, got {type(shape).__name__} {shape!r}")
    for extent in shape:
        if isinstance(extent, (bool, np.bool_)) or not isinstance(extent, (int, np.integer)):
            raise BufferShapeError(f"shape {tuple(shape)!r} has the non-integer extent {extent!r}")
    shape = tuple(int(s) for s in shape)
    if any(s < 0 for s in shape):
        raise BufferShapeError(f"shape {shape} has a negative extent")
    return shape


class Buffer(Resource):
    """A device-local VkBuffer (storage + transfer usage) that remembers a numpy shape and dtype.

    Create it through :meth:`Device.upload`, :meth:`Device.empty` or :meth:`Device.buffer`. Close it (or let the
    owning Device close it) to free the memory. The Vulkan buffer size is the byte size rounded up to 4 bytes
    (vkCmdFillBuffer granularity); ``nbytes`` is the logical size.
    """

    def __init__(self, device, shape, dtype, *, name: str = "buffer"):
        device.require_open()
        self.device = device
        if not isinstance(name, str):
            raise VulkanTypeError(f"name must be a str, got {type(name).__name__}")
        self.name = name
        self.dtype = as_dtype(dtype)
        self.shape = _normalize_shape(shape)
        self.nbytes = int(math.prod(self.shape)) * self.dtype.itemsize
        if self.nbytes == 0:
            raise BufferShapeError(f"{name}: a buffer of shape {self.shape} and dtype {self.dtype} is empty; "
                                   "Vulkan buffers need at least one byte")
        limit = int(device.physical.limits.maxStorageBufferRange)
        if self.nbytes > limit:
            raise BufferShapeError(f"{name}: {self.nbytes} bytes exceed maxStorageBufferRange ({limit} bytes)")
        self.size = (self.nbytes + 3) // 4 * 4
        usage = (vk.VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | vk.VK_BUFFER_USAGE_UNIFORM_BUFFER_BIT
                 | vk.VK_BUFFER_USAGE_TRANSFER_SRC_BIT | vk.VK_BUFFER_USAGE_TRANSFER_DST_BIT)
        self.addressable = device.enabled_features.get("bufferDeviceAddress", False)
        if self.addressable:
            usage |= BUFFER_USAGE_SHADER_DEVICE_ADDRESS
        self.handle, self.memory = device._create_buffer_and_memory(self.size, usage, DEVICE_LOCAL,
                                                                     device_address=self.addressable)
        self._address = None
        device._track(self)

    def __repr__(self):
        return f"<Buffer {self.name} {self.shape} {self.dtype} ({self.nbytes} bytes)>"

    @property
    def closed(self) -> bool:
        return self.handle is None

    def _require_open(self):
        if self.handle is None:
            raise VulkanError(f"buffer {self.name} is closed")

    # -- data in and out -------------------------------------------------------------------------------------
    def check_array(self, array, parameter: str = "array") -> np.ndarray:
        """The array as C-contiguous data if its dtype and shape match this buffer; a clear error otherwise."""
        if not isinstance(array, np.ndarray):
            raise BufferDTypeError(f"{self.name}: {parameter} must be a numpy array of dtype {self.dtype}, "
                                   f"got {type(array).__name__}")
        if array.dtype != self.dtype:
            raise BufferDTypeError(f"{self.name}: {parameter} has dtype {array.dtype}, the buffer holds {self.dtype} "
                                   f"(convert explicitly, e.g. array.astype({self.dtype.name!r}))")
        if array.shape != self.shape:
            raise BufferShapeError(f"{self.name}: {parameter} has shape {array.shape}, the buffer has shape "
                                   f"{self.shape}")
        return np.ascontiguousarray(array)

    def write(self, array: np.ndarray) -> None:
        """Copy an array of exactly this buffer's dtype and shape to the GPU (through a staging buffer)."""
        self._require_open()
        data = self.check_array(array)
        self.device._upload_bytes(self, data.view(np.uint8).reshape(-1))

    def read(self) -> np.ndarray:
        """Copy the buffer back into a new numpy array of its shape and dtype."""
        self._require_open()
        raw = self.device._download_bytes(self)
        return raw.view(self.dtype).reshape(self.shape)

    def fill_zero(self) -> None:
        self._require_open()
        self.device._fill_zero(self)

    @property
    def device_address(self) -> int:
        """vkGetBufferDeviceAddress, for ``buffer_reference`` shaders (needs the bufferDeviceAddress feature)."""
        self._require_open()
        if not self.addressable:
            raise MissingFeatureError(self.device.physical.name, missing_features=["bufferDeviceAddress"],
                                      reason=f"{self.name}.device_address: create the Device with "
                                             "features=['bufferDeviceAddress']")
        if self._address is None:
            info = vk.ffi.new("VkBufferDeviceAddressInfo*", {
                "sType": vk.VK_STRUCTURE_TYPE_BUFFER_DEVICE_ADDRESS_INFO, "buffer": self.handle})
            # Called on lib directly: the package's wrapper drops the returned address.
            self._address = int(vk.lib.vkGetBufferDeviceAddress(self.device.handle, info))
        return self._address

    def close(self) -> None:
        if self.handle is None:
            return
        if self.device.handle is not None:
            vk.lib.vkDestroyBuffer(self.device.handle, self.handle, vk.ffi.NULL)
            vk.lib.vkFreeMemory(self.device.handle, self.memory, vk.ffi.NULL)
        self.handle = self.memory = None
        self.device._untrack(self)


class MappedStaging:
    """A host-visible, coherent buffer, mapped for its whole life; used for uploads and readbacks."""

    def __init__(self, device, size: int, *, for_readback: bool):
        self.device, self.size = device, size
        usage = vk.VK_BUFFER_USAGE_TRANSFER_SRC_BIT | vk.VK_BUFFER_USAGE_TRANSFER_DST_BIT
        preferred = HOST_VISIBLE | HOST_COHERENT | (HOST_CACHED if for_readback else 0)
        self.handle, self.memory = device._create_buffer_and_memory(
            size, usage, preferred, required=HOST_VISIBLE | HOST_COHERENT)
        pointer = vk.ffi.new("void**")
        check(vk.lib.vkMapMemory(device.handle, self.memory, 0, size, 0, pointer), "vkMapMemory")
        self.view = np.frombuffer(vk.ffi.buffer(pointer[0], size), dtype=np.uint8)

    def close(self):
        if self.handle is None:
            return
        self.view = None
        vk.lib.vkUnmapMemory(self.device.handle, self.memory)
        vk.lib.vkDestroyBuffer(self.device.handle, self.handle, vk.ffi.NULL)
        vk.lib.vkFreeMemory(self.device.handle, self.memory, vk.ffi.NULL)
        self.handle = self.memory = None
