"""Where vkcoop finds its shaders, keeps its caches, and writes the files a user asks for."""
from __future__ import annotations

import os
from pathlib import Path

from .errors import InputError

_PACKAGE_DIR = Path(__file__).resolve().parent


def shader_root() -> Path:
    """The shaders/ tree: inside the installed package, or beside it in a source checkout."""
    override = os.environ.get("VKCOOP_SHADER_DIR")
    if override:
        return Path(override)
    installed = _PACKAGE_DIR / "_shaders"
    if installed.is_dir():
        return installed
    checkout = _PACKAGE_DIR.parent / "shaders"
    if checkout.is_dir():
        return checkout
    raise FileNotFoundError(
        "vkcoop cannot find its shaders: neither vkcoop/_shaders (installed) nor ../shaders "
        "(source checkout) exists; set VKCOOP_SHADER_DIR")


def shader_path(relative: str) -> Path:
    path = shader_root() / relative
    if not path.is_file():
        raise FileNotFoundError(f"no shader {relative!r} under {shader_root()}")
    return path


def cache_root() -> Path:
    """User cache for SPIR-V and Vulkan pipeline caches (VKCOOP_CACHE_DIR overrides)."""
    override = os.environ.get("VKCOOP_CACHE_DIR")
    if override:
        return Path(override)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "vkcoop"


def output_file(value, what: str = "--json") -> Path | None:
    """A user-given output file, checked before any work: its folder is created, and it must not be a folder.
    ``-`` and None pass through as None (standard output / not asked). InputError names ``what``."""
    if value in (None, "-"):
        return None
    path = Path(value)
    if path.is_dir():
        raise InputError(f"{what} {value}: is a directory; give a file name")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise InputError(f"{what} {value}: cannot create its folder ({error.strerror}); choose a writable place") \
            from None
    return path
