"""Errors raised by the vkcoop Vulkan runtime. All derive from :class:`VulkanError` (a ``vkcoop.Error``); those
for bad arguments also from :class:`VulkanInputError` (a ValueError), wrong types from :class:`VulkanTypeError`
(a TypeError as well)."""
from __future__ import annotations

from ..errors import Error, InputError, InputTypeError


class VulkanError(Error, RuntimeError):
    """A Vulkan call failed or the runtime was used in a way Vulkan does not allow."""


class VulkanInputError(VulkanError, InputError):
    """A runtime call got a bad argument, found before anything reached the driver; names the parameter."""


class VulkanTypeError(VulkanInputError, InputTypeError):
    """A runtime call got an argument of the wrong type (Device(1.5), groups=(2.7,), validate='no')."""


class NoDeviceError(VulkanError):
    """No Vulkan device matches the request (or no Vulkan loader/driver exists at all)."""


class LayerNotFoundError(VulkanError):
    """A requested instance layer (VK_LAYER_KHRONOS_validation) is not installed."""


class MissingFeatureError(VulkanError):
    """The device lacks extensions or features a caller declared; names every missing one."""

    def __init__(self, device_name: str, missing_extensions=(), missing_features=(), reason: str = ""):
        self.device_name = device_name
        self.missing_extensions = list(missing_extensions)
        self.missing_features = list(missing_features)
        parts = []
        if self.missing_extensions:
            parts.append("extensions " + ", ".join(self.missing_extensions))
        if self.missing_features:
            parts.append("features " + ", ".join(self.missing_features))
        message = f"{device_name} lacks " + "; ".join(parts)
        if reason:
            message += f" ({reason})"
        super().__init__(message)


class FenceTimeoutError(VulkanError):
    """A submission did not finish within the timeout. The GPU may still be running it."""


class DeviceLostError(VulkanError):
    """VK_ERROR_DEVICE_LOST: the driver gave up on the device (hang, fault or reset)."""


class ValidationError(VulkanError):
    """The validation layer reported messages where none were allowed."""

    def __init__(self, messages):
        self.messages = list(messages)
        lines = "\n".join(f"  [{m.severity}] {m.message_id}: {m.message}" for m in self.messages[:10])
        more = f"\n  ... and {len(self.messages) - 10} more" if len(self.messages) > 10 else ""
        super().__init__(f"{len(self.messages)} validation message(s):\n{lines}{more}")


class LimitError(VulkanInputError):
    """A request exceeds a device limit (workgroup size, dispatch size, push constants, buffer range...)."""


class BufferDTypeError(VulkanTypeError):
    """An array's dtype does not match the buffer's dtype."""


class BufferShapeError(VulkanInputError):
    """An array's shape or byte size does not match the buffer."""


class PipelineInputError(VulkanInputError):
    """Bad SPIR-V, entry point, specialization constants, push constants or bindings for a pipeline or dispatch."""


_RESULT_NAMES = {
    0: "VK_SUCCESS", 1: "VK_NOT_READY", 2: "VK_TIMEOUT", 3: "VK_EVENT_SET", 4: "VK_EVENT_RESET",
    5: "VK_INCOMPLETE", -1: "VK_ERROR_OUT_OF_HOST_MEMORY", -2: "VK_ERROR_OUT_OF_DEVICE_MEMORY",
    -3: "VK_ERROR_INITIALIZATION_FAILED", -4: "VK_ERROR_DEVICE_LOST", -5: "VK_ERROR_MEMORY_MAP_FAILED",
    -6: "VK_ERROR_LAYER_NOT_PRESENT", -7: "VK_ERROR_EXTENSION_NOT_PRESENT", -8: "VK_ERROR_FEATURE_NOT_PRESENT",
    -9: "VK_ERROR_INCOMPATIBLE_DRIVER", -10: "VK_ERROR_TOO_MANY_OBJECTS", -11: "VK_ERROR_FORMAT_NOT_SUPPORTED",
    -12: "VK_ERROR_FRAGMENTED_POOL", -13: "VK_ERROR_UNKNOWN", -1000069000: "VK_ERROR_OUT_OF_POOL_MEMORY",
    -1000011001: "VK_ERROR_VALIDATION_FAILED_EXT", -1000012000: "VK_ERROR_INVALID_SHADER_NV",
    1000297000: "VK_PIPELINE_COMPILE_REQUIRED",
}


def result_name(result: int) -> str:
    return _RESULT_NAMES.get(int(result), f"VkResult({int(result)})")


def check(result: int, what: str) -> None:
    """Turn a failing VkResult into the matching exception."""
    result = int(result)
    if result == 0:
        return
    if result == -4:
        raise DeviceLostError(f"{what}: VK_ERROR_DEVICE_LOST")
    if result == 2:
        raise FenceTimeoutError(f"{what}: VK_TIMEOUT")
    raise VulkanError(f"{what} failed with {result_name(result)}")
