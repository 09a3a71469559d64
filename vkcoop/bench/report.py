"""Output of ``vkcoop bench``: environment facts (nvidia-smi), the rich table (medians with their p10-p90
spread; a library row's configuration in brackets with what found it; under the table, each library row's library
and version and which cuSPARSELt row each case's x cuSPARSELt is over), JSON, and the plot (throughput over a baseline per case, log axis, one panel per shape class)."""
from __future__ import annotations

import contextlib
import datetime
import json
import platform
import shutil
import subprocess
from pathlib import Path

from .shapes import SHAPES
from .stats import UNSTEADY_NOTE, relative_noise

#: What every timed figure of a run measures; both benchmarks' JSON settings carry it under "timing".
TIMING = ("GPU work only: Vulkan paths between GPU timestamps of recorded command buffers, CUDA paths between CUDA "
          "events behind a GPU busy-wait that covers the host's launch (vkcoop.cuda.timing)")
NVIDIA_SMI_FIELDS = ("name", "driver_version", "clocks.sm", "clocks.mem", "clocks.max.sm", "clocks.max.mem",
                     "power.draw", "power.limit", "temperature.gpu", "memory.total")


def nvidia_smi() -> dict:
    """GPU facts from ``nvidia-smi --query-gpu`` (first GPU); {"error": ...} where it is unavailable."""
    tool = shutil.which("nvidia-smi")
    if tool is None:
        return {"error": "nvidia-smi not found"}
    try:
        out = subprocess.run([tool, "--query-gpu=" + ",".join(NVIDIA_SMI_FIELDS), "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20, check=True).stdout
    except (subprocess.SubprocessError, OSError) as error:
        return {"error": f"nvidia-smi failed: {error}"}
    first = out.strip().splitlines()[0] if out.strip() else ""
    values = [v.strip() for v in first.split(",")]
    return dict(zip(NVIDIA_SMI_FIELDS, values)) if len(values) == len(NVIDIA_SMI_FIELDS) else {"raw": first}


def environment(vulkan_device: str | None, cuda_device: str | None) -> dict:
    env = {"timestamp_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
           "host": platform.node(), "python": platform.python_version(), "vulkan_device": vulkan_device,
           "cuda_device": cuda_device, "nvidia_smi": nvidia_smi()}
    with contextlib.suppress(Exception):
        import torch
        env["torch"] = torch.__version__
        env["cusparselt"] = torch.backends.cusparselt.version()
    return env


def setting(outcome, name: str, default=None):
    """One setting of a run: an attribute of its settings object, or a key of a recorded run's JSON dict."""
    settings = outcome.settings
    if isinstance(settings, dict):
        return settings.get(name, default)
    return getattr(settings, name, default)


def _fmt(value, spec: str, empty: str = "-") -> str:
    return empty if value is None else format(value, spec)


def _spread(r) -> str:
    """The p10-p90 half-width of a figure relative to its median, as +-%."""
    noise = relative_noise(r)
    return "-" if noise is None else f"±{100 * noise:.1f}%"


def _title(outcome) -> str:
    env = outcome.environment
    smi = env.get("nvidia_smi", {})
    return (f"vkcoop bench sparse: {env.get('vulkan_device') or env.get('cuda_device') or 'no GPU'}"
            f" (driver {smi.get('driver_version', '?')}, SM clock {smi.get('clocks.sm', '?')})")


def print_table(outcome, console=None) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    if console is None:
        console = Console()
        if not console.is_terminal:  # logs and pipes: do not squeeze the table into 80 columns
            console = Console(width=190)
    baseline = setting(outcome, "baseline", "cuBLAS")
    extra = baseline not in ("cuBLAS", "cuSPARSELt")
    table = Table(title=_title(outcome), show_lines=False)
    columns = [("case", "left"), ("path", "left"), ("status", "left"), ("ms", "right"), ("p10-p90", "right"),
               ("TFLOP/s", "right"), ("x cuBLAS", "right"), ("x cuSPARSELt", "right")]
    columns += [(f"x {baseline}", "right")] if extra else []
    roofline = any(r.ratio_own_ceiling is not None for r in outcome.results)
    columns += [("x own ceiling", "right")] if roofline else []
    for column, justify in columns + [("config / reason", "left")]:
        table.add_column(column, justify=justify, overflow="fold")
    previous, skip_reasons = None, {}
    for r in outcome.results:
        style = {"ok": None, "skipped": "dim", "failed": "bold red", "error": "red"}[r.status]
        source = getattr(r, "found_by", "") or r.config_source     # a library row: what found its winner
        note = f"{r.config} [{source}]" if r.status == "ok" and source else (r.config if r.status == "ok" else r.reason)
        if r.status == "skipped":  # the same reason repeats for every case: print it once below
            number = skip_reasons.setdefault(r.reason, len(skip_reasons) + 1)
            note = f"see note {number}"
        timed = _fmt(r.median_ms, ".3f") + (" *" if r.unsteady_ms else "")
        cells = [r.case if r.case != previous else "", r.path, r.status, timed,
                 _spread(r) if r.status == "ok" else "-", _fmt(r.tflops, ".1f"), _fmt(r.ratio_cublas, ".2f"),
                 _fmt(r.ratio_cusparselt, ".2f")] + ([_fmt(r.ratio_baseline, ".2f")] if extra else [])
        cells += [_fmt(r.ratio_own_ceiling, ".2f")] if roofline else []
        table.add_row(*cells, escape(note[:160]), style=style, end_section=False)
        previous = r.case
    console.print(table)
    for reason, number in skip_reasons.items():
        console.print(f"[dim]note {number}: skipped because {escape(reason)}[/]")
    if any(r.unsteady_ms for r in outcome.results):
        console.print(f"[yellow]{UNSTEADY_NOTE}[/]")
    for line in library_notes(outcome.results):
        console.print(f"[dim]{escape(line)}[/]")
    for line in clock_notes(outcome.results, outcome.environment.get("clocks") or {}):
        console.print(f"[yellow]{escape(line)}[/]")
    for message in outcome.environment.get("tuning", {}).get("messages", []):
        console.print(f"[yellow]{escape(message)}[/]")
    if outcome.failed:
        console.print(f"[bold red]{len(outcome.failed)} path(s) failed their check or errored[/]")


def library_notes(results) -> list[str]:
    """The lines under the table that say what each library row ran on, and which cuSPARSELt row each case's
    x cuSPARSELt ratio is over."""
    lines = [f"{path}: {library}" for path, library in dict.fromkeys((r.path, r.library) for r in results
                                                                      if r.library)]
    over: dict[str, list] = {}
    for r in results:
        if r.cusparselt_reference and r.case not in over.setdefault(r.cusparselt_reference, []):
            over[r.cusparselt_reference].append(r.case)
    lines += [f"x cuSPARSELt is over {reference}: {', '.join(cases)}" for reference, cases in over.items()]
    return lines


def clock_notes(results, clocks: dict) -> list[str]:
    """The line under the table naming each figure measured while the memory clock was below its maximum (the
    results' ``clocks``), or why no clock was sampled; nothing when every sample was at the top."""
    if clocks.get("reason"):
        return [clocks["reason"]]
    low = [r for r in results if (getattr(r, "clocks", None) or {}).get("mem_below_max")]
    if not low:
        return []
    cells = [f"{r.case} {r.path} (least {r.clocks['mem_mhz_min']} MHz, {100 * r.clocks['mem_below_max']:.0f} % of "
             f"{r.clocks['samples']} samples)" for r in low]
    return [f"memory clock below its maximum ({clocks.get('max_mem_mhz')} MHz) while measuring: " + "; ".join(cells)]


#: The format of the JSON ``bench sparse`` and ``bench attention`` write. 1 (a file without the field): results may
#: lack the percentiles (``vkcoop bench compare`` then takes median - min as the spread). 2: every result has its
#: percentiles and series; ``settings`` names the preset and the search depth, ``environment`` the search processes
#: the run started. 3: ``settings`` is the run's settings object, resolved (``dataclasses.asdict`` of a
#: :class:`~vkcoop.bench.sparse_settings.SparseBenchSettings` or an
#: :class:`~vkcoop.bench.attention_settings.AttentionBenchSettings`: the device and the validation mode too);
#: bench attention's figures its ratios are over are ``environment["ratios_over"]``. 4: a library row says what found
#: its winner (``found_by``: quick, deep, cached, shipped or default; ``vkcoop.bench.library_cache.FOUND_BY``) and
#: reports the fastest of its candidates timed in the measuring process (``vkcoop.bench.measure``). 5: a ``bench
#: sparse`` result has ``clocks``, the GPU's clocks while it measured (``vkcoop.bench.clocks``; null without NVML),
#: and ``environment["clocks"]`` the sampling interval, the memory clock's maximum and why nothing was sampled.
SCHEMA_VERSION = 5


def write_json(outcome, path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"schema_version": SCHEMA_VERSION, **outcome.to_dict()}, indent=2, default=str) + "\n")
    return path


def panel_of(shape_class: str) -> str:
    """The plot panel of a shape class: its own for the built-in classes, one for all user shapes."""
    return shape_class if shape_class in SHAPES else "user shapes"


def _ratios(results, baseline: str) -> dict:
    """(case, path) -> (ratio over the baseline, lower error, upper error) from the p10/p90 times."""
    base = {r.case: r for r in results if r.path == baseline and r.tflops}
    ratios = {}
    for r in results:
        if r.tflops and r.case in base and r.path != baseline:
            ratio = r.tflops / base[r.case].tflops
            slow, fast = (r.p90_ms or r.median_ms), (r.p10_ms or r.median_ms)
            ratios[(r.case, r.path)] = (ratio, max(0.0, ratio - ratio * r.median_ms / slow),
                                        max(0.0, ratio * r.median_ms / fast - ratio))
    return ratios


def _panel(ax, results, cases, paths, values, ylabel: str, title: str) -> None:
    from matplotlib.ticker import FuncFormatter, LogLocator

    width = 0.8 / max(1, len(paths))
    for i, p in enumerate(paths):
        xs, ys, low, high = [], [], [], []
        for c, case in enumerate(cases):
            if (case, p) in values:
                value, below, above = values[(case, p)]
                xs.append(c + (i - (len(paths) - 1) / 2) * width)
                ys.append(value)
                low.append(below)
                high.append(above)
        ax.bar(xs, ys, width, label=p, yerr=[low, high], capsize=1.5, error_kw={"linewidth": 0.6})
    ax.set_yscale("log")
    plain = FuncFormatter(lambda value, _: f"{value:g}")
    ax.yaxis.set_major_formatter(plain)
    ax.yaxis.set_minor_locator(LogLocator(base=10, subs=(1.5, 2.0, 3.0, 5.0, 7.0)))
    ax.yaxis.set_minor_formatter(plain)
    ax.tick_params(axis="y", which="both", labelsize=7)
    ax.set_xticks(range(len(cases)))
    ax.set_xticklabels([c.replace(" ", "\n", 2) for c in cases], fontsize=7)
    ax.set_ylabel(ylabel, fontsize=8)
    ax.set_title(title, fontsize=9)
    ax.grid(axis="y", which="both", alpha=0.3)


def plot(outcome, path, baseline: str | None = None) -> Path:
    """One panel per shape class: each path's throughput over ``baseline`` (default the run's, cuBLAS) per case
    on a log axis, with the p10-p90 spread as error bars; TFLOP/s where no case has a baseline figure."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    baseline = baseline or setting(outcome, "baseline", "cuBLAS")
    results = [r for r in outcome.results if r.tflops]
    values = _ratios(results, baseline)
    ylabel = f"x {baseline} (log)"
    if not values:   # no baseline figure: plain throughput, still on a log axis
        values = {(r.case, r.path): (r.tflops, 0.0, 0.0) for r in results}
        ylabel = "TFLOP/s, 2*M*N*K (log)"
    panels = list(dict.fromkeys(panel_of(r.shape_class) for r in outcome.results))
    paths = [p for p in dict.fromkeys(r.path for r in outcome.results) if any(k[1] == p for k in values)]
    widest = max(len({r.case for r in outcome.results if panel_of(r.shape_class) == p}) for p in panels)
    fig, axes = plt.subplots(len(panels), 1, figsize=(max(8, 1.3 * widest), 3.4 * len(panels)), squeeze=False)
    device = outcome.environment.get("nvidia_smi", {}).get("name") or outcome.environment.get("vulkan_device")
    for ax, panel in zip(axes[:, 0], panels):
        cases = list(dict.fromkeys(r.case for r in outcome.results if panel_of(r.shape_class) == panel))
        _panel(ax, results, cases, paths, values, ylabel, f"{panel} on {device}")
        ax.axhline(1.0, color="black", linewidth=0.8)
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="upper center", ncol=min(4, max(1, len(labels))), fontsize=7,
               bbox_to_anchor=(0.5, 1.0))
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.5 / (3.4 * len(panels))))
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def error_line(error: Exception) -> str:
    """The error's type and the first line of its message: what the JSON and a table's footer say of it."""
    return f"{type(error).__name__}: {(str(error).splitlines() or [''])[0]}"
