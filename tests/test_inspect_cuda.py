"""``vkcoop inspect --cuda``: our CUDA kernels read with the Vulkan pipeline's counters, and the two side by side
(nvcc and nvdisasm here; no GPU)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from vkcoop import cli
from vkcoop.cuda import build
from vkcoop.inspect import cuda_twin, sass
from vkcoop.inspect.targets import TargetError

#: ``vkcoop inspect --gemm vk-coopmat2-dense --json`` of the dense seed on an H100 (driver 580.159.04)
RECORDED = Path(__file__).resolve().parent / "fixtures" / "inspect-dense-seed-h100.json"
TOOLS = build.find_nvcc() is not None and sass.find_nvdisasm() is not None
needs_tools = pytest.mark.skipif(not TOOLS, reason="needs nvcc and nvdisasm")


@pytest.fixture(autouse=True)
def session_cubins(monkeypatch, tmp_path_factory):
    """build.compile_kernel answers with the tests' kept cubin of the same source, flags and nvcc
    (support.kernel_cubin, compiled once under a lock for test_cuda_compile and test_cuda_dense; ptxas -v changes
    only its notes), where nvcc would compile mma_dense again into an empty user cache: 20-40 s on two cores. That
    cubin's nvdisasm listing is made once and kept too (support.kernel_listing; test_cuda_dense reads it)."""
    from support import kernel_cubin, kernel_listing
    monkeypatch.setattr(build, "compile_kernel", lambda stem: (kernel_cubin(tmp_path_factory, stem)[0], "test session"))
    disassemble = sass.disassemble

    def shared_listing(data, **options):
        if data == kernel_cubin(tmp_path_factory, "mma_dense")[0] and not options.get("raw_arch"):
            return kernel_listing(tmp_path_factory, "mma_dense", disassemble)
        return disassemble(data, **options)
    monkeypatch.setattr(sass, "disassemble", shared_listing)


def test_a_never_true_guard_is_a_placeholder_not_a_shared_load():
    listing = ("        /*1ce0*/              @!PT LDS RZ, [RZ] ;\n"
               "        /*1cf0*/              @!P0 LDS R1, [R2] ;\n")
    kernel, = sass.parse_listing(listing)
    assert kernel.mnemonics == ["NOP", "LDS"]
    assert sass.instruction_mix(kernel.mnemonics).shared == {"LDS": 1}


def test_cuda_labels():
    stem, config, key = cuda_twin.cuda_config("128x128k32s3t128g4")
    assert (stem, key, config.threads) == ("mma_dense", "128x128k32s3t128g4", 128)
    assert cuda_twin.cuda_config("mma.sp:128x64p2")[0] == "mma_sp"
    for bad, why in (("nope", "no mma.sync configuration 'nope'"), ("wgmma:128x256", "'wgmma' is not one of")):
        with pytest.raises(TargetError, match=why):
            cuda_twin.cuda_config(bad)


def test_the_recorded_vulkan_pipeline_counters():
    report = json.loads(RECORDED.read_text())
    kernel = report["objects"][0]["kernels"][0]
    # the driver's "Shared Memory Size" statistic of the seed's two pipelines, as recorded
    assert cuda_twin.pipeline_shared_memory(report) == [48640, 48656]
    rows = cuda_twin.counters(kernel, 48640)
    loop = cuda_twin.main_loop(kernel)
    # the recorded listing's own numbers: its largest innermost MMA loop and the whole kernel's mix
    assert rows["main loop: instructions / MMA"] == f"{loop['instructions']} / {loop['mma']} = " \
                                                    f"{loop['instructions_per_mma']}"
    assert loop["mma"] == max(lp["mma"] for lp in kernel["loops"])
    assert rows["shared memory (bytes)"] == 48640 and rows["registers"] == kernel["registers"]
    assert rows["LDG 8/16/32/64/128"].endswith(f"/{kernel['mix']['global_loads']['128']}")


def test_a_kernel_without_an_mma_loop_has_no_main_loop_rows():
    kernel = {"registers": 8, "mix": {"total": 3, "opcodes": {}, "shared": {}}, "loops": []}
    assert cuda_twin.counters(kernel)["main loop"] == "-"


@needs_tools
def test_the_twin_of_the_dense_seed_read_like_a_vulkan_pipeline():
    result = cuda_twin.inspect_cuda("128x128k32s3t128g4", "bf16")
    kernel = result.objects[0].kernels[0]
    assert kernel.name == "mma_dense_bf16_128x128_k32_2x2_s3_g4" and kernel.registers <= 255
    rows = cuda_twin.counters(kernel.to_dict(), result.pipelines[0]["smem"])
    assert rows["shared memory (bytes)"] == 49152 and rows["spill LDL / STL"] == "0 / 0"
    assert rows["MMA"].startswith("HMMA.16816.F32.BF16 x")
    # one pass over a 32-deep slice of 64x64 warp tiles: 2 k16 steps of 4 x 8 MMAs, 16 ldmatrix.x4, 1 barrier
    assert rows["main loop: LDSM"] == "16 (0.250/MMA)" and rows["main loop: BAR"] == "1 (0.016/MMA)"
    assert rows["LDS / LDSM / STS"].startswith("0/")   # the @!PT placeholders are not shared loads


@needs_tools
def test_inspect_cuda_beside_a_vulkan_report(tmp_path, capsys):
    out = tmp_path / "cuda.json"
    assert cli.main(["inspect", "--cuda", "128x128k32s3t128g4", "--beside", str(RECORDED), "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "Vulkan 1: main_4" in printed and "CUDA: mma_dense_f16_128x128_k32_2x2_s3_g4" in printed
    assert "48640" in printed and "49152" in printed
    assert json.loads(out.read_text())["target"] == "CUDA 128x128k32s3t128g4 fp16"


def test_bad_cuda_requests_exit_2(tmp_path, capsys, monkeypatch):
    assert cli.main(["inspect", "--cuda", "nope"]) == 2
    assert cli.main(["inspect", "--gemm", "vk-coopmat2-dense", "--beside", str(RECORDED)]) == 2
    assert cli.main(["inspect", "--cuda", "128x128k32s3", "--dtype", "fp8"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 3 and all(line.startswith("vkcoop: error:") for line in lines)
    # a --beside file that is no report, and an output path that is a folder, are refused before the kernel is built
    monkeypatch.setattr(build, "compile_kernel", lambda stem: pytest.fail("the kernel was built first"))
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    for argv, words in ((["--beside", str(bad)], f"--beside {bad}: not a"), (["--json", str(tmp_path)], "a directory")):
        assert cli.main(["inspect", "--cuda", "128x128k32s3", *argv]) == 2
        out, err = capsys.readouterr()
        assert out == "" and err.startswith("vkcoop: error: ") and words in err and err.count("\n") == 1, err
