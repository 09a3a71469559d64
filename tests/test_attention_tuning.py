"""Tuning of ``vkcoop bench attention`` without a GPU: the candidates a recorded device table allows, the shipped
seeds, and the order cache -> seed -> default with a fake Vulkan path whose candidates differ in speed; and
(marked gpu) a tuning run on the device that stores its winner and reads it back."""
from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import support

from vkcoop.attention import (AttentionConfig, AttentionKernel, AttentionShape, AttentionTile, check_attention_tile,
                              parse_attention_config, reference_attention, stats_columns)
from vkcoop.attention.candidates import tuning_candidates
from vkcoop.attention.tiles import SPLIT_MAX_HEAD_DIM, choose_config_for, staged_shared_bytes
from vkcoop.attention.vulkan import config_options
from vkcoop.bench import attention as bench
from vkcoop.bench import attention_report
from vkcoop.attention.seeds import ATTENTION_SEEDS
from vkcoop.bench.attention_tuning import (TUNING_MARGIN, TUNING_PATH, TUNING_WARMUP_SECONDS,
                                           AttentionPlan, attention_class, tune_case)
from vkcoop.bench.identity import DeviceIdentity
from vkcoop.bench.tuning import TuningCache, cached_entries
from vkcoop.gemm.configs import recorded_device

DOCS = Path(__file__).resolve().parents[1] / "docs"
H100_REPORT = DOCS / "h100-capabilities.json"
RECORDED = sorted(DOCS.glob("*-capabilities.json"))
H100_NAME = "NVIDIA H100 80GB HBM3"


def _device(report: Path):
    name, flexible, _, limits = recorded_device(json.loads(report.read_text()))
    return name, flexible, limits.max_dimension or None, limits.staging_bytes


def _shapes(head_dim: int) -> list[AttentionShape]:
    return [AttentionShape(4, 2048 // head_dim, 2048 // head_dim, 4096, 4096, head_dim),
            AttentionShape(1, 32, 8, 1, 16384, head_dim)]


def test_classes_follow_kind_head_dim_and_mask():
    prefill, decode = _shapes(128)
    assert attention_class(bench.AttentionCase("prefill", "fp16", True, prefill)) == "prefill-d128-causal"
    assert attention_class(bench.AttentionCase("prefill", "bf16", False, prefill)) == "prefill-d128"
    assert attention_class(bench.AttentionCase("decode", "fp16", False, decode)) == "decode-d128"
    mha = AttentionShape(1, 32, 32, 1, 16384, 64)
    assert attention_class(bench.AttentionCase("decode", "bf16", False, mha)) == "decode-d64-mha"


@pytest.mark.parametrize("report", RECORDED, ids=lambda p: p.name)
@pytest.mark.parametrize("head_dim", [64, 128])
@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
def test_candidates_fit_the_recorded_table_and_start_with_the_default(report, head_dim, dtype):
    _, flexible, limit, staging = _device(report)
    for shape in _shapes(head_dim):
        found = tuning_candidates(flexible, shape, dtype, limit, staging)
        assert found[0] == choose_config_for(flexible, shape, dtype, limit, staging)
        assert len(found) == len(set(found)) >= 4
        for config in found:
            check_attention_tile(flexible, dtype, head_dim, config.tile, limit, config.subgroup_rows)
            assert config.kv_splits is None and config.gqa_rows is None and config.order_chunk is None
            options = config_options(shape, config, causal=shape.seq_q > 1, target_workgroups=528)
            tile = options.pop("tile")
            stats = options.pop("stats_cols") or stats_columns(flexible, dtype, tile, config.subgroup_rows)
            kernel = AttentionKernel(dtype, head_dim, tile, stats_cols=stats, sm_count=132, **options)
            assert staged_shared_bytes(tile, head_dim, kernel.subgroup_rows, kernel.kv_staged) <= staging
        decode = shape.seq_q == 1
        assert all(c.tile.br == 16 for c in found) == decode
        assert any(c.subgroup_rows for c in found) == (not decode and head_dim <= SPLIT_MAX_HEAD_DIM)
        if decode:   # the waiting merge at three key steps, then the default tile with the combine pass
            assert [c.waiting_merge for c in found] == [True, True, True, False]
            assert sorted(c.tile.bc for c in found[:3]) == [found[0].tile.bc // 2, found[0].tile.bc,
                                                            found[0].tile.bc * 2]


def test_the_h100_seeds_are_candidates_of_their_class_on_the_h100_table():
    name, flexible, limit, staging = _device(H100_REPORT)
    assert name == H100_NAME and set(ATTENTION_SEEDS) == {H100_NAME}
    seeds = ATTENTION_SEEDS[H100_NAME]
    assert set(seeds) == {f"{kind}-d{d}{mask}" for d in (64, 128) for kind, mask in
                          (("prefill", ""), ("prefill", "-causal"), ("decode", ""), ("decode", "-mha"))}
    for head_dim in (64, 128):
        prefill, decode = _shapes(head_dim)
        mha = AttentionShape(1, 32, 32, 1, 16384, head_dim)
        for cls, shape in ((f"prefill-d{head_dim}", prefill), (f"prefill-d{head_dim}-causal", prefill),
                           (f"decode-d{head_dim}", decode), (f"decode-d{head_dim}-mha", mha)):
            kind = "decode" if shape.seq_q == 1 else "prefill"
            assert attention_class(bench.AttentionCase(kind, "fp16", cls.endswith("causal"), shape)) == cls
            seed = parse_attention_config(seeds[cls])
            assert seed.label() == seeds[cls]
            assert seed in tuning_candidates(flexible, shape, "fp16", limit, staging), cls


# --------------------------------------------------------------------------- a fake Vulkan path
FAST, SLOW, WRONG = AttentionTile(128, 64, 32), AttentionTile(128, 64, 64), AttentionTile(128, 128, 64)


class FakeVulkan:
    """Candidates [SLOW (the default), WRONG (fastest, but its rows are off), FAST]; times per tile."""
    name = "vk-coopmat2"
    tile = None
    times_ms = {SLOW: 3.0, WRONG: 0.5, FAST: 1.0}

    def __init__(self, device_name="Fake GPU", identity=DeviceIdentity("Fake GPU", "ab" * 16, "580.1"),
                 refuse=()):
        self.device_name, self.identity, self.refuse = device_name, identity, set(refuse)
        self.bound, self.warmups = [], []

    def default_config(self, case):
        return AttentionConfig(SLOW)

    def candidates(self, case):
        return [AttentionConfig(SLOW), AttentionConfig(WRONG), AttentionConfig(FAST)]

    def fits(self, case, config):
        return config.tile not in self.refuse

    def bind(self, case, inputs, config=None):
        config = config or self.default_config(case)
        self.bound.append(config.label())
        q, k, v = inputs
        path = self

        class Bound:
            def __init__(self):
                self.config = config.label() + "s1"   # as the real path: the launch's resolved label

            def rows(self, b, h, rows):
                kv = h // case.shape.group
                ref = reference_attention(q[b:b + 1, h:h + 1], k[b:b + 1, kv:kv + 1], v[b:b + 1, kv:kv + 1],
                                          causal=case.causal, rows=rows)[0][0, 0]
                return (ref + (1.0 if config.tile == WRONG else 0.0)).astype(q.dtype)

            def time(self, iters, warmup, warmup_seconds):
                path.warmups.append(warmup_seconds)
                return [path.times_ms[config.tile] * 1e-3] * iters

            def release(self):
                pass
        return Bound()

    def close(self):
        pass


def _run(monkeypatch, tmp_path, vulkan, **options):
    class Paths:
        def __init__(self, wanted, dtypes, device, validate, tile, flush_l2=False):
            vulkan.tile = tile
            self.objects, self.skipped = {"vk-coopmat2": vulkan}, {}
            self.vulkan_name, self.torch_name = vulkan.device_name, None

        def close(self):
            pass

    monkeypatch.setattr(bench, "_Paths", Paths)
    settings = dict(kinds=("prefill",), head_dims=(64,), seqs=(64, 128), causal=(False,), tokens=128, iters=2,
                    warmup=0, paths=["vk-coopmat2"])
    return bench.run_attention_bench(bench.AttentionBenchSettings(**{**settings, **options}), progress=False,
                                     tuning_root=tmp_path)


def test_tuning_times_every_candidate_stores_the_fastest_correct_one_and_the_next_run_reads_it(monkeypatch, tmp_path):
    vulkan = FakeVulkan()
    tuned = _run(monkeypatch, tmp_path, vulkan, tune=True)
    first, second = tuned.results     # two cases (seq 64 and 128) of one class: tuned once, on the first
    assert first.config_source == "tuned" and first.config == FAST.label() + "s1" and first.median_ms == 1.0
    assert [(t["config"], t["status"]) for t in first.tuning] == [(SLOW.label(), "ok"), (WRONG.label(), "failed"),
                                                                  (FAST.label(), "ok")]
    assert first.tuning[0]["median_ms"] == 3.0 and first.tuning[1]["median_ms"] is None   # a wrong one is not timed
    assert second.config_source == "cache" and second.config == first.config and not second.tuning
    # each candidate warmed up briefly; the winner, timed again for the report, with the run's warm-up
    assert vulkan.warmups[:2] == [TUNING_WARMUP_SECONDS] * 2 and vulkan.warmups[2] == bench.WARMUP_SECONDS
    entries = cached_entries(tmp_path)
    assert [(e["path"], e["dtype"], e["class"], e["config"], e["candidates"]) for e in entries] == [
        (TUNING_PATH, "fp16", "prefill-d64", FAST.label(), 3)]
    assert tuned.environment["tuning"]["stored"] and tuned.settings.tune is True

    again = _run(monkeypatch, tmp_path, FakeVulkan())             # a later run, without --tune
    assert [(r.config_source, r.config) for r in again.results] == [("cache", FAST.label() + "s1")] * 2


def test_without_a_cache_entry_the_seed_then_the_default_is_used(monkeypatch, tmp_path):
    monkeypatch.setitem(ATTENTION_SEEDS, "Seeded GPU", {"prefill-d64": FAST.label()})
    seeded = _run(monkeypatch, tmp_path, FakeVulkan("Seeded GPU"))
    assert {(r.config_source, r.config) for r in seeded.results} == {("seed", FAST.label() + "s1")}
    refused = _run(monkeypatch, tmp_path, FakeVulkan("Seeded GPU", refuse=[FAST]))   # the table does not take it
    assert {(r.config_source, r.config) for r in refused.results} == {("default", SLOW.label() + "s1")}
    plain = _run(monkeypatch, tmp_path, FakeVulkan())
    assert {r.config_source for r in plain.results} == {"default"} and not cached_entries(tmp_path)
    given = _run(monkeypatch, tmp_path, FakeVulkan(), tile=FAST, tune=True)   # --tile wins over everything
    assert {(r.config_source, r.config) for r in given.results} == {("given", FAST.label() + "s1")}
    assert not cached_entries(tmp_path)


def test_a_cache_entry_wins_over_the_seed_and_retune_replaces_it(monkeypatch, tmp_path):
    monkeypatch.setitem(ATTENTION_SEEDS, "Fake GPU", {"prefill-d64": SLOW.label()})
    vulkan = FakeVulkan()
    TuningCache(tmp_path).store(vulkan.identity, TUNING_PATH, "fp16", "prefill-d64", {"config": WRONG.label()})
    cached = _run(monkeypatch, tmp_path, vulkan)
    assert {r.config_source for r in cached.results} == {"cache"}
    assert {r.status for r in cached.results} == {"failed"}       # a cached entry is still checked before timing
    retuned = _run(monkeypatch, tmp_path, FakeVulkan(), retune=True)
    assert [r.config_source for r in retuned.results] == ["tuned", "cache"]
    assert [e["config"] for e in cached_entries(tmp_path)] == [FAST.label()]


def test_tunings_share_the_budget_and_the_first_candidate_is_always_tried(monkeypatch, tmp_path):
    clock = iter(np.arange(0.0, 1000.0, 10.0))
    monkeypatch.setattr("vkcoop.bench.attention_tuning.time.monotonic", lambda: float(next(clock)))
    outcome = _run(monkeypatch, tmp_path, FakeVulkan(), tune=True, tune_budget=5.0)
    first = outcome.results[0]
    assert [t["status"] for t in first.tuning] == ["ok", "not tried", "not tried"]
    assert "budget" in first.tuning[1]["reason"] and first.config == SLOW.label() + "s1"
    assert [e["config"] for e in cached_entries(tmp_path)] == [SLOW.label()]


def test_a_candidate_within_the_margin_does_not_replace_the_incumbent(monkeypatch, tmp_path):
    vulkan = FakeVulkan()
    vulkan.times_ms = {**FakeVulkan.times_ms, FAST: 3.0 * (1 - TUNING_MARGIN / 2)}   # 1 % faster than SLOW
    first = _run(monkeypatch, tmp_path, vulkan, tune=True).results[0]
    assert first.tuning[2]["median_ms"] < first.tuning[0]["median_ms"] and first.config == SLOW.label() + "s1"
    assert [e["config"] for e in cached_entries(tmp_path)] == [SLOW.label()]


def test_a_seeded_device_tunes_with_its_seed_as_the_incumbent(monkeypatch, tmp_path):
    monkeypatch.setitem(ATTENTION_SEEDS, "Seeded GPU", {"prefill-d64": FAST.label()})
    vulkan = FakeVulkan("Seeded GPU")
    vulkan.times_ms = {**FakeVulkan.times_ms, SLOW: 1.0 * (1 - TUNING_MARGIN / 2)}   # the default, 1 % faster
    first = _run(monkeypatch, tmp_path, vulkan, tune=True).results[0]
    assert [t["config"] for t in first.tuning] == [FAST.label(), SLOW.label(), WRONG.label()]
    assert first.config == FAST.label() + "s1"


def test_each_candidate_is_announced_before_it_runs():
    heard, ran = [], []
    plan = AttentionPlan([AttentionConfig(SLOW), AttentionConfig(FAST)], "tuned")

    def measure_one(config, seconds):
        ran.append(config.label())
        assert heard[-1][2] == config.label()          # the progress line names the candidate that runs now
        return bench.AttentionResult("vk-coopmat2", "case", "prefill", "fp16", False, _shapes(64)[0], status="ok",
                                     config=config.label(), median_ms=FakeVulkan.times_ms[config.tile])
    winner, tried = tune_case(plan, measure_one, lambda *args: heard.append(args))
    assert heard == [(0, 2, SLOW.label()), (1, 2, FAST.label())] and ran == [SLOW.label(), FAST.label()]
    assert winner == AttentionConfig(FAST) and [t["median_ms"] for t in tried] == [3.0, 1.0]


def test_a_candidate_that_raises_is_recorded_in_one_line_and_the_others_still_run():
    plan = AttentionPlan([AttentionConfig(SLOW), AttentionConfig(FAST)], "tuned")

    def measure_one(config, seconds):
        if config.tile == SLOW:
            raise RuntimeError("vkCreateComputePipelines failed\nVK_ERROR_OUT_OF_DEVICE_MEMORY")
        return bench.AttentionResult("vk-coopmat2", "case", "prefill", "fp16", False, _shapes(64)[0], status="ok",
                                     config=config.label(), median_ms=1.0)
    winner, tried = tune_case(plan, measure_one)
    assert (tried[0]["status"], tried[0]["reason"]) == ("error", "RuntimeError: vkCreateComputePipelines failed")
    assert winner == AttentionConfig(FAST) and tried[1]["status"] == "ok"


def test_without_a_device_identity_nothing_is_tuned_or_stored(monkeypatch, tmp_path):
    outcome = _run(monkeypatch, tmp_path, FakeVulkan(identity=None), tune=True)
    assert {r.config_source for r in outcome.results} == {"default"} and not cached_entries(tmp_path)


def test_the_table_says_where_each_configuration_came_from(monkeypatch, tmp_path):
    outcome = _run(monkeypatch, tmp_path, FakeVulkan(), tune=True)
    rows, _ = attention_report.table_rows(outcome)
    assert [row[-1] for row in rows] == [f"{FAST.label()}s1 (tuned)", f"{FAST.label()}s1 (cache)"]


@pytest.mark.parametrize("budget", [0, -1.0])
def test_a_tuning_budget_that_is_not_positive_is_refused_before_any_gpu_work(budget):
    with pytest.raises(ValueError, match="--tune-budget"):
        bench.run_attention_bench(bench.AttentionBenchSettings(tune=True, tune_budget=budget))


@pytest.mark.parametrize("label", ["not a label", "128:128x64qrk", "64:16x64s66gf"])
def test_an_entry_that_does_not_parse_is_dropped_in_one_line_and_tuned_again(monkeypatch, tmp_path, label):
    """A label this version no longer reads (such as the split's before Q in shared memory became part of its
    subgroup rows, or a merge that left the kernel) is dropped from the cache with one line, the class runs its
    default, and --tune measures it again."""
    vulkan = FakeVulkan()
    cache = TuningCache(tmp_path)
    cache.store(vulkan.identity, TUNING_PATH, "fp16", "prefill-d64", {"config": label})
    cache.store(vulkan.identity, TUNING_PATH, "bf16", "prefill-d64", {"config": FAST.label()})
    outcome = _run(monkeypatch, tmp_path, vulkan)
    assert {r.config_source for r in outcome.results} == {"default"}
    (message,) = outcome.environment["tuning"]["messages"]
    assert "\n" not in message and "prefill-d64 dropped" in message and repr(label) in message
    assert [e["config"] for e in cached_entries(tmp_path)] == [FAST.label()]   # the other entry stays
    again = _run(monkeypatch, tmp_path, vulkan, tune=True)
    assert [r.config_source for r in again.results] == ["tuned", "cache"]
    assert not again.environment["tuning"]["messages"]
    assert sorted(e["config"] for e in cached_entries(tmp_path)) == [FAST.label()] * 2


# --------------------------------------------------------------------------- on the GPU
@pytest.mark.gpu
def test_a_tuning_on_the_device_stores_a_checked_winner_and_reads_it_back(tmp_path):
    why = support.coopmat2_reason()
    if why:
        pytest.skip(why)
    support.toolchain_or_skip()
    # One class: the GQA layout only (decode without GQA is a class of its own).
    settings = bench.AttentionBenchSettings(kinds=("decode",), head_dims=(128,), decode_seqs=(8192,),
                                            decode_heads=((32, 8),), paths=["vk-coopmat2"], iters=5, warmup=2)
    tuned = bench.run_attention_bench(replace(settings, tune=True, tune_budget=120.0), progress=False,
                                      tuning_root=tmp_path)
    result = tuned.results[0]
    assert result.status == "ok" and result.config_source == "tuned", result.reason
    ok = [t for t in result.tuning if t["status"] == "ok"]
    assert len(ok) >= 2 and result.tuning[0]["status"] == "ok"
    best = min(ok, key=lambda t: t["median_ms"])
    if best["median_ms"] > result.tuning[0]["median_ms"] * (1 - TUNING_MARGIN):
        best = result.tuning[0]   # no candidate beat the incumbent by the margin
    entries = cached_entries(tmp_path)
    assert [(e["class"], e["config"]) for e in entries] == [("decode-d128", best["config"])]
    again = bench.run_attention_bench(settings, progress=False, tuning_root=tmp_path)
    assert again.results[0].config_source == "cache" and again.results[0].config == best["ran"]
