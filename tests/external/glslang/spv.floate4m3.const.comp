#version 450 core

#extension GL_EXT_bfloat16 : require
#extension GL_EXT_float_e4m3 : require
#extension GL_KHR_cooperative_matrix : enable
#extension GL_NV_cooperative_matrix2 : enable
#extension GL_KHR_memory_scope_semantics : enable
#extension GL_EXT_shader_explicit_arithmetic_types : enable
#extension GL_EXT_scalar_block_layout : enable

layout(local_size_x = 1, local_size_y = 1, local_size_z = 1) in;

void main()
{
    floate4m3_t c01111_000 = floate4m3_t(1.0 * 256);
    floate4m3_t c01111_001 = floate4m3_t(1.125 * 256);
    floate4m3_t c01111_010 = floate4m3_t(1.25 * 256);
    floate4m3_t c01111_011 = floate4m3_t(1.375 * 256);
    floate4m3_t c01111_100 = floate4m3_t(1.5 * 256);
    floate4m3_t c01111_101 = floate4m3_t(1.625 * 256);
    floate4m3_t c01111_110 = floate4m3_t(1.75 * 256);
    floate4m3_t c01111_110_2 = floate4m3_t(1.85 * 256);
    floate4m3_t c01111_111 = floate4m3_t(1.95 * 256);
    floate4m3_t c01111_111_2 = floate4m3_t(2.0 * 256);
    floate4m3_t c11111_000 = floate4m3_t(-1.0 * 256);
    floate4m3_t c11111_001 = floate4m3_t(-1.125 * 256);
    floate4m3_t c11111_010 = floate4m3_t(-1.25 * 256);
    floate4m3_t c11111_011 = floate4m3_t(-1.375 * 256);
    floate4m3_t c11111_100 = floate4m3_t(-1.5 * 256);
    floate4m3_t c11111_101 = floate4m3_t(-1.625 * 256);
    floate4m3_t c11111_110 = floate4m3_t(-1.75 * 256);
    floate4m3_t c11111_110_2 = floate4m3_t(-1.85 * 256);
    floate4m3_t c11111_111 = floate4m3_t(-1.95 * 256);
    floate4m3_t c11111_111_2 = floate4m3_t(-2.0 * 256);
}
