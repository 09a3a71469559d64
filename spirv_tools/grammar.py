"""SPIRV-Headers' machine-readable grammar (``spirv.core.grammar.json``): names, and the shape of each instruction.

The shape says how many words an instruction needs at least (and at most, when every operand has a fixed
size), where its result type and result id sit and which fixed-position operands are ids. The binary parser
(:mod:`spirv_tools.binary`) uses it to reject malformed modules; without a grammar a built-in table covers
the instructions the reflector reads and the ones that give a module its structure.
"""
from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field
from pathlib import Path

_ID_KINDS = {"IdRef", "IdResultType", "IdResult", "IdScope", "IdMemorySemantics"}


@dataclass(frozen=True)
class Shape:
    """Word layout of one opcode: operand word offsets count from the first word after the opcode word."""
    min_words: int                  # including the opcode word
    max_words: int | None           # None: variable length
    result_type: int | None = None  # operand offset of IdResultType
    result: int | None = None       # operand offset of IdResult
    ids: tuple[int, ...] = ()       # operand offsets of fixed-position ids (ids must be < the bound)


def _shape(min_words, max_words=None, result_type=None, result=None, ids=()):
    return Shape(min_words, max_words, result_type, result, tuple(ids))


# The instructions the reflector interprets or the structure check needs, for use without a grammar
# (SPIR-V 1.6 unified spec, section 3.49 "Instructions"): opcode -> Shape.
BUILTIN_SHAPES = {
    5: _shape(3, ids=(0,)),                      # OpName
    6: _shape(4, ids=(0,)),                      # OpMemberName
    10: _shape(2),                               # OpExtension
    11: _shape(3, result=0),                     # OpExtInstImport
    14: _shape(3, 3),                            # OpMemoryModel
    15: _shape(4, ids=(1,)),                     # OpEntryPoint
    16: _shape(3, ids=(0,)),                     # OpExecutionMode
    17: _shape(2, 2),                            # OpCapability
    19: _shape(2, 2, result=0),                  # OpTypeVoid
    20: _shape(2, 2, result=0),                  # OpTypeBool
    21: _shape(4, 4, result=0),                  # OpTypeInt
    22: _shape(3, 4, result=0),                  # OpTypeFloat
    23: _shape(4, 4, result=0, ids=(1,)),        # OpTypeVector
    24: _shape(4, 4, result=0, ids=(1,)),        # OpTypeMatrix
    28: _shape(4, 4, result=0, ids=(1, 2)),      # OpTypeArray
    29: _shape(3, 3, result=0, ids=(1,)),        # OpTypeRuntimeArray
    30: _shape(2, result=0),                     # OpTypeStruct
    32: _shape(4, 4, result=0, ids=(2,)),        # OpTypePointer
    33: _shape(3, result=0, ids=(1,)),           # OpTypeFunction
    41: _shape(3, 3, 0, 1), 42: _shape(3, 3, 0, 1),  # OpConstantTrue/False
    43: _shape(4, None, 0, 1),                   # OpConstant
    44: _shape(3, None, 0, 1),                   # OpConstantComposite
    48: _shape(3, 3, 0, 1), 49: _shape(3, 3, 0, 1),  # OpSpecConstantTrue/False
    50: _shape(4, None, 0, 1),                   # OpSpecConstant
    51: _shape(3, None, 0, 1),                   # OpSpecConstantComposite
    54: _shape(5, 5, 0, 1, ids=(3,)),            # OpFunction
    55: _shape(3, 3, 0, 1),                      # OpFunctionParameter
    56: _shape(1, 1),                            # OpFunctionEnd
    59: _shape(4, 5, 0, 1),                      # OpVariable
    71: _shape(3, ids=(0,)),                     # OpDecorate
    72: _shape(4, ids=(0,)),                     # OpMemberDecorate
    248: _shape(2, 2, result=0),                 # OpLabel
    331: _shape(3, ids=(0,)),                    # OpExecutionModeId
}


@dataclass(frozen=True)
class Grammar:
    opcodes: dict[int, str]
    enums: dict[str, dict[int, str]]  # operand kind -> value -> enumerant
    shapes: dict[int, Shape] = field(default_factory=dict)

    def opname(self, opcode: int) -> str:
        return self.opcodes.get(opcode, f"Op{opcode}")

    def enumerant(self, kind: str, value: int) -> str:
        return self.enums.get(kind, {}).get(value, f"{kind}{value}")

    def shape(self, opcode: int) -> Shape | None:
        """The opcode's shape; None for an opcode the grammar does not know (or, without one, not in the table)."""
        return self.shapes.get(opcode) if self.shapes else BUILTIN_SHAPES.get(opcode)

    @property
    def complete(self) -> bool:
        """True when loaded from a grammar file: then an unknown opcode is an error, not just unnamed."""
        return bool(self.shapes)


def _enum_tables(data) -> tuple[dict, set]:
    enums, with_parameters = {}, set()
    for kind in data["operand_kinds"]:
        if "enumerants" not in kind:
            continue
        table = {}
        for e in kind["enumerants"]:
            value = e["value"] if isinstance(e["value"], int) else int(e["value"], 0)
            table.setdefault(value, e["enumerant"])
            if e.get("parameters"):
                with_parameters.add(kind["kind"])
        enums[kind["kind"]] = table
    return enums, with_parameters


def _instruction_shape(operands, variable_kinds) -> Shape:
    """Minimum and maximum word counts and fixed id positions from the grammar's operand list."""
    min_words, fixed, offset = 1, True, 0
    result_type = result = None
    ids = []
    for operand in operands:
        kind, quantifier = operand["kind"], operand.get("quantifier", "")
        width = 2 if kind.startswith("Pair") else 1
        variable = quantifier != "" or kind in variable_kinds
        if quantifier == "":
            min_words += width
        if fixed:
            if kind == "IdResultType":
                result_type = offset
            elif kind == "IdResult":
                result = offset
            elif kind in _ID_KINDS and quantifier == "":
                ids.append(offset)
        if variable:
            fixed = False  # later operands have no fixed offset
        offset += width
    return Shape(min_words, min_words if fixed else None, result_type, result, tuple(ids))


@functools.lru_cache(maxsize=4)
def load_grammar(path: str | None) -> Grammar:
    if path is None:
        return Grammar({}, {})
    data = json.loads(Path(path).read_text())
    enums, with_parameters = _enum_tables(data)
    # Strings, context-dependent literals and enums that may carry parameters have no fixed size.
    variable_kinds = {"LiteralString", "LiteralContextDependentNumber", "LiteralSpecConstantOpInteger"}
    variable_kinds |= with_parameters
    opcodes, shapes = {}, {}
    for inst in data["instructions"]:
        opcodes.setdefault(inst["opcode"], inst["opname"])  # first name wins over aliases
        shapes.setdefault(inst["opcode"], _instruction_shape(inst.get("operands", []), variable_kinds))
    return Grammar(opcodes, enums, shapes)
