"""The sample framework: declarative cases, device capabilities, dispatch, bit-exact checks, results.

A sample is a :class:`Sample` subclass with ``name``, ``description``, ``requires`` and a pure
``cases(caps)`` method that returns :class:`Case` objects: a shader variant, its specialization
constants, the buffers in binding order (inputs, and outputs with their expected contents computed by
:mod:`vkcoop.tensor`), and the workgroup count. :meth:`Sample.run` does everything else: it creates a
device with exactly the sample's requirements (or skips, naming what is missing), checks every case
before anything is dispatched, compiles and caches pipelines, dispatches with GPU timestamps, reads the
outputs back and compares them bit for bit.

Nothing in a case is hand-written numpy arithmetic standing in for the spec: tensor layouts and views
are described once by :class:`LayoutRecipe` / :class:`ViewRecipe`, which produce both the record words the
shader reads (``shaders/include/vkcoop/records.glsl``) and the :class:`vkcoop.tensor.TensorLayout` /
``TensorView`` the reference uses, built by the same sequence of builder calls.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import ClassVar

import ml_dtypes
import numpy as np

from .. import shaders as shader_catalog
from ..tensor import ClampMode, TensorLayout, TensorView

# --------------------------------------------------------------------------- errors


class SampleInputError(ValueError):
    """A sample or case was given bad input (dtype, shape, shader variant, parameter); raised before dispatch."""


# --------------------------------------------------------------------------- element types

#: VkComponentTypeKHR values (Vulkan spec; bf16 from VK_KHR_shader_bfloat16).
COMPONENT_FLOAT16, COMPONENT_FLOAT32, COMPONENT_SINT8, COMPONENT_SINT32, COMPONENT_UINT8, COMPONENT_UINT32 = \
    0, 1, 3, 5, 7, 9
COMPONENT_BFLOAT16 = 1000141000

SCOPE_WORKGROUP, SCOPE_SUBGROUP = 2, 3
SCOPES = {"workgroup": SCOPE_WORKGROUP, "subgroup": SCOPE_SUBGROUP}

USES = ("A", "B", "Accumulator")


@dataclass(frozen=True)
class ElementType:
    """A matrix component type as the shaders name it (``ELEMENT=<code>``, shaders/include/vkcoop/common.glsl)."""
    code: str             # F16, F32, BF16, S8, U8, S32
    glsl: str             # float16_t, ...
    dtype: np.dtype       # numpy dtype of buffers holding it
    component: int        # VkComponentTypeKHR
    canonical_use: str    # the use common.glsl gives ELEMENT_USE: A for multiplicands, Accumulator for results

    @property
    def is_float(self) -> bool:
        return self.code in ("F16", "F32", "BF16")


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


def index_pattern(count: int, dtype) -> np.ndarray:
    """``count`` exactly representable values where element i is derived from i, so addressing errors show.

    Values cycle with the longest period the type represents exactly as distinct integers:
    fp16 2048 ([-1024, 1023]), bf16 512 ([-256, 255]), fp32 i - 2**20, int8/uint8 the
    low byte of i, int32 ``7 * i - 100000``."""
    i = np.arange(count, dtype=np.int64)
    dt = np.dtype(dtype)
    if dt == np.float16:
        return ((i % 2048) - 1024).astype(np.float16)
    if dt == ELEMENT_TYPES["BF16"].dtype:
        return ((i % 512) - 256).astype(np.float32).astype(dt)
    if dt == np.float32:
        return (i - (1 << 20)).astype(np.float32)
    if dt == np.int8:
        return (i & 0xFF).astype(np.uint8).view(np.int8)
    if dt == np.uint8:
        return (i & 0xFF).astype(np.uint8)
    if dt == np.int32:
        return (7 * i - 100000).astype(np.int32)
    raise SampleInputError(f"index_pattern has no pattern for dtype {dt}")


def small_values(count: int, dtype, seed: int) -> np.ndarray:
    """Values from {-0.5, 0, 0.5, 1} (exact in every float type; sums of a few thousand stay exact)."""
    rng = np.random.default_rng(seed)
    return rng.choice(np.array([-0.5, 0.0, 0.5, 1.0]), size=count).astype(np.float32).astype(dtype)


# --------------------------------------------------------------------------- capabilities


@dataclass(frozen=True)
class ShapeEntry:
    """One row of a cooperative-matrix table: a KHR entry (M, N, K sizes) or a flexible-dimensions entry
    (M, N, K granularities). Types are VkComponentTypeKHR, scope VkScopeKHR."""
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

    def extent(self, component: int, use: str) -> tuple[int, int] | None:
        """(rows, cols) of the ``use`` matrix of this entry if its type is ``component`` (else None)."""
        if use == "A":
            return (self.M, self.K) if self.A == component else None
        if use == "B":
            return (self.K, self.N) if self.B == component else None
        if use == "Accumulator":
            return (self.M, self.N) if component in (self.C, self.result) else None
        raise SampleInputError(f"matrix use must be one of {USES}, got {use!r}")


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

    @classmethod
    def from_physical(cls, physical) -> "DeviceCaps":
        """From a :class:`vkcoop.vk.PhysicalDevice`."""
        khr = tuple(ShapeEntry(e["MSize"], e["NSize"], e["KSize"], e["AType"], e["BType"], e["CType"],
                               e["ResultType"], e["scope"]) for e in physical.cooperative_matrix_properties())
        flexible = tuple(ShapeEntry(e["MGranularity"], e["NGranularity"], e["KGranularity"], e["AType"], e["BType"],
                                    e["CType"], e["ResultType"], e["scope"], True, e["workgroupInvocations"])
                         for e in physical.flexible_dimensions_properties())
        props = physical.cooperative_matrix2_properties() or {}
        return cls(name=physical.name, extensions=frozenset(physical.extensions),
                   features=frozenset(n for n, ok in physical.features.items() if ok), khr=khr, flexible=flexible,
                   max_flexible_dimension=int(props.get("cooperativeMatrixFlexibleDimensionsMaxDimension", 0)),
                   subgroup_size=int(physical.subgroup_properties()["subgroupSize"]))

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


# --------------------------------------------------------------------------- tensor recipes

RECORD_WORDS = 32  # shaders/include/vkcoop/records.glsl
_LR_BLOCK, _LR_DIMENSION, _LR_STRIDE, _LR_OFFSET, _LR_SPAN, _LR_CLAMP_VALUE = 0, 5, 10, 15, 20, 25
_VR_DIMENSION, _VR_STRIDE, _VR_CLIP = 0, 5, 10
NO_CLIP = (0, 0xFFFFFFFF, 0, 0xFFFFFFFF)


def _tuple(values, n: int, what: str) -> tuple[int, ...]:
    values = tuple(int(v) for v in values)
    if len(values) != n:
        raise SampleInputError(f"{what} needs {n} values (one per dimension), got {len(values)}")
    return values


@dataclass(frozen=True)
class LayoutRecipe:
    """A tensor layout as the shaders build it from a record (TENSOR_LAYOUT_FROM_RECORD[_NO_BLOCK]).

    Build order, identical on both sides: create(dim, clamp_mode) -> set_block_size (only when
    ``block_size`` is given) -> set_dimension(dimension) -> set_stride(stride) (only when given; the shader's
    EXPLICIT_STRIDE specialization constant) -> slice(offsets or zeros, spans or dimension) ->
    set_clamp_value. ``offsets`` may be negative."""
    dimension: tuple
    clamp_mode: ClampMode = ClampMode.Constant
    stride: tuple | None = None
    offsets: tuple | None = None
    spans: tuple | None = None
    clamp_value: int = 0
    block_size: tuple | None = None

    def __post_init__(self):
        n = len(self.dimension)
        if not 1 <= n <= 5:
            raise SampleInputError(f"a tensor layout has 1..5 dimensions, got {n}")
        object.__setattr__(self, "dimension", _tuple(self.dimension, n, "dimension"))
        object.__setattr__(self, "clamp_mode", ClampMode(self.clamp_mode))
        for name in ("stride", "offsets", "spans", "block_size"):
            if getattr(self, name) is not None:
                object.__setattr__(self, name, _tuple(getattr(self, name), n, name))
        self.layout()  # range checks by vkcoop.tensor (TensorSpecError names the parameter)

    @property
    def dim(self) -> int:
        return len(self.dimension)

    @property
    def explicit_stride(self) -> bool:
        return self.stride is not None

    def layout(self) -> TensorLayout:
        t = TensorLayout.create(self.dim, self.clamp_mode)
        if self.block_size is not None:
            t = t.set_block_size(*self.block_size)
        t = t.set_dimension(*self.dimension)
        if self.stride is not None:
            t = t.set_stride(*self.stride)
        t = t.slice(self.offsets or (0,) * self.dim, self.spans or self.dimension)
        return t.set_clamp_value(self.clamp_value)

    def words(self) -> np.ndarray:
        w = np.zeros(RECORD_WORDS, dtype=np.uint32)
        n = self.dim
        w[_LR_BLOCK:_LR_BLOCK + n] = self.block_size or (1,) * n
        w[_LR_DIMENSION:_LR_DIMENSION + n] = self.dimension
        w[_LR_STRIDE:_LR_STRIDE + n] = self.stride or (0,) * n
        w[_LR_OFFSET:_LR_OFFSET + n] = np.array(self.offsets or (0,) * n, dtype=np.int64) & 0xFFFFFFFF
        w[_LR_SPAN:_LR_SPAN + n] = self.spans or self.dimension
        w[_LR_CLAMP_VALUE] = self.clamp_value
        return w

    def element_count(self) -> int:
        """Elements a buffer needs so every in-bounds tensor coordinate is inside it (strides included)."""
        t = self.layout()
        blocks = [math.ceil(d / b) for d, b in zip(t.layout_dimension, t.block_size)]
        if any(b == 0 for b in blocks):
            return 1
        return 1 + sum((b - 1) * s for b, s in zip(blocks, t.stride))


@dataclass(frozen=True)
class ViewRecipe:
    """A tensor view as view.comp builds it: create(dim, has_dimensions, permutation) -> set_dimensions
    (hasDimensions only) -> set_stride (only when given) -> set_clip(clip or the default no-clip)."""
    dim: int
    has_dimensions: bool
    permutation: tuple
    dimensions: tuple | None = None
    stride: tuple | None = None
    clip: tuple | None = None   # (row_offset, row_span, col_offset, col_span)

    def __post_init__(self):
        object.__setattr__(self, "permutation", _tuple(self.permutation, self.dim, "permutation"))
        if self.has_dimensions and self.dimensions is None:
            raise SampleInputError("a view with has_dimensions=True needs dimensions")
        if not self.has_dimensions and (self.dimensions is not None or self.stride is not None):
            raise SampleInputError("a view with has_dimensions=False takes its dimensions and strides from the "
                                   "layout span; do not give dimensions or stride")
        for name in ("dimensions", "stride"):
            if getattr(self, name) is not None:
                object.__setattr__(self, name, _tuple(getattr(self, name), self.dim, name))
        if self.clip is not None:
            object.__setattr__(self, "clip", _tuple(self.clip, 4, "clip"))
        self.view()

    @property
    def explicit_stride(self) -> bool:
        return self.stride is not None

    def view(self) -> TensorView:
        v = TensorView.create(self.dim, self.has_dimensions, self.permutation)
        if self.has_dimensions:
            v = v.set_dimensions(*self.dimensions)
            if self.stride is not None:
                v = v.set_stride(*self.stride)
        return v.set_clip(*(self.clip or NO_CLIP))

    def words(self) -> np.ndarray:
        w = np.zeros(RECORD_WORDS, dtype=np.uint32)
        n = self.dim
        w[_VR_DIMENSION:_VR_DIMENSION + n] = self.dimensions or (0,) * n
        w[_VR_STRIDE:_VR_STRIDE + n] = self.stride or (0,) * n
        w[_VR_CLIP:_VR_CLIP + 4] = self.clip or NO_CLIP
        return w


def records(*recipes) -> np.ndarray:
    """The records buffer (binding 0 of the tensor shaders): the recipes' words back to back."""
    return np.concatenate([r.words() for r in recipes])


# --------------------------------------------------------------------------- cases


@dataclass
class Binding:
    """One storage buffer of a case (set 0, binding = its position in :attr:`Case.bindings`).

    ``data`` is uploaded before the dispatch. With ``expected`` set the buffer is an output: after the
    dispatch it is read back and must equal ``expected`` bit for bit (``nan_equal``: any NaN matches any
    NaN, for decodes whose NaN payloads the reference does not model)."""
    name: str
    data: np.ndarray
    expected: np.ndarray | None = None
    nan_equal: bool = False

    @property
    def is_output(self) -> bool:
        return self.expected is not None


@dataclass
class Case:
    """One dispatch: a declared shader variant, specialization constants, buffers, workgroup count."""
    name: str
    shader: str                                   # relative to shaders/, e.g. "samples/decode/decode.comp"
    defines: dict
    bindings: list
    specialization: dict = field(default_factory=dict)   # constant_id or name -> value (typed by reflection)
    groups: tuple = (1, 1, 1)
    push: object = None
    #: Set when the device is known to disagree with the reference here (a spec ambiguity or a driver
    #: discrepancy, described in the text). A mismatch is then reported under SampleResult.known_issues
    #: instead of failing the sample, and a match is reported too ("not reproduced").
    known_issue: str | None = None

    def check(self) -> None:
        """Raise SampleInputError for anything wrong that can be seen before dispatch."""
        declared = shader_catalog.declared_variants(self.shader)
        wanted = tuple(sorted((str(k), str(v)) for k, v in self.defines.items()))
        if wanted not in {v.defines for v in declared}:
            listed = ", ".join(v.label for v in declared[:4])
            raise SampleInputError(f"case {self.name}: defines {dict(wanted)} are not a declared @variants "
                                   f"combination of {self.shader} (e.g. {listed})")
        if not self.bindings:
            raise SampleInputError(f"case {self.name}: no bindings")
        for b in self.bindings:
            if not isinstance(b.data, np.ndarray):
                raise SampleInputError(f"case {self.name}: binding {b.name!r} data must be a numpy array, "
                                       f"got {type(b.data).__name__}")
            if b.data.size == 0:
                raise SampleInputError(f"case {self.name}: binding {b.name!r} is empty")
            if b.expected is not None:
                if not isinstance(b.expected, np.ndarray):
                    raise SampleInputError(f"case {self.name}: expected {b.name!r} must be a numpy array")
                if b.expected.dtype != b.data.dtype or b.expected.shape != b.data.shape:
                    raise SampleInputError(
                        f"case {self.name}: expected {b.name!r} has dtype {b.expected.dtype} and shape "
                        f"{b.expected.shape}, the buffer has {b.data.dtype} {b.data.shape}")

    def variant(self) -> shader_catalog.ShaderVariant:
        return shader_catalog.ShaderVariant(self.shader, tuple(sorted((str(k), str(v))
                                                                      for k, v in self.defines.items())))


def require_array(value, name: str, dtype=None, shape=None, ndim=None) -> np.ndarray:
    """Check a sample parameter; SampleInputError naming ``name`` on a wrong type, dtype or shape."""
    if not isinstance(value, np.ndarray):
        raise SampleInputError(f"{name} must be a numpy array, got {type(value).__name__}")
    if dtype is not None:
        allowed = [np.dtype(d) for d in (dtype if isinstance(dtype, (list, tuple)) else [dtype])]
        if value.dtype not in allowed:
            raise SampleInputError(f"{name} has dtype {value.dtype}, expected "
                                   f"{' or '.join(str(d) for d in allowed)}")
    if ndim is not None and value.ndim != ndim:
        raise SampleInputError(f"{name} must be {ndim}-D, got shape {value.shape}")
    if shape is not None and tuple(value.shape) != tuple(shape):
        raise SampleInputError(f"{name} has shape {value.shape}, expected {tuple(shape)}")
    return value


def check_unique_store_targets(layout: TensorLayout, rows: int, cols: int, view: TensorView | None = None) -> None:
    """SampleInputError when two matrix elements would be stored to one address: which write wins is
    unspecified on a GPU, so such a store cannot be compared bit for bit."""
    from ..tensor import ElementStatus, index_map
    m = index_map(layout, rows, cols, view, op="store")
    targets = m.indices[m.status == ElementStatus.IN_BOUNDS]
    if np.unique(targets).size != targets.size:
        raise SampleInputError(f"{targets.size - np.unique(targets).size} matrix elements share a store address "
                               f"with another; the surviving value would be unspecified")


# --------------------------------------------------------------------------- comparison and results


@dataclass
class Mismatch:
    case: str
    binding: str
    index: tuple
    got: object
    expected: object

    def to_dict(self) -> dict:
        return {"case": self.case, "binding": self.binding, "index": list(self.index),
                "got": self.got, "expected": self.expected}


def _scalar(value):
    value = np.asarray(value).reshape(())
    if value.dtype.kind in "iub":
        return int(value)
    f = float(value.astype(np.float64))
    return f if math.isfinite(f) else repr(f)


def _bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a).view(np.dtype(f"u{a.dtype.itemsize}"))


def compare_bits(got: np.ndarray, expected: np.ndarray, *, nan_equal: bool = False) -> np.ndarray:
    """Boolean mask of elements whose bits differ (NaN == NaN when ``nan_equal``)."""
    if got.dtype != expected.dtype or got.shape != expected.shape:
        raise SampleInputError(f"cannot compare {got.dtype}{got.shape} with {expected.dtype}{expected.shape}")
    differ = _bits(got) != _bits(expected)
    if nan_equal and (got.dtype.kind == "f" or got.dtype == ELEMENT_TYPES["BF16"].dtype):
        both_nan = np.isnan(got.astype(np.float32)) & np.isnan(expected.astype(np.float32))
        differ &= ~both_nan
    return differ


def find_mismatches(case: str, binding: Binding, got: np.ndarray, limit: int) -> tuple[int, list[Mismatch]]:
    differ = compare_bits(got, binding.expected, nan_equal=binding.nan_equal)
    count = int(differ.sum())
    found = []
    for index in np.argwhere(differ)[:limit]:
        index = tuple(int(i) for i in index)
        found.append(Mismatch(case, binding.name, index, _scalar(got[index]), _scalar(binding.expected[index])))
    return count, found


@dataclass
class SampleResult:
    """What :meth:`Sample.run` reports; ``to_dict()`` is JSON-able."""
    name: str
    status: str                    # "pass", "fail" or "skip"
    reason: str = ""
    cases: int = 0                 # cases dispatched
    failed_cases: list = field(default_factory=list)
    gpu_time_ms: float = 0.0       # sum of the dispatches' GPU timestamps
    mismatches: list = field(default_factory=list)   # the first few Mismatch
    mismatch_count: int = 0
    validation_messages: list = field(default_factory=list)
    device: str = ""
    wall_time_s: float = 0.0
    known_issues: list = field(default_factory=list)   # {"case", "issue", "reproduced", "mismatches"}

    @property
    def ok(self) -> bool:
        return self.status != "fail"

    def to_dict(self) -> dict:
        return {"name": self.name, "status": self.status, "reason": self.reason, "cases": self.cases,
                "failed_cases": list(self.failed_cases), "gpu_time_ms": self.gpu_time_ms,
                "mismatches": [m.to_dict() for m in self.mismatches], "mismatch_count": self.mismatch_count,
                "validation_messages": list(self.validation_messages), "device": self.device,
                "wall_time_s": self.wall_time_s, "known_issues": list(self.known_issues)}


# --------------------------------------------------------------------------- requirements

#: SPIR-V capability -> the device feature that allows it (Vulkan spec, "SPIR-V Environment", capabilities table).
CAPABILITY_FEATURES = {
    "Float16": "shaderFloat16", "Int8": "shaderInt8", "Int16": "shaderInt16", "Int64": "shaderInt64",
    "Float64": "shaderFloat64",
    "StorageBuffer16BitAccess": "storageBuffer16BitAccess", "StorageBuffer8BitAccess": "storageBuffer8BitAccess",
    "UniformAndStorageBuffer8BitAccess": "uniformAndStorageBuffer8BitAccess",
    "UniformAndStorageBuffer16BitAccess": "uniformAndStorageBuffer16BitAccess",
    "VulkanMemoryModel": "vulkanMemoryModel", "PhysicalStorageBufferAddresses": "bufferDeviceAddress",
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


# --------------------------------------------------------------------------- samples and registry

MAX_MISMATCHES = 8


class Sample:
    """Base class: subclasses set ``name``, ``description``, ``requires`` (and ``order``) and implement
    :meth:`cases`. Register them with :func:`register`."""
    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    requires: ClassVar[Requirements] = Requirements()
    order: ClassVar[int] = 100

    def cases(self, caps: DeviceCaps) -> list[Case]:
        raise NotImplementedError

    # -- running --------------------------------------------------------------------------------------------
    def prepared_cases(self, caps: DeviceCaps) -> list[Case]:
        """cases(caps), each checked (SampleInputError before anything is dispatched)."""
        cases = self.cases(caps)
        if not cases:
            raise SampleInputError(f"sample {self.name} produced no cases for {caps.name}")
        names = [c.name for c in cases]
        if len(set(names)) != len(names):
            raise SampleInputError(f"sample {self.name}: duplicate case names")
        for case in cases:
            case.check()
        return cases

    def check_capabilities(self, spirv: bytes, case: Case) -> None:
        """The shader's SPIR-V capabilities must be covered by the declared requirements."""
        import spirv_tools
        declared = set(self.requires.features)
        for capability in spirv_tools.reflect(spirv).capabilities:
            feature = CAPABILITY_FEATURES.get(capability)
            if feature and feature not in declared:
                raise SampleInputError(f"sample {self.name}, case {case.name}: the shader uses capability "
                                       f"{capability}, which needs feature {feature!r}; add it to requires")

    def run(self, device=None, *, validate: bool = False, instance=None,
            max_mismatches: int = MAX_MISMATCHES) -> SampleResult:
        """Dispatch every case on ``device`` (index, name substring or None: $VKCOOP_DEVICE / first GPU) and
        check it. Returns a skip result (with the reason) when no device has what ``requires`` names;
        never reports a pass for cases that were not dispatched."""
        from .. import vk
        started = time.perf_counter()
        result = SampleResult(self.name, "pass")
        try:
            gpu = vk.Device(device, extensions=self.requires.extensions, features=self.requires.features,
                            validate=validate, instance=instance)
        except (vk.MissingFeatureError, vk.NoDeviceError, vk.LayerNotFoundError) as error:
            result.status, result.reason = "skip", str(error)
            result.wall_time_s = time.perf_counter() - started
            return result
        except vk.VulkanError as error:  # e.g. the validation layer is listed but does not load
            result.status, result.reason = "fail", f"device creation failed: {error}"
            result.wall_time_s = time.perf_counter() - started
            return result
        with gpu:
            result.device = gpu.physical.name
            caps = DeviceCaps.from_physical(gpu.physical)
            cases = self.prepared_cases(caps)
            pipelines: dict = {}
            try:
                for case in cases:
                    self._run_case(gpu, case, pipelines, result, validate, max_mismatches)
            except vk.DeviceLostError as error:
                result.failed_cases.append(f"device lost: {error}")
            else:
                gpu.save_pipeline_cache()
        if result.failed_cases:
            result.status = "fail"
            result.reason = (f"{len(result.failed_cases)} of {result.cases} cases failed: "
                             + ", ".join(result.failed_cases[:6]) + ("..." if len(result.failed_cases) > 6 else ""))
        else:
            result.reason = f"{result.cases} cases bit-exact"
        result.wall_time_s = time.perf_counter() - started
        return result

    def _pipeline(self, gpu, case: Case, cache: dict):
        key = (case.shader, case.variant().defines, tuple(sorted((str(k), repr(v))
                                                                 for k, v in case.specialization.items())))
        if key not in cache:
            spirv = shader_catalog.compile_variant(case.variant())
            self.check_capabilities(spirv, case)
            cache[key] = gpu.pipeline(spirv, specialization=dict(case.specialization),
                                      name=f"{self.name}:{case.variant().label}")
        return cache[key]

    def _run_case(self, gpu, case: Case, pipelines: dict, result: SampleResult, validate: bool,
                  max_mismatches: int) -> None:
        from .. import vk
        buffers = []
        try:
            pipeline = self._pipeline(gpu, case, pipelines)
            buffers = [gpu.upload(b.data, name=f"{case.name}:{b.name}") for b in case.bindings]
            gpu_ns = gpu.run(pipeline, buffers, case.groups, case.push)
            result.cases += 1
            result.gpu_time_ms += gpu_ns / 1e6
            failed = False
            known_mismatches, known_examples = 0, []
            for binding, buffer in zip(case.bindings, buffers):
                if not binding.is_output:
                    continue
                count, found = find_mismatches(case.name, binding, buffer.read(), max_mismatches)
                if count and case.known_issue:
                    known_mismatches += count
                    known_examples.extend(m.to_dict() for m in found[:4])
                elif count:
                    failed = True
                    result.mismatch_count += count
                    room = max_mismatches - len(result.mismatches)
                    result.mismatches.extend(found[:max(room, 0)])
            if case.known_issue:
                result.known_issues.append({"case": case.name, "issue": case.known_issue,
                                            "reproduced": known_mismatches > 0, "mismatches": known_mismatches,
                                            "examples": known_examples})
            if validate:
                try:
                    gpu.check_validation()
                except vk.ValidationError as error:
                    failed = True
                    result.validation_messages.extend(str(m) for m in error.messages)
            if failed:
                result.failed_cases.append(case.name)
        except vk.VulkanError as error:
            # A Vulkan failure (pipeline creation, fence timeout, device loss) fails this case, not the process.
            result.failed_cases.append(f"{case.name} ({type(error).__name__}: {str(error).splitlines()[0]})")
            if isinstance(error, vk.DeviceLostError):
                raise
        finally:
            for buffer in buffers:
                buffer.close()


_REGISTRY: dict[str, type] = {}


def register(cls: type) -> type:
    """Class decorator adding a Sample subclass to the registry (names must be unique)."""
    if not cls.name:
        raise ValueError(f"{cls.__name__} has no name")
    if cls.name in _REGISTRY and _REGISTRY[cls.name] is not cls:
        raise ValueError(f"two samples are named {cls.name!r}")
    _REGISTRY[cls.name] = cls
    return cls


def registered() -> dict[str, type]:
    return dict(_REGISTRY)
