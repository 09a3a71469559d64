"""Random tensor-addressing cases: the compile-time part (:class:`Variant`) and the runtime state (:class:`FuzzCase`).

Every case is reproducible from ``(seed, case_id)`` alone (``generate_case``), so worker processes can
generate disjoint id ranges and a mismatch report only needs the two numbers.

What is generated:
* layouts of 1-5 dimensions with random dimensions (0 only where nothing is remapped against it),
  block sizes (> 1 only for decode loads: SPIR-V forbids them for stores), packed or explicit strides
  (padded, transposed, broadcast 0, random; uint32-wrapping ones on the portable target);
* slices with negative, out-of-range and int32-extreme offsets and spans beyond the dimension;
* every clamp mode; Undefined only with ``0 <= offset`` and ``offset + span <= dimension`` in every
  dimension, which keeps every element in bounds (span coordinates never exceed their span);
* views of 1-5 dimensions with any permutation, hasDimensions true and false, packed or explicit
  view strides, and clips (including the default span 0xFFFFFFFF with a non-zero offset);
* loads, stores, and decode loads (which record blockCoord and coordInBlock);
* component types fp16, fp32, int8, uint8, int32 with a clamp value of the component's width
  (sometimes with garbage above it: only the low bits count).
"""
from __future__ import annotations

import itertools
import random
from dataclasses import dataclass

import numpy as np

from ..tensor import ClampMode, ElementStatus, TensorLayout, TensorSpecError, TensorView, index_map

COMPONENTS = ("fp16", "fp32", "int8", "uint8", "int32")
COMPONENT_DTYPES = {"fp16": np.dtype(np.float16), "fp32": np.dtype(np.float32), "int8": np.dtype(np.int8),
                    "uint8": np.dtype(np.uint8), "int32": np.dtype(np.int32)}
KINDS = ("load", "store", "decode")
MODES = tuple(ClampMode(m) for m in range(5))
#: Matrix shape per component on coopmat2 hardware (subgroup scope, from the KHR table: A is 16 x K with
#: K = 16 for fp16 and 32 for 8-bit types; fp32/int32 are accumulators of 16 x 16). Decode loads use an
#: int32 16 x 16 accumulator whatever the block type.
HW_SHAPES = {"fp16": (16, 16), "fp32": (16, 16), "int8": (16, 32), "uint8": (16, 32), "int32": (16, 16)}
DECODE_SHAPE = (16, 16)
#: Portable-only cases draw their matrix shape from 1..PORTABLE_MAX_SIDE per side.
PORTABLE_MAX_SIDE = 20
#: The hardware target reads sources of SOURCE_ELEMENTS elements and stores into STORE_REGION-element regions;
#: cases for it keep every reference index below these bounds.
SOURCE_ELEMENTS = 1 << 16
STORE_REGION = 2048
#: Marker and previous-value patterns the hardware target uses (as the component type): clamp values avoid them.
MARK_VALUE, PREVIOUS_VALUE = 1, 2


@dataclass(frozen=True)
class Variant:
    """The compile-time part of a case: one hardware pipeline per variant.

    ``kind``: "load", "store" or "decode" (a load through decode functions that report blockCoord and
    coordInBlock); ``component``: the matrix component type (for decode: the block type; the matrix is
    int32); ``view``: None or ``(vdim, has_dimensions, permutation)``."""
    kind: str
    component: str
    ldim: int
    clamp_mode: ClampMode
    view: tuple | None = None

    @property
    def op(self) -> str:
        return "store" if self.kind == "store" else "load"

    @property
    def hw_shape(self) -> tuple[int, int]:
        return DECODE_SHAPE if self.kind == "decode" else HW_SHAPES[self.component]

    @property
    def label(self) -> str:
        view = "no view" if self.view is None else \
            f"view<{self.view[0]}, {str(self.view[1]).lower()}, {', '.join(map(str, self.view[2]))}>"
        return f"{self.kind} {self.component} LDim={self.ldim} {self.clamp_mode.name} {view}"

    def to_json(self) -> dict:
        return {"kind": self.kind, "component": self.component, "ldim": self.ldim,
                "clamp_mode": self.clamp_mode.name,
                "view": None if self.view is None else {"dim": self.view[0], "has_dimensions": self.view[1],
                                                        "permutation": list(self.view[2])}}


@dataclass(frozen=True)
class FuzzCase:
    """One generated case. It has the attributes :func:`vkcoop.portable.encode_records` reads."""
    case_id: int
    variant: Variant
    rows: int
    cols: int
    layout: TensorLayout
    view: TensorView | None = None
    explicit_stride: bool = False
    explicit_view_stride: bool = False

    @property
    def op(self) -> str:
        return self.variant.op

    @property
    def component(self) -> str:
        return self.variant.component

    def reference(self):
        """vkcoop.tensor.index_map of this case."""
        return index_map(self.layout, self.rows, self.cols, self.view, self.op)

    def check(self) -> None:
        """Raise TensorSpecError if the case is inconsistent with its variant (shrinker candidates use it)."""
        v, t = self.variant, self.layout
        if t.dim != v.ldim or t.clamp_mode != v.clamp_mode:
            raise TensorSpecError("layout does not match the variant's LDim / clamp mode")
        if (self.view is None) != (v.view is None):
            raise TensorSpecError("view presence does not match the variant")
        if self.view is not None:
            vdim, has_dimensions, permutation = v.view
            if (self.view.dim, self.view.has_dimensions, self.view.permutation) != (vdim, has_dimensions,
                                                                                   tuple(permutation)):
                raise TensorSpecError("view does not match the variant")
            if not has_dimensions and vdim != t.dim:
                raise TensorSpecError("a view without dimensions needs VDim == LDim")
            if has_dimensions and 0 in self.view.view_dimension:
                raise TensorSpecError("zero view dimension")
        if 0 in t.span:
            raise TensorSpecError("zero span")
        if v.kind != "decode" and any(b != 1 for b in t.block_size):
            raise TensorSpecError("block sizes > 1 need a decode load")
        if not self.explicit_stride and t.stride != packed_strides(t.layout_dimension, t.block_size):
            raise TensorSpecError("stride differs from the packed one but explicit_stride is False")
        if self.view is not None and self.view.has_dimensions and not self.explicit_view_stride and \
                self.view.view_stride != TensorView.create(self.view.dim, True).set_dimensions(
                    self.view.view_dimension).view_stride:
            raise TensorSpecError("view stride differs from the packed one but explicit_view_stride is False")


def packed_strides(dims, blocks) -> tuple[int, ...]:
    """setTensorLayoutDimensionNV's strides (uint32, wrapping)."""
    strides, s = [0] * len(dims), 1
    for i in range(len(dims) - 1, -1, -1):
        strides[i] = s
        s = (s * -(-dims[i] // blocks[i])) & 0xFFFFFFFF
    return tuple(strides)


def case_rng(seed: int, case_id: int) -> random.Random:
    return random.Random(f"vkcoop-fuzz:{seed}:{case_id}")


# --------------------------------------------------------------------------- variants

def random_variant(rng: random.Random) -> Variant:
    kind = rng.choices(KINDS, weights=(50, 30, 20))[0]
    ldim = rng.randint(1, 5)
    mode = rng.choice(MODES)
    view = _random_view_spec(rng, ldim)
    return Variant(kind, rng.choice(COMPONENTS), ldim, mode, view)


def _random_view_spec(rng: random.Random, ldim: int, want_view: bool | None = None):
    if want_view is None:
        want_view = rng.random() < 0.65
    if not want_view:
        return None
    has_dimensions = rng.random() < 0.5
    vdim = rng.randint(1, 5) if has_dimensions else ldim
    permutation = list(range(vdim))
    rng.shuffle(permutation)
    return (vdim, has_dimensions, tuple(permutation))


def variant_pool(seed: int, size: int) -> list[Variant]:
    """``size`` distinct variants for a hardware run, drawn from ``seed``: kinds, components, LDim and
    clamp modes are dealt round-robin from shuffled lists so that every value appears (given size >= 5)."""
    if size < 1:
        raise ValueError(f"variants must be >= 1, got {size}")
    rng = random.Random(f"vkcoop-fuzz-pool:{seed}")

    def deal(values):
        values = list(values)
        out = []
        while len(out) < size:
            rng.shuffle(values)
            out += values
        return out[:size]

    kinds = deal(["load", "load", "store", "decode"])
    components, ldims, modes = deal(COMPONENTS), deal(range(1, 6)), deal(MODES)
    views = deal([False, True, True])
    pool: list[Variant] = []
    seen = set()
    for i in range(size):
        for _attempt in range(20):
            v = Variant(kinds[i], components[i], ldims[i], modes[i], _random_view_spec(rng, ldims[i], views[i]))
            if v not in seen:
                break
        seen.add(v)
        pool.append(v)
    return pool


# --------------------------------------------------------------------------- runtime state

def _clamp_value(rng: random.Random, variant: Variant, hw: bool) -> int:
    """A clamp value matched to the matrix component's width; on hardware it avoids the marker patterns."""
    component = "int32" if variant.kind == "decode" else variant.component
    dtype = COMPONENT_DTYPES[component]
    width = 8 * dtype.itemsize
    reserved = {_bits(MARK_VALUE, dtype), _bits(PREVIOUS_VALUE, dtype)} if hw else set()
    for _ in range(100):
        if dtype.kind == "f":
            value = rng.choice([-0.5, 0.25, -3.0, 1.5, 100.0, -2048.0, rng.uniform(-1e3, 1e3)])
            low = _bits(value, dtype)
        else:
            low = rng.getrandbits(width)
        if low not in reserved:
            break
    high = rng.getrandbits(32 - width) << width if width < 32 and rng.random() < 0.3 else 0
    return high | low


def _bits(value, dtype: np.dtype) -> int:
    return int.from_bytes(np.asarray(value, dtype=dtype).reshape(()).tobytes(), "little")


def _dimension(rng: random.Random) -> int:
    r = rng.random()
    if r < 0.6:
        return rng.randint(1, 6)
    if r < 0.9:
        return rng.randint(7, 20)
    return rng.randint(21, 64)


def _offset(rng: random.Random, L: int) -> int:
    r = rng.random()
    if r < 0.3:
        return 0
    if r < 0.75:
        return rng.randint(-L - 4, L + 4)
    if r < 0.9:
        return rng.randint(-200, 200)
    return rng.choice([-(1 << 31), (1 << 31) - 1, -(1 << 31) + rng.randint(0, 100), (1 << 31) - 1 - rng.randint(0, 100)])


def _strides(rng: random.Random, dims, blocks, hw: bool) -> tuple[tuple[int, ...], bool]:
    packed = packed_strides(dims, blocks)
    r = rng.random()
    n = len(dims)
    if r < 0.45:
        return packed, rng.random() < 0.2          # sometimes set explicitly to the same values
    if r < 0.6:                                    # padded rows
        return tuple(s * rng.randint(1, 3) + (rng.randint(0, 3) if i < n - 1 else 0)
                     for i, s in enumerate(packed)), True
    if r < 0.75:                                   # another dimension order (transposed storage)
        order = list(range(n))
        rng.shuffle(order)
        strides, s = [0] * n, 1
        for i in reversed(order):
            strides[i] = s
            s *= -(-dims[i] // blocks[i])
        return tuple(strides), True
    if r < 0.9 or hw:                              # small random strides, 0 broadcasts
        return tuple(rng.randint(0, 40) for _ in range(n)), True
    return tuple(rng.choice([0xFFFFFFFF, 0x80000000, rng.getrandbits(32), rng.randint(0, 9)])
                 for _ in range(n)), True          # uint32 wraparound (portable target only)


def _clip(rng: random.Random, rows: int, cols: int):
    if rng.random() < 0.5:
        return None

    def pair(extent):
        offset = rng.choice([0, 0, rng.randint(0, extent + 1)])
        span = rng.choice([0xFFFFFFFF, rng.randint(0, extent + 2), rng.randint(1, extent)])
        return offset, span
    return (*pair(rows), *pair(cols))


def _build(rng: random.Random, case_id: int, variant: Variant, rows: int, cols: int, hw: bool) -> FuzzCase:
    n = variant.ldim
    mode = variant.clamp_mode
    remaps_loads = variant.op == "load" and mode in (ClampMode.ClampToEdge, ClampMode.Repeat,
                                                     ClampMode.RepeatMirrored)
    dims = [_dimension(rng) for _ in range(n)]
    if mode not in (ClampMode.Undefined,) and not remaps_loads and rng.random() < 0.04:
        dims[rng.randrange(n)] = 0                  # every element out of bounds
    blocks = [1] * n
    if variant.kind == "decode":
        blocks = [rng.choice([1, 1, 2, 3, 4, rng.randint(5, 8)]) for _ in range(n)]
    layout = TensorLayout.create(n, mode).set_block_size(blocks).set_dimension(dims)
    strides, explicit = _strides(rng, dims, blocks, hw)
    if explicit:
        layout = layout.set_stride(strides)
    if mode == ClampMode.Undefined:
        spans = [rng.randint(1, L) for L in dims]
        offsets = [rng.randint(0, L - s) for L, s in zip(dims, spans)]
    else:
        offsets = [_offset(rng, L) for L in dims]
        spans = [rng.choice([rng.randint(1, max(1, L + 4)), rng.randint(1, 64), max(1, L)]) for L in dims]
    layout = layout.slice(offsets, spans).set_clamp_value(_clamp_value(rng, variant, hw))

    view = None
    explicit_view = False
    if variant.view is not None:
        vdim, has_dimensions, permutation = variant.view
        view = TensorView.create(vdim, has_dimensions, permutation)
        if has_dimensions:
            view = view.set_dimensions([rng.choice([rng.randint(1, 8), rng.randint(1, 20), 1, 2, 4])
                                        for _ in range(vdim)])
            if rng.random() < 0.4:
                explicit_view = True
                view = view.set_stride([rng.choice([0, 1, rng.randint(1, 64), s])
                                        for s in view.view_stride])
        clip = _clip(rng, rows, cols)
        if clip is not None:
            view = view.set_clip(*clip)
    return FuzzCase(case_id, variant, rows, cols, layout, view, explicit, explicit_view)


def hw_violation(case: FuzzCase, status: np.ndarray, indices: np.ndarray) -> str | None:
    """Why the hardware target cannot take ``case`` (undefined elements, indices beyond its buffers), or None."""
    if (status == ElementStatus.UNDEFINED).any():
        return "undefined elements"
    bound = STORE_REGION if case.variant.kind == "store" else SOURCE_ELEMENTS
    valid = status == ElementStatus.IN_BOUNDS
    if valid.any() and int(indices[valid].max()) >= bound:
        return f"an index >= {bound}"
    return None


def generate_case(seed: int, case_id: int, variant: Variant | None = None, *, hw: bool = False,
                  with_reference: bool = False):
    """The case ``case_id`` of run ``seed`` (deterministic). ``variant`` fixes the compile-time part
    (hardware runs draw it from a :func:`variant_pool`); ``hw`` keeps the case within what the hardware
    target can check (no undefined elements, indices inside its buffers, no uint32-wrapping strides).
    With ``with_reference`` returns ``(case, index_map)``."""
    rng = case_rng(seed, case_id)
    if variant is None:
        variant = random_variant(rng)
    if hw or variant.kind == "decode" or rng.random() < 0.5:
        rows, cols = variant.hw_shape
    else:
        rows, cols = rng.randint(1, PORTABLE_MAX_SIDE), rng.randint(1, PORTABLE_MAX_SIDE)
    for attempt in itertools.count():
        case = _build(rng, case_id, variant, rows, cols, hw)
        reference = case.reference()
        if (reference.status == ElementStatus.UNDEFINED).any():
            raise AssertionError(f"generator bug: case {seed}:{case_id} has undefined elements")  # by construction
        if not hw or hw_violation(case, reference.status, reference.indices) is None:
            break
        if attempt >= 30:   # give up on this shape of case: a small packed one always fits
            case = _fallback(case)
            reference = case.reference()
            break
    return (case, reference) if with_reference else case


def _fallback(case: FuzzCase) -> FuzzCase:
    t = case.layout
    n = t.dim
    dims = tuple(min(d, 4) or 1 for d in t.layout_dimension)
    layout = TensorLayout.create(n, t.clamp_mode).set_block_size(t.block_size).set_dimension(dims)
    if t.clamp_mode == ClampMode.Undefined:
        layout = layout.set_clamp_value(t.clamp_value)
    else:
        layout = layout.slice([max(-4, min(4, o)) for o in t.offset], dims).set_clamp_value(t.clamp_value)
    view = case.view
    explicit_view = case.explicit_view_stride
    if view is not None and view.has_dimensions:
        view = view.set_dimensions([min(d, 4) for d in view.view_dimension])
        explicit_view = False
    return FuzzCase(case.case_id, case.variant, case.rows, case.cols, layout, view, False, explicit_view)
