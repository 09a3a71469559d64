"""A result set's 2:4 grid, generated from its ``sparse-compute-<dtype>.json`` (``benchmarks/shapes-compute.csv``)
and ``sparse-skinny-<dtype>.json`` (``benchmarks/shapes-skinny.csv``, after an L2 flush), the runs of
``benchmarks/gpu/results.sh sparse-grid``. Per case: the hand-written CUDA 2:4 kernels against the faster
cuSPARSELt route, and Vulkan 2:4 against Vulkan dense, in µs. Then each goal the grid measures (:data:`GOALS`),
with its geometric mean, its least case and whether it holds. Every ratio divides two paths of one run: one
process on one machine. ``SUMMARY.md`` holds the section; a set without the part has none.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from .measure import CUSPARSELT_ROUTES
from .types_summary import case_label, read_json

GRID_RUNS = {"compute": "sparse-compute-{dtype}.json", "skinny": "sparse-skinny-{dtype}.json"}
DTYPES = ("fp16", "bf16")
HAND_WRITTEN = ("cuda-wgmma.sp", "cuda-mma.sp")
VULKAN_SPARSE, VULKAN_DENSE = ("vk-coopmat2-2:4",), ("vk-coopmat2-dense",)
#: At or above this many rows, a skinny case streams a weight matrix larger than the L2 (the decode shapes).
LARGE_ROWS = 8192


@dataclass(frozen=True)
class Goal:
    """The faster of ``paths`` over the faster of ``over`` (time over time: one FLOP count) on the cases of one
    run that ``cases`` names: ``"all"``, ``"large"`` (M >= LARGE_ROWS), ``"small"`` (fewer rows) or ``"square"``
    (6144³ and 8192³). It holds where every case ran, the least ratio reaches ``least`` and, if given, their
    geometric mean reaches ``geomean``."""
    what: str
    run: str
    dtype: str
    paths: tuple
    over: tuple
    cases: str
    least: float
    geomean: float | None = None


GOALS = (
    Goal("CUDA wgmma.sp over the best cuSPARSELt", "compute", "fp16", ("cuda-wgmma.sp",), tuple(CUSPARSELT_ROUTES),
         "all", 0.95, 1.00),
    Goal("CUDA wgmma.sp over the best cuSPARSELt", "compute", "bf16", ("cuda-wgmma.sp",), tuple(CUSPARSELT_ROUTES),
         "all", 0.95, 1.00),
    Goal("the best hand-written 2:4 over the best cuSPARSELt", "skinny", "fp16", HAND_WRITTEN,
         tuple(CUSPARSELT_ROUTES), "large", 0.90, 1.00),
    Goal("the best hand-written 2:4 over the best cuSPARSELt", "skinny", "bf16", HAND_WRITTEN,
         tuple(CUSPARSELT_ROUTES), "large", 1.30),
    *(Goal("Vulkan 2:4 over Vulkan dense", "skinny", dtype, VULKAN_SPARSE, VULKAN_DENSE, "large", 1.2, 1.4)
      for dtype in DTYPES),
    *(Goal("Vulkan 2:4 over Vulkan dense", "skinny", dtype, VULKAN_SPARSE, VULKAN_DENSE, "small", 1.1)
      for dtype in DTYPES),
    *(Goal("Vulkan 2:4 over Vulkan dense", "compute", dtype, VULKAN_SPARSE, VULKAN_DENSE, "square", 0.8)
      for dtype in DTYPES),
)
_CASE_WORDS = {"all": "every case", "large": f"M ≥ {LARGE_ROWS}", "small": f"M < {LARGE_ROWS}",
               "square": "6144³, 8192³"}


def _case_in(cases: str, m: int, n: int, k: int) -> bool:
    return {"all": True, "large": m >= LARGE_ROWS, "small": m < LARGE_ROWS,
            "square": m == n == k and m in (6144, 8192)}[cases]


def runs(folder) -> dict:
    """(run, dtype) -> the run's JSON, for each grid file in ``folder``."""
    folder = Path(folder)
    return {(run, dtype): read_json(folder / pattern.format(dtype=dtype))
            for run, pattern in GRID_RUNS.items() for dtype in DTYPES
            if (folder / pattern.format(dtype=dtype)).is_file()}


def cases(run: dict) -> dict:
    """(m, n, k) -> {path: median µs} of the paths that ran and passed their check, in the run's order."""
    found = {}
    for result in run.get("results") or []:
        times = found.setdefault((result["m"], result["n"], result["k"]), {})
        if result["status"] == "ok" and result.get("median_ms"):
            times[result["path"]] = result["median_ms"] * 1e3
    return found


def fastest(times: dict, paths) -> tuple[str, float] | None:
    """(path, µs) of the fastest of ``paths`` in one case's times, None where none ran."""
    ran = [(path, times[path]) for path in paths if path in times]
    return min(ran, key=lambda item: item[1]) if ran else None


def ratio(times: dict, paths, over) -> float | None:
    """The faster of ``over`` in time over the faster of ``paths``: above 1, ``paths`` is faster."""
    mine, theirs = fastest(times, paths), fastest(times, over)
    return theirs[1] / mine[1] if mine and theirs else None


def evaluate(goal: Goal, run: dict) -> dict:
    """{"cases": the ratios by case (None where a side did not run), "geomean", "least", "least_case", "holds"}."""
    ratios = {key: ratio(times, goal.paths, goal.over) for key, times in cases(run).items()
              if _case_in(goal.cases, *key)}
    ran = [r for r in ratios.values() if r is not None]
    complete = bool(ratios) and len(ran) == len(ratios)
    geomean = math.exp(sum(map(math.log, ran)) / len(ran)) if ran else None
    least_case = min((key for key in ratios if ratios[key] is not None), key=ratios.get, default=None)
    least = ratios[least_case] if least_case else None
    holds = complete and least >= goal.least and (goal.geomean is None or geomean >= goal.geomean)
    return {"cases": ratios, "geomean": geomean, "least": least, "least_case": least_case, "holds": holds}


def _us(entry) -> str:
    return "-" if entry is None else f"{entry[1]:.1f}"


def _x(value) -> str:
    return "-" if value is None else f"{value:.2f}×"


def _case_rows(found: dict) -> list[str]:
    lines = ["| dtype | case | wgmma.sp | mma.sp | cuSPARSELt | × | Vulkan dense | Vulkan 2:4 | × |",
             "|---|---|---:|---:|---|---:|---:|---:|---:|"]
    for (run, dtype), data in found.items():
        for (m, n, k), times in cases(data).items():
            library = fastest(times, CUSPARSELT_ROUTES)
            route = "-" if library is None else f"{library[1]:.1f} ({CUSPARSELT_ROUTES[library[0]]})"
            cells = [dtype, case_label(m, n, k), _us(fastest(times, HAND_WRITTEN[:1])),
                     _us(fastest(times, HAND_WRITTEN[1:])), route,
                     _x(ratio(times, HAND_WRITTEN, CUSPARSELT_ROUTES)), _us(fastest(times, VULKAN_DENSE)),
                     _us(fastest(times, VULKAN_SPARSE)), _x(ratio(times, VULKAN_SPARSE, VULKAN_DENSE))]
            lines.append("| " + " | ".join(cells) + " |")
    return lines


def _goal_rows(found: dict) -> list[str]:
    lines = ["| goal | dtype | cases | geomean | least | needs | holds |", "|---|---|---|---:|---|---|---|"]
    for goal in GOALS:
        if (goal.run, goal.dtype) not in found:
            continue
        result = evaluate(goal, found[(goal.run, goal.dtype)])
        least = "-" if result["least_case"] is None else \
            f"{result['least']:.3f}× ({case_label(*result['least_case'])})"
        needs = (f"geomean ≥ {goal.geomean:.2f}×, " if goal.geomean is not None else "") + f"least ≥ {goal.least:.2f}×"
        geomean = "-" if result["geomean"] is None else f"{result['geomean']:.3f}×"
        lines.append(f"| {goal.what} | {goal.dtype} | {goal.run}, {_CASE_WORDS[goal.cases]} | {geomean} | {least} | "
                     f"{needs} | {'yes' if result['holds'] else '**no**'} |")
    return lines


def grid_table(folder, link: str = ".") -> str:
    """The Markdown of the grid (module docstring); empty for a set without the part."""
    folder = Path(folder)
    found = runs(folder)
    if not found:
        return ""
    steps = read_json(folder / "steps.json") if (folder / "steps.json").is_file() else []
    commits = sorted({s.get("commit") or "?" for s in steps if s.get("name", "").startswith(("sparse-compute-",
                                                                                              "sparse-skinny-"))})
    first = next(iter(found.values()))
    driver = ((first.get("environment") or {}).get("nvidia_smi") or {}).get("driver_version", "?")
    names = [GRID_RUNS[run].format(dtype=dtype) for run, dtype in found]
    files = ", ".join(f"[`{name}`]({link}/{name})" for name in names)
    return "\n".join([
        f"Driver {driver}, commit {', '.join(f'`{c}`' for c in commits) or '?'}: median µs of each path, from "
        f"{files}. × is time over time within one run: the best hand-written CUDA 2:4 kernel over the faster "
        "cuSPARSELt route, and Vulkan 2:4 over Vulkan dense (fp32 accumulation).", "", *_case_rows(found), "",
        *_goal_rows(found)])
