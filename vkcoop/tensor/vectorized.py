"""Whole-matrix tensor addressing with numpy: index_map, load, store.

Computes exactly what :mod:`vkcoop.tensor.spec` computes element by element
(SPV_NV_cooperative_matrix2 3.X, matrixCoordToTensorElement(WithView)), for every
(row, col) of an M x N matrix at once. Index arithmetic runs on ``uint32`` arrays,
so the spec's ``uint32_t`` wraparound is numpy's native wraparound; the int32
coordinate ``c`` is the same 32 bits viewed as ``int32``.

Each stage keeps a bound on the largest value it can hold, so divisions and
remainders that cannot change anything (``x % d`` with ``x < d``) are skipped.
"""
from __future__ import annotations

from typing import Callable, NamedTuple

import numpy as np

from .clamp import clamp_value_as, clamp_value_bits  # noqa: F401  (re-exported: their home before clamp.py)
from .spec import (LOAD, STORE, _check_layout, _check_op, _check_spans, check_view_matches, view_dimensions,
                   view_strides)
from .state import (ClampMode, ElementStatus, TensorLayout, TensorSpecError, TensorTypeError, TensorView,
                    UndefinedBehaviorError, UINT32_MAX)

_U32 = np.uint32
_IN_BOUNDS = np.uint8(ElementStatus.IN_BOUNDS)
#: index_map (and so load and store) refuses matrices with more elements than this; index_map(max_elements=)
#: or setting this attribute raises it. 2**28 elements of a 2-D layout already need 10 GiB of results.
MAX_ELEMENTS = 1 << 28


class TensorIndexError(TensorSpecError, IndexError):
    """load/store: a tensor element index falls beyond the buffer given."""


class IndexMap(NamedTuple):
    """index_map's result for an M x N matrix.

    indices         int64 (M, N): tensor element index (uint32 value, relative to the
                    buffer base, in units of the component type -- or of the block
                    struct when block sizes are > 1); -1 where status != IN_BOUNDS.
    status          uint8 (M, N) of :class:`ElementStatus` values.
    block_coord     int64 (M, N, LDim): the decode function's blockCoord; -1 where
                    status != IN_BOUNDS.
    coord_in_block  int64 (M, N, LDim): the decode function's coordInBlock; -1 likewise.
    """
    indices: np.ndarray
    status: np.ndarray
    block_coord: np.ndarray
    coord_in_block: np.ndarray


class _Part:
    """A uint32 quantity that is either a full (M, N) array or a broadcastable one/scalar,
    with an upper bound `hi` on its values (for skipping no-op divisions)."""
    __slots__ = ("a", "hi")

    def __init__(self, a, hi: int):
        self.a = a
        self.hi = hi


def _divmod_part(x: _Part, d: int) -> tuple[_Part, _Part]:
    """(x // d, x % d) as uint32, skipping the work when it is a no-op."""
    if x.hi < d:
        return _Part(_U32(0), 0), x
    if d == 1:
        return x, _Part(_U32(0), 0)
    if d & (d - 1) == 0:  # power of two: shift and mask are much cheaper than division
        shift = d.bit_length() - 1
        return _Part(x.a >> _U32(shift), x.hi >> shift), _Part(x.a & _U32(d - 1), d - 1)
    # numpy's floor_divide by a scalar uses libdivide; its remainder does not, so derive it.
    q = x.a // _U32(d)
    r = x.a - q * _U32(d)
    return _Part(q, x.hi // d), _Part(r, d - 1)


def _mul_add(parts_and_strides, bound_limit: int = UINT32_MAX) -> _Part:
    """sum(part * stride) in uint32 (wrapping), skipping zero terms."""
    acc = None
    hi = 0
    for part, stride in parts_and_strides:
        if stride == 0 or part.hi == 0:
            continue
        term = part.a if stride == 1 else part.a * _U32(stride)
        acc = term if acc is None else acc + term
        hi += part.hi * stride
    if acc is None:
        return _Part(_U32(0), 0)
    return _Part(acc, min(hi, bound_limit))


def _decompose(x: _Part, dims, order) -> list[_Part]:
    """Peel coordinates: for dim in order (innermost first): coord[dim] = x % dims[dim]; x //= dims[dim]."""
    coords: list[_Part | None] = [None] * len(dims)
    for k, i in enumerate(order):
        if k == len(order) - 1:
            # outermost: only the remainder is used
            coords[i] = _divmod_part(x, dims[i])[1]
        else:
            x, coords[i] = _divmod_part(x, dims[i])
    return coords


def _matrix_linear_index(row0: int, row1: int, cols: int, view: TensorView | None):
    """matrixCoordToLinear for rows row0..row1-1: (uint32 index part, skipped-by-clip mask or None)."""
    r = np.arange(row0, row1, dtype=np.int64)
    c = np.arange(cols, dtype=np.int64)
    if view is None:
        row_term = ((r * cols) & UINT32_MAX).astype(_U32)[:, None]
        col_term = c.astype(_U32)[None, :]
        return _Part(row_term + col_term, min((row1 - 1) * cols + cols - 1, UINT32_MAX)), None
    # Clip test without uint32 wraparound of offset + span (docs/spec-notes.md "clip overflow").
    row_in = (r >= view.clip_row_offset) & (r < view.clip_row_offset + view.clip_row_span)
    col_in = (c >= view.clip_col_offset) & (c < view.clip_col_offset + view.clip_col_span)
    skipped = None
    if not (row_in.all() and col_in.all()):
        skipped = ~(row_in[:, None] & col_in[None, :])
    width = min(cols, view.clip_col_span)
    # Out-of-clip rows/cols get arbitrary (masked) values; only in-clip ones matter.
    rr = np.where(row_in, r - view.clip_row_offset, 0)
    cc = np.where(col_in, c - view.clip_col_offset, 0)
    row_term = ((rr * width) & UINT32_MAX).astype(_U32)[:, None]
    col_term = (cc & UINT32_MAX).astype(_U32)[None, :]
    hi = min(int(rr.max(initial=0)) * width + int(cc.max(initial=0)), UINT32_MAX)
    return _Part(row_term + col_term, hi), skipped


def _full(x, shape) -> np.ndarray:
    return np.broadcast_to(np.asarray(x, dtype=_U32), shape)


# Elements per chunk: small enough that the uint32 temporaries of one chunk stay in cache.
_CHUNK_ELEMENTS = 1 << 15


def index_map(layout: TensorLayout, rows: int, cols: int, view: TensorView | None = None,
              op: str = LOAD, *, max_elements: int | None = None) -> IndexMap:
    """matrixCoordToTensorElement(WithView) for every element of a rows x cols matrix.

    ``op`` is "load" or "store" (out-of-bounds stores are DISCARDED in every clamp
    mode but Undefined). Returns an :class:`IndexMap`; agrees element for element
    with :func:`vkcoop.tensor.spec.element_address`. More than ``max_elements``
    (default :data:`MAX_ELEMENTS`) elements raise TensorSpecError with the memory
    the result would need.
    """
    _check_op(op)
    if not isinstance(layout, TensorLayout):
        raise TensorTypeError(f"layout must be a TensorLayout, got {type(layout).__name__}")
    for name, n in (("rows", rows), ("cols", cols)):
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
            raise TensorTypeError(f"{name} must be a positive int, got {type(n).__name__} {n!r}")
        if n <= 0:
            raise TensorSpecError(f"{name} must be a positive int, got {n!r}")
    rows, cols = int(rows), int(cols)
    _check_size(rows, cols, layout.dim, MAX_ELEMENTS if max_elements is None else max_elements)
    _check_spans(layout)
    if view is not None:
        if not isinstance(view, TensorView):
            raise TensorSpecError(f"view must be a TensorView or None, got {type(view).__name__}")
        check_view_matches(layout, view)

    indices = np.empty((rows, cols), dtype=np.int64)
    status = np.empty((rows, cols), dtype=np.uint8)
    # Planar (LDim, M, N) storage, returned as (M, N, LDim) views.
    block = np.empty((layout.dim, rows, cols), dtype=np.int64)
    inblock = np.empty((layout.dim, rows, cols), dtype=np.int64)
    chunk_rows = max(1, _CHUNK_ELEMENTS // cols)
    with np.errstate(over="ignore"):  # uint32 scalar wraparound is the spec's arithmetic
        for row0 in range(0, rows, chunk_rows):
            row1 = min(rows, row0 + chunk_rows)
            _index_map_rows(layout, row0, row1, cols, view, op, indices[row0:row1], status[row0:row1],
                            block[:, row0:row1], inblock[:, row0:row1])
    return IndexMap(indices, status, np.moveaxis(block, 0, -1), np.moveaxis(inblock, 0, -1))


def _check_size(rows: int, cols: int, dim: int, limit: int) -> None:
    elements = rows * cols
    result_bytes = elements * (8 + 1 + 2 * dim * 8)  # int64 index, uint8 status, two int64 coordinates per dim
    if elements > limit:
        raise TensorSpecError(
            f"index_map of {rows} x {cols} = {elements} elements is above max_elements ({limit}): its result "
            f"alone would need {result_bytes / 2**30:.1f} GiB; pass max_elements= (or set "
            "vkcoop.tensor.vectorized.MAX_ELEMENTS) to allow it")
    if elements > 1 << 32:
        raise TensorSpecError(f"a {rows} x {cols} matrix has more than 2**32 elements; its linear index "
                              "(uint32 in the spec) would wrap")


def _index_map_rows(layout, row0, row1, cols, view, op, indices, status, block, inblock) -> None:
    """index_map for rows row0..row1-1, written into the given output slices."""
    shape = (row1 - row0, cols)
    index, skipped = _matrix_linear_index(row0, row1, cols, view)

    if view is not None:
        dims = view_dimensions(layout, view)
        order = [view.permutation[d] for d in range(view.dim - 1, -1, -1)]
        view_coord = _decompose(index, dims, order)
        strides = view_strides(layout, view)
        index = _mul_add([(view_coord[d], strides[d]) for d in range(view.dim)])

    span_coord = _decompose(index, layout.span, list(range(layout.dim - 1, -1, -1)))

    # spanCoordToTensorCoord, all dimensions at once.
    mode = layout.clamp_mode
    remap = op == LOAD and mode in (ClampMode.ClampToEdge, ClampMode.Repeat, ClampMode.RepeatMirrored)
    # A remapping mode against a zero layout dimension is undefined (every c is out of bounds there).
    undefined_remap = remap and 0 in layout.layout_dimension
    out_of_bounds = None  # bool array: some dimension was out of bounds
    block_coord: list[_Part] = []
    coord_in_block: list[_Part] = []
    for d in range(layout.dim):
        L = layout.layout_dimension[d]
        off = layout.offset[d]
        sc = span_coord[d]
        if off == 0:
            c = sc
        else:
            c = _Part(sc.a + _U32(off & UINT32_MAX), UINT32_MAX)
            if off > 0 and sc.hi + off <= 0x7FFFFFFF:
                c.hi = sc.hi + off
        # int32 c is out of bounds iff c < 0 or c >= L  <=>  (as uint32) c >= min(L, 2**31)
        limit = min(L, 1 << 31)
        if c.hi >= limit:
            oob_d = _full(c.a, shape) >= _U32(limit)
            out_of_bounds = oob_d if out_of_bounds is None else (out_of_bounds | oob_d)
            if remap and L != 0:
                c = _Part(_remap(mode, _full(c.a, shape), L), L - 1)
        q, r = _divmod_part(c, layout.block_size[d])
        block_coord.append(q)
        coord_in_block.append(r)

    index = _mul_add([(block_coord[d], layout.stride[d]) for d in range(layout.dim)])

    # Status codes by arithmetic on boolean masks (much faster than masked assignment).
    invalid = None
    oob_status = None
    if out_of_bounds is not None:
        if mode == ClampMode.Undefined or undefined_remap:
            oob_status = ElementStatus.UNDEFINED
        elif op == STORE:
            oob_status = ElementStatus.DISCARDED
        elif mode == ClampMode.Constant:
            oob_status = ElementStatus.CLAMP_VALUE
        # else: remapped, stays IN_BOUNDS
    if oob_status is not None:
        invalid = out_of_bounds
        np.multiply(out_of_bounds.view(np.uint8), np.uint8(oob_status), out=status)
    else:
        status.fill(ElementStatus.IN_BOUNDS)
    if skipped is not None:
        # SKIPPED_BY_CLIP wins: the clip test comes before any address calculation.
        np.copyto(status, np.uint8(ElementStatus.SKIPPED_BY_CLIP), where=skipped)
        invalid = skipped if invalid is None else (invalid | skipped)

    # int64 outputs, -1 where the element touches no memory: x | -1 sets all bits.
    minus_invalid = None if invalid is None else np.negative(invalid.view(np.int8))

    def finish(part: _Part, out: np.ndarray) -> None:
        np.copyto(out, part.a, casting="unsafe")
        if minus_invalid is not None:
            np.bitwise_or(out, minus_invalid, out=out)

    finish(index, indices)
    for d in range(layout.dim):
        finish(block_coord[d], block[d])
        finish(coord_in_block[d], inblock[d])


def _remap(mode: ClampMode, c_u32: np.ndarray, L: int) -> np.ndarray:
    """ClampToEdge / Repeat / RepeatMirrored on int32 coordinates (in-bounds ones are unchanged)."""
    c = c_u32.view(np.int32) if c_u32.flags.c_contiguous else c_u32.astype(np.uint32).view(np.int32)
    if mode == ClampMode.ClampToEdge:
        out = np.clip(c.astype(np.int64), 0, L - 1)
    elif mode == ClampMode.Repeat:
        out = np.mod(c.astype(np.int64), L)  # OpSMod == floor mod for L > 0
    else:  # RepeatMirrored, period 2L-2 with L the layout dimension (spec's `dim` is a typo)
        if L == 1:
            return np.zeros(c.shape, dtype=_U32)
        period = 2 * L - 2
        out = np.mod(c.astype(np.int64), period)
        out = np.where(out >= L, period - out, out)
    return out.astype(_U32)


# --------------------------------------------------------------------------- load / store

def _component_view(buffer: np.ndarray, element_offset: int, dtype: np.dtype, name: str) -> np.ndarray:
    """buffer's bytes from &buffer[element_offset] reinterpreted as an array of ``dtype``
    (the spec multiplies the index by the component size and adds it to that address)."""
    if not isinstance(buffer, np.ndarray):
        raise TensorTypeError(f"{name} must be a numpy array, got {type(buffer).__name__}")
    if not buffer.flags.c_contiguous:
        raise TensorSpecError(f"{name} must be a C-contiguous numpy array (it is addressed as flat memory)")
    buffer = buffer.reshape(-1)  # a view: stores through it reach the caller's array
    if isinstance(element_offset, bool) or not isinstance(element_offset, (int, np.integer)):
        raise TensorTypeError(f"element_offset must be a non-negative int, got {element_offset!r}")
    if element_offset < 0:
        raise TensorSpecError(f"element_offset must be a non-negative int, got {element_offset!r}")
    base = int(element_offset) * buffer.itemsize
    if base % 16:
        raise TensorSpecError(f"element_offset * itemsize must be a multiple of 16 bytes (spec), "
                              f"got {element_offset} * {buffer.itemsize} = {base}")
    raw = buffer.view(np.uint8)[base:]
    usable = (raw.size // dtype.itemsize) * dtype.itemsize
    return raw[:usable].view(dtype)


def _as_dtype(dtype) -> np.dtype:
    try:
        dt = np.dtype(dtype)
    except TypeError:
        raise TensorTypeError(f"dtype {dtype!r} is not a numpy dtype") from None
    if dt.hasobject or dt.itemsize == 0:
        raise TensorSpecError(f"dtype {dt} is not a plain component type")
    return dt


def _raise_undefined(m: IndexMap, what: str) -> None:
    bad = np.argwhere(m.status == ElementStatus.UNDEFINED)
    if bad.size:
        r, c = bad[0]
        raise UndefinedBehaviorError(
            f"{what}: {len(bad)} element(s) have undefined results (first at row {r}, col {c}); "
            f"(Undefined clamp mode out of bounds, or a remapping clamp mode with a zero layout "
            f"dimension); use index_map() to inspect statuses")


def _check_in_buffer(idx: np.ndarray, size: int, what: str) -> None:
    if idx.size and int(idx.max()) >= size:
        raise TensorIndexError(f"{what}: tensor element index {int(idx.max())} is beyond the buffer "
                         f"({size} elements from the base)")


def load(buffer: np.ndarray, layout: TensorLayout, rows: int, cols: int,
         view: TensorView | None = None, dtype=None,
         decode: Callable | None = None, previous: np.ndarray | None = None,
         element_offset: int = 0) -> np.ndarray:
    """Emulate coopMatLoadTensorNV(m, buffer, element_offset, layout[, view][, decode]).

    * ``dtype``: the matrix component type (default ``buffer.dtype``). Without
      ``decode`` the buffer's bytes from ``&buffer[element_offset]`` are read as an array of
      ``dtype`` (the spec scales the index by the component size).
    * ``decode(blocks, indices, block_coord, coord_in_block) -> values``: vectorized decode
      function for block loads; ``blocks`` is ``buffer`` from element_offset on,
      ``indices`` (K,) the block indices into it, the coords (K, LDim); it returns (K,)
      values (cast to ``dtype``, which is required with decode). Called only for
      IN_BOUNDS elements; Constant-clamped elements get the clamp value undecoded.
    * ``previous``: the matrix before the load (elements outside the view's clip keep
      it); default zeros.
    Raises UndefinedBehaviorError if any element is UNDEFINED and TensorIndexError (an
    IndexError) if an index falls beyond the buffer.
    """
    if not isinstance(buffer, np.ndarray):
        raise TensorTypeError(f"buffer must be a numpy array, got {type(buffer).__name__}")
    if decode is not None and not callable(decode):
        raise TensorTypeError(f"decode must be callable, got {type(decode).__name__}")
    if decode is not None and dtype is None:
        raise TensorSpecError("dtype (the matrix component type) is required with decode")
    dt = _as_dtype(buffer.dtype if dtype is None else dtype)
    m = index_map(layout, rows, cols, view, LOAD)
    _raise_undefined(m, "load")
    if previous is None:
        result = np.zeros((rows, cols), dtype=dt)
    else:
        previous = np.asarray(previous)
        if previous.shape != (rows, cols):
            raise TensorSpecError(f"previous must have shape {(rows, cols)}, got {previous.shape}")
        result = previous.astype(dt, copy=True)
    valid = m.status == ElementStatus.IN_BOUNDS
    idx = m.indices[valid]
    if decode is None:
        source = _component_view(buffer, element_offset, dt, "buffer")
        _check_in_buffer(idx, source.size, "load")
        result[valid] = source[idx]
    else:
        blocks = _component_view(buffer, element_offset, buffer.dtype, "buffer")
        _check_in_buffer(idx, blocks.size, "load")
        if idx.size:
            values = np.asarray(decode(blocks, idx, m.block_coord[valid], m.coord_in_block[valid]))
            if values.shape != idx.shape:
                raise TensorSpecError(f"decode returned shape {values.shape}, expected {idx.shape}")
            result[valid] = values.astype(dt)
    clamped = m.status == ElementStatus.CLAMP_VALUE
    if clamped.any():
        result[clamped] = clamp_value_as(layout.clamp_value, dt)
    return result


def store(matrix: np.ndarray, buffer: np.ndarray, layout: TensorLayout,
          view: TensorView | None = None, element_offset: int = 0) -> IndexMap:
    """Emulate coopMatStoreTensorNV(matrix, buffer, element_offset, layout[, view]) in place.

    The buffer's bytes from ``&buffer[element_offset]`` are written as an array of
    ``matrix.dtype``. DISCARDED and SKIPPED_BY_CLIP elements are not written. When
    several elements map to one index (e.g. a span smaller than the matrix) the last
    in row-major order wins here; on a GPU the winner is unspecified.
    Raises for block sizes > 1 (the SPIR-V spec forbids them for stores) and for
    UNDEFINED elements. Returns the IndexMap used.
    """
    _check_layout(layout)
    if not isinstance(matrix, np.ndarray):
        raise TensorTypeError(f"matrix must be a numpy array, got {type(matrix).__name__}")
    if matrix.ndim != 2 or matrix.dtype.hasobject:
        raise TensorSpecError(f"matrix must be a 2-D array of plain numbers, got shape {matrix.shape} "
                              f"dtype {matrix.dtype}")
    if any(b != 1 for b in layout.block_size):
        raise TensorSpecError(f"store needs block_size 1 in every dimension (SPV_NV_cooperative_matrix2: "
                              f"block sizes > 1 must not be used with stores), got {layout.block_size}")
    if not isinstance(buffer, np.ndarray):
        raise TensorTypeError(f"buffer must be a numpy array, got {type(buffer).__name__}")
    if not buffer.flags.writeable:
        raise TensorSpecError("buffer must be a writeable numpy array")
    rows, cols = matrix.shape
    m = index_map(layout, rows, cols, view, STORE)
    _raise_undefined(m, "store")
    target = _component_view(buffer, element_offset, matrix.dtype, "buffer")
    valid = m.status == ElementStatus.IN_BOUNDS
    idx = m.indices[valid]
    _check_in_buffer(idx, target.size, "store")
    target[idx] = matrix[valid]
    return m
