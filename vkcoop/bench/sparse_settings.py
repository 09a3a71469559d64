"""What a ``vkcoop bench sparse`` run is asked to measure: :class:`SparseBenchSettings`, one frozen object that the
command line builds from its options (an API caller builds its own) and :func:`vkcoop.bench.sparse.run_sparse_bench`
takes. :meth:`SparseBenchSettings.resolved` checks it before any GPU work and fills in the preset's grid and every
path; the run's JSON records that resolved object under ``settings`` (``dataclasses.asdict``).

How a run is shown (``console``, ``progress``) and where it remembers (the tuning cache) are not what it measures:
they stay arguments of the run.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from ..errors import InputError
from ..gemm.path import GemmProblem
from ..gemm.paths import VULKAN_PATH_NAMES
from .library_cache import SEARCH_DEPTHS
from .report import TIMING
from .shapes import make_cases, preset_grid

VULKAN_PATHS = VULKAN_PATH_NAMES
CUDA_PATHS = ("cuda-mma.sp", "cuda-wgmma.sp", "cuSPARSELt", "cuSPARSELt-nvmath", "torch-semi-structured", "cuBLAS",
              "cuda-mma.sync", "cuda-mma.sync-cap", "cuda-mma.sp-cap")
PATH_NAMES = VULKAN_PATHS + CUDA_PATHS
DEFAULT_TUNE_BUDGET = 600.0
DEFAULT_SEARCH_BUDGET = 15.0


def as_tuple(value):
    """A list or tuple as a tuple, one value as a tuple of it, None as None: settings hold no mutable lists."""
    if value is None:
        return None
    return tuple(value) if isinstance(value, (list, tuple)) else (value,)


@dataclass(frozen=True)
class SparseBenchSettings:
    """One ``bench sparse`` run. The grid (``dtypes``, ``sizes``, ``shapes``: class names and
    :class:`vkcoop.bench.shapes.UserShape` objects, ``llm_tokens``) is the ``preset``'s (:data:`.shapes.PRESETS`)
    where a field is None; ``paths`` None is every path of :data:`PATH_NAMES`. ``tune`` tunes what the tuning cache
    lacks, ``retune`` tunes again, both within ``tune_budget_s``; ``search`` says how far the library paths search
    where the library cache has nothing (a deep search: up to ``search_budget_s`` per case and path); ``baseline``:
    the path the plot divides by; ``ceilings``: afterwards measure ``bench peak``'s ceilings in this process;
    ``clock_trace``: sample the GPU's clocks beside the run (:mod:`vkcoop.bench.clocks`).
    ``timing`` says what every figure measures (not an option)."""
    preset: str = "default"
    dtypes: tuple[str, ...] | None = None
    sizes: tuple[int, ...] | None = None
    shapes: tuple | None = None
    llm_tokens: tuple[int, ...] | None = None
    paths: tuple[str, ...] | None = None
    iters: int = 20
    warmup: int = 5
    flush_l2: bool = False
    tune: bool = False
    retune: bool = False
    tune_budget_s: float = DEFAULT_TUNE_BUDGET
    search: str = "quick"
    search_budget_s: float = DEFAULT_SEARCH_BUDGET
    baseline: str = "cuBLAS"
    ceilings: bool = False
    clock_trace: bool = True
    device: int | str | None = None
    validate: bool | str = False
    timing: str = field(default=TIMING, init=False)

    def __post_init__(self):
        for name in ("dtypes", "sizes", "shapes", "llm_tokens", "paths"):
            object.__setattr__(self, name, as_tuple(getattr(self, name)))

    def resolved(self) -> SparseBenchSettings:
        """These settings with the preset's grid and every path filled in; an InputError naming the option for
        anything out of range, before any GPU work."""
        if self.search not in SEARCH_DEPTHS:
            raise InputError(f"--search {self.search!r}: choose from {', '.join(SEARCH_DEPTHS)}")
        if self.iters < 1 or self.warmup < 0:
            raise InputError(f"--iters must be >= 1 and --warmup >= 0 (got {self.iters}, {self.warmup})")
        if not (self.tune_budget_s > 0 and self.search_budget_s > 0):
            raise InputError(f"--tune-budget and --search-budget must be positive (got {self.tune_budget_s}, "
                             f"{self.search_budget_s})")
        paths = PATH_NAMES if self.paths is None else self.paths
        unknown = [p for p in paths if p not in PATH_NAMES]
        if unknown:
            raise InputError(f"unknown path(s) {', '.join(unknown)}; choose from {', '.join(PATH_NAMES)}")
        if self.baseline not in PATH_NAMES:
            raise InputError(f"--baseline {self.baseline!r}: choose from {', '.join(PATH_NAMES)}")
        grid = preset_grid(self.preset, dtypes=self.dtypes, sizes=self.sizes, shapes=self.shapes,
                           llm_tokens=self.llm_tokens)
        resolved = replace(self, paths=paths, dtypes=grid["dtypes"], sizes=tuple(int(s) for s in grid["sizes"]),
                           shapes=grid["shapes"], llm_tokens=grid["llm_tokens"])
        resolved.cases()      # the grid's own checks (sizes, dtypes, shape classes, tokens)
        return resolved

    def cases(self) -> list[GemmProblem]:
        """The problems of a resolved grid, in the order they are measured (:func:`.shapes.make_cases`)."""
        return make_cases(self.dtypes, self.sizes, self.shapes, self.llm_tokens)
