"""Printing a case as a GLSL snippet (the builder calls a shader would make) and the reference's view of it."""
from __future__ import annotations

import numpy as np

from ..tensor import ElementStatus
from .cases import FuzzCase
from .hw import MODE_DEFINES

GLSL_TYPES = {"fp16": "float16_t", "fp32": "float", "int8": "int8_t", "uint8": "uint8_t", "int32": "int32_t"}
STATUS_SYMBOLS = {ElementStatus.CLAMP_VALUE: "C", ElementStatus.DISCARDED: "x", ElementStatus.SKIPPED_BY_CLIP: ".",
                  ElementStatus.UNDEFINED: "U", 254: "?", 255: " "}
STATUS_NAMES = {0: "IN_BOUNDS", 1: "CLAMP_VALUE", 2: "DISCARDED/not written", 3: "SKIPPED_BY_CLIP", 4: "UNDEFINED",
                254: "garbage", 255: "-"}


def _args(values) -> str:
    return ", ".join(str(v) for v in values)


def glsl_snippet(case: FuzzCase) -> str:
    """The GLSL that builds ``case``'s layout and view and performs its access."""
    t, v, variant = case.layout, case.view, case.variant
    mode = MODE_DEFINES[t.clamp_mode]
    lines = [f"tensorLayoutNV<{t.dim}, {mode}> t = createTensorLayoutNV({t.dim}, {mode});"]
    if any(b != 1 for b in t.block_size):
        lines.append(f"t = setTensorLayoutBlockSizeNV(t, {_args(t.block_size)});")
    lines.append(f"t = setTensorLayoutDimensionNV(t, {_args(t.layout_dimension)});")
    if case.explicit_stride:
        lines.append(f"t = setTensorLayoutStrideNV(t, {_args(f'{s}u' for s in t.stride)});")
    pairs = ", ".join(f"{o}, {s}u" for o, s in zip(t.offset, t.span))
    lines.append(f"t = sliceTensorLayoutNV(t, {pairs});")
    if t.clamp_value:
        lines.append(f"t = setTensorLayoutClampValueNV(t, 0x{t.clamp_value:x}u);")
    tensor = "t"
    if v is not None:
        has = str(v.has_dimensions).lower()
        lines.append(f"tensorViewNV<{v.dim}, {has}, {_args(v.permutation)}> v = "
                     f"createTensorViewNV({v.dim}, {has}, {_args(v.permutation)});")
        if v.has_dimensions:
            lines.append(f"v = setTensorViewDimensionsNV(v, {_args(v.view_dimension)});")
            if case.explicit_view_stride:
                lines.append(f"v = setTensorViewStrideNV(v, {_args(f'{s}u' for s in v.view_stride)});")
        clip = (v.clip_row_offset, v.clip_row_span, v.clip_col_offset, v.clip_col_span)
        if clip != (0, 0xFFFFFFFF, 0, 0xFFFFFFFF):
            lines.append("v = setTensorViewClipNV(v, " + ", ".join(f"{c}u" if c < 0xFFFFFFFF else "0xFFFFFFFFu"
                                                                   for c in clip) + ");")
        tensor = "t, v"
    rows, cols = case.rows, case.cols
    if variant.kind == "decode":
        lines.append(f"coopmat<int32_t, gl_ScopeSubgroup, {rows}, {cols}, gl_MatrixUseAccumulator> m;")
        lines.append(f"coopMatLoadTensorNV(m, buf /* {GLSL_TYPES[case.component]} blocks */, 0, {tensor}, decode);"
                     "  // decode(Block, blockCoord[], coordInBlock[])")
    else:
        use = "gl_MatrixUseAccumulator" if case.component in ("fp32", "int32") else "gl_MatrixUseA"
        lines.append(f"coopmat<{GLSL_TYPES[case.component]}, gl_ScopeSubgroup, {rows}, {cols}, {use}> m;")
        call = "coopMatStoreTensorNV" if variant.kind == "store" else "coopMatLoadTensorNV"
        lines.append(f"{call}(m, buf, 0, {tensor});")
    return "\n".join(lines)


def python_snippet(case: FuzzCase) -> str:
    """The same case for vkcoop.tensor (paste into Python)."""
    t, v = case.layout, case.view
    text = (f"t = TensorLayout({t.dim}, ClampMode.{t.clamp_mode.name}, {t.block_size}, {t.layout_dimension}, "
            f"{t.stride}, {t.offset}, {t.span}, 0x{t.clamp_value:x})")
    if v is not None:
        text += (f"\nv = TensorView({v.dim}, {v.has_dimensions}, {v.permutation}, {v.view_dimension}, "
                 f"{v.view_stride}, {v.clip_row_offset}, {v.clip_row_span}, {v.clip_col_offset}, {v.clip_col_span})")
    text += f"\nm = index_map(t, {case.rows}, {case.cols}, {'v' if v is not None else 'None'}, op={case.op!r})"
    return text


def _cell(status: int, index: int) -> str:
    return str(index) if status == ElementStatus.IN_BOUNDS else STATUS_SYMBOLS.get(int(status), "?")


def reference_view(case: FuzzCase, ref, obs=None, bad=None, *, max_rows: int = 16, max_cols: int = 32,
                   max_listed: int = 8) -> str:
    """The reference's index (or status symbol) for each element; elements where ``bad`` is set are marked
    ``!`` and listed with what the target observed. ``ref``/``obs``: (indices, status, bc, cib) of one case
    (flat E arrays). Symbols: C clamp value, x discarded, . clipped, U undefined, ? garbage."""
    rows, cols = case.rows, case.cols
    r_idx, r_st = np.asarray(ref[0]), np.asarray(ref[1])
    width = max(3, max(len(_cell(r_st[e], r_idx[e])) for e in range(rows * cols)) + 1)
    out = [f"reference ({case.op}, {rows}x{cols}; C clamp value, x discarded, . clipped, ! mismatch):"]
    for r in range(min(rows, max_rows)):
        cells = []
        for c in range(min(cols, max_cols)):
            e = r * cols + c
            mark = "!" if bad is not None and bad[e] else " "
            cells.append(_cell(r_st[e], r_idx[e]).rjust(width) + mark)
        out.append("".join(cells) + (" ..." if cols > max_cols else ""))
    if rows > max_rows:
        out.append("...")
    if bad is not None and obs is not None:
        listed = np.nonzero(bad[:rows * cols])[0][:max_listed]
        for e in listed:
            r, c = divmod(int(e), cols)
            text = (f"  ({r},{c}): reference {STATUS_NAMES[int(r_st[e])]} index {int(r_idx[e])}; observed "
                    f"{STATUS_NAMES.get(int(obs[1][e]), obs[1][e])} index {int(obs[0][e])}")
            if obs[2] is not None and ref[2] is not None and r_st[e] == ElementStatus.IN_BOUNDS:
                n = case.layout.dim
                text += (f"; blockCoord {tuple(int(x) for x in ref[2][e][:n])} vs "
                         f"{tuple(int(x) for x in obs[2][e][:n])}, coordInBlock {tuple(int(x) for x in ref[3][e][:n])}"
                         f" vs {tuple(int(x) for x in obs[3][e][:n])}")
            out.append(text)
        total = int(np.count_nonzero(bad))
        if total > len(listed):
            out.append(f"  ... {total - len(listed)} more mismatching elements")
    return "\n".join(out)
