"""vkcoop.bench: benchmarks that compare GEMM paths across Vulkan and CUDA in one process.

``run_sparse_bench(dtypes=("fp16", "bf16"), sizes=(4096, 8192), shapes=("square", "llm"), iters=20, warmup=5,
flush_l2=False, paths=None, tune=False, retune=False, tune_budget=600, search_budget=15, llm_tokens=LLM_TOKENS,
baseline="cuBLAS", device=None, validate=False, console=None, progress=True) -> BenchResult`` is what
``vkcoop bench sparse`` calls (:mod:`vkcoop.bench.report` prints and writes it); see :mod:`vkcoop.bench.sparse`
for the paths, :mod:`vkcoop.bench.measure` for the check and the timing rules, :mod:`vkcoop.bench.tuning` for
the per-device tuning cache, :mod:`vkcoop.bench.shapes` for the shapes and :mod:`vkcoop.bench.compare` for
comparing two runs.
"""
from .measure import PathResult, measure_path
from .shapes import LLM_TOKENS, MLP_SHAPES, SHAPES, UserShape, make_cases, read_shape_file
from .sparse import CUDA_PATHS, PATH_NAMES, VULKAN_PATHS, BenchResult, run_sparse_bench

__all__ = ["run_sparse_bench", "BenchResult", "PathResult", "measure_path", "make_cases", "PATH_NAMES",
           "VULKAN_PATHS", "CUDA_PATHS", "SHAPES", "LLM_TOKENS", "MLP_SHAPES", "UserShape", "read_shape_file"]
