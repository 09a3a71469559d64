"""Which GPU a measurement ran on: name, UUID and driver version (the tuning cache's device key), and its SM count.

Vulkan reports them through ``VkPhysicalDeviceVulkan11Properties.deviceUUID`` and the driver version; CUDA
through torch and ``nvidia-smi``. NVIDIA's Vulkan device UUID is the GPU UUID CUDA reports, and both driver
versions normalize to the same dotted numbers (Vulkan's 580.159.4.0 and nvidia-smi's 580.159.04 are 580.159.4),
so either API yields the same key. The SM count comes from ``VK_NV_shader_sm_builtins`` or from CUDA.
"""
from __future__ import annotations

import contextlib
import re
from dataclasses import asdict, dataclass


def normalize_driver(text) -> str:
    """Dotted whole numbers without leading zeros, trailing zero parts dropped: ``580.159.04`` -> ``580.159.4``."""
    numbers = [int(part) for part in re.findall(r"\d+", str(text or ""))]
    while len(numbers) > 1 and numbers[-1] == 0:
        numbers.pop()
    return ".".join(map(str, numbers))


def normalize_uuid(value) -> str:
    """32 lowercase hex digits from bytes, a byte list, a uuid (``.bytes``) or text such as ``GPU-0c6a0501-...``;
    "" when unknown or all zero."""
    if value is None:
        return ""
    raw = getattr(value, "bytes", value)
    if isinstance(raw, (bytes, bytearray)):
        text = bytes(raw).hex()
    elif isinstance(raw, (list, tuple)):
        text = bytes(int(b) & 0xFF for b in raw).hex()
    else:
        text = str(value)
    digits = re.sub(r"[^0-9a-f]", "", text.lower().removeprefix("gpu-"))
    return digits if len(digits) == 32 and set(digits) != {"0"} else ""


@dataclass(frozen=True)
class DeviceIdentity:
    """The device part of a tuning cache key."""
    name: str
    uuid: str = ""
    driver: str = ""

    @property
    def file_stem(self) -> str:
        """A file name for this device: its name as a slug and the start of its UUID."""
        slug = re.sub(r"[^a-z0-9]+", "-", self.name.lower()).strip("-") or "device"
        return f"{slug}-{self.uuid[:12] or 'no-uuid'}"

    def to_dict(self) -> dict:
        return asdict(self)


def vulkan_identity(physical) -> DeviceIdentity:
    """From a :class:`vkcoop.vk.PhysicalDevice` (the UUID through the properties chain it already reads)."""
    uuid = ""
    with contextlib.suppress(Exception):
        uuid = normalize_uuid(bytes(physical.extended_properties["VkPhysicalDeviceVulkan11Properties"].deviceUUID))
    if not uuid:   # no UUID: vendor and device id keep different GPU models apart
        uuid = f"{int(physical.vendor_id):08x}{int(physical.properties.deviceID):08x}".ljust(32, "0")
    return DeviceIdentity(physical.name, uuid, normalize_driver(physical.driver_version))


def cuda_identity(driver: str | None = None) -> DeviceIdentity | None:
    """The first CUDA device through torch (``driver`` from nvidia-smi), None without one."""
    try:
        import torch

        if not torch.cuda.is_available():
            return None
        properties = torch.cuda.get_device_properties(0)
    except Exception:  # noqa: BLE001
        return None
    return DeviceIdentity(str(properties.name), normalize_uuid(getattr(properties, "uuid", None)),
                          normalize_driver(driver))


def cuda_sm_count() -> int | None:
    with contextlib.suppress(Exception):
        import torch

        return int(torch.cuda.get_device_properties(0).multi_processor_count)
    return None
