"""vkcoop.bench: benchmarks that compare GEMM paths across Vulkan and CUDA in one process.

``run_sparse_bench(dtypes=("fp16", "bf16"), sizes=(4096, 8192), shapes=("square", "llm"), iters=20, warmup=5,
flush_l2=False, paths=None, tune=False, llm_tokens=32, device=None, validate=False, json_path=None,
plot_path=None, console=None, progress=True) -> BenchResult`` is what ``vkcoop bench sparse`` calls; see
:mod:`vkcoop.bench.sparse` for the paths, the checks and the timing rules.
"""
from .sparse import (CUDA_PATHS, DTYPES, LLM_TOKENS, PATH_NAMES, SHAPES, VULKAN_PATHS, BenchResult, Case,
                     PathResult, make_cases, run_sparse_bench)

__all__ = ["run_sparse_bench", "BenchResult", "PathResult", "Case", "make_cases", "PATH_NAMES", "VULKAN_PATHS",
           "CUDA_PATHS", "DTYPES", "SHAPES", "LLM_TOKENS"]
