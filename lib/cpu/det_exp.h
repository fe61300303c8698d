/* mas_det_exp (common/det_math.h) over an array, for the CPUs whose vector
 * units can run it lane by lane with the same roundings. */
#ifndef MAS_CPU_DET_EXP_H
#define MAS_CPU_DET_EXP_H

#include <stdint.h>

/* y[i] = mas_det_exp(x[i]) for 0 <= i < n, the same bits, 8 at a time.
 * Needs AVX-512F and AVX-512DQ (the caller checks: isa level 2). x and y
 * may not overlap. */
void mas_det_exp_avx512(const double *x, double *y, int64_t n);

#endif
