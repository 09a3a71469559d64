"""The hand-written CUDA kernels compile in the background while a run starts (vkcoop.cuda.build): one compile
per source at a time, sources at once, and a caller that needs a kernel waits for its compile instead of
starting another."""
from __future__ import annotations

import threading
import time

from vkcoop.cuda import build


def test_background_compiles_overlap_and_a_later_caller_reads_what_they_made(monkeypatch):
    compiled, cache, both_running = [], {}, threading.Barrier(2, timeout=5)

    def fake_compile(source):
        name = source.stem
        if name in cache:
            return cache[name], "cache"
        both_running.wait()          # the two sources compile at the same time, or this times out
        time.sleep(0.05)
        compiled.append(name)
        cache[name] = name.encode()
        return cache[name], "nvcc"

    monkeypatch.setattr(build, "_compile_file", fake_compile)
    threads = build.compile_in_background(["mma_sp", "wgmma_sp"])
    assert build.compile_kernel("mma_sp") == (b"mma_sp", "cache")     # waited for the background compile
    for thread in threads:
        thread.join(timeout=5)
    assert sorted(compiled) == ["mma_sp", "wgmma_sp"]


def test_a_failed_background_compile_is_reported_by_the_call_that_needs_it(monkeypatch):
    calls = []

    def failing(source):
        name = source.stem
        calls.append(name)
        raise build.KernelBuildError(f"nvcc failed for {name}.cu")

    monkeypatch.setattr(build, "_compile_file", failing)
    for thread in build.compile_in_background(["broken"]):
        thread.join(timeout=5)
    try:
        build.compile_kernel("broken")
    except build.KernelBuildError as error:
        assert "nvcc failed for broken.cu" in str(error)
    else:
        raise AssertionError("the failure was not reported")
    assert calls == ["broken", "broken"]


def test_a_run_compiles_the_sources_of_the_hand_written_paths_it_wants():
    from vkcoop.bench.sparse import kernel_sources

    assert kernel_sources(["cuda-mma.sync", "cuda-mma.sp-cap", "cuBLAS", "vk-coopmat2-dense"]) == {"mma_dense", "mma_sp"}
    assert kernel_sources(["cuda-wgmma.sp", "cuda-mma.sync-cap"]) == {"wgmma_sp", "mma_dense"}
    assert kernel_sources(["cuSPARSELt", "vk-coopmat2-2:4"]) == set()


def test_the_first_semi_structured_conversion_runs_on_a_thread_and_a_failure_stays_there(monkeypatch):
    import sys
    import types

    from vkcoop.cuda import baselines

    calls = []
    sparse = types.ModuleType("torch.sparse")
    sparse.SparseSemiStructuredTensor = type("SparseSemiStructuredTensor", (), {"_FORCE_CUTLASS": True})
    sparse.to_sparse_semi_structured = lambda a: calls.append(a)
    torch = types.SimpleNamespace(sparse=sparse, float16="float16",
                                  zeros=lambda *shape, dtype, device: ("zeros", shape, dtype, device))
    monkeypatch.setitem(sys.modules, "torch.sparse", sparse)
    monkeypatch.setattr(baselines, "_torch", lambda: torch)
    baselines.warm_semi_structured().join(timeout=5)
    assert calls == [("zeros", (64, 64), "float16", "cuda")] and sparse.SparseSemiStructuredTensor._FORCE_CUTLASS is False

    def broken(_a):
        raise RuntimeError("no cuSPARSELt")

    sparse.to_sparse_semi_structured = broken
    thread = baselines.warm_semi_structured()
    thread.join(timeout=5)
    assert not thread.is_alive()   # the error ended the thread quietly; the path reports it when it binds
