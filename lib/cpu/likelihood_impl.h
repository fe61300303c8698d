/* One unit of the CPU log-likelihood kernel (see likelihood.h), written once
 * and compiled per instruction set. Before including, define LK_REAL (float
 * or double), LK_REAL_IS_DOUBLE (0 or 1) and LK_SUFFIX (f32_avx2, ...).
 *
 * Bits: every score is the chain of mas.h, acc = coef[0][k], then
 * acc = fma(e[r], coef[r][k], acc) for r = 1..2J in order, with true fused
 * multiply-adds (the FMA instructions, or fmaf/fma in the SSE2 build), so a
 * state of one Gaussian gives the same bits on every ISA and on CUDA. */
#include "cpu/likelihood_micro.h"

void LK_NAME(lk_geometry_)(lk_geometry *g) {
    g->ft = LK_FT;
    g->g = LK_G;
}

static inline int64_t lk_off(const lk_job *job, int64_t s) {
    return job->offsets ? job->offsets[s] : s;
}

/* ---- Exp and log of the state reduction, over the lanes of a tile ---- */

SM_NO_TRAPPING_BEGIN

#if LK_REAL_IS_DOUBLE
static inline real lk_exp_nonpos(real x) { return exp(x); }
static inline real lk_log_sum(real s) { return log(s); }
#else
static inline real lk_exp_nonpos(real x) { return sm_exp_nonpos(x); }
/* log(s) for a max-shifted sum s >= 1 (0 gives -inf, inf and NaN pass):
 * s = 2^n m, m in [sqrt(1/2), sqrt(2)), log m = 2 atanh((m-1)/(m+1)). */
static inline real lk_log_sum(real s) {
    uint32_t u = sm_bits(s);
    int32_t n = (int32_t)((u >> 23) & 0xffu) - 127;
    float m = sm_float((u & 0x007fffffu) | 0x3f800000u);
    int big = m > 1.41421356f;
    m = big ? 0.5f * m : m;
    n = big ? n + 1 : n;
    float t = (m - 1.0f) / (m + 1.0f), t2 = t * t;
    float p = 1.0f / 11.0f;
    p = p * t2 + 1.0f / 9.0f;
    p = p * t2 + 1.0f / 7.0f;
    p = p * t2 + 1.0f / 5.0f;
    p = p * t2 + 1.0f / 3.0f;
    p = p * t2 + 1.0f;
    float r = (float)n * 0.693147180559945309f + 2.0f * t * p;
    r = s == 0.0f ? -INFINITY : r;
    return (s != s || s == INFINITY) ? s : r;
}
#endif


/* The running reduction of one state over a tile: per frame lane the max,
 * the sum of exp(score - max) (max taken as 0 when it is -inf) and the best
 * Gaussian. */
typedef struct lk_red {
    real m[LK_FT];
    real s[LK_FT];
    int32_t best[LK_FT];
} lk_red;

/* Reduces score rows [lo, hi) of sc (global Gaussian index k0 + row). The
 * lanes live in local arrays (registers) across the rows. */
static inline void lk_reduce(const real *restrict sc, int64_t lo, int64_t hi, int64_t k0,
                             int want_sum, int want_best, lk_red *restrict r) {
    real m[LK_FT];
    const real *restrict row = sc + lo * LK_FT;
    for (int f = 0; f < LK_FT; f++) m[f] = row[f];
    if (want_best) {
        int32_t bi[LK_FT];
        for (int f = 0; f < LK_FT; f++) bi[f] = (int32_t)(k0 + lo);
        for (int64_t k = lo + 1; k < hi; k++) {
            row = sc + k * LK_FT;
            int32_t idx = (int32_t)(k0 + k);
            for (int f = 0; f < LK_FT; f++) {
                int gt = row[f] > m[f];
                m[f] = gt ? row[f] : m[f];
                bi[f] = gt ? idx : bi[f];
            }
        }
        memcpy(r->best, bi, sizeof bi);
    } else {
        for (int64_t k = lo + 1; k < hi; k++) {
            row = sc + k * LK_FT;
            for (int f = 0; f < LK_FT; f++) m[f] = row[f] > m[f] ? row[f] : m[f];
        }
    }
    memcpy(r->m, m, sizeof m);
    if (!want_sum) return;
    real ms[LK_FT], sum[LK_FT];
    for (int f = 0; f < LK_FT; f++) {
        ms[f] = m[f] == -INFINITY ? 0 : m[f];
        sum[f] = 0;
    }
    for (int64_t k = lo; k < hi; k++) {
        row = sc + k * LK_FT;
        for (int f = 0; f < LK_FT; f++) sum[f] += lk_exp_nonpos(row[f] - ms[f]);
    }
    memcpy(r->s, sum, sizeof sum);
}

/* Folds an earlier part of the same state (run, lanes at run_at) into r. */
static inline void lk_merge(const real *run_m, const real *run_s, const int32_t *run_b,
                            int want_sum, int want_best, lk_red *r) {
    for (int f = 0; f < LK_FT; f++) {
        real mr = run_m[f], mp = r->m[f];
        int later = mp > mr; /* the earlier part wins ties: lowest index */
        real mn = later ? mp : mr;
        if (mp != mp) mn = mp;
        if (want_sum) {
            real msn = mn == -INFINITY ? 0 : mn;
            r->s[f] = run_s[f] * lk_exp_nonpos(mr - msn) + r->s[f] * lk_exp_nonpos(mp - msn);
        }
        if (want_best) r->best[f] = later ? r->best[f] : run_b[f];
        r->m[f] = mn;
    }
}

/* The log-sum-exp of a finished state: max + log(sum). */
static inline void lk_finish(lk_red *r) {
    for (int f = 0; f < LK_FT; f++) {
        real ms = r->m[f] == -INFINITY ? 0 : r->m[f];
        r->m[f] = ms + lk_log_sum(r->s[f]);
    }
}

SM_NO_TRAPPING_END

/* Outputs outside the lengths of this unit's rectangle: 0 and -1. */
static void lk_fill_outside(const lk_job *job, int64_t b, int64_t n0, int64_t n1, int64_t s_lo,
                            int64_t s_hi, int64_t n_len, int64_t s_len) {
    const mas_loglik_args *a = job->a;
    real *out = (real *)a->out.data;
    int32_t *best = (int32_t *)a->best.data;
    for (int64_t n = n0; n < n1; n++) {
        int64_t from = n < n_len ? (s_len > s_lo ? s_len : s_lo) : s_lo;
        for (int64_t s = from; s < s_hi; s++) {
            out[b * a->out.stride[0] + n * a->out.stride[1] + s * a->out.stride[2]] = 0;
            if (best)
                best[b * a->best.stride[0] + n * a->best.stride[1] + s * a->best.stride[2]] = -1;
        }
    }
}

static inline char *lk_carve(char **p, size_t bytes) {
    char *r = *p;
    *p += (bytes + 63) / 64 * 64;
    return r;
}

void LK_NAME(lk_unit_)(const lk_job *job, int64_t unit, char *ws) {
    const mas_loglik_args *a = job->a;
    const int64_t J = job->dim, P = job->rows, R = 2 * J;
    const int64_t per_item = job->n_blocks * job->n_groups;
    const int64_t b = unit / per_item, rem = unit % per_item;
    const int64_t blk = rem / job->n_groups, grp = rem % job->n_groups;
    const int64_t N = job->frames, S = job->states;
    const int64_t n0 = blk * job->block;
    const int64_t n1 = n0 + job->block < N ? n0 + job->block : N;
    const int64_t s_lo = grp * S / job->n_groups, s_hi = (grp + 1) * S / job->n_groups;
    const int64_t n_len = a->n_len ? a->n_len[b] : N, s_len = a->s_len ? a->s_len[b] : S;
    lk_fill_outside(job, b, n0, n1, s_lo, s_hi, n_len, s_len);
    const int64_t nv = (n1 < n_len ? n1 : n_len) - n0;
    const int64_t sv_hi = s_hi < s_len ? s_hi : s_len;
    if (nv <= 0 || sv_hi <= s_lo) return;

    const int64_t ld = (nv + LK_FT - 1) / LK_FT * LK_FT;
    const int64_t chunk = job->chunk;
    char *p = ws;
    real *e = (real *)lk_carve(&p, sizeof(real) * (size_t)(R * job->block));
    real *cpk = (real *)lk_carve(&p, sizeof(real) * (size_t)(P * chunk));
    real *sc = (real *)lk_carve(&p, sizeof(real) * (size_t)(chunk * LK_FT));
    real *run_m = (real *)lk_carve(&p, sizeof(real) * (size_t)job->block);
    real *run_s = (real *)lk_carve(&p, sizeof(real) * (size_t)job->block);
    int32_t *run_b = (int32_t *)lk_carve(&p, sizeof(int32_t) * (size_t)job->block);

    /* The frames, expanded once (lk_expand). */
    lk_expand((const char *)a->x.data, a->x.dtype, b * a->x.stride[0] + n0 * a->x.stride[1],
              a->x.stride[1], a->x.stride[2], J, nv, ld, e);

    const real *coef = (const real *)a->coef.data;
    const int64_t cb = (a->coef.dim[0] == 1 ? 0 : b) * a->coef.stride[0];
    const int64_t cs1 = a->coef.stride[1], cs2 = a->coef.stride[2];
    real *out = (real *)a->out.data;
    int32_t *best = (int32_t *)a->best.data;
    const int want_best = job->want_best, want_max = job->want_max;
    const int64_t ob = b * a->out.stride[0], os1 = a->out.stride[1], os2 = a->out.stride[2];
    const int64_t bb = best ? b * a->best.stride[0] : 0;
    const int64_t bs1 = best ? a->best.stride[1] : 0, bs2 = best ? a->best.stride[2] : 0;

    int64_t s = s_lo; /* the first state not yet finished */
    int64_t g0 = lk_off(job, s_lo);
    const int64_t g_end = lk_off(job, sv_hi);
    while (g0 < g_end) {
        /* A chunk ends on a state boundary unless one state outgrows it. */
        const int64_t lim = g0 + chunk;
        int64_t s_end = s;
        while (s_end < sv_hi && lk_off(job, s_end + 1) <= lim) s_end++;
        const int64_t g1 = s_end > s ? lk_off(job, s_end) : lim;
        const int64_t touched = s_end > s ? s_end : s + 1;
        const int64_t n_g = g1 - g0, n_blk = (n_g + LK_G - 1) / LK_G;

        /* Pack the chunk's coefficients [G-block][P][G], zeros past its end. */
        for (int64_t gb = 0; gb < n_blk; gb++)
            for (int64_t r = 0; r < P; r++) {
                real *dst = cpk + (gb * P + r) * LK_G;
                for (int g = 0; g < LK_G; g++) {
                    int64_t k = g0 + gb * LK_G + g;
                    dst[g] = k < g1 ? coef[cb + r * cs1 + k * cs2] : 0;
                }
            }

        for (int64_t t0 = 0; t0 < nv; t0 += LK_FT) {
            for (int64_t gb = 0; gb < n_blk; gb++)
                lk_micro(cpk + gb * P * LK_G, e + t0 * R, LK_FT, R, sc + gb * LK_G * LK_FT);
            const int64_t nf = nv - t0 < LK_FT ? nv - t0 : LK_FT;
            for (int64_t st = s; st < touched; st++) {
                const int64_t k_lo = lk_off(job, st), k_hi = lk_off(job, st + 1);
                const int cont = k_lo < g0, fin = k_hi <= g1;
                const int single = k_hi - k_lo == 1;
                const int want_sum = !want_max && !single;
                lk_red red;
                lk_reduce(sc, (cont ? g0 : k_lo) - g0, (fin ? k_hi : g1) - g0, g0, want_sum,
                          want_best, &red);
                if (cont) lk_merge(run_m + t0, run_s + t0, run_b + t0, want_sum, want_best, &red);
                if (!fin) {
                    memcpy(run_m + t0, red.m, sizeof red.m);
                    if (want_sum) memcpy(run_s + t0, red.s, sizeof red.s);
                    if (want_best) memcpy(run_b + t0, red.best, sizeof red.best);
                    continue;
                }
                if (want_sum) lk_finish(&red);
                real *o = out + ob + (n0 + t0) * os1 + st * os2;
                for (int64_t f = 0; f < nf; f++) o[f * os1] = red.m[f];
                if (want_best) {
                    int32_t *ib = best + bb + (n0 + t0) * bs1 + st * bs2;
                    for (int64_t f = 0; f < nf; f++) ib[f * bs1] = red.best[f];
                }
            }
        }
        s = s_end;
        g0 = g1;
    }
}
