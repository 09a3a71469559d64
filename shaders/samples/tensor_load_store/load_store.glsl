// Body shared by the tensor load/store sample shaders (one subgroup, one matrix).
//
//   defines         ELEMENT (F16 F32 BF16 S8 U8 S32), CLAMP_MODE, LDIM (1..5), OP_STORE (0 or 1)
//   spec constants  0 ROWS, 1 COLS: the matrix shape; 2 EXPLICIT_STRIDE: call setTensorLayoutStrideNV
//   binding 0       uint records[]: one layout record (vkcoop/records.glsl)
//   binding 1       source elements, binding 2 destination elements
// Load (OP_STORE 0): coopMatLoadTensorNV through the layout, then a plain row-major coopMatStore,
// so the destination holds the ROWS x COLS matrix exactly as loaded.
// Store (OP_STORE 1): a plain row-major coopMatLoad of a packed matrix, then coopMatStoreTensorNV
// through the layout into a prefilled destination, so discarded elements keep the prefill.
#include "vkcoop/common.glsl"
#include "vkcoop/records.glsl"

layout(constant_id = 0) const uint ROWS = 16;
layout(constant_id = 1) const uint COLS = 16;
layout(constant_id = 2) const bool EXPLICIT_STRIDE = false;
layout(local_size_x = 32) in;

layout(set = 0, binding = 0) readonly buffer Records { uint records[]; };
layout(set = 0, binding = 1) readonly buffer Source { ELEMENT_TYPE source[]; };
layout(set = 0, binding = 2) buffer Destination { ELEMENT_TYPE destination[]; };

void main() {
    TENSOR_LAYOUT_FROM_RECORD_NO_BLOCK(layout_, LDIM, CLAMP_MODE, records, 0, EXPLICIT_STRIDE);
    coopmat<ELEMENT_TYPE, gl_ScopeSubgroup, ROWS, COLS, ELEMENT_USE> matrix;
#if OP_STORE
    coopMatLoad(matrix, source, 0, COLS, gl_CooperativeMatrixLayoutRowMajor);
    coopMatStoreTensorNV(matrix, destination, 0, layout_);
#else
    coopMatLoadTensorNV(matrix, source, 0, layout_);
    coopMatStore(matrix, destination, 0, COLS, gl_CooperativeMatrixLayoutRowMajor);
#endif
}
