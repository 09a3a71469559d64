#version 450
// @variants ELEMENT=F16|F32|BF16|S8|U8|S32
// @variants CLAMP_MODE=gl_CooperativeMatrixClampModeUndefinedNV|gl_CooperativeMatrixClampModeConstantNV|gl_CooperativeMatrixClampModeClampToEdgeNV|gl_CooperativeMatrixClampModeRepeatNV|gl_CooperativeMatrixClampModeMirrorRepeatNV
// Tensor load through a 2-D layout: every clamp mode for every element type.
#define LDIM 2
#define OP_STORE 0
#include "load_store.glsl"
