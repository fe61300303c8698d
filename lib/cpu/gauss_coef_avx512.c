/* The coefficients of 8 Gaussians at once with AVX-512
 * (gauss_coef_lanes_impl.h; see CMakeLists.txt for the flags). */
#include <immintrin.h>
#include <stdint.h>

#define GC_NAME mas_gauss_coef_lanes_avx512
#define GC_LANES 8
#define GC_EXP mas_det_exp_avx512
#define GC_V __m512d
#define gc_set1 _mm512_set1_pd
#define gc_loadu _mm512_loadu_pd
#define gc_storeu _mm512_storeu_pd
#define gc_mul _mm512_mul_pd
#define gc_add _mm512_add_pd
#define gc_sub _mm512_sub_pd
#define gc_load_f32(p) _mm512_cvtps_pd(_mm256_loadu_ps(p))
#define gc_keep(bits, v) _mm512_maskz_mov_pd((__mmask8)(bits), (v))
#define gc_cmp_bits(a, b, op) ((uint32_t)_mm512_cmp_pd_mask((a), (b), (op)))
#define gc_eq_bits(a, b) gc_cmp_bits(a, b, _CMP_EQ_OQ)
#define gc_ne_bits(a, b) gc_cmp_bits(a, b, _CMP_NEQ_UQ)
#define gc_gt_bits(a, b) gc_cmp_bits(a, b, _CMP_GT_OQ)
#define gc_lt_bits(a, b) gc_cmp_bits(a, b, _CMP_LT_OQ)
static inline __m512d gc_store_f32(float *dst, __m512d v) {
    const __m256 f = _mm512_cvtpd_ps(v);
    _mm256_storeu_ps(dst, f);
    return _mm512_cvtps_pd(f);
}
#include "cpu/gauss_coef_lanes_impl.h"
