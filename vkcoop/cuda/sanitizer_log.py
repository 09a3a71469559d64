"""Reading a compute-sanitizer report: its summary and each record, attributed to the kernel it names.

Every line the tool writes starts with ``=========``; a record starts one space after it (``Invalid __global__ write
of size 4 bytes``, ``Error: Race reported between ...``, ``Barrier error detected. ...``, ``Uninitialized
__global__ memory read ...``, ``Program hit CUDA_ERROR_... on CUDA API call to ...``) and continues on indented lines
(``at KERNEL+0x70``, ``by thread (32,0,0) in block (0,0,0)``, the host backtrace). memcheck, synccheck and initcheck
end with ``ERROR SUMMARY: N errors``; racecheck with ``RACECHECK SUMMARY: N hazards displayed (E errors, W
warnings)``. The summary's count is the count (records stop at ``--print-limit``); a report without its summary did
not finish (the program or the tool died), which is a problem of its own, not a clean run.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

PREFIX = "========="
_ERROR_SUMMARY = re.compile(r"ERROR SUMMARY:\s*(\d+) errors?")
_RACE_SUMMARY = re.compile(r"RACECHECK SUMMARY:\s*(\d+) hazards? displayed \((\d+) errors?, (\d+) warnings?\)")
_LEAK_SUMMARY = re.compile(r"LEAK SUMMARY:")
#: Records that say the tool itself did not complete its check, whatever the kernels did.
_RUN_PROBLEM = re.compile(r"process didn't terminate|Internal Sanitizer Error|No attachable process|"
                          r"terminated before first instrumented|Error: .*(?:timeout|timed out)", re.IGNORECASE)
#: The program's own exit status was not 0 (a kernel the tool stopped makes the next CUDA call fail): the tool's
#: report is still whole; the run's exit code says the rest.
_PROGRAM_FAILED = re.compile(r"Target application returned an error", re.IGNORECASE)
_FUNCTION = re.compile(r"(?:\bat|\bin)\s+(?:0x[0-9a-f]+\s+in\s+)?(?:[\w./-]+:\d+:)?([A-Za-z_]\w*)(?:\(|\+0x)")


@dataclass
class Record:
    """One thing the tool reported."""
    severity: str            # "error" or "warning"
    kind: str                # its first line, without addresses
    kernel: str              # the kernel it names ("" where none)
    text: str                # every line of it

    def to_dict(self) -> dict:
        return {"severity": self.severity, "kind": self.kind, "kernel": self.kernel, "text": self.text[:2000]}


@dataclass
class SanitizerLog:
    tool: str
    errors: int | None = None      # the summary's count (None: no summary)
    warnings: int = 0              # racecheck's warnings
    hazards: int | None = None     # racecheck's hazards displayed
    records: list = field(default_factory=list)
    run_problems: list = field(default_factory=list)
    program_failed: bool = False

    @property
    def finished(self) -> bool:
        return self.errors is not None and not self.run_problems

    @property
    def clean(self) -> bool:
        """The report finished and counts nothing: 0 errors (and for racecheck 0 warnings)."""
        return self.finished and self.errors == 0 and self.warnings == 0

    def per_kernel(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for record in self.records:
            counts[record.kernel or "(no kernel named)"] = counts.get(record.kernel or "(no kernel named)", 0) + 1
        return counts

    def findings_for(self, kernel: str) -> list[Record]:
        return [r for r in self.records if r.kernel == kernel]


def _strip(line: str) -> str | None:
    """The text after the tool's prefix (None for the program's own lines)."""
    return line[len(PREFIX):] if line.startswith(PREFIX) else None


def _blocks(text: str) -> list[list[str]]:
    """The tool's top-level lines, each with its indented continuation lines."""
    blocks: list[list[str]] = []
    for line in text.splitlines():
        rest = _strip(line.rstrip())
        if rest is None or not rest.strip():
            continue
        if rest.startswith(" ") and not rest.startswith("  "):
            blocks.append([rest.strip()])
        elif blocks:
            blocks[-1].append(rest.strip())
    return blocks


def _kernel_of(lines: list[str], kernels) -> str:
    joined = "\n".join(lines)
    for name in kernels:
        if re.search(rf"\b{re.escape(name)}\b", joined):
            return name
    found = _FUNCTION.search(joined)
    return found.group(1) if found else ""


def parse_log(text: str, tool: str, kernels=()) -> SanitizerLog:
    """The report of ``tool`` in ``text``; records are attributed to the first of ``kernels`` they name (longest
    names first), else to the function an ``at``/``in`` line names."""
    log = SanitizerLog(tool)
    kernels = sorted(kernels, key=len, reverse=True)
    for lines in _blocks(text):
        head = lines[0]
        if head.startswith("COMPUTE-SANITIZER") or _LEAK_SUMMARY.match(head):
            continue
        if summary := _ERROR_SUMMARY.match(head):   # a tool may print both summaries: the larger count holds
            log.errors = max(log.errors or 0, int(summary.group(1)))
            continue
        if summary := _RACE_SUMMARY.match(head):
            hazards, errors, warnings = (int(g) for g in summary.groups())
            log.hazards, log.errors, log.warnings = hazards, max(log.errors or 0, errors), warnings
            continue
        if _PROGRAM_FAILED.search(head):
            log.program_failed = True
            continue
        if _RUN_PROBLEM.search(head):
            log.run_problems.append("\n".join(lines))
            continue
        severity = "warning" if head.lower().startswith("warning") else "error"
        kind = re.sub(r"0x[0-9a-fA-F]+", "0x...", head)
        log.records.append(Record(severity, kind, _kernel_of(lines, kernels), "\n".join(lines)))
    return log
