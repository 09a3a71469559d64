"""The toolchain's lock file (in the repository) and manifest (in each installed prefix).

The lock file, ``spirv_tools/toolchain.lock.json``, holds the package versions and SHA256 sums of a private
toolchain that passed the full shader check. Each install writes ``manifest.json`` into its prefix: what it
resolved, from where, how it compares with the lock, and what the shader check skipped.

Refresh the lock after a prefix passed ``vkcoop shaders check``::

    python -m spirv_tools lock PREFIX [--output spirv_tools/toolchain.lock.json]
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from .toolchain import ToolchainError, default_private_dir

LOCK_FILE = Path(__file__).with_name("toolchain.lock.json")
MANIFEST_NAME = "manifest.json"
MANIFEST_FORMAT = 1


def read_lock(path: Path | None = None) -> dict:
    """The lock: ``{"suite": ..., "packages": {name: {"version", "architecture", "sha256"}}}``."""
    path = Path(path or LOCK_FILE)
    try:
        lock = json.loads(path.read_text())
        packages = lock["packages"]
        if not isinstance(lock["suite"], str) or not all("version" in p and "sha256" in p for p in packages.values()):
            raise ValueError("a package lacks its version or sha256")
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ToolchainError(f"the toolchain lock file {path} is unreadable ({exc}); restore it from the repository")
    return lock


def pins(lock: dict) -> dict:
    """``{package: version}`` for ``apt-get download name=version``."""
    return {name: entry["version"] for name, entry in lock["packages"].items()}


def lock_differences(packages: list[dict], lock: dict) -> list[str]:
    """How resolved packages (as :func:`spirv_tools.debian.package_info` gives them) differ from the lock,
    one phrase each; empty when they match exactly."""
    locked = lock["packages"]
    resolved = {p["package"]: p for p in packages}
    diffs = []
    for name, got in sorted(resolved.items()):
        want = locked.get(name)
        if want is None:
            diffs.append(f"{name} {got['version']} (not in the lock)")
        elif got["version"] != want["version"]:
            diffs.append(f"{name} {got['version']} (lock: {want['version']})")
        elif got["sha256"] != want["sha256"]:
            diffs.append(f"{name} {got['version']} has SHA256 {got['sha256'][:16]}… (lock: {want['sha256'][:16]}…)")
    diffs += [f"{name} missing (lock: {locked[name]['version']})" for name in sorted(set(locked) - set(resolved))]
    return diffs


def lock_from_packages(packages: list[dict], suite: str, checked: str) -> dict:
    return {
        "comment": "Debian packages of a private toolchain that passed the full shader check; "
                   "refresh with `python -m spirv_tools lock PREFIX`.",
        "suite": suite,
        "checked": checked,
        "packages": {p["package"]: {"version": p["version"], "architecture": p["architecture"],
                                    "sha256": p["sha256"]} for p in sorted(packages, key=lambda p: p["package"])},
    }


def write_manifest(prefix: Path, data: dict) -> Path:
    path = Path(prefix) / MANIFEST_NAME
    path.write_text(json.dumps({"format": MANIFEST_FORMAT, **data}, indent=2) + "\n")
    return path


def manifest(prefix: Path | None = None) -> dict | None:
    """What the prefix (default: the private prefix in use) was installed from: its ``manifest.json``; for a
    prefix installed before manifests existed, the packages read from its ``debs/`` (``"recorded": False``);
    None when there is no installed prefix."""
    prefix = Path(prefix or default_private_dir())
    path = prefix / MANIFEST_NAME
    if path.is_file():
        try:
            return {**json.loads(path.read_text()), "recorded": True}
        except ValueError as exc:
            raise ToolchainError(f"{path} is not valid JSON ({exc}); reinstall with `vkcoop toolchain install --force`")
    debs = sorted((prefix / "debs").glob("*.deb"))
    if not (prefix / ".complete").exists() or not debs:
        return None
    from .debian import package_info
    return {"format": MANIFEST_FORMAT, "prefix": str(prefix), "source": "unrecorded", "recorded": False,
            "packages": [package_info(d) for d in debs]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m spirv_tools lock",
                                     description="write the lock file from a prefix that passed the shader check")
    parser.add_argument("prefix", type=Path)
    parser.add_argument("--output", type=Path, default=LOCK_FILE)
    parser.add_argument("--suite", help="the suite it came from (default: the manifest's)")
    parser.add_argument("--checked", default="vkcoop shaders check: every variant passed",
                        help="what it passed, for the record")
    args = parser.parse_args(argv)
    found = manifest(args.prefix)
    if not found:
        parser.error(f"{args.prefix} holds no installed toolchain")
    suite = args.suite or found.get("suite")
    if not suite:
        parser.error(f"{args.prefix} does not record its suite; pass --suite")
    args.output.write_text(json.dumps(lock_from_packages(found["packages"], suite, args.checked), indent=2) + "\n")
    print(f"wrote {args.output}")
    return 0
