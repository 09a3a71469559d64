"""The two child processes of ``vkcoop inspect``, seen from the parent.

1. :func:`build` runs :mod:`vkcoop.inspect.child` with the NVIDIA driver's shader disk cache redirected to the
   folder that is read afterwards; its result stands on its own.
2. :func:`query` runs :mod:`vkcoop.inspect.query` (``python -X faulthandler``) with the disk cache off and pointed
   at a throwaway folder, for VK_KHR_pipeline_executable_properties. Nothing it does can fail the report: a crash
   (death by a signal), another exit status, a timeout or a Vulkan error becomes one :class:`QueryOutcome`
   ``failure`` dict whose ``message`` is one line, e.g. ``the driver crashed in
   vkGetPipelineExecutableStatisticsKHR (SIGSEGV)``: the last call the query's progress file names. The
   faulthandler stack (stderr) and the calls made stay in the dict for the JSON report.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from . import query as query_child

#: Environment the driver reads when it loads (set for the build child only).
DISK_CACHE_ENV = {"__GL_SHADER_DISK_CACHE": "1", "__GL_SHADER_DISK_CACHE_SKIP_CLEANUP": "1"}
DISK_CACHE_PATH_ENV = "__GL_SHADER_DISK_CACHE_PATH"
#: The query child's: no disk cache, and a throwaway path in case the driver writes one anyway.
NO_DISK_CACHE_ENV = {"__GL_SHADER_DISK_CACHE": "0"}
_PACKAGE_ROOT = Path(__file__).resolve().parents[2]
#: How the query child is started after ``python -X faulthandler`` (tests put a stand-in driver here).
QUERY_MODULE = ["-m", "vkcoop.inspect.query"]
#: Characters of the query child's stderr kept in the report.
STDERR_KEPT = 20000


class ChildFailed(RuntimeError):
    """The build child crashed, timed out or wrote no result."""


@dataclass
class QueryOutcome:
    executables: list = field(default_factory=list)   # per pipeline, as far as the query got
    failure: dict | None = None                        # {"message", ...} when the query did not finish cleanly


def _environment(tmp: Path, cache_env: dict, cache_path: Path) -> dict:
    env = dict(os.environ, **cache_env)
    env[DISK_CACHE_PATH_ENV] = str(cache_path)
    env["VKCOOP_CACHE_DIR"] = str(tmp / "vkcoop-cache")  # no VkPipelineCache hit may skip the compile
    env["PYTHONPATH"] = os.pathsep.join([str(_PACKAGE_ROOT)] + [p for p in [env.get("PYTHONPATH")] if p])
    return env


def build(request: dict, cache_dir: Path, *, timeout_s: float = 900.0) -> dict:
    """Run the build child on ``request`` with the driver's disk cache in ``cache_dir``; its result dict."""
    cache_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="vkcoop-inspect-") as tmp:
        request_path, result = Path(tmp) / "request.json", Path(tmp) / "result.json"
        request_path.write_text(json.dumps(request))
        env = _environment(Path(tmp), DISK_CACHE_ENV, cache_dir)
        try:
            proc = subprocess.run([sys.executable, "-m", "vkcoop.inspect.child", str(request_path), str(result)],
                                  env=env, capture_output=True, text=True, timeout=timeout_s, check=False)
        except subprocess.TimeoutExpired:
            raise ChildFailed(f"creating the pipelines took longer than {timeout_s:.0f} s") from None
        if proc.returncode != 0 or not result.is_file():
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
            raise ChildFailed(f"the pipeline process {_exit_words(proc.returncode)}: {' | '.join(tail)}")
        return json.loads(result.read_text())


def _exit_words(returncode: int) -> str:
    if returncode < 0:
        return f"died by {signal_name(-returncode)}"
    return f"exited {returncode}"


def signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def query(request: dict, *, timeout_s: float = 900.0) -> QueryOutcome:
    """Run the query child on ``request`` (see :mod:`vkcoop.inspect.query`); never raises for what the child
    does."""
    with tempfile.TemporaryDirectory(prefix="vkcoop-query-") as tmp:
        folder = Path(tmp)
        paths = [folder / "request.json", folder / "result.json", folder / "progress.txt"]
        paths[0].write_text(json.dumps(request))
        (folder / "gl-cache").mkdir()
        env = _environment(folder, NO_DISK_CACHE_ENV, folder / "gl-cache")
        command = [sys.executable, "-X", "faulthandler", *QUERY_MODULE, *map(str, paths)]
        try:
            proc = subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout_s, check=False)
            returncode, stderr = proc.returncode, proc.stderr
        except subprocess.TimeoutExpired as expired:
            returncode, stderr = None, _text(expired.stderr)
        result = _read_json(paths[1])
        calls = query_child.read_progress(paths[2])
    outcome = QueryOutcome(result.get("executables", []))
    outcome.failure = query_failure(returncode, calls, stderr, result.get("error"), timeout_s)
    return outcome


def _text(data) -> str:
    if data is None:
        return ""
    return data.decode("utf-8", "replace") if isinstance(data, bytes) else data


def _read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def query_failure(returncode: int | None, calls: list, stderr: str, error: dict | None,
                  timeout_s: float = 0.0) -> dict | None:
    """None when the query finished cleanly, else ``{"message": one line, "signal", "returncode", "last_call",
    "calls", "stderr"}``. ``returncode`` None: it timed out; negative: it died by that signal."""
    if returncode == 0 and not error:
        return None
    last_call, context = calls[-1] if calls else (None, "")
    where = f" [{context}]" if context else ""
    signal_text = signal_name(-returncode) if returncode is not None and returncode < 0 else None
    if signal_text and last_call:
        message = f"the driver crashed in {last_call} ({signal_text}){where}"
    elif signal_text:
        message = f"the query process died by {signal_text} before its first Vulkan call"
    elif returncode is None:
        message = f"the query took longer than {timeout_s:.0f} s" + (f"; last call {last_call}{where}"
                                                                    if last_call else "")
    elif returncode != 0:
        lines = stderr.strip().splitlines()
        message = f"the query process exited {returncode}" + (f": {lines[-1]}" if lines else "")
    else:
        message = f"{error.get('kind', 'error')}: {error.get('message', '')}".splitlines()[0]
    return {"message": message, "signal": signal_text, "returncode": returncode, "last_call": last_call,
            "context": context, "calls": [f"{c}\t{x}".rstrip("\t") for c, x in calls[-50:]],
            "stderr": stderr[-STDERR_KEPT:]}
