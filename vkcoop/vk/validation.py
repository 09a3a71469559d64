"""The validation layer: which mode a caller asked for, how an instance turns it on, and its messages.

Modes (``validate`` of :class:`vkcoop.vk.Instance` and :class:`vkcoop.vk.Device`, ``$VKCOOP_VALIDATE``):

* ``"off"`` (``False``): no layer.
* ``"api"`` (``True``): VK_LAYER_KHRONOS_validation's checks of how the API is used (its default settings).
* ``"gpu"``: the same layer with GPU-assisted validation (GPU-AV) on: every shader is instrumented when its
  pipeline is created, and each access to a storage or uniform buffer through a descriptor is checked against the
  descriptor's range on the GPU, as are buffer-device-address accesses (settings ``gpuav_descriptor_checks`` and
  ``gpuav_buffer_address_oob``). vkcoop's pipelines promise that no access leaves its buffer (robustness
  ``DISABLED``, :mod:`vkcoop.vk.robustness`), so an access that does would be silent without this mode. The
  layer's settings go in through VK_EXT_layer_settings where the layer offers it, else VK_EXT_validation_features
  (its GPU-assisted bit). docs/sanitizers.md says what it covers and what it cannot instrument.

Messages arrive through VK_EXT_debug_utils as :class:`ValidationMessage`; :func:`classify` sorts them into what
the layer found (``"error"``) and what it says it could not check (``"not-instrumented"``).
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass

import numpy as np
import vulkan as vk

from .errors import LayerNotFoundError, VulkanTypeError

VALIDATION_LAYER = "VK_LAYER_KHRONOS_validation"
DEBUG_UTILS_EXTENSION = "VK_EXT_debug_utils"
LAYER_SETTINGS_EXTENSION = "VK_EXT_layer_settings"
VALIDATION_FEATURES_EXTENSION = "VK_EXT_validation_features"
ENV = "VKCOOP_VALIDATE"

OFF, API, GPU = "off", "api", "gpu"
MODES = (OFF, API, GPU)
_ENV_WORDS = {"": OFF, "0": OFF, "false": OFF, "no": OFF, "off": OFF,
              "1": API, "true": API, "yes": API, "on": API, "api": API, "gpu": GPU}

#: GPU-AV: shader instrumentation with the buffer bounds checks (descriptors and device addresses); the rest of the
#: layer's GPU-AV settings keep their defaults. Not safe mode: a faulting access still runs after it is reported.
GPU_AV_SETTINGS = (
    ("gpuav_enable", True),
    ("gpuav_shader_instrumentation", True),
    ("gpuav_descriptor_checks", True),
    ("gpuav_buffer_address_oob", True),
)
_GPU_ASSISTED_FEATURE = 0   # VK_VALIDATION_FEATURE_ENABLE_GPU_ASSISTED_EXT

SEVERITY_NAMES = {0x1: "verbose", 0x10: "info", 0x100: "warning", 0x1000: "error"}
COLLECTED_SEVERITIES = 0x100 | 0x1000  # warnings and errors; info/verbose are chatter
MESSAGE_TYPES = 0x1 | 0x2 | 0x4  # general, validation, performance
# Messages that come from the environment, not from vkcoop: the Debian 12 loader (1.3.239) fills its device
# dispatch table by asking vkGetDeviceProcAddr for vkGetPhysicalDeviceVideoEncodeQualityLevelPropertiesKHR, an
# instance-level function, and newer validation layers (1.4.x) warn about that on every vkCreateDevice; in GPU mode
# the layer says which features and limits it set for its own instrumentation (timelineSemaphore,
# bufferDeviceAddress, ...: "WARNING-Setting-Limit-Adjusted"). They are kept in Instance.suppressed_messages, not in
# Instance.messages. (message id, text fragment)
KNOWN_ENVIRONMENT_MESSAGES = (
    ("WARNING-vkGetDeviceProcAddr-device", "vkGetPhysicalDeviceVideoEncodeQualityLevelPropertiesKHR"),
    ("WARNING-Setting-Limit-Adjusted", "validation is adjusting settings"),
)
#: What GPU-AV says when it leaves a shader or an instruction unchecked, e.g. "Failure to instrument shader.
#: Proceeding with non-instrumented shader." (matched loosely: the wording moves between releases). Such a message
#: is a gap in the coverage, reported as ``"not-instrumented"``, not a fault in the shader.
_NOT_INSTRUMENTED = re.compile(
    r"instrument\w*[^\n]{0,80}?(?:fail|unable|cannot|can't|could not|not supported|unsupported|skipp)|"
    r"(?:fail|unable|cannot|can't|could not|skipp)\w*[^\n]{0,40}?instrument|"
    r"(?:GPU-AV|GPU-Assisted)[^.\n]*(?:disabl|not supported|unsupported)", re.IGNORECASE)


def is_known_environment_message(message_id: str, text: str) -> bool:
    return any(message_id == known_id and fragment in text for known_id, fragment in KNOWN_ENVIRONMENT_MESSAGES)


@dataclass(frozen=True)
class ValidationMessage:
    severity: str      # "warning" or "error"
    kind: str          # "general", "validation", "performance" joined by "|"
    message_id: str    # VUID or message name
    message: str

    def __str__(self):
        return f"[{self.severity}/{self.kind}] {self.message_id}: {self.message}"


def classify(message: ValidationMessage) -> str:
    """``"not-instrumented"`` for GPU-AV saying it left something unchecked, else ``"error"``."""
    return "not-instrumented" if _NOT_INSTRUMENTED.search(f"{message.message_id} {message.message}") else "error"


def mode_of(value, name: str = "validate", *, allow_none: bool = False) -> str | None:
    """The mode ``value`` asks for: False/True, or one of :data:`MODES` (None where ``allow_none``: the caller reads
    ``$VKCOOP_VALIDATE``). validate='no' is a type error, not a quiet "off"."""
    if value is None and allow_none:
        return None
    if isinstance(value, (bool, np.bool_)):
        return API if value else OFF
    if isinstance(value, str) and value in MODES:
        return value
    allowed = "True, False, None" if allow_none else "True, False"
    raise VulkanTypeError(f"{name} must be {allowed} or one of {', '.join(repr(m) for m in MODES)}, "
                          f"got {type(value).__name__} {value!r}")


def env_mode() -> str:
    """``$VKCOOP_VALIDATE``: 1/true/yes/on/api turn the API checks on, gpu adds GPU-AV; anything else is off."""
    return _ENV_WORDS.get(os.environ.get(ENV, "").strip().lower(), OFF)


def layer_extensions() -> set[str]:
    """The instance extensions the validation layer itself offers."""
    return {p.extensionName if isinstance(p.extensionName, str) else vk.ffi.string(p.extensionName).decode()
            for p in vk.vkEnumerateInstanceExtensionProperties(VALIDATION_LAYER)}


def instance_extension_choices(mode: str, offered: set[str]) -> list[list[str]]:
    """The instance extensions ``mode`` needs, best first, given what the layer ``offered``: GPU-AV through
    VK_EXT_layer_settings (its settings named), else VK_EXT_validation_features (the layer's defaults, which check
    the same buffer bounds). Both are listed where offered, because an older loader (Debian 12's 1.3.239) refuses
    to enable VK_EXT_layer_settings although the layer offers it. LayerNotFoundError where GPU-AV has no way in."""
    if mode == OFF:
        return [[]]
    if mode == API:
        return [[DEBUG_UTILS_EXTENSION]]
    choices = [[DEBUG_UTILS_EXTENSION, extension] for extension in (LAYER_SETTINGS_EXTENSION,
                                                                      VALIDATION_FEATURES_EXTENSION)
               if extension in offered]
    if not choices:
        raise LayerNotFoundError(f"{VALIDATION_LAYER} offers neither {LAYER_SETTINGS_EXTENSION} nor "
                                 f"{VALIDATION_FEATURES_EXTENSION}: GPU-assisted validation cannot be turned on")
    return choices


def settings_chain(mode: str, extensions: list[str], following, keep: list):
    """The structs that turn GPU-AV on, ahead of ``following`` in the instance's pNext chain (``following``
    itself outside GPU mode). Every struct is appended to ``keep``, which must outlive vkCreateInstance."""
    if mode != GPU:
        return following
    if LAYER_SETTINGS_EXTENSION in extensions:
        layer = vk.ffi.new("char[]", VALIDATION_LAYER.encode())
        settings = vk.ffi.new("VkLayerSettingEXT[]", len(GPU_AV_SETTINGS))
        for entry, (key, value) in zip(settings, GPU_AV_SETTINGS):
            name = vk.ffi.new("char[]", key.encode())
            flag = vk.ffi.new("VkBool32*", int(value))
            entry.pLayerName, entry.pSettingName = layer, name
            entry.type, entry.valueCount, entry.pValues = vk.VK_LAYER_SETTING_TYPE_BOOL32_EXT, 1, flag
            keep += [name, flag]
        info = vk.ffi.new("VkLayerSettingsCreateInfoEXT*", {
            "sType": vk.VK_STRUCTURE_TYPE_LAYER_SETTINGS_CREATE_INFO_EXT, "pNext": following,
            "settingCount": len(GPU_AV_SETTINGS), "pSettings": settings})
        keep += [layer, settings, info]
        return info
    enables = vk.ffi.new("VkValidationFeatureEnableEXT[]", [_GPU_ASSISTED_FEATURE])
    info = vk.ffi.new("VkValidationFeaturesEXT*", {
        "sType": vk.VK_STRUCTURE_TYPE_VALIDATION_FEATURES_EXT, "pNext": following,
        "enabledValidationFeatureCount": 1, "pEnabledValidationFeatures": enables})
    keep += [enables, info]
    return info


def messenger_create_info(on_message, keep: list):
    """A VkDebugUtilsMessengerCreateInfoEXT calling ``on_message(ValidationMessage)`` for every warning and error;
    the callback never unwinds through the driver and never aborts the call."""
    @vk.ffi.callback("PFN_vkDebugUtilsMessengerCallbackEXT")
    def callback(severity, message_types, callback_data, user_data):
        try:
            kinds = "|".join(name for bit, name in ((1, "general"), (2, "validation"), (4, "performance"))
                             if message_types & bit)
            data = callback_data[0]
            message_id = (vk.ffi.string(data.pMessageIdName).decode("utf-8", "replace") if data.pMessageIdName
                          else str(data.messageIdNumber))
            text = vk.ffi.string(data.pMessage).decode("utf-8", "replace") if data.pMessage else ""
            on_message(ValidationMessage(SEVERITY_NAMES.get(int(severity), str(severity)), kinds, message_id, text))
        except Exception:  # never unwind through the driver
            pass
        return 0  # VK_FALSE: do not abort the call

    info = vk.ffi.new("VkDebugUtilsMessengerCreateInfoEXT*", {
        "sType": vk.VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT,
        "messageSeverity": COLLECTED_SEVERITIES, "messageType": MESSAGE_TYPES, "pfnUserCallback": callback})
    keep += [callback, info]
    return info
