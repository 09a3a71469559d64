"""Configuration exploration for flash_attention.comp (how docs/attention.md's experiments table was measured).

One process, many jobs, so every number of a sweep comes from the same device state; from the repository's root::

    python -m lab.attention_explore --job decode/fp16/128/32768/128:64x64,64:16x128s32g \\
                                    --job prefill/fp16/128/4096c/128:64x64,256:128x64

A job (:func:`vkcoop.attention.parse_job`) is ``KIND/DTYPE/HEAD_DIM/SEQ[c|n][bBATCH]/CONFIG[,CONFIG...]``: the case of
``vkcoop bench attention`` with that kind, dtype, head dim and sequence length (``c``: causal; decode is never causal;
decode has GQA unless ``n``, 32 q heads on 8 kv heads or on 32; ``bBATCH``: decode at that batch, as
``--decode-batch``), and configurations as :class:`vkcoop.attention.AttentionConfig` labels
(``INVOCATIONS:BRxBC[sSPLITS][g|n][wSTATS_COLS][cORDER_CHUNK][tORDER_TAIL][m][r][k|u]``; without ``s`` the key
splits are chosen for ``--target-workgroups``, without ``g``/``n`` the GQA row stacking is chosen by the kernel's rule,
without ``w`` m and l are as narrow as the table allows, without ``k``/``u`` K and V are staged through the shader's
own shared memory by the kernel's rule; ``m`` merges the key slices in the same dispatch; ``r`` is FlashAttention-2's
split; without ``c``/``t`` a causal launch orders its query tiles in the chunks of (head, batch) pairs of
:func:`vkcoop.attention.kernel.causal_order`).
Each configuration is checked against the float64 reference on sampled rows before it is timed (after the benchmark's
warm-up for its kind, :func:`vkcoop.bench.attention_settings.warmup_seconds_for`), and the first configuration of each
job is timed again at its end (``repeat``), which exposes drift. Output: one line per configuration, and ``--json``
writes them all.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import re
import statistics
from pathlib import Path

from vkcoop.attention import JOB_GRAMMAR, VulkanAttention, attention_features, parse_job
from vkcoop.attention.vulkan import device_target_workgroups
from vkcoop.bench.attention import check_planes, make_inputs, measure
from vkcoop.bench.attention_settings import warmup_seconds_for

from . import attention_trace


class _ConfigPath:
    """One configuration as a path of ``vkcoop.bench.attention.measure``; with ``trace_dir``, after its timing, one
    launch's timeline (:mod:`lab.attention_trace`) written there as a plot and JSON."""
    name = "vk-coopmat2"

    def __init__(self, device, flexible, choice, target_workgroups, each_pass=False, trace_dir=None):
        self.device, self.flexible, self.choice, self.target = device, flexible, choice, target_workgroups
        self.label, self.runner, self.inputs, self.case = choice.label(), None, None, None
        self.each_pass, self.pass_ms = each_pass, None
        self.trace_dir, self.trace_lines = trace_dir, []

    @property
    def config(self) -> str:
        """The configuration as launched: splits and GQA rows resolved."""
        return self.label

    def bind(self, case, inputs):
        self.runner = VulkanAttention.from_config(self.device, case.dtype, case.shape, self.choice,
                                                  causal=case.causal, target_workgroups=self.target,
                                                  flexible=self.flexible)
        self.runner.bind(*inputs)
        self.label = self.runner.config().label()
        self.inputs, self.case = inputs, case
        return self

    def rows(self, b, h, rows):
        return self.runner.result()[b, h, rows]

    def time(self, iters, warmup, warmup_seconds):
        times = self.runner.time(iters, warmup, warmup_seconds=warmup_seconds)
        if self.each_pass:
            self.pass_ms = [statistics.median(t) * 1e3 for t in self.runner.dispatch_times(iters, warmup)]
        if self.trace_dir:
            self._trace()
        return times

    def _trace(self):
        timeline = attention_trace.trace_runner(self.runner, self.inputs)
        timeline.label = f"{self.case.label} {self.label}"
        name = re.sub(r"[^A-Za-z0-9._-]+", "_", f"trace {self.case.label} {self.label}")   # no ':' or '/'
        stem = Path(self.trace_dir) / name
        attention_trace.plot_timeline(timeline, stem.with_suffix(".png"))
        stem.with_suffix(".json").write_text(json.dumps({"label": timeline.label, "span_us": timeline.span_us,
                                                         "percentiles": list(attention_trace.PERCENTILES),
                                                         "rows": dict(timeline.rows())}, indent=1))
        self.trace_lines = timeline.lines()

    def release(self):
        if self.runner is not None:
            self.runner.close()
            self.runner = None


def run_job(device, flexible, case, configs, args, records) -> None:
    inputs = make_inputs(case)
    planes, tolerance = check_planes(case, inputs)
    for index, config in enumerate(configs + configs[:1]):
        trace_dir = args.trace_dir if index < len(configs) else None   # the repeat is timed, not traced again
        path = _ConfigPath(device, flexible, config, args.target_workgroups, args.pass_times, trace_dir)
        try:
            result = measure(path, case, inputs, planes, tolerance, args.iters, args.warmup,
                             warmup_seconds_for(case.kind))
            record = {**dataclasses.asdict(result), "repeat": index == len(configs), "pass_ms": path.pass_ms}
        except Exception as error:  # noqa: BLE001 - report and go on with the next configuration
            record = {"case": case.label, "config": config.label(), "status": "error",
                      "reason": f"{type(error).__name__}: {error}", "repeat": index == len(configs)}
        finally:
            path.release()
        figure = (f"{record.get('median_ms') or 0:8.4f} ms {record.get('tflops') or 0:7.1f} TFLOP/s "
                  f"{record.get('gbs') or 0:7.0f} GB/s" if record["status"] == "ok" else record.get("reason", "")[:160])
        if record.get("pass_ms"):
            figure += " (passes alone: " + " + ".join(f"{ms:.4f}" for ms in record["pass_ms"]) + " ms)"
        print(f"{case.label:>44} {record['config']:>18}{' (repeat)' if record['repeat'] else '':9} "
              f"{record['status']:>6}: {figure}", flush=True)
        for line in path.trace_lines:
            print(line, flush=True)
        records.append(record)
        if args.json_path:
            with open(args.json_path, "w") as handle:
                json.dump(records, handle, indent=1, default=str)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab.attention_explore")
    parser.add_argument("--job", action="append", required=True, help=JOB_GRAMMAR)
    parser.add_argument("--iters", type=int, default=20, help="timed runs per configuration (default 20)")
    parser.add_argument("--warmup", type=int, default=5, help="untimed runs first (default 5)")
    parser.add_argument("--target-workgroups", type=int, default=None,
                        help="workgroups the automatic key split aims at (default: as bench attention, "
                             "4 per SM of the device)")
    parser.add_argument("--pass-times", action="store_true",
                        help="also time each pass of a launch on its own (the key-split pass and the combine)")
    parser.add_argument("--json", dest="json_path", default=None, help="write every record to this file")
    parser.add_argument("--trace", dest="trace_dir", default=None,
                        help="after each configuration's timing, trace one launch (device clock per workgroup: "
                             "VK_KHR_shader_clock, VK_NV_shader_sm_builtins) and write its plot and JSON here")
    args = parser.parse_args(argv)
    try:
        jobs = [parse_job(j) for j in args.job]   # every argument error before any GPU work
    except ValueError as error:   # AttentionInputError too
        parser.exit(2, f"attention_explore: {error}\n")
    from vkcoop import vk
    from vkcoop.attention import EXTENSIONS

    dtypes = sorted({case.dtype for case, _ in jobs})
    records: list = []
    extensions, features = list(EXTENSIONS), list(attention_features(dtypes))
    if args.trace_dir:
        Path(args.trace_dir).mkdir(parents=True, exist_ok=True)
        extensions += attention_trace.TRACE_EXTENSIONS
        features += attention_trace.TRACE_FEATURES
    try:
        device = vk.Device(extensions=extensions, features=features)
    except vk.VulkanError as error:
        parser.exit(3, f"attention_explore: {str(error).splitlines()[0]}\n")
    with device:
        flexible = device.physical.flexible_shapes()
        # the key split aims where bench attention's does: WORKGROUPS_PER_SM per SM of this device
        args.target_workgroups = args.target_workgroups or device_target_workgroups(device.physical)
        for case, configs in jobs:
            run_job(device, flexible, case, configs, args, records)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
