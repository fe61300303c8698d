/* The log-likelihood kernel for f32 accumulators, built for avx512 (see CMakeLists.txt). */
#define LK_REAL float
#define LK_REAL_IS_DOUBLE 0
#define LK_SUFFIX f32_avx512
#include "cpu/likelihood_impl.h"
