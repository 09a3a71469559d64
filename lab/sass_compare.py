#!/usr/bin/env python3
"""Whether a change to a kernel source changed its machine code: the nvdisasm listings of two cubins, function by
function, instruction for instruction.

    nvcc -gencode=arch=compute_90a,code=sm_90a -cubin -O3 -std=c++17 --split-compile=0 \
        -I vkcoop/cuda/kernels -o after.cubin vkcoop/cuda/kernels/wgmma_sp.cu     # and before.cubin likewise
    python -m lab.sass_compare before.cubin after.cubin [--prefix wgmma_sp_f16_]

A function is ``identical`` when its instructions are the same text (the listing's labels, which nvdisasm numbers
across the whole file, named by their order within the function), ``renamed`` when they are the same but for a
consistent renaming of registers (R, UR, P, UP, B), and ``differs`` otherwise. Exit 0 when every function of the
first cubin (of the prefix) is identical or renamed in the second, 1 when one differs or is missing, 2 on bad input
(a missing file, no nvdisasm).
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

_SECTION = re.compile(r"^\s*\.section\s+\.text\.([\w$.]+),", re.M)
_ADDRESS = re.compile(r"/\*[0-9a-f]{4,}\*/")
_LABEL = re.compile(r"\.L_x_\d+")
_REGISTER = re.compile(r"\b(UR|UP|R|P|B)(\d+)\b")


def function_listings(text: str) -> dict[str, list[str]]:
    """{function: its instructions}, each line without its address, labels named by first use in the function."""
    starts = [(m.start(), m.group(1)) for m in _SECTION.finditer(text)]
    out = {}
    for (start, name), (end, _) in zip(starts, starts[1:] + [(len(text), "")]):
        labels: dict[str, str] = {}
        lines = []
        for line in text[start:end].splitlines():
            if not _ADDRESS.search(line):
                continue
            line = " ".join(_ADDRESS.sub("", line).split())
            lines.append(_LABEL.sub(lambda m: labels.setdefault(m.group(0), f".L{len(labels)}"), line))
        out[name] = lines
    return out


def renamed(lines: list[str]) -> list[str]:
    """The instructions with every register named by its kind and order of first appearance."""
    names: dict[tuple[str, str], str] = {}
    counts: dict[str, int] = {}

    def name(match):
        key = match.groups()
        if key not in names:
            names[key] = f"{key[0]}#{counts.setdefault(key[0], 0)}"
            counts[key[0]] += 1
        return names[key]
    return [_REGISTER.sub(name, line) for line in lines]


def compare(before: dict[str, list[str]], after: dict[str, list[str]], prefix: str = "") -> dict[str, list[str]]:
    """Each function of ``before`` (of ``prefix``) as identical, renamed, differs or missing in ``after``."""
    verdicts: dict[str, list[str]] = {"identical": [], "renamed": [], "differs": [], "missing": []}
    for name, lines in before.items():
        if not name.startswith(prefix):
            continue
        if name not in after:
            verdicts["missing"].append(name)
        elif after[name] == lines:
            verdicts["identical"].append(name)
        elif renamed(after[name]) == renamed(lines):
            verdicts["renamed"].append(name)
        else:
            verdicts["differs"].append(name)
    return verdicts


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    parser.add_argument("--prefix", default="", help="compare only the functions whose names start so")
    args = parser.parse_args(argv)
    for path in (args.before, args.after):
        if not path.is_file():
            parser.error(f"no cubin {path}")
    from vkcoop.inspect.sass import DisassemblerMissing, DisassemblyError, disassemble
    try:
        before, after = (function_listings(disassemble(path.read_bytes())) for path in (args.before, args.after))
    except (DisassemblerMissing, DisassemblyError) as error:
        print(f"sass_compare: {error}", file=sys.stderr)
        return 2
    verdicts = compare(before, after, args.prefix)
    for kind in ("differs", "missing", "renamed"):
        for name in verdicts[kind]:
            print(f"{kind:9} {name}")
    total = sum(len(names) for names in verdicts.values())
    print(f"{total} functions: " + ", ".join(f"{len(names)} {kind}" for kind, names in verdicts.items()))
    return 1 if verdicts["differs"] or verdicts["missing"] else 0


if __name__ == "__main__":
    sys.exit(main())
