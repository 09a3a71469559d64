"""The library searches' shipped winners: what a deep search found best per GPU, library path, dtype and shape,
packaged beside this module (``library_seeds.json``) so that a machine with an empty cache starts from them, as
the Vulkan paths start from their seed configurations (``vkcoop.gemm.paths.SEEDS``).

The file is made from the deep runs of the committed result sets (``docs/results/<gpu>/bench-default-deep.json``,
``bench sparse --search deep``) by :func:`generate`; ``python -m lab.library_seeds`` writes it, and a test checks
that the shipped file is what :func:`generate` makes of those runs. Its ``devices`` map a GPU's name (as CUDA
reports it: ``NVIDIA H100 80GB HBM3``, ``NVIDIA H200``) to entries keyed as the library cache keys them
(``cuBLAS|fp16|8192x8192x8192``), each a :class:`~vkcoop.bench.library_cache.LibraryEntry` of depth ``deep``: the
winning candidate in the search protocol's encoding, its label, the library versions and the figure of that run.

A run's winner is the fastest candidate timed in the measuring process (its ``tuning`` entries without ``"where"``),
the rule by which ``vkcoop.bench.measure`` reports a library row; the search process's probes only rank candidates.
The library cache (:mod:`.library_cache`) offers a shipped winner as one more candidate of a search, never in place
of one: it is tried in the search process under this machine's library versions first.
"""
from __future__ import annotations

import functools
import json
from pathlib import Path

from ..errors import InputError

SHIPPED_FILE = Path(__file__).with_name("library_seeds.json")
FORMAT = 1
#: The library paths whose winners are shipped (the paths that search, ``vkcoop.cuda.paths.LibraryPath``).
LIBRARY_PATHS = ("cuSPARSELt", "cuSPARSELt-nvmath", "torch-semi-structured", "cuBLAS")
#: What a run read from a committed result set is called (``docs/results/<gpu>/<this>``).
DEEP_RUN = "bench-default-deep.json"


def config_of(path: str, label: str):
    """The configuration of library path ``path`` that ``label`` names, in the search protocol's encoding
    (``vkcoop.cuda.isolated.encode``); ValueError where the label does not parse."""
    from ..cuda.baselines import BlasConfig, CsltConfig
    from ..cuda.isolated import encode

    if path in ("cuSPARSELt", "cuSPARSELt-nvmath"):
        return encode(CsltConfig.from_label(label))
    if path == "cuBLAS":
        return encode(BlasConfig.from_label(label))
    if path == "torch-semi-structured" and label in ("default", "graph"):
        return label
    raise ValueError(f"{path}: no shipped configuration is named {label!r}")


def winner_label(result: dict) -> str | None:
    """The label of the fastest candidate a run timed in its measuring process for one result, or None."""
    timed = [e for e in result.get("tuning") or [] if "where" not in e and e.get("status") == "ok"
             and e.get("config") and e.get("median_ms") is not None]
    return min(timed, key=lambda e: e["median_ms"])["config"] if timed else None


def _device_of(run: dict) -> str:
    environment = run.get("environment") or {}
    name = ((environment.get("devices") or {}).get("cuda") or {}).get("name")
    return name or (environment.get("nvidia_smi") or {}).get("name") or ""


def winners_of_run(run: dict, source: str) -> tuple[str, dict]:
    """(the GPU's name, {library key: entry dict}) of one deep run's JSON (``source`` names it in errors);
    InputError where it is not a deep run or names no GPU."""
    settings = run.get("settings") or {}
    if settings.get("search") != "deep":
        raise InputError(f"{source}: a run of search depth {settings.get('search')!r}, not deep; only deep winners "
                         "are shipped")
    device = _device_of(run)
    if not device:
        raise InputError(f"{source}: the run names no CUDA device")
    uuid = (((run.get("environment") or {}).get("devices") or {}).get("cuda") or {}).get("uuid", "")
    winners = {}
    for result in run.get("results") or []:
        label = winner_label(result) if result.get("path") in LIBRARY_PATHS and result.get("status") == "ok" else None
        if label is None:
            continue
        key = f"{result['path']}|{result['dtype']}|{result['m']}x{result['n']}x{result['k']}"
        winners[key] = {"config": config_of(result["path"], label), "label": label,
                        "versions": result.get("library", ""), "depth": "deep", "device": uuid,
                        "median_ms": result["median_ms"], "tflops": result.get("tflops"), "runners_up": [],
                        "refused": {}, "when": (run.get("environment") or {}).get("timestamp_utc", "")}
    return device, winners


def generate(runs, root: Path | None = None) -> dict:
    """The shipped file's document from the deep runs ``runs`` (paths; ``root``: the folder they are named
    relative to in the document). A GPU with two runs keeps, per key, the faster winner."""
    devices: dict = {}
    names = []
    for run_path in runs:
        run_path = Path(run_path)
        name = run_path.relative_to(root).as_posix() if root is not None else run_path.as_posix()
        names.append(name)
        try:
            run = json.loads(run_path.read_text())
        except (OSError, ValueError) as error:
            raise InputError(f"{name}: cannot be read as JSON ({error})") from None
        device, winners = winners_of_run(run, name)
        table = devices.setdefault(device, {})
        for key, entry in winners.items():
            if key not in table or entry["median_ms"] < table[key]["median_ms"]:
                table[key] = entry
    return {"format": FORMAT, "runs": names,
            "devices": {device: dict(sorted(table.items())) for device, table in sorted(devices.items())}}


def render(document: dict) -> str:
    """The shipped file's text for ``document`` (what :func:`generate` returns)."""
    return json.dumps(document, indent=1, sort_keys=True) + "\n"


@functools.lru_cache(maxsize=1)
def load() -> dict:
    """{GPU name: {library key: entry dict}} of the shipped file ({} where it is missing or not this format)."""
    try:
        document = json.loads(SHIPPED_FILE.read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(document, dict) or document.get("format") != FORMAT or not isinstance(
            document.get("devices"), dict):
        return {}
    return {name: table for name, table in document["devices"].items() if isinstance(table, dict)}
