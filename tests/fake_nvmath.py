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
import enum
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


#: cudaDataType of the 8-bit operands (int8, e4m3, e5m2) and of the results the fake writes.
EIGHT_BIT_TYPES = (3, 28, 29)
RESULT_DTYPES = {14: "bfloat16", 10: "int32", 0: "float32", 2: "float16"}


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
        self.described: list[tuple] = []       # (A, B, D type, compute type, op B) of each matmul descriptor
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
        return self._make("matrix", rows=rows, cols=cols, ld=ld, order=order, sparse=True, type=value_type)

    def dense_descriptor_init(self, handle, rows, cols, ld, alignment, value_type, order):
        self._call("dense_descriptor_init")
        return self._make("matrix", rows=rows, cols=cols, ld=ld, order=order, sparse=False, type=value_type)

    def mat_descriptor_destroy(self, descriptor):
        self._destroy("mat_descriptor_destroy", "matrix", descriptor)

    def matmul_descriptor_init(self, handle, op_a, op_b, mat_a, mat_b, mat_c, mat_d, compute_type):
        self._call("matmul_descriptor_init")
        types = tuple(self.objects[m]["type"] for m in (mat_a, mat_b, mat_d))
        self.described.append((*types, compute_type, op_b))
        if types[0] in EIGHT_BIT_TYPES and op_b == 0:     # the 8-bit kernels take B under operation T only
            raise CuSparseLtError("CUSPARSE_STATUS_NOT_SUPPORTED: operation not supported")
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

    made: list = []     # (operand dtype name, options, quantization_scales) of each Matmul

    def __init__(self, a, b, c=None, *, alpha=None, beta=None, qualifiers=None, quantization_scales=None,
                 options=None, stream=None):
        self.a, self.b, self.planned = a, b, False
        self.algorithms = []
        self.options = dict(options or {})
        Matmul.made.append((a.dtype.name, self.options, quantization_scales))
        if a.dtype.name == b.dtype.name == "float8_e5m2":     # as nvmath-python's type table answers
            raise ValueError("Unsupported combination of dtypes for operands A (float8_e5m2) and B (float8_e5m2).")

    def plan(self, **options):
        self.planned = True
        self.algorithms = [types.SimpleNamespace(algorithm_id=7), types.SimpleNamespace(algorithm_id=3)]
        return self.algorithms

    def autotune(self, iterations=10, prune=None, release_workspace=False, stream=None):
        assert self.planned

    def execute(self, *, algorithm=None, release_workspace=False, stream=None):
        torch = _torch()
        result = self.options.get("result_type")
        dtype = getattr(torch, RESULT_DTYPES[int(result)]).numpy if result is not None else self.a.array.dtype
        out = torch.Tensor(np.zeros((self.a.shape[0], self.b.shape[1]), dtype))

        def run():
            product = self.a.array.astype(np.float64) @ self.b.array.astype(np.float64)
            out.array[...] = product.astype(out.array.dtype)

        torch.fake.spend(torch.fake.base_ms * self.factor, run)
        return out

    def free(self):
        Matmul.freed += 1


class CuBLASLtError(Exception):
    pass


class FakeCublasLt:
    """The ``nvmath.bindings.cublasLt`` calls of vkcoop.cuda.cublaslt_imma: every object tracked until destroyed,
    the descriptor's TRANSA and the layouts recorded. The heuristic offers ``algorithms`` of which the one at index
    ``fastest`` runs quickest; ``wrong_algo`` (an index) adds one to one element of its result (a planted fault the
    check must catch). IMMA takes the TN form only: the heuristic of any other raises CUBLAS_STATUS_NOT_SUPPORTED."""

    def __init__(self, *, algorithms=4, fastest=2, wrong_algo=None):
        self.algorithms, self.fastest, self.wrong_algo = algorithms, fastest, wrong_algo
        self.calls: list[str] = []
        self.objects: dict[int, dict] = {}
        self.runs = []               # the algorithm index of each matmul
        self._next = 0x9000
        self.MatmulDescAttribute = types.SimpleNamespace(TRANSA=3, TRANSB=4)
        self.MatmulPreferenceAttribute = types.SimpleNamespace(MAX_WORKSPACE_BYTES=1)
        self._results: dict[int, int] = {}      # pointer of a heuristic result -> its index

    def _make(self, kind, **fields):
        self._next += 0x100
        self.calls.append(f"{kind}_create")
        self.objects[self._next] = {"kind": kind, **fields}
        return self._next

    def _destroy(self, kind, pointer):
        self.calls.append(f"{kind}_destroy")
        assert self.objects.pop(pointer)["kind"] == kind

    def live(self):
        return [o["kind"] for o in self.objects.values()]

    def create(self):
        return self._make("handle")

    def destroy(self, handle):
        self._destroy("handle", handle)

    def matmul_desc_create(self, compute_type, scale_type):
        return self._make("desc", compute=compute_type, scale=scale_type, TRANSA=0, TRANSB=0)

    def matmul_desc_destroy(self, desc):
        self._destroy("desc", desc)

    def matmul_desc_set_attribute(self, desc, attribute, data, size):
        name = {3: "TRANSA", 4: "TRANSB"}[attribute]
        self.objects[desc][name] = ctypes.c_int32.from_address(data).value

    def matrix_layout_create(self, dtype, rows, cols, ld):
        return self._make("layout", type=dtype, rows=rows, cols=cols, ld=ld)

    def matrix_layout_destroy(self, layout):
        self._destroy("layout", layout)

    def matmul_preference_create(self):
        return self._make("preference")

    def matmul_preference_destroy(self, preference):
        self._destroy("preference", preference)

    def matmul_preference_set_attribute(self, preference, attribute, data, size):
        self.objects[preference]["workspace"] = ctypes.c_uint64.from_address(data).value

    def MatmulHeuristicResult(self, count):
        lt = self

        class Result:
            def __init__(self, index):
                self.ptr = 0x70000 + 0x400 * index
                lt._results[self.ptr] = index

        class Results:
            ptr = 0x70000

            def __getitem__(self, index):
                return Result(index)

        return Results()

    def matmul_algo_get_heuristic(self, handle, desc, a, b, c, d, preference, requested, results, count):
        self.calls.append("heuristic")
        if self.objects[desc]["TRANSA"] != 1:
            raise CuBLASLtError("CUBLAS_STATUS_NOT_SUPPORTED")
        self.layouts = [self.objects[layout] for layout in (a, b, d)]
        ctypes.c_int32.from_address(count).value = min(requested, self.algorithms)

    def matmul(self, handle, desc, alpha, a, a_layout, b, b_layout, beta, c, c_layout, d, d_layout, algo,
               workspace, workspace_size, stream):
        index = self._results[algo]
        self.runs.append(index)
        assert ctypes.c_int32.from_address(alpha).value == 1 and ctypes.c_int32.from_address(beta).value == 0
        first, second, out = (fake_torch.POINTERS[p] for p in (a, b, d))   # cuBLASLt's A is our B, its B our A

        def run():
            product = second.array.astype(np.int64) @ first.array.astype(np.int64)
            if index == self.wrong_algo:
                product[0, 0] += 1
            out.array[...] = product.astype(np.int32)

        fake = _torch().fake
        fake.spend(fake.base_ms * (1.0 + 0.2 * abs(index - self.fastest)), run)


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
    nvmath.CudaDataType = enum.IntEnum("CudaDataType", {"CUDA_R_32F": 0, "CUDA_R_16F": 2, "CUDA_R_8I": 3,
                                                        "CUDA_R_32I": 10, "CUDA_R_16BF": 14, "CUDA_R_8F_E4M3": 28,
                                                        "CUDA_R_8F_E5M2": 29})
    lt = FakeCublasLt(**config.get("cublaslt", {}))
    cublaslt = types.ModuleType("nvmath.bindings.cublasLt")
    for name in dir(lt):
        if not name.startswith("_"):
            setattr(cublaslt, name, getattr(lt, name))
    cublaslt.library = lt
    bindings.cublasLt = cublaslt
    return {"nvmath": nvmath, "nvmath.bindings": bindings, "nvmath.bindings.cusparseLt": cusparselt,
            "nvmath.bindings.cublasLt": cublaslt, "nvmath.linalg": linalg, "nvmath.linalg.advanced": advanced}


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
