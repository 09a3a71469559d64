"""Disassembling with ``nvdisasm`` and counting what the listing holds.

nvdisasm is looked for on PATH, beside nvcc, then in the ``nvidia-cuda-nvdisasm`` pip package
(``pip install 'vkcoop[inspect]'``). An nvdisasm listing of a cubin puts each kernel under a ``.text.<name>``
section, with ``.sectioninfo @"SHI_REGISTERS=n"`` in its header (a ``--binary SM90`` listing of raw code has
neither), and one instruction per line::

        /*0040*/                   HMMA.16816.F32 R4, R8, R12, R4 ;
        /*0050*/              @!P0 LDG.E.U16.STRONG.SM R2, desc[UR4][R2.64] ;

:func:`parse_listing` reads the mnemonic (with its modifiers) of every instruction line, per kernel, and
:func:`instruction_mix` sorts them into classes: matrix multiplies, loads and stores by space and width, barriers
and the rest. The counts are static (instructions
in the code), not executed instructions.
"""
from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

_INSTRUCTION = re.compile(r"^\s*/\*([0-9a-f]{4,})\*/\s+(?:\{\s*)?(?:@!?U?P[0-7T]\s+)?"
                          r"([A-Z][A-Z0-9_]*(?:\.[A-Za-z0-9_]+)*)(?=[\s;])")
#: An instruction guarded by the never-true predicate: the compiler's placeholder (``@!PT LDS RZ, [RZ]`` beside
#: LDGSTS). It takes an issue slot and moves nothing, so it is counted as a NOP.
_NEVER = re.compile(r"^\s*/\*[0-9a-f]{4,}\*/\s+(?:\{\s*)?@!PT\s")
_SECTION = re.compile(r"^\s*\.section\s+\.text\.([^,\s]+)")
_REGISTERS = re.compile(r'\.sectioninfo\s+@"SHI_REGISTERS=(\d+)"')
_TEXT_LABEL = re.compile(r"^\.text\.(\S+):\s*$")
_LABEL = re.compile(r"^\s*(\.L_\w+):\s*$")
#: A branch's target: an address (``BRA 0x1110``, raw listings) or a label (``BRA `(.L_x_3)``, cubin listings).
_BRANCH_TARGET = re.compile(r"(?:0x([0-9a-f]+)|`\((\.L_\w+)\))\s*;")

#: Matrix-multiply opcodes (Volta to Hopper): their modifiers name the shape and types.
MMA_OPCODES = ("HMMA", "HGMMA", "IMMA", "IGMMA", "QGMMA", "BGMMA", "DMMA", "QMMA", "OMMA")
#: Access widths in bits named by a load/store modifier; a load without one moves 32 bits.
_WIDTHS = {"U8": 8, "S8": 8, "U16": 16, "S16": 16, "32": 32, "64": 64, "128": 128}
SHARED_OPCODES = ("LDS", "LDSM", "STS", "STSM")
BARRIER_OPCODES = ("BAR", "BARRIER", "WARPSYNC", "DEPBAR", "LDGDEPBAR", "ARRIVES", "SYNCS")
SPILL_OPCODES = ("LDL", "STL")
#: Copies that move global memory without registers: LDGSTS (cp.async, sm_80+), UTMALDG (TMA), UBLKCP (bulk copy).
ASYNC_COPY_OPCODES = ("LDGSTS", "UTMALDG", "UBLKCP")


class DisassemblerMissing(RuntimeError):
    """nvdisasm was not found."""


class DisassemblyError(RuntimeError):
    """nvdisasm ran and failed."""


@dataclass
class KernelListing:
    name: str
    registers: int | None = None
    mnemonics: list[str] = field(default_factory=list)
    addresses: list[int] = field(default_factory=list)         # of each instruction, as listed
    branches: dict[int, int | str] = field(default_factory=dict)  # BRA's index -> target address or label
    labels: dict[str, int] = field(default_factory=dict)       # label -> address of the instruction it marks

    def branch_targets(self) -> dict[int, int]:
        """Index of each BRA -> its target address (labels resolved; one that marks no instruction is left out)."""
        resolved = {i: self.labels.get(t) if isinstance(t, str) else t for i, t in self.branches.items()}
        return {i: t for i, t in resolved.items() if t is not None}


def parse_listing(text: str) -> list[KernelListing]:
    """Kernels of a listing, in order; instructions outside any ``.text.`` section go to a kernel named ``""``
    (a raw ``--binary`` disassembly has no sections)."""
    kernels: list[KernelListing] = []
    current: KernelListing | None = None
    pending_labels: list[str] = []     # labels waiting for the next instruction's address
    for line in text.splitlines():
        section = _SECTION.match(line) or _TEXT_LABEL.match(line.strip())
        if section:
            name = section.group(1)
            if current is None or current.name != name:
                current = KernelListing(name)
                kernels.append(current)
            continue
        registers = _REGISTERS.search(line)
        if registers and current is not None:
            current.registers = int(registers.group(1))
            continue
        label = _LABEL.match(line)
        if label:
            pending_labels.append(label.group(1))
            continue
        instruction = _INSTRUCTION.match(line)
        if instruction:
            if current is None:
                current = KernelListing("")
                kernels.append(current)
            mnemonic = "NOP" if _NEVER.match(line) else instruction.group(2)
            _add_instruction(current, int(instruction.group(1), 16), mnemonic, line, pending_labels)
            pending_labels = []
    return kernels


def _add_instruction(kernel: KernelListing, address: int, mnemonic: str, line: str, labels: list[str]) -> None:
    for label in labels:
        kernel.labels[label] = address
    if mnemonic.split(".")[0] == "BRA":
        target = _BRANCH_TARGET.search(line)
        if target:
            kernel.branches[len(kernel.mnemonics)] = int(target.group(1), 16) if target.group(1) else target.group(2)
    kernel.mnemonics.append(mnemonic)
    kernel.addresses.append(address)


def access_width(mnemonic: str) -> int:
    """Bits one thread moves in a load/store mnemonic (``LDG.E.U16.STRONG.SM`` -> 16, ``LDG.E.128`` -> 128,
    ``LDG.E.LTC128B.64`` -> 64: cache hints such as LTC128B are not widths)."""
    widths = [_WIDTHS[m] for m in mnemonic.split(".")[1:] if m in _WIDTHS]
    return widths[-1] if widths else 32


@dataclass
class InstructionMix:
    """Static instruction counts of one kernel (or of several, added up)."""
    total: int = 0
    opcodes: Counter = field(default_factory=Counter)          # base opcode -> count
    mma: Counter = field(default_factory=Counter)              # full MMA mnemonic (shape, types) -> count
    global_loads: Counter = field(default_factory=Counter)     # width in bits -> count (LDG)
    global_load_forms: Counter = field(default_factory=Counter)  # full LDG mnemonic -> count
    global_stores: Counter = field(default_factory=Counter)    # width in bits -> count (STG)
    global_store_forms: Counter = field(default_factory=Counter)  # full STG mnemonic -> count
    shared: Counter = field(default_factory=Counter)           # LDS/LDSM/STS/STSM -> count
    shared_forms: Counter = field(default_factory=Counter)     # full LDS/LDSM/STS/STSM mnemonic -> count
    async_copies: Counter = field(default_factory=Counter)     # full LDGSTS / UTMALDG / UBLKCP mnemonic -> count
    barriers: Counter = field(default_factory=Counter)         # full barrier mnemonic -> count
    spills: Counter = field(default_factory=Counter)           # LDL / STL -> count

    def add(self, mnemonic: str) -> None:
        base = mnemonic.split(".")[0]
        self.total += 1
        self.opcodes[base] += 1
        if base in MMA_OPCODES:
            self.mma[mnemonic] += 1
        elif base == "LDG":
            self.global_loads[access_width(mnemonic)] += 1
            self.global_load_forms[mnemonic] += 1
        elif base == "STG":
            self.global_stores[access_width(mnemonic)] += 1
            self.global_store_forms[mnemonic] += 1
        elif base in SHARED_OPCODES:
            self.shared[base] += 1
            self.shared_forms[mnemonic] += 1
        elif base in ASYNC_COPY_OPCODES:
            self.async_copies[mnemonic] += 1
        elif base in BARRIER_OPCODES:
            self.barriers[mnemonic] += 1
        elif base in SPILL_OPCODES:
            self.spills[base] += 1

    def merge(self, other: "InstructionMix") -> "InstructionMix":
        merged = InstructionMix()
        for name in self.__dataclass_fields__:
            if name == "total":
                merged.total = self.total + other.total
            else:
                setattr(merged, name, getattr(self, name) + getattr(other, name))
        return merged

    def to_dict(self) -> dict:
        out = {"total": self.total}
        for name in self.__dataclass_fields__:
            if name != "total":
                out[name] = {str(k): v for k, v in sorted(getattr(self, name).items(), key=lambda kv: str(kv[0]))}
        return out


def instruction_mix(mnemonics) -> InstructionMix:
    mix = InstructionMix()
    for mnemonic in mnemonics:
        mix.add(mnemonic)
    return mix


# --------------------------------------------------------------------------------------------- nvdisasm
#: The pip package that ships nvdisasm (``pip install 'vkcoop[inspect]'`` brings it).
NVDISASM_WHEEL = "nvidia-cuda-nvdisasm"
MISSING_NVDISASM = ("nvdisasm not found (PATH, beside nvcc / $CUDA_HOME/bin, the nvidia-cuda-nvdisasm package); "
                    "pip install 'vkcoop[inspect]' (or nvidia-cuda-nvdisasm), install the CUDA toolkit, "
                    "or pass --nvdisasm")


def wheel_nvdisasm() -> str | None:
    """The nvdisasm the ``nvidia-cuda-nvdisasm`` wheel installed (``nvidia/cu13/bin/nvdisasm`` in 13.x; found
    through the distribution's file list, so other releases' folders work too), or None."""
    from importlib import metadata
    try:
        distribution = metadata.distribution(NVDISASM_WHEEL)
    except metadata.PackageNotFoundError:
        return None
    for entry in distribution.files or ():
        if entry.name in ("nvdisasm", "nvdisasm.exe") and entry.parent.name == "bin":
            path = Path(distribution.locate_file(entry))
            if path.is_file():
                return str(path)
    return None


def find_nvdisasm() -> str | None:
    """nvdisasm on PATH, else beside the nvcc :func:`vkcoop.cuda.build.find_nvcc` finds (the toolkit's bin), else
    the one of the ``nvidia-cuda-nvdisasm`` package (:func:`wheel_nvdisasm`)."""
    found = shutil.which("nvdisasm")
    if found:
        return found
    from ..cuda.build import find_nvcc
    nvcc = find_nvcc()
    for directory in ([Path(nvcc).parent, Path(nvcc).resolve().parent] if nvcc else []):
        if (directory / "nvdisasm").is_file():
            return str(directory / "nvdisasm")
    return wheel_nvdisasm()


def disassemble(data: bytes, *, raw_arch: str | None = None, nvdisasm: str | None = None,
                timeout_s: float = 120.0) -> str:
    """The nvdisasm listing of a cubin (``raw_arch=None``) or of a raw code blob (``raw_arch="SM90"``)."""
    tool = nvdisasm or find_nvdisasm()
    if tool is None:
        raise DisassemblerMissing(MISSING_NVDISASM)
    with tempfile.TemporaryDirectory(prefix="vkcoop-sass-") as tmp:
        path = Path(tmp) / ("code.bin" if raw_arch else "code.cubin")
        path.write_bytes(data)
        command = [tool, *(["--binary", raw_arch] if raw_arch else []), str(path)]
        try:
            proc = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            raise DisassemblyError(f"{' '.join(command[:-1])} timed out after {timeout_s:.0f} s") from None
    if proc.returncode != 0:
        message = (proc.stderr or proc.stdout).strip().splitlines()
        raise DisassemblyError(f"nvdisasm exit {proc.returncode}: {message[0] if message else 'no output'}")
    return proc.stdout
