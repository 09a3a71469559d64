"""A JSON-able report of what a device offers for cooperative matrices (``vkcoop info`` prints it)."""
from __future__ import annotations

import vulkan as vk

from . import coopmat2_ffi as side
from .checks import flag
from .features import FEATURE_TO_STRUCT
from .instance import SM_BUILTINS_EXTENSION, Instance, PhysicalDevice, _string

COMPONENT_TYPE_NAMES = {
    0: "float16", 1: "float32", 2: "float64", 3: "sint8", 4: "sint16", 5: "sint32", 6: "sint64",
    7: "uint8", 8: "uint16", 9: "uint32", 10: "uint64",
    side.COMPONENT_TYPE_BFLOAT16_KHR: "bfloat16",
    side.COMPONENT_TYPE_SINT8_PACKED_NV: "sint8_packed", side.COMPONENT_TYPE_UINT8_PACKED_NV: "uint8_packed",
    side.COMPONENT_TYPE_FLOAT8_E4M3_EXT: "float8_e4m3", side.COMPONENT_TYPE_FLOAT8_E5M2_EXT: "float8_e5m2",
}
SCOPE_NAMES = {1: "device", 2: "workgroup", 3: "subgroup", 5: "queue_family"}

#: Extensions worth showing in a cooperative-matrix report.
RELEVANT_EXTENSIONS = (
    "VK_KHR_cooperative_matrix", "VK_NV_cooperative_matrix", "VK_NV_cooperative_matrix2",
    "VK_KHR_shader_bfloat16", "VK_EXT_shader_float8", "VK_NV_cooperative_vector",
    "VK_KHR_shader_float16_int8", "VK_KHR_16bit_storage", "VK_KHR_8bit_storage", "VK_KHR_vulkan_memory_model",
    "VK_KHR_buffer_device_address", "VK_EXT_subgroup_size_control", "VK_KHR_shader_integer_dot_product",
    "VK_KHR_maintenance4", "VK_KHR_push_descriptor", "VK_EXT_pipeline_creation_cache_control",
    "VK_EXT_pipeline_robustness",   # vkcoop.vk.robustness: whether the driver's per-load bounds tests can go
)

#: Core features relevant to compute samples.
RELEVANT_CORE_FEATURES = (
    "shaderFloat64", "shaderInt64", "shaderInt16", "shaderFloat16", "shaderInt8", "storageBuffer16BitAccess",
    "storageBuffer8BitAccess", "bufferDeviceAddress", "vulkanMemoryModel", "vulkanMemoryModelDeviceScope",
    "subgroupSizeControl", "computeFullSubgroups", "maintenance4", "synchronization2",
    "shaderSubgroupExtendedTypes", "shaderIntegerDotProduct", "robustBufferAccess", "pipelineRobustness",
)

_LIMITS = (
    "maxComputeSharedMemorySize", "maxComputeWorkGroupInvocations", "maxComputeWorkGroupSize",
    "maxComputeWorkGroupCount", "maxPushConstantsSize", "maxStorageBufferRange", "maxBoundDescriptorSets",
    "maxPerStageDescriptorStorageBuffers", "minStorageBufferOffsetAlignment", "maxMemoryAllocationCount",
    "timestampPeriod", "timestampComputeAndGraphics",
)


def sm_count(physical) -> int | None:
    """``shaderSMCount`` of VK_NV_shader_sm_builtins (a member of ``physical.extended_properties`` where the
    extension is listed), None where it is not (or the query fails: an unknown SM count only widens the split-K
    candidates and the key-split target)."""
    struct = "VkPhysicalDeviceShaderSMBuiltinsPropertiesNV"
    if SM_BUILTINS_EXTENSION not in getattr(physical, "extensions", {}):
        return None
    try:
        chain = physical.extended_properties
        return int(chain[struct].shaderSMCount) or None if struct in chain else None
    except Exception:  # noqa: BLE001 - see the docstring
        return None


def staging_bytes(physical) -> int:
    """Shared memory a workgroup's own arrays may fill: maxComputeSharedMemorySize less what the driver reserves
    for workgroup-scope matrices (cooperativeMatrixWorkgroupScopeReservedSharedMemory of VK_NV_cooperative_matrix2;
    the H100's driver adds up to 12 KB of its own even to a pipeline of subgroup-scope matrices,
    docs/attention.md experiment 28)."""
    props = physical.cooperative_matrix2_properties() or {}
    reserved = int(props.get("cooperativeMatrixWorkgroupScopeReservedSharedMemory", 0))
    return int(physical.limits.maxComputeSharedMemorySize) - reserved


def _limit_value(value):
    if isinstance(value, vk.ffi.CData):
        return [int(v) for v in value]
    return float(value) if isinstance(value, float) else int(value)


def _component(type_id: int) -> str:
    return COMPONENT_TYPE_NAMES.get(type_id, f"component_type_{type_id}")


def _describe_shape_entry(entry: dict) -> dict:
    described = dict(entry)
    for key in ("AType", "BType", "CType", "ResultType"):
        described[key] = _component(entry[key])
    described["saturatingAccumulation"] = bool(entry["saturatingAccumulation"])
    described["scope"] = SCOPE_NAMES.get(entry["scope"], str(entry["scope"]))
    return described


def device_report(physical: PhysicalDevice) -> dict:
    """Everything ``vkcoop info`` shows for one device, as plain JSON types."""
    chain = physical.extended_properties
    v11 = chain["VkPhysicalDeviceVulkan11Properties"]
    v12 = chain["VkPhysicalDeviceVulkan12Properties"]
    features = physical.features
    coopmat2_feature_names = [n for n, s in FEATURE_TO_STRUCT.items()
                              if s == "VkPhysicalDeviceCooperativeMatrix2FeaturesNV"]
    report = {
        "index": physical.index,
        "name": physical.name,
        "device_type": physical.device_type,
        "vendor_id": f"0x{physical.vendor_id:04x}",
        "device_id": f"0x{int(physical.properties.deviceID):04x}",
        "api_version": ".".join(map(str, physical.api_version)),
        "driver_version": physical.driver_version,
        "driver_name": _string(v12.driverName),
        "driver_info": _string(v12.driverInfo),
        "device_uuid": bytes(v11.deviceUUID).hex(),
        "pipeline_cache_uuid": bytes(physical.properties.pipelineCacheUUID).hex(),
        "extensions": {name: name in physical.extensions for name in RELEVANT_EXTENSIONS},
        "core_features": {name: features[name] for name in RELEVANT_CORE_FEATURES},
        "cooperative_matrix_khr": {
            "supported": side.KHR_COOPERATIVE_MATRIX_EXTENSION_NAME in physical.extensions,
            "features": {n: features[n] for n in ("cooperativeMatrix", "cooperativeMatrixRobustBufferAccess")},
            "supported_stages": (int(chain["VkPhysicalDeviceCooperativeMatrixPropertiesKHR"]
                                     .cooperativeMatrixSupportedStages)
                                 if "VkPhysicalDeviceCooperativeMatrixPropertiesKHR" in chain else 0),
            "properties": [_describe_shape_entry(e) for e in physical.cooperative_matrix_properties()],
        },
        "cooperative_matrix2": {
            "supported": side.NV_COOPERATIVE_MATRIX_2_EXTENSION_NAME in physical.extensions,
            "features": {n: features[n] for n in coopmat2_feature_names},
            "properties": physical.cooperative_matrix2_properties(),
            "flexible_dimensions": [_describe_shape_entry(e) for e in physical.flexible_dimensions_properties()],
        },
        "bfloat16": {
            "supported": side.KHR_SHADER_BFLOAT16_EXTENSION_NAME in physical.extensions,
            "features": {n: features[n] for n in ("shaderBFloat16Type", "shaderBFloat16DotProduct",
                                                   "shaderBFloat16CooperativeMatrix")},
        },
        "subgroup": physical.subgroup_properties(),
        "limits": {name: _limit_value(getattr(physical.limits, name)) for name in _LIMITS},
        "timestamp_valid_bits": physical.timestamp_valid_bits,
        "compute_queue_family": physical.compute_queue_family(),
        "sm_count": sm_count(physical),
    }
    return report


def capabilities(device: int | str | None = None, *, all_devices: bool = False, validate: bool = False) -> dict:
    """The report for the selected device (``device``/``$VKCOOP_DEVICE``), or for every device with
    ``all_devices=True``. With ``validate=True`` the collected validation messages are included."""
    all_devices = flag(all_devices, "all_devices")
    with Instance(validate=validate) as instance:
        if all_devices:
            result = {"devices": [device_report(p) for p in instance.physical_devices()]}
        else:
            result = device_report(instance.select(device))
        if validate:
            result["validation_messages"] = [str(m) for m in instance.messages]
        return result
