#version 450 core

#extension GL_EXT_bfloat16 : require
#extension GL_EXT_float_e5m2 : require
#extension GL_KHR_cooperative_matrix : enable
#extension GL_NV_cooperative_matrix2 : enable
#extension GL_KHR_memory_scope_semantics : enable
#extension GL_EXT_shader_explicit_arithmetic_types : enable
#extension GL_EXT_scalar_block_layout : enable

layout(local_size_x = 1, local_size_y = 1, local_size_z = 1) in;

void main()
{
    floate5m2_t c011110_00 = floate5m2_t(1.0 * 32768);
    floate5m2_t c011110_01 = floate5m2_t(1.25 * 32768);
    floate5m2_t c011110_10 = floate5m2_t(1.5 * 32768);
    floate5m2_t c011110_11 = floate5m2_t(1.75 * 32768);
    floate5m2_t c011110_11_2 = floate5m2_t(1.85 * 32768);
    floate5m2_t c011111_00 = floate5m2_t(2.0 * 32768);
    floate5m2_t c111110_00 = floate5m2_t(-1.0 * 32768);
    floate5m2_t c111110_01 = floate5m2_t(-1.25 * 32768);
    floate5m2_t c111110_10 = floate5m2_t(-1.5 * 32768);
    floate5m2_t c111110_11 = floate5m2_t(-1.75 * 32768);
    floate5m2_t c111110_11_2 = floate5m2_t(-1.85 * 32768);
    floate5m2_t c111111_00 = floate5m2_t(-2.0 * 32768);
}
