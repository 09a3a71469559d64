"""The driver's cooperative-matrix tables as typed rows, and the Vulkan enums they use.

``vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR`` lists exact shapes (M, N, K sizes);
``vkGetPhysicalDeviceCooperativeMatrixFlexibleDimensionsPropertiesNV`` lists granularities (every multiple up to
``cooperativeMatrixFlexibleDimensionsMaxDimension`` is allowed). Both become :class:`ShapeEntry` rows, so the
layers above compare fields, not dictionary keys.
"""
from __future__ import annotations

from dataclasses import dataclass

#: VkComponentTypeKHR (Vulkan spec, "VkComponentTypeKHR"); bf16 from VK_KHR_shader_bfloat16.
COMPONENT_FLOAT16, COMPONENT_FLOAT32, COMPONENT_SINT8, COMPONENT_SINT32, COMPONENT_UINT8, COMPONENT_UINT32 = \
    0, 1, 3, 5, 7, 9
COMPONENT_BFLOAT16 = 1000141000
#: VkScopeKHR values a cooperative matrix can have.
SCOPE_WORKGROUP, SCOPE_SUBGROUP = 2, 3
SCOPES = {"workgroup": SCOPE_WORKGROUP, "subgroup": SCOPE_SUBGROUP}
USES = ("A", "B", "Accumulator")


@dataclass(frozen=True)
class ShapeEntry:
    """One row of a cooperative-matrix table: a KHR entry (M, N, K sizes) or a flexible-dimensions entry
    (M, N, K granularities, ``flexible=True``). Types are VkComponentTypeKHR, ``scope`` VkScopeKHR."""
    M: int
    N: int
    K: int
    A: int
    B: int
    C: int
    result: int
    scope: int
    flexible: bool = False
    workgroup_invocations: int = 0
    saturating: bool = False

    @classmethod
    def from_khr(cls, row: dict) -> "ShapeEntry":
        """From a ``VkCooperativeMatrixPropertiesKHR`` as :meth:`PhysicalDevice.cooperative_matrix_properties`
        returns it."""
        return cls(row["MSize"], row["NSize"], row["KSize"], row["AType"], row["BType"], row["CType"],
                   row["ResultType"], row["scope"], saturating=bool(row.get("saturatingAccumulation", 0)))

    @classmethod
    def from_flexible(cls, row: dict) -> "ShapeEntry":
        """From a ``VkCooperativeMatrixFlexibleDimensionsPropertiesNV`` row."""
        return cls(row["MGranularity"], row["NGranularity"], row["KGranularity"], row["AType"], row["BType"],
                   row["CType"], row["ResultType"], row["scope"], True, row["workgroupInvocations"],
                   bool(row.get("saturatingAccumulation", 0)))

    def types_match(self, input_component: int, output_component: int) -> bool:
        """A and B of ``input_component``, C and Result of ``output_component``, no saturation."""
        return (self.A == input_component and self.B == input_component and self.C == output_component
                and self.result == output_component and not self.saturating)

    def extent(self, component: int, use: str) -> tuple[int, int] | None:
        """(rows, cols) of the ``use`` matrix of this entry if its type is ``component`` (else None)."""
        if use == "A":
            return (self.M, self.K) if self.A == component else None
        if use == "B":
            return (self.K, self.N) if self.B == component else None
        if use == "Accumulator":
            return (self.M, self.N) if component in (self.C, self.result) else None
        raise ValueError(f"matrix use must be one of {USES}, got {use!r}")
