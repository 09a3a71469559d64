"""Structs and a command that the ``vulkan==1.3.275.1`` package predates, declared in a side cffi FFI.

Layouts follow vk.xml (KhronosGroup/Vulkan-Headers, registry/vk.xml):

* ``VK_NV_cooperative_matrix2`` (extension 594): ``VkPhysicalDeviceCooperativeMatrix2FeaturesNV``,
  ``VkCooperativeMatrixFlexibleDimensionsPropertiesNV``, ``VkPhysicalDeviceCooperativeMatrix2PropertiesNV`` and
  ``vkGetPhysicalDeviceCooperativeMatrixFlexibleDimensionsPropertiesNV``.
* ``VK_KHR_shader_bfloat16`` (extension 142): ``VkPhysicalDeviceShaderBfloat16FeaturesKHR``.

The structs live in memory owned by this FFI; they reach the driver through ``pNext`` chains of the ``vulkan``
package's structs *by address* (:func:`address_of`). Whoever builds such a chain must keep every struct in it
alive until the Vulkan call returns (see ``vkcoop.vk.chain.StructChain``).
"""
from __future__ import annotations

import cffi

#: sType values: 1000000000 + (extension_number - 1) * 1000 + offset (Vulkan spec, "Extending Enumerations").
STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_2_FEATURES_NV = 1000593000
STRUCTURE_TYPE_COOPERATIVE_MATRIX_FLEXIBLE_DIMENSIONS_PROPERTIES_NV = 1000593001
STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_2_PROPERTIES_NV = 1000593002
STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_BFLOAT16_FEATURES_KHR = 1000141000

#: VkComponentTypeKHR values added after 1.3.275 (bf16 by VK_KHR_shader_bfloat16; fp8 by VK_EXT_shader_float8).
COMPONENT_TYPE_BFLOAT16_KHR = 1000141000
COMPONENT_TYPE_SINT8_PACKED_NV = 1000491000
COMPONENT_TYPE_UINT8_PACKED_NV = 1000491001
COMPONENT_TYPE_FLOAT8_E4M3_EXT = 1000491002
COMPONENT_TYPE_FLOAT8_E5M2_EXT = 1000491003

NV_COOPERATIVE_MATRIX_2_EXTENSION_NAME = "VK_NV_cooperative_matrix2"
KHR_COOPERATIVE_MATRIX_EXTENSION_NAME = "VK_KHR_cooperative_matrix"
KHR_SHADER_BFLOAT16_EXTENSION_NAME = "VK_KHR_shader_bfloat16"

ffi = cffi.FFI()
# Enums are 32-bit ints in the C ABI of every Vulkan platform; VkBool32 is uint32_t; handles are pointers.
ffi.cdef("""
typedef uint32_t VkBool32;
typedef int32_t VkStructureType;
typedef int32_t VkComponentTypeKHR;
typedef int32_t VkScopeKHR;
typedef int32_t VkResult;
typedef void* VkPhysicalDevice;

typedef struct VkPhysicalDeviceCooperativeMatrix2FeaturesNV {
    VkStructureType sType;
    void* pNext;
    VkBool32 cooperativeMatrixWorkgroupScope;
    VkBool32 cooperativeMatrixFlexibleDimensions;
    VkBool32 cooperativeMatrixReductions;
    VkBool32 cooperativeMatrixConversions;
    VkBool32 cooperativeMatrixPerElementOperations;
    VkBool32 cooperativeMatrixTensorAddressing;
    VkBool32 cooperativeMatrixBlockLoads;
} VkPhysicalDeviceCooperativeMatrix2FeaturesNV;

typedef struct VkCooperativeMatrixFlexibleDimensionsPropertiesNV {
    VkStructureType sType;
    void* pNext;
    uint32_t MGranularity;
    uint32_t NGranularity;
    uint32_t KGranularity;
    VkComponentTypeKHR AType;
    VkComponentTypeKHR BType;
    VkComponentTypeKHR CType;
    VkComponentTypeKHR ResultType;
    VkBool32 saturatingAccumulation;
    VkScopeKHR scope;
    uint32_t workgroupInvocations;
} VkCooperativeMatrixFlexibleDimensionsPropertiesNV;

typedef struct VkPhysicalDeviceCooperativeMatrix2PropertiesNV {
    VkStructureType sType;
    void* pNext;
    uint32_t cooperativeMatrixWorkgroupScopeMaxWorkgroupSize;
    uint32_t cooperativeMatrixFlexibleDimensionsMaxDimension;
    uint32_t cooperativeMatrixWorkgroupScopeReservedSharedMemory;
} VkPhysicalDeviceCooperativeMatrix2PropertiesNV;

typedef struct VkPhysicalDeviceShaderBfloat16FeaturesKHR {
    VkStructureType sType;
    void* pNext;
    VkBool32 shaderBFloat16Type;
    VkBool32 shaderBFloat16DotProduct;
    VkBool32 shaderBFloat16CooperativeMatrix;
} VkPhysicalDeviceShaderBfloat16FeaturesKHR;

typedef VkResult (*PFN_vkGetPhysicalDeviceCooperativeMatrixFlexibleDimensionsPropertiesNV)(
    VkPhysicalDevice physicalDevice, uint32_t* pPropertyCount,
    VkCooperativeMatrixFlexibleDimensionsPropertiesNV* pProperties);
""")

#: Side-FFI feature structs: struct name -> (sType, extension that provides it).
FEATURE_STRUCTS = {
    "VkPhysicalDeviceCooperativeMatrix2FeaturesNV": (
        STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_2_FEATURES_NV, NV_COOPERATIVE_MATRIX_2_EXTENSION_NAME),
    "VkPhysicalDeviceShaderBfloat16FeaturesKHR": (
        STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_BFLOAT16_FEATURES_KHR, KHR_SHADER_BFLOAT16_EXTENSION_NAME),
}


def address_of(cdata) -> int:
    """The integer address of a cdata pointer from *any* cffi FFI (this one or the ``vulkan`` package's)."""
    return int(ffi.cast("uintptr_t", cdata))


def struct_fields(name: str) -> list[str]:
    """Member names after sType/pNext, in declaration order."""
    return [field for field, _ in ffi.typeof(name).fields if field not in ("sType", "pNext")]


def flexible_dimensions_properties(get_instance_proc_address, physical_device_address: int) -> list[dict]:
    """Enumerate ``vkGetPhysicalDeviceCooperativeMatrixFlexibleDimensionsPropertiesNV`` (two-call idiom).

    ``get_instance_proc_address`` returns the function's address (an int, 0 when absent). The caller must have
    checked that the device lists VK_NV_cooperative_matrix2 first.
    """
    from .errors import VulkanError, result_name

    name = "vkGetPhysicalDeviceCooperativeMatrixFlexibleDimensionsPropertiesNV"
    function_address = get_instance_proc_address(name)
    if not function_address:
        raise VulkanError(f"{name} is not exported although {NV_COOPERATIVE_MATRIX_2_EXTENSION_NAME} is listed")
    function = ffi.cast("PFN_" + name, function_address)
    device = ffi.cast("VkPhysicalDevice", physical_device_address)
    count = ffi.new("uint32_t*")
    result = function(device, count, ffi.NULL)
    if result != 0:
        raise VulkanError(f"{name} (count) returned {result_name(result)}")
    properties = ffi.new("VkCooperativeMatrixFlexibleDimensionsPropertiesNV[]", count[0])
    for entry in properties:  # every output struct needs its sType (spec: VUID-...-sType-sType)
        entry.sType = STRUCTURE_TYPE_COOPERATIVE_MATRIX_FLEXIBLE_DIMENSIONS_PROPERTIES_NV
    result = function(device, count, properties)
    if result not in (0, 5):  # VK_SUCCESS, VK_INCOMPLETE
        raise VulkanError(f"{name} returned {result_name(result)}")
    return [{field: int(getattr(properties[i], field)) for field in struct_fields(
        "VkCooperativeMatrixFlexibleDimensionsPropertiesNV")} for i in range(count[0])]
