"""``inspect_pipeline``: build a target's pipelines in a child process with the NVIDIA driver's shader disk cache
redirected to a private directory, then unpack, disassemble and count what the driver compiled."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from . import cache as cache_reader
from . import sass
from .targets import Target

NVIDIA_VENDOR_ID = 0x10DE
#: Environment the driver reads when it loads (set for the child only).
DISK_CACHE_ENV = {"__GL_SHADER_DISK_CACHE": "1", "__GL_SHADER_DISK_CACHE_SKIP_CLEANUP": "1"}
DISK_CACHE_PATH_ENV = "__GL_SHADER_DISK_CACHE_PATH"
_PACKAGE_ROOT = Path(__file__).resolve().parents[2]


class InspectUnavailable(RuntimeError):
    """Something inspect needs is missing here (exit 3). ``what``: "zstandard", "nvdisasm", "driver", "device"
    or "cache format"."""

    def __init__(self, what: str, message: str):
        super().__init__(f"{what}: {message}")
        self.what = what


class InspectInputError(ValueError):
    """The child refused the target (a bad tile, case or specialization; exit 2)."""


class InspectFailed(RuntimeError):
    """The child crashed or Vulkan failed (exit 1)."""


@dataclass
class KernelReport:
    name: str
    registers: int | None              # from the ELF's .nv.info (EIATTR_REGCOUNT)
    registers_listing: int | None      # from nvdisasm's SHI_REGISTERS
    shared_bytes: int
    frame_size: int | None
    code_bytes: int
    mix: sass.InstructionMix

    def to_dict(self) -> dict:
        return {"name": self.name, "registers": self.registers, "registers_listing": self.registers_listing,
                "shared_bytes": self.shared_bytes, "frame_size": self.frame_size, "code_bytes": self.code_bytes,
                "mix": self.mix.to_dict()}


@dataclass
class ObjectReport:
    kind: str                  # "elf" or "raw"
    source: str
    size: int
    sm: int | None
    kernels: list[KernelReport] = field(default_factory=list)
    listing: str = ""

    def to_dict(self) -> dict:
        return {"kind": self.kind, "source": self.source, "bytes": self.size, "sm": self.sm,
                "kernels": [k.to_dict() for k in self.kernels]}


@dataclass
class InspectResult:
    target: str
    device: dict
    pipelines: list
    executables: list
    cache: dict
    objects: list[ObjectReport]

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
                "executables": self.executables, "cache": self.cache,
                "objects": [o.to_dict() for o in self.objects], "total": self.total_mix.to_dict()}


def check_tools(nvdisasm: str | None = None) -> str:
    """The nvdisasm path; InspectUnavailable when it or the zstandard package is missing."""
    try:
        cache_reader.require_zstandard()
    except cache_reader.MissingZstandardError as error:
        raise InspectUnavailable("zstandard", str(error)) from None
    tool = nvdisasm or sass.find_nvdisasm()
    if tool is None or not Path(tool).is_file():
        raise InspectUnavailable("nvdisasm", f"{tool or 'nvdisasm'} not found (PATH, $CUDA_HOME/bin, "
                                 "/usr/local/cuda/bin); install the CUDA toolkit or pass --nvdisasm")
    return tool


def run_child(target: Target, cache_dir: Path, *, device=None, executables: bool = True,
              timeout_s: float = 900.0) -> dict:
    """Create the target's pipelines in a fresh process whose driver writes its shader cache to ``cache_dir``."""
    cache_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="vkcoop-inspect-") as tmp:
        request, result = Path(tmp) / "request.json", Path(tmp) / "result.json"
        request.write_text(json.dumps({"target": target.to_dict(), "device": device, "executables": executables}))
        env = dict(os.environ, **DISK_CACHE_ENV)
        env[DISK_CACHE_PATH_ENV] = str(cache_dir)
        env["VKCOOP_CACHE_DIR"] = str(Path(tmp) / "vkcoop-cache")  # no VkPipelineCache hit may skip the compile
        env["PYTHONPATH"] = os.pathsep.join([str(_PACKAGE_ROOT)] + [p for p in [env.get("PYTHONPATH")] if p])
        try:
            proc = subprocess.run([sys.executable, "-m", "vkcoop.inspect.child", str(request), str(result)],
                                  env=env, capture_output=True, text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            raise InspectFailed(f"creating the pipelines took longer than {timeout_s:.0f} s") from None
        if proc.returncode != 0 or not result.is_file():
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
            raise InspectFailed(f"the pipeline process exited {proc.returncode}: {' | '.join(tail)}")
        return json.loads(result.read_text())


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


def disassemble_objects(scan: cache_reader.CacheScan, nvdisasm: str, raw_arch: str) -> list[ObjectReport]:
    """nvdisasm every ELF of the scan; raw blobs only when no ELF was found (and then skip those nvdisasm
    rejects, since a blob need not be code)."""
    reports = []
    candidates = scan.elves or [o for o in scan.objects if o.kind == "raw"]
    for obj in candidates:
        try:
            text = sass.disassemble(obj.data, raw_arch=None if obj.kind == "elf" else raw_arch, nvdisasm=nvdisasm)
        except sass.DisassemblyError:
            if obj.kind == "elf":
                raise
            continue
        elf_kernels = {k.name: k for k in obj.elf.kernels} if obj.elf else {}
        report = ObjectReport(obj.kind, obj.source, len(obj.data), obj.elf.sm if obj.elf else None, listing=text)
        for listed in sass.parse_listing(text):
            info = elf_kernels.get(listed.name)
            report.kernels.append(KernelReport(
                listed.name, info.registers if info else None, listed.registers,
                info.shared_bytes if info else 0, info.frame_size if info else None,
                info.code_bytes if info else 0, sass.instruction_mix(listed.mnemonics)))
        if report.kernels:
            reports.append(report)
    return reports


def inspect_pipeline(target: Target, *, device=None, executables: bool = True, cache_dir: str | Path | None = None,
                     nvdisasm: str | None = None, raw_arch: str = "SM90", timeout_s: float = 900.0) -> InspectResult:
    """Build ``target``'s pipelines with the driver's disk cache in ``cache_dir`` (default: a temporary
    directory, removed afterwards; a given directory must be new or empty, and is kept), then report each
    compiled object's kernels, registers and instruction mix. Raises InspectUnavailable, InspectInputError or
    InspectFailed."""
    keep = cache_dir is not None
    if keep and Path(cache_dir).exists() and (not Path(cache_dir).is_dir() or any(Path(cache_dir).iterdir())):
        raise InspectInputError(f"--cache-dir {cache_dir} exists and is not an empty directory")
    tool = check_tools(nvdisasm)
    directory = Path(cache_dir) if keep else Path(tempfile.mkdtemp(prefix="vkcoop-gl-cache-"))
    try:
        outcome = run_child(target, directory, device=device, executables=executables, timeout_s=timeout_s)
        _check_child(outcome)
        scan = cache_reader.scan_directory(directory)
        summary = {"dir": str(directory) if keep else None, "files": scan.files, "bytes": scan.bytes_scanned,
                   "frames": len(scan.frames), "bad_frames": scan.bad_frames,
                   "objects": {k: sum(o.kind == k for o in scan.objects) for k in ("elf", "raw", "spirv")}}
        if not scan.frames:
            raise InspectUnavailable("cache format", f"the driver wrote {scan.files} file(s), {scan.bytes_scanned} "
                                     f"bytes, with no zstd frame in them ({DISK_CACHE_PATH_ENV} honoured?)")
        objects = disassemble_objects(scan, tool, raw_arch)
        if not objects:
            raise InspectUnavailable("cache format", f"{len(scan.frames)} zstd frame(s) hold no object nvdisasm "
                                     f"can read ({summary['objects']})")
        return InspectResult(target.label, outcome["device"], outcome["pipelines"], outcome["executables"],
                             summary, objects)
    finally:
        if not keep:
            shutil.rmtree(directory, ignore_errors=True)
