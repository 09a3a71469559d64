"""The CUDA side of ``vkcoop bench peak`` (vkcoop.cuda.peak, kernels/peak.cu): work counts and check values
without a GPU, the kernel names in the cubin this machine's nvcc builds, and (marked cuda) the measurement."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
from support import child_env

from vkcoop.cuda import build
from vkcoop.cuda import peak as cuda_peak


def _form(form: str, types: str = "fp16->fp32"):
    return next(f for f in cuda_peak.FORMS if f.form == form and f.types == types)


def test_work_counts_instructions_times_dense_equivalent_shape():
    mma = _form("mma.sync")
    # 8 warps per block, 8 chains per warp, m16n8k16 per instruction.
    assert mma.work(grid=3, iters=5) == 3 * 8 * 5 * 8 * 2 * 16 * 8 * 16
    wgmma = _form("wgmma")
    # 2 warpgroups per block, 4 wgmma m64n256k16 per iteration.
    assert wgmma.work(grid=3, iters=5) == 3 * 2 * 5 * 4 * 2 * 64 * 256 * 16
    sparse = _form("wgmma.sp")
    assert sparse.work(grid=1, iters=1) == 2 * 4 * 2 * 64 * 256 * 32   # dense-equivalent K = 32
    assert _form("mma.sp").k == 32 and _form("mma.sp").products == 16


def test_check_values_follow_the_kernels_accumulators():
    # mma: chain j (of 8) starts at j; each of a thread's 4 elements gains `products` per instruction.
    assert _form("mma.sync").expected_sum(2) == sum(4 * (j + 2 * 16) for j in range(8))
    assert _form("mma.sync", "s8->s32").expected_sum(2) == sum(4 * (j + 2 * 32) for j in range(8))
    assert _form("mma.sp").expected_sum(3) == sum(4 * (j + 3 * 16) for j in range(8))
    # wgmma: 128 fp32 accumulators per thread from 0, 4 wgmmas per iteration.
    assert _form("wgmma").expected_sum(2) == 128 * 2 * 4 * 16
    assert _form("wgmma.sp", "bf16->fp32").expected_sum(2) == 128 * 2 * 4 * 16
    assert _form("wgmma", "tf32->fp32").expected_sum(2) == 128 * 2 * 4 * 8         # m64n256k8
    assert _form("wgmma.sp", "e4m3->fp32").expected_sum(2) == 128 * 2 * 4 * 32     # k64, half kept
    # integer accumulators sum the same way
    assert _form("wgmma.sp", "u8->s32").expected_sum(2) == 128 * 2 * 4 * 32


def test_each_ones_pattern_is_one_in_every_lane_of_its_type():
    """Independent of the table: ml_dtypes' and numpy's encodings of 1 repeated over a 32-bit register."""
    import ml_dtypes
    import numpy as np

    lanes = {"fp16": np.float16, "bf16": ml_dtypes.bfloat16, "tf32": np.float32, "e4m3": ml_dtypes.float8_e4m3fn,
             "e5m2": ml_dtypes.float8_e5m2, "s8": np.int8, "u8": np.uint8}
    for name, dtype in lanes.items():
        ones = np.ones(4 // np.dtype(dtype).itemsize, dtype=dtype)
        assert cuda_peak.ONES[name] == int(ones.view(np.uint32)[0]), name
    assert {f.types.split("->")[0] for f in cuda_peak.FORMS} == set(cuda_peak.ONES)


def test_every_wgmma_type_has_a_dense_and_a_sparse_form_with_half_the_products_kept():
    from vkcoop.bench import peak as bench_peak
    from vkcoop.cuda.wgmma_types import WGMMA_SP_TYPES

    for sparse in (False, True):
        forms = [f for f in cuda_peak.FORMS if f.form == ("wgmma.sp" if sparse else "wgmma")]
        assert len(forms) == len(WGMMA_SP_TYPES)
        for form, t in zip(forms, WGMMA_SP_TYPES.values()):
            assert (form.m, form.n, form.k) == (64, 256, t.k if sparse else t.k // 2)   # the PTX shapes
            assert form.products == t.k // 2 and t.ptx in form.kernel
    # --types accepts exactly the combinations some form runs
    cuda_types = {f.types for f in cuda_peak.FORMS}
    assert set(bench_peak.CUDA_ONLY_TYPES) == cuda_types - set(bench_peak.TYPES)


def test_every_form_names_a_kernel_of_peak_cu(tmp_path_factory):
    if build.find_nvcc() is None:
        pytest.skip("nvcc not found (PATH, $CUDA_HOME, /usr/local/cuda)")
    from support import kernel_cubin
    data, _log = kernel_cubin(tmp_path_factory, "peak")
    for name in [f.kernel for f in cuda_peak.FORMS] + ["peak_stream_read"]:
        assert name.encode() + b"\0" in data, name


#: The tensor-core instruction family of each wgmma input type in the SASS (HGMMA: 16-bit and tf32; QGMMA: fp8;
#: IGMMA: 8-bit integers), and its shape's K as the listing spells it
GMMA_FAMILY = {"fp16": "HGMMA", "bf16": "HGMMA", "tf32": "HGMMA", "e4m3": "QGMMA", "e5m2": "QGMMA", "s8": "IGMMA",
               "u8": "IGMMA"}


def test_each_wgmma_kernel_runs_its_types_instruction_in_the_machine_code(tmp_path_factory):
    """Each peak wgmma kernel issues the GMMA of its type, sparse or dense, at m64n256 and the form's K, and
    nothing else on the tensor cores; without local memory."""
    from vkcoop.inspect import sass
    if build.find_nvcc() is None or sass.find_nvdisasm() is None:
        pytest.skip("needs nvcc and nvdisasm")
    from support import kernel_listing
    listings = {k.name: k for k in sass.parse_listing(kernel_listing(tmp_path_factory, "peak"))}
    for form in (f for f in cuda_peak.FORMS if f.wgmma):
        mix = sass.instruction_mix(listings[form.kernel].mnemonics)
        family = GMMA_FAMILY[form.types.split("->")[0]] + (".SP" if form.form == "wgmma.sp" else "")
        assert {m.split(".64x")[0] for m in mix.mma} == {family}, (form.kernel, mix.mma)
        assert all(f".64x256x{form.k}" in m for m in mix.mma), (form.kernel, mix.mma)
        assert not mix.spills, form.kernel


def _cuda_or_reason():
    from vkcoop import cuda
    usable, why = cuda.available()
    return None if usable else why


_NO_CUDA = _cuda_or_reason()


@pytest.mark.cuda
@pytest.mark.skipif(_NO_CUDA is not None, reason=f"CUDA paths unavailable: {_NO_CUDA}")
def test_every_form_checks_and_times_on_the_gpu():
    rows = cuda_peak.measure(target_ms=2.0, repeats=3, megabytes=256)
    bad = [r for r in rows if r["status"] != "ok"]
    assert not bad, bad
    forms = {(r["form"], r["types"]) for r in rows if r["kind"] == "mma"}
    assert forms == {(f.form, f.types) for f in cuda_peak.FORMS}
    assert all(r["rate"] > 1.0 for r in rows)


@pytest.mark.cuda
@pytest.mark.skipif(_NO_CUDA is not None, reason=f"CUDA paths unavailable: {_NO_CUDA}")
def test_bench_peak_in_a_fresh_process_has_every_cuda_row(tmp_path):
    # A fresh process: nothing (no torch tensor) has made a CUDA context current before the module loads.
    report = tmp_path / "peak.json"
    proc = subprocess.run([sys.executable, "-m", "vkcoop", "bench", "peak", "--no-vulkan", "--target-ms", "2",
                           "--repeats", "3", "--bandwidth-mib", "256", "--json", str(report)],
                          env=child_env(), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = [r for r in json.loads(report.read_text())["rows"] if r["api"] == "CUDA"]
    assert [r for r in rows if r["status"] != "ok"] == []
    assert {(r["form"], r["types"]) for r in rows if r["kind"] == "mma"} == {(f.form, f.types) for f in cuda_peak.FORMS}
    assert {r["form"] for r in rows if r["kind"] == "bandwidth"} == {"copy", "read"}
