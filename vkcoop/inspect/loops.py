"""The loops of a disassembled kernel, and what one iteration of each issues.

A kernel's whole-code counts (:func:`vkcoop.inspect.sass.instruction_mix`) mix the prologue, the epilogue and
every copy of a loop that the compiler made (the driver emits an unrolled aligned K loop beside a clamped edge
one). What bounds speed is the loop that runs: its instructions per MMA tell whether the tensor pipe could be
kept busy by one warp's issue alone, and its loads, barriers and MUFU count what each iteration waits on.

A loop here is the span from a backward branch's target to the branch (``BRA`` to a lower address); back edges
to one target make one loop that ends at the last of them (a ``continue``). The counts are static: one pass over
the body, with every path through it counted once.
"""
from __future__ import annotations

from dataclasses import dataclass

from .sass import InstructionMix, KernelListing, instruction_mix

#: FP32 ALU opcodes that softmax-like code issues between MMAs (counted apart in the loop table).
FP32_ALU_OPCODES = ("FADD", "FMUL", "FFMA", "FMNMX", "FSEL", "FSETP")


@dataclass
class Loop:
    start: int            # address of the loop's first instruction (the backward branch's target)
    end: int              # address of its last backward branch
    mix: InstructionMix   # one pass over the body
    inner: int = 0        # loops wholly inside this one

    @property
    def mma(self) -> int:
        return sum(self.mix.mma.values())

    @property
    def instructions_per_mma(self) -> float | None:
        return round(self.mix.total / self.mma, 2) if self.mma else None

    def fp32_alu(self) -> int:
        return sum(self.mix.opcodes.get(op, 0) for op in FP32_ALU_OPCODES)

    def to_dict(self) -> dict:
        return {"start": f"{self.start:#x}", "end": f"{self.end:#x}",
                "instructions": self.mix.total, "mma": self.mma, "instructions_per_mma": self.instructions_per_mma,
                "fp32_alu": self.fp32_alu(), "inner_loops": self.inner, "mix": self.mix.to_dict()}


def find_loops(kernel: KernelListing) -> list[Loop]:
    """The kernel's loops in address order (see the module docstring)."""
    last_branch: dict[int, int] = {}    # target address -> index of the last backward branch to it
    for index, target in kernel.branch_targets().items():
        if target < kernel.addresses[index]:
            last_branch[target] = max(last_branch.get(target, index), index)
    position = {address: i for i, address in enumerate(kernel.addresses)}
    spans = sorted((position[target], last) for target, last in last_branch.items() if target in position)
    return [Loop(kernel.addresses[first], kernel.addresses[last],
                 instruction_mix(kernel.mnemonics[first:last + 1]),
                 sum(1 for f, l in spans if first <= f and l <= last and (f, l) != (first, last)))
            for first, last in spans]


def mma_loops(loops: list[Loop]) -> list[Loop]:
    """The loops that issue MMAs and hold no loop that does: the ones whose iterations do the math."""
    with_mma = [loop for loop in loops if loop.mma]
    return [loop for loop in with_mma
            if not any(other is not loop and loop.start <= other.start and other.end <= loop.end
                       for other in with_mma)]
