"""The fuzz targets: the hardware (coopmat2 tensor loads) and the portable GLSL port, behind one interface."""
from __future__ import annotations

import numpy as np

from . import compare


class _Target:
    name = ""
    hw = False

    def evaluate(self, cases, ref):
        """-> ((n,) bool case mismatch, {k: (obs tuple of case k, (E,) bool element mismatch)} for mismatches)."""
        raise NotImplementedError

    def fails_many(self, cases):
        elements = max(c.rows * c.cols for c in cases)
        ref = compare.reference_batch(cases, elements)
        bad, _ = self.evaluate(cases, ref)
        return [bool(b) for b in bad]


class _PortableTarget(_Target):
    name = "portable"

    def __init__(self, device):
        from ..portable import PortableRunner
        self.runner = PortableRunner(device)

    def evaluate(self, cases, ref):
        result = self.runner.run(cases)
        elements = result.indices.shape[1]
        ref = tuple(a[:, :elements] for a in ref)
        obs = (result.indices, result.status, result.block_coord, result.coord_in_block)
        bad, element_bad = compare.case_mismatches("portable", "", ref, obs)
        details = {int(k): (tuple(a[k] for a in obs), element_bad[k]) for k in np.nonzero(bad)[0]}
        return bad, details

    @property
    def gpu_seconds(self):
        return self.runner.gpu_ns * 1e-9

    compile_seconds = 0.0

    def close(self):
        self.runner.close()


class _HwTarget(_Target):
    name = "hw"
    hw = True

    def __init__(self, device, variants, max_new_pipelines=16):
        from .hw import HwRunner
        self.runner = HwRunner(device, variants)
        self.max_new_pipelines = max_new_pipelines

    def evaluate(self, cases, ref):
        n = len(cases)
        bad = np.zeros(n, dtype=bool)
        details = {}
        groups: dict = {}
        for k, case in enumerate(cases):
            groups.setdefault(case.variant, []).append(k)
        for variant, rows in groups.items():
            rows = np.array(rows)
            obs = self.runner.run(variant, [cases[k] for k in rows])
            elements = variant.hw_shape[0] * variant.hw_shape[1]
            sub_ref = compare.slice_reference(ref, rows, elements)
            obs_tuple = (obs.indices, obs.status, obs.block_coord, obs.coord_in_block)
            if obs.block_coord is None:
                compare_obs = (obs.indices, obs.status, sub_ref[2], sub_ref[3])
            else:
                compare_obs = obs_tuple
            case_bad, element_bad = compare.case_mismatches("hw", variant.kind, sub_ref, compare_obs,
                                                            obs.written, obs.corrupt)
            bad[rows] = case_bad
            for j in np.nonzero(case_bad)[0]:
                details[int(rows[j])] = (tuple(None if a is None else a[j] for a in obs_tuple), element_bad[j])
        return bad, details

    def fails_many(self, cases):
        # Candidates whose variant has no pipeline yet cost a compile each: allow a bounded number.
        new = [c.variant for c in cases if c.variant not in self.runner.pipelines]
        allowed = set(list(dict.fromkeys(new))[:self.max_new_pipelines])
        self.max_new_pipelines -= len(allowed)
        runnable = [k for k, c in enumerate(cases) if c.variant in self.runner.pipelines or c.variant in allowed]
        result = [False] * len(cases)
        if runnable:
            for k, failed in zip(runnable, super().fails_many([cases[k] for k in runnable])):
                result[k] = failed
        return result

    @property
    def gpu_seconds(self):
        return self.runner.gpu_ns * 1e-9

    @property
    def compile_seconds(self):
        return self.runner.compile_seconds

    def close(self):
        self.runner.close()


def open_targets(names, device, pool, stats):
    """Open the device(s) and targets; a target that cannot run gets ``stats[name].skipped``."""
    from .. import vk
    from .hw import HW_FEATURES
    opened = {}
    owned = []
    shared = device if isinstance(device, vk.Device) else None
    if "hw" in names:
        try:
            hw_device = shared
            if hw_device is None:
                hw_device = vk.Device(device, features=list(HW_FEATURES))
                owned.append(hw_device)
            else:
                missing = [f for f in HW_FEATURES if not hw_device.enabled_features.get(f)]
                if missing:
                    raise vk.MissingFeatureError(hw_device.physical.name, missing_features=missing,
                                                 reason="the given device was not created with them")
            opened["hw"] = _HwTarget(hw_device, pool)
            stats["hw"].device = hw_device.physical.name
            shared = shared or hw_device
        except (vk.MissingFeatureError, vk.NoDeviceError, OSError) as error:
            stats["hw"].skipped = f"no coopmat2 device: {error}"
    if "portable" in names:
        try:
            portable_device = shared
            if portable_device is None:
                portable_device = vk.Device(device, features=["maintenance4"])
                owned.append(portable_device)
            opened["portable"] = _PortableTarget(portable_device)
            stats["portable"].device = portable_device.physical.name
        except (vk.MissingFeatureError, vk.NoDeviceError, OSError) as error:
            stats["portable"].skipped = f"no Vulkan device: {error}"
    return opened, owned
