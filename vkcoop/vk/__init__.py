"""vkcoop.vk: a small Vulkan compute runtime on the ``vulkan`` (1.3.275.1) Python package.

What the package lacks for cooperative_matrix2 (VK_NV_cooperative_matrix2 structs and
vkGetPhysicalDeviceCooperativeMatrixFlexibleDimensionsPropertiesNV, VK_KHR_shader_bfloat16's feature struct) is
declared in a side cffi FFI (:mod:`vkcoop.vk.coopmat2_ffi`) and chained through ``pNext`` by address.

Quick start (every object is a context manager; closing the Device closes everything made through it)::

    import numpy as np, spirv_tools
    from vkcoop import vk

    with vk.Device(features=["cooperativeMatrixWorkgroupScope", "cooperativeMatrixTensorAddressing",
                             "shaderFloat16", "storageBuffer16BitAccess", "vulkanMemoryModel"],
                   validate=None) as device:          # None: $VKCOOP_VALIDATE; True: the layer; "gpu": GPU-AV too
        a = device.upload(np.ones((64, 64), np.float16), name="A")      # device-local, through staging
        out = device.empty((64, 64), np.float32, name="C")             # zero-filled; dtype may be "bf16"
        pipe = device.pipeline(spirv_tools.compile(path=...),            # bindings/spec ids from reflection
                               specialization={"M": 64, 1: -3, 2: 0.5, 3: True},  # by name or constant_id
                               required_subgroup_size=32, full_subgroups=True)   # needs those features enabled
        gpu_ns = device.run(pipe, [a, out], groups=(4, 4), push=(64, np.uint64(a.device_address)))
        result = out.read()                                              # numpy array (64, 64) float32
        device.check_validation()                                        # raises ValidationError on messages

Public API
----------
Device(device=None, *, extensions=(), features=(), validate=None, instance=None, pipeline_cache=True,
       fence_timeout_s=60.0)
    ``device``: index, name substring or None (``$VKCOOP_DEVICE``, else first discrete GPU). ``features`` are
    vk.xml member names of VkPhysicalDeviceFeatures / Vulkan11/12/13Features / CooperativeMatrixFeaturesKHR
    ("cooperativeMatrix") / CooperativeMatrix2FeaturesNV ("cooperativeMatrixWorkgroupScope", ...,
    "cooperativeMatrixBlockLoads") / ShaderBfloat16FeaturesKHR ("shaderBFloat16CooperativeMatrix", ...).
    The owning extension (and its dependencies) is enabled automatically; nothing else is.
    Missing anything -> MissingFeatureError (``.missing_extensions``, ``.missing_features``), before creation.
    Attributes: physical (PhysicalDevice), instance, enabled_extensions, enabled_features, validation_messages,
    pipeline_cache_path. Methods: upload(array, name=), empty(shape, dtype, name=), pipeline(spirv, **options),
    command_buffer(timestamps=False, max_dispatches=64), run(pipeline, buffers, groups, push=None) -> GPU ns,
    check_validation(), save_pipeline_cache(), wait_idle(), close().

Lifetime: the Device holds every Buffer/ComputePipeline/CommandBuffer made through it until that object is
    closed (``with`` or ``.close()``) or the Device closes; close big per-case buffers yourself to free memory early.

Buffer (from Device.upload / Device.empty)
    shape, dtype, nbytes, name; write(array) (exact dtype and shape, else BufferDTypeError/BufferShapeError);
    read() -> new numpy array; fill_zero(); device_address (needs feature "bufferDeviceAddress"); close().

ComputePipeline (Device.pipeline(spirv, ...))
    The module is checked before the driver sees it (vkcoop.vk.interface): spirv_tools.reflect must parse it
    (PipelineInputError for truncated or corrupted modules), spirv-val must accept it where a toolchain exists
    (validate_spirv=None; True requires it, False skips it), entry_point= must be one of its compute entry points.
    specialization={constant_id or name: value}: typed by reflection (bool/int32/uint32/float32/16/64-bit types;
    type, range and representability checked). bindings=: None (reflection), or a count, a list of binding
    numbers or {binding: "storage"|"uniform"} that must describe the shader's bindings (set 0 only).
    push_constant_size=: default = the shader's push block rounded up to 4 bytes; smaller than the block is an
    error. push_block_size: bytes every dispatch must push. local_size=: overrides reflection (used for the limit
    check). required_subgroup_size=, full_subgroups=: need features "subgroupSizeControl" /
    "computeFullSubgroups". The workgroup size is checked against maxComputeWorkGroupSize/Invocations (LimitError)
    before creation. Created through the device's on-disk VkPipelineCache (a checked entry: length, SHA-256 and
    the driver's VkPipelineCacheHeaderVersionOne compared with the device; a bad one is logged, dropped, rebuilt).

CommandBuffer (Device.command_buffer(timestamps=True))
    ``with cb.recording(): cb.dispatch(pipeline, buffers, groups, push=None, label=None)`` (buffers: list in
    binding order or {binding: Buffer}; groups: 1 to 3 integers, numpy integers too; push: at least the shader's
    push block); barriers between dispatches are automatic. cb.submit(wait=True, timeout_s=None) may be called
    any number of times; cb.wait(timeout_s) (0 polls; timeouts are finite seconds, checked before submission);
    cb.dispatch_times_ns() -> [ns per dispatch of the last submission]; total_time_ns(). FenceTimeoutError /
    DeviceLostError on timeout / loss.

pack_push_constants(*scalars) -> bytes (natural alignment; np.uint64 for device addresses).
capabilities(device=None, all_devices=False, validate=False) -> JSON-able dict (``vkcoop info``).
sm_count(physical) -> the SM count (VK_NV_shader_sm_builtins), or None.
staging_bytes(physical) -> shared memory a workgroup's own arrays may fill (the limit less the coopmat2 reserve).
Instance(validate=False): physical_devices(), select(device), messages, take_messages(); ``validate``: False, True
    (VK_LAYER_KHRONOS_validation) or "gpu" (GPU-assisted validation as well: every buffer access is bounds-checked
    on the GPU, vkcoop.vk.validation); its VkInstance comes from a
    per-process pool (the NVIDIA driver refuses a 31st vkCreateInstance per process): release_pooled_instances().
PhysicalDevice: name, api_version, driver_version, extensions, features (name -> bool), limits,
    cooperative_matrix_properties(), flexible_dimensions_properties() (dicts as the driver fills them),
    khr_shapes(), flexible_shapes() (the same as typed ShapeEntry rows), cooperative_matrix2_properties(),
    subgroup_properties(), timestamp_valid_bits, timestamp_period_ns.
Errors (all VulkanError, itself a vkcoop.Error): NoDeviceError, LayerNotFoundError, MissingFeatureError,
    FenceTimeoutError, DeviceLostError, ValidationError (.messages); for bad arguments VulkanInputError (a
    ValueError): LimitError, BufferShapeError, PipelineInputError; for wrong types VulkanTypeError (a TypeError):
    BufferDTypeError. Device(1.5), Device(validate='no'), Device(fence_timeout_s=nan) name their parameter.
Validation on the GPU host: the toolchain's layer manifest names its library without a path; see
    docs/runtime.md ("Validation") for the two-line fix until scripts/gpu_env.sh does it.
Environment: VKCOOP_DEVICE (device index or name), VKCOOP_VALIDATE=1 or gpu (validation when validate=None),
    VKCOOP_CACHE_DIR (pipeline cache location, via vkcoop.paths.cache_root()).
"""
from .capabilities import capabilities, device_report, sm_count, staging_bytes
from .commands import CommandBuffer
from .device import Device
from .errors import (BufferDTypeError, BufferShapeError, DeviceLostError, FenceTimeoutError, LayerNotFoundError,
                     LimitError, MissingFeatureError, NoDeviceError, PipelineInputError, ValidationError,
                     VulkanError, VulkanInputError, VulkanTypeError)
from .features import COOPMAT2_FEATURES, FEATURE_TO_STRUCT
from . import validation
from .instance import Instance, PhysicalDevice, ValidationMessage, release_pooled_instances
from .memory import Buffer, as_dtype
from .packing import pack_push_constants
from .pipeline import ComputePipeline, create_concurrently
from .tables import SCOPE_SUBGROUP, SCOPE_WORKGROUP, ShapeEntry

__all__ = [
    "release_pooled_instances", "validation",
    "ShapeEntry", "SCOPE_SUBGROUP", "SCOPE_WORKGROUP",
    "Device", "Instance", "PhysicalDevice", "Buffer", "ComputePipeline", "create_concurrently", "CommandBuffer", "ValidationMessage",
    "capabilities", "device_report", "sm_count", "staging_bytes", "pack_push_constants", "as_dtype", "COOPMAT2_FEATURES",
    "FEATURE_TO_STRUCT",
    "VulkanError", "NoDeviceError", "LayerNotFoundError", "MissingFeatureError", "FenceTimeoutError",
    "DeviceLostError", "ValidationError", "LimitError", "BufferDTypeError", "BufferShapeError", "PipelineInputError",
    "VulkanInputError", "VulkanTypeError",
]
