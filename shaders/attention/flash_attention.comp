#version 450
// @variants ELEMENT=F16|BF16
// @variants SPLIT_MERGE=PASS|WAIT
// @variants SCOPE=WORKGROUP|SUBGROUP
// Flash attention forward. The kernel, and the defines, constants and bindings it takes, are in
// flash_attention.glsl.
#include "flash_attention.glsl"
