/* The fused Gaussian cell source for f64 accumulators, built for avx512 (see CMakeLists.txt). */
#define LK_REAL double
#define LK_REAL_IS_DOUBLE 1
#define LK_SUFFIX f64_avx512
#include "cpu/gauss_cells_impl.h"
