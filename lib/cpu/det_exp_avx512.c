/* mas_det_exp over an array with AVX-512, 8 lanes (det_exp_impl.h; see
 * CMakeLists.txt for the flags). */
#include <immintrin.h>

#define DE_NAME mas_det_exp_avx512
#define DE_LANES 8
#define DE_V __m512d
#define de_set1 _mm512_set1_pd
#define de_load _mm512_loadu_pd
#define de_store _mm512_storeu_pd
#define de_mul _mm512_mul_pd
#define de_fmadd _mm512_fmadd_pd
#define de_fnmadd _mm512_fnmadd_pd
#define de_rint(v) _mm512_roundscale_pd((v), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
/* 2^k for an integer k in the normal range: (k + 1023) << 52 (k exact in int64) */
#define de_pow2(k)                                                                                 \
    _mm512_castsi512_pd(                                                                           \
        _mm512_slli_epi64(_mm512_add_epi64(_mm512_cvtpd_epi64(k), _mm512_set1_epi64(1023)), 52))
#define de_ge_bits(a, b) ((unsigned)_mm512_cmp_pd_mask((a), (b), _CMP_GE_OQ))
#define de_le_bits(a, b) ((unsigned)_mm512_cmp_pd_mask((a), (b), _CMP_LE_OQ))
#include "cpu/det_exp_impl.h"
