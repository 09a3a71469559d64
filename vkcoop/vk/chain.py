"""pNext chains that mix the ``vulkan`` package's structs with the side FFI's, linked by address.

Each struct is allocated by its own FFI and owned by the chain; the chain must outlive every Vulkan call that
reads or writes through it (the caller keeps the ``StructChain`` object referenced until then).
"""
from __future__ import annotations

import vulkan as vk

from . import coopmat2_ffi as side

# sType values of the core structs used here (Vulkan 1.3 core, vk.xml). Named so the chain code reads clearly.
STYPE = {
    "VkPhysicalDeviceFeatures2": 1000059000,
    "VkPhysicalDeviceProperties2": 1000059001,
    "VkPhysicalDeviceVulkan11Features": 49,
    "VkPhysicalDeviceVulkan11Properties": 50,
    "VkPhysicalDeviceVulkan12Features": 51,
    "VkPhysicalDeviceVulkan12Properties": 52,
    "VkPhysicalDeviceVulkan13Features": 53,
    "VkPhysicalDeviceVulkan13Properties": 54,
    "VkPhysicalDeviceCooperativeMatrixFeaturesKHR": 1000506000,
    "VkCooperativeMatrixPropertiesKHR": 1000506001,
    "VkPhysicalDeviceCooperativeMatrixPropertiesKHR": 1000506002,
    "VkPhysicalDeviceCooperativeMatrix2FeaturesNV": side.STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_2_FEATURES_NV,
    "VkPhysicalDeviceCooperativeMatrix2PropertiesNV": side.STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_2_PROPERTIES_NV,
    "VkPhysicalDeviceShaderBfloat16FeaturesKHR": side.STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_BFLOAT16_FEATURES_KHR,
    "VkPhysicalDeviceShaderSMBuiltinsPropertiesNV": vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_SM_BUILTINS_PROPERTIES_NV,
    "VkPhysicalDeviceShaderSMBuiltinsFeaturesNV": vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_SM_BUILTINS_FEATURES_NV,
    "VkPhysicalDeviceShaderClockFeaturesKHR": vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_CLOCK_FEATURES_KHR,
    "VkPhysicalDevicePipelineRobustnessFeaturesEXT":
        vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_ROBUSTNESS_FEATURES_EXT,
}
SIDE_STRUCTS = {
    "VkPhysicalDeviceCooperativeMatrix2FeaturesNV",
    "VkPhysicalDeviceCooperativeMatrix2PropertiesNV",
    "VkPhysicalDeviceShaderBfloat16FeaturesKHR",
}


def ffi_for(struct_name: str):
    return side.ffi if struct_name in SIDE_STRUCTS else vk.ffi


class StructChain:
    """A head struct followed by extension structs, each zeroed with its sType set, linked through pNext."""

    def __init__(self, head: str, *members: str):
        self.names = [head, *members]
        self.structs = {}
        for name in self.names:
            pointer = ffi_for(name).new(name + "*")
            pointer.sType = STYPE[name]
            self.structs[name] = pointer
        for current, following in zip(self.names, self.names[1:]):
            owner = ffi_for(current)
            self.structs[current].pNext = owner.cast("void*", side.address_of(self.structs[following]))

    @property
    def head(self):
        return self.structs[self.names[0]]

    def __getitem__(self, name: str):
        return self.structs[name]

    def __contains__(self, name: str) -> bool:
        return name in self.structs
