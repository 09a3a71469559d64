"""What the ``random`` rows of ``vkcoop bench peak`` load into A and B (``shaders/peak/coopmat_peak.comp``,
OPERANDS=LOADED), and the exact check of that load.

Binding 1 holds ``sets`` operand sets, each A (M x K) then B (K x N), row-major, as 32-bit words; chain c
multiplies set ``c % sets`` (two sets where a form has several chains, so consecutive multiplies see other values).
The timed values are random (full fp16/bf16 mantissas, or any int8), which makes the tensor cores switch as they
do in a GEMM. The check loads small integers instead (-1, 0 or 1) and compares what the kernel stores with the
sum numpy computes: every partial sum is an integer well inside the accumulator's exact range, so the comparison
is bit for bit, and a wrong offset, stride or set would show.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np

#: types -> the numpy dtype of A and B
INPUT_DTYPES = {"fp16->fp16": np.float16, "fp16->fp32": np.float16, "bf16->fp32": ml_dtypes.bfloat16,
                "s8->s32": np.int8}


def operand_sets(chains: int) -> int:
    """The shader's rule: one set for one chain, else two."""
    return 2 if chains > 1 else 1


def operand_count(form) -> int:
    """Values of A and B over all of ``form``'s operand sets."""
    return operand_sets(form.chains) * (form.m * form.k + form.k * form.n)


def operand_words(form, values: np.ndarray) -> np.ndarray:
    """Binding 1 from :func:`operand_count` values of the form's input type, as 32-bit words."""
    values = np.ascontiguousarray(values, dtype=INPUT_DTYPES[form.types]).reshape(-1)
    if values.size != operand_count(form):
        raise ValueError(f"{form.label}: {values.size} operand values, expected {operand_count(form)}")
    return values.view(np.uint32)


def random_operands(form, seed: int = 0) -> np.ndarray:
    """The timed values: normal / 8 for fp16 and bf16 (full mantissas; a chain's sum grows slowly enough for fp16
    accumulators over millions of multiplies of one set), uniform int8."""
    rng = np.random.default_rng(seed)
    if form.types == "s8->s32":
        return rng.integers(-128, 128, size=operand_count(form), dtype=np.int8)
    return (rng.standard_normal(operand_count(form), dtype=np.float32) / 8).astype(INPUT_DTYPES[form.types])


def check_operands(form, seed: int = 1) -> np.ndarray:
    """The check's values: -1, 0 or 1."""
    rng = np.random.default_rng(seed)
    return rng.integers(-1, 2, size=operand_count(form)).astype(INPUT_DTYPES[form.types])


def expected_store(form, values: np.ndarray, iterations: int) -> np.ndarray:
    """What the kernel stores after ``iterations`` on ``values``: per matrix instance, the sum over chains c of
    (c + iterations * A_s B_s) with s = c % sets; [instances * M * N] in the accumulator's order (row-major)."""
    sets = operand_sets(form.chains)
    per_set = values.astype(np.float64).reshape(sets, -1)
    a = per_set[:, :form.m * form.k].reshape(sets, form.m, form.k)
    b = per_set[:, form.m * form.k:].reshape(sets, form.k, form.n)
    total = sum(c + iterations * (a[c % sets] @ b[c % sets]) for c in range(form.chains))
    return np.tile(total.reshape(-1), form.instances)
