/* The coefficients of 4 Gaussians at once with AVX2
 * (gauss_coef_lanes_impl.h; see CMakeLists.txt for the flags). */
#include <immintrin.h>
#include <stdint.h>

#define GC_NAME mas_gauss_coef_lanes_avx2
#define GC_LANES 4
#define GC_EXP mas_det_exp_avx2
#define GC_V __m256d
#define gc_set1 _mm256_set1_pd
#define gc_loadu _mm256_loadu_pd
#define gc_storeu _mm256_storeu_pd
#define gc_mul _mm256_mul_pd
#define gc_add _mm256_add_pd
#define gc_sub _mm256_sub_pd
#define gc_load_f32(p) _mm256_cvtps_pd(_mm_loadu_ps(p))
#define gc_cmp_bits(a, b, op) ((uint32_t)_mm256_movemask_pd(_mm256_cmp_pd((a), (b), (op))))
#define gc_eq_bits(a, b) gc_cmp_bits(a, b, _CMP_EQ_OQ)
#define gc_ne_bits(a, b) gc_cmp_bits(a, b, _CMP_NEQ_UQ)
#define gc_gt_bits(a, b) gc_cmp_bits(a, b, _CMP_GT_OQ)
#define gc_lt_bits(a, b) gc_cmp_bits(a, b, _CMP_LT_OQ)
/* v where the lane's bit is set, else +0 */
static inline __m256d gc_keep(uint32_t bits, __m256d v) {
    const __m256i lane = _mm256_setr_epi64x(1, 2, 4, 8);
    const __m256i on = _mm256_cmpeq_epi64(_mm256_and_si256(_mm256_set1_epi64x(bits), lane), lane);
    return _mm256_and_pd(v, _mm256_castsi256_pd(on));
}
static inline __m256d gc_store_f32(float *dst, __m256d v) {
    const __m128 f = _mm256_cvtpd_ps(v);
    _mm_storeu_ps(dst, f);
    return _mm256_cvtps_pd(f);
}
#include "cpu/gauss_coef_lanes_impl.h"
