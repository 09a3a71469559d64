"""The child side of :mod:`vkcoop.cuda.isolated`: ``python -m vkcoop.cuda.search_child``.

Reads from stdin one setup line (warm-up and probe settings), imports torch and the CUDA paths, says ``ready``;
then lines of two kinds: a search (path name, problem, operand seed, the folder where the parent saved the
case's operands), for which it loads them (``GemmOperands.load``, once per folder) and builds the path (once per
name), and says ``searching``; and a batch (candidates, seconds left, whether the deadline may end the search) of
the current search, whose candidates it tries in order, saying ``start``, ``result`` (the log entry and the
path's ``search_info()``) for each, ``budget`` when the time is up and ``done``. Every line is one JSON object, flushed at once. The protocol has the original stdout to itself;
anything else printed goes to stderr.

A candidate that raises is reported with the library's own words and the process exits at once (status 3,
without interpreter teardown): its CUDA context may be poisoned, and the parent starts a new child for the rest.
"""
from __future__ import annotations

import contextlib
import json
import os
import sys
import time

#: The warm-up of every candidate after the first in a child: the clocks are already up.
LATER_WARMUP_SECONDS = 0.05
POISONED_EXIT = 3


def _channel():
    """The protocol's stream (a copy of fd 1); fd 1 and sys.stdout then point at stderr."""
    channel = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return channel


def _info(path) -> dict:
    info = getattr(path, "search_info", None)
    if info is None:
        return {}
    try:
        return dict(info())
    except Exception as error:  # noqa: BLE001 - what the path learnt is optional
        return {"info_error": f"{type(error).__name__}: {error}"}


def _try(path, operands, config, setup: dict) -> dict:
    from ..gemm.path import check_and_time

    bound = path.bind(operands, config)
    try:
        entry, _ = check_and_time(bound, operands, setup["probe_iters"], setup["probe_warmup"], False)
        return entry
    finally:
        bound.release()


def _batch(batch: dict, path, operands, setup: dict, emit, state: dict) -> None:
    from .isolated import GIVE_UP_AFTER, decode, label_of, what_of

    remaining = batch.get("remaining_s")
    deadline = None if remaining is None else time.monotonic() + remaining
    candidates = [decode(c) for c in batch["candidates"]]
    for index, config in enumerate(candidates):
        may_stop = batch.get("may_stop") or state["ok"] or state["failed"] >= GIVE_UP_AFTER
        if deadline is not None and time.monotonic() > deadline and may_stop:
            emit("budget", left=len(candidates) - index)
            break
        emit("start", label=label_of(config))
        path.warmup_seconds = setup["warmup_seconds"] if state["first"] else min(
            LATER_WARMUP_SECONDS, setup["warmup_seconds"])
        state["first"] = False
        try:
            entry = _try(path, operands, config, setup)
        except BaseException as error:  # noqa: BLE001 - recorded, then this process ends (maybe poisoned)
            message = str(error).strip().replace("\n", " ") or "(no message)"
            emit("result", entry={"status": "error", "reason": f"{what_of(config)}: {type(error).__name__}: "
                                  f"{message}"[:2000], "raised": type(error).__name__}, info=_info(path))
            os._exit(POISONED_EXIT)
        state["ok"] = state["ok"] or entry["status"] == "ok"
        state["failed"] += entry["status"] != "ok"
        emit("result", entry=entry, info=_info(path))
    emit("done")


class _Searches:
    """The child's paths (one per name, built once) and the current search's operands (loaded once per folder)."""

    def __init__(self, setup: dict):
        self.setup, self.paths, self.folder, self.operands, self.path = setup, {}, None, None, None

    def begin(self, search: dict) -> dict:
        from ..gemm.path import GemmOperands, GemmProblem
        from .paths import cuda_paths

        if search["operands_dir"] != self.folder:
            for path in self.paths.values():   # the uploads of the last case go with it
                path.uploads.clear()
            self.operands = GemmOperands.load(search["operands_dir"], GemmProblem(**search["problem"]),
                                              seed=search["seed"])
            self.folder = search["operands_dir"]
        name = search["path"]
        if name not in self.paths:
            self.paths[name] = cuda_paths([name], warmup_seconds=self.setup["warmup_seconds"])[0]
        self.path = self.paths[name]
        return _info(self.path)

    def close(self) -> None:
        for path in self.paths.values():
            path.close()


def main() -> None:
    channel = _channel()

    def emit(event: str, **fields) -> None:
        channel.write(json.dumps({"event": event, **fields}, default=str) + "\n")
        channel.flush()

    setup = json.loads(sys.stdin.readline())
    from . import paths  # noqa: F401 - the CUDA paths, torch and a CUDA context load while the parent prepares
    with contextlib.suppress(Exception):   # its inputs; a failure here shows again, in words, at the first search
        import torch
        torch.zeros(1, device="cuda")
        if "torch-semi-structured" in setup.get("paths", ()):
            from .baselines import warm_semi_structured
            warm_semi_structured()

    searches = _Searches(setup)
    emit("ready")
    state = {"first": True, "ok": False, "failed": 0}
    for line in sys.stdin:
        if not line.strip():
            continue
        message = json.loads(line)
        if "search" in message:
            emit("searching", info=searches.begin(message["search"]))
            state.update(ok=False, failed=0)
        else:
            _batch(message, searches.path, searches.operands, setup, emit, state)
    searches.close()
    channel.close()


if __name__ == "__main__":
    main()
