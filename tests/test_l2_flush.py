"""The L2 flush of `--flush-l2` (shaders/gemm/l2_flush.comp, vkcoop.gemm.L2Flush; vkcoop.cuda.timing for CUDA):
it must read, not write, so that the timed run after it finds clean lines only."""
import numpy as np
import pytest

from support import vulkan_probe

HAVE_DEVICE, NO_DEVICE_REASON, _ = vulkan_probe()


@pytest.mark.vulkan
@pytest.mark.skipif(not HAVE_DEVICE, reason=NO_DEVICE_REASON or "no Vulkan device")
def test_the_vulkan_flush_reads_its_zeros_and_reaches_every_quad():
    """A flush leaves its zero buffer zero. With a word planted in the last quad, whose fold is then `never`, the
    invocation that reached it in the grid-stride loop stores `never` at its own index: every quad is loaded."""
    from vkcoop import vk
    from vkcoop.gemm import L2Flush
    from vkcoop.gemm.vulkan import L2_FLUSH_NEVER

    with vk.Device() as device:
        flush = L2Flush(device, megabytes=1)
        try:
            quads = (1 << 20) // 16
            assert flush.buffer.nbytes == 1 << 20 and [int(v) for v in flush.push] == [quads, L2_FLUSH_NEVER]
            device.run(*flush.dispatch_args())
            assert not flush.buffer.read().any()
            planted = np.zeros((quads, 4), np.uint32)
            planted[-1, 0] = L2_FLUSH_NEVER
            stride = 2 * 256   # two workgroups: each invocation walks 128 quads
            with device.upload(planted, name="planted") as buffer:
                device.run(flush.pipeline, [buffer], (2, 1, 1), flush.push)
                got = buffer.read().reshape(quads, 4)
            expected = planted.copy()
            expected[(quads - 1) % stride] = L2_FLUSH_NEVER
            assert np.array_equal(got, expected)
        finally:
            flush.close()


@pytest.mark.cuda
def test_cuda_timing_with_the_flush_times_gpu_work():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    from vkcoop.cuda.timing import time_cuda
    x = torch.zeros(1 << 20, device="cuda")
    timing = time_cuda(lambda: x.add_(1.0), warmup=1, iters=3, flush_l2=True)
    assert timing.flushed_l2 and len(timing.times_ms) == 3 and all(t > 0 for t in timing.times_ms)
    assert float(x[0]) >= 1 + 3   # the warm-up and the timed runs all ran
