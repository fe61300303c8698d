/* mas_det_exp over an array with AVX2 and FMA, 4 lanes (det_exp_impl.h; see
 * CMakeLists.txt for the flags). */
#include <immintrin.h>

#define DE_NAME mas_det_exp_avx2
#define DE_LANES 4
#define DE_V __m256d
#define de_set1 _mm256_set1_pd
#define de_load _mm256_loadu_pd
#define de_store _mm256_storeu_pd
#define de_mul _mm256_mul_pd
#define de_fmadd _mm256_fmadd_pd
#define de_fnmadd _mm256_fnmadd_pd
#define de_rint(v) _mm256_round_pd((v), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
/* 2^k for an integer k in the normal range without a float-to-int64
 * conversion (AVX-512DQ's): 2^52 + 1023 + k is exact and holds k + 1023 in
 * its low mantissa bits, which the shift moves into the exponent field */
#define de_pow2(k)                                                                                 \
    _mm256_castsi256_pd(_mm256_slli_epi64(                                                         \
        _mm256_castpd_si256(_mm256_add_pd((k), _mm256_set1_pd(4503599627370496.0 + 1023.0))), 52))
#define de_ge_bits(a, b) ((unsigned)_mm256_movemask_pd(_mm256_cmp_pd((a), (b), _CMP_GE_OQ)))
#define de_le_bits(a, b) ((unsigned)_mm256_movemask_pd(_mm256_cmp_pd((a), (b), _CMP_LE_OQ)))
#include "cpu/det_exp_impl.h"
