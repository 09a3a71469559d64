"""Tensor layout and tensor view state, and the builders that produce it.

Spec: SPV_NV_tensor_addressing section 3.X "Tensor Layout and View" (the logical
state structs) and the OpCreateTensorLayoutNV ... OpTensorViewSetClipNV
instructions; GL_NV_cooperative_matrix2 section 4.1.X "Tensor Layout Types"
(the GLSL built-ins createTensorLayoutNV ... setTensorViewClipNV).

Every builder returns a *new* value (the spec's instructions "operate by copying
existing object state and updating the requested state"); the order of calls
matters because some builders reset other state to defaults.
"""
from __future__ import annotations

import dataclasses
import enum
import operator
from dataclasses import dataclass
from typing import Sequence

from ..errors import InputError, InputTypeError

MAX_DIM = 5
UINT32_MAX = 0xFFFFFFFF
INT32_MIN = -(1 << 31)
INT32_MAX = (1 << 31) - 1


class TensorSpecError(InputError):
    """Invalid tensor layout/view parameter or state (a ValueError); the message names the parameter."""


class TensorTypeError(TensorSpecError, InputTypeError):
    """A tensor parameter of the wrong type (also a TypeError): a float or bool where an integer belongs."""


class UndefinedBehaviorError(TensorSpecError):
    """A load/store would hit behaviour the spec leaves undefined (e.g. Undefined clamp mode out of bounds)."""


class ClampMode(enum.IntEnum):
    """SPIR-V *Tensor Clamp Mode* (SPV_NV_tensor_addressing 3.X) / GLSL gl_CooperativeMatrixClampMode*NV.

    SPIR-V calls mode 4 ``RepeatMirrored``, GLSL calls it ``MirrorRepeat``; both
    spellings (and UPPER_CASE aliases) name the same member.
    """

    Undefined = 0
    Constant = 1
    ClampToEdge = 2
    Repeat = 3
    RepeatMirrored = 4
    # aliases (same values)
    MirrorRepeat = 4
    UNDEFINED = 0
    CONSTANT = 1
    CLAMP_TO_EDGE = 2
    REPEAT = 3
    REPEAT_MIRRORED = 4
    MIRROR_REPEAT = 4


# GLSL constant names (GL_NV_cooperative_matrix2, createTensorLayoutNV).
gl_CooperativeMatrixClampModeUndefinedNV = ClampMode.Undefined
gl_CooperativeMatrixClampModeConstantNV = ClampMode.Constant
gl_CooperativeMatrixClampModeClampToEdgeNV = ClampMode.ClampToEdge
gl_CooperativeMatrixClampModeRepeatNV = ClampMode.Repeat
gl_CooperativeMatrixClampModeMirrorRepeatNV = ClampMode.RepeatMirrored


class ElementStatus(enum.IntEnum):
    """What a load or store does with one matrix element.

    IN_BOUNDS        the element is loaded from / stored to ``buffer[index]``; for
                     ClampToEdge/Repeat/RepeatMirrored loads the index is the one
                     after remapping the out-of-bounds coordinate.
    CLAMP_VALUE      load only: the element is the layout's clampValue (Constant mode).
    DISCARDED        store only: the element is out of bounds and not written
                     (every clamp mode except Undefined).
    SKIPPED_BY_CLIP  outside the view's clip region: a load keeps the previous
                     value of the element, a store writes nothing.
    UNDEFINED        the spec leaves the result undefined (Undefined clamp mode out
                     of bounds, or remapping against a zero layout dimension).
    """

    IN_BOUNDS = 0
    CLAMP_VALUE = 1
    DISCARDED = 2
    SKIPPED_BY_CLIP = 3
    UNDEFINED = 4


# --------------------------------------------------------------------------- validation helpers

def _check_dim_count(dim, name: str) -> int:
    if isinstance(dim, bool) or not isinstance(dim, int):
        raise TensorTypeError(f"{name} must be an int in 1..{MAX_DIM}, got {dim!r}")
    if not 1 <= dim <= MAX_DIM:
        raise TensorSpecError(f"{name} must be in 1..{MAX_DIM} (the spec's [1,5]), got {dim}")
    return dim


def _as_int(value, name: str) -> int:
    # numpy integers are fine; bools and floats are almost certainly mistakes.
    if isinstance(value, bool):
        raise TensorTypeError(f"{name} must be an integer, got bool {value!r}")
    try:
        return operator.index(value)
    except TypeError:
        raise TensorTypeError(f"{name} must be an integer, got {type(value).__name__} {value!r}") from None


def _uint32(value, name: str) -> int:
    v = _as_int(value, name)
    if not 0 <= v <= UINT32_MAX:
        raise TensorSpecError(f"{name} must fit uint32 (0..0xFFFFFFFF), got {v}")
    return v


def _int32(value, name: str) -> int:
    v = _as_int(value, name)
    if not INT32_MIN <= v <= INT32_MAX:
        raise TensorSpecError(f"{name} must fit int32 ({INT32_MIN}..{INT32_MAX}), got {v}")
    return v


def _wrap_int32(v: int) -> int:
    v &= UINT32_MAX
    return v - (1 << 32) if v & 0x80000000 else v


def _values(args: tuple, count: int, name: str, checker) -> tuple[int, ...]:
    """Accept f(a, b, c) or f((a, b, c)); check there are exactly `count` values."""
    if len(args) == 1 and not isinstance(args[0], int) and hasattr(args[0], "__len__"):
        try:
            args = tuple(args[0])
        except TypeError:  # e.g. a 0-d numpy array
            raise TensorTypeError(f"{name} must be integers or one sequence of them, got {args[0]!r}") from None
    if len(args) != count:
        raise TensorSpecError(f"{name} needs exactly {count} values (one per dimension), got {len(args)}")
    return tuple(checker(a, f"{name}[{i}]") for i, a in enumerate(args))


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


# --------------------------------------------------------------------------- TensorLayout

#: vkcoop.tensor.present, registered when the package is imported: it draws layouts and views (text, PNG,
#: HTML) from the reference above this module, so this module does not import it.
PRESENTER = None


@dataclass(frozen=True)
class TensorLayout:
    """tensorLayoutNV<Dim, Mode> (SPV_NV_tensor_addressing 3.X): exactly the spec's logical state.

    ``dim`` is LDim, ``clamp_mode`` the static clamp mode; the tuples each hold
    ``dim`` entries, dimension 0 outermost. ``offset`` entries are int32, every
    other field is uint32 (``clamp_value`` is the raw 32-bit pattern).
    Build with :meth:`create` (or ``createTensorLayoutNV``) and the ``set_*`` /
    :meth:`slice` builders; the constructor checks ranges but applies no defaults.
    """

    dim: int
    clamp_mode: ClampMode
    block_size: tuple[int, ...]
    layout_dimension: tuple[int, ...]
    stride: tuple[int, ...]
    offset: tuple[int, ...]
    span: tuple[int, ...]
    clamp_value: int = 0

    def __post_init__(self):
        _check_dim_count(self.dim, "layout dim")
        # ClampMode(1.0) and ClampMode(True) would both be Constant: only integers name a mode.
        mode = _as_int(self.clamp_mode, "clamp_mode")
        try:
            object.__setattr__(self, "clamp_mode", ClampMode(mode))
        except ValueError:
            raise TensorSpecError(f"clamp_mode must be one of {[m.value for m in ClampMode]}, "
                                  f"got {self.clamp_mode!r}") from None
        for field, checker in (("block_size", _uint32), ("layout_dimension", _uint32),
                               ("stride", _uint32), ("offset", _int32), ("span", _uint32)):
            object.__setattr__(self, field, _values((getattr(self, field),), self.dim, field, checker))
        if any(b == 0 for b in self.block_size):
            raise TensorSpecError(f"block_size must be >= 1 in every dimension, got {self.block_size}")
        object.__setattr__(self, "clamp_value", _uint32(self.clamp_value, "clamp_value"))

    # ---- builders (Pythonic spelling) ----------------------------------------------------
    @classmethod
    def create(cls, dim: int, clamp_mode: ClampMode | int = ClampMode.Undefined) -> "TensorLayout":
        """OpCreateTensorLayoutNV / createTensorLayoutNV: layoutDimension, stride, span and
        offset are zero, blockSize is one, clampValue is zero."""
        dim = _check_dim_count(dim, "dim")
        zeros = (0,) * dim
        return cls(dim, clamp_mode, (1,) * dim, zeros, zeros, zeros, zeros, 0)

    def set_block_size(self, *block_size) -> "TensorLayout":
        """OpTensorLayoutSetBlockSizeNV / setTensorLayoutBlockSizeNV: copy with blockSize set.
        Strides are *not* recomputed; set the block size before the dimensions."""
        sizes = _values(block_size, self.dim, "block_size", _uint32)
        if any(b == 0 for b in sizes):
            raise TensorSpecError(f"block_size must be >= 1 in every dimension, got {sizes}")
        return dataclasses.replace(self, block_size=sizes)

    def set_dimension(self, *dimension) -> "TensorLayout":
        """OpTensorLayoutSetDimensionNV / setTensorLayoutDimensionNV: layoutDimension and span
        are set to the dimensions, offset to zero, and the packed stride
        ``stride[N-1] = 1; stride[i] = stride[i+1] * ceil(dim[i+1] / blockSize[i+1])``
        (uint32 arithmetic, wrapping)."""
        dims = _values(dimension, self.dim, "dimension", _uint32)
        strides = [0] * self.dim
        s = 1
        for i in range(self.dim - 1, -1, -1):
            strides[i] = s
            s = (s * _ceil_div(dims[i], self.block_size[i])) & UINT32_MAX
        return dataclasses.replace(self, layout_dimension=dims, span=dims,
                                   offset=(0,) * self.dim, stride=tuple(strides))

    def set_stride(self, *stride) -> "TensorLayout":
        """OpTensorLayoutSetStrideNV / setTensorLayoutStrideNV: copy with stride set (in blocks
        when blockSize > 1). The spec's "must be at least" rule is reported by
        :meth:`usage_violations`, not enforced, so deliberately odd strides can be studied."""
        return dataclasses.replace(self, stride=_values(stride, self.dim, "stride", _uint32))

    def slice(self, offsets: Sequence[int], spans: Sequence[int]) -> "TensorLayout":
        """OpTensorLayoutSliceNV / sliceTensorLayoutNV: offset[i] += offsets[i] (int32, wrapping),
        span[i] = spans[i]."""
        offs = _values((offsets,), self.dim, "offsets", _int32)
        sps = _values((spans,), self.dim, "spans", _uint32)
        return dataclasses.replace(
            self, offset=tuple(_wrap_int32(a + b) for a, b in zip(self.offset, offs)), span=sps)

    def set_clamp_value(self, value: int) -> "TensorLayout":
        """OpTensorLayoutSetClampValueNV / setTensorLayoutClampValueNV: copy with the raw 32-bit
        clampValue. Use :func:`vkcoop.tensor.clamp_value_bits` to get the bits of e.g. -0.5 as fp16."""
        return dataclasses.replace(self, clamp_value=_uint32(value, "clamp_value"))

    # ---- checks -----------------------------------------------------------------------------
    def usage_violations(self) -> list[str]:
        """The spec's valid-usage rules this layout breaks (empty when none):
        stride[i] >= stride[i+1] * ceil(layoutDimension[i+1] / blockSize[i+1])."""
        problems = []
        for i in range(self.dim - 1):
            need = self.stride[i + 1] * _ceil_div(self.layout_dimension[i + 1], self.block_size[i + 1])
            if self.stride[i] < need:
                problems.append(f"stride[{i}]={self.stride[i]} < stride[{i + 1}]*ceil(layoutDimension[{i + 1}]"
                                f"/blockSize[{i + 1}]) = {need}")
        return problems

    # ---- looking at it (vkcoop.tensor.explain; matplotlib only for pictures) ---------------------
    def explain(self, rows: int | None = None, cols: int | None = None, view: "TensorView | None" = None,
                op: str = "load", decode: bool = False) -> str:
        """Text grid of the element each cell of a rows x cols matrix reads (or writes), with a legend and
        this state; the shape defaults to one covering the span."""
        return PRESENTER.explain_for(self, view, rows, cols, op, decode)

    def _repr_png_(self):
        return PRESENTER.repr_png(self)

    def _repr_html_(self):
        return PRESENTER.repr_html(self)


# --------------------------------------------------------------------------- TensorView

@dataclass(frozen=True)
class TensorView:
    """tensorViewNV<Dim, hasDimensions, p0..p<Dim-1>> (SPV_NV_tensor_addressing 3.X).

    ``dim`` is VDim; ``permutation`` must be a permutation of range(dim).
    The clip fields are uint32; the default clip (from :meth:`create`) is offsets 0,
    spans 0xFFFFFFFF, i.e. nothing is clipped.
    """

    dim: int
    has_dimensions: bool
    permutation: tuple[int, ...]
    view_dimension: tuple[int, ...]
    view_stride: tuple[int, ...]
    clip_row_offset: int = 0
    clip_row_span: int = UINT32_MAX
    clip_col_offset: int = 0
    clip_col_span: int = UINT32_MAX

    def __post_init__(self):
        _check_dim_count(self.dim, "view dim")
        if not isinstance(self.has_dimensions, (bool, int)) or self.has_dimensions not in (0, 1):
            raise TensorSpecError(f"has_dimensions must be a bool, got {self.has_dimensions!r}")
        object.__setattr__(self, "has_dimensions", bool(self.has_dimensions))
        perm = _values((self.permutation,), self.dim, "permutation", _as_int)
        if sorted(perm) != list(range(self.dim)):
            raise TensorSpecError(f"permutation must be a permutation of 0..{self.dim - 1}, got {perm}")
        object.__setattr__(self, "permutation", perm)
        for field in ("view_dimension", "view_stride"):
            object.__setattr__(self, field, _values((getattr(self, field),), self.dim, field, _uint32))
        for field in ("clip_row_offset", "clip_row_span", "clip_col_offset", "clip_col_span"):
            object.__setattr__(self, field, _uint32(getattr(self, field), field))

    @classmethod
    def create(cls, dim: int, has_dimensions: bool = False,
               permutation: Sequence[int] | None = None) -> "TensorView":
        """OpCreateTensorViewNV / createTensorViewNV: viewDimension and viewStride are zero,
        clip offsets 0 and clip spans 0xFFFFFFFF; permutation defaults to the identity."""
        dim = _check_dim_count(dim, "dim")
        # __post_init__ checks the permutation (a bool or a scalar is a TensorTypeError/TensorSpecError there)
        perm = tuple(range(dim)) if permutation is None else permutation
        zeros = (0,) * dim
        return cls(dim, has_dimensions, perm, zeros, zeros)

    def set_dimensions(self, *dimension) -> "TensorView":
        """OpTensorViewSetDimensionNV / setTensorViewDimensionsNV: viewDimension set, viewStride
        packed: ``viewStride[N-1] = 1``, ``viewStride[i]`` = product of dim[i+1..N-1] (uint32, wrapping)."""
        dims = _values(dimension, self.dim, "dimension", _uint32)
        strides = [0] * self.dim
        s = 1
        for i in range(self.dim - 1, -1, -1):
            strides[i] = s
            s = (s * dims[i]) & UINT32_MAX
        return dataclasses.replace(self, view_dimension=dims, view_stride=tuple(strides))

    def set_stride(self, *stride) -> "TensorView":
        """OpTensorViewSetStrideNV / setTensorViewStrideNV: copy with viewStride set.
        Only used when has_dimensions is True (otherwise strides come from the layout span)."""
        return dataclasses.replace(self, view_stride=_values(stride, self.dim, "stride", _uint32))

    def set_clip(self, row_offset: int, row_span: int, col_offset: int, col_span: int) -> "TensorView":
        """OpTensorViewSetClipNV / setTensorViewClipNV: copy with the four clip values set."""
        return dataclasses.replace(
            self, clip_row_offset=_uint32(row_offset, "clip_row_offset"),
            clip_row_span=_uint32(row_span, "clip_row_span"),
            clip_col_offset=_uint32(col_offset, "clip_col_offset"),
            clip_col_span=_uint32(col_span, "clip_col_span"))

    # ---- looking at it (vkcoop.tensor.explain) ----------------------------------------------------
    def explain(self, layout: TensorLayout | None = None, rows: int | None = None, cols: int | None = None,
                op: str = "load", decode: bool = False) -> str:
        """Text grid of what this view does with ``layout`` (default: a packed layout of the view's size)."""
        return PRESENTER.explain_for(layout, self, rows, cols, op, decode)

    def _repr_png_(self):
        return PRESENTER.repr_png(None, self)

    def _repr_html_(self):
        return PRESENTER.repr_html(None, self)


# --------------------------------------------------------------------------- GLSL spellings

def createTensorLayoutNV(Dim: int, Mode: ClampMode | int = ClampMode.Undefined) -> TensorLayout:
    """GLSL createTensorLayoutNV(Dim, Mode) -> :meth:`TensorLayout.create`."""
    return TensorLayout.create(Dim, Mode)


def setTensorLayoutBlockSizeNV(t: TensorLayout, *blockSize: int) -> TensorLayout:
    """GLSL setTensorLayoutBlockSizeNV(t, blockSize0, ...) -> :meth:`TensorLayout.set_block_size`."""
    return t.set_block_size(*blockSize)


def setTensorLayoutDimensionNV(t: TensorLayout, *dim: int) -> TensorLayout:
    """GLSL setTensorLayoutDimensionNV(t, dim0, ...) -> :meth:`TensorLayout.set_dimension`."""
    return t.set_dimension(*dim)


def setTensorLayoutStrideNV(t: TensorLayout, *s: int) -> TensorLayout:
    """GLSL setTensorLayoutStrideNV(t, s0, ...) -> :meth:`TensorLayout.set_stride`."""
    return t.set_stride(*s)


def sliceTensorLayoutNV(t: TensorLayout, *offset_span_pairs: int) -> TensorLayout:
    """GLSL sliceTensorLayoutNV(t, offset0, span0, offset1, span1, ...) -> :meth:`TensorLayout.slice`."""
    if len(offset_span_pairs) != 2 * t.dim:
        raise TensorSpecError(f"sliceTensorLayoutNV needs {2 * t.dim} values (offset, span per dimension), "
                              f"got {len(offset_span_pairs)}")
    return t.slice(offset_span_pairs[0::2], offset_span_pairs[1::2])


def setTensorLayoutClampValueNV(t: TensorLayout, value: int) -> TensorLayout:
    """GLSL setTensorLayoutClampValueNV(t, value) -> :meth:`TensorLayout.set_clamp_value`."""
    return t.set_clamp_value(value)


def createTensorViewNV(Dim: int, hasDimensions: bool = False, *permutation: int) -> TensorView:
    """GLSL createTensorViewNV(Dim, hasDimensions=false, p0=0, ..., p<Dim-1>=Dim-1).

    Either give all Dim permutation values or none (GLSL's defaults make a partial
    list legal only when the trailing defaults complete a permutation; this
    mirror fills them in the same way)."""
    dim = _check_dim_count(Dim, "Dim")
    if len(permutation) > dim:
        raise TensorSpecError(f"createTensorViewNV got {len(permutation)} permutation values for Dim={dim}")
    perm = tuple(permutation) + tuple(range(len(permutation), dim))
    return TensorView.create(dim, hasDimensions, perm)


def setTensorViewDimensionsNV(v: TensorView, *dim: int) -> TensorView:
    """GLSL setTensorViewDimensionsNV(v, dim0, ...) -> :meth:`TensorView.set_dimensions`."""
    return v.set_dimensions(*dim)


def setTensorViewStrideNV(v: TensorView, *s: int) -> TensorView:
    """GLSL setTensorViewStrideNV(v, s0, ...) -> :meth:`TensorView.set_stride`."""
    return v.set_stride(*s)


def setTensorViewClipNV(v: TensorView, clipRowOffset: int, clipRowSpan: int,
                        clipColOffset: int, clipColSpan: int) -> TensorView:
    """GLSL setTensorViewClipNV(v, clipRowOffset, clipRowSpan, clipColOffset, clipColSpan)."""
    return v.set_clip(clipRowOffset, clipRowSpan, clipColOffset, clipColSpan)
