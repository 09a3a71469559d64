"""The bench's element types beyond fp16 and bf16 (vkcoop.gemm.dtypes): their exact inputs, the K each format
takes, the operands a search process reads back, the options that refuse what a type cannot run, and the Vulkan
dense path's int8 (s8 x s8 -> s32). No GPU, except the last test."""
from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from vkcoop import cli, sparse
from vkcoop.bench import shapes
from vkcoop.bench import sparse as bench
from vkcoop.bench.sparse_settings import SparseBenchSettings
from vkcoop.bench.tuning import TuningCache
from vkcoop.cli.common import Exit
from vkcoop.errors import InputError
from vkcoop.gemm import GEMM_TYPES, accumulating_types, check_output
from vkcoop.gemm.configs import path_kernel, recorded_device
from vkcoop.gemm.dtypes import BENCH_DTYPES, BENCH_TYPES, bench_type
from vkcoop.gemm.exact import bench_inputs, bench_reference
from vkcoop.gemm.path import GemmOperands, GemmProblem
from vkcoop.gemm.paths import (CoopMat2Fp16AccumulatingPath, CoopMat2Path, ExpandedSparse24Path, KhrPath,
                               Sparse24Path, seed_configs)
from vkcoop.gemm.staging import check_coopmat2_kernel
from vkcoop.gemm.types import GemmInputError

DOCS = Path(__file__).resolve().parents[1] / "docs"
NEW_TYPES = ("tf32", "e4m3", "e5m2", "int8", "uint8")


def test_every_type_s_values_are_exact_in_its_input_type():
    for kind in BENCH_TYPES.values():
        values = np.array(kind.values, dtype=np.float64)
        assert (values.astype(kind.input_dtype).astype(np.float64) == values).all(), kind.name
        assert kind.pattern in ("2:4", "1:2") and kind.k_multiple % 32 == 0
    assert bench_type("int8").reference_dtype == np.int32 and bench_type("tf32").pattern == "1:2"
    with pytest.raises(GemmInputError, match="choose from fp16, bf16, tf32, e4m3, e5m2, int8, uint8"):
        bench_type("int4")


@pytest.mark.parametrize("dtype", NEW_TYPES)
def test_inputs_are_drawn_from_the_type_s_values_pruned_to_its_pattern_and_the_reference_is_exact(dtype):
    kind = bench_type(dtype)
    pruned, compressed, b = bench_inputs(dtype, 96, 24, 256, seed=3)
    assert pruned.dtype == b.dtype == kind.input_dtype and pruned.shape == (96, 256) and b.shape == (256, 24)
    allowed = set(np.array(kind.values, dtype=np.float64).tolist())
    assert set(np.unique(b.astype(np.float64)).tolist()) == allowed      # every value appears, nothing else
    assert set(np.unique(pruned.astype(np.float64)).tolist()) <= allowed
    if kind.pattern == "1:2":
        sparse.check_1to2(pruned)
        assert (sparse.decompress_1to2(compressed).view(np.uint32) == pruned.view(np.uint32)).all()
    else:
        sparse.check_2to4(pruned)
        assert (sparse.decompress_2to4(compressed).view(np.uint8) == pruned.view(np.uint8)).all()
    reference = bench_reference(pruned, b)
    exact = pruned.astype(np.float64) @ b.astype(np.float64)      # float64 holds these sums exactly
    assert reference.dtype == kind.reference_dtype and (reference.astype(np.float64) == exact).all()
    again, _, b_again = bench_inputs(dtype, 96, 24, 256, seed=3)
    assert (again.view(np.uint8) == pruned.view(np.uint8)).all() and (b_again.view(np.uint8) == b.view(np.uint8)).all()


def test_the_check_holds_an_integer_result_to_every_unit():
    """Planted fault: one int32 element off by one must fail the check that an exact int8 result passes."""
    pruned, _, b = bench_inputs("int8", 64, 16, 128)
    reference = bench_reference(pruned, b)
    assert check_output(reference.copy(), reference)[0]
    wrong = reference.copy()
    wrong[5, 7] += 1
    ok, _, why = check_output(wrong, reference)
    assert not ok and "row 5, column 7" in why


def test_a_k_the_type_s_format_does_not_take_is_refused():
    with pytest.raises(GemmInputError, match="K=96: e4m3 inputs need K a multiple of 64"):
        bench_inputs("e4m3", 64, 16, 96)
    odd = shapes.UserShape("odd", 128, 128, 96)
    assert shapes.make_cases(["fp16"], [], [odd])            # 96 is a whole 2:4 metadata word for fp16
    with pytest.raises(InputError, match=r"--dtype int8: int8 odd 128x128x96 has K=96, not a multiple of 64"):
        shapes.make_cases(["fp16", "int8"], [], [odd])
    with pytest.raises(InputError, match="--dtype 'fp8': choose from fp16, bf16, tf32"):
        shapes.make_cases(["fp8"], [64], ["square"])


@pytest.mark.parametrize("dtype", ("tf32", "e5m2", "uint8"))
def test_saved_operands_load_back_bit_for_bit_in_their_own_format(dtype, tmp_path):
    problem = GemmProblem(dtype, "square", 64, 32, 128)
    operands = GemmOperands.make(problem)
    operands.save(tmp_path)
    loaded = GemmOperands.load(tmp_path, problem)
    assert type(loaded.compressed) is type(operands.compressed)
    for name in ("pruned", "b", "reference"):
        mine, theirs = getattr(operands, name), getattr(loaded, name)
        assert mine.dtype == theirs.dtype and (mine.view(np.uint8) == theirs.view(np.uint8)).all(), name
    assert (loaded.compressed.metadata == operands.compressed.metadata).all()


def test_the_command_line_takes_the_types_and_refuses_an_unknown_one_in_one_line(capsys):
    args = cli.build_parser().parse_args(["bench", "sparse", "--dtype", "e4m3,int8,tf32"])
    assert args.dtype == ["e4m3", "int8", "tf32"]
    assert cli.main(["bench", "sparse", "--dtype", "int4"]) == Exit.USAGE
    err = capsys.readouterr().err
    assert "int4 not among fp16,bf16,tf32,e4m3,e5m2,int8,uint8" in err


def test_settings_refuse_an_8_bit_type_on_a_k_of_32_before_any_gpu_work(tmp_path, capsys):
    shape_file = tmp_path / "k32.csv"
    shape_file.write_text("label,m,n,k\nk32,256,256,32\n")
    settings = SparseBenchSettings(dtypes=["int8"], shapes=shapes.parse_shapes([str(shape_file)]))
    with pytest.raises(InputError, match="K=32, not a multiple of 64"):
        settings.resolved()
    code = cli.main(["bench", "sparse", "--dtype", "e5m2", "--shapes", str(shape_file), "--json",
                     str(tmp_path / "r.json")])
    out, err = capsys.readouterr()
    assert code == Exit.USAGE and out == "" and len(err.strip().splitlines()) == 1
    assert "--dtype e5m2: e5m2 k32 256x256x32 has K=32, not a multiple of 64" in err
    assert not (tmp_path / "r.json").exists()


# --- the Vulkan paths ------------------------------------------------------------------------------------------
def _group():
    return SimpleNamespace(name="Fake GPU")


def test_only_the_dense_vulkan_path_takes_int8_and_the_others_say_what_they_take():
    int8 = GemmProblem("int8", "square", 512, 512, 512)
    assert CoopMat2Path(_group()).supports(int8) == (True, "Fake GPU")
    for path_type in (Sparse24Path, ExpandedSparse24Path, KhrPath):
        ok, why = path_type(_group()).supports(int8)
        assert not ok and why == f"{path_type.name} takes fp16, bf16, not int8"
    assert not CoopMat2Fp16AccumulatingPath(_group()).supports(int8)[0]
    for dtype in ("tf32", "e4m3", "uint8"):
        ok, why = CoopMat2Path(_group()).supports(GemmProblem(dtype, "square", 512, 512, 512))
        assert not ok and why == f"vk-coopmat2-dense takes fp16, bf16, int8, not {dtype}"
    assert accumulating_types("int8") is GEMM_TYPES["s8->s32"]
    with pytest.raises(GemmInputError, match="the dense coopmat2 kernel takes fp16, bf16, int8"):
        accumulating_types("e4m3")


@pytest.mark.parametrize("gpu", ("h100", "h200"))
def test_the_int8_seeds_are_compute_class_tiles_of_the_recorded_s8_rows(gpu):
    name, flexible, _, limits = recorded_device(json.loads((DOCS / f"{gpu}-capabilities.json").read_text()))
    square = seed_configs(name, "vk-coopmat2-dense", GemmProblem("int8", "square", 8192, 8192, 8192))
    assert square and square == seed_configs(name, "vk-coopmat2-dense", GemmProblem("int8", "mlp", 14336, 4096, 4096))
    for config in square:
        kernel = path_kernel("vk-coopmat2-dense", config, "int8")
        assert kernel.types.key == "s8->s32" and not config.staged
        check_coopmat2_kernel(kernel, flexible, limits)        # a tile of an S8 row, K a multiple of 32
    fp16 = seed_configs(name, "vk-coopmat2-dense", GemmProblem("fp16", "square", 8192, 8192, 8192))
    assert square[0] not in fp16          # int8 reads its own table, never the fp16 one (whose staged tiles it lacks)
    assert seed_configs(name, "vk-coopmat2-dense", GemmProblem("int8", "llm", 8192, 16, 8192)) == []
    assert seed_configs(name, "vk-coopmat2-2:4", GemmProblem("int8", "square", 8192, 8192, 8192)) == []


def test_a_path_that_cannot_take_a_type_is_skipped_with_its_reason_and_the_others_run(tmp_path):
    """A run of int8 and e4m3 with a fake int8-only path: every case of the other type is skipped, never measured."""
    class Int8Only:
        name, measured = "vk-coopmat2-dense", []

        def supports(self, problem):
            return (True, "") if problem.dtype == "int8" else (False, f"takes int8, not {problem.dtype}")

        def configs(self, problem, tune):
            return ["only"]

        def bind(self, operands, config):
            Int8Only.measured.append(operands.problem.dtype)
            return SimpleNamespace(config="only", output_rows=lambda rows: operands.reference,
                                   time=lambda iterations, warmup, flush: [1e-4] * iterations, release=lambda: None)

    cases = shapes.make_cases(["int8", "e4m3"], [128], ["square"])
    tuner = bench.Tuner(TuningCache(tmp_path), {})
    settings = SparseBenchSettings(iters=3, warmup=0)
    results, _ = bench.run_cases(cases, {"vk-coopmat2-dense": Int8Only()}, {}, ["vk-coopmat2-dense"], tuner,
                                 settings, progress=False)
    by_dtype = {r.dtype: r for r in results}
    assert by_dtype["int8"].status == "ok" and by_dtype["e4m3"].status == "skipped"
    assert by_dtype["e4m3"].reason == "takes int8, not e4m3" and Int8Only.measured == ["int8"]


@pytest.mark.gpu
def test_on_the_gpu_the_dense_vulkan_path_computes_int8_exactly(tmp_path):
    settings = SparseBenchSettings(dtypes=["int8"], sizes=[1024], shapes=["square", "llm"], llm_tokens=16,
                                   iters=3, warmup=1, paths=["vk-coopmat2-dense", "vk-coopmat2-2:4"])
    outcome = bench.run_sparse_bench(settings, progress=False, cache=TuningCache(tmp_path / "tuning"))
    dense = [r for r in outcome.results if r.path == "vk-coopmat2-dense"]
    if all(r.status == "skipped" for r in dense):
        pytest.skip("no coopmat2 Vulkan device here: " + dense[0].reason[:200])
    for r in dense:
        assert r.status == "ok" and r.max_abs_error == 0 and r.tflops > 0, (r.case, r.reason)
    assert all(r.status == "skipped" for r in outcome.results if r.path == "vk-coopmat2-2:4")


def test_a_run_s_json_records_what_each_of_its_types_holds():
    """Here no path can run (no coopmat2 device, no CUDA): the run still records its types, before any input."""
    settings = SparseBenchSettings(dtypes=["int8", "e4m3"], sizes=[128], shapes=["square"], paths=["cuBLAS"])
    outcome = bench.run_sparse_bench(settings, progress=False)
    if not outcome.nothing_ran:
        pytest.skip("a path ran here: this test reads a run that stops before its inputs")
    recorded = json.loads(json.dumps(outcome.to_dict()))["environment"]["dtypes"]
    assert recorded["int8"] == {"input": "int8", "reference": "int32", "pattern": "2:4", "k_multiple": 64,
                                "values": [-3, -2, -1, 0, 1, 2, 3]}
    assert recorded["e4m3"]["input"] == "float8_e4m3fn" and recorded["e4m3"]["values"] == [-1.0, -0.5, 0.0, 0.5, 1.0]
    assert {r.dtype for r in outcome.results} == {"int8", "e4m3"}


def test_the_results_part_measures_every_type_on_its_grid_of_shapes():
    """benchmarks/gpu/results.sh sparse-types: each type of its default list runs both shape files through the same
    options the script passes, the compute file 8192^3, 6144^3 and 14336x4096x4096, the skinny one N = 16 and 64."""
    import re

    repo = DOCS.parent
    script = (repo / "benchmarks" / "gpu" / "results.sh").read_text()
    part = script[script.index("    sparse-types)"):script.index("    attention)")]
    types = re.search(r"\$\{TYPES:-([^}]*)\}", part)[1].split()
    assert types == list(BENCH_DTYPES[2:])                       # every type beyond fp16 and bf16
    grids = {}
    for kind in ("compute", "skinny"):
        assert f"benchmarks/shapes-types-{kind}.csv" in part and f'"$dir/sparse-types-{kind}-$dtype.json"' in part
        for dtype in types:
            args = cli.build_parser().parse_args(["bench", "sparse", "--dtype", dtype, "--shapes",
                                                  str(repo / "benchmarks" / f"shapes-types-{kind}.csv"),
                                                  "--search", "deep", "--search-budget", "2"])
            cases = cli.bench.bench_sparse_settings(args).resolved().cases()
            grids[kind] = {(c.m, c.n, c.k) for c in cases}
            assert {c.dtype for c in cases} == {dtype}
    assert grids == {"compute": {(8192, 8192, 8192), (6144, 6144, 6144), (14336, 4096, 4096)},
                     "skinny": {(8192, 16, 8192), (8192, 64, 8192)}}


def test_the_integer_reference_is_exact_where_fp32_would_round():
    """Integers whose sums pass 2**24 are summed in float64: the int64 product (computed here) must match."""
    rng = np.random.default_rng(7)
    a = rng.integers(-128, 128, size=(4, 2048)).astype(np.int8)
    b = rng.integers(-128, 128, size=(2048, 3)).astype(np.int8)
    a[0], b[:, 0] = 127, 127
    a[0, 0], b[0, 0] = 1, 2      # the sum 2047 x 16129 + 2 = 33016065 is odd and above 2**24
    exact = a.astype(np.int64) @ b.astype(np.int64)
    assert exact[0, 0] == 33016065 and int(np.float32(33016065)) != 33016065     # fp32 cannot hold it
    assert (bench_reference(a, b) == exact).all()
