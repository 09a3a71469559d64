"""vkcoop.bench: benchmarks that compare GEMM paths across Vulkan and CUDA in one process.

``run_sparse_bench(dtypes=("fp16", "bf16"), sizes=(4096, 8192), shapes=("square", "llm"), iters=20, warmup=5,
flush_l2=False, paths=None, tune=False, llm_tokens=32, device=None, validate=False, console=None,
progress=True) -> BenchResult`` is what ``vkcoop bench sparse`` calls (:mod:`vkcoop.bench.report` prints and
writes it); see :mod:`vkcoop.bench.sparse` for the paths and :mod:`vkcoop.bench.measure` for the check and the
timing rules.
"""
from .measure import PathResult, measure_path
from .sparse import (CUDA_PATHS, LLM_TOKENS, PATH_NAMES, SHAPES, VULKAN_PATHS, BenchResult, make_cases,
                     run_sparse_bench)

__all__ = ["run_sparse_bench", "BenchResult", "PathResult", "measure_path", "make_cases", "PATH_NAMES",
           "VULKAN_PATHS", "CUDA_PATHS", "SHAPES", "LLM_TOKENS"]
