"""Per-device tuning: which launch configuration each path uses, measured on this GPU and cached.

The cache lives under ``vkcoop.paths.cache_root()/tuning/`` (``~/.cache/vkcoop/tuning``), one JSON file per device
(:class:`vkcoop.bench.identity.DeviceIdentity`: name and UUID), holding the driver version it was measured with
and one entry per (path, dtype, tuning class) (:func:`vkcoop.gemm.configs.tuning_class`). A file written under
another driver version is discarded (every entry is re-tuned); a file that does not read back (bad JSON, wrong
format) is rejected with one logged line, kept beside as ``*.corrupt`` and rebuilt.

For each path and problem a :class:`Tuner` decides (:meth:`Tuner.plan`):

* a library baseline (``always_search``: cuSPARSELt, cuBLAS...) is planned by the library cache
  (:meth:`.library_cache.LibraryCache.choose`): its remembered winner, or a search in a child process
  (``vkcoop.cuda.isolated``) bounded by ``search_budget`` seconds whose plan holds the first stage's candidates; a
  remembered deep winner (this machine's, else the package's shipped one) is always among them;
* ``retune``, or ``tune`` without a cached entry, or a device with neither a cache entry nor shipped seeds
  (``vkcoop.gemm.paths.SEEDS``: the H200 and the H100) measures every candidate the path derives from the device
  (``path.configs(problem, tune=True)``) and stores the winner; all tunings of a run share ``budget`` seconds;
* a cached entry is used as is; otherwise the device's seed default (or the path's own default).
"""
from __future__ import annotations

import datetime
import json
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path

from ..gemm.configs import tuning_class
from ..gemm.paths import SEEDS
from ..paths import cache_root
from .identity import DeviceIdentity
from .library_cache import LibraryCache, entry_from_result
from .measure import config_label

CACHE_FORMAT = 1
_logger = logging.getLogger(__name__)


def cache_dir() -> Path:
    return cache_root() / "tuning"


def entry_key(path: str, dtype: str, cls: str) -> str:
    return f"{path}|{dtype}|{cls}"


class TuningCache:
    """The per-device cache files; ``log`` gets every rejection or invalidation as one line."""

    def __init__(self, root: Path | None = None, log=None):
        self.root = Path(root) if root is not None else cache_dir()
        self.log = log or _logger.warning
        self.messages: list[str] = []
        self._files: dict[str, dict] = {}

    def file_for(self, identity: DeviceIdentity) -> Path:
        return self.root / f"{identity.file_stem}.json"

    def _say(self, message: str) -> None:
        self.messages.append(message)
        self.log(message)

    def _read(self, path: Path) -> dict | None:
        """The parsed file, or None after rejecting it (moved to ``*.corrupt``) with one line."""
        try:
            data = json.loads(path.read_text())
            problem = _format_problem(data)
        except (OSError, UnicodeDecodeError) as error:
            problem = f"cannot be read ({type(error).__name__}: {error})"
        except json.JSONDecodeError as error:
            problem = f"is not JSON ({error.msg} at line {error.lineno} column {error.colno})"
        if problem is None:
            return data
        self._say(f"tuning cache {path}: rejected, it {problem}; it is rebuilt (the old file is kept as "
                  f"{path.name}.corrupt)")
        try:
            os.replace(path, path.with_name(path.name + ".corrupt"))
        except OSError:
            pass
        return None

    def _load(self, identity: DeviceIdentity) -> dict:
        stem = identity.file_stem
        if stem in self._files:
            return self._files[stem]
        path = self.file_for(identity)
        data = self._read(path) if path.exists() else None
        if data is not None and data["device"].get("driver") != identity.driver:
            self._say(f"tuning cache {path}: measured under driver {data['device'].get('driver')}, the device now "
                      f"reports {identity.driver}; its {len(data['entries'])} entries are discarded and re-tuned")
            data = None
        if data is None:
            data = {"format": CACHE_FORMAT, "device": identity.to_dict(), "entries": {}}
        self._files[stem] = data
        return data

    def lookup(self, identity: DeviceIdentity, path: str, dtype: str, cls: str) -> dict | None:
        return self._load(identity)["entries"].get(entry_key(path, dtype, cls))

    def store(self, identity: DeviceIdentity, path: str, dtype: str, cls: str, entry: dict) -> Path:
        self._load(identity)["entries"][entry_key(path, dtype, cls)] = entry
        return self.save(identity)

    def drop(self, identity: DeviceIdentity, path: str, dtype: str, cls: str, why: str) -> None:
        """Remove an entry that can no longer be used (``why``), with one line; the file keeps the others."""
        key = entry_key(path, dtype, cls)
        if self._load(identity)["entries"].pop(key, None) is None:
            return
        self._say(f"tuning cache {self.file_for(identity)}: {key} dropped, {why}")
        if self.file_for(identity).exists():
            self.save(identity)

    def section(self, identity: DeviceIdentity, name: str) -> dict:
        """A named section of the device's file besides the tuned entries (``library``: the library searches,
        :mod:`.library_cache`), created empty; one that is not a mapping is replaced, with one line."""
        data = self._load(identity)
        if not isinstance(data.get(name, {}), dict):
            self._say(f"tuning cache {self.file_for(identity)}: its {name!r} section is not a mapping; it is rebuilt")
            data[name] = {}
        return data.setdefault(name, {})

    def save(self, identity: DeviceIdentity) -> Path:
        """Write the device's file atomically (a temporary file renamed over it): a reader, or a run stopped
        halfway, sees the old file or the new one, never a part."""
        data = self._load(identity)
        data["device"] = identity.to_dict()
        target = self.file_for(identity)
        target.parent.mkdir(parents=True, exist_ok=True)
        temporary = target.with_name(target.name + f".{os.getpid()}.tmp")
        try:
            temporary.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
            os.replace(temporary, target)
        except BaseException:   # Ctrl-C or a full disk: the old file stays as it was
            temporary.unlink(missing_ok=True)
            raise
        return target


def _format_problem(data) -> str | None:
    """Why ``data`` is not a tuning cache file, or None."""
    if not isinstance(data, dict) or data.get("format") != CACHE_FORMAT:
        return f"is not a format-{CACHE_FORMAT} tuning cache"
    if not isinstance(data.get("device"), dict) or not isinstance(data.get("entries"), dict):
        return "lacks its device or entries"
    bad = [key for key, entry in data["entries"].items()
           if key.count("|") != 2 or not isinstance(entry, dict) or not isinstance(entry.get("config"), str)]
    return f"has malformed entries ({', '.join(bad[:3])})" if bad else None


def cached_entries(root: Path | None = None, log=None) -> list[dict]:
    """Every entry of every cache file, flat (``vkcoop bench tuning``): the tuned configurations (``kind``
    "tuned") and the remembered library searches (``kind`` "library"); corrupt files are rejected as above."""
    cache = TuningCache(root, log)
    rows = []
    for path in sorted(cache.root.glob("*.json")) if cache.root.is_dir() else []:
        data = cache._read(path)
        if data is None:
            continue
        device = {"device": data["device"].get("name"), "uuid": data["device"].get("uuid"),
                  "driver": data["device"].get("driver"), "file": str(path)}
        for key, entry in sorted(data["entries"].items()):
            name, dtype, cls = key.split("|")
            rows.append({"kind": "tuned", **device, "path": name, "dtype": dtype, "class": cls, **entry})
        library = data.get("library")
        for key, entry in sorted(library.items()) if isinstance(library, dict) else []:
            if isinstance(entry, dict) and key.count("|") == 2:
                name, dtype, shape = key.split("|")
                rows.append({"kind": "library", **device, "path": name, "dtype": dtype, "shape": shape, **entry})
    return rows


@dataclass
class Plan:
    """What to measure for one path and problem, and whether to store the winner."""
    configs: list
    source: str                   # "search", "tuned", "cache", "seed", "default"
    deadline: float | None = None
    key: tuple | None = None      # (identity, path, dtype, class) when the winner is to be stored
    started: float = 0.0
    #: a library path: the options of its search (``measure_path(search=...)``: ``staged``, and ``refused``, the
    #: candidates refused before), False to time ``configs`` directly; and what its library cache entry is stored
    #: under (identity, library versions)
    search: bool | dict = False
    library: tuple | None = None
    found: dict | None = None     # a library path: label -> what found it (library_cache.FOUND_BY)


def best_entry(tried: list) -> dict | None:
    timed = [e for e in tried if e.get("status") == "ok" and e.get("median_ms") is not None]
    return min(timed, key=lambda e: e["median_ms"]) if timed else None


class Tuner:
    """Decides, per path and problem, which configurations to measure (see the module docstring)."""

    def __init__(self, cache: TuningCache, identities: dict, *, tune: bool = False, retune: bool = False,
                 budget: float = 600.0, search_budget: float = 15.0, search_depth: str = "quick"):
        self.cache, self.identities = cache, identities     # identities: {"vulkan"|"cuda": DeviceIdentity|None}
        self.library = LibraryCache(cache)
        self.search_depth = search_depth
        self.tune, self.retune = tune, retune
        self.budget_left, self.search_budget = float(budget), float(search_budget)
        self.tunings_left = 0
        self.tuned: dict[tuple, dict] = {}
        self.attempted: set[tuple] = set()     # tuned in this run, winner or not
        self.stored: list[str] = []

    def identity(self, path) -> DeviceIdentity | None:
        return self.identities.get(getattr(path, "api", "vulkan"))

    def _resolve(self, path, problem, label: str):
        from_label = getattr(path, "config_from_label", None)
        if from_label is not None:
            return from_label(label, problem)
        return next((c for c in path.configs(problem, True) if config_label(c) == label), None)

    def needs_tuning(self, path, problem) -> bool:
        if getattr(path, "always_search", False) or not hasattr(path, "configs"):
            return False
        identity = self.identity(path)
        if identity is None:
            return False
        key = (identity, path.name, problem.dtype, tuning_class(problem))
        if key in self.attempted:
            return False
        if self.retune:
            return True
        if self.cache.lookup(identity, *key[1:]) is not None:
            return False
        return self.tune or identity.name not in SEEDS

    def count_tunings(self, paths, problems) -> int:
        """How many tunings the run will do (they share the budget); call before the first :meth:`plan`."""
        keys = {(path.name, p.dtype, tuning_class(p)) for path in paths for p in problems
                if path.supports(p)[0] and self.needs_tuning(path, p)}
        self.tunings_left = len(keys)
        return self.tunings_left

    def _versions(self, path) -> str:
        version = getattr(path, "version", None)
        try:
            return str(version()) if version is not None else ""
        except Exception as error:  # noqa: BLE001 - unknown versions: never served from the cache
            return f"unknown ({type(error).__name__})"

    def library_plan(self, path, problem) -> Plan:
        """A library path's plan: its cached winner, else a search of the run's depth (module docstring of
        :mod:`.library_cache`)."""
        now = time.monotonic()
        identity, versions = self.identity(path), self._versions(path)
        quick = getattr(path, "quick_configs", lambda p: path.configs(p, True)[:1])(problem)
        choice = self.library.choose(identity, path.name, problem, versions, self.search_depth, quick,
                                     path.configs(problem, True))
        if choice.source != "search":
            return Plan(choice.configs, choice.source, started=now, found=choice.found)
        return Plan(choice.configs, "search", now + self.search_budget, started=now, search=choice.search,
                    library=(identity, versions) if identity is not None else None, found=choice.found)

    def needs_search(self, path, problem) -> bool:
        """Whether measuring ``path`` on ``problem`` starts a library search (the run starts its search process
        early when some case will)."""
        return getattr(path, "always_search", False) and self.library_plan(path, problem).source == "search"

    def plan(self, path, problem) -> Plan:
        now = time.monotonic()
        if getattr(path, "always_search", False):
            return self.library_plan(path, problem)
        identity = self.identity(path)
        cls = tuning_class(problem)
        key = (identity, path.name, problem.dtype, cls)
        if self.needs_tuning(path, problem):
            share = self.budget_left / max(1, self.tunings_left)
            return Plan(path.configs(problem, True), "tuned", now + share, key, now)
        entry = self.tuned.get(key) or (self.cache.lookup(identity, *key[1:])
                                        if identity is not None and not self.retune else None)
        if entry is not None:
            config = self._resolve(path, problem, entry["config"])
            if config is not None:
                return Plan([config], "cache", started=now)
        seeded = identity is not None and identity.name in SEEDS
        return Plan(path.configs(problem, False), "seed" if seeded else "default", started=now)

    def finish(self, plan: Plan, problem, result, path=None) -> None:
        """Store the winner of a tuning (and account its time against the budget), or of a library search; a
        library row learns what found its winner (``found_by``)."""
        if plan.found is not None:     # a later stage's candidate of a deep search is the search's own
            winner = best_entry([e for e in result.tuning if "where" not in e])
            later = self.search_depth if plan.source == "search" else ""
            result.found_by = plan.found.get(winner["config"], later) if winner is not None else ""
        if plan.library is not None:
            self._store_search(plan, problem, result, path)
            return
        if plan.source != "tuned":
            return
        self.budget_left = max(0.0, self.budget_left - (time.monotonic() - plan.started))
        self.tunings_left = max(0, self.tunings_left - 1)
        self.attempted.add(plan.key)
        best = best_entry(result.tuning)
        if best is None:
            return
        identity, name, dtype, cls = plan.key
        entry = {"config": best["config"], "median_ms": best["median_ms"], "tflops": best.get("tflops"),
                 "problem": f"{problem.m}x{problem.n}x{problem.k}",
                 "candidates": sum(1 for e in result.tuning if e.get("config")),
                 "when": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}
        self.tuned[plan.key] = entry
        self.stored.append(str(self.cache.store(identity, name, dtype, cls, entry)))

    def _store_search(self, plan: Plan, problem, result, path) -> None:
        from ..cuda.isolated import encode

        identity, versions = plan.library
        searched = {label: encode(config) for label, config in getattr(path, "tried", {}).items()}
        entry = entry_from_result(result, searched, versions=versions, depth=self.search_depth,
                                  device=identity.uuid, refused_before=plan.search["refused"])
        if entry is not None:      # else nothing ran, or the winner was not searched: nothing to remember
            self.stored.append(str(self.library.store(identity, path.name, problem, entry)))
