"""vkcoop.tensor: the cooperative_matrix2 tensor-addressing reference (pure numpy).

Spec sources: SPV_NV_tensor_addressing (state, builders, clamp modes),
SPV_NV_cooperative_matrix2 section 3.X "Tensor Layout and View" (addressing
pseudo-code, decode functions), GL_NV_cooperative_matrix2 (GLSL built-ins and
their default rules). Errata and the decisions taken: ``docs/spec-notes.md``.

State (immutable dataclasses, exactly the spec's logical state)
---------------------------------------------------------------
``TensorLayout(dim, clamp_mode, block_size, layout_dimension, stride, offset, span, clamp_value)``
``TensorView(dim, has_dimensions, permutation, view_dimension, view_stride,
clip_row_offset, clip_row_span, clip_col_offset, clip_col_span)``

Builders return new values; the order matters (set_dimension resets offset and
stride, so set the block size first and slice last)::

    from vkcoop.tensor import TensorLayout, TensorView, ClampMode
    t = (TensorLayout.create(2, ClampMode.Constant)
         .set_dimension(num_rows, num_cols)          # span = dims, offset = 0, packed strides
         .slice((row0, col0), (M, N))                # offset += (row0, col0), span = (M, N)
         .set_clamp_value(clamp_value_bits(-0.5, np.float16)))
    v = TensorView.create(2, False, (1, 0)).set_clip(0, M, 0, N)

    # the same with the GLSL names, line for line:
    t = createTensorLayoutNV(2, gl_CooperativeMatrixClampModeConstantNV)
    t = setTensorLayoutDimensionNV(t, num_rows, num_cols)
    t = sliceTensorLayoutNV(t, row0, M, col0, N)
    v = createTensorViewNV(2, False, 1, 0)

Layout builders: ``create(dim, clamp_mode)``, ``set_block_size(*b)``, ``set_dimension(*d)``,
``set_stride(*s)``, ``slice(offsets, spans)``, ``set_clamp_value(bits)``; GLSL:
createTensorLayoutNV, setTensorLayoutBlockSizeNV, setTensorLayoutDimensionNV,
setTensorLayoutStrideNV, sliceTensorLayoutNV (interleaved offset, span),
setTensorLayoutClampValueNV. View builders: ``create(dim, has_dimensions, permutation)``,
``set_dimensions(*d)``, ``set_stride(*s)``, ``set_clip(row_off, row_span, col_off, col_span)``;
GLSL: createTensorViewNV, setTensorViewDimensionsNV, setTensorViewStrideNV,
setTensorViewClipNV. Varargs builders also accept one sequence.

Enums
-----
``ClampMode``: Undefined=0, Constant=1, ClampToEdge=2, Repeat=3, RepeatMirrored=4
(alias MirrorRepeat; UPPER_CASE aliases too). ``ElementStatus`` (uint8 in arrays):
IN_BOUNDS=0, CLAMP_VALUE=1 (load), DISCARDED=2 (store), SKIPPED_BY_CLIP=3, UNDEFINED=4.

Whole matrix (numpy)
--------------------
``index_map(layout, rows, cols, view=None, op="load"|"store") -> IndexMap``
    fields ``indices`` int64 (rows, cols) (-1 unless IN_BOUNDS), ``status`` uint8,
    ``block_coord`` / ``coord_in_block`` int64 (rows, cols, LDim) (-1 unless IN_BOUNDS).
``load(buffer, layout, rows, cols, view=None, dtype=None, decode=None, previous=None,
element_offset=0) -> ndarray``
    Constant-clamped elements get the clamp value's low bits as ``dtype``; clipped
    elements keep ``previous`` (default zeros); ``decode(blocks, indices, block_coord,
    coord_in_block)`` is vectorized over the IN_BOUNDS elements.
``store(matrix, buffer, layout, view=None, element_offset=0) -> IndexMap``
    writes ``buffer`` in place; discarded/clipped elements are left alone.
``clamp_value_as(bits, dtype)`` / ``clamp_value_bits(value, dtype)`` convert between the
32-bit clampValue and a component value (fp16, bf16 via ml_dtypes, fp32, int8, ...).

One element (the spec pseudo-code, snake_case, in :mod:`vkcoop.tensor.spec`)
-----------------------------------------------------------------------------
matrix_coord_to_linear, matrix_coord_to_linear_with_view, linear_to_span_coord,
span_coord_to_tensor_coord, tensor_coord_to_linear, linear_to_view_coord,
view_coord_to_linear, matrix_coord_to_tensor_element,
matrix_coord_to_tensor_element_with_view, plus ``element_address(t, row, col, N,
view=None, op="load")`` returning ``ElementAddress(status, index, block_coord,
coord_in_block)``, ``smod`` (OpSMod) and ``clamp_coordinate(mode, c, L)``.

Errors
------
``TensorSpecError`` (a ValueError and a ``vkcoop.Error``) names the bad parameter:
dimension count outside 1..5, zero block size, non-permutation, view/layout dimension
mismatch, values outside uint32/int32, zero span, a matrix above
``vectorized.MAX_ELEMENTS`` (2**28) elements. ``TensorTypeError`` (also a TypeError):
a float, bool or other object where an integer, array or layout belongs.
``UndefinedBehaviorError`` comes from load/store when an element's result is undefined,
``TensorIndexError`` (also an IndexError) when an index falls beyond the buffer.
``clamp_value_bits`` refuses values the component type cannot hold exactly unless
``rounding=True``.
"""
from .spec import (ElementAddress, TensorCoord, check_view_matches, clamp_coordinate, clip_contains,
                   element_address, linear_to_span_coord, linear_to_view_coord, matrix_coord_to_linear,
                   matrix_coord_to_linear_with_view, matrix_coord_to_tensor_element,
                   matrix_coord_to_tensor_element_with_view, smod, span_coord_to_tensor_coord,
                   tensor_coord_to_linear, view_coord_to_linear, view_dimensions, view_strides)
from .state import (MAX_DIM, ClampMode, ElementStatus, TensorLayout, TensorSpecError, TensorTypeError, TensorView,
                    UndefinedBehaviorError, createTensorLayoutNV, createTensorViewNV,
                    gl_CooperativeMatrixClampModeClampToEdgeNV, gl_CooperativeMatrixClampModeConstantNV,
                    gl_CooperativeMatrixClampModeMirrorRepeatNV, gl_CooperativeMatrixClampModeRepeatNV,
                    gl_CooperativeMatrixClampModeUndefinedNV, setTensorLayoutBlockSizeNV,
                    setTensorLayoutClampValueNV, setTensorLayoutDimensionNV, setTensorLayoutStrideNV,
                    setTensorViewClipNV, setTensorViewDimensionsNV, setTensorViewStrideNV,
                    sliceTensorLayoutNV)
from .clamp import clamp_value_as, clamp_value_bits
from .vectorized import IndexMap, TensorIndexError, index_map, load, store
from . import present as _present  # noqa: E402,F401 - registers explain()/_repr_png_ on layouts and views

__all__ = [
    "MAX_DIM", "ClampMode", "ElementStatus", "TensorLayout", "TensorView", "TensorSpecError",
    "TensorTypeError", "TensorIndexError", "UndefinedBehaviorError", "IndexMap", "ElementAddress", "TensorCoord",
    "index_map", "load", "store", "clamp_value_as", "clamp_value_bits",
    "element_address", "matrix_coord_to_linear", "matrix_coord_to_linear_with_view",
    "linear_to_span_coord", "span_coord_to_tensor_coord", "tensor_coord_to_linear",
    "linear_to_view_coord", "view_coord_to_linear", "matrix_coord_to_tensor_element",
    "matrix_coord_to_tensor_element_with_view", "smod", "clamp_coordinate", "clip_contains",
    "check_view_matches", "view_dimensions", "view_strides",
    "createTensorLayoutNV", "setTensorLayoutBlockSizeNV", "setTensorLayoutDimensionNV",
    "setTensorLayoutStrideNV", "sliceTensorLayoutNV", "setTensorLayoutClampValueNV",
    "createTensorViewNV", "setTensorViewDimensionsNV", "setTensorViewStrideNV", "setTensorViewClipNV",
    "gl_CooperativeMatrixClampModeUndefinedNV", "gl_CooperativeMatrixClampModeConstantNV",
    "gl_CooperativeMatrixClampModeClampToEdgeNV", "gl_CooperativeMatrixClampModeRepeatNV",
    "gl_CooperativeMatrixClampModeMirrorRepeatNV",
]
