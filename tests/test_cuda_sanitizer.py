"""The compute-sanitizer pass: reading the tools' reports (CPU, on report text in the tools' own format), the jobs
reaching every code path of every configuration (CPU), the runner and the command against a stand-in
compute-sanitizer (CPU), and on an sm_90 GPU with compute-sanitizer the planted faults of tests/cuda/planted_faults.cu,
each caught by its tool every time (marker ``sanitizer``: skipped with the reason elsewhere)."""
from __future__ import annotations

import json
import os
import re
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

from support import usage_error
from vkcoop import cli
from vkcoop.cuda import build, sanitizer
from vkcoop.cuda.configs import MAX_CLUSTER_SPLITS
from vkcoop.cuda.dense import MmaDenseGemm
from vkcoop.cuda.gemm import MmaSpGemm, WgmmaSpGemm
from vkcoop.cuda.sanitize_jobs import (UNEVEN_SLICES, job_label, kernel_name, mma_dense_problems, mma_sp_problems,
                                       shipped_jobs, wgmma_sp_problems)
from vkcoop.cuda.sanitizer_log import parse_log
from vkcoop.cuda.wgmma_types import WGMMA_SP_TYPES

PLANTED = Path(__file__).resolve().parent / "cuda" / "planted_faults.cu"

# --- reports, written in the tools' format (compute-sanitizer's user guide) -------------------------------------
MEMCHECK_PLANTED = """\
========= COMPUTE-SANITIZER
========= Invalid __global__ write of size 4 bytes
=========     at planted_oob_write+0xa0
=========     by thread (32,0,0) in block (0,0,0)
=========     Address 0x7f1c3e000080 is out of bounds
=========     and is 1 bytes after the nearest allocation at 0x7f1c3e000000 of size 128 bytes
=========     Saved host backtrace up to driver entry point at kernel launch time
=========         Host Frame: cuLaunchKernel [0x2cf3a0] in libcuda.so.1
=========         Host Frame: ffi_call_unix64 [0x7b5d] in libffi.so.8
=========
========= Invalid __global__ write of size 4 bytes
=========     at planted_oob_write+0xa0
=========     by thread (33,0,0) in block (0,0,0)
=========     Address 0x7f1c3e000084 is out of bounds
=========     and is 5 bytes after the nearest allocation at 0x7f1c3e000000 of size 128 bytes
=========
========= Program hit CUDA_ERROR_LAUNCH_FAILED (error 719) due to "unspecified launch failure" on CUDA API call to cuCtxSynchronize.
=========     Saved host backtrace up to driver entry point at error
=========         Host Frame: cuCtxSynchronize [0x2b5f10] in libcuda.so.1
=========
{"index": 0, "kernel": "planted_oob_write", "status": "error"}
========= ERROR SUMMARY: 33 errors
"""
RACECHECK_ANALYSIS = """\
========= COMPUTE-SANITIZER
========= Error: Race reported between Write access at planted_shared_race+0xd0
=========     and Read access at planted_shared_race+0x100 [64 hazards]
=========
========= Warning: Race reported between Read access at mma_sp_f16_64x16_k64_4x1_s6+0x1f0
=========     and Write access at mma_sp_f16_64x16_k64_4x1_s6+0x2a0 [8 hazards]
=========
========= RACECHECK SUMMARY: 2 hazards displayed (1 error, 1 warning)
"""
RACECHECK_HAZARDS = """\
========= COMPUTE-SANITIZER
========= Error: Potential RAW hazard detected at __shared__ 0x80 in block (0,0,0) :
=========     Write Thread (32,0,0) at planted_shared_race+0xd0
=========     Read Thread (0,0,0) at planted_shared_race+0x100
=========     Current Value : 0
=========
========= ERROR: Race reported between Write access at 0x00000370 in raceWAW.cu:18:WAW(void)
=========     and Write access at 0x00000370 in raceWAW.cu:18:WAW(void) [31 hazards]
=========
========= RACECHECK SUMMARY: 2 hazards displayed (2 errors, 0 warnings)
"""
SYNCCHECK_PLANTED = """\
========= COMPUTE-SANITIZER
========= Barrier error detected. Divergent thread(s) in warp
=========     at planted_divergent_barrier+0x80
=========     by thread (0,0,0) in block (0,0,0)
=========
========= ERROR SUMMARY: 2 errors
"""
INITCHECK_PLANTED = """\
========= COMPUTE-SANITIZER
========= Uninitialized __global__ memory read of size 4 bytes
=========     at planted_uninitialized_read+0x90
=========     by thread (0,0,0) in block (0,0,0)
=========     Address 0x7f2a40000000
=========
========= ERROR SUMMARY: 1500 errors
"""
CLEAN = "========= COMPUTE-SANITIZER\n========= ERROR SUMMARY: 0 errors\n"


def test_memcheck_counts_from_its_summary_and_names_the_kernel():
    log = parse_log(MEMCHECK_PLANTED, "memcheck", ["planted_oob_write", "planted_oob"])
    assert log.errors == 33 and log.finished and not log.clean
    assert [r.kernel for r in log.records] == ["planted_oob_write", "planted_oob_write", ""]
    assert log.records[0].kind == "Invalid __global__ write of size 4 bytes"
    assert log.records[2].kind.startswith("Program hit CUDA_ERROR_LAUNCH_FAILED")
    assert "Host Frame: cuLaunchKernel" in log.records[0].text   # the continuation lines belong to their record
    assert log.per_kernel() == {"planted_oob_write": 2, "(no kernel named)": 1}


def test_racecheck_reads_errors_warnings_and_hazards():
    log = parse_log(RACECHECK_ANALYSIS, "racecheck")
    assert (log.hazards, log.errors, log.warnings) == (2, 1, 1) and not log.clean
    assert [(r.severity, r.kernel) for r in log.records] == [("error", "planted_shared_race"),
                                                             ("warning", "mma_sp_f16_64x16_k64_4x1_s6")]
    hazards = parse_log(RACECHECK_HAZARDS, "racecheck")
    assert (hazards.hazards, hazards.errors, hazards.warnings) == (2, 2, 0)
    assert [r.kernel for r in hazards.records] == ["planted_shared_race", "WAW"]
    assert hazards.records[0].kind.startswith("Error: Potential RAW hazard detected at __shared__ 0x...")
    clean = parse_log("========= COMPUTE-SANITIZER\n========= RACECHECK SUMMARY: 0 hazards displayed "
                      "(0 errors, 0 warnings)\n", "racecheck")
    assert clean.clean and clean.records == []


def test_synccheck_and_initcheck_reports():
    sync = parse_log(SYNCCHECK_PLANTED, "synccheck", ["planted_divergent_barrier"])
    assert sync.errors == 2 and sync.findings_for("planted_divergent_barrier")
    init = parse_log(INITCHECK_PLANTED, "initcheck", ["planted_uninitialized_read"])
    assert init.errors == 1500 and len(init.records) == 1   # the print limit cuts records, never the count
    assert parse_log(CLEAN, "initcheck").clean


def test_a_report_that_did_not_finish_is_not_clean():
    cut = parse_log("========= COMPUTE-SANITIZER\n========= Invalid __global__ read of size 16 bytes\n", "memcheck")
    assert cut.errors is None and not cut.finished and not cut.clean
    crashed = parse_log(CLEAN.replace("========= ERROR", "========= Internal Sanitizer Error: The Sanitizer "
                                      "encountered an error while launching the application\n========= ERROR"),
                        "memcheck")
    assert crashed.errors == 0 and crashed.run_problems and not crashed.clean
    # the program's own failure leaves the report whole (the run's exit code tells the rest)
    stopped = parse_log(MEMCHECK_PLANTED.replace("========= ERROR", "========= Target application returned an "
                                                 "error\n========= ERROR"), "memcheck", ["planted_oob_write"])
    assert stopped.program_failed and stopped.finished and stopped.errors == 33 and len(stopped.records) == 3
    assert parse_log("", "memcheck").errors is None
    # racecheck printing an ERROR SUMMARY of 0 after its hazards keeps the hazards' count
    both = parse_log(RACECHECK_ANALYSIS + "========= ERROR SUMMARY: 0 errors\n", "racecheck")
    assert both.errors == 1


# --- the jobs --------------------------------------------------------------------------------------------------
def test_every_shipped_entry_point_is_launched():
    jobs = shipped_jobs()
    launched = {kernel_name(job) for job in jobs}
    for cfg in MmaSpGemm.CONFIGS.values():
        assert {cfg.kernel_name("float16"), cfg.kernel_name("bfloat16")} <= launched
    for cfg in WgmmaSpGemm.CONFIGS.values():
        assert cfg.kernel_name("float16") in launched and (cfg.fp16_only or cfg.kernel_name("bfloat16") in launched)
        if cfg.every_type:   # tf32, e4m3, e5m2, int8, uint8 too
            assert {cfg.kernel_name(dtype) for dtype in WGMMA_SP_TYPES} <= launched
    assert {cfg.kernel_name("float16") for cfg in WgmmaSpGemm.DIAGNOSTIC_CONFIGS} <= launched
    for cfg in MmaDenseGemm.CONFIGS.values():
        assert {cfg.kernel_name("float16"), cfg.kernel_name("bfloat16")} <= launched
    assert {"peak_wgmma_sp_bf16_f32", "peak_mma_s8_s32", "peak_stream_read", "mma_sp_peak_f16"} <= launched
    assert len({job_label(job) for job in jobs}) == len(jobs)


@pytest.mark.parametrize("key", list(MmaSpGemm.CONFIGS))
def test_mma_sp_problems_reach_every_path(key):
    cfg = MmaSpGemm.CONFIGS[key]
    problems = mma_sp_problems(cfg)
    for _, m, n, k in problems:
        assert MmaSpGemm(key).supports(m, n, k, "float16")[0]
    if not cfg.per_sm:
        (_, m, n, k), (_, m1, n1, k1) = problems
        assert k // cfg.bk > cfg.stages and (m // cfg.bm) % 8        # the ring wraps; a partial raster group
        assert (m1, n1, k1) == (cfg.bm, cfg.bn, cfg.bk) and k1 // cfg.bk < cfg.stages
        return
    (_, m, n, k), (_, m1, n1, k1) = problems
    splits = cfg.splits(m, n, k, 132)
    per_split = -(-UNEVEN_SLICES // splits)
    assert 1 < splits and UNEVEN_SLICES - (splits - 1) * per_split < per_split, "the last split is short"
    assert not cfg.cluster_sum or splits == MAX_CLUSTER_SPLITS
    assert cfg.splits(m1, n1, k1, 132) == k1 // cfg.bk == 2               # one slice a split


@pytest.mark.parametrize("key", list(MmaDenseGemm.CONFIGS))
def test_mma_dense_problems_reach_every_path(key):
    cfg = MmaDenseGemm.CONFIGS[key]
    jobs = [job for job in shipped_jobs() if job["kernel"] == "mma.sync" and job["config"] == key]
    problems = [(job["m"], job["n"], job["k"]) for job in jobs if job["dtype"] == "float16"]
    assert problems == [(m, n, k) for _, m, n, k in mma_dense_problems(cfg)]
    assert [job["dtype"] for job in jobs].count("bfloat16") == 1 and jobs[1]["dtype"] == "bfloat16"
    assert {kernel_name(job) for job in jobs} == {cfg.kernel_name("float16"), cfg.kernel_name("bfloat16")}
    assert all(job_label(job).startswith(cfg.kernel_name(job["dtype"]) + " ") for job in jobs)
    for m, n, k in problems:
        assert MmaDenseGemm(key).supports(m, n, k, "float16")[0]
    *_, (m, n, k) = problems
    assert m % cfg.bm and n % cfg.bn and n % 2 and k % cfg.bk and k % 8 == 0   # ragged, odd N, a K tail
    slices = -(-k // cfg.bk)
    if not cfg.per_sm:
        (m0, n0, k0), (m1, n1, k1), _ = problems
        assert k0 // cfg.bk > cfg.stages and cfg.tiles(m0, 1) % cfg.group_m   # the ring wraps; a partial group
        assert cfg.tiles(m, n) > 1 and cfg.tiles(m1, n1) == 1 and k1 // cfg.bk < cfg.stages
        return
    (m0, n0, k0), (m1, n1, k1), _ = problems
    splits = cfg.splits(m0, n0, k0, 132)
    per_split = -(-UNEVEN_SLICES // splits)
    assert k0 // cfg.bk == UNEVEN_SLICES and 1 < splits
    assert UNEVEN_SLICES - (splits - 1) * per_split < per_split, "the last split is short"
    assert not cfg.cluster_sum or splits == MAX_CLUSTER_SPLITS
    assert cfg.splits(m1, n1, k1, 132) == k1 // cfg.bk == 2                  # one slice a split
    assert cfg.splits(m, n, k, 132) == slices > 2 and cfg.tiles(m, n) == 2   # one a split, the last a K tail


@pytest.mark.parametrize("cfg", list(WgmmaSpGemm.CONFIGS.values()) + list(WgmmaSpGemm.DIAGNOSTIC_CONFIGS),
                         ids=lambda c: c.kernel_name("float16"))
def test_wgmma_sp_problems_wrap_the_ring_and_fit(cfg):
    (_, m, n, k), (_, m1, n1, k1) = wgmma_sp_problems(cfg)
    path = WgmmaSpGemm(cfg)
    assert path.supports(m, n, k, "float16")[0] and path.supports(m1, n1, k1, "float16")[0]
    if cfg.per_sm:   # cluster-summed split-K: a full cluster with a short last split, and one slice a split
        splits = cfg.splits(m, n, k, 132)
        per_split = -(-UNEVEN_SLICES // splits)
        assert k // 64 == UNEVEN_SLICES and splits == MAX_CLUSTER_SPLITS
        assert UNEVEN_SLICES - (splits - 1) * per_split < per_split, "the last split is short"
        assert cfg.splits(m1, n1, k1, 132) == k1 // 64 == 2
        return
    assert k // 64 > cfg.stages and (m // cfg.bm, n // cfg.bn) == (3, 2)   # the ring wraps; a partial raster group
    assert (m1, n1, k1) == (cfg.bm, cfg.bn, 64)                           # one tile of one slice


@pytest.mark.parametrize("key", [key for key, cfg in WgmmaSpGemm.CONFIGS.items() if cfg.every_type])
def test_wgmma_sp_jobs_of_the_other_types_reach_their_slice_loops(key):
    """Each other type runs the tile's first problem, K in its own slices: an odd count, so the 8-bit types' loop
    of slice pairs runs and then its last slice; e4m3 runs the second too (a lone slice, or one a split)."""
    cfg = WgmmaSpGemm.CONFIGS[key]
    jobs = [job for job in shipped_jobs() if job["kernel"] == "wgmma.sp" and job["config"] == key]
    by_type = {dtype: [(job["m"], job["n"], job["k"]) for job in jobs if job["dtype"] == dtype]
               for dtype in WGMMA_SP_TYPES}
    slice_k = {"float16": 64, "bfloat16": 64, "float32": 32, "float8_e4m3fn": 128, "float8_e5m2": 128,
               "int8": 128, "uint8": 128}
    for dtype, problems in by_type.items():
        assert len(problems) == (2 if dtype in ("float16", "float8_e4m3fn") else 1), dtype
        m, n, k = problems[0]
        assert WgmmaSpGemm(key).supports(m, n, k, dtype)[0] and k % slice_k[dtype] == 0
        slices = k // slice_k[dtype]
        assert slices % 2 == 1 and slices == (UNEVEN_SLICES if cfg.per_sm else cfg.stages + 3), dtype
    (m1, n1, k1) = by_type["float8_e4m3fn"][1]
    assert k1 == (2 if cfg.per_sm else 1) * 128
    if cfg.per_sm:
        assert cfg.of("float8_e4m3fn").splits(m1, n1, k1, 132) == 2


@pytest.mark.skipif(build.find_nvcc() is None, reason="nvcc not found (PATH, $CUDA_HOME, /usr/local/cuda)")
def test_the_planted_faults_compile_to_their_entry_points(tmp_path):
    log = build.nvcc_compile(PLANTED, tmp_path / "planted.cubin", extra_flags=("-Xptxas", "-v"))
    entries = set(re.findall(r"Compiling entry function '(\w+)' for 'sm_90a'", log))
    assert entries == {"planted_oob_write", "planted_shared_race", "planted_uninitialized_read",
                       "planted_divergent_barrier", "probe_cluster_race"}
    assert PLANTED.parent != build.KERNEL_DIR and PLANTED not in build.kernel_sources()   # never shipped


# --- finding the tool ------------------------------------------------------------------------------------------
def _executable(path: Path, text: str = "#!/bin/sh\n") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)
    return path


def test_compute_sanitizer_is_found_where_cuda_keeps_it(tmp_path, monkeypatch):
    monkeypatch.delenv("COMPUTE_SANITIZER", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.delenv("CUDA_PATH", raising=False)
    monkeypatch.setattr(sanitizer, "find_nvcc", lambda: None)
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "cuda"))
    home = _executable(tmp_path / "cuda" / "bin" / "compute-sanitizer")
    assert sanitizer.find_compute_sanitizer() == str(home)
    beside = _executable(tmp_path / "toolkit" / "bin" / "compute-sanitizer")
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "nowhere"))
    monkeypatch.setattr(sanitizer, "find_nvcc", lambda: str(_executable(tmp_path / "toolkit" / "bin" / "nvcc")))
    assert sanitizer.find_compute_sanitizer() == str(beside)
    on_path = _executable(tmp_path / "path" / "compute-sanitizer")
    monkeypatch.setenv("PATH", str(tmp_path / "path"))
    assert sanitizer.find_compute_sanitizer() == str(on_path)
    monkeypatch.setenv("COMPUTE_SANITIZER", str(tmp_path / "missing"))
    assert sanitizer.find_compute_sanitizer() is None


def test_options_go_in_only_where_the_tool_lists_them(tmp_path):
    listed = {"--print-limit", "--padding", "--racecheck-memcpy-async"}
    memcheck = sanitizer.tool_command("cs", "memcheck", tmp_path / "m.log", tmp_path / "j.json", listed)
    assert memcheck[:3] == ["cs", "--tool", "memcheck"] and memcheck[memcheck.index("--padding") + 1] == "256"
    assert "--check-bulk-copy" not in memcheck and memcheck[memcheck.index("--log-file") + 1] == str(tmp_path / "m.log")
    assert memcheck[-4:] == [sys.executable, "-m", "vkcoop.cuda.sanitize_child", str(tmp_path / "j.json")]
    racecheck = sanitizer.tool_command("cs", "racecheck", tmp_path / "r.log", tmp_path / "j.json", listed)
    assert racecheck[racecheck.index("--racecheck-memcpy-async") + 1] == "yes" and "--padding" not in racecheck
    synccheck = sanitizer.tool_command("cs", "synccheck", tmp_path / "s.log", tmp_path / "j.json",
                                       listed | {"--check-warpgroup-mma"})
    assert synccheck[synccheck.index("--check-warpgroup-mma") + 1] == "yes"


# --- the runner and the command, against a stand-in compute-sanitizer ------------------------------------------
FAKE = """#!{python}
import json, os, sys
args = sys.argv[1:]
if args == ["--help"]:
    print("  --tool arg  --log-file arg  --print-limit arg  --padding arg")
    sys.exit(0)
if args == ["--version"]:
    print("NVIDIA (R) Compute Sanitizer\\nVersion 2099.1.0 (stand-in)")
    sys.exit(0)
tool, log = args[args.index("--tool") + 1], args[args.index("--log-file") + 1]
jobs = json.load(open(args[-1]))
scenario = os.environ.get("FAKE_SANITIZER_" + tool.upper(), "clean")
ran = jobs[:1] if scenario == "stopped" else jobs
for index, job in enumerate(ran):
    status = "failed" if scenario == "wrong" else "ok"
    print(json.dumps({{"index": index, "kernel": "k%d" % index, "label": "k%d 1x1x1" % index, "status": status,
                      "detail": ""}}))
report = "========= COMPUTE-SANITIZER\\n"
if scenario == "race":
    report += "========= Error: Race reported between Write access at k0+0x10\\n=========     and Read access at k0+0x20\\n"
    report += "========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)\\n"
elif scenario != "crash":
    report += "========= ERROR SUMMARY: 0 errors\\n"
open(log, "w").write(report)
sys.exit(3 if scenario == "stopped" else 0)
"""


@pytest.fixture
def stand_in(tmp_path, monkeypatch):
    tool = _executable(tmp_path / "bin" / "compute-sanitizer", FAKE.format(python=sys.executable))
    monkeypatch.setenv("COMPUTE_SANITIZER", str(tool))
    monkeypatch.setattr(sanitizer, "availability", lambda: (True, f"{tool} on Stand-in GPU"))
    monkeypatch.setattr(sanitizer, "prebuild", lambda jobs: None)   # the stand-in loads no kernel
    return tool


def test_every_kind_of_job_has_its_module_built_first():
    from vkcoop.cuda import sanitize_child
    assert set(sanitizer.JOB_SOURCES) | {"raw"} == set(sanitize_child.RUNNERS)
    assert {sanitizer.JOB_SOURCES[job["kernel"]] for job in shipped_jobs()} == {"mma_sp", "wgmma_sp", "mma_dense",
                                                                                  "peak"}


def test_the_child_reports_each_job_and_stops_at_a_cuda_error(monkeypatch):
    import io
    from vkcoop.cuda import driver, sanitize_child

    def broken(job, buffers):
        raise driver.CudaError("cuCtxSynchronize failed with CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access")
    monkeypatch.setitem(sanitize_child.RUNNERS, "peak", lambda job, buffers: ("ok", job["name"]))
    monkeypatch.setitem(sanitize_child.RUNNERS, "stream_read", broken)
    jobs = [{"kernel": "peak", "name": "peak_mma_f16_f32"}, {"kernel": "stream_read", "name": "peak_stream_read"},
            {"kernel": "peak", "name": "peak_mma_bf16_f32"}]
    out = io.StringIO()
    assert not sanitize_child.run_jobs(jobs, out)
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [(line["kernel"], line["status"]) for line in lines] == [("peak_mma_f16_f32", "ok"),
                                                                     ("peak_stream_read", "error")]
    assert "ILLEGAL_ADDRESS" in lines[1]["detail"]
    out = io.StringIO()
    assert sanitize_child.run_jobs(jobs[:1], out) and json.loads(out.getvalue())["detail"] == "peak_mma_f16_f32"


class StandInGpu:
    """The driver calls of the child's dense runner on numpy: memory by address (cuMemAlloc's bytes are 0xFF until
    written) and a stand-in mma.sync kernel that reads A [M][K] and B^T [N][K] from buffers of exactly that size,
    requires zeroed arrival counters, accumulates in fp32 and writes C; ``plant`` (a C index) it gets wrong."""

    def __init__(self):
        self.memory, self.next_address, self.launches, self.plant = {}, 1 << 20, [], None

    def allocate(self, nbytes):
        address, self.next_address = self.next_address, self.next_address + (1 << 24)
        self.memory[address] = np.full(nbytes, 0xFF, np.uint8)
        return address

    def launch(self, func, grid, block, smem, stream, args, name, cluster=1):
        import ml_dtypes
        values = [arg.value for arg in args]
        split = len(values) == 9
        m, n, k = values[5:8] if split else values[3:6]
        dtype = ml_dtypes.bfloat16 if "_bf16_" in name else np.float16
        a = self.memory[values[0]].view(dtype).reshape(m, k)
        b_t = self.memory[values[1]].view(dtype).reshape(n, k)
        if split:
            assert not self.memory[values[4]].any(), "arrival counters not zero before the launch"
        c = (a.astype(np.float32) @ b_t.astype(np.float32).T).astype(dtype)
        if self.plant is not None:
            c.flat[self.plant] = dtype(7)
        self.memory[values[2]][:] = c.view(np.uint8).ravel()
        self.launches.append((name, grid, cluster, [self.memory[v].size for v in values[3:5]] if split else []))


@pytest.fixture
def stand_in_gpu(monkeypatch):
    from vkcoop.cuda import driver, launches
    gpu = StandInGpu()

    class Memory:
        def __init__(self, nbytes):
            self.nbytes, self.address = nbytes, gpu.allocate(nbytes)

        @classmethod
        def holding(cls, array):
            memory = cls(array.nbytes)
            gpu.memory[memory.address][:] = np.ascontiguousarray(array).view(np.uint8).ravel()
            return memory

        def fill_zero(self):
            gpu.memory[self.address][:] = 0

        def read(self, dtype):
            return gpu.memory[self.address].view(dtype).copy()

        def free(self):
            pass

    class Module:
        def function(self, name, dynamic_smem=0):
            return name

    monkeypatch.setattr(driver, "DeviceMemory", Memory)
    monkeypatch.setattr(driver, "launch", gpu.launch)
    monkeypatch.setattr(driver, "synchronize", lambda: None)
    monkeypatch.setattr(driver, "sm_count", lambda ordinal=0: 132)
    monkeypatch.setattr(driver, "max_active_clusters", lambda func, cluster, threads, smem, name: 1000)
    monkeypatch.setattr(launches, "module", lambda source: Module())
    return gpu


def test_the_child_runs_each_dense_job_on_its_operands(stand_in_gpu):
    import io
    from vkcoop.cuda import sanitize_child
    jobs = [job for job in shipped_jobs() if job["kernel"] == "mma.sync"]
    out = io.StringIO()
    assert sanitize_child.run_jobs(jobs, out)
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [line["status"] for line in lines] == ["ok"] * len(jobs) and len(stand_in_gpu.launches) == 2 * len(jobs)
    assert [line["label"] for line in lines] == [job_label(job) for job in jobs]
    # 128x32k64s2w3 on 128x64x128: 2 tiles, 2 splits of one slice; partials 2 x 2 tiles of 128x32 fp32, 2 counters
    one_slice = next(i for i, job in enumerate(jobs) if job["config"] == "128x32k64s2w3" and job["k"] == 128)
    assert stand_in_gpu.launches[2 * one_slice] == ("mma_dense_f16_128x32_k64_8x1_s2_g8_sk", (4,), 1,
                                                    [2 * 2 * 128 * 32 * 4, 2 * 4])
    assert lines[one_slice]["detail"] == "mma_dense_f16_128x32_k64_8x1_s2_g8_sk grid=4 splits=2"
    stand_in_gpu.plant = 5
    out = io.StringIO()
    assert sanitize_child.run_jobs(jobs[:1], out)
    line = json.loads(out.getvalue())
    assert line["status"] == "failed" and f"1 of {jobs[0]['m'] * jobs[0]['n']} elements of C differ" in line["detail"]


def test_the_child_walks_each_persistent_wgmma_job_on_fewer_ctas_than_its_tiles(stand_in_gpu, monkeypatch):
    """A persistent kernel launched with the GPU's SM count would give each of a small problem's tiles a CTA of its
    own; the child launches it on PERSISTENT_CTAS, so every CTA walks tiles."""
    import io
    from types import SimpleNamespace
    from vkcoop.cuda import launches, sanitize_child
    from vkcoop.cuda.sanitize_jobs import PERSISTENT_CTAS, wgmma_config
    launched = []
    c = SimpleNamespace(address=0)
    monkeypatch.setattr(sanitize_child, "_gemm_operands", lambda job, buffers: (0, 0, 0, c, None))
    monkeypatch.setattr(sanitize_child, "_run_twice", lambda launch, c, expected: ("ok", ""))
    monkeypatch.setattr(launches, "wgmma_sp_launch", lambda cfg, dtype, m, n, k, *ops: launched.append(
        (cfg, m // cfg.bm * (n // cfg.bn), ops[-1])))
    jobs = [job for job in shipped_jobs() if job["kernel"] == "wgmma.sp"]
    assert sanitize_child.run_jobs(jobs, io.StringIO())
    assert len(launched) == len(jobs)
    walks = [(cfg, tiles) for cfg, tiles, sms in launched if cfg.persistent]
    assert {cfg for cfg, _ in walks} == {wgmma_config(job["config"]) for job in jobs
                                         if wgmma_config(job["config"]).persistent}
    assert any(tiles >= 3 * PERSISTENT_CTAS for _, tiles in walks)
    assert all(sms == (PERSISTENT_CTAS if cfg.persistent else 132) for cfg, _, sms in launched)


def _jobs():
    return shipped_jobs()[:3]


@pytest.mark.parametrize("scenario, clean", [("clean", True), ("race", False), ("crash", False),
                                             ("stopped", False), ("wrong", False)])
def test_a_tool_run_is_clean_only_when_everything_is(stand_in, tmp_path, monkeypatch, scenario, clean):
    monkeypatch.setenv("FAKE_SANITIZER_MEMCHECK", scenario)
    run = sanitizer.run_tool(str(stand_in), "memcheck", _jobs(), tmp_path / "logs", {"--padding"})
    assert run.ok is clean
    assert (tmp_path / "logs" / "memcheck.log").is_file() and (tmp_path / "logs" / "memcheck.jobs.jsonl").is_file()
    assert ("NOT CLEAN" in run.line()) is not clean
    if scenario == "stopped":
        assert run.statuses()["not run"] == 2 and "exit 3" in run.line()


def test_the_pass_runs_each_tool_and_reports_per_tool(stand_in, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_SANITIZER_RACECHECK", "race")
    seen = []
    report = sanitizer.run_pass(sanitizer.TOOLS, _jobs(), tmp_path, progress=seen.append)
    data = json.loads(json.dumps(report.to_dict()))
    assert data["version"] == "2099.1.0" and data["device"] == "Stand-in GPU" and not data["ok"]
    assert {t: data["tools"][t]["ok"] for t in sanitizer.TOOLS} == {"memcheck": True, "racecheck": False,
                                                                     "synccheck": True, "initcheck": True}
    assert data["tools"]["racecheck"]["per_kernel_findings"] == {"k0": 1}
    assert data["tools"]["memcheck"]["jobs"]["ok"] == 3 and data["configurations"] == 3
    assert len(data["summary"]) == 4 and any(line.startswith("racecheck:") for line in seen)


def test_the_command_writes_json_and_exits_by_the_result(stand_in, tmp_path, monkeypatch, capsys):
    out = tmp_path / "report.json"
    argv = ["sanitize", "cuda", "--kernels", "mma_sp_f16_128x128_k64_2x2_s4 ", "--logs", str(tmp_path / "logs"),
            "--json", str(out)]
    assert cli.main(argv) == 0
    data = json.loads(out.read_text())
    assert data["ok"] and set(data["tools"]) == set(sanitizer.TOOLS)
    assert data["tools"]["memcheck"]["jobs"]["ok"] == 2        # the two problems of that configuration
    monkeypatch.setenv("FAKE_SANITIZER_INITCHECK", "crash")
    assert cli.main(argv[:-2] + ["--tools", "initcheck"]) == 1
    assert "initcheck: " in capsys.readouterr().out


@pytest.mark.parametrize("argv, message", [
    (["--kernels", "("], "is not a regular expression"),
    (["--kernels", "no_such_kernel"], "matches none of the"),
    (["--tools", "memcheck,leakcheck"], "leakcheck not among"),
    (["--parallel", "0"], "must be at least 1"),
    (["--timeout", "-3"], "positive number of seconds"),
])
def test_bad_arguments_are_one_line_usage_errors(capsys, argv, message):
    assert message in usage_error(capsys, ["sanitize", "cuda", *argv])


def test_logs_must_name_a_folder(tmp_path, capsys):
    file = tmp_path / "file"
    file.write_text("")
    assert cli.main(["sanitize", "cuda", "--logs", str(file), "--kernels", "peak_mma_f16_f32"]) == 2
    assert "is a file" in capsys.readouterr().err


def test_without_the_tool_the_command_exits_3(monkeypatch, capsys):
    monkeypatch.setattr(sanitizer, "availability", lambda: (False, "compute-sanitizer not found (test)"))
    assert cli.main(["sanitize", "cuda", "--kernels", "peak_mma_f16_f32"]) == 3
    assert "compute-sanitizer not found (test)" in capsys.readouterr().err


# --- on the GPU: the planted faults ----------------------------------------------------------------------------
AVAILABLE, WHY = sanitizer.availability()
on_gpu = pytest.mark.skipif(not AVAILABLE, reason=WHY)


def _raw(name: str, **launch) -> dict:
    return {"kernel": "raw", "source": str(PLANTED), "name": name, **launch}


PLANTED_FAULTS = {
    "memcheck": _raw("planted_oob_write", grid=1, threads=64, buffers=[{"bytes": 32 * 4}], ints=[32]),
    "racecheck": _raw("planted_shared_race", grid=1, threads=64, buffers=[{"bytes": 64 * 4}]),
    "initcheck": _raw("planted_uninitialized_read", grid=1, threads=64,
                      buffers=[{"bytes": 64 * 4, "fill": "none"}, {"bytes": 64 * 4, "fill": "zero"}]),
    "synccheck": _raw("planted_divergent_barrier", grid=1, threads=64, buffers=[{"bytes": 64 * 4}]),
}


@pytest.mark.cuda
@pytest.mark.sanitizer
@on_gpu
@pytest.mark.parametrize("tool", sanitizer.TOOLS)
def test_each_tool_reports_its_planted_fault_every_time(tmp_path, tool):
    executable = sanitizer.find_compute_sanitizer()
    listed = sanitizer.listed_options(executable)
    job = PLANTED_FAULTS[tool]
    for attempt in range(2):
        run = sanitizer.run_tool(executable, tool, [job], tmp_path / f"{attempt}", listed, timeout_s=300)
        assert run.log.finished and run.log.errors, (run.line(), run.stderr[-2000:])
        assert run.log.findings_for(job["name"]), (run.line(), [r.to_dict() for r in run.log.records])


@pytest.mark.cuda
@pytest.mark.sanitizer
@on_gpu
def test_correct_kernels_are_clean_under_every_tool(tmp_path):
    names = ("mma_sp_f16_128x32_k128_4x1_s3_cs", "mma_sp_f16_128x32_k128_4x1_s3_sk", "wgmma_sp_f16_bn16_c1_s8")
    jobs = [job for job in shipped_jobs() if kernel_name(job) in names]
    report = sanitizer.run_pass(sanitizer.TOOLS, jobs, tmp_path, timeout_s=300)
    assert report.ok, report.lines()


@pytest.mark.cuda
@pytest.mark.sanitizer
@on_gpu
def test_racecheck_across_a_cluster_is_recorded(tmp_path):
    """A probe, not a planted fault: whether racecheck sees a race through distributed shared memory is the tool's
    coverage, written down in docs/sanitizers.md from this test's warning."""
    executable = sanitizer.find_compute_sanitizer()
    job = _raw("probe_cluster_race", grid=2, threads=32, buffers=[{"bytes": 32 * 4}])
    run = sanitizer.run_tool(executable, "racecheck", [job], tmp_path, sanitizer.listed_options(executable), 300)
    assert run.log.finished, run.line()
    warnings.warn(f"racecheck on a race through distributed shared memory: {len(run.log.records)} records, "
                  f"{run.log.errors} errors, {run.log.warnings} warnings ({os.path.basename(executable)} "
                  f"{sanitizer.tool_version(executable)})")
