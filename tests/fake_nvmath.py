"""A fake nvmath-python for CPU tests: ``nvmath.bindings.cusparseLt`` (the calls vkcoop.cuda.cusparselt_nvmath
makes, recorded in order, with every handle, descriptor, selection and plan tracked until it is destroyed) and
``nvmath.linalg.advanced.Matmul`` (cuBLASLt), both on the fake torch of tests/fake_torch.py (pointers resolve to
its tensors through ``fake_torch.POINTERS``; GPU time goes on its virtual clock).

cuSPARSELt: valid algorithm ids are ``0 .. max_alg - 1`` (CONFIG_MAX_ID reads ``max_alg``); ``matmul_search``
picks ``library_pick``; ``broken_alg`` computes zeros; ``poison_alg`` raises the library's internal error and
poisons the fake context; ``fail_on`` names one binding that raises (to check that everything made before it is
destroyed). The GPU time of an algorithm is ``nvmath_factor`` times the torch fake's for the same choice.
"""
from __future__ import annotations

import ctypes
import json
import os
import sys
import types

import numpy as np

import fake_torch

ATTRIBUTES = {"CONFIG_ID": 0, "CONFIG_MAX_ID": 1, "SEARCH_ITERATIONS": 2, "SPLIT_K": 3, "SPLIT_K_MODE": 4,
              "SPLIT_K_BUFFERS": 5}


class CuSparseLtError(Exception):
    pass


def _torch():
    return sys.modules["torch"]


class FakeCuSparseLt:
    """The binding functions (module-level names of the fake ``nvmath.bindings.cusparseLt``)."""

    def __init__(self, *, max_alg=6, library_pick=1, broken_alg=None, poison_alg=None, fail_on=None,
                 version=(0, 8, 1), nvmath_factor=0.9):
        self.max_alg, self.library_pick = max_alg, library_pick
        self.broken_alg, self.poison_alg = broken_alg, poison_alg
        self.fail_on, self.version, self.nvmath_factor = fail_on, version, nvmath_factor
        self.calls: list[str] = []
        self.objects: dict[int, dict] = {}     # everything made and not yet destroyed
        self.compressed: dict[int, np.ndarray] = {}
        self._next = 0x1000
        self.Sparsity = types.SimpleNamespace(SPARSITY_50_PERCENT=0)
        self.ComputeType = types.SimpleNamespace(COMPUTE_32I=0, COMPUTE_16F=1, COMPUTE_32F=2)
        self.MatmulAlg = types.SimpleNamespace(DEFAULT=0)
        self.MatmulAlgAttribute = types.SimpleNamespace(**ATTRIBUTES)

    # --- bookkeeping ----------------------------------------------------------------------------------------
    def _call(self, name: str) -> None:
        self.calls.append(name)
        if self.fail_on == name:
            raise CuSparseLtError(f"CUSPARSE_STATUS_NOT_SUPPORTED (planted in {name})")

    def _make(self, kind: str, **fields) -> int:
        self._next += 0x100
        self.objects[self._next] = {"kind": kind, **fields}
        return self._next

    def _destroy(self, name: str, kind: str, pointer: int) -> None:
        self.calls.append(name)
        if self.objects.get(pointer, {}).get("kind") != kind:
            raise CuSparseLtError(f"{name}: {pointer:#x} is not a live {kind}")
        del self.objects[pointer]

    def live(self, kind: str | None = None) -> list[str]:
        return [o["kind"] for o in self.objects.values() if kind is None or o["kind"] == kind]

    # --- library ----------------------------------------------------------------------------------------------
    def init(self):
        self._call("init")
        return self._make("handle")

    def destroy(self, handle):
        self._destroy("destroy", "handle", handle)

    def get_version(self, handle):
        self._call("get_version")
        major, minor, patch = self.version
        return major * 1000 + minor * 100 + patch

    def get_property(self, which):
        return self.version[which]

    # --- descriptors ------------------------------------------------------------------------------------------
    def structured_descriptor_init(self, handle, rows, cols, ld, alignment, value_type, order, sparsity):
        self._call("structured_descriptor_init")
        return self._make("matrix", rows=rows, cols=cols, ld=ld, order=order, sparse=True)

    def dense_descriptor_init(self, handle, rows, cols, ld, alignment, value_type, order):
        self._call("dense_descriptor_init")
        return self._make("matrix", rows=rows, cols=cols, ld=ld, order=order, sparse=False)

    def mat_descriptor_destroy(self, descriptor):
        self._destroy("mat_descriptor_destroy", "matrix", descriptor)

    def matmul_descriptor_init(self, handle, op_a, op_b, mat_a, mat_b, mat_c, mat_d, compute_type):
        self._call("matmul_descriptor_init")
        return self._make("matmul", op_b=op_b, d=self.objects[mat_d])

    def matmul_descriptor_destroy(self, descriptor):
        self._destroy("matmul_descriptor_destroy", "matmul", descriptor)

    def matmul_alg_selection_init(self, handle, matmul, alg):
        self._call("matmul_alg_selection_init")
        return self._make("selection", matmul=matmul, values={0: 0, 1: self.max_alg, 2: 5, 3: 1, 4: 1, 5: 0})

    def matmul_alg_selection_destroy(self, selection):
        self._destroy("matmul_alg_selection_destroy", "selection", selection)

    def matmul_alg_set_attribute(self, handle, selection, attribute, data, size):
        self._call("matmul_alg_set_attribute")
        value = ctypes.c_int32.from_address(data).value
        if attribute == ATTRIBUTES["CONFIG_ID"] and not 0 <= value < self.max_alg:
            raise CuSparseLtError(f"CUSPARSE_STATUS_INVALID_VALUE: CONFIG_ID {value}")
        self.objects[selection]["values"][attribute] = value

    def matmul_alg_get_attribute(self, handle, selection, attribute, data, size):
        self._call("matmul_alg_get_attribute")
        ctypes.c_int32.from_address(data).value = self.objects[selection]["values"][attribute]

    # --- plans and products -----------------------------------------------------------------------------------
    def matmul_plan_init(self, handle, matmul, selection):
        self._call("matmul_plan_init")
        return self._make("plan", matmul=self.objects[matmul], selection=self.objects[selection])

    def matmul_plan_destroy(self, plan):
        self._destroy("matmul_plan_destroy", "plan", plan)

    def matmul_get_workspace(self, handle, plan):
        self._call("matmul_get_workspace")
        return 1024 * self.objects[plan]["selection"]["values"][3]

    def sp_mma_compressed_size(self, handle, plan):
        self._call("sp_mma_compressed_size")
        return 4096, 512

    def sp_mma_compress(self, handle, plan, dense, compressed, buffer, stream):
        self._call("sp_mma_compress")
        self.compressed[compressed] = fake_torch.POINTERS[dense].array.copy()

    def _product(self, plan, d_a, d_b, d_d):
        fake = _torch().fake
        values = self.objects[plan]["selection"]["values"]
        alg, split_k, mode = values[0], values[3], values[4]
        if alg == self.poison_alg:
            fake.poisoned = True
            raise CuSparseLtError("CUSPARSE_STATUS_INTERNAL_ERROR (planted)")
        a, b = self.compressed[d_a], fake_torch.POINTERS[d_b]
        out, column_major = fake_torch.POINTERS[d_d], self.objects[plan]["matmul"]["d"]["order"] == 1

        def run():
            product = a.astype(np.float64) @ b.array.astype(np.float64)
            if alg == self.broken_alg:
                product[:] = 0
            out.array[...] = (product.T if column_major else product).astype(out.array.dtype)

        ms = fake.cslt_ms(alg, split_k, mode, column_major, b.column_major) * self.nvmath_factor
        fake.spend(ms, run)

    def matmul(self, handle, plan, alpha, d_a, d_b, beta, d_c, d_d, workspace, streams, num_streams):
        self._call("matmul")
        assert ctypes.c_float.from_address(alpha).value == 1.0 and ctypes.c_float.from_address(beta).value == 0.0
        self._product(plan, d_a, d_b, d_d)

    def matmul_search(self, handle, plan, alpha, d_a, d_b, beta, d_c, d_d, workspace, streams, num_streams):
        self._call("matmul_search")
        self.objects[plan]["selection"]["values"].update({0: self.library_pick, 3: 1, 4: 1})
        self._product(plan, d_a, d_b, d_d)


class Matmul:
    """nvmath.linalg.advanced.Matmul on the fake torch: cuBLASLt at ``factor`` of torch.mm's fake time."""
    factor = 0.6
    freed = 0

    def __init__(self, a, b, c=None, *, alpha=None, beta=None, qualifiers=None, quantization_scales=None,
                 options=None, stream=None):
        self.a, self.b, self.planned = a, b, False
        self.algorithms = []

    def plan(self, **options):
        self.planned = True
        self.algorithms = [types.SimpleNamespace(algorithm_id=7), types.SimpleNamespace(algorithm_id=3)]
        return self.algorithms

    def autotune(self, iterations=10, prune=None, release_workspace=False, stream=None):
        assert self.planned

    def execute(self, *, algorithm=None, release_workspace=False, stream=None):
        torch = _torch()
        out = torch.Tensor(np.zeros((self.a.shape[0], self.b.shape[1]), self.a.array.dtype))

        def run():
            product = self.a.array.astype(np.float64) @ self.b.array.astype(np.float64)
            out.array[...] = product.astype(out.array.dtype)

        torch.fake.spend(torch.fake.base_ms * self.factor, run)
        return out

    def free(self):
        Matmul.freed += 1


def make_modules(config: dict) -> dict:
    """The fake nvmath package's modules, by name."""
    library = FakeCuSparseLt(**config.get("cusparselt", {}))
    Matmul.factor = config.get("matmul_factor", Matmul.factor)
    cusparselt = types.ModuleType("nvmath.bindings.cusparseLt")
    for name in dir(library):
        if not name.startswith("_"):
            setattr(cusparselt, name, getattr(library, name))
    cusparselt.library = library
    bindings = types.ModuleType("nvmath.bindings")
    bindings.cusparseLt = cusparselt
    advanced = types.ModuleType("nvmath.linalg.advanced")
    advanced.Matmul = Matmul
    linalg = types.ModuleType("nvmath.linalg")
    linalg.advanced = advanced
    nvmath = types.ModuleType("nvmath")
    nvmath.__version__ = "1.0.0-fake"
    nvmath.bindings, nvmath.linalg = bindings, linalg
    return {"nvmath": nvmath, "nvmath.bindings": bindings, "nvmath.bindings.cusparseLt": cusparselt,
            "nvmath.linalg": linalg, "nvmath.linalg.advanced": advanced}


def install(monkeypatch, **config) -> FakeCuSparseLt:
    """The fake nvmath in ``sys.modules`` for one test and (by VKCOOP_FAKE_NVMATH) in its search processes."""
    modules = make_modules(config)
    for name, module in modules.items():
        monkeypatch.setitem(sys.modules, name, module)
    monkeypatch.setenv("VKCOOP_FAKE_NVMATH", json.dumps(config))
    fake_torch.child_path(monkeypatch)
    return modules["nvmath.bindings.cusparseLt"].library


def build_from_environment() -> None:
    """For tests/child_fakes/nvmath: register the fake of VKCOOP_FAKE_NVMATH in sys.modules."""
    sys.modules.update(make_modules(json.loads(os.environ["VKCOOP_FAKE_NVMATH"])))
