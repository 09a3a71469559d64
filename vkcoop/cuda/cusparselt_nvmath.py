"""cuSPARSELt through NVIDIA's own Python bindings: ``nvmath.bindings.cusparseLt`` (nvmath-python >= 1.0, the
``cuda`` extra), on torch tensors, with whichever libcusparseLt nvmath loads (its version is reported: the
newest the machine has, not necessarily the one torch was built with).

:class:`NvmathCuSparseLtGemm` takes the same :class:`vkcoop.cuda.baselines.CsltConfig` as the torch path:
``alg_id`` None runs cuSPARSELt's own ``cusparseLtMatmulSearch`` (algorithm, split-K and its mode) on the
plan, otherwise the algorithm id, ``split_k`` and ``split_k_mode`` are set on the algorithm selection;
``transpose_result`` writes C column-major, ``b_column_major`` reads B from [N][K] storage (operation T, as
torch does), ``graph`` replays the call from a CUDA graph. The layouts follow torch's ``_cslt_sparse_mm``: A
structured row-major [M][K], B row-major [K][N] (or [N][K] with opB = T), C = D [M][N] (ld N) or
column-major (ld M); fp16/bf16 in and out, CUSPARSE_COMPUTE_32F (the other types, :meth:`types`:
:mod:`.typed_libraries`).

Per bind: three matrix descriptors, the matmul descriptor, the algorithm selection and the plan, each destroyed
by the op's ``close()`` (in reverse order) or at once when a call in between fails; A is compressed once per A
(``cusparseLtSpMMACompressedSize``/``Compress`` on the first plan: the compressed layout depends on A's
descriptor only, which every configuration shares); the workspace is asked of the plan after any search. The
handle lives until :meth:`close`. Pointers are ``data_ptr()``; each call goes on torch's current stream, read
at call time (so a CUDA graph capture on a side stream records it).
"""
from __future__ import annotations

import contextlib

import numpy as np

from .baselines import (CUDA_R_16BF, CUDA_R_16F, CsltConfig, _column_major, capture_graph, cslt_shape_refusal,
                        nvmath_bindings, nvmath_version)
from .gemm import SUPPORTED, DeviceSparse, _dtype_name, _supported_shape, _torch, unsupported_dtype

ORDER_COL, ORDER_ROW = 1, 2            # cusparseOrder_t
OP_N, OP_T = 0, 1                      # cusparseOperation_t
CUDA_TYPES = {"float16": CUDA_R_16F, "bfloat16": CUDA_R_16BF}   # cudaDataType
ALIGNMENT = 16                         # bytes, as torch passes
VERSION_PROPERTIES = (0, 1, 2)         # libraryPropertyType: MAJOR_VERSION, MINOR_VERSION, PATCH_LEVEL


def bindings():
    """``nvmath.bindings.cusparseLt`` (:func:`nvmath_bindings`)."""
    return nvmath_bindings("cusparseLt")


def library_version(cslt) -> str:
    """The libcusparseLt nvmath loaded, as "cuSPARSELt 0.8.1" (cusparseLtGetProperty: no handle needed)."""
    return "cuSPARSELt " + ".".join(str(cslt.get_property(p)) for p in VERSION_PROPERTIES)


def _set(cslt, handle, selection, attribute, value: int) -> None:
    data = np.array([value], dtype=np.int32)
    cslt.matmul_alg_set_attribute(handle, selection, attribute, data.ctypes.data, data.itemsize)


def _get(cslt, handle, selection, attribute) -> int:
    data = np.zeros(1, dtype=np.int32)
    cslt.matmul_alg_get_attribute(handle, selection, attribute, data.ctypes.data, data.itemsize)
    return int(data[0])


class NvmathCuSparseLtGemm:
    """cuSPARSELt through nvmath-python (see the module docstring)."""

    name = "cuSPARSELt-nvmath"

    def __init__(self):
        self.max_alg_id: int | None = None     # CUSPARSELT_MATMUL_ALG_CONFIG_MAX_ID of the last bind
        self.loaded: int | None = None         # cusparseLtGetVersion of the handle
        self._handle = None
        self._compressed = (None, None)        # (A, (compressed, buffer))

    @staticmethod
    def loaded_library() -> tuple[bool, str]:
        """(True, libcusparseLt's version) where nvmath-python loads it, else (False, why)."""
        try:
            cslt = bindings()
        except ImportError as error:
            return False, str(error)
        try:
            return True, library_version(cslt)
        except Exception as error:  # noqa: BLE001 - the library is looked for on first use
            return False, f"nvmath-python cannot load libcusparseLt ({type(error).__name__}: {error})"

    def supports(self, m, n, k, dtype) -> tuple[bool, str]:
        ok, loaded = self.loaded_library()
        if not ok:
            return ok, loaded
        if _dtype_name(dtype) not in SUPPORTED:
            return False, unsupported_dtype(dtype)
        refused = cslt_shape_refusal(m, n, k)
        return refused or (True, f"nvmath-python, {loaded}")

    def version(self) -> str:
        text = f"nvmath-python {nvmath_version()}, {library_version(bindings())}"
        return text + (f" (cusparseLtGetVersion {self.loaded})" if self.loaded is not None else "")

    def search_info(self) -> dict:
        info = {"library": self.version()}
        if self.max_alg_id is not None:
            info["max_alg_id"] = self.max_alg_id
        return info

    def handle(self, cslt):
        if self._handle is None:
            self._handle = cslt.init()
            self.loaded = int(cslt.get_version(self._handle))
        return self._handle

    def compressed(self, cslt, handle, plan, a: DeviceSparse):
        """A compressed once per A (on the first plan; see the module docstring): (compressed, buffer)."""
        if self._compressed[0] is not a:
            torch = _torch()
            size, buffer_size = cslt.sp_mma_compressed_size(handle, plan)
            compressed = torch.empty((max(1, int(size)),), dtype=torch.uint8, device="cuda")
            buffer = torch.empty((max(1, int(buffer_size)),), dtype=torch.uint8, device="cuda")
            cslt.sp_mma_compress(handle, plan, a.dense.data_ptr(), compressed.data_ptr(), buffer.data_ptr(),
                                 torch.cuda.current_stream().cuda_stream)
            self._compressed = (a, (compressed, buffer))
        return self._compressed[1][0]

    def close(self) -> None:
        self._compressed = (None, None)
        if self._handle is not None:
            handle, self._handle = self._handle, None
            bindings().destroy(handle)

    def bind(self, a: DeviceSparse, b, config: CsltConfig | None = None):
        config = config or CsltConfig()
        m, n, k = _supported_shape(self, a, b)
        cslt = bindings()
        b = _column_major(b) if config.b_column_major else b
        stack = contextlib.ExitStack()
        try:
            op = self._bind(cslt, stack, a, b, config, (m, n, k))
        except BaseException:
            stack.close()     # every descriptor and plan made so far, newest first
            raise
        op.close = stack.close
        return op

    def types(self, dtype) -> tuple[int, int, str, str]:
        """(cudaDataType of A and B, of C and D, the cusparseComputeType's name, C's torch dtype name) for
        operands of ``dtype``: the input type throughout with fp32 compute (the typed route,
        :mod:`.typed_libraries`, answers for its other types)."""
        name = _dtype_name(dtype)
        return CUDA_TYPES[name], CUDA_TYPES[name], "COMPUTE_32F", name

    def _descriptors(self, cslt, handle, stack, a, b, config, shape):
        """(matmul descriptor, algorithm selection), their matrix descriptors registered on ``stack``."""
        m, n, k = shape
        (dtype, out_type, compute, _), row_b = self.types(a.dtype), b.is_contiguous()
        column_c = config.transpose_result

        def made(value, destroy):
            stack.callback(destroy, value)
            return value

        destroy = cslt.mat_descriptor_destroy
        mat_a = made(cslt.structured_descriptor_init(handle, m, k, k, ALIGNMENT, dtype, ORDER_ROW,
                                                     cslt.Sparsity.SPARSITY_50_PERCENT), destroy)
        mat_b = made(cslt.dense_descriptor_init(handle, k if row_b else n, n if row_b else k, n if row_b else k,
                                                ALIGNMENT, dtype, ORDER_ROW), destroy)
        mat_c = made(cslt.dense_descriptor_init(handle, m, n, m if column_c else n, ALIGNMENT, out_type,
                                                ORDER_COL if column_c else ORDER_ROW), destroy)
        matmul = made(cslt.matmul_descriptor_init(handle, OP_N, OP_N if row_b else OP_T, mat_a, mat_b, mat_c,
                                                  mat_c, getattr(cslt.ComputeType, compute)),
                      cslt.matmul_descriptor_destroy)
        selection = made(cslt.matmul_alg_selection_init(handle, matmul, cslt.MatmulAlg.DEFAULT),
                         cslt.matmul_alg_selection_destroy)
        return matmul, selection

    def _bind(self, cslt, stack, a, b, config: CsltConfig, shape):
        torch = _torch()
        m, n, _ = shape
        handle = self.handle(cslt)
        matmul, selection = self._descriptors(cslt, handle, stack, a, b, config, shape)
        attribute = cslt.MatmulAlgAttribute
        self.max_alg_id = _get(cslt, handle, selection, attribute.CONFIG_MAX_ID)
        if config.alg_id is not None:
            _set(cslt, handle, selection, attribute.CONFIG_ID, config.alg_id)
            if config.split_k != 1:
                _set(cslt, handle, selection, attribute.SPLIT_K, config.split_k)
                if config.split_k_mode > 0:
                    _set(cslt, handle, selection, attribute.SPLIT_K_MODE, config.split_k_mode)
        plan = cslt.matmul_plan_init(handle, matmul, selection)
        stack.callback(cslt.matmul_plan_destroy, plan)
        compressed = self.compressed(cslt, handle, plan, a)
        out_dtype = getattr(torch, self.types(a.dtype)[3])
        out = torch.empty((n, m) if config.transpose_result else (m, n), dtype=out_dtype, device="cuda")
        scalars = np.array([1.0, 0.0], dtype=np.float32)         # alpha, beta (host)
        streams = np.zeros(1, dtype=np.int64)

        def arguments(workspace):
            streams[0] = torch.cuda.current_stream().cuda_stream
            return (handle, plan, scalars.ctypes.data, compressed.data_ptr(), b.data_ptr(),
                    scalars.ctypes.data + scalars.itemsize, out.data_ptr(), out.data_ptr(),
                    workspace.data_ptr(), streams.ctypes.data, 1)

        def workspace():
            return torch.empty((max(1, int(cslt.matmul_get_workspace(handle, plan))),), dtype=torch.uint8,
                               device="cuda")

        space = workspace()
        if config.alg_id is None:    # cuSPARSELt's own search sets the plan's algorithm and split-K
            cslt.matmul_search(*arguments(space))
            space = workspace()
        settings = {"alg_id": _get(cslt, handle, selection, attribute.CONFIG_ID),
                    "split_k": _get(cslt, handle, selection, attribute.SPLIT_K),
                    "split_k_mode": _get(cslt, handle, selection, attribute.SPLIT_K_MODE)}

        def run():
            cslt.matmul(*arguments(space))
            return out.t() if config.transpose_result else out

        run()   # fails here, not in the check, when the library refuses it
        op = capture_graph(run) if config.graph else run
        op.keep = (compressed, b, out, space, scalars, streams)
        op.settings = settings
        op.description = (f"cusparseLtMatmul {settings}" + (" C col-major" if config.transpose_result else "")
                          + (" in a CUDA graph" if config.graph else ""))
        return op
