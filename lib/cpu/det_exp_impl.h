/* mas_det_exp over an array, one vector of lanes at a time, written once for
 * the instruction sets that can run it with the scalar's roundings. Each
 * lane does the scalar function's operations in its order, each rounded
 * once: the product by log2(e), rint (round to nearest even, the default
 * mode rint uses), the two Cody-Waite fmas, the fma chain of the
 * polynomial, the product by 2^e built from its bits. So every lane gives
 * the scalar's bits (tests/c/test_likelihood_cpu.c checks it). Lanes whose
 * input lies outside [-690, 709] (results near or past the ends of the
 * normal range, NaN) take the scalar function itself.
 * Before including, define DE_NAME (the function's name), DE_LANES and the
 * vector operations below (DE_V and de_*). */
#include "common/det_math.h"
#include "cpu/det_exp.h"

void DE_NAME(const double *x, double *y, int64_t n) {
    static const double inv_fact[12] = {MAS_DET_EXP_INV_FACT};
    const DE_V log2e = de_set1(MAS_DET_LOG2E), ln2_hi = de_set1(MAS_DET_LN2_HI);
    const DE_V ln2_lo = de_set1(MAS_DET_LN2_LO), one = de_set1(1.0);
    const DE_V lo_in = de_set1(-690.0), hi_in = de_set1(709.0);
    const unsigned all = (1u << DE_LANES) - 1;
    int64_t i = 0;
    for (; i + DE_LANES <= n; i += DE_LANES) {
        const DE_V v = de_load(x + i);
        const DE_V k = de_rint(de_mul(v, log2e));
        DE_V r = de_fnmadd(k, ln2_hi, v); /* fma(-k, ln2_hi, x): -k exact */
        r = de_fnmadd(k, ln2_lo, r);
        DE_V p = de_set1(inv_fact[0]);
        for (int j = 1; j < 12; j++) p = de_fmadd(p, r, de_set1(inv_fact[j]));
        p = de_fmadd(p, r, one);
        p = de_fmadd(p, r, one);
        de_store(y + i, de_mul(p, de_pow2(k)));
        const unsigned in = de_ge_bits(v, lo_in) & de_le_bits(v, hi_in);
        if (in != all)
            for (int l = 0; l < DE_LANES; l++)
                if (!((in >> l) & 1)) y[i + l] = mas_det_exp(x[i + l]);
    }
    for (; i < n; i++) y[i] = mas_det_exp(x[i]);
}
