"""Helpers shared by the test modules (imported as ``support``; pytest puts tests/ on sys.path)."""
from __future__ import annotations

import contextlib

import pytest


def toolchain_or_skip():
    """spirv_tools, or skip the test when no coopmat2-capable shader toolchain exists."""
    spirv_tools = pytest.importorskip("spirv_tools")
    try:
        spirv_tools.find_toolchain()
    except Exception as error:  # noqa: BLE001 - any failure means no usable toolchain
        pytest.skip(f"no coopmat2-capable shader toolchain: {error}")
    return spirv_tools


def coopmat2_reason() -> str | None:
    """None where a Vulkan device lists VK_NV_cooperative_matrix2; else why the GPU tests skip here."""
    try:
        from vkcoop import vk
        with vk.Instance() as instance:
            if any(p.has_extension("VK_NV_cooperative_matrix2") for p in instance.physical_devices()):
                return None
        return "no Vulkan device lists VK_NV_cooperative_matrix2"
    except Exception as error:  # noqa: BLE001 - no loader, no driver...
        return f"no usable Vulkan: {error}"


def vulkan_probe() -> tuple[bool, str, bool]:
    """(a Vulkan device exists, why not, the validation layer is usable). VKCOOP_TEST_VALIDATE=0 turns the layer
    off in the tests; it is on wherever it is installed."""
    import os

    vk = pytest.importorskip("vkcoop.vk")
    try:
        with vk.Instance() as instance:
            instance.physical_devices()[0]
    except (vk.VulkanError, OSError, IndexError) as error:
        return False, f"no Vulkan device: {error}", False
    if os.environ.get("VKCOOP_TEST_VALIDATE", "1") == "0":
        return True, "", False
    try:
        with vk.Instance(validate=True):
            return True, "", True
    except vk.LayerNotFoundError:
        return True, "", False


def usage_error(capsys, argv: list[str]) -> str:
    """What ``vkcoop ARGV`` writes to stderr for a bad command line, after checking that it is a usage error: exit
    code 2, one line, in the CLI's own words."""
    from vkcoop import cli
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("vkcoop: error:") and err.count("\n") == 1, err
    return err


def corrupt(kind: str, data: bytes) -> bytes:
    """A cache entry damaged as disks and interrupted writes damage files: "empty", "truncated" or
    "bit-flipped" (one bit near the end, inside the payload)."""
    if kind == "empty":
        return b""
    if kind == "truncated":
        return data[:len(data) // 2]
    flipped = bytearray(data)
    flipped[len(flipped) - 7] ^= 0x10
    return bytes(flipped)


def child_env(*first_paths, drop=(), **variables) -> dict:
    """The environment for a test's child Python process: this one's, with ``first_paths`` and the checkout put
    ahead of the inherited ``PYTHONPATH`` (never replacing it: on the GPU host that path holds cffi and vulkan,
    which its interpreter lacks), ``drop``ped names removed and ``variables`` set."""
    import os
    from pathlib import Path

    repo = Path(__file__).resolve().parents[1]
    environment = {key: value for key, value in os.environ.items() if key not in drop}
    paths = [str(p) for p in first_paths] + [str(repo), environment.get("PYTHONPATH", "")]
    environment["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
    environment.update(variables)
    return environment


#: Where the compiled kernels and their listings are kept across runs (tests/conftest.py sets it from
#: :func:`kernel_cache_folder`). None: each run's own temporary folder.
KERNEL_CACHE = None


def kernel_cache_folder(config):
    """``kernel-cubins`` in the user's vkcoop cache (vkcoop.paths.cache_root(): VKCOOP_CACHE_DIR, else
    $XDG_CACHE_HOME/vkcoop), shared by every checkout on the machine, since a file's name says all that made it
    (:func:`kernel_cubin`); ``--cache-clear`` empties it, once, in the process that starts the workers. Where that
    folder cannot be made: pytest's cache of this checkout, else None."""
    import os
    import shutil

    from vkcoop import paths

    folder = paths.cache_root() / "kernel-cubins"
    try:
        if config.getoption("cacheclear", False) and not os.environ.get("PYTEST_XDIST_WORKER"):
            shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True, exist_ok=True)
        return folder
    except OSError:
        cache = getattr(config, "cache", None)
        return None if cache is None else cache.mkdir("kernel-cubins")


def _shared_folder(tmp_path_factory):
    """The folder the compiled kernels are kept in: :data:`KERNEL_CACHE`, else the one this run's processes share
    (under pytest-xdist the one above the workers' own temporary folders, else the run's own)."""
    import os
    from pathlib import Path

    if KERNEL_CACHE is not None:
        shared = Path(KERNEL_CACHE)
    else:
        base = Path(tmp_path_factory.getbasetemp())
        shared = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "kernel-cubins"
    shared.mkdir(parents=True, exist_ok=True)
    return shared


def tool_identity(tool: str | None) -> str:
    """What names a tool's output beside its input: a digest of the tool's executable and what its ``--version``
    says; not its path, so the same tool in another checkout's environment (the nvdisasm of each ``.venv``) names
    the same output."""
    import hashlib
    import subprocess
    from pathlib import Path

    if tool is None:
        return "none"
    if tool not in _identities:
        version = subprocess.run([tool, "--version"], capture_output=True, text=True, timeout=60).stdout
        digest = hashlib.sha256(Path(tool).resolve().read_bytes()).hexdigest()[:20]
        _identities[tool] = f"{digest}\n{version.strip()}"
    return _identities[tool]


_identities: dict[str, str] = {}


def _drop_others(shared, stem: str, keep: str, suffixes) -> None:
    """Remove the files of ``stem`` that other sources or tools made (``keep`` is this one's name)."""
    for suffix in suffixes:
        for old in shared.glob(f"{stem}-*{suffix}"):
            if not old.name.startswith(f"{keep}.") and old.name.count("-") == keep.count("-"):
                old.unlink(missing_ok=True)


class LockReentered(RuntimeError):
    """A thread asked for a file lock it already holds."""


_holders: dict[str, int] = {}       # lock file -> the thread of this process that holds it


@contextlib.contextmanager
def exclusive(path, *, wait: bool = True):
    """Hold ``path``'s flock (the pytest-xdist workers share it) and give True, or give False where ``wait`` is
    False and another holds it. Each request opens the file anew, so other threads of this process wait their turn
    as other processes do; so would a nested request in the holding thread, for itself, forever: it raises
    LockReentered instead."""
    import fcntl
    import threading
    from pathlib import Path

    key, me = str(Path(path).resolve()), threading.get_ident()
    if _holders.get(key) == me:
        raise LockReentered(f"{path} is held by this thread already: a nested request would wait for itself")
    with open(path, "w") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
            taken = True
        except BlockingIOError:
            taken = False
        if not taken:
            yield False
            return
        _holders[key] = me
        try:
            yield True
        finally:
            del _holders[key]


def kernel_cubin(tmp_path_factory, stem: str, *, wait: bool = True) -> tuple[bytes, str] | None:
    """(cubin, ptxas -v log) of ``vkcoop/cuda/kernels/<stem>.cu``, compiled once for its sources as they are and
    kept (:func:`_shared_folder`): a lock makes the first pytest-xdist worker compile and the others wait for it
    (nvcc takes 20-40 s for the larger sources on two cores); ``wait=False`` returns None instead of waiting. The
    files are named by all that makes them (the source, every kernel header, the flags, nvcc's path and version),
    so a run never reads a cubin that its own nvcc would not make from these sources; the ones of other sources
    are removed when a new one is made."""
    from vkcoop.cuda import build

    shared = _shared_folder(tmp_path_factory)
    made_by = " ".join(build.NVCC_FLAGS) + "\n" + tool_identity(build.find_nvcc())
    name = f"{stem}-{build._digest(build.KERNEL_DIR / f'{stem}.cu', made_by)}"
    cubin, log = shared / f"{name}.cubin", shared / f"{name}.ptxas.log"
    with exclusive(shared / f"{name}.lock", wait=wait) as got:
        if not got:
            return None
        if not (cubin.is_file() and log.is_file()):
            text = build.nvcc_compile(build.KERNEL_DIR / f"{stem}.cu", cubin.with_suffix(".tmp"),
                                      extra_flags=("-Xptxas", "-v"))
            log.write_text(text)
            cubin.with_suffix(".tmp").replace(cubin)
            _drop_others(shared, stem, name, (".cubin", ".ptxas.log"))
    return cubin.read_bytes(), log.read_text()


def kernel_cubins(tmp_path_factory, stems) -> dict[str, tuple[bytes, str]]:
    """:func:`kernel_cubin` of each stem, one nvcc at a time (each already runs on every core: several at once only
    cost memory and cache): first those no other worker is compiling, then the ones it was."""
    built = {stem: kernel_cubin(tmp_path_factory, stem, wait=False) for stem in stems}
    return {stem: built[stem] or kernel_cubin(tmp_path_factory, stem) for stem in stems}


def kernel_listing(tmp_path_factory, stem: str, disassemble=None) -> str:
    """nvdisasm's listing of :func:`kernel_cubin`'s cubin, made once and kept like the cubin (nvdisasm takes
    seconds on the larger ones) by ``disassemble`` (vkcoop.inspect.sass.disassemble), named by the cubin and
    nvdisasm's path and version."""
    import hashlib

    from vkcoop.inspect import sass

    disassemble = disassemble or sass.disassemble
    cubin, _log = kernel_cubin(tmp_path_factory, stem)
    shared = _shared_folder(tmp_path_factory)
    key = hashlib.sha256(cubin + tool_identity(sass.find_nvdisasm()).encode()).hexdigest()[:20]
    listing = shared / f"{stem}-{key}.sass"
    with exclusive(listing.with_name(listing.name + ".lock")):
        if not listing.is_file():
            partial = listing.with_name(listing.name + ".tmp")
            partial.write_text(disassemble(cubin))
            partial.replace(listing)
            _drop_others(shared, stem, listing.stem, (".sass",))
    return listing.read_text()
