"""What a fuzz run reports: per-target statistics, mismatches with their shrunk repros, and the printer."""
from __future__ import annotations

import dataclasses

from .cases import FuzzCase


@dataclasses.dataclass
class Mismatch:
    target: str
    seed: int
    case: FuzzCase
    minimal: FuzzCase
    shrink_steps: int
    shrink_evaluations: int
    glsl: str
    python: str
    reference_view: str

    def to_json(self) -> dict:
        return {"target": self.target, "seed": self.seed, "case_id": self.case.case_id,
                "variant": self.minimal.variant.to_json(), "original_variant": self.case.variant.to_json(),
                "shrink_steps": self.shrink_steps, "shrink_evaluations": self.shrink_evaluations,
                "glsl": self.glsl, "python": self.python, "reference_view": self.reference_view}

    def describe(self) -> str:
        return (f"[{self.target}] case {self.seed}:{self.case.case_id} ({self.case.variant.label}), shrunk in "
                f"{self.shrink_steps} steps to {self.minimal.variant.label}:\n{self.glsl}\n{self.reference_view}")


@dataclasses.dataclass
class TargetStats:
    name: str
    cases: int = 0
    mismatches: int = 0
    seconds: float = 0.0            # dispatch + readback + decode + compare
    compile_seconds: float = 0.0    # pipeline creation (excluded from the rates)
    gpu_seconds: float = 0.0
    variants: int = 0
    skipped: str | None = None
    device: str | None = None

    def to_json(self) -> dict:
        data = dataclasses.asdict(self)
        data["cases_per_s"] = round(self.cases / self.seconds, 1) if self.seconds else None
        return data


@dataclasses.dataclass
class Report:
    seed: int
    cases: int
    target: str
    targets: dict
    mismatches: list
    mismatch_counts: dict
    generation_seconds: float = 0.0     # generating cases and the reference (worker processes)
    run_seconds: float = 0.0            # wall time of the whole loop, pipeline compiles excluded
    total_seconds: float = 0.0          # everything, compiles and shrinking included
    variants: list = dataclasses.field(default_factory=list)
    mismatch_variants: dict = dataclasses.field(default_factory=dict)   # {target: {variant label: count}}
    explanations: dict = dataclasses.field(default_factory=dict)        # {target: {model name: count}}
    mismatch_case_ids: dict = dataclasses.field(default_factory=dict)   # {target: [case ids]}
    tag_totals: dict = dataclasses.field(default_factory=dict)          # {tag: cases with it (hw runs)}
    interrupted: bool = False           # Ctrl-C stopped the loop: what ran so far is reported

    @property
    def mismatch_count(self) -> int:
        return sum(self.mismatch_counts.values())

    @property
    def ok(self) -> bool:
        return self.mismatch_count == 0 and any(s.skipped is None for s in self.targets.values())

    @property
    def cases_per_s(self) -> float | None:
        return round(self.cases / self.run_seconds, 1) if self.run_seconds else None

    def to_json(self) -> dict:
        return {"seed": self.seed, "cases": self.cases, "target": self.target, "ok": self.ok,
                "interrupted": self.interrupted,
                "mismatch_count": self.mismatch_count, "mismatch_counts": self.mismatch_counts,
                "cases_per_s": self.cases_per_s, "generation_seconds": round(self.generation_seconds, 3),
                "run_seconds": round(self.run_seconds, 3), "total_seconds": round(self.total_seconds, 3),
                "targets": {k: v.to_json() for k, v in self.targets.items()},
                "variants": [v.to_json() for v in self.variants],
                "mismatch_variants": self.mismatch_variants, "explanations": self.explanations,
                "tag_totals": self.tag_totals, "mismatch_case_ids": self.mismatch_case_ids,
                "mismatches": [m.to_json() for m in self.mismatches]}


def print_report(report: Report, console=None) -> None:
    """A human summary: per-target table, the rate, and every reported mismatch's repro."""
    from rich.console import Console
    from rich.table import Table
    console = console or Console()
    stopped = " (interrupted: partial results)" if report.interrupted else ""
    table = Table(title=f"vkcoop fuzz: {report.cases} cases, seed {report.seed}, target {report.target}{stopped}")
    for column in ("target", "device", "cases", "mismatches", "compare s", "compile s", "GPU s", "status"):
        table.add_column(column)
    for s in report.targets.values():
        table.add_row(s.name, s.device or "-", str(s.cases), str(s.mismatches), f"{s.seconds:.2f}",
                      f"{s.compile_seconds:.2f}", f"{s.gpu_seconds:.3f}", "skipped: " + s.skipped if s.skipped else
                      ("ok" if s.mismatches == 0 else "MISMATCH"))
    console.print(table)
    if all(s.skipped for s in report.targets.values()):
        return   # nothing ran: no rate to speak of
    console.print(f"{report.cases} cases in {report.run_seconds:.2f} s without pipeline compiles "
                  f"({report.cases_per_s} cases/s; generation + reference {report.generation_seconds:.2f} s); "
                  f"total {report.total_seconds:.2f} s")
    for name, variants in report.mismatch_variants.items():
        for label, count in sorted(variants.items(), key=lambda item: -item[1]):
            console.print(f"  {name}: {count} mismatching cases in variant {label}", markup=False, highlight=False)
    for name, models in report.explanations.items():
        for model, count in models.items():
            console.print(f"  {name}: {count} mismatching cases explained by: {model}", markup=False, highlight=False)
    for tag, total in report.tag_totals.items():
        console.print(f"  cases with '{tag}': {total}", markup=False, highlight=False)
    for m in report.mismatches:
        console.print(m.describe(), markup=False, highlight=False)
