#version 450
// @variants LDIM=1|3|4|5
// Tensor store of fp16 through 1-D and 3-D..5-D layouts with Constant clamp (out-of-bounds discarded).
#define ELEMENT F16
#define CLAMP_MODE gl_CooperativeMatrixClampModeConstantNV
#define OP_STORE 1
#include "load_store.glsl"
