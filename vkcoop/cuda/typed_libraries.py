"""The library baselines in the bench's other types (tf32, e4m3, e5m2, int8; :mod:`vkcoop.gemm.dtypes`): the same
bench paths (``cuSPARSELt``, ``cuSPARSELt-nvmath``, ``torch-semi-structured``, ``cuBLAS``), whose runners here take
fp16 and bf16 as before and these types as :data:`LIBRARY_TYPES` says.

=================  ==========================  ===========================  =========================================
type (torch)       cuSPARSELt (torch, nvmath)  cuBLAS (dense)               result
=================  ==========================  ===========================  =========================================
tf32 (float32)     1:2 A, CUSPARSE_COMPUTE_32F  ``torch.mm`` with TF32 on;   fp32
                                               nvmath ``Matmul`` with
                                               COMPUTE_32F_FAST_TF32
e4m3, e5m2         2:4 A, COMPUTE_32F,         ``torch._scaled_mm`` (scales  bf16
                   B column-major first        1, B column-major); nvmath
                                               ``Matmul`` with scales 1
int8               2:4 A, COMPUTE_32I,         cuBLASLt IMMA through        int32
                   B column-major first        ``nvmath.bindings.cublasLt``
                                               (:mod:`.cublaslt_imma`)
=================  ==========================  ===========================  =========================================

cuSPARSELt's types on sm_90 (its documentation's table of type combinations): FP32 in and out with FP32 compute
(tf32 tensor cores, A 1:2), INT8 in with INT8, INT32, FP16 or BF16 out and INT32 compute, E4M3 and E5M2 in with
FP16, BF16 or FP32 out and FP32 compute; its NVIDIA sample multiplies the 8-bit types with A row-major and B under
operation T (column-major), the TN form, so the 8-bit searches try B column-major first and keep B row-major among
their deep candidates, where the library answers for itself. cuBLASLt takes e4m3 x e4m3, e4m3 x e5m2 and e5m2 x
e4m3 with B column-major (not e5m2 x e5m2: the call says so), and int8 in the TN form. uint8 has no kernels in
either library: those rows are skipped with that reason. A library that refuses a combination at run time is
reported in its own words (one line) by the search process (:mod:`.isolated`).
"""
from __future__ import annotations

from dataclasses import dataclass

from .baselines import (CUDA_R_8F_E4M3, CUDA_R_8F_E5M2, CUDA_R_8I, CUDA_R_16BF, CUDA_R_32F, CUDA_R_32I, BlasConfig,
                        CsltConfig, CublasGemm, CuSparseLtGemm, SemiStructuredGemm, _cslt_available, _nvmath_matmul,
                        cslt_shape_refusal, nvmath_version)
from .cusparselt_nvmath import NvmathCuSparseLtGemm
from .gemm import SUPPORTED, _dtype_name, _torch

#: The bench dtypes as torch names them.
TORCH_NAMES = {"fp16": "float16", "bf16": "bfloat16", "tf32": "float32", "e4m3": "float8_e4m3fn",
               "e5m2": "float8_e5m2", "int8": "int8", "uint8": "uint8"}
#: cuBLAS's CUBLAS_COMPUTE_32F_FAST_TF32 (nvmath's ComputeType member of that name).
COMPUTE_32F_FAST_TF32 = 77


@dataclass(frozen=True)
class LibraryType:
    """How the libraries compute one operand type (module docstring)."""
    cuda_type: int          # cudaDataType of A and B
    out: str                # the result's torch dtype
    out_cuda_type: int
    sparse_compute: str     # cusparseComputeType member
    column_b: bool          # B column-major first (the TN form)


#: By the operands' torch dtype name.
LIBRARY_TYPES = {
    "float32": LibraryType(CUDA_R_32F, "float32", CUDA_R_32F, "COMPUTE_32F", False),
    "float8_e4m3fn": LibraryType(CUDA_R_8F_E4M3, "bfloat16", CUDA_R_16BF, "COMPUTE_32F", True),
    "float8_e5m2": LibraryType(CUDA_R_8F_E5M2, "bfloat16", CUDA_R_16BF, "COMPUTE_32F", True),
    "int8": LibraryType(CUDA_R_8I, "int32", CUDA_R_32I, "COMPUTE_32I", True),
}
NO_KERNELS = {"uint8": "neither cuSPARSELt nor cuBLASLt has uint8 kernels (their 8-bit integer type is int8)"}


def library_type(dtype) -> LibraryType | None:
    return LIBRARY_TYPES.get(_dtype_name(dtype))


def column_b_first(dtype: str) -> bool:
    """Whether a bench dtype's library searches start from B column-major (the 8-bit types' TN form)."""
    kind = LIBRARY_TYPES.get(TORCH_NAMES.get(dtype, ""))
    return kind is not None and kind.column_b


def _refusal(dtype) -> tuple[bool, str] | None:
    """(False, why) for a type neither library has; None for the types of :data:`LIBRARY_TYPES` and fp16, bf16."""
    name = _dtype_name(dtype)
    if name in SUPPORTED or name in LIBRARY_TYPES:
        return None
    return False, NO_KERNELS.get(name, f"dtype {name} unsupported here")


class TypedCuSparseLtGemm(CuSparseLtGemm):
    """cuSPARSELt through torch (``_cslt_sparse_mm``) with ``out_dtype`` for the 8-bit types."""

    def supports(self, m, n, k, dtype) -> tuple[bool, str]:
        if _dtype_name(dtype) in SUPPORTED:
            return super().supports(m, n, k, dtype)
        refused = _refusal(dtype) or cslt_shape_refusal(m, n, k)
        ok, what = _cslt_available(_torch())
        if not ok or refused:
            return refused or (ok, what)
        return True, f"{what}, {_dtype_name(dtype)} -> {library_type(dtype).out}"

    def out_dtype(self, dtype):
        kind = library_type(dtype)
        return getattr(_torch(), kind.out) if kind is not None and kind.out != _dtype_name(dtype) else None


class TypedNvmathCuSparseLtGemm(NvmathCuSparseLtGemm):
    """cuSPARSELt through nvmath-python with the descriptors' types of :data:`LIBRARY_TYPES`."""

    def supports(self, m, n, k, dtype) -> tuple[bool, str]:
        if _dtype_name(dtype) in SUPPORTED:
            return super().supports(m, n, k, dtype)
        refused = _refusal(dtype) or cslt_shape_refusal(m, n, k)
        if refused:
            return refused
        ok, loaded = self.loaded_library()
        if not ok:
            return ok, loaded
        return True, f"nvmath-python, {loaded}, {_dtype_name(dtype)} -> {library_type(dtype).out}"

    def types(self, dtype) -> tuple[int, int, str, str]:
        kind = library_type(dtype)
        if kind is None:
            return super().types(dtype)
        return kind.cuda_type, kind.out_cuda_type, kind.sparse_compute, kind.out


class TypedSemiStructuredGemm(SemiStructuredGemm):
    """torch's semi-structured tensor takes float32 (tf32, A 1:2) on its cuSPARSELt backend beside fp16 and bf16;
    its ``torch.mm`` returns the input type, so int8 would saturate and fp8 has no ``torch.mm``: those are skipped."""

    def supports(self, m, n, k, dtype) -> tuple[bool, str]:
        name = _dtype_name(dtype)
        if name != "float32":
            if name in LIBRARY_TYPES:
                return False, (f"torch.mm of a semi-structured {name} tensor returns {name}, not the "
                               f"{library_type(dtype).out} the other rows compute: the cuSPARSELt rows measure it")
            return super().supports(m, n, k, dtype)
        return super().supports(m, n, k, _torch().float16)    # the same shape rules; the type is float32


class TypedCublasGemm(CublasGemm):
    """cuBLAS and cuBLASLt in the types of the module docstring (fp16 and bf16 as :class:`CublasGemm`)."""

    def supports(self, m, n, k, dtype) -> tuple[bool, str]:
        refused = _refusal(dtype)
        if refused:
            return refused
        if _dtype_name(dtype) in SUPPORTED:
            return super().supports(m, n, k, dtype)
        return True, f"cuBLAS/cuBLASLt, {_dtype_name(dtype)} -> {library_type(dtype).out}"

    def _call(self, config: BlasConfig, dense, b, dtype):
        name = _dtype_name(dtype)
        if name in SUPPORTED:
            return super()._call(config, dense, b, dtype)
        torch = _torch()
        kind = LIBRARY_TYPES[name]
        if config.op == "mm" and name != "float32":     # torch.mm of 8-bit operands: torch answers for itself
            return super()._call(config, dense, b, dtype)
        if config.op == "imma":
            from .cublaslt_imma import ImmaMatmul
            matmul = ImmaMatmul(dense, b)
            return matmul, matmul, matmul.describe()
        if config.op == "nvmath":
            import nvmath
            specification = ({"options": {"compute_type": COMPUTE_32F_FAST_TF32}} if name == "float32" else
                             {"quantization_scales": {"a": 1.0, "b": 1.0},
                              "options": {"result_type": nvmath.CudaDataType(kind.out_cuda_type)}})
            call, matmul, description = _nvmath_matmul(dense, b, **specification)
            return call, matmul, description + (" bcol" if config.b_column_major else "")
        if config.op == "scaled_mm":
            one = torch.ones((), dtype=torch.float32, device=b.device)
            out = getattr(torch, kind.out)

            def call():
                return torch._scaled_mm(dense, b, scale_a=one, scale_b=one, out_dtype=out)

            return call, None, f"torch._scaled_mm {config.label()} -> {kind.out}"
        return self._tf32_mm(config, dense, b)

    def _tf32_mm(self, config: BlasConfig, dense, b):
        """``torch.mm`` with ``torch.backends.cuda.matmul.allow_tf32`` on for the call (restored after it)."""
        torch = _torch()
        out = torch.empty((dense.shape[0], b.shape[1]), dtype=dense.dtype, device=b.device)
        switch = torch.backends.cuda.matmul

        def call():
            previous = switch.allow_tf32
            switch.allow_tf32 = True
            try:
                return torch.mm(dense, b, out=out)
            finally:
                switch.allow_tf32 = previous

        return call, None, f"torch.mm {config.label()} (allow_tf32)"


def blas_configs(dtype: str, deep: bool) -> list[BlasConfig]:
    """The cuBLAS path's candidates for a bench dtype other than fp16 and bf16: the quick ones (``deep`` False),
    or every one a deep search starts from (module docstring)."""
    nvmath = nvmath_version() is not None
    if dtype == "tf32":
        quick = [BlasConfig()] + ([BlasConfig(op="nvmath")] if nvmath else [])
        more = [BlasConfig(library="cublaslt"), BlasConfig(b_column_major=True)]
        more += [BlasConfig(op="nvmath", b_column_major=True)] if nvmath else []
        return quick + more if deep else quick
    if dtype in ("e4m3", "e5m2"):
        return [BlasConfig(op="scaled_mm", b_column_major=True)] + (
            [BlasConfig(op="nvmath", b_column_major=True)] if nvmath else [])
    if dtype == "int8":
        return [BlasConfig(op="imma", b_column_major=True)]
    return [BlasConfig()]


def cslt_configs(dtype: str, deep: bool) -> list[CsltConfig]:
    """The cuSPARSELt candidates of a bench dtype: quick, cuSPARSELt's own search in the type's first B layout;
    deep, its own search in every B and result layout (the first B layout first) and algorithm 0."""
    first = column_b_first(dtype)
    if not deep:
        return [CsltConfig(b_column_major=first)]
    layouts = [CsltConfig(transpose_result=t, b_column_major=c) for c in (first, not first) for t in (False, True)]
    return layouts + [CsltConfig(alg_id=0, b_column_major=first)]
