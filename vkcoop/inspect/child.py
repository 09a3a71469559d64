"""The child process of ``vkcoop inspect`` that builds: it creates the target's pipelines on a fresh Vulkan device,
so the driver compiles them into the shader disk cache the parent put in its environment, and it returns for
each pipeline a :class:`~vkcoop.inspect.executables.PipelineRecipe` from which :mod:`vkcoop.inspect.query` (a
second process) can re-create it for the VK_KHR_pipeline_executable_properties query.

It runs in its own process because the driver reads ``__GL_SHADER_DISK_CACHE*`` once, when it loads, and
vkcoop.vk keeps instances for the life of a process; the query runs in yet another, so that a crash in the driver
there cannot take this result (or the cache) with it. Usage (the parent does this)::

    python -m vkcoop.inspect.child REQUEST.json RESULT.json

REQUEST: ``{"target": Target.to_dict(), "device": index|name|null}``.
RESULT: ``{"device": {...}, "pipelines": [{"label", "spirv_bytes"}], "recipes": [PipelineRecipe.to_dict()],
"extensions": [...], "features": [...], "error": null | {"kind": "input"|"device"|"vulkan", "message"}}``.
"""
from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path

from .targets import Target


class _Recorder:
    """Wraps ``device.pipeline`` of one vkcoop Device so every pipeline made through it is remembered with its
    SPIR-V (the executables query re-creates it from that, in another process)."""

    def __init__(self, device):
        self.device, self.created = device, []
        original = device.pipeline

        def pipeline(spirv, **options):
            made = original(spirv, **options)
            self.created.append((options.get("name", "shader"), bytes(spirv), made))
            return made
        device.pipeline = pipeline


def _shader_features(spirv: bytes, physical, target: Target) -> list[str]:
    """Features the shader's capabilities need, the coopmat2 ones the device has when it uses cooperative
    matrices, and what local_size_id / a required subgroup size need."""
    import spirv_tools

    from ..samples import CAPABILITY_FEATURES
    from ..vk import COOPMAT2_FEATURES
    info = spirv_tools.reflect(spirv)
    wanted = [CAPABILITY_FEATURES[c] for c in info.capabilities if c in CAPABILITY_FEATURES]
    if "CooperativeMatrixKHR" in info.capabilities:
        wanted += [f for f in COOPMAT2_FEATURES if physical.features.get(f)]
    if getattr(info, "uses_local_size_id", False):
        wanted.append("maintenance4")
    if target.subgroup_size is not None:
        wanted += ["subgroupSizeControl", "computeFullSubgroups"]
    return list(dict.fromkeys(wanted + list(target.features)))


@contextlib.contextmanager
def _shader(target: Target, device_arg):
    from .. import shaders as catalog
    from .. import vk
    spirv = catalog.compile_variant(catalog.ShaderVariant(target.shader, tuple(sorted(target.defines.items()))))
    with vk.Instance() as instance:
        physical = instance.select(device_arg)
        features = _shader_features(spirv, physical, target)
    with vk.Device(device_arg, features=features) as device:
        recorder = _Recorder(device)
        subgroup = ({"required_subgroup_size": target.subgroup_size, "full_subgroups": True}
                    if target.subgroup_size else {})
        device.pipeline(spirv, specialization=dict(target.specialization), name=target.label, **subgroup)
        yield device, recorder


@contextlib.contextmanager
def _sample(target: Target, device_arg):
    from .. import shaders as catalog
    from .. import vk
    from ..samples import DeviceCaps, get_sample
    sample = get_sample(target.sample)
    with vk.Device(device_arg, extensions=sample.requires.extensions, features=sample.requires.features) as device:
        recorder = _Recorder(device)
        cases = sample.prepared_cases(DeviceCaps.from_physical(device.physical))
        if target.case is not None:
            cases = [c for c in cases if c.name == target.case]
            if not cases:
                raise ValueError(f"sample {sample.name} has no case {target.case!r} on this device")
        built = set()
        for case in cases:
            key = (case.variant(), repr(sorted((str(k), repr(v)) for k, v in case.specialization.items())))
            if key not in built:
                built.add(key)
                device.pipeline(catalog.compile_variant(case.variant()), specialization=dict(case.specialization),
                                name=f"{sample.name}:{case.name}")
        yield device, recorder


@contextlib.contextmanager
def _gemm(target: Target, device_arg):
    """The pipelines ``vkcoop bench sparse`` creates for one path (its own device, features and kernels): the
    kernel's own, and those its binding to the 8192-row problem adds (the ALIGNED dense pipeline, for one)."""
    from ..gemm.path import GemmOperands, GemmProblem
    from ..gemm.paths import VulkanDevicePaths
    group = VulkanDevicePaths([target.dtype], device_arg)
    try:
        recorder = _Recorder(group.device)
        n = 8192 if target.shape == "square" else 32
        problem = GemmProblem(target.dtype, target.shape, 8192, n, 8192)
        path = next(p for p in group.paths if p.name == target.gemm_path)
        if isinstance(target.config, str):
            config = path.config_from_label(target.config, problem)
            if config is None:
                raise ValueError(f"{target.gemm_path} cannot run {target.shape} ({problem.m}x{problem.n}x"
                                 f"{problem.k}) with --config {target.config}")
        else:
            configs = path.configs(problem, tune=True)
            if target.config >= len(configs):
                raise ValueError(f"{target.gemm_path} {target.shape} has {len(configs)} configurations; "
                                 f"--config {target.config} is out of range")
            config = configs[target.config]
        path.bind(GemmOperands.make(problem), config).release()
        yield group.device, recorder
    finally:
        group.close()


@contextlib.contextmanager
def _attention(target: Target, device_arg):
    """The pipelines of one attention configuration's launch on its case, as ``bench attention`` would time it:
    the launch's own dispatches only (no template launch, so no pipeline the timing would not use)."""
    import numpy as np

    from .. import vk
    from ..attention import EXTENSIONS, AttentionShape, attention_features, parse_attention_config
    from ..attention.vulkan import config_options, device_kernel, device_target_workgroups
    from ..gemm import DTYPES
    from ..gemm.vulkan import compile_dispatch
    spec = target.attention
    shape = AttentionShape(**spec["shape"])
    config = parse_attention_config(spec["config"])
    features = attention_features([target.dtype])
    with vk.Device(device_arg, extensions=EXTENSIONS, features=features) as device:
        recorder = _Recorder(device)
        aim = spec["target_workgroups"] or device_target_workgroups(device.physical)
        options = config_options(shape, config, causal=spec["causal"], target_workgroups=aim)
        kernel = device_kernel(device.physical, target.dtype, shape.head_dim, **options)
        element = DTYPES[target.dtype]
        q = np.zeros((shape.batch, shape.q_heads, shape.seq_q, shape.head_dim), element)
        kv = np.zeros((shape.batch, shape.kv_heads, shape.seq_kv, shape.head_dim), element)
        for dispatch in kernel.launch(q, kv, kv).dispatches:
            spec_text = ", ".join(f"{k}={v}" for k, v in dispatch.specialization.items())
            device.pipeline(compile_dispatch(dispatch), name=f"{dispatch.shader} {{{spec_text}}}",
                            specialization=dict(dispatch.specialization), **dispatch.pipeline_options)
        yield device, recorder


def _device_facts(device) -> dict:
    physical = device.physical
    properties = physical.properties
    return {"name": physical.name, "vendor_id": int(properties.vendorID), "driver_version": physical.driver_version,
            "api_version": ".".join(map(str, physical.api_version)),
            "buffer_robustness": device.buffer_robustness}


def _input_errors():
    """What a bad target raises while its pipelines are made (GemmInputError and AttentionInputError are
    ValueErrors)."""
    from ..samples import SampleInputError
    from ..vk import LimitError, PipelineInputError
    return (SampleInputError, PipelineInputError, LimitError, ValueError)


def run_request(request: dict) -> dict:
    from .. import vk
    from .executables import PipelineRecipe
    target = Target.from_dict(request["target"])
    builder = {"shader": _shader, "sample": _sample, "gemm": _gemm, "attention": _attention}[target.kind]
    result = {"device": None, "pipelines": [], "recipes": [], "extensions": [], "features": [], "error": None}
    try:
        with builder(target, request.get("device")) as (device, recorder):
            result["device"] = _device_facts(device)
            result["extensions"] = list(device.enabled_extensions)
            result["features"] = list(device.enabled_features)
            for label, spirv, pipeline in recorder.created:
                result["pipelines"].append({"label": label, "spirv_bytes": len(spirv)})
                result["recipes"].append(PipelineRecipe.from_pipeline(label, spirv, pipeline).to_dict())
    except (vk.MissingFeatureError, vk.NoDeviceError) as error:
        result["error"] = {"kind": "device", "message": str(error)}
    except _input_errors() as error:
        result["error"] = {"kind": "input", "message": str(error)}
    except vk.VulkanError as error:
        result["error"] = {"kind": "vulkan", "message": str(error)}
    return result


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2:
        print("usage: python -m vkcoop.inspect.child REQUEST.json RESULT.json", file=sys.stderr)
        return 2
    from ..vk import release_pooled_instances
    request = json.loads(Path(argv[0]).read_text())
    result = run_request(request)
    release_pooled_instances()  # destroy the VkInstance before exit, whenever the driver writes its cache
    Path(argv[1]).write_text(json.dumps(result, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
