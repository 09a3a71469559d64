"""The sample base class, its runner (device, pipelines, dispatch, bit-exact check) and the registry.

A sample is a :class:`Sample` subclass with ``name``, ``description``, ``requires`` and a pure ``cases(caps)``
method that returns :class:`vkcoop.samples.case.Case` objects. :meth:`Sample.run` does everything else: it
creates a device with exactly the sample's requirements (or skips, naming what is missing), checks every case
before anything is dispatched, compiles and caches pipelines, dispatches with GPU timestamps, reads the outputs
back and compares them bit for bit.
"""
from __future__ import annotations

import time
from typing import ClassVar

from .. import shaders as shader_catalog
from .caps import CAPABILITY_FEATURES, DeviceCaps, Requirements, SampleInputError
from .case import Case, SampleResult, find_mismatches

MAX_MISMATCHES = 8


class Sample:
    """Base class: subclasses set ``name``, ``description``, ``requires`` (and ``order``) and implement
    :meth:`cases`. Register them with :func:`register`."""
    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    requires: ClassVar[Requirements] = Requirements()
    order: ClassVar[int] = 100

    def cases(self, caps: DeviceCaps) -> list[Case]:
        raise NotImplementedError

    # -- running --------------------------------------------------------------------------------------------
    def prepared_cases(self, caps: DeviceCaps) -> list[Case]:
        """cases(caps), each checked (SampleInputError before anything is dispatched)."""
        cases = list(self.cases(caps))   # a list, or a generator of cases
        if not cases:
            raise SampleInputError(f"sample {self.name} produced no cases for {caps.name}")
        names = [c.name for c in cases]
        if len(set(names)) != len(names):
            raise SampleInputError(f"sample {self.name}: duplicate case names")
        for case in cases:
            case.check()
        return cases

    def check_capabilities(self, spirv: bytes, case: Case) -> None:
        """The shader's SPIR-V capabilities must be covered by the declared requirements."""
        import spirv_tools
        declared = set(self.requires.features)
        for capability in spirv_tools.reflect(spirv).capabilities:
            feature = CAPABILITY_FEATURES.get(capability)
            if feature and feature not in declared:
                raise SampleInputError(f"sample {self.name}, case {case.name}: the shader uses capability "
                                       f"{capability}, which needs feature {feature!r}; add it to requires")

    def run(self, device=None, *, validate: bool | str = False, instance=None,
            max_mismatches: int = MAX_MISMATCHES) -> SampleResult:
        """Dispatch every case on ``device`` (index, name substring or None: $VKCOOP_DEVICE / first GPU) and
        check it. Returns a skip result (with the reason) when no device has what ``requires`` names;
        never reports a pass for cases that were not dispatched. ``validate``: False, True or "gpu"
        (:mod:`vkcoop.vk.validation`; an ``instance`` brings its own); a message the layer reports fails its case,
        except GPU-AV's notes of what it could not instrument, kept in ``not_instrumented``."""
        from .. import vk
        started = time.perf_counter()
        result = SampleResult(self.name, "pass")
        validate = vk.validation.mode_of(validate) != vk.validation.OFF
        try:
            gpu = vk.Device(device, extensions=self.requires.extensions, features=self.requires.features,
                            validate=validate, instance=instance)
        except (vk.MissingFeatureError, vk.NoDeviceError, vk.LayerNotFoundError) as error:
            result.status, result.reason = "skip", str(error)
            result.wall_time_s = time.perf_counter() - started
            return result
        except vk.VulkanError as error:  # e.g. the validation layer is listed but does not load
            result.status, result.reason = "fail", f"device creation failed: {error}"
            result.wall_time_s = time.perf_counter() - started
            return result
        with gpu:
            result.device = gpu.physical.name
            caps = DeviceCaps.from_physical(gpu.physical)
            cases = self.prepared_cases(caps)
            pipelines: dict = {}
            self._create_pipelines(gpu, cases, pipelines)
            try:
                for case in cases:
                    self._run_case(gpu, case, pipelines, result, validate, max_mismatches)
            except vk.DeviceLostError as error:
                result.failed_cases.append(f"device lost: {error}")
            else:
                gpu.save_pipeline_cache()
            result.pipelines = len(pipelines)
        if result.failed_cases:
            result.status = "fail"
            result.reason = (f"{len(result.failed_cases)} of {result.cases} cases failed: "
                             + ", ".join(result.failed_cases[:6]) + ("..." if len(result.failed_cases) > 6 else ""))
        else:
            outputs = [b for c in cases for b in c.bindings if b.is_output]
            within = sum(b.tolerance is not None for b in outputs)
            result.reason = (f"{result.cases} cases bit-exact" if not within else
                             f"{result.cases} cases: {len(outputs) - within} outputs bit-exact, {within} within "
                             "their documented tolerance")
        result.wall_time_s = time.perf_counter() - started
        return result

    @staticmethod
    def _pipeline_key(case: Case) -> tuple:
        return (case.shader, case.variant().defines, tuple(sorted((str(k), repr(v))
                                                                  for k, v in case.specialization.items())))

    def _create_pipelines(self, gpu, cases, cache: dict) -> None:
        """Every distinct pipeline of ``cases``, created at once on several threads (the driver compiles them
        concurrently). One that fails is left out: its case creates it again and reports the failure."""
        from .. import vk
        distinct = {self._pipeline_key(case): case for case in cases}
        vk.create_concurrently([lambda case=case: self._pipeline(gpu, case, cache) for case in distinct.values()])

    def _pipeline(self, gpu, case: Case, cache: dict):
        key = self._pipeline_key(case)
        if key not in cache:
            spirv = shader_catalog.compile_variant(case.variant())
            self.check_capabilities(spirv, case)
            cache[key] = gpu.pipeline(spirv, specialization=dict(case.specialization),
                                      name=f"{self.name}:{case.variant().label}")
        return cache[key]

    def _run_case(self, gpu, case: Case, pipelines: dict, result: SampleResult, validate: bool,
                  max_mismatches: int) -> None:
        from .. import vk
        buffers = []
        try:
            pipeline = self._pipeline(gpu, case, pipelines)
            buffers = [gpu.upload(b.data, name=f"{case.name}:{b.name}") for b in case.bindings]
            gpu_ns = gpu.run(pipeline, buffers, case.groups, case.push)
            result.cases += 1
            result.gpu_time_ms += gpu_ns / 1e6
            failed = False
            known_mismatches, known_examples = 0, []
            for binding, buffer in zip(case.bindings, buffers):
                if not binding.is_output:
                    continue
                count, found = find_mismatches(case.name, binding, buffer.read(), max_mismatches)
                if count and case.known_issue:
                    known_mismatches += count
                    known_examples.extend(m.to_dict() for m in found[:4])
                elif count:
                    failed = True
                    result.mismatch_count += count
                    room = max_mismatches - len(result.mismatches)
                    result.mismatches.extend(found[:max(room, 0)])
            if case.known_issue:
                result.known_issues.append({"case": case.name, "issue": case.known_issue,
                                            "reproduced": known_mismatches > 0, "mismatches": known_mismatches,
                                            "examples": known_examples})
            if validate:
                failed = _collect_validation(gpu, result) or failed
            if failed:
                result.failed_cases.append(case.name)
        except vk.VulkanError as error:
            # A Vulkan failure (pipeline creation, fence timeout, device loss) fails this case, not the process.
            result.failed_cases.append(f"{case.name} ({type(error).__name__}: {str(error).splitlines()[0]})")
            if isinstance(error, vk.DeviceLostError):
                raise
        finally:
            for buffer in buffers:
                buffer.close()


def _collect_validation(gpu, result: SampleResult) -> bool:
    """Move the layer's messages into ``result``; True where one reports a fault (GPU-AV's notes of what it could
    not instrument are gaps in the coverage, not faults)."""
    from ..vk import validation
    messages = gpu.instance.take_messages()
    gaps = [m for m in messages if validation.classify(m) == "not-instrumented"]
    found = [m for m in messages if m not in gaps]
    result.not_instrumented.extend(str(m) for m in gaps)
    result.validation_messages.extend(str(m) for m in found)
    return bool(found)


_REGISTRY: dict[str, type] = {}


def register(cls: type) -> type:
    """Class decorator adding a Sample subclass to the registry (names must be unique)."""
    if not cls.name:
        raise ValueError(f"{cls.__name__} has no name")
    if cls.name in _REGISTRY and _REGISTRY[cls.name] is not cls:
        raise ValueError(f"two samples are named {cls.name!r}")
    _REGISTRY[cls.name] = cls
    return cls


def registered() -> dict[str, type]:
    return dict(_REGISTRY)

