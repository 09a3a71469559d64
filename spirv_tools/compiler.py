"""GLSL -> SPIR-V through shaderc, with a content-addressed cache.

Two backends, both shaderc: the in-process cffi binding (:mod:`spirv_tools.shaderc`) when the
toolchain's libshaderc loads and passes the coopmat2 probe, otherwise the toolchain's ``glslc``
(which is how Debian 12 runs a newer Debian build: through its private ``ld-linux``).
"""
from __future__ import annotations

import functools
import hashlib
import os
import re
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

from .shaderc import TARGET_ENVS, ShadercLibrary, resolve_include
from .toolchain import PROBE_SHADER, Toolchain, find_toolchain, on_selection_reset

_ERROR_LINE = re.compile(r"^(?P<file>.+?):(?P<line>\d+): error: (?P<msg>.*)$", re.M)
_INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]', re.M)
_CACHE_FORMAT = "1"


class ShaderCompileError(RuntimeError):
    """A shader failed to compile; carries the first error's file and line and the whole log."""

    def __init__(self, file: str, line: int | None, message: str, log: str):
        self.file, self.line, self.message, self.log = file, line, message, log
        where = f"{file}:{line}" if line is not None else file
        super().__init__(f"{where}: {message}\n{log.strip()}")


@dataclass(frozen=True)
class Backend:
    name: str            # "libshaderc" or "glslc"
    identity: str        # goes into cache keys: path and version
    toolchain: Toolchain
    library: ShadercLibrary | None = None


def parse_compile_error(log: str, default_file: str) -> ShaderCompileError:
    match = _ERROR_LINE.search(log)
    if match:
        return ShaderCompileError(match["file"], int(match["line"]), match["msg"].strip(), log)
    first = next((ln for ln in log.splitlines() if ln.strip()), "compilation failed")
    return ShaderCompileError(default_file, None, first.strip(), log)


def try_load_shaderc(path: Path | str | None) -> tuple[ShadercLibrary | None, str]:
    """Load libshaderc in-process and check it compiles coopmat2; returns (library or None, reason)."""
    if path is None:
        return None, "the toolchain has no libshaderc"
    try:
        library = ShadercLibrary(path)
    except OSError as exc:
        return None, f"{path} does not load in this process: {str(exc).splitlines()[0]}"
    ok, _, messages = library.compile(PROBE_SHADER, name="probe.comp")
    if not ok:
        return None, f"{path} cannot compile GL_NV_cooperative_matrix2: {messages.strip().splitlines()[0]}"
    return library, "ok"


_backend_lock = threading.Lock()


@functools.lru_cache(maxsize=1)
def backend() -> Backend:
    """The compile backend: in-process libshaderc when possible, else glslc."""
    with _backend_lock:
        tc = find_toolchain()
        if os.environ.get("SPIRV_TOOLS_BACKEND", "") != "glslc":
            library, _ = try_load_shaderc(tc.libshaderc)
            if library is not None:
                return Backend("libshaderc", f"libshaderc:{tc.libshaderc}:{tc.versions.get('shaderc')}", tc, library)
        return Backend("glslc", f"glslc:{tc.describe()}:{tc.versions.get('shaderc')}:{tc.versions.get('glslang')}", tc)


def cache_dir() -> Path:
    """SPIR-V cache: $SPIRV_TOOLS_CACHE_DIR, else $VKCOOP_CACHE_DIR/spirv, else ~/.cache/vkcoop/spirv."""
    if os.environ.get("SPIRV_TOOLS_CACHE_DIR"):
        return Path(os.environ["SPIRV_TOOLS_CACHE_DIR"])
    root = os.environ.get("VKCOOP_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(Path.home(), ".cache"), "vkcoop")
    return Path(root) / "spirv"


def _included_sources(source: str, origin: str, include_dirs, seen: set[Path]) -> list[bytes]:
    """Every file the source can include (transitively), for the cache key."""
    parts = []
    for requested in _INCLUDE.findall(source):
        found = resolve_include(requested, origin, True, include_dirs)
        if found is None or found in seen:
            continue
        seen.add(found)
        text = found.read_text()
        parts.append(str(found).encode() + b"\0" + text.encode())
        parts.extend(_included_sources(text, str(found), include_dirs, seen))
    return parts


def compile(source: str | None = None, *, path: str | os.PathLike | None = None,
            defines: dict | None = None, stage: str = "comp", target_env: str = "vulkan1.3",
            include_dirs=(), entry: str = "main", name: str | None = None, use_cache: bool = True) -> bytes:
    """Compile GLSL to SPIR-V words (as bytes).

    Give either ``source`` (with an optional display ``name``) or ``path``. ``defines`` maps macro names to
    values (None for a bare define). ``target_env`` is ``vulkan1.0`` .. ``vulkan1.4``; vulkan1.3 means SPIR-V 1.6.
    Raises :class:`ShaderCompileError` with the first error's file:line and the compiler's message.
    """
    if (source is None) == (path is None):
        raise ValueError("compile() takes exactly one of source= or path=")
    if target_env not in TARGET_ENVS:
        raise ValueError(f"target_env {target_env!r} is not one of {sorted(TARGET_ENVS)}")
    if path is not None:
        path = Path(path).resolve()
        source = path.read_text()
        name = str(path)
    name = name or "shader.comp"
    include_dirs = tuple(str(Path(d).resolve()) for d in include_dirs)
    macro_values = {str(k): ("" if v is None else _macro_text(v)) for k, v in (defines or {}).items()}

    be = backend()
    key = None
    if use_cache:
        h = hashlib.sha256()
        for part in (_CACHE_FORMAT, be.identity, target_env, stage, entry, name,
                     repr(sorted(macro_values.items())), source):
            h.update(part.encode() + b"\0")
        for part in _included_sources(source, name, include_dirs, set()):
            h.update(part + b"\0")
        key = h.hexdigest()
        cached = cache_dir() / f"{key}.spv"
        if cached.is_file():
            return cached.read_bytes()

    if be.library is not None:
        ok, spirv, log = be.library.compile(source, name=name, stage=stage, entry=entry, defines=macro_values,
                                            target_env=target_env, include_dirs=include_dirs)
        if not ok:
            raise parse_compile_error(log, name)
    else:
        spirv = _compile_with_glslc(be.toolchain, source, name, path, stage, target_env, entry,
                                    macro_values, include_dirs)
    if key is not None:
        _store(cache_dir(), key, spirv)
    return spirv


def _macro_text(value) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    return str(value)


def _compile_with_glslc(tc: Toolchain, source, name, path, stage, target_env, entry, macros, include_dirs) -> bytes:
    with tempfile.TemporaryDirectory(prefix="spirv-tools-") as tmp:
        out = Path(tmp) / "out.spv"
        if path is None:
            # A source string: place it where its includes resolve the same way as from `name`.
            src = Path(tmp) / Path(name).name
            src.write_text(source)
            dirs = ([str(Path(name).parent)] if Path(name).parent != Path(".") else []) + list(include_dirs)
        else:
            src, dirs = Path(path), list(include_dirs)
        args = [f"--target-env={target_env}", f"-fshader-stage={stage}", f"-fentry-point={entry}",
                str(src), "-o", str(out)]
        args += [f"-I{d}" for d in dirs]
        args += [f"-D{k}" if v == "" else f"-D{k}={v}" for k, v in macros.items()]
        proc = tc.run("glslc", args)
        log = proc.stderr.decode(errors="replace")
        if path is None:
            log = log.replace(str(src), name)
        if proc.returncode != 0:
            raise parse_compile_error(log, name)
        return out.read_bytes()


def _store(directory: Path, key: str, spirv: bytes) -> None:
    try:
        directory.mkdir(parents=True, exist_ok=True)
        tmp = directory / f".{key}.{os.getpid()}.tmp"
        tmp.write_bytes(spirv)
        os.replace(tmp, directory / f"{key}.spv")
    except OSError:
        pass  # a read-only cache only costs time


def validate(spirv: bytes, target_env: str = "vulkan1.3") -> None:
    """Run spirv-val; raises SpirvValidationError with its message."""
    tc = find_toolchain()
    with tempfile.NamedTemporaryFile(suffix=".spv") as f:
        f.write(spirv)
        f.flush()
        proc = tc.run("spirv-val", ["--target-env", target_env, f.name])
    if proc.returncode != 0:
        raise SpirvValidationError((proc.stderr or proc.stdout).decode(errors="replace").strip())


def disassemble(spirv: bytes) -> str:
    tc = find_toolchain()
    with tempfile.NamedTemporaryFile(suffix=".spv") as f:
        f.write(spirv)
        f.flush()
        proc = tc.run("spirv-dis", ["--raw-id", f.name], check=True)
    return proc.stdout.decode()


class SpirvValidationError(RuntimeError):
    """spirv-val rejected a module."""


# A new toolchain selection means a new backend: forget the cached one with it.
on_selection_reset(backend.cache_clear)
