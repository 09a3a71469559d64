"""vkcoop.inspect: the machine code the NVIDIA driver built for a vkcoop pipeline.

``vkcoop inspect`` (``python -m vkcoop.inspect``) builds a target's pipelines in a child process whose driver
writes its shader disk cache to a private directory (``__GL_SHADER_DISK_CACHE=1``,
``__GL_SHADER_DISK_CACHE_PATH``, ``__GL_SHADER_DISK_CACHE_SKIP_CLEANUP=1``), finds the zstd frames in the cache
files, unpacks the CUDA ELF objects in them and runs ``nvdisasm`` on each. It reports per kernel the register
count, shared memory, and the static instruction mix (MMA forms, global loads and stores by width, shared-memory
traffic, async copies, barriers, local-memory spills), and whatever VK_KHR_pipeline_executable_properties says
where the driver exposes it.

Python API
----------
``targets.shader_target(shader, defines=(), specialization=(), features=(), subgroup_size=None)``,
``targets.sample_target(name, case=None)``, ``targets.gemm_target(path, dtype, shape, config)`` -> Target
    (``TargetError`` on bad input, before any device work).
``core.inspect_pipeline(target, *, device=None, executables=True, cache_dir=None, nvdisasm=None,
raw_arch="SM90") -> InspectResult`` (``.objects`` -> ObjectReport -> KernelReport with ``.mix``
(:class:`sass.InstructionMix`), ``.executables``, ``.to_dict()``, ``.listing()``); raises
``InspectUnavailable`` (``.what``), ``InspectInputError``, ``InspectFailed``.
``cache.scan_bytes(data)`` / ``cache.scan_directory(path)`` -> CacheScan; ``sass.parse_listing(text)``,
``sass.instruction_mix(mnemonics)``; ``elf.parse(data)``; ``executables.pipeline_executables(physical, spirv,
pipeline, extensions=, features=)``.
CLI: ``app.add_arguments(parser)``, ``app.run(args) -> int``, ``app.main(argv)``.
"""
from .core import InspectFailed, InspectInputError, InspectResult, InspectUnavailable, inspect_pipeline
from .targets import Target, TargetError, gemm_target, sample_target, shader_target

__all__ = ["inspect_pipeline", "InspectResult", "InspectUnavailable", "InspectInputError", "InspectFailed",
           "Target", "TargetError", "shader_target", "sample_target", "gemm_target"]
