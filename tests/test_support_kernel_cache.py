"""The compiled kernels the test runs keep (support.kernel_cubin): one compile per source, header, flag and nvcc,
read back by later runs only while all of those are the same."""
from __future__ import annotations

import pytest

import support
from vkcoop.cuda import build


@pytest.fixture
def kernels(tmp_path, monkeypatch):
    """A kernel folder of one source and one header, a cache folder, and an nvcc that counts its compiles and
    whose version is ``nvcc-<name>``'s (two stand-ins, as an upgrade brings a new one)."""
    source_dir, cache = tmp_path / "kernels", tmp_path / "cache"
    source_dir.mkdir()
    (source_dir / "k.cu").write_text('#include "common.cuh"\n__global__ void k() {}\n')
    (source_dir / "common.cuh").write_text("// shared\n")
    for name in ("a", "b"):
        tool = tmp_path / f"nvcc-{name}"
        tool.write_text(f"#!/bin/sh\necho 'Cuda compilation tools, release {name}'\n")
        tool.chmod(0o755)
    compiles = []

    def compile_(source, output, extra_flags=()):
        compiles.append(source.read_text() + (source.parent / "common.cuh").read_text())
        output.write_bytes(f"cubin {len(compiles)}".encode())
        return f"ptxas info: compile {len(compiles)}"
    monkeypatch.setattr(build, "KERNEL_DIR", source_dir)
    monkeypatch.setattr(build, "nvcc_compile", compile_)
    monkeypatch.setattr(build, "find_nvcc", lambda: str(tmp_path / "nvcc-a"))
    monkeypatch.setattr(support, "KERNEL_CACHE", cache)
    monkeypatch.setattr(support, "_identities", {})
    return source_dir, cache, compiles


def test_a_kept_kernel_is_read_back_until_its_source_a_header_or_nvcc_changes(kernels, tmp_path, monkeypatch,
                                                                             tmp_path_factory):
    source_dir, cache, compiles = kernels
    first = support.kernel_cubin(tmp_path_factory, "k")
    assert first == (b"cubin 1", "ptxas info: compile 1")
    assert support.kernel_cubin(tmp_path_factory, "k") == first and len(compiles) == 1   # read back

    (source_dir / "common.cuh").write_text("// shared, changed\n")
    assert support.kernel_cubin(tmp_path_factory, "k")[0] == b"cubin 2"                  # a header changed
    monkeypatch.setattr(build, "find_nvcc", lambda: str(tmp_path / "nvcc-b"))
    assert support.kernel_cubin(tmp_path_factory, "k")[0] == b"cubin 3"                  # another nvcc
    assert support.kernel_cubin(tmp_path_factory, "k")[0] == b"cubin 3" and len(compiles) == 3
    # only the latest is kept
    assert sorted(p.suffix for p in cache.iterdir() if p.suffix != ".lock") == [".cubin", ".log"]
