"""The NVIDIA driver's shader disk cache, read as bytes: zstd frames, and the compiled objects inside them.

Nothing here depends on the cache's own file layout (its ``.toc`` index and entry headers). Every file under the
cache directory is scanned for zstd frames (magic ``28 b5 2f fd``, RFC 8878 section 3.1.1); each frame is
decompressed on its own with the ``zstandard`` package, and each payload is searched for compiled objects. A run
of the magic bytes that does not decompress is counted in ``bad_frames``, not raised: such runs occur by chance
inside other data.

``CompiledObject.kind``, what a payload held:

- ``"nvuc"``: the driver's compiled pipeline, an :mod:`NVuc container <vkcoop.inspect.nvuc>` (the Vulkan
  driver's ``NVDA`` ``NVVM`` object holds one); ``.nvuc`` is the parsed container. When an ``NVDA`` object or an
  ``NVuc`` magic is there but no container parses, one ``nvuc`` object with ``.error`` (and no ``.nvuc``) says why.
- ``"elf"``: a CUDA ELF (cubin, ``e_machine`` EM_CUDA); ``.elf`` is the parsed ELF.
- ``"host-elf"``: an ELF for another machine. The driver stores an x86-64 stub beside each pipeline (876 bytes
  with its 4-byte length, a ``bindUBO_...`` symbol): no GPU code, never disassembled.
- ``"spirv"``: a payload that starts with the SPIR-V magic; never disassembled.
- ``"raw"``: a payload with none of the above, kept whole; it may be handed to ``nvdisasm --binary SMxx``.
"""
from __future__ import annotations

import hashlib
import struct
from dataclasses import dataclass, field
from pathlib import Path

from . import elf as elf_reader
from . import nvuc as nvuc_reader

ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
SPIRV_MAGIC = b"\x03\x02\x23\x07"
#: The first bytes of the NVIDIA Vulkan driver's compiled-pipeline object (``NVDA`` ``NVVM``, then ``NVuc``).
NVDA_MAGIC = b"NVDA"
#: Every value of ``CompiledObject.kind``.
KINDS = ("nvuc", "elf", "host-elf", "spirv", "raw")
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
    """One object found in the cache; ``kind`` is one of :data:`KINDS` (see the module's docstring)."""
    kind: str
    data: bytes
    source: str           # "file@frame_offset+payload_offset"
    elf: elf_reader.CudaElf | None = None
    nvuc: nvuc_reader.Container | None = None
    error: str | None = None   # "nvuc" only: why no container could be read

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
        """The CUDA ELF objects (not the driver's host stubs)."""
        return [o for o in self.objects if o.kind == "elf"]

    @property
    def containers(self) -> list[CompiledObject]:
        """The NVuc containers that parsed."""
        return [o for o in self.objects if o.kind == "nvuc" and o.nvuc is not None]

    @property
    def broken(self) -> list[CompiledObject]:
        """``nvuc`` objects whose container did not parse."""
        return [o for o in self.objects if o.kind == "nvuc" and o.nvuc is None]

    def kinds(self) -> dict[str, int]:
        return {kind: sum(o.kind == kind for o in self.objects) for kind in KINDS}


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


def _elves(payload: bytes, source: str) -> list[CompiledObject]:
    objects, position = [], 0
    while True:
        at = payload.find(elf_reader.ELF_MAGIC, position)
        if at < 0:
            return objects
        try:
            length = elf_reader.elf_extent(payload, at)
            parsed = elf_reader.parse(payload[at:at + length])
        except (elf_reader.ElfFormatError, IndexError, ValueError, struct.error):
            position = at + 1
            continue
        kind = "elf" if parsed.is_cuda else "host-elf"
        objects.append(CompiledObject(kind, payload[at:at + length], f"{source}+{at}", elf=parsed))
        position = at + length


def _containers(payload: bytes, source: str) -> list[CompiledObject]:
    found, problems = nvuc_reader.find_containers(payload)
    objects = [CompiledObject("nvuc", container.data, f"{source}+{at}", nvuc=container) for at, container in found]
    if not objects and (problems or payload.startswith(NVDA_MAGIC)):
        why = problems[0] if problems else f"an {NVDA_MAGIC.decode()} object without an NVuc container"
        objects.append(CompiledObject("nvuc", payload, f"{source}+0", error=why))
    return objects


def split_objects(payload: bytes, source: str) -> list[CompiledObject]:
    """The ELF objects and NVuc containers inside one payload; the whole payload as ``raw``/``spirv`` when it
    holds neither."""
    objects = _elves(payload, source) + _containers(payload, source)
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
