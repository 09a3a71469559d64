"""The second child process of ``vkcoop inspect``: the VK_KHR_pipeline_executable_properties query, on its own.

The first child (:mod:`vkcoop.inspect.child`) has built the pipelines and the driver has written its shader
cache; this one re-creates each pipeline from its :class:`~vkcoop.inspect.executables.PipelineRecipe` with the
capture flags and reads the driver's statistics. A crash in the driver here (the NVIDIA driver 580.159.04 was seen
to die with SIGSEGV in this query) costs this report only. The parent runs it as::

    python -X faulthandler -m vkcoop.inspect.query REQUEST.json RESULT.json PROGRESS.txt

with the driver's disk cache off and pointed at a throwaway folder, so nothing here lands in the cache that is read.

REQUEST: ``{"device": index|name|null, "extensions": [...], "features": [...], "pipelines": [recipe dicts]}``.
RESULT (rewritten after each pipeline, so what was read before a crash survives it): ``{"executables":
[{"pipeline", "available", "executables"|"reason"}], "error": null | {"kind", "message"}}``.
PROGRESS: one line per Vulkan call, ``NAME<TAB>CONTEXT``, written and flushed before the call is made; the last
line names the call a crash happened in. ``faulthandler`` (``-X faulthandler``) leaves the Python stack on stderr.
"""
from __future__ import annotations

import contextlib
import faulthandler
import json
import os
import sys
from pathlib import Path


class Progress:
    """Appends ``call<TAB>context`` lines to a file, flushed before the call is made."""

    def __init__(self, path: str | Path):
        self.file = open(path, "a", encoding="utf-8")

    def __call__(self, call: str, context: str = "") -> None:
        self.file.write(f"{call}\t{context}\n")
        self.file.flush()

    def close(self) -> None:
        self.file.close()


def read_progress(path: str | Path) -> list[tuple[str, str]]:
    """The (call, context) lines of a progress file; none when it is missing."""
    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    lines = []
    for line in text.splitlines():
        call, _, context = line.partition("\t")
        if call:
            lines.append((call, context))
    return lines


@contextlib.contextmanager
def open_physical(device, progress):
    """The physical device the build child used (same selector), on a fresh instance."""
    from .. import vk
    progress("vkCreateInstance")
    with vk.Instance() as instance:
        progress("vkEnumeratePhysicalDevices")
        yield instance.select(device)


def _write(path: Path, result: dict) -> None:
    partial = path.with_name(path.name + ".part")
    partial.write_text(json.dumps(result, indent=1, default=str))
    os.replace(partial, path)


def run_query(request: dict, progress, result_path: Path | None = None) -> dict:
    """Query every pipeline of ``request``; writes the result after each one when ``result_path`` is given."""
    from .. import vk
    from .executables import PipelineRecipe, pipeline_executables
    result = {"executables": [], "error": None}
    try:
        with open_physical(request.get("device"), progress) as physical:
            for data in request["pipelines"]:
                recipe = PipelineRecipe.from_dict(data)
                report = pipeline_executables(physical, recipe.spirv, recipe, extensions=request["extensions"],
                                              features=request["features"], progress=progress, label=recipe.label)
                result["executables"].append({"pipeline": recipe.label, **report})
                if result_path is not None:
                    _write(result_path, result)
    except (vk.VulkanError, RuntimeError, ValueError) as error:
        result["error"] = {"kind": type(error).__name__, "message": str(error)}
    return result


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 3:
        print("usage: python -X faulthandler -m vkcoop.inspect.query REQUEST.json RESULT.json PROGRESS.txt",
              file=sys.stderr)
        return 2
    if not faulthandler.is_enabled():
        faulthandler.enable()
    request = json.loads(Path(argv[0]).read_text())
    progress = Progress(argv[2])
    try:
        result = run_query(request, progress, Path(argv[1]))
        _write(Path(argv[1]), result)
        from ..vk import release_pooled_instances
        progress("vkDestroyInstance")
        release_pooled_instances()
    finally:
        progress.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
