"""Exact inputs, exact references, and the one check every GEMM path (Vulkan and CUDA) is held to.

The inputs are chosen so that every product and partial sum is exactly representable in the accumulator:
then any summation order gives the same fp32 / int32 result, fp32 results must match the reference bit for
bit, and fp16 / bf16 results may differ only by the final rounding (:data:`vkcoop.gemm.types.RESULT_TOLERANCE`).
"""
from __future__ import annotations

import functools

import numpy as np

from .. import sparse as sparse24
from .dtypes import HALF_DTYPES, bench_type
from .types import DTYPES, RESULT_TOLERANCE, GemmInputError, gemm_types


def exact_inputs(types, m: int, n: int, k: int, *, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """A [M][K] and B [K][N] whose product every kernel computes exactly, in any summation order.

    Floats come from {-0.5, 0, 0.5, 1}: products are multiples of 1/4, and while every partial sum stays below
    2048 quarter-steps (|sum| <= K < 512 for fp16 results), fp16 and fp32 hold them exactly. Integers come from
    [-3, 3]. Raises GemmInputError if K is too large for that guarantee.
    """
    t = gemm_types(types)
    rng = np.random.default_rng(seed)
    if t.input_dtype.kind == "i":
        a = rng.integers(-3, 4, size=(m, k)).astype(t.input_dtype)
        b = rng.integers(-3, 4, size=(k, n)).astype(t.input_dtype)
        return a, b
    limit = 512 if t.output_dtype == np.float16 else 1 << 21
    if k >= limit:
        raise GemmInputError(f"K={k} is too large for exact {t.key} results (|sum| must stay below {limit})")
    grid = np.array([-0.5, 0.0, 0.5, 1.0], dtype=np.float32)
    a = rng.choice(grid, size=(m, k)).astype(t.input_dtype)
    b = rng.choice(grid, size=(k, n)).astype(t.input_dtype)
    return a, b


def _draw_eighths(rng: np.random.Generator, shape: tuple, dtype: str) -> np.ndarray:
    """Multiples of 1/8 in [-1, 1], uniform over the 17 of them: int8 draws looked up in a table of the 17 values
    in ``dtype`` (one pass, where converting through float32 takes three and fp16's conversion is slow)."""
    table = (np.arange(-8, 9, dtype=np.float32) / 8).astype(DTYPES[dtype])
    draws = rng.integers(-8, 9, size=shape, dtype=np.int8)
    draws += 8
    return table[draws.view(np.uint8)]


@functools.lru_cache(maxsize=1)
def _eighths_a(dtype: str, m: int, k: int, seed: int):
    """(pruned A, compressed A, the generator's state after drawing A), read-only: kept for the next problem of
    the same dtype, M, K and seed, whose A is the same whatever its N (a benchmark's memory-bound cases)."""
    rng = np.random.default_rng(seed)
    a = _draw_eighths(rng, (m, k), dtype)
    compressed, pruned = sparse24.compress_2to4(a, return_pruned=True)
    for array in (pruned, compressed.values, compressed.metadata):
        array.flags.writeable = False
    return pruned, compressed, rng.bit_generator.state


def eighths_inputs(dtype: str, m: int, n: int, k: int, *, seed: int = 0):
    """(pruned dense A, compressed A, B) for the benchmark: multiples of 1/8 in [-1, 1], A pruned 2:4, A drawn
    first and B after it from one generator (so A depends on M, K and the seed only, and is made once for the
    problems that share them). A's arrays are read-only: several problems may hold them.

    Every product is a multiple of 1/64 of magnitude at most 1, so every partial sum of K products, in any order,
    is a multiple of 1/64 of magnitude at most K: fp32 (24 significant bits) holds it exactly for K up to
    :data:`EIGHTHS_EXACT_K`, and far beyond that in practice (random signs keep sums near sqrt(K))."""
    if dtype not in DTYPES:
        raise GemmInputError(f"dtype={dtype!r}: choose from {', '.join(DTYPES)}")
    pruned, compressed, state = _eighths_a(dtype, int(m), int(k), int(seed))
    rng = np.random.default_rng()
    rng.bit_generator.state = state
    b = _draw_eighths(rng, (k, n), dtype)
    return pruned, compressed, b


def _draw_values(rng: np.random.Generator, shape: tuple, values: np.ndarray) -> np.ndarray:
    """Draws of ``values`` (uniform over them), looked up from int8 indices as :func:`_draw_eighths` does."""
    draws = rng.integers(0, len(values), size=shape, dtype=np.int8)
    return values[draws.view(np.uint8)]


@functools.lru_cache(maxsize=1)
def _typed_a(dtype: str, m: int, k: int, seed: int):
    """:func:`_eighths_a` for the other bench types: A drawn from the type's values, pruned to its pattern."""
    kind = bench_type(dtype)
    rng = np.random.default_rng(seed)
    a = _draw_values(rng, (m, k), kind.value_array)
    compress = sparse24.compress_1to2 if kind.pattern == "1:2" else sparse24.compress_2to4
    compressed, pruned = compress(a, return_pruned=True)
    for array in (pruned, compressed.values, compressed.metadata):
        array.flags.writeable = False
    return pruned, compressed, rng.bit_generator.state


def bench_inputs(dtype: str, m: int, n: int, k: int, *, seed: int = 0):
    """(pruned dense A, compressed A, B) of any bench type (:mod:`vkcoop.gemm.dtypes`): fp16 and bf16 are
    :func:`eighths_inputs`; the others draw the type's values, A first and B after it from one generator, A pruned
    to the type's pattern (1:2 for tf32, :func:`vkcoop.sparse.compress_1to2`; else 2:4) and made once for the
    problems sharing its M, K and seed. GemmInputError for a K the type's format does not take."""
    if dtype in HALF_DTYPES:
        return eighths_inputs(dtype, m, n, k, seed=seed)
    kind = bench_type(dtype)
    if k % kind.k_multiple:
        raise GemmInputError(f"K={k}: {dtype} inputs need K a multiple of {kind.k_multiple}")
    pruned, compressed, state = _typed_a(dtype, int(m), int(k), int(seed))
    rng = np.random.default_rng()
    rng.bit_generator.state = state
    return pruned, compressed, _draw_values(rng, (k, n), kind.value_array)


def bench_reference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The exact product of operands of :func:`bench_inputs`: :func:`eighths_reference` for floats (fp32 holds
    every partial sum of their products), int32 for integers. Integer sums are made by BLAS in floats, exact while
    every partial sum is an integer the float holds (fp32 below 2**24, else float64 below 2**53): numpy's own int64
    product took 196 s for the 192 check rows at 8192^3 on two cores, sgemm 1 s."""
    if a.dtype.kind in "iu":
        magnitude = [max(abs(int(x.min())), abs(int(x.max()))) if x.size else 0 for x in (a, b)]
        largest = float(magnitude[0] * magnitude[1] * a.shape[1])
        wide = np.float32 if largest < 2 ** 24 else np.float64
        if largest >= 2 ** 53:
            raise GemmInputError(f"integer operands up to {largest:.3g} in a sum: no float holds it exactly")
        return (a.astype(wide) @ b.astype(wide)).astype(np.int32)
    return eighths_reference(a, b)


#: fp16 holds every multiple of 1/64 up to 2048 / 64 = 32 in magnitude exactly.
FP16_EXACT_TERMS = 32


def short_sum_b(b: np.ndarray, terms: int = FP16_EXACT_TERMS, seed: int = 2) -> np.ndarray:
    """B with every entry of each column set to zero except at ``terms`` rows drawn at random per column (fewer
    where a draw repeats).

    With the eighths of :func:`eighths_inputs` (|a|, |b| <= 1, products multiples of 1/64), every partial sum of
    a result element, in whatever order it is added, is a sum of at most ``terms`` of its products: a multiple of
    1/64 of magnitude at most ``terms``. Up to 32 terms that is at most 2048 steps of 1/64, which fp16 holds
    exactly, so a kernel that accumulates in fp16 must match the exact product bit for bit."""
    if not 1 <= terms <= FP16_EXACT_TERMS:
        raise GemmInputError(f"terms={terms}: fp16 accumulation is exact for 1 to {FP16_EXACT_TERMS} terms")
    rng = np.random.default_rng(seed)
    k, n = b.shape
    rows = rng.integers(0, k, size=(terms, n))
    columns = np.broadcast_to(np.arange(n), rows.shape)
    short = np.zeros_like(b)
    short[rows, columns] = b[rows, columns]
    return short


#: The largest K for which every fp32 partial sum of eighths products is exact: K * 64 <= 2**24.
EIGHTHS_EXACT_K = 1 << 18


def eighths_reference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """A @ B in fp32 for operands of :func:`eighths_inputs`: exact up to :data:`EIGHTHS_EXACT_K`, so the fp32
    product (a fraction of the float64 one's time: fp16 converts slowly to float64) is the exact reference; beyond
    it, :func:`reference_gemm`."""
    if a.shape[1] > EIGHTHS_EXACT_K:
        return reference_gemm(a, b, np.float32)
    return a.astype(np.float32) @ b.astype(np.float32)


def reference_gemm(a: np.ndarray, b: np.ndarray, output_dtype) -> np.ndarray:
    """A @ B computed exactly (float64 / int64) and converted to the result type."""
    if a.dtype.kind == "i":
        return (a.astype(np.int64) @ b.astype(np.int64)).astype(output_dtype)
    return (a.astype(np.float64) @ b.astype(np.float64)).astype(output_dtype)


def sparse24_reference(values: np.ndarray, metadata: np.ndarray, b: np.ndarray) -> np.ndarray:
    """fp32 matmul of the decompressed (pruned) A with B: what the 2:4 path must produce."""
    dense = sparse24.decompress_2to4(sparse24.Compressed2to4(values, metadata))
    return dense.astype(np.float32) @ b.astype(np.float32)


def check_rows(m: int, seed: int = 1, count: int = 192) -> np.ndarray:
    """Rows a large check compares: the first and last 16 (edge tiles) and a random sample."""
    rng = np.random.default_rng(seed)
    picked = np.concatenate([np.arange(min(16, m)), np.arange(max(0, m - 16), m),
                             rng.integers(0, m, size=min(count, m))])
    return np.unique(picked)


def check_output(got: np.ndarray, reference: np.ndarray, tolerance: float | None = None) -> tuple[bool, float, str]:
    """The one check: each element within :data:`RESULT_TOLERANCE` of the exact reference, relative to it
    (``tolerance`` instead where given: 0 where the result must be exact whatever its type).

    Returns (ok, max absolute error, why not)."""
    if got.shape != reference.shape:
        return False, float("inf"), f"result has shape {got.shape}, the reference {reference.shape}"
    values = got.astype(np.float64)
    exact = reference.astype(np.float64)
    diff = np.abs(values - exact)
    max_abs = float(diff.max()) if diff.size else 0.0
    if not np.isfinite(values).all():
        return False, max_abs, "non-finite values in the result"
    if tolerance is None:
        tolerance = RESULT_TOLERANCE.get(np.dtype(got.dtype))
    if tolerance is None:
        return False, max_abs, f"no tolerance is defined for results of dtype {got.dtype}"
    bad = np.argwhere(diff > tolerance * np.abs(exact))
    if bad.size:
        index = tuple(int(v) for v in bad[0])
        where = f"row {index[0]}, column {index[1]}" if len(index) == 2 else f"index {index}"
        return False, max_abs, (f"{len(bad)} mismatches; first at {where}: got {values[index]!r}, "
                                f"expected {exact[index]!r}")
    return True, max_abs, ""
