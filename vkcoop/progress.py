"""How a long command (``bench sparse``, ``bench attention``, ``run``, ``fuzz``, ``shaders check``) shows where it
is, on a terminal and through a pipe.

* ``bar`` (a terminal's default): a rich progress bar with the elapsed time and the time left, and a second line
  for the step in hand (the configuration or search candidate being tried).
* ``lines`` (the default when standard error is not a terminal: CI, ``| tee``, a notebook): a line on standard
  error per finished unit (a bench path, a sample), with the count, the elapsed time, the estimate of the time
  left and what the caller says of it (the case, the path, its status, its figure). Where units come by the
  thousand (fuzz cases, shader variants) the caller asks for at most one line per ``line_every_s``, besides the
  first and the last. While a step runs long, a heartbeat line at least every :data:`HEARTBEAT_SECONDS` says what
  it is on.
* ``none``: nothing.
"""
from __future__ import annotations

import sys
import threading
import time

PROGRESS_MODES = ("auto", "bar", "lines", "none")
#: The longest a piped run stays silent while a step runs.
HEARTBEAT_SECONDS = 10.0


def progress_mode(value: str | bool) -> str:
    """A mode of :data:`PROGRESS_MODES` from what callers pass: a mode, or True (``auto``) / False (``none``)."""
    return {True: "auto", False: "none"}.get(value, value)


def resolve_mode(mode: str | bool, stream=None) -> str:
    """``auto``: ``bar`` on a terminal, else ``lines``."""
    mode = progress_mode(mode)
    if mode != "auto":
        return mode
    stream = stream or sys.stderr
    return "bar" if getattr(stream, "isatty", lambda: False)() else "lines"


def _clock(seconds: float) -> str:
    seconds = int(round(seconds))
    return f"{seconds // 60}:{seconds % 60:02d}"


class RunProgress:
    """Progress of ``total`` units (``finished`` once each), in one of :data:`PROGRESS_MODES`; a context
    manager. ``step(text)`` names what runs now, ``detail(text, done, total)`` the step's inner progress,
    ``note(text)`` is a line worth keeping (printed above a bar, or as a line). ``transient``: the bar goes when
    the work is done (the result's own table follows)."""

    def __init__(self, total: int, mode: str | bool = "auto", *, console=None, stream=None, title: str = "",
                 heartbeat_s: float = HEARTBEAT_SECONDS, line_every_s: float = 0.0, transient: bool = False):
        self.stream = stream or getattr(console, "file", None) or sys.stderr
        self.mode, self.total, self.title, self.console = resolve_mode(mode, self.stream), total, title, console
        self.heartbeat_s, self.line_every_s, self.transient = heartbeat_s, line_every_s, transient
        self.done, self.started = 0, time.monotonic()
        self._step, self._detail, self._said = "", "", self.started
        self._lock, self._stop = threading.Lock(), threading.Event()
        self._bar = self._task = self._detail_task = self._thread = None

    # --- the context ----------------------------------------------------------------------------------------
    def __enter__(self):
        if self.mode == "bar":
            from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn,
                                       TimeRemainingColumn)
            self._bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TimeElapsedColumn(), TextColumn("left"), TimeRemainingColumn(),
                                 console=self.console, transient=self.transient)
            self._bar.__enter__()
            self._task = self._bar.add_task(self.title, total=self.total)
            self._detail_task = self._bar.add_task("", total=1, visible=False)
        elif self.mode == "lines":
            self._thread = threading.Thread(target=self._heartbeat, name="vkcoop-heartbeat", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=1.0)
        if self._bar is not None:
            self._bar.__exit__(*exc)
        return False

    # --- what callers report --------------------------------------------------------------------------------
    def step(self, text: str) -> None:
        with self._lock:
            self._step, self._detail = text, ""
        if self._bar is not None:
            self._bar.update(self._task, description=text)
            self._bar.update(self._detail_task, visible=False)

    def detail(self, text: str, done: int | None = None, total: int | None = None) -> None:
        with self._lock:
            self._detail = text if done is None else f"{text} ({done}/{total})"
        if self._bar is not None:
            self._bar.update(self._detail_task, description=f"  {text}", completed=done or 0, total=total or 1,
                             visible=True)

    def note(self, text: str) -> None:
        if self._bar is not None:
            self._bar.console.log(text)
        elif self.mode == "lines":
            self._write(text)

    def finished(self, text: str, units: int = 1) -> None:
        """``units`` more are done (one by default); ``text`` says which and how it went."""
        with self._lock:
            first, self.done = self.done == 0, self.done + units
            self._detail = ""
            due = first or self.done >= self.total or time.monotonic() - self._said >= self.line_every_s
        if self._bar is not None:
            self._bar.update(self._detail_task, visible=False)
            self._bar.advance(self._task, units)
        elif self.mode == "lines" and due:
            self._write(f"[{self.done}/{self.total} {self._times()}] {text}")

    # --- lines ----------------------------------------------------------------------------------------------
    def _times(self) -> str:
        elapsed = time.monotonic() - self.started
        if not self.done or self.done >= self.total:
            return _clock(elapsed)
        left = elapsed / self.done * (self.total - self.done)
        return f"{_clock(elapsed)}, ~{_clock(left)} left"

    def _write(self, text: str) -> None:
        with self._lock:
            self._said = time.monotonic()
        try:
            print(text, file=self.stream, flush=True)
        except (OSError, ValueError):   # a closed pipe must not end the run
            pass

    def _heartbeat(self) -> None:
        while not self._stop.wait(min(1.0, self.heartbeat_s)):
            with self._lock:
                quiet = time.monotonic() - self._said
                step, detail = self._step, self._detail
            if step and quiet >= self.heartbeat_s:
                elapsed = _clock(time.monotonic() - self.started)
                self._write(f"[{self.done}/{self.total} {elapsed}] still on {step}" + (f": {detail}" if detail else ""))
