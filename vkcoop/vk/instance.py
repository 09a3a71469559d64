"""The Vulkan instance, optional validation, and physical devices with their capabilities."""
from __future__ import annotations

import atexit
import os

import numpy as np
import vulkan as vk

from . import coopmat2_ffi as side
from . import validation
from .chain import StructChain
from .checks import device_selector, text
from .errors import LayerNotFoundError, NoDeviceError, VulkanError, check
from .features import FEATURE_STRUCTS, FEATURE_TO_STRUCT
from .resource import Resource
from .tables import ShapeEntry
from .validation import (KNOWN_ENVIRONMENT_MESSAGES, VALIDATION_LAYER, ValidationMessage,
                         is_known_environment_message)

SM_BUILTINS_EXTENSION = "VK_NV_shader_sm_builtins"
DEVICE_ENV = "VKCOOP_DEVICE"
# Re-exported: what the layer reports, and the environment's own messages (vkcoop.vk.validation).
__all__ = ["Instance", "PhysicalDevice", "ValidationMessage", "VALIDATION_LAYER", "KNOWN_ENVIRONMENT_MESSAGES",
           "is_known_environment_message", "release_pooled_instances", "select_physical_device"]

_DEVICE_TYPE_NAMES = {0: "other", 1: "integrated-gpu", 2: "discrete-gpu", 3: "virtual-gpu", 4: "cpu"}
_DEVICE_TYPE_PREFERENCE = {2: 0, 1: 1, 3: 2, 0: 3, 4: 4}


def make_api_version(major: int, minor: int, patch: int = 0) -> int:
    return (major << 22) | (minor << 12) | patch


def api_version_tuple(version: int) -> tuple[int, int, int]:
    return ((version >> 22) & 0x7F, (version >> 12) & 0x3FF, version & 0xFFF)


def _string(char_array) -> str:
    if isinstance(char_array, str):  # the package's enumerate wrappers already decode
        return char_array
    return vk.ffi.string(char_array).decode("utf-8", "replace")


def proc_address(instance_handle, name: str) -> int:
    """vkGetInstanceProcAddr as an integer address (0 when the loader has no such function)."""
    return side.address_of(vk.lib.vkGetInstanceProcAddr(instance_handle, name.encode()))


def instance_function(instance_handle, name: str, pfn_type: str):
    """An instance-level function the ``vulkan`` package does not wrap, cast to ``pfn_type``."""
    address = proc_address(instance_handle, name)
    if not address:
        raise VulkanError(f"{name} is not available from the loader")
    return vk.ffi.cast(pfn_type, address)


def driver_version_string(vendor_id: int, version: int) -> str:
    """Driver versions are vendor encoded; NVIDIA uses 10.8.8.6 bits (vulkaninfo does the same)."""
    if vendor_id == 0x10DE:
        return f"{(version >> 22) & 0x3FF}.{(version >> 14) & 0xFF}.{(version >> 6) & 0xFF}.{version & 0x3F}"
    major, minor, patch = api_version_tuple(version)
    return f"{major}.{minor}.{patch}"


class _NativeInstance:
    """One VkInstance (and its debug messenger). vkcoop pools these per validation mode and destroys them at
    interpreter exit, because NVIDIA's driver (580.159, H200) fails the 31st vkCreateInstance of a process with
    VK_ERROR_INCOMPATIBLE_DRIVER even when every earlier instance was destroyed (docs/runtime.md)."""

    def __init__(self, mode: str, application_name: str):
        self.mode = mode
        self.owner: "Instance | None" = None   # the Instance whose lists receive messages now
        self.handle = None
        self.messenger = None
        self.keep = []  # cffi objects the loader/layer keep pointers to (callback, names, settings)
        self.layers, choices = self._layers_and_extensions(mode)
        messenger_info = (validation.messenger_create_info(self._on_message, self.keep) if mode != validation.OFF
                          else vk.ffi.NULL)
        for index, extensions in enumerate(choices):
            result = self._create(application_name, extensions, messenger_info)
            if result != -7 or index == len(choices) - 1:   # VK_ERROR_EXTENSION_NOT_PRESENT: the next choice
                break
        if result == -9:  # VK_ERROR_INCOMPATIBLE_DRIVER: no ICD
            raise NoDeviceError("no Vulkan driver (vkCreateInstance: VK_ERROR_INCOMPATIBLE_DRIVER)")
        if result == -6:  # VK_ERROR_LAYER_NOT_PRESENT although it is listed: its library did not load
            raise LayerNotFoundError(f"{VALIDATION_LAYER} is listed but did not load (VK_ERROR_LAYER_NOT_PRESENT); "
                                     "its library, or a library it needs, is missing or too new for this system")
        check(result, "vkCreateInstance")
        self.extensions = extensions
        if mode != validation.OFF:
            create = instance_function(self.handle, "vkCreateDebugUtilsMessengerEXT",
                                       "PFN_vkCreateDebugUtilsMessengerEXT")
            messenger = vk.ffi.new("VkDebugUtilsMessengerEXT*")
            check(create(self.handle, messenger_info, vk.ffi.NULL, messenger), "vkCreateDebugUtilsMessengerEXT")
            self.messenger = messenger[0]

    def _create(self, application_name: str, extensions: list[str], messenger_info) -> int:
        """vkCreateInstance with ``extensions``; its VkResult (the handle is kept on success)."""
        keep = []
        app_name = vk.ffi.new("char[]", application_name.encode())
        app_info = vk.ffi.new("VkApplicationInfo*", {
            "sType": vk.VK_STRUCTURE_TYPE_APPLICATION_INFO, "pApplicationName": app_name,
            "applicationVersion": 1, "pEngineName": app_name, "engineVersion": 1,
            "apiVersion": make_api_version(1, 3)})
        layer_names = [vk.ffi.new("char[]", name.encode()) for name in self.layers]
        extension_names = [vk.ffi.new("char[]", name.encode()) for name in extensions]
        layer_array = vk.ffi.new("char*[]", layer_names)
        extension_array = vk.ffi.new("char*[]", extension_names)
        create_info = vk.ffi.new("VkInstanceCreateInfo*", {
            "sType": vk.VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
            # Chaining the messenger info here also reports problems inside vkCreate/DestroyInstance.
            "pNext": validation.settings_chain(self.mode, extensions, messenger_info, keep),
            "pApplicationInfo": app_info,
            "enabledLayerCount": len(self.layers), "ppEnabledLayerNames": layer_array,
            "enabledExtensionCount": len(extensions), "ppEnabledExtensionNames": extension_array})
        handle = vk.ffi.new("VkInstance*")
        result = vk.lib.vkCreateInstance(create_info, vk.ffi.NULL, handle)
        if result == 0:
            self.handle = handle[0]
            self.keep += keep
        return result

    @staticmethod
    def _layers_and_extensions(mode: str) -> tuple[list[str], list[list[str]]]:
        """The layers to enable and the instance extension lists to try, best first."""
        try:
            available_layers = {_string(p.layerName) for p in vk.vkEnumerateInstanceLayerProperties()}
        except Exception as error:  # no loader or no ICD at all
            raise NoDeviceError(f"cannot query the Vulkan loader: {error!r}") from error
        if mode == validation.OFF:
            return [], [[]]
        if VALIDATION_LAYER not in available_layers:
            raise LayerNotFoundError(
                f"{VALIDATION_LAYER} is not installed (available layers: {sorted(available_layers) or 'none'}); "
                "install vulkan-validationlayers or point VK_ADD_LAYER_PATH at its explicit_layer.d")
        offered = validation.layer_extensions() if mode == validation.GPU else set()
        return [VALIDATION_LAYER], validation.instance_extension_choices(mode, offered)

    def _on_message(self, message: ValidationMessage) -> None:
        owner = self.owner
        if owner is None:
            return  # pooled and idle: nobody is listening (instance teardown at exit)
        if is_known_environment_message(message.message_id, message.message):
            owner.suppressed_messages.append(message)
        else:
            owner.messages.append(message)

    def destroy(self):
        if self.handle is None:
            return
        if self.messenger is not None:
            destroy = instance_function(self.handle, "vkDestroyDebugUtilsMessengerEXT",
                                        "PFN_vkDestroyDebugUtilsMessengerEXT")
            destroy(self.handle, self.messenger, vk.ffi.NULL)
            self.messenger = None
        vk.lib.vkDestroyInstance(self.handle, vk.ffi.NULL)
        self.handle = None


_idle_natives: dict[str, list[_NativeInstance]] = {mode: [] for mode in validation.MODES}


def release_pooled_instances() -> int:
    """Destroy every idle pooled VkInstance now (also run at interpreter exit); returns how many."""
    count = 0
    for natives in _idle_natives.values():
        while natives:
            natives.pop().destroy()
            count += 1
    return count


atexit.register(release_pooled_instances)


class Instance(Resource):
    """A Vulkan instance (API 1.3). ``validate``: False, True (VK_LAYER_KHRONOS_validation's API checks) or
    ``"gpu"`` (GPU-assisted validation as well; :mod:`vkcoop.vk.validation`); ``"api"`` is True. The layer's
    messages are collected.

    Use as a context manager or call :meth:`close`. ``messages`` holds every warning/error message the layer or the
    loader reported through VK_EXT_debug_utils while this Instance was open. The VkInstance itself comes from a
    per-process pool: close() returns it there and :func:`release_pooled_instances` (run at exit) destroys it,
    because the NVIDIA driver refuses more than 30 vkCreateInstance calls per process (see _NativeInstance).
    Devices, buffers and pipelines are still destroyed on close.
    """

    def __init__(self, validate: bool | str = False, application_name: str = "vkcoop"):
        self.validation = validation.mode_of(validate)  # validate='no' must not turn the layer on
        self.validate = self.validation != validation.OFF
        text(application_name, "application_name")
        self.messages: list[ValidationMessage] = []
        self.suppressed_messages: list[ValidationMessage] = []  # see KNOWN_ENVIRONMENT_MESSAGES
        idle = _idle_natives[self.validation]
        self._native = idle.pop() if idle else _NativeInstance(self.validation, application_name)
        self._native.owner = self
        self._handle = self._native.handle
        self.layers, self.extensions = self._native.layers, self._native.extensions
        self._physical_devices = None

    def take_messages(self) -> list[ValidationMessage]:
        """Return and clear the collected messages."""
        taken, self.messages[:] = list(self.messages), []
        return taken

    # -- functions and devices -------------------------------------------------------------------------------
    @property
    def handle(self):
        if self._handle is None:
            raise VulkanError("the Vulkan instance is closed")
        return self._handle

    def proc_address(self, name: str) -> int:
        """vkGetInstanceProcAddr as an integer address (0 when the loader has no such function)."""
        return proc_address(self.handle, name)

    def physical_devices(self) -> list["PhysicalDevice"]:
        if self._physical_devices is None:
            count = vk.ffi.new("uint32_t*")
            check(vk.lib.vkEnumeratePhysicalDevices(self.handle, count, vk.ffi.NULL), "vkEnumeratePhysicalDevices")
            handles = vk.ffi.new("VkPhysicalDevice[]", count[0])
            check(vk.lib.vkEnumeratePhysicalDevices(self.handle, count, handles), "vkEnumeratePhysicalDevices")
            self._physical_devices = [PhysicalDevice(self, handles[i], i) for i in range(count[0])]
        return self._physical_devices

    def select(self, device: int | str | None = None) -> "PhysicalDevice":
        """Pick a physical device: by index, by (case-insensitive substring of its) name, or by ``$VKCOOP_DEVICE``
        when ``device`` is None; otherwise the first discrete GPU, then integrated, virtual, other, CPU."""
        return select_physical_device(self.physical_devices(), device)

    def close(self):
        """Hand the VkInstance back to the pool; this Instance can't be used afterwards."""
        if self._handle is None:
            return
        native, self._native, self._handle = self._native, None, None
        native.owner = None
        _idle_natives[native.mode].append(native)

    def __del__(self):  # last resort; prefer the context manager
        try:
            self.close()
        except Exception:
            pass


def select_physical_device(devices: list["PhysicalDevice"], device: int | str | None) -> "PhysicalDevice":
    device_selector(device)
    listing = "; ".join(f"{d.index}: {d.name} ({d.device_type})" for d in devices) or "none"
    if not devices:
        raise NoDeviceError("no Vulkan physical devices")
    source = "device argument"
    if device is None and os.environ.get(DEVICE_ENV):
        device, source = os.environ[DEVICE_ENV], f"${DEVICE_ENV}"
    if device is None:
        return min(devices, key=lambda d: (_DEVICE_TYPE_PREFERENCE.get(d.device_type_id, 9), d.index))
    if isinstance(device, str) and device.strip().isdigit():
        device = int(device)
    if isinstance(device, (int, np.integer)):
        device = int(device)
        if not 0 <= device < len(devices):
            raise NoDeviceError(f"{source}: no Vulkan device with index {device} (devices: {listing})")
        return devices[device]
    matches = [d for d in devices if device.lower() in d.name.lower()]
    exact = [d for d in matches if d.name.lower() == device.lower()]
    if len(exact) == 1 or len(matches) == 1:
        return (exact or matches)[0]
    if not matches:
        raise NoDeviceError(f"{source}: no Vulkan device named like {device!r} (devices: {listing})")
    raise NoDeviceError(f"{source}: {device!r} matches several devices ({listing}); use an index")


class PhysicalDevice:
    """A VkPhysicalDevice with its properties, extensions and features read once."""

    def __init__(self, instance: Instance, handle, index: int):
        self.instance, self.handle, self.index = instance, handle, index
        properties = vk.ffi.new("VkPhysicalDeviceProperties*")
        vk.lib.vkGetPhysicalDeviceProperties(handle, properties)
        self.properties = properties
        self.name = _string(properties.deviceName)
        self.api_version = api_version_tuple(properties.apiVersion)
        self.device_type_id = int(properties.deviceType)
        self.device_type = _DEVICE_TYPE_NAMES.get(self.device_type_id, str(self.device_type_id))
        self.vendor_id = int(properties.vendorID)
        self.driver_version = driver_version_string(self.vendor_id, properties.driverVersion)
        self.limits = properties.limits
        count = vk.ffi.new("uint32_t*")
        check(vk.lib.vkEnumerateDeviceExtensionProperties(handle, vk.ffi.NULL, count, vk.ffi.NULL),
              "vkEnumerateDeviceExtensionProperties")
        extension_properties = vk.ffi.new("VkExtensionProperties[]", count[0])
        check(vk.lib.vkEnumerateDeviceExtensionProperties(handle, vk.ffi.NULL, count, extension_properties),
              "vkEnumerateDeviceExtensionProperties")
        self.extensions = {_string(e.extensionName): int(e.specVersion) for e in extension_properties}
        self._features = None
        self._extended_properties = None
        self._queue_families = None

    def __repr__(self):
        return f"<PhysicalDevice {self.index}: {self.name} ({self.device_type}, API {'.'.join(map(str, self.api_version))})>"

    def has_extension(self, name: str) -> bool:
        return name in self.extensions

    # -- features --------------------------------------------------------------------------------------------
    def feature_structs(self) -> list[str]:
        """Feature structs (beyond VkPhysicalDeviceFeatures) this device can be queried for: API version and
        extension allow them."""
        names = []
        for struct, (extension, minimum_api) in FEATURE_STRUCTS.items():
            if struct == "VkPhysicalDeviceFeatures":
                continue
            if self.api_version[:2] < minimum_api or (extension and extension not in self.extensions):
                continue
            names.append(struct)
        return names

    @property
    def features(self) -> dict[str, bool]:
        """Every named feature the device could report, True where supported (absent structs read False)."""
        if self._features is None:
            chain = StructChain("VkPhysicalDeviceFeatures2", *self.feature_structs())
            vk.lib.vkGetPhysicalDeviceFeatures2(self.handle, chain.head)
            features = {name: False for name in FEATURE_TO_STRUCT}
            for name, struct in FEATURE_TO_STRUCT.items():
                if struct == "VkPhysicalDeviceFeatures":
                    features[name] = bool(getattr(chain.head.features, name))
                elif struct in chain:
                    features[name] = bool(getattr(chain[struct], name))
            self._features = features
        return self._features

    # -- properties ------------------------------------------------------------------------------------------
    @property
    def extended_properties(self) -> StructChain:
        """VkPhysicalDeviceProperties2 with 1.1/1.2/1.3 properties, and coopmat KHR/NV2 and SM-builtins properties
        where listed."""
        if self._extended_properties is None:
            members = ["VkPhysicalDeviceVulkan11Properties", "VkPhysicalDeviceVulkan12Properties"]
            if self.api_version[:2] >= (1, 3):
                members.append("VkPhysicalDeviceVulkan13Properties")
            if side.KHR_COOPERATIVE_MATRIX_EXTENSION_NAME in self.extensions:
                members.append("VkPhysicalDeviceCooperativeMatrixPropertiesKHR")
            if side.NV_COOPERATIVE_MATRIX_2_EXTENSION_NAME in self.extensions:
                members.append("VkPhysicalDeviceCooperativeMatrix2PropertiesNV")
            if SM_BUILTINS_EXTENSION in self.extensions:
                members.append("VkPhysicalDeviceShaderSMBuiltinsPropertiesNV")
            chain = StructChain("VkPhysicalDeviceProperties2", *members)
            vk.lib.vkGetPhysicalDeviceProperties2(self.handle, chain.head)
            self._extended_properties = chain
        return self._extended_properties

    def subgroup_properties(self) -> dict:
        chain = self.extended_properties
        v11 = chain["VkPhysicalDeviceVulkan11Properties"]
        result = {"subgroupSize": int(v11.subgroupSize),
                  "subgroupSupportedStages": int(v11.subgroupSupportedStages),
                  "subgroupSupportedOperations": int(v11.subgroupSupportedOperations)}
        if "VkPhysicalDeviceVulkan13Properties" in chain:
            v13 = chain["VkPhysicalDeviceVulkan13Properties"]
            result.update(minSubgroupSize=int(v13.minSubgroupSize), maxSubgroupSize=int(v13.maxSubgroupSize),
                          maxComputeWorkgroupSubgroups=int(v13.maxComputeWorkgroupSubgroups),
                          requiredSubgroupSizeStages=int(v13.requiredSubgroupSizeStages))
        return result

    @property
    def queue_families(self):
        if self._queue_families is None:
            count = vk.ffi.new("uint32_t*")
            vk.lib.vkGetPhysicalDeviceQueueFamilyProperties(self.handle, count, vk.ffi.NULL)
            families = vk.ffi.new("VkQueueFamilyProperties[]", count[0])
            vk.lib.vkGetPhysicalDeviceQueueFamilyProperties(self.handle, count, families)
            self._queue_families = families
        return self._queue_families

    def compute_queue_family(self) -> int:
        """A compute-capable family, preferring one without graphics (a dedicated compute queue)."""
        candidates = [(bool(f.queueFlags & vk.VK_QUEUE_GRAPHICS_BIT), i) for i, f in enumerate(self.queue_families)
                      if f.queueFlags & vk.VK_QUEUE_COMPUTE_BIT]
        if not candidates:
            raise NoDeviceError(f"{self.name} has no compute queue")
        return min(candidates)[1]

    def cooperative_matrix_properties(self) -> list[dict]:
        """vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR (subgroup-scope shapes); [] without the extension."""
        if side.KHR_COOPERATIVE_MATRIX_EXTENSION_NAME not in self.extensions:
            return []
        name = "vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR"
        function = instance_function(self.instance.handle, name, "PFN_" + name)
        count = vk.ffi.new("uint32_t*")
        check(function(self.handle, count, vk.ffi.NULL), name)
        entries = vk.ffi.new("VkCooperativeMatrixPropertiesKHR[]", count[0])
        for entry in entries:  # the package would leave sType 0
            entry.sType = vk.VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_KHR
        result = function(self.handle, count, entries)
        if result not in (0, 5):
            check(result, name)
        fields = ["MSize", "NSize", "KSize", "AType", "BType", "CType", "ResultType", "saturatingAccumulation",
                  "scope"]
        return [{f: int(getattr(entries[i], f)) for f in fields} for i in range(count[0])]

    def flexible_dimensions_properties(self) -> list[dict]:
        """vkGetPhysicalDeviceCooperativeMatrixFlexibleDimensionsPropertiesNV; [] without VK_NV_cooperative_matrix2."""
        if side.NV_COOPERATIVE_MATRIX_2_EXTENSION_NAME not in self.extensions:
            return []
        return side.flexible_dimensions_properties(self.instance.proc_address, side.address_of(self.handle))

    def khr_shapes(self) -> tuple[ShapeEntry, ...]:
        """The KHR table as typed rows (:class:`vkcoop.vk.tables.ShapeEntry`)."""
        return tuple(ShapeEntry.from_khr(row) for row in self.cooperative_matrix_properties())

    def flexible_shapes(self) -> tuple[ShapeEntry, ...]:
        """The flexible-dimensions table as typed rows (granularities, ``flexible=True``)."""
        return tuple(ShapeEntry.from_flexible(row) for row in self.flexible_dimensions_properties())

    def cooperative_matrix2_properties(self) -> dict | None:
        chain = self.extended_properties
        if "VkPhysicalDeviceCooperativeMatrix2PropertiesNV" not in chain:
            return None
        struct = chain["VkPhysicalDeviceCooperativeMatrix2PropertiesNV"]
        return {f: int(getattr(struct, f)) for f in side.struct_fields("VkPhysicalDeviceCooperativeMatrix2PropertiesNV")}

    @property
    def timestamp_valid_bits(self) -> int:
        return int(self.queue_families[self.compute_queue_family()].timestampValidBits)

    @property
    def timestamp_period_ns(self) -> float:
        return float(self.limits.timestampPeriod)
