/* The coefficients of GC_LANES Gaussians at once (gauss_coef_lanes.h),
 * written once for the instruction sets that have them. One Gaussian at a
 * time, the loads, the checks and the strided stores of the scalar loop
 * were ~90% of mas_gauss_coef_cpu at Glow-TTS shapes (perf; the exps
 * already ran 8 lanes at a time); here they are vector operations across
 * Gaussians, which are contiguous in this layout. The arithmetic is
 * mas_gauss_log_std_arg, mas_det_exp (the vector one: the same bits),
 * mas_gauss_log_std_values, mas_gauss_coef_rest and mas_gauss_coef_k,
 * operation by operation; -std=c11 keeps every product and sum apart (no
 * contraction into fmas). Before including, define GC_NAME, GC_LANES,
 * GC_EXP (the array exp) and the vector operations below (GC_V, gc_*;
 * gc_*_bits give one bit a lane, gc_keep zeroes the lanes whose bit is
 * clear, gc_store_f32 stores the value rounded to float32 (round to
 * nearest, as the C cast) and returns what it stored, as float64). */
#include <math.h>

#include "common/gauss_coef.h"
#include "cpu/det_exp.h"
#include "cpu/gauss_coef_lanes.h"

#define GC_DIMS 64 /* dimensions whose exps are taken in one call */

/* lanes where v is finite (v - v == 0, as gauss_coef.h tests it) */
static inline uint32_t finite_bits(GC_V v) { return gc_eq_bits(gc_sub(v, v), gc_set1(0.0)); }

uint32_t GC_NAME(const float *mean, int64_t mean_js, const float *log_std, int64_t log_std_js,
                 int64_t J, const double *log_w, float *coef, int64_t coef_rs) {
    const GC_V zero = gc_set1(0.0), log_2pi = gc_set1(MAS_LOG_2PI);
    const GC_V m2 = gc_set1(-2.0), p2 = gc_set1(2.0), mhalf = gc_set1(-0.5);
    const uint32_t all = (1u << GC_LANES) - 1;
    GC_V sum = zero;
    uint32_t good = all;
    double arg[GC_DIMS * GC_LANES], e[GC_DIMS * GC_LANES];
    for (int64_t j0 = 0; j0 < J; j0 += GC_DIMS) {
        const int64_t nj = J - j0 < GC_DIMS ? J - j0 : GC_DIMS;
        for (int64_t j = 0; j < nj; j++) {
            const GC_V sp = gc_load_f32(log_std + (j0 + j) * log_std_js);
            gc_storeu(arg + GC_LANES * j, gc_mul(m2, sp)); /* mas_gauss_log_std_arg */
        }
        GC_EXP(arg, e, GC_LANES * nj);
        for (int64_t j = 0; j < nj; j++) {
            const int64_t d = j0 + j;
            const GC_V sp = gc_load_f32(log_std + d * log_std_js);
            const GC_V mu = gc_load_f32(mean + d * mean_js);
            const GC_V inv = gc_loadu(e + GC_LANES * j);
            /* mas_gauss_log_std_values, then the mean's check of
             * mas_gauss_coef_rest: where either fails, a, b and the term of
             * K stay 0 (the scalar path skips the rest) */
            const uint32_t live = finite_bits(sp) & gc_gt_bits(inv, zero) & finite_bits(inv) &
                                  finite_bits(mu);
            const GC_V log_var = gc_mul(p2, sp);
            const GC_V a = gc_keep(live, gc_mul(mu, inv));
            const GC_V b = gc_keep(live, gc_mul(mhalf, inv));
            const GC_V kt =
                gc_keep(live, gc_add(gc_add(log_2pi, log_var), gc_mul(gc_mul(mu, mu), inv)));
            const uint32_t rest =
                finite_bits(a) & finite_bits(b) & gc_ne_bits(b, zero) & finite_bits(kt);
            sum = gc_add(sum, kt);
            const GC_V a_r = gc_store_f32(coef + (1 + d) * coef_rs, a);
            const GC_V b_r = gc_store_f32(coef + (1 + J + d) * coef_rs, b);
            /* mas_gauss_coef_stored_ok */
            const uint32_t stored = finite_bits(a_r) & finite_bits(b_r) & gc_ne_bits(b_r, zero);
            good &= live & rest & stored;
        }
    }
    const GC_V lw = gc_loadu(log_w);
    const GC_V k_r = gc_store_f32(coef, gc_add(lw, gc_mul(mhalf, sum))); /* mas_gauss_coef_k */
    const GC_V ninf = gc_set1(-HUGE_VAL);
    /* mas_gauss_log_weight_ok and mas_gauss_coef_k_ok */
    const uint32_t lw_ok = gc_eq_bits(lw, lw) & gc_lt_bits(lw, gc_set1(HUGE_VAL));
    const uint32_t k_ok = finite_bits(k_r) | (gc_eq_bits(k_r, ninf) & gc_eq_bits(lw, ninf));
    good &= lw_ok & k_ok;
    return ~good & all;
}
