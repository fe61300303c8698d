/* Branch-free float32 exp and log1p for the log semiring, written so that a
 * loop over SIMD lanes vectorises (no libm calls, no data-dependent
 * branches, only selects). Used by the log-plus sweep and the adjoint.
 *
 * Accuracy: a few ulp relative for exp on [-87, 0], and for log1p(e) on
 * [0, 1] a relative error below 2e-8 from the series (plus rounding): the
 * log-sum-exp they make is as good as the libm pair to ~1e-7. NaN in gives
 * NaN out; -inf gives exp 0.
 *
 * Every select picks between values computed unconditionally: under the
 * default -ftrapping-math GCC will not if-convert a conditional arithmetic
 * operation, and without if-conversion a loop does not vectorise. */
#ifndef MAS_CPU_SOFT_MATH_H
#define MAS_CPU_SOFT_MATH_H

#include <math.h>
#include <stdint.h>
#include <string.h>

/* GCC: their callers compile with the same option, since GCC inlines only
 * between functions of equal options (see SM_NO_TRAPPING_BEGIN). Clang
 * ignores FP exceptions by default and vectorises the selects as they are. */
#if defined(__GNUC__) && !defined(__clang__)
#define SM_NO_TRAPPING_BEGIN \
    _Pragma("GCC push_options") _Pragma("GCC optimize(\"no-trapping-math\")")
#define SM_NO_TRAPPING_END _Pragma("GCC pop_options")
#else
#define SM_NO_TRAPPING_BEGIN
#define SM_NO_TRAPPING_END
#endif

SM_NO_TRAPPING_BEGIN

static inline uint32_t sm_bits(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

static inline float sm_float(uint32_t u) {
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* exp(x) for x <= 0 (or NaN). Below -87 (where exp leaves the normal
 * floats) the result is 0. */
static inline float sm_exp_nonpos(float x) {
    const float magic = 12582912.0f; /* 1.5 * 2^23: adding it rounds to an integer */
    float xc = x < -87.0f ? -87.0f : x;
    float t = xc * 1.44269504088896341f + magic;
    float n = t - magic; /* round(x / ln 2) */
    float r = xc - n * 0.693145751953125f - n * 1.42860682030941723e-6f;
    /* 2^n from the integer held in t's low mantissa bits (wraps, no UB) */
    uint32_t ni = sm_bits(t) - sm_bits(magic);
    float scale = sm_float((ni + 127u) << 23);
    float p = 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    float y = p * scale;
    return x < -87.0f ? 0.0f : y;
}

/* log1p(e) for e in [0, 1]: 2 atanh(s), s = e / (2 + e) <= 1/3. */
static inline float sm_log1p_01(float e) {
    float s = e / (2.0f + e), s2 = s * s;
    float p = 1.0f / 13.0f;
    p = p * s2 + 1.0f / 11.0f;
    p = p * s2 + 1.0f / 9.0f;
    p = p * s2 + 1.0f / 7.0f;
    p = p * s2 + 1.0f / 5.0f;
    p = p * s2 + 1.0f / 3.0f;
    p = p * s2 + 1.0f;
    return 2.0f * s * p;
}

/* log(exp(a) + exp(b)); -inf when both are -inf, NaN when either is NaN. */
static inline float sm_log_add_exp(float a, float b) {
    float hi = a > b ? a : b, lo = a > b ? b : a;
    hi = lo != lo ? lo : hi; /* a NaN must not lose to a -inf */
    float diff = lo - hi;
    float d = hi == -INFINITY ? -INFINITY : diff;
    return hi + sm_log1p_01(sm_exp_nonpos(d));
}

/* log sigmoid(x) and log sigmoid(-x) at once: min(+-x, 0) - log1p(exp(-|x|)). */
static inline void sm_log_sigmoid_pair(float x, float *pos, float *neg) {
    float ax = x < 0 ? -x : x;
    float l = sm_log1p_01(sm_exp_nonpos(-ax));
    *pos = (x < 0 ? x : 0.0f) - l;
    *neg = (x > 0 ? -x : 0.0f) - l;
}

SM_NO_TRAPPING_END

#endif
