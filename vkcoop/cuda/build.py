"""Compiling the .cu kernels to sm_90a cubins, cached on disk.

Two routes, tried in order:

1. ``nvcc -gencode=arch=compute_90a,code=sm_90a -cubin`` when nvcc is on PATH
   (or ``$CUDA_HOME/bin``);
2. NVRTC through cuda.core: ``Program(source, "c++", ProgramOptions(arch="sm_90a"))``
   compiled to ``"cubin"``.  (CuPy's RawModule can't be used: it appends its own
   ``-arch`` and cannot target the ``a`` feature set that wgmma needs.)

Cubins are cached under ``vkcoop.paths.cache_root()/cuda`` keyed by a hash of
the sources, flags and compiler identity.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path

from vkcoop.errors import Error
from vkcoop.paths import cache_root

KERNEL_DIR = Path(__file__).resolve().parent / "kernels"
ARCH = "sm_90a"
NVCC_FLAGS = ("-gencode=arch=compute_90a,code=sm_90a", "-cubin", "-O3", "-std=c++17", "--split-compile=0")


class KernelBuildError(Error, RuntimeError):
    """A kernel failed to compile (the message carries the compiler's output)."""


def kernel_sources() -> list[Path]:
    return sorted(KERNEL_DIR.glob("*.cu"))


def find_nvcc() -> str | None:
    nvcc = shutil.which("nvcc")
    if nvcc:
        return nvcc
    for root in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if root and (Path(root) / "bin" / "nvcc").is_file():
            return str(Path(root) / "bin" / "nvcc")
    return None


def _digest(source: Path, extra: str) -> str:
    h = hashlib.sha256(extra.encode())
    for path in [source, *sorted(KERNEL_DIR.glob("*.cuh"))]:
        h.update(path.name.encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:20]


def nvcc_compile(source: Path, output: Path, *, nvcc: str | None = None,
                 extra_flags: tuple[str, ...] = ()) -> str:
    """Compile one .cu to a cubin with nvcc; returns the compiler's stderr (ptxas -v output)."""
    nvcc = nvcc or find_nvcc()
    if nvcc is None:
        raise KernelBuildError("nvcc not found on PATH, $CUDA_HOME/bin or /usr/local/cuda/bin")
    cmd = [nvcc, *NVCC_FLAGS, *extra_flags, "-I", str(KERNEL_DIR), "-o", str(output), str(source)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise KernelBuildError(f"nvcc failed for {source.name} (exit {proc.returncode}):\n"
                               f"{' '.join(cmd)}\n{proc.stdout}{proc.stderr}")
    return proc.stderr


def _cuda_core_compile(source: Path) -> bytes:
    try:
        from cuda.core import Program, ProgramOptions  # cuda-core >= 0.4
    except ImportError:
        try:
            from cuda.core.experimental import Program, ProgramOptions
        except ImportError as exc:
            raise KernelBuildError("neither nvcc nor cuda.core (NVRTC) is available") from exc
    options = ProgramOptions(arch=ARCH, std="c++17", include_path=[str(KERNEL_DIR)])
    program = Program(source.read_text(), "c++", options)
    try:
        obj = program.compile("cubin")
    except Exception as exc:  # NVRTC raises with its log in the message
        raise KernelBuildError(f"NVRTC (cuda.core) failed for {source.name}: {exc}") from exc
    return bytes(obj.code)


_locks: dict[str, threading.Lock] = {}
_locks_guard = threading.Lock()


def compile_in_background(names) -> list[threading.Thread]:
    """Start compiling ``kernels/<name>.cu`` for each name on its own thread (nvcc runs as a process, so they
    overlap each other and the caller's work); a later :func:`compile_kernel` of the same name waits for it. A
    failure is left for that call to report."""
    def compile_quietly(name):
        try:
            compile_kernel(name)
        except Exception:  # noqa: BLE001 - compile_kernel raises it again, in words, where it is needed
            pass

    threads = [threading.Thread(target=compile_quietly, args=(name,), name=f"nvcc {name}", daemon=True)
               for name in names]
    for thread in threads:
        thread.start()
    return threads


def compile_kernel(name: str) -> tuple[bytes, str]:
    """Return ``(cubin, how)`` for ``kernels/<name>.cu``, compiling on a cache miss (one compile per name at a
    time: a second caller waits and reads the cache)."""
    return compile_file(KERNEL_DIR / f"{name}.cu")


def compile_file(source: Path) -> tuple[bytes, str]:
    """Return ``(cubin, how)`` for a .cu file (it may include the kernels' headers), compiling on a cache miss; one
    compile per file at a time."""
    source = Path(source)
    with _locks_guard:
        lock = _locks.setdefault(str(source), threading.Lock())
    with lock:
        return _compile_file(source)


def _compile_file(source: Path) -> tuple[bytes, str]:
    name = source.stem
    if not source.is_file():
        raise KernelBuildError(f"no kernel source {source}")
    nvcc = find_nvcc()
    compiler = f"nvcc:{nvcc}" if nvcc else "nvrtc:cuda.core"
    key = _digest(source, compiler + " ".join(NVCC_FLAGS))
    cache_dir = cache_root() / "cuda"
    cached = cache_dir / f"{name}-{key}.cubin"
    if cached.is_file():
        return cached.read_bytes(), f"cache ({compiler})"
    cache_dir.mkdir(parents=True, exist_ok=True)
    if nvcc:
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / f"{name}.cubin"
            nvcc_compile(source, out, nvcc=nvcc)
            cubin = out.read_bytes()
    else:
        cubin = _cuda_core_compile(source)
    tmp_path = cached.with_suffix(f".tmp{os.getpid()}")
    tmp_path.write_bytes(cubin)
    tmp_path.replace(cached)
    return cubin, compiler
