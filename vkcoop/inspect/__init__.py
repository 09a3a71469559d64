"""vkcoop.inspect: the machine code the NVIDIA driver built for a vkcoop pipeline.

``vkcoop inspect`` (its command is :mod:`vkcoop.cli.inspect`) builds a target's pipelines in a child process whose driver
writes its shader disk cache to a private directory (``__GL_SHADER_DISK_CACHE=1``,
``__GL_SHADER_DISK_CACHE_PATH``, ``__GL_SHADER_DISK_CACHE_SKIP_CLEANUP=1``), finds the zstd frames in the cache
files and the compiled objects in them: the driver's NVuc containers (what the Vulkan driver writes; their code
section is raw SM90 code) and CUDA ELF objects, and runs ``nvdisasm`` on the code. It reports per kernel the
register count, scratch (local memory) and shared memory where known, and the static instruction mix (MMA forms,
global loads and stores by width and form, shared-memory traffic, async copies, barriers, local-memory spills),
and per loop what one pass over its body issues (``loops``: instructions per MMA, loads, barriers, MUFU).
Then, in a second child process, it asks VK_KHR_pipeline_executable_properties where the driver exposes it; a
crash there is one line of the report.

Modules: ``core`` (the reports, ``inspect_pipeline``), ``launch`` (the two child
processes, from the parent), ``child`` (the build child), ``query`` (the query child), ``executables``
(VK_KHR_pipeline_executable_properties), ``cache`` (zstd frames and objects), ``nvuc`` (the NVuc container),
``elf`` (the cubin), ``sass`` (nvdisasm and the instruction mix), ``loops`` (the loops of a listing),
``targets`` (what can be inspected).

Python API
----------
``targets.shader_target(shader, defines=(), specialization=(), features=(), subgroup_size=None)``,
``targets.sample_target(name, case=None)``, ``targets.gemm_target(path, dtype, shape, config)``,
``targets.attention_target(case, dtype, shape, causal, config, target_workgroups=None)`` -> Target
    (``TargetError`` on bad input, before any device work).
``core.inspect_pipeline(target, *, device=None, executables=True, cache_dir=None, nvdisasm=None,
raw_arch="SM90") -> InspectResult`` (``.objects`` -> ObjectReport -> KernelReport with ``.mix``
(:class:`sass.InstructionMix`) and ``.loops`` (:class:`loops.Loop`), ``.executables``, ``.to_dict()``,
``.listing()``); raises ``InspectUnavailable`` (``.what``), ``InspectInputError``, ``InspectFailed``.
``core.report_cache(directory, nvdisasm, raw_arch)`` -> (summary, [ObjectReport]) for a cache already on disk.
``cache.scan_bytes(data)`` / ``cache.scan_directory(path)`` -> CacheScan; ``nvuc.parse(data)`` /
``nvuc.find_containers(data)``; ``sass.parse_listing(text)``, ``sass.instruction_mix(mnemonics)``,
``sass.find_nvdisasm()``; ``loops.find_loops(kernel_listing)``, ``loops.mma_loops(loops)``; ``elf.parse(data)``;
``executables.pipeline_executables(physical, spirv, pipeline, extensions=, features=, progress=)``;
``launch.query(request)`` -> QueryOutcome (``.executables``, ``.failure``).
CLI: :mod:`vkcoop.cli.inspect` (``add_arguments(parser)``, ``run(args) -> int``).
"""
from .core import InspectFailed, InspectInputError, InspectResult, InspectUnavailable, inspect_pipeline
from .targets import Target, TargetError, gemm_target, sample_target, shader_target

__all__ = ["inspect_pipeline", "InspectResult", "InspectUnavailable", "InspectInputError", "InspectFailed",
           "Target", "TargetError", "shader_target", "sample_target", "gemm_target"]
