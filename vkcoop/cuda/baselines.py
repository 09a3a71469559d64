"""The library baselines: cuSPARSELt (through torch), torch's semi-structured sparse tensor, and cuBLAS (through
torch.mm and, where nvmath-python is installed, its cuBLASLt ``Matmul``).

Each takes an optional configuration, so a search can try what the library offers (``vkcoop.cuda.paths``; the
tries run in a child process, ``vkcoop.cuda.isolated``):

* :class:`CuSparseLtGemm` with a :class:`CsltConfig`: algorithm id (``alg_id``; ``None`` lets cuSPARSELt's own
  search pick it, with split-K, through ``torch._C._cusparselt.mm_search``), ``split_k``, ``split_k_mode``
  (cusparseLtSplitKMode_t: 1 one kernel, 2 two kernels), ``transpose_result`` (C written column-major), B
  row- or column-major, and ``graph`` (the call captured once in a CUDA graph and replayed: the GPU work without
  the per-call host work of torch's wrapper, which builds descriptors and a plan on every call). The same
  configuration drives cuSPARSELt through nvmath-python (:mod:`.cusparselt_nvmath`);
* :class:`SemiStructuredGemm`: ``torch.sparse.to_sparse_semi_structured`` with the cuSPARSELt backend
  (``SparseSemiStructuredTensor._FORCE_CUTLASS = False``), then ``torch.mm``: what users call;
* :class:`CublasGemm` with a :class:`BlasConfig`: ``torch.mm`` under the default, cuBLAS or cuBLASLt backend
  (``torch.backends.cuda.preferred_blas_library``), B row- or column-major, ``torch._scaled_mm``, and
  ``nvmath.linalg.advanced.Matmul`` (cuBLASLt, planned and autotuned once per bind; op ``"nvmath"``).

``bind(a, b)`` without a configuration keeps the old behaviour: cuSPARSELt after its own search, ``torch.mm``.
A bound op may carry ``close()`` (resources freed when the measurement releases it).
"""
from __future__ import annotations

import contextlib
import importlib
import re
import threading
from dataclasses import dataclass

from .gemm import (SUPPORTED, DeviceSparse, _check_operands, _dtype_name, _supported_shape, _torch,
                   unsupported_dtype)


def _column_major(b):
    """The same [K][N] values stored column-major (a transposed view of an [N][K] copy)."""
    return b.t().contiguous().t()


def capture_graph(run):
    """``run`` captured once in a CUDA graph (after two warm calls on a side stream); returns a replay
    function with the same result tensor."""
    torch = _torch()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            run()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = run()

    def replay():
        graph.replay()
        return out

    replay.graph = graph
    return replay


@dataclass(frozen=True)
class CsltConfig:
    alg_id: int | None = None     # None: cuSPARSELt's own search picks alg_id, split_k and its mode
    split_k: int = 1
    split_k_mode: int = -1        # -1: the library's default; 1 one kernel, 2 two kernels
    transpose_result: bool = False
    b_column_major: bool = False
    graph: bool = False

    def what(self) -> str:
        """The candidate in words, as a failure names it ("alg 47", "alg 3 split-K 2 mode 2, column-major C")."""
        words = ["cuSPARSELt's own search" if self.alg_id is None else f"alg {self.alg_id}"]
        if self.split_k != 1:
            words.append(f"split-K {self.split_k}" + (f" mode {self.split_k_mode}" if self.split_k_mode > 0 else ""))
        layout = [name for name, on in (("column-major C", self.transpose_result), ("column-major B",
                                        self.b_column_major), ("in a CUDA graph", self.graph)) if on]
        return " ".join(words) + (", " + ", ".join(layout) if layout else "")

    def label(self) -> str:
        parts = ["search" if self.alg_id is None else f"alg{self.alg_id}"]
        if self.split_k != 1:
            parts.append(f"sk{self.split_k}")
        if self.split_k_mode > 0:
            parts.append(f"mode{self.split_k_mode}")
        parts += [name for name, on in (("tr", self.transpose_result), ("bcol", self.b_column_major),
                                         ("graph", self.graph)) if on]
        return "-".join(parts)

    @classmethod
    def from_label(cls, label: str) -> "CsltConfig":
        """The configuration a :meth:`label` names (the shipped library winners are kept as labels); ValueError
        naming the part that does not parse."""
        head, *rest = str(label).split("-")
        if head != "search" and not re.fullmatch(r"alg\d+", head):
            raise ValueError(f"cuSPARSELt label {label!r}: {head!r} is not 'search' or 'algN'")
        fields = {"alg_id": None if head == "search" else int(head[3:])}
        for part in rest:
            number = re.fullmatch(r"(sk|mode)(\d+)", part)
            if number:
                fields["split_k" if number[1] == "sk" else "split_k_mode"] = int(number[2])
            elif part in _CSLT_FLAGS:
                fields[_CSLT_FLAGS[part]] = True
            else:
                raise ValueError(f"cuSPARSELt label {label!r}: {part!r} is not an option")
        config = cls(**fields)
        if config.label() != label:    # options out of their order, or repeated
            raise ValueError(f"cuSPARSELt label {label!r} is not written as {config.label()!r}")
        return config


_CSLT_FLAGS = {"tr": "transpose_result", "bcol": "b_column_major", "graph": "graph"}


def version_text(number) -> str:
    """CUSPARSELT_VERSION (major * 1000 + minor * 100 + patch, what torch reports) as "0.8.0"."""
    number = int(number)
    return f"{number // 1000}.{number // 100 % 10}.{number % 100}"


def _cslt_available(torch) -> tuple[bool, str]:
    backends = getattr(torch.backends, "cusparselt", None)
    if backends is None or not backends.is_available():
        return False, "torch was built without cuSPARSELt"
    return True, f"cuSPARSELt {version_text(backends.version())}"


def sixteen_refusal(refusal: str, **dims: int) -> tuple[bool, str] | None:
    """(False, ``refusal`` naming each of ``dims`` that is not a multiple of 16), or None where all are: the shape
    rule of cuSPARSELt's routes."""
    bad = [f"{name}={value}" for name, value in dims.items() if value % 16]
    return (False, refusal + ", ".join(bad)) if bad else None


def cslt_shape_refusal(m: int, n: int, k: int) -> tuple[bool, str] | None:
    """:func:`sixteen_refusal` of cuSPARSELt's matmul: M, N and K multiples of 16."""
    return sixteen_refusal("cuSPARSELt needs multiples of 16: ", M=m, N=n, K=k)


class CuSparseLtGemm:
    """cuSPARSELt through torch: ``_cslt_compress`` once per A, then ``_cslt_sparse_mm`` with a configuration
    (default: the library's own search, as users get it)."""

    name = "cuSPARSELt"

    def __init__(self):
        self.max_alg_id: int | None = None     # what the last library search reported
        self._compressed = (None, None)
        self._searched: dict = {}              # the library's pick per A, B layout and result layout

    def supports(self, m, n, k, dtype) -> tuple[bool, str]:
        ok, what = _cslt_available(_torch())
        if not ok:
            return ok, what
        if _dtype_name(dtype) not in SUPPORTED:
            return False, unsupported_dtype(dtype)
        return cslt_shape_refusal(m, n, k) or (True, what)

    def version(self) -> str:
        torch = _torch()
        return f"torch {torch.__version__} _cslt_*, {_cslt_available(torch)[1]}"

    def search_info(self) -> dict:
        return {} if self.max_alg_id is None else {"max_alg_id": self.max_alg_id}

    def compressed(self, a: DeviceSparse):
        """The compressed A, made once per A."""
        if self._compressed[0] is not a:
            self._compressed = (a, _torch()._cslt_compress(a.dense))
            self._searched = {}
        return self._compressed[1]

    def out_dtype(self, dtype):
        """The result type to ask of ``_cslt_sparse_mm`` for operands of ``dtype`` (None: torch's own, the input
        type); the typed route (:mod:`.typed_libraries`) asks another."""
        return None

    def _search(self, compressed, b, transpose: bool) -> dict:
        torch = _torch()
        out_dtype = self.out_dtype(compressed.dtype)
        search = getattr(getattr(torch._C, "_cusparselt", None), "mm_search", None)
        if search is not None:
            alg_id, split_k, split_k_mode, max_alg = search(compressed, b, None, None, out_dtype, transpose)
            self.max_alg_id = int(max_alg)
            return {"alg_id": int(alg_id), "split_k": int(split_k), "split_k_mode": int(split_k_mode)}
        extra = {} if out_dtype is None else {"out_dtype": out_dtype}
        return {"alg_id": int(torch._cslt_sparse_mm_search(compressed, b, transpose_result=transpose, **extra))}

    def settings(self, compressed, b, config: CsltConfig) -> dict:
        """The keyword arguments of ``_cslt_sparse_mm`` for ``config``."""
        if config.alg_id is None:   # searched once per layout, so binding it again times the same choice
            key = (config.transpose_result, config.b_column_major)
            if key not in self._searched:
                self._searched[key] = self._search(compressed, b, config.transpose_result)
            settings = dict(self._searched[key])
        else:
            settings = {"alg_id": config.alg_id, "split_k": config.split_k}
            if config.split_k_mode > 0:
                settings["split_k_mode"] = config.split_k_mode
        if config.transpose_result:
            settings["transpose_result"] = True
        if self.out_dtype(compressed.dtype) is not None:
            settings["out_dtype"] = self.out_dtype(compressed.dtype)
        return settings

    def bind(self, a: DeviceSparse, b, config: CsltConfig | None = None):
        torch = _torch()
        config = config or CsltConfig()
        _supported_shape(self, a, b)
        compressed = self.compressed(a)
        b = _column_major(b) if config.b_column_major else b
        settings = self.settings(compressed, b, config)
        try:
            torch._cslt_sparse_mm(compressed, b, **settings)
        except TypeError:  # older spelling of the split-k mode argument
            if "split_k_mode" in settings:
                settings["split_k_one_kernel"] = settings.pop("split_k_mode") == 1
            torch._cslt_sparse_mm(compressed, b, **settings)

        def run():
            out = torch._cslt_sparse_mm(compressed, b, **settings)
            return out.t() if config.transpose_result else out

        op = capture_graph(run) if config.graph else run
        op.keep = (compressed, b)
        op.description = f"_cslt_sparse_mm {settings}" + (" in a CUDA graph" if config.graph else "")
        op.settings = settings
        return op


def _semi_structured(dense):
    """``torch.sparse.to_sparse_semi_structured`` of ``dense`` with the cuSPARSELt backend."""
    torch = _torch()
    from torch.sparse import SparseSemiStructuredTensor

    SparseSemiStructuredTensor._FORCE_CUTLASS = False
    return torch.sparse.to_sparse_semi_structured(dense)


def warm_semi_structured() -> threading.Thread:
    """Start, on a daemon thread, a process's first ``to_sparse_semi_structured`` (of a 64 x 64 zero matrix): on an
    H200 it took 6.2 s, torch importing some 880 modules, and 0.00 s the second time (lab/semi_structured_probe.py).
    Started as a run begins, it overlaps the run's other preparation; a failure is left for the path to report."""
    def convert():
        with contextlib.suppress(Exception):
            torch = _torch()
            _semi_structured(torch.zeros(64, 64, dtype=torch.float16, device="cuda"))

    thread = threading.Thread(target=convert, name="semi-structured warm-up", daemon=True)
    thread.start()
    return thread


class SemiStructuredGemm:
    """``torch.sparse.to_sparse_semi_structured`` (cuSPARSELt backend) then ``torch.mm``; config "graph" replays
    a CUDA graph of it."""

    name = "torch-semi-structured"

    def supports(self, m, n, k, dtype) -> tuple[bool, str]:
        torch = _torch()
        ok, what = _cslt_available(torch)
        if not ok:
            return ok, what
        if not hasattr(torch.sparse, "to_sparse_semi_structured"):
            return False, "this torch has no torch.sparse.to_sparse_semi_structured"
        if _dtype_name(dtype) not in SUPPORTED:
            return False, unsupported_dtype(dtype)
        refused = sixteen_refusal("the semi-structured cuSPARSELt tensor needs M and K multiples of 16: ", M=m, K=k)
        return refused or (True, f"torch.sparse.to_sparse_semi_structured ({what})")

    def version(self) -> str:
        torch = _torch()
        return f"torch {torch.__version__} to_sparse_semi_structured, {_cslt_available(torch)[1]}"

    def bind(self, a: DeviceSparse, b, config: str = "default"):
        torch = _torch()
        _supported_shape(self, a, b)
        sparse = _semi_structured(a.dense)

        def run():
            return torch.mm(sparse, b)

        op = capture_graph(run) if config == "graph" else run
        op.keep = (sparse, b)
        op.description = f"{type(sparse).__name__} @ B" + (" in a CUDA graph" if config == "graph" else "")
        return op


@dataclass(frozen=True)
class BlasConfig:
    op: str = "mm"                 # "mm": torch.mm; "scaled_mm": torch._scaled_mm (cuBLASLt);
    #                                "nvmath": nvmath.linalg.advanced.Matmul (cuBLASLt, autotuned);
    #                                "imma": cuBLASLt's int8 kernels through nvmath.bindings.cublasLt
    library: str = "default"       # torch.backends.cuda.preferred_blas_library: "default", "cublas", "cublaslt"
    b_column_major: bool = False
    graph: bool = False

    def label(self) -> str:
        parts = [self.op] + ([self.library] if self.library != "default" else [])
        return "-".join(parts + [name for name, on in (("bcol", self.b_column_major), ("graph", self.graph)) if on])

    @classmethod
    def from_label(cls, label: str) -> "BlasConfig":
        """The configuration a :meth:`label` names; ValueError naming the part that does not parse."""
        op, *rest = str(label).split("-")
        if op not in BLAS_OPS:
            raise ValueError(f"cuBLAS label {label!r}: {op!r} is not one of {', '.join(BLAS_OPS)}")
        fields = {"op": op}
        for part in rest:
            if part in BLAS_LIBRARIES:
                fields["library"] = part
            elif part in ("bcol", "graph"):
                fields["b_column_major" if part == "bcol" else "graph"] = True
            else:
                raise ValueError(f"cuBLAS label {label!r}: {part!r} is not an option")
        config = cls(**fields)
        if config.label() != label:
            raise ValueError(f"cuBLAS label {label!r} is not written as {config.label()!r}")
        return config


BLAS_OPS = ("mm", "scaled_mm", "nvmath", "imma")
#: torch.backends.cuda.preferred_blas_library's choices besides "default"
BLAS_LIBRARIES = ("cublas", "cublaslt")


#: What to install for the nvmath-python paths.
#: cudaDataType (library_types.h), the element types the libraries' descriptors name.
CUDA_R_32F, CUDA_R_16F, CUDA_R_16BF, CUDA_R_8I, CUDA_R_32I, CUDA_R_8F_E4M3, CUDA_R_8F_E5M2 = 0, 2, 14, 3, 10, 28, 29
NVMATH_EXTRA = "pip install 'vkcoop[cuda]' (nvmath-python>=1.0)"


def nvmath_bindings(library: str):
    """``nvmath.bindings.<library>`` (``cusparseLt``, ``cublasLt``); ImportError naming the extra where
    nvmath-python cannot be imported."""
    try:
        return importlib.import_module(f"nvmath.bindings.{library}")
    except Exception as error:  # noqa: BLE001 - missing, or missing its CUDA Python dependencies
        raise ImportError(f"nvmath-python cannot be imported ({type(error).__name__}: {error}); install it "
                          f"with {NVMATH_EXTRA}") from None


def nvmath_version() -> str | None:
    """nvmath-python's version, or None where it cannot be imported."""
    try:
        import nvmath
    except Exception:  # noqa: BLE001 - missing, or its CUDA libraries missing: "not here" either way
        return None
    return str(getattr(nvmath, "__version__", "?"))


def _nvmath_matmul(dense, b, **specification):
    """``nvmath.linalg.advanced.Matmul`` of dense @ b (``specification``: its ``options`` and
    ``quantization_scales``, where given), planned and autotuned on torch's current stream: (call, the Matmul, a
    description). The caller frees it (``free()``)."""
    torch = _torch()
    from nvmath.linalg.advanced import Matmul

    matmul = Matmul(dense, b, stream=torch.cuda.current_stream(), **specification)
    try:
        matmul.plan(stream=torch.cuda.current_stream())
        matmul.autotune(iterations=5, stream=torch.cuda.current_stream())
        algorithms = getattr(matmul, "algorithms", None) or []
        picked = getattr(algorithms[0], "algorithm_id", "?") if algorithms else "?"
    except BaseException:
        matmul.free()
        raise

    def call():
        return matmul.execute(stream=torch.cuda.current_stream())

    return call, matmul, f"nvmath.linalg.advanced.Matmul (cuBLASLt, autotuned: algorithm {picked})"


class CublasGemm:
    """Dense cuBLAS on the pruned dense A (the zeros are multiplied)."""

    name = "cuBLAS"

    def supports(self, m, n, k, dtype) -> tuple[bool, str]:
        if _dtype_name(dtype) not in SUPPORTED:
            return False, unsupported_dtype(dtype)
        return True, "torch.mm"

    def version(self) -> str:
        nvmath = nvmath_version()
        return (f"torch {_torch().__version__} torch.mm; "
                + (f"nvmath-python {nvmath} Matmul (cuBLASLt)" if nvmath else "nvmath-python not installed"))

    def _call(self, config: BlasConfig, dense, b, dtype):
        """(call, what to free or None, description) of one configuration."""
        torch = _torch()
        if config.op == "nvmath":
            call, matmul, description = _nvmath_matmul(dense, b)
            return call, matmul, description + (" bcol" if config.b_column_major else "")
        if config.op == "scaled_mm":
            one = torch.ones((), dtype=torch.float32, device=b.device)

            def call():
                return torch._scaled_mm(dense, b, scale_a=one, scale_b=one, out_dtype=dtype)

            return call, None, f"torch._scaled_mm {config.label()}"
        out = torch.empty((dense.shape[0], b.shape[1]), dtype=dtype, device=b.device)

        def call():
            return torch.mm(dense, b, out=out)

        return call, None, f"torch.mm {config.label()}"

    def bind(self, a: DeviceSparse, b, config: BlasConfig | None = None):
        torch = _torch()
        config = config or BlasConfig()
        _check_operands(self.name, a, b)
        dense, b = a.dense, (_column_major(b) if config.b_column_major else b)
        preferred = torch.backends.cuda.preferred_blas_library
        previous = preferred()
        call, owned, description = self._call(config, dense, b, a.dtype)

        def run():
            if config.library != "default":
                preferred(config.library)
            try:
                return call()
            finally:
                preferred(previous)

        try:
            run()   # fails here, not in the check, when this torch cannot do it
            op = capture_graph(run) if config.graph else run
        except BaseException:
            if owned is not None:
                owned.free()
            raise
        op.keep = (dense, b)
        op.description = description + (" in a CUDA graph" if config.graph else "")
        if owned is not None:
            op.close = owned.free
        return op
