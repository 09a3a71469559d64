"""The expand path of the 2:4 GEMM (vkcoop.gemm.expanded, bench path ``vk-coopmat2-2:4-expand``): its launch, its
configurations, its roofline bytes, bad input, and (marked gpu) the two passes bit for bit on a coopmat2 device."""
from __future__ import annotations

import numpy as np
import pytest

from vkcoop import gemm, sparse
from vkcoop.bench import roofline
from vkcoop.gemm.configs import derive_workgroup_configs, parse_config, path_kernel
from vkcoop.gemm.path import GemmProblem
from vkcoop.gemm.paths import H100_SEED_CONFIGS, SEED_CONFIGS, ExpandedSparse24Path
from vkcoop.inspect import targets
from vkcoop.samples.fixtures import H200_CAPS
from support import coopmat2_reason

PATH = "vk-coopmat2-2:4-expand"
TILE = gemm.WorkgroupTile(256, 128, 256, 32, k_unroll=8, group_m=8)


def _kernel(dtype="fp16", tile=TILE, b_column_major=False):
    dense = gemm.CoopMat2Kernel(gemm.accumulating_types(dtype), tile, b_column_major=b_column_major)
    return gemm.ExpandedSparse24Kernel(dtype, dense)


def _operands(m, n, k, dtype="fp16"):
    a, b = gemm.exact_inputs(gemm.accumulating_types(dtype), m, n, k, seed=m + n + k)
    return sparse.compress_2to4(a), b


def test_the_launch_expands_a_into_a_workspace_that_the_dense_dispatch_reads():
    compressed, b = _operands(300, 200, 256)
    launch = _kernel().launch(compressed.values, compressed.metadata, b)
    expand, multiply = launch.dispatches
    assert expand.shader == "gemm/sparse24_decompress.comp" and expand.buffers == ("values", "metadata", "A")
    assert expand.push == (256, 300 * 256 // 16) and expand.groups == (-(-300 * 256 // 16 // 256), 1, 1)
    assert multiply.shader == "gemm/coopmat2_gemm.comp" and multiply.buffers[:3] == ("A", "B", "C")
    assert set(launch.inputs) == {"values", "metadata", "B"}          # A is never uploaded
    assert launch.outputs["A"] == ((300, 256), np.dtype(np.uint16))
    m, n, k, a_stride, b_stride, c_stride = (int(v) for v in multiply.push)
    assert (m, n, k, a_stride, b_stride, c_stride) == (300, 200, 256, 256, 200, 200)
    assert multiply.specialization["ALIGNED"] is False


def test_the_dense_dispatch_is_the_dense_kernels_own_on_whole_tiles():
    compressed, b = _operands(256, 512, 256)
    dense = gemm.CoopMat2Kernel("fp16->fp32", TILE)
    expanded = _kernel().launch(compressed.values, compressed.metadata, b).dispatches[1]
    direct = dense.launch(sparse.decompress_2to4(compressed), b).dispatches[0]
    assert expanded == direct and expanded.specialization["ALIGNED"] is True


def test_a_column_major_b_and_an_odd_n_reach_the_dense_kernel_as_its_own_launch_would():
    compressed, b = _operands(64, 13, 96)
    kernel = _kernel(b_column_major=True)
    stored = kernel.store_b(b)
    assert stored.shape == (13, 96)
    launch = kernel.launch(compressed.values, compressed.metadata, stored)
    assert launch.outputs["C"] == ((64, 13), np.dtype(np.float32))
    row_major = _kernel().launch(compressed.values, compressed.metadata, b)
    assert row_major.inputs["B"].shape == (96, 16)        # padded to whole 16-byte rows; N stays 13
    assert int(row_major.dispatches[1].push[1]) == 13


def test_bad_operands_and_kernels_are_refused_before_any_dispatch():
    compressed, b = _operands(64, 32, 96)
    with pytest.raises(gemm.GemmInputError, match="B has shape"):
        _kernel().launch(compressed.values, compressed.metadata, b[:64])
    with pytest.raises(gemm.GemmInputError, match="metadata has shape"):
        _kernel().launch(compressed.values, compressed.metadata[:, :2], b)
    with pytest.raises(gemm.GemmInputError, match="dtype='fp32'"):
        gemm.ExpandedSparse24Kernel("fp32", gemm.CoopMat2Kernel("fp16->fp32", TILE))
    with pytest.raises(gemm.GemmInputError, match="fp16->fp16"):
        gemm.ExpandedSparse24Kernel("fp16", gemm.CoopMat2Kernel("fp16->fp16", TILE))
    with pytest.raises(gemm.GemmInputError, match="direct coopmat2 kernel"):
        gemm.ExpandedSparse24Kernel("fp16", gemm.StagedKernel("fp16->fp32", gemm.WorkgroupTile(128, 128, 128, 32)))
    with pytest.raises(gemm.GemmInputError, match="multiple of 32"):
        gemm.decompress_dispatch(8, 48)


def test_its_configurations_are_the_dense_kernels_without_the_staged_ones():
    for table in (SEED_CONFIGS, H100_SEED_CONFIGS):
        assert [c.label() for c in table[PATH]["square"]] == \
            [c.label() for c in table["vk-coopmat2-dense"]["square"] if not c.staged]
    with pytest.raises(gemm.GemmInputError, match="no t"):
        path_kernel(PATH, parse_config("128:128x128x32u1g8t"), "fp16")
    problem = GemmProblem("bf16", "square", 8192, 8192, 8192)
    configs = derive_workgroup_configs(PATH, problem, H200_CAPS.flexible, _limits())
    assert configs and not any(c.staged or c.meta_words for c in configs)
    kernel = path_kernel(PATH, configs[0], "bf16")
    assert isinstance(kernel, gemm.ExpandedSparse24Kernel) and kernel.types.key == "bf16->fp32"


def _limits():
    from vkcoop.gemm.configs import DeviceLimits
    return DeviceLimits(shared_memory=49152, reserved_shared_memory=8192, max_dimension=256, max_workgroup=256)


def test_it_runs_compute_bound_shapes_only_and_says_why_not_elsewhere():
    class Group:
        name = "some GPU"

    path = ExpandedSparse24Path(Group())
    assert path.supports(GemmProblem("fp16", "square", 4096, 4096, 4096)) == (True, "some GPU")
    ok, why = path.supports(GemmProblem("fp16", "llm", 8192, 32, 8192))
    assert not ok and "memory-bound" in why
    ok, why = path.supports(GemmProblem("fp16", "square", 512, 512, 520))
    assert not ok and "multiple of 32" in why
    with pytest.raises(targets.TargetError, match="--shape must be square"):
        targets.gemm_target("2:4-expand", shape="llm")
    assert targets.gemm_target("2:4-expand").gemm_path == PATH


def test_its_roofline_counts_the_workspace_written_and_read_back():
    m, n, k = 4096, 4096, 4096
    two_four = m * k + m * (k // 32) * 4             # kept values (2 bytes for every other element) + metadata
    rest = k * n * 2 + m * n * 4                     # B read, C written in fp32
    assert roofline.bytes_moved(PATH, m, n, k) == two_four + 2 * m * k * 2 + rest
    assert roofline.bytes_moved(PATH, m, n, k) - roofline.bytes_moved("vk-coopmat2-dense", m, n, k) == \
        two_four + m * k * 2


# --------------------------------------------------------------------------- on the GPU
_NO_GPU = coopmat2_reason()


@pytest.mark.gpu
@pytest.mark.skipif(_NO_GPU is not None, reason=str(_NO_GPU))
@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
def test_both_passes_are_bit_exact_on_the_gpu(dtype):
    """Whole tiles (the ALIGNED dense pipeline), ragged M and N with column-major B, and split-K; the workspace
    itself against the pruned A."""
    from vkcoop import vk
    types = gemm.accumulating_types(dtype)
    cases = [(TILE, False, (256, 512, 256)), (gemm.WorkgroupTile(256, 128, 128, 32), True, (300, 136, 288)),
             (gemm.WorkgroupTile(64, 32, 32, 64, split_k=3, k_unroll=2, group_m=1), False, (96, 40, 512))]
    with vk.Device(features=gemm.features_for("sparse24", types)) as device:
        for tile, column_major, (m, n, k) in cases:
            compressed, b = _operands(m, n, k, dtype)
            kernel = _kernel(dtype, tile, column_major)
            with gemm.vulkan.coopmat2_gemm(device, kernel) as runner:
                runner.bind(compressed.values, compressed.metadata, kernel.store_b(b))
                got = runner.result()
                workspace = runner.bound_buffer("A").read()
            assert np.array_equal(got, gemm.sparse24_reference(compressed.values, compressed.metadata, b)), tile
            assert np.array_equal(workspace, sparse.decompress_2to4(compressed).view(np.uint16)), tile
