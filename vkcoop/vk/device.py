"""The logical device: enables exactly the declared extensions and features, owns the queue, the command pool,
the on-disk pipeline cache and every object created through it (closed deterministically in reverse order)."""
from __future__ import annotations

import re
import struct
from pathlib import Path

import numpy as np
import vulkan as vk
from spirv_tools.cache import drop_entry, read_entry, write_entry

from .. import paths
from . import checks
from . import features as feature_registry
from . import robustness
from . import validation
from .chain import StructChain
from .commands import CommandBuffer, memory_barrier
from .errors import MissingFeatureError, ValidationError, VulkanError, VulkanTypeError, check
from .instance import Instance, PhysicalDevice
from .memory import (MEMORY_ALLOCATE_DEVICE_ADDRESS, Buffer, MappedStaging, as_dtype)
from .pipeline import ComputePipeline
from .resource import Resource

DEFAULT_FENCE_TIMEOUT_S = 60.0
VALIDATE_ENV = validation.ENV
# VkPipelineCacheHeaderVersionOne: headerSize, headerVersion, vendorID, deviceID, pipelineCacheUUID[16].
_CACHE_HEADER = struct.Struct("<IIII16s")


class Device(Resource):
    """A VkDevice on one physical device with one compute queue.

    ``device``: index, name substring, or None (``$VKCOOP_DEVICE``, else the first discrete GPU).
    ``extensions``: device extensions to enable; ``features``: feature names (vk.xml members of
    VkPhysicalDeviceFeatures, Vulkan11/12/13Features, CooperativeMatrixFeaturesKHR, CooperativeMatrix2FeaturesNV,
    ShaderBfloat16FeaturesKHR). The extension a feature belongs to is enabled with it. Anything missing raises one
    :class:`MissingFeatureError` naming all of it, before a device is created.
    ``validate``: False, True (VK_LAYER_KHRONOS_validation) or ``"gpu"`` (GPU-assisted validation as well,
    :mod:`vkcoop.vk.validation`); None: ``$VKCOOP_VALIDATE`` (1 or gpu); messages land in
    :attr:`validation_messages`. Ignored where ``instance`` is given: the instance's mode holds. ``pipeline_cache``: True (under ``vkcoop.paths.cache_root()``), False, or a
    directory. ``buffer_robustness``: ``"default"`` or ``"disabled"`` (None: ``$VKCOOP_BUFFER_ROBUSTNESS``, else
    ``"disabled"``): how every pipeline of this device guards its buffer accesses (:mod:`vkcoop.vk.robustness`); the
    effective choice is :attr:`buffer_robustness`, and :attr:`buffer_robustness_note` says why where it differs.
    """

    def __init__(self, device: int | str | None = None, *, extensions=(), features=(), validate: bool | None = None,
                 instance: Instance | None = None, pipeline_cache: bool | str | Path = True,
                 fence_timeout_s: float = DEFAULT_FENCE_TIMEOUT_S, buffer_robustness: str | None = None):
        self.handle = None
        self.pipeline_cache_handle = None
        # Strong references: a child the caller dropped without close() still holds Vulkan objects that must be
        # destroyed before the device (VUID-vkDestroyDevice-device-00378). Closing a child untracks it.
        self._children: dict[int, object] = {}
        self._owns_instance = instance is None
        self._lost = False
        self._check_arguments(device, extensions, features, instance, pipeline_cache)
        self.fence_timeout_s = checks.timeout_seconds(fence_timeout_s, "fence_timeout_s")
        wanted_robustness = robustness.requested(buffer_robustness)   # a bad value fails before any Vulkan object
        validate = validation.mode_of(validate, allow_none=True)
        self.instance = instance or Instance(validate=validation.env_mode() if validate is None else validate)
        try:
            self.physical: PhysicalDevice = self.instance.select(device)
            self.buffer_robustness, self.buffer_robustness_note, extra = robustness.resolve(
                wanted_robustness, self.physical.features)
            self.enabled_extensions, self.enabled_features = self._resolve_requirements(
                extensions, list(features) + extra)
            self._create_device()
            self._setup_pipeline_cache(pipeline_cache)
        except BaseException:
            self.close()
            raise

    # -- creation --------------------------------------------------------------------------------------------
    @staticmethod
    def _check_arguments(device, extensions, features, instance, pipeline_cache):
        checks.device_selector(device)
        checks.name_list(extensions, "extensions")
        checks.name_list(features, "features")
        if instance is not None and not isinstance(instance, Instance):
            raise VulkanTypeError(f"instance must be a vkcoop Instance or None, got {type(instance).__name__}")
        checks.path_or_flag(pipeline_cache, "pipeline_cache")

    def _resolve_requirements(self, extensions, features):
        physical = self.physical
        if physical.api_version[:2] < (1, 3):
            raise MissingFeatureError(physical.name, missing_features=["Vulkan 1.3"],
                                      reason=f"the device reports API {'.'.join(map(str, physical.api_version))}")
        feature_names = list(dict.fromkeys(features))
        for name in feature_names:
            feature_registry.struct_of(name)  # unknown names are a caller bug: ValueError naming it
        implied = [feature_registry.extension_of(name) for name in feature_names]
        wanted_extensions = feature_registry.with_dependencies(
            list(extensions) + [e for e in implied if e is not None])
        missing_extensions = [e for e in wanted_extensions if e not in physical.extensions]
        supported = physical.features
        missing_features = [name for name in feature_names if not supported.get(name)]
        if missing_extensions or missing_features:
            raise MissingFeatureError(physical.name, missing_extensions, missing_features)
        return wanted_extensions, {name: True for name in feature_names}

    def _create_device(self):
        physical = self.physical
        structs = []
        for name in self.enabled_features:
            struct = feature_registry.struct_of(name)
            if struct != "VkPhysicalDeviceFeatures" and struct not in structs:
                structs.append(struct)
        chain = StructChain("VkPhysicalDeviceFeatures2", *structs)
        for name in self.enabled_features:
            struct = feature_registry.struct_of(name)
            target = chain.head.features if struct == "VkPhysicalDeviceFeatures" else chain[struct]
            setattr(target, name, 1)
        self.queue_family = physical.compute_queue_family()
        priorities = vk.ffi.new("float[]", [1.0])
        queue_info = vk.ffi.new("VkDeviceQueueCreateInfo*", {
            "sType": vk.VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO, "queueFamilyIndex": self.queue_family,
            "queueCount": 1, "pQueuePriorities": priorities})
        names = [vk.ffi.new("char[]", e.encode()) for e in self.enabled_extensions]
        name_array = vk.ffi.new("char*[]", names)
        create_info = vk.ffi.new("VkDeviceCreateInfo*", {
            "sType": vk.VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO, "pNext": chain.head,
            "queueCreateInfoCount": 1, "pQueueCreateInfos": queue_info,
            "enabledExtensionCount": len(names), "ppEnabledExtensionNames": name_array})
        handle = vk.ffi.new("VkDevice*")
        check(vk.lib.vkCreateDevice(physical.handle, create_info, vk.ffi.NULL, handle), "vkCreateDevice")
        self.handle = handle[0]
        queue = vk.ffi.new("VkQueue*")
        vk.lib.vkGetDeviceQueue(self.handle, self.queue_family, 0, queue)
        self.queue = queue[0]
        pool_info = vk.ffi.new("VkCommandPoolCreateInfo*", {
            "sType": vk.VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO, "queueFamilyIndex": self.queue_family,
            "flags": vk.VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT})
        pool = vk.ffi.new("VkCommandPool*")
        check(vk.lib.vkCreateCommandPool(self.handle, pool_info, vk.ffi.NULL, pool), "vkCreateCommandPool")
        self._command_pool = pool[0]
        memory = vk.ffi.new("VkPhysicalDeviceMemoryProperties*")
        vk.lib.vkGetPhysicalDeviceMemoryProperties(physical.handle, memory)
        self._memory_properties = memory

    # -- pipeline cache --------------------------------------------------------------------------------------
    def _setup_pipeline_cache(self, setting):
        self.pipeline_cache_handle = vk.ffi.NULL
        self.pipeline_cache_path = None
        self._pipeline_cache_dirty = False
        if setting is False:
            return
        directory = paths.cache_root() / "pipelines" if setting is True else Path(setting)
        properties = self.physical.properties
        device_name = re.sub(r"[^A-Za-z0-9]+", "-", self.physical.name).strip("-")[:48]
        # pipelineCacheUUID changes whenever the driver's cache format or compiler does; the driver version and
        # device ids keep caches of different GPUs/drivers apart as well. ".pcache": a checked entry (length and
        # SHA-256 ahead of the driver's data, spirv_tools.cache), not the bare driver blob of earlier ".bin" files.
        key = (f"{int(properties.vendorID):04x}-{int(properties.deviceID):04x}-{device_name}-"
               f"{int(properties.driverVersion):08x}-{bytes(properties.pipelineCacheUUID).hex()}")
        self.pipeline_cache_path = directory / f"{key}.pcache"
        initial = read_entry(self.pipeline_cache_path, check=self._pipeline_cache_header_problem) or b""
        self.pipeline_cache_handle = self._create_pipeline_cache(initial)
        if self.pipeline_cache_handle is None:  # the driver refused the data anyway: start empty
            drop_entry(self.pipeline_cache_path, "the driver refused its data")
            self.pipeline_cache_handle = self._create_pipeline_cache(b"")

    def _pipeline_cache_header_problem(self, data: bytes) -> str | None:
        """Check VkPipelineCacheHeaderVersionOne (Vulkan spec 10.7.4 "Pipeline Cache Header") against this
        device before the driver sees the data: size, version, vendorID, deviceID and pipelineCacheUUID."""
        if len(data) < _CACHE_HEADER.size:
            return f"{len(data)} bytes, shorter than a pipeline cache header"
        header_size, version, vendor, device, uuid = _CACHE_HEADER.unpack_from(data)
        properties = self.physical.properties
        expected = (1, int(properties.vendorID), int(properties.deviceID), bytes(properties.pipelineCacheUUID))
        if header_size < _CACHE_HEADER.size or header_size > len(data):
            return f"header size {header_size} does not fit {len(data)} bytes"
        if (version, vendor, device, uuid) != expected:
            return (f"header (version {version}, vendor 0x{vendor:x}, device 0x{device:x}, UUID {uuid.hex()}) "
                    f"is not this device's")
        return None

    def _create_pipeline_cache(self, initial: bytes):
        data = vk.ffi.new("char[]", initial) if initial else vk.ffi.NULL
        info = vk.ffi.new("VkPipelineCacheCreateInfo*", {
            "sType": vk.VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO, "initialDataSize": len(initial),
            "pInitialData": data})
        cache = vk.ffi.new("VkPipelineCache*")
        result = vk.lib.vkCreatePipelineCache(self.handle, info, vk.ffi.NULL, cache)
        if result != 0 and initial:
            return None
        check(result, "vkCreatePipelineCache")
        return cache[0]

    def mark_pipeline_cache_dirty(self) -> None:
        """A pipeline was created through the cache: close() (or save_pipeline_cache()) writes it back."""
        self._pipeline_cache_dirty = True

    def save_pipeline_cache(self) -> Path | None:
        """Write the pipeline cache to disk (atomically, as a checked entry); done automatically by close()."""
        if self.handle is None or self.pipeline_cache_path is None or not self._pipeline_cache_dirty:
            return None
        size = vk.ffi.new("size_t*")
        check(vk.lib.vkGetPipelineCacheData(self.handle, self.pipeline_cache_handle, size, vk.ffi.NULL),
              "vkGetPipelineCacheData")
        data = vk.ffi.new("char[]", size[0])
        result = vk.lib.vkGetPipelineCacheData(self.handle, self.pipeline_cache_handle, size, data)
        if result not in (0, 5):
            check(result, "vkGetPipelineCacheData")
        if not write_entry(self.pipeline_cache_path, bytes(vk.ffi.buffer(data, size[0]))):
            return None  # a read-only cache directory must not break a run
        self._pipeline_cache_dirty = False
        return self.pipeline_cache_path

    # -- memory ----------------------------------------------------------------------------------------------
    def _memory_type(self, type_bits: int, preferred: int, required: int) -> int:
        memory = self._memory_properties
        candidates = [i for i in range(memory.memoryTypeCount) if type_bits & (1 << i)]
        for wanted in (preferred, required):
            for i in candidates:
                if memory.memoryTypes[i].propertyFlags & wanted == wanted:
                    return i
        raise VulkanError(f"{self.physical.name}: no memory type with flags 0x{required:x} in bits 0x{type_bits:x}")

    def _create_buffer_and_memory(self, size: int, usage: int, preferred: int, *, required: int = 0,
                                  device_address: bool = False):
        info = vk.ffi.new("VkBufferCreateInfo*", {
            "sType": vk.VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, "size": size, "usage": usage,
            "sharingMode": vk.VK_SHARING_MODE_EXCLUSIVE})
        buffer = vk.ffi.new("VkBuffer*")
        check(vk.lib.vkCreateBuffer(self.handle, info, vk.ffi.NULL, buffer), "vkCreateBuffer")
        requirements = vk.ffi.new("VkMemoryRequirements*")
        vk.lib.vkGetBufferMemoryRequirements(self.handle, buffer[0], requirements)
        flags_info = vk.ffi.NULL
        if device_address:
            flags_info = vk.ffi.new("VkMemoryAllocateFlagsInfo*", {
                "sType": vk.VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_FLAGS_INFO, "flags": MEMORY_ALLOCATE_DEVICE_ADDRESS})
        allocate_info = vk.ffi.new("VkMemoryAllocateInfo*", {
            "sType": vk.VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, "pNext": flags_info,
            "allocationSize": requirements.size,
            "memoryTypeIndex": self._memory_type(requirements.memoryTypeBits, preferred, required)})
        memory = vk.ffi.new("VkDeviceMemory*")
        result = vk.lib.vkAllocateMemory(self.handle, allocate_info, vk.ffi.NULL, memory)
        if result != 0:
            vk.lib.vkDestroyBuffer(self.handle, buffer[0], vk.ffi.NULL)
            check(result, f"vkAllocateMemory ({size} bytes)")
        check(vk.lib.vkBindBufferMemory(self.handle, buffer[0], memory[0], 0), "vkBindBufferMemory")
        return buffer[0], memory[0]

    def _one_time_commands(self, record):
        """Record with ``record(command_buffer_handle)``, submit, wait (for uploads/readbacks)."""
        with CommandBuffer(self, name="transfer") as commands:
            commands.begin()
            record(commands.handle)
            commands.end()
            commands.submit()

    def _upload_bytes(self, buffer: Buffer, data: np.ndarray):
        staging = MappedStaging(self, buffer.size, for_readback=False)
        try:
            staging.view[:data.size] = data
            region = vk.ffi.new("VkBufferCopy*", {"srcOffset": 0, "dstOffset": 0, "size": buffer.size})
            self._one_time_commands(lambda cb: vk.lib.vkCmdCopyBuffer(cb, staging.handle, buffer.handle, 1, region))
        finally:
            staging.close()

    def _download_bytes(self, buffer: Buffer) -> np.ndarray:
        staging = MappedStaging(self, buffer.size, for_readback=True)
        try:
            region = vk.ffi.new("VkBufferCopy*", {"srcOffset": 0, "dstOffset": 0, "size": buffer.size})

            def record(cb):
                vk.lib.vkCmdCopyBuffer(cb, buffer.handle, staging.handle, 1, region)
                # Make the copy visible to the host before the fence signals (Vulkan spec 7.9, host access).
                memory_barrier(cb, vk.VK_PIPELINE_STAGE_TRANSFER_BIT, vk.VK_PIPELINE_STAGE_HOST_BIT,
                               vk.VK_ACCESS_TRANSFER_WRITE_BIT, vk.VK_ACCESS_HOST_READ_BIT)
            self._one_time_commands(record)
            return staging.view[:buffer.nbytes].copy()
        finally:
            staging.close()

    def _fill_zero(self, buffer: Buffer):
        self._one_time_commands(lambda cb: vk.lib.vkCmdFillBuffer(cb, buffer.handle, 0, buffer.size, 0))

    # -- public factories ------------------------------------------------------------------------------------
    def upload(self, array: np.ndarray, *, name: str = "buffer") -> Buffer:
        """A device-local buffer holding a copy of ``array`` (its shape and dtype are remembered)."""
        if not isinstance(array, np.ndarray):
            raise VulkanTypeError(f"upload({name}): array must be a numpy array, got {type(array).__name__}")
        buffer = Buffer(self, array.shape, array.dtype, name=name)
        buffer.write(array)
        return buffer

    def empty(self, shape, dtype, *, name: str = "buffer") -> Buffer:
        """A zero-filled device-local buffer for ``shape`` elements of ``dtype`` (numpy dtype or "bf16", ...)."""
        buffer = Buffer(self, shape, as_dtype(dtype), name=name)
        buffer.fill_zero()
        return buffer

    def pipeline(self, spirv: bytes, **options) -> ComputePipeline:
        """A compute pipeline; see :class:`ComputePipeline` for the options."""
        return ComputePipeline(self, spirv, **options)

    def command_buffer(self, *, timestamps: bool = False, max_dispatches: int = 64,
                       name: str = "commands") -> CommandBuffer:
        return CommandBuffer(self, timestamps=timestamps, max_dispatches=max_dispatches, name=name)

    def run(self, pipeline: ComputePipeline, buffers, groups, push=None, *, timeout_s: float | None = None) -> float:
        """Record, submit and wait for one dispatch; returns its GPU time in nanoseconds. Every argument is
        checked (against the pipeline's reflected interface) before anything is recorded or submitted."""
        if timeout_s is not None:
            checks.timeout_seconds(timeout_s, "timeout_s", allow_zero=True)
        if not isinstance(pipeline, ComputePipeline):
            raise VulkanTypeError(f"pipeline must be a ComputePipeline, got {type(pipeline).__name__}")
        with self.command_buffer(timestamps=True, max_dispatches=1, name=pipeline.name) as commands:
            with commands.recording():
                commands.dispatch(pipeline, buffers, groups, push)
            commands.submit(timeout_s=timeout_s)
            return commands.dispatch_times_ns()[0]

    # -- validation ------------------------------------------------------------------------------------------
    @property
    def validation_messages(self):
        return list(self.instance.messages)

    def check_validation(self):
        """Raise ValidationError if the validation layer reported anything (and clear the messages)."""
        messages = self.instance.take_messages()
        if messages:
            raise ValidationError(messages)

    # -- lifetime --------------------------------------------------------------------------------------------
    def require_open(self):
        if self.handle is None:
            raise VulkanError("the device is closed")

    def _track(self, child):
        self.require_open()
        self._children[id(child)] = child

    def _untrack(self, child):
        self._children.pop(id(child), None)

    def wait_idle(self):
        if self.handle is not None:
            check(vk.lib.vkDeviceWaitIdle(self.handle), "vkDeviceWaitIdle")

    def close(self):
        """Wait for the GPU, close every object made through this device (newest first), save the pipeline
        cache, destroy the device and (if this Device created it) the instance."""
        if self.handle is not None:
            if not self._lost:
                vk.lib.vkDeviceWaitIdle(self.handle)
            for child in reversed(list(self._children.values())):
                child.close()
            self._children = {}
            if self.pipeline_cache_handle not in (None, vk.ffi.NULL):
                self.save_pipeline_cache()
                vk.lib.vkDestroyPipelineCache(self.handle, self.pipeline_cache_handle, vk.ffi.NULL)
                self.pipeline_cache_handle = None
            vk.lib.vkDestroyCommandPool(self.handle, self._command_pool, vk.ffi.NULL)
            vk.lib.vkDestroyDevice(self.handle, vk.ffi.NULL)
            self.handle = None
        if self._owns_instance and getattr(self, "instance", None) is not None:
            self.instance.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def __repr__(self):
        state = "closed" if self.handle is None else "open"
        return f"<Device {self.physical.name if hasattr(self, 'physical') else '?'} ({state})>"
