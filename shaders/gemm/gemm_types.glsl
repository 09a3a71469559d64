// Shared by the vkcoop GEMM shaders: maps the GEMM_TYPES define to element and accumulator types.
//   GEMM_TYPES = F16_F16 | F16_F32 | BF16_F32 | S8_S32   (A/B type _ accumulator/result type)
// Each value is one SPIR-V module; tile sizes arrive as specialization constants.
#define F16_F16 1
#define F16_F32 2
#define BF16_F32 3
#define S8_S32 4
#ifndef GEMM_TYPES
#define GEMM_TYPES F16_F32
#endif

#if GEMM_TYPES == F16_F16
#define A_TYPE float16_t
#define C_TYPE float16_t
#define C_VEC4 f16vec4
#define A_BYTES 2
#define C_BYTES 2
#elif GEMM_TYPES == F16_F32
#define A_TYPE float16_t
#define C_TYPE float
#define C_VEC4 vec4
#define A_BYTES 2
#define C_BYTES 4
#elif GEMM_TYPES == BF16_F32
#extension GL_EXT_bfloat16 : require
#define A_TYPE bfloat16_t
#define C_TYPE float
#define C_VEC4 vec4
#define A_BYTES 2
#define C_BYTES 4
#elif GEMM_TYPES == S8_S32
#define A_TYPE int8_t
#define C_TYPE int32_t
#define C_VEC4 i32vec4
#define A_BYTES 1
#define C_BYTES 4
#else
#error "GEMM_TYPES must be F16_F16, F16_F32, BF16_F32 or S8_S32"
#endif

// Elements per 16 bytes: the alignment unit of tensor loads (GLSL_NV_cooperative_matrix2, "elementOffset ...
// must be a multiple of 16B") and of the uvec4 copies in the shared-memory kernel.
const uint ELEMENTS_PER_16B = 16 / A_BYTES;
// The same for C. An ALIGNED launch has whole tiles in N, so C's rows (stride N) are 16-byte multiples; masking the
// stride with it lets the driver prove that and store C in 64-bit pieces instead of 32-bit ones (on the H100 64 STG.64
// for 128 STG.32 per invocation of a 128x128 fp32 tile, 1-4 % faster at 4096^3 and 8192^3, 10 % at 1024^3;
// docs/gemm.md).
const uint C_ELEMENTS_PER_16B = 16 / C_BYTES;
