/* dp_sweep for float accumulators, built for avx2 (see CMakeLists.txt). */
#define DP_REAL float
#define DP_REAL_IS_DOUBLE 0
#define DP_FN dp_sweep_f32_avx2
#include "cpu/dp_sweep_impl.h"
