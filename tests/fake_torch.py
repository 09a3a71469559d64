"""A fake ``torch`` for CPU tests of the CUDA library searches: just enough of torch's API for vkcoop.cuda's
baselines, with numpy results and a virtual GPU clock.

Results are exact numpy products (so vkcoop.gemm.check_output passes), except for ``broken_alg``, which returns
zeros (its check must fail and it must never be timed). Each library call costs ``host_ms`` of host work plus a
GPU time that depends on the algorithm id, split-K and layouts; CUDA events read the virtual clock, so a call
made outside a CUDA graph pays the host work inside the timed interval (as torch's cuSPARSELt wrapper does when
the host is slower than the GPU), and a graph replay does not. ``calls`` counts the calls per algorithm id.

cuSPARSELt's valid algorithm ids are ``0 .. max_alg - 1``; ``mm_search`` reports ``max_alg`` as the limit (as
the real one does), and an id at or past it is refused. Planted faults for the search-process tests:
``poison_alg`` raises cuSPARSELt's internal error and leaves the fake context poisoned (every later GPU call in
the process raises "illegal instruction"), ``segv_alg`` kills the process with SIGSEGV, ``hang_alg`` never
returns.

The same fake runs in the search's child processes: :func:`install` also puts ``tests/child_fakes`` (a ``torch``
package that builds this fake from ``VKCOOP_FAKE_TORCH``) on the children's ``PYTHONPATH``.
"""
from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import time
import types
import weakref
from collections import Counter
from pathlib import Path

import ml_dtypes
import numpy as np

from vkcoop.gemm import DTYPES


class FakeDtype:
    def __init__(self, name, numpy_dtype):
        self.name, self.numpy = name, np.dtype(numpy_dtype)

    def __repr__(self):
        return f"torch.{self.name}"

    __str__ = __repr__


float16, bfloat16 = FakeDtype("float16", np.float16), FakeDtype("bfloat16", DTYPES["bf16"])
float32, int32, int16, int64, uint8 = (FakeDtype(n, n) for n in ("float32", "int32", "int16", "int64", "uint8"))
int8 = FakeDtype("int8", np.int8)
float8_e4m3fn, float8_e5m2 = (FakeDtype(n, getattr(ml_dtypes, n)) for n in ("float8_e4m3fn", "float8_e5m2"))
ALL_DTYPES = (float16, bfloat16, float32, int32, int16, int64, uint8, int8, float8_e4m3fn, float8_e5m2)
_BY_NUMPY = {d.numpy: d for d in ALL_DTYPES}
EIGHT_BIT = (int8, float8_e4m3fn, float8_e5m2)


TESTS = Path(__file__).resolve().parent
CHILD_FAKES = TESTS / "child_fakes"
#: data_ptr() -> the tensor (what a fake library bound by pointers reads and writes)
POINTERS: "weakref.WeakValueDictionary[int, Tensor]" = weakref.WeakValueDictionary()


class Tensor:
    _next_pointer = 4096

    def __init__(self, array, column_major: bool = False):
        self.array = np.asarray(array)
        self.dtype = _BY_NUMPY[self.array.dtype]
        self.column_major = column_major
        self.is_cuda, self.device = True, "cuda"
        self._pointer = Tensor._next_pointer
        Tensor._next_pointer += 1 << 20
        POINTERS[self._pointer] = self

    shape = property(lambda self: self.array.shape)

    def dim(self):
        return self.array.ndim

    def data_ptr(self):
        return self._pointer

    def to(self, device):
        return self

    def view(self, dtype):
        return Tensor(self.array.view(dtype.numpy))

    def t(self):
        return Tensor(self.array.T, column_major=not self.column_major)

    def contiguous(self):
        return Tensor(np.ascontiguousarray(self.array))

    def is_contiguous(self):
        return not self.column_major

    def index_select(self, dim, index):
        return Tensor(np.take(self.array, index.array, axis=dim))

    def float(self):
        return Tensor(self.array.astype(np.float32))

    def cpu(self):
        return self

    def numpy(self):
        return self.array

    def zero_(self):
        self.array[...] = 0
        return self


class FakeTorch:
    """State of one fake torch: the cost model, the clock, what was called."""

    def __init__(self, *, max_alg=5, library_pick=(1, 1, -1), best_alg=3, broken_alg=4, host_ms=0.05,
                 base_ms=0.2, with_mm_search=True, blas_lt_faster=True, poison_alg=None, segv_alg=None,
                 hang_alg=None, gpu_sleep=False):
        self.config = {name: value for name, value in locals().items() if name not in ("self", "__class__")}
        self.max_alg, self.library_pick, self.best_alg, self.broken_alg = max_alg, library_pick, best_alg, broken_alg
        self.host_ms, self.base_ms, self.with_mm_search = host_ms, base_ms, with_mm_search
        self.blas_lt_faster = blas_lt_faster
        self.gpu_sleep, self.lead_ms = gpu_sleep, 0.0   # torch.cuda._sleep, and the host work it still hides
        self.poison_alg, self.segv_alg, self.hang_alg = poison_alg, segv_alg, hang_alg
        self.clock_ms, self.capturing, self.calls, self.searches = 0.0, None, Counter(), 0
        self.blas_library = "cublas"
        self.poisoned = False
        self.matmul = types.SimpleNamespace(allow_tf32=False)   # torch.backends.cuda.matmul
        self.tf32_calls = []        # allow_tf32 at each float32 torch.mm

    def alive(self):
        """Raise as every CUDA call does once the context is poisoned."""
        if self.poisoned:
            raise RuntimeError("CUDA error: an illegal instruction was encountered")

    def planted(self, alg_id):
        """The planted faults of one algorithm id (see the module docstring), then the id range check."""
        self.alive()
        if alg_id == self.segv_alg:
            os.kill(os.getpid(), signal.SIGSEGV)
        if alg_id == self.hang_alg:
            time.sleep(3600)
        if alg_id == self.poison_alg:
            self.poisoned = True
            raise RuntimeError("CUDA error: internal error when calling `cusparseLtMatmul(...)` "
                               "(CUSPARSE_STATUS_INTERNAL_ERROR)")
        if not 0 <= alg_id < self.max_alg:
            raise RuntimeError(f"CUSPARSE_STATUS_INVALID_VALUE: alg_id {alg_id}")

    # --- the cost model -------------------------------------------------------------------------------------
    def cslt_ms(self, alg, split_k, mode, transposed, column_b):
        ms = self.base_ms * (1 + 0.25 * abs(alg - self.best_alg))
        if alg == self.best_alg and split_k == 2 and mode == 2:
            ms *= 0.8                     # split-K helps the best algorithm a little
        return ms * (0.95 if transposed else 1.0) * (1.1 if column_b else 1.0)

    def spend(self, gpu_ms, run):
        """Run a fake kernel: now (host work + GPU time), or record it into the graph being captured."""
        self.alive()
        if self.capturing is not None:
            self.capturing.append((gpu_ms, run))
        else:
            hidden = min(self.lead_ms, self.host_ms)     # enqueued while the GPU was still busy
            self.lead_ms -= hidden
            self.clock_ms += self.host_ms - hidden + gpu_ms
        run()

    SLEEP_CYCLES_PER_MS = 1.5e6

    def sleep(self, cycles):
        """torch.cuda._sleep: the GPU spins, and the host's next enqueues overlap it."""
        self.clock_ms += cycles / self.SLEEP_CYCLES_PER_MS
        self.lead_ms = cycles / self.SLEEP_CYCLES_PER_MS

    # --- cuSPARSELt -----------------------------------------------------------------------------------------
    def cslt_compress(self, dense):
        self.alive()
        compressed = Tensor(dense.array)
        compressed.is_compressed = True
        return compressed

    @staticmethod
    def tn_only(compressed, b):
        """cuSPARSELt's 8-bit kernels take B under operation T (column-major) only, as on the H100."""
        if compressed.dtype in EIGHT_BIT and not b.column_major:
            raise RuntimeError("CUDA error: operation not supported when calling `cusparseLtMatmulDescriptorInit("
                               "...)` (CUSPARSE_STATUS_NOT_SUPPORTED)")

    def cslt_sparse_mm(self, compressed, b, alg_id=0, split_k=1, split_k_mode=-1, transpose_result=False,
                       out_dtype=None):
        self.planted(alg_id)
        self.tn_only(compressed, b)
        self.calls[alg_id] += 1
        out = np.zeros((b.shape[1], compressed.shape[0]) if transpose_result else (compressed.shape[0], b.shape[1]),
                       (out_dtype or compressed.dtype).numpy)
        result = Tensor(out)

        def run():
            product = compressed.array.astype(np.float64) @ b.array.astype(np.float64)
            if alg_id == self.broken_alg:
                product[:] = 0
            out[...] = (product.T if transpose_result else product).astype(out.dtype)

        self.spend(self.cslt_ms(alg_id, split_k, split_k_mode, transpose_result, b.column_major), run)
        return result

    def mm_search(self, compressed, b, bias, alpha, out_dtype, transpose_result):
        self.tn_only(compressed, b)
        self.searches += 1
        alg, split_k, mode = self.library_pick
        return alg, split_k, mode, self.max_alg

    # --- dense ----------------------------------------------------------------------------------------------
    def mm(self, a, b, out=None):
        if isinstance(a, SemiStructured):
            a = a.dense
        target = out if out is not None else Tensor(np.zeros((a.shape[0], b.shape[1]), a.array.dtype))

        def run():
            target.array[...] = (a.array.astype(np.float64) @ b.array.astype(np.float64)).astype(a.array.dtype)

        lt = self.blas_library == "cublaslt" and self.blas_lt_faster
        if a.dtype is float32:
            self.tf32_calls.append(self.matmul.allow_tf32)
        self.spend(self.base_ms * (0.9 if lt else 1.2), run)
        return target

    def scaled_mm(self, a, b, scale_a=None, scale_b=None, out_dtype=None):
        """torch._scaled_mm as torch 2.11 answers: fp8 operands, not both e5m2, B column-major."""
        if a.dtype not in (float8_e4m3fn, float8_e5m2) or b.dtype not in (float8_e4m3fn, float8_e5m2):
            raise RuntimeError("Expected both inputs to be fp8 types")
        if a.dtype is b.dtype is float8_e5m2:
            raise RuntimeError("Multiplication of two Float8_e5m2 matrices is not supported")
        if not b.column_major:
            raise RuntimeError("mat2 must be col_major")
        target = Tensor(np.zeros((a.shape[0], b.shape[1]), (out_dtype or a.dtype).numpy))

        def run():
            target.array[...] = (a.array.astype(np.float64) @ b.array.astype(np.float64)).astype(target.array.dtype)

        self.spend(self.base_ms * 0.5, run)
        return target

    def preferred_blas_library(self, backend=None):
        if backend is not None:
            self.blas_library = backend
        return self.blas_library


class SemiStructured:
    _FORCE_CUTLASS = True

    def __init__(self, dense):
        self.dense = dense


class _Event:
    def __init__(self, fake, enable_timing=False):
        self.fake, self.time_ms = fake, None

    def record(self):
        self.time_ms = self.fake.clock_ms

    def elapsed_time(self, end):
        return end.time_ms - self.time_ms


class _Graph:
    def __init__(self, fake):
        self.fake, self.kernels = fake, []

    def replay(self):
        for gpu_ms, run in self.kernels:
            self.fake.clock_ms += gpu_ms
            run()


def _cuda_module(fake):
    cuda = types.ModuleType("torch.cuda")
    cuda.is_available = lambda: True
    cuda.synchronize = fake.alive
    cuda.Event = lambda enable_timing=False: _Event(fake, enable_timing)
    stream = types.SimpleNamespace(wait_stream=lambda other: None, cuda_stream=0)
    cuda.Stream = lambda: stream
    cuda.current_stream = lambda: stream
    cuda.stream = lambda s: contextlib.nullcontext()
    cuda.CUDAGraph = lambda: _Graph(fake)
    if fake.gpu_sleep:
        cuda._sleep = fake.sleep

    @contextlib.contextmanager
    def graph(g):
        fake.capturing = g.kernels
        try:
            yield g
        finally:
            fake.capturing = None

    cuda.graph = graph
    cuda.get_device_properties = lambda index=0: types.SimpleNamespace(
        name="Fake GPU", uuid="GPU-00112233-4455-6677-8899-aabbccddeeff", multi_processor_count=132,
        shared_memory_per_block_optin=232448)
    return cuda


def make_module(fake: FakeTorch) -> types.ModuleType:
    torch = types.ModuleType("torch")
    torch.__version__ = "0.0-fake"
    torch.Tensor = Tensor
    for dtype in ALL_DTYPES:
        setattr(torch, dtype.name, dtype)
    torch.from_numpy = lambda array: Tensor(array)
    torch.as_tensor = lambda values, device=None: Tensor(np.asarray(values))
    torch.empty = lambda shape, dtype=None, device=None: Tensor(np.zeros(shape, (dtype or float32).numpy))
    torch.ones = lambda shape, dtype=None, device=None: Tensor(np.ones(shape, (dtype or float32).numpy))
    torch.zeros = lambda shape, dtype=None, device=None: Tensor(np.zeros(shape, (dtype or float32).numpy))
    torch.mm = fake.mm
    torch._cslt_compress = fake.cslt_compress
    torch._cslt_sparse_mm = fake.cslt_sparse_mm
    torch._cslt_sparse_mm_search = lambda compressed, b, transpose_result=False: fake.library_pick[0]

    torch._scaled_mm = fake.scaled_mm
    cusparselt = types.SimpleNamespace(mm_search=fake.mm_search) if fake.with_mm_search else None
    torch._C = types.SimpleNamespace(_cusparselt=cusparselt)
    torch.cuda = _cuda_module(fake)
    torch.backends = types.SimpleNamespace(
        cusparselt=types.SimpleNamespace(is_available=lambda: True, version=lambda: 800),
        cuda=types.SimpleNamespace(preferred_blas_library=fake.preferred_blas_library, matmul=fake.matmul))
    sparse = types.ModuleType("torch.sparse")
    sparse.SparseSemiStructuredTensor = SemiStructured
    sparse.to_sparse_semi_structured = SemiStructured
    torch.sparse = sparse
    torch.fake = fake
    return torch


def install(monkeypatch, fake: FakeTorch | None = None) -> FakeTorch:
    """Put a fake torch in ``sys.modules`` for one test, and the same fake (its configuration) in the search
    processes it starts (monkeypatch undoes both)."""
    fake = fake or FakeTorch()
    module = make_module(fake)
    monkeypatch.setitem(sys.modules, "torch", module)
    monkeypatch.setitem(sys.modules, "torch.sparse", module.sparse)
    monkeypatch.setitem(sys.modules, "torch.cuda", module.cuda)
    monkeypatch.setenv("VKCOOP_FAKE_TORCH", json.dumps(fake.config))
    child_path(monkeypatch)
    return fake


def child_path(monkeypatch) -> None:
    """The children's PYTHONPATH: the fake packages, then this folder (for fake_torch / fake_nvmath)."""
    parts = [str(CHILD_FAKES), str(TESTS)]
    current = os.environ.get("PYTHONPATH", "")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(parts + [p for p in current.split(os.pathsep)
                                                                if p and p not in parts]))


def build_from_environment():
    """For tests/child_fakes/torch: the fake of VKCOOP_FAKE_TORCH, registered as torch in sys.modules."""
    config = json.loads(os.environ["VKCOOP_FAKE_TORCH"])
    config["library_pick"] = tuple(config.get("library_pick", (1, 1, -1)))
    module = make_module(FakeTorch(**config))
    sys.modules.update({"torch": module, "torch.sparse": module.sparse, "torch.cuda": module.cuda})
    return module
