/* exp and log in float64 that give the same bits on the CPU and on CUDA.
 *
 * The C library's exp/log and CUDA's differ in the last bit now and then, and
 * the Gaussian coefficients (mas_gauss_coef_*) must not: a one-Gaussian state
 * scores the same bits on both backends only if its coefficients are the
 * same bits. So both backends compute them with these functions, which use
 * only IEEE operations that every conforming implementation rounds alike
 * (+, *, /, fma, rint, frexp, ldexp), each written out so that no compiler
 * may fuse or reorder them (nvcc contracts a*b+c into an fma by default:
 * DM_MUL/DM_ADD forbid it on the device; C11 without -ffp-contract=fast does
 * not contract). Accuracy: a few ulp of float64, far below what rounding to
 * float32 keeps. Plain C, includable from CUDA sources. */
#ifndef MAS_COMMON_DET_MATH_H
#define MAS_COMMON_DET_MATH_H

#include <math.h>

#if defined(__CUDACC__)
#define DM_FN static __host__ __device__ __forceinline__
#if defined(__CUDA_ARCH__)
#define DM_MUL(a, b) __dmul_rn((a), (b))
#define DM_ADD(a, b) __dadd_rn((a), (b))
#else
#define DM_MUL(a, b) ((a) * (b))
#define DM_ADD(a, b) ((a) + (b))
#endif
#else
#define DM_FN static inline
#define DM_MUL(a, b) ((a) * (b))
#define DM_ADD(a, b) ((a) + (b))
#endif

#include <stdint.h>
#if !defined(__CUDA_ARCH__)
#include <string.h>
#endif
/* 2^e for -1022 <= e <= 1023, a normal double, from its exponent bits. */
DM_FN double mas_det_pow2(int e) {
    const uint64_t bits = (uint64_t)(e + 1023) << 52;
#if defined(__CUDA_ARCH__)
    return __longlong_as_double((long long)bits);
#else
    double d;
    memcpy(&d, &bits, sizeof d);
    return d;
#endif
}

/* The constants of mas_det_exp, also read by lib/cpu/det_exp_avx512.c,
 * which repeats its operations lane by lane: a change here is a change
 * there (tests/c/test_likelihood_cpu.c compares the two bit for bit). */
#define MAS_DET_LOG2E 1.4426950408889634
#define MAS_DET_LN2_HI 6.93147180369123816490e-01
#define MAS_DET_LN2_LO 1.90821492927058770002e-10
/* 1/k! for k = 13 down to 2 */
#define MAS_DET_EXP_INV_FACT                                                                     \
    1.6059043836821613e-10, 2.08767569878680990e-09, 2.50521083854417188e-08,                    \
        2.75573192239858907e-07, 2.75573192239858907e-06, 2.48015873015873016e-05,               \
        1.98412698412698413e-04, 1.38888888888888894e-03, 8.33333333333333322e-03,               \
        4.16666666666666644e-02, 1.66666666666666657e-01, 0.5

/* e^x = p 2^e for the x of mas_det_exp's ordinary case: x = n ln2 + r
 * with |r| <= ln2/2 (Cody-Waite, ln2 in two parts), p = e^r by its Taylor
 * polynomial to degree 13 (error < 2e-17 on that range), e = n. */
DM_FN double mas_det_exp_poly(double x, int *e) {
    const double log2e = MAS_DET_LOG2E, ln2_hi = MAS_DET_LN2_HI, ln2_lo = MAS_DET_LN2_LO;
    double n = rint(DM_MUL(x, log2e));
    double r = fma(-n, ln2_hi, x);
    r = fma(-n, ln2_lo, r);
    static const double inv_fact[12] = {MAS_DET_EXP_INV_FACT};
    double p = inv_fact[0];
    for (int k = 1; k < 12; k++) p = fma(p, r, inv_fact[k]);
    p = fma(p, r, 1.0);
    p = fma(p, r, 1.0);
    *e = (int)n;
    return p;
}

/* e^x: mas_det_exp_poly, then scaled by 2^e. */
DM_FN double mas_det_exp(double x) {
    if (x != x) return x;
    if (x > 709.782712893384) return HUGE_VAL;
    if (x < -745.2) return 0.0;
    int e;
    const double p = mas_det_exp_poly(x, &e);
    /* 2^n in two steps so that n down to -1075 (subnormal results) is exact */
    /* 2^e built from its bits, not ldexp (on the device a software routine):
     * the same bits, since both are the correctly rounded p * 2^e (p in
     * [0.7, 1.42]: the only rounding is into the subnormals, once either
     * way). */
    if (e < -1000) return DM_MUL(DM_MUL(p, mas_det_pow2(e + 1000)), mas_det_pow2(-1000));
    if (e > 1023) return DM_MUL(DM_MUL(p, mas_det_pow2(1023)), 2.0); /* x near 709.78 */
    return DM_MUL(p, mas_det_pow2(e));
}

/* mas_det_exp(x) for |x| < 690 (n within [-996, 996]: none of its special
 * cases or scalings), without their tests. */
DM_FN double mas_det_exp_ordinary(double x) {
    int e;
    const double p = mas_det_exp_poly(x, &e);
    return DM_MUL(p, mas_det_pow2(e));
}

/* log(x) for x > 0: x = m 2^e with m in [sqrt(1/2), sqrt(2)), log m =
 * 2 atanh(s), s = (m-1)/(m+1), |s| <= 0.1716, by its series to s^27. */
DM_FN double mas_det_log(double x) {
    if (x != x || x < 0) return NAN;
    if (x == 0) return -HUGE_VAL;
    if (x == HUGE_VAL) return x;
    int e;
    double m = frexp(x, &e); /* m in [0.5, 1) */
    if (m < 0.70710678118654752) {
        m = DM_MUL(m, 2.0);
        e -= 1;
    }
    double s = (m - 1.0) / (m + 1.0);
    double s2 = DM_MUL(s, s);
    /* 1/(2k+1) for k = 13 down to 1 */
    double p = 1.0 / 27.0;
    for (int k = 12; k >= 1; k--) p = fma(p, s2, 1.0 / (double)(2 * k + 1));
    double log_m = DM_MUL(DM_MUL(2.0, s), fma(p, s2, 1.0));
    const double ln2_hi = MAS_DET_LN2_HI, ln2_lo = MAS_DET_LN2_LO;
    return DM_ADD(fma((double)e, ln2_hi, log_m), DM_MUL((double)e, ln2_lo));
}

#endif
