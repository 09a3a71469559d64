#version 450
// @variants ELEMENT_TYPE=float16_t|float|bfloat16_t|int8_t|uint8_t|int32_t
// @variants CLAMP_MODE=gl_CooperativeMatrixClampModeUndefinedNV|gl_CooperativeMatrixClampModeConstantNV|gl_CooperativeMatrixClampModeClampToEdgeNV|gl_CooperativeMatrixClampModeRepeatNV|gl_CooperativeMatrixClampModeMirrorRepeatNV
// Loads a ROWS x COLS matrix through a sliced 2-D tensor layout and stores it, packed, through a
// second layout. The source layout's clamp mode decides what out-of-bounds elements read.
//   defines:        ELEMENT_TYPE (default float16_t), CLAMP_MODE (default Constant)
//   spec constants: 0 ROWS, 1 COLS (the matrix shape), 2 ROW_STRIDE (0 = packed)
//   push constants: the source tensor's dimensions, the slice and the raw 32-bit clamp value
#extension GL_KHR_memory_scope_semantics : enable
#extension GL_KHR_cooperative_matrix : enable
#extension GL_NV_cooperative_matrix2 : enable
#extension GL_EXT_shader_explicit_arithmetic_types : enable
#extension GL_EXT_bfloat16 : enable

#ifndef ELEMENT_TYPE
#define ELEMENT_TYPE float16_t
#endif
#ifndef CLAMP_MODE
#define CLAMP_MODE gl_CooperativeMatrixClampModeConstantNV
#endif

layout(constant_id = 0) const uint ROWS = 16;
layout(constant_id = 1) const uint COLS = 16;
layout(constant_id = 2) const uint ROW_STRIDE = 0;
layout(local_size_x = 32) in;  // one subgroup: the matrix has subgroup scope

layout(set = 0, binding = 0) readonly buffer Source { ELEMENT_TYPE source[]; };
layout(set = 0, binding = 1) writeonly buffer Destination { ELEMENT_TYPE destination[]; };

layout(push_constant) uniform Params {
    uint dim0, dim1;          // source tensor: rows, columns
    uint offset0, span0;      // slice along dimension 0 (offset is a two's-complement int32)
    uint offset1, span1;      // slice along dimension 1
    uint clamp_value;         // raw bits; the load truncates them to the element width
} params;

void main() {
    tensorLayoutNV<2, CLAMP_MODE> source_layout = createTensorLayoutNV(2, CLAMP_MODE);
    source_layout = setTensorLayoutDimensionNV(source_layout, params.dim0, params.dim1);
    if (ROW_STRIDE != 0) {
        source_layout = setTensorLayoutStrideNV(source_layout, ROW_STRIDE, 1);
    }
    source_layout = sliceTensorLayoutNV(source_layout, params.offset0, params.span0, params.offset1, params.span1);
    source_layout = setTensorLayoutClampValueNV(source_layout, params.clamp_value);

    coopmat<ELEMENT_TYPE, gl_ScopeSubgroup, ROWS, COLS, gl_MatrixUseAccumulator> matrix;
    coopMatLoadTensorNV(matrix, source, 0, source_layout);

    tensorLayoutNV<2> destination_layout = createTensorLayoutNV(2);
    destination_layout = setTensorLayoutDimensionNV(destination_layout, ROWS, COLS);
    coopMatStoreTensorNV(matrix, destination, 0, destination_layout);
}
