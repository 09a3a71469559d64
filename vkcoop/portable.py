"""vkcoop.portable: the tensor addressing of cooperative_matrix2 on any Vulkan device (no coopmat needed).

``shaders/portable/tensor_addressing.comp`` is a scalar GLSL port of the spec's addressing
pseudo-code (SPV_NV_cooperative_matrix2 3.X, matrixCoordToTensorElement(WithView)) that needs only
Vulkan 1.2 compute and 32-bit integer arithmetic. It reads layout and view *state* (the values the
builders produce, computed here with :mod:`vkcoop.tensor`) from a buffer, one record per case, and
writes each matrix element's index, :class:`~vkcoop.tensor.ElementStatus`, blockCoord and
coordInBlock. One workgroup per case, any number of cases per dispatch. In CI it runs on lavapipe and
is cross-checked against :func:`vkcoop.tensor.index_map`; ``vkcoop demo`` dispatches it on machines
without a coopmat2 GPU.

Public API
----------
``AddressingCase(layout, rows, cols, view=None, op="load", explicit_stride=False, explicit_view_stride=False)``
    one matrix access (any object with these attributes is accepted, e.g. ``vkcoop.fuzz.FuzzCase``).
``encode_records(cases) -> np.ndarray`` uint32 (n, RECORD_WORDS): the shader's input records.
``PortableRunner(device, validate=None)`` (context manager; ``device`` a :class:`vkcoop.vk.Device`, or an
    index/name/None to open one here, with the validation layer if ``validate``): ``run(cases) -> AddressingResult`` dispatches them (chunked) and reads back.
``AddressingResult``: ``indices`` int64 (n, E), ``status`` uint8 (n, E), ``block_coord`` and
    ``coord_in_block`` int64 (n, E, 5), E = the largest rows*cols; element (r, c) of case k is
    ``[k, r * cols + c]``; -1 wherever the status is not IN_BOUNDS, 0 for coordinates >= LDim.
    ``case(k, rows, cols) -> IndexMap`` gives one case in :func:`vkcoop.tensor.index_map`'s form.
``reference_arrays(case) -> (indices, status, block_coord, coord_in_block)`` the reference in the same
    padded form (for vectorized comparison).
``vkcoop demo`` (:mod:`vkcoop.cli.demo`) dispatches a showcase and random fuzz cases through it.
"""
from __future__ import annotations

from typing import NamedTuple, Sequence

import numpy as np

from .errors import InputError
from .tensor import ElementStatus, IndexMap, TensorLayout, TensorView, index_map

SHADER = "portable/tensor_addressing.comp"
RECORD_WORDS = 64
OUT_WORDS = 12
MAX_DIM = 5
# Record word offsets (mirrored by the shader's R_* defines).
R_LDIM, R_MODE, R_OP, R_ROWS, R_COLS, R_CLAMP_VALUE, R_FLAGS, R_VDIM = range(8)
R_BLOCK, R_DIM, R_STRIDE, R_OFFSET, R_SPAN = 8, 13, 18, 23, 28
R_PERM, R_VIEW_DIM, R_VIEW_STRIDE, R_CLIP = 33, 38, 43, 48
FLAG_VIEW, FLAG_HAS_DIMENSIONS, FLAG_EXPLICIT_STRIDE, FLAG_EXPLICIT_VIEW_STRIDE = 1, 2, 4, 8
# Keep one dispatch's output below this many bytes (lavapipe and readback friendly).
_MAX_OUTPUT_BYTES = 192 << 20
_MAX_GROUPS = 65535


class AddressingCase(NamedTuple):
    """One matrix access: ``rows x cols`` elements through ``layout`` (and ``view``), a load or a store.
    ``explicit_stride`` / ``explicit_view_stride`` say whether the GLSL calls setTensorLayoutStrideNV /
    setTensorViewStrideNV (the state is the same either way; hardware shaders use the flags)."""
    layout: TensorLayout
    rows: int
    cols: int
    view: TensorView | None = None
    op: str = "load"
    explicit_stride: bool = False
    explicit_view_stride: bool = False


class PortableInputError(InputError):
    """A case the portable shader cannot take (names the case and the parameter)."""


def _check_case(k: int, case) -> None:
    if case.op not in ("load", "store"):
        raise PortableInputError(f"case {k}: op must be 'load' or 'store', got {case.op!r}")
    for name in ("rows", "cols"):
        value = getattr(case, name)
        if not isinstance(value, (int, np.integer)) or not 1 <= value <= 1 << 16:
            raise PortableInputError(f"case {k}: {name} must be an int in 1..65536, got {value!r}")
    if case.rows * case.cols > 1 << 20:
        raise PortableInputError(f"case {k}: rows * cols = {case.rows * case.cols} exceeds 2^20 elements")
    if not isinstance(case.layout, TensorLayout):
        raise PortableInputError(f"case {k}: layout must be a vkcoop.tensor.TensorLayout")
    if any(s == 0 for s in case.layout.span):
        raise PortableInputError(f"case {k}: layout span {case.layout.span} has a zero (set_dimension/slice first)")
    view = case.view
    if view is not None:
        if not isinstance(view, TensorView):
            raise PortableInputError(f"case {k}: view must be a vkcoop.tensor.TensorView or None")
        if not view.has_dimensions and view.dim != case.layout.dim:
            raise PortableInputError(f"case {k}: view dim {view.dim} must equal layout dim {case.layout.dim} "
                                     f"when has_dimensions is False")
        if view.has_dimensions and any(d == 0 for d in view.view_dimension):
            raise PortableInputError(f"case {k}: view_dimension {view.view_dimension} has a zero")


def encode_records(cases: Sequence) -> np.ndarray:
    """The shader's input: one uint32 record of RECORD_WORDS words per case (layout shown in the shader)."""
    records = np.zeros((len(cases), RECORD_WORDS), dtype=np.uint32)
    for k, case in enumerate(cases):
        _check_case(k, case)
        t, v = case.layout, case.view
        w = records[k]
        n = t.dim
        w[R_LDIM], w[R_MODE], w[R_OP] = n, int(t.clamp_mode), int(case.op == "store")
        w[R_ROWS], w[R_COLS], w[R_CLAMP_VALUE] = case.rows, case.cols, t.clamp_value
        flags = FLAG_EXPLICIT_STRIDE if getattr(case, "explicit_stride", False) else 0
        w[R_BLOCK:R_BLOCK + n] = t.block_size
        w[R_DIM:R_DIM + n] = t.layout_dimension
        w[R_STRIDE:R_STRIDE + n] = t.stride
        w[R_OFFSET:R_OFFSET + n] = [o & 0xFFFFFFFF for o in t.offset]
        w[R_SPAN:R_SPAN + n] = t.span
        if v is not None:
            flags |= FLAG_VIEW | (FLAG_HAS_DIMENSIONS if v.has_dimensions else 0)
            if getattr(case, "explicit_view_stride", False):
                flags |= FLAG_EXPLICIT_VIEW_STRIDE
            w[R_VDIM] = v.dim
            w[R_PERM:R_PERM + v.dim] = v.permutation
            w[R_VIEW_DIM:R_VIEW_DIM + v.dim] = v.view_dimension
            w[R_VIEW_STRIDE:R_VIEW_STRIDE + v.dim] = v.view_stride
            w[R_CLIP:R_CLIP + 4] = (v.clip_row_offset, v.clip_row_span, v.clip_col_offset, v.clip_col_span)
        w[R_FLAGS] = flags
    return records


class AddressingResult(NamedTuple):
    """Per-case, per-element results, padded to the largest matrix (see the module docstring)."""
    indices: np.ndarray
    status: np.ndarray
    block_coord: np.ndarray
    coord_in_block: np.ndarray

    def case(self, k: int, rows: int, cols: int, ldim: int) -> IndexMap:
        """Case k as an :class:`vkcoop.tensor.IndexMap` (shape rows x cols, LDim coordinates)."""
        e = rows * cols
        return IndexMap(self.indices[k, :e].reshape(rows, cols), self.status[k, :e].reshape(rows, cols),
                        self.block_coord[k, :e, :ldim].reshape(rows, cols, ldim),
                        self.coord_in_block[k, :e, :ldim].reshape(rows, cols, ldim))


def reference_arrays(case, elements: int | None = None):
    """vkcoop.tensor.index_map of ``case`` flattened and padded like :class:`AddressingResult`'s rows:
    (indices int64 (E,), status uint8 (E,), block_coord int64 (E, 5), coord_in_block int64 (E, 5));
    padding elements get status 255."""
    e = case.rows * case.cols
    elements = e if elements is None else elements
    m = index_map(case.layout, case.rows, case.cols, case.view, case.op)
    indices = np.full(elements, -1, dtype=np.int64)
    status = np.full(elements, 255, dtype=np.uint8)
    block = np.full((elements, MAX_DIM), -1, dtype=np.int64)
    inblock = np.full((elements, MAX_DIM), -1, dtype=np.int64)
    indices[:e] = m.indices.reshape(-1)
    status[:e] = m.status.reshape(-1)
    n = case.layout.dim
    valid = status[:e] == ElementStatus.IN_BOUNDS
    block[:e, :n] = m.block_coord.reshape(e, n)
    inblock[:e, :n] = m.coord_in_block.reshape(e, n)
    block[:e, n:] = np.where(valid, 0, -1)[:, None]
    inblock[:e, n:] = np.where(valid, 0, -1)[:, None]
    return indices, status, block, inblock


class PortableRunner:
    """Dispatches cases through the portable shader on one Vulkan device (opened here if ``device`` is None)."""

    def __init__(self, device=None, *, validate: bool | None = None):
        import spirv_tools

        from . import vk
        from .paths import shader_path
        self._owns_device = device is None or not isinstance(device, vk.Device)
        self.device = (vk.Device(device, validate=validate) if self._owns_device
                       else device)
        try:
            spirv = spirv_tools.compile(path=shader_path(SHADER), target_env="vulkan1.2")
            self.pipeline = self.device.pipeline(spirv, name="portable-tensor-addressing")
        except BaseException:
            self.close()
            raise
        self.gpu_ns = 0.0

    def run(self, cases: Sequence) -> AddressingResult:
        """Dispatch ``cases`` (a workgroup each; chunked to bound memory) and read the results back."""
        if not cases:
            raise PortableInputError("cases is empty")
        records = encode_records(cases)
        elements = int(max(c.rows * c.cols for c in cases))
        per_case = elements * OUT_WORDS * 4
        chunk = max(1, min(_MAX_GROUPS, _MAX_OUTPUT_BYTES // per_case))
        n = len(cases)
        indices = np.empty((n, elements), dtype=np.int64)
        status = np.empty((n, elements), dtype=np.uint8)
        block = np.empty((n, elements, MAX_DIM), dtype=np.int64)
        inblock = np.empty((n, elements, MAX_DIM), dtype=np.int64)
        for start in range(0, n, chunk):
            stop = min(n, start + chunk)
            raw = self._dispatch(records[start:stop], elements).reshape(stop - start, elements, OUT_WORDS)
            st = raw[:, :, 1]
            valid = st == ElementStatus.IN_BOUNDS
            # Padding elements (beyond a case's rows*cols) were never written: mark them 255.
            counts = (records[start:stop, R_ROWS].astype(np.int64) * records[start:stop, R_COLS])
            pad = np.arange(elements)[None, :] >= counts[:, None]
            status[start:stop] = np.where(pad, 255, st).astype(np.uint8)
            indices[start:stop] = np.where(valid & ~pad, raw[:, :, 0].astype(np.int64), -1)
            keep = (valid & ~pad)[:, :, None]
            block[start:stop] = np.where(keep, raw[:, :, 2:7].astype(np.int64), -1)
            inblock[start:stop] = np.where(keep, raw[:, :, 7:12].astype(np.int64), -1)
        return AddressingResult(indices, status, block, inblock)

    def _dispatch(self, records: np.ndarray, elements: int) -> np.ndarray:
        count = len(records)
        with self.device.upload(np.ascontiguousarray(records), name="portable-records") as record_buffer, \
                self.device.empty(count * elements * OUT_WORDS, np.uint32, name="portable-results") as out:
            self.gpu_ns += self.device.run(self.pipeline, [record_buffer, out], (count, 1, 1),
                                           push=(count, elements))
            return out.read()

    def close(self):
        pipeline = getattr(self, "pipeline", None)
        if pipeline is not None and not self._owns_device:
            pipeline.close()
        self.pipeline = None
        if self._owns_device and getattr(self, "device", None) is not None:
            self.device.close()
        self.device = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
