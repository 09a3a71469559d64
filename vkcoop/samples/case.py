"""A sample case (one dispatch, its buffers and expected outputs), the bit-exact comparison, and results."""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from .. import shaders as shader_catalog
from .caps import ELEMENT_TYPES, SampleInputError



@dataclass
class Binding:
    """One storage buffer of a case (set 0, binding = its position in :attr:`Case.bindings`).

    ``data`` is uploaded before the dispatch. With ``expected`` set the buffer is an output: after the
    dispatch it is read back and must equal ``expected`` bit for bit (``nan_equal``: any NaN matches any
    NaN, for decodes whose NaN payloads the reference does not model). With ``tolerance`` = (atol, rtol) it
    must instead lie within atol + rtol·|expected| of it (a documented bound, for results such as exp that no
    reference reproduces bit for bit; NaN never matches)."""
    name: str
    data: np.ndarray
    expected: np.ndarray | None = None
    nan_equal: bool = False
    tolerance: tuple | None = None

    @property
    def is_output(self) -> bool:
        return self.expected is not None


@dataclass
class Case:
    """One dispatch: a declared shader variant, specialization constants, buffers, workgroup count."""
    name: str
    shader: str                                   # relative to shaders/, e.g. "samples/decode/decode.comp"
    defines: dict
    bindings: list
    specialization: dict = field(default_factory=dict)   # constant_id or name -> value (typed by reflection)
    groups: tuple = (1, 1, 1)
    push: object = None
    #: Set when the device is known to disagree with the reference here (a spec ambiguity or a driver
    #: discrepancy, described in the text). A mismatch is then reported under SampleResult.known_issues
    #: instead of failing the sample, and a match is reported too ("not reproduced").
    known_issue: str | None = None

    def check(self) -> None:
        """Raise SampleInputError for anything wrong that can be seen before dispatch."""
        declared = shader_catalog.declared_variants(self.shader)
        wanted = tuple(sorted((str(k), str(v)) for k, v in self.defines.items()))
        if wanted not in {v.defines for v in declared}:
            listed = ", ".join(v.label for v in declared[:4])
            raise SampleInputError(f"case {self.name}: defines {dict(wanted)} are not a declared @variants "
                                   f"combination of {self.shader} (e.g. {listed})")
        if not self.bindings:
            raise SampleInputError(f"case {self.name}: no bindings")
        for b in self.bindings:
            if not isinstance(b.data, np.ndarray):
                raise SampleInputError(f"case {self.name}: binding {b.name!r} data must be a numpy array, "
                                       f"got {type(b.data).__name__}")
            if b.data.size == 0:
                raise SampleInputError(f"case {self.name}: binding {b.name!r} is empty")
            if b.expected is not None:
                if not isinstance(b.expected, np.ndarray):
                    raise SampleInputError(f"case {self.name}: expected {b.name!r} must be a numpy array")
                if b.expected.dtype != b.data.dtype or b.expected.shape != b.data.shape:
                    raise SampleInputError(
                        f"case {self.name}: expected {b.name!r} has dtype {b.expected.dtype} and shape "
                        f"{b.expected.shape}, the buffer has {b.data.dtype} {b.data.shape}")

    def variant(self) -> shader_catalog.ShaderVariant:
        return shader_catalog.ShaderVariant(self.shader, tuple(sorted((str(k), str(v))
                                                                      for k, v in self.defines.items())))


@dataclass
class Mismatch:
    case: str
    binding: str
    index: tuple
    got: object
    expected: object

    def to_dict(self) -> dict:
        return {"case": self.case, "binding": self.binding, "index": list(self.index),
                "got": self.got, "expected": self.expected}


def _scalar(value):
    value = np.asarray(value).reshape(())
    if value.dtype.kind in "iub":
        return int(value)
    f = float(value.astype(np.float64))
    return f if math.isfinite(f) else repr(f)


def _bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a).view(np.dtype(f"u{a.dtype.itemsize}"))


def compare_bits(got: np.ndarray, expected: np.ndarray, *, nan_equal: bool = False) -> np.ndarray:
    """Boolean mask of elements whose bits differ (NaN == NaN when ``nan_equal``)."""
    if got.dtype != expected.dtype or got.shape != expected.shape:
        raise SampleInputError(f"cannot compare {got.dtype}{got.shape} with {expected.dtype}{expected.shape}")
    differ = _bits(got) != _bits(expected)
    if nan_equal and (got.dtype.kind == "f" or got.dtype == ELEMENT_TYPES["BF16"].dtype):
        both_nan = np.isnan(got.astype(np.float32)) & np.isnan(expected.astype(np.float32))
        differ &= ~both_nan
    return differ


def compare_within(got: np.ndarray, expected: np.ndarray, atol: float, rtol: float) -> np.ndarray:
    """Boolean mask of elements farther than atol + rtol·|expected| from ``expected`` (NaN always is)."""
    if got.dtype != expected.dtype or got.shape != expected.shape:
        raise SampleInputError(f"cannot compare {got.dtype}{got.shape} with {expected.dtype}{expected.shape}")
    exact = expected.astype(np.float64)
    return ~(np.abs(got.astype(np.float64) - exact) <= atol + rtol * np.abs(exact))


def find_mismatches(case: str, binding: Binding, got: np.ndarray, limit: int) -> tuple[int, list[Mismatch]]:
    if binding.tolerance is not None:
        differ = compare_within(got, binding.expected, *binding.tolerance)
    else:
        differ = compare_bits(got, binding.expected, nan_equal=binding.nan_equal)
    count = int(differ.sum())
    found = []
    for index in np.argwhere(differ)[:limit]:
        index = tuple(int(i) for i in index)
        found.append(Mismatch(case, binding.name, index, _scalar(got[index]), _scalar(binding.expected[index])))
    return count, found


@dataclass
class SampleResult:
    """What :meth:`Sample.run` reports; ``to_dict()`` is JSON-able."""
    name: str
    status: str                    # "pass", "fail" or "skip"
    reason: str = ""
    cases: int = 0                 # cases dispatched
    failed_cases: list = field(default_factory=list)
    gpu_time_ms: float = 0.0       # sum of the dispatches' GPU timestamps
    mismatches: list = field(default_factory=list)   # the first few Mismatch
    mismatch_count: int = 0
    validation_messages: list = field(default_factory=list)
    device: str = ""
    wall_time_s: float = 0.0
    known_issues: list = field(default_factory=list)   # {"case", "issue", "reproduced", "mismatches"}
    not_instrumented: list = field(default_factory=list)   # GPU-AV's notes of what it could not check
    pipelines: int = 0             # pipelines created (each instrumented under GPU-AV)

    @property
    def ok(self) -> bool:
        return self.status != "fail"

    def to_dict(self) -> dict:
        return {"name": self.name, "status": self.status, "reason": self.reason, "cases": self.cases,
                "failed_cases": list(self.failed_cases), "gpu_time_ms": self.gpu_time_ms,
                "mismatches": [m.to_dict() for m in self.mismatches], "mismatch_count": self.mismatch_count,
                "validation_messages": list(self.validation_messages), "device": self.device,
                "wall_time_s": self.wall_time_s, "known_issues": list(self.known_issues),
                "not_instrumented": list(self.not_instrumented), "pipelines": self.pipelines}

