#version 450
// @variants VIEW_KIND=VIEW_TRANSPOSE|VIEW_TRANSPOSE_DIMS|VIEW_IDENTITY|VIEW_PERMUTE3|VIEW_RESHAPE4|VIEW_SPACE_TO_DEPTH
// @variants OP_STORE=0|1
// Tensor load or store through a layout and a view (fp16, use A, one subgroup).
//
//   VIEW_KIND             layout dim  view (dim, hasDimensions, permutation)
//   VIEW_TRANSPOSE        2           2, false, (1, 0)          column-major source
//   VIEW_TRANSPOSE_DIMS   2           2, true,  (1, 0)          the same with explicit view dimensions
//   VIEW_IDENTITY         2           2, false, (0, 1)          clip regions on a plain layout
//   VIEW_PERMUTE3         3           3, false, (2, 0, 1)       a 3-D permutation of the span
//   VIEW_RESHAPE4         2           4, true,  (0, 2, 1, 3)    tile swizzle: a 2-D layout seen as 4-D
//   VIEW_SPACE_TO_DEPTH   3           5, true,  (0, 2, 1, 3, 4) 2x2 space-to-depth of an HWC tensor
//
//   spec constants  0 ROWS, 1 COLS; 2 EXPLICIT_STRIDE (layout); 3 EXPLICIT_VIEW_STRIDE (view, hasDimensions only)
//   binding 0       uint records[]: layout record at 0, view record at RECORD_WORDS (vkcoop/records.glsl)
//   binding 1       source, binding 2 destination (fp16)
// Load: the matrix starts filled with PREVIOUS (clipped elements keep it), is loaded through layout and
// view, and is stored row-major. Store: a packed row-major matrix is stored through layout and view
// into a prefilled destination. The layout uses Constant clamp (clamp value from the record).
#include "vkcoop/common.glsl"
#include "vkcoop/records.glsl"

#define VIEW_TRANSPOSE 1
#define VIEW_TRANSPOSE_DIMS 2
#define VIEW_IDENTITY 3
#define VIEW_PERMUTE3 4
#define VIEW_RESHAPE4 5
#define VIEW_SPACE_TO_DEPTH 6

#if VIEW_KIND == VIEW_TRANSPOSE
#  define LDIM 2
#  define VDIM 2
#  define VIEW_TYPE tensorViewNV<2, false, 1, 0>
#  define VIEW_CREATE createTensorViewNV(2, false, 1, 0)
#elif VIEW_KIND == VIEW_TRANSPOSE_DIMS
#  define LDIM 2
#  define VDIM 2
#  define VIEW_HAS_DIMENSIONS
#  define VIEW_TYPE tensorViewNV<2, true, 1, 0>
#  define VIEW_CREATE createTensorViewNV(2, true, 1, 0)
#elif VIEW_KIND == VIEW_IDENTITY
#  define LDIM 2
#  define VDIM 2
#  define VIEW_TYPE tensorViewNV<2, false>
#  define VIEW_CREATE createTensorViewNV(2, false)
#elif VIEW_KIND == VIEW_PERMUTE3
#  define LDIM 3
#  define VDIM 3
#  define VIEW_TYPE tensorViewNV<3, false, 2, 0, 1>
#  define VIEW_CREATE createTensorViewNV(3, false, 2, 0, 1)
#elif VIEW_KIND == VIEW_RESHAPE4
#  define LDIM 2
#  define VDIM 4
#  define VIEW_HAS_DIMENSIONS
#  define VIEW_TYPE tensorViewNV<4, true, 0, 2, 1, 3>
#  define VIEW_CREATE createTensorViewNV(4, true, 0, 2, 1, 3)
#elif VIEW_KIND == VIEW_SPACE_TO_DEPTH
#  define LDIM 3
#  define VDIM 5
#  define VIEW_HAS_DIMENSIONS
#  define VIEW_TYPE tensorViewNV<5, true, 0, 2, 1, 3, 4>
#  define VIEW_CREATE createTensorViewNV(5, true, 0, 2, 1, 3, 4)
#else
#  error "unknown VIEW_KIND"
#endif

#define PREVIOUS float16_t(-3.0)

layout(constant_id = 0) const uint ROWS = 16;
layout(constant_id = 1) const uint COLS = 16;
layout(constant_id = 2) const bool EXPLICIT_STRIDE = false;
layout(constant_id = 3) const bool EXPLICIT_VIEW_STRIDE = false;
layout(local_size_x = 32) in;

layout(set = 0, binding = 0) readonly buffer Records { uint records[]; };
layout(set = 0, binding = 1) readonly buffer Source { float16_t source[]; };
layout(set = 0, binding = 2) buffer Destination { float16_t destination[]; };

void main() {
    TENSOR_LAYOUT_FROM_RECORD_NO_BLOCK(layout_, LDIM, gl_CooperativeMatrixClampModeConstantNV, records, 0,
                                       EXPLICIT_STRIDE);
    VIEW_TYPE view = VIEW_CREATE;
#ifdef VIEW_HAS_DIMENSIONS
    TENSOR_VIEW_SET_DIMENSIONS(view, VDIM, records, RECORD_WORDS, EXPLICIT_VIEW_STRIDE)
#endif
    TENSOR_VIEW_SET_CLIP(view, records, RECORD_WORDS);

#if OP_STORE
    coopmat<float16_t, gl_ScopeSubgroup, ROWS, COLS, gl_MatrixUseA> matrix;
    coopMatLoad(matrix, source, 0, COLS, gl_CooperativeMatrixLayoutRowMajor);
    coopMatStoreTensorNV(matrix, destination, 0, layout_, view);
#else
    coopmat<float16_t, gl_ScopeSubgroup, ROWS, COLS, gl_MatrixUseA> matrix =
        coopmat<float16_t, gl_ScopeSubgroup, ROWS, COLS, gl_MatrixUseA>(PREVIOUS);
    coopMatLoadTensorNV(matrix, source, 0, layout_, view);
    coopMatStore(matrix, destination, 0, COLS, gl_CooperativeMatrixLayoutRowMajor);
#endif
}
