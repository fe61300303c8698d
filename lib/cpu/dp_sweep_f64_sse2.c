/* dp_sweep for double accumulators, built for sse2 (see CMakeLists.txt). */
#define DP_REAL double
#define DP_REAL_IS_DOUBLE 1
#define DP_FN dp_sweep_f64_sse2
#include "cpu/dp_sweep_impl.h"
