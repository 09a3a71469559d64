"""The problem shapes of ``vkcoop bench sparse``: shape classes, named shapes and user shape files.

Shape classes (``--shapes``):

* ``square``: M = N = K = each of ``--sizes``;
* ``llm``: M = K = each size, N = each of ``--llm-tokens`` (a batch of tokens times a weight matrix, 1 to 256
  columns: memory-bound, A dominates the traffic);
* ``mlp``: the named LLaMA-style MLP projections of :data:`MLP_SHAPES` (sizes that are not powers of two).

A ``--shapes`` item that is not a class is a file of user shapes (:func:`read_shape_file`): JSON (a list of
``{"label", "m", "n", "k"}``, or ``{"shapes": [...]}``) or CSV (``label,m,n,k`` with that header in any column
order, or rows of ``M,N,K[,LABEL]`` without one). A user shape's label becomes its shape class.
"""
from __future__ import annotations

import csv
import io
import json
import re
from dataclasses import dataclass
from pathlib import Path

from ..errors import InputError
from ..gemm.dtypes import BENCH_DTYPES, bench_type
from ..gemm.path import GemmProblem

SHAPES = ("square", "llm", "mlp")
#: N of the llm shapes: 1 to 256 tokens (32 is the N of the earlier runs, so they compare).
LLM_TOKENS = (1, 8, 32, 128, 256)
#: (name, M, N, K): LLaMA-13B (hidden 5120, MLP 13824) and LLaMA-7B (4096, 11008) MLP projections.
MLP_SHAPES = (("llama13b", 5120, 13824, 5120), ("llama7b", 4096, 11008, 4096))
#: The named grids of ``bench sparse --preset``. ``default`` answers in about a minute: both dtypes, one
#: compute-bound case (8192^3) and one memory-bound one (8192x32x8192: N = 32 is taken by every path, and A, 128
#: MiB in fp16, is larger than the L2 of any current GPU, so it streams from memory). ``full`` is the wider grid.
PRESETS = {
    "default": {"dtypes": ("fp16", "bf16"), "sizes": (8192,), "shapes": ("square", "llm"), "llm_tokens": (32,)},
    "full": {"dtypes": ("fp16", "bf16"), "sizes": (4096, 8192), "shapes": ("square", "llm"),
             "llm_tokens": LLM_TOKENS},
}
#: K of every problem: one 2:4 metadata word covers 32 columns (vkcoop.sparse.K_ALIGNMENT).
K_MULTIPLE = 32
_LABEL = re.compile(r"[A-Za-z0-9_.:+-]{1,40}")


@dataclass(frozen=True)
class UserShape:
    """One shape of a user file: M x N x K under a label (the label becomes the problem's shape class)."""
    label: str
    m: int
    n: int
    k: int
    source: str = ""

    def to_dict(self) -> dict:
        return {"label": self.label, "m": self.m, "n": self.n, "k": self.k, "source": self.source}


def _shape(where: str, label, m, n, k, source: str) -> UserShape:
    try:
        m, n, k = (int(str(v).strip()) for v in (m, n, k))
    except (TypeError, ValueError):
        raise InputError(f"{where}: M, N, K must be whole numbers (got {m!r}, {n!r}, {k!r})") from None
    if min(m, n, k) < 1:
        raise InputError(f"{where}: M, N, K must be at least 1 (got {m}x{n}x{k})")
    if k % K_MULTIPLE:
        raise InputError(f"{where}: K={k} is not a multiple of {K_MULTIPLE} (one 2:4 metadata word covers 32 "
                         "columns)")
    label = str(label).strip() if label not in (None, "") else "user"
    if not _LABEL.fullmatch(label):
        raise InputError(f"{where}: label {label!r} must be 1-40 characters of letters, digits and _.:+-")
    return UserShape(label, m, n, k, source)


def _from_json(path: Path, text: str) -> list[UserShape]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise InputError(f"{path}: not valid JSON ({error.msg} at line {error.lineno})") from None
    rows = data.get("shapes") if isinstance(data, dict) else data
    if not isinstance(rows, list):
        raise InputError(f"{path}: expected a list of {{\"label\", \"m\", \"n\", \"k\"}} or {{\"shapes\": [...]}}")
    shapes = []
    for index, row in enumerate(rows):
        where = f"{path}: shape {index + 1}"
        if not isinstance(row, dict) or not {"m", "n", "k"} <= {key.lower() for key in row}:
            raise InputError(f"{where}: needs m, n and k")
        lower = {key.lower(): value for key, value in row.items()}
        shapes.append(_shape(where, lower.get("label"), lower["m"], lower["n"], lower["k"], str(path)))
    return shapes


def _from_csv(path: Path, text: str) -> list[UserShape]:
    rows = [(number, row) for number, row in enumerate(csv.reader(io.StringIO(text)), 1)
            if row and any(cell.strip() for cell in row) and not row[0].lstrip().startswith("#")]
    if not rows:
        return []
    header = [cell.strip().lower() for cell in rows[0][1]]
    shapes = []
    if {"m", "n", "k"} <= set(header):
        column = {name: header.index(name) for name in ("m", "n", "k")}
        label_at = header.index("label") if "label" in header else None
        for number, row in rows[1:]:
            where = f"{path}:{number}"
            if len(row) < len(header):
                raise InputError(f"{where}: {len(row)} columns, the header has {len(header)}")
            label = row[label_at] if label_at is not None else None
            shapes.append(_shape(where, label, *(row[column[c]] for c in ("m", "n", "k")), str(path)))
        return shapes
    for number, row in rows:
        if len(row) not in (3, 4):
            raise InputError(f"{path}:{number}: expected M,N,K[,LABEL] (or a header naming label,m,n,k)")
        shapes.append(_shape(f"{path}:{number}", row[3] if len(row) == 4 else None, *row[:3], str(path)))
    return shapes


def read_shape_file(path) -> list[UserShape]:
    """The shapes of a JSON or CSV file (by its content: JSON starts with ``[`` or ``{``); one-line ValueError
    naming the file and line for anything wrong."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as error:
        raise InputError(f"--shapes {path}: cannot read it ({error.strerror or error})") from None
    stripped = text.lstrip()
    shapes = _from_json(path, text) if stripped[:1] in ("[", "{") else _from_csv(path, text)
    if not shapes:
        raise InputError(f"--shapes {path}: no shapes in the file")
    return shapes


def parse_shapes(items) -> list:
    """``--shapes`` items: class names stay strings, anything else is read as a shape file."""
    parsed = []
    for item in items:
        if item in SHAPES:
            parsed.append(item)
        elif Path(item).suffix.lower() in (".json", ".csv") or Path(item).exists():
            parsed.extend(read_shape_file(item))
        else:
            raise InputError(f"--shapes {item!r}: neither a shape class ({', '.join(SHAPES)}) nor a .json/.csv "
                             "file")
    return parsed


def _tokens(llm_tokens) -> list[int]:
    tokens = [int(llm_tokens)] if isinstance(llm_tokens, int) else [int(t) for t in llm_tokens]
    if not tokens or min(tokens) < 1:
        raise InputError(f"--llm-tokens {tokens}: each must be at least 1")
    return list(dict.fromkeys(tokens))


def _problems(dtype: str, shape, sizes, tokens) -> list[GemmProblem]:
    if isinstance(shape, UserShape):
        return [GemmProblem(dtype, shape.label, shape.m, shape.n, shape.k)]
    if shape not in SHAPES:
        raise InputError(f"--shapes {shape!r}: choose from {', '.join(SHAPES)} or give a shape file")
    if shape == "mlp":
        return [GemmProblem(dtype, "mlp", m, n, k) for _, m, n, k in MLP_SHAPES]
    if shape == "square":
        return [GemmProblem(dtype, "square", size, size, size) for size in sizes]
    return [GemmProblem(dtype, "llm", size, n, size) for size in sizes for n in tokens]


def _check_k(cases) -> None:
    """InputError naming the first case whose K its type's sparse format does not take (the 8-bit types: K a
    multiple of 64, one wgmma.mma_async.sp m64nNk64 step)."""
    for case in cases:
        multiple = bench_type(case.dtype).k_multiple
        if case.k % multiple:
            raise InputError(f"--dtype {case.dtype}: {case.label} has K={case.k}, not a multiple of {multiple} "
                             f"(the {case.dtype} 2:4 format covers K in steps of {multiple})")


def preset_grid(preset: str, **given) -> dict:
    """The grid of ``preset`` (:data:`PRESETS`) with every option in ``given`` that is not None put over it:
    ``dtypes``, ``sizes``, ``shapes`` and ``llm_tokens``."""
    if preset not in PRESETS:
        raise InputError(f"--preset {preset!r}: choose from {', '.join(PRESETS)}")
    unknown = set(given) - set(PRESETS[preset])
    if unknown:
        raise InputError(f"not a grid option: {', '.join(sorted(unknown))}")
    return {name: given[name] if given.get(name) is not None else value for name, value in PRESETS[preset].items()}


def make_cases(dtypes, sizes, shapes, llm_tokens=LLM_TOKENS) -> list[GemmProblem]:
    """Every (dtype, shape) problem, duplicates dropped, in that order except that the problems sharing a dtype,
    M and K follow each other (they share A: :func:`vkcoop.gemm.exact.bench_inputs`). Raises ValueError
    naming the option (a K that a type's format does not take among them)."""
    tokens = _tokens(llm_tokens)
    checked = []
    for size in sizes:
        size = int(size)
        if size <= 0 or size % 64:
            raise InputError(f"--sizes {size}: sizes must be positive multiples of 64")
        checked.append(size)
    cases = []
    for dtype in dtypes:
        if dtype not in BENCH_DTYPES:
            raise InputError(f"--dtype {dtype!r}: choose from {', '.join(BENCH_DTYPES)}")
        for shape in shapes:
            cases.extend(_problems(dtype, shape, checked, tokens))
    cases = list(dict.fromkeys(cases))
    _check_k(cases)
    first = {}
    for index, case in enumerate(cases):
        first.setdefault((case.dtype, case.m, case.k), index)
    return sorted(cases, key=lambda case: first[(case.dtype, case.m, case.k)])


def describe_shapes(shapes) -> list:
    """``--shapes`` as JSON: class names and user shapes."""
    return [s.to_dict() if isinstance(s, UserShape) else s for s in shapes]
