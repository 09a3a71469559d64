"""The CUDA 2:4 paths against an fp32 reference, and their up-front operand checks."""
import numpy as np
import pytest

import ml_dtypes
from vkcoop import sparse
from vkcoop.cuda import MmaSpGemm, ShapeError, WgmmaSpGemm, available

OK, WHY = available()
needs_cuda = pytest.mark.skipif(not OK, reason=f"CUDA paths unavailable: {WHY}")
NP_DTYPES = {"float16": np.float16, "bfloat16": ml_dtypes.bfloat16}


# ---------------------------------------------------------------- no GPU needed

@pytest.mark.parametrize("path_cls", [MmaSpGemm, WgmmaSpGemm])
def test_supports_names_the_offending_dimension(path_cls):
    path = path_cls("128x128")
    ok, reason = path.supports(256, 200, 512, "float16")
    assert not ok and "N=200" in reason and "128" in reason
    ok, reason = path.supports(256, 256, 96, "float16")
    assert not ok and "K=96" in reason and "64" in reason
    unsupported = "float32" if path_cls is MmaSpGemm else "float64"     # wgmma.sp runs float32 as tf32
    ok, reason = path.supports(256, 256, 512, unsupported)
    assert not ok and unsupported in reason
    assert path.supports(256, 256, 512, "bfloat16")[0]


WGMMA_TYPES = ["float32", "float8_e4m3fn", "float8_e5m2", "int8", "uint8"]


@pytest.mark.parametrize("dtype, bk", [("float32", 32), ("float8_e4m3fn", 128), ("float8_e5m2", 128),
                                       ("int8", 128), ("uint8", 128)])
def test_wgmma_other_types_need_k_in_their_slices(dtype, bk):
    """A slice is one 128-byte row of B: K a multiple of 128 for the 8-bit types, 32 for tf32 (float32)."""
    path = WgmmaSpGemm("128x256")
    assert path.supports(256, 512, 3 * bk, dtype)[0]
    ok, reason = path.supports(256, 512, 3 * bk + bk // 2, dtype)
    assert not ok and f"K={3 * bk + bk // 2} is not a multiple of {bk}" in reason
    assert WgmmaSpGemm()._pick(8192, 8192, 8192, dtype).kernel_name() == f"wgmma_sp_{_ptx(dtype)}_bn256_c2_s4_ws_p"


def test_a_tile_refusal_names_every_dimension_off_its_step():
    """M against the tile's rows (256 where a consumer warpgroup owns two m64 sub-tiles), N against its columns, K
    against its slice; each named once."""
    ok, reason = MmaSpGemm("128x256").supports(200, 300, 100, "float16")
    assert not ok and reason == ("mma.sp tile 128x256: M=200 is not a multiple of 128; N=300 is not a multiple of "
                                 "256; K=100 is not a multiple of 64")
    two_sub_tiles = WgmmaSpGemm("256x128")
    ok, reason = two_sub_tiles.supports(384, 128, 128, "float16")
    assert not ok and reason.endswith("M=384 is not a multiple of 256")
    assert two_sub_tiles.supports(512, 128, 128, "float16")[0]


def _ptx(dtype: str) -> str:
    return {"float32": "tf32", "float8_e4m3fn": "e4m3", "float8_e5m2": "e5m2", "int8": "s8", "uint8": "u8"}[dtype]


@pytest.mark.parametrize("dtype", WGMMA_TYPES)
def test_wgmma_other_types_run_the_auto_tiles_only(dtype):
    for key in WgmmaSpGemm.AUTO_ORDER:
        cfg = WgmmaSpGemm.CONFIGS[key]
        assert WgmmaSpGemm(key).supports(cfg.bm * 2, cfg.bn * 2, 1024, dtype)[0], key
    ok, reason = WgmmaSpGemm("256x128").supports(512, 256, 1024, dtype)
    assert not ok and reason == (f"wgmma_sp_{_ptx(dtype)}_bn128_c2_s4_m2 is not instantiated: that tile runs "
                                 "float16, bfloat16 only")
    with pytest.raises(ValueError, match="instantiated for float16 only"):
        WgmmaSpGemm.DIAGNOSTIC_CONFIGS[0].of(dtype)


def test_a_float32_a_must_be_1to2_for_the_cuda_paths():
    """tf32's wgmma.sp is 1:2: a 2:4 float32 A is refused before anything is uploaded."""
    from vkcoop.cuda import DeviceSparse
    dense = np.random.default_rng(0).standard_normal((16, 64)).astype(np.float32)
    with pytest.raises(TypeError, match=r"float32 \(tf32\) A 1:2 sparse \(vkcoop.sparse.compress_1to2\), not 2:4"):
        DeviceSparse.from_compressed(sparse.compress_2to4(dense))


@pytest.mark.parametrize("dtype", WGMMA_TYPES)
def test_wgmma_skinny_problems_of_other_types_split_k_in_their_slices(dtype):
    # 8192x16x8192 at 128x16: 64 tiles, 132 // 64 = 2 splits of K / bk / 2 slices each (64 of 128 for 8-bit types,
    # 128 of 32 for tf32); the shared memory holds two metadata words a lane per slice for the 8-bit types
    picked = WgmmaSpGemm()._pick(8192, 16, 8192, dtype)
    assert picked.per_sm and picked.bn == 16 and picked.dtype == dtype
    assert picked.splits(8192, 16, 8192, 132) == 2
    one_word = WgmmaSpGemm.CONFIGS["128x16cs"]
    assert picked.smem_bytes - one_word.smem_bytes == (0 if dtype == "float32" else 8 * 1024)


def test_auto_picks_a_tile_that_divides_the_problem():
    # K = 192 rules out the BK=128 mma.sp tile; N = 16 leaves only the small-N tiles
    assert MmaSpGemm().supports(512, 256, 192, "float16")[0]
    assert MmaSpGemm()._pick(512, 256, 192).bk == 64
    assert MmaSpGemm()._pick(512, 256, 256).bk == 128
    assert MmaSpGemm()._pick(8192, 8192, 8192).pipelined
    assert MmaSpGemm()._pick(512, 256, 192).pipelined
    assert WgmmaSpGemm()._pick(256, 16, 512).bn == 16
    assert WgmmaSpGemm()._pick(256, 512, 512).bn == 256


SPLIT_KEYS = [key for key, cfg in MmaSpGemm.CONFIGS.items() if cfg.per_sm]
MAX_CLUSTER_SPLITS = 8   # the portable thread-block cluster (CUDA programming guide)


def test_skinny_problems_pick_a_split_tile():
    for n, bn in ((16, 16), (32, 32), (64, 64), (96, 32)):
        picked = MmaSpGemm()._pick(4096, n, 4096)
        assert picked.per_sm and picked.cluster_sum and picked.bn == bn and picked.bk == 128
        assert picked.kernel_name("float16").endswith("_cs")
    assert MmaSpGemm()._pick(4096, 32, 4160).bk == 64     # K not whole 128-wide slices
    assert MmaSpGemm()._pick(4096, 8, 4096).bn == 16     # nothing divides: the last tile, refused by supports()
    assert not MmaSpGemm()._pick(8192, 8192, 8192).per_sm  # square problems run the unsplit kernels


def test_skinny_problems_pick_a_wgmma_split_tile_as_wide_as_n():
    for m, n, bn in ((8192, 16, 16), (8192, 32, 32), (8192, 64, 64), (14336, 64, 64), (4096, 96, 32),
                     (4096, 192, 64)):
        picked = WgmmaSpGemm()._pick(m, n, 4096)
        assert picked.per_sm and picked.bn == bn and picked.kernel_name("bfloat16").endswith("_cs"), (m, n)
    assert not WgmmaSpGemm()._pick(8192, 8192, 8192).per_sm


def test_wgmma_split_counts_worked_by_hand():
    # 64-wide K slices, one CTA an SM (132). 8192x64x8192 at 128x64: 64 tiles, 132 // 64 = 2 splits of 64 slices.
    # 256x16x1024 at 128x16: 2 tiles, 66 wanted, a portable cluster caps it at 8 splits of 2 slices. 128x32x704:
    # 11 slices, 8 wanted gives 2 a split, so 6 splits (the last has one). 14336x32x4096: 112 tiles, no split.
    configs = WgmmaSpGemm.CONFIGS
    assert configs["128x64cs"].splits(8192, 64, 8192, 132) == 2
    assert configs["128x16cs"].splits(256, 16, 1024, 132) == 8
    assert configs["128x32cs"].splits(128, 32, 704, 132) == 6
    assert configs["128x32cs"].splits(14336, 32, 4096, 132) == 1
    assert configs["128x256"].splits(256, 256, 1024, 132) == 1     # not a split configuration


def test_split_counts_worked_by_hand():
    # 128x32 tiles, 132 SMs x 4 = a wave of 528 CTAs. 4096x32x4096: 32 tiles, 528 // 32 = 16 splits of 64 / 16 =
    # 4 slices. 8192x32x8192: 64 tiles, 8 splits of 16 slices. 256x32x192: 2 tiles, at most 3 slices -> 3 splits.
    cfg = MmaSpGemm.CONFIGS["128x32w4"]
    assert cfg.splits(4096, 32, 4096, 132) == 16
    assert cfg.splits(8192, 32, 8192, 132) == 8
    assert cfg.splits(256, 32, 192, 132) == 3
    # 128x64 BK 128 at 384x64x2816: 3 tiles, 22 slices; 16 wanted, 2 slices each leaves 11 splits, none empty
    assert MmaSpGemm.CONFIGS["128x64k128w2"].splits(384, 64, 2816, 132) == 11
    assert MmaSpGemm.CONFIGS["128x128"].splits(4096, 128, 4096, 132) == 1


SPLIT_SHAPES = [(4096, 16, 4096, 132), (8192, 64, 8192, 132), (256, 64, 640, 132), (384, 64, 1344, 114),
                (128, 32, 64, 132), (65536, 64, 4096, 132), (1024, 32, 8192, 1)]


@pytest.mark.parametrize("key,m,n,k,sms", [
    (key, m, n, k, sms) for key in SPLIT_KEYS for m, n, k, sms in SPLIT_SHAPES
    if not (m % MmaSpGemm.CONFIGS[key].bm or n % MmaSpGemm.CONFIGS[key].bn or k % MmaSpGemm.CONFIGS[key].bk)])
def test_split_fills_one_wave_and_leaves_no_split_empty(key, m, n, k, sms):
    from vkcoop.gemm.tiles import MAX_SPLIT_K
    cfg = MmaSpGemm.CONFIGS[key]
    tiles, slices = (m // cfg.bm) * (n // cfg.bn), k // cfg.bk
    splits = cfg.splits(m, n, k, sms)
    per_split = -(-slices // splits)
    assert 1 <= splits <= min(slices, MAX_SPLIT_K)
    assert (splits - 1) * per_split < slices, "the last split would have no slice"
    assert tiles * splits <= max(tiles, sms * cfg.per_sm), "more CTAs than one wave"
    if cfg.cluster_sum:   # one portable cluster a tile, and nothing in global memory
        assert splits <= MAX_CLUSTER_SPLITS and cfg.partial_floats(m, n, splits) == 0
    else:
        assert cfg.partial_floats(m, n, splits) == splits * m * n


def test_cluster_summed_splits_are_capped_at_a_portable_cluster_worked_by_hand():
    # 128x32 BK 128 at 4096x32x4096 on 132 SMs: 32 tiles, 2 a SM fill 264 -> 8 splits of 4 slices either way;
    # 128x16 BK 128, 3 a SM: 396 // 32 = 12 splits of 32 slices would be 11 (3 slices each): a cluster takes 8 of 4
    plain, clustered = MmaSpGemm.CONFIGS["128x16k128w3"], MmaSpGemm.CONFIGS["128x16k128w3cs"]
    assert plain.splits(4096, 16, 4096, 132) == 11 and clustered.splits(4096, 16, 4096, 132) == 8
    assert MmaSpGemm.CONFIGS["128x32k128w2cs"].splits(4096, 32, 4096, 132) == 8
    # 8192x32x8192: 64 tiles, 264 // 64 = 4 splits of 16 slices, below the cap
    assert MmaSpGemm.CONFIGS["128x32k128w2cs"].splits(8192, 32, 8192, 132) == 4
    assert clustered.kernel_name("bfloat16") == "mma_sp_bf16_128x16_k128_4x1_s3_cs"
    assert plain.kernel_name("bfloat16") == "mma_sp_bf16_128x16_k128_4x1_s3_sk"


def test_cluster_splits_step_down_until_every_cluster_runs_at_once(monkeypatch):
    # 4096x32x4096, 32 tiles of 128x32: 8 splits wanted; a device that runs 31 clusters of 8 but 40 of 7 and 48 of
    # 6 gets 7 splits (32 slices: 7 of 5, the last of 2); one that runs 33 of 8 keeps 8
    from vkcoop.cuda import driver, launches
    cfg = MmaSpGemm.CONFIGS["128x32k128w2cs"]
    asked = []

    def fake(capacity):
        def active(func, cluster, threads, smem, name):
            asked.append(cluster)
            assert threads == cfg.threads and smem == cfg.smem_bytes
            return capacity[cluster]
        return active

    monkeypatch.setattr(driver, "max_active_clusters", fake({8: 31, 7: 40, 6: 48}))
    assert launches.splits_whose_clusters_fit(None, cfg, "k", 32, (4096, 32, 4096, 132), 8) == 7
    assert asked == [8, 7]
    monkeypatch.setattr(driver, "max_active_clusters", fake({8: 33}))
    assert launches.splits_whose_clusters_fit(None, cfg, "k", 32, (4096, 32, 4096, 132), 8) == 8
    monkeypatch.setattr(driver, "max_active_clusters", fake({s: 0 for s in range(2, 9)}))
    assert launches.splits_whose_clusters_fit(None, cfg, "k", 32, (4096, 32, 4096, 132), 8) == 1


def test_a_cluster_sum_without_split_k_is_refused():
    from vkcoop.cuda import gen_instances
    from vkcoop.cuda.configs import MmaSpConfig
    with pytest.raises(ValueError, match="cluster_sum adds up K splits"):
        gen_instances.mma_sp_instance(MmaSpConfig(128, 32, 4, 1, 4, cluster_sum=True), "float16", "test")


def test_a_cluster_that_does_not_divide_the_grid_is_refused_before_the_driver():
    from vkcoop.cuda import driver
    with pytest.raises(driver.CudaError, match="cluster of 4 blocks does not divide the grid's 10"):
        driver.launch(None, (10,), (128,), 0, 0, [], "probe", cluster=4)
    with pytest.raises(driver.CudaError, match="cluster of 0 blocks does not divide"):
        driver.launch(None, (8,), (128,), 0, 0, [], "probe", cluster=0)
    with pytest.raises(driver.CudaError, match=r"clusters run 1-D grids of 1-D blocks here, got grid \(8, 2\)"):
        driver.launch(None, (8, 2), (128,), 0, 0, [], "probe", cluster=4)


def test_split_k_is_refused_on_the_pipelined_kernel():
    from vkcoop.cuda import gen_instances
    from vkcoop.cuda.configs import MmaSpConfig
    with pytest.raises(ValueError, match="split-K runs the plain kernel only"):
        gen_instances.mma_sp_instance(MmaSpConfig(128, 32, 4, 1, 4, pipelined=True, per_sm=4), "float16", "test")


@pytest.mark.parametrize("path_cls", [MmaSpGemm, WgmmaSpGemm])
def test_unknown_config_rejected(path_cls):
    with pytest.raises(ValueError, match="unknown"):
        path_cls("7x7")


# ---------------------------------------------------------------- GPU

def _problem(m, n, k, dtype_name, seed=0):
    """Exactly representable inputs: every product and fp32 partial sum is exact,
    so a correct kernel matches the reference bit for bit after rounding."""
    import torch
    rng = np.random.default_rng(seed)
    values = np.array([-1.0, -0.5, -0.0, 0.0, 0.5, 1.0])
    a = rng.choice(values, size=(m, k)).astype(NP_DTYPES[dtype_name])
    b = rng.choice(values, size=(k, n)).astype(np.float32)
    comp = sparse.compress_2to4(a)
    from vkcoop.cuda import DeviceSparse
    dev = DeviceSparse.from_compressed(comp)
    # B given as a transposed view of [N][K] storage, the layout the kernels read
    b_t = torch.from_numpy(np.ascontiguousarray(b.T)).to("cuda", getattr(torch, dtype_name))
    return dev, b_t.t()


@pytest.mark.cuda
@needs_cuda
@pytest.mark.parametrize("dtype_name", ["float16", "bfloat16"])
@pytest.mark.parametrize("path_cls,config,shape", [
    (MmaSpGemm, "128x128", (256, 256, 1024)),
    (MmaSpGemm, "128x256", (128, 512, 512)),
    (MmaSpGemm, "256x128", (512, 128, 256)),
    (MmaSpGemm, "64x16", (128, 32, 1024)),
    (MmaSpGemm, "128x128k128", (256, 128, 1024)),
    (MmaSpGemm, "128x256k128", (128, 256, 640)),
    (MmaSpGemm, "256x128k128", (256, 256, 512)),
    (MmaSpGemm, "128x128k128w8", (128, 256, 512)),
    (MmaSpGemm, "256x128s4", (256, 128, 768)),
    (MmaSpGemm, "128x128k128s2", (128, 128, 640)),
    # pipelined kernels: one slice (fewer slices than stages), a few, and many
    (MmaSpGemm, "256x128k128p", (512, 256, 128)),
    (MmaSpGemm, "256x128k128p", (256, 384, 1152)),
    (MmaSpGemm, "256x128p4", (256, 256, 64)),
    (MmaSpGemm, "256x128p4", (512, 128, 1344)),
    (MmaSpGemm, "256x128p5", (256, 256, 640)),
    (MmaSpGemm, "128x256p4", (256, 512, 192)),
    (MmaSpGemm, "128x256p5", (128, 256, 1024)),
    (MmaSpGemm, "128x128k128p2", (384, 256, 896)),
    (MmaSpGemm, "128x128p4", (256, 384, 576)),
    (MmaSpGemm, "128x128p3", (128, 128, 2048)),
    (MmaSpGemm, "256x128k128pa", (512, 128, 640)),
    (MmaSpGemm, "256x128pa4", (256, 256, 128)),
    (MmaSpGemm, "128x128pa4", (256, 128, 960)),
    (MmaSpGemm, "128x256pa4", (128, 512, 512)),
    # split-K (SplitKernel): one slice per split, BK 128, uneven shares (22 slices: 11 splits of 2)
    (MmaSpGemm, "128x16w4", (256, 16, 640)),
    (MmaSpGemm, "128x32w4", (512, 32, 1024)),
    (MmaSpGemm, "128x32k128w2", (256, 32, 1152)),
    (MmaSpGemm, "128x16k128w3", (256, 16, 1152)),
    (MmaSpGemm, "128x64k128w2", (384, 64, 2816)),
    (MmaSpGemm, "64x32k128w3", (128, 32, 896)),
    (MmaSpGemm, "256x32k128w1", (512, 32, 1024)),
    # split-K summed in a cluster (ClusterSplitKernel): 8 splits of one slice, 8 of 2, uneven shares (11 of 2 slices
    # capped to 8 of 3: the last has one), BK 64, and 3 splits of 64-row tiles
    (MmaSpGemm, "128x32k128w2cs", (256, 32, 1024)),
    (MmaSpGemm, "128x16k128w3cs", (256, 16, 2048)),
    (MmaSpGemm, "128x64k128w2cs", (384, 64, 2816)),
    (MmaSpGemm, "128x32w4cs", (512, 32, 1024)),
    (MmaSpGemm, "64x32k128w3cs", (128, 32, 384)),
    (WgmmaSpGemm, "128x256", (256, 512, 1024)),
    (WgmmaSpGemm, "128x128", (128, 256, 768)),
    (WgmmaSpGemm, "64x16", (192, 16, 1024)),
    (WgmmaSpGemm, "128x16", (256, 32, 1024)),
    (WgmmaSpGemm, "256x128", (512, 256, 1024)),
    (WgmmaSpGemm, "256x128s5", (256, 384, 640)),
    (WgmmaSpGemm, "256x128s6", (768, 128, 512)),
    # wgmma.sp split-K summed in a cluster: 2 tiles split 8 ways (2 slices each), uneven shares (11 slices in 6
    # splits of 2: the last has one), 4 tiles of 3 slices each, and 6 tiles across N of 16 slices each
    (WgmmaSpGemm, "128x16cs", (256, 16, 1024)),
    (WgmmaSpGemm, "128x32cs", (128, 32, 704)),
    (WgmmaSpGemm, "128x64cs", (512, 64, 192)),
    (WgmmaSpGemm, "128x64cs", (256, 192, 1024)),
])
def test_kernel_matches_reference_bit_exact(path_cls, config, shape, dtype_name):
    import torch
    from vkcoop.cuda import compare, reference
    m, n, k = shape
    a, b = _problem(m, n, k, dtype_name, seed=m + n + k)
    c = path_cls(config).bind(a, b)()
    torch.cuda.synchronize()
    ref = reference(a, b)
    assert c.shape == (m, n) and c.dtype == getattr(torch, dtype_name)
    stats = compare(c, ref)
    assert stats["exact_fraction"] == 1.0, stats


@pytest.mark.cuda
@needs_cuda
@pytest.mark.parametrize("key", ["128x64k128w2", "128x32k128w2", "128x64k128w2cs"])
def test_split_kernel_repeats_and_leaves_its_counters_at_zero(key):
    """The last CTA of each tile puts the tile's counter back to 0: a second launch must write C again (C is
    poisoned in between), bit for bit the same, and leave the counters as it found them. A cluster-summed split
    keeps no counters: it must repeat bit for bit all the same, and match the split that sums in global memory."""
    import torch
    from vkcoop.cuda import compare, reference
    a, b = _problem(384, 64, 2816, "float16", seed=7)
    op = MmaSpGemm(key).bind(a, b)
    first = op().clone()
    for _ in range(3):
        c = op()
        c.fill_(float("nan"))
        c = op()
        torch.cuda.synchronize()
        assert torch.equal(c, first)
    assert compare(first, reference(a, b))["exact_fraction"] == 1.0
    if MmaSpGemm.CONFIGS[key].cluster_sum:
        assert len(op.keep) == 2 and "cluster" in op.description
        assert torch.equal(first, MmaSpGemm(key[:-2]).bind(a, b)())
        return
    arrivals = op.keep[-1]
    assert arrivals.dtype == torch.int32 and int(arrivals.abs().sum()) == 0


@pytest.mark.cuda
@needs_cuda
@pytest.mark.parametrize("key", ["128x16cs", "128x64cs"])
def test_wgmma_split_k_repeats_bit_for_bit_and_matches_the_unsplit_kernel(key):
    """wgmma.sp split-K adds its partials in split order whichever CTA finishes first: launches repeat bit for bit
    (C poisoned in between), split several ways, and equal the unsplit 128x16 kernel, whose fp32 sum runs in K
    order: the partial sums of exact inputs are exact, so any order gives the same bits."""
    import torch
    from vkcoop.cuda import compare, reference
    a, b = _problem(256, 64, 4096, "float16", seed=11)
    op = WgmmaSpGemm(key).bind(a, b)
    assert "splits=" in op.description and "splits=1 " not in op.description
    first = op().clone()
    for _ in range(3):
        op().fill_(float("nan"))
        c = op()
        torch.cuda.synchronize()
        assert torch.equal(c, first)
    assert compare(first, reference(a, b))["exact_fraction"] == 1.0
    assert torch.equal(first, WgmmaSpGemm("128x16").bind(a, b)())


@pytest.mark.cuda
@needs_cuda
@pytest.mark.parametrize("dtype_name", ["float16", "bfloat16"])
def test_baselines_pass_the_check(dtype_name):
    from vkcoop.cuda import CublasGemm, CuSparseLtGemm, compare, passes, reference
    a, b = _problem(256, 256, 512, dtype_name, seed=3)
    ref = reference(a, b)
    for path in (CuSparseLtGemm(), CublasGemm()):
        ok, why = path.supports(256, 256, 512, a.dtype)
        if not ok:
            pytest.skip(why)
        stats = compare(path.bind(a, b)(), ref)
        assert passes(stats, a.dtype), (path.name, stats)


@pytest.mark.cuda
@needs_cuda
def test_bad_operands_raise_before_launch():
    import torch
    a, b = _problem(128, 128, 256, "float16")
    path = MmaSpGemm("128x128")
    with pytest.raises(ShapeError, match="K=128 rows"):
        path.bind(a, b[:128])
    with pytest.raises(ShapeError, match="dtype mismatch"):
        path.bind(a, b.to(torch.bfloat16))
    with pytest.raises(ShapeError, match="CUDA device"):
        path.bind(a, b.cpu())
    with pytest.raises(ShapeError, match="N=48"):
        WgmmaSpGemm("128x128").bind(a, b[:, :48])
    with pytest.raises(TypeError, match="DeviceSparse"):
        path.bind(a.dense, b)


def _error_locality(c, ref, bm, bn) -> str:
    """Where wrong results sit inside a CTA tile: fraction wrong per 16-row slab and per 8-column slab."""
    wrong = (c.float() != ref.to(c.dtype).float()).cpu().numpy()
    m, n = wrong.shape
    tiles = wrong.reshape(m // bm, bm, n // bn, bn)
    rows = tiles.mean(axis=(0, 2, 3)).reshape(bm // 16, 16).mean(axis=1)
    cols = tiles.mean(axis=(0, 1, 2)).reshape(bn // 8, 8).mean(axis=1)
    return (f"wrong per 16-row slab: {np.round(rows, 2).tolist()}; "
            f"per 8-col slab: {np.round(cols, 2).tolist()}")


@pytest.mark.cuda
@needs_cuda
@pytest.mark.parametrize("config", WgmmaSpGemm.DIAGNOSTIC_CONFIGS, ids=lambda c: c.kernel_name("float16"))
def test_wgmma_variants_bit_exact(config):
    """Extra wgmma.sp instantiations (BN x consumer warpgroups x setmaxnreg) that localise layout bugs."""
    _assert_fp16_exact(config, 2 * config.bm, 2 * config.bn, 512, seed=11)


def _assert_fp16_exact(config, m, n, k, seed):
    """``config``'s kernel on an exact fp16 problem of M x N x K: every output bit-exact."""
    import torch
    from vkcoop.cuda import compare, reference
    a, b = _problem(m, n, k, "float16", seed=seed)
    c = WgmmaSpGemm(config).bind(a, b)()
    torch.cuda.synchronize()
    ref = reference(a, b)
    stats = compare(c, ref)
    assert stats["exact_fraction"] == 1.0, (stats, _error_locality(c, ref, config.bm, config.bn))


@pytest.mark.cuda
@needs_cuda
@pytest.mark.parametrize("config", [c for c in (*WgmmaSpGemm.CONFIGS.values(), *WgmmaSpGemm.DIAGNOSTIC_CONFIGS)
                                    if c.persistent], ids=lambda c: c.kernel_name("float16"))
def test_a_persistent_wgmma_walks_more_tiles_than_sms_bit_exact(config):
    """256 tiles on at most 132 SMs: every CTA runs two tiles or more, the ring's slice count running on across them
    (a wrong phase or a slot released twice shows as wrong tiles or a hang)."""
    import torch
    m, n = 16 * config.bm, 16 * config.bn
    assert (m // config.bm) * (n // config.bn) > torch.cuda.get_device_properties(0).multi_processor_count
    _assert_fp16_exact(config, m, n, 512, seed=13)


@pytest.mark.cuda
@needs_cuda
@pytest.mark.parametrize("k", [64, 128, 384, 1024])
@pytest.mark.parametrize("config", ["128x128", "128x256"])
def test_wgmma_two_consumers_k_sweep(config, k):
    """Separates a layout error (wrong already at one K slice) from a pipeline one."""
    import torch
    from vkcoop.cuda import compare, reference
    path = WgmmaSpGemm(config)
    cfg = path._pick(256, 512, k)
    a, b = _problem(256, 512, k, "float16", seed=k)
    c = path.bind(a, b)()
    torch.cuda.synchronize()
    ref = reference(a, b)
    stats = compare(c, ref)
    assert stats["exact_fraction"] == 1.0, (stats, _error_locality(c, ref, cfg.bm, cfg.bn))



# ---------------------------------------------------------------- the other wgmma.sp types

#: The other types by their benchmark names (test ids: ``-k "tf32 or e4m3 or e5m2 or int8"``).
TYPE_IDS = {"float32": "tf32", "float8_e4m3fn": "e4m3", "float8_e5m2": "e5m2", "int8": "int8", "uint8": "uint8"}
#: Exact inputs per type: floats every type holds exactly (tf32 too); integers whose s32 sums and fp32 reference are
#: exact.
TYPE_VALUES = {"int8": [-2, -1, 0, 1, 2], "uint8": [0, 1, 2, 3]}


def _typed_problem(m, n, k, dtype_name, seed=0):
    """A (2:4, or 1:2 for tf32) and B of one wgmma.sp type from exact values. The problems keep K <= 1408: an
    output sums at most 704 products, each a multiple of 0.25 of magnitude <= 1, so every partial sum is exact in
    12 bits of significand, and an fp8 accumulation of reduced precision (docs/spec-notes.md, W1: 13 fraction bits kept) is exact too."""
    from vkcoop.cuda import DeviceSparse
    from vkcoop.cuda.gemm import to_torch
    rng = np.random.default_rng(seed)
    np_dtype = np.dtype(getattr(ml_dtypes, dtype_name, None) or dtype_name)
    values = np.array(TYPE_VALUES.get(dtype_name, [-1.0, -0.5, -0.0, 0.0, 0.5, 1.0]))
    a = rng.choice(values, size=(m, k)).astype(np_dtype)
    b_t = rng.choice(values, size=(n, k)).astype(np_dtype)
    comp = sparse.compress_1to2(a) if dtype_name == "float32" else sparse.compress_2to4(a)
    return DeviceSparse.from_compressed(comp), to_torch(b_t).t()   # B [K][N] as a view of B^T [N][K]


# (config, M, N, slices): the ring wrapping with an odd count of slices (the 8-bit types' slice pairs and their
# last slice), an even count, one slice, the small-N tile, and split-K: 8 splits of 2 slices, uneven shares (11
# slices in 6 splits of 2), three tiles of 3 slices; 256 tiles, more than the SMs a persistent tile walks.
TYPE_CASES = [("128x256", 256, 512, 7), ("128x256", 128, 256, 1), ("128x256", 2048, 4096, 3), ("128x128", 128, 256, 6),
              ("64x16", 192, 16, 8), ("128x16cs", 256, 16, 8), ("128x32cs", 128, 32, 11), ("128x64cs", 384, 64, 3)]


@pytest.mark.cuda
@needs_cuda
@pytest.mark.parametrize("dtype_name", list(TYPE_IDS), ids=list(TYPE_IDS.values()))
@pytest.mark.parametrize("config, m, n, slices", TYPE_CASES, ids=[f"{c[0]}-{c[3]}" for c in TYPE_CASES])
def test_wgmma_type_matches_reference_bit_exact(dtype_name, config, m, n, slices):
    """C in bf16 (tf32, e4m3, e5m2) or int32 (int8, uint8), equal to the fp32 reference rounded once."""
    import torch
    from vkcoop.cuda import compare, reference
    path = WgmmaSpGemm(config)
    k = slices * path._pick(m, n, 0, dtype_name).bk
    a, b = _typed_problem(m, n, k, dtype_name, seed=m + n + k)
    c = path.bind(a, b)()
    torch.cuda.synchronize()
    expected = torch.int32 if dtype_name in ("int8", "uint8") else torch.bfloat16
    assert c.shape == (m, n) and c.dtype == expected
    ref = reference(a, b)
    stats = compare(c, ref)
    assert stats["exact_fraction"] == 1.0, (stats, _error_locality(c, ref, path._pick(m, n, k, dtype_name).bm,
                                                                    path._pick(m, n, k, dtype_name).bn))
    assert float(ref.abs().max()) > 0


@pytest.mark.cuda
@needs_cuda
@pytest.mark.parametrize("dtype_name", ["float8_e4m3fn", "int8"], ids=["e4m3", "int8"])
def test_wgmma_type_split_k_repeats_and_matches_the_unsplit_tile(dtype_name):
    """Split several ways, the partials (fp32 or s32) added in split order: launches repeat bit for bit (C
    poisoned in between) and equal the unsplit 64x16 tile's."""
    import torch
    a, b = _typed_problem(256, 64, 1024, dtype_name, seed=13)
    op = WgmmaSpGemm("128x64cs").bind(a, b)
    assert "splits=" in op.description and "splits=1 " not in op.description
    first = op().clone()
    for _ in range(3):
        op().fill_(-7)
        c = op()
        torch.cuda.synchronize()
        assert torch.equal(c, first)
    assert torch.equal(first, WgmmaSpGemm("64x16").bind(a, b)())


@pytest.mark.cuda
@needs_cuda
def test_wgmma_tf32_refuses_an_a_of_the_wrong_sparsity():
    import dataclasses
    a, b = _typed_problem(128, 256, 64, "float32")
    with pytest.raises(ShapeError, match="wgmma.sp tf32 takes A 1:2 sparse; this A is 2:4"):
        WgmmaSpGemm("128x256").bind(dataclasses.replace(a, sparsity="2:4"), b)
    with pytest.raises(ShapeError, match="K=80 is not a multiple of 32"):
        WgmmaSpGemm("128x256").bind(*_typed_problem(128, 256, 80, "float32"))
