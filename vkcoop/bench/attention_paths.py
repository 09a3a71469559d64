"""The paths ``vkcoop bench attention`` compares: the Vulkan kernel and each SDPA backend torch offers.

Every path has the same small shape: ``bind(case, inputs)`` uploads once and returns a bound object with
``rows(b, h, rows)`` (O's rows for the check, as numpy) and ``time(iters, warmup, warmup_seconds)`` (seconds per
run, after a warm-up of ``warmup`` runs lasting at least ``warmup_seconds``), or raises :class:`Unsupported` with the
reason the path cannot take the case (reported as skipped).
"""
from __future__ import annotations

import dataclasses
import warnings

from ..attention import AttentionConfig, AttentionInputError, VulkanAttention, attention_features
from ..attention.kernel import launch_choices
from ..attention.vulkan import candidate_configs, choose_config, device_kernel, device_target_workgroups

VULKAN_PATH = "vk-coopmat2"
#: Path name -> torch.nn.attention.SDPBackend member.
TORCH_BACKENDS = {"torch-flash": "FLASH_ATTENTION", "torch-efficient": "EFFICIENT_ATTENTION",
                  "torch-cudnn": "CUDNN_ATTENTION", "torch-math": "MATH"}
#: The math backend materialises the fp32 score matrix (and its softmax): skip cases where that passes this.
MATH_BYTES_LIMIT = 16 << 30


class Unsupported(Exception):
    """The path cannot run this case here; the message says why."""


class VulkanPath:
    """flash_attention.comp on one device; one VulkanAttention (pipelines) per kernel configuration."""
    name = VULKAN_PATH

    def __init__(self, dtypes, device=None, validate: bool = False, tile=None, flush_l2: bool = False):
        from .. import vk
        from ..attention import EXTENSIONS
        from ..gemm import L2Flush
        self.device = vk.Device(device, extensions=EXTENSIONS, features=attention_features(dtypes),
                                validate=validate)
        self.flexible = self.device.physical.flexible_shapes()
        self.tile = tile
        self.target_workgroups = device_target_workgroups(self.device.physical)
        self._runners: dict = {}
        try:   # read before every timed run (--flush-l2): K and V then come from DRAM, as a decode step meets them
            self.flush = L2Flush(self.device) if flush_l2 else None
        except BaseException:
            self.device.close()
            raise

    @property
    def device_name(self) -> str:
        return self.device.physical.name

    @property
    def identity(self):
        """The device's key in the tuning cache (:func:`vkcoop.bench.identity.vulkan_identity`)."""
        from .identity import vulkan_identity
        return vulkan_identity(self.device.physical)

    def default_config(self, case) -> AttentionConfig:
        """The rule's choice for the case (decode, prefill or FlashAttention-2's split,
        :func:`vkcoop.attention.choose_config`), its launch choices open; Unsupported where the table has none."""
        try:
            return choose_config(self.device.physical, case.shape, case.dtype, self.flexible)
        except AttentionInputError as error:
            raise Unsupported(str(error)) from None

    def candidates(self, case) -> list[AttentionConfig]:
        """What tuning measures for the case, the default first (:func:`vkcoop.attention.candidate_configs`)."""
        try:
            return candidate_configs(self.device.physical, case.shape, case.dtype, self.flexible)
        except AttentionInputError as error:
            raise Unsupported(str(error)) from None

    def fits(self, case, config: AttentionConfig) -> bool:
        """Whether the device's table takes ``config`` for the case (a cached entry or seed that does not is
        passed over)."""
        try:
            device_kernel(self.device.physical, case.dtype, case.shape.head_dim, config.tile, flexible=self.flexible,
                          subgroup_rows=config.subgroup_rows)
        except AttentionInputError:
            return False
        return True

    def config(self, case, config: AttentionConfig | None = None) -> AttentionConfig:
        """``config`` (default: the given tile, else :meth:`default_config`) with its key splits and GQA rows
        resolved for the case."""
        config = config or (AttentionConfig(self.tile) if self.tile else self.default_config(case))
        gqa_rows, splits = launch_choices(case.shape, config.tile, gqa_rows=config.gqa_rows,
                                          kv_splits=config.kv_splits, target_workgroups=self.target_workgroups)
        return dataclasses.replace(config, gqa_rows=gqa_rows, kv_splits=splits)

    def bind(self, case, inputs, config: AttentionConfig | None = None):
        config = self.config(case, config)
        key = (case.dtype, case.shape.head_dim, case.causal, config)
        if key not in self._runners:
            try:
                self._runners[key] = VulkanAttention.from_config(self.device, case.dtype, case.shape, config,
                                                                 causal=case.causal, flexible=self.flexible)
            except AttentionInputError as error:
                raise Unsupported(str(error)) from None
        runner = self._runners[key]
        runner.bind(*inputs)
        # the explore tool's label, every choice resolved: `vkcoop inspect --attention` and explore take it back
        return _BoundVulkan(runner, runner.config().label(), self.flush)

    def close(self):
        for runner in self._runners.values():
            runner.close()
        self._runners.clear()
        if self.flush is not None:
            self.flush.close()
        self.device.close()


class _BoundVulkan:
    def __init__(self, runner, config: str, flush=None):
        self.runner, self.config, self.flush, self._out = runner, config, flush, None

    def rows(self, b: int, h: int, rows):
        if self._out is None:
            self._out = self.runner.result()
        return self._out[b, h, rows]

    def time(self, iters: int, warmup: int, warmup_seconds: float) -> list[float]:
        return self.runner.time(iters, warmup, self.flush, warmup_seconds=warmup_seconds)

    def release(self):
        self._out = None
        self.runner.release()


def torch_status() -> tuple[bool, str]:
    """(True, device) when torch sees a CUDA device, else (False, why not)."""
    try:
        import torch
    except ImportError:
        return False, "torch is not installed (pip install vkcoop[cuda])"
    found = torch.cuda.is_available()
    return found, (f"{torch.cuda.get_device_name()} (torch {torch.__version__})" if found
                   else "torch sees no CUDA device")


class TorchInputs:
    """One case's q, k, v on the CUDA device, shared by every SDPA backend."""

    def __init__(self, inputs):
        from ..cuda.gemm import to_torch
        self.q, self.k, self.v = (to_torch(a) for a in inputs)

    def close(self):
        self.q = self.k = self.v = None


class TorchSdpaPath:
    """``torch.nn.functional.scaled_dot_product_attention`` restricted to one backend by ``sdpa_kernel``."""

    def __init__(self, name: str, flush_l2: bool = False):
        import torch.nn.attention as sdpa
        self.name, self.flush_l2 = name, flush_l2
        self.backend = getattr(sdpa.SDPBackend, TORCH_BACKENDS[name])

    def call(self, case, device_inputs):
        """The SDPA call alone; run it inside :meth:`only_this_backend`."""
        import torch.nn.functional as functional
        gqa = case.shape.q_heads != case.shape.kv_heads

        def run():
            return functional.scaled_dot_product_attention(device_inputs.q, device_inputs.k, device_inputs.v,
                                                           is_causal=case.causal, enable_gqa=gqa)
        return run

    def only_this_backend(self):
        from torch.nn.attention import sdpa_kernel
        return sdpa_kernel([self.backend])

    def bind(self, case, device_inputs):
        s = case.shape
        scores = 3 * 4 * s.batch * s.q_heads * s.seq_q * s.seq_kv
        if self.name == "torch-math" and scores > MATH_BYTES_LIMIT:
            raise Unsupported(f"the math backend would hold {scores >> 30} GiB of scores "
                              f"(limit {MATH_BYTES_LIMIT >> 30} GiB)")
        run = self.call(case, device_inputs)
        with warnings.catch_warnings(record=True) as caught:   # torch says why a backend refuses in warnings
            warnings.simplefilter("always")
            try:
                with self.only_this_backend():
                    out = run()
            except RuntimeError as error:   # "No available kernel", out of memory
                why = [str(w.message).strip().splitlines()[0] for w in caught] + [str(error).strip()]
                raise Unsupported(why[0][:200]) from None
        return _BoundTorch(run, out, self.only_this_backend, self.flush_l2)

    def close(self):
        pass


class _BoundTorch:
    config = ""

    def __init__(self, run, out, backend_context, flush_l2: bool = False):
        self.run, self.out, self.backend_context, self.flush_l2 = run, out, backend_context, flush_l2

    def rows(self, b: int, h: int, rows):
        import numpy as np
        import torch
        picked = self.out[b, h, torch.as_tensor(rows, device=self.out.device)].float().cpu().numpy()
        return picked.astype(np.float32)

    def time(self, iters: int, warmup: int, warmup_seconds: float) -> list[float]:
        from ..cuda.timing import time_cuda
        with self.backend_context():   # entered once: its Python cost stays out of the timed calls
            timing = time_cuda(self.run, warmup=warmup, iters=iters, warmup_seconds=warmup_seconds,
                               flush_l2=self.flush_l2)
            return [t * 1e-3 for t in timing.times_ms]

    def release(self):
        self.out = None
