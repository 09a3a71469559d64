"""The NVIDIA driver's shader disk cache, read as bytes: zstd frames, and the compiled objects inside them.

Nothing here depends on the cache's own (undocumented) file layout. Every file under the cache directory is
scanned for zstd frames (magic ``28 b5 2f fd``, RFC 8878 section 3.1.1); each frame is decompressed on its own
with the ``zstandard`` package, and each payload is searched for ELF objects. A payload without an ELF is kept
as a raw blob (``kind="raw"``) that can be handed to ``nvdisasm --binary SMxx``; one that starts with the SPIR-V
magic is labelled ``spirv`` and never disassembled. A run of the magic bytes that does not decompress is
counted in ``bad_frames``, not raised: such runs occur by chance inside other data.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

from . import elf as elf_reader

ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
SPIRV_MAGIC = b"\x03\x02\x23\x07"
#: Largest payload one frame may expand to (a guard against garbage that happens to decode).
MAX_FRAME_BYTES = 256 * 1024 * 1024


class MissingZstandardError(RuntimeError):
    """The ``zstandard`` package is not installed."""


def require_zstandard():
    try:
        import zstandard
    except ImportError:
        raise MissingZstandardError("the zstandard package is not installed (pip install zstandard); "
                                    "vkcoop inspect needs it to unpack the driver's shader cache") from None
    return zstandard


@dataclass
class Frame:
    """One decompressed zstd frame: where it was found and what came out."""
    source: str
    offset: int
    compressed_bytes: int
    payload: bytes


@dataclass
class CompiledObject:
    """One object found in the cache: an ELF (``kind="elf"``), a raw blob (``"raw"``) or SPIR-V (``"spirv"``)."""
    kind: str
    data: bytes
    source: str           # "file@frame_offset+payload_offset"
    elf: elf_reader.CudaElf | None = None

    @property
    def digest(self) -> str:
        return hashlib.sha256(self.data).hexdigest()[:16]


@dataclass
class CacheScan:
    files: int = 0
    bytes_scanned: int = 0
    frames: list[Frame] = field(default_factory=list)
    bad_frames: int = 0
    objects: list[CompiledObject] = field(default_factory=list)

    @property
    def elves(self) -> list[CompiledObject]:
        return [o for o in self.objects if o.kind == "elf"]


def decompress_frame(data: bytes, offset: int) -> tuple[bytes, int] | None:
    """(payload, compressed length) of the zstd frame that starts at ``data[offset]``, or None when the bytes
    there are not one complete, valid frame."""
    zstandard = require_zstandard()
    try:
        params = zstandard.get_frame_parameters(data[offset:offset + 18])
    except zstandard.ZstdError:
        return None
    unknown = (zstandard.CONTENTSIZE_UNKNOWN, zstandard.CONTENTSIZE_ERROR)
    if params.content_size not in unknown and params.content_size > MAX_FRAME_BYTES:
        return None
    decompressor = zstandard.ZstdDecompressor().decompressobj()
    try:
        payload = decompressor.decompress(data[offset:])
    except zstandard.ZstdError:
        return None
    if not decompressor.eof or len(payload) > MAX_FRAME_BYTES:
        return None
    consumed = len(data) - offset - len(decompressor.unused_data)
    return payload, consumed


def find_frames(data: bytes, source: str = "<bytes>") -> tuple[list[Frame], int]:
    """Every decodable zstd frame in ``data`` (in order) and the number of magic runs that did not decode."""
    frames, bad, position = [], 0, 0
    while True:
        offset = data.find(ZSTD_MAGIC, position)
        if offset < 0:
            return frames, bad
        decoded = decompress_frame(data, offset)
        if decoded is None:
            bad += 1
            position = offset + 1
            continue
        payload, consumed = decoded
        frames.append(Frame(source, offset, consumed, payload))
        position = offset + consumed


def split_objects(payload: bytes, source: str) -> list[CompiledObject]:
    """The ELF objects inside one payload; the whole payload as ``raw``/``spirv`` when it holds none."""
    objects, position = [], 0
    while True:
        at = payload.find(elf_reader.ELF_MAGIC, position)
        if at < 0:
            break
        try:
            length = elf_reader.elf_extent(payload, at)
            parsed = elf_reader.parse(payload[at:at + length])
        except (elf_reader.ElfFormatError, IndexError, ValueError):
            position = at + 1
            continue
        objects.append(CompiledObject("elf", payload[at:at + length], f"{source}+{at}", parsed))
        position = at + length
    if objects or not payload:
        return objects
    kind = "spirv" if payload[:4] == SPIRV_MAGIC else "raw"
    return [CompiledObject(kind, payload, f"{source}+0")]


def scan_bytes(data: bytes, source: str = "<bytes>", scan: CacheScan | None = None) -> CacheScan:
    require_zstandard()
    scan = scan or CacheScan()
    scan.bytes_scanned += len(data)
    frames, bad = find_frames(data, source)
    scan.frames += frames
    scan.bad_frames += bad
    seen = {o.digest for o in scan.objects}
    for frame in frames:
        for obj in split_objects(frame.payload, f"{source}@{frame.offset}"):
            if obj.digest not in seen:  # the cache may hold one object twice (index and entry)
                seen.add(obj.digest)
                scan.objects.append(obj)
    return scan


def scan_directory(directory: str | Path) -> CacheScan:
    """Scan every regular file under ``directory`` (recursively, in name order)."""
    require_zstandard()  # fail early and clearly, even for an empty directory
    scan = CacheScan()
    for path in sorted(p for p in Path(directory).rglob("*") if p.is_file()):
        scan.files += 1
        scan_bytes(path.read_bytes(), str(path.relative_to(directory)), scan)
    return scan
