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
    ok, reason = path.supports(256, 256, 512, "float32")
    assert not ok and "float32" in reason
    assert path.supports(256, 256, 512, "bfloat16")[0]


def test_auto_picks_a_tile_that_divides_the_problem():
    # K = 192 rules out the BK=128 mma.sp tile; N = 16 leaves only the small-N tiles
    assert MmaSpGemm().supports(512, 256, 192, "float16")[0]
    assert MmaSpGemm()._pick(512, 256, 192).bk == 64
    assert MmaSpGemm()._pick(512, 256, 256).bk == 128
    assert MmaSpGemm()._pick(8192, 8192, 8192).pipelined
    assert MmaSpGemm()._pick(512, 256, 192).pipelined
    assert WgmmaSpGemm()._pick(256, 16, 512).bn == 16
    assert WgmmaSpGemm()._pick(256, 512, 512).bn == 256


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
    (WgmmaSpGemm, "128x256", (256, 512, 1024)),
    (WgmmaSpGemm, "128x128", (128, 256, 768)),
    (WgmmaSpGemm, "64x16", (192, 16, 1024)),
    (WgmmaSpGemm, "128x16", (256, 32, 1024)),
    (WgmmaSpGemm, "256x128", (512, 256, 1024)),
    (WgmmaSpGemm, "256x128s5", (256, 384, 640)),
    (WgmmaSpGemm, "256x128s6", (768, 128, 512)),
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
    import torch
    from vkcoop.cuda import compare, reference
    m, n, k = 2 * config.bm, 2 * config.bn, 512
    a, b = _problem(m, n, k, "float16", seed=11)
    c = WgmmaSpGemm(config).bind(a, b)()
    torch.cuda.synchronize()
    ref = reference(a, b)
    stats = compare(c, ref)
    assert stats["exact_fraction"] == 1.0, (stats, _error_locality(c, ref, config.bm, config.bn))


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

