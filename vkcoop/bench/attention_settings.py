"""What a ``vkcoop bench attention`` run is asked to measure: :class:`AttentionBenchSettings`, one frozen object that
the command line builds from its options (an API caller builds its own) and
:func:`vkcoop.bench.attention.run_attention_bench` takes, and the cases it names (:func:`make_cases`).
:meth:`AttentionBenchSettings.resolved` checks it before any GPU work and fills in every path; the run's JSON records
that resolved object under ``settings`` (``dataclasses.asdict``), with each kind's warm-up as it ran.

How a run is shown (``console``, ``progress``) and where it remembers (the tuning cache's folder) are not what it
measures: they stay arguments of the run. The figures the ratios are over, where the run measured them or read them
from the spec sheet, are the run's findings: ``environment["ratios_over"]``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from ..attention import AttentionTile
from ..attention.cases import DECODE_HEADS, HIDDEN, KINDS, PREFILL_TOKENS, AttentionCase, decode_shape, prefill_shape
from ..attention.shapes import HEAD_DIMS, check_dtype
from ..gemm import DTYPES
from .attention_paths import TORCH_BACKENDS, VULKAN_PATH
from .report import TIMING
from .sparse_settings import as_tuple

PATH_NAMES = (VULKAN_PATH,) + tuple(TORCH_BACKENDS)
PREFILL_SEQS = (1024, 2048, 4096, 8192, 16384)
DECODE_SEQS = (8192, 16384, 32768, 65536)
#: Least warm-up wall time before a path is timed (vkcoop.gemm.warmup's rule takes 1 s after an idle gap). On the
#: H100 the first timing after a case's inputs were made and checked measured prefill 5-15 % slow for all of its
#: 20 or 100 runs after that 1 s, in 5 of 5 explore jobs, while the same configuration timed again seconds later was
#: steady (docs/attention.md, experiment 21); 3 s of the same work first removes it.
WARMUP_SECONDS = 3.0
#: Decode's: every path timed the same after 1 s as after 3 s, within 1 % (docs/attention.md, experiment 49).
DECODE_WARMUP_SECONDS = 1.0
#: Seconds all tunings of a run share (``--tune-budget``).
DEFAULT_TUNE_BUDGET = 600.0


def warmup_seconds_for(kind: str, given: float | None = None) -> float:
    """The least warm-up before a path is timed on a case of ``kind``: ``given``, else :data:`WARMUP_SECONDS` for
    prefill and :data:`DECODE_WARMUP_SECONDS` for decode."""
    if given is not None:
        return given
    return DECODE_WARMUP_SECONDS if kind == "decode" else WARMUP_SECONDS


def _choices(option: str, values, allowed) -> tuple:
    bad = [v for v in values if v not in allowed]
    if bad:
        raise ValueError(f"{option} {bad[0]!r}: choose from {', '.join(map(str, allowed))}")
    return tuple(values)


def _at_least(option: str, values, minimum: int) -> None:
    if any(int(v) < minimum for v in values):
        raise ValueError(f"{option} must be >= {minimum} (got {', '.join(map(str, values))})")


def make_cases(kinds=KINDS, dtypes=("fp16",), head_dims=HEAD_DIMS, seqs=PREFILL_SEQS, decode_seqs=DECODE_SEQS,
               causal=(False, True), tokens: int = PREFILL_TOKENS, hidden: int = HIDDEN,
               decode_batch: int = 1, decode_heads=DECODE_HEADS) -> list[AttentionCase]:
    """The prefill and decode cases; ValueError naming the option for anything out of range."""
    _choices("--kinds", kinds, KINDS)
    _choices("--dtype", dtypes, tuple(DTYPES))
    _choices("--head-dims", head_dims, HEAD_DIMS)
    head_counts = [h for pair in decode_heads for h in pair]
    for option, values in (("--seqs", seqs), ("--decode-seqs", decode_seqs), ("--tokens", [tokens]),
                           ("--decode-batch", [decode_batch]), ("--decode-heads", head_counts)):
        _at_least(option, values, 1)
    for q, kv in decode_heads:
        if q % kv:
            raise ValueError(f"--decode-heads {q}/{kv}: the q heads must be a multiple of the kv heads")
    cases = []
    for dtype in dtypes:
        check_dtype(dtype)
        for d in head_dims:
            if "prefill" in kinds:
                cases += [AttentionCase("prefill", dtype, bool(c), prefill_shape(s, d, tokens, hidden))
                          for s in seqs for c in causal]
            if "decode" in kinds:
                cases += [AttentionCase("decode", dtype, False, decode_shape(s, d, heads, decode_batch))
                          for heads in decode_heads for s in decode_seqs]
    return cases


@dataclass(frozen=True)
class AttentionBenchSettings:
    """One ``bench attention`` run: the cases (``kinds``, ``dtypes``, ``head_dims``, prefill ``seqs`` with their
    ``causal`` masks and ``tokens`` per case, decode ``decode_seqs``, ``decode_batch`` and ``decode_heads`` as
    (q, kv) pairs), the ``paths`` (None: every one of :data:`PATH_NAMES`), ``iters`` timed runs after ``warmup`` runs
    lasting at least ``warmup_seconds`` (None: :func:`warmup_seconds_for` each kind; ``warmup_by_kind`` records what
    each kind got), a fixed Vulkan ``tile`` (None: the tuning cache's, the seed's or the table's), ``ceiling_tflops``
    and ``bandwidth_gbs`` given for the ratios, ``ceilings`` (measure them in this process, and the decode read
    floors), ``tune``/``retune`` within ``tune_budget`` seconds, and ``flush_l2`` (256 MiB read before every timed
    run). ``timing`` says what every figure measures (not an option)."""
    kinds: tuple[str, ...] = KINDS
    dtypes: tuple[str, ...] = ("fp16",)
    head_dims: tuple[int, ...] = HEAD_DIMS
    seqs: tuple[int, ...] = PREFILL_SEQS
    decode_seqs: tuple[int, ...] = DECODE_SEQS
    causal: tuple[bool, ...] = (False, True)
    paths: tuple[str, ...] | None = None
    iters: int = 20
    warmup: int = 5
    warmup_seconds: float | None = None
    tokens: int = PREFILL_TOKENS
    decode_batch: int = 1
    decode_heads: tuple[tuple[int, int], ...] = DECODE_HEADS
    tile: AttentionTile | None = None
    ceiling_tflops: float | None = None
    bandwidth_gbs: float | None = None
    ceilings: bool = False
    tune: bool = False
    retune: bool = False
    tune_budget: float = DEFAULT_TUNE_BUDGET
    flush_l2: bool = False
    device: int | str | None = None
    validate: bool | str = False
    warmup_by_kind: dict = field(init=False, compare=False)
    timing: str = field(default=TIMING, init=False)

    def __post_init__(self):
        for name in ("kinds", "dtypes", "head_dims", "seqs", "decode_seqs", "causal", "paths"):
            object.__setattr__(self, name, as_tuple(getattr(self, name)))
        object.__setattr__(self, "decode_heads", tuple(tuple(pair) for pair in self.decode_heads))
        object.__setattr__(self, "warmup_by_kind",
                           {kind: warmup_seconds_for(kind, self.warmup_seconds) for kind in self.kinds})

    def resolved(self) -> AttentionBenchSettings:
        """These settings with every path filled in; a ValueError naming the option for anything out of range,
        before any GPU work."""
        paths = _choices("--paths", PATH_NAMES if self.paths is None else self.paths, PATH_NAMES)
        _at_least("--iters", [self.iters], 1)
        _at_least("--warmup", [self.warmup], 0)
        if not self.tune_budget > 0:
            raise ValueError(f"--tune-budget must be > 0 seconds (got {self.tune_budget})")
        if self.warmup_seconds is not None and not (self.warmup_seconds >= 0 and math.isfinite(self.warmup_seconds)):
            raise ValueError(f"--warmup-seconds must be >= 0 and finite (got {self.warmup_seconds})")
        resolved = replace(self, paths=paths)
        resolved.cases()     # the cases' own checks
        return resolved

    def cases(self) -> list[AttentionCase]:
        return make_cases(self.kinds, self.dtypes, self.head_dims, self.seqs, self.decode_seqs, self.causal,
                          self.tokens, decode_batch=self.decode_batch, decode_heads=self.decode_heads)
