#version 450
// @variants ELEMENT=F16|F32|BF16|S8|U8|S32
// @variants CLAMP_MODE=gl_CooperativeMatrixClampModeUndefinedNV|gl_CooperativeMatrixClampModeConstantNV|gl_CooperativeMatrixClampModeClampToEdgeNV|gl_CooperativeMatrixClampModeRepeatNV|gl_CooperativeMatrixClampModeMirrorRepeatNV
// Tensor store through a 2-D layout: out-of-bounds elements are discarded in every mode but Undefined.
#define LDIM 2
#define OP_STORE 1
#include "load_store.glsl"
