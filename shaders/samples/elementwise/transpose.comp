#version 450
// coopMatTransposeNV: a ROWS x COLS fp16 accumulator (loaded through a Constant-clamp tensor layout)
// becomes a COLS x ROWS use-B matrix, stored row-major (row stride ROWS).
//
//   spec constants  0 ROWS, 1 COLS, 2 EXPLICIT_STRIDE
//   binding 0       uint records[]; binding 1 source tensor; binding 2 the transposed matrix
#include "vkcoop/common.glsl"
#include "vkcoop/records.glsl"

layout(constant_id = 0) const uint ROWS = 16;
layout(constant_id = 1) const uint COLS = 16;
layout(constant_id = 2) const bool EXPLICIT_STRIDE = false;
layout(local_size_x = 32) in;

layout(set = 0, binding = 0) readonly buffer Records { uint records[]; };
layout(set = 0, binding = 1) readonly buffer Source { float16_t source[]; };
layout(set = 0, binding = 2) writeonly buffer Destination { float16_t destination[]; };

void main() {
    TENSOR_LAYOUT_FROM_RECORD_NO_BLOCK(layout_, 2, gl_CooperativeMatrixClampModeConstantNV, records, 0, EXPLICIT_STRIDE);
    coopmat<float16_t, gl_ScopeSubgroup, ROWS, COLS, gl_MatrixUseAccumulator> matrix;
    coopMatLoadTensorNV(matrix, source, 0, layout_);
    coopmat<float16_t, gl_ScopeSubgroup, COLS, ROWS, gl_MatrixUseB> transposed;
    coopMatTransposeNV(transposed, matrix);
    coopMatStore(transposed, destination, 0, ROWS, gl_CooperativeMatrixLayoutRowMajor);
}
