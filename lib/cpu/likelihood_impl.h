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
/* (float32's log of a state's sum is lk_vlog_sum, on whole vectors) */
#endif


/* The running reduction of one state over a tile: per frame lane the max,
 * the sum of exp(score - max) (max taken as 0 when it is -inf) and the best
 * Gaussian. */
typedef struct lk_red {
    real m[LK_FT];
    real s[LK_FT];
    int32_t best[LK_FT];
} lk_red;

#if !LK_REAL_IS_DOUBLE
/* float32: the reduction on whole vectors of lanes, written with GCC vector
 * extensions so that every build (SSE2 too) gets it from this one source.
 * From the scalar loops GCC 12 made a scalar max pass and one long exp
 * chain a vector; on AVX2 (GMM 500 x 16, J=36) the reduction took a third
 * of the call. Every operation is the scalar code's (sm_exp_nonpos, and
 * the scalar log of the sum before session 15) lane by lane, in the same
 * order (no contraction under -std=c11), so the same bits. */
#define LK_EXP_ROWS 16 /* rows of a reduction's exp stages */
typedef float lk_vf __attribute__((vector_size(LK_LANES * sizeof(float))));
typedef int32_t lk_vi __attribute__((vector_size(LK_LANES * sizeof(float))));
typedef uint32_t lk_vu __attribute__((vector_size(LK_LANES * sizeof(float))));

static inline lk_vf lk_vload(const float *p) {
    lk_vf v;
    memcpy(&v, p, sizeof v);
    return v;
}
static inline void lk_vstore(float *p, lk_vf v) { memcpy(p, &v, sizeof v); }
static inline lk_vf lk_vsplat(float x) {
    lk_vf v;
    for (int l = 0; l < LK_LANES; l++) v[l] = x;
    return v;
}
static inline lk_vi lk_vsplat_i(int32_t x) {
    lk_vi v;
    for (int l = 0; l < LK_LANES; l++) v[l] = x;
    return v;
}
/* mask ? a : b, mask lanes all ones or all zeros */
static inline lk_vf lk_vsel(lk_vi mask, lk_vf a, lk_vf b) {
    return (lk_vf)(((lk_vi)a & mask) | ((lk_vi)b & ~mask));
}

/* a > b ? a : b lane by lane, NaN in either giving b: what the max
 * instructions do (one instruction, where GCC made a compare and a blend) */
static inline lk_vf lk_vmax(lk_vf a, lk_vf b) {
#if defined(__AVX512F__)
    return _mm512_max_ps(a, b);
#elif defined(__AVX2__)
    return _mm256_max_ps(a, b);
#else
    return _mm_max_ps(a, b);
#endif
}

/* sm_exp_nonpos on vectors, in three stages over a group of rows, the
 * values between them in L1 (lk_reduce). One vector's exp is a chain of
 * ~25 dependent operations (~65 cycles), longer than the out-of-order
 * window keeps enough of at full rate: in one pass an AVX2 core (Zen 3)
 * took ~14 cycles a vector, in three stages of shorter chains ~9.5. The
 * same operations on the same values: stage 1 gives r and 2^n (0 where
 * x < -87, so that p * 0 is the 0 the scalar code selects: p is near
 * exp(r) > 0 there), stages 2 and 3 the polynomial, then p * 2^n. */
static inline void lk_vexp_front(lk_vf x, lk_vf *r_out, lk_vf *scale_out) {
    const lk_vf magic = lk_vsplat(12582912.0f), lo = lk_vsplat(-87.0f);
    const lk_vi under = x < lo;
    lk_vf xc = lk_vmax(lo, x); /* x < -87 ? -87 : x */
    lk_vf t = xc * lk_vsplat(1.44269504088896341f) + magic;
    lk_vf n = t - magic;
    *r_out = xc - n * lk_vsplat(0.693145751953125f) - n * lk_vsplat(1.42860682030941723e-6f);
    lk_vu ni = (lk_vu)t - (lk_vu)magic;
    *scale_out = (lk_vf)(((lk_vi)((ni + 127u) << 23)) & ~under);
}
static inline lk_vf lk_vexp_poly_a(lk_vf r) {
    lk_vf p = lk_vsplat(1.0f / 720.0f);
    p = p * r + lk_vsplat(1.0f / 120.0f);
    p = p * r + lk_vsplat(1.0f / 24.0f);
    p = p * r + lk_vsplat(1.0f / 6.0f);
    return p;
}
static inline lk_vf lk_vexp_poly_b(lk_vf p, lk_vf r) {
    p = p * r + lk_vsplat(0.5f);
    p = p * r + lk_vsplat(1.0f);
    p = p * r + lk_vsplat(1.0f);
    return p;
}

/* log(s) for a max-shifted sum s >= 1, lane by lane (0 gives -inf, inf and
 * NaN pass): s = 2^n m, m in [sqrt(1/2), sqrt(2)), log m = 2 atanh((m-1) /
 * (m+1)). */
static inline lk_vf lk_vlog_sum(lk_vf s) {
    const lk_vu u = (lk_vu)s;
    lk_vi n = (lk_vi)((u >> 23) & 0xffu) - 127;
    lk_vf m = (lk_vf)((u & 0x007fffffu) | 0x3f800000u);
    const lk_vi big = m > lk_vsplat(1.41421356f);
    m = lk_vsel(big, lk_vsplat(0.5f) * m, m);
    n = n - big; /* big lanes are -1 */
    lk_vf t = (m - 1.0f) / (m + 1.0f), t2 = t * t;
    lk_vf p = lk_vsplat(1.0f / 11.0f);
    p = p * t2 + lk_vsplat(1.0f / 9.0f);
    p = p * t2 + lk_vsplat(1.0f / 7.0f);
    p = p * t2 + lk_vsplat(1.0f / 5.0f);
    p = p * t2 + lk_vsplat(1.0f / 3.0f);
    p = p * t2 + lk_vsplat(1.0f);
    lk_vf r = __builtin_convertvector(n, lk_vf) * lk_vsplat(0.693147180559945309f) +
              lk_vsplat(2.0f) * t * p;
    r = lk_vsel(s == lk_vsplat(0.0f), lk_vsplat(-INFINITY), r);
    return lk_vsel((s != s) | (s == lk_vsplat(INFINITY)), s, r);
}

/* Reduces score rows [lo, hi) of sc (global Gaussian index k0 + row). */
static inline void lk_reduce(const real *restrict sc, int64_t lo, int64_t hi, int64_t k0,
                             int want_sum, int want_best, lk_red *restrict r) {
    lk_vf m[LK_FV];
    const real *row = sc + lo * LK_FT;
    for (int v = 0; v < LK_FV; v++) m[v] = lk_vload(row + v * LK_LANES);
    if (want_best) {
        lk_vi bi[LK_FV];
        for (int v = 0; v < LK_FV; v++) bi[v] = lk_vsplat_i((int32_t)(k0 + lo));
        for (int64_t k = lo + 1; k < hi; k++) {
            row = sc + k * LK_FT;
            const lk_vi idx = lk_vsplat_i((int32_t)(k0 + k));
            for (int v = 0; v < LK_FV; v++) {
                lk_vf x = lk_vload(row + v * LK_LANES);
                lk_vi gt = x > m[v];
                m[v] = lk_vmax(x, m[v]);
                bi[v] = (idx & gt) | (bi[v] & ~gt);
            }
        }
        memcpy(r->best, bi, sizeof bi);
    } else {
        for (int64_t k = lo + 1; k < hi; k++) {
            row = sc + k * LK_FT;
            for (int v = 0; v < LK_FV; v++) {
                lk_vf x = lk_vload(row + v * LK_LANES);
                m[v] = lk_vmax(x, m[v]);
            }
        }
    }
    for (int v = 0; v < LK_FV; v++) lk_vstore(r->m + v * LK_LANES, m[v]);
    if (!want_sum) return;
    lk_vf ms[LK_FV], sum[LK_FV];
    for (int v = 0; v < LK_FV; v++) {
        ms[v] = lk_vsel(m[v] == lk_vsplat(-INFINITY), lk_vsplat(0.0f), m[v]);
        sum[v] = lk_vsplat(0.0f);
    }
    /* exp in stages (lk_vexp_front), LK_EXP_ROWS rows at a time; each
     * lane still adds its terms in row order */
    lk_vf rr[LK_EXP_ROWS][LK_FV], ss[LK_EXP_ROWS][LK_FV], pp[LK_EXP_ROWS][LK_FV];
    for (int64_t k0r = lo; k0r < hi; k0r += LK_EXP_ROWS) {
        const int n = hi - k0r < LK_EXP_ROWS ? (int)(hi - k0r) : LK_EXP_ROWS;
        row = sc + k0r * LK_FT;
        for (int k = 0; k < n; k++)
            for (int v = 0; v < LK_FV; v++)
                lk_vexp_front(lk_vload(row + k * LK_FT + v * LK_LANES) - ms[v], &rr[k][v],
                              &ss[k][v]);
        for (int k = 0; k < n; k++)
            for (int v = 0; v < LK_FV; v++) pp[k][v] = lk_vexp_poly_a(rr[k][v]);
        for (int k = 0; k < n; k++)
            for (int v = 0; v < LK_FV; v++)
                sum[v] += lk_vexp_poly_b(pp[k][v], rr[k][v]) * ss[k][v];
    }
    for (int v = 0; v < LK_FV; v++) lk_vstore(r->s + v * LK_LANES, sum[v]);
}
#else
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
#endif

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
#if !LK_REAL_IS_DOUBLE
    for (int v = 0; v < LK_FV; v++) {
        lk_vf m = lk_vload(r->m + v * LK_LANES);
        lk_vf ms = lk_vsel(m == lk_vsplat(-INFINITY), lk_vsplat(0.0f), m);
        lk_vstore(r->m + v * LK_LANES, ms + lk_vlog_sum(lk_vload(r->s + v * LK_LANES)));
    }
#else
    for (int f = 0; f < LK_FT; f++) {
        real ms = r->m[f] == -INFINITY ? 0 : r->m[f];
        r->m[f] = ms + lk_log_sum(r->s[f]);
    }
#endif
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

        /* Pack the chunk's coefficients [G-block][P][G], zeros past its end.
         * Row by row along k: the rows of coef are M apart (32 KB at M=8000),
         * and a walk down them G values at a time, from L3, took a quarter
         * of the call (AVX2, GMM 500 x 16, blocks of 128 frames). */
        for (int64_t r = 0; r < P; r++) {
            const real *src = coef + cb + r * cs1 + g0 * cs2;
            real *dst = cpk + r * LK_G;
            for (int64_t gb = 0; gb < n_blk; gb++) {
                real *d = dst + gb * P * LK_G;
                const int gn = n_g - gb * LK_G < LK_G ? (int)(n_g - gb * LK_G) : LK_G;
                for (int g = 0; g < gn; g++) d[g] = src[(gb * LK_G + g) * cs2];
                for (int g = gn; g < LK_G; g++) d[g] = 0;
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
