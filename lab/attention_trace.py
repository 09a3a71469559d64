"""Where one attention launch spends its time, workgroup by workgroup: ``lab/shaders/flash_attention_trace.comp``
(the product's kernel with its trace points defined) writes the device's realtime clock (VK_KHR_shader_clock) at a
few points of every workgroup, and its SM (VK_NV_shader_sm_builtins). ``python -m lab.attention_explore --trace DIR``
records one timeline per configuration, of the last of 20 launches run back to back as the benchmarks time them;
docs/attention.md reads them.

Events (trace[workgroup][event], workgroups numbered x fastest, then y, then z, as the shader numbers them):
a key slice records its start, the end of its first key block, the end of its key loop and the moment its partials
are stored and counted; a merger (SPLIT_MERGE=WAIT) its start, the end of its wait and the end of its merge. Each
point follows a workgroup barrier, so the workgroup's earlier instructions have issued. Times are in microseconds
from the first workgroup's start; an event a workgroup never reaches (an empty slice has no first block) is NaN.
"""
from __future__ import annotations

import dataclasses
import os
import statistics
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from vkcoop.paths import shader_root

#: what a traced launch needs from the device, besides the attention kernel's own extensions and features
TRACE_EXTENSIONS = ("VK_KHR_shader_clock", "VK_NV_shader_sm_builtins")
TRACE_FEATURES = ("shaderDeviceClock", "shaderSMBuiltins")
EVENTS = 4                                       # clock readings per workgroup; one more uvec2 holds its SM
SLICE_EVENTS = ("start", "first block done", "key loop done", "counted")
MERGER_EVENTS = ("start", "wait over", "merged")
STREAM_LAUNCHES = 20                             # launches back to back per traced run, as bench attention times
PERCENTILES = (0, 10, 50, 90, 100)
_LATEST_US = 1e5                                 # a reading further than this from the first start was not written
TRACE_SHADER = Path(__file__).resolve().parent / "shaders" / "flash_attention_trace.comp"


def trace_shader() -> str:
    """The trace shader as a dispatch names a shader: relative to the product's shader folder (a checkout's)."""
    return os.path.relpath(TRACE_SHADER, shader_root())


def traced_launch(launch):
    """``launch`` with its flash-attention dispatch (the first) running the trace shader, with the same defines, and
    given a "trace" buffer, bound after its own; other dispatches (a combine pass) as they were."""
    flash = launch.dispatches[0]
    x, y, z = flash.groups
    traced = dataclasses.replace(flash, shader=trace_shader(), buffers=flash.buffers + ("trace",))
    outputs = {**launch.outputs, "trace": ((x * y * z * (EVENTS + 1) * 2,), np.dtype(np.uint32))}
    return dataclasses.replace(launch, dispatches=[traced, *launch.dispatches[1:]], outputs=outputs)


@dataclass
class Timeline:
    """One traced launch: ``times_us[workgroup][event]``, whether each workgroup is a ``merger``, its ``sm``, and
    ``tile_xy`` (the (x, y) tile whose keys it reads or merges)."""
    label: str
    times_us: np.ndarray
    merger: np.ndarray
    sm: np.ndarray
    tile_xy: np.ndarray

    @property
    def end_us(self) -> np.ndarray:
        """When each workgroup's last event was recorded."""
        return np.where(self.merger, self.times_us[:, 2], self.times_us[:, 3])

    @property
    def span_us(self) -> float:
        return float(np.nanmax(self.end_us))

    def rows(self) -> list[tuple[str, list[float]]]:
        """(what, its PERCENTILES over the workgroups it applies to): each event of the slices and of the mergers,
        and the phases between them."""
        t, s, m = self.times_us, ~self.merger, self.merger
        rows = [(f"slice {name}", t[s, i]) for i, name in enumerate(SLICE_EVENTS)]
        rows += [("slice first block (duration)", t[s, 1] - t[s, 0]),
                 ("slice key loop (duration)", t[s, 2] - t[s, 0]),
                 ("slice store and count (duration)", t[s, 3] - t[s, 2])]
        if m.any():
            rows += [(f"merger {name}", t[m, i]) for i, name in enumerate(MERGER_EVENTS)]
            rows += [("merger merge (duration)", t[m, 2] - t[m, 1])]
        return [(name, _percentiles(values)) for name, values in rows]

    def lines(self) -> list[str]:
        head = (f"{self.label}: {len(self.merger)} workgroups ({int(self.merger.sum())} mergers) on "
                f"{len(set(self.sm.tolist()))} SMs, {self.span_us:.2f} us from the first start to the last end")
        table = [f"  {'us from the first start, percentiles ' + '/'.join(map(str, PERCENTILES)):58}"]
        table += [f"  {name:56}" + " ".join(f"{v:7.2f}" for v in values) for name, values in self.rows()]
        return [head, *table]


def _percentiles(values: np.ndarray) -> list[float]:
    values = values[~np.isnan(values)]
    return [float(np.percentile(values, p)) for p in PERCENTILES] if values.size else [float("nan")] * 5


def parse_trace(words: np.ndarray, groups: tuple, slice_layers: int, label: str = "") -> Timeline:
    """The trace buffer of a launch of ``groups`` workgroups whose z below ``slice_layers`` are key slices (batch *
    KV_SPLITS; the rest are mergers)."""
    x, y, z = groups
    count = x * y * z
    pairs = np.asarray(words, dtype=np.uint32)[:count * (EVENTS + 1) * 2].reshape(count, EVENTS + 1, 2)
    clock = (pairs[:, :EVENTS, 1].astype(np.uint64) << np.uint64(32)) | pairs[:, :EVENTS, 0].astype(np.uint64)
    first = clock[:, 0].min()
    times = (clock.astype(np.int64) - np.int64(first)) / 1000.0
    times[(times < 0) | (times > _LATEST_US)] = np.nan
    index = np.arange(count)
    return Timeline(label, times, index // (x * y) >= slice_layers, pairs[:, EVENTS, 0].astype(int),
                    index % (x * y))


def trace_runner(runner, inputs, runs: int = 7, stream: int | None = STREAM_LAUNCHES) -> Timeline:
    """Bind ``runner``'s launch on ``inputs`` traced (:func:`traced_launch`), run it ``runs`` times and keep the run
    whose span is the median. With ``stream`` each run is that many launches back to back, as the benchmarks time
    them, and the last one's stamps are kept; with None each run is one submission, a launch that starts from an idle
    device (on the H100 its first key block takes 2-3x as long: docs/attention.md, experiments table)."""
    kernel = runner.kernel
    launch = traced_launch(kernel.launch(*inputs))
    runner.bind_launch(launch)
    groups = launch.dispatches[0].groups
    slices = len(inputs[0]) * kernel.kv_splits
    timelines = []
    for _ in range(runs):
        if stream:
            runner.time(stream, 1, warmup_seconds=0.0)
        else:
            runner.result()
        timelines.append(parse_trace(runner.bound_buffer("trace").read(), groups, slices))
    spans = [t.span_us for t in timelines]
    return timelines[spans.index(statistics.median_low(spans))]


def plot_timeline(timeline: Timeline, path) -> None:
    """One line per workgroup, sorted by SM then start: a slice's first block, later blocks and its store and count;
    a merger's wait and its merge."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    t = timeline.times_us
    order = np.lexsort((np.nan_to_num(t[:, 0]), timeline.sm))
    fig, ax = plt.subplots(figsize=(12, 8))
    phases = {False: ((0, 1, "tab:orange"), (1, 2, "tab:blue"), (2, 3, "tab:green")),
              True: ((0, 1, "0.7"), (1, 2, "tab:red"))}
    for row, i in enumerate(order):
        for start, end, color in phases[bool(timeline.merger[i])]:
            ax.plot([t[i, start], t[i, end]], [row, row], color=color, lw=0.7)
    ax.set_xlabel("us from the first workgroup's start")
    ax.set_ylabel("workgroups, by SM, then start")
    ax.set_title(f"{timeline.label}\nslices: first block (orange), later blocks (blue), partials stored and counted "
                 "(green); mergers: wait (grey), merge (red)", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
