#!/usr/bin/env python3
"""Every tile of the dense mma.sync kernel (``MmaDenseGemm.CONFIGS``) beside the register-only mma.sync ceiling and
cuBLAS, measured in the same process: the sweep that tunes ``cuda-mma.sync`` and ``cuda-mma.sync-cap``.

    python -m lab.mma_sync_sweep --json sweep.json                  # 6144^3, 8192^3, 8192x32x8192
    python -m lab.mma_sync_sweep --dtype fp16 --shapes 8192x8192x8192 --keys 128x256k32s4,128x128k32s3

Per (dtype, shape): A [M][K] and B [K][N] of eighths in [-1, 1] (every fp32 partial sum exact), drawn on the GPU;
each tile runs once and its C must equal torch's fp32 product (TF32 off) rounded to the input type, element for
element, or the tile is reported FAILED and not timed; then CUDA events around ``--iters`` runs after a warm-up
(vkcoop.cuda.timing.time_cuda). Whole-K tiles run the square shapes, split-K tiles the shapes with N <= 64. The
ceiling is ``vkcoop bench peak``'s CUDA mma.sync row of the same types (register-only, zeros), measured first.
"""
from __future__ import annotations

import argparse
import json
import sys
import time

SHAPES = ("6144x6144x6144", "8192x8192x8192", "8192x32x8192")
TORCH_DTYPES = {"fp16": "float16", "bf16": "bfloat16"}


def parse_shape(text: str) -> tuple[int, int, int]:
    parts = text.lower().split("x")
    if len(parts) != 3 or not all(p.isdigit() and int(p) > 0 for p in parts):
        raise argparse.ArgumentTypeError(f"{text!r} is not MxNxK")
    return tuple(int(p) for p in parts)


def ceilings(dtypes) -> dict:
    """{dtype: {"mma.sync": TFLOP/s, "wgmma": TFLOP/s}} from vkcoop.cuda.peak's register-only kernels."""
    import torch
    from vkcoop.cuda import build, driver, peak
    module = driver.Module(build.compile_kernel("peak")[0], label="peak.cu")
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    out = {}
    for form in peak.FORMS:
        dtype = form.types.split("->")[0]
        if dtype in dtypes and form.types.endswith("fp32") and form.form in ("mma.sync", "wgmma"):
            row = peak.measure_form(module, form, sms, target_ms=10.0, repeats=5)
            out.setdefault(dtype, {})[form.form] = row["rate"] if row["status"] == "ok" else None
    return out


def operands(m: int, n: int, k: int, dtype: str, seed: int = 0):
    import torch
    generator = torch.Generator(device="cuda").manual_seed(seed)
    kind = getattr(torch, TORCH_DTYPES[dtype])
    a = (torch.randint(-8, 9, (m, k), device="cuda", generator=generator).float() / 8).to(kind)
    b = (torch.randint(-8, 9, (k, n), device="cuda", generator=generator).float() / 8).to(kind)
    previous = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    reference = (a.float() @ b.float()).to(kind)
    torch.backends.cuda.matmul.allow_tf32 = previous
    return a, b.t().contiguous().t(), reference     # B as a transposed view: the kernel's layout, no copy in bind


def measure(op, iters: int, warmup_seconds: float) -> float:
    from vkcoop.cuda.timing import time_cuda
    return time_cuda(op, warmup=3, iters=iters, warmup_seconds=warmup_seconds).median_ms


def sweep_case(dtype, shape, keys, cap, iters, warmup_s, rows, ceiling) -> None:
    import torch
    from vkcoop.cuda.dense import SKINNY_N, MmaDenseGemm
    m, n, k = shape
    a, b, reference = operands(m, n, k, dtype)
    flops = 2.0 * m * n * k
    cublas_ms = measure(lambda: torch.mm(a, b), iters, 1.0)
    base = {"dtype": dtype, "shape": f"{m}x{n}x{k}", "mma_sync_ceiling": ceiling.get("mma.sync"),
            "wgmma_ceiling": ceiling.get("wgmma"), "cublas_tflops": flops / cublas_ms / 1e9}
    rows.append({**base, "key": "cuBLAS (torch.mm)", "tflops": base["cublas_tflops"], "status": "ok"})
    report(rows[-1])
    for key in keys:
        config = MmaDenseGemm.CONFIGS[key]
        if bool(config.per_sm) != (n <= SKINNY_N):
            continue
        row = {**base, "key": key, "kernel": config.kernel_name(TORCH_DTYPES[dtype]), "threads": config.threads,
               "smem": config.total_smem_bytes, "cap": cap.admits(config, dtype)[0],
               "twin": key == MmaDenseGemm.TWIN_KEY}
        try:
            op = MmaDenseGemm(key).bind(a, b)
            exact = bool(torch.equal(op(), reference))
            row["status"] = "ok" if exact else "FAILED"
            if exact:
                row["median_ms"] = measure(op, iters, warmup_s)
                row["tflops"] = flops / row["median_ms"] / 1e9
                row["description"] = op.description
        except Exception as error:  # noqa: BLE001 - one bad tile must not end the sweep
            row["status"], row["error"] = "error", f"{type(error).__name__}: {error}"
        rows.append(row)
        report(row)
    del a, b, reference
    torch.cuda.empty_cache()


def report(row: dict) -> None:
    tflops = row.get("tflops")
    ceiling = row.get("mma_sync_ceiling")
    ratio = f"{tflops / ceiling:5.3f}" if tflops and ceiling else "  -  "
    family = "twin" if row.get("twin") else "cap" if row.get("cap") else "free" if "cap" in row else "lib"
    text = f"{tflops:7.1f}" if tflops else f"{row['status']:>7}"
    print(f"{row['dtype']:4} {row['shape']:>16} {row['key']:>22} {family:4} {text} TFLOP/s  x ceiling {ratio}  "
          f"x cuBLAS {tflops / row['cublas_tflops'] if tflops else 0:5.3f}  {row.get('error', '')}", flush=True)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dtype", default="fp16,bf16", help="fp16,bf16")
    parser.add_argument("--shapes", default=",".join(SHAPES), help="MxNxK,...")
    parser.add_argument("--keys", default="", help="MmaDenseGemm.CONFIGS keys (default: all)")
    parser.add_argument("--iters", type=int, default=30)
    parser.add_argument("--warmup-seconds", type=float, default=0.3, help="warm-up before each tile's timing")
    parser.add_argument("--json", default=None, help="write every row here")
    args = parser.parse_args(argv)
    from vkcoop.cuda import available, build
    from vkcoop.cuda.dense import MmaDenseGemm
    from vkcoop.cuda.vulkan_cap import read_cap
    ok, why = available()
    if not ok:
        print(f"CUDA paths unavailable: {why}", file=sys.stderr)
        return 3
    dtypes = [d for d in args.dtype.split(",") if d]
    shapes = [parse_shape(s) for s in args.shapes.split(",") if s]
    keys = [k for k in args.keys.split(",") if k] or list(MmaDenseGemm.CONFIGS)
    unknown = [k for k in keys if k not in MmaDenseGemm.CONFIGS]
    if unknown or any(d not in TORCH_DTYPES for d in dtypes):
        print(f"unknown keys {unknown} or dtypes {dtypes}", file=sys.stderr)
        return 2
    started = time.perf_counter()
    build.compile_kernel("mma_dense")
    print(f"built mma_dense.cu in {time.perf_counter() - started:.1f} s; {why}", flush=True)
    cap = read_cap()
    print(f"Vulkan cap ({cap.source}): {cap.shared_memory} bytes, reserve {cap.reserved}, shader share "
          f"{cap.shader_share}, <= {cap.max_workgroup} invocations", flush=True)
    measured = ceilings(dtypes)
    print(f"register-only ceilings (TFLOP/s): {measured}", flush=True)
    rows: list[dict] = []
    for dtype in dtypes:
        for shape in shapes:
            sweep_case(dtype, shape, keys, cap, args.iters, args.warmup_seconds, rows, measured.get(dtype, {}))
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"cap": cap.to_dict(), "ceilings": measured, "rows": rows}, out, indent=1)
        print(f"wrote {args.json}")
    print(f"sweep done in {time.perf_counter() - started:.1f} s")
    return 1 if any(r["status"] != "ok" for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
