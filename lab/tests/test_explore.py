"""lab/explore.py: its jobs are read and refused before any GPU work, its kernel kinds pick kernels by the bench
paths' own rule, dense16 is checked where fp16 sums are exact, every kind but khr16 has the bytes of a bench path,
and the sweep scripts name only configurations it reads."""
from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from lab import explore
from vkcoop import gemm
from vkcoop.bench import roofline
from vkcoop.gemm import launch, staging, vulkan
from vkcoop.gemm.path import GemmOperands, GemmProblem
from vkcoop.gemm.paths import parse_config
from vkcoop.vk.tables import COMPONENT_FLOAT16, COMPONENT_FLOAT32, SCOPE_SUBGROUP, ShapeEntry

LAB = Path(__file__).resolve().parents[1]


def test_explore_parses_jobs_and_tiles_before_any_gpu_work():
    config = parse_config("256:64x32x128u2s4w4i4c")
    tile, column, meta_words = config.tile, config.b_column_major, config.meta_words
    assert (tile.workgroup_size, tile.tile_m, tile.tile_n, tile.tile_k) == (256, 64, 32, 128)
    assert (tile.k_unroll, tile.split_k, tile.per_sm) == (2, 4, 4)
    assert column and meta_words == 4
    config = parse_config("128:128x128x32")
    tile, column, meta_words = config.tile, config.b_column_major, config.meta_words
    assert tile.k_unroll == 2 and tile.group_m == 8 and not column and meta_words == 0 and not tile.tail
    tile = parse_config("128:128x128x64u8g4w2x5c").tile
    assert tile.tail and tile.tail_split == 5 and tile.per_sm == 2
    kernel, dtype, shape, tiles = explore.parse_job("sparse/bf16/8192,32,8192/256:64x32x128i4,64:32x32x128")
    assert (kernel, dtype, shape, tiles) == ("sparse", "bf16", (8192, 32, 8192), ["256:64x32x128i4", "64:32x32x128"])
    for bad, message in (("dense/fp16/8,8,8/128:128", "is not INVOCATIONS"), ("magic/fp16/8,8,8/1:1x1x1", "kernel"),
                         ("dense16/bf16/8,8,8/1:1x1x1", "dtype"), ("dense/fp16/8x8/1:1x1x1", "KERNEL/DTYPE")):
        with pytest.raises(ValueError, match=message):
            explore.parse_job(bad)
    for bad in ("dense/bf16/3000,5000,2000/128:128x128x64", "dense/fp16/0,32,64/128:128x128x64"):
        with pytest.raises(ValueError, match="K a multiple of 32"):   # the operands are made in the 2:4 format
            explore.parse_job(bad)
    with pytest.raises(SystemExit):   # argparse: --job is required
        explore.main([])


def test_a_bad_explore_job_is_one_line_and_exit_code_2_before_any_gpu_work(capsys):
    with pytest.raises(SystemExit) as stopped:
        explore.main(["--job", "dense/bf16/3000,5000,2000/128:128x128x64u8g4c"])
    assert stopped.value.code == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert "K a multiple of 32" in last and "Traceback" not in last


def test_explore_refuses_a_khr_job_whose_tile_is_not_a_code():
    with pytest.raises(ValueError, match="is not MxNxK:SMxSN"):
        explore.parse_job("khr/fp16/256,256,256/256:128x128x32u4")
    with pytest.raises(ValueError, match="dense16, khr16: fp16"):
        explore.parse_job("khr16/bf16/256,256,256/128x128x32:2x2d2")
    assert explore.parse_job("khr16/fp16/256,256,256/128x128x32:2x2d2g8")[3] == ["128x128x32:2x2d2g8"]


def test_explore_maps_its_kernel_kinds_onto_the_bench_paths_rule(monkeypatch):
    """A job's kind decides 2:4 or dense, "staged*" or a "t" label the staged kernel, dense16 and khr16 fp16
    accumulation, khr* the KHR shared-memory kernel with the tile its code names."""
    monkeypatch.setattr(vulkan, "coopmat2_gemm", lambda device, kernel, flexible=None: kernel)
    monkeypatch.setattr(vulkan, "KhrSharedMemoryGemm", lambda device, types, tile, pad_to_tiles:
                        staging.KhrKernel(types, tile, pad_to_tiles=pad_to_tiles))
    khr = [ShapeEntry(16, 16, 16, a, a, c, c, SCOPE_SUBGROUP) for a, c in
           ((COMPONENT_FLOAT16, COMPONENT_FLOAT32), (COMPONENT_FLOAT16, COMPONENT_FLOAT16))]
    device = SimpleNamespace(physical=SimpleNamespace(khr_shapes=lambda: khr))
    problem = GemmProblem("fp16", "explore", 64, 64, 64)
    made = {kind: explore._kernel(device, (), kind, "fp16", label, problem, 132)
            for kind, label in (("dense", "64:32x32x128"), ("dense16", "64:32x32x128"), ("staged", "64:32x32x128"),
                                ("sparse", "64:32x32x128t"), ("staged24", "64:32x32x128"),
                                ("khr", "128x256x16:2x4d2"), ("khr16", "128x128x32:2x4"))}
    made = {kind: kernel for kind, (kernel, _) in made.items()}
    assert type(made["dense"]) is launch.CoopMat2Kernel and made["dense"].types.key == "fp16->fp32"
    assert type(made["dense16"]) is launch.CoopMat2Kernel and made["dense16"].types.key == "fp16->fp16"
    assert type(made["staged"]) is staging.StagedKernel
    assert type(made["khr"]) is staging.KhrKernel and made["khr"].types.key == "fp16->fp32"
    assert (made["khr"].tile.tile_n, made["khr"].tile.tile_k, made["khr"].tile.stages) == (256, 16, 2)
    assert made["khr16"].types.key == "fp16->fp16" and made["khr16"].tile.stages == 1
    assert made["khr"].pad_to_tiles and made["khr16"].pad_to_tiles   # as the bench's KHR paths
    assert type(made["sparse"]) is staging.StagedSparse24Kernel and type(made["staged24"]) is staging.StagedSparse24Kernel


class _Fp16AccumulatingGemm:
    """A stand-in for explore's kernel object that accumulates in fp16, one K step after another."""

    def __init__(self):
        self.kernel = SimpleNamespace(store_b=lambda b: b)
        self.bound, self.timed_on = [], None

    def bind(self, a, b):
        self.bound.append(b)

    def result(self):
        a, b = self.a.astype(np.float16), self.bound[-1].astype(np.float16)
        total = np.zeros((a.shape[0], b.shape[1]), np.float16)
        for k in range(a.shape[1]):
            total = (total + np.outer(a[:, k], b[k])).astype(np.float16)
        return total

    def time(self, iters, warmup, warmup_seconds=None):
        self.timed_on = self.bound[-1]
        return [1e-3] * iters

    def close(self):
        pass


def test_explore_checks_dense16_on_short_sums_and_times_it_on_the_jobs_operands(monkeypatch):
    operands = GemmOperands.make(GemmProblem("fp16", "square", 64, 32, 2048))
    fake = _Fp16AccumulatingGemm()
    fake.a = operands.pruned
    monkeypatch.setattr(explore, "_kernel", lambda *args: (fake, args[4]))
    ok, why, *_ = explore._measure(None, (), "dense16", operands, "64:32x32x128", 3, 0.0, None)
    assert ok, why
    assert fake.bound[0] is operands.short_sums.b and fake.timed_on is operands.b
    # the same fp16 sums on the job's own B round: that is why the check moved
    assert not gemm.check_output(fake.result()[operands.rows], operands.reference)[0]


def test_every_kind_but_fp16_khr_has_the_bytes_of_a_bench_path():
    assert set(explore.BENCH_PATHS) == set(explore.KERNELS) - {"khr16"}
    # the 2:4 kernels move A in its format, the others dense
    assert roofline.bytes_moved(explore.BENCH_PATHS["staged24"], 64, 32, 64) < \
        roofline.bytes_moved(explore.BENCH_PATHS["staged"], 64, 32, 64)


def test_every_job_of_the_sweep_scripts_reads_back():
    script = (LAB / "gemm-sweeps" / "sweep.sh").read_text()
    shapes = dict(re.findall(r"^(\w)=([\d,]+)$", script, re.MULTILINE))
    written = re.findall(r'"(\w+/\w+/\$\w/[^"]+)"', script)
    jobs = [re.sub(r"\$(\w)", lambda m: shapes[m.group(1)], job) for job in written]
    assert len(jobs) == 10
    for job in jobs:
        explore.parse_job(job)
