"""Element types of the GEMM paths: component enums, numpy dtypes, device features, and the one tolerance.

Every GEMM in vkcoop (Vulkan and CUDA) accumulates in the result type named here and is checked by
:func:`vkcoop.gemm.check.check_output` against :data:`RESULT_TOLERANCE`.
"""
from __future__ import annotations

from dataclasses import dataclass

import ml_dtypes
import numpy as np

from ..errors import InputError
from ..vk.tables import (COMPONENT_BFLOAT16, COMPONENT_FLOAT16, COMPONENT_FLOAT32, COMPONENT_SINT8,
                         COMPONENT_SINT32)

BF16 = np.dtype(ml_dtypes.bfloat16)
#: The benchmark's dtype names and the numpy dtype of their inputs.
DTYPES = {"fp16": np.dtype(np.float16), "bf16": BF16}
#: The largest error of one result element, relative to the exact value, when the inputs are exact
#: (:mod:`vkcoop.gemm.inputs`): fp32 results are exact in any summation order; fp16 and bf16 results may differ
#: by the final rounding of an fp32 sum, at most half an ulp, so 2**-10 and 2**-7 leave a factor 2 of room.
RESULT_TOLERANCE = {np.dtype(np.float32): 0.0, np.dtype(np.float16): 2.0 ** -10, BF16: 2.0 ** -7,
                    np.dtype(np.int32): 0.0}


class GemmInputError(InputError):
    """A GEMM was handed arrays, shapes or tile sizes it cannot take. Raised before anything is dispatched."""


@dataclass(frozen=True)
class GemmTypes:
    """One element-type combination: A/B type -> accumulator/result type."""
    key: str                    # "fp16->fp32"
    define: str                 # GEMM_TYPES value in gemm_types.glsl
    input_dtype: np.dtype
    output_dtype: np.dtype
    input_component: int        # VkComponentTypeKHR of A and B
    output_component: int       # of C and Result
    features: tuple = ()        # device features the element types need

    @property
    def bytes_per_input(self) -> int:
        return self.input_dtype.itemsize

    @property
    def elements_per_16_bytes(self) -> int:
        return 16 // self.input_dtype.itemsize


_F16_FEATURES = ("shaderFloat16", "storageBuffer16BitAccess")
GEMM_TYPES: dict[str, GemmTypes] = {t.key: t for t in (
    GemmTypes("fp16->fp16", "F16_F16", np.dtype(np.float16), np.dtype(np.float16), COMPONENT_FLOAT16,
              COMPONENT_FLOAT16, _F16_FEATURES),
    GemmTypes("fp16->fp32", "F16_F32", np.dtype(np.float16), np.dtype(np.float32), COMPONENT_FLOAT16,
              COMPONENT_FLOAT32, _F16_FEATURES),
    GemmTypes("bf16->fp32", "BF16_F32", BF16, np.dtype(np.float32), COMPONENT_BFLOAT16, COMPONENT_FLOAT32,
              ("shaderFloat16", "shaderBFloat16Type", "shaderBFloat16CooperativeMatrix")),
    GemmTypes("s8->s32", "S8_S32", np.dtype(np.int8), np.dtype(np.int32), COMPONENT_SINT8, COMPONENT_SINT32,
              ("shaderInt8", "storageBuffer8BitAccess")),
)}

#: The 2:4 path's dtypes: the ELEMENT define of coopmat2_sparse24.comp and the dense types it accumulates as.
SPARSE24_TYPES = {"fp16": ("F16", "fp16->fp32"), "bf16": ("BF16", "bf16->fp32")}
#: The bench dtypes the dense coopmat2 kernel computes, and the combination it computes each in: fp32 accumulation
#: for fp16 and bf16, int32 for int8 (the driver's S8 rows, K granularity 32).
DENSE_TYPES = {"fp16": "fp16->fp32", "bf16": "bf16->fp32", "int8": "s8->s32"}

#: Features every coopmat2 GEMM kernel needs besides the element types'. maintenance4: the shaders size their
#: workgroups with local_size_x_id (ExecutionMode LocalSizeId).
COOPMAT2_GEMM_FEATURES = ("cooperativeMatrix", "cooperativeMatrixWorkgroupScope",
                          "cooperativeMatrixFlexibleDimensions", "cooperativeMatrixTensorAddressing",
                          "vulkanMemoryModel", "vulkanMemoryModelDeviceScope", "maintenance4")
#: The 2:4 kernels: the decode function's block loads and pointers, 16-bit values, and the staged kernel's 64-bit
#: shifts (sparse24_expand.glsl).
SPARSE24_FEATURES = COOPMAT2_GEMM_FEATURES + ("cooperativeMatrixBlockLoads", "bufferDeviceAddress", "shaderInt16",
                                              "shaderInt64")
#: The KHR kernel's own needs; the bench also pins its subgroup size to 32 (SUBGROUP_SIZE_FEATURES).
KHR_CORE_FEATURES = ("cooperativeMatrix", "vulkanMemoryModel", "maintenance4")
SUBGROUP_SIZE_FEATURES = ("subgroupSizeControl", "computeFullSubgroups")
KHR_GEMM_FEATURES = KHR_CORE_FEATURES + SUBGROUP_SIZE_FEATURES
KERNEL_FEATURES = {"coopmat2": COOPMAT2_GEMM_FEATURES, "khr": KHR_GEMM_FEATURES, "sparse24": SPARSE24_FEATURES}


def gemm_types(key) -> GemmTypes:
    """Look a type combination up by key ("fp16->fp32", ...) or pass a GemmTypes through."""
    if isinstance(key, GemmTypes):
        return key
    try:
        return GEMM_TYPES[key]
    except (KeyError, TypeError):
        raise GemmInputError(f"types={key!r} is not one of {', '.join(GEMM_TYPES)}") from None


def accumulating_types(dtype: str) -> GemmTypes:
    """The combination the dense kernel computes a benchmark dtype in (:data:`DENSE_TYPES`: "fp16" -> fp16->fp32,
    "int8" -> s8->s32)."""
    if dtype not in DENSE_TYPES:
        raise GemmInputError(f"dtype={dtype!r}: the dense coopmat2 kernel takes {', '.join(DENSE_TYPES)}")
    return GEMM_TYPES[DENSE_TYPES[dtype]]


def sparse24_types(dtype: str) -> GemmTypes:
    """The types a 2:4 kernel computes ``dtype`` inputs with (its fp32 accumulation); GemmInputError for a dtype
    the 2:4 format does not take."""
    if dtype not in SPARSE24_TYPES:
        raise GemmInputError(f"dtype={dtype!r}: the 2:4 path takes {', '.join(SPARSE24_TYPES)}")
    return GEMM_TYPES[SPARSE24_TYPES[dtype][1]]


def features_for(kernel: str, types) -> list[str]:
    """Device features a kernel ("coopmat2", "khr", "sparse24") needs for a type combination."""
    if kernel not in KERNEL_FEATURES:
        raise GemmInputError(f"kernel={kernel!r}: choose from {', '.join(KERNEL_FEATURES)}")
    return list(dict.fromkeys(KERNEL_FEATURES[kernel] + gemm_types(types).features))
