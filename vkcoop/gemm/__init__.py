"""vkcoop.gemm: the GEMM library that the samples and the benchmarks share.

* :mod:`.types` -- element-type combinations (``GEMM_TYPES``, ``gemm_types``), the 2:4 dtypes, the device
  features each kernel needs (``features_for``) and the one result tolerance (``RESULT_TOLERANCE``).
* :mod:`.tiles` -- ``WorkgroupTile`` / ``SubgroupTile`` chosen from and checked against the driver's typed
  tables (``choose_workgroup_tile``, ``check_workgroup_tile``, ``choose_subgroup_tile``); labels that parse back
  (``parse_tile``).
* :mod:`.launch` -- the direct kernel descriptions (``CoopMat2Kernel``, ``Sparse24Kernel``), each producing one
  ``Launch`` (dispatches, named specialization constants, buffers) for samples and bench alike; :mod:`.staging` --
  those that stage A and B through shared memory (``KhrKernel``, ``StagedKernel``, ``StagedSparse24Kernel``,
  ``TiledSparse24Kernel``).
* :mod:`.expanded` -- the 2:4 GEMM as two passes: A expanded into a dense workspace, then the dense kernel.
* :mod:`.vulkan` -- ``CoopMat2Gemm``, ``Sparse24Gemm``, ``KhrSharedMemoryGemm``, ``StagedCoopMat2Gemm``,
  ``StagedSparse24Gemm``: a Launch on a device, ``bind``/``result``/``time``/``run``; ``L2Flush``.
* :mod:`.exact` -- exact inputs and references, and ``check_output``, the check every path passes; :mod:`.dtypes` --
  the bench's element types (fp16, bf16, tf32, e4m3, e5m2, int8, uint8) and how their exact inputs are drawn.
* :mod:`.interleave` -- the 2:4 format regrouped into interleaved blocks; :mod:`.tile_major` -- into the tile-major
  blocks of the narrow staged 2:4 kernel (``TiledSparse24Kernel``).
* :mod:`.path` -- the ``GemmPath`` protocol (Vulkan and CUDA): ``supports`` -> ``bind`` -> ``output_rows``/``time``;
  :mod:`.paths` -- the Vulkan paths and their seed configurations.
"""
from ..lazy import exports, homes

# Each public name and the module it lives in, loaded on first use: the CUDA paths need only the types and
# the exact inputs, not the Vulkan kernels and their device code.
_HOMES = homes({
    ".expanded": "ExpandedSparse24Kernel decompress_dispatch",
    ".exact": "check_output check_rows eighths_inputs exact_inputs reference_gemm sparse24_reference",
    ".interleave": "META_WORDS_CHOICES deinterleave_2to4 interleave_2to4",
    ".launch": "CoopMat2Kernel Dispatch Launch Sparse24Kernel",
    ".staging": "KhrKernel StagedKernel StagedSparse24Kernel TiledSparse24Kernel",
    ".tile_major": "TileMajorLayout expand_tile_major tile_major_2to4 untile_2to4",
    ".path": "BoundGemm GemmOperands GemmPath GemmProblem",
    ".tiles": "SUBGROUP_SIZE SubgroupTile WorkgroupTile check_subgroup_tile check_workgroup_tile choose_subgroup_tile "
              "choose_workgroup_tile granularity_rows parse_tile",
    ".types": "BF16 DTYPES GEMM_TYPES RESULT_TOLERANCE SPARSE24_TYPES GemmInputError GemmTypes accumulating_types "
              "features_for gemm_types",
    ".vulkan": "WARMUP_SECONDS CoopMat2Gemm KhrSharedMemoryGemm L2Flush Sparse24Gemm StagedCoopMat2Gemm "
               "StagedSparse24Gemm",
})

__all__ = [
    "check_output", "check_rows", "eighths_inputs", "exact_inputs", "reference_gemm", "sparse24_reference",
    "META_WORDS_CHOICES", "deinterleave_2to4", "interleave_2to4",
    "ExpandedSparse24Kernel", "decompress_dispatch",
    "CoopMat2Kernel", "Dispatch", "KhrKernel", "Launch", "Sparse24Kernel", "StagedKernel", "StagedSparse24Kernel",
    "TiledSparse24Kernel", "TileMajorLayout", "expand_tile_major", "tile_major_2to4", "untile_2to4",
    "BoundGemm", "GemmOperands", "GemmPath", "GemmProblem",
    "SUBGROUP_SIZE", "SubgroupTile", "WorkgroupTile", "check_subgroup_tile", "check_workgroup_tile",
    "choose_subgroup_tile", "choose_workgroup_tile", "granularity_rows", "parse_tile",
    "BF16", "DTYPES", "GEMM_TYPES", "RESULT_TOLERANCE", "SPARSE24_TYPES", "GemmInputError", "GemmTypes",
    "accumulating_types", "features_for", "gemm_types",
    "WARMUP_SECONDS", "CoopMat2Gemm", "KhrSharedMemoryGemm", "L2Flush", "Sparse24Gemm",
    "StagedCoopMat2Gemm", "StagedSparse24Gemm",
]


__getattr__, __dir__ = exports(__name__, _HOMES)
