"""Library searches in a child process: a candidate that crashes, hangs or poisons the CUDA context cannot reach
the measuring process.

A failed library call can leave the CUDA context unusable for the rest of the process (on an H100, a
``cusparseLtMatmul`` with an algorithm id one past the valid range raised an internal error, and every later
CUDA call in the process failed with "illegal instruction"). So the candidate configurations of a library path
(``vkcoop.cuda.paths.LibraryPath``: cuSPARSELt through torch and through nvmath-python, cuBLAS through torch.mm
and nvmath-python, torch's semi-structured tensor) are tried in a child, and only those that ran and checked
correctly there are timed in the measuring process (``vkcoop.bench.measure.measure_path``).

How a candidate flows:

1. A run starts one :class:`SearchProcess` early: ``python -m vkcoop.cuda.search_child`` with the same
   interpreter, ``PYTHONPATH`` led by this package's root, stdin and stdout as a line protocol (JSON, one
   object a line, flushed). The child imports torch and makes its CUDA context while the parent prepares the
   inputs, and says ``ready``. Each search (:func:`staged_search`) sends it the path and the folder where the
   parent saved the case's exact operands, once per case (``GemmOperands.save``/``load``: a second, where
   rebuilding them took 8.5 s at 8192^3); the child loads them, builds the path and says ``searching``. Starting
   a child cost about 5 s on the H100 (Python, torch, a CUDA context), so one serves every case and path.
2. Each stage's candidates go to the child as one batch (:func:`encode`: a dataclass configuration as its
   fields, a string as itself). For each the child says ``start``, binds it, checks its output rows with
   ``vkcoop.gemm.check_output`` against the reference and, if they match, times a few runs
   (``vkcoop.gemm.path.check_and_time``, the step the measurement loop uses), then says ``result`` with the
   entry and what the path learnt (``search_info()``: cuSPARSELt's largest algorithm id, the library version).
3. A candidate that raises is recorded by the child in the library's own words ("alg 47: RuntimeError: CUDA
   error: internal error ..."), and the child exits, since its context may now be poisoned; a new child takes
   the remaining candidates (and the searches after them). A child that dies (a signal, an exit) or says nothing
   for ``timeout_s`` while on a candidate (the last ``start``) gets that candidate recorded as an error with the
   reason, is stopped, and the search goes on in a new child.
4. The path's ``next_candidates(state)`` decides the next stage from the record so far (:class:`SearchState`),
   until it offers nothing or the deadline has passed with at least one candidate ok (or GIVE_UP_AFTER
   failed: a library that fails everything must not cost a new child per candidate for minutes). The survivors (the
   fastest ``keep`` that were ok) are what the measuring process times. A quick search (``staged=False``)
   probes the first stage only; candidates the library refused before under the same versions are skipped.

Every entry of the record carries ``"where": "search process"``. ``progress(done, total, label)`` is called as
candidates start and finish.
"""
from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from .baselines import BlasConfig, CsltConfig

CHILD_MODULE = "vkcoop.cuda.search_child"
_PACKAGE_ROOT = Path(__file__).resolve().parents[2]
#: Seconds a child may spend on one candidate (bind, check, probe) before it is stopped.
DEFAULT_TIMEOUT_S = 120.0
#: Seconds a child may spend starting (imports, the CUDA context, the operands) before it is stopped.
SETUP_TIMEOUT_S = 600.0
#: Timed runs of a candidate in the child (after PROBE_WARMUP untimed ones): enough to rank them.
PROBE_ITERS, PROBE_WARMUP = 5, 2
WHERE = "search process"
_CONFIG_TYPES = {cls.__name__: cls for cls in (CsltConfig, BlasConfig)}
_MAX_STAGES = 16
#: Once the deadline has passed, a search stops when some candidate was ok, or when this many have failed: a
#: path whose every candidate fails (each failure costs a new child) must not run on for minutes.
GIVE_UP_AFTER = 3


def label_of(config) -> str:
    return config.label() if hasattr(config, "label") else str(config)


def what_of(config) -> str:
    """How a failure names its candidate: ``config.what()`` ("alg 47") where there is one, else the label."""
    return config.what() if hasattr(config, "what") else label_of(config)


def encode(config):
    """A configuration as JSON: a dataclass of this package as {"type", "fields"}, a string as itself."""
    if isinstance(config, str):
        return config
    if type(config).__name__ in _CONFIG_TYPES:
        return {"type": type(config).__name__, "fields": dataclasses.asdict(config)}
    raise TypeError(f"cannot send a {type(config).__name__} configuration to the search process")


def decode(value):
    if isinstance(value, str):
        return value
    return _CONFIG_TYPES[value["type"]](**value["fields"])


@dataclass
class SearchState:
    """What a path's ``next_candidates`` sees: the stage to offer (1, 2, ...), every entry so far, the
    configurations by label, and what the child reported (``max_alg_id``, ``library``...)."""
    problem: object
    stage: int = 0
    record: list = field(default_factory=list)
    configs: dict = field(default_factory=dict)
    info: dict = field(default_factory=dict)

    def ranked(self) -> list:
        """The configurations that were ok, fastest probe first (each label once)."""
        ok = sorted((e for e in self.record if e.get("status") == "ok" and e.get("config") in self.configs),
                    key=lambda e: e["median_ms"])
        return [self.configs[label] for label in dict.fromkeys(e["config"] for e in ok)]

    @property
    def any_ok(self) -> bool:
        return any(e.get("status") == "ok" for e in self.record)


def _entry(config, status: str, reason: str) -> dict:
    return {"config": label_of(config), "status": status, "reason": f"{what_of(config)}: {reason}",
            "where": WHERE}


def _budget_entry(left: int) -> dict:
    return {"status": "budget", "reason": f"{left} configuration(s) not tried: the time budget was spent",
            "where": WHERE}


def _spent(deadline) -> bool:
    return deadline is not None and time.monotonic() > deadline


class SearchProcess:
    """The child process of a run's library searches (see the module docstring): started once, early (``start``:
    the child imports torch while the parent prepares inputs), it takes one search after another (``begin``: a
    path and a case's operands, written to a folder once per case) and is replaced only after a candidate ended
    it. A context manager; ``close`` stops it and removes the operand folders."""

    def __init__(self, *, warmup_seconds: float, timeout_s: float = DEFAULT_TIMEOUT_S,
                 setup_timeout_s: float = SETUP_TIMEOUT_S, paths=()):
        self.warmup_seconds, self.timeout_s, self.setup_timeout_s = warmup_seconds, timeout_s, setup_timeout_s
        self.paths = tuple(paths)              # the paths it will search: the child prepares what they need first
        self.progress = None
        self.info: dict = {}
        self.done = self.total = 0
        self.any_ok, self.failures = False, 0
        self.started = 0                       # children started (a test and the progress line read it)
        self._proc = self._events = self._stderr = None
        self._ready = False                    # the running child said "ready" to its setup
        self._search: dict | None = None       # the search the parent is on
        self._searching = False                # the running child has it
        self._operands: tuple | None = None    # (the operands object, its folder)
        self._tmp = tempfile.TemporaryDirectory(prefix="vkcoop-search-")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # --- the child process ----------------------------------------------------------------------------------
    def start(self) -> None:
        """Start a child without waiting for it (no-op while one runs)."""
        if self._proc is not None:
            return
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([str(_PACKAGE_ROOT)] + [p for p in [env.get("PYTHONPATH")] if p])
        self._stderr = open(Path(self._tmp.name) / f"stderr-{time.monotonic_ns()}.txt", "w+")
        self._proc = subprocess.Popen([sys.executable, "-m", CHILD_MODULE], stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, stderr=self._stderr, env=env, text=True, bufsize=1)
        self._events = queue.Queue()
        self._ready = self._searching = False
        self.started += 1
        threading.Thread(target=_read_lines, args=(self._proc.stdout, self._events), daemon=True).start()
        self._send({"warmup_seconds": self.warmup_seconds, "probe_iters": PROBE_ITERS, "probe_warmup": PROBE_WARMUP,
                    "paths": list(self.paths)})

    def begin(self, path_name: str, operands, *, timeout_s: float | None = None, progress=None) -> None:
        """The next search: ``path_name`` on ``operands`` (saved for the child once per operands object)."""
        if self._operands is None or self._operands[0] is not operands:
            folder = Path(self._tmp.name) / f"operands-{time.monotonic_ns()}"
            operands.save(folder)
            if self._operands is not None:
                shutil.rmtree(self._operands[1], ignore_errors=True)   # one case's operands on disk at a time
            self._operands = (operands, folder)
        problem = operands.problem
        self._search = {"path": path_name, "seed": operands.seed, "operands_dir": str(self._operands[1]),
                        "problem": {"dtype": problem.dtype, "shape_class": problem.shape_class, "m": problem.m,
                                    "n": problem.n, "k": problem.k}}
        self._searching = False
        self.timeout_s = timeout_s or self.timeout_s
        self.progress, self.info = progress, {}
        self.done = self.total = 0
        self.any_ok, self.failures = False, 0

    def _ensure(self) -> str | None:
        """A child that is ready and on the current search; the reason it is not, or None."""
        self.start()
        if not self._ready:
            failure = self._await("ready", "to start")
            if failure is not None:
                return failure
            self._ready = True
        if not self._searching:
            if not self._send({"search": self._search}):
                return self._stop(f"the search process did not take the search: {self._tail()}")
            failure = self._await("searching", "to load the operands")
            if failure is not None:
                return failure
            self._searching = True
        return None

    def _await(self, expected: str, what: str) -> str | None:
        """Wait for the child's ``expected`` event (keeping what it reports); the reason it did not come, the child
        then stopped, or None."""
        event = self._next(self.setup_timeout_s)
        if event == "timeout":
            return self._stop(f"the search process took longer than {self.setup_timeout_s:.0f} s {what}")
        if event is None or event.get("event") != expected:
            return self._stop(f"the search process failed before its first candidate: {self._death()}")
        self.info.update(event.get("info") or {})
        return None

    def _send(self, message: dict) -> bool:
        try:
            self._proc.stdin.write(json.dumps(message) + "\n")
            self._proc.stdin.flush()
            return True
        except (BrokenPipeError, OSError, ValueError):
            return False

    def _next(self, timeout: float):
        """The next event (a dict), None when the child closed its output, or "timeout"."""
        try:
            line = self._events.get(timeout=timeout)
        except queue.Empty:
            return "timeout"
        if line is None:
            return None
        try:
            return json.loads(line)
        except json.JSONDecodeError:
            return {"event": "noise", "line": line}

    def _tail(self) -> str:
        if self._stderr is None:
            return ""
        self._stderr.flush()
        self._stderr.seek(0)
        lines = [line.strip() for line in self._stderr.read().splitlines() if line.strip()]
        return " | ".join(lines[-3:])[-400:]

    def _death(self) -> str:
        """Why the child ended: its signal or exit status, and the end of what it wrote to stderr."""
        try:
            code = self._proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            code = self._proc.wait()
        if code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            why = f"the search process died by {name}"
        else:
            why = f"the search process exited with status {code}"
        tail = self._tail()
        return why + (f" ({tail})" if tail else "")

    def _stop(self, reason: str | None = None):
        """Stop the child (it is ours: by its Popen) and forget it; returns ``reason``."""
        proc, self._proc = self._proc, None
        self._ready = self._searching = False
        if proc is not None:
            try:
                proc.stdin.close()
            except OSError:
                pass
            if proc.poll() is None:
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None
        return reason

    def close(self) -> None:
        self._stop()
        self._operands = None
        self._tmp.cleanup()

    # --- the candidates -------------------------------------------------------------------------------------
    @property
    def may_stop(self) -> bool:
        """Whether a spent deadline ends the search: some candidate was ok, or GIVE_UP_AFTER have failed."""
        return self.any_ok or self.failures >= GIVE_UP_AFTER

    def _say(self, label: str) -> None:
        if self.progress is not None:
            self.progress(self.done, self.total, label)

    def _record(self, entries: list, entry: dict) -> None:
        entries.append(entry)
        self.done += 1
        self.any_ok = self.any_ok or entry.get("status") == "ok"
        self.failures += entry.get("status") in ("error", "failed")
        self._say(entry.get("config", "") + " (search process)")

    def probe(self, candidates: list, deadline: float | None = None) -> list[dict]:
        """Try ``candidates`` in order in the child (a new one after each crash); one entry each (or a budget
        entry for those left when ``deadline`` passed with some candidate ok)."""
        pending, entries, stalled = list(candidates), [], 0
        self.total += len(pending)
        while pending:
            if self._proc is None or not self._searching:
                if self._proc is None and _spent(deadline) and self.may_stop:
                    entries.append(_budget_entry(len(pending)))
                    break
                failure = self._ensure()
                if failure is not None:
                    for config in pending:
                        self._record(entries, _entry(config, "error", failure))
                    break
            recorded = len(entries)
            self._batch(pending, entries, deadline)
            stalled = stalled + 1 if self._proc is None and len(entries) == recorded else 0
            if stalled == 2 and pending:   # two children in a row ended without settling a candidate
                for config in pending:
                    self._record(entries, _entry(config, "error", "the search process ended before trying it"))
                break
        return entries

    def _batch(self, pending: list, entries: list, deadline) -> None:
        """Send ``pending`` to the running child and consume its events; pops each candidate it settles."""
        remaining = None if deadline is None else deadline - time.monotonic()
        if not self._send({"candidates": [encode(c) for c in pending], "remaining_s": remaining,
                           "may_stop": self.may_stop}):
            self._stop()
            return
        current = None
        while True:   # until the child says "done" (or ends, or stops answering)
            event = self._next(self.timeout_s)
            if event == "timeout":
                self._proc.kill()
                self._stop()
                if current is None and not pending:
                    return
                blamed = current if current is not None else pending[0]
                pending.remove(blamed)
                self._record(entries, _entry(blamed, "error", f"no answer within {self.timeout_s:.0f} s (the "
                                             "search process was stopped)"))
                return
            if event is None:   # the child ended: after an error it reported (then current is None), or died
                death = self._death()
                self._stop()
                if current is not None:
                    pending.remove(current)
                    self._record(entries, _entry(current, "error", f"{death} while running it"))
                return
            kind = event.get("event")
            if kind == "start":
                current = next((c for c in pending if label_of(c) == event.get("label")), pending[0])
                self._say(f"{label_of(current)} (search process, running)")
            elif kind == "result":
                self.info.update(event.get("info") or {})
                config = current if current is not None else pending[0]
                pending.remove(config)
                current = None
                self._record(entries, {"config": label_of(config), **event["entry"], "where": WHERE})
            elif kind == "budget":
                entries.append(_budget_entry(len(pending)))
                pending.clear()
            elif kind == "done":
                return


def _read_lines(stream, events: queue.Queue) -> None:
    try:
        for line in stream:
            events.put(line)
    except (OSError, ValueError):
        pass
    events.put(None)


def _refused_entry(refused: dict) -> dict:
    sample = "; ".join(f"{label}: {reason}" for label, reason in list(refused.items())[:2])
    return {"status": "skipped", "reason": f"{len(refused)} candidate(s) not tried: refused under these library "
            f"versions before ({sample})"[:600], "where": WHERE}


def staged_search(path, operands, configs, *, deadline: float | None = None, progress=None,
                  timeout_s: float | None = None, process: SearchProcess | None = None, staged: bool = True,
                  refused: dict | None = None) -> SearchState:
    """Probe ``configs`` and then, with ``staged``, each stage ``path.next_candidates(state)`` offers (labels
    already tried are skipped), in ``process`` (a run's :class:`SearchProcess`; a private one without); the
    deadline stops the stages once some candidate was ok or :data:`GIVE_UP_AFTER` have failed. ``refused``
    (label -> reason): candidates a library refused before under the same versions, never tried again."""
    state = SearchState(operands.problem)
    refused = dict(refused or {})
    with contextlib.ExitStack() as stack:
        if process is None:
            process = stack.enter_context(SearchProcess(warmup_seconds=path.warmup_seconds))
        process.begin(path.name, operands, timeout_s=timeout_s or DEFAULT_TIMEOUT_S, progress=progress)
        candidates, skipped = list(configs), {}
        while candidates and state.stage < _MAX_STAGES:
            fresh = list({label_of(c): c for c in candidates if label_of(c) not in state.configs}.values())
            skipped.update((label_of(c), refused[label_of(c)]) for c in fresh if label_of(c) in refused)
            fresh = [c for c in fresh if label_of(c) not in refused]
            if fresh and _spent(deadline) and process.may_stop:
                state.record.append(_budget_entry(len(fresh)))
                break
            state.configs.update((label_of(c), c) for c in fresh)
            if fresh:
                state.record += process.probe(fresh, deadline)
                state.info.update(process.info)
                if state.record[-1].get("status") == "budget":   # the time is up: no further stages
                    break
            state.stage += 1
            candidates = list(path.next_candidates(state)) if staged else []
        if skipped:
            state.record.append(_refused_entry(skipped))
    return state
