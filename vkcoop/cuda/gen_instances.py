"""Generates the kernel instantiation lists ``kernels/mma_sp_instances.cuh``,
``kernels/wgmma_sp_instances.cuh`` and ``kernels/mma_dense_instances.cuh`` from the Python configurations.

The configurations are written once, in :mod:`vkcoop.cuda.gemm` (``MmaSpGemm.CONFIGS``,
``WgmmaSpGemm.CONFIGS`` and ``WgmmaSpGemm.DIAGNOSTIC_CONFIGS``) and :mod:`vkcoop.cuda.dense`
(``MmaDenseGemm.CONFIGS``).  Each becomes one
``extern "C"`` entry point per dtype (fp16 and bf16; fp16 only for ``fp16_only`` diagnostics; every wgmma.sp type
for the wgmma tiles marked ``every_type``) named
exactly ``config.kernel_name(dtype)``, followed by a ``static_assert`` that the
launcher's ``smem_bytes`` (and, for wgmma, ``bm`` and the K slice ``bk``) equals what the kernel template lays
out, so a disagreement fails compilation instead of corrupting shared memory at run time.
``tests/test_cuda_compile.py`` checks that the committed headers equal this output.

Run: ``python -m vkcoop.cuda.gen_instances`` (rewrites every header).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from .configs import MmaDenseConfig
from .dense import MmaDenseGemm
from .gemm import MmaSpConfig, MmaSpGemm, WgmmaSpConfig, WgmmaSpGemm

KERNEL_DIR = Path(__file__).resolve().parent / "kernels"
DTYPES = ("float16", "bfloat16")


@dataclass(frozen=True)
class Instance:
    """One extern "C" entry point: its name, the C++ kernel type it runs, and the launch
    numbers the Python launcher uses, which the generated static_asserts check."""

    name: str
    macro: str  # the entry macro of the .cu (launch bounds, parameters)
    kernel_type: str
    threads: int
    checks: tuple[tuple[str, str, int], ...]  # (kernel constexpr, config property, the property's value)
    origin: str  # where the config comes from, for the comment line


@dataclass(frozen=True)
class Family:
    """One .cu source and the path class whose configurations it instantiates."""

    stem: str
    path_cls: type  # a class with CONFIGS (and optionally DIAGNOSTIC_CONFIGS) and config_type
    instance: Callable[[object, str, str], Instance]
    source: str = "vkcoop/cuda/gemm.py"  # where the path class and its CONFIGS are written

    @property
    def header(self) -> Path:
        return KERNEL_DIR / f"{self.stem}_instances.cuh"

    def configs(self) -> list[tuple[str, object]]:
        """(origin, config) for every configuration the launcher may pick or be given by name."""
        cls = self.path_cls.__name__
        named = [(f'{cls}.CONFIGS["{key}"]', cfg) for key, cfg in self.path_cls.CONFIGS.items()]
        diagnostic = [(f"{cls}.DIAGNOSTIC_CONFIGS[{i}]", cfg)
                      for i, cfg in enumerate(getattr(self.path_cls, "DIAGNOSTIC_CONFIGS", ()))]
        return named + diagnostic

    def instances(self) -> list[Instance]:
        """Every (config, dtype) entry point, config order, fp16 before bf16 (then the other wgmma.sp types in
        :data:`WGMMA_SP_TYPES` order); one entry per name."""
        out: dict[str, Instance] = {}
        for origin, cfg in self.configs():
            for dtype in instance_dtypes(cfg):
                inst = self.instance(cfg, dtype, origin)
                previous = out.setdefault(inst.name, inst)
                if previous.kernel_type != inst.kernel_type:
                    raise ValueError(f"{origin} and {previous.origin} both name {inst.name}")
        return list(out.values())


def instance_dtypes(cfg) -> tuple[str, ...]:
    """The dtypes a configuration has entry points for: its own list (wgmma.sp), else fp16 and bf16."""
    return getattr(cfg, "dtypes", DTYPES)


def _cxx_bool(value: bool) -> str:
    return "true" if value else "false"


def _split_form(cfg, origin: str, kernel: str, entry: str) -> tuple[str, str]:
    """(kernel type, entry macro) of a warp-tiled configuration (mma.sp or dense mma.sync): ``kernel`` itself, or
    with ``per_sm`` the split kernel of warp_tiled.cuh that runs its K loop (``cluster_sum``: the cluster's; else
    the one through global memory, whose entry takes the partials and counters)."""
    if cfg.cluster_sum and not cfg.per_sm:
        raise ValueError(f"{origin}: cluster_sum adds up K splits: it needs per_sm")
    if cfg.cluster_sum:
        return f"warp_tiled::ClusterSplitKernel<{kernel}>", entry
    if cfg.per_sm:
        return f"warp_tiled::SplitKernel<{kernel}>", entry.replace("_ENTRY", "_SPLIT_ENTRY")
    return kernel, entry


def mma_sp_instance(cfg: MmaSpConfig, dtype: str, origin: str) -> Instance:
    bf16 = _cxx_bool(dtype == "bfloat16")
    args = f"{bf16}, {cfg.bm}, {cfg.bn}, {cfg.bk}, {cfg.warps_m}, {cfg.warps_n}, {cfg.stages}"
    if cfg.pipelined or cfg.slide_a:
        if cfg.per_sm:
            raise ValueError(f"{origin}: split-K runs the plain kernel only, not the pipelined one")
        kernel_type = f"mma_sp::PipelinedKernel<{args}, {_cxx_bool(cfg.slide_a)}>"
    else:
        kernel_type = f"mma_sp::Kernel<{args}>"
    kernel_type, macro = _split_form(cfg, origin, kernel_type, "VK_MMA_SP_ENTRY")
    return Instance(cfg.kernel_name(dtype), macro, kernel_type, cfg.threads,
                    (("SMEM_BYTES", "smem_bytes", cfg.smem_bytes),), origin)


def wgmma_sp_instance(cfg: WgmmaSpConfig, dtype: str, origin: str) -> Instance:
    cfg = cfg.of(dtype)
    kernel_type = (f"wgsp::Kernel<{cfg.element.traits}, {cfg.bn}, {cfg.consumers}, {cfg.stages}, "
                   f"{_cxx_bool(cfg.setmaxnreg)}, {cfg.wait_depth}, {cfg.msub}, {_cxx_bool(bool(cfg.per_sm))}, "
                   f"{_cxx_bool(cfg.warp_store)}, {_cxx_bool(cfg.persistent)}>")
    return Instance(cfg.kernel_name(), "VK_WGMMA_SP_ENTRY", kernel_type, cfg.threads,
                    (("SMEM_BYTES", "smem_bytes", cfg.smem_bytes), ("BM", "bm", cfg.bm), ("BK", "bk", cfg.bk)),
                    origin)


def mma_dense_instance(cfg: MmaDenseConfig, dtype: str, origin: str) -> Instance:
    bf16 = _cxx_bool(dtype == "bfloat16")
    kernel = (f"mma_dense::Kernel<{bf16}, {cfg.bm}, {cfg.bn}, {cfg.bk}, {cfg.warps_m}, {cfg.warps_n}, {cfg.stages}, "
              f"{cfg.group_m}>")
    kernel, macro = _split_form(cfg, origin, kernel, "VK_MMA_DENSE_ENTRY")
    return Instance(cfg.kernel_name(dtype), macro, kernel, cfg.threads,
                    (("SMEM_BYTES", "smem_bytes", cfg.smem_bytes),), origin)


FAMILIES = (Family("mma_sp", MmaSpGemm, mma_sp_instance),
            Family("wgmma_sp", WgmmaSpGemm, wgmma_sp_instance),
            Family("mma_dense", MmaDenseGemm, mma_dense_instance, "vkcoop/cuda/dense.py"))


def _entry(inst: Instance, config_type: str, source: str) -> str:
    condition = " &&\n              ".join(f"{inst.kernel_type}::{member} == {value}"
                                          for member, _, value in inst.checks)
    what = ", ".join(f"{config_type}.{prop} != {member}" for member, prop, _ in inst.checks)
    return (f"{inst.macro}({inst.name}, {inst.threads}, {inst.kernel_type})\n"
            f"static_assert({condition},\n"
            f'              "{inst.name}: {what} ({source} vs the kernel template)");\n')


def render(family: Family, instances: list[Instance] | None = None) -> str:
    """The header text for ``family`` (its configurations' instances unless ``instances`` is given)."""
    instances = family.instances() if instances is None else instances
    cls = family.path_cls.__name__
    parts = [f"// GENERATED by vkcoop/cuda/gen_instances.py from {cls} in {family.source};\n"
             f"// do not edit by hand (run: python -m vkcoop.cuda.gen_instances).\n"
             f"// One entry point per (config, dtype), {len(instances)} in all, each checked against the\n"
             f"// launcher's numbers.  Included by {family.stem}.cu, which defines the entry macros.\n"]
    origin = None
    for inst in instances:
        if inst.origin != origin:
            origin = inst.origin
            parts.append(f"\n// {origin}\n")
        parts.append(_entry(inst, family.path_cls.config_type.__name__, family.source))
    return "".join(parts)


def main() -> None:
    for family in FAMILIES:
        family.header.write_text(render(family))
        print(f"wrote {family.header}")


if __name__ == "__main__":
    main()
