"""The tail split of the direct dense kernel (``x`` in a tile label): the tiles of a grid's partial last wave run as
K slices after the whole tiles, and the last slice of each adds them up. The choice of the slice count, how a
problem resolves it, the launch it makes, the kernels that refuse it, and (marked gpu) bit for bit on a coopmat2
device against the exact reference and the plain launch."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from vkcoop import gemm
from vkcoop.gemm.configs import launch_kernel, parse_config
from vkcoop.gemm.launch import padded_shape
from vkcoop.gemm.tiles import MAX_TAIL_SPLIT, tail_split
from support import coopmat2_reason

SEED = "128:128x128x64u8g4w2xc"


def _tile(label=SEED):
    return parse_config(label).tile


def test_the_slice_count_finishes_the_tail_soonest_in_whole_rounds_of_slots():
    # 136 tail tiles on 264 slots (8192^3 on 132 SMs, 2 each): s slices take ceil(136 s / 264) rounds of 1/s.
    # s = 2: 2 rounds of 1/2 = 1 (no gain); 3: 2/3; 5: 3/5; 7: 4/7 = 0.571; 8: 5/8.
    assert tail_split(136, 264, 128) == 7
    # More than 7/8 of a wave: ceil(232 s / 264) = s for every s up to 8, so no count beats the whole tiles.
    assert tail_split(232, 264, 128) == 1
    # A tail of 8 tiles: 8 slices of all fit at once; the K steps cap the count.
    assert tail_split(8, 264, 128) == MAX_TAIL_SPLIT and tail_split(8, 264, 3) == 3


def test_a_launch_plans_the_tiles_of_its_partial_last_wave():
    tile = _tile().fill_split(8192, 8192, 8192, 132)
    assert tile.wave == 264 and tile.split_k == 1
    assert tile.tail_plan(8192, 8192, 8192) == (4096 - 15 * 264, 7)
    # The label keeps the request, not the problem's plan, and reads back to the same plan.
    assert tile.label() == "128:128x128x64u8g4w2x"
    again = parse_config(tile.label()).tile.fill_split(8192, 8192, 8192, 132)
    assert again.tail_plan(8192, 8192, 8192) == (136, 7)


@pytest.mark.parametrize("shape, sm_count", [((8448, 8192, 8192), 132),   # 4224 tiles: 16 whole waves
                                             ((1024, 1024, 1024), 132),   # 64 tiles: one wave, split-K's domain
                                             ((4096, 4096, 4096), 132),   # 3 whole waves: fewer than MIN_TAIL_WAVES
                                             ((8192, 8192, 8192), None)])  # no SM count: nothing to size
def test_no_tail_split_where_the_waves_are_whole_few_or_unknown(shape, sm_count):
    for label in (SEED, "128:128x128x64u8g4w2x2c"):
        assert _tile(label).fill_split(*shape, sm_count).tail_plan(*shape) == (0, 1)


def test_a_tail_split_tile_does_not_split_k_to_fill_a_wave():
    """Its w sizes the wave only: a grid smaller than a wave keeps one K slice (64 tiles on 264 slots)."""
    tile = _tile().fill_split(1024, 1024, 1024, 132)
    assert tile.split_k == 1 and tile.wave == 264 and tile.label() == "128:128x128x64u8g4w2x"


def test_the_smallest_launch_of_a_tail_split_kernel_has_no_tail():
    """The kernel's template launch (one tile) names the edge pipeline; the tail belongs to the bound problem."""
    tile = _tile().fill_split(8192, 8192, 8192, 132)
    (dispatch,) = gemm.CoopMat2Kernel("fp16->fp32", tile, b_column_major=True).template_launch().dispatches
    assert dispatch.groups == (1, 1, 1) and "TAIL_SPLIT" not in dispatch.specialization


def test_an_explicit_count_is_kept_and_capped_by_the_k_steps():
    tile = _tile("128:128x128x64u8g4w2x3").fill_split(8192, 8192, 8192, 132)
    assert tile.tail_plan(8192, 8192, 8192) == (136, 3)
    tile = _tile("128:128x128x64u8g4w2x8").fill_split(8192, 8192, 256, 132)
    assert tile.tail_plan(8192, 8192, 256) == (136, 4)   # 4 K steps


def test_the_launch_runs_whole_tiles_then_the_slices_and_sums_them_in_the_dispatch():
    tile = _tile().fill_split(640, 640, 1024, 1)          # 25 tiles on 2 slots: 12 waves and 1 tile
    assert tile.tail_plan(640, 640, 1024) == (1, 2)
    a, b = gemm.exact_inputs(gemm.accumulating_types("fp16"), 640, 640, 1024, seed=5)
    kernel = gemm.CoopMat2Kernel("fp16->fp32", tile, b_column_major=True)
    launch = kernel.launch(a, kernel.store_b(b))
    (dispatch,) = launch.dispatches
    assert dispatch.groups == (24 + 1 * 2, 1, 1)
    assert dispatch.specialization["TAIL_SPLIT"] == 2 and dispatch.specialization["SPLIT_K"] == 1
    assert dispatch.defines["SPLIT_SUM"] == "LAST"
    assert dispatch.buffers == ("A", "B", "partial sums", "C", "arrivals")
    assert launch.outputs["partial sums"] == ((2, 1, 128 * 128), np.dtype(np.float32))
    assert launch.outputs["arrivals"] == ((1,), np.dtype(np.uint32))
    assert launch.outputs["C"] == ((640, 640), np.dtype(np.float32))


def test_kernels_without_a_tail_split_refuse_one():
    with pytest.raises(gemm.GemmInputError, match="direct dense kernel"):
        launch_kernel(parse_config("128:64x64x64u4g1w2xt"), "fp16", sparse=False)
    with pytest.raises(gemm.GemmInputError, match="direct dense kernel"):
        gemm.Sparse24Kernel("fp16", _tile())
    with pytest.raises(gemm.GemmInputError, match="needs w"):
        gemm.CoopMat2Kernel("fp16->fp32", _tile("128:128x128x64u8g4x"))


def _recorded(name):
    import json
    from pathlib import Path
    from vkcoop.gemm.configs import recorded_device
    report = Path(__file__).resolve().parents[1] / "docs" / name
    return recorded_device(json.loads(report.read_text()))


def test_the_compute_class_tunes_the_best_tiles_tail_split_where_its_kernel_has_one():
    """A tuning of a compute-bound problem measures the best tile with ``x`` right after its layouts, its ``w``
    sizing the wave from the invocations an SM keeps resident; the 2:4 decode kernel has no tail split, and the other
    classes have no partial last wave behind enough whole waves to split."""
    from vkcoop.gemm.configs import RESIDENT_INVOCATIONS, derive_workgroup_configs, tail_candidate
    from vkcoop.gemm.path import GemmProblem
    _, flexible, _, limits = _recorded("h100-capabilities.json")
    square = GemmProblem("fp16", "square", 8192, 8192, 8192)
    for path_name in ("vk-coopmat2-dense", "vk-coopmat2-dense-fp16acc", "vk-coopmat2-2:4-expand"):
        configs = derive_workgroup_configs(path_name, square, flexible, limits)
        best, tails = configs[0], [c for c in configs if c.tile.tail]
        assert tails == [replace(best, tile=tail_candidate(best.tile))] and configs[1] == tails[0], path_name
        tile = tails[0].tile
        assert tile.per_sm * tile.workgroup_size == RESIDENT_INVOCATIONS and tile.tail_split == 0
        ran = tails[0].for_problem(square, limits.sm_count).tile
        assert ran.split_k == 1 and ran.wave == limits.sm_count * tile.per_sm
    # the dense path's best tile, 256:128x256x32 one an SM: 2,048 tiles are 15 waves of 132 and 68 tiles
    dense = derive_workgroup_configs("vk-coopmat2-dense", square, flexible, limits)[1].for_problem(square, 132)
    assert dense.tile.tail_plan(8192, 8192, 8192) == (68, tail_split(68, 132, 256))
    assert not any(c.tile.tail for c in derive_workgroup_configs("vk-coopmat2-2:4", square, flexible, limits))
    for other in (GemmProblem("fp16", "llm", 8192, 32, 8192), GemmProblem("fp16", "square", 1024, 1024, 1024),
                  GemmProblem("fp16", "square", 2048, 2048, 2048)):
        assert not any(c.tile.tail for c in derive_workgroup_configs("vk-coopmat2-dense", other, flexible, limits))
    # a 128-invocation tile keeps two workgroups an SM, as the H100's square seed says (w2x5)
    assert tail_candidate(gemm.WorkgroupTile(128, 128, 128, 64)).label() == "128:128x128x64u2g8w2x"


# --------------------------------------------------------------------------- on the GPU
_NO_GPU = coopmat2_reason()


@pytest.mark.gpu
@pytest.mark.skipif(_NO_GPU is not None, reason=str(_NO_GPU))
@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
def test_the_tail_split_is_bit_exact_on_the_gpu(dtype):
    """Tail splits sized for a pretend one-SM device (the auto count, five slices, an uneven K split, a slice with
    no K step; row- and column-major B; ragged problems padded to whole tiles), each launched twice on the same
    operands: the arrival counts reset themselves. Every result equals the exact reference."""
    from vkcoop import vk
    types = gemm.accumulating_types(dtype)
    cases = [("128:128x128x64u8g4w2x", True, (640, 640, 1024)),      # 25 tiles, 2 slots: 1 tile in 2 slices
             ("128:128x128x64u8g4w2x5", False, (640, 640, 960)),     # 5 slices of 3 K steps
             ("128:128x128x64u8g4w2x3", True, (600, 600, 1000)),     # padded to 640^2 x 1024: 6 + 6 + 4 steps
             ("64:32x32x128u2g1w4x3", True, (600, 64, 500))]         # 38 tiles, 4 slots: 2 + 2 + 0 steps
    with vk.Device(features=gemm.features_for("coopmat2", types)) as device:
        for label, column_major, (m, n, k) in cases:
            tile = parse_config(label).tile
            shape = padded_shape(tile, m, n, k)
            tile = tile.fill_split(*shape, 1)
            assert tile.tail_plan(*shape)[0] > 0, label
            a, b = gemm.exact_inputs(types, m, n, k, seed=m + n + k)
            kernel = gemm.CoopMat2Kernel(types, tile, b_column_major=column_major, pad_to_tiles=True)
            expected = gemm.reference_gemm(a, b, types.output_dtype)
            with gemm.vulkan.coopmat2_gemm(device, kernel) as runner:
                runner.bind(a, kernel.store_b(b))
                for _ in range(2):
                    assert np.array_equal(runner.result(), expected), label

