#version 450
// @variants LDIM=1|3|4|5
// @variants CLAMP_MODE=gl_CooperativeMatrixClampModeConstantNV|gl_CooperativeMatrixClampModeClampToEdgeNV|gl_CooperativeMatrixClampModeRepeatNV|gl_CooperativeMatrixClampModeMirrorRepeatNV
// Tensor load of fp16 through 1-D and 3-D..5-D layouts (2-D is load_clamp.comp).
#define ELEMENT F16
#define OP_STORE 0
#include "load_store.glsl"
