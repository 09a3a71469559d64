"""vkcoop.sanitize: what ships, run under the tools that check what a kernel reads and writes.

* :mod:`.vulkan`: GPU-assisted validation (``VK_LAYER_KHRONOS_validation`` with GPU-AV, ``vkcoop.vk.validation``)
  over every sample's pipelines and each shipped seed configuration of each Vulkan GEMM path and of the attention
  kernel, on an aligned and a ragged shape (``vkcoop sanitize vulkan``).
* The CUDA kernels under compute-sanitizer's memcheck, racecheck, synccheck and initcheck are
  :mod:`vkcoop.cuda.sanitizer` (``vkcoop sanitize cuda``).

docs/sanitizers.md says what each tool covers and what it cannot.
"""
from __future__ import annotations

from .vulkan import GpuAvReport, GpuAvRun, attention_jobs, gemm_jobs, gemm_shapes, run_gpu_av

__all__ = ["GpuAvReport", "GpuAvRun", "attention_jobs", "gemm_jobs", "gemm_shapes", "run_gpu_av"]
