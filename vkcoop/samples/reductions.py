"""Sample 4: reductions (coopMatReduceNV) over rows, columns, rows and columns, and 2x2 blocks, with
sum, max and min combine functions, in fp16 and fp32.

The input accumulator is loaded through a Constant-clamp tensor layout whose slice reaches outside the
tensor, so its expected value is :func:`vkcoop.tensor.load`'s; the reduction of that matrix is then
computed in float64 and rounded once. Sum inputs are drawn from {-0.5, 0, 0.5, 1} (and the clamp value
-0.5), so every partial sum is exact in fp16 whatever order the hardware combines in, and the result
must match bit for bit; max/min inputs are distinct integers in random places (GL_NV_cooperative_matrix2: "combineOp ... called on implementation-dependent
elements"). Result shapes: row reduction keeps the rows, column reduction the columns, row+column
may have any shape (every element holds the total), 2x2 halves both dimensions.

Shader: ``shaders/samples/reductions/reduce.comp``.
"""
from __future__ import annotations

import numpy as np

from .. import tensor
from .caps import COOPMAT2_BASE, DeviceCaps, Requirements, SampleInputError, element_type
from .case import Binding, Case
from .recipes import LayoutRecipe, index_pattern, records, require_array, small_values
from .runner import Sample, register

SHADER = "samples/reductions/reduce.comp"
REDUCE_MODES = {"row": "gl_CooperativeMatrixReduceRowNV", "column": "gl_CooperativeMatrixReduceColumnNV",
                "row-and-column": "gl_CooperativeMatrixReduceRowAndColumnNV",
                "2x2": "gl_CooperativeMatrixReduce2x2NV"}
COMBINES = {"sum": ("COMBINE_SUM", np.sum), "max": ("COMBINE_MAX", np.max), "min": ("COMBINE_MIN", np.min)}
CLAMP_VALUE = -0.5


def reduce_reference(matrix: np.ndarray, mode: str, combine: str, out_shape: tuple[int, int]) -> np.ndarray:
    """What coopMatReduceNV leaves in a result of ``out_shape`` (computed in float64, rounded once)."""
    op = COMBINES[combine][1]
    m = matrix.astype(np.float64)
    rows, cols = m.shape
    out_rows, out_cols = out_shape
    if mode == "row":
        result = np.repeat(op(m, axis=1, keepdims=True), out_cols, axis=1)
    elif mode == "column":
        result = np.repeat(op(m, axis=0, keepdims=True), out_rows, axis=0)
    elif mode == "row-and-column":
        result = np.full(out_shape, op(m))
    else:  # 2x2: element (i, j) combines input rows 2i..2i+1, cols 2j..2j+1
        result = op(m.reshape(rows // 2, 2, cols // 2, 2), axis=(1, 3))
    return result.astype(matrix.dtype)


def output_shape(mode: str, rows: int, cols: int) -> tuple[int, int]:
    if mode == "2x2":
        return rows // 2, cols // 2
    return rows, cols


def reduce_case(name: str, element: str, mode: str, combine: str, layout: LayoutRecipe, rows: int, cols: int,
                source: np.ndarray, out_shape: tuple[int, int] | None = None) -> Case:
    """Reduce the rows x cols matrix loaded from ``source`` through ``layout``."""
    if element not in ("F16", "F32"):
        raise SampleInputError(f"coopMatReduceNV needs a floating-point accumulator; element must be F16 or F32, "
                               f"got {element!r}")
    if mode not in REDUCE_MODES:
        raise SampleInputError(f"mode must be one of {list(REDUCE_MODES)}, got {mode!r}")
    if combine not in COMBINES:
        raise SampleInputError(f"combine must be one of {list(COMBINES)}, got {combine!r}")
    dtype = element_type(element).dtype
    require_array(source, "source", dtype=dtype, ndim=1)
    out_shape = out_shape or output_shape(mode, rows, cols)
    if mode == "row" and out_shape[0] != rows or mode == "column" and out_shape[1] != cols:
        raise SampleInputError(f"a {mode} reduction keeps the input's {'rows' if mode == 'row' else 'columns'}: "
                               f"input {rows}x{cols}, result {out_shape[0]}x{out_shape[1]}")
    if mode == "2x2" and out_shape != (rows // 2, cols // 2):
        raise SampleInputError(f"a 2x2 reduction halves both dimensions: input {rows}x{cols}, result {out_shape}")
    loaded = tensor.load(source, layout.layout(), rows, cols, dtype=dtype)
    expected = reduce_reference(loaded, mode, combine, out_shape).reshape(-1)
    return Case(name, SHADER, {"ELEMENT": element, "REDUCE": REDUCE_MODES[mode], "COMBINE": COMBINES[combine][0]},
                [Binding("records", records(layout)), Binding("source", source),
                 Binding("result", np.zeros_like(expected), expected=expected)],
                specialization={"ROWS": rows, "COLS": cols, "OUT_ROWS": out_shape[0], "OUT_COLS": out_shape[1],
                                "EXPLICIT_STRIDE": layout.explicit_stride})


def reduction_shapes(caps: DeviceCaps, element: str) -> dict[str, tuple[tuple[int, int], tuple[int, int]]]:
    """mode -> (input shape, result shape), each a shape the device allows for an accumulator of ``element``.

    Row/column reductions use the largest KHR shape for both; row+column writes its total into a
    differently shaped result where the table has one; 2x2 needs an input twice the result in both
    dimensions (usually only possible with flexible dimensions)."""
    shapes = caps.khr_shapes(element, "Accumulator")
    if not shapes:
        raise SampleInputError(f"{caps.name} has no {element} accumulator shape")
    base = shapes[0]
    found = {"row": (base, base), "column": (base, base),
             "row-and-column": (base, shapes[1] if len(shapes) > 1 else base)}
    for out in shapes:
        if caps.supports(element, "Accumulator", 2 * out[0], 2 * out[1]):
            found["2x2"] = ((2 * out[0], 2 * out[1]), out)
            break
    else:
        for shape in shapes:
            if caps.supports(element, "Accumulator", shape[0] // 2, shape[1] // 2):
                found["2x2"] = (shape, (shape[0] // 2, shape[1] // 2))
                break
    return found


@register
class Reductions(Sample):
    name = "reductions"
    description = "coopMatReduceNV: row, column, row+column and 2x2 reductions with sum, max and min (fp16, fp32)"
    requires = COOPMAT2_BASE + Requirements(features=("cooperativeMatrixReductions",
                                                      "cooperativeMatrixFlexibleDimensions"))
    order = 40

    def cases(self, caps: DeviceCaps) -> list[Case]:
        cases = []
        seed = 0
        for element in ("F16", "F32"):
            dtype = element_type(element).dtype
            clamp = tensor.clamp_value_bits(CLAMP_VALUE, dtype)
            for mode, ((rows, cols), out_shape) in reduction_shapes(caps, element).items():
                # A tensor one row short of the matrix, read from column 2: the last row is clamped.
                layout = LayoutRecipe((rows - 1, cols + 3), offsets=(0, 2), spans=(rows, cols), clamp_value=clamp)
                for combine in COMBINES:
                    seed += 1
                    if combine == "sum":
                        source = small_values(layout.element_count(), dtype, seed)
                    else:  # distinct values in random places: the extreme identifies its element
                        pattern = index_pattern(layout.element_count(), dtype)
                        source = np.random.default_rng(seed).permutation(pattern)
                    cases.append(reduce_case(f"{element}/{mode}/{combine}", element, mode, combine, layout,
                                             rows, cols, source, out_shape))
        return cases
