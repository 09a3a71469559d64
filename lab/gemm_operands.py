"""How a Vulkan dense GEMM's speed depends on the values it multiplies, with the SM clock and board power.

A GEMM that streams its operands through L2 and shared memory can draw the board's power limit, and then the GPU
lowers its clock; how much depends on how many bits switch, so on the data. This times one configuration of the
dense coopmat2 kernel on several operand sets, one after another in one process (two rounds), and samples
``nvidia-smi`` meanwhile: the median SM clock, power and throttle reasons of each timing's last 0.6 s.
docs/gemm.md has the H100's figures.

    python -m lab.gemm_operands [--config 128:128x128x64u8g4w2x5c --size 8192 --dtype fp16 --json out.json]
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import tempfile
import time

import numpy as np

from vkcoop import gemm, vk
from vkcoop.gemm.configs import launch_kernel
from vkcoop.gemm.path import GemmOperands, GemmProblem
from vkcoop.gemm.paths import parse_config

QUERY = "timestamp,clocks.sm,power.draw.instant,clocks_event_reasons.active"


def operand_sets(operands: GemmOperands, seed: int = 5) -> dict:
    """name -> (A, B): the bench's operands and four others of the same shape and type."""
    m, k = operands.pruned.shape
    n = operands.b.shape[1]
    element = operands.pruned.dtype
    rng = np.random.default_rng(seed)
    return {"bench (eighths, A pruned 2:4)": (operands.pruned, operands.b),
            "zeros": (np.zeros((m, k), element), np.zeros((k, n), element)),
            "ones": (np.ones((m, k), element), np.ones((k, n), element)),
            "eighths, A dense": ((rng.integers(-8, 9, size=(m, k)) / 8).astype(element), operands.b),
            "normal, full mantissas": (rng.standard_normal((m, k), dtype=np.float32).astype(element),
                                       rng.standard_normal((k, n), dtype=np.float32).astype(element))}


def sampled(log_path: str, start: float, end: float) -> dict:
    """Medians of the nvidia-smi samples between two wall-clock times (seconds since the epoch)."""
    rows = []
    with open(log_path) as handle:
        for line in handle:
            fields = [f.strip() for f in line.split(",")]
            try:
                stamp = time.mktime(time.strptime(fields[0][:19], "%Y/%m/%d %H:%M:%S")) + float(fields[0][19:] or 0)
                rows.append((stamp, float(fields[1].split()[0]), float(fields[2].split()[0]), fields[3]))
            except (ValueError, IndexError):
                continue   # the header, or a field the driver does not report
    window = [r for r in rows if start <= r[0] <= end]
    if not window:
        return {}
    return {"sm_mhz": statistics.median(r[1] for r in window), "power_w": statistics.median(r[2] for r in window),
            "throttle_reasons": sorted({r[3] for r in window})}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="128:128x128x64u8g4w2x5c")
    parser.add_argument("--size", type=int, default=8192, help="M = N = K")
    parser.add_argument("--dtype", default="fp16", choices=sorted(gemm.DTYPES))
    parser.add_argument("--iters", type=int, default=200)
    parser.add_argument("--json", dest="json_path")
    args = parser.parse_args()
    problem = GemmProblem(args.dtype, "operands", args.size, args.size, args.size)
    sets = operand_sets(GemmOperands.make(problem))
    log = tempfile.NamedTemporaryFile("w", suffix=".csv", delete=False)
    try:
        smi = subprocess.Popen(["nvidia-smi", f"--query-gpu={QUERY}", "--format=csv,noheader", "-lms", "20"],
                               stdout=log, stderr=subprocess.DEVNULL)
    except FileNotFoundError:
        smi = None   # timings without clocks
    records = []
    features = gemm.features_for("coopmat2", gemm.accumulating_types(args.dtype))
    try:
        with vk.Device(features=features) as device:
            config = parse_config(args.config).for_problem(problem, vk.sm_count(device.physical))
            kernel = gemm.vulkan.coopmat2_gemm(device, launch_kernel(config, args.dtype, sparse=False),
                                               flexible=device.physical.flexible_shapes())
            try:
                for round_index in range(2):
                    for name, (a, b) in sets.items():
                        kernel.bind(a, kernel.kernel.store_b(b))
                        started = time.time()
                        median = statistics.median(kernel.time(args.iters, 3, warmup_seconds=2.0))
                        record = {"round": round_index, "operands": name, "median_ms": median * 1e3,
                                  "tflops": 2 * args.size ** 3 / median / 1e12}
                        time.sleep(0.2)   # the sampler's last lines
                        record.update(sampled(log.name, time.time() - 0.8, time.time() - 0.2)
                                      if smi and smi.poll() is None else {})
                        records.append(record)
                        clocks = (f"SM {record['sm_mhz']:.0f} MHz  {record['power_w']:.0f} W  "
                                  f"{' '.join(record['throttle_reasons'])}" if "sm_mhz" in record else "no clocks")
                        print(f"round {round_index} {name:30s} {record['median_ms']:8.4f} ms {record['tflops']:6.1f} "
                              f"TFLOP/s  {clocks}  ({time.time() - started:.1f} s)", flush=True)
                        time.sleep(1.0)
            finally:
                kernel.close()
    finally:
        if smi:
            smi.terminate()
    if args.json_path:
        with open(args.json_path, "w") as handle:
            json.dump({"config": args.config, "size": args.size, "dtype": args.dtype, "records": records}, handle,
                      indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
