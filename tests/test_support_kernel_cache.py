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


class _Config:
    """What kernel_cache_folder reads of a pytest config: the --cache-clear option and pytest's own cache."""

    def __init__(self, cacheclear, pytest_cache):
        self.cacheclear, self.cache = cacheclear, pytest_cache

    def getoption(self, name, default=None):
        return self.cacheclear if name == "cacheclear" else default


class _PytestCache:
    def __init__(self, root):
        self.root = root

    def mkdir(self, name):
        (self.root / name).mkdir(parents=True, exist_ok=True)
        return self.root / name


def test_the_kept_kernels_live_in_the_user_cache_that_every_checkout_shares(tmp_path, monkeypatch):
    monkeypatch.setenv("VKCOOP_CACHE_DIR", str(tmp_path / "user"))
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    checkout = _PytestCache(tmp_path / "checkout")
    folder = support.kernel_cache_folder(_Config(False, checkout))
    assert folder == tmp_path / "user" / "kernel-cubins" and folder.is_dir()
    (folder / "k-0123.cubin").write_bytes(b"kept")
    # another checkout of the same sources finds it
    assert support.kernel_cache_folder(_Config(False, _PytestCache(tmp_path / "other"))) == folder
    assert (folder / "k-0123.cubin").read_bytes() == b"kept"


def test_cache_clear_empties_the_kept_kernels_once_in_the_process_that_starts_the_workers(tmp_path, monkeypatch):
    monkeypatch.setenv("VKCOOP_CACHE_DIR", str(tmp_path / "user"))
    kept = tmp_path / "user" / "kernel-cubins" / "k-0123.cubin"
    kept.parent.mkdir(parents=True)
    kept.write_bytes(b"kept")
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw1")   # a worker leaves what the others may be compiling
    support.kernel_cache_folder(_Config(True, None))
    assert kept.is_file()
    monkeypatch.delenv("PYTEST_XDIST_WORKER")
    assert support.kernel_cache_folder(_Config(True, None)) == kept.parent
    assert not kept.exists() and kept.parent.is_dir()


def test_an_unwritable_user_cache_falls_back_to_the_checkouts_pytest_cache(tmp_path, monkeypatch):
    blocker = tmp_path / "user"
    blocker.write_text("a file where the cache folder would be")
    monkeypatch.setenv("VKCOOP_CACHE_DIR", str(blocker))
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    checkout = _PytestCache(tmp_path / "checkout")
    assert support.kernel_cache_folder(_Config(False, checkout)) == tmp_path / "checkout" / "kernel-cubins"
    assert support.kernel_cache_folder(_Config(False, None)) is None


def test_a_tool_is_named_by_its_contents_and_version_not_its_place(tmp_path, monkeypatch):
    monkeypatch.setattr(support, "_identities", {})
    tools = []
    for place, release in (("one", "13.0"), ("two", "13.0"), ("three", "13.1")):
        tool = tmp_path / place / "nvdisasm"
        tool.parent.mkdir()
        tool.write_text(f"#!/bin/sh\necho 'Cuda disassembler, release {release}'\n")
        tool.chmod(0o755)
        tools.append(str(tool))
    one, two, three = map(support.tool_identity, tools)
    assert one == two                  # the same tool in another checkout's environment
    assert one != three                # another release
    assert support.tool_identity(None) == "none"
