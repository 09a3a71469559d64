"""Shrinking a failing case: fewer dimensions, smaller sizes, simpler views, until no single step keeps it failing.

``shrink(case, fails_many)`` is greedy: each round lists every one-step simplification of the current
case (:func:`candidates`, simplest first), evaluates them in one batch (``fails_many(list) -> list[bool]``,
so a GPU target runs a round as one dispatch per variant), and moves to the first that still fails. At the
fixed point the case is 1-minimal: no candidate step fails. Candidates keep the generator's invariants
(valid state, no UNDEFINED element, and with ``hw`` indices inside the hardware target's buffers).
"""
from __future__ import annotations

import dataclasses
from typing import Callable, Iterator

from ..tensor import ElementStatus, TensorLayout, TensorSpecError, TensorView
from .cases import FuzzCase, hw_violation, packed_strides

DEFAULT_CLIP = (0, 0xFFFFFFFF, 0, 0xFFFFFFFF)


def _smaller(x: int, target: int) -> list[int]:
    """Values between target and x, closest to the target first."""
    if x == target:
        return []
    out = [target, target + (x - target) // 2, x - 1 if x > target else x + 1]
    return list(dict.fromkeys(v for v in out if v != x and (v - target) * (x - target) >= 0))


def _replace_layout(case: FuzzCase, **fields) -> FuzzCase:
    layout = dataclasses.replace(case.layout, **fields)
    if not case.explicit_stride:
        layout = dataclasses.replace(layout, stride=packed_strides(layout.layout_dimension, layout.block_size))
    return dataclasses.replace(case, layout=layout)


def _with_view(case: FuzzCase, view: TensorView | None, explicit_view_stride: bool | None = None) -> FuzzCase:
    spec = None if view is None else (view.dim, view.has_dimensions, view.permutation)
    variant = dataclasses.replace(case.variant, view=spec)
    if view is not None and view.has_dimensions and not (case.explicit_view_stride if explicit_view_stride is None
                                                         else explicit_view_stride):
        view = view.set_dimensions(view.view_dimension)  # packed strides
    return dataclasses.replace(case, variant=variant, view=view,
                               explicit_view_stride=bool(explicit_view_stride if explicit_view_stride is not None
                                                         else case.explicit_view_stride) and view is not None)


def _drop(values, i):
    return tuple(v for k, v in enumerate(values) if k != i)


def _drop_permutation(permutation, i):
    return tuple(p - (p > i) for p in permutation if p != i)


def _drop_view_dim(view: TensorView, i: int) -> TensorView:
    return TensorView(view.dim - 1, view.has_dimensions, _drop_permutation(view.permutation, i),
                      _drop(view.view_dimension, i), _drop(view.view_stride, i), view.clip_row_offset,
                      view.clip_row_span, view.clip_col_offset, view.clip_col_span)


def _raw_candidates(case: FuzzCase, fixed_shape: bool) -> Iterator[FuzzCase]:
    t, v = case.layout, case.view
    # Simpler views first.
    if v is not None:
        yield _with_view(case, None, False)
        clip = (v.clip_row_offset, v.clip_row_span, v.clip_col_offset, v.clip_col_span)
        if clip != DEFAULT_CLIP:
            yield _with_view(case, v.set_clip(*DEFAULT_CLIP))
        if case.explicit_view_stride:
            yield _with_view(case, v, False)
        if v.has_dimensions and v.dim == t.dim:
            yield _with_view(case, TensorView.create(v.dim, False, v.permutation).set_clip(*clip), False)
        if v.permutation != tuple(range(v.dim)):
            yield _with_view(case, dataclasses.replace(v, permutation=tuple(range(v.dim))))
        if v.dim > 1 and v.has_dimensions:
            for i in range(v.dim):
                yield _with_view(case, _drop_view_dim(v, i))
    # Fewer layout dimensions.
    if t.dim > 1:
        for i in range(t.dim):
            layout = TensorLayout(t.dim - 1, t.clamp_mode, _drop(t.block_size, i), _drop(t.layout_dimension, i),
                                  _drop(t.stride, i), _drop(t.offset, i), _drop(t.span, i), t.clamp_value)
            variant = dataclasses.replace(case.variant, ldim=t.dim - 1)
            smaller = dataclasses.replace(case, variant=variant, layout=layout)
            if not case.explicit_stride:
                smaller = _replace_layout(smaller)
            if v is not None and not v.has_dimensions:
                smaller = _with_view(smaller, _drop_view_dim(v, i))
            yield smaller
    # Packed strides, unit blocks.
    if case.explicit_stride:
        yield _replace_layout(dataclasses.replace(case, explicit_stride=False))
    if any(b != 1 for b in t.block_size):
        yield _replace_layout(case, block_size=(1,) * t.dim)
    # Smaller numbers.
    for field, target in (("layout_dimension", 1), ("span", 1), ("offset", 0), ("block_size", 1)):
        values = getattr(t, field)
        for i, x in enumerate(values):
            for y in _smaller(x, target):
                yield _replace_layout(case, **{field: values[:i] + (y,) + values[i + 1:]})
    if case.explicit_stride:
        for i, x in enumerate(t.stride):
            for y in _smaller(x, 0):
                yield dataclasses.replace(case, layout=dataclasses.replace(t, stride=t.stride[:i] + (y,) + t.stride[i + 1:]))
    if t.clamp_value:
        for y in _smaller(t.clamp_value, 0):
            yield _replace_layout(case, clamp_value=y)
    if v is not None:
        if v.has_dimensions:
            for i, x in enumerate(v.view_dimension):
                for y in _smaller(x, 1):
                    dims = v.view_dimension[:i] + (y,) + v.view_dimension[i + 1:]
                    yield _with_view(case, dataclasses.replace(v, view_dimension=dims))
            if case.explicit_view_stride:
                for i, x in enumerate(v.view_stride):
                    for y in _smaller(x, 0):
                        strides = v.view_stride[:i] + (y,) + v.view_stride[i + 1:]
                        yield _with_view(case, dataclasses.replace(v, view_stride=strides))
        for field, target in (("clip_row_offset", 0), ("clip_col_offset", 0)):
            for y in _smaller(getattr(v, field), target):
                yield _with_view(case, dataclasses.replace(v, **{field: y}))
        for field in ("clip_row_span", "clip_col_span"):
            x = getattr(v, field)
            if x != 0xFFFFFFFF:
                yield _with_view(case, dataclasses.replace(v, **{field: 0xFFFFFFFF}))
    if not fixed_shape:
        for y in _smaller(case.rows, 1):
            yield dataclasses.replace(case, rows=y)
        for y in _smaller(case.cols, 1):
            yield dataclasses.replace(case, cols=y)


def valid(case: FuzzCase, hw: bool) -> bool:
    """The generator's invariants: consistent state, no UNDEFINED element, hardware bounds when ``hw``."""
    try:
        case.check()
        reference = case.reference()
    except TensorSpecError:
        return False
    if (reference.status == ElementStatus.UNDEFINED).any():
        return False
    return not hw or hw_violation(case, reference.status, reference.indices) is None


def candidates(case: FuzzCase, *, hw: bool = False, fixed_shape: bool = False) -> list[FuzzCase]:
    """Every valid one-step simplification of ``case``, simplest first, without duplicates."""
    out, seen = [], {case}
    for candidate in _raw_candidates(case, fixed_shape):
        try:
            hash(candidate)
        except TypeError:
            continue
        if candidate in seen:
            continue
        seen.add(candidate)
        if valid(candidate, hw):
            out.append(candidate)
    return out


@dataclasses.dataclass
class ShrinkResult:
    case: FuzzCase
    steps: int
    evaluations: int
    complete: bool          # False when the evaluation budget ran out before the fixed point


def shrink(case: FuzzCase, fails_many: Callable[[list[FuzzCase]], list[bool]], *, hw: bool = False,
           fixed_shape: bool = False, max_evaluations: int = 5000) -> ShrinkResult:
    """Greedy shrinking (see the module docstring). ``fails_many`` must say True for ``case`` itself."""
    steps = evaluations = 0
    while True:
        options = candidates(case, hw=hw, fixed_shape=fixed_shape)
        if not options:
            return ShrinkResult(case, steps, evaluations, True)
        if evaluations + len(options) > max_evaluations:
            options = options[:max(0, max_evaluations - evaluations)]
            if not options:
                return ShrinkResult(case, steps, evaluations, False)
        results = fails_many(options)
        evaluations += len(options)
        for candidate, failed in zip(options, results):
            if failed:
                case = candidate
                steps += 1
                break
        else:
            return ShrinkResult(case, steps, evaluations, evaluations < max_evaluations)
