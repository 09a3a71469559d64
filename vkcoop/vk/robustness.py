"""How the driver guards storage-buffer accesses: VK_EXT_pipeline_robustness (Vulkan 1.4 core).

Without ``robustBufferAccess`` an out-of-bounds buffer access is undefined behaviour (Vulkan spec, "Shader Resource
Interface", robustness), yet NVIDIA's driver compiles a bounds test before every plain storage-buffer load by default
(an ``ISETP`` against the descriptor's size, the load predicated on it; docs/gemm.md, experiment G26). A pipeline
created with ``VkPipelineRobustnessCreateInfoEXT`` whose storage- and uniform-buffer behaviour is ``DISABLED``
promises that no access leaves its buffer, which the spec already requires here, so the driver may drop the tests.

``buffer_robustness`` of a :class:`vkcoop.vk.Device`: ``"default"`` (the driver's own behaviour, nothing chained) or
``"disabled"`` (:data:`DEFAULT`; where the device has the ``pipelineRobustness`` feature, elsewhere the device falls
back to ``"default"`` and says why in :attr:`vkcoop.vk.Device.buffer_robustness_note`). ``$VKCOOP_BUFFER_ROBUSTNESS``
sets it where the caller does not.
"""
from __future__ import annotations

import os

import vulkan as vk

ENV = "VKCOOP_BUFFER_ROBUSTNESS"
#: The driver's own behaviour: nothing chained (what a pipeline of an object that names no behaviour gets too).
DRIVER_DEFAULT = "default"
CHOICES = (DRIVER_DEFAULT, "disabled")
#: Our shaders stay inside their buffers (the clamped tensor layouts handle the edges, and the GPU tests check every
#: dispatch); on the H100 the tests fell by 2-4 % of the instructions and the staged loads ran up to 1 % faster
#: (docs/gemm.md, experiment G26; docs/attention.md, experiment 53).
DEFAULT = "disabled"
FEATURE = "pipelineRobustness"
_BEHAVIOUR = {"disabled": vk.VK_PIPELINE_ROBUSTNESS_BUFFER_BEHAVIOR_DISABLED_EXT}
_STYPE = vk.VK_STRUCTURE_TYPE_PIPELINE_ROBUSTNESS_CREATE_INFO_EXT


def requested(value: str | None) -> str:
    """The behaviour asked for: ``value``, else ``$VKCOOP_BUFFER_ROBUSTNESS``, else :data:`DEFAULT`; ValueError
    naming the choices for anything else."""
    chosen = value if value is not None else (os.environ.get(ENV, "").strip().lower() or DEFAULT)
    if chosen not in CHOICES:
        source = "buffer_robustness" if value is not None else f"${ENV}"
        raise ValueError(f"{source} must be one of {', '.join(CHOICES)}, got {chosen!r}")
    return chosen


def resolve(value: str | None, supported_features: dict) -> tuple[str, str, list[str]]:
    """(effective behaviour, note, features to enable) on a device whose features are ``supported_features``."""
    wanted = requested(value)
    if wanted == DRIVER_DEFAULT:
        return DRIVER_DEFAULT, "", []
    if not supported_features.get(FEATURE):
        return DRIVER_DEFAULT, f"{wanted} buffer robustness needs the {FEATURE} feature (VK_EXT_pipeline_robustness)", []
    return wanted, "", [FEATURE]


def pipeline_info(behaviour: str, keep: list):
    """The ``VkPipelineRobustnessCreateInfoEXT`` to chain into a pipeline's create info (appended to ``keep``), or
    NULL for ``"default"``."""
    if behaviour == DRIVER_DEFAULT:
        return vk.ffi.NULL
    device_default = vk.VK_PIPELINE_ROBUSTNESS_BUFFER_BEHAVIOR_DEVICE_DEFAULT_EXT
    info = vk.ffi.new("VkPipelineRobustnessCreateInfoEXT*", {
        "sType": _STYPE, "storageBuffers": _BEHAVIOUR[behaviour], "uniformBuffers": _BEHAVIOUR[behaviour],
        "vertexInputs": device_default, "images": vk.VK_PIPELINE_ROBUSTNESS_IMAGE_BEHAVIOR_DEVICE_DEFAULT_EXT})
    keep.append(info)
    return info
