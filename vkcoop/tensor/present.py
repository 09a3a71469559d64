"""How a layout or view presents itself: ``explain()`` text and the Jupyter ``_repr_png_`` / ``_repr_html_``.

The picture code sits above the state it draws, so :mod:`vkcoop.tensor.state` does not import it: importing
this module (the package does) registers it as the state's presenter.
"""
from __future__ import annotations

import sys

from . import state
from .explain import explain, default_shape, explain_text, packed_layout_for, state_rows
from .spec import LOAD
from .state import TensorSpecError


def _resolve(layout, view, rows, cols):
    """Fill in what a lone layout or view leaves open: the layout (a packed one for a lone view) and the
    matrix shape (:func:`default_shape`)."""
    if layout is None:
        layout = packed_layout_for(view)
    if rows is None or cols is None:
        shape = default_shape(layout, view)
        rows, cols = rows or shape[0], cols or shape[1]
    return layout, rows, cols, view


def explain_for(layout=None, view=None, rows=None, cols=None, op=LOAD, decode=False) -> str:
    """:func:`explain_text` with the gaps filled by :func:`_resolve` (TensorLayout/TensorView.explain)."""
    return explain_text(explain(*_resolve(layout, view, rows, cols), op=op), decode=decode)


def repr_png(layout=None, view=None) -> bytes | None:
    """The picture for Jupyter, or None (no matplotlib, or a state that addresses nothing yet)."""
    try:
        from .figure import png_bytes   # matplotlib only when a picture is asked for
        return png_bytes(explain(*_resolve(layout, view, None, None)))
    except (ImportError, TensorSpecError):
        return None


def repr_html(layout=None, view=None) -> str:
    """The picture (when there is one) above the state, for Jupyter."""
    import base64
    import html
    png = repr_png(layout, view)
    picture = "" if png is None else f'<img src="data:image/png;base64,{base64.b64encode(png).decode()}"/>'
    if layout is None:
        layout = packed_layout_for(view)
        note = "<p>(shown against a packed layout of the view's own size)</p>"
    else:
        note = ""
    rows = "".join(f"<tr><th style='text-align:left'>{html.escape(n)}</th><td><code>{html.escape(v)}</code></td>"
                   f"</tr>" for n, v in state_rows(layout, view))
    return f"<div>{picture}{note}<table>{rows}</table></div>"


state.PRESENTER = sys.modules[__name__]
