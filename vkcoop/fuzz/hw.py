"""The "hw" target: coopMatLoadTensorNV / coopMatStoreTensorNV on a coopmat2 device (shaders/fuzz/tensor_hw.comp).

The result of each access reveals the addressing (SPV_NV_cooperative_matrix2 3.X):

* loads read sources whose element i holds digits of i itself (one load per digit; one more load from
  a source of MARK values tells in-bounds elements from clipped ones, which keep PREV, and from
  Constant-clamped ones, which get the clamp value);
* stores write matrices whose element (r, c) holds digits of its id r * cols + c (plus a MARK matrix)
  into zeroed regions, so every written position names the element written there;
* decode loads return, through decode functions, the block index (buffer_reference address minus the
  source address, divided by the block size), MARK, and each blockCoord[d] / coordInBlock[d].

Each is turned back into per-element (status, index, blockCoord, coordInBlock) arrays shaped like
:class:`vkcoop.portable.AddressingResult`, so one comparison serves both targets.
"""
from __future__ import annotations

import concurrent.futures
import time

import numpy as np

from ..portable import MAX_DIM, encode_records
from ..tensor import ClampMode, ElementStatus
from .cases import (COMPONENT_DTYPES, MARK_VALUE, PREVIOUS_VALUE, SOURCE_ELEMENTS, STORE_REGION, FuzzCase,
                    Variant)

SHADER = "fuzz/tensor_hw.comp"
#: Features the hardware shaders need (the extensions come with them).
HW_FEATURES = ("cooperativeMatrix", "cooperativeMatrixTensorAddressing", "cooperativeMatrixBlockLoads",
               "vulkanMemoryModel", "shaderFloat16", "storageBuffer16BitAccess", "shaderInt8",
               "storageBuffer8BitAccess", "bufferDeviceAddress", "shaderInt64", "maintenance4")
ELEMENT_DEFINES = {"fp16": "F16", "fp32": "F32", "int8": "S8", "uint8": "U8", "int32": "S32"}
MODE_DEFINES = {ClampMode.Undefined: "gl_CooperativeMatrixClampModeUndefinedNV",
                ClampMode.Constant: "gl_CooperativeMatrixClampModeConstantNV",
                ClampMode.ClampToEdge: "gl_CooperativeMatrixClampModeClampToEdgeNV",
                ClampMode.Repeat: "gl_CooperativeMatrixClampModeRepeatNV",
                ClampMode.RepeatMirrored: "gl_CooperativeMatrixClampModeMirrorRepeatNV"}
KIND_DEFINES = {"load": "KIND_LOAD", "store": "KIND_STORE", "decode": "KIND_DECODE"}
#: Digits of an index / element id per component: (count for loads, count for stores, base). Float digits are
#: exact integers (fp16 is exact to 2048, fp32 to 2^24); 8-bit digits are bit patterns.
DIGITS = {"fp16": (2, 1, 2048), "fp32": (1, 1, 1 << 24), "int8": (2, 2, 256), "uint8": (2, 2, 256),
          "int32": (1, 1, 1 << 32)}
#: Observed status of an element whose results fit no pattern (garbage).
STATUS_GARBAGE = 254

_UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32}


def as_component(values, component: str) -> np.ndarray:
    """Integers (digits, markers) as the component type: floats by value, integers by bit pattern."""
    dtype = COMPONENT_DTYPES[component]
    values = np.asarray(values, dtype=np.int64)
    if dtype.kind == "f":
        return values.astype(dtype)
    return (values & ((1 << (8 * dtype.itemsize)) - 1)).astype(_UINT[dtype.itemsize]).view(dtype)


def _digit_values(values: np.ndarray, component: str) -> np.ndarray:
    """Component values -> digit integers (-1 for anything that is not a valid digit)."""
    dtype = COMPONENT_DTYPES[component]
    if dtype.kind == "f":
        as_int = np.where(np.isfinite(values), values, -1).astype(np.int64)
        return np.where((as_int == values) & (as_int >= 0), as_int, -1)
    return values.view(_UINT[dtype.itemsize]).astype(np.int64)


def _bits(values: np.ndarray) -> np.ndarray:
    return values.view(_UINT[values.dtype.itemsize])


def variant_defines(variant: Variant) -> dict:
    rows, cols = variant.hw_shape
    load_digits, store_digits, _ = DIGITS[variant.component]
    defines = {"KIND": KIND_DEFINES[variant.kind], "ELEMENT": ELEMENT_DEFINES[variant.component],
               "LDIM": str(variant.ldim), "CLAMP_MODE": MODE_DEFINES[variant.clamp_mode],
               "DIGITS": str(store_digits if variant.kind == "store" else load_digits),
               "ROWS": str(rows), "COLS": str(cols), "SRC_LEN": str(SOURCE_ELEMENTS), "REGION": str(STORE_REGION)}
    if variant.view is None:
        defines["HAS_VIEW"] = "0"
    else:
        vdim, has_dimensions, permutation = variant.view
        defines.update(HAS_VIEW="1", VDIM=str(vdim), VIEW_HAS_DIMENSIONS=str(int(has_dimensions)),
                       VIEW_PERM=", ".join(map(str, permutation)))
    return defines


def compile_variant(variant: Variant) -> bytes:
    import spirv_tools

    from ..paths import shader_path, shader_root
    return spirv_tools.compile(path=shader_path(SHADER), defines=variant_defines(variant),
                               include_dirs=[shader_root() / "include"])


class HwObservation:
    """What the hardware did, per element: ``indices``/``status``/``block_coord``/``coord_in_block`` shaped
    (n, E[, 5]) like AddressingResult; stores also have ``written`` (n, STORE_REGION) bool and ``corrupt``
    (n,) bool (ids that name no element, or an element written twice)."""

    def __init__(self, indices, status, block_coord=None, coord_in_block=None, written=None, corrupt=None):
        self.indices, self.status = indices, status
        self.block_coord, self.coord_in_block = block_coord, coord_in_block
        self.written, self.corrupt = written, corrupt


class HwRunner:
    """Pipelines for a set of variants on a coopmat2 :class:`vkcoop.vk.Device`, and their dispatch."""

    def __init__(self, device, variants=(), *, threads: int = 8):
        self.device = device
        self.pipelines: dict[Variant, object] = {}
        self.compile_seconds = 0.0
        self.gpu_ns = 0.0
        self._sources: dict[tuple, object] = {}
        self.source_data: dict[tuple, np.ndarray] = {}
        self.threads = threads
        self.prepare(variants)

    # -- pipelines ------------------------------------------------------------------------------------------
    def prepare(self, variants) -> float:
        """Compile and create the pipelines of ``variants`` not yet made (in threads: glslang and the
        driver's compiler release the GIL). Returns the seconds spent."""
        todo = [v for v in dict.fromkeys(variants) if v not in self.pipelines]
        if not todo:
            return 0.0
        started = time.perf_counter()

        def make(variant):
            spirv = compile_variant(variant)
            return variant, self.device.pipeline(spirv, name=f"fuzz {variant.label}")

        with concurrent.futures.ThreadPoolExecutor(max_workers=self.threads) as pool:
            for variant, pipeline in pool.map(make, todo):
                self.pipelines[variant] = pipeline
        seconds = time.perf_counter() - started
        self.compile_seconds += seconds
        return seconds

    def _source(self, kind: str, component: str):
        key = (kind, component)
        if key in self._sources:
            return self._sources[key]
        load_digits, store_digits, base = DIGITS[component]
        if kind == "load":
            i = np.arange(SOURCE_ELEMENTS, dtype=np.int64)
            parts = [as_component((i // base ** k) % base, component) for k in range(load_digits)]
            parts.append(as_component(np.full(SOURCE_ELEMENTS, MARK_VALUE), component))
            data = np.concatenate(parts)
        elif kind == "store":
            rows, cols = Variant("store", component, 1, ClampMode.Constant).hw_shape
            ids = np.arange(rows * cols, dtype=np.int64)
            parts = [as_component((ids // base ** k) % base, component) for k in range(store_digits)]
            parts.append(as_component(np.full(rows * cols, MARK_VALUE), component))
            data = np.concatenate(parts)
        else:  # decode: contents unused, only addresses
            data = np.zeros(SOURCE_ELEMENTS, dtype=COMPONENT_DTYPES[component])
        buffer = self._upload_source(data, f"fuzz-source-{kind}-{component}")
        self.source_data[key] = data
        self._sources[key] = buffer
        return buffer

    def _upload_source(self, data: np.ndarray, name: str):
        return self.device.upload(data, name=name)

    # -- dispatch -------------------------------------------------------------------------------------------
    def run(self, variant: Variant, cases: list[FuzzCase]) -> HwObservation:
        """Dispatch ``cases`` (all of ``variant``) and decode what the hardware did."""
        self.prepare([variant])
        n = len(cases)
        rows, cols = variant.hw_shape
        elements = rows * cols
        load_digits, store_digits, base = DIGITS[variant.component]
        source = self._source(variant.kind, variant.component)
        records = encode_records(cases)
        if variant.kind == "load":
            per_case, dtype = (load_digits + 1) * elements, COMPONENT_DTYPES[variant.component]
        elif variant.kind == "store":
            per_case, dtype = (store_digits + 1) * STORE_REGION, COMPONENT_DTYPES[variant.component]
        else:
            per_case, dtype = (2 + 2 * variant.ldim) * elements, np.dtype(np.int32)
        raw = self._execute(variant, cases, records, source, n * per_case, dtype)
        clamp_values = np.array([c.layout.clamp_value for c in cases], dtype=np.int64)
        if variant.kind == "load":
            return self._decode_load(variant, raw.reshape(n, load_digits + 1, elements), clamp_values, base)
        if variant.kind == "store":
            return self._decode_store(variant, raw.reshape(n, store_digits + 1, STORE_REGION), base)
        return self._decode_decode(variant, raw.reshape(n, 2 + 2 * variant.ldim, elements), clamp_values)

    def _execute(self, variant: Variant, cases, records: np.ndarray, source, count: int, dtype) -> np.ndarray:
        """One dispatch of ``variant``'s pipeline over ``records``; returns the destination (``count`` of
        ``dtype``). Tests replace it with an emulation built on vkcoop.tensor.load/store."""
        push = (np.uint64(source.device_address), len(cases))
        with self.device.upload(records, name="fuzz-records") as record_buffer, \
                self.device.empty(count, dtype, name="fuzz-results") as out:
            self.gpu_ns += self.device.run(self.pipelines[variant], [record_buffer, source, out], (len(cases), 1, 1),
                                           push=push)
            return out.read()

    @staticmethod
    def _status(marker_bits, others_bits, mark, previous, clamp):
        """Status from the marker load, with every other load agreeing for clipped / clamped elements."""
        status = np.full(marker_bits.shape, STATUS_GARBAGE, dtype=np.uint8)
        clipped = (marker_bits == previous) & (others_bits == previous).all(axis=1)
        clamped = (marker_bits == clamp) & (others_bits == np.asarray(clamp)[:, None]).all(axis=1)
        status[clamped] = ElementStatus.CLAMP_VALUE
        status[clipped] = ElementStatus.SKIPPED_BY_CLIP
        status[marker_bits == mark] = ElementStatus.IN_BOUNDS
        return status

    def _decode_load(self, variant, raw, clamp_values, base) -> HwObservation:
        component = variant.component
        dtype = COMPONENT_DTYPES[component]
        width = 8 * dtype.itemsize
        bits = _bits(raw).astype(np.int64)
        mark = int(_bits(as_component([MARK_VALUE], component))[0])
        previous = int(_bits(as_component([PREVIOUS_VALUE], component))[0])
        clamp = (clamp_values & ((1 << width) - 1))[:, None]
        status = self._status(bits[:, -1], bits[:, :-1], mark, previous, clamp)
        digits = _digit_values(raw[:, :-1], component)
        indices = np.zeros(status.shape, dtype=np.int64)
        bad = np.zeros(status.shape, dtype=bool)
        for k in range(digits.shape[1]):
            d = digits[:, k]
            bad |= (d < 0) | (d >= base)
            indices += d * base ** k
        inb = status == ElementStatus.IN_BOUNDS
        status[inb & bad] = STATUS_GARBAGE
        indices = np.where(status == ElementStatus.IN_BOUNDS, indices, -1)
        return HwObservation(indices, status)

    def _decode_store(self, variant, raw, base) -> HwObservation:
        n = raw.shape[0]
        rows, cols = variant.hw_shape
        elements = rows * cols
        written = _bits(raw[:, -1]) != 0
        digits = _digit_values(raw[:, :-1], variant.component)
        ids = np.zeros(written.shape, dtype=np.int64)
        for k in range(digits.shape[1]):
            ids += digits[:, k] * base ** k
        case_ix, position = np.nonzero(written)
        element = ids[case_ix, position]
        corrupt = np.zeros(n, dtype=bool)
        bad = (element < 0) | (element >= elements)
        corrupt[case_ix[bad]] = True
        case_ix, position, element = case_ix[~bad], position[~bad], element[~bad]
        indices = np.full((n, elements), -1, dtype=np.int64)
        indices[case_ix, element] = position
        # An element written at two positions: fewer distinct (case, element) pairs than written positions.
        counts = np.bincount(case_ix * elements + element, minlength=n * elements).reshape(n, elements)
        corrupt |= (counts > 1).any(axis=1)
        status = np.where(indices >= 0, ElementStatus.IN_BOUNDS, ElementStatus.DISCARDED).astype(np.uint8)
        return HwObservation(indices, status, written=written, corrupt=corrupt)

    def _decode_decode(self, variant, raw, clamp_values) -> HwObservation:
        bits = raw.view(np.uint32).astype(np.int64)
        clamp = (clamp_values & 0xFFFFFFFF)[:, None]
        others = np.concatenate([bits[:, :1], bits[:, 2:]], axis=1)
        status = self._status(bits[:, 1], others, MARK_VALUE, PREVIOUS_VALUE, clamp)
        inb = status == ElementStatus.IN_BOUNDS
        indices = np.where(inb, bits[:, 0], -1)
        n, _, elements = raw.shape
        block = np.where(inb[:, :, None], 0, -1).repeat(MAX_DIM, axis=2).astype(np.int64)
        inblock = block.copy()
        for d in range(variant.ldim):
            block[:, :, d] = np.where(inb, bits[:, 2 + 2 * d], -1)
            inblock[:, :, d] = np.where(inb, bits[:, 3 + 2 * d], -1)
        return HwObservation(indices, status, block, inblock)

    def close(self):
        for pipeline in self.pipelines.values():
            pipeline.close()
        for buffer in self._sources.values():
            buffer.close()
        self.pipelines, self._sources = {}, {}
