"""Sample 1: tensor load/store (coopMatLoadTensorNV / coopMatStoreTensorNV through a tensor layout).

Covers, each checked bit for bit against :func:`vkcoop.tensor.load` / :func:`vkcoop.tensor.store`:

* every clamp mode (GL_NV_cooperative_matrix2 4.1.X): Constant with a clampValue for fp16, fp32, bf16,
  int8, uint8 and int32 (out-of-bounds loads return the low bits of clampValue), ClampToEdge, Repeat and
  MirrorRepeat (coordinates remapped, several periods away from the tensor), and Undefined for in-bounds
  slices;
* slices with negative offsets, and explicit non-packed strides (setTensorLayoutStrideNV);
* 1-D to 5-D layouts, including a 1-D span shorter than the matrix (linearToSpanCoord wraps the
  outermost coordinate);
* stores that discard out-of-bounds elements in every clamp mode but Undefined (the destination is
  prefilled with a sentinel; padding between strided rows must keep it).

Known issue (reported by the run, not failed): MirrorRepeat against a layout dimension of 1 divides by
zero; the H200 returns an all-zero matrix where vkcoop.tensor maps the coordinate to 0 (UNIT_MIRROR_ISSUE).

Shapes come from the device's KHR cooperative-matrix table (the type's canonical use, see
``vkcoop.samples.base.ELEMENT_TYPES``). Shaders: ``shaders/samples/tensor_load_store/``.
"""
from __future__ import annotations

import numpy as np

from .. import tensor
from ..tensor import ClampMode
from .caps import BFLOAT16, COOPMAT2_BASE, ELEMENT_TYPES, INT8, DeviceCaps, SampleInputError, element_type
from .case import Binding, Case
from .recipes import LayoutRecipe, check_unique_store_targets, index_pattern, records, require_array, split_extent
from .runner import Sample, register

SHADER_DIR = "samples/tensor_load_store/"
CLAMP_MODE_NAMES = {
    ClampMode.Undefined: "gl_CooperativeMatrixClampModeUndefinedNV",
    ClampMode.Constant: "gl_CooperativeMatrixClampModeConstantNV",
    ClampMode.ClampToEdge: "gl_CooperativeMatrixClampModeClampToEdgeNV",
    ClampMode.Repeat: "gl_CooperativeMatrixClampModeRepeatNV",
    ClampMode.RepeatMirrored: "gl_CooperativeMatrixClampModeMirrorRepeatNV",
}
MODE_LABELS = {ClampMode.Undefined: "undefined", ClampMode.Constant: "constant",
               ClampMode.ClampToEdge: "clamp-to-edge", ClampMode.Repeat: "repeat",
               ClampMode.RepeatMirrored: "mirror-repeat"}

#: Constant-mode clamp values, one per type, distinct from every value the index pattern produces there.
CLAMP_VALUES = {"F16": -0.5, "F32": -0.5, "BF16": -0.5, "S8": -128, "U8": 255, "S32": -123456}
#: Store sentinels: values the stored matrix never holds (see store_matrix_values).
STORE_SENTINELS = {"F16": -2048.0, "F32": 0.25, "BF16": -512.0, "S8": -128, "U8": 255, "S32": 0x7FFFFFFF}


def store_matrix_values(count: int, element: str) -> np.ndarray:
    """The matrix a store case writes: the index pattern, kept off the type's sentinel."""
    dtype = element_type(element).dtype
    i = np.arange(count, dtype=np.int64)
    if element == "S8":
        return ((i % 255) - 127).astype(np.int8)
    if element == "U8":
        return (i % 255).astype(np.uint8)
    return index_pattern(count, dtype)


# --------------------------------------------------------------------------- case builders


def load_case(name: str, element: str, layout: LayoutRecipe, rows: int, cols: int,
              source: np.ndarray | None = None, known_issue: str | None = None) -> Case:
    """A tensor-load case: ``source`` (default: the index pattern) read through ``layout`` into a
    rows x cols matrix of ``element``; expected output from :func:`vkcoop.tensor.load`."""
    et = element_type(element)
    if source is None:
        source = index_pattern(layout.element_count(), et.dtype)
    require_array(source, "source", dtype=et.dtype, ndim=1)
    shader = SHADER_DIR + ("load_clamp.comp" if layout.dim == 2 else "load_dims.comp")
    defines = {"CLAMP_MODE": CLAMP_MODE_NAMES[layout.clamp_mode]}
    if layout.dim == 2:
        defines["ELEMENT"] = element
    elif element != "F16":
        raise SampleInputError(f"{layout.dim}-D layouts are sampled with F16 only (load_dims.comp), got {element}")
    else:
        defines["LDIM"] = str(layout.dim)
    expected = tensor.load(source, layout.layout(), rows, cols, dtype=et.dtype).reshape(-1)
    return Case(name, shader, defines,
                [Binding("records", records(layout)), Binding("source", source),
                 Binding("destination", np.zeros_like(expected), expected=expected)],
                specialization={"ROWS": rows, "COLS": cols, "EXPLICIT_STRIDE": layout.explicit_stride},
                known_issue=known_issue)


def store_case(name: str, element: str, layout: LayoutRecipe, matrix: np.ndarray,
               prefill: np.ndarray | None = None) -> Case:
    """A tensor-store case: ``matrix`` (rows x cols of ``element``) stored through ``layout`` into a
    destination prefilled with the type's sentinel; expected from :func:`vkcoop.tensor.store`."""
    et = element_type(element)
    matrix = require_array(matrix, "matrix", dtype=et.dtype, ndim=2)
    if layout.block_size is not None:
        raise SampleInputError("stores must not use block sizes (SPV_NV_cooperative_matrix2)")
    if prefill is None:
        prefill = np.full(layout.element_count() + 16, STORE_SENTINELS[element], dtype=np.float64).astype(et.dtype)
    require_array(prefill, "prefill", dtype=et.dtype, ndim=1)
    shader = SHADER_DIR + ("store_clamp.comp" if layout.dim == 2 else "store_dims.comp")
    if layout.dim == 2:
        defines = {"ELEMENT": element, "CLAMP_MODE": CLAMP_MODE_NAMES[layout.clamp_mode]}
    elif element != "F16" or layout.clamp_mode != ClampMode.Constant:
        raise SampleInputError(f"{layout.dim}-D stores are sampled with F16 and Constant clamp only (store_dims.comp)")
    else:
        defines = {"LDIM": str(layout.dim)}
    rows, cols = matrix.shape
    check_unique_store_targets(layout.layout(), rows, cols)
    expected = prefill.copy()
    tensor.store(matrix, expected, layout.layout())
    return Case(name, shader, defines,
                [Binding("records", records(layout)), Binding("source", np.ascontiguousarray(matrix).reshape(-1)),
                 Binding("destination", prefill, expected=expected)],
                specialization={"ROWS": rows, "COLS": cols, "EXPLICIT_STRIDE": layout.explicit_stride})


# --------------------------------------------------------------------------- geometry


def clamp_bits(element: str) -> int:
    return tensor.clamp_value_bits(CLAMP_VALUES[element], element_type(element).dtype)


def layouts_2d(mode: ClampMode, rows: int, cols: int, element: str) -> dict[str, LayoutRecipe]:
    """Two 2-D layouts per clamp mode: a packed tensor smaller than the matrix read through a slice with
    negative offsets, and a row-padded (explicit stride) tensor read past its far edges. Undefined mode
    gets in-bounds slices only (its out-of-bounds results are undefined)."""
    clamp = clamp_bits(element) if mode == ClampMode.Constant else 0
    if mode == ClampMode.Undefined:
        return {
            "inside": LayoutRecipe((rows + 5, cols + 7), mode, offsets=(3, 5), spans=(rows, cols)),
            "inside-strided": LayoutRecipe((rows + 2, cols + 3), mode, stride=(cols + 11, 1), offsets=(1, 2),
                                           spans=(rows, cols)),
        }
    height, width = max(rows - 5, 3), max(cols - 6, 3)
    # The remapping modes start far enough out to wrap more than one period (remainders of negative c);
    # Constant starts just outside so the slice still overlaps the tensor.
    first_row = -2 if mode == ClampMode.Constant else -2 * height - 1
    return {
        "negative-offsets": LayoutRecipe((height, width), mode, offsets=(first_row, -3), spans=(rows, cols),
                                         clamp_value=clamp),
        "strided-far-edge": LayoutRecipe((height, width), mode, stride=(width + 9, 1), offsets=(2, width // 2),
                                         spans=(rows, cols), clamp_value=clamp),
    }


def layouts_nd(dim: int, mode: ClampMode, rows: int, cols: int) -> dict[str, LayoutRecipe]:
    """1-D and 3-D..5-D layouts whose slice covers the matrix (rows * cols elements), with negative
    offsets and tensors smaller than the slice in some dimensions; one packed, one explicitly strided."""
    clamp = clamp_bits("F16") if mode == ClampMode.Constant else 0
    spans = split_extent(rows * cols, dim)
    offsets = tuple((-1 if d % 2 == 0 else 1) * (1 + d % 3) for d in range(dim))
    # Every dimension >= 2: MirrorRepeat against a dimension of 1 divides by zero (see UNIT_MIRROR_ISSUE).
    dims = tuple(max(s - 1 + (d % 2) * 2, 2) for d, s in enumerate(spans))
    packed_strides = tensor.TensorLayout.create(dim).set_dimension(*dims).stride
    padded = []
    s = 1
    for d in range(dim - 1, -1, -1):  # each stride exceeds the packed one: gaps between rows/planes
        padded.append(s)
        s = s * dims[d] + 3
    padded = tuple(reversed(padded))
    assert all(p >= q for p, q in zip(padded, packed_strides))
    found = {
        "packed": LayoutRecipe(dims, mode, offsets=offsets, spans=spans, clamp_value=clamp),
        "strided": LayoutRecipe(dims, mode, stride=padded, offsets=offsets, spans=spans, clamp_value=clamp),
    }
    if dim == 1:
        # A span shorter than the matrix: linearToSpanCoord takes the index modulo span[0].
        found["short-span"] = LayoutRecipe((rows * cols // 3,), mode, offsets=(-5,), spans=(rows * cols // 2 - 3,),
                                           clamp_value=clamp)
    return found


UNIT_MIRROR_ISSUE = (
    "MirrorRepeat against a layout dimension of 1: the period 2L-2 is 0 (OpSMod by zero, undefined in the "
    "spec); vkcoop.tensor maps every coordinate to 0 (docs/spec-notes.md, 'MirrorRepeat with L = 1'). "
    "On the H200 (driver 580.159) 2-D and 5-D loads with one such dimension returned 0.0 for every element, "
    "in-bounds ones included.")


@register
class TensorLoadStore(Sample):
    name = "tensor-load-store"
    description = ("coopMatLoadTensorNV/coopMatStoreTensorNV: every clamp mode (Constant for fp16/fp32/bf16/"
                   "int8/uint8/int32), negative-offset slices, non-packed strides, 1-D..5-D layouts, "
                   "out-of-bounds stores discarded")
    requires = COOPMAT2_BASE + INT8 + BFLOAT16
    order = 10

    def cases(self, caps: DeviceCaps) -> list[Case]:
        cases = []
        for element in ELEMENT_TYPES:
            rows, cols = caps.pick_shape(element)
            for mode in CLAMP_MODE_NAMES:
                for label, layout in layouts_2d(mode, rows, cols, element).items():
                    cases.append(load_case(f"load/{element}/{MODE_LABELS[mode]}/{label}", element, layout, rows, cols))
                for label, layout in layouts_2d(mode, rows, cols, element).items():
                    matrix = store_matrix_values(rows * cols, element).reshape(rows, cols)
                    cases.append(store_case(f"store/{element}/{MODE_LABELS[mode]}/{label}", element, layout, matrix))
        rows, cols = caps.pick_shape("F16")
        unit = LayoutRecipe((1, cols - 3), ClampMode.RepeatMirrored, offsets=(-1, -2), spans=(rows, cols))
        cases.append(load_case("load/F16/mirror-repeat/unit-dimension", "F16", unit, rows, cols,
                               known_issue=UNIT_MIRROR_ISSUE))
        for dim in (1, 3, 4, 5):
            for mode in (ClampMode.Constant, ClampMode.ClampToEdge, ClampMode.Repeat, ClampMode.RepeatMirrored):
                for label, layout in layouts_nd(dim, mode, rows, cols).items():
                    cases.append(load_case(f"load/F16/{dim}d/{MODE_LABELS[mode]}/{label}", "F16", layout, rows, cols))
            for label, layout in layouts_nd(dim, ClampMode.Constant, rows, cols).items():
                if label == "short-span":
                    continue  # several elements would hit one address; which store wins is unspecified
                matrix = store_matrix_values(rows * cols, "F16").reshape(rows, cols)
                cases.append(store_case(f"store/F16/{dim}d/constant/{label}", "F16", layout, matrix))
        return cases
