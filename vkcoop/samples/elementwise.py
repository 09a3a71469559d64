"""Sample 5: element-wise operations, conversions and transposes.

* ``coopMatPerElementNV`` with the element's row and column: an affine map with a second matrix and a
  scalar as extra arguments (``x * scale + y + (row - col)``) and a causal mask (``-inf`` above a
  diagonal), in fp16 and fp32;
* conversions by coopmat constructors: accumulator -> A or B (OpCooperativeMatrixConvertNV), with and
  without a component type change (fp32 -> fp16, fp32 -> bf16, int32 -> int8), and fp32 -> fp16 within
  the accumulator use;
* ``coopMatTransposeNV``: a rows x cols fp16 accumulator to a cols x rows use-B matrix, square and (with
  flexible dimensions) non-square.

Every input matrix is loaded through a Constant-clamp tensor layout that reaches outside its tensor,
so the loaded values come from :func:`vkcoop.tensor.load`; the element-wise step is then evaluated in
float64 and rounded once. Inputs from {-0.5, 0, 0.5, 1} and small integers keep every intermediate
exact, so results compare bit for bit.

Shaders: ``shaders/samples/elementwise/{per_element,convert,transpose}.comp``.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np

from .. import tensor
from .caps import BFLOAT16, COOPMAT2_BASE, INT8, DeviceCaps, Requirements, SampleInputError, element_type
from .case import Binding, Case
from .recipes import LayoutRecipe, index_pattern, records, require_array, small_values
from .runner import Sample, register

DIR = "samples/elementwise/"
SCALE = 2.0
DIAGONAL = 2

#: convert.comp's CONVERSION -> (source element, result element, result use).
CONVERSIONS = {
    "CONV_F32_ACC_TO_F16_A": ("F32", "F16", "A"),
    "CONV_F16_ACC_TO_F16_B": ("F16", "F16", "B"),
    "CONV_F16_ACC_TO_F16_A": ("F16", "F16", "A"),
    "CONV_F32_ACC_TO_F16_ACC": ("F32", "F16", "Accumulator"),
    "CONV_S32_ACC_TO_S8_A": ("S32", "S8", "A"),
    "CONV_F32_ACC_TO_BF16_B": ("F32", "BF16", "B"),
}


def clamped_layout(rows: int, cols: int, dtype, clamp: float = -0.5) -> LayoutRecipe:
    """A tensor two columns narrower than the matrix, read from row 1: the right edge is clamped."""
    return LayoutRecipe((rows + 1, cols - 2), offsets=(1, 0), spans=(rows, cols),
                        clamp_value=tensor.clamp_value_bits(clamp, dtype))


def loaded(layout: LayoutRecipe, source: np.ndarray, rows: int, cols: int, dtype) -> np.ndarray:
    return tensor.load(source, layout.layout(), rows, cols, dtype=dtype)


# --------------------------------------------------------------------------- per-element


def per_element_reference(operation: str, x: np.ndarray, y: np.ndarray | None) -> np.ndarray:
    rows, cols = x.shape
    row = np.arange(rows)[:, None]
    col = np.arange(cols)[None, :]
    if operation == "OP_AFFINE":
        result = x.astype(np.float64) * SCALE + y.astype(np.float64) + (row - col)
    elif operation == "OP_CAUSAL_MASK":
        result = np.where(col > row + DIAGONAL, -np.inf, x.astype(np.float64))
    else:
        raise SampleInputError(f"operation must be OP_AFFINE or OP_CAUSAL_MASK, got {operation!r}")
    return result.astype(x.dtype)


def per_element_case(name: str, element: str, operation: str, rows: int, cols: int, source: np.ndarray,
                     y: np.ndarray, layout: LayoutRecipe) -> Case:
    if element not in ("F16", "F32"):
        raise SampleInputError(f"per_element.comp takes F16 or F32 accumulators, got {element!r}")
    dtype = element_type(element).dtype
    require_array(source, "source", dtype=dtype, ndim=1)
    require_array(y, "y", dtype=dtype, shape=(rows, cols))
    x = loaded(layout, source, rows, cols, dtype)
    expected = per_element_reference(operation, x, y).reshape(-1)
    return Case(name, DIR + "per_element.comp", {"ELEMENT": element, "OPERATION": operation},
                [Binding("records", records(layout)), Binding("x", source), Binding("y", y.reshape(-1)),
                 Binding("result", np.zeros_like(expected), expected=expected)],
                specialization={"ROWS": rows, "COLS": cols, "EXPLICIT_STRIDE": layout.explicit_stride,
                                "SCALE": SCALE, "DIAGONAL": DIAGONAL})


# --------------------------------------------------------------------------- conversions and transpose


def conversion_shape(caps: DeviceCaps, conversion: str) -> tuple[int, int] | None:
    """A shape allowed both for the source accumulator and for the converted matrix (None if none is)."""
    source, result, use = CONVERSIONS[conversion]
    candidates = caps.khr_shapes(result, use) + caps.khr_shapes(source, "Accumulator")
    candidates += [(2 * r, 2 * c) for r, c in candidates]
    for rows, cols in candidates:
        if caps.supports(source, "Accumulator", rows, cols) and caps.supports(result, use, rows, cols):
            return rows, cols
    return None


def conversion_source(element: str, count: int, seed: int) -> np.ndarray:
    dtype = element_type(element).dtype
    if element == "S32":
        return index_pattern(count, np.int8).astype(np.int32)  # fits int8: the narrowing is exact
    return small_values(count, dtype, seed)


def convert_case(name: str, conversion: str, rows: int, cols: int, source: np.ndarray) -> Case:
    if conversion not in CONVERSIONS:
        raise SampleInputError(f"conversion must be one of {sorted(CONVERSIONS)}, got {conversion!r}")
    source_element, result_element, _ = CONVERSIONS[conversion]
    source_dtype = element_type(source_element).dtype
    result_dtype = element_type(result_element).dtype
    require_array(source, "source", dtype=source_dtype, ndim=1)
    clamp = -5 if source_element == "S32" else -0.5
    layout = clamped_layout(rows, cols, source_dtype, clamp)
    x = loaded(layout, source, rows, cols, source_dtype)
    if result_dtype.kind in "iu" and (x.min() < np.iinfo(result_dtype).min or x.max() > np.iinfo(result_dtype).max):
        raise SampleInputError(f"source values must fit {result_dtype} for an exact conversion")
    expected = x.astype(np.float64).astype(result_dtype) if result_dtype == ml_dtypes.bfloat16 \
        else x.astype(result_dtype)
    expected = expected.reshape(-1)
    return Case(name, DIR + "convert.comp", {"CONVERSION": conversion},
                [Binding("records", records(layout)), Binding("source", source),
                 Binding("result", np.zeros_like(expected), expected=expected)],
                specialization={"ROWS": rows, "COLS": cols, "EXPLICIT_STRIDE": layout.explicit_stride})


def transpose_shapes(caps: DeviceCaps) -> list[tuple[int, int]]:
    """Accumulator shapes (rows, cols) whose transpose (cols, rows) is an allowed fp16 B matrix."""
    candidates = caps.khr_shapes("F16", "Accumulator") + [(16, 32), (32, 16), (32, 32)]
    found = []
    for rows, cols in candidates:
        if (rows, cols) not in found and caps.supports("F16", "Accumulator", rows, cols) \
                and caps.supports("F16", "B", cols, rows):
            found.append((rows, cols))
    square = [s for s in found if s[0] == s[1]][:1]
    oblong = [s for s in found if s[0] != s[1]][:1]
    return square + oblong


def transpose_case(name: str, rows: int, cols: int, source: np.ndarray) -> Case:
    require_array(source, "source", dtype=np.float16, ndim=1)
    layout = clamped_layout(rows, cols, np.float16)
    x = loaded(layout, source, rows, cols, np.float16)
    expected = np.ascontiguousarray(x.T).reshape(-1)
    return Case(name, DIR + "transpose.comp", {},
                [Binding("records", records(layout)), Binding("source", source),
                 Binding("result", np.zeros_like(expected), expected=expected)],
                specialization={"ROWS": rows, "COLS": cols, "EXPLICIT_STRIDE": layout.explicit_stride})


@register
class ElementWise(Sample):
    name = "elementwise"
    description = ("coopMatPerElementNV with row/col (affine with extra matrix and scalar, causal mask), "
                   "accumulator -> A/B and type conversions (fp16, bf16, int8), coopMatTransposeNV")
    requires = COOPMAT2_BASE + INT8 + BFLOAT16 + Requirements(features=(
        "cooperativeMatrixPerElementOperations", "cooperativeMatrixConversions",
        "cooperativeMatrixFlexibleDimensions"))
    order = 50

    def cases(self, caps: DeviceCaps):
        seed = 100
        for element in ("F16", "F32"):
            dtype = element_type(element).dtype
            rows, cols = caps.pick_shape(element, "Accumulator")
            layout = clamped_layout(rows, cols, dtype)
            for operation in ("OP_AFFINE", "OP_CAUSAL_MASK"):
                seed += 1
                source = small_values(layout.element_count(), dtype, seed)
                y = small_values(rows * cols, dtype, seed + 1000).reshape(rows, cols)
                label = operation.removeprefix("OP_").lower().replace("_", "-")
                yield per_element_case(f"per-element/{element}/{label}", element, operation, rows, cols, source,
                                       y, layout)
        for conversion in CONVERSIONS:
            shape = conversion_shape(caps, conversion)
            if shape is None:
                continue  # no shape fits both matrices on this device
            seed += 1
            source_dtype = element_type(CONVERSIONS[conversion][0]).dtype
            count = clamped_layout(*shape, source_dtype, 0).element_count()  # the clamp value does not count
            label = conversion.removeprefix("CONV_").lower().replace("_", "-")
            yield convert_case(f"convert/{label}", conversion, *shape,
                               conversion_source(CONVERSIONS[conversion][0], count, seed))
        for rows, cols in transpose_shapes(caps):
            seed += 1
            count = clamped_layout(rows, cols, np.float16).element_count()
            yield transpose_case(f"transpose/{rows}x{cols}", rows, cols, index_pattern(count, np.float16))
