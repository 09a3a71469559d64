"""What a tensor layout (and view) does to each cell of a matrix, in a form to look at.

The numbers come from :func:`vkcoop.tensor.index_map` (SPV_NV_cooperative_matrix2 3.X,
matrixCoordToTensorElement(WithView)); this module only classifies and presents them. ``index_map``
calls an out-of-bounds element that ClampToEdge, Repeat or RepeatMirrored brought back into the tensor
IN_BOUNDS (the spec's spanCoordToTensorCoord remaps ``c`` and carries on); to tell those apart, the same
layout is mapped once more with clamp mode Constant, which flags exactly the out-of-bounds elements
(spanCoordToTensorCoord's ``c < 0 || c >= layoutDimension`` test does not depend on the mode).

Entry points: :func:`explain` -> :class:`Explanation` (per-cell ``index``, ``status``, ``block_coord``,
``coord_in_block``, ``tensor_coord``), :func:`explain_text`, :func:`state_rows` (the state in the spec's
terms), :func:`default_shape`; rich renderables for a terminal: :func:`grid_table`, :func:`legend_text`,
:func:`state_table`. Pictures: :mod:`vkcoop.tensor.figure`; GLSL: :mod:`vkcoop.tensor.glsl`.
"""
from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from .spec import LOAD, check_view_matches, view_strides
from .state import UINT32_MAX, ClampMode, ElementStatus, TensorLayout, TensorView
from .vectorized import index_map


class CellStatus(enum.IntEnum):
    """What happens to one matrix cell (finer than :class:`ElementStatus`: remapped loads are told apart)."""
    IN_BOUNDS = 0
    CLAMPED_TO_EDGE = 1
    REPEATED = 2
    MIRRORED = 3
    CLAMP_VALUE = 4
    DISCARDED = 5
    CLIPPED = 6
    UNDEFINED = 7


class StatusStyle(NamedTuple):
    key: str        # JSON name
    label: str      # legend text
    colour: str     # "#rrggbb", shared by the terminal and the picture
    marker: str     # appended to the index (remapped) or shown instead of it (no element)


STYLES = {
    CellStatus.IN_BOUNDS: StatusStyle("in_bounds", "in bounds", "#9bd39b", ""),
    CellStatus.CLAMPED_TO_EDGE: StatusStyle("clamped_to_edge", "clamped to the edge", "#f7c873", "e"),
    CellStatus.REPEATED: StatusStyle("repeated", "repeated", "#86b6e8", "r"),
    CellStatus.MIRRORED: StatusStyle("mirrored", "mirrored", "#c3a3e6", "m"),
    CellStatus.CLAMP_VALUE: StatusStyle("clamp_value", "constant clamp value", "#f2a0c4", "C"),
    CellStatus.DISCARDED: StatusStyle("discarded", "discarded store", "#e57373", "x"),
    CellStatus.CLIPPED: StatusStyle("clipped", "clipped away (view clip)", "#cfcfcf", "."),
    CellStatus.UNDEFINED: StatusStyle("undefined", "undefined (spec)", "#5a5a5a", "?"),
}
_FROM_ELEMENT = {ElementStatus.IN_BOUNDS: CellStatus.IN_BOUNDS, ElementStatus.CLAMP_VALUE: CellStatus.CLAMP_VALUE,
                 ElementStatus.DISCARDED: CellStatus.DISCARDED, ElementStatus.SKIPPED_BY_CLIP: CellStatus.CLIPPED,
                 ElementStatus.UNDEFINED: CellStatus.UNDEFINED}
_REMAPPED = {ClampMode.ClampToEdge: CellStatus.CLAMPED_TO_EDGE, ClampMode.Repeat: CellStatus.REPEATED,
             ClampMode.RepeatMirrored: CellStatus.MIRRORED}
#: Statuses whose cell reads or writes a tensor element (``index`` >= 0).
HAS_ELEMENT = (CellStatus.IN_BOUNDS, CellStatus.CLAMPED_TO_EDGE, CellStatus.REPEATED, CellStatus.MIRRORED)


@dataclass(frozen=True, eq=False)
class Explanation:
    """Per-cell results for a ``rows`` x ``cols`` matrix loaded (or stored) through ``layout`` (and ``view``).

    ``index`` int64 (rows, cols): the tensor element read or written, -1 where there is none;
    ``status`` uint8 of :class:`CellStatus`; ``block_coord`` / ``coord_in_block`` int64 (rows, cols, LDim),
    the decode function's arguments; ``tensor_coord`` = blockCoord * blockSize + coordInBlock, the element's
    coordinate in the tensor after clamping (all -1 where there is no element)."""
    layout: TensorLayout
    view: TensorView | None
    rows: int
    cols: int
    op: str
    index: np.ndarray
    status: np.ndarray
    block_coord: np.ndarray
    coord_in_block: np.ndarray

    @property
    def tensor_coord(self) -> np.ndarray:
        coord = self.block_coord * np.asarray(self.layout.block_size) + self.coord_in_block
        return np.where(self.block_coord >= 0, coord, -1)

    def counts(self) -> dict[CellStatus, int]:
        """How many cells have each status (statuses that occur only)."""
        values, counts = np.unique(self.status, return_counts=True)
        return {CellStatus(int(v)): int(n) for v, n in zip(values, counts)}

    def cell_text(self, row: int, col: int) -> str:
        """The index (with the remapping marker) or the status marker of one cell."""
        status = CellStatus(int(self.status[row, col]))
        marker = STYLES[status].marker
        return f"{self.index[row, col]}{marker}" if status in HAS_ELEMENT else marker

    def decode_text(self, row: int, col: int) -> str:
        """``blockCoord/coordInBlock`` of one cell, e.g. ``1,0/0,1`` (the status marker without an element)."""
        if self.block_coord[row, col, 0] < 0:
            return STYLES[CellStatus(int(self.status[row, col]))].marker
        return (",".join(map(str, self.block_coord[row, col])) + "/"
                + ",".join(map(str, self.coord_in_block[row, col])))

    def to_json(self) -> dict:
        """Everything as JSON-able lists: ``index``, ``status`` (keys of :data:`STYLES`), ``block_coord``,
        ``coord_in_block`` (rows x cols [x LDim]) plus the state."""
        from .glsl import to_glsl
        keys = np.array([STYLES[s].key for s in CellStatus])
        return {"op": self.op, "matrix": {"rows": self.rows, "cols": self.cols},
                "layout": layout_json(self.layout), "view": None if self.view is None else view_json(self.view),
                "glsl": to_glsl(self.layout, self.view),
                "statuses": {STYLES[s].key: STYLES[s].label for s in CellStatus},
                "counts": {STYLES[s].key: n for s, n in self.counts().items()},
                "index": self.index.tolist(), "status": keys[self.status].tolist(),
                "block_coord": self.block_coord.tolist(), "coord_in_block": self.coord_in_block.tolist()}


def explain(layout: TensorLayout, rows: int, cols: int, view: TensorView | None = None,
            op: str = LOAD) -> Explanation:
    """Classify every cell of a rows x cols matrix (see the module docstring); raises TensorSpecError like
    :func:`index_map`."""
    m = index_map(layout, rows, cols, view, op)
    lookup = np.zeros(max(ElementStatus) + 1, dtype=np.uint8)
    for element_status, cell_status in _FROM_ELEMENT.items():
        lookup[element_status] = cell_status
    status = lookup[m.status]
    remapped_as = _REMAPPED.get(layout.clamp_mode)
    if op == LOAD and remapped_as is not None:
        probe = index_map(dataclasses.replace(layout, clamp_mode=ClampMode.Constant), rows, cols, view, op)
        remapped = (m.status == ElementStatus.IN_BOUNDS) & (probe.status == ElementStatus.CLAMP_VALUE)
        status[remapped] = remapped_as
    return Explanation(layout, view, int(rows), int(cols), op, m.indices, status, m.block_coord,
                       m.coord_in_block)


def default_shape(layout: TensorLayout, view: TensorView | None = None, limit: int = 64) -> tuple[int, int]:
    """A matrix shape that covers the view (or the layout span) once: the innermost dimension of the
    addressing order as columns, the rest as rows (each capped at ``limit``); raises TensorSpecError for a
    view that cannot be used with the layout."""
    if view is not None:
        check_view_matches(layout, view)
    if view is None or not view.has_dimensions:
        dims = layout.span
    else:
        dims = view.view_dimension
    order = list(range(len(dims))) if view is None else list(view.permutation)
    cols = max(1, dims[order[-1]])
    rows = max(1, int(np.prod([dims[d] for d in order[:-1]], dtype=np.int64)))
    return min(rows, limit), min(cols, limit)


def packed_layout_for(view: TensorView, side: int = 4) -> TensorLayout:
    """A packed Constant-mode layout to show a view against when no layout is given: the view's own
    dimensions when it has them (flattened to VDim = LDim otherwise), ``side`` per dimension when not."""
    if view.has_dimensions:
        total = int(np.prod(view.view_dimension, dtype=np.int64))
        return TensorLayout.create(1, ClampMode.Constant).set_dimension(min(total, UINT32_MAX))
    return TensorLayout.create(view.dim, ClampMode.Constant).set_dimension(*[side] * view.dim)


# --------------------------------------------------------------------------- state in the spec's terms

def _hex(value: int) -> str:
    return f"0x{value:08X}"


def layout_json(t: TensorLayout) -> dict:
    return {"dim": t.dim, "clamp_mode": t.clamp_mode.name, "block_size": list(t.block_size),
            "dimension": list(t.layout_dimension), "stride": list(t.stride), "offset": list(t.offset),
            "span": list(t.span), "clamp_value": t.clamp_value}


def view_json(v: TensorView) -> dict:
    return {"dim": v.dim, "has_dimensions": v.has_dimensions, "permutation": list(v.permutation),
            "dimension": list(v.view_dimension), "stride": list(v.view_stride),
            "clip": [v.clip_row_offset, v.clip_row_span, v.clip_col_offset, v.clip_col_span]}


def state_rows(layout: TensorLayout, view: TensorView | None = None) -> list[tuple[str, str]]:
    """(name, value) rows of the layout and view state, named as in GL_NV_cooperative_matrix2 4.1.X."""
    t = layout
    rows = [("layout", f"tensorLayoutNV<{t.dim}, {t.clamp_mode.name}>"),
            ("layoutDimension", _tuple(t.layout_dimension)), ("stride", _tuple(t.stride)),
            ("offset", _tuple(t.offset)), ("span", _tuple(t.span)), ("blockSize", _tuple(t.block_size)),
            ("clampValue", _hex(t.clamp_value))]
    rows += [("warning", problem) for problem in t.usage_violations()]
    if view is not None:
        v = view
        rows.append(("view", f"tensorViewNV<{v.dim}, {str(v.has_dimensions).lower()}, "
                             f"{', '.join(map(str, v.permutation))}>"))
        if v.has_dimensions:
            rows += [("viewDimension", _tuple(v.view_dimension)), ("viewStride", _tuple(v.view_stride))]
        elif v.dim == t.dim:
            rows.append(("viewStride", f"{_tuple(view_strides(t, v))} (packed from the span: hasDimensions "
                                       f"is false)"))
        clip = [_span_text(x) for x in (v.clip_row_offset, v.clip_row_span, v.clip_col_offset, v.clip_col_span)]
        rows.append(("clip", f"rows {clip[0]} + {clip[1]}, cols {clip[2]} + {clip[3]}"))
    return rows


def _span_text(value: int) -> str:
    return "0xFFFFFFFF" if value == UINT32_MAX else str(value)


def _tuple(values) -> str:
    return "(" + ", ".join(map(str, values)) + ")"


def title(e: Explanation) -> str:
    through = f"tensorLayoutNV<{e.layout.dim}, {e.layout.clamp_mode.name}>"
    if e.view is not None:
        through += f" + tensorViewNV<{e.view.dim}, {str(e.view.has_dimensions).lower()}, " \
                   f"{', '.join(map(str, e.view.permutation))}>"
    return f"{e.op} of a {e.rows}x{e.cols} matrix through {through}"


def explain_text(e: Explanation, decode: bool = False, max_cols: int = 32, max_rows: int = 64) -> str:
    """A plain-text grid of the cells (index, or blockCoord/coordInBlock with ``decode``), a legend and the
    state; markers stand for the statuses, since plain text has no colours."""
    texts = [[(e.decode_text if decode else e.cell_text)(r, c) for c in range(min(e.cols, max_cols))]
             for r in range(min(e.rows, max_rows))]
    width = max(3, max(len(x) for row in texts for x in row) + 1)
    lines = [title(e), "     " + "".join(str(c).rjust(width) for c in range(len(texts[0])))]
    for r, row in enumerate(texts):
        lines.append(f"{r:>4} " + "".join(x.rjust(width) for x in row) + (" ..." if e.cols > max_cols else ""))
    if e.rows > max_rows:
        lines.append("     ...")
    lines.append("legend: " + "; ".join(f"{STYLES[s].marker or 'N'} {STYLES[s].label} ({n})"
                                        for s, n in e.counts().items()) + "  (N: a tensor index)")
    lines += [f"{name:>16}: {value}" for name, value in state_rows(e.layout, e.view)]
    return "\n".join(lines)


# --------------------------------------------------------------------------- rich renderables (vkcoop explain)

def _cell_style(status: CellStatus, mismatch: bool = False) -> str:
    text = "white" if status == CellStatus.UNDEFINED else "black"
    return f"{'bold underline ' if mismatch else ''}{text} on {STYLES[status].colour}"


def grid_table(e: Explanation, *, decode: bool = False, check=None, max_cols: int = 32, max_rows: int = 64):
    """A rich Table of the cells: the index (or blockCoord/coordInBlock), coloured by status; the cells
    ``check.mismatch`` marks (a hardware run that disagrees) get '!', or their ``check.finding``'s name."""
    from rich.table import Table
    rows, cols = min(e.rows, max_rows), min(e.cols, max_cols)
    table = Table(show_edge=False, pad_edge=False, padding=(0, 1), box=None,
                  title=("decode: blockCoord/coordInBlock" if decode else None))
    table.add_column("", justify="right", style="dim")
    for c in range(cols):
        table.add_column(str(c), justify="right")
    for r in range(rows):
        cells = []
        for c in range(cols):
            text = e.decode_text(r, c) if decode else e.cell_text(r, c)
            bad = check is not None and bool(check.mismatch[r, c])
            if bad:
                text += f" {check.finding[r, c]}" if check.finding[r, c] else "!"
            cells.append(f"[{_cell_style(CellStatus(int(e.status[r, c])), bad)}]{text}[/]")
        table.add_row(str(r), *cells)
    if e.cols > max_cols or e.rows > max_rows:
        table.caption = f"first {rows} rows x {cols} columns of {e.rows}x{e.cols} shown (--json has all)"
    return table


def legend_text(e: Explanation):
    from rich.text import Text
    legend = Text("legend: ")
    for status, count in e.counts().items():
        style = STYLES[status]
        legend.append(f" {style.marker or 'N'} ", style=_cell_style(status))
        legend.append(f" {style.label} ({count})   ")
    legend.append("N = tensor element index")
    return legend


def state_table(e: Explanation):
    from rich.table import Table
    table = Table(title="state (GL_NV_cooperative_matrix2 names)", show_header=False, box=None)
    table.add_column(style="bold")
    table.add_column()
    for name, value in state_rows(e.layout, e.view):
        table.add_row(name, f"[yellow]{value}[/]" if name == "warning" else value)
    return table


# --------------------------------------------------------------------------- TensorLayout / TensorView methods
