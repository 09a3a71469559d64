"""What the compute-sanitizer pass launches (:mod:`vkcoop.cuda.sanitizer`): every configuration of the hand-written
kernels that ships or that the tests run, at problems small enough for racecheck yet reaching each code path, and
the peak kernels. A job is a JSON-able dict that :mod:`vkcoop.cuda.sanitize_child` runs.

mma.sp (``MmaSpGemm.CONFIGS``), plain and pipelined kernels: three row tiles by two column tiles (a partial group of
the grouped raster) over ``stages + 2`` K slices (the ring of shared-memory stages wraps), and a single tile of one
slice (fewer slices than stages: with three or more, the prologue commits empty groups). Split-K (``wN``) and
cluster-summed (``wNcs``) configurations: three tiles over 23 slices (the last split gets fewer: 12 splits of 2 where
they sum in global memory, one short; 8 of 3 in a cluster, the last of 2) and two tiles of two slices (one slice a
split). wgmma.sp (``CONFIGS`` and the fp16 ``DIAGNOSTIC_CONFIGS``): three row tiles by two column tiles over
``stages + 3`` slices (the mbarrier ring wraps, parities flip), and one tile of one slice, a persistent walk on
``PERSISTENT_CTAS`` CTAs (each walks three of the six tiles, the ring's count running on); its cluster-summed
split-K configurations the uneven and the one-slice splits of mma.sp's, in the type's slices (64 deep for fp16 and
bf16, 128 for the 8-bit types, 32 for tf32). The tiles that run every wgmma.sp type run tf32, e4m3, e5m2, int8 and
uint8 on their first problem (an odd count of slices: the 8-bit types' loop of slice pairs and its last slice), and
e4m3 on the second too (one slice, or one a split: that last slice alone).
The dense mma.sync kernel (``MmaDenseGemm.CONFIGS``, kernel "mma.sync"): the mma.sp problems, and one more with
edges: M and N past whole tiles (the rows past them zero-filled and not stored), N odd (C stored an element at a
time), K a multiple of 8 but not of the slice (the last slice's tail zero-filled); whole-K tiles over three
slices, split tiles over six, one a split. fp16 on every problem; bf16 (another entry point each) on the first. Each
runs twice: the split kernels must leave their counters at zero for the next launch.
"""
from __future__ import annotations

from .configs import MmaDenseConfig, MmaSpConfig, WgmmaSpConfig
from .dense import MmaDenseGemm
from .gemm import MmaSpGemm, WgmmaSpGemm
from .wgmma_types import SIXTEEN_BIT
from .peak import FORMS

UNEVEN_SLICES = 23
#: The CTAs a persistent wgmma.sp job launches, whatever the GPU's SM count: fewer than its problem's tiles.
PERSISTENT_CTAS = 2
#: The type whose tiles run both problems: an 8-bit type, two metadata words a slice.
TWO_WORD_PROBE = "float8_e4m3fn"


def mma_sp_problems(cfg: MmaSpConfig | MmaDenseConfig) -> list[tuple[str, int, int, int]]:
    """(what it reaches, M, N, K) for an mma.sp configuration (and the whole-tile problems of a dense one)."""
    if cfg.per_sm:
        return [("uneven K splits", 3 * cfg.bm, cfg.bn, UNEVEN_SLICES * cfg.bk),
                ("one slice a split", cfg.bm, 2 * cfg.bn, 2 * cfg.bk)]
    return [("ring wraps, partial raster group", 3 * cfg.bm, 2 * cfg.bn, (cfg.stages + 2) * cfg.bk),
            ("one slice", cfg.bm, cfg.bn, cfg.bk)]


def mma_dense_problems(cfg: MmaDenseConfig) -> list[tuple[str, int, int, int]]:
    """(what it reaches, M, N, K) for a dense mma.sync configuration: those of :func:`mma_sp_problems`, then one with
    edges: M and N past whole tiles, N odd, K a multiple of 8 past whole slices (whole K: 2 x 2 tiles over three
    slices; split: two tiles over six slices, one a split, the last 8 deep)."""
    ragged_m = cfg.bm + cfg.bm // 2 + 1
    if cfg.per_sm:
        edges = ("ragged, odd N, K tail, one slice a split", ragged_m, cfg.bn // 2 + 1, 5 * cfg.bk + 8)
    else:
        edges = ("ragged, odd N, K tail", ragged_m, cfg.bn + cfg.bn // 2 + 1, 2 * cfg.bk + 8)
    return [*mma_sp_problems(cfg), edges]


def wgmma_sp_problems(cfg: WgmmaSpConfig) -> list[tuple[str, int, int, int]]:
    """(what it reaches, M, N, K) for a wgmma.sp configuration, K in slices of its type."""
    if cfg.per_sm:
        return [("uneven K splits", 3 * cfg.bm, cfg.bn, UNEVEN_SLICES * cfg.bk),
                ("one slice a split", cfg.bm, 2 * cfg.bn, 2 * cfg.bk)]
    return [("ring wraps, partial raster group", 3 * cfg.bm, 2 * cfg.bn, (cfg.stages + 3) * cfg.bk),
            ("one slice", cfg.bm, cfg.bn, cfg.bk)]


def _other_type_jobs(key: str, cfg: WgmmaSpConfig) -> list[dict]:
    """The jobs of a wgmma.sp tile in the types beyond fp16 and bf16 (module doc)."""
    jobs = []
    for dtype in (d for d in cfg.dtypes if d not in SIXTEEN_BIT):
        problems = wgmma_sp_problems(cfg.of(dtype))
        for what, m, n, k in problems if dtype == TWO_WORD_PROBE else problems[:1]:
            jobs.append({"kernel": "wgmma.sp", "config": key, "dtype": dtype, "problem": what, "m": m, "n": n,
                         "k": k})
    return jobs


def _gemm_jobs(kernel: str, key: str, problems, bf16: bool) -> list[dict]:
    jobs = []
    for index, (what, m, n, k) in enumerate(problems):
        for dtype in ("float16", "bfloat16") if bf16 and index == 0 else ("float16",):
            jobs.append({"kernel": kernel, "config": key, "dtype": dtype, "problem": what, "m": m, "n": n, "k": k})
    return jobs


def shipped_jobs() -> list[dict]:
    """Every mma.sp, wgmma.sp and dense mma.sync configuration on its problems, then every peak kernel."""
    jobs = []
    for key, cfg in MmaSpGemm.CONFIGS.items():
        jobs += _gemm_jobs("mma.sp", key, mma_sp_problems(cfg), bf16=True)
    for key, cfg in WgmmaSpGemm.CONFIGS.items():
        jobs += _gemm_jobs("wgmma.sp", key, wgmma_sp_problems(cfg), bf16=not cfg.fp16_only)
        jobs += _other_type_jobs(key, cfg)
    for index, cfg in enumerate(WgmmaSpGemm.DIAGNOSTIC_CONFIGS):
        jobs += _gemm_jobs("wgmma.sp", f"diagnostic:{index}", wgmma_sp_problems(cfg), bf16=False)
    for key, cfg in MmaDenseGemm.CONFIGS.items():
        jobs += _gemm_jobs("mma.sync", key, mma_dense_problems(cfg), bf16=True)
    jobs += [{"kernel": "peak", "name": form.kernel} for form in FORMS]
    jobs += [{"kernel": "stream_read", "name": "peak_stream_read"},
             {"kernel": "mma_sp_peak", "name": "mma_sp_peak_f16"}]
    return jobs


def wgmma_config(key: str) -> WgmmaSpConfig:
    """A wgmma.sp job's configuration: a key of ``CONFIGS``, or ``diagnostic:INDEX`` of ``DIAGNOSTIC_CONFIGS``."""
    if key.startswith("diagnostic:"):
        return WgmmaSpGemm.DIAGNOSTIC_CONFIGS[int(key.split(":")[1])]
    return WgmmaSpGemm.CONFIGS[key]


def job_config(job: dict) -> MmaSpConfig | WgmmaSpConfig | MmaDenseConfig | None:
    """A GEMM job's configuration; None for a peak kernel (its job names its entry point)."""
    if job["kernel"] == "mma.sp":
        return MmaSpGemm.CONFIGS[job["config"]]
    if job["kernel"] == "wgmma.sp":
        return wgmma_config(job["config"])
    if job["kernel"] == "mma.sync":
        return MmaDenseGemm.CONFIGS[job["config"]]
    return None


def kernel_name(job: dict) -> str:
    """The entry point a job launches."""
    cfg = job_config(job)
    return job["name"] if cfg is None else cfg.kernel_name(job["dtype"])


def job_label(job: dict) -> str:
    """How a job is named in the report: its kernel entry point, configuration and problem."""
    if job_config(job) is None:
        return job["name"]
    return f"{kernel_name(job)} {job['m']}x{job['n']}x{job['k']} ({job['problem']})"
