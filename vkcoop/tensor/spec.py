"""The spec's addressing pseudo-code, one Python function per spec function, for one element.

Source: SPV_NV_cooperative_matrix2 section 3.X "Tensor Layout and View" (identical
pseudo-code in GL_NV_cooperative_matrix2 section 8.X "Cooperative Matrix Functions").
Each function is named after its pseudo-code counterpart in snake_case and can be
checked against the spec line by line. The C++ integer widths are followed exactly:
``uint32_t`` arithmetic wraps modulo 2**32, ``int32_t c`` wraps to the signed range,
and remainders use OpSMod (floor modulo, the sign of the divisor).

Where the pseudo-code "terminates the index calculation" (clip, Constant clamp,
store discard) or reaches "undefined behavior", these functions return an
:class:`ElementStatus` instead of an index; see ``docs/spec-notes.md`` for every
decision taken where the spec text is wrong or silent.
"""
from __future__ import annotations

from typing import NamedTuple

from .state import (ClampMode, ElementStatus, TensorLayout, TensorSpecError, TensorTypeError, TensorView,
                    UINT32_MAX, _as_int, _int32, _uint32, _values, _wrap_int32)

Coord = tuple  # tuple[int, ...] of length LDim or VDim

LOAD = "load"
STORE = "store"


def _check_op(op: str) -> str:
    if op not in (LOAD, STORE):
        raise TensorSpecError(f"op must be 'load' or 'store', got {op!r}")
    return op


def _check_layout(t) -> TensorLayout:
    if not isinstance(t, TensorLayout):
        raise TensorTypeError(f"t (the tensor layout) must be a TensorLayout, got {type(t).__name__}")
    return t


def _check_view(v) -> TensorView:
    if not isinstance(v, TensorView):
        raise TensorTypeError(f"v (the tensor view) must be a TensorView, got {type(v).__name__}")
    return v


def _coord(values, dim: int, name: str) -> Coord:
    """A coordinate of ``dim`` uint32 entries (one sequence)."""
    return _values((values,), dim, name, _uint32)


def smod(a: int, b: int) -> int:
    """OpSMod: signed remainder whose sign follows the divisor (floor modulo for b > 0).

    The spec says "remainders are computed as defined in OpSMod"; Python's ``%`` is
    exactly that. ``b == 0`` is undefined in SPIR-V and raises TensorSpecError here."""
    a, b = _as_int(a, "a"), _as_int(b, "b")
    if b == 0:
        raise TensorSpecError("smod: the divisor b is 0 (OpSMod by zero is undefined)")
    return a % b


class TensorCoord(NamedTuple):
    """Result of :func:`span_coord_to_tensor_coord`: status plus the decode-function arguments.

    ``block_coord`` / ``coord_in_block`` are ``None`` unless status is IN_BOUNDS."""
    status: ElementStatus
    block_coord: Coord | None
    coord_in_block: Coord | None


class ElementAddress(NamedTuple):
    """Result of matrix_coord_to_tensor_element(_with_view) for one matrix element.

    ``index`` (uint32, in elements from the buffer base) and the coordinates are
    ``None`` unless status is IN_BOUNDS."""
    status: ElementStatus
    index: int | None
    block_coord: Coord | None
    coord_in_block: Coord | None


def _check_spans(t: TensorLayout) -> None:
    for i, s in enumerate(t.span):
        if s == 0:
            raise TensorSpecError(f"layout span[{i}] is 0 (division by zero in linearToSpanCoord); "
                                  f"call set_dimension or slice first")


def check_view_matches(t: TensorLayout, v: TensorView) -> None:
    """Raise TensorSpecError if ``v`` cannot be used with ``t``.

    With hasDimensions false the view's dimensions *are* the layout span, so VDim must
    equal LDim; with hasDimensions true every viewDimension must be non-zero."""
    _check_layout(t)
    _check_view(v)
    if not v.has_dimensions and v.dim != t.dim:
        raise TensorSpecError(f"view dim ({v.dim}) must equal layout dim ({t.dim}) when the view's "
                              f"has_dimensions is False (its dimensions are the layout span)")
    if v.has_dimensions:
        for i, d in enumerate(v.view_dimension):
            if d == 0:
                raise TensorSpecError(f"view_dimension[{i}] is 0 (division by zero in linearToViewCoord); "
                                      f"call set_dimensions first")


# --------------------------------------------------------------------------- clamp modes

def clamp_coordinate(mode: ClampMode, c: int, layout_dimension: int) -> int | None:
    """Remap an out-of-bounds coordinate ``c`` (int32) for a *load* (spanCoordToTensorCoord switch).

    Returns the in-bounds coordinate, or ``None`` when the result is undefined
    (Undefined mode, or a zero layout dimension in the remapping modes). Constant
    mode is not a remapping and is handled by the caller.

    * ClampToEdge: ``min(max(c, 0), L-1)``.
    * Repeat: ``c smod L``.
    * RepeatMirrored: ``c = c smod (2L-2); c = (c >= L) ? 2L-2-c : c`` -- the spec's
      second line says ``dim`` (the loop variable) where it means L (erratum).
      L == 1 makes the period zero; the reference returns 0, the only in-bounds
      coordinate (erratum/ambiguity, see docs/spec-notes.md).
    """
    mode = _as_int(mode, "mode")
    if mode not in ClampMode._value2member_map_:
        raise TensorSpecError(f"mode must be a ClampMode (0..4), got {mode!r}")
    c, L = _int32(c, "c"), _uint32(layout_dimension, "layout_dimension")
    if mode == ClampMode.ClampToEdge:
        return None if L == 0 else min(max(c, 0), L - 1)
    if mode == ClampMode.Repeat:
        return None if L == 0 else smod(c, L)
    if mode == ClampMode.RepeatMirrored:
        if L == 0:
            return None
        if L == 1:
            return 0
        period = 2 * L - 2
        c = smod(c, period)
        return period - c if c >= L else c
    return None  # Undefined (Constant never reaches here)


# --------------------------------------------------------------------------- layout-only path

def matrix_coord_to_linear(t: TensorLayout, row: int, col: int, N: int) -> int:
    """matrixCoordToLinear(t, row, col, N): ``row * N + col`` in uint32."""
    _check_layout(t)
    row, col, N = _check_matrix_coord(row, col, N)
    return (row * N + col) & UINT32_MAX


def linear_to_span_coord(t: TensorLayout, index: int) -> Coord:
    """linearToSpanCoord(t, index): peel span coordinates innermost first;
    the outermost coordinate wraps modulo span[0] when the index exceeds the span."""
    _check_spans(_check_layout(t))
    index = _uint32(index, "index")
    span_coord = [0] * t.dim
    for dim in range(t.dim - 1, -1, -1):
        span_coord[dim] = index % t.span[dim]
        index //= t.span[dim]
    return tuple(span_coord)


def span_coord_to_tensor_coord(t: TensorLayout, span_coord: Coord, op: str = LOAD) -> TensorCoord:
    """spanCoordToTensorCoord(t, spanCoord) for a load or store.

    ``c = spanCoord[dim] + offset[dim]`` is computed as int32 (wrapping). An
    out-of-bounds c (``c < 0 || c >= layoutDimension``) gives, for a store in any
    mode but Undefined: DISCARDED; for a load: CLAMP_VALUE (Constant), a remapped c
    (ClampToEdge / Repeat / RepeatMirrored, see :func:`clamp_coordinate`) or
    UNDEFINED (Undefined). Then ``coordInBlock = c % blockSize`` and
    ``blockCoord = c / blockSize``."""
    _check_op(op)
    span_coord = _coord(span_coord, _check_layout(t).dim, "span_coord")
    block_coord = [0] * t.dim
    coord_in_block = [0] * t.dim
    for dim in range(t.dim):
        c = _wrap_int32(span_coord[dim] + t.offset[dim])
        L = t.layout_dimension[dim]
        if c < 0 or c >= L:
            mode = t.clamp_mode
            # For stores, other than Undefined, everything is treated as "discard".
            if op == STORE and mode != ClampMode.Undefined:
                return TensorCoord(ElementStatus.DISCARDED, None, None)
            if mode == ClampMode.Undefined:
                return TensorCoord(ElementStatus.UNDEFINED, None, None)
            if mode == ClampMode.Constant:
                return TensorCoord(ElementStatus.CLAMP_VALUE, None, None)
            c = clamp_coordinate(mode, c, L)
            if c is None:
                return TensorCoord(ElementStatus.UNDEFINED, None, None)
        coord_in_block[dim] = smod(c, t.block_size[dim])
        block_coord[dim] = c // t.block_size[dim]
    return TensorCoord(ElementStatus.IN_BOUNDS, tuple(block_coord), tuple(coord_in_block))


def tensor_coord_to_linear(t: TensorLayout, block_coord: Coord) -> int:
    """tensorCoordToLinear(t, blockCoord): ``sum(blockCoord[dim] * stride[dim])`` in uint32."""
    block_coord = _coord(block_coord, _check_layout(t).dim, "block_coord")
    index = 0
    for dim in range(t.dim):
        index = (index + block_coord[dim] * t.stride[dim]) & UINT32_MAX
    return index


def _finish(t: TensorLayout, index: int, op: str) -> ElementAddress:
    span_coord = linear_to_span_coord(t, index)
    status, block_coord, coord_in_block = span_coord_to_tensor_coord(t, span_coord, op)
    if status != ElementStatus.IN_BOUNDS:
        return ElementAddress(status, None, None, None)
    return ElementAddress(status, tensor_coord_to_linear(t, block_coord), block_coord, coord_in_block)


def _check_matrix_coord(row, col, N) -> tuple[int, int, int]:
    row, col, N = _as_int(row, "row"), _as_int(col, "col"), _as_int(N, "N")
    if N <= 0:
        raise TensorSpecError(f"N (matrix column count) must be positive, got {N}")
    if not 0 <= col < N:
        raise TensorSpecError(f"col must be in 0..{N - 1}, got {col}")
    if row < 0:
        raise TensorSpecError(f"row must be non-negative, got {row}")
    # No matrix has 2**32 elements: an index that would wrap is a caller's bug, not the spec's arithmetic.
    if row * N + col > UINT32_MAX:
        raise TensorSpecError(f"row {row} * N {N} + col {col} exceeds uint32: no matrix is that large")
    return row, col, N


def matrix_coord_to_tensor_element(t: TensorLayout, row: int, col: int, N: int,
                                   op: str = LOAD) -> ElementAddress:
    """matrixCoordToTensorElement(t, row, col, N): (row,col) -> linear index in span ->
    span coordinate -> tensor coordinate -> linear index in tensor."""
    _check_op(op)
    return _finish(t, matrix_coord_to_linear(t, row, col, N), op)


# --------------------------------------------------------------------------- view path

def clip_contains(v: TensorView, row: int, col: int) -> bool:
    """The clip test of matrixCoordToLinear(t, v, ...).

    ``clipOffset + clipSpan`` is evaluated without uint32 wraparound (the reference's
    decision: the default span 0xFFFFFFFF means "no clip" for any offset); see
    docs/spec-notes.md "clip overflow"."""
    return (v.clip_row_offset <= row < v.clip_row_offset + v.clip_row_span
            and v.clip_col_offset <= col < v.clip_col_offset + v.clip_col_span)


def matrix_coord_to_linear_with_view(t: TensorLayout, v: TensorView, row: int, col: int,
                                     N: int) -> int | None:
    """matrixCoordToLinear(t, v, row, col, N) (the view overload).

    Returns ``None`` when (row, col) is outside the clip region ("load or store is
    skipped"); otherwise ``(row - clipRowOffset) * min(N, clipColSpan) + (col - clipColOffset)``
    in uint32. Note the width is min(N, clipColSpan), not N - clipColOffset."""
    _check_layout(t)
    row, col, N = _check_matrix_coord(row, col, N)
    if not clip_contains(_check_view(v), row, col):
        return None
    row -= v.clip_row_offset
    col -= v.clip_col_offset
    width = min(N, v.clip_col_span)
    return (row * width + col) & UINT32_MAX


def view_dimensions(t: TensorLayout, v: TensorView) -> Coord:
    """``v.hasDimensions ? v.viewDimension : t.span``."""
    return v.view_dimension if v.has_dimensions else t.span


def view_strides(t: TensorLayout, v: TensorView) -> Coord:
    """The stride used by viewCoordToLinear: viewStride, or packed strides of t.span (uint32)."""
    if v.has_dimensions:
        return v.view_stride
    stride = [0] * v.dim
    stride[v.dim - 1] = 1
    for dim in range(v.dim - 2, -1, -1):
        stride[dim] = (stride[dim + 1] * t.span[dim + 1]) & UINT32_MAX
    return tuple(stride)


def linear_to_view_coord(t: TensorLayout, v: TensorView, index: int) -> Coord:
    """linearToViewCoord(t, v, index): peel coordinates in *permuted* order,
    ``viewCoord[p[dim]] = index % dimensions[p[dim]]`` for dim = VDim-1 .. 0."""
    check_view_matches(t, v)
    _check_spans(t)
    index = _uint32(index, "index")
    dimensions = view_dimensions(t, v)
    view_coord = [0] * v.dim
    for dim in range(v.dim - 1, -1, -1):
        i = v.permutation[dim]
        view_coord[i] = index % dimensions[i]
        index //= dimensions[i]
    return tuple(view_coord)


def view_coord_to_linear(t: TensorLayout, v: TensorView, view_coord: Coord) -> int:
    """viewCoordToLinear(t, v, viewCoord): ``sum(viewCoord[dim] * stride[dim])`` in uint32."""
    check_view_matches(t, v)
    view_coord = _coord(view_coord, v.dim, "view_coord")
    stride = view_strides(t, v)
    index = 0
    for dim in range(v.dim - 1, -1, -1):
        index = (index + view_coord[dim] * stride[dim]) & UINT32_MAX
    return index


def matrix_coord_to_tensor_element_with_view(t: TensorLayout, v: TensorView, row: int, col: int,
                                             N: int, op: str = LOAD) -> ElementAddress:
    """matrixCoordToTensorElementWithView(t, v, row, col, N): (row,col) -> linear index in
    view -> view coordinate -> linear index in span -> span coordinate -> tensor
    coordinate -> linear index in tensor. (The spec's signature omits ``v``.)"""
    _check_op(op)
    check_view_matches(t, v)
    index = matrix_coord_to_linear_with_view(t, v, row, col, N)
    if index is None:
        return ElementAddress(ElementStatus.SKIPPED_BY_CLIP, None, None, None)
    view_coord = linear_to_view_coord(t, v, index)
    index = view_coord_to_linear(t, v, view_coord)
    return _finish(t, index, op)


def element_address(t: TensorLayout, row: int, col: int, N: int, view: TensorView | None = None,
                    op: str = LOAD) -> ElementAddress:
    """Dispatch to matrix_coord_to_tensor_element or its _with_view variant."""
    _check_layout(t)
    if view is None:
        return matrix_coord_to_tensor_element(t, row, col, N, op)
    return matrix_coord_to_tensor_element_with_view(t, view, row, col, N, op)
