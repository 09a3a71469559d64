#version 450
// @variants GEMM_TYPES=F16_F16|F16_F32|BF16_F32|S8_S32
// Sample 7, the coopmat1 baseline: the KHR shared-memory GEMM (khr_gemm.glsl) with a dense row-major A, copied
// 16 bytes at a time.
//   spec constants: as khr_gemm.glsl
//   push constants: M, N, K and row strides (elements) of A, B, C
//   bindings:       0 A (M x K row-major), 1 B (K x N row-major), 2 C (M x N row-major)
#extension GL_EXT_shader_explicit_arithmetic_types : enable
#extension GL_EXT_control_flow_attributes : enable
#include "gemm_types.glsl"

layout(push_constant) uniform Shape {
    uint M, N, K;
    uint stride_a, stride_b, stride_c;
} shape;

#define A_BINDINGS 1
layout(set = 0, binding = 0) readonly buffer MatrixA { uvec4 a[]; };
#include "khr_gemm.glsl"

const uint A_VECS_PER_ROW = TILE_K / E;
const uint A_PER_INVOCATION = TILE_M * A_VECS_PER_ROW / WORKGROUP_SIZE;   // the host makes this divide evenly
uvec4 staged_a[A_PER_INVOCATION];

void fetch_a(uint row0, uint k) {
    [[unroll]] for (uint i = 0; i < A_PER_INVOCATION; ++i) {
        uint v = gl_LocalInvocationIndex + i * WORKGROUP_SIZE;
        uint row = row0 + v / A_VECS_PER_ROW;
        uint kk = k + (v % A_VECS_PER_ROW) * E;
        staged_a[i] = (ALIGNED || (row < shape.M && kk < shape.K)) ? a[(row * shape.stride_a + kk) / E] : uvec4(0);
    }
}

void stash_a(uint base) {
    [[unroll]] for (uint i = 0; i < A_PER_INVOCATION; ++i) {
        uint v = gl_LocalInvocationIndex + i * WORKGROUP_SIZE;
        shared_a[base + (v / A_VECS_PER_ROW) * (A_ROW / E) + v % A_VECS_PER_ROW] = staged_a[i];
    }
}
