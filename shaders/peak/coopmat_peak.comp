#version 450
// @variants PEAK_TYPES=F16_F16|F16_F32|BF16_F32|S8_S32
// @variants SCOPE=WORKGROUP|SUBGROUP
// @variants OPERANDS=UNIFORM|LOADED
// Register-only cooperative-matrix throughput for `vkcoop bench peak`: each scope instance (the workgroup, or
// each subgroup) keeps CHAINS independent accumulators and multiplies the same A (M x K) and B (K x N) into
// every one of them `iterations` times. Nothing is loaded in the loop, so the time is the matrix-multiply issue
// rate of the instruction form the driver picks for this scope, size and type. One instance does
// iterations * CHAINS * 2*M*N*K operations (the host counts exactly that).
// OPERANDS=UNIFORM: every element of A and of B is one push-constant value the compiler cannot know (timed with
// zeros). OPERANDS=LOADED: A and B are read once, before the loop, from binding 1: two sets [A (M x K, row-major),
// B (K x N, row-major)], chain c multiplying set c % 2, so that consecutive multiplies see other values. With
// random values the tensor cores switch as they do in a real GEMM and draw its power; with zeros they barely
// switch, and the H100 stays at its top clock far below its power limit (docs/gemm.md).
// The chains start at 0, 1, 2, ... so no two are the same computation; their sum is stored by the workgroup
// `store_group` only, a runtime value, so the loop cannot be dropped. With a = b = 1 every element of that sum is
// CHAINS*(CHAINS-1)/2 + CHAINS*iterations*K: the host checks this before timing (which proves the count, K
// included). LOADED is checked on -1/0/1 values in binding 1 against numpy (vkcoop/bench/peak_operands.py).
//   defines:        PEAK_TYPES = F16_F16 | F16_F32 | BF16_F32 | S8_S32 (A/B type _ accumulator type)
//                   SCOPE = WORKGROUP (VK_NV_cooperative_matrix2, flexible dimensions) | SUBGROUP
//                   OPERANDS = UNIFORM (A and B from the push constants) | LOADED (from binding 1)
//   spec constants: 0 WORKGROUP_SIZE, 1 M, 2 N, 3 K (from the driver's tables), 4 CHAINS
//   push constants: iterations, a_value, b_value (floats, converted to the input type), store_group
//   binding 0:      out, (WORKGROUP_SIZE / subgroup size) x M x N accumulator elements, row-major per instance
//   binding 1:      (LOADED) the two operand sets, INPUT elements packed in 32-bit words
#extension GL_KHR_memory_scope_semantics : enable
#extension GL_KHR_cooperative_matrix : enable
#extension GL_EXT_shader_explicit_arithmetic_types : enable
#extension GL_EXT_control_flow_attributes : enable
#extension GL_KHR_shader_subgroup_basic : enable

#define F16_F16 1
#define F16_F32 2
#define BF16_F32 3
#define S8_S32 4
#if PEAK_TYPES == F16_F16
#define INPUT float16_t
#define ACCUMULATOR float16_t
#elif PEAK_TYPES == F16_F32
#define INPUT float16_t
#define ACCUMULATOR float
#elif PEAK_TYPES == BF16_F32
#extension GL_EXT_bfloat16 : require
#define INPUT bfloat16_t
#define ACCUMULATOR float
#elif PEAK_TYPES == S8_S32
#define INPUT int8_t
#define ACCUMULATOR int32_t
#else
#error "PEAK_TYPES must be F16_F16, F16_F32, BF16_F32 or S8_S32"
#endif

#define WORKGROUP 1
#define SUBGROUP 2
#if SCOPE == WORKGROUP
#extension GL_NV_cooperative_matrix2 : enable
#define MATRIX_SCOPE gl_ScopeWorkgroup
#elif SCOPE == SUBGROUP
#define MATRIX_SCOPE gl_ScopeSubgroup
#else
#error "SCOPE must be WORKGROUP or SUBGROUP"
#endif

layout(constant_id = 0) const uint WORKGROUP_SIZE = 256;
layout(constant_id = 1) const uint M = 16;
layout(constant_id = 2) const uint N = 16;
layout(constant_id = 3) const uint K = 16;
layout(constant_id = 4) const uint CHAINS = 8;
layout(local_size_x_id = 0) in;

layout(set = 0, binding = 0) writeonly buffer Out { ACCUMULATOR out_values[]; };
#define UNIFORM 1
#define LOADED 2
#ifndef OPERANDS
#define OPERANDS UNIFORM
#endif
#if OPERANDS == LOADED
// 32-bit words: no 8- or 16-bit storage feature needed; offsets and strides count words (M, N, K hold whole words).
layout(set = 0, binding = 1) readonly buffer Operands { uint operand_words[]; };
const uint INPUT_BYTES = PEAK_TYPES == S8_S32 ? 1 : 2;
const uint A_WORDS = M * K * INPUT_BYTES / 4;
const uint B_WORDS = K * N * INPUT_BYTES / 4;
const uint SETS = CHAINS > 1 ? 2 : 1;
#elif OPERANDS == UNIFORM
const uint SETS = 1;
#else
#error "OPERANDS must be UNIFORM or LOADED"
#endif

layout(push_constant) uniform Parameters {
    uint iterations;
    float a_value;
    float b_value;
    uint store_group;
} parameters;

#define MAT_A coopmat<INPUT, MATRIX_SCOPE, M, K, gl_MatrixUseA>
#define MAT_B coopmat<INPUT, MATRIX_SCOPE, K, N, gl_MatrixUseB>
#define MAT_C coopmat<ACCUMULATOR, MATRIX_SCOPE, M, N, gl_MatrixUseAccumulator>

void main() {
    MAT_A a[SETS];
    MAT_B b[SETS];
#if OPERANDS == UNIFORM
    a[0] = MAT_A(INPUT(parameters.a_value));
    b[0] = MAT_B(INPUT(parameters.b_value));
#else
    [[unroll]] for (uint s = 0; s < SETS; ++s) {
        const uint base = s * (A_WORDS + B_WORDS);
        coopMatLoad(a[s], operand_words, base, K * INPUT_BYTES / 4, gl_CooperativeMatrixLayoutRowMajor);
        coopMatLoad(b[s], operand_words, base + A_WORDS, N * INPUT_BYTES / 4, gl_CooperativeMatrixLayoutRowMajor);
    }
#endif
    MAT_C chains[CHAINS];
    [[unroll]] for (uint c = 0; c < CHAINS; ++c) {
        chains[c] = MAT_C(ACCUMULATOR(c));
    }
    for (uint i = 0; i < parameters.iterations; ++i) {
        [[unroll]] for (uint c = 0; c < CHAINS; ++c) {
            chains[c] = coopMatMulAdd(a[c % SETS], b[c % SETS], chains[c]);
        }
    }
    MAT_C total = chains[0];
    [[unroll]] for (uint c = 1; c < CHAINS; ++c) {
        total = total + chains[c];
    }
    if (gl_WorkGroupID.x == parameters.store_group) {
#if SCOPE == WORKGROUP
        const uint instance = 0;
#else
        const uint instance = gl_SubgroupID;
#endif
        coopMatStore(total, out_values, instance * M * N, N, gl_CooperativeMatrixLayoutRowMajor);
    }
}
