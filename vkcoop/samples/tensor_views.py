"""Sample 2: tensor views (coopMatLoadTensorNV / coopMatStoreTensorNV with a tensorViewNV).

Covers, checked bit for bit against :func:`vkcoop.tensor.load` / :func:`vkcoop.tensor.store` with a view:

* permuted loads and stores: a column-major source read as a row-major matrix (the GLSL spec's
  "Load from col-major matrix" example) and the matching transposed store;
* hasDimensions false (dimensions and strides from the layout span) and true (explicit view dimensions,
  packed or explicit view strides), including a 4-D view of a 2-D layout (tile swizzle) and a 3-D permutation;
* clip regions: clipped-out elements keep their previous value on loads and are not written on stores,
  and the clip changes the row width (``min(N, clipColSpan)``) of the addressing;
* 2x2 space-to-depth of an HWC tensor (the spec's example), also from a slice of a larger tensor;
* all through a Constant-clamp layout, so slices that reach outside the tensor read the clamp value.

Shader: ``shaders/samples/tensor_views/view.comp`` (fp16, use A, one subgroup).
"""
from __future__ import annotations

import numpy as np

from .. import tensor
from ..tensor import ClampMode
from .caps import COOPMAT2_BASE, DeviceCaps, SampleInputError
from .case import Binding, Case
from .recipes import LayoutRecipe, ViewRecipe, check_unique_store_targets, index_pattern, records, split_extent
from .runner import Sample, register

SHADER = "samples/tensor_views/view.comp"
PREVIOUS = -3.0            # view.comp: PREVIOUS, the matrix value before a load (clipped elements keep it)
STORE_SENTINEL = -2048.0   # outside the fp16 index pattern's range [-1024, 1023]
CLAMP_VALUE = tensor.clamp_value_bits(-0.5, np.float16)

#: view.comp's VIEW_KIND -> (layout dim, view dim, hasDimensions, permutation); the shader hard-codes the same.
VIEW_KINDS = {
    "VIEW_TRANSPOSE": (2, 2, False, (1, 0)),
    "VIEW_TRANSPOSE_DIMS": (2, 2, True, (1, 0)),
    "VIEW_IDENTITY": (2, 2, False, (0, 1)),
    "VIEW_PERMUTE3": (3, 3, False, (2, 0, 1)),
    "VIEW_RESHAPE4": (2, 4, True, (0, 2, 1, 3)),
    "VIEW_SPACE_TO_DEPTH": (3, 5, True, (0, 2, 1, 3, 4)),
}


def make_view(kind: str, dimensions=None, stride=None, clip=None) -> ViewRecipe:
    if kind not in VIEW_KINDS:
        raise SampleInputError(f"view kind must be one of {sorted(VIEW_KINDS)}, got {kind!r}")
    _, vdim, has_dimensions, permutation = VIEW_KINDS[kind]
    return ViewRecipe(vdim, has_dimensions, permutation, dimensions, stride, clip)


def view_case(name: str, kind: str, layout: LayoutRecipe, view: ViewRecipe, rows: int, cols: int, *,
              store: bool) -> Case:
    """A load (``store=False``) or store through ``layout`` and ``view`` for a rows x cols fp16 matrix."""
    ldim = VIEW_KINDS[kind][0]
    if layout.dim != ldim:
        raise SampleInputError(f"{kind} uses a {ldim}-D layout, got {layout.dim}-D")
    if layout.clamp_mode != ClampMode.Constant:
        raise SampleInputError("view.comp builds its layout with Constant clamp")
    expected_view = make_view(kind, view.dimensions, view.stride, view.clip)
    if expected_view != view:
        raise SampleInputError(f"view does not match {kind}: {view}")
    spec = {"ROWS": rows, "COLS": cols, "EXPLICIT_STRIDE": layout.explicit_stride,
            "EXPLICIT_VIEW_STRIDE": view.explicit_stride}
    defines = {"VIEW_KIND": kind, "OP_STORE": "1" if store else "0"}
    if store:
        check_unique_store_targets(layout.layout(), rows, cols, view.view())
        matrix = index_pattern(rows * cols, np.float16).reshape(rows, cols)
        destination = np.full(layout.element_count() + 16, STORE_SENTINEL, dtype=np.float16)
        expected = destination.copy()
        tensor.store(matrix, expected, layout.layout(), view.view())
        bindings = [Binding("records", records(layout, view)), Binding("source", matrix.reshape(-1)),
                    Binding("destination", destination, expected=expected)]
    else:
        source = index_pattern(layout.element_count(), np.float16)
        previous = np.full((rows, cols), PREVIOUS, dtype=np.float16)
        expected = tensor.load(source, layout.layout(), rows, cols, view.view(), dtype=np.float16,
                               previous=previous).reshape(-1)
        bindings = [Binding("records", records(layout, view)), Binding("source", source),
                    Binding("destination", np.zeros_like(expected), expected=expected)]
    return Case(name, SHADER, defines, bindings, specialization=spec)


def space_to_depth_geometry(rows: int, cols: int) -> tuple[int, int, int]:
    """(H, W, channels) whose 2x2 space-to-depth is a rows x cols matrix: (H/2 * W/2) x (4 * channels)."""
    if cols % 4:
        raise SampleInputError(f"space-to-depth needs a column count divisible by 4, got {cols}")
    half_h, half_w = split_extent(rows, 2)
    return 2 * half_h, 2 * half_w, cols // 4


def check_matrix_shape(rows, cols) -> None:
    for name, n in (("rows", rows), ("cols", cols)):
        if not isinstance(n, (int, np.integer)) or n <= 0 or n % 4:
            raise SampleInputError(f"{name} must be a positive multiple of 4, got {n!r}")


def view_layouts(rows: int, cols: int) -> list[tuple[str, str, LayoutRecipe, ViewRecipe]]:
    """(label, kind, layout, view) for every view case of a rows x cols matrix."""
    check_matrix_shape(rows, cols)
    C = CLAMP_VALUE
    found = []
    # Column-major source: columns outermost, slice (col0, cols, row0, rows), rows and columns swapped by the view.
    found.append(("transpose", "VIEW_TRANSPOSE",
                  LayoutRecipe((cols + 3, rows + 5), offsets=(2, 1), spans=(cols, rows), clamp_value=C),
                  make_view("VIEW_TRANSPOSE")))
    found.append(("transpose/negative-offset", "VIEW_TRANSPOSE",
                  LayoutRecipe((cols - 2, rows + 1), stride=(rows + 7, 1), offsets=(-3, 4), spans=(cols, rows),
                               clamp_value=C),
                  make_view("VIEW_TRANSPOSE")))
    found.append(("transpose/clip", "VIEW_TRANSPOSE",
                  LayoutRecipe((cols, rows), clamp_value=C),
                  make_view("VIEW_TRANSPOSE", clip=(1, rows - 3, 2, cols // 2))))
    # hasDimensions true: explicit dimensions with packed strides (a transpose) ...
    found.append(("transpose-dims", "VIEW_TRANSPOSE_DIMS",
                  LayoutRecipe((cols, rows + 2), offsets=(0, 1), spans=(cols, rows), clamp_value=C),
                  make_view("VIEW_TRANSPOSE_DIMS", dimensions=(cols, rows))))
    # ... and explicit strides that undo the permutation (stride (1, cols): a row-major read).
    found.append(("transpose-dims/stride", "VIEW_TRANSPOSE_DIMS",
                  LayoutRecipe((rows, cols), clamp_value=C),
                  make_view("VIEW_TRANSPOSE_DIMS", dimensions=(cols, rows), stride=(1, cols))))
    # Identity view with clip regions (clip width below the matrix width changes the addressing).
    found.append(("identity/clip", "VIEW_IDENTITY",
                  LayoutRecipe((rows + 4, cols + 4), offsets=(1, 2), spans=(rows, cols), clamp_value=C),
                  make_view("VIEW_IDENTITY", clip=(2, rows - 5, 3, cols - 6))))
    found.append(("identity/clip-past-end", "VIEW_IDENTITY",
                  LayoutRecipe((rows, cols), offsets=(-1, 0), spans=(rows, cols), clamp_value=C),
                  make_view("VIEW_IDENTITY", clip=(rows // 2, 1000, 0, cols // 2))))
    # A 3-D permutation of the span (hasDimensions false).
    s0, s1, s2 = split_extent(rows * cols, 3)
    found.append(("permute3", "VIEW_PERMUTE3",
                  LayoutRecipe((s0 + 1, s1, s2 + 2), offsets=(0, -1, 1), spans=(s0, s1, s2), clamp_value=C),
                  make_view("VIEW_PERMUTE3")))
    # A 2-D layout seen as (rows/4, 4, cols/4, 4) and permuted: 4x4 tiles swizzled.
    found.append(("reshape4/tiles", "VIEW_RESHAPE4",
                  LayoutRecipe((rows, cols), clamp_value=C),
                  make_view("VIEW_RESHAPE4", dimensions=(rows // 4, 4, cols // 4, 4))))
    found.append(("reshape4/tiles-strided", "VIEW_RESHAPE4",
                  LayoutRecipe((rows + 2, cols + 2), stride=(cols + 5, 1), offsets=(1, 1), spans=(rows, cols),
                               clamp_value=C),
                  make_view("VIEW_RESHAPE4", dimensions=(rows // 4, 4, cols // 4, 4), stride=(4 * cols, cols, 4, 1),
                            clip=(0, rows, 0, cols))))
    # 2x2 space-to-depth of an HWC tensor: the whole tensor, and a slice of a larger one.
    h, w, ch = space_to_depth_geometry(rows, cols)
    s2d_view = make_view("VIEW_SPACE_TO_DEPTH", dimensions=(h // 2, 2, w // 2, 2, ch))
    found.append(("space-to-depth", "VIEW_SPACE_TO_DEPTH", LayoutRecipe((h, w, ch), clamp_value=C), s2d_view))
    found.append(("space-to-depth/slice", "VIEW_SPACE_TO_DEPTH",
                  LayoutRecipe((h + 4, w + 2, ch), offsets=(3, -1, 0), spans=(h, w, ch), clamp_value=C), s2d_view))
    return found


@register
class TensorViews(Sample):
    name = "tensor-views"
    description = ("tensor views: transposed loads/stores, hasDimensions true/false, explicit view strides, "
                   "4-D and 3-D permutations, clip regions, 2x2 space-to-depth")
    requires = COOPMAT2_BASE
    order = 20

    def cases(self, caps: DeviceCaps) -> list[Case]:
        rows, cols = caps.pick_shape("F16", "A")
        cases = []
        for label, kind, layout, view in view_layouts(rows, cols):
            cases.append(view_case(f"load/{label}", kind, layout, view, rows, cols, store=False))
            cases.append(view_case(f"store/{label}", kind, layout, view, rows, cols, store=True))
        return cases
