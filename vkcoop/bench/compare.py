"""``vkcoop bench compare A.json B.json``: per-case throughput ratios B/A of two runs, with their noise band.

Both runs come from ``vkcoop bench sparse --json`` or both from ``vkcoop bench attention --json``. GEMM results are
matched by path, dtype and M, N, K (not by label, so runs whose shape classes were named differently still compare),
attention results by path and case (kind, dtype, heads, lengths, head_dim and mask). For each pair, ratio = TFLOP/s
of B / TFLOP/s of A (> 1: B is faster). The noise band is the sum of both figures' relative noise (half their p10-p90
width over the median, :func:`vkcoop.bench.stats.relative_noise`; a run of schema version 1 may have only the
minimum: :data:`vkcoop.bench.report.SCHEMA_VERSION`), at least ``min_noise``: a ratio below 1 - band is a
regression, above 1 + band an improvement, anything between is within noise. A path that passed in A and failed or
errored in B is a regression too; one that ran in only one of the runs is listed, not judged. What else differs
between the two runs' environments (the GPU, its driver, the Vulkan device's buffer robustness, torch, cuSPARSELt) is
said under the table and in the JSON (``environment_differences``): a ratio across two drivers is not a ratio across
two kernels.

Runs on two different GPUs (by name: an H100 run and an H200 run) answer how the GPUs compare, not whether the code
regressed: their ratios and noise bands are shown as usual, but a ratio below the band is ``slower`` and a path that
failed only in B is ``failed in B``, neither a regression (:func:`devices_differ`). A run that does not name its GPU
is taken to be on the same one, so a regression is never hidden for want of a name.
"""
from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path

from ..errors import InputError
from .stats import relative_noise

#: The smallest noise band: run-to-run differences of clocks and placement that one run's spread does not show.
MIN_NOISE = 0.02
VERDICTS = ("regression", "faster", "within noise", "lost", "not comparable", "only in A", "only in B",
            "slower", "failed in B")   # the last two: across GPUs, where "regression" and "lost" would be


#: The fields every result of a run has, by the bench that wrote it.
RESULT_FIELDS = {"sparse": {"path", "dtype", "m", "n", "k", "status"},
                 "attention": {"path", "dtype", "case", "kind", "shape", "status"}}


@dataclass
class CaseComparison:
    path: str
    case: str
    dtype: str
    m: int | None      # GEMM results; None for attention, whose case names its shape
    n: int | None
    k: int | None
    a_tflops: float | None
    b_tflops: float | None
    ratio: float | None
    band: float | None
    verdict: str

    @property
    def regressed(self) -> bool:
        return self.verdict in ("regression", "lost")

    @property
    def label(self) -> str:
        return self.case if self.m is None else f"{self.dtype} {self.m}x{self.n}x{self.k}"


def result_bench(row) -> str | None:
    """Which bench wrote a result ("sparse" or "attention"), or None where it has neither's fields."""
    found = set(row) if isinstance(row, dict) else set()
    return next((bench for bench, fields in RESULT_FIELDS.items() if fields <= found), None)


def run_bench(run: dict) -> str:
    """The bench a loaded run came from (an empty run counts as ``sparse``)."""
    return result_bench(run["results"][0]) if run["results"] else "sparse"


def load_run(path) -> dict:
    """A ``vkcoop bench sparse --json`` or ``bench attention --json`` file; a one-line InputError naming the file if
    it is neither."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except OSError as error:
        raise InputError(f"{path}: cannot read it ({error.strerror or error})") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise InputError(f"{path}: not JSON ({getattr(error, 'msg', error)})") from None
    if not isinstance(data, dict) or not isinstance(data.get("results"), list):
        raise InputError(f"{path}: not a `vkcoop bench sparse` or `bench attention` JSON file (no results list)")
    benches = set()
    for index, row in enumerate(data["results"]):
        bench = result_bench(row)
        if bench is None:
            raise InputError(f"{path}: result {index + 1} lacks path, dtype, status and either m, n, k (bench "
                             f"sparse) or case, kind, shape (bench attention)")
        benches.add(bench)
    if len(benches) > 1:
        raise InputError(f"{path}: mixes bench sparse and bench attention results")
    return data


def _key(row: dict) -> tuple:
    if "m" in row:
        return (row["path"], row["dtype"], int(row["m"]), int(row["n"]), int(row["k"]))
    return (row["path"], row["dtype"], row["case"])


def compare_pair(a: dict | None, b: dict | None, min_noise: float = MIN_NOISE, *,
                 across_devices: bool = False) -> CaseComparison:
    """The comparison of one result of A with the same case and path of B (either may be missing); across two GPUs
    nothing is judged a regression."""
    row = a or b
    a_tflops = a.get("tflops") if a and a.get("status") == "ok" else None
    b_tflops = b.get("tflops") if b and b.get("status") == "ok" else None
    gemm = "m" in row
    case = dict(path=row["path"], case=row.get("case", ""), dtype=row["dtype"], m=int(row["m"]) if gemm else None,
                n=int(row["n"]) if gemm else None, k=int(row["k"]) if gemm else None,
                a_tflops=a_tflops, b_tflops=b_tflops)
    if a is None or b is None:
        return CaseComparison(**case, ratio=None, band=None, verdict="only in B" if a is None else "only in A")
    if a_tflops and b.get("status") in ("failed", "error"):
        return CaseComparison(**case, ratio=None, band=None, verdict="failed in B" if across_devices else "lost")
    if not a_tflops or not b_tflops:
        return CaseComparison(**case, ratio=None, band=None, verdict="not comparable")
    ratio = b_tflops / a_tflops
    band = max(min_noise, (relative_noise(a) or 0.0) + (relative_noise(b) or 0.0))
    slower = "slower" if across_devices else "regression"
    verdict = slower if ratio < 1 - band else "faster" if ratio > 1 + band else "within noise"
    return CaseComparison(**case, ratio=ratio, band=band, verdict=verdict)


def compare_runs(a: dict, b: dict, min_noise: float = MIN_NOISE) -> list[CaseComparison]:
    """Every case and path of either run, in A's order, then B's extra ones."""
    if min_noise < 0:
        raise InputError(f"--min-noise {min_noise}: must be >= 0")
    if a["results"] and b["results"] and run_bench(a) != run_bench(b):
        raise InputError(f"A is a bench {run_bench(a)} run and B a bench {run_bench(b)} run: no case of one is "
                         f"a case of the other")
    left = {_key(r): r for r in a["results"]}
    right = {_key(r): r for r in b["results"]}
    keys = list(left) + [k for k in right if k not in left]
    across = devices_differ(a, b)
    return [compare_pair(left.get(k), right.get(k), min_noise, across_devices=across) for k in keys]


def geometric_means(rows: list[CaseComparison]) -> dict[str, float]:
    """Per path, the geometric mean of its comparable ratios."""
    logs: dict[str, list[float]] = {}
    for r in rows:
        if r.ratio:
            logs.setdefault(r.path, []).append(math.log(r.ratio))
    return {path: math.exp(sum(values) / len(values)) for path, values in logs.items()}


def _gpu(env: dict) -> str | None:
    """The GPU's name: nvidia-smi's, else the Vulkan device's, else the CUDA device's (less its "(sm_90, ...)")."""
    cuda = env.get("cuda_device")
    return (env.get("nvidia_smi", {}).get("name") or env.get("vulkan_device")
            or (cuda.split(" (")[0] if isinstance(cuda, str) else cuda))


def run_device(run: dict) -> str | None:
    """The GPU a run was measured on, or None where it does not say."""
    return _gpu(run.get("environment") or {})


def devices_differ(a: dict, b: dict) -> bool:
    """True when both runs name their GPU and the names differ (an H100 run and an H200 run)."""
    device_a, device_b = run_device(a), run_device(b)
    return device_a is not None and device_b is not None and str(device_a) != str(device_b)


#: What a run's environment says that bears on its figures: (name in the report, getter).
ENVIRONMENT_FACTS = (
    ("GPU", _gpu),
    ("driver", lambda env: env.get("nvidia_smi", {}).get("driver_version")),
    ("buffer robustness", lambda env: env.get("buffer_robustness")),
    ("torch", lambda env: env.get("torch")),
    ("cuSPARSELt", lambda env: env.get("cusparselt")),
)


def environment_differences(a: dict, b: dict, leave_out=()) -> list[str]:
    """One line per environment fact that both runs recorded and that differs between them, "name: A -> B" (less
    the facts named in ``leave_out``)."""
    env_a, env_b = a.get("environment", {}), b.get("environment", {})
    lines = []
    for name, fact in ENVIRONMENT_FACTS:
        if name in leave_out:
            continue
        in_a, in_b = fact(env_a), fact(env_b)
        if in_a is not None and in_b is not None and str(in_a) != str(in_b):
            lines.append(f"{name}: {in_a} -> {in_b}")
    return lines


def to_dict(rows: list[CaseComparison], a: dict, b: dict, a_name: str, b_name: str) -> dict:
    """The comparison of runs ``a`` and ``b`` (files ``a_name``, ``b_name``) as JSON: each case, the geometric means,
    the regressions, what differs in the environments, and each run's GPU (``across_devices``: they differ)."""
    return {"a": a_name, "b": b_name, "cases": [asdict(r) for r in rows],
            "geometric_mean_ratio": geometric_means(rows),
            "regressions": sum(r.regressed for r in rows), "environment_differences": environment_differences(a, b),
            "devices": {"a": run_device(a), "b": run_device(b)}, "across_devices": devices_differ(a, b)}


def _describe(run: dict, name: str) -> str:
    env = run.get("environment", {})
    device = _gpu(env) or "?"
    return f"{name} ({device}, {env.get('timestamp_utc', '?')})"


def print_comparison(rows: list[CaseComparison], a: dict, b: dict, a_name: str, b_name: str,
                     console=None) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = console or Console()
    if not console.is_terminal:   # logs and pipes: do not squeeze the table into 80 columns
        console = Console(width=170)
    table = Table(title=f"B/A throughput: A = {escape(_describe(a, a_name))}, B = {escape(_describe(b, b_name))}")
    for column, justify in (("case", "left"), ("path", "left"), ("A TFLOP/s", "right"), ("B TFLOP/s", "right"),
                            ("B/A", "right"), ("noise band", "right"), ("verdict", "left")):
        table.add_column(column, justify=justify)
    styles = {"regression": "bold red", "lost": "bold red", "faster": "green", "within noise": None,
              "slower": "yellow", "failed in B": "red"}
    for r in rows:
        table.add_row(r.label, r.path, _number(r.a_tflops, ".1f"), _number(r.b_tflops, ".1f"),
                      _number(r.ratio, ".3f"), "-" if r.band is None else f"±{100 * r.band:.1f}%", r.verdict,
                      style=styles.get(r.verdict, "dim"))
    console.print(table)
    means = geometric_means(rows)
    if means:
        console.print("geometric mean B/A: " + ", ".join(f"{p} {v:.3f}" for p, v in means.items()))
    across = devices_differ(a, b)
    for line in environment_differences(a, b, leave_out=("GPU",) if across else ()):   # two GPUs: said below
        console.print(f"[yellow]the runs differ in {escape(line)}[/]")
    regressed = [r for r in rows if r.regressed]
    if across:
        console.print(f"[yellow]A ran on {escape(str(run_device(a)))} and B on {escape(str(run_device(b)))}: the "
                      "ratios compare the two GPUs, so no case is judged a regression[/]")
    elif regressed:
        console.print(f"[bold red]{len(regressed)} regression(s) beyond the noise band[/]")
    else:
        console.print("no regression beyond the noise band")


def _number(value, spec: str) -> str:
    return "-" if value is None else format(value, spec)
