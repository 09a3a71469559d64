"""The per-device tuning cache and the tuner (vkcoop.bench.tuning), and configuration derivation from recorded
flexible-dimension tables (vkcoop.gemm.configs): no GPU.

Derivation is checked on every recorded device report ``docs/*-capabilities.json`` (``vkcoop info --json`` of one
device): the H200's and the H100's (recorded on 2026-11-25)."""
from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from vkcoop import gemm
from vkcoop.bench import measure
from vkcoop.bench import sparse as bench
from vkcoop.bench.identity import DeviceIdentity, normalize_driver, normalize_uuid
from vkcoop.bench.tuning import CACHE_FORMAT, Tuner, TuningCache, cached_entries
from vkcoop.gemm.configs import (EXPANDED_PATHS, NARROW_FALLBACK_SPLIT, NARROW_FILLS, PATH_KERNELS, DeviceLimits,
                                 derive_khr_configs, derive_workgroup_configs, path_kernel, path_types,
                                 recorded_device, tuning_class)
from vkcoop.gemm.path import GemmOperands, GemmProblem
from vkcoop.gemm.paths import SEED_CONFIGS, SEED_DEVICE

DOCS = Path(__file__).resolve().parents[1] / "docs"
RECORDED = sorted(DOCS.glob("*-capabilities.json"))
#: SM counts of devices whose reports predate recording it (GPU_HOST.md); a report with "sm_count" wins.
KNOWN_SM_COUNTS = {"NVIDIA H200": 132, "NVIDIA H100 80GB HBM3": 132}
H200 = DeviceIdentity("NVIDIA H200", "0c6a050119c39d5db69f4b09a9850655", "580.159.4")
# A device without shipped seeds (the H100 SXM has seeds now; its PCIe sibling does not): it tunes on first use.
H100 = DeviceIdentity("NVIDIA H100 PCIe", "11112222333344445555666677778888", "580.159.4")
COOPMAT2_PATHS = list(PATH_KERNELS)
SQUARE = GemmProblem("fp16", "square", 2176, 2176, 128)   # 289 tiles of 128x128: the compute class
LLM = GemmProblem("fp16", "llm", 512, 32, 512)


# --- identity ---------------------------------------------------------------------------------------------------
def test_vulkan_and_cuda_spellings_of_one_gpu_give_one_key():
    assert normalize_driver("580.159.4.0") == normalize_driver("580.159.04") == "580.159.4"
    assert normalize_uuid("GPU-0c6a0501-19c3-9d5d-b69f-4b09a9850655") == normalize_uuid(
        bytes.fromhex("0c6a050119c39d5db69f4b09a9850655")) == H200.uuid
    assert normalize_uuid(bytes(16)) == "" and normalize_uuid(None) == ""
    assert H200.file_stem == "nvidia-h200-0c6a050119c3"


# --- the cache --------------------------------------------------------------------------------------------------
def _entry(config: str, tflops: float = 100.0) -> dict:
    return {"config": config, "median_ms": 1.0, "tflops": tflops, "problem": "4096x4096x4096"}


def test_entries_are_keyed_by_device_uuid_driver_path_dtype_and_class(tmp_path):
    cache = TuningCache(tmp_path)
    cache.store(H200, "vk-coopmat2-dense", "fp16", "compute", _entry("a"))
    cache.store(H200, "vk-coopmat2-dense", "bf16", "compute", _entry("b"))
    cache.store(H200, "vk-coopmat2-dense", "fp16", "narrow64", _entry("c"))
    cache.store(H200, "vk-coopmat2-2:4", "fp16", "compute", _entry("d"))
    cache.store(H100, "vk-coopmat2-dense", "fp16", "compute", _entry("e"))
    other_board = replace(H200, uuid="ffff050119c39d5db69f4b09a9850655")
    fresh = TuningCache(tmp_path)    # read back from the files
    assert [fresh.lookup(H200, "vk-coopmat2-dense", "fp16", "compute")["config"],
            fresh.lookup(H200, "vk-coopmat2-dense", "bf16", "compute")["config"],
            fresh.lookup(H200, "vk-coopmat2-dense", "fp16", "narrow64")["config"],
            fresh.lookup(H200, "vk-coopmat2-2:4", "fp16", "compute")["config"],
            fresh.lookup(H100, "vk-coopmat2-dense", "fp16", "compute")["config"]] == list("abcde")
    assert fresh.lookup(other_board, "vk-coopmat2-dense", "fp16", "compute") is None
    assert fresh.lookup(H200, "vk-coopmat2-dense", "fp16", "narrow16") is None
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"{H100.file_stem}.json", f"{H200.file_stem}.json"]
    data = json.loads((tmp_path / f"{H200.file_stem}.json").read_text())
    assert data["format"] == CACHE_FORMAT and data["device"] == H200.to_dict() and len(data["entries"]) == 4
    rows = cached_entries(tmp_path)
    assert len(rows) == 5 and {r["device"] for r in rows} == {H200.name, H100.name}
    assert all(r["driver"] == "580.159.4" and r["config"] for r in rows)


def test_a_driver_change_invalidates_the_device_entries(tmp_path):
    TuningCache(tmp_path).store(H200, "vk-coopmat2-dense", "fp16", "compute", _entry("old"))
    lines = []
    updated = replace(H200, driver="590.10")
    cache = TuningCache(tmp_path, log=lines.append)
    assert cache.lookup(updated, "vk-coopmat2-dense", "fp16", "compute") is None
    assert len(lines) == 1 and "580.159.4" in lines[0] and "590.10" in lines[0] and "re-tuned" in lines[0]
    cache.store(updated, "vk-coopmat2-dense", "bf16", "compute", _entry("new"))
    data = json.loads(cache.file_for(updated).read_text())
    assert data["device"]["driver"] == "590.10" and list(data["entries"]) == ["vk-coopmat2-dense|bf16|compute"]
    # the old driver's entry does not come back for the old driver either: it was measured on other software
    assert TuningCache(tmp_path, log=lines.append).lookup(H200, "vk-coopmat2-dense", "fp16", "compute") is None


@pytest.mark.parametrize("content, why", [
    ("{not json", "is not JSON"),
    ('{"format": 99, "device": {}, "entries": {}}', "format-1"),
    ('{"format": 1, "device": {"driver": "580.159.4"}, "entries": {"nokey": {"config": "x"}}}', "malformed"),
    ('[1, 2, 3]', "format-1"),
    ("\udcff", "cannot be read"),
])
def test_a_corrupt_cache_file_is_rejected_with_one_line_and_rebuilt(tmp_path, content, why):
    cache_file = tmp_path / f"{H200.file_stem}.json"
    if content == "\udcff":
        cache_file.write_bytes(b"\xff\xfe\x00garbage")
    else:
        cache_file.write_text(content)
    lines = []
    cache = TuningCache(tmp_path, log=lines.append)
    assert cache.lookup(H200, "vk-coopmat2-dense", "fp16", "compute") is None
    assert len(lines) == 1 and "\n" not in lines[0]
    assert str(cache_file) in lines[0] and "rejected" in lines[0] and why in lines[0] and "rebuilt" in lines[0]
    assert (tmp_path / f"{cache_file.name}.corrupt").exists()
    cache.store(H200, "vk-coopmat2-dense", "fp16", "compute", _entry("fresh"))
    assert TuningCache(tmp_path).lookup(H200, "vk-coopmat2-dense", "fp16", "compute")["config"] == "fresh"


def test_bench_tuning_lists_entries_and_rejects_a_corrupt_file(tmp_path):
    TuningCache(tmp_path).store(H200, "cuda-wgmma.sp", "bf16", "narrow16", _entry("128x16"))
    (tmp_path / "broken-0000.json").write_text("]")
    lines = []
    rows = cached_entries(tmp_path, log=lines.append)
    assert [(r["path"], r["dtype"], r["class"], r["config"]) for r in rows] == [
        ("cuda-wgmma.sp", "bf16", "narrow16", "128x16")]
    assert len(lines) == 1 and "broken-0000.json" in lines[0]


# --- the tuner --------------------------------------------------------------------------------------------------
class FakeBound:
    def __init__(self, operands, config, speeds, broken):
        self.operands, self.config, self.speed, self.broken = operands, config, speeds[config], config in broken

    def output_rows(self, rows):
        exact = self.operands.reference
        return np.zeros_like(exact) if self.broken else exact

    def time(self, iterations, warmup, flush_l2):
        return [self.speed * (1 + 0.01 * (i % 3)) for i in range(iterations)]

    def release(self):
        pass


class FakePath:
    """A GemmPath whose configurations are strings with fixed speeds; ``delay`` seconds per bind."""

    def __init__(self, name="vk-coopmat2-dense", speeds=None, broken=(), default="b", delay=0.0):
        self.name, self.default, self.delay = name, default, delay
        self.speeds = speeds or {"a": 3e-3, "b": 2e-3, "c": 1e-3, "d": 4e-3}
        self.broken, self.bound = set(broken), []

    def supports(self, problem):
        return True, ""

    def configs(self, problem, tune):
        return list(self.speeds) if tune else [self.default]

    def config_from_label(self, label, problem):
        return label if label in self.speeds else None

    def bind(self, operands, config):
        time.sleep(self.delay)
        self.bound.append(config)
        return FakeBound(operands, config, self.speeds, self.broken)

    def close(self):
        pass


def _measure(tuner, path, problem=SQUARE):
    operands = GemmOperands.make(problem)
    plan = tuner.plan(path, problem)
    result = measure.measure_path(path, operands, iters=4, warmup=0, flush_l2=False, tune=False,
                                  configs=plan.configs, deadline=plan.deadline)
    result.config_source = plan.source
    tuner.finish(plan, problem, result)
    return plan, result


def test_an_unknown_device_tunes_first_and_reads_the_cache_afterwards(tmp_path):
    path = FakePath(broken={"a"})
    tuner = Tuner(TuningCache(tmp_path), {"vulkan": H100})
    assert tuner.count_tunings([path], [SQUARE, LLM]) == 2   # two tuning classes
    plan, result = _measure(tuner, path)
    assert plan.source == "tuned" and result.status == "ok" and result.config == "c"
    assert [e["config"] for e in result.tuning] == ["a", "b", "c", "d"] and result.tuning[0]["status"] == "failed"
    assert tuner.stored and TuningCache(tmp_path).lookup(H100, path.name, "fp16", "compute")["config"] == "c"
    bigger = GemmProblem("fp16", "square", 4096, 2048, 128)    # same class: no second tuning
    plan, result = _measure(tuner, path, bigger)
    assert plan.source == "cache" and plan.configs == ["c"] and len(result.tuning) == 1
    later = Tuner(TuningCache(tmp_path), {"vulkan": H100})       # a later run reads the file
    assert later.count_tunings([path], [SQUARE]) == 0
    assert later.plan(path, SQUARE).configs == ["c"] and later.plan(path, SQUARE).source == "cache"


def test_the_seed_device_uses_its_seeds_until_asked_to_tune(tmp_path):
    path = FakePath()
    seeded = Tuner(TuningCache(tmp_path), {"vulkan": H200})
    assert seeded.count_tunings([path], [SQUARE]) == 0
    plan = seeded.plan(path, SQUARE)
    assert plan.source == "seed" and plan.configs == ["b"]
    tuning = Tuner(TuningCache(tmp_path), {"vulkan": H200}, tune=True)
    plan, _ = _measure(tuning, path)
    assert plan.source == "tuned"
    again = Tuner(TuningCache(tmp_path), {"vulkan": H200}, tune=True)   # --tune: only what the cache lacks
    assert again.plan(path, SQUARE).source == "cache"
    forced = Tuner(TuningCache(tmp_path), {"vulkan": H200}, retune=True)
    assert forced.plan(path, SQUARE).source == "tuned"


def test_without_a_device_identity_nothing_is_tuned_or_stored(tmp_path):
    path = FakePath()
    tuner = Tuner(TuningCache(tmp_path), {"vulkan": None}, tune=True)
    plan = tuner.plan(path, SQUARE)
    assert plan.source == "default" and plan.configs == ["b"] and not list(tmp_path.iterdir())


def test_tunings_share_the_budget_and_stop_at_it(tmp_path):
    speeds = {f"c{i}": 1e-3 * (i + 1) for i in range(30)}
    path = FakePath(speeds=speeds, default="c0", delay=0.02)
    tuner = Tuner(TuningCache(tmp_path), {"vulkan": H100}, budget=0.3)
    assert tuner.count_tunings([path], [SQUARE, LLM]) == 2
    started = time.monotonic()
    plan, result = _measure(tuner, path)
    assert plan.deadline - plan.started == pytest.approx(0.15, abs=0.01)   # half of the budget each
    assert time.monotonic() - started < 0.3 + 0.1
    assert result.status == "ok" and result.tuning[-1]["status"] == "budget"
    tried = [e for e in result.tuning if e.get("config")]
    assert 1 <= len(tried) < len(speeds) and "not tried" in result.tuning[-1]["reason"]
    # the second tuning gets what the first left
    plan = tuner.plan(path, LLM)
    assert plan.source == "tuned" and plan.deadline - plan.started <= 0.3


def test_the_progress_of_a_tuning_reaches_the_bar(tmp_path):
    class Shown:
        def __init__(self):
            self.details = []

        def detail(self, text, done=None, total=None):
            self.details.append((text, done, total))

    path, shown = FakePath(), Shown()
    tuner = Tuner(TuningCache(tmp_path), {"vulkan": H100})
    settings = bench.SparseBenchSettings(iters=3, warmup=0)
    result = bench._measure(path, GemmOperands.make(SQUARE), tuner, shown, settings)
    assert result.config_source == "tuned"
    counts = [(done, total) for _, done, total in shown.details if done is not None]
    assert [done for done, _ in counts] == [1, 2, 3, 4] and {total for _, total in counts} == {4}
    assert shown.details[0] == (f"{path.name}: tuned", None, None)
    assert all("(tuned)" in text for text, done, _ in shown.details if done is not None)


# --- derivation from recorded tables ----------------------------------------------------------------------------
def _recorded(path: Path):
    name, flexible, khr, limits = recorded_device(json.loads(path.read_text()))
    if limits.sm_count is None:
        limits = replace(limits, sm_count=KNOWN_SM_COUNTS.get(name))
    return name, flexible, khr, limits


def test_a_recorded_device_report_exists():
    assert any(p.name == "h200-capabilities.json" for p in RECORDED)


PROBLEMS = [GemmProblem(d, "square", 8192, 8192, 8192) for d in ("fp16", "bf16")] + [
    GemmProblem("fp16", "mlp", 5120, 13824, 5120)] + [
    GemmProblem(d, "llm", m, n, m) for d in ("fp16", "bf16") for m in (4096, 8192) for n in (1, 8, 32, 128, 256)]


@pytest.mark.parametrize("report", RECORDED, ids=lambda p: p.name)
@pytest.mark.parametrize("path_name", COOPMAT2_PATHS)
def test_derived_configurations_fit_the_recorded_device(report, path_name):
    name, flexible, khr, limits = _recorded(report)
    fp32_results = path_types(path_name, "fp16").output_dtype == np.float32
    for problem in PROBLEMS:
        if not fp32_results and problem.dtype != "fp16":
            continue   # the fp16-accumulating path takes fp16 inputs only
        configs = derive_workgroup_configs(path_name, problem, flexible, limits)
        assert configs, (name, problem)
        assert len(configs) == len(set(configs)) <= 12
        for config in configs:
            tile = config.tile
            gemm.check_workgroup_tile(flexible, path_types(path_name, problem.dtype), tile)
            path_kernel(path_name, config, problem.dtype)   # the kernel takes it
            assert tile.workgroup_size <= limits.max_workgroup
            assert max(tile.tile_m, tile.tile_n, tile.tile_k) <= (limits.max_dimension or 1 << 30)
            assert (tile.tile_m + tile.tile_n) * tile.tile_k * 2 <= limits.staging_bytes
            assert config.meta_words in gemm.META_WORDS_CHOICES
            if path_name != "vk-coopmat2-2:4":
                assert config.meta_words == 0
            if tuning_class(problem) == "compute":   # one K slice; the best tile's tail split sizes its wave by w
                assert tile.split_k == 1 and (tile.per_sm == 0) != tile.tail
            else:   # narrow: split-K fills one wave of per_sm workgroups per SM, resolved per problem
                assert tile.per_sm in NARROW_FILLS and tile.split_k == NARROW_FALLBACK_SPLIT
                ran = config.for_problem(problem, 132).tile
                tiles = -(-problem.m // tile.tile_m) * -(-problem.n // tile.tile_n)
                assert ran.split_k == 1 or tiles * ran.split_k <= 132 * tile.per_sm
                assert ran.split_k == 16 or tiles * (ran.split_k + 1) > 132 * tile.per_sm \
                    or ran.split_k == -(-problem.k // tile.tile_k)
        for tile in derive_khr_configs(problem, khr, limits):
            gemm.KhrKernel(gemm.accumulating_types(problem.dtype), tile).check_shared_memory(limits.shared_memory)


def test_on_the_h200_table_the_first_derived_candidate_is_what_was_measured_best():
    """The derivation reproduces the hand-measured H200 defaults from the H200's own table and SM count."""
    name, flexible, _, limits = _recorded(DOCS / "h200-capabilities.json")
    assert name == SEED_DEVICE
    for path_name, table in SEED_CONFIGS.items():
        for problem, family in ((GemmProblem("fp16", "square", 8192, 8192, 8192), "square"),
                                (GemmProblem("fp16", "llm", 8192, 32, 8192), "llm")):
            if family not in table:
                continue   # the expand path seeds compute-bound shapes only
            derived = derive_workgroup_configs(path_name, problem, flexible, limits)
            assert derived[0] == table[family][0], (path_name, family, derived[0].label())


def test_derivation_follows_the_table_not_constants():
    """A device whose workgroup rows have other granularities, less shared memory and no 256-invocation row."""
    _, flexible, _, limits = _recorded(DOCS / "h200-capabilities.json")
    smaller = tuple(replace(row, M=64, N=64) if row.workgroup_invocations else row
                    for row in flexible if row.workgroup_invocations in (0, 128))
    tight = replace(limits, shared_memory=24576, reserved_shared_memory=0, sm_count=16)
    configs = derive_workgroup_configs("vk-coopmat2-dense", GemmProblem("fp16", "square", 4096, 4096, 4096),
                                       smaller, tight)
    assert configs and all(c.tile.workgroup_size == 128 for c in configs)
    assert all(c.tile.tile_m % 64 == 0 and c.tile.tile_n % 64 == 0 for c in configs)
    assert all((c.tile.tile_m + c.tile.tile_n) * c.tile.tile_k * 2 <= 24576 for c in configs)


def test_tuning_classes():
    widths = (1, 16, 17, 32, 33, 64, 65, 256, 257)
    assert [tuning_class(GemmProblem("fp16", "llm", 16384, n, 4096)) for n in widths] == [
        "narrow16", "narrow16", "narrow32", "narrow32", "narrow64", "narrow64", "narrow256", "narrow256", "compute"]
    assert tuning_class(GemmProblem("bf16", "mlp", 5120, 13824, 5120)) == "compute"
    # compute-bound, but at most 64 (small) or 256 (medium) tiles of 128x128; a ragged edge counts as a tile
    small = [tuning_class(GemmProblem("fp16", "x", m, n, 4096)) for m, n in
             ((1024, 1024), (1000, 1000), (512, 2048), (128, 8192), (1025, 1024), (1280, 1280), (2048, 2048),
              (257, 8192), (2049, 2048), (4096, 4096))]
    assert small == ["small"] * 4 + ["medium"] * 4 + ["compute"] * 2


def test_device_limits_read_from_a_report():
    _, _, _, limits = recorded_device(json.loads((DOCS / "h200-capabilities.json").read_text()))
    assert limits == DeviceLimits(49152, 8192, 1024, 256, None)


def test_a_run_on_an_unknown_device_tunes_once_per_class_and_records_everything(tmp_path):
    dense, sparse24 = FakePath("vk-coopmat2-dense"), FakePath("vk-coopmat2-2:4", broken={"c"})
    cases = [SQUARE, GemmProblem("fp16", "square", 2304, 2304, 128), LLM]
    tuner = Tuner(TuningCache(tmp_path), {"vulkan": H100})
    settings = bench.SparseBenchSettings(iters=5, warmup=0)
    results, interrupted = bench.run_cases(cases, {"vk-coopmat2-dense": dense, "vk-coopmat2-2:4": sparse24},
                                           {"cuBLAS": "no CUDA here"}, ["vk-coopmat2-dense", "vk-coopmat2-2:4",
                                                                        "cuBLAS"], tuner, settings, progress=False)
    assert not interrupted and len(results) == 9
    sources = [(r.path, r.case, r.config_source) for r in results if r.status == "ok"]
    assert [s for _, _, s in sources] == ["tuned", "tuned", "cache", "cache", "tuned", "tuned"]
    assert {r.config for r in results if r.path == "vk-coopmat2-2:4" and r.status == "ok"} == {"b"}
    skipped = [r for r in results if r.path == "cuBLAS"]
    assert all(r.status == "skipped" and r.reason == "no CUDA here" for r in skipped)
    ok = results[0]
    assert ok.iterations == 5 and ok.p10_ms <= ok.median_ms <= ok.p90_ms <= ok.max_ms
    # the series behind the figure is kept, in order (FakePath's runs cycle +0 %, +1 %, +2 %)
    assert len(ok.times_ms) == 5 and ok.times_ms[1] == pytest.approx(ok.times_ms[0] * 1.01)
    assert ok.median_ms == pytest.approx(sorted(ok.times_ms)[2]) and ok.max_ms == max(ok.times_ms)
    rows = cached_entries(tmp_path)
    assert {(r["path"], r["class"], r["config"]) for r in rows} == {
        ("vk-coopmat2-dense", "compute", "c"), ("vk-coopmat2-2:4", "compute", "b"),
        ("vk-coopmat2-dense", "narrow32", "c"), ("vk-coopmat2-2:4", "narrow32", "b")}


def test_the_h100_seeds_are_labels_of_real_tiles_and_its_default_is_the_measured_winner():
    from vkcoop.gemm import paths
    from vkcoop.gemm.paths import SEEDS, seed_configs
    h100 = "NVIDIA H100 80GB HBM3"
    square = seed_configs(h100, "vk-coopmat2-dense", GemmProblem("fp16", "square", 8192, 8192, 8192))
    assert square[0].label() == "128:128x128x64u8g4w2x5c" and len(set(c.label() for c in square)) == len(square)
    assert square[0].b_column_major and square[0].tile.workgroup_size == 128   # two workgroups an SM
    assert square[0].tile.tail and square[1].label() == "128:128x128x64u8g4c"   # the tail split
    narrow = seed_configs(h100, "vk-coopmat2-2:4", GemmProblem("fp16", "llm", 8192, 32, 8192))
    # the narrow 2:4 classes lead with the staged kernel on the tile-major layout (docs/gemm.md G54)
    assert narrow[0].label() == "128:64x32x64u4g1w3tp" and narrow[0].staged and narrow[0].tile_major == "p"
    n16 = seed_configs(h100, "vk-coopmat2-2:4", GemmProblem("fp16", "llm", 8192, 16, 8192))
    assert n16[0].label() == "128:64x16x64u4g1w4tp" and n16[0].tile.tile_n == 16
    # a class the table names wins over its family; one it does not name falls back to the family
    n128 = seed_configs(h100, "vk-coopmat2-2:4", GemmProblem("fp16", "llm", 8192, 128, 8192))
    assert n128[0].label() == "128:64x32x64u4g1s2w3t"
    n64 = seed_configs(h100, "vk-coopmat2-dense", GemmProblem("fp16", "llm", 8192, 64, 8192))
    assert n64[0].tile.tile_n == 64
    assert seed_configs(h100, "vk-coopmat2-dense", GemmProblem("fp16", "llm", 8192, 128, 8192)) == \
        seed_configs(h100, "vk-coopmat2-dense", GemmProblem("fp16", "llm", 8192, 32, 8192))
    assert set(SEEDS) == {SEED_DEVICE, h100}
    # the small class takes 64x64 tiles on every compute-bound path, then the path's square seed
    small = GemmProblem("fp16", "square", 1000, 1000, 1024)
    for path_name, label in (("vk-coopmat2-dense", "128:64x64x128u4g1w2c"), ("vk-coopmat2-2:4-expand",
                             "128:64x64x128u4g1w2c"), ("vk-coopmat2-dense-fp16acc", "128:64x64x128u4g1w2c"),
                             ("vk-coopmat2-2:4", "128:64x64x64u4g1w2t")):
        seeds = seed_configs(h100, path_name, small)
        assert seeds[0].label() == label and (seeds[0].tile.tile_m, seeds[0].tile.tile_n) == (64, 64), path_name
        assert seeds[1] == seed_configs(h100, path_name, GemmProblem("fp16", "square", 8192, 8192, 8192))[0]
    # the medium class changes fp16 accumulation only; the other paths fall back to their square seeds
    medium = GemmProblem("fp16", "square", 2048, 2048, 2048)
    assert seed_configs(h100, "vk-coopmat2-dense-fp16acc", medium)[0].label() == "128:128x128x64u8g4c"
    assert seed_configs(h100, "vk-coopmat2-dense", medium) == square
    # the H200 table has no small seeds: its square family runs them
    assert seed_configs(SEED_DEVICE, "vk-coopmat2-dense", small) == \
        seed_configs(SEED_DEVICE, "vk-coopmat2-dense", GemmProblem("fp16", "square", 8192, 8192, 8192))


def test_a_staged_configuration_labels_with_t():
    from vkcoop.gemm.configs import VulkanConfig, parse_config
    config = parse_config("128:128x128x32u2g8t")
    assert config.staged and not config.b_column_major and config.label() == "128:128x128x32u2g8t"
    assert parse_config("64:32x32x128u2g1s2i4c") == VulkanConfig(gemm.WorkgroupTile(64, 32, 32, 128, 2, 1, 2),
                                                                 True, 4, False)
    for label in ("128:64x16x64u6g1w4tp", "64:32x32x128u8g1s2tn"):    # the staged 2:4 kernel's tile-major layout
        config = parse_config(label)
        assert config.staged and config.tile_major == label[-1] and config.label() == label
    for bad in ("128:128x128x32u2g8tc", "128:128x128x32u2g8tq", "128:128x128x32u2g8p"):
        with pytest.raises(gemm.GemmInputError, match=r"\[iMETA_WORDS\]\[c\]\[t\[p\|n\]\]"):
            parse_config(bad)


@pytest.mark.parametrize("path_name", COOPMAT2_PATHS)
def test_derived_staged_candidates_fit_their_shared_memory(path_name):
    _, flexible, _, limits = _recorded(DOCS / "h200-capabilities.json")
    dtype = "fp16" if path_name == "vk-coopmat2-dense-fp16acc" else "bf16"
    for problem in (GemmProblem("fp16", "square", 8192, 8192, 8192), GemmProblem(dtype, "llm", 8192, 32, 8192)):
        staged = [c for c in derive_workgroup_configs(path_name, problem, flexible, limits) if c.staged]
        assert bool(staged) != (path_name in EXPANDED_PATHS), problem   # the expand path runs the direct kernel
        for config in staged:
            kernel = (gemm.StagedSparse24Kernel(problem.dtype, config.tile) if path_name == "vk-coopmat2-2:4"
                      else gemm.StagedKernel(path_types(path_name, problem.dtype), config.tile))
            kernel.check_shared_memory(limits.shared_memory)
            assert not config.b_column_major and not config.meta_words


def test_a_w_tile_splits_k_so_that_its_workgroups_fill_one_wave():
    """132 SMs keeping 3 workgroups each hold 396: 8192 rows of 64 take 3 slices, 4096 rows take 6 (384)."""
    from vkcoop.gemm.configs import parse_config
    from vkcoop.gemm.tiles import MAX_SPLIT_K, parse_tile
    tile, rest = parse_tile("128:64x32x64u4g1s2w3t")
    assert rest == "t" and (tile.split_k, tile.per_sm) == (2, 3) and tile.label() == "128:64x32x64u4g1s2w3"
    assert tile.fill_split(8192, 32, 8192, 132).split_k == 3
    assert tile.fill_split(4096, 32, 4096, 132).split_k == 6
    assert tile.fill_split(4096, 64, 4096, 132).split_k == 3    # two column tiles
    assert tile.fill_split(8192, 32, 8192, None) == tile         # unknown SM count: the fallback split
    assert tile.fill_split(64, 32, 128, 132).split_k == 2        # at most one K step per slice
    assert tile.fill_split(64, 32, 8192, 132).split_k == MAX_SPLIT_K
    assert tile.fill_split(65536, 32, 8192, 132).split_k == 1    # more than a wave already
    plain = gemm.WorkgroupTile(64, 32, 32, 128, split_k=2)
    assert plain.fill_split(4096, 32, 4096, 132) == plain        # no w: the split as given
    problem = GemmProblem("fp16", "llm", 8192, 32, 8192)
    assert parse_config("128:64x32x64u4g1s2w3t").for_problem(problem, 132).label() == "128:64x32x64u4g1s3w3t"


def test_a_vulkan_path_binds_the_split_its_w_configuration_resolves_to(monkeypatch):
    from vkcoop.gemm import paths
    from vkcoop.gemm.configs import parse_config
    path = paths.Sparse24Path(SimpleNamespace(limits=DeviceLimits(sm_count=132), name="X"))
    made = []
    monkeypatch.setattr(path, "_make", lambda dtype, config: made.append(config) or SimpleNamespace())
    monkeypatch.setattr(path, "_bind", lambda kernel, operands: None)
    bound = path.bind(SimpleNamespace(problem=GemmProblem("fp16", "llm", 4096, 32, 4096)),
                      parse_config("128:64x32x64u4g1s2w3t"))
    assert bound.config == "128:64x32x64u4g1s6w3t" and made[0].tile.split_k == 6 and made[0].staged


def test_one_rule_picks_the_kernel_of_a_configuration():
    """vkcoop.gemm.configs.launch_kernel serves the derivation, the bench paths and the explore tool alike."""
    from vkcoop.gemm import launch, staging
    from vkcoop.gemm.configs import launch_kernel, parse_config
    pick = {(label, sparse): type(launch_kernel(parse_config(label), "bf16", sparse=sparse))
            for label in ("128:64x32x64u4g1t", "64:32x32x128u2g1s2c") for sparse in (False, True)}
    assert pick == {("128:64x32x64u4g1t", False): staging.StagedKernel,
                    ("128:64x32x64u4g1t", True): staging.StagedSparse24Kernel,
                    ("64:32x32x128u2g1s2c", False): launch.CoopMat2Kernel,
                    ("64:32x32x128u2g1s2c", True): launch.Sparse24Kernel}
    assert launch_kernel(parse_config("64:32x32x128"), "fp16", sparse=False).types.key == "fp16->fp32"
    assert launch_kernel(parse_config("64:32x32x128"), "fp16", sparse=False, types="fp16->fp16").types.key == \
        "fp16->fp16"
    for label in ("128:64x32x64u4g1ct", "128:64x32x64u4g1i4t"):
        with pytest.raises(gemm.GemmInputError, match="row-major B"):
            launch_kernel(parse_config(label), "fp16", sparse=True)


def test_device_limits_take_the_drivers_sm_count_unless_given(monkeypatch):
    """Every VulkanDevicePaths (bench sparse's and the inspect build child's) resolves a ``w`` split from the same
    SM count; before, only bench sparse set it, so `inspect --gemm` built other SPLIT_K pipelines."""
    from vkcoop import vk
    physical = SimpleNamespace(limits=SimpleNamespace(maxComputeSharedMemorySize=49152),
                               cooperative_matrix2_properties=lambda: {})
    monkeypatch.setattr(vk, "sm_count", lambda p: 132 if p is physical else pytest.fail("another device"))
    assert DeviceLimits.of(physical).sm_count == 132
    assert DeviceLimits.of(physical, sm_count=114).sm_count == 114


def test_a_device_without_sm_builtins_has_no_sm_count():
    from vkcoop import vk
    assert vk.sm_count(SimpleNamespace(extensions={"VK_KHR_cooperative_matrix": 2})) is None
    try:
        with vk.Instance() as instance:
            physical = instance.select(None)
    except vk.VulkanError as error:
        pytest.skip(f"no Vulkan device here: {error}")
    if "VK_NV_shader_sm_builtins" not in physical.extensions:
        assert vk.sm_count(physical) is None


def test_every_shipped_staged_seed_fits_the_share_a_workgroup_scope_shader_may_use():
    """maxComputeSharedMemorySize less cooperativeMatrixWorkgroupScopeReservedSharedMemory, from the recorded report
    of each device with seeds (VUID-RuntimeSpirv-maxComputeSharedMemorySize-10168)."""
    import json
    from pathlib import Path

    from vkcoop.gemm.configs import path_kernel, recorded_device
    from vkcoop.gemm.paths import SEEDS

    docs = Path(__file__).resolve().parents[1] / "docs"
    reports = {recorded_device(json.loads(p.read_text()))[0]: recorded_device(json.loads(p.read_text()))[3]
               for p in (docs / "h100-capabilities.json", docs / "h200-capabilities.json")}
    staged = 0
    for device, table in SEEDS.items():
        limits = reports[device]
        assert limits.reserved_shared_memory > 0
        for path, families in table.items():
            for configs in families.values():
                for config in (c for c in configs if c.staged):
                    for dtype in ("fp16", "bf16"):
                        kernel = path_kernel(path, config, dtype)
                        kernel.check_shared_memory(limits.shared_memory, limits.reserved_shared_memory)
                        staged += 1
    assert staged > 10
