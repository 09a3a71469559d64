// Tensor layouts and views built from records of 32 uint words in a storage buffer.
//
// The record layout is mirrored by vkcoop.samples.base.LayoutRecipe.words() / ViewRecipe.words();
// the build order below is mirrored by LayoutRecipe.layout() / ViewRecipe.view(), which hand the
// same state to the vkcoop.tensor reference. Order matters: the block size is set before the
// dimensions (setTensorLayoutDimensionNV computes packed strides from it) and slicing comes last.
#ifndef VKCOOP_RECORDS_GLSL
#define VKCOOP_RECORDS_GLSL

#define RECORD_WORDS 32
// layout record
#define LR_BLOCK 0
#define LR_DIMENSION 5
#define LR_STRIDE 10
#define LR_OFFSET 15
#define LR_SPAN 20
#define LR_CLAMP_VALUE 25
// view record
#define VR_DIMENSION 0
#define VR_STRIDE 5
#define VR_CLIP 10

// Declares `tensorLayoutNV<n, mode> t` from the record at a[base]: create, set the block size, set the
// dimensions, optionally (explicit_stride, a specialization constant) set the strides, slice, set the
// clamp value. Without explicit_stride the strides are the ones setTensorLayoutDimensionNV computes.
#define TENSOR_LAYOUT_FROM_RECORD(t, n, mode, a, base, explicit_stride)                         \
    tensorLayoutNV<n, mode> t = createTensorLayoutNV(n, mode);                                  \
    t = setTensorLayoutBlockSizeNV(t, VK_ARGS(n, a, (base) + LR_BLOCK));                        \
    t = setTensorLayoutDimensionNV(t, VK_ARGS(n, a, (base) + LR_DIMENSION));                    \
    if (explicit_stride) { t = setTensorLayoutStrideNV(t, VK_ARGS(n, a, (base) + LR_STRIDE)); } \
    t = sliceTensorLayoutNV(t, VK_SLICE(n, a, (base) + LR_OFFSET, (base) + LR_SPAN));           \
    t = setTensorLayoutClampValueNV(t, a[(base) + LR_CLAMP_VALUE])

// The same without a block size (stores must not use block sizes > 1).
#define TENSOR_LAYOUT_FROM_RECORD_NO_BLOCK(t, n, mode, a, base, explicit_stride)                \
    tensorLayoutNV<n, mode> t = createTensorLayoutNV(n, mode);                                  \
    t = setTensorLayoutDimensionNV(t, VK_ARGS(n, a, (base) + LR_DIMENSION));                    \
    if (explicit_stride) { t = setTensorLayoutStrideNV(t, VK_ARGS(n, a, (base) + LR_STRIDE)); } \
    t = sliceTensorLayoutNV(t, VK_SLICE(n, a, (base) + LR_OFFSET, (base) + LR_SPAN));           \
    t = setTensorLayoutClampValueNV(t, a[(base) + LR_CLAMP_VALUE])

// Sets the dimensions (only for hasDimensions views), optionally the strides, and always the clip
// (the record's default clip, offsets 0 and spans 0xFFFFFFFF, is createTensorViewNV's own default).
#define TENSOR_VIEW_SET_DIMENSIONS(v, n, a, base, explicit_stride)                              \
    v = setTensorViewDimensionsNV(v, VK_ARGS(n, a, (base) + VR_DIMENSION));                     \
    if (explicit_stride) { v = setTensorViewStrideNV(v, VK_ARGS(n, a, (base) + VR_STRIDE)); }
#define TENSOR_VIEW_SET_CLIP(v, a, base)                                                        \
    v = setTensorViewClipNV(v, a[(base) + VR_CLIP], a[(base) + VR_CLIP + 1],                    \
                            a[(base) + VR_CLIP + 2], a[(base) + VR_CLIP + 3])

#endif  // VKCOOP_RECORDS_GLSL
