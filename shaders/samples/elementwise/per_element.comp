#version 450
// @variants ELEMENT=F16|F32
// @variants OPERATION=OP_AFFINE|OP_CAUSAL_MASK
// coopMatPerElementNV on accumulators; the element function receives the element's row and column.
//   OP_AFFINE       result = x * SCALE + y + (row - col), y a second matrix, SCALE a scalar argument
//   OP_CAUSAL_MASK  result = (col > row + DIAGONAL) ? -infinity : x
//
//   spec constants  0 ROWS, 1 COLS, 2 EXPLICIT_STRIDE, 3 SCALE (float), 4 DIAGONAL (int)
//   binding 0       uint records[]: layout record for x (Constant clamp); binding 1 x's tensor;
//   binding 2       y (row-major ROWS x COLS); binding 3 result (row-major)
#include "vkcoop/common.glsl"
#include "vkcoop/records.glsl"

#define OP_AFFINE 1
#define OP_CAUSAL_MASK 2

layout(constant_id = 0) const uint ROWS = 16;
layout(constant_id = 1) const uint COLS = 16;
layout(constant_id = 2) const bool EXPLICIT_STRIDE = false;
layout(constant_id = 3) const float SCALE = 2.0;
layout(constant_id = 4) const int DIAGONAL = 0;
layout(local_size_x = 32) in;

layout(set = 0, binding = 0) readonly buffer Records { uint records[]; };
layout(set = 0, binding = 1) readonly buffer Source { ELEMENT_TYPE source[]; };
layout(set = 0, binding = 2) readonly buffer Other { ELEMENT_TYPE other[]; };
layout(set = 0, binding = 3) writeonly buffer Destination { ELEMENT_TYPE destination[]; };

ELEMENT_TYPE affine(const in uint32_t row, const in uint32_t col, const in ELEMENT_TYPE x, const in ELEMENT_TYPE y,
                    const in ELEMENT_TYPE scale) {
    return x * scale + y + ELEMENT_TYPE(int(row) - int(col));
}

ELEMENT_TYPE causal_mask(const in uint32_t row, const in uint32_t col, const in ELEMENT_TYPE x) {
    const ELEMENT_TYPE negative_infinity = ELEMENT_TYPE(uintBitsToFloat(0xFF800000u));
    return (int(col) > int(row) + DIAGONAL) ? negative_infinity : x;
}

void main() {
    TENSOR_LAYOUT_FROM_RECORD_NO_BLOCK(layout_, 2, gl_CooperativeMatrixClampModeConstantNV, records, 0, EXPLICIT_STRIDE);
    coopmat<ELEMENT_TYPE, gl_ScopeSubgroup, ROWS, COLS, gl_MatrixUseAccumulator> x;
    coopMatLoadTensorNV(x, source, 0, layout_);
    coopmat<ELEMENT_TYPE, gl_ScopeSubgroup, ROWS, COLS, gl_MatrixUseAccumulator> result;
#if OPERATION == OP_AFFINE
    coopmat<ELEMENT_TYPE, gl_ScopeSubgroup, ROWS, COLS, gl_MatrixUseAccumulator> y;
    coopMatLoad(y, other, 0, COLS, gl_CooperativeMatrixLayoutRowMajor);
    coopMatPerElementNV(result, x, affine, y, ELEMENT_TYPE(SCALE));
#else
    coopMatPerElementNV(result, x, causal_mask);
#endif
    coopMatStore(result, destination, 0, COLS, gl_CooperativeMatrixLayoutRowMajor);
}
