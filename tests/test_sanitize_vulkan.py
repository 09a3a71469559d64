"""``vkcoop sanitize vulkan``: what it runs under GPU-AV (every seed of every Vulkan GEMM path and of attention, on
problems that reach their code paths), how runs and messages are tallied, and the command's exit codes. The whole
pass needs a coopmat2 GPU (the GPU test runs its attention part; ``vkcoop sanitize vulkan`` runs all of it)."""
from __future__ import annotations

import json

import pytest

from support import coopmat2_reason, usage_error
from vkcoop import cli
from vkcoop.attention.seeds import ATTENTION_SEEDS
from vkcoop.attention.tiles import is_decode
from vkcoop.gemm.path import GemmProblem
from vkcoop.gemm.paths import SEEDS
from vkcoop.gemm.tiles import MIN_TAIL_WAVES
from vkcoop.sanitize import vulkan as gpu_av
from vkcoop.vk.validation import ValidationMessage


def test_every_shipped_gemm_seed_runs_under_each_family_it_is_listed_in():
    jobs = gpu_av.gemm_jobs()
    listed = {(path, config.label(), gpu_av.FAMILY_SHAPES[family]) for table in SEEDS.values()
              for path, families in table.items() for family, configs in families.items() for config in configs}
    ran = {(job.path, job.config.label(), gpu_av.FAMILY_SHAPES[job.family]) for job in jobs if job.config}
    assert ran == listed and len(ran) == len([job for job in jobs if job.config])
    assert {job.path for job in jobs} == set(gpu_av.GEMM_PATHS)
    khr = [job for job in jobs if job.config is None]
    assert {job.path for job in khr} == {"vk-khr-subgroup"} and all(j.sources == ("derived",) for j in khr)
    tail = next(job for job in jobs if job.config and job.config.tile.tail)
    assert len(tail.sources) >= 1 and all(" " in source for source in tail.sources)


@pytest.mark.parametrize("family", sorted(gpu_av.FAMILY_SHAPES))
def test_ragged_problems_are_ragged_and_keep_whole_metadata_words(family):
    (_, m, n, k), (name, rm, rn, rk) = gpu_av.gemm_shapes(family)
    assert name == "ragged" and rk % 32 == 0 and (m, n, k) == gpu_av.FAMILY_SHAPES[family]
    for value in (rm, rn):
        assert value % 8, "no tile side divides the ragged problem"
    assert rk % 64


def test_a_tail_split_seed_also_runs_a_grid_with_a_partial_last_wave():
    job = next(job for job in gpu_av.gemm_jobs() if job.config and job.config.tile.tail)
    shapes = gpu_av.gemm_shapes(job.family, job.config, sm_count=132)
    name, m, n, k = shapes[-1]
    tile = job.config.for_problem(GemmProblem("fp16", job.family, m, n, k), 132).tile
    tiles = (m // tile.tile_m) * (n // tile.tile_n)
    assert name == "tail" and tiles // tile.wave >= MIN_TAIL_WAVES and tiles % tile.wave
    tail, slices = tile.tail_plan(m, n, k)
    assert tail > 0 and slices > 1, "the tail split must run"
    assert len(gpu_av.gemm_shapes(job.family, job.config, sm_count=None)) == 2   # no SM count, no wave to fill


def test_every_attention_seed_runs_on_an_aligned_and_a_ragged_shape_of_its_class():
    jobs = gpu_av.attention_jobs()
    assert {(cls, label) for cls, label, _ in jobs} == {(cls, label) for table in ATTENTION_SEEDS.values()
                                                        for cls, label in table.items()}
    for cls, _, _ in jobs:
        (aligned, shape, causal), (ragged, other, _) = gpu_av.attention_shapes(cls)
        assert (aligned, ragged) == ("aligned", "ragged")
        assert is_decode(shape) == cls.startswith("decode") == is_decode(other)
        assert causal == cls.endswith("-causal") and shape.head_dim == int(cls.split("-d")[1].split("-")[0])
        assert (shape.group > 1) == (cls.startswith("decode") and not cls.endswith("-mha")) or cls.startswith("prefill")
        assert shape.seq_kv % 64 == 0 and other.seq_kv % 64


class _Instance:
    def __init__(self, messages):
        self.messages = list(messages)

    def take_messages(self):
        taken, self.messages = self.messages, []
        return taken


FOUND = ValidationMessage("error", "validation", "VUID-vkCmdDispatch-storageBuffers-06936",
                          "vkCmdDispatch(): (set = 0, binding = 2, index 0)  access out of bounds.")
GAP = ValidationMessage("warning", "validation", "WARNING-GPU-Assisted-Validation",
                        "Failure to instrument shader.  Proceeding with non-instrumented shader.")


def test_a_run_keeps_findings_and_gaps_apart():
    run = gpu_av.GpuAvRun("gemm", "vk-coopmat2-dense", "64:32x32x128u2g1s2w4c", "aligned 1024x32x2048")
    run.take(_Instance([FOUND, GAP]))
    assert run.messages == [str(FOUND)] and run.not_instrumented == [str(GAP)]


def _report(*runs) -> gpu_av.GpuAvReport:
    return gpu_av.GpuAvReport(device="NVIDIA H100 80GB HBM3", layer="1.4.363",
                              extensions=["VK_EXT_debug_utils", "VK_EXT_validation_features"], runs=list(runs))


def test_the_report_counts_what_ran_and_is_ok_only_without_findings():
    sample = gpu_av.GpuAvRun("sample", "decode", shape="12 cases", pipelines=7)
    gemm = [gpu_av.GpuAvRun("gemm", "vk-coopmat2-2:4", "c", shape) for shape in ("aligned", "ragged")]
    skipped = gpu_av.GpuAvRun("attention", "vk-coopmat2-attention", "x", status="skipped")
    gap = gpu_av.GpuAvRun("gemm", "vk-coopmat2-dense", "d", "aligned", not_instrumented=[str(GAP)])
    clean = _report(sample, *gemm, skipped, gap)
    totals = clean.totals()
    assert (totals["samples"], totals["pipelines"], totals["gemm_configurations"], totals["runs"]) == (1, 7, 2, 4)
    assert totals["skipped"] == 1 and totals["not_instrumented"] == 1 and clean.ok
    assert "0 messages" in clean.line() and "1 notes of what it could not instrument" in clean.line()
    found = gpu_av.GpuAvRun("gemm", "vk-coopmat2-dense", "d", "ragged", messages=[str(FOUND)])
    assert not _report(sample, found).ok and "1 messages" in _report(sample, found).line()
    failed = gpu_av.GpuAvRun("gemm", "vk-coopmat2-dense", "d", "ragged", status="failed", reason="3 rows differ")
    assert not _report(sample, failed).ok and not _report(skipped).ok
    data = json.loads(json.dumps(clean.to_dict()))
    assert data["tool"] == "gpu-av" and data["ok"] and data["not_instrumented"] == [str(GAP)]


@pytest.mark.parametrize("report, code", [(_report(gpu_av.GpuAvRun("sample", "decode")), 0),
                                          (_report(gpu_av.GpuAvRun("sample", "decode", messages=["m"])), 1)])
def test_the_command_exits_by_the_report(monkeypatch, tmp_path, capsys, report, code):
    from vkcoop.sanitize import vulkan
    monkeypatch.setattr(vulkan, "run_gpu_av", lambda device, dtype, parts, progress, checkpoint: checkpoint(report) or report)
    out = tmp_path / "gpu-av.json"
    assert cli.main(["sanitize", "vulkan", "--json", str(out)]) == code
    assert json.loads(out.read_text())["ok"] is (code == 0)
    assert report.line() in capsys.readouterr().out


def test_bad_parts_are_a_one_line_usage_error(capsys):
    assert "shaders not among samples,gemm,attention" in usage_error(capsys, ["sanitize", "vulkan", "--parts",
                                                                             "samples,shaders"])


def test_nothing_to_run_is_an_environment_error(monkeypatch, capsys):
    from vkcoop.sanitize import vulkan
    skipped = _report(gpu_av.GpuAvRun("sample", "decode", status="skipped", reason="no coopmat2"))
    monkeypatch.setattr(vulkan, "run_gpu_av", lambda device, dtype, parts, progress, checkpoint: skipped)
    assert cli.main(["sanitize", "vulkan"]) == 3
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "no part of the GPU-AV pass on NVIDIA H100 80GB HBM3 could run here: no coopmat2" in err


REASON = coopmat2_reason()


@pytest.mark.gpu
@pytest.mark.sanitizer
@pytest.mark.skipif(REASON is not None, reason=str(REASON))
def test_attention_seeds_are_clean_under_gpu_av():
    try:
        report = gpu_av.run_gpu_av(parts=("attention",))
    except Exception as error:  # noqa: BLE001 - a layer without GPU-AV is this machine's, not the code's
        if type(error).__name__ == "LayerNotFoundError":
            pytest.skip(str(error))
        raise
    jobs = gpu_av.attention_jobs()
    # every seed label ran, each (class, label) on every problem of its class
    assert report.totals()["attention_configurations"] == len({label for _cls, label, _devices in jobs})
    ran = [r for r in report.runs if r.kind == "attention" and r.status in ("ok", "failed")]
    assert len(ran) == sum(len(gpu_av.attention_shapes(cls)) for cls, _label, _devices in jobs)
    assert report.ok, [r.to_dict() for r in report.runs if r.messages or r.status != "ok"][:4]


@pytest.mark.gpu
@pytest.mark.sanitizer
@pytest.mark.skipif(REASON is not None, reason=str(REASON))
def test_the_khr_sample_s_edge_store_is_race_free_under_gpu_av():
    """GPU-AV reported a shared-memory race in the KHR kernel's edge store (subgroup barriers around the scratch
    tile), and a ragged s8 case came out wrong under it; the edge store now syncs its workgroup."""
    from vkcoop import vk
    from vkcoop.samples import all_samples

    sample = next(s for s in all_samples() if s.name == "khr-shmem-gemm")
    try:
        with vk.Instance(validate="gpu") as instance:
            result = sample.run(None, validate="gpu", instance=instance)
    except Exception as error:  # noqa: BLE001 - a layer without GPU-AV is this machine's, not the code's
        if type(error).__name__ == "LayerNotFoundError":
            pytest.skip(str(error))
        raise
    assert result.status == "pass" and result.cases > 0 and not result.failed_cases, result.reason
    assert not result.validation_messages, [str(m)[:300] for m in result.validation_messages[:2]]


def test_each_finished_part_is_written_before_the_next_starts(monkeypatch, tmp_path):
    from vkcoop.sanitize import vulkan
    out = tmp_path / "gpu-av.json"
    written = []

    class Stop(Exception):
        pass

    def samples(device, progress):
        return [gpu_av.GpuAvRun("sample", "decode", pipelines=3)]

    def gemm(device, dtype, progress):
        written.append(json.loads(out.read_text()))
        raise Stop

    monkeypatch.setattr(vulkan, "_sample_runs", samples)
    monkeypatch.setattr(vulkan, "_gemm_runs", gemm)
    with pytest.raises(Stop):
        cli.main(["--debug", "sanitize", "vulkan", "--json", str(out)])
    assert written and written[0]["totals"]["samples"] == 1 and written[0]["totals"]["pipelines"] == 3
