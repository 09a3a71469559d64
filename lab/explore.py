"""Tile exploration for the Vulkan GEMM kernels: how the seeds and experiments of docs/gemm.md were measured.

One process, many jobs, so every number of a sweep comes from the same device state (from the repository root)::

    python -m lab.explore --job dense/fp16/8192,8192,8192/128:128x128x64u8g4w2x5c,128:128x128x64u8g4c \\
                          --job sparse/fp16/8192,32,8192/64:32x32x128u2g1s2w4i4c,128:64x32x64u4g1s2w3t

A job is ``KERNEL/DTYPE/M,N,K/CONFIG[,CONFIG...]``; KERNEL is ``dense`` (fp32 accumulation), ``dense16`` (fp16->fp16,
fp16 accumulation), ``sparse`` (the 2:4 decode path), ``staged`` (the staged coopmat2 kernel, A and B through
shared memory, fp32 accumulation), ``staged24`` (the same with A in the 2:4 format, expanded on the way), ``khr``
(the subgroup-scope KHR shared-memory kernel, fp32 accumulation) or ``khr16`` (the same, fp16->fp16). A ``khr*``
configuration is a :meth:`vkcoop.gemm.tiles.SubgroupTile.code`, ``MxNxK:SMxSN[dSTAGES][gGROUP_M]`` (``d2``
double-buffers the shared tiles); any other configuration is a :class:`vkcoop.gemm.paths.VulkanConfig` label,
``INVOCATIONS:MxNxK[uUNROLL][gGROUP_M][sSPLIT_K][wPER_SM][x[TAIL_SPLIT]][iMETA_WORDS][c][t]``: ``w`` splits K to
fill that many workgroups per SM (the line shows the split it resolved to), ``x`` runs the partial last wave's tiles
as K slices (the direct dense kernel), ``i`` the interleaved 2:4 layout (sparse only), ``c`` column-major B, ``t``
the staged kernel. Each configuration is checked against the reference before it is timed, and the first
configuration of each job is timed again at its end (``repeat``), which exposes drift or a shared GPU. ``dense16``
accumulates in fp16, so, as the bench's fp16-accumulating path, it is checked bit for bit on
:attr:`vkcoop.gemm.GemmOperands.short_sums` (where fp16 sums are exact in any order) and timed on the job's
operands. Output: one line per configuration, and ``--json`` writes them all.
"""
from __future__ import annotations

import argparse
import json
import statistics
import time
from dataclasses import replace

from vkcoop import gemm
from vkcoop import sparse as sparse24
from vkcoop.gemm.configs import launch_kernel
from vkcoop.gemm.path import GemmOperands, GemmProblem
from vkcoop.gemm.paths import parse_config
from vkcoop.gemm.tiles import SUBGROUP_CODE, parse_subgroup_tile

KERNELS = ("dense", "dense16", "sparse", "staged", "staged24", "khr", "khr16")
COMPRESSED = ("sparse", "staged24")   # A bound in the 2:4 format
FP16_ACCUMULATING = ("dense16", "khr16")   # checked on the short sums, where fp16 sums are exact
#: The bench path whose bytes (vkcoop.bench.roofline.bytes_moved) each kernel moves; khr16 has no such path.
BENCH_PATHS = {"dense": "vk-coopmat2-dense", "staged": "vk-coopmat2-dense", "dense16": "vk-coopmat2-dense-fp16acc",
               "sparse": "vk-coopmat2-2:4", "staged24": "vk-coopmat2-2:4", "khr": "vk-khr-subgroup"}


def parse_job(text: str) -> tuple[str, str, tuple[int, int, int], list[str]]:
    try:
        kernel, dtype, shape, configs = text.split("/")
        m, n, k = (int(v) for v in shape.split(","))
    except ValueError:
        raise ValueError(f"job {text!r} is not KERNEL/DTYPE/M,N,K/CONFIG[,CONFIG...]") from None
    if kernel not in KERNELS:
        raise ValueError(f"job {text!r}: kernel must be one of {', '.join(KERNELS)}")
    if dtype not in gemm.DTYPES or (kernel in FP16_ACCUMULATING and dtype != "fp16"):
        raise ValueError(f"job {text!r}: dtype must be one of {', '.join(gemm.DTYPES)} (dense16, khr16: fp16)")
    labels = [c for c in configs.split(",") if c]
    for label in labels:
        if not kernel.startswith("khr"):
            parse_config(label)
        elif not SUBGROUP_CODE.fullmatch(label):
            raise ValueError(f"job {text!r}: KHR tile {label!r} is not MxNxK:SMxSN[dSTAGES][gGROUP_M]")
    if min(m, n, k) < 1 or k % sparse24.K_ALIGNMENT:
        # every job's operands are made once per shape, A pruned to 2:4 (GemmOperands.make)
        raise ValueError(f"job {text!r}: M, N and K must be positive and K a multiple of {sparse24.K_ALIGNMENT}")
    return kernel, dtype, (m, n, k), labels


def _types(kernel_kind, dtype):
    return "fp16->fp16" if kernel_kind in FP16_ACCUMULATING else gemm.accumulating_types(dtype)


def _kernel(device, flexible, kernel_kind, dtype, label, problem, sm_count):
    """(device GEMM, resolved label): a job's kind and a configuration's ``t`` pick the kernel through the bench
    paths' own rule."""
    if kernel_kind.startswith("khr"):
        tile = parse_subgroup_tile(label, device.physical.khr_shapes(), _types(kernel_kind, dtype))
        return (gemm.vulkan.KhrSharedMemoryGemm(device, _types(kernel_kind, dtype), tile, pad_to_tiles=True),
                tile.code())
    config = parse_config(label).for_problem(problem, sm_count)
    if kernel_kind.startswith("staged"):
        config = replace(config, staged=True)
    types = "fp16->fp16" if kernel_kind == "dense16" else None
    kernel = launch_kernel(config, dtype, sparse=kernel_kind in COMPRESSED, types=types)
    return gemm.vulkan.coopmat2_gemm(device, kernel, flexible=flexible), config.label()


def _bind(kernel, kernel_kind, operands: GemmOperands) -> None:
    b = kernel.kernel.store_b(operands.b)
    if kernel_kind in COMPRESSED:
        kernel.bind(operands.compressed.values, operands.compressed.metadata, b)
    else:
        kernel.bind(operands.pruned, b)


def _measure(device, flexible, kernel_kind, operands: GemmOperands, label, iters, warmup_seconds, sm_count):
    started = time.perf_counter()
    kernel, ran = _kernel(device, flexible, kernel_kind, operands.problem.dtype, label, operands.problem, sm_count)
    try:
        # fp16 accumulation rounds: it is checked where it must be exact, as the bench path is, and timed on the case
        checked = operands.short_sums if kernel_kind in FP16_ACCUMULATING else operands
        _bind(kernel, kernel_kind, checked)
        build_s = time.perf_counter() - started
        ok, _, why = gemm.check_output(kernel.result()[checked.rows], checked.reference, checked.tolerance)
        if checked is not operands:
            _bind(kernel, kernel_kind, operands)
        times = kernel.time(iters, 3, warmup_seconds=warmup_seconds)
    finally:
        kernel.close()
    return ok, why, statistics.median(times), min(times), build_s, ran


def _run_job(device, flexible, job, operands, args, records, sm_count):
    kernel_kind, dtype, (m, n, k), labels = job
    for index, label in enumerate(labels + labels[:1]):
        repeat = index == len(labels)
        record = {"kernel": kernel_kind, "dtype": dtype, "shape": [m, n, k], "config": label, "repeat": repeat}
        try:
            ok, why, median, fastest, build_s, ran = _measure(device, flexible, kernel_kind, operands, label,
                                                              args.iters, args.warmup_seconds, sm_count)
            record.update(ok=ok, reason=why, median_ms=median * 1e3, min_ms=fastest * 1e3,
                          tflops=2.0 * m * n * k / median / 1e12, build_s=build_s, ran=ran)
            shown = label if ran == label else f"{label} as {ran}"
            print(f"{kernel_kind:>7} {dtype} {m}x{n}x{k} {shown:>28}{' (repeat)' if repeat else '':9}: "
                  f"{median * 1e3:8.4f} ms {record['tflops']:7.1f} TFLOP/s "
                  f"check={'ok' if ok else why[:80]} build {build_s:.1f}s", flush=True)
        except Exception as error:  # noqa: BLE001 - report and go on to the next configuration
            record.update(ok=False, reason=f"{type(error).__name__}: {error}")
            print(f"{kernel_kind:>7} {dtype} {m}x{n}x{k} {label}: {type(error).__name__}: {str(error)[:200]}",
                  flush=True)
        records.append(record)
        if args.json_path:
            with open(args.json_path, "w") as handle:
                json.dump(records, handle, indent=1)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab.explore")
    parser.add_argument("--job", action="append", required=True, help="KERNEL/DTYPE/M,N,K/CONFIG[,CONFIG...]")
    parser.add_argument("--iters", type=int, default=10, help="timed runs per configuration (default 10)")
    parser.add_argument("--warmup-seconds", type=float, default=gemm.WARMUP_SECONDS,
                        help="minimum warm-up wall time before timing, for the GPU clocks (default %(default)s)")
    parser.add_argument("--json", dest="json_path", default=None, help="write every record to this file")
    args = parser.parse_args(argv)
    try:
        jobs = [parse_job(j) for j in args.job]   # all argument errors before any GPU work
    except ValueError as error:
        parser.error(str(error))
    from vkcoop import vk

    # the khr features bring subgroupSizeControl, which the KHR kernel asks for (32-wide subgroups)
    features = (gemm.features_for("sparse24", "fp16->fp16") + gemm.features_for("sparse24", "bf16->fp32")
                + gemm.features_for("khr", "fp16->fp32"))
    records, operands = [], None
    with vk.Device(features=list(dict.fromkeys(features))) as device:
        flexible = device.physical.flexible_shapes()
        sm_count = vk.sm_count(device.physical)   # resolves the split-K of "w" configurations
        for job in jobs:
            _, dtype, (m, n, k), _ = job
            problem = GemmProblem(dtype, "explore", m, n, k)
            if operands is None or operands.problem != problem:
                operands = GemmOperands.make(problem)   # one shape's inputs at a time
            _run_job(device, flexible, job, operands, args, records, sm_count)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
