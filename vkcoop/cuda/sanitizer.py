"""compute-sanitizer over the hand-written CUDA kernels (``vkcoop sanitize cuda``).

Each tool (memcheck, racecheck, synccheck, initcheck) runs :mod:`vkcoop.cuda.sanitize_child` over the job list of
:mod:`vkcoop.cuda.sanitize_jobs` (every shipped configuration and the peak kernels) in its own process, the four
at once on one GPU; each writes its report to ``<logs>/<tool>.log`` and the child its per-job results to
``<logs>/<tool>.jobs.jsonl``. A tool's run is clean when its report finished with 0 errors (racecheck: 0 errors and 0
warnings), every job ran, and every result was right. Options a tool takes beyond its defaults are passed where
this compute-sanitizer lists them in ``--help``: memcheck pads each allocation (an access just past a buffer lands
in the padding, not in a neighbour), racecheck follows ``cp.async`` copies, and the checks of bulk (TMA) copies and
of warpgroup MMAs are asked for. docs/sanitizers.md says what each tool covers and cannot.

``find_compute_sanitizer()`` looks at ``$COMPUTE_SANITIZER``, ``PATH``, ``$CUDA_HOME``/``$CUDA_PATH``, beside nvcc
and ``/usr/local/cuda``; :func:`availability` says why the pass cannot run here.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import Error
from . import build
from .build import find_nvcc
from .sanitize_jobs import job_label, kernel_name
from .sanitizer_log import SanitizerLog, parse_log

TOOLS = ("memcheck", "racecheck", "synccheck", "initcheck")
ENV = "COMPUTE_SANITIZER"
#: Per tool, (option, value) passed where ``--help`` lists the option.
TOOL_OPTIONS = {
    "memcheck": (("--padding", "256"),),
    "racecheck": (("--racecheck-memcpy-async", "yes"),),
    "synccheck": (),
    "initcheck": (),
}
#: Every tool gets these where listed: the checks of bulk (TMA) copies and of warpgroup MMAs belong to whichever
#: tools implement them, and a tool ignores another's options.
COMMON_OPTIONS = (("--print-limit", "1000"), ("--check-bulk-copy", "yes"), ("--check-warpgroup-mma", "yes"))
DEFAULT_TIMEOUT_S = 540.0


class SanitizerUnavailableError(Error):
    """compute-sanitizer, the CUDA driver or an sm_90 GPU is missing here."""


def find_compute_sanitizer() -> str | None:
    """The compute-sanitizer to run, or None."""
    named = os.environ.get(ENV)
    if named:
        return named if Path(named).is_file() else None
    found = shutil.which("compute-sanitizer")
    if found:
        return found
    nvcc = find_nvcc()
    roots = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"),
             str(Path(nvcc).resolve().parent.parent) if nvcc else None, "/usr/local/cuda"]
    for root in roots:
        if root and (Path(root) / "bin" / "compute-sanitizer").is_file():
            return str(Path(root) / "bin" / "compute-sanitizer")
    return None


def availability() -> tuple[bool, str]:
    """(True, the tool and the GPU) where the pass can run, else (False, why not)."""
    tool = find_compute_sanitizer()
    if tool is None:
        return False, (f"compute-sanitizer not found (${ENV}, PATH, $CUDA_HOME/bin, beside nvcc, /usr/local/cuda/bin)")
    from . import driver
    try:
        driver.ensure_context()
        capability = driver.compute_capability()
        name = driver.device_name()
    except driver.CudaError as error:
        return False, f"no CUDA GPU: {error}"
    if capability != (9, 0):
        return False, f"the kernels are built for sm_90a; {name} is sm_{capability[0]}{capability[1]}"
    return True, f"{tool} on {name}"


def tool_version(tool: str) -> str:
    proc = subprocess.run([tool, "--version"], capture_output=True, text=True, timeout=60)
    found = re.search(r"Version\s+(\S+)", proc.stdout)
    return found.group(1) if found else proc.stdout.strip().splitlines()[-1:][0] if proc.stdout.strip() else "?"


def listed_options(tool: str) -> set[str]:
    """The options this compute-sanitizer's ``--help`` names."""
    proc = subprocess.run([tool, "--help"], capture_output=True, text=True, timeout=60)
    return set(re.findall(r"(--[a-z][a-z0-9-]+)", proc.stdout + proc.stderr))


def tool_command(executable: str, tool: str, log: Path, jobs_file: Path, listed: set[str]) -> list[str]:
    """The command line of one tool over the child and its job list."""
    options = [item for option, value in COMMON_OPTIONS + TOOL_OPTIONS[tool] if option in listed
               for item in (option, value)]
    return [executable, "--tool", tool, *options, "--log-file", str(log), sys.executable, "-m",
            "vkcoop.cuda.sanitize_child", str(jobs_file)]


@dataclass
class ToolRun:
    """One tool over the job list."""
    tool: str
    command: list
    jobs: list                      # the jobs given
    results: list = field(default_factory=list)   # the child's line per job that ran
    log: SanitizerLog | None = None
    exit_code: int | None = None
    seconds: float = 0.0
    timed_out: bool = False
    log_path: str = ""
    stderr: str = ""

    def statuses(self) -> dict[str, int]:
        counts = {"ok": 0, "ran": 0, "failed": 0, "error": 0}
        for result in self.results:
            counts[result["status"]] = counts.get(result["status"], 0) + 1
        counts["not run"] = len(self.jobs) - len(self.results)
        return counts

    @property
    def completed(self) -> bool:
        counts = self.statuses()
        return self.exit_code == 0 and not self.timed_out and not (counts["error"] or counts["not run"])

    @property
    def ok(self) -> bool:
        return self.completed and self.log is not None and self.log.clean and not self.statuses()["failed"]

    def kernels(self) -> list[str]:
        return sorted({r["kernel"] for r in self.results})

    def line(self) -> str:
        counts, log = self.statuses(), self.log
        errors = "no summary" if log is None or log.errors is None else f"{log.errors} errors"
        if log is not None and log.hazards is not None:
            errors += f", {log.warnings} warnings ({log.hazards} hazards)"
        problems = [f"{counts[k]} {k}" for k in ("failed", "error", "not run") if counts[k]]
        problems += ["timed out"] if self.timed_out else []
        problems += [f"exit {self.exit_code}"] if self.exit_code not in (0, None) else []
        return (f"{self.tool}: {len(self.kernels())} kernels in {len(self.results)} of {len(self.jobs)} launches; "
                f"{errors}" + (f"; {', '.join(problems)}" if problems else "") + ("" if self.ok else " - NOT CLEAN"))

    def to_dict(self) -> dict:
        log = self.log
        return {"tool": self.tool, "ok": self.ok, "summary": self.line(), "command": " ".join(self.command),
                "exit_code": self.exit_code, "seconds": round(self.seconds, 1), "timed_out": self.timed_out,
                "log": self.log_path, "errors": None if log is None else log.errors,
                "warnings": None if log is None else log.warnings, "hazards": None if log is None else log.hazards,
                "run_problems": [] if log is None else log.run_problems,
                "program_failed": bool(log is not None and log.program_failed), "jobs": self.statuses(),
                "kernels": len(self.kernels()), "per_kernel_findings": {} if log is None else log.per_kernel(),
                "records": [] if log is None else [r.to_dict() for r in log.records[:50]],
                "results": self.results, "stderr": self.stderr[-4000:]}


#: The kernel source (kernels/NAME.cu) each kind of job loads.
JOB_SOURCES = {"mma.sp": "mma_sp", "mma_sp_peak": "mma_sp", "wgmma.sp": "wgmma_sp", "mma.sync": "mma_dense",
               "peak": "peak", "stream_read": "peak"}


def prebuild(jobs: list[dict]) -> None:
    """Build (or find in the cubin cache) every module the jobs load, once, before the tools start: each tool's
    child then loads the cached cubin instead of compiling it again at the same time (mma_sp.cu alone takes a
    minute of nvcc)."""
    for name in sorted({JOB_SOURCES[job["kernel"]] for job in jobs if job["kernel"] in JOB_SOURCES}):
        build.compile_kernel(name)
    for source in sorted({job["source"] for job in jobs if job["kernel"] == "raw"}):
        build.compile_file(Path(source))


def run_tool(executable: str, tool: str, jobs: list[dict], folder: Path, listed: set[str],
             timeout_s: float = DEFAULT_TIMEOUT_S) -> ToolRun:
    """``tool`` over ``jobs``: its report in ``folder/<tool>.log``, the child's results in
    ``folder/<tool>.jobs.jsonl``."""
    prebuild(jobs)
    folder.mkdir(parents=True, exist_ok=True)
    jobs_file, log_path = folder / f"{tool}.jobs.json", folder / f"{tool}.log"
    jobs_file.write_text(json.dumps(jobs))
    log_path.unlink(missing_ok=True)
    run = ToolRun(tool, tool_command(executable, tool, log_path, jobs_file, listed), jobs, log_path=str(log_path))
    started = time.monotonic()
    try:
        proc = subprocess.run(run.command, capture_output=True, text=True, timeout=timeout_s, env=_child_env())
        run.exit_code, stdout, run.stderr = proc.returncode, proc.stdout, proc.stderr
    except subprocess.TimeoutExpired as expired:
        run.timed_out = True
        stdout = expired.stdout.decode(errors="replace") if isinstance(expired.stdout, bytes) else expired.stdout or ""
    run.seconds = time.monotonic() - started
    run.results = [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]
    (folder / f"{tool}.jobs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in run.results))
    text = log_path.read_text(errors="replace") if log_path.is_file() else ""
    run.log = parse_log(text, tool, {kernel_name(j) if j["kernel"] != "raw" else j["name"] for j in jobs})
    return run


def _child_env() -> dict:
    """This environment with vkcoop's checkout ahead on PYTHONPATH (the child imports it)."""
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
    return env


@dataclass
class SanitizerReport:
    device: str
    version: str
    runs: list

    @property
    def ok(self) -> bool:
        return bool(self.runs) and all(run.ok for run in self.runs)

    def lines(self) -> list[str]:
        return [run.line() for run in self.runs]

    def to_dict(self) -> dict:
        labels = sorted({r["label"] for run in self.runs for r in run.results})
        return {"tool": "compute-sanitizer", "version": self.version, "device": self.device, "ok": self.ok,
                "summary": self.lines(), "configurations": len(labels),
                "kernels": len({label.split(" ")[0] for label in labels}),
                "tools": {run.tool: run.to_dict() for run in self.runs}}


def run_pass(tools=TOOLS, jobs: list[dict] | None = None, folder: Path = Path("sanitizer-logs"), *,
             parallel: int = len(TOOLS), timeout_s: float = DEFAULT_TIMEOUT_S, progress=None) -> SanitizerReport:
    """Each of ``tools`` over ``jobs`` (default: every shipped job), ``parallel`` tools at a time; the reports go to
    ``folder``. SanitizerUnavailableError where the tool or an sm_90 GPU is missing."""
    from .sanitize_jobs import shipped_jobs
    ok, why = availability()
    if not ok:
        raise SanitizerUnavailableError(why)
    executable, jobs = find_compute_sanitizer(), shipped_jobs() if jobs is None else jobs
    listed, progress = listed_options(executable), progress or (lambda text: None)
    progress("building the kernels (or finding them in the cubin cache)")
    prebuild(jobs)

    def one(tool: str) -> ToolRun:
        progress(f"{tool}: {len(jobs)} launches")
        run = run_tool(executable, tool, jobs, Path(folder), listed, timeout_s)
        progress(run.line())
        return run

    with ThreadPoolExecutor(max_workers=max(1, parallel)) as pool:
        runs = list(pool.map(one, tools))
    return SanitizerReport(why.split(" on ", 1)[1], tool_version(executable), runs)


__all__ = ["TOOLS", "SanitizerReport", "SanitizerUnavailableError", "ToolRun", "availability",
           "find_compute_sanitizer", "job_label", "run_pass", "run_tool", "tool_command"]
