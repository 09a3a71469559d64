"""Fetching Debian packages for the private toolchain: signed, from the system's own mirror.

Nothing here names a registry host. The mirror comes from the system's apt configuration
(``sources.list``, ``sources.list.d/*.list`` and deb822 ``*.sources``); only the suite changes, so local
mirrors and proxies (``Acquire::*::Proxy`` in ``apt.conf.d``, which the private configuration inherits)
keep working. Every index is checked against the Debian archive keyring; without it nothing is fetched.
"""
from __future__ import annotations

import hashlib
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from .toolchain import ToolchainError

#: The keyring that signs every Debian suite (bookworm's package also carries trixie's and forky's keys).
DEBIAN_KEYRING = Path("/usr/share/keyrings/debian-archive-keyring.gpg")
KEYRING_PACKAGE = "debian-archive-keyring"
APT_ETC = Path("/etc/apt")
#: Suite names of Debian itself; entries for ``-updates``, ``-security`` or other distributions are ignored.
DEBIAN_SUITES = frozenset({
    "buster", "bullseye", "bookworm", "trixie", "forky", "duke", "sid",
    "oldoldstable", "oldstable", "stable", "testing", "unstable",
})


@dataclass(frozen=True)
class AptSource:
    """One ``deb`` entry of the system's apt configuration."""

    uri: str
    suite: str
    components: tuple
    origin: str  # the file it came from

    @property
    def is_debian(self) -> bool:
        return self.suite in DEBIAN_SUITES and "main" in self.components


def parse_one_line(text: str, origin: str = "") -> list[AptSource]:
    """Entries of the one-line format: ``deb [options] URI SUITE COMPONENT...``."""
    found = []
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line.startswith("deb ") and not line.startswith("deb\t"):
            continue
        words = line.split()[1:]
        if words and words[0].startswith("["):
            while words and not words[0].endswith("]"):
                words.pop(0)
            words = words[1:]
        if len(words) >= 2:
            found.append(AptSource(words[0], words[1], tuple(words[2:]), origin))
    return found


def _deb822_stanzas(text: str) -> list[dict]:
    stanzas, fields, key = [], {}, None
    for raw in text.splitlines() + [""]:
        if raw.startswith("#"):
            continue
        if not raw.strip():
            if fields:
                stanzas.append(fields)
            fields, key = {}, None
        elif raw[0] in " \t" and key:
            fields[key] += " " + raw.strip()
        elif ":" in raw:
            key, value = raw.split(":", 1)
            key = key.strip().lower()
            fields[key] = value.strip()
    return stanzas


def parse_deb822(text: str, origin: str = "") -> list[AptSource]:
    """Entries of the deb822 format (``Types:``, ``URIs:``, ``Suites:``, ``Components:``, ``Enabled:``)."""
    found = []
    for fields in _deb822_stanzas(text):
        if "deb" not in fields.get("types", "").split() or fields.get("enabled", "yes").lower() == "no":
            continue
        components = tuple(fields.get("components", "").split())
        for uri in fields.get("uris", "").split():
            found.extend(AptSource(uri, suite, components, origin) for suite in fields.get("suites", "").split())
    return found


def system_sources(etc: Path | None = None) -> list[AptSource]:
    """Every ``deb`` entry of the apt configuration in ``etc`` (default /etc/apt), in apt's order."""
    etc = Path(etc or APT_ETC)
    found = []
    main = etc / "sources.list"
    if main.is_file():
        found += parse_one_line(main.read_text(errors="replace"), str(main))
    parts = etc / "sources.list.d"
    for path in sorted(parts.iterdir()) if parts.is_dir() else ():
        if path.suffix == ".list":
            found += parse_one_line(path.read_text(errors="replace"), str(path))
        elif path.suffix == ".sources":
            found += parse_deb822(path.read_text(errors="replace"), str(path))
    return found


def debian_mirror(etc: Path | None = None) -> str:
    """The URI of the system's first Debian ``main`` entry; ToolchainError when there is none."""
    for source in system_sources(etc):
        if source.is_debian:
            return source.uri.rstrip("/")
    raise ToolchainError(
        f"no Debian source (a `deb` entry for a Debian suite with `main`) in the apt configuration in "
        f"{etc or APT_ETC}; add a Debian mirror there, or set VULKAN_SDK to a Vulkan SDK instead")


def require_keyring(keyring: Path | None = None) -> Path:
    """The Debian archive keyring; ToolchainError (nothing is fetched unsigned) when it is missing."""
    keyring = Path(keyring or DEBIAN_KEYRING)
    if not keyring.is_file():
        raise ToolchainError(
            f"the Debian archive keyring {keyring} is missing, so package signatures cannot be checked; "
            f"install it with `apt-get install {KEYRING_PACKAGE}` (as root)")
    return keyring


def sources_line(suite: str, *, etc: Path | None = None, keyring: Path | None = None) -> str:
    """The private sources.list line for ``suite``: the system's Debian mirror, signed by the archive keyring."""
    signed_by = require_keyring(keyring)
    return f"deb [signed-by={signed_by}] {debian_mirror(etc)} {suite} main\n"


def _apt(state: Path, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """apt-get with a private configuration: its own sources list, lists and cache directories."""
    opts = [
        f"-oDir::Etc::SourceList={state / 'sources.list'}", "-oDir::Etc::SourceParts=/dev/null",
        f"-oDir::State::Lists={state / 'lists'}", f"-oDir::Cache={state / 'cache'}",
        "-oDebug::NoLocking=1", "-oAPT::Architecture=amd64", "-oAPT::Architectures=amd64",
        "-oAPT::Sandbox::User=root",
    ]
    return subprocess.run(["apt-get", "-q", *opts, *args], capture_output=True, text=True, cwd=cwd,
                          env={**os.environ, "LC_ALL": "C"})


def _first_problem(proc: subprocess.CompletedProcess) -> str:
    lines = (proc.stdout + "\n" + proc.stderr).splitlines()
    for prefix in ("W: GPG error", "Err:", "E:", "W:"):
        hit = next((ln.strip() for ln in lines if ln.startswith(prefix)), None)
        if hit:
            return hit
    return next((ln.strip() for ln in reversed(lines) if ln.strip()), f"apt-get exited {proc.returncode}")


def update_index(state: Path, suite: str, *, etc: Path | None = None, keyring: Path | None = None) -> str:
    """Write the private sources list and fetch ``suite``'s signed index; returns the mirror."""
    line = sources_line(suite, etc=etc, keyring=keyring)  # raises before anything touches the network
    state = Path(state)
    (state / "lists" / "partial").mkdir(parents=True, exist_ok=True)
    (state / "cache" / "archives" / "partial").mkdir(parents=True, exist_ok=True)
    (state / "sources.list").write_text(line)
    mirror = line.split()[2]
    upd = _apt(state, "update")
    text = upd.stdout + upd.stderr
    if upd.returncode != 0 or "Err:" in upd.stdout or "GPG error" in text or "not signed" in text:
        raise ToolchainError(f"cannot fetch the signed Debian {suite} index from {mirror}: {_first_problem(upd)}; "
                             f"check the network, the apt proxy settings and {KEYRING_PACKAGE}")
    return mirror


def download_packages(debs_dir: Path, state: Path, *, suite: str, packages, pins: dict | None = None,
                      etc: Path | None = None, keyring: Path | None = None, log=print) -> Path:
    """``apt-get download`` ``packages`` from ``suite`` (each at ``pins[name]`` where given) into ``debs_dir``
    through a private apt configuration in ``state``. apt checks every file against the signed index."""
    debs_dir = Path(debs_dir)
    log(f"fetching the signed Debian {suite} package index (private apt configuration in {state})")
    mirror = update_index(Path(state), suite, etc=etc, keyring=keyring)
    debs_dir.mkdir(parents=True, exist_ok=True)
    for old in debs_dir.glob("*.deb"):
        old.unlink()
    wanted = [f"{name}={pins[name]}" if pins and name in pins else name for name in packages]
    log(f"downloading from {mirror} {suite}: " + ", ".join(wanted))
    dl = _apt(Path(state), "download", *wanted, cwd=debs_dir)
    if dl.returncode != 0:
        raise ToolchainError(f"apt-get download from {mirror} {suite} failed: {_first_problem(dl)}")
    return debs_dir


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def package_info(deb: Path) -> dict:
    """Name, version, architecture, file name and SHA256 of one .deb."""
    proc = subprocess.run(["dpkg-deb", "-f", str(deb), "Package", "Version", "Architecture"],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise ToolchainError(f"{deb} is not a readable .deb: {proc.stderr.strip()}; delete it and fetch again")
    fields = dict(line.split(": ", 1) for line in proc.stdout.splitlines() if ": " in line)
    return {"package": fields.get("Package", ""), "version": fields.get("Version", ""),
            "architecture": fields.get("Architecture", ""), "file": deb.name, "sha256": sha256(deb)}
