"""``vkcoop bench sparse``: every 2:4 and dense GEMM path on the same inputs, in one process.

Paths (fp16 or bf16 in, fp32 accumulation):

=====================  ========  =================================================================
name                   API       what
=====================  ========  =================================================================
vk-coopmat2-dense      Vulkan    workgroup-scope coopmat2 GEMM on the pruned dense A
vk-coopmat2-2:4        Vulkan    the same with A loaded from the 2:4 format by a decode function
vk-khr-subgroup        Vulkan    subgroup-scope KHR coopmat GEMM through shared memory
cuda-mma.sp            CUDA      hand-written ``mma.sp`` kernel (vkcoop.cuda.MmaSpGemm)
cuda-wgmma.sp          CUDA      hand-written ``wgmma.mma_async.sp`` kernel (vkcoop.cuda.WgmmaSpGemm)
cuSPARSELt             CUDA      torch ``_cslt_sparse_mm`` after its algorithm search
cuBLAS                 CUDA      ``torch.mm`` on the pruned dense A
=====================  ========  =================================================================

For every case (dtype x size x shape) the inputs are made once: A from multiples of 1/8 in [-1, 1], pruned
2:4 (:mod:`vkcoop.sparse`), B likewise. With those values every product is a multiple of 1/64 and every
partial sum stays far below 2**24/64, so any fp32-accumulating kernel computes the exact sum in any order:
fp32 results must match the reference bit for bit, fp16/bf16 results within the final rounding (1 ulp).

Each path is first checked against the fp32 matmul of the pruned A (on a sample of rows that includes the
first and last ones); a path that fails is reported as failed and never timed. Then: ``warmup`` runs, and the
median of ``iters`` timed runs (Vulkan: GPU timestamps around each dispatch; CUDA: CUDA events), optionally
with an L2 flush before each. Throughput is dense-equivalent: 2*M*N*K / median time.
"""
from __future__ import annotations

import statistics
import time
from dataclasses import asdict, dataclass, field

import numpy as np

from .. import sparse as sparse24
from ..samples import gemm_kernels as kernels

PATH_NAMES = ("vk-coopmat2-dense", "vk-coopmat2-2:4", "vk-khr-subgroup", "cuda-mma.sp", "cuda-wgmma.sp",
              "cuSPARSELt", "cuBLAS")
VULKAN_PATHS = PATH_NAMES[:3]
CUDA_PATHS = PATH_NAMES[3:]
DTYPES = ("fp16", "bf16")
SHAPES = ("square", "llm")
#: N of the LLM-like shapes: a batch of tokens times a weight matrix (memory-bound: A dominates the traffic).
LLM_TOKENS = 32

@dataclass(frozen=True)
class VulkanConfig:
    """One launch configuration of a Vulkan coopmat2 path: the tile, B's layout and (2:4 path) A's layout."""
    tile: kernels.WorkgroupTile
    b_column_major: bool = False
    meta_words: int = 0   # 2:4 path: 0 = values + metadata bindings, > 0 = interleaved blocks (interleave_2to4)

    def label(self) -> str:
        return (self.tile.label() + (f" i{self.meta_words}" if self.meta_words else "")
                + (" Bcol" if self.b_column_major else ""))


_W = kernels.WorkgroupTile
# Vulkan launch configurations per shape class, tried in order when tuning (the first is the default).
# Workgroup-scope tiles: multiples of the H200's granularity rows (256 invocations: 32/32/16; 128: 32/16/16;
# 64: 16/16/16); see docs/gemm-notes.md for what was measured.
DENSE_CONFIGS = {
    # 8192^3 (final run, fp16 / bf16 TFLOP/s): u8 277 / 273, u4 259 / 254, 128 invocations 128x128 u4 260 / 254.
    "square": [VulkanConfig(_W(256, 128, 256, 32, k_unroll=8, group_m=8)),
               VulkanConfig(_W(256, 128, 256, 32, k_unroll=4, group_m=8)),
               VulkanConfig(_W(128, 128, 128, 32, k_unroll=4, group_m=8))],
    # 8192x32x8192 (ms): 32x32x128/64 split-K 2 0.054, /32 0.054, 64x32x128/256 0.068.
    "llm": [VulkanConfig(_W(64, 32, 32, 128, k_unroll=2, group_m=1, split_k=2), b_column_major=True),
            VulkanConfig(_W(32, 32, 32, 128, k_unroll=2, group_m=1, split_k=2), b_column_major=True),
            VulkanConfig(_W(256, 64, 32, 128, k_unroll=2, group_m=1), b_column_major=True)],
}
SPARSE_CONFIGS = {
    # 8192^3 (fp16 TFLOP/s): u8 i1 199, u4 i1 192, u4 two bindings 173.
    "square": [VulkanConfig(_W(256, 128, 256, 32, k_unroll=8, group_m=8), meta_words=1),
               VulkanConfig(_W(256, 128, 256, 32, k_unroll=4, group_m=8), meta_words=1),
               VulkanConfig(_W(256, 128, 256, 32, k_unroll=4, group_m=8))],
    # 8192x32x8192 (ms): 32x32x128/64 split-K 2 i4 0.099, 64x32x128/256 i1 0.119, two bindings 0.123;
    # 32 invocations (i1) was 0.367, so it is not listed.
    "llm": [VulkanConfig(_W(64, 32, 32, 128, k_unroll=2, group_m=1, split_k=2), b_column_major=True, meta_words=4),
            VulkanConfig(_W(256, 64, 32, 128, k_unroll=2, group_m=1), b_column_major=True, meta_words=1),
            VulkanConfig(_W(256, 64, 32, 128, k_unroll=2, group_m=1), b_column_major=True)],
}


@dataclass
class Case:
    dtype: str
    shape_class: str
    m: int
    n: int
    k: int

    @property
    def label(self) -> str:
        return f"{self.dtype} {self.shape_class} {self.m}x{self.n}x{self.k}"

    @property
    def flops(self) -> float:
        return 2.0 * self.m * self.n * self.k


@dataclass
class PathResult:
    path: str
    case: str
    dtype: str
    shape_class: str
    m: int
    n: int
    k: int
    status: str                      # "ok", "failed" (check), "skipped" (cannot run here), "error"
    reason: str = ""
    config: str = ""
    median_ms: float | None = None
    min_ms: float | None = None
    tflops: float | None = None
    max_abs_error: float | None = None
    ratio_cublas: float | None = None
    ratio_cusparselt: float | None = None
    tuning: list = field(default_factory=list)


def make_cases(dtypes, sizes, shapes, llm_tokens: int = LLM_TOKENS) -> list[Case]:
    cases = []
    for dtype in dtypes:
        if dtype not in DTYPES:
            raise ValueError(f"--dtype {dtype!r}: choose from {', '.join(DTYPES)}")
        for shape in shapes:
            if shape not in SHAPES:
                raise ValueError(f"--shapes {shape!r}: choose from {', '.join(SHAPES)}")
            for size in sizes:
                size = int(size)
                if size <= 0 or size % 64:
                    raise ValueError(f"--sizes {size}: sizes must be positive multiples of 64")
                n = size if shape == "square" else llm_tokens
                cases.append(Case(dtype, shape, size, n, size))
    return cases


def make_inputs(case: Case, seed: int = 0):
    """(pruned dense A, compressed A, B) for a case; see the module docstring for why these values."""
    rng = np.random.default_rng(seed)
    dtype = kernels.BF16 if case.dtype == "bf16" else np.dtype(np.float16)
    a = (rng.integers(-8, 9, size=(case.m, case.k), dtype=np.int8).astype(np.float32) / 8).astype(dtype)
    b = (rng.integers(-8, 9, size=(case.k, case.n), dtype=np.int8).astype(np.float32) / 8).astype(dtype)
    compressed = sparse24.compress_2to4(a)
    pruned = sparse24.decompress_2to4(compressed)
    return pruned, compressed, b


def check_rows(m: int, seed: int = 1, count: int = 192) -> np.ndarray:
    """Rows the check compares: the first and last 16 (edge tiles) and a random sample."""
    rng = np.random.default_rng(seed)
    picked = np.concatenate([np.arange(min(16, m)), np.arange(max(0, m - 16), m),
                             rng.integers(0, m, size=min(count, m))])
    return np.unique(picked)


def check_output(rows_out: np.ndarray, reference: np.ndarray) -> tuple[bool, float, str]:
    """Exact for fp32 results; within the final rounding (1 ulp of the result type) for fp16/bf16."""
    got = rows_out.astype(np.float32)
    diff = np.abs(got - reference)
    max_abs = float(diff.max()) if diff.size else 0.0
    if not np.isfinite(got).all():
        return False, max_abs, "non-finite values in the result"
    if rows_out.dtype == np.float32:
        tolerance = np.zeros_like(reference)
    else:
        ulp = 2.0 ** -10 if rows_out.dtype == np.float16 else 2.0 ** -7
        tolerance = ulp * np.abs(reference)
    bad = np.argwhere(diff > tolerance)
    if bad.size:
        r, c = (int(v) for v in bad[0])
        return False, max_abs, (f"{len(bad)} mismatches; first at sampled row {r}, column {c}: "
                                f"got {got[r, c]!r}, expected {reference[r, c]!r}")
    return True, max_abs, ""


# ----------------------------------------------------------------------------------------------------------
# Vulkan paths
class VulkanPaths:
    """One Vulkan device with every feature the three Vulkan paths need, and their pipelines (cached)."""

    def __init__(self, dtypes, device=None, validate: bool = False):
        from .. import vk

        features = []
        for dtype in dtypes:
            key = "fp16->fp32" if dtype == "fp16" else "bf16->fp32"
            for kernel in ("sparse24", "khr"):
                features += kernels.features_for(kernel, key)
        self.device = vk.Device(device, features=list(dict.fromkeys(features)), validate=validate)
        self.flexible = self.device.physical.flexible_dimensions_properties()
        self.khr = self.device.physical.cooperative_matrix_properties()
        self._pipelines = {}
        self._flush = None

    @property
    def name(self) -> str:
        return self.device.physical.name

    def flush(self):
        if self._flush is None:
            self._flush = kernels.L2Flush(self.device)
        return self._flush

    def kernel(self, path: str, dtype: str, config):
        """The (cached) kernel object of a path for a VulkanConfig (a SubgroupTile for the KHR path)."""
        key = (path, dtype, config)
        if key not in self._pipelines:
            types = "fp16->fp32" if dtype == "fp16" else "bf16->fp32"
            if path == "vk-coopmat2-dense":
                made = kernels.CoopMat2Gemm(self.device, types, config.tile, b_column_major=config.b_column_major,
                                            flexible_properties=self.flexible)
            elif path == "vk-coopmat2-2:4":
                made = kernels.Sparse24Gemm(self.device, dtype, config.tile, b_column_major=config.b_column_major,
                                            flexible_properties=self.flexible, meta_words=config.meta_words)
            else:
                made = kernels.KhrSharedMemoryGemm(self.device, types, config)
            self._pipelines[key] = made
        return self._pipelines[key]

    def configs(self, path: str, case: Case, tune: bool) -> list:
        if path == "vk-khr-subgroup":
            types = "fp16->fp32" if case.dtype == "fp16" else "bf16->fp32"
            tile = kernels.choose_subgroup_tile(self.khr, types)
            if case.shape_class == "llm":  # few columns: a narrow tile wastes less
                tile = kernels.choose_subgroup_tile(self.khr, types, tile=(128, 32, None), subgroups=(4, 1))
            return [tile]
        options = (DENSE_CONFIGS if path == "vk-coopmat2-dense" else SPARSE_CONFIGS)[case.shape_class]
        return list(options) if tune else list(options[:1])

    def close(self):
        for made in self._pipelines.values():
            made.close()
        if self._flush is not None:
            self._flush.close()
        self.device.close()


def _config_label(config) -> str:
    return config.label()


def _bind_vulkan(kernel, path, pruned, compressed, b, config):
    b_arg = np.ascontiguousarray(b.T) if getattr(config, "b_column_major", False) else b
    if path == "vk-coopmat2-2:4":
        kernel.bind(compressed.values, compressed.metadata, b_arg)
    else:
        kernel.bind(pruned, b_arg)


def run_vulkan_path(vulkan: VulkanPaths, path: str, case: Case, inputs, rows, reference, *, iters, warmup,
                    flush_l2, tune) -> PathResult:
    pruned, compressed, b = inputs
    result = _result(path, case, "ok")
    best = None
    configs = vulkan.configs(path, case, tune)
    for config in configs:
        label = _config_label(config)
        try:
            kernel = vulkan.kernel(path, case.dtype, config)
            _bind_vulkan(kernel, path, pruned, compressed, b, config)
            output = kernel.result()
            ok, max_abs, why = check_output(output[rows], reference)
            if not ok:
                result.tuning.append({"config": label, "status": "failed", "reason": why})
                kernel.release()
                if best is None:
                    result.status, result.reason, result.config, result.max_abs_error = "failed", why, label, max_abs
                continue
            probe_iters = iters if len(configs) == 1 else max(3, iters // 4)
            times = kernel.time(probe_iters, warmup, vulkan.flush() if flush_l2 else None)
            median = statistics.median(times)
            result.tuning.append({"config": label, "median_ms": median * 1e3,
                                  "tflops": case.flops / median / 1e12})
            if best is None or median < best[0]:
                best = (median, config, label, max_abs)
            kernel.release()
        except Exception as error:  # one bad config must not sink the whole benchmark
            result.tuning.append({"config": label, "status": "error", "reason": f"{type(error).__name__}: {error}"})
            if best is None:
                result.status, result.reason, result.config = "error", f"{type(error).__name__}: {error}", label
    if best is None:
        return result
    median, config, label, max_abs = best
    kernel = vulkan.kernel(path, case.dtype, config)
    if len(result.tuning) > 1:  # re-time the winner with the full iteration count
        _bind_vulkan(kernel, path, pruned, compressed, b, config)
        times = kernel.time(iters, warmup, vulkan.flush() if flush_l2 else None)
        kernel.release()
    result.status, result.reason, result.config, result.max_abs_error = "ok", "", label, max_abs
    result.median_ms = statistics.median(times) * 1e3
    result.min_ms = min(times) * 1e3
    result.tflops = case.flops / (result.median_ms * 1e-3) / 1e12
    return result


# ----------------------------------------------------------------------------------------------------------
# CUDA paths (vkcoop.cuda)
def cuda_status() -> tuple[bool, str]:
    try:
        from .. import cuda
    except Exception as error:  # noqa: BLE001 - any import failure means "not here"
        return False, f"vkcoop.cuda cannot be imported: {type(error).__name__}: {error}"
    try:
        return cuda.available()
    except Exception as error:  # noqa: BLE001
        return False, f"vkcoop.cuda.available() failed: {error}"


def _cuda_path_object(path: str):
    from .. import cuda
    return {"cuda-mma.sp": cuda.MmaSpGemm, "cuda-wgmma.sp": cuda.WgmmaSpGemm,
            "cuSPARSELt": cuda.CuSparseLtGemm, "cuBLAS": cuda.CublasGemm}[path]()


def run_cuda_path(path: str, case: Case, device_inputs, rows, reference, *, iters, warmup, flush_l2) -> PathResult:
    from .. import cuda
    import torch

    a, b = device_inputs
    result = _result(path, case, "ok")
    runner = _cuda_path_object(path)
    ok, reason = runner.supports(case.m, case.n, case.k, a.dtype)
    if not ok:
        result.status, result.reason = "skipped", reason
        return result
    result.config = reason
    try:
        op = runner.bind(a, b)
        output = op()
        torch.cuda.synchronize()
        rows_index = torch.as_tensor(rows, device=output.device)
        sampled = output.index_select(0, rows_index).float().cpu().numpy()
        sampled = sampled.astype(np.float16) if output.dtype == torch.float16 else (
            sampled.astype(kernels.BF16) if output.dtype == torch.bfloat16 else sampled)
        good, max_abs, why = check_output(sampled, reference)
        result.max_abs_error = max_abs
        if not good:
            result.status, result.reason = "failed", why
            return result
        timing = cuda.time_cuda(op, warmup=warmup, iters=iters, flush_l2=flush_l2)
        result.median_ms, result.min_ms = timing.median_ms, timing.min_ms
        result.tflops = case.flops / (timing.median_ms * 1e-3) / 1e12
        if getattr(op, "description", ""):
            result.config = f"{reason}; {op.description}"
    except Exception as error:  # noqa: BLE001
        result.status, result.reason = "error", f"{type(error).__name__}: {error}"
    return result


def _result(path: str, case: Case, status: str, reason: str = "") -> PathResult:
    return PathResult(path, case.label, case.dtype, case.shape_class, case.m, case.n, case.k, status, reason)


def _add_ratios(results: list[PathResult]) -> None:
    by_case = {}
    for r in results:
        by_case.setdefault(r.case, {})[r.path] = r
    for paths in by_case.values():
        for r in paths.values():
            if r.tflops is None:
                continue
            for baseline, attribute in (("cuBLAS", "ratio_cublas"), ("cuSPARSELt", "ratio_cusparselt")):
                base = paths.get(baseline)
                if base is not None and base.tflops:
                    setattr(r, attribute, r.tflops / base.tflops)


# ----------------------------------------------------------------------------------------------------------
@dataclass
class BenchResult:
    results: list
    environment: dict
    settings: dict

    @property
    def failed(self) -> list:
        return [r for r in self.results if r.status in ("failed", "error")]

    def to_dict(self) -> dict:
        return {"environment": self.environment, "settings": self.settings,
                "results": [asdict(r) for r in self.results]}


def run_sparse_bench(*, dtypes=("fp16", "bf16"), sizes=(4096, 8192), shapes=("square", "llm"), iters: int = 20,
                     warmup: int = 5, flush_l2: bool = False, paths=None, tune: bool = False,
                     llm_tokens: int = LLM_TOKENS, device=None, validate: bool = False, json_path=None,
                     plot_path=None, console=None, progress: bool = True) -> BenchResult:
    """Run the comparison; print the table, write JSON/PNG if asked, and return every result.

    ``paths``: a subset of :data:`PATH_NAMES` (default all). ``tune``: try every Vulkan launch configuration of
    the shape class and keep the fastest (each try is recorded in the JSON). Bad arguments raise ValueError
    before any GPU work. A path that cannot run here (no Vulkan coopmat2 device, no CUDA) is "skipped" with the
    reason; one that fails its check is "failed" and not timed.
    """
    from . import report

    if iters < 1 or warmup < 0:
        raise ValueError(f"--iters must be >= 1 and --warmup >= 0 (got {iters}, {warmup})")
    wanted = list(PATH_NAMES) if paths is None else list(paths)
    unknown = [p for p in wanted if p not in PATH_NAMES]
    if unknown:
        raise ValueError(f"unknown path(s) {', '.join(unknown)}; choose from {', '.join(PATH_NAMES)}")
    cases = make_cases(dtypes, sizes, shapes, llm_tokens)
    settings = {"dtypes": list(dtypes), "sizes": [int(s) for s in sizes], "shapes": list(shapes), "iters": iters,
                "warmup": warmup, "flush_l2": flush_l2, "tune": tune, "llm_tokens": llm_tokens, "paths": wanted}

    vulkan, vulkan_reason = None, ""
    if any(p in VULKAN_PATHS for p in wanted):
        try:
            vulkan = VulkanPaths(dtypes, device=device, validate=validate)
        except Exception as error:  # noqa: BLE001 - no Vulkan / no coopmat2: skip those paths, say why
            vulkan_reason = f"{type(error).__name__}: {error}"
    cuda_ok, cuda_reason = cuda_status() if any(p in CUDA_PATHS for p in wanted) else (False, "")
    environment = report.environment(vulkan.name if vulkan else None, cuda_reason if cuda_ok else None)
    environment["vulkan_skip_reason"] = vulkan_reason or None
    environment["cuda_skip_reason"] = None if cuda_ok else cuda_reason or None

    results: list[PathResult] = []
    total = len(cases) * len(wanted)
    with report.progress_bar(console, enabled=progress) as bar:
        task = bar.add_task("bench sparse", total=total)
        for case in cases:
            bar.update(task, description=f"{case.label}: inputs")
            started = time.perf_counter()
            inputs = make_inputs(case)
            pruned, compressed, b = inputs
            rows = check_rows(case.m)
            reference = (pruned[rows].astype(np.float64) @ b.astype(np.float64)).astype(np.float32)
            device_inputs = None
            if cuda_ok and any(p in CUDA_PATHS for p in wanted):
                from .. import cuda
                from ..cuda.gemm import _to_torch
                device_inputs = (cuda.DeviceSparse.from_compressed(compressed), _to_torch(b, "cuda"))
            prep_s = time.perf_counter() - started
            for path in wanted:
                bar.update(task, description=f"{case.label}: {path}")
                if path in VULKAN_PATHS:
                    if vulkan is None:
                        results.append(_result(path, case, "skipped", vulkan_reason))
                    else:
                        results.append(run_vulkan_path(vulkan, path, case, inputs, rows, reference, iters=iters,
                                                       warmup=warmup, flush_l2=flush_l2, tune=tune))
                elif not cuda_ok:
                    results.append(_result(path, case, "skipped", cuda_reason))
                else:
                    results.append(run_cuda_path(path, case, device_inputs, rows, reference, iters=iters,
                                                 warmup=warmup, flush_l2=flush_l2))
                bar.advance(task)
            del device_inputs
            if progress and console is not None:
                console.log(f"{case.label}: inputs prepared in {prep_s:.1f} s")
    if vulkan is not None:
        vulkan.close()
    _add_ratios(results)
    outcome = BenchResult(results, environment, settings)
    report.print_table(outcome, console)
    if json_path:
        report.write_json(outcome, json_path)
    if plot_path:
        report.plot(outcome, plot_path)
    return outcome
