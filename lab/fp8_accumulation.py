#!/usr/bin/env python3
"""How many bits the wgmma.sp kernel's fp8 accumulation keeps: sums of a large power of two, a small one and the
large one negated, through the shipped kernel (vkcoop.cuda.WgmmaSpGemm), whose bf16 C shows the small term whole
or not at all.

    python -m lab.fp8_accumulation --json fp8-accumulation.json        # e4m3, e5m2, and tf32 beside them

Each row of A is one experiment. Row r of the first half puts 2^s, 2^-i and -2^s in one instruction's K step
(columns 0, 4, 8); a row of the second half puts them in three consecutive K steps (columns 0, k, 2k, k an
instruction's K), so 2^s is already in the fp32 accumulator when the small term is added. Column n of B multiplies
the small term by 2^-j, so C[r][n] is 2^-(i+j) where the sum kept the term and 0 where it fell below the
accumulation's last bit: the term lies e = s + i + j bits below the largest addend. Every factor is a normal number
of its type (no subnormal input can blur the reading): e4m3 2^-6 .. 2^8, e5m2 2^-14 .. 2^15; tf32 beside them is
a control that accumulates in fp32. A is 2:4 sparse (1:2 for tf32): a chunk holds one nonzero.

Report per type and case: for each e, how many outputs kept the term, dropped it, or held anything else; and
``bits``, the largest e up to which every output kept it: the fraction bits the accumulation keeps below the
largest addend (fp32's is 23). Exit 2 without a usable CUDA GPU.
"""
from __future__ import annotations

import argparse
import sys

import numpy as np

from vkcoop.cli.common import emit_json

TYPES = {"e4m3": "float8_e4m3fn", "e5m2": "float8_e5m2", "tf32": "float32"}
#: Per type: the large terms' exponents s, and the smallest normal power of two as 2^-LOWEST, which i (over a case's
#: 32 rows, with s) and j (over the 16 columns of B) run down to.
SCALES = {"float8_e4m3fn": (0, 4, 8), "float8_e5m2": (0, 15), "float32": (0,)}
LOWEST = {"float8_e4m3fn": 6, "float8_e5m2": 14, "float32": 31}
CASES = ("one instruction", "across instructions")
M, N = 64, 16            # the 64x16 tile: 32 rows a case, 16 columns of B


def _np_dtype(dtype_name: str) -> np.dtype:
    import ml_dtypes
    return np.dtype(getattr(ml_dtypes, dtype_name, None) or dtype_name)


def instruction_k(dtype_name: str) -> int:
    """Dense K of one wgmma.sp instruction of the type."""
    from vkcoop.cuda.wgmma_types import wgmma_type
    return wgmma_type(dtype_name).k


def probe_operands(dtype_name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """A [M][K] and B [K][N] in the type, C's exact value [M][N] (2^-(i+j)), and e [M][N], how many bits below
    the largest addend (2^s) the small term lies. K is four instructions' K (two slices)."""
    k_step, lowest = instruction_k(dtype_name), LOWEST[dtype_name]
    k, rows = 4 * k_step, M // len(CASES)
    pairs = [(scale, i) for scale in SCALES[dtype_name] for i in range(lowest + 1)][:rows]
    pairs += pairs[-1:] * (rows - len(pairs))                          # rows left over repeat the last pair
    j = np.minimum(np.arange(N), lowest)
    a, b = np.zeros((M, k)), np.zeros((k, N))
    exact, exponent = np.zeros((M, N)), np.zeros((M, N), dtype=np.int64)
    for case, columns in enumerate(((0, 4, 8), (0, k_step, 2 * k_step))):
        for r, (scale, i) in enumerate(pairs):
            row = case * rows + r
            a[row, list(columns)] = (2.0 ** scale, 2.0 ** -i, -(2.0 ** scale))
            exact[row], exponent[row] = 2.0 ** -(i + j), scale + i + j
        b[list(columns), :] = np.stack([np.ones(N), 2.0 ** -j, np.ones(N)])
    return a.astype(_np_dtype(dtype_name)), b.astype(_np_dtype(dtype_name)), exact, exponent


def summarize(c: np.ndarray, exact: np.ndarray, exponent: np.ndarray) -> dict:
    """Per case: {e: {"kept", "dropped", "other"}} over the outputs whose small term lies e bits below the largest
    addend, and ``bits``: the largest e up to which every output of every smaller e kept its term (-1 if even e = 0
    did not)."""
    c = np.asarray(c, dtype=np.float64)
    rows = M // len(CASES)
    report = {}
    for case_index, case in enumerate(CASES):
        part = slice(case_index * rows, (case_index + 1) * rows)
        got, want, e = c[part], exact[part], exponent[part]
        counts = {}
        for value in sorted(set(e.ravel().tolist())):
            at = e == value
            kept = int((got[at] == want[at]).sum())
            dropped = int((got[at] == 0).sum())
            counts[value] = {"kept": kept, "dropped": dropped, "other": int(at.sum()) - kept - dropped}
        bits = -1
        for value, count in counts.items():
            if count["dropped"] or count["other"]:
                break
            bits = value
        report[case] = {"bits": bits, "by_exponent": counts}
    return report


def measure(dtype_name: str) -> dict:
    """The probe on the GPU through WgmmaSpGemm's 64x16 tile."""
    import torch
    from vkcoop import sparse
    from vkcoop.cuda import DeviceSparse, WgmmaSpGemm
    from vkcoop.cuda.gemm import to_torch
    a, b, exact, exponent = probe_operands(dtype_name)
    compressed = sparse.compress_1to2(a) if dtype_name == "float32" else sparse.compress_2to4(a, accept_sparse=True)
    op = WgmmaSpGemm("64x16").bind(DeviceSparse.from_compressed(compressed), to_torch(np.ascontiguousarray(b.T)).t())
    c = op()
    torch.cuda.synchronize()
    return {"kernel": op.description, **summarize(c.float().cpu().numpy(), exact, exponent)}


def _print(name: str, report: dict) -> None:
    print(f"\n## {name}: {report['kernel']}")
    for case in CASES:
        counts = report[case]["by_exponent"]
        marks = {e: "d" if c["dropped"] else "?" if c["other"] else "k" for e, c in counts.items()}
        cells = " ".join(f"{e}:{mark}" for e, mark in marks.items())
        print(f"{case:22} bits={report[case]['bits']:3}   e (k kept, d dropped, ? other): {cells}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--types", default=",".join(TYPES), help=f"comma list of {', '.join(TYPES)}")
    parser.add_argument("--json", metavar="PATH", help="also write the report as JSON")
    args = parser.parse_args(argv)
    names = args.types.split(",")
    unknown = [name for name in names if name not in TYPES]
    if unknown:
        parser.error(f"unknown type(s) {', '.join(unknown)}; choose from {', '.join(TYPES)}")
    from vkcoop.cuda import available
    ok, why = available()
    if not ok:
        print(f"CUDA paths unavailable: {why}", file=sys.stderr)
        return 2
    report = {"gpu": available()[1], "types": {}}
    for name in names:
        report["types"][name] = measure(TYPES[name])
        _print(name, report["types"][name])
    if args.json:
        emit_json(report, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
