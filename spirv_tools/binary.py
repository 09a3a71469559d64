"""Parsing a SPIR-V binary into instructions, rejecting anything malformed with :class:`SpirvFormatError`.

Checks (SPIR-V 1.6 spec, 2.3 "Physical Layout of a SPIR-V Module and Instruction", 2.4 "Logical Layout of a
Module"): the header (magic, version 1.x, a non-zero id bound, schema 0); every instruction's word count
(non-zero, inside the module, within the opcode's minimum and maximum); result ids below the bound and defined
once, fixed-position id operands below the bound; strings nul-terminated inside their instruction. Then the
structure: exactly one OpMemoryModel, functions closed by OpFunctionEnd, blocks that begin with OpLabel and end
with a terminator, and entry points that name a defined function. A module cut at any word, or one whose words
are corrupted in most ways, fails here with a message that says where; what passes is a well-formed module, not
necessarily a valid one (that is spirv-val's job).
"""
from __future__ import annotations

import struct
from typing import NamedTuple

from .errors import InputError, InputTypeError
from .grammar import Grammar

MAGIC = 0x07230203
OP_ENTRY_POINT, OP_MEMORY_MODEL, OP_CAPABILITY, CAPABILITY_LINKAGE = 15, 14, 17, 5
OP_FUNCTION, OP_FUNCTION_PARAMETER, OP_FUNCTION_END, OP_LABEL = 54, 55, 56, 248
# Block terminators (spec 2.2.4 "Control Flow": "Termination Instructions" and branches).
TERMINATORS = frozenset({249, 250, 251, 252, 253, 254, 255, 4416, 4448, 4449, 5294, 5380})
# OpLine, OpNoLine and OpExtInst (non-semantic debug info) may also sit between a function's blocks.
_ANYWHERE_IN_FUNCTION = frozenset({8, 317, 12})


class SpirvFormatError(InputError):
    """The bytes are not a well-formed SPIR-V module."""


class Instruction(NamedTuple):
    offset: int            # word offset in the module
    opcode: int
    operands: tuple        # the words after the opcode word


class Module(NamedTuple):
    version: tuple[int, int]
    bound: int
    instructions: list[Instruction]


def words(spirv) -> tuple[int, ...]:
    """The module's 32-bit words in host order (either byte order is accepted, as the spec allows)."""
    if isinstance(spirv, memoryview):
        spirv = spirv.tobytes()
    if not isinstance(spirv, (bytes, bytearray)):
        raise InputTypeError(f"spirv must be bytes, got {type(spirv).__name__}")
    if len(spirv) < 20 or len(spirv) % 4:
        raise SpirvFormatError(f"not a SPIR-V module: {len(spirv)} bytes (needs a 5-word header and whole words)")
    (magic,) = struct.unpack_from("<I", spirv)
    if magic == MAGIC:
        return struct.unpack(f"<{len(spirv) // 4}I", spirv)
    if struct.unpack_from(">I", spirv)[0] == MAGIC:
        return struct.unpack(f">{len(spirv) // 4}I", spirv)
    raise SpirvFormatError(f"bad SPIR-V magic number 0x{magic:08x}")


def string(operands, start: int, what: str = "string") -> tuple[str, int]:
    """Decode the nul-terminated UTF-8 literal at operand ``start``; returns it and the words it used."""
    raw = struct.pack(f"<{len(operands) - start}I", *operands[start:]) if start < len(operands) else b""
    end = raw.find(b"\0")
    if end < 0:
        raise SpirvFormatError(f"{what} is not nul-terminated inside its instruction")
    try:
        return raw[:end].decode(), end // 4 + 1
    except UnicodeDecodeError:
        raise SpirvFormatError(f"{what} is not UTF-8: {raw[:end]!r}") from None


def parse(spirv, grammar: Grammar) -> Module:
    """Header and instruction stream, every instruction checked against the opcode's shape; then the structure."""
    all_words = words(spirv)
    version_word, bound, schema = all_words[1], all_words[3], all_words[4]
    major, minor = (version_word >> 16) & 0xFF, (version_word >> 8) & 0xFF
    if major != 1 or version_word & 0xFF0000FF:
        raise SpirvFormatError(f"bad SPIR-V version word 0x{version_word:08x}")
    if bound == 0 or schema != 0:
        raise SpirvFormatError(f"bad SPIR-V header: id bound {bound}, schema {schema}")
    instructions = []
    defined: set[int] = set()
    used: dict[int, Instruction] = {}  # id -> first instruction that uses it (forward references are allowed)
    i = 5
    while i < len(all_words):
        count, opcode = all_words[i] >> 16, all_words[i] & 0xFFFF
        name = grammar.opname(opcode)
        if count == 0:
            raise SpirvFormatError(f"zero word count at word {i} ({name})")
        if i + count > len(all_words):
            raise SpirvFormatError(f"{name} at word {i} needs {count} words; the module ends after "
                                   f"{len(all_words) - i} (truncated?)")
        operands = all_words[i + 1:i + count]
        inst = Instruction(i, opcode, operands)
        _check_instruction(inst, grammar, bound, defined, used)
        instructions.append(inst)
        i += count
    for used_id, inst in used.items():
        if used_id not in defined:
            raise SpirvFormatError(f"{grammar.opname(inst.opcode)} at word {inst.offset} uses %{used_id}, which "
                                   "the module never defines (truncated?)")
    check_structure(instructions, grammar)
    return Module((major, minor), bound, instructions)


def _check_instruction(inst: Instruction, grammar: Grammar, bound: int, defined: set[int],
                       used: dict[int, Instruction]) -> None:
    shape = grammar.shape(inst.opcode)
    where = f"{grammar.opname(inst.opcode)} at word {inst.offset}"
    if shape is None:
        if grammar.complete:
            raise SpirvFormatError(f"unknown opcode {inst.opcode} at word {inst.offset}")
        return
    count = len(inst.operands) + 1
    if count < shape.min_words or (shape.max_words is not None and count > shape.max_words):
        expected = shape.min_words if shape.max_words == shape.min_words else \
            f"{shape.min_words}..{shape.max_words or ''}"
        raise SpirvFormatError(f"{where} has {count} words; it takes {expected}")
    for offset in shape.ids:
        if inst.operands[offset] >= bound or inst.operands[offset] == 0:
            raise SpirvFormatError(f"{where}: id %{inst.operands[offset]} is outside the bound {bound}")
        used.setdefault(inst.operands[offset], inst)
    if shape.result is not None:
        result = inst.operands[shape.result]
        if result == 0 or result >= bound:
            raise SpirvFormatError(f"{where}: result id %{result} is outside the bound {bound}")
        if result in defined:
            raise SpirvFormatError(f"{where}: result id %{result} is defined twice")
        defined.add(result)
    if shape.result_type is not None:
        if not 0 < inst.operands[shape.result_type] < bound:
            raise SpirvFormatError(f"{where}: result type %{inst.operands[shape.result_type]} is outside the bound")
        used.setdefault(inst.operands[shape.result_type], inst)


def check_structure(instructions: list[Instruction], grammar: Grammar) -> None:
    """Spec 2.4: one OpMemoryModel; functions closed; blocks opened by OpLabel and closed by a terminator;
    each OpEntryPoint names a function the module defines."""
    memory_models = sum(1 for inst in instructions if inst.opcode == OP_MEMORY_MODEL)
    if memory_models != 1:
        raise SpirvFormatError(f"the module has {memory_models} OpMemoryModel instructions; it needs exactly one "
                               "(truncated?)")
    linkage = any(inst.opcode == OP_CAPABILITY and inst.operands[0] == CAPABILITY_LINKAGE for inst in instructions)
    if not linkage and not any(inst.opcode == OP_ENTRY_POINT for inst in instructions):
        raise SpirvFormatError("the module has no OpEntryPoint and no Linkage capability (truncated?)")
    functions: set[int] = set()
    function = None        # the open OpFunction
    in_block = False
    previous = None
    for inst in instructions:
        where = f"{grammar.opname(inst.opcode)} at word {inst.offset}"
        if inst.opcode == OP_FUNCTION:
            if function is not None:
                raise SpirvFormatError(f"{where} starts a function inside function %{function.operands[1]}")
            function, in_block = inst, False
            functions.add(inst.operands[1])
        elif function is None:
            if inst.opcode in (OP_FUNCTION_END, OP_LABEL, OP_FUNCTION_PARAMETER) or inst.opcode in TERMINATORS:
                raise SpirvFormatError(f"{where} is outside any function")
        elif inst.opcode == OP_FUNCTION_END:
            if in_block:
                raise SpirvFormatError(f"{where}: the last block of function %{function.operands[1]} has no "
                                       "terminator")
            function = None
        elif inst.opcode == OP_LABEL:
            if in_block:
                raise SpirvFormatError(f"{where} starts a block before the previous one was terminated")
            in_block = True
        elif inst.opcode in TERMINATORS:
            if not in_block:
                raise SpirvFormatError(f"{where} terminates no block")
            in_block = False
        elif inst.opcode == OP_FUNCTION_PARAMETER and previous in (OP_FUNCTION, OP_FUNCTION_PARAMETER):
            pass
        elif not in_block and inst.opcode not in _ANYWHERE_IN_FUNCTION:
            raise SpirvFormatError(f"{where} is inside function %{function.operands[1]} but outside a block")
        previous = inst.opcode
    if function is not None:
        raise SpirvFormatError(f"the module ends inside function %{function.operands[1]} (truncated?)")
    for inst in instructions:
        if inst.opcode == OP_ENTRY_POINT and inst.operands[1] not in functions:
            raise SpirvFormatError(f"OpEntryPoint at word {inst.offset} names %{inst.operands[1]}, which is not "
                                   "a function of this module")
