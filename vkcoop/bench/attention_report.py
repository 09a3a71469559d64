"""Printing ``vkcoop bench attention``: the rich table (skip reasons as numbered notes) and the plot.

JSON goes through :func:`vkcoop.bench.report.write_json`, like ``bench sparse``."""
from __future__ import annotations

import math
from pathlib import Path

from ..attention.tiles import CONFIG_GRAMMAR
from .attention_paths import VULKAN_PATH
from .report import setting
from .stats import UNSTEADY_NOTE

STYLES = {"ok": None, "skipped": "dim", "failed": "bold red", "error": "red"}
COLUMNS = (("case", "left"), ("path", "left"), ("status", "left"), ("ms", "right"), ("TFLOP/s", "right"),
           ("GB/s", "right"), ("x best torch", "right"), ("x ceiling", "right"), ("x bandwidth", "right"),
           ("x read floor", "right"), ("config / reason", "left"))


def _number(value, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def time_ms(value) -> str:
    """A time in ms with three decimals, and below 1 ms with four significant digits, so that decode's launches of
    10-50 µs keep theirs (0.01160, not 0.012)."""
    if value is None:
        return "-"
    if value >= 1 or value <= 0:
        return format(value, ".3f")
    return format(value, f".{min(6, 3 - math.floor(math.log10(value)))}f")


def table_rows(outcome) -> tuple[list[tuple], dict]:
    """(cells of each row, skip reason -> note number): what :func:`print_table` shows, as plain strings."""
    rows, notes, previous = [], {}, None
    for r in outcome.results:
        note = r.reason
        if r.status == "ok":
            note = f"{r.config} ({r.config_source})" if r.config_source else r.config
        if r.status == "skipped":   # one reason usually repeats for every case: number it once
            note = f"see note {notes.setdefault(r.reason, len(notes) + 1)}"
        timed = time_ms(r.median_ms) + (" *" if r.unsteady_ms else "")
        rows.append((r.case if r.case != previous else "", r.path, r.status, timed,
                     _number(r.tflops, ".1f"), _number(r.gbs, ".0f"), _number(r.ratio_best_torch, ".2f"),
                     _number(r.ratio_ceiling, ".2f"), _number(r.roofline, ".2f"), _number(r.read_floor, ".2f"),
                     note[:160]))
        previous = r.case
    return rows, notes


def print_table(outcome, console=None) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    if console is None:
        console = Console()
        if not console.is_terminal:   # logs and pipes: keep the columns
            console = Console(width=205)
    env = outcome.environment
    smi = env.get("nvidia_smi", {})
    table = Table(title=f"vkcoop bench attention: {env.get('vulkan_device') or env.get('cuda_device') or 'no GPU'}"
                        f" (driver {smi.get('driver_version', '?')}, SM clock {smi.get('clocks.sm', '?')})")
    for column, justify in COLUMNS:
        table.add_column(column, justify=justify, overflow="fold")
    rows, notes = table_rows(outcome)
    for cells, result in zip(rows, outcome.results):
        table.add_row(*(escape(c) for c in cells), style=STYLES.get(result.status))
    footer = [f"[dim]note {number}: skipped because {escape(reason)}[/]" for reason, number in notes.items()]
    over = env.get("ratios_over") or {}
    if setting(outcome, "flush_l2"):
        footer.append("[dim]--flush-l2: 256 MiB read before every timed run and every read floor: the L2 held none "
                      "of the inputs[/]")
    if over.get("bandwidth_gbs"):
        footer.append(f"[dim]x bandwidth: over {over['bandwidth_gbs']:,.0f} GB/s "
                      f"({escape(over.get('bandwidth_source', 'given'))})[/]")
    if env.get("read_floor_us"):
        footer.append("[dim]x read floor: one dispatch of a plain read of the case's K and V bytes, timed in this "
                      "process, over the path's time[/]")
    if env.get("read_floor_error"):
        footer.append(f"[yellow]the read floors could not be measured: {escape(env['read_floor_error'])}[/]")
    if over.get("ceiling_tflops"):
        footer.append(f"[dim]x ceiling: over {over['ceiling_tflops']:,.1f} TFLOP/s[/]")
    if env.get("ceilings_error"):
        footer.append(f"[yellow]the ceilings could not be measured: {escape(env['ceilings_error'])}[/]")
    if any(r.path == VULKAN_PATH and r.status == "ok" for r in outcome.results):
        footer.append("[dim]" + escape(f"{VULKAN_PATH} config: {CONFIG_GRAMMAR}; vkcoop inspect --attention "
                                       "KIND/DTYPE/HEAD_DIM/SEQ[c|n][bBATCH]/CONFIG shows its machine code; in "
                                       "brackets where it came from (the tuning cache, the device's seed, this run's "
                                       "tuning, the table's default or --tile)") + "[/]")
    if any(r.unsteady_ms for r in outcome.results):
        footer.append(f"[yellow]{UNSTEADY_NOTE}[/]")
    for message in env.get("tuning", {}).get("messages", []):
        footer.append(f"[yellow]{escape(message)}[/]")
    for stored in dict.fromkeys(env.get("tuning", {}).get("stored", [])):
        footer.append(f"[dim]tuned configurations stored in {escape(stored)}[/]")
    if outcome.failed:
        footer.append(f"[bold red]{len(outcome.failed)} path(s) failed their check or errored[/]")
    console.print(table, *footer, sep="\n")


def plot(outcome, path) -> Path:
    """Two panels: prefill TFLOP/s and decode GB/s, one bar per path and case."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [(kind, unit, [r for r in outcome.results if r.kind == kind]) for kind, unit in
              (("prefill", "tflops"), ("decode", "gbs"))]
    panels = [p for p in panels if p[2]]
    fig, axes = plt.subplots(len(panels), 1, figsize=(12, 4.5 * len(panels)), squeeze=False)
    for ax, (kind, unit, results) in zip(axes[:, 0], panels):
        cases = list(dict.fromkeys(r.case for r in results))
        names = list(dict.fromkeys(r.path for r in results))
        value = {(r.case, r.path): getattr(r, unit) or 0.0 for r in results}
        width = 0.8 / len(names)
        for i, name in enumerate(names):
            ax.bar([c + (i - (len(names) - 1) / 2) * width for c in range(len(cases))],
                   [value.get((case, name), 0.0) for case in cases], width, label=name)
        ax.set_xticks(range(len(cases)))
        ax.set_xticklabels([c.split(" ", 1)[1].replace(" q", "\nq", 1) for c in cases], fontsize=7)
        ax.set_ylabel("TFLOP/s (4·b·h·s_q·s_kv·d)" if unit == "tflops" else "GB/s of K and V")
        ax.set_title(f"attention {kind}")
        ax.legend(fontsize=8)
        ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        fig.savefig(target, dpi=120)
    finally:
        plt.close(fig)   # also when the write fails: pyplot keeps every open figure
    return target
