"""The picture of an :class:`~vkcoop.tensor.explain.Explanation`: the matrix and the tensor side by side.

Left, the matrix: each cell coloured by its status and labelled with the tensor element it reads (or
writes). Right, the tensor in its own coordinates (dimension 0 down, the innermost dimension across; with
more than two dimensions the outer ones are stacked down): every element some cell reaches is coloured
"in bounds" when a cell reads it in bounds, else with the remapping that reaches it, and labelled with its
memory index (tensorCoordToLinear, in blocks when blockSize > 1),
the slice (offset, span) is drawn dashed. A legend names the colours.

matplotlib is imported when a picture is drawn, through its object API (no pyplot state is touched).
"""
from __future__ import annotations

import io
from typing import NamedTuple

import numpy as np

from .explain import HAS_ELEMENT, STYLES, CellStatus, Explanation, title
from .spec import tensor_coord_to_linear

#: The largest number of rows / columns drawn per panel (bigger ones are cropped, and the crop is noted).
MAX_SIDE = 48


class Geometry(NamedTuple):
    """Where things landed in the image: ``size`` (width, height) in pixels; ``cells`` and ``tensor``, float
    (rows, cols, 4) boxes (x0, y0, x1, y1) in pixels, y downwards, of the drawn matrix cells and tensor
    elements (in the tensor drawing's rows and columns, see :func:`tensor_grid_shape`)."""
    size: tuple[int, int]
    cells: np.ndarray
    tensor: np.ndarray


def _rgb(colour: str) -> tuple[float, float, float]:
    return tuple(int(colour[i:i + 2], 16) / 255 for i in (1, 3, 5))


def tensor_grid_shape(dims) -> tuple[int, int]:
    """(rows, cols) of the tensor drawing: 1 x L0 for 1-D, L0 x L1 for 2-D, prod(L[:-1]) x L[-1] beyond."""
    if len(dims) == 1:
        return 1, int(dims[0])
    return int(np.prod(dims[:-1], dtype=np.int64)), int(dims[-1])


def _tensor_position(coord: np.ndarray, dims) -> tuple[np.ndarray, np.ndarray]:
    """Row and column in the tensor drawing of tensor coordinates (..., LDim)."""
    if len(dims) == 1:
        return np.zeros(coord.shape[:-1], dtype=np.int64), coord[..., 0]
    row = np.zeros(coord.shape[:-1], dtype=np.int64)
    for d in range(len(dims) - 1):
        row = row * int(dims[d]) + coord[..., d]
    return row, coord[..., -1]


def _tensor_colours(e: Explanation, shape) -> tuple[np.ndarray, np.ndarray]:
    """RGB (rows, cols, 3) of the tensor drawing (white where no cell reaches) and a bool mask of reached.
    An element's colour is the smallest status of the cells reaching it."""
    rgb = np.ones(shape + (3,))
    reached = np.zeros(shape, dtype=bool)
    has = np.isin(e.status, HAS_ELEMENT)
    rows, cols = _tensor_position(e.tensor_coord[has], e.layout.layout_dimension)
    statuses = e.status[has]
    # An element some cell reads in bounds is "in bounds"; one reached only through remapping gets the
    # remapping's colour (CellStatus orders them so): draw the highest statuses first.
    order = np.argsort(-statuses.astype(np.int64), kind="stable")
    for r, c, s in zip(rows[order].tolist(), cols[order].tolist(), statuses[order].tolist()):
        if r < shape[0] and c < shape[1]:
            rgb[r, c] = _rgb(STYLES[CellStatus(s)].colour)
            reached[r, c] = True
    return rgb, reached


def _memory_index(e: Explanation, row: int, col: int) -> int:
    """tensorCoordToLinear of the element drawn at (row, col): its blockCoord times the strides."""
    dims = e.layout.layout_dimension
    coord = [col]
    for d in range(len(dims) - 2, -1, -1):
        row, rest = divmod(row, int(dims[d]))
        coord.insert(0, rest)
    coord = coord[-len(dims):]
    return tensor_coord_to_linear(e.layout, [c // b for c, b in zip(coord, e.layout.block_size)])


def _grid(ax, rows: int, cols: int, colour: str = "white", width: float = 1.0) -> None:
    ax.set_xticks(np.arange(-0.5, cols, 1), minor=True)
    ax.set_yticks(np.arange(-0.5, rows, 1), minor=True)
    ax.grid(which="minor", color=colour, linewidth=width)
    ax.tick_params(which="minor", length=0)


def _ticks(ax, rows: int, cols: int) -> None:
    step_r, step_c = max(1, rows // 16), max(1, cols // 16)
    ax.set_xticks(range(0, cols, step_c))
    ax.set_yticks(range(0, rows, step_r))
    ax.xaxis.tick_top()
    ax.tick_params(labelsize=7, length=2)


def _labels(ax, texts, font: float, light=frozenset()) -> None:
    """Text at cell centres; cells in ``light`` (on a dark colour) get white text."""
    for (r, c), text in texts:
        ax.text(c, r, text, ha="center", va="center", fontsize=font, family="monospace",
                color="white" if (r, c) in light else "black")


def _draw_matrix(ax, e: Explanation, rows: int, cols: int, font: float) -> None:
    rgb = np.array([[_rgb(STYLES[CellStatus(s)].colour) for s in row] for row in e.status[:rows, :cols]])
    ax.imshow(rgb, interpolation="nearest", aspect="equal")
    _grid(ax, rows, cols)
    _ticks(ax, rows, cols)
    if font:
        dark = {(int(r), int(c)) for r, c in np.argwhere(e.status[:rows, :cols] == CellStatus.UNDEFINED)}
        _labels(ax, (((r, c), e.cell_text(r, c).rstrip(".")) for r in range(rows) for c in range(cols)), font,
                dark)
    crop = "" if (rows, cols) == (e.rows, e.cols) else f" (first {rows}x{cols} shown)"
    ax.set_xlabel(f"matrix {e.rows}x{e.cols}: row down, col across{crop}", fontsize=8)


def _draw_tensor(ax, e: Explanation, font: float) -> None:
    from matplotlib.patches import Rectangle
    dims = e.layout.layout_dimension
    full = tensor_grid_shape(dims)
    if 0 in full:
        ax.set_axis_off()
        ax.text(0.5, 0.5, f"empty tensor: layoutDimension {tuple(dims)}", ha="center", va="center",
                transform=ax.transAxes, fontsize=8)
        return
    shape = (min(full[0], MAX_SIDE), min(full[1], MAX_SIDE))
    rgb, reached = _tensor_colours(e, shape)
    ax.imshow(rgb, interpolation="nearest", aspect="equal")
    _grid(ax, *shape, colour="#b0b0b0", width=0.5)
    _ticks(ax, *shape)
    if font:
        _labels(ax, (((r, c), str(_memory_index(e, r, c))) for r in range(shape[0]) for c in range(shape[1])
                     if reached[r, c]), font * 0.9)
    # Outside the tensor (where a slice may reach) is grey; the tensor itself has a solid border.
    ax.set_facecolor("#ececec")
    ax.add_patch(Rectangle((-0.5, -0.5), shape[1], shape[0], fill=False, linewidth=1.2, edgecolor="black"))
    _draw_boundaries(ax, e, shape)
    if e.layout.dim <= 2:
        _draw_slice(ax, e, tensor_limits(e, shape))
    names = " x ".join(f"{d}" for d in dims)
    crop = "" if shape == full else f" (first {shape[0]}x{shape[1]} shown)"
    across = {1: "dim0 across", 2: "dim0 down, dim1 across"}.get(
        len(dims), f"dim0..{len(dims) - 2} down, dim{len(dims) - 1} across")
    ax.set_xlabel(f"tensor {names}: {across}{crop}; dashed: slice", fontsize=8)


def _draw_boundaries(ax, e: Explanation, shape) -> None:
    """Block edges (blockSize > 1) and, beyond two dimensions, the edges between the stacked outer slices."""
    dims, block = e.layout.layout_dimension, e.layout.block_size
    across = block[-1] if len(dims) <= 2 else 1
    down = block[0] if len(dims) == 2 else (dims[-2] if len(dims) > 2 else 1)
    style = dict(color="#404040", linewidth=1.2)
    if across > 1:
        for x in range(across, shape[1], across):
            ax.axvline(x - 0.5, **style)
    if down > 1:
        for y in range(down, shape[0], down):
            ax.axhline(y - 0.5, **style)


def _slice_box(t) -> tuple[int, int, int, int]:
    """(row0, rows, col0, cols) of the slice in the tensor drawing (1-D and 2-D layouts)."""
    if t.dim == 1:
        return 0, 1, t.offset[0], t.span[0]
    return t.offset[0], t.span[0], t.offset[1], t.span[1]


def tensor_limits(e: Explanation, shape, margin: int = 4) -> tuple[float, float, float, float]:
    """(x0, x1, y0, y1) of the tensor panel in element units: the tensor, widened to show where a 1-D or
    2-D slice reaches outside it (where the clamp mode acts), by at most ``margin`` elements."""
    x0, x1, y0, y1 = -0.5, shape[1] - 0.5, -0.5, shape[0] - 0.5
    if e.layout.dim <= 2 and 0 not in shape:
        r0, rs, c0, cs = _slice_box(e.layout)
        x0, x1 = min(x0, max(c0 - 1, -margin - 0.5)), max(x1, min(c0 + cs, shape[1] + margin - 0.5))
        y0, y1 = min(y0, max(r0 - 1, -margin - 0.5)), max(y1, min(r0 + rs, shape[0] + margin - 0.5))
    return x0, x1, y0, y1


def _draw_slice(ax, e: Explanation, limits) -> None:
    from matplotlib.patches import Rectangle
    r0, rs, c0, cs = _slice_box(e.layout)
    ax.add_patch(Rectangle((c0 - 0.5, r0 - 0.5), cs, rs, fill=False, linestyle="--", linewidth=1.5,
                           edgecolor="black"))
    ax.set_xlim(limits[0], limits[1])
    ax.set_ylim(limits[3], limits[2])     # rows grow downwards


def render(e: Explanation, target, *, command: str | None = None, dpi: int = 100) -> Geometry:
    """Draw ``e`` as a PNG into ``target`` (a path or a binary file object); ``command`` is printed under
    the title. Returns where the image and its matrix cells are."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch

    rows, cols = min(e.rows, MAX_SIDE), min(e.cols, MAX_SIDE)
    t_rows, t_cols = (min(x, MAX_SIDE) for x in tensor_grid_shape(e.layout.layout_dimension))
    x0, x1, y0, y1 = tensor_limits(e, (t_rows, t_cols))
    t_width, t_height = max(x1 - x0, 1), max(y1 - y0, 1)
    total_cols, total_rows = cols + t_width, max(rows, t_height, 1)
    cell = float(np.clip(9.0 / total_cols, 0.16, 0.42))
    width = max(6.0, total_cols * cell + 2.2)
    height = total_rows * cell + 2.0
    font = 0 if cell < 0.2 else min(8.0, cell * 22)
    fig = Figure(figsize=(width, height), dpi=dpi)
    FigureCanvasAgg(fig)
    left_w = (cols * cell) / width
    right_w = (t_width * cell) / width
    gap = (width - (cols + t_width) * cell) / width
    bottom, top = 0.8 / height, 1 - 0.95 / height
    ax_m = fig.add_axes([gap * 0.3, bottom, left_w, top - bottom])
    ax_t = fig.add_axes([gap * 0.3 + left_w + gap * 0.45, bottom, right_w, top - bottom])
    _draw_matrix(ax_m, e, rows, cols, font)
    _draw_tensor(ax_t, e, font)
    fig.suptitle(title(e), fontsize=9, y=1 - 0.15 / height, va="top")
    if command:
        fig.text(0.5, 1 - 0.48 / height, command, ha="center", va="top", fontsize=7, family="monospace")
    present = [s for s in CellStatus if s in e.counts()]
    fig.legend(handles=[Patch(facecolor=STYLES[s].colour, edgecolor="black", linewidth=0.5,
                              label=f"{STYLES[s].label} ({e.counts()[s]})") for s in present],
               loc="lower center", ncol=min(4, len(present)), fontsize=7, frameon=False)
    fig.canvas.draw()
    size = fig.canvas.get_width_height()
    geometry = Geometry(size, _boxes(ax_m, rows, cols, size[1]), _boxes(ax_t, t_rows, t_cols, size[1]))
    # The command goes into the PNG's metadata too, so a picture says how to make it again.
    fig.savefig(target, format="png", dpi=dpi, metadata={"Title": title(e), "Description": command or ""})
    return geometry


def _boxes(ax, rows: int, cols: int, height: int) -> np.ndarray:
    """Pixel boxes (x0, y0, x1, y1), y downwards, of the unit cells of an image axis."""
    centres = np.stack(np.meshgrid(np.arange(cols), np.arange(rows)), axis=-1).reshape(-1, 2).astype(float)
    a = ax.transData.transform(centres - 0.5)
    b = ax.transData.transform(centres + 0.5)
    # Pixel y from the transform grows upwards; the image's rows grow downwards.
    a[:, 1], b[:, 1] = height - a[:, 1], height - b[:, 1]
    boxes = np.concatenate([np.minimum(a, b), np.maximum(a, b)], axis=-1)
    return boxes.reshape(rows, cols, 4)


def png_bytes(e: Explanation, **options) -> bytes:
    buffer = io.BytesIO()
    render(e, buffer, **options)
    return buffer.getvalue()
