"""The one protocol every GEMM path follows, Vulkan or CUDA: ``supports`` -> ``bind`` -> ``output_rows``/``time``.

A path is checked with :func:`vkcoop.gemm.exact.check_output` on exact inputs (:class:`GemmOperands`) before it
is timed; ``vkcoop.bench`` runs every path through the same loop (:mod:`vkcoop.bench.measure`).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property
from typing import Protocol, runtime_checkable

import numpy as np

from .dtypes import bench_type, numpy_dtype
from .exact import bench_inputs, bench_reference, check_output, check_rows, eighths_reference, short_sum_b


@dataclass(frozen=True)
class GemmProblem:
    """C [M][N] = A [M][K] @ B [K][N] with inputs of one bench type (``dtype``, :mod:`vkcoop.gemm.dtypes`);
    ``shape_class`` groups configurations."""
    dtype: str
    shape_class: str
    m: int
    n: int
    k: int

    @property
    def label(self) -> str:
        return f"{self.dtype} {self.shape_class} {self.m}x{self.n}x{self.k}"

    @property
    def flops(self) -> float:
        return 2.0 * self.m * self.n * self.k


@dataclass
class GemmOperands:
    """A problem's host inputs, made once and shared by every path: the pruned dense A (2:4, or 1:2 for tf32), its
    compressed form, B [K][N], the rows a check compares and their exact product (fp32, int32 for the integers).

    :meth:`make` is deterministic (numpy's ``default_rng(seed)``); :meth:`save` and :meth:`load` hand the very
    same bits to a child process (``vkcoop.cuda.isolated``) without making them again."""
    problem: GemmProblem
    pruned: np.ndarray
    compressed: object            # vkcoop.sparse.Compressed2to4 (Compressed1to2 for tf32)
    b: np.ndarray
    rows: np.ndarray
    reference: np.ndarray
    seed: int = 0
    tolerance: float | None = None   # the check's relative tolerance; None: the result type's (RESULT_TOLERANCE)

    @classmethod
    def make(cls, problem: GemmProblem, seed: int = 0) -> "GemmOperands":
        pruned, compressed, b = bench_inputs(problem.dtype, problem.m, problem.n, problem.k, seed=seed)
        rows = check_rows(problem.m)
        return cls(problem, pruned, compressed, b, rows, bench_reference(pruned[rows], b), seed)

    @cached_property
    def short_sums(self) -> "GemmOperands":
        """The same A with B cut to a few terms per column (:func:`vkcoop.gemm.exact.short_sum_b`) and their
        exact product: what a path that accumulates in fp16 is checked on, bit for bit (tolerance 0); it is timed on
        these operands."""
        b = short_sum_b(self.b)
        return replace(self, b=b, reference=eighths_reference(self.pruned[self.rows], b), tolerance=0.0)

    def _arrays(self) -> dict:
        return {"pruned": self.pruned, "b": self.b, "rows": self.rows, "reference": self.reference,
                "values": self.compressed.values, "metadata": self.compressed.metadata}

    def save(self, folder) -> None:
        """Write the arrays to ``folder`` (one .npy each, as unsigned integers of their width, with their dtype
        names beside: .npy cannot name ml_dtypes' bfloat16 or float8 types), for :meth:`load` in another process."""
        import json
        from pathlib import Path
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        arrays = self._arrays()
        for name, array in arrays.items():
            np.save(folder / f"{name}.npy", array.view(f"u{array.dtype.itemsize}"))
        (folder / "dtypes.json").write_text(json.dumps({name: a.dtype.name for name, a in arrays.items()}))

    @classmethod
    def load(cls, folder, problem: GemmProblem, seed: int = 0) -> "GemmOperands":
        """The operands :meth:`save` wrote: a child process reads the parent's bits in well under a second,
        where :meth:`make` takes seconds at 8192^3."""
        import json
        from pathlib import Path

        from ..sparse import Compressed1to2, Compressed2to4
        folder = Path(folder)
        names = json.loads((folder / "dtypes.json").read_text())
        arrays = {name: np.load(folder / f"{name}.npy").view(numpy_dtype(dtype)) for name, dtype in names.items()}
        form = Compressed1to2 if bench_type(problem.dtype).pattern == "1:2" else Compressed2to4
        compressed = form(arrays["values"], arrays["metadata"])
        return cls(problem, arrays["pruned"], compressed, arrays["b"], arrays["rows"], arrays["reference"], seed)


def check_bound(bound, operands: GemmOperands) -> tuple[dict | None, float]:
    """A bound configuration's output rows against the exact reference (:func:`vkcoop.gemm.exact.check_output`):
    (None or the failure's entry for a search log, max abs error)."""
    ok, max_abs, why = check_output(bound.output_rows(operands.rows), operands.reference, operands.tolerance)
    return (None if ok else {"status": "failed", "reason": why, "max_abs_error": max_abs}), max_abs


def time_bound(bound, operands: GemmOperands, iterations: int, warmup: int, flush_l2: bool, max_abs: float):
    """``iterations`` timed runs of a checked configuration: (entry for a search log, (median s, max abs error,
    bound label, times))."""
    times = bound.time(iterations, warmup, flush_l2)
    median = float(np.median(times))
    entry = {"status": "ok", "bound": bound.config, "median_ms": median * 1e3,
             "tflops": operands.problem.flops / median / 1e12, "max_abs_error": max_abs}
    return entry, (median, max_abs, bound.config, times)


def check_and_time(bound, operands: GemmOperands, iterations: int, warmup: int, flush_l2: bool):
    """The one check-then-time step of a bound configuration: :func:`check_bound`, and only if it matches,
    :func:`time_bound`.

    Returns (entry for a search log, (median s, max abs error, bound label, times) or None). Used by the
    measurement loop (``vkcoop.bench.measure``) and by the library searches' child process."""
    failure, max_abs = check_bound(bound, operands)
    if failure is not None:
        return failure, None
    return time_bound(bound, operands, iterations, warmup, flush_l2, max_abs)


@runtime_checkable
class BoundGemm(Protocol):
    """A path's GEMM with its operands on the device."""
    config: str                   # what ran: the configuration's label

    def output_rows(self, rows: np.ndarray) -> np.ndarray:
        """Run once; C's ``rows`` as a numpy array of the result dtype."""

    def time(self, iterations: int, warmup: int, flush_l2: bool) -> list[float]:
        """GPU seconds of each of ``iterations`` runs after ``warmup`` untimed ones."""

    def release(self) -> None:
        """Free the device operands (the path keeps its pipelines or modules)."""


@runtime_checkable
class GemmPath(Protocol):
    """One way of computing the GEMM (a Vulkan kernel, a CUDA kernel, a library)."""
    name: str

    def supports(self, problem: GemmProblem) -> tuple[bool, str]:
        """Whether it can run ``problem`` here, and why not; no GPU work."""

    def configs(self, problem: GemmProblem, tune: bool) -> list:
        """The configurations to try (one unless ``tune``); each has ``label()``."""

    def bind(self, operands: GemmOperands, config) -> BoundGemm:
        """Put the operands on the device for ``config``."""

    def close(self) -> None:
        """Free everything the path holds."""
