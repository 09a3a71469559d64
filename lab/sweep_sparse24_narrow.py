"""The narrow 2:4 sweep: the staged 2:4 kernel on the tile-major layout (``tp``: pattern codes, ``tn``: PTX nibbles;
vkcoop.gemm.tile_major) against the 2:4 path's seed and Vulkan dense, at the skinny shapes of LLM decode (M x N x K
with N = 16, 32, 64), in one process on the GPU host (from the repository root, after ``source scripts/gpu_env.sh``)::

    python3 -m lab.sweep_sparse24_narrow --out "$OUT"

Each configuration runs through the bench's own paths (``vk-coopmat2-dense``, ``vk-coopmat2-2:4``): checked against
the exact reference, then timed after an L2 flush (``bench sparse --flush-l2``'s). Per shape: the dense and the 2:4
path's configurations as ``bench sparse`` runs them without ``--tune``, then the tile-major ones (``--configs``
replaces a width's list). The summary takes the fastest workspace-free 2:4 configuration per shape (what
``vk-coopmat2-2:4`` would report) over ``vk-coopmat2-dense`` and holds it to the target: a geometric mean of at least
1.4x over the shapes of 8192 rows and more, none of them below 1.2x, and at least 1.1x at 4096 rows. Then
``vkcoop inspect --gemm 2:4 --shape llm --config LABEL`` (child processes; ``--inspect best`` the seed and the fastest
tile-major configuration per width, ``all``, or ``none``) gives each kernel's K loop: instructions per HMMA and its
mix. Writes ``sweep_sparse24_narrow.json`` (and the inspect reports) into ``--out``.

Exit status: 0; 1 when a configuration failed its check; 2 bad arguments (before any GPU work); 3 no Vulkan device
with VK_NV_cooperative_matrix2.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from rich.console import Console
from rich.table import Table

from vkcoop import gemm
from vkcoop.bench.stats import spread_ms
from vkcoop.gemm.configs import launch_kernel, parse_config
from vkcoop.gemm.path import GemmOperands, GemmProblem, check_and_time

#: The skinny shapes: (M, K) pairs of LLM projections, each at N = 16, 32 and 64 tokens.
ROWS_AND_DEPTHS = ((8192, 8192), (14336, 4096), (4096, 4096))
WIDTHS = (16, 32, 64)
#: The tile-major configurations per width: the seed's tile with each code, a deeper ring, a deeper K step, a
#: 64-invocation tile with more workgroups an SM, or (N = 32) a 128-row tile, which won at 14336x32x4096 and lost at
#: 8192 and 4096 rows. 128-row tiles at N = 64 lost 30-80 % (docs/gemm.md G55). At N = 64 the seed's loop holds
#: 194 registers, room for two workgroups an SM, so its w3 grid (sized for three) needs two waves: 79.5 against 61.0
#: µs at 8192 rows; a ring of three sets (u3) still holds 170 and lost (G56).
TILE_MAJOR_CONFIGS = {
    16: ("128:64x16x64u4g1w4tp", "128:64x16x64u4g1w4tn", "128:64x16x64u8g1w3tp", "128:32x16x128u4g1w4tp",
         "64:32x16x64u6g1w6tp"),
    32: ("128:64x32x64u4g1w3tp", "128:64x32x64u4g1w3tn", "128:64x32x64u8g1w3tp", "128:32x32x128u4g1w4tp",
         "64:32x32x64u6g1w6tp", "128:128x32x32u8g1w1tp", "128:128x32x32u8g1w2tp"),
    64: ("128:64x64x64u4g1w2tp", "128:64x64x64u4g1w2tn", "128:64x64x64u8g1w2tp", "64:32x64x64u4g1w4tp"),
}
#: The target: 2:4 over dense, geometric mean over the shapes of at least LARGE_ROWS rows, the least of them, and
#: each shape below that.
TARGET_GEOMEAN, TARGET_LEAST, TARGET_SMALL, LARGE_ROWS = 1.4, 1.2, 1.1, 8192
DENSE, SPARSE = "vk-coopmat2-dense", "vk-coopmat2-2:4"
RESULTS = "sweep_sparse24_narrow.json"
INSPECT_WORKERS = 3   # vkcoop inspect children at once (each builds one pipeline in its own driver cache)


def parse_shapes(text: str) -> list[tuple[int, int, int]]:
    shapes = []
    for item in text.split(","):
        parts = item.strip().lower().split("x")
        if len(parts) != 3 or not all(p.isdigit() and int(p) > 0 for p in parts):
            raise ValueError(f"--shapes {item!r}: write MxNxK, e.g. 8192x16x8192")
        m, n, k = (int(p) for p in parts)
        if k % 32:
            raise ValueError(f"--shapes {item!r}: K must be a multiple of 32 (the 2:4 format's metadata words)")
        shapes.append((m, n, k))
    return shapes


def parse_configs(items, dtype: str) -> dict[int, tuple[str, ...]]:
    """``N=LABEL[,LABEL...]`` items over the default lists; each label must run the tile-major kernel."""
    configs = dict(TILE_MAJOR_CONFIGS)
    for item in items or ():
        width, sep, labels = item.partition("=")
        if not sep or not width.strip().isdigit():
            raise ValueError(f"--configs {item!r}: write N=LABEL[,LABEL...], e.g. 16=128:64x16x64u4g1w4tp")
        configs[int(width)] = tuple(label.strip() for label in labels.split(",") if label.strip())
    for labels in configs.values():
        for label in labels:
            config = parse_config(label)
            if not config.tile_major:
                raise ValueError(f"--configs {label}: not a tile-major configuration (tp or tn at its end)")
            launch_kernel(config, dtype, sparse=True)   # refuses a tile the layout cannot take, in one line
    return configs


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m lab.sweep_sparse24_narrow", description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.environ.get("OUT", "."), help="folder of the JSON (default $OUT, else .)")
    parser.add_argument("--dtype", default="fp16", choices=("fp16", "bf16"))
    parser.add_argument("--shapes", default=None, help="MxNxK[,...] (default: 8192xNx8192, 14336xNx4096, "
                                                       "4096xNx4096 for N = 16, 32, 64)")
    parser.add_argument("--configs", action="append", help="N=LABEL[,LABEL...]: the tile-major configurations of "
                                                           "width N (repeatable)")
    parser.add_argument("--iters", type=int, default=20, help="timed runs per configuration (default 20)")
    parser.add_argument("--no-flush-l2", dest="flush_l2", action="store_false", help="time without the L2 flush")
    parser.add_argument("--inspect", default="best", choices=("best", "all", "none"),
                        help="which kernels' K loops vkcoop inspect counts (default: the seeds and the best)")
    parser.add_argument("--budget-s", type=float, default=170.0,
                        help="start no new shape after this many seconds of sweeping (default 170)")
    args = parser.parse_args(argv)
    try:
        args.shape_list = parse_shapes(args.shapes) if args.shapes else [
            (m, n, k) for m, k in ROWS_AND_DEPTHS for n in WIDTHS]
        args.config_lists = parse_configs(args.configs, args.dtype)
        missing = sorted({n for _, n, _ in args.shape_list} - set(args.config_lists))
        if missing:
            raise ValueError(f"--shapes: no tile-major configurations for N={missing[0]}; give them with --configs")
    except (ValueError, gemm.GemmInputError) as error:
        parser.error(str(error).splitlines()[0])
    if args.iters < 3:
        parser.error("--iters: at least 3")
    return args


def measure(path, operands: GemmOperands, config, role: str, args) -> dict:
    """One configuration checked, then timed, as ``bench sparse`` measures it: a record."""
    problem = operands.problem
    record = {"shape": [problem.m, problem.n, problem.k], "role": role, "path": path.name, "config": config.label()}
    try:
        bound = path.bind(operands, config)
    except Exception as error:  # noqa: BLE001 - a configuration the device refuses is a result, not the end
        return {**record, "ok": False, "reason": f"{type(error).__name__}: {error}".splitlines()[0]}
    try:
        entry, result = check_and_time(bound, operands, args.iters, 3, args.flush_l2)
    except Exception as error:  # noqa: BLE001 - as above: recorded, and the sweep goes on
        entry, result = {"reason": f"{type(error).__name__}: {error}".splitlines()[0]}, None
    finally:
        bound.release()
    record.update(ran=bound.config, ok=result is not None)
    if result is None:
        return {**record, "reason": entry.get("reason", "")}
    spread = spread_ms(result[3])
    return {**record, "median_us": spread["median_ms"] * 1e3, "p10_us": spread["p10_ms"] * 1e3,
            "p90_us": spread["p90_ms"] * 1e3, "tflops": problem.flops / (spread["median_ms"] * 1e-3) / 1e12}


def shape_jobs(paths: dict, shape, args) -> list[tuple]:
    """(path, configuration, role) of one shape: dense and the 2:4 path as bench sparse runs them without --tune,
    then the tile-major configurations of its width."""
    m, n, k = shape
    problem = GemmProblem(args.dtype, "llm", m, n, k)
    jobs = [(paths[DENSE], paths[DENSE].configs(problem, False)[0], "dense"),
            (paths[SPARSE], paths[SPARSE].configs(problem, False)[0], "2:4 seed")]
    return jobs + [(paths[SPARSE], parse_config(label), "tile-major") for label in args.config_lists[n]]


def create_kernels(plan: dict, args) -> float:
    """Every kernel of the sweep created up front on several threads (the driver compiles them concurrently), as
    bench sparse does; seconds taken."""
    from vkcoop import vk
    makers = {}
    for (m, n, k), jobs in plan.items():
        problem = GemmProblem(args.dtype, "llm", m, n, k)
        for path, config, _ in jobs:
            resolved = path._for_problem(config, problem)
            makers[(path.name, resolved)] = lambda path=path, resolved=resolved: path.kernel(args.dtype, resolved)
    started = time.perf_counter()
    vk.create_concurrently(makers.values())   # a kernel that fails is reported by its measurement
    return time.perf_counter() - started


def sweep_shape(shape, jobs, args) -> list[dict]:
    m, n, k = shape
    operands = GemmOperands.make(GemmProblem(args.dtype, "llm", m, n, k))
    records = []
    for path, config, role in jobs:
        record = measure(path, operands, config, role, args)
        shown = f"{record['median_us']:8.1f} us" if record.get("ok") else f"failed: {record.get('reason', '')[:120]}"
        print(f"{m}x{n}x{k} {role:>10} {record.get('ran', record['config']):>28}: {shown}", flush=True)
        records.append(record)
    return records


def summarize(records: list[dict]) -> dict:
    """Per shape: dense, the seed, the fastest tile-major configuration and the fastest workspace-free 2:4 one, with
    their ratios over dense; then the target's three figures and whether each holds."""
    shapes = []
    for shape in dict.fromkeys(tuple(r["shape"]) for r in records):
        ok = [r for r in records if tuple(r["shape"]) == shape and r.get("ok")]
        dense = next((r for r in ok if r["role"] == "dense"), None)
        seed = next((r for r in ok if r["role"] == "2:4 seed"), None)
        tiled = min((r for r in ok if r["role"] == "tile-major"), key=lambda r: r["median_us"], default=None)
        best = min((r for r in (seed, tiled) if r), key=lambda r: r["median_us"], default=None)
        row = {"shape": list(shape), "dense_us": dense and dense["median_us"], "seed_us": seed and seed["median_us"],
               "tile_major": tiled and tiled["ran"], "tile_major_us": tiled and tiled["median_us"],
               "best_2to4": best and best["ran"], "best_2to4_us": best and best["median_us"]}
        for key in ("seed", "tile_major", "best_2to4"):
            us = row[f"{key}_us"]
            row[f"{key}_x_dense"] = dense["median_us"] / us if dense and us else None
        shapes.append(row)
    large = [s["best_2to4_x_dense"] for s in shapes if s["shape"][0] >= LARGE_ROWS and s["best_2to4_x_dense"]]
    small = [s["best_2to4_x_dense"] for s in shapes if s["shape"][0] < LARGE_ROWS and s["best_2to4_x_dense"]]
    geomean = math.exp(statistics.fmean(math.log(x) for x in large)) if large else None
    target = {"geomean_large": geomean, "least_large": min(large) if large else None,
              "least_small": min(small) if small else None}
    target["holds"] = bool(large) and geomean >= TARGET_GEOMEAN and min(large) >= TARGET_LEAST and \
        all(x >= TARGET_SMALL for x in small)
    return {"shapes": shapes, "target": target}


def _x(value) -> str:
    return f"{value:.2f}x" if value else "-"


def _us(value) -> str:
    return f"{value:.1f}" if value else "-"


def print_summary(summary: dict, console: Console) -> None:
    table = Table(title="narrow 2:4 against Vulkan dense (µs after an L2 flush; x dense)")
    for column in ("M x N x K", "dense", "2:4 seed", "x", "tile-major", "x", "fastest tile-major", "best x"):
        table.add_column(column, justify="left" if column.startswith(("M", "fastest")) else "right")
    for s in summary["shapes"]:
        table.add_row("x".join(map(str, s["shape"])), _us(s["dense_us"]), _us(s["seed_us"]), _x(s["seed_x_dense"]),
                      _us(s["tile_major_us"]), _x(s["tile_major_x_dense"]), s["tile_major"] or "-",
                      _x(s["best_2to4_x_dense"]))
    console.print(table)
    t = summary["target"]
    console.print(f"target: geomean over M >= {LARGE_ROWS} {_x(t['geomean_large'])} (>= {TARGET_GEOMEAN}x), least "
                  f"{_x(t['least_large'])} (>= {TARGET_LEAST}x), M < {LARGE_ROWS} least {_x(t['least_small'])} "
                  f"(>= {TARGET_SMALL}x): {'holds' if t['holds'] else 'not met'}")


def loop_counts(report: dict) -> dict:
    """The K loop of an inspect report (the loop that issues the most MMAs): instructions, MMAs, their ratio, the
    registers and the loop's commonest opcodes."""
    best = None
    for obj in report.get("objects", []):
        for kernel in obj.get("kernels", []):
            for loop in kernel.get("loops", []):
                if loop.get("mma") and (best is None or loop["mma"] > best[1]["mma"]):
                    best = (kernel, loop)
    if best is None:
        return {"error": "no loop issues an MMA"}
    kernel, loop = best
    opcodes = loop.get("mix", {}).get("opcodes", {})
    top = dict(sorted(opcodes.items(), key=lambda item: -item[1])[:8])
    return {"registers": kernel.get("registers"), "instructions": loop["instructions"], "mma": loop["mma"],
            "instructions_per_mma": loop["instructions_per_mma"], "opcodes": top}


def inspect_loop(label: str, dtype: str, out: Path) -> dict:
    """``vkcoop inspect --gemm 2:4 --shape llm --config LABEL`` in a child process: its K loop's counts."""
    target = out / f"inspect-{label.replace(':', '_')}.json"
    command = [sys.executable, "-m", "vkcoop", "inspect", "--gemm", "2:4", "--dtype", dtype, "--shape", "llm",
               "--config", label, "--json", str(target), "--sass", str(target.with_suffix(".sass"))]
    try:
        proc = subprocess.run(command, capture_output=True, text=True, timeout=180, env=dict(os.environ))
    except subprocess.TimeoutExpired:
        return {"config": label, "error": "vkcoop inspect ran past 180 s"}
    if proc.returncode != 0:
        lines = (proc.stderr or proc.stdout).strip().splitlines()
        return {"config": label, "error": lines[-1] if lines else f"exit {proc.returncode}"}
    return {"config": label, **loop_counts(json.loads(target.read_text()))}


def inspect_labels(records: list[dict], summary: dict, which: str) -> list[str]:
    """The configurations whose loops to count: every one that ran (``all``), or the seeds and the fastest
    tile-major configuration of each width (``best``)."""
    if which == "none":
        return []
    ran = [r for r in records if r.get("ok") and r["role"] != "dense"]
    if which == "all":
        return list(dict.fromkeys(r["ran"] for r in ran))
    labels = [r["ran"] for r in ran if r["role"] == "2:4 seed"]
    for width in dict.fromkeys(s["shape"][1] for s in summary["shapes"]):
        rows = [s for s in summary["shapes"] if s["shape"][1] == width and s["tile_major"]]
        if rows:
            labels.append(max(rows, key=lambda s: s["shape"][0])["tile_major"])
    return list(dict.fromkeys(labels))


def print_loops(loops: list[dict], console: Console) -> None:
    table = Table(title="K loops (vkcoop inspect, static counts per warp)")
    for column in ("configuration", "regs", "instr", "HMMA", "instr/HMMA", "commonest opcodes"):
        table.add_column(column)
    for loop in loops:
        if "error" in loop:
            table.add_row(loop["config"], "", "", "", "", loop["error"][:100])
            continue
        mix = ", ".join(f"{name} {count}" for name, count in loop["opcodes"].items())
        table.add_row(loop["config"], str(loop["registers"]), str(loop["instructions"]), str(loop["mma"]),
                      f"{loop['instructions_per_mma']:.2f}", mix)
    console.print(table)


def main(argv=None) -> int:
    args = parse_args(argv)
    from vkcoop.gemm.paths import VulkanDevicePaths
    from vkcoop.vk import VulkanError
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    try:
        group = VulkanDevicePaths([args.dtype])
    except (VulkanError, gemm.GemmInputError) as error:
        print(f"sweep_sparse24_narrow: no device runs the coopmat2 paths: {str(error).splitlines()[0]}",
              file=sys.stderr)
        return 3
    console, records, started = Console(width=200), [], time.perf_counter()
    try:
        paths = {p.name: p for p in group.paths}
        plan = {shape: shape_jobs(paths, shape, args) for shape in args.shape_list}
        print(f"{sum(map(len, plan.values()))} configurations on {group.name}; kernels created in "
              f"{create_kernels(plan, args):.1f} s", flush=True)
        for shape, jobs in plan.items():
            if time.perf_counter() - started > args.budget_s:
                print(f"sweep_sparse24_narrow: {args.budget_s:g} s spent; {shape} and later shapes not run", flush=True)
                break
            records += sweep_shape(shape, jobs, args)
        device = group.name
    finally:
        group.close()
    summary = summarize(records)
    print_summary(summary, console)
    with ThreadPoolExecutor(max_workers=INSPECT_WORKERS) as pool:
        loops = list(pool.map(lambda label: inspect_loop(label, args.dtype, out),
                              inspect_labels(records, summary, args.inspect)))
    if loops:
        print_loops(loops, console)
    document = {"device": device, "dtype": args.dtype, "flush_l2": args.flush_l2, "iters": args.iters,
                "records": records, "summary": summary, "loops": loops}
    (out / RESULTS).write_text(json.dumps(document, indent=1) + "\n")
    console.print(f"wrote {out / RESULTS}")
    return 1 if any(not r.get("ok") for r in records) else 0


if __name__ == "__main__":
    raise SystemExit(main())
