"""Alternative addressing models, to explain hardware mismatches.

When the hardware disagrees with the reference, each model here rewrites the case into what a plausible
different reading of the spec would compute, and the runner checks whether the observed result matches
that instead. A model that explains every mismatch of a class is strong evidence of *what* the driver does
(docs/spec-notes.md records the finding; the reference itself is never changed here).
"""
from __future__ import annotations

import dataclasses


from ..portable import reference_arrays
from . import compare
from .cases import FuzzCase


def _floor_packed_strides(case: FuzzCase) -> FuzzCase | None:
    """setTensorLayoutDimensionNV computing stride[i] = stride[i+1] * floor(dim[i+1] / blockSize[i+1])
    (the spec says ceiling). Only differs for implicit strides with a block size that does not divide the
    dimension."""
    t = case.layout
    if case.explicit_stride or all(b == 1 for b in t.block_size):
        return None
    strides, s = [0] * t.dim, 1
    for i in range(t.dim - 1, -1, -1):
        strides[i] = s
        s = (s * (t.layout_dimension[i] // t.block_size[i])) & 0xFFFFFFFF
    if tuple(strides) == t.stride:
        return None
    return dataclasses.replace(case, layout=dataclasses.replace(t, stride=tuple(strides)), explicit_stride=True)


MODELS = {"packed strides use floor(dim / blockSize)": _floor_packed_strides}


def _mirror_with_unit_dimension(case: FuzzCase) -> bool:
    from ..tensor import ClampMode
    t = case.layout
    return case.op == "load" and t.clamp_mode == ClampMode.RepeatMirrored and 1 in t.layout_dimension


#: Case features that go with a known disagreement whose outcome is not modelled (the hardware reads
#: outside the tensor, so the result is garbage): a mismatching case with the feature is attributed to it.
TAGS = {"MirrorRepeat load with a layout dimension of 1": _mirror_with_unit_dimension}


def tags(case: FuzzCase) -> list[str]:
    return [name for name, predicate in TAGS.items() if predicate(case)]


def explain(case: FuzzCase, kind: str, obs, elements: int) -> str | None:
    """The name of the first model whose reference matches the observation ``obs`` (one case's flat
    (indices, status, block_coord, coord_in_block) arrays, hardware target), else the first of the case's
    :data:`TAGS`, else None."""
    for name, model in MODELS.items():
        alternative = model(case)
        if alternative is None:
            continue
        ref = tuple(a[None, :elements] for a in reference_arrays(alternative, elements))
        o = tuple(None if a is None else a[None] for a in obs)
        if o[2] is None:
            o = (o[0], o[1], ref[2], ref[3])
        if not compare.element_mismatches("hw", kind, ref, o).any():
            return name
    found = tags(case)
    return found[0] if found else None
