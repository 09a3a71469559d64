"""``vkcoop explain --check``: the same access on a coopmat2 device, compared cell by cell with the reference.

The access runs through the fuzzer's hardware shader (shaders/fuzz/tensor_hw.comp via
:class:`vkcoop.fuzz.hw.HwRunner`): an fp16 coopMatLoadTensorNV (a decode load when a block size is > 1,
so blockCoord and coordInBlock come back too) or coopMatStoreTensorNV of a 16 x 16 matrix. A load of fewer
rows is the first rows of that matrix (matrixCoordToLinear is ``row * N + col``, so the first rows address
the same way whatever M is); the columns must be 16.

Every cell where the hardware disagrees with :func:`vkcoop.tensor.index_map` is marked. A mismatch that
one of :mod:`vkcoop.fuzz.models` accounts for is named after its finding in docs/spec-notes.md (F1: packed
strides use floor(dim / blockSize); F2: MirrorRepeat with a layout dimension of 1); anything else is new.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from . import compare, models
from .cases import DECODE_SHAPE, HW_SHAPES, MARK_VALUE, PREVIOUS_VALUE, FuzzCase, Variant, hw_violation
from .cases import packed_strides
from .hw import HW_FEATURES, as_component
from ..tensor import TensorView
from ..tensor.explain import Explanation

COMPONENT = "fp16"
#: The docs/spec-notes.md finding each model or tag of vkcoop.fuzz.models stands for.
FINDINGS = {"packed strides use floor(dim / blockSize)": "F1",
            "MirrorRepeat load with a layout dimension of 1": "F2"}
#: A clamp value the shader's markers cannot be confused with (fp16 -3.0), used when the layout's collides.
SAFE_CLAMP_VALUE = 0xC200


class CheckUnsupported(ValueError):
    """The access cannot be dispatched as asked (wrong shape, undefined elements, ...): a usage error."""


class CheckUnavailable(RuntimeError):
    """No coopmat2 device or no capable shader toolchain here."""


@dataclass(frozen=True, eq=False)
class CheckResult:
    """Cell-by-cell verdict (arrays shaped like the explained matrix): ``mismatch`` bool, ``finding`` str
    ('' unless a known finding explains the mismatch), what the hardware did (``observed_index``, -1 for
    no element, ``observed_status`` ElementStatus or 254 for garbage), and for stores ``position_mismatch``
    (written positions that match no element of the reference)."""
    device: str
    variant: str
    mismatch: np.ndarray
    finding: np.ndarray
    observed_index: np.ndarray
    observed_status: np.ndarray
    position_mismatch: bool = False

    @property
    def unexplained(self) -> bool:
        return bool((self.mismatch & (self.finding == "")).any() or self.position_mismatch)

    def findings(self) -> dict[str, int]:
        names, counts = np.unique(self.finding[self.mismatch], return_counts=True)
        return {str(n) or "unexplained": int(k) for n, k in zip(names, counts)}

    def to_json(self) -> dict:
        return {"device": self.device, "variant": self.variant, "ok": not self.unexplained,
                "mismatch": self.mismatch.tolist(), "finding": self.finding.tolist(),
                "observed_index": self.observed_index.tolist(), "observed_status": self.observed_status.tolist(),
                "position_mismatch": self.position_mismatch, "findings": self.findings()}


def _packed_view_stride(view: TensorView):
    return TensorView.create(view.dim, True).set_dimensions(view.view_dimension).view_stride


def hardware_case(e: Explanation) -> FuzzCase:
    """The fuzzer case that performs ``e``'s access on the hardware; raises CheckUnsupported."""
    t, v = e.layout, e.view
    store = e.op == "store"
    kind = "store" if store else ("decode" if any(b != 1 for b in t.block_size) else "load")
    rows, cols = DECODE_SHAPE if kind == "decode" else HW_SHAPES[COMPONENT]
    if e.cols != cols or e.rows > rows or (store and e.rows != rows):
        need = f"{rows}x{cols}" if store else f"Rx{cols} with R <= {rows}"
        raise CheckUnsupported(f"--check dispatches {rows}x{cols} matrices (the fuzzer's hardware shape), not "
                               f"{e.rows}x{e.cols}; use --matrix {need}")
    # The shader tells elements apart by MARK / PREV in the matrix's component type (int32 for decode loads).
    markers = as_component([MARK_VALUE, PREVIOUS_VALUE], "int32" if kind == "decode" else COMPONENT)
    marker_bits = {int(x) for x in markers.view(np.uint32 if markers.itemsize == 4 else np.uint16)}
    mask = (1 << (8 * markers.itemsize)) - 1
    if t.clamp_value & mask in marker_bits:
        # The clamp value does not change addressing; this one would read as the shader's markers.
        t = dataclasses.replace(t, clamp_value=SAFE_CLAMP_VALUE)
    view_spec = None if v is None else (v.dim, v.has_dimensions, v.permutation)
    case = FuzzCase(0, Variant(kind, COMPONENT, t.dim, t.clamp_mode, view_spec), rows, cols, t, v,
                    explicit_stride=t.stride != packed_strides(t.layout_dimension, t.block_size),
                    explicit_view_stride=v is not None and v.has_dimensions
                    and v.view_stride != _packed_view_stride(v))
    try:
        case.check()
    except ValueError as error:
        raise CheckUnsupported(f"--check cannot dispatch this access ({error}); change the layout") from None
    reference = case.reference()
    problem = hw_violation(case, reference.status, reference.indices)
    if problem is not None:
        raise CheckUnsupported(f"--check cannot dispatch this access ({problem}): the shader's buffers need "
                               f"defined elements and small indices; use a smaller layout or another clamp mode")
    return case


def mark_cells(case: FuzzCase, obs, written=None, corrupt=None):
    """Compare one case's hardware observation ``obs`` (flat (indices, status, block_coord or None,
    coord_in_block or None) over the 16 x 16 elements) with the reference. Returns (mismatch bool (E,),
    finding str (E,), position_mismatch bool)."""
    elements = case.rows * case.cols
    kind = case.variant.kind
    ref = compare.reference_batch([case], elements)
    observed = _batch(obs, ref)
    bad = compare.element_mismatches("hw", kind, ref, observed)[0]
    finding = np.full(elements, "", dtype=object)
    for name, model in models.MODELS.items():
        alternative = model(case)
        if alternative is None or not bad.any():
            continue
        alt_ref = compare.reference_batch([alternative], elements)
        agrees = ~compare.element_mismatches("hw", kind, alt_ref, _batch(obs, alt_ref))[0]
        finding[bad & agrees & (finding == "")] = FINDINGS.get(name, name)
    for name in models.tags(case):
        finding[bad & (finding == "")] = FINDINGS.get(name, name)
    position = False
    if written is not None:
        position = bool(compare.store_position_mismatch(ref, np.asarray(written)[None])[0])
    if corrupt is not None:
        position = position or bool(corrupt)
    return bad, finding, position


def _batch(obs, ref):
    """``obs`` as a batch of one; a plain load reports no coordinates, so the reference's stand in."""
    indices, status, block, inblock = (None if a is None else np.asarray(a)[None] for a in obs)
    return (indices, status, ref[2] if block is None else block, ref[3] if inblock is None else inblock)


def _one_line(error: Exception) -> str:
    return " ".join(str(error).split())


def open_device(device=None):
    """A vkcoop.vk.Device with the hardware shader's features; raises CheckUnavailable."""
    try:
        import spirv_tools
        from .. import vk
        spirv_tools.find_toolchain()
    except Exception as error:  # noqa: BLE001 - no usable toolchain for any reason is the same need
        raise CheckUnavailable(f"--check needs a coopmat2-capable shader toolchain ({_one_line(error)}); "
                               f"run `vkcoop toolchain install`, or leave out --check") from None
    try:
        return vk.Device(device, features=list(HW_FEATURES))
    except (vk.VulkanError, OSError) as error:
        raise CheckUnavailable(f"--check needs a Vulkan device with VK_NV_cooperative_matrix2 "
                               f"({_one_line(error)}); run it on a coopmat2 GPU, or leave out --check") from None


def run_check(e: Explanation, device=None, *, runner=None) -> CheckResult:
    """Dispatch ``e``'s access and mark the cells. Validates first (CheckUnsupported), then opens the
    device (CheckUnavailable) unless ``runner`` (a :class:`vkcoop.fuzz.hw.HwRunner`) is given."""
    case = hardware_case(e)
    owned = None
    if runner is None:
        from .hw import HwRunner
        owned = open_device(device)
        runner = HwRunner(owned, [case.variant], threads=1)
    try:
        obs = runner.run(case.variant, [case])
        name = getattr(getattr(runner.device, "physical", None), "name", str(runner.device))
    finally:
        if owned is not None:
            runner.close()
            owned.close()
    flat = (obs.indices[0], obs.status[0], None if obs.block_coord is None else obs.block_coord[0],
            None if obs.coord_in_block is None else obs.coord_in_block[0])
    bad, finding, position = mark_cells(case, flat, None if obs.written is None else obs.written[0],
                                        None if obs.corrupt is None else obs.corrupt[0])
    cells = e.rows * e.cols

    def crop(a):
        return np.asarray(a)[:cells].reshape(e.rows, e.cols)
    return CheckResult(name, case.variant.label, crop(bad), crop(finding), crop(flat[0]), crop(flat[1]), position)
