"""Finding (and, on Debian 12, installing) a shader toolchain that can compile coopmat2 GLSL.

GL_NV_cooperative_matrix2 needs glslang >= 15.1 and shaderc/SPIRV-Tools from 2025. The search order is:

1. ``$VULKAN_SDK/bin`` (a LunarG SDK),
2. the tools on ``PATH``,
3. a private prefix of Debian packages unpacked with ``dpkg -x`` (see :func:`install_private`). The suite
   defaults to forky (Debian 14, testing): trixie's glslang 15.1 compiles coopmat2 but lacks GL_EXT_bfloat16,
   which bf16 matrices need; ``VKCOOP_TOOLCHAIN_SUITE=trixie`` picks trixie. Those binaries need glibc >= 2.38, so on older systems they run through the prefix's own
   ``ld-linux-x86-64.so.2 --library-path``; nothing is installed system-wide.

Each candidate must pass a capability probe: compile a tiny coopmat2 shader and validate it.
"""
from __future__ import annotations

import functools
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

#: Debian packages that make up the private prefix. libc6, libstdc++6 and libgcc-s1 come along
#: because the tools need glibc 2.38 and GCC 14's runtime; they are only ever used through the
#: prefix's own dynamic loader.
PRIVATE_PACKAGES = (
    "glslc", "libshaderc1", "glslang-tools", "spirv-tools", "spirv-headers",
    "vulkan-validationlayers", "libc6", "libstdc++6", "libgcc-s1",
)
DEBIAN_SUITE = os.environ.get("VKCOOP_TOOLCHAIN_SUITE", "forky")
DEBIAN_MIRROR = "http://deb.debian.org/debian"
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


class ToolchainError(RuntimeError):
    """No capable toolchain, or the private one could not be installed."""


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
    """Where the private prefix lives: $VKCOOP_TOOLCHAIN_DIR, else .toolchain/ in a source checkout,
    else $XDG_DATA_HOME/vkcoop/toolchain."""
    override = os.environ.get("VKCOOP_TOOLCHAIN_DIR")
    if override:
        return Path(override)
    checkout = Path(__file__).resolve().parent.parent
    if (checkout / "pyproject.toml").is_file() and (checkout / "shaders").is_dir():
        return checkout / ".toolchain"
    data = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(data) / "vkcoop" / "toolchain"


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


def _tool_versions(tc: Toolchain) -> dict:
    versions = {}
    for name, flag in (("glslc", "--version"), ("spirv-val", "--version")):
        try:
            out = tc.run(name, [flag]).stdout.decode(errors="replace")
        except (ToolchainError, OSError) as exc:
            versions[name] = f"unavailable: {exc}"
            continue
        versions.update(_parse_versions(out))
    return versions


def _parse_versions(text: str) -> dict:
    found = {}
    for line in text.splitlines():
        words = line.split()
        if len(words) >= 2 and words[0] in ("shaderc", "spirv-tools", "glslang"):
            found[words[0]] = words[1]
        elif line.startswith("SPIRV-Tools"):
            found["spirv-tools"] = line.split()[1] if len(words) > 1 else line
    return found


def probe(tc: Toolchain) -> Candidate:
    """Compile and validate PROBE_SHADER; a toolchain that can't is rejected with the tool's message."""
    with tempfile.TemporaryDirectory(prefix="vkcoop-probe-") as tmp:
        src, spv = Path(tmp) / "probe.comp", Path(tmp) / "probe.spv"
        src.write_text(PROBE_SHADER)
        try:
            proc = tc.run("glslc", ["--target-env=vulkan1.3", "-fshader-stage=compute", str(src), "-o", str(spv)])
        except (ToolchainError, OSError) as exc:
            return Candidate(tc, False, f"glslc does not run: {exc}")
        if proc.returncode != 0:
            first = proc.stderr.decode(errors="replace").strip().splitlines()[:1]
            return Candidate(tc, False, "glslc cannot compile GL_NV_cooperative_matrix2: " + " ".join(first))
        try:
            val = tc.run("spirv-val", ["--target-env", "vulkan1.3", str(spv)])
        except (ToolchainError, OSError) as exc:
            return Candidate(tc, False, f"spirv-val does not run: {exc}")
        if val.returncode != 0:
            first = (val.stderr or val.stdout).decode(errors="replace").strip().splitlines()[:1]
            return Candidate(tc, False, "spirv-val rejects coopmat2 SPIR-V: " + " ".join(first))
    return Candidate(tc, True, "ok")


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
    """The first capable toolchain in search order; raises ToolchainError listing why each was rejected."""
    rejected = []
    for tc in candidates():
        cand = probe(tc)
        if cand.capable:
            tc.versions.update(_tool_versions(tc))
            return tc
        rejected.append(f"  {tc.describe()}: {cand.reason}")
    detail = "\n".join(rejected) if rejected else "  none found (no VULKAN_SDK, no glslc on PATH, no private prefix)"
    raise ToolchainError(
        "no shader toolchain can compile GL_NV_cooperative_matrix2.\n" + detail +
        f"\nInstall the private Debian toolchain with `vkcoop toolchain install` (into {default_private_dir()}).")


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


# --- installing the private prefix ---------------------------------------------------------------

def _apt(state: Path, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """apt-get with a private configuration: its own sources list, lists and cache directories."""
    sources = state / "sources.list"
    opts = [
        f"-oDir::Etc::SourceList={sources}", "-oDir::Etc::SourceParts=/dev/null",
        f"-oDir::State::Lists={state / 'lists'}", f"-oDir::Cache={state / 'cache'}",
        "-oDebug::NoLocking=1", "-oAPT::Architecture=amd64", "-oAPT::Architectures=amd64",
        "-oAPT::Sandbox::User=root",
    ]
    return subprocess.run(["apt-get", "-q", *opts, *args], capture_output=True, text=True, cwd=cwd)


def download_packages(debs_dir: Path, state: Path, *, log=print) -> Path:
    """``apt-get download`` PRIVATE_PACKAGES from DEBIAN_SUITE into ``debs_dir`` through a private
    apt configuration kept in ``state`` (its own sources list, lists and cache)."""
    debs_dir, state = Path(debs_dir), Path(state)
    debs_dir.mkdir(parents=True, exist_ok=True)
    (state / "lists" / "partial").mkdir(parents=True, exist_ok=True)
    (state / "cache" / "archives" / "partial").mkdir(parents=True, exist_ok=True)
    keyring = "/usr/share/keyrings/debian-archive-keyring.gpg"
    signed = f"[signed-by={keyring}] " if Path(keyring).exists() else "[trusted=yes] "
    (state / "sources.list").write_text(f"deb {signed}{DEBIAN_MIRROR} {DEBIAN_SUITE} main\n")
    log(f"fetching the Debian {DEBIAN_SUITE} package index (private apt configuration in {state})")
    upd = _apt(state, "update")
    if upd.returncode != 0 or "Err:" in upd.stdout:
        raise ToolchainError(
            f"cannot reach Debian's package registry ({DEBIAN_MIRROR} {DEBIAN_SUITE}) to fetch the shader "
            f"toolchain:\n{(upd.stderr or upd.stdout).strip()}")
    for old in debs_dir.glob("*.deb"):
        old.unlink()
    log("downloading " + ", ".join(PRIVATE_PACKAGES))
    dl = _apt(state, "download", *PRIVATE_PACKAGES, cwd=debs_dir)
    if dl.returncode != 0:
        raise ToolchainError(f"apt-get download failed:\n{dl.stderr.strip()}")
    return debs_dir


def install_private(dest: Path | None = None, *, debs_dir: Path | None = None, force: bool = False,
                    log=print) -> Toolchain:
    """Download (or take from ``debs_dir``) the toolchain's Debian packages and unpack them into ``dest``.

    Idempotent: a completed prefix that passes the probe is left as it is unless ``force``.
    """
    dest = Path(dest or default_private_dir())
    marker = dest / ".complete"
    if marker.exists() and not force:
        tc = _private_toolchain(dest)
        if tc and probe(tc).capable:
            log(f"private toolchain already installed in {dest}")
            return tc
    if shutil.which("dpkg") is None:
        raise ToolchainError("installing the private toolchain needs dpkg (Debian/Ubuntu)")
    dest.mkdir(parents=True, exist_ok=True)
    if debs_dir is None:
        debs_dir = download_packages(dest / "debs", dest / "apt", log=log)
    debs = sorted(Path(debs_dir).glob("*.deb"))
    if not debs:
        raise ToolchainError(f"no .deb files in {debs_dir}")
    for deb in debs:
        subprocess.run(["dpkg", "-x", str(deb), str(dest)], check=True)
    tc = _private_toolchain(dest)
    if tc is None:
        raise ToolchainError(f"unpacked {len(debs)} packages into {dest} but found no glslc/ld-linux there")
    cand = probe(tc)
    if not cand.capable:
        raise ToolchainError(f"private toolchain in {dest} failed the coopmat2 probe: {cand.reason}")
    marker.write_text("\n".join(d.name for d in debs) + "\n")
    find_toolchain.cache_clear()
    log(f"private toolchain ready in {dest}")
    return tc
