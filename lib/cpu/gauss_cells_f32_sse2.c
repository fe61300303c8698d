/* The fused Gaussian cell source for f32 accumulators, built for sse2 (see CMakeLists.txt). */
#define LK_REAL float
#define LK_REAL_IS_DOUBLE 0
#define LK_SUFFIX f32_sse2
#include "cpu/gauss_cells_impl.h"
