#!/usr/bin/env python3
"""Every CUDA 2:4 path on the same inputs: check first, then time.

    python -m lab.bench_cuda_sparse                        # fp16+bf16, square 8192^3 and llm
    python -m lab.bench_cuda_sparse --dtype fp16 --shapes square --all-configs --json out.json
    python -m lab.bench_cuda_sparse --paths wgmma,cusparselt --dtype e4m3,int8,tf32 --shapes 8192x8192x8192

For each (shape, dtype) one A [M][K] is drawn from {-1, -0.5, 0, 0.5, 1} (int8 from
{-2..2}, uint8 from {0..4}), pruned and compressed with vkcoop.sparse (2:4; 1:2 for
tf32), and one B [K][N] likewise. The types beyond fp16 and bf16 (tf32, e4m3, e5m2,
int8, uint8) run on wgmma.sp, C in bf16 or int32; the other paths skip them, each
saying why. Every path is first checked against an fp32 matmul of the pruned A; a
path that fails the check is reported FAILED and never timed.  Timing: CUDA events, warm-up,
median of --iters runs, optionally flushing L2 before each.  Throughput counts
2*M*N*K (dense-equivalent) FLOPs; ratios are to cuBLAS and cuSPARSELt from the same run.
cuSPARSELt runs its own search's pick replayed as a CUDA graph (what the bench's best cuSPARSELt row times).

    python -m lab.bench_cuda_sparse --paths cusparselt,wgmma --dtype fp16 --shapes 8192x8192x8192 \
        --configs 128x256,wgmma_sp_bn256_c2_s5 --repeat 2 --kernel-names

``--configs`` takes the kernels' CONFIGS keys and the fp16 diagnostic entries by kernel name without the dtype;
``--repeat`` times every path that many times in turn (drift shows as the rounds disagree); ``--kernel-names``
prints the CUDA kernels each path launches (torch's profiler): how cuSPARSELt's tile, cluster and warpgroups are
read off its kernel name.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import time

import numpy as np

from vkcoop.cli.common import emit_json

SHAPES = {
    "square": (8192, 8192, 8192),
    # Llama-3-8B MLP up/gate projection (14336 x 4096 weights) applied to 16 tokens:
    # memory-bound, A is read once and N is tiny.
    "llm": (14336, 16, 4096),
}
DTYPES = {"fp16": "float16", "bf16": "bfloat16", "tf32": "float32", "e4m3": "float8_e4m3fn", "e5m2": "float8_e5m2",
          "int8": "int8", "uint8": "uint8"}
#: The integer types' ranges: every product and s32 sum exact, and the fp32 reference too.
INTEGER_RANGES = {"int8": (-2, 3), "uint8": (0, 5)}


def shape_of(name: str) -> tuple[int, int, int] | None:
    """A named shape, or an explicit MxNxK such as 4096x32x4096 (positive integers); None if neither."""
    if name in SHAPES:
        return SHAPES[name]
    parts = name.split("x")
    if len(parts) == 3 and all(p.isdigit() and int(p) > 0 for p in parts):
        return tuple(int(p) for p in parts)
    return None


def _gpu_facts() -> dict:
    import torch
    facts = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
             "cuda_runtime": torch.version.cuda}
    try:
        facts["cusparselt"] = torch.backends.cusparselt.version()
    except Exception as exc:  # noqa: BLE001 - report, don't fail
        facts["cusparselt"] = f"unavailable: {exc}"
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version,clocks.sm,clocks.max.sm,clocks.mem",
             "--format=csv,noheader"], capture_output=True, text=True, timeout=20)
        facts["nvidia_smi"] = out.stdout.strip()
    except (OSError, subprocess.SubprocessError) as exc:
        facts["nvidia_smi"] = f"unavailable: {exc}"
    return facts


def _warm_up_gpu(seconds: float) -> None:
    """Keep the GPU busy for a while so the first timed path doesn't run at idle clocks
    (seen on the H200: cuBLAS, timed first, read 732 instead of ~885 TFLOP/s)."""
    import torch
    if seconds <= 0:
        return
    x = torch.randn(4096, 4096, device="cuda", dtype=torch.float16)
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        for _ in range(20):
            torch.mm(x, x)
        torch.cuda.synchronize()


def draw(rng, shape, dtype_name: str) -> np.ndarray:
    """Exact values of the type: halves in [-1, 1] for the float types, small integers for int8 and uint8."""
    import ml_dtypes
    np_dtype = np.dtype(getattr(ml_dtypes, dtype_name, None) or dtype_name)
    low, high = INTEGER_RANGES.get(dtype_name, (-2, 3))
    values = rng.integers(low, high, size=shape, dtype=np.int8)
    if dtype_name in INTEGER_RANGES:
        return values.astype(np_dtype)
    return (values.astype(np.float32) * 0.5).astype(np_dtype)


def _make_problem(m, n, k, dtype_name, seed):
    from vkcoop import sparse
    from vkcoop.cuda import DeviceSparse
    from vkcoop.cuda.gemm import to_torch
    rng = np.random.default_rng(seed)
    a = draw(rng, (m, k), dtype_name)
    t0 = time.perf_counter()
    comp = sparse.compress_1to2(a) if dtype_name == "float32" else sparse.compress_2to4(a)
    prep_s = time.perf_counter() - t0
    del a
    dev = DeviceSparse.from_compressed(comp)
    b = to_torch(draw(rng, (n, k), dtype_name)).t()  # [K][N], column-major
    return dev, b, prep_s


def diagnostic_configs() -> dict:
    """The fp16 diagnostic wgmma.sp entries by kernel name without the dtype (``wgmma_sp_bn128_c2_s6_nr``)."""
    from vkcoop.cuda import WgmmaSpGemm
    return {cfg.kernel_name("float16").replace("_f16", ""): cfg for cfg in WgmmaSpGemm.DIAGNOSTIC_CONFIGS}


class _GraphedCuSparseLt:
    """cuSPARSELt's own search's pick, replayed as a CUDA graph."""

    def __init__(self):
        from vkcoop.cuda import CuSparseLtGemm
        self.path = CuSparseLtGemm()

    def supports(self, m, n, k, dtype):
        return self.path.supports(m, n, k, dtype)

    def bind(self, a, b):
        from vkcoop.cuda.baselines import CsltConfig
        return self.path.bind(a, b, CsltConfig(graph=True))


def _paths(all_configs: bool, selected: set[str], only: list[str] | None = None):
    from vkcoop.cuda import CublasGemm, MmaSpGemm, WgmmaSpGemm
    out = []
    if "cublas" in selected:
        out.append(("cuBLAS", CublasGemm()))
    if "cusparselt" in selected:
        out.append(("cuSPARSELt", _GraphedCuSparseLt()))
    for key, cls in (("mma", MmaSpGemm), ("wgmma", WgmmaSpGemm)):
        if key not in selected:
            continue
        configs = list(cls.CONFIGS) if all_configs else ["auto"]
        if all_configs:
            configs += list(getattr(cls, "DIAGNOSTIC_CONFIGS", ()))
        if only is not None:  # --configs: the named ones this path has, in the order given
            diagnostic = diagnostic_configs() if cls is WgmmaSpGemm else {}
            configs = [diagnostic.get(c, c) for c in only if c == "auto" or c in cls.CONFIGS or c in diagnostic]
        for cfg in configs:
            label = cfg if isinstance(cfg, str) else cfg.kernel_name("float16").replace("_f16", "")
            out.append((f"{cls.name}[{label}]", cls(cfg)))
    return out


def _bind_and_check(path, a, b, ref, row: dict):
    """The op of ``path`` once its result passed the check against ``ref``; else None, ``row`` saying why."""
    import torch
    from vkcoop.cuda import compare, passes
    supported, reason = path.supports(row["M"], row["N"], row["K"], a.dtype)
    if not supported:
        row.update(status="skipped", reason=reason)
        return None
    try:
        op = path.bind(a, b)
        c = op()
        torch.cuda.synchronize()
        stats = compare(c, ref)
        del c
    except Exception as exc:  # noqa: BLE001 - a path failing must not hide the others
        row.update(status="error", reason=f"{type(exc).__name__}: {exc}")
        return None
    row["check"] = stats
    row["detail"] = getattr(op, "description", "")
    if not passes(stats, a.dtype):
        row.update(status="FAILED")
        return None
    return op


def kernel_names(op) -> list[str]:
    """The CUDA kernels three runs of ``op`` launch, by torch's profiler."""
    import torch
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(3):
            op()
        torch.cuda.synchronize()
    return sorted({e.name for e in prof.events() if e.device_type.name == "CUDA"})


def _time_case(args, shape_name: str, dtype_key: str) -> list[dict]:
    """Every selected path on one problem: checked, then timed ``--repeat`` rounds in turn."""
    import torch
    from vkcoop.cuda import reference, time_cuda
    m, n, k = shape_of(shape_name)
    a, b, prep_s = _make_problem(m, n, k, DTYPES[dtype_key], seed=args.seed)
    ref = reference(a, b)
    print(f"\n## {shape_name} M={m} N={n} K={k} {dtype_key} (host prune+compress {prep_s:.1f} s)")
    checked, ops = [], []
    only = args.configs.split(",") if args.configs else None
    for label, path in _paths(args.all_configs, set(args.paths.split(",")), only):
        row = {"shape": shape_name, "M": m, "N": n, "K": k, "dtype": dtype_key, "path": label}
        op = _bind_and_check(path, a, b, ref, row)
        checked.append(row)
        if op is not None:
            ops.append((row, op))
            if args.kernel_names:
                row["kernels"] = kernel_names(op)
                print(f"# {label} launches {row['kernels']}")
    rows = [row for row in checked if "status" in row]
    for round_ in range(args.repeat):
        timed = []
        for row, op in ops:
            timing = time_cuda(op, warmup=args.warmup, iters=args.iters, flush_l2=args.flush_l2)
            timed.append({**row, "status": "ok", "round": round_, "median_ms": timing.median_ms,
                          "min_ms": timing.min_ms, "tflops": timing.tflops(m, n, k)})
        base = {r["path"]: r["tflops"] for r in timed}
        for r in timed:
            for ref_name, key in (("cuBLAS", "vs_cublas"), ("cuSPARSELt", "vs_cusparselt")):
                if base.get(ref_name):
                    r[key] = r["tflops"] / base[ref_name]
        rows += timed
    del a, b, ref, ops
    torch.cuda.empty_cache()
    _print_rows(rows)
    return rows


def run(args) -> dict:
    from vkcoop.cuda import available
    ok, why = available()
    if not ok:
        print(f"CUDA paths unavailable: {why}", file=sys.stderr)
        sys.exit(2)
    report = {"facts": _gpu_facts(), "settings": vars(args).copy(), "results": []}
    print(f"# {report['facts']}")
    _warm_up_gpu(args.warmup_seconds)
    if args.peak:
        from vkcoop.cuda.gemm import mma_sp_peak_tflops
        report["mma_sp_peak_tflops"] = mma_sp_peak_tflops()
        print(f"# register-only mma.sp m16n8k32 fp16 ceiling: {report['mma_sp_peak_tflops']:.0f} TFLOP/s")
    for shape_name in args.shapes.split(","):
        for dtype_key in args.dtype.split(","):
            report["results"] += _time_case(args, shape_name, dtype_key)
    return report


def _print_rows(rows) -> None:
    print(f"{'path':28} {'status':8} {'ms':>9} {'TFLOP/s':>9} {'/cuBLAS':>8} {'/cuSPLt':>8}  check / detail")
    for r in rows:
        if r["status"] == "ok":
            chk = r["check"]
            label = r["path"] + (f" #{r['round']}" if r.get("round") else "")
            print(f"{label:28} {'ok':8} {r['median_ms']:9.4f} {r['tflops']:9.1f} "
                  f"{r.get('vs_cublas', float('nan')):8.3f} {r.get('vs_cusparselt', float('nan')):8.3f}  "
                  f"rel_err={chk['max_rel_err']:.2e} exact={chk['exact_fraction']:.4f} {r.get('detail', '')}")
        else:
            extra = r.get("reason") or r.get("check")
            print(f"{r['path']:28} {r['status']:8} {'-':>9} {'-':>9} {'-':>8} {'-':>8}  {extra}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dtype", default="fp16,bf16",
                        help=f"comma list of {', '.join(DTYPES)} (beyond fp16 and bf16: wgmma.sp only)")
    parser.add_argument("--shapes", default="square,llm",
                        help=f"comma list of {', '.join(SHAPES)} or MxNxK (e.g. 4096x32x4096)")
    parser.add_argument("--paths", default="cublas,cusparselt,mma,wgmma",
                        help="comma list of cublas, cusparselt, mma, wgmma")
    parser.add_argument("--all-configs", action="store_true", help="time every tile config of the kernels")
    parser.add_argument("--configs", metavar="LIST",
                        help="comma list of kernel config names (or auto) to time; each kernel path "
                             "runs those it has, e.g. auto,256x128k128,256x128k128p")
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--iters", type=int, default=30)
    parser.add_argument("--repeat", type=int, default=1, help="time every path this many rounds, in turn")
    parser.add_argument("--kernel-names", action="store_true",
                        help="print the CUDA kernels each path launches (torch's profiler)")
    parser.add_argument("--flush-l2", action="store_true", help="zero a 256 MiB buffer before every timed run")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--warmup-seconds", type=float, default=2.0,
                        help="run dense GEMMs this long before measuring, to lift the clocks")
    parser.add_argument("--peak", action="store_true",
                        help="also measure the register-only mma.sp throughput ceiling")
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    args = parser.parse_args(argv)
    for name in args.shapes.split(","):
        if shape_of(name) is None:
            parser.error(f"unknown shape {name!r}; choose from {', '.join(SHAPES)} or give MxNxK")
    for name in args.dtype.split(","):
        if name not in DTYPES:
            parser.error(f"unknown dtype {name!r}; choose from {', '.join(DTYPES)}")
    if args.configs:
        from vkcoop.cuda.gemm import MmaSpGemm, WgmmaSpGemm
        known = {"auto", *MmaSpGemm.CONFIGS, *WgmmaSpGemm.CONFIGS, *diagnostic_configs()}
        unknown = [c for c in args.configs.split(",") if c not in known]
        if unknown:
            parser.error(f"unknown config(s) {', '.join(unknown)}; choose from {', '.join(sorted(known))}")
    report = run(args)
    if args.json:
        emit_json(report, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
