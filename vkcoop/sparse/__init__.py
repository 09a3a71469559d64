"""The structured-sparse formats of A (numpy only), one per sparsity pattern of ``wgmma.mma_async.sp``.

* 2:4 (:mod:`.two_four`): fp16, bf16, fp32 and the 8-bit float8_e4m3fn, float8_e5m2, int8, uint8. Every 2:4 path
  in vkcoop (the Vulkan decode function, the CUDA ``mma.sp`` and ``wgmma.mma_async.sp`` kernels, the cuSPARSELt
  baseline) starts from the one compressed form built there.
* 1:2 (:mod:`.one_two`): tf32 in fp32 storage.

Both keep the PTX ISA's per-chunk metadata nibbles in plain column order, eight to a uint32 word; the per-lane
registers the kernels read are built from those words by ``vkcoop.cuda.layout``.
"""
from .common import EIGHT_BIT_DTYPES, SparseFormatError, SparseTypeError, metadata_nibbles
from .common import first_two_code as _first_two_code  # the 2:4 choice of kept positions, checked by the tests
from .one_two import (K_ALIGNMENT_1TO2, KEEP_FIRST, KEEP_SECOND, Compressed1to2, check_1to2, compress_1to2,
                      decompress_1to2, prune_1to2, validate_compressed_1to2, validate_metadata_1to2)
from .two_four import (INVALID_NIBBLES, K_ALIGNMENT, K_ALIGNMENT_8BIT, Compressed2to4, check_2to4, compress_2to4,
                       decompress_2to4, k_alignment, prune_2to4, supported_dtypes, validate_compressed,
                       validate_metadata)

__all__ = [
    "EIGHT_BIT_DTYPES", "INVALID_NIBBLES", "K_ALIGNMENT", "K_ALIGNMENT_1TO2", "K_ALIGNMENT_8BIT", "KEEP_FIRST",
    "KEEP_SECOND", "Compressed1to2", "Compressed2to4", "SparseFormatError", "SparseTypeError", "check_1to2",
    "check_2to4", "compress_1to2", "compress_2to4", "decompress_1to2", "decompress_2to4", "k_alignment",
    "metadata_nibbles", "prune_1to2", "prune_2to4", "supported_dtypes", "validate_compressed",
    "validate_compressed_1to2", "validate_metadata", "validate_metadata_1to2",
]
