"""The ``NVuc`` container the NVIDIA Vulkan driver stores its compiled pipelines in, read through its section table.

Where it is: in the driver's shader disk cache (``GLCache/<hash>/<hash>/<id>.bin``, zstd frames) the compiled
pipeline is an object that starts ``NVDA`` ``NVVM``; the container begins at its magic ``NVuc`` (byte 8 in every
object seen so far; :func:`find_containers` looks for the magic and checks the table rather than trusting that).

Layout as read (driver 580.159.04 on an H100; the field names are the ones ``nvdisasm --binary SM90 FILE`` prints
for the container; each header and symbol-table field was confirmed by changing it alone and reading nvdisasm's
output again).
All integers little-endian; offsets from the ``NVuc`` magic::

    header, 32 bytes
      0x00  4s   magic "NVuc" (nvdisasm prints it as "cuVN")
      0x04  u16  version major (1)          0x06  u16  version minor (0)        -> "v1.0"
      0x08  u16  section count              -> "nsec=8" (peak), 12 (the dense GEMM)
      0x0a  u16  arch (0x0f HOPPER, 0x0e AMPERE)
      0x0c  u16  chip family (0x0f HOPPER)  0x0e  u16  chip variant (0xe0 GH100)
      0x10  u32  program kind (5 MEDIA, i.e. compute; 4 is GEOMETRY)
      0x14  u32  driver (0)
      0x18  u64  container size in bytes    -> "size=00001a60"; the object has more bytes after it
    section table at 0x20: ``section count`` entries of 32 bytes
      u32 type, u32 size, u64 offset, u32 val0, u32 val1, u32 val2, u32 val3

Section types met, by the names nvdisasm prints (``nvdisasm`` names the rest "NVUC_SECTION_unknown"):

    0x01 UCODE         the machine code: raw SM90 instructions, 16 bytes each (``nvdisasm --binary SM90``)
    0x03 REG           data: u32 register count, u32 registers requested
    0x3c SCRATCH       no data; val1 = scratch (local memory) bytes. No SCRATCH section: 0 bytes
    0x15 LMEM          no data; val0 = val1 = val3 = 0x3c in the dense GEMM (not understood)
    0x17 STACK         val0 = control stack size, val1 = max sync level | max divergence level << 16
    0x18 BARRIER       data: val1 u32 code offsets, one per ``BAR.SYNC`` of the code
    0x21 STRING_TABLE  NUL-terminated names
    0x39 SYMBOL_TABLE  val0 entries, val1 = the string table's section index; entries of 36 bytes: u32 name
                       offset, u32 code offset, u16 section index, u16 kind (1 FUNCTION), u32 size, u32 frame
                       size, u32 cumulative frame size, u32 not printed, u32 numSpills, u32 numRefills
    0x37 DEBUG_FRAME_TABLE, 0x3a DEBUG_FUNCTION_MAP, 0x45 PROGRAM_INFO, 0x53 (no name): not read here

In the dense GEMM the UCODE entry is the second (index 1) of 12: 154,624 bytes at 432, REG 255, SCRATCH 0x5400 =
21,504 bytes; in the peak shader, of 8: 6,272 bytes at 304, REG 151, no SCRATCH. After the container the object
goes on (more binary data, then the driver's settings as ``hash: value`` text lines), not read here.

What nvdisasm 13.5 does with it: on the whole container it prints the table, then stops at a section type it
does not know, "Section 21 is an invalid NVuc section": 21 is the *type* 0x15 (LMEM), not an index. Given the
UCODE section's bytes alone it disassembles all of them (9,664 instructions for the dense GEMM, 392 for peak), so
vkcoop hands it only the code and reads registers and scratch here. The symbol table's numSpills/numRefills of
the dense GEMM (220 / 112) are four times its STL / LDL counts (55 / 28): bytes, apparently, not instructions.
"""
from __future__ import annotations

import struct
from dataclasses import asdict, dataclass, field

MAGIC = b"NVuc"
HEADER = struct.Struct("<4sHHHHHHIIQ")
ENTRY = struct.Struct("<IIQIIII")
SYMBOL = struct.Struct("<IIHHIIIIII")
INSTRUCTION_BYTES = 16

UCODE, REG, LMEM, STACK, BARRIER, STRING_TABLE, SYMBOL_TABLE, SCRATCH = 0x01, 0x03, 0x15, 0x17, 0x18, 0x21, 0x39, 0x3C
#: Section type -> the name nvdisasm prints (where it prints one).
SECTION_NAMES = {0x01: "UCODE", 0x03: "REG", 0x15: "LMEM", 0x17: "STACK", 0x18: "BARRIER", 0x21: "STRING_TABLE",
                 0x37: "DEBUG_FRAME_TABLE", 0x39: "SYMBOL_TABLE", 0x3A: "DEBUG_FUNCTION_MAP", 0x3C: "SCRATCH",
                 0x45: "PROGRAM_INFO"}
ARCH_NAMES = {0x0E: "AMPERE", 0x0F: "HOPPER"}
#: Arch code -> SM version, where the arch has only one (Ampere spans sm_80/86/87).
ARCH_SM = {0x0F: 90}


class NvucFormatError(ValueError):
    """The bytes are not an NVuc container of the layout read here, or its table points outside it."""


@dataclass(frozen=True)
class Section:
    index: int
    type: int
    size: int
    offset: int
    values: tuple[int, int, int, int]

    @property
    def name(self) -> str:
        return SECTION_NAMES.get(self.type, f"0x{self.type:02x}")


@dataclass(frozen=True)
class Function:
    """One SYMBOL_TABLE entry."""
    name: str
    offset: int
    section: int
    kind: int
    size: int
    frame_size: int
    spills: int
    refills: int


@dataclass
class Container:
    data: bytes                       # the container's own bytes (``size`` of them)
    version: tuple[int, int]
    arch: int
    chip: tuple[int, int]
    program_kind: int
    sections: list[Section]
    functions: list[Function] = field(default_factory=list)

    @property
    def size(self) -> int:
        return len(self.data)

    @property
    def arch_name(self) -> str:
        return ARCH_NAMES.get(self.arch, f"0x{self.arch:x}")

    @property
    def sm(self) -> int | None:
        return ARCH_SM.get(self.arch)

    def of_type(self, kind: int) -> list[Section]:
        return [s for s in self.sections if s.type == kind]

    def bytes_of(self, section: Section) -> bytes:
        return self.data[section.offset:section.offset + section.size]

    @property
    def code_sections(self) -> list[Section]:
        return self.of_type(UCODE)

    @property
    def registers(self) -> int | None:
        """REG's first word: the register count the code uses (None without a REG section)."""
        sections = self.of_type(REG)
        return struct.unpack_from("<I", self.bytes_of(sections[0]))[0] if sections else None

    @property
    def scratch_bytes(self) -> int:
        """SCRATCH's val1 (0 when the container has no SCRATCH section)."""
        return sum(s.values[1] for s in self.of_type(SCRATCH))

    @property
    def barrier_offsets(self) -> list[int]:
        """Code offsets the BARRIER section lists (one per BAR.SYNC in the code read so far)."""
        offsets = []
        for section in self.of_type(BARRIER):
            count = min(section.values[1], section.size // 4)
            offsets += struct.unpack_from(f"<{count}I", self.bytes_of(section))
        return offsets

    def function_for(self, section: Section) -> Function | None:
        return next((f for f in self.functions if f.section == section.index), None)

    def summary(self) -> dict:
        return {"version": f"{self.version[0]}.{self.version[1]}", "arch": self.arch_name, "bytes": self.size,
                "registers": self.registers, "scratch_bytes": self.scratch_bytes,
                "barriers": len(self.barrier_offsets),
                "sections": [{"type": s.name, "size": s.size, "offset": s.offset, "values": list(s.values)}
                             for s in self.sections],
                "functions": [asdict(f) for f in self.functions]}


def _header(data: bytes, at: int) -> tuple:
    if data[at:at + 4] != MAGIC:
        raise NvucFormatError(f"no NVuc magic at byte {at}")
    if len(data) - at < HEADER.size:
        raise NvucFormatError(f"{len(data) - at} bytes after the NVuc magic, fewer than its {HEADER.size}-byte "
                              "header")
    return HEADER.unpack_from(data, at)


def _check_section(section: Section, table_end: int, size: int) -> None:
    if section.size and (section.offset < table_end or section.offset + section.size > size):
        raise NvucFormatError(f"section {section.index} ({section.name}) spans bytes {section.offset} to "
                              f"{section.offset + section.size}, outside the data area {table_end} to {size}")


def _functions(container: Container) -> list[Function]:
    functions = []
    for table in container.of_type(SYMBOL_TABLE):
        strings_index = table.values[1]
        strings = (container.bytes_of(container.sections[strings_index])
                   if strings_index < len(container.sections) else b"")
        blob = container.bytes_of(table)
        for i in range(min(table.values[0], len(blob) // SYMBOL.size)):
            name, offset, section, kind, size, frame, _cumulative, _unprinted, spills, refills = SYMBOL.unpack_from(
                blob, i * SYMBOL.size)
            end = strings.find(b"\0", name)
            text = strings[name:end if end >= 0 else len(strings)].decode("utf-8", "replace")
            functions.append(Function(text, offset, section, kind, size, frame, spills, refills))
    return functions


def parse(data: bytes, at: int = 0) -> Container:
    """The container whose magic is at ``data[at]``. Raises :class:`NvucFormatError` on another version, a
    table or section outside the container, a container larger than the bytes given, or no code section."""
    _magic, major, minor, count, arch, family, variant, program, _driver, size = _header(data, at)
    if major != 1:
        raise NvucFormatError(f"NVuc version {major}.{minor}: only version 1 containers are read")
    table_end = HEADER.size + count * ENTRY.size
    if count == 0 or size < table_end:
        raise NvucFormatError(f"NVuc header: {count} sections, container size {size}: no room for the table")
    if size > len(data) - at:
        raise NvucFormatError(f"NVuc container of {size} bytes, but only {len(data) - at} bytes are there "
                              "(truncated)")
    blob = bytes(data[at:at + size])
    sections = []
    for i in range(count):
        kind, length, offset, *values = ENTRY.unpack_from(blob, HEADER.size + i * ENTRY.size)
        sections.append(Section(i, kind, length, offset, tuple(values)))
    for section in sections:
        _check_section(section, table_end, size)
    container = Container(blob, (major, minor), arch, (family, variant), program, sections)
    code = container.code_sections
    if not code:
        raise NvucFormatError(f"NVuc container with {count} sections and no UCODE (machine code) section")
    for section in code:
        if section.size == 0 or section.size % INSTRUCTION_BYTES:
            raise NvucFormatError(f"UCODE section {section.index}: {section.size} bytes, not a whole number of "
                                  f"{INSTRUCTION_BYTES}-byte instructions")
    reg = container.of_type(REG)
    if reg and reg[0].size < 4:
        raise NvucFormatError(f"REG section {reg[0].index}: {reg[0].size} bytes, too short for a register count")
    container.functions = _functions(container)
    return container


def find_containers(data: bytes) -> tuple[list[tuple[int, Container]], list[str]]:
    """Every container in ``data`` as (offset, container), and why each other ``NVuc`` magic did not parse."""
    found, problems, position = [], [], 0
    while True:
        at = data.find(MAGIC, position)
        if at < 0:
            return found, problems
        try:
            container = parse(data, at)
        except NvucFormatError as error:
            problems.append(f"byte {at}: {error}")
            position = at + 1
            continue
        found.append((at, container))
        position = at + container.size
