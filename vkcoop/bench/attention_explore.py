"""Configuration exploration for flash_attention.comp (how docs/attention.md's experiment table was measured).

One process, many jobs, so every number of a sweep comes from the same device state::

    python -m vkcoop.bench.attention_explore --job decode/fp16/128/32768/128:64x64,64:16x128s32g \\
                                             --job prefill/fp16/128/4096c/128:64x64,256:128x64

A job is ``KIND/DTYPE/HEAD_DIM/SEQ[c]/CONFIG[,CONFIG...]``: the case of ``vkcoop bench attention`` with that kind,
dtype, head dim and sequence length (``c``: causal; decode is never causal), and configurations as
:class:`vkcoop.attention.AttentionConfig` labels (``INVOCATIONS:BRxBC[sSPLITS][g|n][wSTATS_COLS][q][v][f|m][r][k|u]``;
without ``s`` the key splits are chosen for ``--target-workgroups``, without ``g``/``n`` the GQA row stacking is chosen
by the kernel's rule, without ``w`` m and l are as narrow as the table allows, without ``k``/``u`` K and V are staged
through the shader's own shared memory by the kernel's rule; ``f`` merges the key slices in the same dispatch). Each
configuration is checked against the float64 reference on sampled rows before it is timed (after the benchmark's
warm-up, :data:`vkcoop.bench.attention.WARMUP_SECONDS`), and the first configuration of each job is timed again at its
end (``repeat``), which exposes drift. Output: one line per configuration, and ``--json`` writes them all.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import statistics

from ..attention import VulkanAttention, attention_features
from ..attention.vulkan import device_target_workgroups
from ..attention.tiles import parse_attention_config
from .attention import check_planes, make_cases, make_inputs, measure


def parse_job(text: str):
    """(case, [AttentionConfig]); ValueError naming the job for anything malformed."""
    try:
        kind, dtype, head_dim, seq, configs = text.split("/")
        causal = seq.endswith("c")
        d, s = int(head_dim), int(seq.rstrip("c"))
    except ValueError:
        raise ValueError(f"job {text!r} is not KIND/DTYPE/HEAD_DIM/SEQ[c]/CONFIG[,CONFIG...]") from None
    if causal and kind == "decode":
        raise ValueError(f"job {text!r}: decode is not causal")
    try:   # the bench's own case, so the explored shapes are the benchmarked ones
        (case,) = make_cases([kind], [dtype], [d], [s], [s], [causal])
    except ValueError as error:
        raise ValueError(f"job {text!r}: {error}") from None
    labels = [c for c in configs.split(",") if c]
    if not labels:
        raise ValueError(f"job {text!r} names no configuration")
    return case, [parse_attention_config(c) for c in labels]


class _ConfigPath:
    """One configuration as a path of ``vkcoop.bench.attention.measure``."""
    name = "vk-coopmat2"

    def __init__(self, device, flexible, choice, target_workgroups, each_pass=False):
        self.device, self.flexible, self.choice, self.target = device, flexible, choice, target_workgroups
        self.label, self.runner = choice.label(), None
        self.each_pass, self.pass_ms = each_pass, None

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
        return self

    def rows(self, b, h, rows):
        return self.runner.result()[b, h, rows]

    def time(self, iters, warmup, warmup_seconds):
        times = self.runner.time(iters, warmup, warmup_seconds=warmup_seconds)
        if self.each_pass:
            self.pass_ms = [statistics.median(t) * 1e3 for t in self.runner.dispatch_times(iters, warmup)]
        return times

    def release(self):
        if self.runner is not None:
            self.runner.close()
            self.runner = None


def run_job(device, flexible, case, configs, args, records) -> None:
    inputs = make_inputs(case)
    planes, tolerance = check_planes(case, inputs)
    for index, config in enumerate(configs + configs[:1]):
        path = _ConfigPath(device, flexible, config, args.target_workgroups, args.pass_times)
        try:
            result = measure(path, case, inputs, planes, tolerance, args.iters, args.warmup)
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
        records.append(record)
        if args.json_path:
            with open(args.json_path, "w") as handle:
                json.dump(records, handle, indent=1, default=str)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m vkcoop.bench.attention_explore")
    parser.add_argument("--job", action="append", required=True,
                        help="KIND/DTYPE/HEAD_DIM/SEQ[c]/CONFIG[,CONFIG...]")
    parser.add_argument("--iters", type=int, default=20, help="timed runs per configuration (default 20)")
    parser.add_argument("--warmup", type=int, default=5, help="untimed runs first (default 5)")
    parser.add_argument("--target-workgroups", type=int, default=None,
                        help="workgroups the automatic key split aims at (default: as bench attention, "
                             "4 per SM of the device)")
    parser.add_argument("--pass-times", action="store_true",
                        help="also time each pass of a launch on its own (the key-split pass and the combine)")
    parser.add_argument("--json", dest="json_path", default=None, help="write every record to this file")
    args = parser.parse_args(argv)
    try:
        jobs = [parse_job(j) for j in args.job]   # every argument error before any GPU work
    except ValueError as error:   # AttentionInputError too
        parser.exit(2, f"attention_explore: {error}\n")
    from .. import vk
    from ..attention import EXTENSIONS

    dtypes = sorted({case.dtype for case, _ in jobs})
    records: list = []
    try:
        device = vk.Device(extensions=EXTENSIONS, features=attention_features(dtypes))
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
