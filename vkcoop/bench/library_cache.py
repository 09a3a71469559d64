"""Remembered library searches: what each library path's search found, per device, case and library versions.

A library baseline (cuSPARSELt through torch or nvmath-python, torch's semi-structured tensor, cuBLAS) searches
what the library offers in a child process (``vkcoop.cuda.isolated``). Its winner is kept in the device's tuning
cache file (:class:`vkcoop.bench.tuning.TuningCache`), section ``library``, one entry per path, dtype and shape
(``cuBLAS|fp16|8192x8192x8192``), with the library versions it ran on, the search depth, the runner-up timings
and the candidates the library refused, with their reasons. The search depth (``bench sparse --search``):

* ``quick`` (the default): the library's own choice (cuSPARSELt's own search; torch.mm and nvmath-python's
  autotuned Matmul for cuBLAS); a quick or a deep entry serves it;
* ``deep``: every stage of the path's search within the search budget; only a deep entry serves it;
* ``cached``: no search; an entry of either depth, else the library's own choice, measured directly.

On a hit the winner runs in the measuring process with no child. An entry written under other library versions
is ignored (and replaced by the next search); one that does not read back, or names another device, is dropped
with one line and searched again. A refused candidate is never tried again under the same versions.

**The deep winner is always a candidate.** Where this machine has no deep entry, the package's shipped winner for
the GPU (:mod:`.library_seeds`, a deep search's on the same GPU model) joins the candidates: a quick or deep search
probes it in the search process beside its own; a hit on a quick entry times it beside the cached winner directly
when it ran in a search here under these versions (it is a runner-up of the entry), else both go through the search
process once. The measuring process times every survivor with the full iteration count and reports the fastest
(``vkcoop.bench.measure``), and ``PathResult.found_by`` says which search found it (:data:`FOUND_BY`). The
``cached`` depth searches nothing, so a shipped winner never tried here is not timed there.
"""
from __future__ import annotations

import datetime
from dataclasses import asdict, dataclass, field

from .identity import DeviceIdentity

SEARCH_DEPTHS = ("quick", "deep", "cached")
#: What found a library row's configuration (``PathResult.found_by``): this run's quick or deep search, this
#: machine's cache, the package's shipped deep winner, or nothing (the ``cached`` depth without an entry: the
#: library's own choice, timed directly).
FOUND_BY = ("quick", "deep", "cached", "shipped", "default")
SECTION = "library"
#: Runner-up timings kept per entry.
RUNNERS_UP = 4
_SERVES = {"quick": ("quick", "deep"), "deep": ("deep",), "cached": ("quick", "deep")}


def library_key(path: str, problem) -> str:
    return f"{path}|{problem.dtype}|{problem.m}x{problem.n}x{problem.k}"


@dataclass
class LibraryEntry:
    """One remembered search (module docstring). ``config`` is the winner in the search protocol's encoding
    (``vkcoop.cuda.isolated.encode``), so the cache reads back without CUDA."""
    config: object
    label: str
    versions: str
    depth: str
    device: str
    median_ms: float
    tflops: float | None = None
    runners_up: list = field(default_factory=list)    # [{"config": label, "median_ms": ms}], fastest first
    refused: dict = field(default_factory=dict)       # label -> the library's reason
    when: str = ""

    def serves(self, depth: str) -> bool:
        return self.depth in _SERVES[depth]

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data) -> "LibraryEntry":
        """The entry, or ValueError saying what is wrong with ``data``."""
        if not isinstance(data, dict):
            raise ValueError(f"is a {type(data).__name__}, not an entry")
        missing = [name for name in ("config", "label", "versions", "depth", "device", "median_ms") if name not in data]
        if missing:
            raise ValueError(f"lacks {', '.join(missing)}")
        entry = cls(**{name: data[name] for name in cls.__dataclass_fields__ if name in data})
        checks = ((isinstance(entry.config, (str, dict)), "its configuration is not a label or a record"),
                  (isinstance(entry.label, str) and entry.label, "its label is empty"),
                  (isinstance(entry.versions, str), "its versions are not text"),
                  (entry.depth in ("quick", "deep"), f"its depth {entry.depth!r} is not quick or deep"),
                  (isinstance(entry.median_ms, (int, float)) and entry.median_ms > 0, "its time is not positive"),
                  (isinstance(entry.runners_up, list), "its runners-up are not a list"),
                  (isinstance(entry.refused, dict), "its refused candidates are not a mapping"))
        for ok, why in checks:
            if not ok:
                raise ValueError(why)
        return entry


@dataclass
class LibraryChoice:
    """What a library path measures on one case (:meth:`LibraryCache.choose`): ``configs`` (in the search protocol's
    types), ``source`` ("search": they go through the search process first; "cache" or "default": timed directly),
    ``search`` (the options of that search: ``staged``, ``refused``, ``pinned``: labels timed here whenever they ran
    there), and ``found``: label -> what found it (:data:`FOUND_BY`)."""
    configs: list
    source: str
    search: dict | bool = False
    found: dict = field(default_factory=dict)


def _read_entry(raw) -> tuple["LibraryEntry | None", Exception | None]:
    """(the entry ``raw`` holds, None) when it reads back, its configuration included; else (None, why)."""
    try:
        entry = LibraryEntry.from_dict(raw)
        from ..cuda.isolated import decode
        decode(entry.config)
    except (ValueError, TypeError, KeyError) as error:
        return None, error
    return entry, None


class LibraryCache:
    """The ``library`` sections of a :class:`vkcoop.bench.tuning.TuningCache`'s files, and the shipped winners
    (``shipped``: GPU name -> {key: entry dict}; default the package's, :func:`.library_seeds.load`)."""

    def __init__(self, tuning, shipped: dict | None = None):
        self.tuning = tuning
        self._shipped = shipped

    def _drop(self, identity: DeviceIdentity, key: str, why: str) -> None:
        self.tuning.section(identity, SECTION).pop(key, None)
        self.tuning._say(f"library cache {self.tuning.file_for(identity)}: entry {key} dropped, it {why}; it is "
                         "searched again")

    def lookup(self, identity: DeviceIdentity, path: str, problem, versions: str) -> LibraryEntry | None:
        """The entry for ``path`` on ``problem`` under ``versions``, or None (module docstring)."""
        key = library_key(path, problem)
        raw = self.tuning.section(identity, SECTION).get(key)
        if raw is None:
            return None
        entry, error = _read_entry(raw)
        if entry is None:
            self._drop(identity, key, f"does not read back ({error})")
            return None
        if identity.uuid and entry.device != identity.uuid:
            self._drop(identity, key, f"was measured on another device ({entry.device or 'unknown'})")
            return None
        return entry if entry.versions == versions else None

    def refused(self, identity: DeviceIdentity, path: str, problem, versions: str) -> dict:
        """label -> reason of the candidates refused under ``versions`` (an entry of other versions: none)."""
        raw = self.tuning.section(identity, SECTION).get(library_key(path, problem))
        if isinstance(raw, dict) and raw.get("versions") == versions and isinstance(raw.get("refused"), dict):
            return dict(raw["refused"])
        return {}

    def shipped(self, identity: DeviceIdentity, path: str, problem) -> LibraryEntry | None:
        """The package's deep winner of ``path`` on ``problem`` for this GPU model, or None (none shipped, or one
        that does not read back: a packaging fault, said in one line)."""
        if self._shipped is None:
            from .library_seeds import load
            self._shipped = load()
        raw = self._shipped.get(identity.name, {}).get(library_key(path, problem))
        if raw is None:
            return None
        entry, error = _read_entry(raw)
        if entry is None:
            self.tuning._say(f"shipped library winner {library_key(path, problem)} of {identity.name} ignored: it "
                             f"does not read back ({error})")
        return entry

    def choose(self, identity: DeviceIdentity | None, path: str, problem, versions: str, depth: str, quick: list,
               deep: list) -> LibraryChoice:
        """What ``path`` measures on ``problem`` at search ``depth`` (module docstring): ``quick`` and ``deep``, the
        path's candidates of a quick and of a deep search."""
        from ..cuda.isolated import decode, label_of

        entry = self.lookup(identity, path, problem, versions) if identity is not None else None
        refused = self.refused(identity, path, problem, versions) if identity is not None else {}
        seed = None
        if identity is not None and not (entry is not None and entry.depth == "deep"):
            seed = self.shipped(identity, path, problem)
        if seed is not None and seed.label in refused:
            seed = None
        if entry is not None and entry.serves(depth):
            found, configs = {entry.label: "cached"}, [decode(entry.config)]
            if seed is None or seed.label == entry.label:
                return LibraryChoice(configs, "cache", False, found)
            tried_here = seed.label in {r.get("config") for r in entry.runners_up if isinstance(r, dict)}
            if not tried_here and depth == "cached":
                return LibraryChoice(configs, "cache", False, found)
            found[seed.label] = "shipped"
            configs.append(decode(seed.config))
            if tried_here:
                return LibraryChoice(configs, "cache", False, found)
            return LibraryChoice(configs, "search", {"staged": False, "refused": refused, "pinned": list(found)},
                                 found)
        if depth == "cached":
            return LibraryChoice(quick[:1], "default", False, {label_of(c): "default" for c in quick[:1]})
        own = list(quick if depth == "quick" else deep)
        found = {label_of(c): depth for c in own}
        pinned = []
        if seed is not None and seed.label not in found:
            own.append(decode(seed.config))
            found[seed.label] = "shipped"
            pinned.append(seed.label)
        return LibraryChoice(own, "search", {"staged": depth == "deep", "refused": refused, "pinned": pinned},
                             found)

    def store(self, identity: DeviceIdentity, path: str, problem, entry: LibraryEntry):
        entry.when = entry.when or datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
        self.tuning.section(identity, SECTION)[library_key(path, problem)] = entry.to_dict()
        return self.tuning.save(identity)


def entry_from_result(result, searched: dict, *, versions: str, depth: str, device: str,
                      refused_before: dict) -> LibraryEntry | None:
    """The entry a measured library path leaves: its winner (``searched``: label -> configuration in the search
    protocol's encoding, of every candidate searched), the other candidates that ran, fastest first, and every
    candidate refused so far (``refused_before`` and this search's failures). None when nothing ran, or when the
    winner was not a searched candidate."""
    if result.status != "ok" or result.median_ms is None:
        return None
    here = [e for e in result.tuning if "where" not in e and e.get("status") == "ok"]
    winner = min(here, key=lambda e: e["median_ms"])["config"] if here else result.config
    if winner not in searched:
        return None
    ran = sorted((e for e in result.tuning if e.get("status") == "ok" and e.get("median_ms") is not None
                  and e.get("config") != winner), key=lambda e: e["median_ms"])
    runners_up = list({e["config"]: {"config": e["config"], "median_ms": e["median_ms"]} for e in ran}.values())
    refused = dict(refused_before)
    refused.update((e["config"], e.get("reason", "")) for e in result.tuning
                   if e.get("status") in ("error", "failed") and e.get("config"))
    return LibraryEntry(searched[winner], winner, versions, depth, device, result.median_ms, result.tflops,
                        runners_up[:RUNNERS_UP], refused)
