"""A ragged dense problem padded to whole tiles (``CoopMat2Kernel(pad_to_tiles=True)``, what the bench's coopmat2
paths run): the launch, where the operands land in the padded buffers, the result's view, and (marked gpu) bit for
bit on a coopmat2 device against the unpadded, clamped launch."""
from __future__ import annotations

import numpy as np
import pytest

from vkcoop import gemm, sparse
from vkcoop.gemm.configs import launch_kernel, parse_config
from support import coopmat2_reason

TILE = gemm.WorkgroupTile(128, 128, 128, 64, k_unroll=2, group_m=8)


def _operands(m, n, k, dtype="fp16"):
    return gemm.exact_inputs(gemm.accumulating_types(dtype), m, n, k, seed=m + 3 * n + 7 * k)


def _padded(tile=TILE, column_major=False, types="fp16->fp32"):
    return gemm.CoopMat2Kernel(types, tile, b_column_major=column_major, pad_to_tiles=True)


def test_a_ragged_problem_runs_the_aligned_pipeline_on_the_next_whole_tiles():
    a, b = _operands(300, 200, 100)
    launch = _padded().launch(a, b)
    (dispatch,) = launch.dispatches
    assert dispatch.specialization["ALIGNED"] is True
    m, n, k, a_stride, b_stride, c_stride = (int(v) for v in dispatch.push)
    assert (m, n, k) == (384, 256, 128) and (a_stride, b_stride, c_stride) == (128, 256, 256)
    assert dispatch.groups[0] == 3 * 2                       # the clamped launch's tile grid: ceil(300/128) x ceil(200/128)
    assert launch.outputs["C"] == ((384, 256), np.dtype(np.float32)) and launch.view == (300, 200)
    assert launch.inputs["A"].shape == (384, 128) and launch.inputs["B"].shape == (128, 256)


def test_the_operands_sit_in_the_top_left_corner_with_zeros_around_them():
    a, b = _operands(70, 45, 90)
    inputs = _padded().launch(a, b).inputs
    padded_a, padded_b = inputs["A"], inputs["B"]
    assert np.array_equal(padded_a[:70, :90], a) and not padded_a[70:].any() and not padded_a[:, 90:].any()
    assert np.array_equal(padded_b[:90, :45], b) and not padded_b[90:].any() and not padded_b[:, 45:].any()
    # What the padded problem computes, cut to the view, is the logical product.
    product = padded_a.astype(np.float64) @ padded_b.astype(np.float64)
    assert np.array_equal(product[:70, :45], a.astype(np.float64) @ b.astype(np.float64))


def test_a_column_major_b_pads_its_n_rows_and_k_columns():
    a, b = _operands(64, 13, 96)
    kernel = _padded(gemm.WorkgroupTile(64, 32, 32, 64, k_unroll=2, group_m=1), column_major=True)
    launch = kernel.launch(a, kernel.store_b(b))
    assert launch.inputs["B"].shape == (32, 128) and np.array_equal(launch.inputs["B"][:13, :96], b.T)
    assert launch.view == (64, 13) and launch.dispatches[0].specialization["ALIGNED"] is True


def test_a_whole_tile_problem_is_launched_as_it_is():
    a, b = _operands(256, 128, 128)
    padded, plain = _padded().launch(a, b), gemm.CoopMat2Kernel("fp16->fp32", TILE).launch(a, b)
    assert padded.view is None and padded.dispatches == plain.dispatches
    assert padded.inputs["A"] is plain.inputs["A"] or np.array_equal(padded.inputs["A"], plain.inputs["A"])


def test_split_k_keeps_its_slices_over_the_padded_k():
    tile = gemm.WorkgroupTile(64, 32, 32, 64, split_k=3, k_unroll=2, group_m=1)
    a, b = _operands(40, 20, 300)
    launch = _padded(tile).launch(a, b)
    gemm_dispatch = launch.dispatches[0]
    assert gemm_dispatch.groups[:2] == (2 * 1, 3)
    assert launch.outputs["partial sums"] == ((3, 64, 32), np.dtype(np.float32)) and launch.view == (40, 20)


def test_the_samples_kernel_keeps_its_clamped_edges():
    """The coopmat2-gemm sample shows the clamped tensor layouts: its kernel does not pad."""
    a, b = _operands(300, 200, 100)
    launch = gemm.CoopMat2Kernel("fp16->fp32", TILE).launch(a, b)
    assert launch.view is None and launch.dispatches[0].specialization["ALIGNED"] is False


def test_the_bench_pads_the_dense_kernels_and_only_those():
    dense = launch_kernel(parse_config("128:128x128x64u8g8"), "fp16", sparse=False)
    assert isinstance(dense, gemm.CoopMat2Kernel) and dense.pad_to_tiles
    fp16acc = launch_kernel(parse_config("128:128x128x64u8g8"), "fp16", sparse=False, types="fp16->fp16")
    assert fp16acc.pad_to_tiles
    assert not hasattr(launch_kernel(parse_config("256:128x256x32u8g8i1"), "fp16", sparse=True), "pad_to_tiles")


# --------------------------------------------------------------------------- on the GPU
_NO_GPU = coopmat2_reason()


def on_the_gpu(test):
    """Marked gpu, and skipped, saying why, where no device here has coopmat2."""
    return pytest.mark.gpu(pytest.mark.skipif(_NO_GPU is not None, reason=str(_NO_GPU))(test))


def _device(kind: str, types):
    """A device with the features that `kind`'s kernels need for `types`."""
    from vkcoop import vk
    return vk.Device(features=gemm.features_for(kind, types))


def _run(device, kernel, *operands):
    """The result of one run of a coopmat2 kernel on the device."""
    with gemm.vulkan.coopmat2_gemm(device, kernel) as runner:
        return runner.run(*operands)


@on_the_gpu
@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
def test_padded_and_clamped_launches_agree_bit_for_bit_on_the_gpu(dtype):
    """Ragged M, N and K (row- and column-major B, split-K): the padded launch equals the exact reference and the
    clamped launch of the same tile."""
    types = gemm.accumulating_types(dtype)
    cases = [(TILE, False, (300, 200, 100)), (gemm.WorkgroupTile(256, 128, 256, 32, k_unroll=8, group_m=8), True,
                                              (257, 129, 200)),
             (gemm.WorkgroupTile(64, 32, 32, 64, split_k=3, k_unroll=2, group_m=1), False, (96, 40, 520))]
    with _device("coopmat2", types) as device:
        for tile, column_major, (m, n, k) in cases:
            a, b = _operands(m, n, k, dtype)
            results = [_run(device, gemm.CoopMat2Kernel(types, tile, b_column_major=column_major, pad_to_tiles=pad),
                            a, b) for pad in (True, False)]
            assert results[0].shape == (m, n), tile
            assert np.array_equal(results[0], gemm.reference_gemm(a, b, types.output_dtype)), tile
            assert np.array_equal(results[0], results[1]), tile


# --------------------------------------------------------------------------- the 2:4 expand path
def _expanded(tile, column_major=False, pad=True):
    dense = gemm.CoopMat2Kernel("fp16->fp32", tile, b_column_major=column_major, pad_to_tiles=pad)
    return gemm.ExpandedSparse24Kernel("fp16", dense)


def _compressed(m, n, k):
    a, b = _operands(m, n, k)
    return sparse.compress_2to4(sparse.prune_2to4(a)), b


def test_the_expand_path_pads_the_2to4_operand_and_its_workspace():
    compressed, b = _compressed(300, 200, 96)       # K = 96: not whole 64-wide tiles
    launch = _expanded(TILE).launch(compressed.values, compressed.metadata, b)
    expand, multiply = launch.dispatches
    assert launch.inputs["values"].shape == (384, 64) and launch.inputs["metadata"].shape == (384, 4)
    assert np.array_equal(launch.inputs["values"][:300, :48], compressed.values)
    assert not launch.inputs["values"][300:].any() and not launch.inputs["values"][:, 48:].any()
    assert launch.outputs["A"] == ((384, 128), np.dtype(np.uint16)) and launch.view == (300, 200)
    assert multiply.specialization["ALIGNED"] is True and tuple(int(v) for v in multiply.push[:3]) == (384, 256, 128)
    # the padding is a valid 2:4 operand (the format refuses 0b0000 nibbles) whose dense form is A with zeros around it
    padded = sparse.Compressed2to4(launch.inputs["values"], launch.inputs["metadata"])
    dense = sparse.decompress_2to4(padded)
    assert np.array_equal(dense[:300, :96], sparse.decompress_2to4(compressed))
    assert not dense[300:].any() and not dense[:, 96:].any()


def test_the_expand_path_keeps_k_in_whole_metadata_words_for_a_48_wide_k_step():
    tile = gemm.WorkgroupTile(128, 128, 128, 48, k_unroll=2, group_m=8)
    compressed, b = _compressed(128, 128, 64)
    launch = _expanded(tile).launch(compressed.values, compressed.metadata, b)
    assert launch.outputs["A"][0] == (128, 96) and launch.inputs["metadata"].shape == (128, 3)
    assert launch.dispatches[1].specialization["ALIGNED"] is True


def test_an_unpadded_expand_kernel_keeps_the_clamped_dense_launch():
    compressed, b = _compressed(300, 200, 96)
    launch = _expanded(TILE, pad=False).launch(compressed.values, compressed.metadata, b)
    assert launch.view is None and launch.dispatches[1].specialization["ALIGNED"] is False


@on_the_gpu
def test_the_padded_expand_path_is_bit_exact_on_the_gpu():
    with _device("sparse24", gemm.accumulating_types("fp16")) as device:
        for tile, column_major, (m, n, k) in [(TILE, False, (300, 200, 96)), (TILE, True, (257, 13, 160))]:
            compressed, b = _compressed(m, n, k)
            got = _run(device, _expanded(tile, column_major), compressed.values, compressed.metadata, b)
            assert got.shape == (m, n)
            assert np.array_equal(got, gemm.sparse24_reference(compressed.values, compressed.metadata, b)), tile


# --------------------------------------------------------------------------- the staged kernels
STAGED = gemm.WorkgroupTile(128, 64, 32, 64, k_unroll=4, group_m=1)


def test_the_bench_builds_padded_staged_kernels():
    assert launch_kernel(parse_config("128:64x32x64u4g1t"), "fp16", sparse=False).pad_to_tiles
    assert launch_kernel(parse_config("128:64x32x64u4g1t"), "bf16", sparse=True).pad_to_tiles


@on_the_gpu
def test_the_padded_staged_kernels_are_bit_exact_on_the_gpu():
    types = gemm.accumulating_types("fp16")
    with _device("sparse24", types) as device:
        a, b = _operands(100, 30, 70)
        got = _run(device, gemm.StagedKernel(types, STAGED, pad_to_tiles=True), a, b)
        assert got.shape == (100, 30) and np.array_equal(got, gemm.reference_gemm(a, b, np.float32))
        compressed, b = _compressed(130, 20, 160)
        got = _run(device, gemm.StagedSparse24Kernel("fp16", STAGED, pad_to_tiles=True), compressed.values,
                   compressed.metadata, b)
        assert np.array_equal(got, gemm.sparse24_reference(compressed.values, compressed.metadata, b))


# --------------------------------------------------------------------------- the shared-memory kernels
KHR = gemm.SubgroupTile(16, 16, 16, tile_m=128, tile_n=128, tile_k=32, subgroups_m=2, subgroups_n=2)


@pytest.mark.parametrize("kernel, tile, padded_k, padded_n", [(gemm.StagedKernel, STAGED, 128, 32),
                                                               (gemm.KhrKernel, KHR, 96, 128)])
def test_the_shared_memory_kernels_pad_an_odd_n_and_k_to_whole_tiles(kernel, tile, padded_k, padded_n):
    a, b = _operands(100, 30, 70)      # N and K not whole 16-byte vectors: the unpadded kernel refuses them
    with pytest.raises(gemm.GemmInputError, match="16-byte vectors"):
        kernel("fp16->fp32", tile).launch(a, b)
    launch = kernel("fp16->fp32", tile, pad_to_tiles=True).launch(a, b)
    assert launch.inputs["A"].shape == (128, padded_k) and launch.inputs["B"].shape == (padded_k, padded_n)
    assert np.array_equal(launch.inputs["A"][:100, :70], a) and not launch.inputs["A"][:, 70:].any()
    assert np.array_equal(launch.inputs["B"][:70, :30], b) and launch.view == (100, 30)
    assert launch.dispatches[0].specialization["ALIGNED"] is True
    # a whole-tile problem is launched as it is
    a, b = _operands(128, 128, 128)
    assert kernel("fp16->fp32", tile, pad_to_tiles=True).launch(a, b).view is None


def test_the_staged_2to4_kernel_pads_its_operand_with_valid_metadata():
    compressed, b = _compressed(100, 30, 96)
    launch = gemm.StagedSparse24Kernel("fp16", STAGED, pad_to_tiles=True).launch(compressed.values,
                                                                                compressed.metadata, b)
    assert launch.inputs["values"].shape == (128, 128 // 2) and launch.inputs["B"].shape == (128, 32)
    dense = sparse.decompress_2to4(sparse.Compressed2to4(launch.inputs["values"], launch.inputs["metadata"]))
    assert np.array_equal(dense[:100, :96], sparse.decompress_2to4(compressed))
    assert not dense[100:].any() and not dense[:, 96:].any()
    assert launch.view == (100, 30) and launch.dispatches[0].specialization["ALIGNED"] is True


@on_the_gpu
def test_the_padded_khr_kernel_is_bit_exact_on_the_gpu():
    """The bench's KHR path pads: odd N and K against the exact reference."""
    types = gemm.accumulating_types("fp16")
    with _device("khr", types) as device:
        a, b = _operands(100, 30, 70)
        with gemm.vulkan.KhrSharedMemoryGemm(device, types, KHR, pad_to_tiles=True) as runner:
            got = runner.run(a, b)
        assert got.shape == (100, 30) and np.array_equal(got, gemm.reference_gemm(a, b, np.float32))
