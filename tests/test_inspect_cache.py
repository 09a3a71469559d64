"""vkcoop.inspect's readers of the driver's shader cache: the zstd-frame scan and the CUDA ELF reader.

The cache blobs are synthetic (built here with zstandard around ELF objects); the ELF objects are either built
here from the ELF64 layout or, where nvcc exists, compiled from a small kernel whose register counts ptxas
reports independently."""
from __future__ import annotations

import re
import struct
import subprocess

import pytest

from vkcoop.inspect import cache, elf



def _section_header(name, sh_type, offset, size, link=0, info=0, entsize=0):
    return struct.pack("<IIQQQQIIQQ", name, sh_type, 0, 0, offset, size, link, info, 1, entsize)


def build_cuda_elf(kernel="kern", registers=42, frame=8, code=b"\x11" * 32, shared=1024) -> bytes:
    """A minimal EM_CUDA ELF64: .shstrtab, .strtab, .symtab (one STT_FUNC), .nv.info (EIATTR_REGCOUNT and
    EIATTR_FRAME_SIZE for that symbol), .text.<kernel> and a NOBITS .nv.shared.<kernel>."""
    names = [b"", b".shstrtab", b".strtab", b".symtab", b".nv.info", b".text." + kernel.encode(),
             b".nv.shared." + kernel.encode()]
    shstrtab = b"\0".join(names) + b"\0"
    name_offsets = [shstrtab.index(n + b"\0") if n else 0 for n in names]
    strtab = b"\0" + kernel.encode() + b"\0"
    symtab = bytes(24) + struct.pack("<IBBHQQ", 1, 0x12, 0, 5, 0, len(code))  # GLOBAL FUNC in section 5
    nv_info = (struct.pack("<BBH", 0x04, 0x2F, 8) + struct.pack("<II", 1, registers)
               + struct.pack("<BBH", 0x03, 0x1B, 0xFF)                        # an HVAL record in between
               + struct.pack("<BBH", 0x04, 0x11, 8) + struct.pack("<II", 1, frame))
    bodies = [shstrtab, strtab, symtab, nv_info, code]
    offset, offsets = 64, []
    for body in bodies:
        offsets.append(offset)
        offset += len(body)
    shoff = offset
    headers = (bytes(64) + _section_header(name_offsets[1], 3, offsets[0], len(shstrtab))
               + _section_header(name_offsets[2], 3, offsets[1], len(strtab))
               + _section_header(name_offsets[3], 2, offsets[2], len(symtab), link=2, info=1, entsize=24)
               + _section_header(name_offsets[4], 0x70000000, offsets[3], len(nv_info), link=3)
               + _section_header(name_offsets[5], 1, offsets[4], len(code), link=3, info=1)
               + _section_header(name_offsets[6], 8, shoff + 7 * 64, shared))     # NOBITS: no file bytes
    ident = b"\x7fELF" + bytes([2, 1, 1, 0x33, 7]) + bytes(7)
    header = ident + struct.pack("<HHIQQQIHHHHHH", 2, elf.EM_CUDA, 1, 0, 0, shoff, 0x6005A04, 64, 56, 0, 64, 7, 1)
    return header + b"".join(bodies) + headers


def frame(payload: bytes, **options) -> bytes:
    """One zstd frame (skips the calling test where zstandard is not installed)."""
    zstandard = pytest.importorskip("zstandard", reason="zstandard is not installed (vkcoop inspect needs it)")
    return zstandard.ZstdCompressor(**options).compress(payload)


def test_elf_reader_finds_kernel_attributes():
    data = build_cuda_elf("gemm_main", registers=168, frame=16, shared=4096)
    parsed = elf.parse(data)
    assert parsed.is_cuda and parsed.sm == 90
    assert [(k.name, k.registers, k.frame_size, k.shared_bytes, k.code_bytes) for k in parsed.kernels] == \
        [("gemm_main", 168, 16, 4096, 32)]
    assert elf.elf_extent(data) == len(data)


def test_elf_extent_inside_a_larger_blob_and_truncation():
    data = build_cuda_elf()
    blob = b"header" + data + b"trailing bytes"
    assert elf.elf_extent(blob, 6) == len(data)
    with pytest.raises(elf.ElfFormatError):
        elf.elf_extent(data[:-10])
    with pytest.raises(elf.ElfFormatError):
        elf.parse(b"\x7fELF" + bytes([1, 1]) + bytes(60))   # ELF32 is not read


def test_scan_finds_each_frame_and_skips_stray_magic():
    cubin = build_cuda_elf("first", registers=40)
    second = build_cuda_elf("second", registers=96)
    spirv = b"\x03\x02\x23\x07" + bytes(60)
    raw = bytes(range(256)) * 4
    blob = (b"INDEX\0" + cache.ZSTD_MAGIC + b"not a frame" + frame(b"prefix" + cubin + b"suffix")
            + bytes(13) + frame(second, write_content_size=False) + frame(raw) + frame(spirv) + b"\0" * 7)
    scan = cache.scan_bytes(blob, "entry.bin")
    assert len(scan.frames) == 4
    assert scan.bad_frames == 1
    assert [o.kind for o in scan.objects] == ["elf", "elf", "raw", "spirv"]
    assert scan.objects[0].data == cubin and scan.objects[1].data == second
    assert [k.registers for o in scan.elves for k in o.elf.kernels] == [40, 96]
    assert scan.frames[0].offset == blob.index(frame(b"prefix" + cubin + b"suffix"))


def test_scan_directory_dedupes_objects_and_reads_every_file(tmp_path):
    cubin = build_cuda_elf("k", registers=64)
    (tmp_path / "index").write_bytes(frame(cubin))
    nested = tmp_path / "sub"
    nested.mkdir()
    (nested / "entry").write_bytes(b"x" * 100 + frame(cubin) + frame(build_cuda_elf("other", registers=8)))
    scan = cache.scan_directory(tmp_path)
    assert scan.files == 2 and len(scan.frames) == 3
    assert sorted(k.name for o in scan.elves for k in o.elf.kernels) == ["k", "other"]


def test_truncated_frame_is_not_an_object():
    whole = frame(build_cuda_elf())
    scan = cache.scan_bytes(whole[:-8])
    assert scan.frames == [] and scan.bad_frames == 1


def test_missing_zstandard_is_one_clear_error(monkeypatch):  # runs with or without zstandard installed
    import builtins
    real_import = builtins.__import__

    def no_zstandard(name, *args, **kwargs):
        if name == "zstandard":
            raise ImportError("no")
        return real_import(name, *args, **kwargs)
    monkeypatch.setattr(builtins, "__import__", no_zstandard)
    with pytest.raises(cache.MissingZstandardError, match="pip install zstandard"):
        cache.scan_bytes(b"")


NVCC_KERNELS = r"""
extern "C" __global__ void small_kernel(float* out, const float* in, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[i] * 2.f;
}
extern "C" __global__ void wide_kernel(float* out, int n) {
  float acc[48];
  for (int j = 0; j < 48; ++j) acc[j] = j * n;
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < 48; ++j) acc[j] = acc[j] * acc[(j + 1) % 48] + 1.f;
  float s = 0.f;
  for (int j = 0; j < 48; ++j) s += acc[j];
  out[threadIdx.x] = s;
}
"""


def test_register_counts_match_ptxas_for_a_real_cubin(tmp_path):
    from vkcoop.cuda import build
    nvcc = build.find_nvcc()
    if nvcc is None:
        pytest.skip("nvcc not found: no real cubin to read")
    source = tmp_path / "kernels.cu"
    source.write_text(NVCC_KERNELS)
    out = tmp_path / "kernels.cubin"
    proc = subprocess.run([nvcc, "-gencode=arch=compute_90a,code=sm_90a", "-cubin", "-O3", "-Xptxas", "-v",
                           "-o", str(out), str(source)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    reported = dict(re.findall(r"Compiling entry function '(\w+)'.*?Used (\d+) registers", proc.stderr, re.S))
    assert set(reported) == {"small_kernel", "wide_kernel"}
    scan = cache.scan_bytes(b"\0" * 5 + frame(out.read_bytes()))
    (obj,) = scan.elves
    assert obj.elf.sm == 90
    assert {k.name: k.registers for k in obj.elf.kernels} == {name: int(n) for name, n in reported.items()}
