"""DeviceCaps fixtures for GPU-free tests: the H200's reported tables (shared/GPU_HOST.md, read on the host).

Use ``H200_CAPS`` to generate a sample's cases without a device (``sample.prepared_cases(H200_CAPS)``)."""
from ..vk.tables import (COMPONENT_BFLOAT16, COMPONENT_FLOAT16, COMPONENT_FLOAT32, COMPONENT_SINT8,
                         COMPONENT_SINT32, COMPONENT_UINT8, COMPONENT_UINT32, SCOPE_SUBGROUP, SCOPE_WORKGROUP,
                         ShapeEntry)
from .caps import DeviceCaps

F16, F32, BF16, S8, S32, U8, U32 = (COMPONENT_FLOAT16, COMPONENT_FLOAT32, COMPONENT_BFLOAT16, COMPONENT_SINT8,
                                    COMPONENT_SINT32, COMPONENT_UINT8, COMPONENT_UINT32)
_TYPE_COMBOS = [(F16, F16, F16, F16), (F16, F16, F32, F32), (U8, U8, U32, U32), (S8, S8, S32, S32),
                (BF16, BF16, F32, F32)]


def _khr():
    entries = []
    for m, n, k, combos in ((16, 16, 16, [0, 1]), (16, 8, 16, [0, 1]), (16, 8, 8, [0, 1]),
                            (16, 16, 32, [2, 3]), (16, 8, 32, [2, 3]), (16, 16, 16, [4])):
        for c in combos:
            a, b, cc, r = _TYPE_COMBOS[c]
            entries.append(ShapeEntry(m, n, k, a, b, cc, r, SCOPE_SUBGROUP))
    return tuple(entries)


def _flexible():
    entries = []
    for a, b, c, r in _TYPE_COMBOS:
        kg = 32 if a in (S8, U8) else 16
        entries.append(ShapeEntry(16, 16, kg, a, b, c, r, SCOPE_SUBGROUP, True, 32))
        for invocations, (mg, ng) in ((32, (16, 16)), (64, (16, 16)), (128, (32, 16)), (256, (32, 32))):
            entries.append(ShapeEntry(mg, ng, kg, a, b, c, r, SCOPE_WORKGROUP, True, invocations))
    return tuple(entries)


H200_FEATURES = frozenset({
    "cooperativeMatrix", "cooperativeMatrixWorkgroupScope", "cooperativeMatrixFlexibleDimensions",
    "cooperativeMatrixReductions", "cooperativeMatrixConversions", "cooperativeMatrixPerElementOperations",
    "cooperativeMatrixTensorAddressing", "cooperativeMatrixBlockLoads", "vulkanMemoryModel", "shaderFloat16",
    "shaderInt8", "shaderInt16", "storageBuffer16BitAccess", "storageBuffer8BitAccess", "bufferDeviceAddress",
    "shaderBFloat16Type", "shaderBFloat16CooperativeMatrix", "subgroupSizeControl", "computeFullSubgroups"})

H200_CAPS = DeviceCaps(
    name="H200 (fixture)",
    extensions=frozenset({"VK_KHR_cooperative_matrix", "VK_NV_cooperative_matrix2", "VK_KHR_shader_bfloat16"}),
    features=H200_FEATURES, khr=_khr(), flexible=_flexible(), max_flexible_dimension=256, subgroup_size=32,
    staging_bytes=49152 - 8192)
