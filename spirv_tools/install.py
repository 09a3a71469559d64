"""Installing the private toolchain: fetch (signed), unpack, probe, check every shader, then accept.

Each source is unpacked into a staging directory beside the prefix and moves into place only once it passes
the coopmat2 probe and the caller's shader check, so a failed attempt never breaks a working prefix. The
fallback order, each tried only when the one before cannot be fetched or fails its checks:

1. **locked**: the lock file's exact versions (:mod:`spirv_tools.lock`) from its suite (forky), the set that
   passed the full shader check;
2. **testing**: forky, unpinned, with a warning naming every package that differs from the lock;
3. **stable**: trixie, whose glslang 15.1 lacks GL_EXT_bfloat16, so every variant that needs bf16 is skipped,
   each named, not failed.

``VKCOOP_TOOLCHAIN_SUITE=S`` replaces the order with suite S alone (unpinned; bf16 skipped if missing).
spirv_tools knows no shaders: the caller passes ``accept(toolchain, features) -> ShaderCheckReport``, usually
built with :func:`check_shaders` over its own variants.
"""
from __future__ import annotations

import datetime
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from . import debian
from .lock import LOCK_FILE, lock_differences, manifest, pins, read_lock, write_manifest
from .toolchain import (PRIVATE_PACKAGES, Toolchain, ToolchainError, ToolchainMissingError, _private_toolchain,
                        _tool_versions, default_private_dir, features, find_toolchain, probe, set_private_dir,
                        using)

TESTING_SUITE = "forky"
STABLE_SUITE = "trixie"
_BF16 = re.compile(r"bf16|bfloat16", re.I)
_PREFIX_MARKS = (".complete", "manifest.json", "debs", "apt", "usr")


@dataclass(frozen=True)
class Source:
    """Where one install attempt takes its packages from."""

    name: str                   # "locked", "testing", "stable", "suite" ($VKCOOP_TOOLCHAIN_SUITE) or "debs"
    suite: str | None           # None for given .debs
    pinned: bool = False        # fetch the lock file's exact versions
    bf16_required: bool = True  # reject a toolchain without GL_EXT_bfloat16 (else skip those variants)


def fallback_sources(lock: dict | None = None) -> list[Source]:
    """The documented order: locked set, then testing, then stable (or $VKCOOP_TOOLCHAIN_SUITE alone)."""
    chosen = os.environ.get("VKCOOP_TOOLCHAIN_SUITE")
    if chosen:
        return [Source("suite", chosen, bf16_required=False)]
    lock = lock or read_lock()
    return [Source("locked", lock["suite"], pinned=True), Source("testing", TESTING_SUITE),
            Source("stable", STABLE_SUITE, bf16_required=False)]


def needs_bfloat16(defines) -> bool:
    """Whether a shader variant's defines (a dict or ``(name, value)`` pairs) select a bf16 type, and so
    need GL_EXT_bfloat16: any value naming BF16 or bfloat16 (``BF16``, ``BF16_F32``, ``bfloat16_t``, ...)."""
    pairs = defines.items() if isinstance(defines, dict) else defines
    return any(_BF16.search(str(value)) for _, value in pairs)


@dataclass
class ShaderCheckReport:
    """The outcome of checking every variant against one toolchain."""

    passed: list[str] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)   # (variant label, first line of the error)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (variant label, why)

    @property
    def ok(self) -> bool:
        return not self.failed

    def to_dict(self) -> dict:
        return {"passed": len(self.passed),
                "failed": [{"variant": v, "error": e} for v, e in self.failed],
                "skipped": [{"variant": v, "reason": r} for v, r in self.skipped]}


def check_shaders(variants, check, features: dict) -> ShaderCheckReport:
    """Run ``check(variant)`` (a result with ``.ok`` and ``.error``) on each variant (with ``.label`` and
    ``.defines``); without ``features["bfloat16"]`` the variants that need it are skipped by name."""
    report = ShaderCheckReport()
    for variant in variants:
        if not features.get("bfloat16") and needs_bfloat16(variant.defines):
            report.skipped.append((variant.label, "needs GL_EXT_bfloat16, which this toolchain cannot compile"))
            continue
        result = check(variant)
        if result.ok:
            report.passed.append(variant.label)
        else:
            first = next((ln for ln in str(result.error).splitlines() if ln.strip()), "failed")
            report.failed.append((variant.label, first.strip()))
    return report


@dataclass
class InstallReport:
    """What :func:`install_private` did: ``prefix`` is the directory installed (``dest``)."""

    prefix: Path
    toolchain: Toolchain
    manifest: dict | None                       # as :func:`spirv_tools.lock.manifest` reads it back
    already_installed: bool = False
    warnings: list[str] = field(default_factory=list)
    shader_check: ShaderCheckReport | None = None


def _unpack(debs: list[Path], prefix: Path) -> None:
    for deb in debs:
        proc = subprocess.run(["dpkg", "-x", str(deb), str(prefix)], capture_output=True, text=True)
        if proc.returncode != 0:
            raise ToolchainError(f"dpkg -x {deb.name} failed: {proc.stderr.strip()}; delete it and fetch again")


def _fetch(source: Source, staging: Path, debs_dir: Path | None, lock: dict, log) -> list[Path]:
    if debs_dir is not None:
        debs = sorted(Path(debs_dir).glob("*.deb"))
        if not debs:
            raise ToolchainError(f"no .deb files in {debs_dir}; pass a directory of downloaded packages")
        return debs
    got = debian.download_packages(staging / "debs", staging / "apt", suite=source.suite,
                                   packages=PRIVATE_PACKAGES, pins=pins(lock) if source.pinned else None, log=log)
    return sorted(got.glob("*.deb"))


def _accept(tc: Toolchain, source: Source, accept, log) -> tuple[dict, ShaderCheckReport | None]:
    """The probe, the feature probe and the caller's shader check; ToolchainError when any fails."""
    cand = probe(tc)
    if not cand.capable:
        raise ToolchainError(f"it fails the coopmat2 probe: {cand.reason}")
    feats = features(tc)
    if source.bf16_required and not feats["bfloat16"]:
        raise ToolchainError("it cannot compile GL_EXT_bfloat16, which bf16 matrices need")
    if accept is None:
        log("no shader check given: accepted on the capability probe alone")
        return feats, None
    log("checking every shader variant with it")
    with using(tc):
        report = accept(tc, feats)
    if report.failed:
        label, error = report.failed[0]
        raise ToolchainError(f"{len(report.failed)} shader variants fail, first {label}: {error}")
    for label, why in report.skipped:
        log(f"skipped {label}: {why}")
    log(f"shader check: {len(report.passed)} passed, {len(report.skipped)} skipped")
    return feats, report


def _attempt(source: Source, staging: Path, debs_dir: Path | None, lock: dict, accept,
             log) -> tuple[dict, ShaderCheckReport | None]:
    """Fetch, unpack and check one source in ``staging``; returns the manifest data and the shader check."""
    debs = _fetch(source, staging, debs_dir, lock, log)
    packages = [debian.package_info(d) for d in debs]
    diffs = lock_differences(packages, lock)
    if source.pinned and diffs:
        raise ToolchainError("the fetched packages do not match the lock file: " + "; ".join(diffs))
    warnings = [f"resolved packages differ from the lock file: {', '.join(diffs)}"] if diffs else []
    for warning in warnings:
        log(f"warning: {warning}")
    _unpack(debs, staging)
    tc = _private_toolchain(staging)
    if tc is None:
        raise ToolchainError(f"the {len(debs)} packages hold no glslc or ld-linux-x86-64.so.2")
    feats, report = _accept(tc, source, accept, log)
    return {"source": source.name, "suite": source.suite,
            "mirror": None if debs_dir is not None else debian.debian_mirror(),
            "installed": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "packages": packages, "features": feats, "tools": _tool_versions(tc), "warnings": warnings,
            "lock": {"suite": lock["suite"], "matches": not diffs, "differences": diffs},
            "shader_check": report.to_dict() if report else None}, report


def _check_dest(dest: Path) -> None:
    """Refuse to replace a directory that is not a toolchain prefix (e.g. ``--dest ~``)."""
    if dest.is_dir() and any(dest.iterdir()) and not any((dest / m).exists() for m in _PREFIX_MARKS):
        raise ToolchainError(f"{dest} is not empty and holds no toolchain; pass a new or empty directory as --dest")


def _move_into_place(staging: Path, dest: Path) -> None:
    old = dest.with_name(f".{dest.name.lstrip('.')}-old-{os.getpid()}") if dest.exists() else None
    if old:
        os.rename(dest, old)
    os.rename(staging, dest)
    if old:
        shutil.rmtree(old, ignore_errors=True)


def _installed(dest: Path, log) -> InstallReport | None:
    """The report for a complete prefix that still passes the probe, else None."""
    tc = _private_toolchain(dest) if (dest / ".complete").exists() else None
    if tc is None or not probe(tc).capable:
        return None
    log(f"private toolchain already installed in {dest}")
    return InstallReport(dest, tc, manifest(dest), already_installed=True)


def install_private(dest: Path | None = None, *, debs_dir: Path | None = None, force: bool = False,
                    accept=None, sources: list[Source] | None = None, lock_path: Path | None = None,
                    log=print) -> InstallReport:
    """Install the private toolchain into ``dest`` (default :func:`default_private_dir`) and make it this
    process's private prefix. Sources are tried in :func:`fallback_sources` order (or ``sources``, or the
    given ``debs_dir``); each must pass the probe and ``accept``. Idempotent unless ``force``."""
    dest = Path(dest or default_private_dir()).resolve()
    if not force and (done := _installed(dest, log)):
        set_private_dir(dest)
        return done
    if shutil.which("dpkg") is None:
        raise ToolchainError("installing the private toolchain needs dpkg (Debian or Ubuntu); "
                             "set VULKAN_SDK to a Vulkan SDK instead")
    _check_dest(dest)
    lock = read_lock(lock_path)
    if debs_dir is None:
        debian.sources_line(lock["suite"])  # no keyring or no Debian mirror: fail before any attempt
        plan = sources or fallback_sources(lock)
    else:
        plan = [Source("debs", None, bf16_required=False)]
    dest.parent.mkdir(parents=True, exist_ok=True)
    rejected = []
    for source in plan:
        staging = Path(tempfile.mkdtemp(prefix=f".{dest.name.lstrip('.')}-staging-", dir=dest.parent))
        try:
            data, report = _attempt(source, staging, debs_dir, lock, accept, log)
            write_manifest(staging, {"prefix": str(dest), "lock_file": str(lock_path or LOCK_FILE), **data})
            (staging / ".complete").write_text("\n".join(p["file"] for p in data["packages"]) + "\n")
            _move_into_place(staging, dest)
        except ToolchainError as exc:
            rejected.append(f"{source.name}: {exc}")
            log(f"{source.name} toolchain ({source.suite or debs_dir}) not accepted: {exc}")
            continue
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        set_private_dir(dest)
        log(f"private toolchain ready in {dest} ({source.name}: {source.suite or debs_dir})")
        return InstallReport(dest, _private_toolchain(dest), manifest(dest), warnings=data["warnings"],
                             shader_check=report)
    raise ToolchainError(f"no toolchain source passed its checks ({' | '.join(rejected)}); "
                         f"see the messages above, or set VULKAN_SDK to a Vulkan SDK")


def require_toolchain(auto_install: bool | None = None, *, accept=None, log=print) -> Toolchain:
    """The toolchain to compile with. When there is none: with ``auto_install`` (None: ``$VKCOOP_AUTO_TOOLCHAIN``
    is ``1``) install the private prefix (see :func:`spirv_tools.install.install_private`; ``accept`` and
    ``log`` go to it), else raise :class:`ToolchainMissingError`."""
    try:
        return find_toolchain()
    except ToolchainMissingError:
        if auto_install is None:
            auto_install = os.environ.get("VKCOOP_AUTO_TOOLCHAIN", "") == "1"
        if not auto_install:
            raise
    log(f"no coopmat2 shader toolchain yet; installing the private one into {default_private_dir()}")
    install_private(accept=accept, log=log)
    return find_toolchain()
