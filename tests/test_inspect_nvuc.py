"""The NVIDIA driver's real shader cache (tests/fixtures/nvidia-shader-cache/h100-driver-580.159.04, written on an
H100): the NVuc container reader on its own (no nvdisasm needed), then the whole scan path (cache scan -> objects ->
nvdisasm -> instruction mix) against the counts that fixture's README.md states. Every expected number here is
copied from that README (or from nvdisasm's own printing of the container, where said), never from this code's
output. Malformed containers must raise the reader's error, and ``vkcoop inspect`` must turn them into its one-line
"cache format" error (exit 3)."""
from __future__ import annotations

import argparse
import re
import shutil
import struct
from pathlib import Path

import pytest

from vkcoop.cli import inspect as app
from vkcoop.inspect import cache, core, nvuc, sass

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "nvidia-shader-cache" / "h100-driver-580.159.04"
NVDISASM = sass.find_nvdisasm()
needs_nvdisasm = pytest.mark.skipif(NVDISASM is None, reason="no nvdisasm here (PATH, CUDA toolkit, or the "
                                                             "nvidia-cuda-nvdisasm package)")

# The README's table: (code offset, code bytes, registers, scratch bytes) and the instruction mix.
README_CONTAINER = {"peak": (304, 6272, 151, 0), "gemm-dense": (432, 154624, 255, 21504)}
README_MIX = {
    "peak": {"instructions": 392, "HMMA.16816.F32": 64, "HGMMA": 0, "LDSM.16.M88.4": 0, "LDSM.16.MT88.4": 0,
             "LDG.E.128.STRONG.SM": 0, "LDG.E.U16.STRONG.SM": 0, "LDG.E.U16.CONSTANT": 0, "STS.128": 0, "STS": 0,
             "STL": 0, "LDL": 0, "BAR.SYNC": 0, "STG.E.64.STRONG.SM": 64},
    "gemm-dense": {"instructions": 9664, "HMMA.16816.F32": 1664, "HGMMA": 0, "LDSM.16.M88.4": 208,
                   "LDSM.16.MT88.4": 208, "LDG.E.128.STRONG.SM": 102, "LDG.E.U16.STRONG.SM": 288,
                   "LDG.E.U16.CONSTANT": 144, "STS.128": 102, "STS": 281, "STL": 55, "LDL": 28, "BAR.SYNC": 52,
                   "STG.E.64.STRONG.SM": 0},
}


def pipeline_payload(name: str) -> bytes:
    """The decompressed object that starts NVDA NVVM (README item 1)."""
    scan = cache.scan_directory(FIXTURES / name)
    (payload,) = [f.payload for f in scan.frames if f.payload.startswith(b"NVDANVVM")]
    return payload


@pytest.mark.parametrize("name", ["peak", "gemm-dense"])
def test_the_container_is_read_through_its_table(name):
    offset, size, registers, scratch = README_CONTAINER[name]
    payload = pipeline_payload(name)
    assert payload[8:12] == b"NVuc"                           # README: at byte 8 an NVuc container begins
    (found,), problems = nvuc.find_containers(payload)
    at, container = found
    assert at == 8 and problems == []
    (code,) = container.code_sections
    assert (code.offset, code.size) == (offset, size)
    assert code.index == 1                                    # README: "the entry that follows the first one"
    assert container.registers == registers
    assert container.scratch_bytes == scratch
    assert container.bytes_of(code) == payload[8 + offset:8 + offset + size]
    assert container.arch_name == "HOPPER" and container.sm == 90   # nvdisasm: "arch=HOPPER chip=HOPPER/GH100"


def test_what_nvdisasm_printed_of_the_tables():
    """Values nvdisasm 13.5 printed for these containers (nvuc.py's docstring): the section counts, the peak
    symbol, the dense GEMM's symbol (printed once its LMEM entry, which stops nvdisasm, was retyped) and its
    BARRIER table, which has one entry per BAR.SYNC (52 in the README)."""
    peak = nvuc.find_containers(pipeline_payload("peak"))[0][0][1]
    gemm = nvuc.find_containers(pipeline_payload("gemm-dense"))[0][0][1]
    assert (len(peak.sections), len(gemm.sections)) == (8, 12)
    (symbol,) = peak.functions
    assert (symbol.name, symbol.offset, symbol.section, symbol.size, symbol.frame_size) == ("main_4", 0, 1, 6272, 0)
    assert gemm.functions[0].size == 154624 and (gemm.functions[0].spills, gemm.functions[0].refills) == (220, 112)
    assert len(gemm.barrier_offsets) == 52 and peak.barrier_offsets == []
    assert gemm.barrier_offsets == sorted(gemm.barrier_offsets) and all(o % 16 == 0 for o in gemm.barrier_offsets)
    assert [s.name for s in gemm.sections if s.type == nvuc.LMEM] == ["LMEM"]   # "Section 21": type 0x15


def test_the_scan_labels_the_objects():
    scan = cache.scan_directory(FIXTURES / "gemm-dense")
    kinds = sorted(o.kind for o in scan.objects)
    assert kinds == ["host-elf", "nvuc"]                        # README: an ELF stub with no code, the pipeline
    (stub,) = [o for o in scan.objects if o.kind == "host-elf"]
    assert len(stub.data) == 876 - 4                           # an 876-byte object: a 4-byte length, then the ELF
    assert not stub.elf.is_cuda and scan.elves == []
    assert scan.containers[0].nvuc.registers == 255


# ------------------------------------------------------------------------------------------- malformed input
def _container(name="peak") -> bytearray:
    payload = pipeline_payload(name)
    size = struct.unpack_from("<Q", payload, 8 + 0x18)[0]
    return bytearray(payload[8:8 + size])


def _code_entry(data: bytearray) -> int:
    return nvuc.HEADER.size + 1 * nvuc.ENTRY.size


@pytest.mark.parametrize("damage, message", [
    ("bad magic", "no NVuc magic"),
    ("truncated table", "truncated"),
    ("short header", "header"),
    ("offset past the end", "outside the data area"),
    ("section count past the size", "no room for the table"),
    ("code not whole instructions", "whole number"),
    ("no code section", "no UCODE"),
    ("version 2", "only version 1"),
])
def test_malformed_containers_raise_the_readers_error(damage, message):
    data = _container()
    if damage == "bad magic":
        data[0:4] = b"NVux"
    elif damage == "truncated table":
        data = data[:nvuc.HEADER.size + 3 * nvuc.ENTRY.size]
    elif damage == "short header":
        data = data[:20]
    elif damage == "offset past the end":
        struct.pack_into("<Q", data, _code_entry(data) + 8, len(data) - 16)
    elif damage == "section count past the size":
        struct.pack_into("<H", data, 8, 4000)
    elif damage == "code not whole instructions":
        struct.pack_into("<I", data, _code_entry(data) + 4, 6272 - 8)
    elif damage == "no code section":
        struct.pack_into("<I", data, _code_entry(data), 0x45)
    else:
        struct.pack_into("<H", data, 4, 2)
    with pytest.raises(nvuc.NvucFormatError, match=message):
        nvuc.parse(bytes(data))


def _cache_with(tmp_path: Path, payload: bytes) -> Path:
    zstandard = pytest.importorskip("zstandard")
    folder = tmp_path / "GLCache"
    folder.mkdir(parents=True)
    (folder / "entry.bin").write_bytes(b"\0" * 12 + zstandard.ZstdCompressor().compress(payload))
    return tmp_path


def _damaged_peak(damage: str) -> bytearray:
    """The peak pipeline's payload with its container cut short, its code offset past the end, or a bad magic."""
    payload = bytearray(pipeline_payload("peak"))
    if damage == "truncated":
        return payload[:8 + 200]
    if damage == "offset past the end":
        struct.pack_into("<Q", payload, 8 + _code_entry(payload) + 8, 10 ** 6)
    else:
        payload[8:12] = b"NVux"
    return payload


@pytest.mark.parametrize("damage", ["truncated", "offset past the end", "bad magic"])
def test_a_broken_container_is_an_nvuc_object_with_its_error(tmp_path, damage):
    payload = _damaged_peak(damage)
    scan = cache.scan_directory(_cache_with(tmp_path, bytes(payload)))
    (broken,) = scan.broken
    assert broken.kind == "nvuc" and broken.nvuc is None and broken.error
    assert scan.containers == []


def run_cli(argv):
    parser = argparse.ArgumentParser()
    app.add_arguments(parser)
    return app.run(parser.parse_args(argv))


def fake_build(source: Path | None, payload: bytes | None = None, vendor_id: int = core.NVIDIA_VENDOR_ID):
    """A stand-in for the build child: the driver's cache files of ``source`` (or one file holding ``payload``)
    land in the cache folder, and the device is an NVIDIA GPU."""
    def run_child(target, cache_dir, *, device=None, timeout_s=900.0):
        if source is not None:
            shutil.copytree(source / "GLCache", cache_dir / "GLCache")
        else:
            _cache_with(cache_dir, payload)
        return {"device": {"name": "NVIDIA H100 80GB HBM3", "vendor_id": vendor_id, "driver_version": "580.159.04",
                           "api_version": "1.4.312"}, "pipelines": [{"label": target.label, "spirv_bytes": 4}],
                "recipes": [], "extensions": [], "features": [], "error": None}
    return run_child


@pytest.mark.parametrize("damage", ["truncated", "offset past the end", "bad magic"])
def test_inspect_turns_a_broken_container_into_its_cache_format_error(tmp_path, monkeypatch, capsys, damage):
    payload = _damaged_peak(damage)
    monkeypatch.setattr(core, "run_child", fake_build(None, bytes(payload)))
    tool = tmp_path / "nvdisasm"
    tool.write_text("#!/bin/sh\necho 'nvdisasm must not be reached' >&2\nexit 1\n")
    tool.chmod(0o755)
    assert run_cli(["--shader", "test/increment.comp", "--nvdisasm", str(tool), "--no-executables"]) == 3
    err = capsys.readouterr().err.strip()
    assert err.startswith("vkcoop: error: unavailable: cache format:") and len(err.splitlines()) == 1
    assert "nvuc" in err and "Traceback" not in err


# ------------------------------------------------------------------------------------ with the real nvdisasm
@needs_nvdisasm
@pytest.mark.parametrize("name", ["peak", "gemm-dense"])
def test_the_real_cache_gives_the_readmes_instruction_mix(name):
    summary, objects = core.report_cache(FIXTURES / name, NVDISASM, "SM90")
    (report,) = objects                                     # the ELF stub gives no row
    (kernel,) = report.kernels
    offset, size, registers, scratch = README_CONTAINER[name]
    assert report.kind == "nvuc" and kernel.code_bytes == size
    assert (kernel.registers, kernel.scratch_bytes) == (registers, scratch)
    mix, expected = kernel.mix, README_MIX[name]
    assert mix.total == expected["instructions"] == size // 16
    assert mix.mma["HMMA.16816.F32"] == expected["HMMA.16816.F32"]
    assert sum(n for form, n in mix.mma.items() if form.startswith("HGMMA")) == expected["HGMMA"]
    for form in ("LDSM.16.M88.4", "LDSM.16.MT88.4", "STS.128", "STS"):
        assert mix.shared_forms[form] == expected[form], form
    for form in ("LDG.E.128.STRONG.SM", "LDG.E.U16.STRONG.SM", "LDG.E.U16.CONSTANT"):
        assert mix.global_load_forms[form] == expected[form], form
    assert mix.global_store_forms["STG.E.64.STRONG.SM"] == expected["STG.E.64.STRONG.SM"]
    assert (mix.spills["STL"], mix.spills["LDL"]) == (expected["STL"], expected["LDL"])
    assert mix.barriers["BAR.SYNC"] == expected["BAR.SYNC"]
    assert summary["objects"]["nvuc"] == 1 and summary["objects"]["host-elf"] == 1 and summary["problems"] == []


def _instructions(text: str) -> list[tuple[str, str]]:
    return re.findall(r"/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;", text)


@needs_nvdisasm
def test_the_peak_listing_matches_the_expected_listing():
    (report,) = core.report_cache(FIXTURES / "peak", NVDISASM, "SM90")[1]
    expected = _instructions((FIXTURES / "peak.expected.sass").read_text())
    assert len(expected) == README_MIX["peak"]["instructions"]
    assert _instructions(report.listing) == expected


@needs_nvdisasm
def test_the_gemm_barrier_table_points_at_its_bar_sync_instructions():
    (report,) = core.report_cache(FIXTURES / "gemm-dense", NVDISASM, "SM90")[1]
    at = {int(offset, 16): text.split()[-1] if text.startswith("@") else text.split()[0]
          for offset, text in _instructions(report.listing)}
    container = nvuc.find_containers(pipeline_payload("gemm-dense"))[0][0][1]
    assert {at[o] for o in container.barrier_offsets} == {"BAR.SYNC"}


@needs_nvdisasm
def test_inspect_prints_the_real_mix_with_registers_and_scratch(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(core, "run_child", fake_build(FIXTURES / "gemm-dense"))
    out = tmp_path / "report.json"
    assert run_cli(["--gemm", "dense", "--no-executables", "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    row = next(line for line in printed.splitlines() if line.startswith("│ nvuc@"))
    cells = [c.strip() for c in row.strip("│").split("│")]
    assert cells[1:5] == ["255", "21504", "?", "9664"]           # regs, scratch, smem, instructions
    assert "LDSM.16.M88.4 x208" in printed and "LDG.E.U16.STRONG.SM x288" in printed
    import json
    report = json.loads(out.read_text())
    (kernel,) = report["objects"][0]["kernels"]
    assert (kernel["registers"], kernel["scratch_bytes"], kernel["mix"]["total"]) == (255, 21504, 9664)
    # the loop table and the JSON loops: every HMMA of this kernel sits in a loop (none nested here)
    assert "loops that issue MMAs" in printed
    with_mma = [loop for loop in kernel["loops"] if loop["mma"]]
    assert sum(loop["mma"] for loop in with_mma) == kernel["mix"]["mma"]["HMMA.16816.F32"]
    assert all(loop["start"].startswith("0x") and loop["inner_loops"] == 0 for loop in with_mma)
    assert all(loop["instructions_per_mma"] == round(loop["instructions"] / loop["mma"], 2) for loop in with_mma)
    assert report["objects"][0]["container"]["arch"] == "HOPPER"
    assert report["executables"] == [] and report["executables_failure"] is None


@needs_nvdisasm
def test_a_cache_on_disk_is_read_without_a_device(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(core, "run_child", lambda *a, **k: pytest.fail("--cache builds nothing"))
    monkeypatch.setattr(core, "run_query", lambda *a, **k: pytest.fail("--cache queries nothing"))
    out = tmp_path / "report.json"
    assert run_cli(["--cache", str(FIXTURES / "gemm-dense"), "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    row = next(line for line in printed.splitlines() if line.startswith("│ nvuc@"))
    assert [c.strip() for c in row.strip("│").split("│")][1:5] == ["255", "21504", "?", "9664"]
    import json
    report = json.loads(out.read_text())
    assert report["pipelines"] == [] and report["executables"] == [] and report["cache"]["objects"]["nvuc"] == 1


def test_a_cache_that_is_not_there_or_holds_nothing_is_one_line(capsys, tmp_path):
    assert run_cli(["--cache", str(tmp_path / "missing")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("vkcoop: error: --cache") and "not a directory" in err and len(err.splitlines()) == 1
    if NVDISASM is None:
        return
    (tmp_path / "empty").mkdir()
    assert run_cli(["--cache", str(tmp_path / "empty"), "--nvdisasm", NVDISASM]) == 3
    err = capsys.readouterr().err.strip()
    assert err.startswith("vkcoop: error: unavailable: cache format:") and len(err.splitlines()) == 1
