"""The dense mma.sync kernel and the capped paths: configuration rules, Vulkan's limits, the machine code (with
nvcc), and the results bit for bit on exact inputs (on a GPU)."""
import dataclasses

import numpy as np
import pytest

from vkcoop.cuda import build
from vkcoop.cuda.configs import MmaDenseConfig, MmaSpConfig
from vkcoop.cuda.dense import K_MULTIPLE, MmaDenseGemm
from vkcoop.cuda.gemm import MmaSpGemm
from vkcoop.cuda.mma_sync_paths import MmaSpCapPath, MmaSyncCapPath, MmaSyncPath, run_environment
from vkcoop.cuda.vulkan_cap import RECORDED_REPORT, CapUnavailable, VulkanCap, read_cap, recorded_cap
from vkcoop.gemm.path import GemmProblem

H100 = recorded_cap()
OPT_IN = 232448   # the H100's sharedMemPerBlockOptin (227 KB)


def problem(m, n, k, dtype="fp16"):
    return GemmProblem(dtype, "square", m, n, k)


# ---------------------------------------------------------------- Vulkan's limits

def test_the_recorded_h100_limits():
    assert (H100.shared_memory, H100.reserved, H100.shader_share, H100.max_workgroup) == (49152, 8192, 40960, 256)
    assert H100.granularity["fp16"][256] == (32, 32, 16) and H100.granularity["bf16"][128] == (32, 16, 16)
    assert H100.source == str(RECORDED_REPORT)


@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
def test_every_capped_tile_is_within_the_limits_and_no_other_tile_is_over_them_by_shared_memory(dtype):
    for key in MmaDenseGemm.CAP_KEYS:
        assert H100.admits(MmaDenseGemm.CONFIGS[key], dtype) == (True, "within 49152 bytes and 256 invocations")
    over = [k for k, c in MmaDenseGemm.CONFIGS.items() if k not in MmaDenseGemm.CAP_KEYS]
    assert over and all(not H100.admits(MmaDenseGemm.CONFIGS[k], dtype)[0] for k in over)


def test_each_limit_refuses_a_tile_past_it():
    fits = MmaDenseGemm.CONFIGS["128x128k32s3"]
    assert fits.total_smem_bytes == 49152
    cases = [(dataclasses.replace(fits, stages=4), "65536 bytes of shared memory, above Vulkan's 49152"),
             (dataclasses.replace(fits, warps_m=4, stages=2), "512 threads, above Vulkan's 256 invocations"),
             (dataclasses.replace(fits, bn=112, stages=2), "not a multiple of the table's 32/32/16 at 256"),
             (dataclasses.replace(fits, warps_m=3, warps_n=2, stages=2), "no fp16 row of 192 invocations")]
    for config, why in cases:
        ok, reason = H100.admits(config, "fp16")
        assert not ok and why in reason, reason


def test_the_split_kernels_flag_counts_against_the_cap():
    split = MmaDenseGemm.CONFIGS["128x32k64s2w3"]
    assert split.total_smem_bytes == split.smem_bytes + 128
    too_big = dataclasses.replace(split, bk=32, stages=10)   # 10 * 160 * 64 = 102400
    assert not H100.admits(too_big, "fp16")[0]
    exactly = MmaDenseConfig(128, 64, 64, 4, 2, 2, per_sm=2)  # 49152 + 128
    assert "49280 bytes" in H100.admits(exactly, "fp16")[1]


def test_the_twin_of_the_vulkan_dense_seed():
    """128:128x128x64u8g4w2x5c: 128 invocations, a 128x128 tile, groups of 4 row tiles; its twin holds the same
    tile in 49,152 bytes."""
    twin = MmaDenseGemm.CONFIGS[MmaDenseGemm.TWIN_KEY]
    assert (twin.threads, twin.bm, twin.bn, twin.group_m) == (128, 128, 128, 4)
    assert MmaDenseGemm.TWIN_KEY in MmaDenseGemm.CAP_KEYS and twin.total_smem_bytes <= H100.shared_memory


def test_the_cap_round_trips_through_json_and_a_bad_report_is_one_error(tmp_path):
    assert VulkanCap.from_dict(H100.to_dict()) == H100
    assert H100.to_dict()["shader_share"] == 40960
    bad = tmp_path / "report.json"
    bad.write_text("{not json")
    with pytest.raises(CapUnavailable, match="cannot read Vulkan's limits"):
        recorded_cap(bad)


def test_without_a_coopmat2_driver_the_cap_is_the_recorded_one():
    # here Vulkan is absent or a CPU device without VK_NV_cooperative_matrix2: the driver's answer is refused
    cap = read_cap()
    assert cap.source in ("vulkan driver", str(RECORDED_REPORT))
    if cap.source == "vulkan driver":
        assert any(cap.granularity.values())


# ---------------------------------------------------------------- configurations

def test_supports_names_what_it_refuses():
    path = MmaDenseGemm()
    assert path.supports(100, 3, 24, "float16")[0]             # any M and N, ragged tiles
    ok, why = path.supports(64, 64, 20, "bfloat16")
    assert not ok and "K=20" in why and str(K_MULTIPLE) in why
    ok, why = path.supports(64, 64, 64, "float32")
    assert not ok and "float32" in why
    assert not path.supports(0, 64, 64, "float16")[0]
    with pytest.raises(ValueError, match="unknown mma.sync config"):
        MmaDenseGemm("128x128")


def test_auto_runs_split_k_for_skinny_problems_only():
    assert MmaDenseGemm()._pick(8192, 8192, 8192) == MmaDenseGemm.CONFIGS[MmaDenseGemm.AUTO_ORDER[0]]
    for n in (1, 16, 17, 32, 64):
        picked = MmaDenseGemm()._pick(8192, n, 8192)
        assert picked.per_sm and picked.bn >= n
    assert not MmaDenseGemm()._pick(8192, 65, 8192).per_sm
    assert MmaDenseGemm.auto_key(32, MmaDenseGemm.CAP_KEYS, MmaDenseGemm.CAP_AUTO_ORDER) == "128x32k64s2w3"


def test_split_counts_worked_by_hand():
    # 128x32 tiles at 8192x32x8192: 64 tiles of 128 slices of 64; 132 SMs x 3 = 396 CTAs, 396 // 64 = 6 splits,
    # 22 slices each (the last 18). Ragged 1000x30x1000: 8 tiles of 16 slices (the last 40 deep), 396 // 8 = 49,
    # at most 16 splits of one slice.
    cfg = MmaDenseGemm.CONFIGS["128x32k64s2w3"]
    assert cfg.splits(8192, 32, 8192, 132) == 6
    assert cfg.tiles(1000, 30) == 8 and cfg.splits(1000, 30, 1000, 132) == 16
    assert cfg.partial_floats(1000, 30, 16) == 16 * 8 * 128 * 32
    assert MmaDenseGemm.CONFIGS["128x32k64s4w2cs"].partial_floats(8192, 32, 4) == 0
    assert MmaDenseGemm.CONFIGS["128x256k32s4"].splits(8192, 8192, 8192, 132) == 1


def test_mma_sp_split_counts_are_unchanged():
    # the helper both kernels share now: the mma.sp worked examples of test_cuda_gemm, once more
    cfg = MmaSpGemm.CONFIGS["128x32w4"]
    assert (cfg.splits(4096, 32, 4096, 132), cfg.splits(8192, 32, 8192, 132), cfg.splits(256, 32, 192, 132)) == \
        (16, 8, 3)
    assert MmaSpConfig(128, 32, 4, 1, 3, per_sm=4).total_smem_bytes == 39936 + 128


# ---------------------------------------------------------------- paths

def test_the_capped_path_offers_only_tiles_within_the_limits():
    path = MmaSyncCapPath("cuda-mma.sync-cap", None, 0.0, OPT_IN, H100)
    for dtype in ("fp16", "bf16"):
        square = path.configs(problem(8192, 8192, 8192, dtype), tune=True)
        assert square[0] == MmaDenseGemm.CAP_AUTO_ORDER[0] and set(square) <= set(MmaDenseGemm.CAP_KEYS)
        assert path.configs(problem(8192, 32, 8192, dtype), tune=False) == ["128x32k64s2w3"]
    free = MmaSyncPath("cuda-mma.sync", None, 0.0, OPT_IN)
    offered = free.configs(problem(8192, 8192, 8192), tune=True)
    assert offered[0] == MmaDenseGemm.AUTO_ORDER[0] and len(offered) > len(square)
    small_block = MmaSyncPath("cuda-mma.sync", None, 0.0, 100_000)
    assert all(MmaDenseGemm.CONFIGS[k].total_smem_bytes <= 100_000
               for k in small_block.configs(problem(8192, 8192, 8192), tune=True))


def test_the_capped_mma_sp_path():
    path = MmaSpCapPath("cuda-mma.sp-cap", None, 0.0, OPT_IN, H100)
    assert path.configs(problem(8192, 8192, 8192), tune=False) == ["128x64p2t256"]
    assert path.configs(problem(8192, 32, 8192), tune=False) == ["128x32w4s3"]
    for key in path.configs(problem(8192, 8192, 8192), tune=True):
        assert MmaSpGemm.CONFIGS[key].total_smem_bytes <= 49152
    ok, why = path.supports(problem(8192, 24, 8192))
    assert ok is False and "within NVIDIA H100 80GB HBM3's Vulkan limits" in why
    assert run_environment([path])["vulkan_cap"]["shared_memory"] == 49152
    assert run_environment([MmaSyncPath("cuda-mma.sync", None, 0.0, OPT_IN)]) == {}


# ---------------------------------------------------------------- the launch (a stand-in module and driver)

@pytest.fixture
def stand_in_kernels(monkeypatch):
    """launches.module and the driver's cluster occupancy without a GPU: ``capacity`` (cluster size -> clusters at
    once, 1000 unless set) answers cuOccupancyMaxActiveClusters; ``loaded`` records (source, name, smem)."""
    from vkcoop.cuda import driver, launches
    state = {"loaded": [], "capacity": {}}

    class StandInModule:
        def __init__(self, source):
            self.source = source

        def function(self, name, dynamic_smem=0):
            state["loaded"].append((self.source, name, dynamic_smem))
            return f"function {name}"

    monkeypatch.setattr(launches, "module", StandInModule)
    monkeypatch.setattr(driver, "max_active_clusters",
                        lambda func, cluster, threads, smem, name: state["capacity"].get(cluster, 1000))
    return state


def _values(launch):
    return [arg.value for arg in launch.args]


def test_the_dense_plan_passes_what_the_kernel_takes(stand_in_kernels):
    """Worked by hand from the kernel's entry points (kernels/mma_dense.cu): a, b_t, c, [partials, arrivals], M, N,
    K, [splits]; one CTA a (tile, split), a cluster of the splits of a tile where they sum on chip."""
    from vkcoop.cuda.launches import mma_dense_plan
    a, b_t, c, partials, arrivals = 0x1000, 0x2000, 0x3000, 0x4000, 0x5000
    # split-K in global memory, ragged 1000x30x1000: 8 tiles of 16 slices, 16 splits of one (test above)
    plan = mma_dense_plan(MmaDenseGemm.CONFIGS["128x32k64s2w3"], "float16", 1000, 30, 1000, 132)
    launch = plan.launch(a, b_t, c, partials, arrivals)
    assert plan.split_buffers and (plan.tiles, plan.splits, plan.partial_floats) == (8, 16, 16 * 8 * 128 * 32)
    assert _values(launch) == [a, b_t, c, partials, arrivals, 1000, 30, 1000, 16]
    assert (launch.name, launch.grid, launch.threads, launch.smem, launch.cluster) == \
        ("mma_dense_f16_128x32_k64_8x1_s2_g8_sk", 128, 256, 40960, 1)
    assert stand_in_kernels["loaded"] == [("mma_dense", launch.name, 40960)]
    # whole K, 200x136x328 in 2 x 2 tiles of the Vulkan seed's twin: no scratch, whatever is given
    plan = mma_dense_plan(MmaDenseGemm.CONFIGS["128x128k32s3t128g4"], "bfloat16", 200, 136, 328, 132)
    launch = plan.launch(a, b_t, c, partials, arrivals)
    assert not plan.split_buffers and _values(launch) == [a, b_t, c, 200, 136, 328]
    assert (launch.name, launch.grid, launch.threads, launch.smem, launch.cluster) == \
        ("mma_dense_bf16_128x128_k32_2x2_s3_g4", 4, 128, 49152, 1)
    # cluster sum, 1000x30x1000: 16 slices, 8 splits of 2, one cluster of 8 a tile
    cluster_cfg = MmaDenseGemm.CONFIGS["128x32k64s4w2cs"]
    launch = mma_dense_plan(cluster_cfg, "float16", 1000, 30, 1000, 132).launch(a, b_t, c)
    assert _values(launch) == [a, b_t, c, 1000, 30, 1000] and (launch.grid, launch.cluster) == (64, 8)
    assert "splits=8 (one cluster a tile)" in launch.description
    # a device that runs 7 clusters of 8 at once (< 8 tiles): 7 at most, 16 slices evened out to 6 splits of 3
    stand_in_kernels["capacity"] = {8: 7}
    launch = mma_dense_plan(cluster_cfg, "float16", 1000, 30, 1000, 132).launch(a, b_t, c)
    assert (launch.grid, launch.cluster) == (48, 6)


def _entry_points() -> dict[str, tuple[int, list]]:
    """{entry point: (block size, the ctypes type of each parameter)}, read from the generated instances header and
    the entry macros of kernels/mma_dense.cu."""
    import ctypes
    import re
    kernel = (build.KERNEL_DIR / "mma_dense.cu").read_text()
    macros = {macro: [ctypes.c_void_p if "*" in p else ctypes.c_int
                      for p in params.replace("\\", " ").split(",")]
              for macro, params in re.findall(r"#define (VK_MMA_DENSE\w*_ENTRY)\(.*?\bNAME\(([^)]*)\)", kernel, re.S)}
    assert set(macros) == {"VK_MMA_DENSE_ENTRY", "VK_MMA_DENSE_SPLIT_ENTRY"}
    header = (build.KERNEL_DIR / "mma_dense_instances.cuh").read_text()
    return {name: (int(threads), macros[macro])
            for macro, name, threads in re.findall(r"^(VK_MMA_DENSE\w*_ENTRY)\((\w+), (\d+),", header, re.M)}


@pytest.mark.parametrize("key", list(MmaDenseGemm.CONFIGS))
def test_every_dense_launch_matches_its_entry_point(stand_in_kernels, key):
    import ctypes
    entries = _entry_points()
    cfg = MmaDenseGemm.CONFIGS[key]
    for dtype in ("float16", "bfloat16"):
        from vkcoop.cuda.launches import mma_dense_plan
        launch = mma_dense_plan(cfg, dtype, 1000, 30, 1000, 132).launch(1, 2, 3, 4, 5)
        threads, types = entries[launch.name]
        assert launch.threads == threads and [type(arg) for arg in launch.args] == types
        assert types.count(ctypes.c_void_p) == (5 if cfg.per_sm and not cfg.cluster_sum else 3)


def test_bind_runs_the_plan_on_the_tensors(stand_in_kernels, monkeypatch):
    """MmaDenseGemm.bind on a stand-in torch: B copied column-major once, the split buffers allocated, and the
    launch given their addresses, the problem and the splits."""
    import fake_torch
    from vkcoop.cuda import driver
    fake_torch.install(monkeypatch)
    launched = []
    monkeypatch.setattr(driver, "launch", lambda func, grid, block, smem, stream, args, name, cluster=1:
                        launched.append((func, grid, block, smem, stream, [arg.value for arg in args], name, cluster)))
    rng = np.random.default_rng(0)
    a = fake_torch.Tensor(rng.standard_normal((1000, 1000)).astype(np.float16))
    b = fake_torch.Tensor(rng.standard_normal((1000, 30)).astype(np.float16))
    op = MmaDenseGemm("128x32k64s2w3").bind(a, b)
    c = op()
    kept_a, b_t, partials, arrivals = op.keep
    assert kept_a is a and np.array_equal(b_t.array, b.array.T) and b_t.is_contiguous()
    assert partials.array.shape == (16 * 8 * 128 * 32,) and partials.dtype is fake_torch.float32
    assert arrivals.dtype is fake_torch.int32 and not arrivals.array.any() and arrivals.array.shape == (8,)
    name = "mma_dense_f16_128x32_k64_8x1_s2_g8_sk"
    assert c.shape == (1000, 30) and launched == [
        (f"function {name}", (128,), (256,), 40960, 0,
         [a.data_ptr(), b_t.data_ptr(), c.data_ptr(), partials.data_ptr(), arrivals.data_ptr(), 1000, 30, 1000, 16],
         name, 1)]
    assert op.description == f"{name} grid=128 splits=16"


# ---------------------------------------------------------------- machine code (nvcc and nvdisasm)

NVCC = build.find_nvcc()


@pytest.fixture(scope="module")
def dense_listing(tmp_path_factory):
    from vkcoop.inspect import elf, sass
    if NVCC is None or sass.find_nvdisasm() is None:
        pytest.skip("needs nvcc and nvdisasm")
    from support import kernel_cubin, kernel_listing
    data, _log = kernel_cubin(tmp_path_factory, "mma_dense")
    listing = kernel_listing(tmp_path_factory, "mma_dense")
    return {k.name: k for k in sass.parse_listing(listing)}, {k.name: k for k in elf.parse(data).kernels}


def _configs_and_names():
    for key, cfg in MmaDenseGemm.CONFIGS.items():
        for dtype in ("float16", "bfloat16"):
            yield key, cfg, cfg.kernel_name(dtype)


@pytest.mark.parametrize("key,cfg,name", list(_configs_and_names()), ids=lambda v: v if isinstance(v, str) else "")
def test_the_machine_code_is_mma_sync_through_ldmatrix_and_cp_async_without_local_memory(key, cfg, name,
                                                                                      dense_listing):
    from vkcoop.inspect.loops import find_loops, mma_loops
    from vkcoop.inspect.sass import instruction_mix
    listings, kernels = dense_listing
    mix = instruction_mix(listings[name].mnemonics)
    hmma = "HMMA.16816.F32.BF16" if "bf16" in name else "HMMA.16816.F32"
    assert set(mix.mma) == {hmma}, mix.mma
    assert mix.shared["LDSM"] and mix.async_copies and not mix.spills, mix.to_dict()
    assert all(form.startswith("LDGSTS.E.BYPASS") for form in mix.async_copies)   # cp.async.cg, 16 bytes
    assert kernels[name].frame_size == 0 and kernels[name].registers <= 255
    loop, = mma_loops(find_loops(listings[name]))
    warp_m, warp_n = cfg.warp_tile
    assert loop.mma == (warp_m // 16) * (warp_n // 8) * (cfg.bk // 16)   # one slice per pass
    assert loop.mix.opcodes["BAR"] == 1


def test_static_shared_memory_is_what_the_configs_count(dense_listing):
    _, kernels = dense_listing
    reserve = {kernels[name].shared_bytes - cfg.static_smem_bytes for _key, cfg, name in _configs_and_names()}
    assert len(reserve) == 1, reserve   # the same system reserve in every kernel's section, nothing else


# ---------------------------------------------------------------- on the GPU

@pytest.fixture
def cuda_ready():
    """Skips the test, saying why, where the CUDA paths cannot run here."""
    from vkcoop.cuda import available
    ok, why = available()
    if not ok:
        pytest.skip(why)


def _exact(m, n, k, dtype, seed):
    """A and B of eighths in [-1, 1]: every product a multiple of 1/64, every fp32 partial sum exact."""
    from vkcoop.gemm.types import DTYPES
    rng = np.random.default_rng(seed)
    a, b = (rng.integers(-8, 9, size=shape).astype(np.float32) / 8 for shape in ((m, k), (k, n)))
    return a.astype(DTYPES[dtype]), b.astype(DTYPES[dtype])


def _mismatches(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """Where two results differ in value (bit for bit but for the sign of zero)."""
    assert got.shape == want.shape
    return np.argwhere(got.astype(np.float64) != want.astype(np.float64))


def test_the_comparison_catches_one_wrong_element():
    want = np.arange(12, dtype=np.float16).reshape(3, 4)
    got = want.copy()
    assert not _mismatches(got, want).size
    got[2, 1] = np.nextafter(got[2, 1], np.float16(100))
    assert _mismatches(got, want).tolist() == [[2, 1]]


def _bit_exact(key, m, n, k, dtype):
    import torch
    from vkcoop.cuda.gemm import to_torch
    from vkcoop.gemm.exact import reference_gemm
    a, b = _exact(m, n, k, dtype, seed=m + n + k)
    op = MmaDenseGemm(key).bind(to_torch(a), to_torch(b))
    got = op()
    torch.cuda.synchronize()
    host = got.view(torch.int16).cpu().numpy().view(a.dtype)
    bad = _mismatches(host, reference_gemm(a, b, a.dtype))
    assert not bad.size, f"{key} {m}x{n}x{k} {dtype}: {len(bad)} of {m * n} differ, first at {tuple(bad[0])}"
    return op


EDGE_SHAPES = [(256, 256, 256), (200, 136, 328), (129, 1, 40), (64, 33, 8192 + 8), (513, 770, 96)]


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
@pytest.mark.parametrize("key", list(MmaDenseGemm.CONFIGS))
def test_every_tile_is_bit_exact_on_whole_and_ragged_problems(key, dtype, cuda_ready):
    for m, n, k in EDGE_SHAPES:
        _bit_exact(key, m, n, k, dtype)


@pytest.mark.cuda
@pytest.mark.parametrize("key", ["128x32k64s2w3", "128x32k64s4w3", "128x32k64s4w2cs"])
def test_a_split_launch_repeats_bit_for_bit(key, cuda_ready):
    import torch
    op = _bit_exact(key, 1024, 32, 4096, "fp16")
    first = op().clone()
    for _ in range(3):
        assert torch.equal(op(), first)   # the arrival counters were left at zero, the order is fixed


@pytest.mark.cuda
@pytest.mark.parametrize("name", ["cuda-mma.sync", "cuda-mma.sync-cap", "cuda-mma.sp-cap"])
def test_the_bench_paths_pass_the_bench_check(name, cuda_ready):
    from vkcoop.cuda.mma_sync_paths import all_cuda_paths
    from vkcoop.gemm.path import GemmOperands, check_bound
    path, = all_cuda_paths([name], warmup_seconds=0.0, cap=H100)
    for shape in ((512, 512, 1024), (1024, 32, 2048)):
        operands = GemmOperands.make(problem(*shape))
        for config in path.configs(operands.problem, tune=True):
            bound = path.bind(operands, config)
            failure, _ = check_bound(bound, operands)
            bound.release()
            assert failure is None, (config, failure)
    path.close()
