"""CI without a GPU: every CUDA kernel source compiles for sm_90a with this machine's nvcc, and the
instantiation headers generated from the Python configs are current and complete."""
import dataclasses
import re

import pytest

from vkcoop.cuda import build
from vkcoop.cuda import gen_instances
from vkcoop.cuda import gen_wgmma_ops
from vkcoop.cuda.gemm import WgmmaSpGemm
from vkcoop.cuda.wgmma_types import WGMMA_SP_TYPES

NVCC = build.find_nvcc()
needs_nvcc = pytest.mark.skipif(NVCC is None, reason="nvcc not found (PATH, $CUDA_HOME, /usr/local/cuda)")
FAMILIES = {family.stem: family for family in gen_instances.FAMILIES}
#: entry points written by hand in the .cu files, outside the generated lists
HAND_WRITTEN_ENTRIES = {"mma_sp": {"mma_sp_peak_f16"}, "wgmma_sp": set(), "mma_dense": set()}


def _expected_names(family) -> set[str]:
    """Every kernel name the launcher may ask for: both 16-bit dtypes, fp16 only for fp16_only diagnostics, every
    wgmma.sp type (tf32, e4m3, e5m2, int8, uint8 too) for the wgmma tiles marked every_type."""
    names = set()
    for _origin, cfg in family.configs():
        dtypes = ("float16",) if getattr(cfg, "fp16_only", False) else ("float16", "bfloat16")
        if getattr(cfg, "every_type", False):
            dtypes = tuple(WGMMA_SP_TYPES)
        names |= {cfg.kernel_name(dtype) for dtype in dtypes}
    return names


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    """Each .cu compiled once with ptxas -v: {stem: (cubin bytes, ptxas log)}."""
    from support import kernel_cubins

    return kernel_cubins(tmp_path_factory, [source.stem for source in build.kernel_sources()])


def test_there_are_kernel_sources():
    names = {p.stem for p in build.kernel_sources()}
    assert {"mma_sp", "wgmma_sp"} <= names


@needs_nvcc
@pytest.mark.parametrize("stem", [p.stem for p in build.kernel_sources()])
def test_kernel_compiles_to_sm90a_cubin(stem, compiled):
    data, log = compiled[stem]
    assert data[:4] == b"\x7fELF", "nvcc -cubin should produce an ELF cubin"
    entries = re.findall(r"Compiling entry function '(\w+)' for 'sm_90a'", log)
    assert entries, log
    spills = re.findall(r"(\d+) bytes spill stores", log)
    assert all(int(s) == 0 for s in spills), f"register spills in {stem}.cu:\n{log}"
    assert "serialized" not in log, f"ptxas serialized wgmma in {stem}.cu:\n{log}"


@needs_nvcc
@pytest.mark.parametrize("stem", sorted(FAMILIES))
def test_cubin_entries_are_exactly_the_configs(stem, compiled):
    _data, log = compiled[stem]
    entries = set(re.findall(r"Compiling entry function '(\w+)' for 'sm_90a'", log))
    assert entries == _expected_names(FAMILIES[stem]) | HAND_WRITTEN_ENTRIES[stem]


@needs_nvcc
def test_syntax_error_is_reported(tmp_path):
    bad = tmp_path / "bad.cu"
    bad.write_text('extern "C" __global__ void k() { this is not C++; }\n')
    with pytest.raises(build.KernelBuildError, match="nvcc failed for bad.cu"):
        build.nvcc_compile(bad, tmp_path / "bad.cubin")


@needs_nvcc
@pytest.mark.parametrize("stem", sorted(FAMILIES))
def test_wrong_shared_memory_size_fails_compilation(stem, tmp_path):
    """The generated static_assert catches a launcher whose smem_bytes disagrees with the kernel."""
    family = FAMILIES[stem]
    inst = family.instances()[0]
    member, prop, value = inst.checks[0]
    bad = dataclasses.replace(inst, checks=((member, prop, value + 16), *inst.checks[1:]))
    header = tmp_path / "one_instance.cuh"
    header.write_text(gen_instances.render(family, [bad]))
    source = tmp_path / f"{stem}_wrong.cu"
    source.write_text(f'#define VK_{stem.upper()}_INSTANCES "{header}"\n#include "{stem}.cu"\n')
    with pytest.raises(build.KernelBuildError, match=r"smem_bytes != SMEM_BYTES"):
        build.nvcc_compile(source, tmp_path / "wrong.cubin")


@needs_nvcc
@pytest.mark.parametrize("dtype", ["float8_e4m3fn", "float32"])
def test_a_wgmma_type_whose_launcher_numbers_disagree_fails_compilation(dtype, tmp_path):
    """Each generated static_assert of a tile of another type (8-bit: two metadata words a slice and 128-deep slices;
    tf32: 32-deep slices) catches the launcher's number off by one slice's worth, each number in turn."""
    family = FAMILIES["wgmma_sp"]
    inst = next(i for i in family.instances() if i.name == WgmmaSpGemm.CONFIGS["64x16"].kernel_name(dtype))
    header = tmp_path / "one_instance.cuh"
    source = tmp_path / "wgmma_sp_wrong.cu"
    source.write_text(f'#define VK_WGMMA_SP_INSTANCES "{header}"\n#include "wgmma_sp.cu"\n')
    checks = [member for member, _, _ in inst.checks]
    assert {"SMEM_BYTES", "BM", "BK"} <= set(checks)
    for check in checks:
        bad = dataclasses.replace(inst, checks=tuple((member, prop, value + (64 if member == check else 0))
                                                     for member, prop, value in inst.checks))
        header.write_text(gen_instances.render(family, [bad]))
        with pytest.raises(build.KernelBuildError, match=rf"{inst.name}: WgmmaSpConfig.smem_bytes != SMEM_BYTES"):
            build.nvcc_compile(source, tmp_path / "wrong.cubin")
    header.write_text(gen_instances.render(family, [inst]))     # the same instance with the right numbers builds
    build.nvcc_compile(source, tmp_path / "right.cubin")


def _own_headers(path, kernel_dir) -> set[str]:
    """The kernels' own headers that a source includes, directly or through another of them."""
    found = set()
    for name in re.findall(r'^#include "([\w.]+)"', path.read_text(), re.M):
        if name not in found and (kernel_dir / name).is_file():
            found |= {name} | _own_headers(kernel_dir / name, kernel_dir)
    return found


def test_both_warp_tiled_kernels_build_on_the_shared_header():
    for stem in ("mma_sp", "mma_dense"):
        assert "warp_tiled.cuh" in _own_headers(build.KERNEL_DIR / f"{stem}.cu", build.KERNEL_DIR), stem


@pytest.mark.parametrize("stem", [p.stem for p in build.kernel_sources()])
def test_a_change_to_any_header_a_source_includes_changes_its_cache_key(stem, tmp_path, monkeypatch):
    """A cached cubin is never reused after an edit to a header its source includes (the shared warp_tiled.cuh
    among them)."""
    import shutil
    kernels = tmp_path / "kernels"
    shutil.copytree(build.KERNEL_DIR, kernels)
    monkeypatch.setattr(build, "KERNEL_DIR", kernels)
    source = kernels / f"{stem}.cu"
    headers = _own_headers(source, kernels)
    assert headers, f"{stem}.cu includes none of the kernels' headers"
    for name in sorted(headers):
        before = build._digest(source, "flags")
        (kernels / name).write_text((kernels / name).read_text() + "// edited\n")
        assert build._digest(source, "flags") != before, name


def test_generated_wgmma_header_is_current():
    assert gen_wgmma_ops.HEADER.read_text() == gen_wgmma_ops.render(), \
        "run: python -m vkcoop.cuda.gen_wgmma_ops"


@pytest.mark.parametrize("stem", sorted(FAMILIES))
def test_generated_instance_header_is_current(stem):
    family = FAMILIES[stem]
    assert family.header.read_text() == gen_instances.render(family), "run: python -m vkcoop.cuda.gen_instances"


@pytest.mark.parametrize("stem", sorted(FAMILIES))
def test_every_config_has_one_instance_and_vice_versa(stem):
    """Read as text: the committed header instantiates exactly the configs' kernel names, and the .cu
    includes it and defines no other entry point besides the hand-written ones."""
    family = FAMILIES[stem]
    listed = re.findall(r"^VK_\w+_ENTRY\w*\((\w+),", family.header.read_text(), re.M)
    assert len(listed) == len(set(listed)), "a kernel name is instantiated twice"
    assert set(listed) == _expected_names(family)
    source = (build.KERNEL_DIR / f"{stem}.cu").read_text()
    assert f'"{family.header.name}"' in source
    by_hand = set(re.findall(r'^extern "C" __global__ void (?:__\w+\([^)]*\) )*(\w+)\(', source, re.M))
    assert by_hand == HAND_WRITTEN_ENTRIES[stem]
