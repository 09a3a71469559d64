"""The types of wgmma.mma_async.sp beyond fp16 and bf16 (tf32 1:2, e4m3, e5m2, s8, u8), without a GPU: the type
table against the PTX ISA, the generated instructions and traits, the tensor maps a launch encodes, which metadata
word each instruction of a slice reads (the kernel's indexing, modelled), the sanitizer's operands and the
tolerance of each output."""
from __future__ import annotations

import re

import ml_dtypes
import numpy as np
import pytest

from vkcoop.cuda import driver, gen_wgmma_ops, launches
from vkcoop.cuda.gemm import WgmmaSpGemm, output_dtype, passes
from vkcoop.cuda.layout import lane_order
from vkcoop.cuda.wgmma_types import WGMMA_SP_TYPES
from vkcoop.sparse import compress_1to2, compress_2to4

#: PTX ISA 9.7.15.6 (wgmma.mma_async.sp), written out by hand: dense K an instruction, A's sparsity, the
#: accumulator, and the operands after the predicate scale-d (imm-scale-a, imm-scale-b, imm-trans-a, imm-trans-b).
PTX = {"f16": (32, "2:4", "f32", 4), "bf16": (32, "2:4", "f32", 4), "tf32": (16, "1:2", "f32", 2),
       "e4m3": (64, "2:4", "f32", 2), "e5m2": (64, "2:4", "f32", 2), "s8": (64, "2:4", "s32", 0),
       "u8": (64, "2:4", "s32", 0)}
#: What C is stored in: the 16-bit types their own, fp32 sums bf16 (fp32's range), s32 sums int32 (exact).
OUTPUT = {"float16": "float16", "bfloat16": "bfloat16", "float32": "bfloat16", "float8_e4m3fn": "bfloat16",
          "float8_e5m2": "bfloat16", "int8": "int32", "uint8": "int32"}
NEW_TYPES = ["float32", "float8_e4m3fn", "float8_e5m2", "int8", "uint8"]


def test_the_type_table_is_the_ptx_isa():
    assert {t.ptx: (t.k, t.sparsity, t.accumulator) for t in WGMMA_SP_TYPES.values()} == \
        {ptx: facts[:3] for ptx, facts in PTX.items()}
    for dtype, t in WGMMA_SP_TYPES.items():
        assert t.output == OUTPUT[dtype]
        assert t.bk == 2 * t.k and t.bk * t.elem_bytes == 128   # two instructions a slice, one 128-byte row of B
        assert t.meta_words == (2 if t.elem_bytes == 1 else 1)  # 8-bit: a register an instruction, selector 0
        assert t.elem_bytes == np.dtype(getattr(ml_dtypes, dtype, None) or dtype).itemsize


def _wrappers(header: str) -> dict[str, str]:
    return dict(re.findall(r'"wgmma\.mma_async\.sp\.sync\.aligned\.(m64n\d+k\d+\.\w+\.\w+\.\w+) "\n\s*"([^"]*)"',
                           header))


def test_every_instruction_has_the_operands_of_its_type():
    wrappers = _wrappers(gen_wgmma_ops.render())
    assert len(wrappers) == len(PTX) * len(gen_wgmma_ops.N_SIZES)
    for ptx, (k, _, acc, immediates) in PTX.items():
        for n in gen_wgmma_ops.N_SIZES:
            operands = wrappers[f"m64n{n}k{k}.{acc}.{ptx}.{ptx}"]
            d, rest = re.fullmatch(r"\{([^}]*)\}, (.*);\\n\}", operands).groups()
            assert len(d.split(", ")) == n // 2                          # N/2 accumulators a thread
            fields = rest.split(", ")
            assert fields[4] == "p" and len(fields) == 5 + immediates, (ptx, n, operands)
            assert all(f == "1" for f in fields[5:7]) and all(f == "0" for f in fields[7:])   # no negation, K-major


def test_a_wrong_operand_list_is_caught(monkeypatch):
    """Planted fault: the integer instructions given the float types' scales."""
    monkeypatch.setitem(gen_wgmma_ops.IMMEDIATES, "s8", ", 1, 1")
    with pytest.raises(AssertionError):
        test_every_instruction_has_the_operands_of_its_type()


def test_the_traits_structs_carry_the_table():
    header = gen_wgmma_ops.render()
    for t in WGMMA_SP_TYPES.values():
        body = re.search(rf"struct {t.ptx.upper()} \{{(.*?)\n\}};", header, re.S).group(1)
        facts = dict(re.findall(r"static constexpr \w+ (\w+) = (\w+);", body))
        assert facts == {"ELEM_BYTES": str(t.elem_bytes), "K_STEP": str(t.k), "META_WORDS": str(t.meta_words),
                         "OUT_BF16": "true" if t.output == "bfloat16" else "false"}
        assert f"typedef {'int' if t.accumulator == 's32' else 'float'} Acc;" in body
        assert f"typedef {'int' if t.output == 'int32' else 'u16'} Out;" in body
        assert len(re.findall(rf"wgmma_sp_m64n\d+k{t.k}_{t.ptx}<SEL>", body)) == len(gen_wgmma_ops.N_SIZES)


@pytest.fixture
def encoded(monkeypatch):
    """wgmma_sp_launch with the driver stood in: the tensor maps it asks for, the function and its shared memory."""
    maps, functions = [], []
    monkeypatch.setattr(driver, "encode_tiled_2d", lambda *args: maps.append(args) or len(maps))

    class Module:
        def function(self, name, smem):
            functions.append((name, smem))
            return name

    monkeypatch.setattr(launches, "module", lambda source: Module())
    monkeypatch.setattr(driver, "max_active_clusters", lambda func, cluster, threads, smem, name: 1000)
    return maps, functions


@pytest.mark.parametrize("dtype", list(WGMMA_SP_TYPES))
def test_a_launch_maps_one_slice_of_each_operand_per_type(dtype, encoded):
    """A slice: 64 bytes of each row of A's values [M][K/2], 128 bytes of each row of B^T [N][K], and per 16 rows
    the 32 lane words of each instruction's metadata (two for the 8-bit types) of [M/16][K/bk][32 * words]."""
    maps, functions = encoded
    m, n, k = 256, 512, 1024
    launch = launches.wgmma_sp_launch(WgmmaSpGemm.CONFIGS["128x256"], dtype, m, n, k, 0x1000, 0x2000, 0x3000,
                                      0x4000, sms=132)
    size, words = WGMMA_SP_TYPES[dtype].elem_bytes, WGMMA_SP_TYPES[dtype].meta_words
    tma_type = {1: driver.TENSOR_MAP_UINT8, 2: driver.TENSOR_MAP_UINT16, 4: driver.TENSOR_MAP_UINT32}[size]
    bk = 128 // size
    assert maps[0] == (tma_type, 0x1000, k // 2, m, k // 2 * size, 64 // size, 128, driver.SWIZZLE_64B)
    assert maps[1] == (tma_type, 0x2000, k, n, k * size, 128 // size, 256, driver.SWIZZLE_128B)
    meta_cols = k // bk * 32 * words
    assert maps[2] == (driver.TENSOR_MAP_UINT32, 0x3000, meta_cols, m // 16, meta_cols * 4, 32 * words, 8,
                       driver.SWIZZLE_NONE)
    short = {"float16": "f16", "bfloat16": "bf16", "float32": "tf32", "float8_e4m3fn": "e4m3", "float8_e5m2": "e5m2",
             "int8": "s8", "uint8": "u8"}[dtype]
    # four stages of 128 x 64 bytes of A, 256 x 128 of B, 8 x 128 x words of metadata, each rounded up to 1 KiB;
    # then 16 rows of 256 bytes and a pad of 8 outputs for each of the 8 consumer warps
    stage = -(-(128 * 64 + 256 * 128 + 8 * 128 * words) // 1024) * 1024
    out_bytes = 4 if dtype in ("int8", "uint8") else 2
    warp_regions = 8 * 16 * (256 + 8 * out_bytes)
    assert functions == [(f"wgmma_sp_{short}_bn256_c2_s4_ws_p", 4 * stage + 1024 + 4 * 16 + warp_regions)]
    assert launch.smem == functions[0][1] and launch.grid == (m // 128) * (n // 256)


def test_a_type_a_tile_does_not_run_is_refused_before_the_driver(encoded):
    with pytest.raises(ValueError, match=r"instantiated for float16, bfloat16 only, not int8"):
        launches.wgmma_sp_launch(WgmmaSpGemm.CONFIGS["256x128"], "int8", 512, 256, 1024, 0, 0, 0, 0)
    assert encoded == ([], [])


def test_a_split_k_or_persistent_launch_without_the_sm_count_is_refused_before_the_driver(encoded):
    persistent = WgmmaSpGemm.CONFIGS["128x256"]
    for cfg, kind in ((WgmmaSpGemm.CONFIGS["128x16cs"], "split-K"), (persistent, "persistent")):
        with pytest.raises(ValueError, match=rf"^wgmma_sp_f16_\w+: a {kind} launch needs the device's SM count$"):
            launches.wgmma_sp_launch(cfg, "float16", 4096, cfg.bn, 4096, 0, 0, 0, 0)
    assert encoded == ([], [])


def test_a_persistent_launch_runs_one_cta_an_sm_at_most(encoded):
    persistent = WgmmaSpGemm.CONFIGS["128x256"]
    assert launches.wgmma_sp_launch(persistent, "float16", 4096, 4096, 512, 0, 0, 0, 0, sms=132).grid == 132
    assert launches.wgmma_sp_launch(persistent, "float16", 256, 512, 512, 0, 0, 0, 0, sms=132).grid == 4


def _slice_word(view: np.ndarray, kt: int, words: int, row16: int, step: int, lane: int) -> int:
    """The kernel's read (wgmma_sp.cu: load_slice_meta, issue_mma) from the TMA box of slice kt: box columns
    kt*32*words .. +32*words of the [M/16][...] view land as one row of 32*words words per 16-row group; step s
    reads word w = s (two words a slice) or w = 0 with selector s (one word), at (row16 * words + w) * 32 + lane."""
    box = view[:, kt * 32 * words:(kt + 1) * 32 * words].reshape(-1)
    w = step if words == 2 else 0
    return int(box[(row16 * words + w) * 32 + lane])


def _slice_mismatches(dtype: str, meta_words: int) -> int:
    """Instruction s of slice kt covers dense columns kt*bk + s*bk/2 .. +bk/2: the words its register (or its
    selector's lane pair of the one register) holds, read as the kernel reads with ``meta_words`` words a slice,
    against the lane words of that step in vkcoop.cuda.layout's order; the count that differ."""
    t = WGMMA_SP_TYPES[dtype]
    m, k = 64, 4 * t.bk
    np_dtype = getattr(ml_dtypes, dtype, None) or dtype
    dense = np.random.default_rng(5).integers(-3, 4, size=(m, k)).astype(np_dtype)
    compressed = compress_1to2(dense) if dtype == "float32" else compress_2to4(dense)
    lanes = lane_order(dense.dtype)[0](compressed.metadata)      # [M/16][K/k_block][32]
    view = lanes.reshape(m // 16, -1)
    wrong = 0
    for kt in range(k // t.bk):
        for row16 in range(m // 16):
            for step in range(2):
                for lane in range(32):
                    got = _slice_word(view, kt, meta_words, row16, step, lane)
                    # 8-bit: a k64 block of its own per instruction, selector 0; else one block a slice
                    want = lanes[row16, 2 * kt + step, lane] if t.meta_words == 2 else lanes[row16, kt, lane]
                    wrong += got != want
    return wrong


@pytest.mark.parametrize("dtype", ["float16", "float32", "float8_e4m3fn", "int8"])
def test_each_instruction_of_a_slice_reads_the_metadata_of_its_k_step(dtype):
    assert _slice_mismatches(dtype, WGMMA_SP_TYPES[dtype].meta_words) == 0


def test_the_slice_model_catches_a_wrong_word_count():
    """Planted fault: an 8-bit slice read as one word a slice (each instruction on the first step's word of the
    wrong block)."""
    assert _slice_mismatches("int8", 1) > 0


@pytest.mark.parametrize("dtype", NEW_TYPES)
def test_the_sanitizer_child_checks_each_type_in_its_output(dtype):
    from vkcoop.cuda import sanitize_child

    class Buffers:
        def __init__(self):
            self.arrays, self.sizes = [], []

        def holding(self, array):
            self.arrays.append(array)
            return len(self.arrays)

        def empty(self, nbytes, zero=False):
            self.sizes.append(nbytes)
            return nbytes

    job = {"kernel": "wgmma.sp", "config": "64x16", "dtype": dtype, "m": 64, "n": 16, "k": 256}
    buffers = Buffers()
    *_, c_bytes, expected = sanitize_child._gemm_operands(job, buffers)
    values, meta, b_t = buffers.arrays
    out = {"bfloat16": ml_dtypes.bfloat16, "int32": np.int32}[OUTPUT[dtype]]
    assert expected.dtype == out and expected.shape == (64, 16) and c_bytes == 64 * 16 * np.dtype(out).itemsize
    assert values.shape == (64, 128) and b_t.shape == (16, 256) and b_t.dtype == values.dtype
    assert meta.shape == ((4, 8, 32) if dtype == "float32" else (4, 4, 32))
    # the exact product of the values the job drew: integers for int8 and uint8, whole in int32
    assert np.abs(expected.astype(np.float64)).max() > 0
    if dtype in ("int8", "uint8"):
        assert (values.astype(np.int64) >= (0 if dtype == "uint8" else -2)).all() and values.max() <= 3


@pytest.mark.parametrize("dtype, out", list(OUTPUT.items()))
def test_each_type_is_checked_at_its_outputs_tolerance(dtype, out):
    assert output_dtype(dtype) == np.dtype(getattr(ml_dtypes, out, None) or out)
    tolerance = {"float16": 2.0 ** -10, "bfloat16": 2.0 ** -7, "int32": 0.0}[out]
    stats = {"finite": True, "max_abs_err": 1.0, "max_rel_err": tolerance}
    assert passes(stats, dtype)
    assert not passes({**stats, "max_rel_err": tolerance + 2.0 ** -12}, dtype)
