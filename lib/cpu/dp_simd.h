/* A tile-wide vector of the accumulator type: four native SIMD registers of
 * whichever instruction set the including file is compiled for (AVX-512, AVX2
 * or the x86-64 baseline SSE2). Four registers give the recurrence four
 * independent dependency chains per step, which hides the latency of the
 * shift-max-add chain. The DP sweep is written once
 * against these few operations. Before including, define DP_REAL as float or
 * double and DP_REAL_IS_DOUBLE as 0 or 1. */
#ifndef DP_REAL
#error "define DP_REAL before including dp_simd.h"
#endif

#include <immintrin.h>
#include <stdint.h>

#define DP_VN 4


#if defined(__AVX512F__)
#  if DP_REAL_IS_DOUBLE
typedef __m512d dp_nat;
#    define NAT_LANES 8
#    define nat_load _mm512_loadu_pd
#    define nat_store _mm512_storeu_pd
#    define nat_set1 _mm512_set1_pd
#    define nat_add _mm512_add_pd
#    define nat_max _mm512_max_pd
#    define nat_lt_bits(a, b) ((uint64_t)_mm512_cmp_pd_mask((a), (b), _CMP_LT_OQ))
#    define nat_bad_bits(a) ((uint64_t)_mm512_cmp_pd_mask((a), _mm512_set1_pd(INFINITY), _CMP_NLT_UQ))
#  else
typedef __m512 dp_nat;
#    define NAT_LANES 16
#    define nat_load _mm512_loadu_ps
#    define nat_store _mm512_storeu_ps
#    define nat_set1 _mm512_set1_ps
#    define nat_add _mm512_add_ps
#    define nat_max _mm512_max_ps
#    define nat_lt_bits(a, b) ((uint64_t)_mm512_cmp_ps_mask((a), (b), _CMP_LT_OQ))
#    define nat_bad_bits(a) ((uint64_t)_mm512_cmp_ps_mask((a), _mm512_set1_ps(INFINITY), _CMP_NLT_UQ))
#  endif
#elif defined(__AVX2__)
#  if DP_REAL_IS_DOUBLE
typedef __m256d dp_nat;
#    define NAT_LANES 4
#    define nat_load _mm256_loadu_pd
#    define nat_store _mm256_storeu_pd
#    define nat_set1 _mm256_set1_pd
#    define nat_add _mm256_add_pd
#    define nat_max _mm256_max_pd
#    define nat_lt_bits(a, b) ((uint64_t)_mm256_movemask_pd(_mm256_cmp_pd((a), (b), _CMP_LT_OQ)))
#    define nat_bad_bits(a) ((uint64_t)_mm256_movemask_pd(_mm256_cmp_pd((a), _mm256_set1_pd(INFINITY), _CMP_NLT_UQ)))
/* [v3, v0, v1, v2] */
#    define nat_rotr1(v) _mm256_permute4x64_pd((v), _MM_SHUFFLE(2, 1, 0, 3))
#    define nat_blend0(v, w) _mm256_blend_pd((v), (w), 1)
#  else
typedef __m256 dp_nat;
#    define NAT_LANES 8
#    define nat_load _mm256_loadu_ps
#    define nat_store _mm256_storeu_ps
#    define nat_set1 _mm256_set1_ps
#    define nat_add _mm256_add_ps
#    define nat_max _mm256_max_ps
#    define nat_lt_bits(a, b) ((uint64_t)_mm256_movemask_ps(_mm256_cmp_ps((a), (b), _CMP_LT_OQ)))
#    define nat_bad_bits(a) ((uint64_t)_mm256_movemask_ps(_mm256_cmp_ps((a), _mm256_set1_ps(INFINITY), _CMP_NLT_UQ)))
#    define nat_rotr1(v) _mm256_permutevar8x32_ps((v), _mm256_setr_epi32(7, 0, 1, 2, 3, 4, 5, 6))
#    define nat_blend0(v, w) _mm256_blend_ps((v), (w), 1)
#  endif
#else /* SSE2, the x86-64 baseline */
#  if DP_REAL_IS_DOUBLE
typedef __m128d dp_nat;
#    define NAT_LANES 2
#    define nat_load _mm_loadu_pd
#    define nat_store _mm_storeu_pd
#    define nat_set1 _mm_set1_pd
#    define nat_add _mm_add_pd
#    define nat_max _mm_max_pd
#    define nat_lt_bits(a, b) ((uint64_t)_mm_movemask_pd(_mm_cmplt_pd((a), (b))))
#    define nat_bad_bits(a) ((uint64_t)_mm_movemask_pd(_mm_cmpnlt_pd((a), _mm_set1_pd(INFINITY))))
#    define nat_rotr1(v) _mm_shuffle_pd((v), (v), 1)
#    define nat_blend0(v, w) _mm_move_sd((v), (w))
#  else
typedef __m128 dp_nat;
#    define NAT_LANES 4
#    define nat_load _mm_loadu_ps
#    define nat_store _mm_storeu_ps
#    define nat_set1 _mm_set1_ps
#    define nat_add _mm_add_ps
#    define nat_max _mm_max_ps
#    define nat_lt_bits(a, b) ((uint64_t)_mm_movemask_ps(_mm_cmplt_ps((a), (b))))
#    define nat_bad_bits(a) ((uint64_t)_mm_movemask_ps(_mm_cmpnlt_ps((a), _mm_set1_ps(INFINITY))))
#    define nat_rotr1(v) _mm_shuffle_ps((v), (v), _MM_SHUFFLE(2, 1, 0, 3))
#    define nat_blend0(v, w) _mm_move_ss((v), (w))
#  endif
#endif

#define DP_W (DP_VN * NAT_LANES)

typedef struct dp_vec {
    dp_nat n[DP_VN];
} dp_vec;

static inline dp_vec vec_load(const DP_REAL *p) {
    dp_vec r;
    for (int k = 0; k < DP_VN; k++) r.n[k] = nat_load(p + k * NAT_LANES);
    return r;
}
static inline void vec_store(DP_REAL *p, dp_vec v) {
    for (int k = 0; k < DP_VN; k++) nat_store(p + k * NAT_LANES, v.n[k]);
}
static inline dp_vec vec_set1(DP_REAL x) {
    dp_vec r;
    for (int k = 0; k < DP_VN; k++) r.n[k] = nat_set1(x);
    return r;
}
static inline dp_vec vec_add(dp_vec a, dp_vec b) {
    for (int k = 0; k < DP_VN; k++) a.n[k] = nat_add(a.n[k], b.n[k]);
    return a;
}
/* a > b ? a : b, lane by lane: on ties (and between -0 and +0) b wins, which
 * is what keeps the decision bit and the chosen value in agreement. */
static inline dp_vec vec_max(dp_vec a, dp_vec b) {
    for (int k = 0; k < DP_VN; k++) a.n[k] = nat_max(a.n[k], b.n[k]);
    return a;
}
/* Bit l set where a[l] < b[l] (ordered). */
static inline uint64_t vec_lt_bits(dp_vec a, dp_vec b) {
    uint64_t m = 0;
    for (int k = 0; k < DP_VN; k++) m |= nat_lt_bits(a.n[k], b.n[k]) << (k * NAT_LANES);
    return m;
}
/* Bit l set where a[l] is NaN or +inf. */
static inline uint64_t vec_bad_bits(dp_vec a) {
    uint64_t m = 0;
    for (int k = 0; k < DP_VN; k++) m |= nat_bad_bits(a.n[k]) << (k * NAT_LANES);
    return m;
}
/* [x, v0, v1, ..., v(W-2)]: the previous step's values moved one state up. */
static inline dp_vec vec_shift_in(dp_vec v, DP_REAL x) {
#if defined(__AVX512F__)
    /* valign: [last of the register below, first 15 (7) of this one]. */
#  if DP_REAL_IS_DOUBLE
#    define ALIGN_UP1(hi, lo) _mm512_castsi512_pd(_mm512_alignr_epi64( \
        _mm512_castpd_si512(hi), _mm512_castpd_si512(lo), 7))
#  else
#    define ALIGN_UP1(hi, lo) _mm512_castsi512_ps(_mm512_alignr_epi32( \
        _mm512_castps_si512(hi), _mm512_castps_si512(lo), 15))
#  endif
    for (int k = DP_VN - 1; k > 0; k--) v.n[k] = ALIGN_UP1(v.n[k], v.n[k - 1]);
    v.n[0] = ALIGN_UP1(v.n[0], nat_set1(x));
#  undef ALIGN_UP1
    return v;
#else
    dp_nat carry = nat_set1(x);
    for (int k = 0; k < DP_VN; k++) {
        dp_nat r = nat_rotr1(v.n[k]);
        v.n[k] = nat_blend0(r, carry);
        carry = r;
    }
    return v;
#endif
}
