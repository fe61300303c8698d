/* mas_det_exp over an array with AVX-512 (see CMakeLists.txt for the flags).
 * Each lane does the scalar function's operations in its order, each
 * rounded once: the product by log2(e), rint (round to nearest even, the
 * default mode rint uses), the two Cody-Waite fmas, the fma chain of the
 * polynomial, the product by 2^e built from its bits. So every lane gives
 * the scalar's bits (tests/c/test_likelihood_cpu.c checks it). Lanes whose
 * input lies outside [-690, 709] (results near or past the ends of the
 * normal range, NaN) take the scalar function itself. */
#include <immintrin.h>

#include "common/det_math.h"
#include "cpu/det_exp.h"

void mas_det_exp_avx512(const double *x, double *y, int64_t n) {
    static const double inv_fact[12] = {MAS_DET_EXP_INV_FACT};
    const __m512d log2e = _mm512_set1_pd(MAS_DET_LOG2E);
    const __m512d ln2_hi = _mm512_set1_pd(MAS_DET_LN2_HI);
    const __m512d ln2_lo = _mm512_set1_pd(MAS_DET_LN2_LO);
    const __m512d lo_in = _mm512_set1_pd(-690.0), hi_in = _mm512_set1_pd(709.0);
    const __m512d one = _mm512_set1_pd(1.0);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m512d v = _mm512_loadu_pd(x + i);
        const __m512d k = _mm512_roundscale_pd(_mm512_mul_pd(v, log2e),
                                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        __m512d r = _mm512_fnmadd_pd(k, ln2_hi, v); /* fma(-k, ln2_hi, x): -k exact */
        r = _mm512_fnmadd_pd(k, ln2_lo, r);
        __m512d p = _mm512_set1_pd(inv_fact[0]);
        for (int j = 1; j < 12; j++) p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(inv_fact[j]));
        p = _mm512_fmadd_pd(p, r, one);
        p = _mm512_fmadd_pd(p, r, one);
        const __m512i e = _mm512_cvtpd_epi64(k); /* k is an integer: exact */
        const __m512i bits = _mm512_slli_epi64(_mm512_add_epi64(e, _mm512_set1_epi64(1023)), 52);
        _mm512_storeu_pd(y + i, _mm512_mul_pd(p, _mm512_castsi512_pd(bits)));
        const __mmask8 in = _mm512_cmp_pd_mask(v, lo_in, _CMP_GE_OQ) &
                            _mm512_cmp_pd_mask(v, hi_in, _CMP_LE_OQ);
        if (in != 0xFF)
            for (int l = 0; l < 8; l++)
                if (!((in >> l) & 1)) y[i + l] = mas_det_exp(x[i + l]);
    }
    for (; i < n; i++) y[i] = mas_det_exp(x[i]);
}
