"""GLSL -> SPIR-V through shaderc, with a content-addressed cache.

Two backends, both shaderc: the in-process cffi binding (:mod:`spirv_tools.shaderc`) when the
toolchain's libshaderc loads and passes the coopmat2 probe, otherwise the toolchain's ``glslc``
(which is how Debian 12 runs a newer Debian build: through its private ``ld-linux``).
"""
from __future__ import annotations

import functools
import hashlib
import numbers
import os
import re
import tempfile
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from .binary import MAGIC, words
from .cache import read_entry, write_entry
from .errors import Error, InputError, InputTypeError
from .reflect import reflect
from .shaderc import SHADER_KINDS, TARGET_ENVS, ShadercLibrary, resolve_include
from .toolchain import GLSLC_GLSLANG, PROBE_SHADER, Toolchain, find_toolchain, on_selection_reset

_ERROR_LINE = re.compile(r"^(?P<file>.+?):(?P<line>\d+): error: (?P<msg>.*)$", re.M)
_ERROR_NO_LINE = re.compile(r"^(?P<file>[^:\n]+): error: (?P<msg>.*)$", re.M)  # e.g. "x.comp: error: #version..."
_INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]', re.M)
_CACHE_FORMAT = "2"  # 2: entries carry a checksum (spirv_tools.cache)
_VALIDATION_FORMAT = "spirv-val pass 1"
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


class ShaderCompileError(Error, RuntimeError):
    """A shader failed to compile; carries the first error's file and line and the whole log."""

    def __init__(self, file: str, line: int | None, message: str, log: str):
        self.file, self.line, self.message, self.log = file, line, message, log
        where = f"{file}:{line}" if line is not None else file
        super().__init__(f"{where}: {message}\n{log.strip()}")


@dataclass(frozen=True)
class Backend:
    name: str            # "libshaderc" or "glslc"
    identity: str        # goes into cache keys: the tool and its versions (its place only where they are unknown)
    toolchain: Toolchain
    library: ShadercLibrary | None = None


def parse_compile_error(log: str, default_file: str) -> ShaderCompileError:
    """The first error of a compiler log as a ShaderCompileError (file, line where the log has one, message)."""
    if not isinstance(log, str) or not isinstance(default_file, str):
        raise InputTypeError("parse_compile_error takes the log and the default file name as str")
    match = _ERROR_LINE.search(log)
    if match:
        return ShaderCompileError(match["file"], int(match["line"]), match["msg"].strip(), log)
    match = _ERROR_NO_LINE.search(log)
    if match and match["file"] not in ("glslc", "glslangValidator"):
        return ShaderCompileError(match["file"], None, match["msg"].strip(), log)
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
                return Backend("libshaderc", _identity("libshaderc", tc, tc.libshaderc, ("shaderc",)), tc, library)
        return Backend("glslc", _identity("glslc", tc, tc.describe(), ("shaderc", GLSLC_GLSLANG)), tc)


def _identity(kind: str, tc: Toolchain, where, version_names: tuple[str, ...]) -> str:
    """A backend's part of the cache key: its kind and versions, so that another checkout, a reinstall or the same
    toolchain elsewhere finds the shaders already built (the SPIR-V names no path: no debug information is asked
    for); where a version is unknown, also where the tool is."""
    versions = [tc.versions.get(name) for name in version_names]
    known = all(v and not str(v).startswith("unavailable") for v in versions)
    return ":".join([kind, *map(str, versions)] + ([] if known else [str(where)]))


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
        parts.append(requested.encode() + b"\0" + text.encode())   # as the source names it, not where it lies
        parts.extend(_included_sources(text, str(found), include_dirs, seen))
    return parts


def compile(source: str | None = None, *, path: str | os.PathLike | None = None,
            defines: dict | None = None, stage: str = "comp", target_env: str = "vulkan1.3",
            include_dirs=(), entry: str = "main", name: str | None = None, use_cache: bool = True,
            assign_missing_bindings: bool = False) -> bytes:
    """Compile GLSL to SPIR-V words (as bytes).

    Give either ``source`` (with an optional display ``name``) or ``path``. ``defines`` maps macro names (C
    identifiers) to one-line values (None for a bare define). ``target_env`` is ``vulkan1.0`` .. ``vulkan1.4``;
    vulkan1.3 means SPIR-V 1.6. ``entry`` must be an entry point of the result (GLSL's is always ``main``).
    ``assign_missing_bindings`` gives every resource without a ``layout(binding=N)`` one (glslc's
    ``-fauto-bind-uniforms``, glslang's ``--auto-map-bindings``); off, such a shader is refused.
    Raises :class:`ShaderCompileError` with the first error's file:line and the compiler's message, and
    :class:`~spirv_tools.errors.InputError` (a ValueError) naming the argument for bad arguments.
    """
    source, name, path = _check_source(source, path, name)
    _check_options(stage, target_env, entry)
    if not isinstance(assign_missing_bindings, bool):
        raise InputTypeError(f"assign_missing_bindings must be True or False, got {assign_missing_bindings!r}")
    include_dirs = _check_include_dirs(include_dirs)
    macro_values = _check_defines(defines)

    be = backend()
    cached = None
    if use_cache:
        h = hashlib.sha256()
        for part in (_CACHE_FORMAT, be.identity, target_env, stage, entry,
                     repr(sorted(macro_values.items())), source):
            h.update(part.encode() + b"\0")
        if assign_missing_bindings:   # a part only when on: the keys of every other compile stay as they are
            h.update(b"assign-missing-bindings\0")
        for part in _included_sources(source, name, include_dirs, set()):
            h.update(part + b"\0")
        cached = cache_dir() / f"{h.hexdigest()}.spvc"  # a checked entry, not bare SPIR-V
        spirv = read_entry(cached, check=_spirv_problem)
        if spirv is not None:
            return spirv

    if be.library is not None:
        ok, spirv, log = be.library.compile(source, name=name, stage=stage, entry=entry, defines=macro_values,
                                            target_env=target_env, include_dirs=include_dirs,
                                            assign_missing_bindings=assign_missing_bindings)
        if not ok:
            raise parse_compile_error(log, name)
    else:
        spirv = _compile_with_glslc(be.toolchain, source, name, path, stage, target_env, entry,
                                    macro_values, include_dirs, assign_missing_bindings)
    _check_entry(spirv, entry, name)
    if cached is not None:
        write_entry(cached, spirv)
    return spirv


def _spirv_problem(payload: bytes) -> str | None:
    """A cache entry's own check: whole words, at least a header, the SPIR-V magic first."""
    if len(payload) < 20 or len(payload) % 4:
        return f"{len(payload)} bytes is not a SPIR-V module"
    if int.from_bytes(payload[:4], "little") != MAGIC:
        return f"bad SPIR-V magic 0x{int.from_bytes(payload[:4], 'little'):08x}"
    return None


def _check_entry(spirv: bytes, entry: str, name: str) -> None:
    """The compiler ignores an unknown entry name for GLSL; reflection says what the module really has."""
    names = [e.name for e in reflect(spirv).entry_points]
    if entry not in names:
        raise InputError(f"{name}: entry {entry!r} is not an entry point of the compiled module (it has "
                         f"{names or 'none'}; a GLSL shader's entry point is main)")


def _check_source(source, path, name) -> tuple[str, str, Path | None]:
    if (source is None) == (path is None):
        raise InputError("compile() takes exactly one of source= or path=")
    if name is not None:
        if not isinstance(name, str):
            raise InputTypeError(f"name must be a str, got {type(name).__name__}")
        if not name.strip() or Path(name).name in ("", ".", "..") or any(c in name for c in "\0\n\r"):
            raise InputError(f"name {name!r} is not a file name (it names the shader in error messages and "
                             "anchors its relative includes)")
    if path is not None:
        if not isinstance(path, (str, os.PathLike)):
            raise InputTypeError(f"path must be a str or os.PathLike, got {type(path).__name__}")
        path = Path(path).resolve()
        if not path.is_file():
            raise InputError(f"path {str(path)!r} is not a file")
        source, name = path.read_text(), str(path)
    elif not isinstance(source, str):
        hint = " (decode bytes first, or pass path=)" if isinstance(source, (bytes, bytearray)) else ""
        raise InputTypeError(f"source must be a str of GLSL, got {type(source).__name__}{hint}")
    name = name or "shader.comp"
    if not source.strip():
        raise InputError(f"{name}: the source is empty")
    return source, name, path


def _check_options(stage, target_env, entry) -> None:
    if stage not in SHADER_KINDS:
        raise InputError(f"stage {stage!r} is not one of {sorted(SHADER_KINDS)}")
    if target_env not in TARGET_ENVS:
        raise InputError(f"target_env {target_env!r} is not one of {sorted(TARGET_ENVS)}")
    if not isinstance(entry, str) or not _IDENTIFIER.match(entry):
        raise InputError(f"entry must be an identifier, got {entry!r}")


def _check_include_dirs(include_dirs) -> tuple[str, ...]:
    if isinstance(include_dirs, (str, bytes, os.PathLike)):
        raise InputTypeError(f"include_dirs must be a list of directories, got the single {include_dirs!r}")
    try:
        dirs = list(include_dirs)
    except TypeError:
        raise InputTypeError(f"include_dirs must be a list of directories, got {type(include_dirs).__name__}") \
            from None
    for d in dirs:
        if not isinstance(d, (str, os.PathLike)):
            raise InputTypeError(f"include_dirs entry {d!r} is not a str or os.PathLike")
    return tuple(str(Path(d).resolve()) for d in dirs)


def _check_defines(defines) -> dict[str, str]:
    """Macro name -> value text; names are C identifiers, values one line (no directive can ride along)."""
    if defines is None:
        return {}
    if not isinstance(defines, Mapping):
        raise InputTypeError(f"defines must be a dict of macro name -> value, got {type(defines).__name__}")
    values = {}
    for key, value in defines.items():
        if not isinstance(key, str) or not _IDENTIFIER.match(key):
            raise InputError(f"defines: macro name {key!r} is not an identifier")
        if value is not None and not isinstance(value, (str, numbers.Number)):
            raise InputTypeError(f"defines[{key!r}] must be a str, number, bool or None, got "
                                 f"{type(value).__name__}")
        text = "" if value is None else _macro_text(value)
        if any(c in text for c in "\n\r\0") or text.endswith("\\"):
            raise InputError(f"defines[{key!r}] = {text!r} must be a single line (no line break, NUL or "
                             "trailing backslash)")
        values[key] = text
    return values


def _macro_text(value) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    return str(value)


def _compile_with_glslc(tc: Toolchain, source, name, path, stage, target_env, entry, macros, include_dirs,
                        assign_missing_bindings: bool = False) -> bytes:
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
        args += ["-fauto-bind-uniforms"] if assign_missing_bindings else []
        proc = tc.run("glslc", args)
        log = proc.stderr.decode(errors="replace")
        if path is None:
            log = log.replace(str(src), name)
        if proc.returncode != 0:
            raise parse_compile_error(log, name)
        return out.read_bytes()


class SpirvValidationError(Error, ValueError):
    """spirv-val rejected a module."""


VALIDATOR_OPTIONS = ("--scalar-block-layout", "--uniform-buffer-standard-layout", "--workgroup-scalar-block-layout",
                     "--relax-block-layout", "--skip-block-layout", "--before-hlsl-legalization")


def validate(spirv: bytes, target_env: str = "vulkan1.3", options=(), use_cache: bool = True) -> None:
    """Run spirv-val; raises SpirvValidationError with its message (SpirvFormatError for non-SPIR-V bytes).
    ``options``: spirv-val flags from :data:`VALIDATOR_OPTIONS`, e.g. ``--scalar-block-layout`` where the
    device enables scalarBlockLayout. A pass is remembered beside the SPIR-V cache (:func:`validation_entry`),
    so the same module is not validated again by the same spirv-val; a failure is always run again."""
    if target_env not in TARGET_ENVS:
        raise InputError(f"target_env {target_env!r} is not one of {sorted(TARGET_ENVS)}")
    unknown = [o for o in options if o not in VALIDATOR_OPTIONS] if not isinstance(options, str) else [options]
    if unknown:
        raise InputError(f"options {unknown} are not among {list(VALIDATOR_OPTIONS)}")
    words(spirv)
    passed = validation_entry(bytes(spirv), target_env, tuple(options)) if use_cache else None
    if passed is not None and read_entry(passed) is not None:
        return
    proc = _run_on_module("spirv-val", spirv, ["--target-env", target_env, *options])
    if proc.returncode != 0:
        raise SpirvValidationError((proc.stderr or proc.stdout).decode(errors="replace").strip())
    if passed is not None:
        write_entry(passed, b"passed")


def validation_entry(spirv: bytes, target_env: str, options: tuple) -> Path:
    """Where a pass of spirv-val on this module is remembered: keyed by what decides the answer, the module's
    bytes, the target, the options and spirv-val's version (its place too where the version is unknown)."""
    tc = find_toolchain()
    h = hashlib.sha256()
    for part in (_VALIDATION_FORMAT, _identity("spirv-val", tc, tc.describe(), ("spirv-tools",)), target_env,
                 *options):
        h.update(part.encode() + b"\0")
    h.update(spirv)
    return cache_dir() / f"{h.hexdigest()}.valid"


def disassemble(spirv: bytes) -> str:
    return _run_on_module("spirv-dis", spirv, ["--raw-id"], check=True).stdout.decode()


def _run_on_module(tool: str, spirv: bytes, arguments: list, check: bool = False):
    """Run a SPIRV-Tools program of the toolchain on a module (checked as SPIR-V first) written to a file."""
    words(spirv)
    tc = find_toolchain()
    with tempfile.NamedTemporaryFile(suffix=".spv") as f:
        f.write(bytes(spirv))
        f.flush()
        return tc.run(tool, [*arguments, f.name], check=check)




# A new toolchain selection means a new backend: forget the cached one with it.
on_selection_reset(backend.cache_clear)
