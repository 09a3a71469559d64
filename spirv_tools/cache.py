"""Self-checking cache entries: a header with the payload's length and SHA-256, then the payload.

Used for the SPIR-V cache (:mod:`spirv_tools.compiler`) and for vkcoop's on-disk Vulkan pipeline caches. A read
that finds an entry that is empty, truncated, bit-flipped or fails the caller's own check logs one warning for
that file, deletes it and returns None, so the caller rebuilds the entry and the run goes on. Writes are atomic
(a temporary file renamed over the entry); a read-only cache directory only costs time.
"""
from __future__ import annotations

import hashlib
import logging
import os
import struct
import tempfile
from pathlib import Path
from typing import Callable

_TAG = b"VKCOOPC1"
_HEADER = struct.Struct("<8sQ32s")  # tag, payload length, SHA-256 of the payload
log = logging.getLogger("spirv_tools.cache")
_reported: set[str] = set()


def pack_entry(payload: bytes) -> bytes:
    return _HEADER.pack(_TAG, len(payload), hashlib.sha256(payload).digest()) + payload


def entry_problem(data: bytes) -> str | None:
    """Why ``data`` is not an intact entry, or None."""
    if len(data) < _HEADER.size:
        return f"{len(data)} bytes, shorter than the {_HEADER.size}-byte header"
    tag, length, digest = _HEADER.unpack_from(data)
    if tag != _TAG:
        return f"bad tag {tag!r}"
    payload = data[_HEADER.size:]
    if length != len(payload):
        return f"the header says {length} payload bytes, the file has {len(payload)}"
    if hashlib.sha256(payload).digest() != digest:
        return "checksum mismatch"
    return None


def read_entry(path: Path, check: Callable[[bytes], str | None] | None = None) -> bytes | None:
    """The payload of the entry at ``path``; None when it is missing or bad (a bad one is logged and removed).
    ``check(payload)`` may return a reason to reject an intact entry (e.g. the wrong SPIR-V magic)."""
    try:
        data = Path(path).read_bytes()
    except OSError:
        return None
    problem = entry_problem(data)
    if problem is None and check is not None:
        problem = check(data[_HEADER.size:])
    if problem is None:
        return data[_HEADER.size:]
    drop_entry(path, problem)
    return None


def drop_entry(path: Path, problem: str) -> None:
    """Log (once per file and process) why an entry is unusable, and delete it."""
    if str(path) not in _reported:
        _reported.add(str(path))
        log.warning("dropping corrupt cache entry %s (%s); it will be rebuilt", path, problem)
    try:
        Path(path).unlink()
    except OSError:
        pass


def write_entry(path: Path, payload: bytes) -> bool:
    """Atomically write ``payload`` as a checked entry; False when the directory is not writable."""
    path = Path(path)
    temporary = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path.parent, prefix=f".{path.name}.", delete=False) as temporary:
            temporary.write(pack_entry(payload))
        os.replace(temporary.name, path)
    except OSError:
        if temporary is not None:
            Path(temporary.name).unlink(missing_ok=True)
        return False
    return True
