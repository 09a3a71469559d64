"""What Vulkan costs, case by case: a waterfall of rungs from the fastest way the GPU offers down to Vulkan, each step
one cause, derived from the results of one bench run (``vkcoop bench waterfall RUN.json``).

=========  ===================  ========================  =========================  ==============================
family     top                  the instruction set       Vulkan's cap               the driver's compiler and API
=========  ===================  ========================  =========================  ==============================
dense      cuBLAS (wgmma)       cuda-mma.sync             cuda-mma.sync-cap          vk-coopmat2-dense
2:4        wgmma.sp: the        cuda-mma.sp               cuda-mma.sp-cap            the fastest Vulkan 2:4 path
           fastest of the
           cuSPARSELt paths and
           cuda-wgmma.sp
attention  torch-cudnn (wgmma)  torch-flash (FA2,         -                          vk-coopmat2
                                mma.sync)
=========  ===================  ========================  =========================  ==============================

A rung that did not run on a case is left out and the next step spans both causes (its ``what`` says so). Each step's
``ratio`` is the previous rung's time over this rung's (below 1: this rung is slower); ``ratio_to_top`` the top's
time over this rung's. Regimes: a bench sparse case is memory-bound when its tuning class is narrow (N <= 256,
:func:`vkcoop.gemm.configs.tuning_class`), a bench attention case when it is decode; the rest are compute-bound.

Renderers: :func:`tables` (rich; ``*``: the step spans a missing rung), :func:`to_dict` (JSON) and :func:`plot` (one PNG, a panel per family and regime).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..errors import InputError
from ..gemm.configs import is_narrow, tuning_class
from ..gemm.path import GemmProblem
from .compare import load_run, run_bench


@dataclass(frozen=True)
class Rung:
    name: str
    what: str                  # the cause of the step down to this rung ("" for the top)
    paths: tuple[str, ...]     # the bench paths that stand for it: the fastest that ran


LADDERS = {
    "dense": (Rung("cuBLAS (wgmma)", "", ("cuBLAS",)),
              Rung("mma.sync", "the instruction set", ("cuda-mma.sync",)),
              Rung("mma.sync at Vulkan's cap", "the cap", ("cuda-mma.sync-cap",)),
              Rung("Vulkan coopmat2", "the driver's compiler and the API", ("vk-coopmat2-dense",))),
    "2:4": (Rung("wgmma.sp", "", ("cuSPARSELt", "cuSPARSELt-nvmath", "cuda-wgmma.sp")),
            Rung("mma.sp", "the instruction set", ("cuda-mma.sp",)),
            Rung("mma.sp at Vulkan's cap", "the cap", ("cuda-mma.sp-cap",)),
            Rung("Vulkan 2:4", "the driver's compiler and the API",
                 ("vk-coopmat2-2:4", "vk-coopmat2-2:4-expand"))),
    "attention": (Rung("cuDNN (wgmma)", "", ("torch-cudnn",)),
                  Rung("FlashAttention-2 (mma.sync)", "the instruction set and the kernel", ("torch-flash",)),
                  Rung("Vulkan coopmat2", "the driver's compiler, the API and the kernel", ("vk-coopmat2",))),
}
#: Which ladders each bench's runs feed.
BENCH_FAMILIES = {"sparse": ("dense", "2:4"), "attention": ("attention",)}
REGIMES = ("compute-bound", "memory-bound")


@dataclass
class Step:
    rung: str
    what: str                  # the causes this step measures (joined where rungs between are missing)
    path: str
    config: str
    median_ms: float
    tflops: float | None
    ratio: float | None        # the previous rung's time over this one's (None at the top)
    ratio_to_top: float


@dataclass
class Waterfall:
    family: str
    case: str
    dtype: str
    regime: str
    steps: list[Step] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)   # rungs with no timed path on this case

    @property
    def total(self) -> float | None:
        """The bottom rung's speed over the top's."""
        return self.steps[-1].ratio_to_top if len(self.steps) > 1 else None


def _regime(bench: str, row: dict) -> str:
    if bench == "attention":
        return "memory-bound" if row.get("kind") == "decode" else "compute-bound"
    problem = GemmProblem(row["dtype"], row.get("shape_class", ""), int(row["m"]), int(row["n"]), int(row["k"]))
    return "memory-bound" if is_narrow(tuning_class(problem)) else "compute-bound"


def _fastest(rows: list[dict], paths: tuple[str, ...]) -> dict | None:
    timed = [r for r in rows if r.get("path") in paths and r.get("status") == "ok" and r.get("median_ms")]
    return min(timed, key=lambda r: r["median_ms"]) if timed else None


def _ladder(family: str, bench: str, rows: list[dict]) -> Waterfall | None:
    first = rows[0]
    fall = Waterfall(family, first["case"], first["dtype"], _regime(bench, first))
    pending: list[str] = []
    for rung in LADDERS[family]:
        row = _fastest(rows, rung.paths)
        if row is None:
            fall.missing.append(rung.name)
            if rung.what:
                pending.append(rung.what)
            continue
        previous = fall.steps[-1] if fall.steps else None
        top = fall.steps[0].median_ms if fall.steps else row["median_ms"]
        what = " + ".join(pending + [rung.what]) if previous and rung.what else rung.what
        pending = []
        fall.steps.append(Step(rung.name, what, row["path"], row.get("config") or "", row["median_ms"],
                               row.get("tflops"), previous.median_ms / row["median_ms"] if previous else None,
                               top / row["median_ms"]))
    return fall if len(fall.steps) > 1 else None


def waterfalls(run: dict) -> list[Waterfall]:
    """Every case's waterfall of every family the run's bench feeds (cases with fewer than two rungs left out)."""
    bench = run_bench(run)
    by_case: dict[str, list[dict]] = {}
    for row in run["results"]:
        by_case.setdefault(row["case"], []).append(row)
    found = []
    for rows in by_case.values():
        for family in BENCH_FAMILIES[bench]:
            fall = _ladder(family, bench, rows)
            if fall is not None:
                found.append(fall)
    return found


def load_waterfalls(paths) -> tuple[list[Waterfall], list[dict]]:
    """(waterfalls, the runs' environments) of one or more bench JSON files (a bench sparse run and a bench
    attention run, say); InputError when a file is not one, or when no case of any has two rungs."""
    falls, environments = [], []
    for path in paths:
        run = load_run(path)
        falls += waterfalls(run)
        environments.append({"file": str(path), "bench": run_bench(run), **_environment(run)})
    if not falls:
        raise InputError(f"no case of {', '.join(str(p) for p in paths)} has two rungs of a waterfall: run bench "
                         "sparse with cuBLAS, cuda-mma.sync, cuda-mma.sync-cap and vk-coopmat2-dense (or their 2:4 "
                         "twins), or bench attention with torch-cudnn, torch-flash and vk-coopmat2")
    return falls, environments


def _environment(run: dict) -> dict:
    env = run.get("environment", {})
    return {"device": (env.get("nvidia_smi") or {}).get("name") or env.get("vulkan_device"),
            "vulkan_cap": env.get("vulkan_cap"), "ceilings": _mma_ceilings(env.get("ceilings") or {})}


def _mma_ceilings(ceilings: dict) -> dict:
    """The register-only rates a waterfall's rungs are bounded by, where the run measured them (--ceilings)."""
    out = {}
    for api, forms in (("cuda", ("wgmma", "mma.sync", "wgmma.sp", "mma.sp")), ("vulkan", ("coopmat2-workgroup",))):
        for form in forms:
            for types, value in ((ceilings.get(api) or {}).get("mma", {}).get(form) or {}).items():
                out[f"{api} {form} {types}"] = value.get("tflops")
    return out


def to_dict(falls: list[Waterfall], environments: list[dict]) -> dict:
    return {"sources": environments, "ladders": {name: [asdict(r) for r in rungs] for name, rungs in LADDERS.items()},
            "waterfalls": [{**asdict(f), "total": f.total} for f in falls]}


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def tables(falls: list[Waterfall]) -> list:
    """Rich tables, one per family: a row per case, a column per rung (TFLOP/s, the step's ratio and what it costs,
    the path that stood for the rung), and the bottom rung over the top."""
    from rich.markup import escape
    from rich.table import Table

    out = []
    for family, rungs in LADDERS.items():
        rows = sorted((f for f in falls if f.family == family), key=lambda f: (f.regime, f.case))
        if not rows:
            continue
        table = Table(title=f"what Vulkan costs, {family}: each rung's TFLOP/s and its speed over the rung above")
        for column in ("regime", "case", *(r.name + (f" ({r.what})" if r.what else "") for r in rungs), "bottom/top"):
            table.add_column(escape(column), overflow="fold")
        for fall in rows:
            steps = {s.rung: s for s in fall.steps}
            cells = [_cell(steps.get(r.name)) for r in rungs]
            table.add_row(fall.regime, fall.case, *cells, _ratio(fall.total))
        out.append(table)
    return out


def _cell(step: Step | None) -> str:
    from rich.markup import escape
    if step is None:
        return "-"
    rate = "-" if step.tflops is None else f"{step.tflops:.1f}"
    ratio = "" if step.ratio is None else f" {_ratio(step.ratio)}" + (" *" if " + " in step.what else "")
    return escape(f"{rate}{ratio}\n{step.path}")


def plot(falls: list[Waterfall], path) -> Path:
    """One PNG: a panel per (family, regime), a group of bars per case, one bar per rung (TFLOP/s, or the top's time
    over the rung's where a rung has no TFLOP/s), each labelled with its step's ratio."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [(family, regime) for family in LADDERS for regime in REGIMES
              if any(f.family == family and f.regime == regime for f in falls)]
    fig, axes = plt.subplots(len(panels), 1, figsize=(11, 3.6 * len(panels)), squeeze=False)
    for ax, (family, regime) in zip(axes[:, 0], panels):
        _panel(ax, [f for f in falls if f.family == family and f.regime == regime], LADDERS[family])
        ax.set_title(f"{family}, {regime}", fontsize=9)
    fig.tight_layout()
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(target, dpi=120)
    plt.close(fig)
    return target


def _panel(ax, falls: list[Waterfall], rungs) -> None:
    use_tflops = all(s.tflops for f in falls for s in f.steps)
    width = 0.8 / len(rungs)
    colors = ("#4c72b0", "#55a868", "#dd8452", "#c44e52")
    for index, rung in enumerate(rungs):
        xs, heights, labels = [], [], []
        for position, fall in enumerate(falls):
            step = next((s for s in fall.steps if s.rung == rung.name), None)
            if step is None:
                continue
            xs.append(position + (index - (len(rungs) - 1) / 2) * width)
            heights.append(step.tflops if use_tflops else step.ratio_to_top)
            labels.append("" if step.ratio is None else _ratio(step.ratio))
        bars = ax.bar(xs, heights, width, label=rung.name + (f" ({rung.what})" if rung.what else ""),
                      color=colors[index % len(colors)])
        for bar, label in zip(bars, labels):
            ax.annotate(label, (bar.get_x() + bar.get_width() / 2, bar.get_height()), ha="center", va="bottom",
                        fontsize=6)
    ax.set_xticks(range(len(falls)))
    ax.set_xticklabels([f.case for f in falls], fontsize=6, rotation=15)
    ax.set_ylabel("TFLOP/s" if use_tflops else "speed over the top rung")
    ax.legend(fontsize=6, loc="upper right")
