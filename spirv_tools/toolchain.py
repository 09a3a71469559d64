"""Finding (and, on Debian, installing) a shader toolchain that can compile coopmat2 GLSL.

GL_NV_cooperative_matrix2 needs glslang >= 15.1 and shaderc/SPIRV-Tools from 2025. The search order is:

1. ``$VULKAN_SDK/bin`` (a LunarG SDK),
2. the tools on ``PATH``,
3. a private prefix of Debian packages unpacked with ``dpkg -x`` (:mod:`spirv_tools.install`). Those binaries
   need glibc >= 2.38, so on older systems they run through the prefix's own
   ``ld-linux-x86-64.so.2 --library-path``; nothing is installed system-wide.

Each candidate must pass a capability probe: compile a tiny coopmat2 shader and validate it.
:func:`spirv_tools.install.require_toolchain` is the first-use entry point: the chosen toolchain, a one-line
:class:`ToolchainMissingError`, or (asked to) a fresh install.
"""
from __future__ import annotations

import contextlib
import functools
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from .errors import Error

#: Debian packages that make up the private prefix. libc6, libstdc++6 and libgcc-s1 come along
#: because the tools need glibc 2.38 and GCC 14's runtime; they are only ever used through the
#: prefix's own dynamic loader.
PRIVATE_PACKAGES = (
    "glslc", "libshaderc1", "glslang-tools", "spirv-tools", "spirv-headers",
    "vulkan-validationlayers", "libc6", "libstdc++6", "libgcc-s1",
)
_LIB_SUBDIR = "usr/lib/x86_64-linux-gnu"
_GRAMMAR_SUBPATH = "include/spirv/unified1/spirv.core.grammar.json"

PROBE_SHADER = """#version 450
#extension GL_KHR_memory_scope_semantics : enable
#extension GL_KHR_cooperative_matrix : enable
#extension GL_NV_cooperative_matrix2 : enable
#extension GL_EXT_shader_explicit_arithmetic_types : enable
layout(local_size_x = 32) in;
layout(set = 0, binding = 0) buffer Data { float16_t data[]; };
void main() {
    tensorLayoutNV<2, gl_CooperativeMatrixClampModeConstantNV> t =
        createTensorLayoutNV(2, gl_CooperativeMatrixClampModeConstantNV);
    t = setTensorLayoutDimensionNV(t, 16, 16);
    coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA> m;
    coopMatLoadTensorNV(m, data, 0, t);
    coopMatStoreTensorNV(m, data, 0, t);
}
"""


#: A GL_EXT_bfloat16 shader: the feature probe that tells forky's glslang (16) from trixie's (15.1).
BF16_PROBE_SHADER = """#version 450
#extension GL_EXT_bfloat16 : require
#extension GL_EXT_shader_explicit_arithmetic_types : enable
layout(local_size_x = 32) in;
layout(set = 0, binding = 0) buffer Data { bfloat16_t data[]; };
void main() { data[gl_LocalInvocationID.x] = bfloat16_t(float(data[0]) * 2.0); }
"""

_private_dir_override: Path | None = None
_pinned: Toolchain | None = None


class ToolchainError(Error, RuntimeError):
    """No capable toolchain, or the private one could not be installed."""


class ToolchainMissingError(ToolchainError):
    """No capable toolchain exists (yet). The message is one line; ``rejected`` says why each candidate failed."""

    def __init__(self, message: str, rejected: list[str] | None = None):
        super().__init__(message)
        self.rejected = list(rejected or [])


@dataclass(frozen=True)
class Toolchain:
    """A set of shader tools that run, optionally through a private dynamic loader."""

    name: str                      # "vulkan-sdk", "path" or "private"
    bin_dir: Path | None           # None: resolve each tool on PATH
    loader: Path | None = None     # private prefix: its ld-linux-x86-64.so.2
    library_path: Path | None = None
    grammar: Path | None = None    # spirv.core.grammar.json for the reflector
    libshaderc: Path | None = None  # in-process shaderc candidate
    versions: dict = field(default_factory=dict, compare=False, hash=False)

    def tool(self, name: str) -> list[str]:
        """argv prefix that runs tool ``name`` (e.g. ``glslc``, ``spirv-val``)."""
        exe = (self.bin_dir / name) if self.bin_dir else shutil.which(name)
        if exe is None or not Path(exe).exists():
            raise ToolchainError(f"{self.name} toolchain has no {name}")
        if self.loader:
            return [str(self.loader), "--library-path", str(self.library_path), str(exe)]
        return [str(exe)]

    def run(self, name: str, args: list[str], *, input: bytes | None = None,
            check: bool = False) -> subprocess.CompletedProcess:
        proc = subprocess.run(self.tool(name) + list(args), input=input, capture_output=True)
        if check and proc.returncode != 0:
            raise ToolchainError(
                f"{name} {' '.join(args)} failed ({proc.returncode}): {proc.stderr.decode(errors='replace').strip()}")
        return proc

    def describe(self) -> str:
        where = self.bin_dir or "PATH"
        via = f" via {self.loader}" if self.loader else ""
        return f"{self.name} ({where}{via})"


@dataclass(frozen=True)
class Candidate:
    toolchain: Toolchain
    capable: bool
    reason: str  # why it was rejected, or "ok"


def default_private_dir() -> Path:
    """Where the private prefix lives: the one :func:`set_private_dir` chose (an install's ``dest``), else
    $VKCOOP_TOOLCHAIN_DIR, else .toolchain/ in a source checkout, else $XDG_DATA_HOME/vkcoop/toolchain."""
    if _private_dir_override is not None:
        return _private_dir_override
    override = os.environ.get("VKCOOP_TOOLCHAIN_DIR")
    if override:
        return Path(override)
    checkout = Path(__file__).resolve().parent.parent
    if (checkout / "pyproject.toml").is_file() and (checkout / "shaders").is_dir():
        return checkout / ".toolchain"
    data = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(data) / "vkcoop" / "toolchain"


def set_private_dir(prefix: Path | None) -> None:
    """Make ``prefix`` this process's private prefix (None: back to the default) and forget the selection."""
    global _private_dir_override
    _private_dir_override = Path(prefix).resolve() if prefix is not None else None
    reset_selection()


#: What else remembers the selection (the compiler's backend registers its cache here), forgotten with it.
_SELECTION_LISTENERS: list = []


def on_selection_reset(forget) -> None:
    """Call ``forget()`` whenever the toolchain selection is reset (the layers above cache what they chose)."""
    _SELECTION_LISTENERS.append(forget)


def reset_selection() -> None:
    """Forget the chosen toolchain and whatever was chosen from it, so the next use searches again."""
    find_toolchain.cache_clear()
    for forget in _SELECTION_LISTENERS:
        forget()


@contextlib.contextmanager
def using(tc: Toolchain):
    """Within the block, :func:`find_toolchain` (and so every compile) returns ``tc``, e.g. to check a
    prefix before it is accepted."""
    global _pinned
    previous, _pinned = _pinned, tc
    reset_selection()
    try:
        yield tc
    finally:
        _pinned = previous
        reset_selection()


def _private_toolchain(prefix: Path) -> Toolchain | None:
    lib = prefix / _LIB_SUBDIR
    loader = lib / "ld-linux-x86-64.so.2"
    if not (prefix / "usr/bin/glslc").exists() or not loader.exists():
        return None
    grammar = prefix / "usr" / _GRAMMAR_SUBPATH
    shaderc = lib / "libshaderc.so.1"
    return Toolchain("private", prefix / "usr/bin", loader, lib,
                     grammar if grammar.exists() else None, shaderc if shaderc.exists() else None)


def _sdk_toolchain(sdk: Path) -> Toolchain | None:
    if not (sdk / "bin" / "glslc").exists():
        return None
    grammar = sdk / _GRAMMAR_SUBPATH
    shaderc = next((p for p in (sdk / "lib" / "libshaderc_shared.so.1", sdk / "lib" / "libshaderc_shared.so")
                    if p.exists()), None)
    return Toolchain("vulkan-sdk", sdk / "bin", grammar=grammar if grammar.exists() else None, libshaderc=shaderc)


def _path_toolchain() -> Toolchain | None:
    if shutil.which("glslc") is None:
        return None
    grammar = Path("/usr") / _GRAMMAR_SUBPATH
    shaderc = next((Path(p) for p in ("/usr/lib/x86_64-linux-gnu/libshaderc.so.1",
                                      "/usr/lib/x86_64-linux-gnu/libshaderc_shared.so.1")
                    if Path(p).exists()), None)
    return Toolchain("path", None, grammar=grammar if grammar.exists() else None, libshaderc=shaderc)


#: The glslang that glslc reports: the one built into it (libshaderc), which compiles our shaders; the glslang
#: program of the same toolchain may be another release (Debian's glslc 2026.4-1 says 16.4.0-1, glslang 16.6.0).
GLSLC_GLSLANG = "glslc's glslang"


def _tool_versions(tc: Toolchain) -> dict:
    """What each tool says of itself: ``shaderc`` and :data:`GLSLC_GLSLANG` from ``glslc --version``, ``glslang``
    from ``glslang --version`` (``glslangValidator`` on older toolchains; left out where neither exists, as
    nothing here runs it), ``spirv-tools`` from ``spirv-val --version``."""
    versions = {}
    for name in ("glslc", "spirv-val"):
        text = _version_text(tc, name)
        if text.startswith("unavailable"):
            versions[name] = text
        else:
            versions.update(_parse_versions(name, text))
    for name in ("glslang", "glslangValidator"):
        text = _version_text(tc, name)
        if not text.startswith("unavailable"):
            versions.update(_parse_versions("glslang", text))
            break
    return versions


def _version_text(tc: Toolchain, name: str) -> str:
    try:
        return tc.run(name, ["--version"]).stdout.decode(errors="replace")
    except (ToolchainError, OSError) as exc:
        return f"unavailable: {exc}"


def _parse_versions(tool: str, text: str) -> dict:
    """The versions in one tool's ``--version`` text (see :func:`_tool_versions`)."""
    found = {}
    for line in text.splitlines():
        words = line.replace("Glslang Version:", "glslang-version").split()
        if len(words) < 2:
            continue
        if tool == "glslc" and words[0] in ("shaderc", "glslang"):
            found["shaderc" if words[0] == "shaderc" else GLSLC_GLSLANG] = words[1]
        elif tool == "glslang" and words[0] == "glslang-version":
            found["glslang"] = words[1].rpartition(":")[2]   # "11:16.6.0": generator version 11, glslang 16.6.0
        elif tool == "spirv-val" and words[0] == "SPIRV-Tools":
            found["spirv-tools"] = words[1]
    return found


def _compile_failure(tc: Toolchain, source: str, what: str) -> str | None:
    """None when ``tc`` compiles and validates ``source``; else why not, with the tool's first message."""
    with tempfile.TemporaryDirectory(prefix="vkcoop-probe-") as tmp:
        src, spv = Path(tmp) / "probe.comp", Path(tmp) / "probe.spv"
        src.write_text(source)
        steps = (("glslc", ["--target-env=vulkan1.3", "-fshader-stage=compute", str(src), "-o", str(spv)],
                  f"glslc cannot compile {what}"),
                 ("spirv-val", ["--target-env", "vulkan1.3", str(spv)], f"spirv-val rejects {what} SPIR-V"))
        for tool, args, failed in steps:
            try:
                proc = tc.run(tool, args)
            except (ToolchainError, OSError) as exc:
                return f"{tool} does not run: {exc}"
            if proc.returncode != 0:
                first = (proc.stderr or proc.stdout).decode(errors="replace").strip().splitlines()[:1]
                return f"{failed}: " + " ".join(first)
    return None


def probe(tc: Toolchain) -> Candidate:
    """Compile and validate PROBE_SHADER; a toolchain that can't is rejected with the tool's message."""
    why = _compile_failure(tc, PROBE_SHADER, "GL_NV_cooperative_matrix2")
    return Candidate(tc, why is None, why or "ok")


def features(tc: Toolchain) -> dict:
    """What ``tc`` compiles: ``{"coopmat2": bool, "bfloat16": bool}`` (GL_EXT_bfloat16 needs glslang >= 16)."""
    return {"coopmat2": _compile_failure(tc, PROBE_SHADER, "GL_NV_cooperative_matrix2") is None,
            "bfloat16": _compile_failure(tc, BF16_PROBE_SHADER, "GL_EXT_bfloat16") is None}


def candidates() -> list[Toolchain]:
    """Every toolchain present, in search order (not yet probed)."""
    found = []
    sdk = os.environ.get("VULKAN_SDK")
    if sdk and (tc := _sdk_toolchain(Path(sdk))):
        found.append(tc)
    if tc := _path_toolchain():
        found.append(tc)
    if tc := _private_toolchain(default_private_dir()):
        found.append(tc)
    return found


def survey() -> list[Candidate]:
    """Probe every candidate (for ``vkcoop toolchain``)."""
    results = []
    for tc in candidates():
        cand = probe(tc)
        tc.versions.update(_tool_versions(tc))
        results.append(cand)
    return results


@functools.lru_cache(maxsize=1)
def find_toolchain() -> Toolchain:
    """The first capable toolchain in search order (or the one :func:`using` pins); raises
    ToolchainMissingError (one line; ``rejected`` lists why each candidate failed)."""
    if _pinned is not None:
        return _pinned
    rejected = []
    for tc in candidates():
        cand = probe(tc)
        if cand.capable:
            tc.versions.update(_tool_versions(tc))
            return tc
        rejected.append(f"{tc.describe()}: {cand.reason}")
    where = default_private_dir()
    if rejected:
        names = ", ".join(r.split(" (", 1)[0] for r in rejected)
        found = f"rejected: {names}; `vkcoop toolchain` says why"
    else:
        found = f"no VULKAN_SDK, no glslc on PATH, no private prefix in {where}"
    raise ToolchainMissingError(
        f"no shader toolchain that can compile GL_NV_cooperative_matrix2 ({found}); install one with "
        f"`vkcoop toolchain install` (into {where}), or pass --yes or set VKCOOP_AUTO_TOOLCHAIN=1 to let "
        f"vkcoop install it", rejected)


def grammar_path() -> Path | None:
    """The newest spirv.core.grammar.json available: the chosen toolchain's, else the private prefix's."""
    try:
        tc = find_toolchain()
        if tc.grammar:
            return tc.grammar
    except ToolchainError:
        pass
    private = _private_toolchain(default_private_dir())
    return private.grammar if private else None
