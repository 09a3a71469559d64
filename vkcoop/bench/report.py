"""Output of ``vkcoop bench``: environment facts (nvidia-smi), the rich table, JSON and the matplotlib plot."""
from __future__ import annotations

import contextlib
import datetime
import json
import platform
import shutil
import subprocess
from pathlib import Path

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


@contextlib.contextmanager
def progress_bar(console=None, enabled: bool = True):
    """A rich progress bar (a no-op stand-in when disabled)."""
    if not enabled:
        class _Quiet:
            def add_task(self, *a, **k):
                return 0

            def update(self, *a, **k):
                pass

            def advance(self, *a, **k):
                pass
        yield _Quiet()
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console, transient=False) as bar:
        yield bar


def _fmt(value, spec: str, empty: str = "-") -> str:
    return empty if value is None else format(value, spec)


def print_table(outcome, console=None) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    if console is None:
        console = Console()
        if not console.is_terminal:  # logs and pipes: do not squeeze the table into 80 columns
            console = Console(width=170)
    env = outcome.environment
    smi = env.get("nvidia_smi", {})
    title = (f"vkcoop bench sparse: {env.get('vulkan_device') or env.get('cuda_device') or 'no GPU'}"
             f" (driver {smi.get('driver_version', '?')}, SM clock {smi.get('clocks.sm', '?')})")
    table = Table(title=title, show_lines=False)
    for column, justify in (("case", "left"), ("path", "left"), ("status", "left"), ("ms", "right"),
                            ("TFLOP/s", "right"), ("x cuBLAS", "right"), ("x cuSPARSELt", "right"),
                            ("config / reason", "left")):
        table.add_column(column, justify=justify, overflow="fold")
    previous = None
    skip_reasons = {}
    for r in outcome.results:
        style = {"ok": None, "skipped": "dim", "failed": "bold red", "error": "red"}[r.status]
        note = r.config if r.status == "ok" else r.reason
        if r.status == "skipped":  # the same reason repeats for every case: print it once below
            number = skip_reasons.setdefault(r.reason, len(skip_reasons) + 1)
            note = f"see note {number}"
        table.add_row(r.case if r.case != previous else "", r.path, r.status, _fmt(r.median_ms, ".3f"),
                      _fmt(r.tflops, ".1f"), _fmt(r.ratio_cublas, ".2f"), _fmt(r.ratio_cusparselt, ".2f"),
                      note[:160], style=style, end_section=False)
        previous = r.case
    console.print(table)
    for reason, number in skip_reasons.items():
        console.print(f"[dim]note {number}: skipped because {escape(reason)}[/]")
    if outcome.failed:
        console.print(f"[bold red]{len(outcome.failed)} path(s) failed their check or errored[/]")


def write_json(outcome, path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(outcome.to_dict(), indent=2, default=str) + "\n")
    return path


def plot(outcome, path) -> Path:
    """Grouped bars: TFLOP/s of every timed path per case."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cases = list(dict.fromkeys(r.case for r in outcome.results))
    paths = list(dict.fromkeys(r.path for r in outcome.results))
    values = {(r.case, r.path): r.tflops for r in outcome.results}
    width = 0.8 / max(1, len(paths))
    fig, ax = plt.subplots(figsize=(max(8, 1.6 * len(cases)), 5))
    for i, p in enumerate(paths):
        xs = [c + (i - (len(paths) - 1) / 2) * width for c in range(len(cases))]
        ys = [values.get((case, p)) or 0.0 for case in cases]
        ax.bar(xs, ys, width, label=p)
    ax.set_xticks(range(len(cases)))
    ax.set_xticklabels([c.replace(" ", "\n", 2) for c in cases], fontsize=8)
    ax.set_ylabel("TFLOP/s (2*M*N*K, dense-equivalent)")
    smi = outcome.environment.get("nvidia_smi", {})
    ax.set_title(f"2:4 sparse and dense GEMM paths on {smi.get('name', outcome.environment.get('vulkan_device'))}")
    ax.legend(fontsize=8, ncol=2)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
