/* mas_det_exp (common/det_math.h) over an array, for the CPUs whose vector
 * units can run it lane by lane with the same roundings. */
#ifndef MAS_CPU_DET_EXP_H
#define MAS_CPU_DET_EXP_H

#include <stdint.h>

/* y[i] = mas_det_exp(x[i]) for 0 <= i < n, the same bits, 8 (AVX-512F and
 * DQ: isa level 2) or 4 (AVX2 and FMA) lanes at a time; the caller checks
 * the CPU. x and y may not overlap. */
void mas_det_exp_avx512(const double *x, double *y, int64_t n);
void mas_det_exp_avx2(const double *x, double *y, int64_t n);

#endif
