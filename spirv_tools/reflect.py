"""A pure-Python SPIR-V reflector driven by SPIRV-Headers' machine-readable grammar.

It walks the module's instruction stream once (SPIR-V spec 2.3 "Physical Layout of a SPIR-V Module")
and reports what a runtime and a reader want: capabilities, extensions, the entry point and its
workgroup size, specialization constants, descriptor bindings, push constants and the opcodes used.
Names come from ``spirv.core.grammar.json``; without a grammar, numbers are shown as ``Op<n>``.
"""
from __future__ import annotations

import functools
import json
import struct
from dataclasses import dataclass, field
from pathlib import Path

MAGIC = 0x07230203

# Opcodes and enum values the reflector interprets (SPIR-V unified1); names come from the grammar.
OP_EXTENSION, OP_ENTRY_POINT, OP_EXECUTION_MODE, OP_CAPABILITY = 10, 15, 16, 17
OP_EXECUTION_MODE_ID = 331
OP_TYPE_BOOL, OP_TYPE_INT, OP_TYPE_FLOAT, OP_TYPE_POINTER = 20, 21, 22, 32
OP_TYPE_STRUCT, OP_CONSTANT_COMPOSITE = 30, 44
OP_CONSTANT_TRUE, OP_CONSTANT_FALSE, OP_CONSTANT = 41, 42, 43
OP_SPEC_CONSTANT_TRUE, OP_SPEC_CONSTANT_FALSE, OP_SPEC_CONSTANT, OP_SPEC_CONSTANT_COMPOSITE = 48, 49, 50, 51
OP_VARIABLE, OP_DECORATE, OP_NAME = 59, 71, 5
EXEC_MODE_LOCAL_SIZE, EXEC_MODE_LOCAL_SIZE_ID = 17, 38
DECORATION_SPEC_ID, DECORATION_BUILTIN, DECORATION_BINDING, DECORATION_DESCRIPTOR_SET = 1, 11, 33, 34
BUILTIN_WORKGROUP_SIZE = 25
STORAGE_PUSH_CONSTANT = 9


class SpirvFormatError(ValueError):
    """The bytes are not a SPIR-V module."""


@dataclass(frozen=True)
class SpecConstant:
    spec_id: int
    name: str
    type: str         # "bool", "int32", "uint32", "float32", ...
    default: object


@dataclass(frozen=True)
class DescriptorBinding:
    set: int
    binding: int
    name: str
    storage_class: str


@dataclass
class Reflection:
    version: tuple[int, int]
    capabilities: list[str] = field(default_factory=list)
    extensions: list[str] = field(default_factory=list)
    entry_point: str | None = None
    execution_model: str | None = None
    local_size: tuple | None = None        # literal sizes, or resolved defaults of LocalSizeId constants
    local_size_spec_ids: tuple | None = None  # SpecId per dimension, where any dimension is a spec constant
    uses_local_size_id: bool = False          # OpExecutionModeId LocalSizeId (Vulkan: needs maintenance4)
    spec_constants: list[SpecConstant] = field(default_factory=list)
    bindings: list[DescriptorBinding] = field(default_factory=list)
    push_constant_blocks: list[str] = field(default_factory=list)
    opcodes: set[str] = field(default_factory=set)

    def to_dict(self) -> dict:
        return {
            "version": f"{self.version[0]}.{self.version[1]}",
            "capabilities": self.capabilities, "extensions": self.extensions,
            "entry_point": self.entry_point, "execution_model": self.execution_model,
            "local_size": list(self.local_size) if self.local_size else None,
            "local_size_spec_ids": list(self.local_size_spec_ids) if self.local_size_spec_ids else None,
            "uses_local_size_id": self.uses_local_size_id,
            "spec_constants": [vars(s) for s in self.spec_constants],
            "bindings": [vars(b) for b in self.bindings],
            "push_constant_blocks": self.push_constant_blocks,
            "opcodes": sorted(self.opcodes),
        }


@dataclass(frozen=True)
class Grammar:
    opcodes: dict[int, str]
    enums: dict[str, dict[int, str]]  # operand kind -> value -> enumerant

    def opname(self, opcode: int) -> str:
        return self.opcodes.get(opcode, f"Op{opcode}")

    def enumerant(self, kind: str, value: int) -> str:
        return self.enums.get(kind, {}).get(value, f"{kind}{value}")


@functools.lru_cache(maxsize=4)
def load_grammar(path: str | None) -> Grammar:
    if path is None:
        return Grammar({}, {})
    data = json.loads(Path(path).read_text())
    opcodes = {}
    for inst in data["instructions"]:
        opcodes.setdefault(inst["opcode"], inst["opname"])  # first name wins over aliases
    enums = {}
    for kind in data["operand_kinds"]:
        if "enumerants" in kind:
            table = {}
            for e in kind["enumerants"]:
                value = e["value"] if isinstance(e["value"], int) else int(e["value"], 0)
                table.setdefault(value, e["enumerant"])
            enums[kind["kind"]] = table
    return Grammar(opcodes, enums)


def _string(words, start) -> tuple[str, int]:
    """Decode a nul-terminated literal string; returns it and the number of words used."""
    raw = struct.pack(f"<{len(words) - start}I", *words[start:])
    end = raw.index(b"\0")
    return raw[:end].decode(), end // 4 + 1


def _words(spirv: bytes) -> tuple[int, ...]:
    if len(spirv) < 20 or len(spirv) % 4:
        raise SpirvFormatError(f"not a SPIR-V module: {len(spirv)} bytes")
    (magic,) = struct.unpack_from("<I", spirv)
    if magic == MAGIC:
        return struct.unpack(f"<{len(spirv) // 4}I", spirv)
    if struct.unpack_from(">I", spirv)[0] == MAGIC:
        return struct.unpack(f">{len(spirv) // 4}I", spirv)
    raise SpirvFormatError(f"bad SPIR-V magic number 0x{magic:08x}")


def reflect(spirv: bytes, grammar_path: str | Path | None = None) -> Reflection:
    """Reflect a SPIR-V module. ``grammar_path`` defaults to the toolchain's spirv.core.grammar.json."""
    if grammar_path is None:
        from .toolchain import grammar_path as find_grammar
        grammar_path = find_grammar()
    g = load_grammar(str(grammar_path) if grammar_path else None)
    words = _words(spirv)
    version = ((words[1] >> 16) & 0xFF, (words[1] >> 8) & 0xFF)
    out = Reflection(version=version)

    names: dict[int, str] = {}
    types: dict[int, tuple] = {}
    constants: dict[int, object] = {}
    spec_ops: dict[int, tuple[int, list[int]]] = {}  # id -> (result type, operand words)
    composites: dict[int, list[int]] = {}             # constant composite id -> constituent ids
    decorations: dict[int, dict[int, int]] = {}
    variables: dict[int, tuple[int, int]] = {}       # id -> (pointer type id, storage class)
    local_size_ids = None

    i = 5
    while i < len(words):
        count, opcode = words[i] >> 16, words[i] & 0xFFFF
        if count == 0:
            raise SpirvFormatError(f"zero-length instruction at word {i}")
        ops = list(words[i + 1:i + count])
        out.opcodes.add(g.opname(opcode))
        if opcode == OP_CAPABILITY:
            out.capabilities.append(g.enumerant("Capability", ops[0]))
        elif opcode == OP_EXTENSION:
            out.extensions.append(_string(ops, 0)[0])
        elif opcode == OP_ENTRY_POINT and out.entry_point is None:
            out.execution_model = g.enumerant("ExecutionModel", ops[0])
            out.entry_point = _string(ops, 2)[0]
        elif opcode == OP_EXECUTION_MODE and ops[1] == EXEC_MODE_LOCAL_SIZE:
            out.local_size = tuple(ops[2:5])
        elif opcode == OP_EXECUTION_MODE_ID and ops[1] == EXEC_MODE_LOCAL_SIZE_ID:
            local_size_ids = tuple(ops[2:5])
            out.uses_local_size_id = True
        elif opcode == OP_NAME:
            # glslang names an alias (`const uint OWN_M = TILE_M;`) on the same id: the declared name comes first.
            names.setdefault(ops[0], _string(ops, 1)[0])
        elif opcode == OP_DECORATE:
            decorations.setdefault(ops[0], {})[ops[1]] = ops[2] if len(ops) > 2 else None
        elif opcode == OP_TYPE_BOOL:
            types[ops[0]] = ("bool",)
        elif opcode == OP_TYPE_INT:
            types[ops[0]] = (("int" if ops[2] else "uint") + str(ops[1]),)
        elif opcode == OP_TYPE_FLOAT:
            types[ops[0]] = ("float" + str(ops[1]),)
        elif opcode == OP_TYPE_POINTER:
            types[ops[0]] = ("pointer", ops[1], ops[2])
        elif opcode in (OP_CONSTANT, OP_SPEC_CONSTANT):
            constants[ops[1]] = _decode_scalar(types.get(ops[0], ("uint32",))[0], ops[2:])
            if opcode == OP_SPEC_CONSTANT:
                spec_ops[ops[1]] = (ops[0], ops[2:])
        elif opcode in (OP_CONSTANT_TRUE, OP_CONSTANT_FALSE, OP_SPEC_CONSTANT_TRUE, OP_SPEC_CONSTANT_FALSE):
            constants[ops[1]] = opcode in (OP_CONSTANT_TRUE, OP_SPEC_CONSTANT_TRUE)
            if opcode in (OP_SPEC_CONSTANT_TRUE, OP_SPEC_CONSTANT_FALSE):
                spec_ops[ops[1]] = (ops[0], [])
        elif opcode in (OP_SPEC_CONSTANT_COMPOSITE, OP_CONSTANT_COMPOSITE):
            composites[ops[1]] = ops[2:]
            if opcode == OP_SPEC_CONSTANT_COMPOSITE:
                spec_ops[ops[1]] = (ops[0], ops[2:])
        elif opcode == OP_VARIABLE:
            variables[ops[1]] = (ops[0], ops[2])
        i += count

    for target, decos in decorations.items():
        if DECORATION_SPEC_ID in decos and target in spec_ops:
            type_id = spec_ops[target][0]
            out.spec_constants.append(SpecConstant(
                decos[DECORATION_SPEC_ID], names.get(target, f"%{target}"),
                types.get(type_id, ("composite",))[0], constants.get(target)))
    # glslang may emit several constants with one SpecId (e.g. local_size_x_id plus the named constant);
    # list each id once, preferring the named declaration.
    by_id: dict[int, SpecConstant] = {}
    for sc in out.spec_constants:
        if sc.spec_id not in by_id or by_id[sc.spec_id].name.startswith("%"):
            by_id[sc.spec_id] = sc
    out.spec_constants = sorted(by_id.values(), key=lambda s: s.spec_id)

    for var, (ptr_type, storage) in variables.items():
        decos = decorations.get(var, {})
        pointee = types.get(ptr_type, (None, None, None))
        block_name = names.get(pointee[2], "") if pointee[0] == "pointer" else ""
        display = names.get(var) or block_name or f"%{var}"
        if DECORATION_BINDING in decos:
            out.bindings.append(DescriptorBinding(decos.get(DECORATION_DESCRIPTOR_SET, 0), decos[DECORATION_BINDING],
                                                  display, g.enumerant("StorageClass", storage)))
        elif storage == STORAGE_PUSH_CONSTANT:
            out.push_constant_blocks.append(display)
    out.bindings.sort(key=lambda b: (b.set, b.binding))

    # A constant decorated BuiltIn WorkgroupSize overrides LocalSize (local_size_x_id in GLSL).
    for target, decos in decorations.items():
        if decos.get(DECORATION_BUILTIN) == BUILTIN_WORKGROUP_SIZE and target in composites:
            local_size_ids = tuple(composites[target])
    if local_size_ids is not None:
        out.local_size = tuple(constants.get(c) for c in local_size_ids)
        spec_ids = tuple(decorations.get(c, {}).get(DECORATION_SPEC_ID) for c in local_size_ids)
        out.local_size_spec_ids = spec_ids if any(i is not None for i in spec_ids) else None
    return out


def _decode_scalar(type_name: str, literal: list[int]):
    if type_name.startswith("float"):
        if type_name == "float32":
            return struct.unpack("<f", struct.pack("<I", literal[0]))[0]
        if type_name == "float64":
            return struct.unpack("<d", struct.pack("<II", literal[0], literal[1]))[0]
        if type_name == "float16":
            import numpy as np
            return float(np.array([literal[0] & 0xFFFF], dtype=np.uint16).view(np.float16)[0])
        return literal[0]
    value = literal[0] | ((literal[1] << 32) if len(literal) > 1 else 0)
    bits = 64 if len(literal) > 1 else 32
    if type_name.startswith("int") and value >> (bits - 1):
        value -= 1 << bits
    return value
