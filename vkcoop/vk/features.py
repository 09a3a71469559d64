"""Named device features: which struct holds each, and which extension or API version provides it.

Callers name features by their vk.xml member name (``"shaderFloat16"``, ``"cooperativeMatrixWorkgroupScope"``,
``"computeFullSubgroups"``...). Every name is unique across the structs below (checked at import).
"""
from __future__ import annotations

import vulkan as vk

from . import coopmat2_ffi as side


def _fields(ffi, struct_name):
    return [name for name, _ in ffi.typeof(struct_name).fields if name not in ("sType", "pNext")]


#: struct -> (extension that provides it or None for core, minimum device API version (major, minor)).
FEATURE_STRUCTS = {
    "VkPhysicalDeviceFeatures": (None, (1, 0)),  # embedded as VkPhysicalDeviceFeatures2.features
    "VkPhysicalDeviceVulkan11Features": (None, (1, 2)),
    "VkPhysicalDeviceVulkan12Features": (None, (1, 2)),
    "VkPhysicalDeviceVulkan13Features": (None, (1, 3)),
    "VkPhysicalDeviceCooperativeMatrixFeaturesKHR": (side.KHR_COOPERATIVE_MATRIX_EXTENSION_NAME, (1, 0)),
    "VkPhysicalDeviceCooperativeMatrix2FeaturesNV": (side.NV_COOPERATIVE_MATRIX_2_EXTENSION_NAME, (1, 0)),
    "VkPhysicalDeviceShaderBfloat16FeaturesKHR": (side.KHR_SHADER_BFLOAT16_EXTENSION_NAME, (1, 1)),
    "VkPhysicalDeviceShaderClockFeaturesKHR": ("VK_KHR_shader_clock", (1, 0)),         # in-shader timelines
    "VkPhysicalDeviceShaderSMBuiltinsFeaturesNV": ("VK_NV_shader_sm_builtins", (1, 0)),   # gl_SMIDNV
    "VkPhysicalDevicePipelineRobustnessFeaturesEXT": ("VK_EXT_pipeline_robustness", (1, 0)),   # vk.robustness
}

#: Extensions that another extension depends on (vk.xml ``depends``), enabled along with it.
EXTENSION_DEPENDENCIES = {
    side.NV_COOPERATIVE_MATRIX_2_EXTENSION_NAME: (side.KHR_COOPERATIVE_MATRIX_EXTENSION_NAME,),
}

FEATURE_TO_STRUCT: dict[str, str] = {}
for _struct in FEATURE_STRUCTS:
    _ffi = side.ffi if _struct in side.FEATURE_STRUCTS else vk.ffi
    for _name in _fields(_ffi, _struct):
        assert _name not in FEATURE_TO_STRUCT, f"feature name {_name} is ambiguous"
        FEATURE_TO_STRUCT[_name] = _struct

COOPMAT2_FEATURES = tuple(_fields(side.ffi, "VkPhysicalDeviceCooperativeMatrix2FeaturesNV"))


def struct_of(feature: str) -> str:
    try:
        return FEATURE_TO_STRUCT[feature]
    except KeyError:
        close = [name for name in FEATURE_TO_STRUCT if name.lower() == feature.lower()]
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise ValueError(f"unknown Vulkan feature name {feature!r}{hint}") from None


def extension_of(feature: str):
    return FEATURE_STRUCTS[struct_of(feature)][0]


def with_dependencies(extensions) -> list[str]:
    """The extensions plus everything they depend on, dependencies first, without duplicates."""
    ordered: list[str] = []

    def visit(name):
        for dependency in EXTENSION_DEPENDENCIES.get(name, ()):
            visit(dependency)
        if name not in ordered:
            ordered.append(name)

    for extension in extensions:
        visit(extension)
    return ordered
