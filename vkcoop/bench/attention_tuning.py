"""Which configuration ``vkcoop bench attention`` runs the Vulkan kernel with, and tuning, which finds it.

A case belongs to a class by its kind, head_dim and mask, and decode by whether it has GQA (:func:`attention_class`:
``prefill-d128-causal``, ``decode-d64``, ``decode-d64-mha``). Per device, dtype and class the configuration comes
from, in this order:

* ``--tile``: the given tile (source ``given``);
* tuning (``tune`` where the cache has no entry for the class, ``retune`` always): the seed and every candidate
  of :func:`vkcoop.attention.vulkan.candidate_configs` are checked and timed on the class's first case, within the
  run's budget, and the fastest is stored, unless it beats the incumbent (the seed, else the table's default) by
  less than :data:`TUNING_MARGIN` (source ``tuned``);
* the per-device tuning cache, the files the GEMM's tuning also writes (:class:`vkcoop.bench.tuning.TuningCache`,
  path :data:`TUNING_PATH`, listed by ``vkcoop bench tuning``; source ``cache``);
* the shipped seeds of the device (:data:`vkcoop.attention.seeds.ATTENTION_SEEDS`, by the name the driver reports,
  which :func:`vkcoop.attention.attention` runs too; source ``seed``);
* the rule (:func:`vkcoop.attention.choose_config`, from the device's table; source ``default``).

An entry is a configuration label with the choices that follow the shape left open (key splits, GQA rows, the
causal order), so one winner serves every sequence length of its class. An entry or seed the device's table does
not take is passed over for the next source; an entry whose label this version no longer reads is dropped from the
cache with one line, and ``--tune`` measures its class again.
"""
from __future__ import annotations

import datetime
import time
from dataclasses import dataclass

from ..attention import AttentionConfig, AttentionInputError, parse_attention_config, seeds
from ..attention.tiles import CONFIG_GRAMMAR
from .report import error_line

#: The tuning cache's path name for the attention kernel (the GEMM paths are ``vk-coopmat2-dense`` ...).
TUNING_PATH = "vk-coopmat2-attention"
#: Least warm-up wall time before each candidate is timed: the winner is timed again with the run's own warm-up.
TUNING_WARMUP_SECONDS = 1.0
#: A candidate replaces the incumbent (the seed, else the table's default) only when this much faster: on the H100
#: the candidates of a decode class at kv 8k came within 1 % of each other from run to run (docs/attention.md,
#: experiment 44), and a tie should not change what runs.
TUNING_MARGIN = 0.02


def attention_class(case) -> str:
    """The tuning class of an attention case (:func:`vkcoop.attention.seeds.attention_class`): its kind, head_dim
    and, for prefill, the causal mask; decode without GQA is a class of its own (``-mha``)."""
    return seeds.attention_class(case.shape, case.causal, case.kind == "decode")


def seed_config(device_name: str, case) -> AttentionConfig | None:
    return seeds.seed_config(device_name, case.shape, case.causal, case.kind == "decode")


@dataclass
class AttentionPlan:
    """What the Vulkan path runs for one case: ``configs`` (one, or a tuning's candidates, the default first)."""
    configs: list
    source: str                   # "given", "tuned", "cache", "seed", "default"
    key: tuple | None = None      # (identity, dtype, class) when a tuning's winner is to be stored
    deadline: float | None = None
    started: float = 0.0


class AttentionTuner:
    """Decides the configuration of each case (module docstring) and stores what tuning finds."""

    def __init__(self, cache, identity, *, tune: bool = False, retune: bool = False, budget: float = 600.0):
        self.cache, self.identity = cache, identity
        self.tune, self.retune = tune, retune
        self.budget_left = float(budget)
        self.tunings_left = 0
        self.tuned: dict[tuple, dict] = {}
        self.stored: list[str] = []

    def _key(self, case) -> tuple:
        return (self.identity, case.dtype, attention_class(case))

    def _cached(self, key) -> dict | None:
        if key in self.tuned:
            return self.tuned[key]
        if self.retune:
            return None
        entry = self.cache.lookup(self.identity, TUNING_PATH, key[1], key[2])
        if entry and entry.get("config") and _parsed(entry["config"]) is None:
            self.cache.drop(self.identity, TUNING_PATH, key[1], key[2],
                            f"its configuration {entry['config']!r} is not {CONFIG_GRAMMAR}; --tune measures the "
                            "class again")
            return None
        return entry

    def needs_tuning(self, key) -> bool:
        if self.identity is None or not (self.tune or self.retune) or key in self.tuned:
            return False
        return self.retune or self._cached(key) is None

    def count_tunings(self, cases) -> int:
        """How many classes the run tunes (they share the budget); call before the first :meth:`plan`."""
        self.tunings_left = sum(1 for key in {self._key(c) for c in cases} if self.needs_tuning(key))
        return self.tunings_left

    def plan(self, case, path) -> AttentionPlan:
        """``path``: the Vulkan path (``default_config``, ``candidates``, ``fits`` and ``tile`` for a case)."""
        now = time.monotonic()
        if path.tile is not None:
            return AttentionPlan([AttentionConfig(path.tile)], "given", started=now)
        key = self._key(case)
        seed = seed_config(path.device_name, case)
        seed = seed if seed is not None and path.fits(case, seed) else None
        if self.needs_tuning(key):   # the incumbent first: the seed, else the table's default
            share = self.budget_left / max(1, self.tunings_left)
            candidates = path.candidates(case)
            configs = list(dict.fromkeys(([seed] if seed else []) + candidates))
            return AttentionPlan(configs, "tuned", key, now + share, now)
        entry = self._cached(key) if self.identity is not None else None
        cached = _parsed(entry["config"]) if entry and entry["config"] else None
        if cached is not None and path.fits(case, cached):
            return AttentionPlan([cached], "cache", started=now)
        if seed is not None:
            return AttentionPlan([seed], "seed", started=now)
        return AttentionPlan([path.default_config(case)], "default", started=now)

    def finish(self, plan: AttentionPlan, case, tried: list[dict], winner: AttentionConfig | None) -> None:
        """After a tuning: account its time and store the winner (``tried``: what each candidate did)."""
        if plan.source != "tuned":
            return
        self.budget_left = max(0.0, self.budget_left - (time.monotonic() - plan.started))
        self.tunings_left = max(0, self.tunings_left - 1)
        best = next((t for t in tried if winner is not None and t["config"] == winner.label()), None)
        entry = {"config": winner.label() if winner else None, "median_ms": best and best["median_ms"],
                 "tflops": best and best["tflops"], "problem": case.label,
                 "candidates": sum(1 for t in tried if t["status"] != "not tried"),
                 "when": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}
        self.tuned[plan.key] = entry
        if winner is not None:
            identity, dtype, cls = plan.key
            self.stored.append(str(self.cache.store(identity, TUNING_PATH, dtype, cls, entry)))


def _parsed(label) -> AttentionConfig | None:
    try:
        return parse_attention_config(label)
    except AttentionInputError:
        return None


def tune_case(plan: AttentionPlan, measure_one, progress=None) -> tuple[AttentionConfig | None, list[dict]]:
    """Check and time each candidate of a tuning plan (``measure_one(config, warmup_seconds)`` returns an
    :class:`vkcoop.bench.attention.AttentionResult`; ``progress(done, total, label)`` hears of each before it runs);
    the first is always tried, the others until the deadline. Returns the winner (None if no candidate passed) and
    a record of every candidate: the fastest that passed, but the first (the incumbent) where none beats it by
    :data:`TUNING_MARGIN`."""
    tried, best, incumbent = [], None, None
    for index, config in enumerate(plan.configs):
        if progress is not None:
            progress(index, len(plan.configs), config.label())
        record = {"config": config.label(), "status": "not tried", "ran": "", "median_ms": None, "tflops": None,
                  "reason": ""}
        tried.append(record)
        if index and plan.deadline is not None and time.monotonic() > plan.deadline:
            record["reason"] = "the tuning budget ran out"
            continue
        try:
            result = measure_one(config, TUNING_WARMUP_SECONDS)
        except Exception as error:  # noqa: BLE001 - a candidate the driver refuses is recorded, not fatal
            record.update(status="error", reason=error_line(error))
            continue
        record.update(status=result.status, ran=result.config, median_ms=result.median_ms, tflops=result.tflops,
                      reason=result.reason)
        if result.status == "ok" and (best is None or result.median_ms < best[1]):
            best = (config, result.median_ms)
        if index == 0 and result.status == "ok":
            incumbent = (config, result.median_ms)
    if best is not None and incumbent is not None and best[1] > incumbent[1] * (1 - TUNING_MARGIN):
        best = incumbent
    return (best[0] if best else None), tried


__all__ = ["AttentionPlan", "AttentionTuner", "TUNING_MARGIN", "TUNING_PATH",
           "TUNING_WARMUP_SECONDS", "attention_class", "seed_config", "tune_case"]
