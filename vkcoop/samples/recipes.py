"""Inputs of sample cases: tensor layouts and views described once for the shader and the reference, and
exactly representable value patterns.

Tensor layouts and views are described by :class:`LayoutRecipe` / :class:`ViewRecipe`, which produce both the
record words the shader reads (``shaders/include/vkcoop/records.glsl``) and the :class:`vkcoop.tensor.TensorLayout`
/ ``TensorView`` the reference uses, built by the same sequence of builder calls.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..tensor import ClampMode, TensorLayout, TensorView
from .caps import ELEMENT_TYPES, SampleInputError

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


def split_extent(total: int, parts: int) -> tuple[int, ...]:
    """``parts`` factors of ``total`` (outermost first), as even as the prime factors allow."""
    factors = []
    n, p = total, 2
    while n > 1:
        while n % p == 0:
            factors.append(p)
            n //= p
        p += 1
    spans = [1] * parts
    for f in sorted(factors, reverse=True):
        spans[spans.index(min(spans))] *= f
    return tuple(sorted(spans))


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

