"""vkcoop.bench: benchmarks that compare GEMM paths across Vulkan and CUDA in one process.

``run_sparse_bench(SparseBenchSettings(preset="default", dtypes=None, sizes=None, shapes=None, iters=20, warmup=5,
...), console=None, progress="auto", cache=None) -> BenchResult`` is what ``vkcoop bench sparse`` calls
(:mod:`vkcoop.bench.report` prints and writes it); see :mod:`vkcoop.bench.sparse_settings` for what a run can be
asked, :mod:`vkcoop.bench.sparse` for the paths, :mod:`vkcoop.bench.measure` for the check and the timing rules,
:mod:`vkcoop.bench.tuning` for the per-device tuning cache, :mod:`vkcoop.bench.shapes` for the shapes and
:mod:`vkcoop.bench.compare` for comparing two runs.
"""
from .measure import PathResult, measure_path
from .shapes import LLM_TOKENS, MLP_SHAPES, SHAPES, UserShape, make_cases, read_shape_file
from .sparse import CUDA_PATHS, PATH_NAMES, VULKAN_PATHS, BenchResult, SparseBenchSettings, run_sparse_bench

__all__ = ["run_sparse_bench", "SparseBenchSettings", "BenchResult", "PathResult", "measure_path", "make_cases",
           "PATH_NAMES", "VULKAN_PATHS", "CUDA_PATHS", "SHAPES", "LLM_TOKENS", "MLP_SHAPES", "UserShape",
           "read_shape_file"]
