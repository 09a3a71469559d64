#version 450
// @variants CONVERSION=CONV_F32_ACC_TO_F16_A|CONV_F16_ACC_TO_F16_B|CONV_F16_ACC_TO_F16_A|CONV_F32_ACC_TO_F16_ACC|CONV_S32_ACC_TO_S8_A|CONV_F32_ACC_TO_BF16_B
// Cooperative matrix conversions: an accumulator, loaded through a Constant-clamp tensor layout, is
// converted by a coopmat constructor to another component type and/or to use A or B
// (OpCooperativeMatrixConvertNV for accumulator -> A/B), then stored row-major.
//
//   spec constants  0 ROWS, 1 COLS, 2 EXPLICIT_STRIDE
//   binding 0       uint records[]; binding 1 source tensor (SOURCE_TYPE); binding 2 result (RESULT_TYPE)
#include "vkcoop/common.glsl"
#include "vkcoop/records.glsl"

#define CONV_F32_ACC_TO_F16_A 1
#define CONV_F16_ACC_TO_F16_B 2
#define CONV_F16_ACC_TO_F16_A 3
#define CONV_F32_ACC_TO_F16_ACC 4
#define CONV_S32_ACC_TO_S8_A 5
#define CONV_F32_ACC_TO_BF16_B 6

#if CONVERSION == CONV_F32_ACC_TO_F16_A
#  define SOURCE_TYPE float
#  define RESULT_TYPE float16_t
#  define RESULT_USE gl_MatrixUseA
#elif CONVERSION == CONV_F16_ACC_TO_F16_B
#  define SOURCE_TYPE float16_t
#  define RESULT_TYPE float16_t
#  define RESULT_USE gl_MatrixUseB
#elif CONVERSION == CONV_F16_ACC_TO_F16_A
#  define SOURCE_TYPE float16_t
#  define RESULT_TYPE float16_t
#  define RESULT_USE gl_MatrixUseA
#elif CONVERSION == CONV_F32_ACC_TO_F16_ACC
#  define SOURCE_TYPE float
#  define RESULT_TYPE float16_t
#  define RESULT_USE gl_MatrixUseAccumulator
#elif CONVERSION == CONV_S32_ACC_TO_S8_A
#  define SOURCE_TYPE int32_t
#  define RESULT_TYPE int8_t
#  define RESULT_USE gl_MatrixUseA
#elif CONVERSION == CONV_F32_ACC_TO_BF16_B
#  extension GL_EXT_bfloat16 : enable
#  define SOURCE_TYPE float
#  define RESULT_TYPE bfloat16_t
#  define RESULT_USE gl_MatrixUseB
#else
#  error "unknown CONVERSION"
#endif

layout(constant_id = 0) const uint ROWS = 16;
layout(constant_id = 1) const uint COLS = 16;
layout(constant_id = 2) const bool EXPLICIT_STRIDE = false;
layout(local_size_x = 32) in;

layout(set = 0, binding = 0) readonly buffer Records { uint records[]; };
layout(set = 0, binding = 1) readonly buffer Source { SOURCE_TYPE source[]; };
layout(set = 0, binding = 2) writeonly buffer Destination { RESULT_TYPE destination[]; };

void main() {
    TENSOR_LAYOUT_FROM_RECORD_NO_BLOCK(layout_, 2, gl_CooperativeMatrixClampModeConstantNV, records, 0, EXPLICIT_STRIDE);
    coopmat<SOURCE_TYPE, gl_ScopeSubgroup, ROWS, COLS, gl_MatrixUseAccumulator> accumulator;
    coopMatLoadTensorNV(accumulator, source, 0, layout_);
    coopmat<RESULT_TYPE, gl_ScopeSubgroup, ROWS, COLS, RESULT_USE> converted =
        coopmat<RESULT_TYPE, gl_ScopeSubgroup, ROWS, COLS, RESULT_USE>(accumulator);
    coopMatStore(converted, destination, 0, COLS, gl_CooperativeMatrixLayoutRowMajor);
}
