/* Body of dp_adjoint for one accumulator type; soft_adjoint.c defines
 * ADJ_REAL, ADJ_EXPN (exp of x <= 0), ADJ_LOG1P01 (log1p on [0, 1]) and
 * ADJ_FN before each inclusion.
 *
 * Step by step from the last: the step's cells are gathered into contiguous
 * rows (any view, any dtype), combined with the next step's rows kept from
 * the previous iteration, and the gradient scattered back. */
#include <math.h>
#include <stdint.h>

#include "common/convert.h"
#include "cpu/soft_adjoint.h"
#include "mas.h"

#define ADJ_CAT2(a, b) a##b
#define ADJ_CAT(a, b) ADJ_CAT2(a, b)
#define ADJ_GATHER ADJ_CAT(ADJ_FN, _gather)
#define ADJ_ROW ADJ_CAT(ADJ_FN, _row)
#ifndef ADJ_BLOCK
#define ADJ_BLOCK 64
#endif

/* dst[k] = view(t, s0 + k) for k in [lo, hi]. */
static void ADJ_GATHER(const dp_view *v, int64_t t, int64_t s0, int64_t lo, int64_t hi,
                       ADJ_REAL *dst) {
    int64_t st = v->stride_state, off = t * v->stride_step + s0 * st;
    switch (v->dtype) {
    case MAS_FLOAT32:
        for (int64_t s = lo; s <= hi; s++) dst[s] = (ADJ_REAL)((const float *)v->base)[off + s * st];
        break;
    case MAS_FLOAT64:
        for (int64_t s = lo; s <= hi; s++) dst[s] = (ADJ_REAL)((const double *)v->base)[off + s * st];
        break;
    case MAS_FLOAT16:
        for (int64_t s = lo; s <= hi; s++)
            dst[s] = (ADJ_REAL)mas_f16_to_f32(((const uint16_t *)v->base)[off + s * st]);
        break;
    case MAS_BFLOAT16:
        for (int64_t s = lo; s <= hi; s++)
            dst[s] = (ADJ_REAL)mas_bf16_to_f32(((const uint16_t *)v->base)[off + s * st]);
        break;
    default:
        for (int64_t s = lo; s <= hi; s++) dst[s] = 0;
        break;
    }
}

/* One step's cells [0, n) (offset so that index 0 is the first cell):
 * a, abar (in: g; out: the adjoint), x; a1/ab1 the next step's alpha and
 * adjoint at the same state (a1[k+1]: one state up), -inf/0 where that cell
 * does not exist. Branch-free so that the float version vectorises. */
SOFT_CLONES static void ADJ_ROW(int64_t n, const ADJ_REAL *restrict a, ADJ_REAL *restrict abar,
                    const ADJ_REAL *restrict x, const ADJ_REAL *restrict a1,
                    const ADJ_REAL *restrict ab1, ADJ_REAL *restrict grad) {
    const ADJ_REAL ninf = -INFINITY;
    for (int64_t k = 0; k < n; k++) {
        ADJ_REAL as = a[k], xv = x[k];
        /* from e = exp(-|x|): log sigmoid(+-x) and p = sigmoid(x), 1 - p */
        ADJ_REAL e = ADJ_EXPN(xv < 0 ? xv : -xv);
        ADJ_REAL l = ADJ_LOG1P01(e), inv = 1 / (1 + e);
        ADJ_REAL ws = (xv < 0 ? xv : 0) - l, wm = (xv > 0 ? -xv : 0) - l;
        ADJ_REAL ei = e * inv;
        ADJ_REAL p = xv >= 0 ? inv : ei, q = xv >= 0 ? ei : inv;
        ADJ_REAL d1 = as + ws - a1[k], d2 = as + wm - a1[k + 1];
        d1 = d1 > 0 ? 0 : d1;
        d2 = d2 > 0 ? 0 : d2;
        d1 = (as == ninf || a1[k] == ninf) ? ninf : d1;
        d2 = (as == ninf || a1[k + 1] == ninf) ? ninf : d2;
        ADJ_REAL f1 = ab1[k] * ADJ_EXPN(d1), f2 = ab1[k + 1] * ADJ_EXPN(d2);
        ADJ_REAL ab = abar[k] + f1 + f2, gx = f1 * q - f2 * p;
        /* no probability reaches a -inf cell: nothing flows through it */
        abar[k] = as == ninf ? 0 : ab;
        grad[k] = as == ninf ? 0 : gx;
    }
}

/* Blocks of ADJ_BLOCK states, from the top block down, each over its steps
 * from the last: a skewed walk then touches only ADJ_BLOCK rows of the
 * matrices at a time (one anti-diagonal of m2m crosses every row). The
 * block's lowest state hands a and abar of every step to the block below
 * through edge_a / edge_ab, read there as the state one above its top. */
static void ADJ_FN(const dp_adjoint_problem *p, ADJ_REAL *work) {
    const int64_t S = p->n_states, T = p->n_steps, band = p->band;
    const int64_t row = ADJ_BLOCK + 1;
    ADJ_REAL *a = work, *abar = work + row, *x = work + 2 * row;
    ADJ_REAL *a_next = work + 3 * row, *abar_next = work + 4 * row, *grad = work + 5 * row;
    ADJ_REAL *edge_a = work + 6 * row, *edge_ab = edge_a + T;
    ADJ_REAL *out = (ADJ_REAL *)p->grad_logits;
    for (int64_t t = 0; t < T; t++) edge_a[t] = -INFINITY, edge_ab[t] = 0;
    for (int64_t s0 = (S - 1) / ADJ_BLOCK * ADJ_BLOCK; s0 >= 0; s0 -= ADJ_BLOCK) {
        const int64_t w = S - s0 < ADJ_BLOCK ? S - s0 : ADJ_BLOCK;
        /* the block has cells at steps [s0, t_hi] */
        int64_t t_hi = s0 + w - 1 + band < T - 1 ? s0 + w - 1 + band : T - 1;
        for (int64_t k = 0; k <= w; k++) a_next[k] = -INFINITY, abar_next[k] = 0;
        /* the state above the block at step t + 1, before the block's own
         * writes replace it in the edge arrays */
        ADJ_REAL up_a = t_hi + 1 < T ? edge_a[t_hi + 1] : -INFINITY;
        ADJ_REAL up_ab = t_hi + 1 < T ? edge_ab[t_hi + 1] : 0;
        for (int64_t t = t_hi; t >= s0; t--) {
            int64_t lo = t - band > s0 ? t - band - s0 : 0; /* block-local */
            int64_t hi = t - s0 < w - 1 ? t - s0 : w - 1;
            a_next[w] = up_a;
            abar_next[w] = up_ab;
            up_a = edge_a[t];
            up_ab = edge_ab[t];
            {   /* lo <= hi: every step of [s0, t_hi] has cells in the block */
                ADJ_GATHER(&p->alpha, t, s0, lo, hi, a);
                ADJ_GATHER(&p->grad_alpha, t, s0, lo, hi, abar);
                if (t == T - 1) {
                    for (int64_t k = lo; k <= hi; k++) {
                        abar[k] = a[k] == -INFINITY ? 0 : abar[k];
                        grad[k] = 0;
                    }
                } else {
                    ADJ_GATHER(&p->logits, t, s0, lo, hi, x);
                    ADJ_ROW(hi - lo + 1, a + lo, abar + lo, x + lo, a_next + lo, abar_next + lo,
                            grad + lo);
                }
                for (int64_t k = lo; k <= hi; k++)
                    out[(s0 + k) * p->grad_stride_state + t * p->grad_stride_step] = grad[k];
            }
            /* step t - 1 reads this row at [lo - 1, hi]: lo - 1 is no cell */
            if (lo > 0) a[lo - 1] = -INFINITY, abar[lo - 1] = 0;
            edge_a[t] = lo == 0 ? a[0] : -INFINITY;
            edge_ab[t] = lo == 0 ? abar[0] : 0;
            ADJ_REAL *tmp = a;
            a = a_next;
            a_next = tmp;
            tmp = abar;
            abar = abar_next;
            abar_next = tmp;
        }
    }
}

#undef ADJ_GATHER
#undef ADJ_ROW
#undef ADJ_CAT
#undef ADJ_CAT2
#undef ADJ_REAL
#undef ADJ_EXPN
#undef ADJ_LOG1P01
#undef ADJ_FN
