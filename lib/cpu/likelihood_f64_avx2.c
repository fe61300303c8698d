/* The log-likelihood kernel for f64 accumulators, built for avx2 (see CMakeLists.txt). */
#define LK_REAL double
#define LK_REAL_IS_DOUBLE 1
#define LK_SUFFIX f64_avx2
#include "cpu/likelihood_impl.h"
