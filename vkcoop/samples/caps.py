"""What a sample needs to know about a device, as pure data: element types, the driver's tables, requirements.

:class:`DeviceCaps` is built from a :class:`vkcoop.vk.PhysicalDevice` (or a fixture, for GPU-free tests), and a
sample's ``cases(caps)`` choose shapes from it; :class:`Requirements` name the extensions and features a sample
needs, and :data:`CAPABILITY_FEATURES` which SPIR-V capability needs which feature.
"""
from __future__ import annotations

from dataclasses import dataclass

import ml_dtypes
import numpy as np

from ..errors import InputError
from ..vk.capabilities import staging_bytes
from ..vk.tables import (COMPONENT_BFLOAT16, COMPONENT_FLOAT16, COMPONENT_FLOAT32, COMPONENT_SINT8,
                         COMPONENT_SINT32, COMPONENT_UINT8, SCOPES)


class SampleInputError(InputError):
    """A sample or case was given bad input (dtype, shape, shader variant, parameter); raised before dispatch."""


@dataclass(frozen=True)
class ElementType:
    """A matrix component type as the shaders name it (``ELEMENT=<code>``, shaders/include/vkcoop/common.glsl)."""
    code: str             # F16, F32, BF16, S8, U8, S32
    glsl: str             # float16_t, ...
    dtype: np.dtype       # numpy dtype of buffers holding it
    component: int        # VkComponentTypeKHR
    canonical_use: str    # the use common.glsl gives ELEMENT_USE: A for multiplicands, Accumulator for results


ELEMENT_TYPES: dict[str, ElementType] = {e.code: e for e in (
    ElementType("F16", "float16_t", np.dtype(np.float16), COMPONENT_FLOAT16, "A"),
    ElementType("F32", "float", np.dtype(np.float32), COMPONENT_FLOAT32, "Accumulator"),
    ElementType("BF16", "bfloat16_t", np.dtype(ml_dtypes.bfloat16), COMPONENT_BFLOAT16, "A"),
    ElementType("S8", "int8_t", np.dtype(np.int8), COMPONENT_SINT8, "A"),
    ElementType("U8", "uint8_t", np.dtype(np.uint8), COMPONENT_UINT8, "A"),
    ElementType("S32", "int32_t", np.dtype(np.int32), COMPONENT_SINT32, "Accumulator"),
)}


def element_type(code: str) -> ElementType:
    try:
        return ELEMENT_TYPES[code]
    except KeyError:
        raise SampleInputError(f"element type must be one of {sorted(ELEMENT_TYPES)}, got {code!r}") from None


@dataclass(frozen=True)
class DeviceCaps:
    """What a sample needs to know about a device to choose its cases (pure data, no Vulkan objects)."""
    name: str
    extensions: frozenset
    features: frozenset            # names of supported features
    khr: tuple = ()                # ShapeEntry, flexible=False
    flexible: tuple = ()           # ShapeEntry, flexible=True (granularities)
    max_flexible_dimension: int = 0
    subgroup_size: int = 32
    staging_bytes: int = 0         # shared memory a workgroup's own arrays may fill (0: unknown)

    @classmethod
    def from_physical(cls, physical) -> "DeviceCaps":
        """From a :class:`vkcoop.vk.PhysicalDevice`."""
        khr, flexible = physical.khr_shapes(), physical.flexible_shapes()
        props = physical.cooperative_matrix2_properties() or {}
        return cls(name=physical.name, extensions=frozenset(physical.extensions),
                   features=frozenset(n for n, ok in physical.features.items() if ok), khr=khr, flexible=flexible,
                   max_flexible_dimension=int(props.get("cooperativeMatrixFlexibleDimensionsMaxDimension", 0)),
                   subgroup_size=int(physical.subgroup_properties()["subgroupSize"]),
                   staging_bytes=staging_bytes(physical))

    def khr_shapes(self, element: str, use: str, scope: str = "subgroup") -> list[tuple[int, int]]:
        """Distinct (rows, cols) the KHR table lists for an ``element`` matrix of ``use``, largest first."""
        component = element_type(element).component
        found = {e.extent(component, use) for e in self.khr if e.scope == SCOPES[scope]}
        found.discard(None)
        return sorted(found, key=lambda rc: (-rc[0] * rc[1], -rc[1], -rc[0]))

    def supports(self, element: str, use: str, rows: int, cols: int, scope: str = "subgroup") -> bool:
        """Whether a rows x cols ``element`` matrix of ``use`` is allowed: an exact KHR entry, or (with the
        cooperativeMatrixFlexibleDimensions feature) multiples of a flexible entry's granularities up to
        cooperativeMatrixFlexibleDimensionsMaxDimension."""
        if (rows, cols) in self.khr_shapes(element, use, scope):
            return True
        if "cooperativeMatrixFlexibleDimensions" not in self.features:
            return False
        component = element_type(element).component
        for entry in self.flexible:
            if entry.scope != SCOPES[scope]:
                continue
            granule = entry.extent(component, use)
            if granule and rows % granule[0] == 0 and cols % granule[1] == 0 \
                    and max(rows, cols) <= self.max_flexible_dimension:
                return True
        return False

    def pick_shape(self, element: str, use: str | None = None, scope: str = "subgroup") -> tuple[int, int]:
        """The largest KHR-table shape for ``element`` (at its canonical use by default)."""
        use = use or element_type(element).canonical_use
        shapes = self.khr_shapes(element, use, scope)
        if not shapes:
            raise SampleInputError(f"{self.name} lists no {scope}-scope {element} matrix of use {use} "
                                   f"in its cooperative-matrix table")
        return shapes[0]


#: SPIR-V capability -> the device feature that allows it (Vulkan spec, "SPIR-V Environment", capabilities table).
CAPABILITY_FEATURES = {
    "Float16": "shaderFloat16", "Int8": "shaderInt8", "Int16": "shaderInt16", "Int64": "shaderInt64",
    "Float64": "shaderFloat64",
    "StorageBuffer16BitAccess": "storageBuffer16BitAccess", "StorageBuffer8BitAccess": "storageBuffer8BitAccess",
    "UniformAndStorageBuffer8BitAccess": "uniformAndStorageBuffer8BitAccess",
    "UniformAndStorageBuffer16BitAccess": "uniformAndStorageBuffer16BitAccess",
    "VulkanMemoryModel": "vulkanMemoryModel", "VulkanMemoryModelDeviceScope": "vulkanMemoryModelDeviceScope",
    "PhysicalStorageBufferAddresses": "bufferDeviceAddress",
    "CooperativeMatrixKHR": "cooperativeMatrix",
    "CooperativeMatrixTensorAddressingNV": "cooperativeMatrixTensorAddressing",
    "TensorAddressingNV": "cooperativeMatrixTensorAddressing",
    "CooperativeMatrixReductionsNV": "cooperativeMatrixReductions",
    "CooperativeMatrixConversionsNV": "cooperativeMatrixConversions",
    "CooperativeMatrixPerElementOperationsNV": "cooperativeMatrixPerElementOperations",
    "CooperativeMatrixBlockLoadsNV": "cooperativeMatrixBlockLoads",
    # Newer SPIR-V grammars name some of these by their EXT aliases (same enumerant values).
    "CooperativeMatrixReductionsEXT": "cooperativeMatrixReductions",
    "CooperativeMatrixConversionsEXT": "cooperativeMatrixConversions",
    "CooperativeMatrixPerElementOperationsEXT": "cooperativeMatrixPerElementOperations",
    "CooperativeMatrixTensorAddressingEXT": "cooperativeMatrixTensorAddressing",
    "CooperativeMatrixBlockLoadsEXT": "cooperativeMatrixBlockLoads",
    "BFloat16TypeKHR": "shaderBFloat16Type", "BFloat16CooperativeMatrixKHR": "shaderBFloat16CooperativeMatrix",
    "BFloat16DotProductKHR": "shaderBFloat16DotProduct",
}


@dataclass(frozen=True)
class Requirements:
    """Device extensions and features (vk.xml member names) a sample needs; the device is created with
    exactly these (each feature's own extension is added by :class:`vkcoop.vk.Device`)."""
    extensions: tuple = ()
    features: tuple = ()

    def __add__(self, other: "Requirements") -> "Requirements":
        return Requirements(tuple(dict.fromkeys(self.extensions + other.extensions)),
                            tuple(dict.fromkeys(self.features + other.features)))

    def missing(self, caps: DeviceCaps) -> tuple[list[str], list[str]]:
        return ([e for e in self.extensions if e not in caps.extensions],
                [f for f in self.features if f not in caps.features])

    def to_dict(self) -> dict:
        return {"extensions": list(self.extensions), "features": list(self.features)}


#: What every tensor-addressing sample needs: coopmat (KHR) and tensor addressing, fp16 in buffers,
#: the Vulkan memory model the coopmat SPIR-V declares.
COOPMAT2_BASE = Requirements(
    extensions=("VK_KHR_cooperative_matrix", "VK_NV_cooperative_matrix2"),
    features=("cooperativeMatrix", "cooperativeMatrixTensorAddressing", "vulkanMemoryModel",
              "shaderFloat16", "storageBuffer16BitAccess"))
INT8 = Requirements(features=("shaderInt8", "storageBuffer8BitAccess"))
BFLOAT16 = Requirements(extensions=("VK_KHR_shader_bfloat16",),
                        features=("shaderBFloat16Type", "shaderBFloat16CooperativeMatrix"))

