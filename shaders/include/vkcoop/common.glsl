// Shared preamble for the vkcoop sample shaders: extensions, element-type selection and list macros.
//
// ELEMENT picks the matrix component type (one of the names below); the sample framework
// (vkcoop.samples.base.ELEMENT_TYPES) uses the same names and the same canonical matrix use, so
// the Python side can pick a shape from the driver's tables for exactly the matrix the shader declares.
#ifndef VKCOOP_COMMON_GLSL
#define VKCOOP_COMMON_GLSL

#extension GL_KHR_memory_scope_semantics : enable
#extension GL_KHR_cooperative_matrix : enable
#extension GL_NV_cooperative_matrix2 : enable
#extension GL_EXT_shader_explicit_arithmetic_types : enable
#extension GL_EXT_shader_explicit_arithmetic_types_int8 : enable
#extension GL_EXT_shader_explicit_arithmetic_types_int16 : enable
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : enable
#extension GL_EXT_shader_8bit_storage : enable
#extension GL_EXT_shader_16bit_storage : enable

// Element type codes (values are arbitrary but fixed; they only feed #if comparisons).
#define F16 1
#define F32 2
#define BF16 3
#define S8 4
#define U8 5
#define S32 6

// Canonical matrix use per type: the use under which the type appears in the KHR table
// (A for the multiplicand types, Accumulator for the 32-bit result types).
#if defined(ELEMENT)
#  if ELEMENT == F16
#    define ELEMENT_TYPE float16_t
#    define ELEMENT_USE gl_MatrixUseA
#  elif ELEMENT == F32
#    define ELEMENT_TYPE float
#    define ELEMENT_USE gl_MatrixUseAccumulator
#  elif ELEMENT == BF16
#    extension GL_EXT_bfloat16 : enable
#    define ELEMENT_TYPE bfloat16_t
#    define ELEMENT_USE gl_MatrixUseA
#  elif ELEMENT == S8
#    define ELEMENT_TYPE int8_t
#    define ELEMENT_USE gl_MatrixUseA
#  elif ELEMENT == U8
#    define ELEMENT_TYPE uint8_t
#    define ELEMENT_USE gl_MatrixUseA
#  elif ELEMENT == S32
#    define ELEMENT_TYPE int32_t
#    define ELEMENT_USE gl_MatrixUseAccumulator
#  else
#    error "ELEMENT must be one of F16 F32 BF16 S8 U8 S32"
#  endif
#endif

// N-argument lists read from a uint array: VK_ARGS(N, a, base) -> a[base], ..., a[base + N - 1].
// The two-level indirection expands N (often a macro such as LDIM) before pasting.
#define VK_ARGS_1(a, b) a[(b)]
#define VK_ARGS_2(a, b) a[(b)], a[(b) + 1]
#define VK_ARGS_3(a, b) a[(b)], a[(b) + 1], a[(b) + 2]
#define VK_ARGS_4(a, b) a[(b)], a[(b) + 1], a[(b) + 2], a[(b) + 3]
#define VK_ARGS_5(a, b) a[(b)], a[(b) + 1], a[(b) + 2], a[(b) + 3], a[(b) + 4]
#define VK_ARGS__(n, a, b) VK_ARGS_##n(a, b)
#define VK_ARGS(n, a, b) VK_ARGS__(n, a, b)

// Interleaved (int offset, uint span) pairs for sliceTensorLayoutNV: offsets at o, spans at s.
#define VK_SLICE_1(a, o, s) int(a[(o)]), a[(s)]
#define VK_SLICE_2(a, o, s) VK_SLICE_1(a, o, s), int(a[(o) + 1]), a[(s) + 1]
#define VK_SLICE_3(a, o, s) VK_SLICE_2(a, o, s), int(a[(o) + 2]), a[(s) + 2]
#define VK_SLICE_4(a, o, s) VK_SLICE_3(a, o, s), int(a[(o) + 3]), a[(s) + 3]
#define VK_SLICE_5(a, o, s) VK_SLICE_4(a, o, s), int(a[(o) + 4]), a[(s) + 4]
#define VK_SLICE__(n, a, o, s) VK_SLICE_##n(a, o, s)
#define VK_SLICE(n, a, o, s) VK_SLICE__(n, a, o, s)

#endif  // VKCOOP_COMMON_GLSL
