#version 450
// @variants ELEMENT=F16|F32
// @variants REDUCE=gl_CooperativeMatrixReduceRowNV|gl_CooperativeMatrixReduceColumnNV|gl_CooperativeMatrixReduceRowAndColumnNV|gl_CooperativeMatrixReduce2x2NV
// @variants COMBINE=COMBINE_SUM|COMBINE_MAX|COMBINE_MIN
// coopMatReduceNV: an accumulator loaded through a Constant-clamp tensor layout is reduced over rows,
// columns, rows and columns, or 2x2 blocks with a sum, max or min combine function, and stored row-major.
//
//   spec constants  0 ROWS, 1 COLS (input), 2 OUT_ROWS, 3 OUT_COLS (result; half the input for 2x2),
//                   4 EXPLICIT_STRIDE
//   binding 0       uint records[]: the input layout record; binding 1 input; binding 2 result
#include "vkcoop/common.glsl"
#include "vkcoop/records.glsl"

#define COMBINE_SUM 1
#define COMBINE_MAX 2
#define COMBINE_MIN 3

layout(constant_id = 0) const uint ROWS = 16;
layout(constant_id = 1) const uint COLS = 16;
layout(constant_id = 2) const uint OUT_ROWS = 16;
layout(constant_id = 3) const uint OUT_COLS = 16;
layout(constant_id = 4) const bool EXPLICIT_STRIDE = false;
layout(local_size_x = 32) in;

layout(set = 0, binding = 0) readonly buffer Records { uint records[]; };
layout(set = 0, binding = 1) readonly buffer Source { ELEMENT_TYPE source[]; };
layout(set = 0, binding = 2) writeonly buffer Destination { ELEMENT_TYPE destination[]; };

ELEMENT_TYPE combine(const in ELEMENT_TYPE a, const in ELEMENT_TYPE b) {
#if COMBINE == COMBINE_SUM
    return a + b;
#elif COMBINE == COMBINE_MAX
    return max(a, b);
#else
    return min(a, b);
#endif
}

void main() {
    TENSOR_LAYOUT_FROM_RECORD_NO_BLOCK(layout_, 2, gl_CooperativeMatrixClampModeConstantNV, records, 0, EXPLICIT_STRIDE);
    coopmat<ELEMENT_TYPE, gl_ScopeSubgroup, ROWS, COLS, gl_MatrixUseAccumulator> matrix;
    coopMatLoadTensorNV(matrix, source, 0, layout_);
    coopmat<ELEMENT_TYPE, gl_ScopeSubgroup, OUT_ROWS, OUT_COLS, gl_MatrixUseAccumulator> reduced;
    coopMatReduceNV(reduced, matrix, REDUCE, combine);
    coopMatStore(reduced, destination, 0, OUT_COLS, gl_CooperativeMatrixLayoutRowMajor);
}
