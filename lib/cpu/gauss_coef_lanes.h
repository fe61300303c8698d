/* The coefficients of several Gaussians at once (mas_gauss_coef_cpu's path
 * for log-std spreads, float32 tensors with the Gaussians contiguous: the
 * channel-first [B, D, T] of Glow-TTS and the coefficients' [2J+1, T]). */
#ifndef MAS_CPU_GAUSS_COEF_LANES_H
#define MAS_CPU_GAUSS_COEF_LANES_H

#include <stdint.h>

/* Gaussians k..k+L-1 of one item, L = 8 (AVX-512F/DQ/VL: isa level 2) or 4
 * (AVX2 and FMA), lane l = Gaussian k + l:
 *   mean, log_std  their dimension 0 (mean[j * mean_js + l] is dimension j
 *                  of Gaussian k + l), float32;
 *   log_w          the L log weights (0 without weights);
 *   coef           row 0 at Gaussian k (coef[r * coef_rs + l] is row r),
 *                  float32; rows 0..2J of the L columns are written,
 *                  nothing else.
 * Every lane runs the float64 operations of common/gauss_coef.h in their
 * order, each rounded once, so the stored bits are those of the scalar
 * path (and of the CUDA kernel). Returns the lanes whose Gaussian is bad
 * (bit l: the conditions mas_gauss_coef_cpu reports as MAS_ERR_BAD_MODEL).
 * The caller checks the CPU. */
typedef uint32_t (*mas_gauss_coef_lanes_fn)(const float *mean, int64_t mean_js,
                                            const float *log_std, int64_t log_std_js, int64_t J,
                                            const double *log_w, float *coef, int64_t coef_rs);
uint32_t mas_gauss_coef_lanes_avx512(const float *mean, int64_t mean_js, const float *log_std,
                                     int64_t log_std_js, int64_t J, const double *log_w,
                                     float *coef, int64_t coef_rs);
uint32_t mas_gauss_coef_lanes_avx2(const float *mean, int64_t mean_js, const float *log_std,
                                   int64_t log_std_js, int64_t J, const double *log_w,
                                   float *coef, int64_t coef_rs);

#endif
