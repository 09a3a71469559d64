"""Just enough of a CUDA ELF (cubin) reader: its extent inside a larger blob, its sections, its function symbols,
and the per-kernel attributes of ``.nv.info`` (register count, stack and frame sizes).

ELF64 little-endian only (every cubin is). The ``.nv.info`` records are ``[format u8][attribute u8]`` followed,
for format 0x04 (EIFMT_SVAL), by a u16 length and that many bytes, and otherwise by a u16 value. The
attributes read here (EIATTR_REGCOUNT 0x2f, EIATTR_FRAME_SIZE 0x11, EIATTR_MIN_STACK_SIZE 0x12,
EIATTR_MAX_STACK_SIZE 0x23) hold ``[symbol index u32][value u32]``; the test suite checks the register counts
against ``ptxas -v`` for a cubin that the local nvcc builds.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field

ELF_MAGIC = b"\x7fELF"
EM_CUDA = 190
SHT_NOBITS = 8
STT_FUNC = 2
EIFMT_SVAL = 0x04
#: EIATTR codes (the names nvdisasm prints in its ``.nv.info`` listing) -> the key used here.
KERNEL_ATTRIBUTES = {0x2F: "registers", 0x11: "frame_size", 0x12: "min_stack_size", 0x23: "max_stack_size"}


class ElfFormatError(ValueError):
    """The bytes are not a little-endian ELF64 object, or its headers point outside it."""


@dataclass(frozen=True)
class Section:
    name: str
    type: int
    offset: int
    size: int
    link: int
    info: int


@dataclass
class Kernel:
    """One function of a cubin: its name and what ``.nv.info`` says about it (None where absent)."""
    name: str
    code_bytes: int = 0
    registers: int | None = None
    frame_size: int | None = None
    min_stack_size: int | None = None
    max_stack_size: int | None = None
    shared_bytes: int = 0


@dataclass
class CudaElf:
    data: bytes
    machine: int
    flags: int
    sections: list[Section]
    kernels: list[Kernel] = field(default_factory=list)

    @property
    def is_cuda(self) -> bool:
        return self.machine == EM_CUDA

    @property
    def sm(self) -> int | None:
        """The SM version in e_flags (one of its two low bytes, by CUDA release), or None if neither is one."""
        for shift in (8, 0):
            value = (self.flags >> shift) & 0xFF
            if 30 <= value <= 150:
                return value
        return None

    def section(self, name: str) -> Section | None:
        return next((s for s in self.sections if s.name == name), None)


def _header(data: bytes, at: int = 0) -> tuple:
    if len(data) < at + 64 or data[at:at + 4] != ELF_MAGIC:
        raise ElfFormatError("no ELF header")
    if data[at + 4] != 2 or data[at + 5] != 1:
        raise ElfFormatError("only little-endian ELF64 objects are read")
    # e_type e_machine e_version e_entry e_phoff e_shoff e_flags e_ehsize e_phentsize e_phnum e_shentsize e_shnum
    # e_shstrndx
    return struct.unpack_from("<HHIQQQIHHHHHH", data, at + 16)


def elf_extent(data: bytes, at: int = 0) -> int:
    """Length in bytes of the ELF object that starts at ``data[at]``: the furthest end of its headers, section
    contents and program segments. Raises :class:`ElfFormatError` when a header points beyond ``data``."""
    (_type, _machine, _version, _entry, phoff, shoff, _flags, ehsize, phentsize, phnum, shentsize, shnum,
     _shstrndx) = _header(data, at)
    end = max(ehsize, phoff + phnum * phentsize, shoff + shnum * shentsize)
    available = len(data) - at
    if end > available:
        raise ElfFormatError(f"ELF headers end at {end}, past the {available} bytes available")
    for i in range(shnum):
        _name, sh_type, _flags, _addr, offset, size = struct.unpack_from("<IIQQQQ", data, at + shoff + i * shentsize)
        if sh_type != SHT_NOBITS:
            end = max(end, offset + size)
    for i in range(phnum):
        segment = at + phoff + i * phentsize
        _ptype, _pflags, offset, _vaddr, _paddr, filesz = struct.unpack_from("<IIQQQQ", data, segment)
        end = max(end, offset + filesz)
    if end > available:
        raise ElfFormatError(f"ELF contents end at {end}, past the {available} bytes available")
    return end


def _string(table: bytes, offset: int) -> str:
    end = table.find(b"\0", offset)
    return table[offset:end if end >= 0 else len(table)].decode("utf-8", "replace")


def _sections(data: bytes) -> list[Section]:
    header = _header(data)
    shoff, shentsize, shnum, shstrndx = header[5], header[10], header[11], header[12]
    raw = [struct.unpack_from("<IIQQQQII", data, shoff + i * shentsize) for i in range(shnum)]
    if not raw:
        return []
    names = data[raw[shstrndx][4]:raw[shstrndx][4] + raw[shstrndx][5]] if shstrndx < shnum else b""
    return [Section(_string(names, r[0]), r[1], r[4], r[5], r[6], r[7]) for r in raw]


def _function_symbols(data: bytes, sections: list[Section]) -> dict[int, str]:
    """symbol index -> name of every STT_FUNC symbol in .symtab."""
    symtab = next((s for s in sections if s.name == ".symtab"), None)
    if symtab is None or symtab.link >= len(sections):
        return {}
    strtab = sections[symtab.link]
    strings = data[strtab.offset:strtab.offset + strtab.size]
    result = {}
    for index in range(symtab.size // 24):
        name, info = struct.unpack_from("<IB", data, symtab.offset + index * 24)
        if info & 0xF == STT_FUNC:
            result[index] = _string(strings, name)
    return result


def nv_info_records(blob: bytes) -> list[tuple[int, int, bytes]]:
    """(format, attribute, payload) of every record of one ``.nv.info`` section's bytes."""
    records, pos = [], 0
    while pos + 4 <= len(blob):
        fmt, attribute, value = blob[pos], blob[pos + 1], struct.unpack_from("<H", blob, pos + 2)[0]
        if fmt == EIFMT_SVAL:
            payload = blob[pos + 4:pos + 4 + value]
            if len(payload) < value:
                break  # truncated record: keep what was read
            pos += 4 + value
        else:
            payload = struct.pack("<H", value)
            pos += 4
        records.append((fmt, attribute, payload))
    return records


def parse(data: bytes) -> CudaElf:
    """Read one ELF object (``data`` starts with its header)."""
    header = _header(data)
    sections = _sections(data)
    elf = CudaElf(bytes(data), header[1], header[6], sections)
    functions = _function_symbols(data, sections)
    kernels = {name: Kernel(name) for name in functions.values()}
    for section in sections:
        if section.name.startswith(".text.") and section.name[6:] in kernels:
            kernels[section.name[6:]].code_bytes = section.size
        elif section.name.startswith(".nv.shared.") and section.name[11:] in kernels:
            kernels[section.name[11:]].shared_bytes = section.size
        elif section.name == ".nv.info" or section.name.startswith(".nv.info."):
            blob = data[section.offset:section.offset + section.size]
            for fmt, attribute, payload in nv_info_records(blob):
                key = KERNEL_ATTRIBUTES.get(attribute)
                if key is None or fmt != EIFMT_SVAL or len(payload) < 8:
                    continue
                symbol, value = struct.unpack_from("<II", payload)
                if symbol in functions:
                    setattr(kernels[functions[symbol]], key, value)
    elf.kernels = [k for k in kernels.values() if k.code_bytes or k.registers is not None]
    return elf
