"""CI without a GPU: every CUDA kernel source compiles for sm_90a with this machine's nvcc."""
import re

import pytest

from vkcoop.cuda import build
from vkcoop.cuda import gen_wgmma_ops

NVCC = build.find_nvcc()
needs_nvcc = pytest.mark.skipif(NVCC is None, reason="nvcc not found (PATH, $CUDA_HOME, /usr/local/cuda)")


def test_there_are_kernel_sources():
    names = {p.stem for p in build.kernel_sources()}
    assert {"mma_sp", "wgmma_sp"} <= names


@needs_nvcc
@pytest.mark.parametrize("source", build.kernel_sources(), ids=lambda p: p.name)
def test_kernel_compiles_to_sm90a_cubin(source, tmp_path):
    out = tmp_path / (source.stem + ".cubin")
    log = build.nvcc_compile(source, out, extra_flags=("-Xptxas", "-v"))
    data = out.read_bytes()
    assert data[:4] == b"\x7fELF", "nvcc -cubin should produce an ELF cubin"
    entries = re.findall(r"Compiling entry function '(\w+)' for 'sm_90a'", log)
    assert entries, log
    spills = re.findall(r"(\d+) bytes spill stores", log)
    assert all(int(s) == 0 for s in spills), f"register spills in {source.name}:\n{log}"
    assert "serialized" not in log, f"ptxas serialized wgmma in {source.name}:\n{log}"


@needs_nvcc
def test_launcher_kernel_names_exist_in_cubins(tmp_path):
    from vkcoop.cuda.gemm import MmaSpGemm, WgmmaSpGemm
    for stem, path_cls in (("mma_sp", MmaSpGemm), ("wgmma_sp", WgmmaSpGemm)):
        out = tmp_path / f"{stem}.cubin"
        build.nvcc_compile(build.KERNEL_DIR / f"{stem}.cu", out)
        data = out.read_bytes()
        for cfg in [*path_cls.CONFIGS.values(), *getattr(path_cls, "DIAGNOSTIC_CONFIGS", ())]:
            for dtype in ("float16",) if getattr(cfg, "fp16_only", False) else ("float16", "bfloat16"):
                assert cfg.kernel_name(dtype).encode() in data, (stem, cfg)


@needs_nvcc
def test_syntax_error_is_reported(tmp_path):
    bad = tmp_path / "bad.cu"
    bad.write_text('extern "C" __global__ void k() { this is not C++; }\n')
    with pytest.raises(build.KernelBuildError, match="nvcc failed for bad.cu"):
        build.nvcc_compile(bad, tmp_path / "bad.cubin")


def test_generated_wgmma_header_is_current():
    assert gen_wgmma_ops.HEADER.read_text() == gen_wgmma_ops.render(), \
        "run: python -m vkcoop.cuda.gen_wgmma_ops"
