"""``inspect_pipeline``: build a target's pipelines in a child process with the NVIDIA driver's shader disk cache
redirected to a private directory, then unpack, disassemble and count what the driver compiled; last, and in a
process of its own (:mod:`vkcoop.inspect.launch`), ask the driver for VK_KHR_pipeline_executable_properties, whose
failure, a crash included, becomes one line of the report rather than the end of it.

What is disassembled: every CUDA ELF (cubin) and every NVuc container (only its code section, with ``nvdisasm
--binary``; registers and scratch come from the container). Raw blobs only when neither was found. The driver's
host ELF stubs and SPIR-V never."""
from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from . import cache as cache_reader
from . import launch, sass
from .launch import DISK_CACHE_PATH_ENV
from .loops import Loop, find_loops
from .targets import Target

NVIDIA_VENDOR_ID = 0x10DE


class InspectUnavailable(RuntimeError):
    """Something inspect needs is missing here (exit 3). ``what``: "zstandard", "nvdisasm", "driver", "device"
    or "cache format"."""

    def __init__(self, what: str, message: str):
        super().__init__(f"{what}: {message}")
        self.what = what


class InspectInputError(ValueError):
    """The child refused the target (a bad tile, case or specialization; exit 2)."""


class InspectFailed(RuntimeError):
    """The build child crashed or Vulkan failed there (exit 1). (The executables query never raises this: see
    ``InspectResult.executables_failure``.)"""


@dataclass
class KernelReport:
    name: str
    registers: int | None              # the ELF's .nv.info (EIATTR_REGCOUNT), or the NVuc container's REG section
    registers_listing: int | None      # from nvdisasm's SHI_REGISTERS (a cubin listing only)
    shared_bytes: int | None           # the ELF's .nv.shared.<kernel>; None where unknown (NVuc)
    frame_size: int | None             # the ELF's EIATTR_FRAME_SIZE, or the NVuc symbol's frame size
    code_bytes: int
    mix: sass.InstructionMix
    scratch_bytes: int | None = None   # the NVuc container's SCRATCH section (local memory, e.g. for spills)
    loops: list[Loop] = field(default_factory=list)   # find_loops: the kernel's loops in address order

    def to_dict(self) -> dict:
        return {"name": self.name, "registers": self.registers, "registers_listing": self.registers_listing,
                "shared_bytes": self.shared_bytes, "scratch_bytes": self.scratch_bytes, "frame_size": self.frame_size,
                "code_bytes": self.code_bytes, "mix": self.mix.to_dict(), "loops": [x.to_dict() for x in self.loops]}


@dataclass
class ObjectReport:
    kind: str                  # a cache.CompiledObject kind that is disassembled: "nvuc", "elf" or "raw"
    source: str
    size: int
    sm: int | None
    kernels: list[KernelReport] = field(default_factory=list)
    listing: str = ""
    container: dict | None = None   # "nvuc": nvuc.Container.summary()

    def to_dict(self) -> dict:
        out = {"kind": self.kind, "source": self.source, "bytes": self.size, "sm": self.sm,
               "kernels": [k.to_dict() for k in self.kernels]}
        if self.container is not None:
            out["container"] = self.container
        return out


@dataclass
class InspectResult:
    target: str
    device: dict
    pipelines: list
    executables: list
    cache: dict
    objects: list[ObjectReport]
    executables_failure: dict | None = None   # launch.query_failure(): the query died or failed; one-line message

    @property
    def total_mix(self) -> sass.InstructionMix:
        total = sass.InstructionMix()
        for obj in self.objects:
            for kernel in obj.kernels:
                total = total.merge(kernel.mix)
        return total

    def listing(self) -> str:
        parts = [f"// vkcoop inspect: {self.target} on {self.device.get('name')} (driver "
                 f"{self.device.get('driver_version')})\n"]
        for obj in self.objects:
            parts.append(f"\n// ===== {obj.kind} object {obj.source} ({obj.size} bytes)\n{obj.listing}")
        return "".join(parts)

    def to_dict(self) -> dict:
        return {"target": self.target, "device": self.device, "pipelines": self.pipelines,
                "executables": self.executables, "executables_failure": self.executables_failure,
                "cache": self.cache, "objects": [o.to_dict() for o in self.objects], "total": self.total_mix.to_dict()}


def check_tools(nvdisasm: str | None = None) -> str:
    """The nvdisasm path; InspectUnavailable when it or the zstandard package is missing."""
    try:
        cache_reader.require_zstandard()
    except cache_reader.MissingZstandardError as error:
        raise InspectUnavailable("zstandard", str(error)) from None
    tool = nvdisasm or sass.find_nvdisasm()
    if tool is None or not Path(tool).is_file():
        missing = sass.MISSING_NVDISASM if tool is None else f"{tool} is not a file (--nvdisasm: nvdisasm's path)"
        raise InspectUnavailable("nvdisasm", missing)
    return tool


def run_child(target: Target, cache_dir: Path, *, device=None, timeout_s: float = 900.0) -> dict:
    """Create the target's pipelines in a fresh process whose driver writes its shader cache to ``cache_dir``
    (:func:`launch.build`); the child's result dict, with each pipeline's recipe for the executables query."""
    try:
        return launch.build({"target": target.to_dict(), "device": device}, cache_dir, timeout_s=timeout_s)
    except launch.ChildFailed as error:
        raise InspectFailed(str(error)) from None


def run_query(outcome: dict, *, device=None, timeout_s: float = 900.0) -> launch.QueryOutcome:
    """VK_KHR_pipeline_executable_properties for the pipelines the build child made, in a process of its own."""
    request = {"device": device, "extensions": outcome.get("extensions", []), "features": outcome.get("features", []),
               "pipelines": outcome.get("recipes", [])}
    return launch.query(request, timeout_s=timeout_s)


def _check_child(outcome: dict) -> None:
    error = outcome.get("error")
    if error:
        if error["kind"] == "input":
            raise InspectInputError(error["message"])
        if error["kind"] == "device":
            raise InspectUnavailable("device", error["message"])
        raise InspectFailed(error["message"])
    device = outcome.get("device") or {}
    if device.get("vendor_id") != NVIDIA_VENDOR_ID:
        raise InspectUnavailable("driver", f"{device.get('name', 'the device')} is not an NVIDIA GPU; only the NVIDIA "
                                 "driver's shader disk cache can be read")


def _elf_report(obj: cache_reader.CompiledObject, nvdisasm: str) -> ObjectReport:
    text = sass.disassemble(obj.data, nvdisasm=nvdisasm)
    elf_kernels = {k.name: k for k in obj.elf.kernels}
    report = ObjectReport(obj.kind, obj.source, len(obj.data), obj.elf.sm, listing=text)
    for listed in sass.parse_listing(text):
        info = elf_kernels.get(listed.name)
        report.kernels.append(KernelReport(
            listed.name, info.registers if info else None, listed.registers, info.shared_bytes if info else None,
            info.frame_size if info else None, info.code_bytes if info else 0, sass.instruction_mix(listed.mnemonics),
            loops=find_loops(listed)))
    return report


def _nvuc_report(obj: cache_reader.CompiledObject, nvdisasm: str, raw_arch: str) -> ObjectReport:
    """One kernel per code section of the container: nvdisasm reads the section's bytes alone (see
    :mod:`vkcoop.inspect.nvuc` for why not the whole container)."""
    container = obj.nvuc
    report = ObjectReport("nvuc", obj.source, container.size, container.sm, container=container.summary())
    listings = []
    for section in container.code_sections:
        text = sass.disassemble(container.bytes_of(section), raw_arch=raw_arch, nvdisasm=nvdisasm)
        listings.append(f"// code section {section.index}: {section.size} bytes at {section.offset}\n{text}")
        function = container.function_for(section)
        listed = sass.parse_listing(text)
        mnemonics = [m for kernel in listed for m in kernel.mnemonics]
        name = function.name if function else ""
        report.kernels.append(KernelReport(
            name, container.registers, None, None, function.frame_size if function else None, section.size,
            sass.instruction_mix(mnemonics), scratch_bytes=container.scratch_bytes,
            loops=[loop for kernel in listed for loop in find_loops(kernel)]))
    report.listing = "".join(listings)
    return report


def _raw_report(obj: cache_reader.CompiledObject, nvdisasm: str, raw_arch: str) -> ObjectReport | None:
    try:
        text = sass.disassemble(obj.data, raw_arch=raw_arch, nvdisasm=nvdisasm)
    except sass.DisassemblyError:
        return None  # a raw blob need not be code
    report = ObjectReport(obj.kind, obj.source, len(obj.data), None, listing=text)
    for listed in sass.parse_listing(text):
        report.kernels.append(KernelReport(listed.name, None, listed.registers, None, None, 0,
                                           sass.instruction_mix(listed.mnemonics), loops=find_loops(listed)))
    return report


def disassemble_objects(scan: cache_reader.CacheScan, nvdisasm: str, raw_arch: str) -> list[ObjectReport]:
    """nvdisasm every CUDA ELF and NVuc container of the scan; raw blobs only when neither was found (and then
    skip those nvdisasm rejects, since a blob need not be code)."""
    reports = [_elf_report(o, nvdisasm) for o in scan.elves]
    reports += [_nvuc_report(o, nvdisasm, raw_arch) for o in scan.containers]
    if not scan.elves and not scan.containers:
        reports += [r for r in (_raw_report(o, nvdisasm, raw_arch) for o in scan.objects if o.kind == "raw") if r]
    return [r for r in reports if r.kernels]


def report_cache(directory: str | Path, nvdisasm: str, raw_arch: str = "SM90", *,
                 keep: bool = True) -> tuple[dict, list[ObjectReport]]:
    """(summary, object reports) of the driver's shader cache in ``directory``: scan, parse, disassemble, count.
    Raises InspectUnavailable("cache format") when nothing in it can be read, naming why."""
    scan = cache_reader.scan_directory(directory)
    summary = {"dir": str(directory) if keep else None, "files": scan.files, "bytes": scan.bytes_scanned,
               "frames": len(scan.frames), "bad_frames": scan.bad_frames, "objects": scan.kinds(),
               "problems": [f"{o.source}: {o.error}" for o in scan.broken]}
    if not scan.frames:
        raise InspectUnavailable("cache format", f"the driver wrote {scan.files} file(s), {scan.bytes_scanned} "
                                 f"bytes, with no zstd frame in them ({DISK_CACHE_PATH_ENV} honoured?)")
    try:
        objects = disassemble_objects(scan, nvdisasm, raw_arch)
    except sass.DisassemblyError as error:
        raise InspectUnavailable("cache format", f"nvdisasm could not read a compiled object ({error}); "
                                 f"--raw-arch {raw_arch} is what NVuc code is read as") from None
    if not objects:
        broken = f"; {summary['problems'][0]}" if summary["problems"] else ""
        raise InspectUnavailable("cache format", f"{len(scan.frames)} zstd frame(s) hold no object nvdisasm "
                                 f"can read ({summary['objects']}){broken}")
    return summary, objects


def inspect_pipeline(target: Target, *, device=None, executables: bool = True, cache_dir: str | Path | None = None,
                     nvdisasm: str | None = None, raw_arch: str = "SM90", timeout_s: float = 900.0) -> InspectResult:
    """Build ``target``'s pipelines with the driver's disk cache in ``cache_dir`` (default: a temporary
    directory, removed afterwards; a given directory must be new or empty, and is kept), then report each
    compiled object's kernels, registers, scratch and instruction mix, and (``executables``) what
    VK_KHR_pipeline_executable_properties says, queried in another process whose failure is only noted in
    ``executables_failure``. Raises InspectUnavailable, InspectInputError or InspectFailed."""
    keep = cache_dir is not None
    if keep and Path(cache_dir).exists() and (not Path(cache_dir).is_dir() or any(Path(cache_dir).iterdir())):
        raise InspectInputError(f"--cache-dir {cache_dir} exists and is not an empty directory")
    tool = check_tools(nvdisasm)
    directory = Path(cache_dir) if keep else Path(tempfile.mkdtemp(prefix="vkcoop-gl-cache-"))
    try:
        outcome = run_child(target, directory, device=device, timeout_s=timeout_s)
        _check_child(outcome)
        summary, objects = report_cache(directory, tool, raw_arch, keep=keep)
    finally:
        if not keep:
            shutil.rmtree(directory, ignore_errors=True)
    result = InspectResult(target.label, outcome["device"], outcome["pipelines"], [], summary, objects)
    if executables:
        queried = run_query(outcome, device=device, timeout_s=timeout_s)
        result.executables, result.executables_failure = queried.executables, queried.failure
    return result


def inspect_cache(directory: str | Path, *, nvdisasm: str | None = None, raw_arch: str = "SM90") -> InspectResult:
    """Report a driver shader cache already on disk (a ``__GL_SHADER_DISK_CACHE_PATH`` folder, say one copied from
    a GPU machine, or ``--cache-dir`` of an earlier run): no device and no build. Raises InspectInputError for a
    path that is not a directory, InspectUnavailable as :func:`report_cache` does."""
    path = Path(directory)
    if not path.is_dir():
        raise InspectInputError(f"--cache {directory}: not a directory")
    summary, objects = report_cache(path, check_tools(nvdisasm), raw_arch)
    return InspectResult(f"the shader cache in {path}", {"name": "the GPU that wrote it", "driver_version": "?"},
                         [], [], summary, objects)
