"""vkcoop.inspect's nvdisasm listing parser and instruction-mix counts, and the disassembly plumbing (with a
stand-in for nvdisasm, which this machine lacks)."""
from __future__ import annotations

import os
import stat

import pytest

from vkcoop.inspect import core, sass

# HAND-WRITTEN FIXTURE, NOT DRIVER OUTPUT. It follows the layout nvdisasm prints for a cubin (.headerflags, a
# ".text.<kernel>" section with .sectioninfo SHI_REGISTERS, "/*offset*/ [@pred] OPCODE.MODS operands ;" lines,
# some with the trailing encoding comments cuobjdump-style listings add) with mnemonics in the forms NVIDIA's
# tools print for sm_80/sm_90, so that forms the real pipelines lack (LDGSTS, HGMMA, UTMALDG, several kernels)
# are counted too. The real driver output (an H100's shader cache, with its README's counts) is tested in
# test_inspect_nvuc.py.
FIXTURE = """\
\t.headerflags\t@"EF_CUDA_TEXMODE_UNIFIED EF_CUDA_64BIT_ADDRESS EF_CUDA_SM90 EF_CUDA_VIRTUAL_SM(EF_CUDA_SM90)"
\t.elftype\t@"ET_EXEC"


//--------------------- .nv.info                  --------------------------
\t.section\t.nv.info,"",@"SHT_CUDA_INFO"
\t.align\t4
        /*0000*/ \t.byte\t0x04, 0x2f
        /*0002*/ \t.short\t(.L_1 - .L_0)


//--------------------- .text.gemm_like           --------------------------
\t.section\t.text.gemm_like,"ax",@progbits
\t.sectioninfo\t@"SHI_REGISTERS=168"
\t.align\t128
        .global         gemm_like
        .type           gemm_like,@function
        .size           gemm_like,(.L_x_9 - gemm_like)
        .other          gemm_like,@"STO_CUDA_ENTRY STV_DEFAULT"
gemm_like:
.text.gemm_like:
        /*0000*/                   LDC R1, c[0x0][0x28] ;
        /*0010*/                   S2R R0, SR_TID.X ;
        /*0020*/                   LDG.E.U16.STRONG.SM R4, desc[UR4][R2.64] ;
        /*0030*/               @P0 LDG.E.U16.STRONG.SM R5, desc[UR4][R2.64+0x2] ;
        /*0040*/              @!P1 LDG.E.U16.STRONG.SM R6, desc[UR4][R2.64+0x4] ;
        /*0050*/                   LDG.E.128 R8, desc[UR4][R12.64] ;                /* 0x000000040c087981 */
                                                                                    /* 0x000ea2000c1e1d00 */
        /*0060*/                   LDG.E.128.CONSTANT R16, desc[UR4][R12.64+0x10] ;
        /*0070*/                   LDG.E.64 R20, desc[UR4][R14.64] ;
        /*0080*/                   LDG.E R22, desc[UR4][R14.64+0x8] ;
        /*0090*/                   LDG.E.LTC128B.64 R24, desc[UR4][R14.64+0x10] ;
        /*00a0*/                   LDGSTS.E.BYPASS.LTC128B.128 [R3], desc[UR4][R12.64] ;
        /*00b0*/                   LDGSTS.E.BYPASS.LTC128B.128 [R3+0x800], desc[UR4][R12.64+0x40] ;
        /*00c0*/                   LDGDEPBAR ;
        /*00d0*/                   DEPBAR.LE SB0, 0x0 ;
        /*00e0*/                   BAR.SYNC.DEFER_BLOCKING 0x0 ;
        /*00f0*/                   LDSM.16.M88.4 R28, [R3] ;
        /*0100*/                   LDSM.16.MT88.4 R32, [R3+0x800] ;
        /*0110*/                   LDS.U16 R36, [R3+0x40] ;
        /*0120*/                   STS.128 [R3+0x1000], R8 ;
        /*0130*/                   HMMA.16816.F32 R40, R28, R32, R40 ;
        /*0140*/                   HMMA.16816.F32 R44, R28, R34, R44 ;
        /*0150*/                   HMMA.16816.F32 R48, R30, R32, R48 ;
        /*0160*/                   HMMA.16816.F32.BF16 R52, R28, R32, R52 ;
        /*0170*/                   STL.64 [R1], R40 ;
        /*0180*/                   LDL.64 R40, [R1] ;
        /*0190*/                   BAR.SYNC.DEFER_BLOCKING 0x0 ;
        /*01a0*/                   STG.E desc[UR4][R2.64], R40 ;
        /*01b0*/                   STG.E.128 desc[UR4][R2.64+0x10], R44 ;
        /*01c0*/                   EXIT ;
.L_x_0:
        /*01d0*/                   BRA `(.L_x_0) ;
.L_x_9:


//--------------------- .text.wgmma_like          --------------------------
\t.section\t.text.wgmma_like,"ax",@progbits
\t.sectioninfo\t@"SHI_REGISTERS=90"
\t.align\t128
wgmma_like:
.text.wgmma_like:
        /*0000*/                   UTMALDG.2D [UR8], [UR4] ;
        /*0010*/                   SYNCS.ARRIVE.TRANS64.RED.A1T0 RZ, [UR6], RZ ;
        /*0020*/                   WARPGROUP.ARRIVE ;
        /*0030*/                   HGMMA.64x128x16.F32 R24, gdesc[UR8], RZ, !UPT ;
        /*0040*/                   HGMMA.64x128x16.F32 R24, gdesc[UR12], R24, gsb0 ;
        /*0050*/                   IMMA.16832.S8.S8 R60, R4, R8, R60 ;
        /*0060*/             @!UP0 EXIT ;
        /*0070*/                   NOP ;
"""


def test_listing_is_split_per_kernel_with_registers():
    kernels = sass.parse_listing(FIXTURE)
    assert [(k.name, k.registers, len(k.mnemonics)) for k in kernels] == [("gemm_like", 168, 30),
                                                                          ("wgmma_like", 90, 8)]
    first = kernels[0].mnemonics
    assert first[:3] == ["LDC", "S2R", "LDG.E.U16.STRONG.SM"]
    assert first[-2:] == ["EXIT", "BRA"]
    assert kernels[1].mnemonics[3] == "HGMMA.64x128x16.F32"


def test_instruction_mix_of_the_fixture():
    gemm, wgmma = (sass.instruction_mix(k.mnemonics) for k in sass.parse_listing(FIXTURE))
    assert gemm.total == 30
    assert dict(gemm.mma) == {"HMMA.16816.F32": 3, "HMMA.16816.F32.BF16": 1}
    assert dict(gemm.global_loads) == {16: 3, 128: 2, 64: 2, 32: 1}
    assert gemm.global_load_forms["LDG.E.U16.STRONG.SM"] == 3
    assert dict(gemm.global_stores) == {32: 1, 128: 1}
    assert dict(gemm.shared) == {"LDSM": 2, "LDS": 1, "STS": 1}
    assert dict(gemm.shared_forms) == {"LDSM.16.M88.4": 1, "LDSM.16.MT88.4": 1, "LDS.U16": 1, "STS.128": 1}
    assert dict(gemm.global_store_forms) == {"STG.E": 1, "STG.E.128": 1}
    assert gemm.opcodes["LDGSTS"] == 2
    assert dict(gemm.async_copies) == {"LDGSTS.E.BYPASS.LTC128B.128": 2}
    assert dict(gemm.barriers) == {"LDGDEPBAR": 1, "DEPBAR.LE": 1, "BAR.SYNC.DEFER_BLOCKING": 2}
    assert dict(gemm.spills) == {"STL": 1, "LDL": 1}
    assert dict(wgmma.mma) == {"HGMMA.64x128x16.F32": 2, "IMMA.16832.S8.S8": 1}
    assert dict(wgmma.async_copies) == {"UTMALDG.2D": 1}
    assert dict(wgmma.barriers) == {"SYNCS.ARRIVE.TRANS64.RED.A1T0": 1}
    total = gemm.merge(wgmma)
    assert total.total == 38 and total.mma["HMMA.16816.F32"] == 3 and total.opcodes["EXIT"] == 2
    as_json = total.to_dict()
    assert as_json["global_loads"] == {"128": 2, "16": 3, "32": 1, "64": 2}


@pytest.mark.parametrize("mnemonic, bits", [("LDG.E", 32), ("LDG.E.U8", 8), ("LDG.E.S16.CONSTANT", 16),
                                            ("LDG.E.64.STRONG.GPU", 64), ("LDG.E.LTC128B.128", 128),
                                            ("LDG.E.EL.LTC256B.U16", 16), ("STG.E.64", 64)])
def test_access_width_ignores_cache_hints(mnemonic, bits):
    assert sass.access_width(mnemonic) == bits


def test_raw_listing_without_sections():
    text = "        /*0000*/                   HMMA.16816.F16 R4, R8, R12, R4 ;\n" \
           "        /*0010*/                   EXIT ;\n"
    (kernel,) = sass.parse_listing(text)
    assert kernel.name == "" and kernel.registers is None and kernel.mnemonics == ["HMMA.16816.F16", "EXIT"]


def _fake_nvdisasm(tmp_path, listing: str, exit_code: int = 0):
    (tmp_path / "listing.txt").write_text(listing)
    tool = tmp_path / "nvdisasm"
    tool.write_text(f"#!/bin/sh\necho \"$@\" > {tmp_path}/args.txt\ncat {tmp_path}/listing.txt\n"
                    f"echo 'nvdisasm fatal : stand-in failure' >&2\nexit {exit_code}\n")
    tool.chmod(tool.stat().st_mode | stat.S_IXUSR)
    return str(tool)


def test_disassemble_passes_the_binary_arch_for_raw_blobs(tmp_path):
    tool = _fake_nvdisasm(tmp_path, FIXTURE)
    assert sass.disassemble(b"\0" * 16, nvdisasm=tool) == FIXTURE
    assert "--binary" not in (tmp_path / "args.txt").read_text()
    sass.disassemble(b"\0" * 16, raw_arch="SM90", nvdisasm=tool)
    assert (tmp_path / "args.txt").read_text().startswith("--binary SM90 ")


def test_disassembler_failure_and_absence(tmp_path, monkeypatch):
    with pytest.raises(sass.DisassemblyError, match="stand-in failure"):
        sass.disassemble(b"\0", nvdisasm=_fake_nvdisasm(tmp_path, "", exit_code=1))
    monkeypatch.setattr(sass.shutil, "which", lambda name: None)
    monkeypatch.setattr(sass, "wheel_nvdisasm", lambda: None)
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "none"))
    monkeypatch.delenv("CUDA_PATH", raising=False)
    if not os.path.exists("/usr/local/cuda/bin/nvdisasm"):
        with pytest.raises(sass.DisassemblerMissing, match=r"pip install 'vkcoop\[inspect\]'"):
            sass.disassemble(b"\0")


def test_nvdisasm_of_the_pip_package_is_found_through_its_metadata(tmp_path, monkeypatch):
    """The nvidia-cuda-nvdisasm wheel puts nvdisasm under site-packages/nvidia/<cuXX>/bin; the package's file
    list (importlib.metadata) says where, whatever the folder is called."""
    from importlib import metadata
    tool = tmp_path / "nvidia" / "cu99" / "bin" / "nvdisasm"
    tool.parent.mkdir(parents=True)
    tool.write_text("#!/bin/sh\n")

    class Distribution:
        files = [metadata.PackagePath("nvidia/cu99/bin/nvdisasm"), metadata.PackagePath("nvidia/cu99/README")]

        @staticmethod
        def locate_file(path):
            return tmp_path / path

    monkeypatch.setattr(metadata, "distribution", lambda name: Distribution if name == sass.NVDISASM_WHEEL
                        else (_ for _ in ()).throw(metadata.PackageNotFoundError(name)))
    assert sass.wheel_nvdisasm() == str(tool)
    monkeypatch.setattr(sass.shutil, "which", lambda name: None)
    monkeypatch.setattr("vkcoop.cuda.build.find_nvcc", lambda: None)
    assert sass.find_nvdisasm() == str(tool)
    tool.unlink()
    assert sass.wheel_nvdisasm() is None


def test_missing_nvdisasm_names_the_pip_extra(monkeypatch):
    from vkcoop.inspect import core
    monkeypatch.setattr(sass, "find_nvdisasm", lambda: None)
    with pytest.raises(core.InspectUnavailable, match=r"pip install 'vkcoop\[inspect\]'") as raised:
        core.check_tools()
    assert raised.value.what == "nvdisasm"


def test_objects_join_elf_attributes_with_the_listing(tmp_path):
    pytest.importorskip("zstandard")
    from test_inspect_cache import build_cuda_elf, frame
    from vkcoop.inspect import cache
    scan = cache.scan_bytes(frame(build_cuda_elf("gemm_like", registers=170, shared=8192)))
    (report,) = core.disassemble_objects(scan, _fake_nvdisasm(tmp_path, FIXTURE), "SM90")
    by_name = {k.name: k for k in report.kernels}
    assert (by_name["gemm_like"].registers, by_name["gemm_like"].registers_listing) == (170, 168)
    assert by_name["gemm_like"].shared_bytes == 8192
    assert by_name["wgmma_like"].registers is None and by_name["wgmma_like"].registers_listing == 90
    assert report.kind == "elf" and report.sm == 90
