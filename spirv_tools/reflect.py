"""A pure-Python SPIR-V reflector driven by SPIRV-Headers' machine-readable grammar.

:mod:`spirv_tools.binary` parses and checks the module (SPIR-V spec 2.3 "Physical Layout", 2.4 "Logical
Layout"), so a truncated or corrupted module raises :class:`SpirvFormatError` and nothing else. This module then
reports what a runtime and a reader want: capabilities, extensions, the entry points and the workgroup size,
specialization constants, descriptor bindings, the push-constant block and its size, and the opcodes used.
Names come from ``spirv.core.grammar.json``; without a grammar, numbers are shown as ``Op<n>``.
"""
from __future__ import annotations

import functools
import struct
from dataclasses import dataclass, field
from pathlib import Path

from .binary import MAGIC, Instruction, SpirvFormatError, parse, string
from .grammar import Grammar, load_grammar
from .layout import type_size

__all__ = ["MAGIC", "SpirvFormatError", "Reflection", "EntryPoint", "SpecConstant", "DescriptorBinding",
           "Grammar", "load_grammar", "reflect"]

# Opcodes and enum values the reflector interprets (SPIR-V unified1); names come from the grammar.
OP_EXTENSION, OP_ENTRY_POINT, OP_EXECUTION_MODE, OP_CAPABILITY = 10, 15, 16, 17
OP_EXECUTION_MODE_ID = 331
OP_TYPE_BOOL, OP_TYPE_INT, OP_TYPE_FLOAT, OP_TYPE_POINTER = 20, 21, 22, 32
OP_TYPE_VECTOR, OP_TYPE_MATRIX, OP_TYPE_ARRAY, OP_TYPE_RUNTIME_ARRAY = 23, 24, 28, 29
OP_TYPE_STRUCT, OP_CONSTANT_COMPOSITE = 30, 44
OP_CONSTANT_TRUE, OP_CONSTANT_FALSE, OP_CONSTANT = 41, 42, 43
OP_SPEC_CONSTANT_TRUE, OP_SPEC_CONSTANT_FALSE, OP_SPEC_CONSTANT, OP_SPEC_CONSTANT_COMPOSITE = 48, 49, 50, 51
OP_VARIABLE, OP_DECORATE, OP_MEMBER_DECORATE, OP_NAME = 59, 71, 72, 5
EXEC_MODE_LOCAL_SIZE, EXEC_MODE_LOCAL_SIZE_ID = 17, 38
DECORATION_SPEC_ID, DECORATION_BUFFER_BLOCK, DECORATION_BUILTIN = 1, 3, 11
DECORATION_BINDING, DECORATION_DESCRIPTOR_SET = 33, 34
# Decorations whose literal the reflector reads: they must carry one.
_LITERAL_DECORATIONS = {DECORATION_SPEC_ID: "SpecId", 6: "ArrayStride", 7: "MatrixStride", DECORATION_BUILTIN:
                        "BuiltIn", DECORATION_BINDING: "Binding", DECORATION_DESCRIPTOR_SET: "DescriptorSet"}
BUILTIN_WORKGROUP_SIZE = 25
STORAGE_UNIFORM, STORAGE_PUSH_CONSTANT, STORAGE_STORAGE_BUFFER = 2, 9, 12


@dataclass(frozen=True)
class EntryPoint:
    name: str
    execution_model: str   # "GLCompute", ...


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
    # "storage-buffer", "uniform-buffer" (SPIR-V < 1.3 storage buffers are Uniform + BufferBlock) or "other".
    kind: str = "other"
    count: int = 1    # descriptor array length; 0 for a runtime array


@dataclass
class Reflection:
    version: tuple[int, int]
    capabilities: list[str] = field(default_factory=list)
    extensions: list[str] = field(default_factory=list)
    entry_point: str | None = None         # the first entry point (see entry_points for all)
    execution_model: str | None = None
    entry_points: list[EntryPoint] = field(default_factory=list)
    local_size: tuple | None = None        # literal sizes, or resolved defaults of LocalSizeId constants
    local_size_spec_ids: tuple | None = None  # SpecId per dimension, where any dimension is a spec constant
    uses_local_size_id: bool = False          # OpExecutionModeId LocalSizeId (Vulkan: needs maintenance4)
    spec_constants: list[SpecConstant] = field(default_factory=list)
    bindings: list[DescriptorBinding] = field(default_factory=list)
    push_constant_blocks: list[str] = field(default_factory=list)
    push_constant_size: int | None = None  # bytes the push block spans (last member's end); None: unknown/none
    opcodes: set[str] = field(default_factory=set)

    def to_dict(self) -> dict:
        return {
            "version": f"{self.version[0]}.{self.version[1]}",
            "capabilities": self.capabilities, "extensions": self.extensions,
            "entry_point": self.entry_point, "execution_model": self.execution_model,
            "entry_points": [vars(e) for e in self.entry_points],
            "local_size": list(self.local_size) if self.local_size else None,
            "local_size_spec_ids": list(self.local_size_spec_ids) if self.local_size_spec_ids else None,
            "uses_local_size_id": self.uses_local_size_id,
            "spec_constants": [vars(s) for s in self.spec_constants],
            "bindings": [vars(b) for b in self.bindings],
            "push_constant_blocks": self.push_constant_blocks,
            "push_constant_size": self.push_constant_size,
            "opcodes": sorted(self.opcodes),
        }


@dataclass
class _Tables:
    """What the instruction walk collects for the passes after it."""
    names: dict = field(default_factory=dict)
    types: dict = field(default_factory=dict)          # id -> ("uint32",) / ("pointer", sc, pointee) / ...
    constants: dict = field(default_factory=dict)
    spec_ops: dict = field(default_factory=dict)       # id -> result type id
    composites: dict = field(default_factory=dict)     # constant composite id -> constituent ids
    decorations: dict = field(default_factory=dict)    # id -> {decoration: literal or None}
    member_offsets: dict = field(default_factory=dict)  # (struct id, member) -> Offset
    variables: dict = field(default_factory=dict)      # id -> (pointer type id, storage class)
    local_size_ids: tuple | None = None


def reflect(spirv: bytes, grammar_path: str | Path | None = None) -> Reflection:
    """Reflect a SPIR-V module. ``grammar_path`` defaults to the toolchain's spirv.core.grammar.json.

    Raises :class:`SpirvFormatError` for anything that is not a well-formed module (see spirv_tools.binary)."""
    if grammar_path is None:
        grammar_path = _default_grammar()
    g = load_grammar(str(grammar_path) if grammar_path else None)
    module = parse(spirv, g)
    out = Reflection(version=module.version)
    tables = _Tables()
    for inst in module.instructions:
        out.opcodes.add(g.opname(inst.opcode))
        _interpret(inst, g, out, tables)
    _collect_spec_constants(out, tables)
    _collect_interface(out, tables, g)
    _resolve_local_size(out, tables)
    return out


@functools.lru_cache(maxsize=1)
def _default_grammar() -> str | None:
    """The toolchain's grammar, looked up once per process (a failed toolchain search is not cached)."""
    from .toolchain import grammar_path
    path = grammar_path()
    return str(path) if path else None


def _need(inst: Instruction, count: int, what: str) -> tuple:
    if len(inst.operands) < count:
        raise SpirvFormatError(f"{what} at word {inst.offset} has {len(inst.operands)} operands; it needs {count}")
    return inst.operands


def _interpret(inst: Instruction, g: Grammar, out: Reflection, t: _Tables) -> None:
    op, ops = inst.opcode, inst.operands
    if op == OP_CAPABILITY:
        out.capabilities.append(g.enumerant("Capability", _need(inst, 1, "OpCapability")[0]))
    elif op == OP_EXTENSION:
        out.extensions.append(string(ops, 0, f"OpExtension at word {inst.offset}")[0])
    elif op == OP_ENTRY_POINT:
        _need(inst, 3, "OpEntryPoint")
        entry = EntryPoint(string(ops, 2, f"OpEntryPoint name at word {inst.offset}")[0],
                           g.enumerant("ExecutionModel", ops[0]))
        out.entry_points.append(entry)
        if out.entry_point is None:
            out.entry_point, out.execution_model = entry.name, entry.execution_model
    elif op == OP_EXECUTION_MODE and len(ops) > 1 and ops[1] == EXEC_MODE_LOCAL_SIZE:
        out.local_size = tuple(_need(inst, 5, "OpExecutionMode LocalSize")[2:5])
    elif op == OP_EXECUTION_MODE_ID and len(ops) > 1 and ops[1] == EXEC_MODE_LOCAL_SIZE_ID:
        t.local_size_ids = tuple(_need(inst, 5, "OpExecutionModeId LocalSizeId")[2:5])
        out.uses_local_size_id = True
    elif op == OP_NAME:
        # glslang names an alias (`const uint OWN_M = TILE_M;`) on the same id: the declared name comes first.
        t.names.setdefault(_need(inst, 2, "OpName")[0], string(ops, 1, f"OpName at word {inst.offset}")[0])
    elif op == OP_DECORATE:
        _need(inst, 2, "OpDecorate")
        if ops[1] in _LITERAL_DECORATIONS:
            _need(inst, 3, f"OpDecorate {_LITERAL_DECORATIONS[ops[1]]}")
        t.decorations.setdefault(ops[0], {})[ops[1]] = ops[2] if len(ops) > 2 else None
    elif op == OP_MEMBER_DECORATE and len(ops) > 2 and ops[2] == 35:  # Offset
        t.member_offsets[(ops[0], ops[1])] = _need(inst, 4, "OpMemberDecorate Offset")[3]
    else:
        _interpret_type_or_constant(inst, t)


def _interpret_type_or_constant(inst: Instruction, t: _Tables) -> None:
    op, ops = inst.opcode, inst.operands
    if op == OP_TYPE_BOOL:
        t.types[ops[0]] = ("bool",)
    elif op == OP_TYPE_INT:
        t.types[ops[0]] = (("int" if _need(inst, 3, "OpTypeInt")[2] else "uint") + str(ops[1]),)
    elif op == OP_TYPE_FLOAT:
        t.types[ops[0]] = ("float" + str(_need(inst, 2, "OpTypeFloat")[1]),)
    elif op in (OP_TYPE_VECTOR, OP_TYPE_MATRIX, OP_TYPE_ARRAY):
        t.types[ops[0]] = ({OP_TYPE_VECTOR: "vector", OP_TYPE_MATRIX: "matrix", OP_TYPE_ARRAY: "array"}[op],
                           *_need(inst, 3, "a composite type")[1:3])
    elif op == OP_TYPE_RUNTIME_ARRAY:
        t.types[ops[0]] = ("runtime-array", _need(inst, 2, "OpTypeRuntimeArray")[1])
    elif op == OP_TYPE_STRUCT:
        t.types[ops[0]] = ("struct", *ops[1:])
    elif op == OP_TYPE_POINTER:
        t.types[ops[0]] = ("pointer", *_need(inst, 3, "OpTypePointer")[1:3])
    elif op in (OP_CONSTANT, OP_SPEC_CONSTANT):
        _need(inst, 3, "OpConstant")
        t.constants[ops[1]] = _decode_scalar(t.types.get(ops[0], ("uint32",))[0], ops[2:])
        if op == OP_SPEC_CONSTANT:
            t.spec_ops[ops[1]] = ops[0]
    elif op in (OP_CONSTANT_TRUE, OP_CONSTANT_FALSE, OP_SPEC_CONSTANT_TRUE, OP_SPEC_CONSTANT_FALSE):
        t.constants[ops[1]] = op in (OP_CONSTANT_TRUE, OP_SPEC_CONSTANT_TRUE)
        if op in (OP_SPEC_CONSTANT_TRUE, OP_SPEC_CONSTANT_FALSE):
            t.spec_ops[ops[1]] = ops[0]
    elif op in (OP_SPEC_CONSTANT_COMPOSITE, OP_CONSTANT_COMPOSITE):
        t.composites[ops[1]] = ops[2:]
        if op == OP_SPEC_CONSTANT_COMPOSITE:
            t.spec_ops[ops[1]] = ops[0]
    elif op == OP_VARIABLE:
        t.variables[ops[1]] = (ops[0], ops[2])


def _collect_spec_constants(out: Reflection, t: _Tables) -> None:
    found = []
    for target, decos in t.decorations.items():
        if DECORATION_SPEC_ID in decos and target in t.spec_ops:
            found.append(SpecConstant(decos[DECORATION_SPEC_ID], t.names.get(target, f"%{target}"),
                                      t.types.get(t.spec_ops[target], ("composite",))[0], t.constants.get(target)))
    # glslang may emit several constants with one SpecId (e.g. local_size_x_id plus the named constant);
    # list each id once, preferring the named declaration.
    by_id: dict[int, SpecConstant] = {}
    for sc in found:
        if sc.spec_id not in by_id or by_id[sc.spec_id].name.startswith("%"):
            by_id[sc.spec_id] = sc
    out.spec_constants = sorted(by_id.values(), key=lambda s: s.spec_id)


def _collect_interface(out: Reflection, t: _Tables, g: Grammar) -> None:
    """Descriptor bindings and push-constant blocks from the module's global variables."""
    for var, (ptr_type, storage) in t.variables.items():
        decos = t.decorations.get(var, {})
        pointer = t.types.get(ptr_type, ())
        pointee = pointer[2] if len(pointer) == 3 and pointer[0] == "pointer" else None
        count, block = 1, pointee
        element = t.types.get(pointee, ())
        if element[:1] == ("array",):
            block, count = element[1], t.constants.get(element[2])
            count = count if isinstance(count, int) and not isinstance(count, bool) else 0
        elif element[:1] == ("runtime-array",):
            block, count = element[1], 0
        display = t.names.get(var) or t.names.get(block, "") or f"%{var}"
        if DECORATION_BINDING in decos:
            buffer_block = DECORATION_BUFFER_BLOCK in t.decorations.get(block, {})
            kind = ("storage-buffer" if storage == STORAGE_STORAGE_BUFFER or (storage == STORAGE_UNIFORM and buffer_block)
                    else "uniform-buffer" if storage == STORAGE_UNIFORM else "other")
            out.bindings.append(DescriptorBinding(decos.get(DECORATION_DESCRIPTOR_SET, 0), decos[DECORATION_BINDING],
                                                  display, g.enumerant("StorageClass", storage), kind, count))
        elif storage == STORAGE_PUSH_CONSTANT:
            out.push_constant_blocks.append(display)
            size = type_size(pointee, t.types, t.decorations, t.member_offsets, t.constants)
            if size is not None:
                out.push_constant_size = max(out.push_constant_size or 0, size)
    out.bindings.sort(key=lambda b: (b.set, b.binding))


def _resolve_local_size(out: Reflection, t: _Tables) -> None:
    # A constant decorated BuiltIn WorkgroupSize overrides LocalSize (local_size_x_id in GLSL).
    local_size_ids = t.local_size_ids
    for target, decos in t.decorations.items():
        if decos.get(DECORATION_BUILTIN) == BUILTIN_WORKGROUP_SIZE and target in t.composites:
            local_size_ids = tuple(t.composites[target])
    if local_size_ids is not None:
        out.local_size = tuple(t.constants.get(c) for c in local_size_ids)
        spec_ids = tuple(t.decorations.get(c, {}).get(DECORATION_SPEC_ID) for c in local_size_ids)
        out.local_size_spec_ids = spec_ids if any(i is not None for i in spec_ids) else None


def _decode_scalar(type_name: str, literal) -> object:
    if type_name == "float32":
        return struct.unpack("<f", struct.pack("<I", literal[0]))[0]
    if type_name == "float64" and len(literal) > 1:
        return struct.unpack("<d", struct.pack("<II", literal[0], literal[1]))[0]
    if type_name == "float16":
        import numpy as np
        return float(np.array([literal[0] & 0xFFFF], dtype=np.uint16).view(np.float16)[0])
    if type_name.startswith("float"):
        return literal[0]
    value = literal[0] | ((literal[1] << 32) if len(literal) > 1 else 0)
    bits = 64 if len(literal) > 1 else 32
    if type_name.startswith("int") and value >> (bits - 1):
        value -= 1 << bits
    return value
