/* The fused Gaussian cell source for f64 accumulators, built for sse2 (see CMakeLists.txt). */
#define LK_REAL double
#define LK_REAL_IS_DOUBLE 1
#define LK_SUFFIX f64_sse2
#include "cpu/gauss_cells_impl.h"
