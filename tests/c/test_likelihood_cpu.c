/* Likelihoods on the CPU (mas.h section 6) against independent references:
 * a float64 loop written from the direct formula (sum of (x-mu)^2/var, not
 * the expansion the library uses), the fma chain of mas.h written out per
 * Gaussian for the exact checks (one-Gaussian states, MAX and best), every
 * grouping of a few Gaussians into states on tiny sizes, and each error
 * status. Random layouts with guard bands catch stray writes; inputs are
 * compared byte for byte after the calls. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/det_math.h"
#include "common/gauss_coef.h"
#include "cpu/det_exp.h"
#include "support.h"

#define OUT_FILL 0xb7
#define X_FILL 0x77
#define LOG_2PI 1.83787706640934548356

static const mas_dtype float_dtypes[4] = {MAS_FLOAT32, MAS_FLOAT64, MAS_FLOAT16, MAS_BFLOAT16};
static const int32_t thread_counts[4] = {1, 2, 0, 3};

static mas_dtype accum_of(mas_dtype d) { return d == MAS_FLOAT64 ? MAS_FLOAT64 : MAS_FLOAT32; }

static void make_view(ts_view *v, mas_dtype dtype, int64_t B, int64_t T, int64_t S, ts_rng *rng,
                      int inputs, unsigned char fill) {
    ts_layout layout;
    if (rng) ts_layout_random(rng, &layout, inputs, inputs);
    else ts_layout_plain(&layout, 0);
    if (!ts_view_make(v, dtype, B, T, S, &layout, fill)) {
        fprintf(stderr, "out of memory\n");
        exit(2);
    }
}

static double at(const mas_tensor3 *t, int64_t b, int64_t i, int64_t j) {
    return ts_load(t->data, ts_view_offset(t, b, i, j), (mas_dtype)t->dtype);
}

static void put(const mas_tensor3 *t, int64_t b, int64_t i, int64_t j, double v) {
    ts_store(t->data, ts_view_offset(t, b, i, j), (mas_dtype)t->dtype, v);
}

/* ---------------------------------------------------------------------- */
/* A model: M Gaussians over J dims for MB model items, grouped in states  */
/* ---------------------------------------------------------------------- */

typedef struct model {
    int64_t mb, m, j, states;
    double *mu, *var, *lw; /* [mb][m][j], [mb][m][j], [mb][m] */
    int64_t *off;          /* [states + 1] */
} model;

static void model_make(model *md, ts_rng *rng, int64_t mb, int64_t states, int64_t max_mix,
                       int64_t j) {
    md->mb = mb;
    md->j = j;
    md->states = states;
    md->off = malloc(sizeof(int64_t) * (size_t)(states + 1));
    md->off[0] = 0;
    for (int64_t s = 0; s < states; s++) {
        int64_t n = ts_rng_chance(rng, 0.3) ? 1 : ts_rng_int(rng, 1, max_mix);
        md->off[s + 1] = md->off[s] + n;
    }
    md->m = md->off[states];
    size_t mj = (size_t)(mb * md->m * j);
    md->mu = malloc(sizeof(double) * mj);
    md->var = malloc(sizeof(double) * mj);
    md->lw = malloc(sizeof(double) * (size_t)(mb * md->m));
    for (size_t i = 0; i < mj; i++) {
        md->mu[i] = ts_rng_uniform(rng, -1.5, 1.5);
        md->var[i] = ts_rng_uniform(rng, 0.4, 2.5);
    }
    for (int64_t i = 0; i < mb * md->m; i++) md->lw[i] = ts_rng_uniform(rng, -4.0, 0.0);
}

static void model_free(model *md) {
    free(md->mu);
    free(md->var);
    free(md->lw);
    free(md->off);
}

/* log w + log N(x; mu, var), directly from the definition. */
static double gauss_direct(const model *md, int64_t mb, int64_t k, const double *x) {
    double q = 0.0;
    for (int64_t j = 0; j < md->j; j++) {
        size_t i = (size_t)((mb * md->m + k) * md->j + j);
        double d = x[j] - md->mu[i];
        q += LOG_2PI + log(md->var[i]) + d * d / md->var[i];
    }
    return md->lw[mb * md->m + k] - 0.5 * q;
}

static double state_direct(const model *md, int64_t mb, int64_t s, const double *x, int max) {
    double hi = -INFINITY;
    for (int64_t k = md->off[s]; k < md->off[s + 1]; k++) {
        double v = gauss_direct(md, mb, k, x);
        if (v > hi) hi = v;
    }
    if (max || hi == -INFINITY) return hi;
    double sum = 0.0;
    for (int64_t k = md->off[s]; k < md->off[s + 1]; k++)
        sum += exp(gauss_direct(md, mb, k, x) - hi);
    return hi + log(sum);
}

/* The fma chain of mas.h from coef as the library stored it. */
static double chain(const mas_tensor3 *coef, int64_t cb, int64_t k, const double *x, int64_t J,
                    int f64) {
    if (f64) {
        double acc = at(coef, cb, 0, k);
        for (int64_t j = 0; j < J; j++) acc = fma(x[j], at(coef, cb, 1 + j, k), acc);
        for (int64_t j = 0; j < J; j++) acc = fma(x[j] * x[j], at(coef, cb, 1 + J + j, k), acc);
        return acc;
    }
    float acc = (float)at(coef, cb, 0, k);
    for (int64_t j = 0; j < J; j++) acc = fmaf((float)x[j], (float)at(coef, cb, 1 + j, k), acc);
    for (int64_t j = 0; j < J; j++) {
        float xf = (float)x[j];
        acc = fmaf(xf * xf, (float)at(coef, cb, 1 + J + j, k), acc);
    }
    return acc;
}

/* Parameter views of a model, of dtype pd, laid out by rng (NULL: plain). */
typedef struct params_views {
    ts_view mu, sp, lw;
    mas_gauss_params p;
} params_views;

static void params_make(params_views *pv, const model *md, mas_dtype pd, ts_rng *rng,
                        int log_std) {
    make_view(&pv->mu, pd, md->mb, md->m, md->j, rng, 0, X_FILL);
    make_view(&pv->sp, pd, md->mb, md->m, md->j, rng, 0, X_FILL);
    make_view(&pv->lw, pd, md->mb, 1, md->m, rng, 0, X_FILL);
    for (int64_t b = 0; b < md->mb; b++)
        for (int64_t k = 0; k < md->m; k++) {
            for (int64_t j = 0; j < md->j; j++) {
                size_t i = (size_t)((b * md->m + k) * md->j + j);
                put(&pv->mu.tensor, b, k, j, md->mu[i]);
                put(&pv->sp.tensor, b, k, j, log_std ? 0.5 * log(md->var[i]) : md->var[i]);
            }
            put(&pv->lw.tensor, b, 0, k, md->lw[b * md->m + k]);
        }
    memset(&pv->p, 0, sizeof pv->p);
    pv->p.means = pv->mu.tensor;
    pv->p.spread = pv->sp.tensor;
    pv->p.spread_kind = log_std ? MAS_SPREAD_LOG_STD : MAS_SPREAD_VARIANCE;
    pv->p.log_weights = pv->lw.tensor;
}

/* The model as the views hold it (rounded to their dtype), back in md. */
static void params_readback(const params_views *pv, model *md) {
    for (int64_t b = 0; b < md->mb; b++)
        for (int64_t k = 0; k < md->m; k++) {
            for (int64_t j = 0; j < md->j; j++) {
                size_t i = (size_t)((b * md->m + k) * md->j + j);
                md->mu[i] = at(&pv->mu.tensor, b, k, j);
                double sp = at(&pv->sp.tensor, b, k, j);
                md->var[i] = pv->p.spread_kind == MAS_SPREAD_LOG_STD ? exp(2.0 * sp) : sp;
            }
            md->lw[b * md->m + k] = at(&pv->lw.tensor, b, 0, k);
        }
}

static void params_free(params_views *pv) {
    ts_view_free(&pv->mu);
    ts_view_free(&pv->sp);
    ts_view_free(&pv->lw);
}

/* ---------------------------------------------------------------------- */
/* One call, checked in full                                               */
/* ---------------------------------------------------------------------- */

typedef struct call_plan {
    mas_dtype xd, pd;
    int64_t batch, frames, shared, per_item, use_offsets, lengths, want_max, want_best;
    int32_t threads;
    int log_std, layouts;
} call_plan;

static void check_call(ts_rng *rng, const call_plan *cp, model *md) {
    const int64_t B = cp->batch, N = cp->frames, J = md->j, M = md->m, S = md->states;
    const mas_dtype acc = accum_of(cp->xd);
    const int f64 = acc == MAS_FLOAT64;
    ts_rng *lay = cp->layouts ? rng : NULL;
    params_views pv;
    params_make(&pv, md, cp->pd, lay, cp->log_std);
    params_readback(&pv, md);
    ts_view coef;
    make_view(&coef, acc, md->mb, 2 * J + 1, M, lay, 0, OUT_FILL);
    mas_error err;
    mas_status st = mas_gauss_coef_cpu(&pv.p, &coef.tensor, cp->threads, &err);
    TS_CHECK(st == MAS_OK, "gauss_coef: status %d item %lld", (int)st, (long long)err.item);
    TS_CHECK(ts_view_stray_bytes(&coef, OUT_FILL) == 0, "gauss_coef wrote outside coef");
    /* The coefficients against their definition (float64, rounded once). */
    double ctol = f64 ? 1e-12 : 2e-7;
    int64_t bad_coef = 0;
    for (int64_t b = 0; b < md->mb; b++)
        for (int64_t k = 0; k < M; k++) {
            double q = 0.0;
            for (int64_t j = 0; j < J; j++) {
                size_t i = (size_t)((b * M + k) * J + j);
                double mu = md->mu[i], v = md->var[i];
                q += LOG_2PI + log(v) + mu * mu / v;
                double a = at(&coef.tensor, b, 1 + j, k), bq = at(&coef.tensor, b, 1 + J + j, k);
                bad_coef += fabs(a - mu / v) > ctol * fabs(mu / v) + 1e-300;
                bad_coef += fabs(bq + 0.5 / v) > ctol * (0.5 / v);
            }
            double K = md->lw[b * M + k] - 0.5 * q;
            bad_coef += fabs(at(&coef.tensor, b, 0, k) - K) > ctol * (1.0 + fabs(K)) * 4;
        }
    TS_CHECK(bad_coef == 0, "%lld coefficients differ from the formula", (long long)bad_coef);

    ts_view x, out, best;
    make_view(&x, cp->xd, B, N, J, lay, 1, X_FILL);
    int x_shared = x.tensor.stride[0] == 0;
    for (int64_t b = 0; b < (x_shared ? 1 : B); b++)
        for (int64_t n = 0; n < N; n++)
            for (int64_t j = 0; j < J; j++)
                put(&x.tensor, b, n, j, ts_rng_uniform(rng, -2.5, 2.5));
    make_view(&out, acc, B, N, S, lay, 0, OUT_FILL);
    if (cp->want_best) make_view(&best, MAS_INT32, B, N, S, lay, 0, OUT_FILL);
    int64_t *n_len = malloc(sizeof(int64_t) * (size_t)B), *s_len = malloc(sizeof(int64_t) * (size_t)B);
    for (int64_t b = 0; b < B; b++) {
        n_len[b] = ts_rng_chance(rng, 0.5) ? N : ts_rng_int(rng, 0, N);
        s_len[b] = ts_rng_chance(rng, 0.5) ? S : ts_rng_int(rng, 0, S);
    }
    mas_loglik_args a;
    memset(&a, 0, sizeof a);
    a.x = x.tensor;
    a.coef = coef.tensor;
    if (cp->shared && md->mb == 1 && B > 1 && ts_rng_chance(rng, 0.5)) {
        a.coef.dim[0] = B; /* the same model through a zero batch stride */
        a.coef.stride[0] = 0;
    }
    a.offsets = cp->use_offsets ? md->off : NULL;
    a.n_states = S;
    a.n_len = cp->lengths ? n_len : NULL;
    a.s_len = cp->lengths ? s_len : NULL;
    a.out = out.tensor;
    if (cp->want_best) a.best = best.tensor;
    a.flags = cp->want_max ? MAS_LOGLIK_MAX : 0u;
    size_t wsize = mas_loglik_cpu_workspace_size(&a, cp->threads);
    ts_guarded ws;
    if (!ts_guarded_make(&ws, wsize + 7, 64, 0x69)) exit(2);
    size_t xbytes = x.alloc_bytes;
    unsigned char *x_before = malloc(xbytes);
    memcpy(x_before, x.alloc, xbytes);
    void *wdata = (char *)ws.data + ts_rng_int(rng, 0, 7);
    st = mas_loglik_cpu(&a, wdata, wsize, cp->threads, &err);
    TS_CHECK(st == MAS_OK, "loglik: status %d (%s)", (int)st, mas_status_string(st));
    TS_CHECK(memcmp(x_before, x.alloc, xbytes) == 0, "x was modified");
    TS_CHECK(ts_view_stray_bytes(&out, OUT_FILL) == 0, "write outside out");
    if (cp->want_best) TS_CHECK(ts_view_stray_bytes(&best, OUT_FILL) == 0, "write outside best");
    TS_CHECK(ts_guarded_stray_bytes(&ws, 0x69) == 0, "write outside the workspace");

    double *xv = malloc(sizeof(double) * (size_t)J);
    int64_t bad_out = 0, bad_exact = 0, bad_best = 0, bad_pad = 0;
    double worst = 0.0;
    for (int64_t b = 0; b < B; b++) {
        int64_t nl = a.n_len ? n_len[b] : N, sl = a.s_len ? s_len[b] : S;
        int64_t mb = md->mb == 1 ? 0 : b;
        for (int64_t n = 0; n < N; n++) {
            for (int64_t j = 0; j < J; j++) xv[j] = at(&x.tensor, b, n, j);
            for (int64_t s = 0; s < S; s++) {
                double got = at(&out.tensor, b, n, s);
                int32_t gb = cp->want_best ? (int32_t)at(&best.tensor, b, n, s) : 0;
                if (n >= nl || s >= sl) {
                    bad_pad += got != 0.0 || (cp->want_best && gb != -1);
                    continue;
                }
                double want = state_direct(md, mb, s, xv, (int)cp->want_max);
                double err_rel = fabs(got - want) / (1.0 + fabs(want));
                if (err_rel > worst) worst = err_rel;
                bad_out += !(err_rel <= (f64 ? 1e-10 : 1e-4));
                int64_t k0 = md->off[s], k1 = md->off[s + 1];
                /* The exact checks: the chain's best Gaussian (lowest on ties). */
                double hi = chain(&coef.tensor, mb, k0, xv, J, f64);
                int64_t arg = k0;
                for (int64_t k = k0 + 1; k < k1; k++) {
                    double c = chain(&coef.tensor, mb, k, xv, J, f64);
                    if (c > hi) {
                        hi = c;
                        arg = k;
                    }
                }
                if (k1 - k0 == 1 || cp->want_max) bad_exact += got != hi;
                if (cp->want_best) bad_best += gb != arg;
            }
        }
    }
    TS_CHECK(bad_out == 0, "%lld outputs off the direct float64 reference (worst rel %.3g)",
             (long long)bad_out, worst);
    TS_CHECK(bad_exact == 0, "%lld one-Gaussian / max outputs differ from the fma chain",
             (long long)bad_exact);
    TS_CHECK(bad_best == 0, "%lld best indices differ", (long long)bad_best);
    TS_CHECK(bad_pad == 0, "%lld cells outside the lengths not 0 / -1", (long long)bad_pad);
    free(xv);
    free(x_before);
    free(n_len);
    free(s_len);
    ts_guarded_free(&ws);
    ts_view_free(&x);
    ts_view_free(&out);
    if (cp->want_best) ts_view_free(&best);
    ts_view_free(&coef);
    params_free(&pv);
}

static void test_random(ts_rng *rng, int cases) {
    for (int c = 0; c < cases; c++) {
        call_plan cp;
        memset(&cp, 0, sizeof cp);
        cp.xd = float_dtypes[ts_rng_int(rng, 0, 3)];
        cp.pd = float_dtypes[ts_rng_int(rng, 0, 3)];
        if (cp.pd == MAS_FLOAT16 || cp.pd == MAS_BFLOAT16) cp.pd = MAS_FLOAT32;
        cp.batch = ts_rng_int(rng, 1, 3);
        cp.frames = ts_rng_int(rng, 1, 80);
        cp.shared = ts_rng_chance(rng, 0.6);
        cp.use_offsets = ts_rng_chance(rng, 0.8);
        cp.lengths = ts_rng_chance(rng, 0.5);
        cp.want_max = ts_rng_chance(rng, 0.3);
        cp.want_best = ts_rng_chance(rng, 0.5);
        cp.threads = thread_counts[ts_rng_int(rng, 0, 3)];
        cp.log_std = ts_rng_chance(rng, 0.3);
        cp.layouts = ts_rng_chance(rng, 0.7);
        int64_t J = ts_rng_int(rng, 1, 12);
        int64_t states = ts_rng_int(rng, 1, 40);
        int64_t max_mix = ts_rng_chance(rng, 0.2) ? 300 : ts_rng_int(rng, 1, 20);
        if (!cp.use_offsets) max_mix = 1;
        model md;
        model_make(&md, rng, cp.shared ? 1 : cp.batch, states, max_mix, J);
        ts_case_begin("random %d: x %s params %s B=%lld N=%lld J=%lld states=%lld M=%lld "
                      "%s offsets=%lld lengths=%lld max=%lld best=%lld threads=%d logstd=%d "
                      "layouts=%d",
                      c, ts_dtype_name(cp.xd), ts_dtype_name(cp.pd), (long long)cp.batch,
                      (long long)cp.frames, (long long)J, (long long)states, (long long)md.m,
                      cp.shared ? "shared" : "per-item", (long long)cp.use_offsets,
                      (long long)cp.lengths, (long long)cp.want_max, (long long)cp.want_best,
                      cp.threads, cp.log_std, cp.layouts);
        check_call(rng, &cp, &md);
        ts_case_end();
        model_free(&md);
    }
}

/* Every grouping of M <= 5 Gaussians into consecutive states (2^(M-1)). */
static void test_all_groupings(ts_rng *rng) {
    for (int64_t M = 1; M <= 5; M++)
        for (int64_t mask = 0; mask < ((int64_t)1 << (M - 1)); mask++) {
            model md;
            model_make(&md, rng, 1, 1, 1, 2);
            /* regroup: a cut after Gaussian k where bit k is set */
            int64_t states = 1;
            for (int64_t k = 0; k + 1 < M; k++) states += (mask >> k) & 1;
            model_free(&md);
            model_make(&md, rng, 1, M, 1, 2); /* M single Gaussians, then regrouped */
            md.states = states;
            int64_t s = 0;
            md.off[0] = 0;
            for (int64_t k = 0; k + 1 < M; k++)
                if ((mask >> k) & 1) md.off[++s] = k + 1;
            md.off[states] = M;
            for (int max = 0; max < 2; max++) {
                call_plan cp;
                memset(&cp, 0, sizeof cp);
                cp.xd = cp.pd = ts_rng_chance(rng, 0.5) ? MAS_FLOAT32 : MAS_FLOAT64;
                cp.batch = 2;
                cp.frames = 3;
                cp.shared = 1;
                cp.use_offsets = 1;
                cp.want_max = max;
                cp.want_best = 1;
                cp.threads = 1;
                ts_case_begin("grouping M=%lld mask=%lld max=%d %s", (long long)M,
                              (long long)mask, max, ts_dtype_name(cp.xd));
                check_call(rng, &cp, &md);
                ts_case_end();
            }
            model_free(&md);
        }
}

/* The precision rule: standardised data, J=36, 16-Gaussian states,
 * the default float32 path within 1e-4 relative of the direct float64 form. */
static void test_precision(ts_rng *rng) {
    model md;
    model_make(&md, rng, 1, 40, 16, 36);
    for (int64_t s = 0; s <= 40; s++) md.off[s] = 16 * s;
    md.m = 640;
    free(md.mu);
    free(md.var);
    free(md.lw);
    md.mu = malloc(sizeof(double) * 640 * 36);
    md.var = malloc(sizeof(double) * 640 * 36);
    md.lw = malloc(sizeof(double) * 640);
    for (int64_t i = 0; i < 640 * 36; i++) {
        md.mu[i] = ts_rng_uniform(rng, -1.0, 1.0);
        md.var[i] = ts_rng_uniform(rng, 0.5, 1.5);
    }
    for (int64_t i = 0; i < 640; i++) md.lw[i] = log(1.0 / 16.0);
    call_plan cp;
    memset(&cp, 0, sizeof cp);
    cp.xd = cp.pd = MAS_FLOAT32;
    cp.batch = 1;
    cp.frames = 70;
    cp.shared = cp.use_offsets = 1;
    cp.threads = 0;
    ts_case_begin("precision: J=36, 40 states x 16, float32");
    check_call(rng, &cp, &md);
    ts_case_end();
    model_free(&md);
}

/* Glow-TTS tensors: one Gaussian per state, per item, log-std, the views
 * dim {B, T, D} stride {D*T, 1, T} and z dim {B, S, D} stride {D*S, 1, S};
 * the output equals the fma chain exactly. */
static void test_tts_views(ts_rng *rng) {
    const int64_t B = 2, D = 7, T = 9, S = 21;
    for (int dt = 0; dt < 2; dt++) {
        mas_dtype d = dt ? MAS_FLOAT64 : MAS_FLOAT32;
        size_t es = mas_dtype_size(d);
        char *mean = malloc(es * B * D * T), *logs = malloc(es * B * D * T),
             *z = malloc(es * B * D * S);
        for (int64_t i = 0; i < B * D * T; i++) {
            ts_store(mean, i, d, ts_rng_uniform(rng, -1, 1));
            ts_store(logs, i, d, ts_rng_uniform(rng, -0.5, 0.5));
        }
        for (int64_t i = 0; i < B * D * S; i++) ts_store(z, i, d, ts_rng_uniform(rng, -2, 2));
        mas_gauss_params p;
        memset(&p, 0, sizeof p);
        p.means = (mas_tensor3){mean, d, 0, {B, T, D}, {D * T, 1, T}};
        p.spread = (mas_tensor3){logs, d, 0, {B, T, D}, {D * T, 1, T}};
        p.spread_kind = MAS_SPREAD_LOG_STD;
        double *coef = malloc(sizeof(double) * B * (2 * D + 1) * T);
        double *out = malloc(sizeof(double) * B * T * S);
        mas_tensor3 ct = {coef, d, 0, {B, 2 * D + 1, T}, {(2 * D + 1) * T, T, 1}};
        ts_case_begin("tts views %s", ts_dtype_name(d));
        mas_error err;
        TS_CHECK(mas_gauss_coef_cpu(&p, &ct, 1, &err) == MAS_OK, "coef");
        mas_loglik_args a;
        memset(&a, 0, sizeof a);
        a.x = (mas_tensor3){z, d, 0, {B, S, D}, {D * S, 1, S}};
        a.coef = ct;
        a.n_states = T;
        /* [B, T, S] output: frames along the last axis ("bts") */
        a.out = (mas_tensor3){out, d, 0, {B, S, T}, {T * S, 1, S}};
        size_t wsize = mas_loglik_cpu_workspace_size(&a, 2);
        void *ws = malloc(wsize);
        TS_CHECK(mas_loglik_cpu(&a, ws, wsize, 2, &err) == MAS_OK, "loglik");
        int64_t bad = 0, bad4 = 0;
        double xv[7];
        for (int64_t b = 0; b < B; b++)
            for (int64_t s = 0; s < S; s++) {
                for (int64_t j = 0; j < D; j++) xv[j] = ts_load(z, b * D * S + j * S + s, d);
                for (int64_t t = 0; t < T; t++) {
                    double got = ts_load(out, b * T * S + t * S + s, d);
                    bad += got != chain(&ct, b, t, xv, D, dt);
                    /* Glow-TTS's four terms, in float64 */
                    double l1 = 0, l2 = 0, l3 = 0, l4 = 0;
                    for (int64_t j = 0; j < D; j++) {
                        double m = ts_load(mean, b * D * T + j * T + t, d);
                        double ls = ts_load(logs, b * D * T + j * T + t, d);
                        double sp = exp(-2 * ls);
                        l1 += -0.5 * LOG_2PI - ls;
                        l2 += -0.5 * sp * xv[j] * xv[j];
                        l3 += xv[j] * m * sp;
                        l4 += -0.5 * m * m * sp;
                    }
                    double want = l1 + l2 + l3 + l4;
                    bad4 += fabs(got - want) > (dt ? 1e-10 : 1e-4) * (1 + fabs(want));
                }
            }
        TS_CHECK(bad == 0, "%lld cells differ from the fma chain", (long long)bad);
        TS_CHECK(bad4 == 0, "%lld cells differ from Glow-TTS's four terms", (long long)bad4);
        ts_case_end();
        free(ws);
        free(mean);
        free(logs);
        free(z);
        free(coef);
        free(out);
    }
}

/* ---------------------------------------------------------------------- */
/* Errors                                                                  */
/* ---------------------------------------------------------------------- */

static void test_errors(void) {
    enum { B = 2, N = 5, J = 3, M = 6, S = 3, P = 2 * J + 1 };
    float x[B * N * J], coef[P * M], out[B * N * S];
    double coef64[P * M];
    int32_t best[B * N * S];
    float mu[M * J], var[M * J], lw[M];
    for (int i = 0; i < B * N * J; i++) x[i] = 0.1f * (float)i;
    for (int i = 0; i < M * J; i++) {
        mu[i] = 0.5f;
        var[i] = 1.0f;
    }
    for (int i = 0; i < M; i++) lw[i] = -1.0f;
    int64_t off[S + 1] = {0, 1, 3, 6};
    mas_gauss_params p;
    memset(&p, 0, sizeof p);
    p.means = (mas_tensor3){mu, MAS_FLOAT32, 0, {1, M, J}, {M * J, J, 1}};
    p.spread = (mas_tensor3){var, MAS_FLOAT32, 0, {1, M, J}, {M * J, J, 1}};
    p.log_weights = (mas_tensor3){lw, MAS_FLOAT32, 0, {1, 1, M}, {M, M, 1}};
    mas_tensor3 ct = {coef, MAS_FLOAT32, 0, {1, P, M}, {P * M, M, 1}};
    mas_error err;

    ts_case_begin("gauss_coef errors");
    TS_CHECK(mas_gauss_coef_cpu(&p, &ct, 1, &err) == MAS_OK, "good model");
    TS_CHECK(mas_gauss_coef_cpu(NULL, &ct, 1, &err) == MAS_ERR_NULL_POINTER, "NULL params");
    TS_CHECK(mas_gauss_coef_cpu(&p, NULL, 1, &err) == MAS_ERR_NULL_POINTER, "NULL coef");
    mas_tensor3 bad = ct;
    bad.dtype = MAS_FLOAT16;
    TS_CHECK(mas_gauss_coef_cpu(&p, &bad, 1, &err) == MAS_ERR_BAD_DTYPE, "coef float16");
    bad = ct;
    bad.dim[1] = P + 1;
    TS_CHECK(mas_gauss_coef_cpu(&p, &bad, 1, &err) == MAS_ERR_BAD_SHAPE, "coef P");
    bad = ct;
    bad.dim[2] = M - 1;
    TS_CHECK(mas_gauss_coef_cpu(&p, &bad, 1, &err) == MAS_ERR_BAD_SHAPE, "coef M");
    mas_gauss_params q = p;
    q.spread.dim[2] = J - 1;
    TS_CHECK(mas_gauss_coef_cpu(&q, &ct, 1, &err) == MAS_ERR_BAD_SHAPE, "spread J");
    q = p;
    q.log_weights.dim[2] = M + 1;
    TS_CHECK(mas_gauss_coef_cpu(&q, &ct, 1, &err) == MAS_ERR_BAD_SHAPE, "log_weights M");
    q = p;
    q.spread_kind = 7;
    TS_CHECK(mas_gauss_coef_cpu(&q, &ct, 1, &err) == MAS_ERR_BAD_ARGUMENT, "spread kind");
    struct { float *arr; int idx; float v; int64_t item; const char *what; } models[] = {
        {mu, 4 * J + 1, NAN, 4, "NaN mean"},
        {mu, 2 * J, INFINITY, 2, "inf mean"},
        {var, 5 * J + 2, 0.0f, 5, "zero variance"},
        {var, 3 * J, -1.0f, 3, "negative variance"},
        {var, 1 * J, INFINITY, 1, "inf variance"},
        {lw, 2, NAN, 2, "NaN log weight"},
        {lw, 4, INFINITY, 4, "+inf log weight"},
    };
    for (size_t c = 0; c < sizeof models / sizeof models[0]; c++) {
        float keep = models[c].arr[models[c].idx];
        models[c].arr[models[c].idx] = models[c].v;
        err.item = -7;
        mas_status st = mas_gauss_coef_cpu(&p, &ct, 1, &err);
        TS_CHECK(st == MAS_ERR_BAD_MODEL && err.item == models[c].item,
                 "%s: status %d item %lld", models[c].what, (int)st, (long long)err.item);
        models[c].arr[models[c].idx] = keep;
    }
    lw[3] = -INFINITY;
    TS_CHECK(mas_gauss_coef_cpu(&p, &ct, 1, &err) == MAS_OK, "-inf log weight is allowed");
    lw[3] = -1.0f;
    q = p;
    q.spread_kind = MAS_SPREAD_LOG_STD;
    var[7] = -400.0f; /* exp(-800) underflows: a zero variance */
    TS_CHECK(mas_gauss_coef_cpu(&q, &ct, 1, &err) == MAS_ERR_BAD_MODEL && err.item == 2,
             "log-std whose variance underflows");
    var[7] = 1.0f;
    TS_CHECK(mas_gauss_coef_cpu(&p, &ct, 1, &err) == MAS_OK, "good model again");
    ts_case_end();

    ts_case_begin("loglik errors");
    mas_loglik_args a;
    memset(&a, 0, sizeof a);
    a.x = (mas_tensor3){x, MAS_FLOAT32, 0, {B, N, J}, {N * J, J, 1}};
    a.coef = ct;
    a.offsets = off;
    a.n_states = S;
    a.out = (mas_tensor3){out, MAS_FLOAT32, 0, {B, N, S}, {N * S, S, 1}};
    a.best = (mas_tensor3){best, MAS_INT32, 0, {B, N, S}, {N * S, S, 1}};
    static char ws[1 << 20];
    size_t wsize = mas_loglik_cpu_workspace_size(&a, 1);
    TS_CHECK(wsize > 0 && wsize <= sizeof ws, "workspace size %zu", wsize);
    TS_CHECK(mas_loglik_cpu(&a, ws, wsize, 1, &err) == MAS_OK, "good call");
    TS_CHECK(mas_loglik_cpu(NULL, ws, wsize, 1, &err) == MAS_ERR_NULL_POINTER, "NULL args");
    TS_CHECK(mas_loglik_cpu(&a, ws, wsize - 1, 1, &err) == MAS_ERR_WORKSPACE_TOO_SMALL,
             "workspace one byte short");
    TS_CHECK(mas_loglik_cpu(&a, NULL, wsize, 1, &err) == MAS_ERR_WORKSPACE_TOO_SMALL,
             "NULL workspace");
    mas_loglik_args c = a;
    c.x.data = NULL;
    TS_CHECK(mas_loglik_cpu(&c, ws, wsize, 1, &err) == MAS_ERR_NULL_POINTER, "NULL x");
    c = a;
    c.x.dtype = MAS_INT32;
    TS_CHECK(mas_loglik_cpu(&c, ws, wsize, 1, &err) == MAS_ERR_BAD_DTYPE, "int x");
    c = a;
    c.coef = (mas_tensor3){coef64, MAS_FLOAT64, 0, {1, P, M}, {P * M, M, 1}};
    TS_CHECK(mas_loglik_cpu(&c, ws, wsize, 1, &err) == MAS_ERR_BAD_DTYPE, "float64 coef for float32 x");
    c = a;
    c.out.dtype = MAS_FLOAT64;
    TS_CHECK(mas_loglik_cpu(&c, ws, wsize, 1, &err) == MAS_ERR_BAD_DTYPE, "out dtype");
    c = a;
    c.best.dtype = MAS_FLOAT32;
    TS_CHECK(mas_loglik_cpu(&c, ws, wsize, 1, &err) == MAS_ERR_BAD_DTYPE, "best dtype");
    c = a;
    c.x.dim[2] = J - 1;
    TS_CHECK(mas_loglik_cpu(&c, ws, wsize, 1, &err) == MAS_ERR_BAD_SHAPE, "J vs P");
    c = a;
    c.coef.dim[0] = 3;
    TS_CHECK(mas_loglik_cpu(&c, ws, wsize, 1, &err) == MAS_ERR_BAD_SHAPE, "coef items");
    c = a;
    c.out.dim[1] = N - 1;
    TS_CHECK(mas_loglik_cpu(&c, ws, wsize, 1, &err) == MAS_ERR_BAD_SHAPE, "out N");
    c = a;
    c.out.dim[2] = S + 1;
    TS_CHECK(mas_loglik_cpu(&c, ws, wsize, 1, &err) == MAS_ERR_BAD_SHAPE, "out states");
    c = a;
    c.best.dim[0] = 1;
    TS_CHECK(mas_loglik_cpu(&c, ws, wsize, 1, &err) == MAS_ERR_BAD_SHAPE, "best shape");
    c = a;
    c.offsets = NULL;
    TS_CHECK(mas_loglik_cpu(&c, ws, wsize, 1, &err) == MAS_ERR_BAD_SHAPE,
             "no offsets but n_states != M");
    c = a;
    c.n_states = M + 1;
    c.out.dim[2] = M + 1;
    TS_CHECK(mas_loglik_cpu(&c, ws, wsize, 1, &err) == MAS_ERR_BAD_SHAPE, "n_states > M");
    c = a;
    c.flags = 4u;
    TS_CHECK(mas_loglik_cpu(&c, ws, wsize, 1, &err) == MAS_ERR_BAD_ARGUMENT, "unknown flag");
    c = a;
    c.precision = 9;
    TS_CHECK(mas_loglik_cpu(&c, ws, wsize, 1, &err) == MAS_ERR_BAD_ARGUMENT, "precision");
    int64_t bad_offs[4][S + 1] = {{1, 2, 3, 6}, {0, 2, 2, 6}, {0, 3, 1, 6}, {0, 1, 3, 5}};
    for (int k = 0; k < 4; k++) {
        c = a;
        c.offsets = bad_offs[k];
        TS_CHECK(mas_loglik_cpu(&c, ws, wsize, 1, &err) == MAS_ERR_BAD_ARGUMENT, "offsets %d", k);
    }
    int64_t nl[B] = {5, 6}, sl[B] = {-1, 2}, good[B] = {0, 3};
    c = a;
    c.n_len = nl;
    TS_CHECK(mas_loglik_cpu(&c, ws, wsize, 1, &err) == MAS_ERR_BAD_LENGTH && err.item == 1,
             "n_len beyond N");
    c = a;
    c.s_len = sl;
    TS_CHECK(mas_loglik_cpu(&c, ws, wsize, 1, &err) == MAS_ERR_BAD_LENGTH && err.item == 0,
             "negative s_len");
    c = a;
    c.n_len = good;
    c.s_len = good;
    TS_CHECK(mas_loglik_cpu(&c, ws, wsize, 1, &err) == MAS_OK, "zero lengths are fine");
    ts_case_end();
}

/* The vector mas_det_exp (AVX-512: 8 lanes, AVX2: 4) against the scalar
 * mas_det_exp, bit for bit: random arguments over the whole range, the edges
 * of the vector lanes' range and of the scalar's special cases, NaN,
 * infinities, signed zeros; lengths not a multiple of the lanes (the scalar
 * tail). */
static void check_det_exp_vector(ts_rng *rng, const char *name,
                                 void (*fn)(const double *, double *, int64_t)) {
    enum { N = 4099 };
    static double x[N], y[N];
    const double edges[] = {-800, -745.2, -745.19, -708.4, -700, -690.0000001, -690, -689.99,
                            -1e-300, -0.0, 0.0, 1e-300, 1, 708.9, 709, 709.0000001,
                            709.782712893384, 709.79, 1e308, NAN, INFINITY, -INFINITY};
    const int n_edges = (int)(sizeof edges / sizeof edges[0]);
    int64_t bad = 0;
    for (int round = 0; round < 40; round++) {
        for (int i = 0; i < N; i++) {
            if (i < n_edges) x[i] = edges[i];
            else if (i % 3 == 0) x[i] = ts_rng_uniform(rng, -760, 720);
            else if (i % 3 == 1) x[i] = ts_rng_uniform(rng, -2, 2);
            else x[i] = ldexp(ts_rng_uniform(rng, -1, 1), (int)ts_rng_uniform(rng, -60, 10));
        }
        const int64_t n = N - round % 8; /* tails of 0..7 */
        fn(x, y, n);
        for (int64_t i = 0; i < n; i++) {
            const double want = mas_det_exp(x[i]);
            if (ts_f64_bits(want) != ts_f64_bits(y[i]) && !(want != want && y[i] != y[i])) {
                if (bad < 5)
                    printf("det_exp %s(%.17g): vector %.17g, scalar %.17g\n", name, x[i], y[i], want);
                bad++;
            }
        }
    }
    TS_CHECK(bad == 0, "%lld %s exps differ from the scalar's bits", (long long)bad, name);
}

static void test_det_exp_vector(ts_rng *rng) {
    ts_case_begin("det_exp: vector lanes = scalar bits");
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq"))
        check_det_exp_vector(rng, "AVX-512", mas_det_exp_avx512);
    else printf("det_exp AVX-512 check skipped: this CPU has no AVX-512F/DQ\n");
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        check_det_exp_vector(rng, "AVX2", mas_det_exp_avx2);
    else printf("det_exp AVX2 check skipped: this CPU has no AVX2/FMA\n");
    ts_case_end();
}

/* mas_gauss_coef_cpu in Glow-TTS's layout (float32, log-std spreads, the
 * Gaussians contiguous: the eight-lane path on AVX-512 CPUs) against the
 * scalar definition of common/gauss_coef.h, bit for bit, with the first
 * bad Gaussian it reports. Models with values that break one lane: NaN and
 * infinite means and log-stds, log-stds whose variance over- or
 * underflows float32 or float64, log weights of -inf (allowed), NaN and
 * +inf; M not a multiple of 8; with and without log weights; 1 and 2
 * threads. */
static void test_coef_lanes(ts_rng *rng) {
    ts_case_begin("gauss_coef: Glow-TTS layout = scalar definition, bit for bit");
    const float breakers[] = {NAN, INFINITY, -INFINITY, 60.0f, -60.0f, 400.0f, -400.0f, 1e-30f, -0.0f};
    const int n_breakers = (int)(sizeof breakers / sizeof breakers[0]);
    int64_t bad_bits = 0, bad_status = 0;
    for (int round = 0; round < 80; round++) {
        const int64_t B = 1 + round % 3, J = 1 + (int64_t)ts_rng_uniform(rng, 0, 140);
        const int64_t M = 1 + (int64_t)ts_rng_uniform(rng, 0, 45), P = 2 * J + 1;
        const int weights = round % 2, poison = round % 4 >= 2;
        float *mu = malloc(sizeof(float) * B * J * M), *ls = malloc(sizeof(float) * B * J * M);
        float *lw = malloc(sizeof(float) * B * M), *coef = malloc(sizeof(float) * B * P * M);
        for (int64_t i = 0; i < B * J * M; i++) {
            mu[i] = (float)ts_rng_uniform(rng, -4, 4);
            ls[i] = (float)ts_rng_uniform(rng, -3, 3);
        }
        for (int64_t i = 0; i < B * M; i++) lw[i] = (float)ts_rng_uniform(rng, -6, 0);
        if (poison) {
            for (int q = 0; q < 3; q++) {
                const int64_t i = (int64_t)ts_rng_uniform(rng, 0, (double)(B * J * M));
                const float v = breakers[(int)ts_rng_uniform(rng, 0, n_breakers)];
                if (q == 0) mu[i] = v;
                else ls[i] = v;
            }
            const float lw_breakers[] = {-INFINITY, NAN, INFINITY};
            lw[(int64_t)ts_rng_uniform(rng, 0, (double)(B * M))] = lw_breakers[round % 3];
        }
        memset(coef, 0xb7, sizeof(float) * B * P * M);
        /* Glow-TTS's [B, D, T] seen as [B, M, J] */
        mas_gauss_params p;
        memset(&p, 0, sizeof p);
        p.means = (mas_tensor3){mu, MAS_FLOAT32, 0, {B, M, J}, {J * M, 1, M}};
        p.spread = (mas_tensor3){ls, MAS_FLOAT32, 0, {B, M, J}, {J * M, 1, M}};
        p.spread_kind = MAS_SPREAD_LOG_STD;
        if (weights) p.log_weights = (mas_tensor3){lw, MAS_FLOAT32, 0, {B, 1, M}, {M, 0, 1}};
        mas_tensor3 ct = {coef, MAS_FLOAT32, 0, {B, P, M}, {P * M, M, 1}};
        mas_error err;
        const mas_status st = mas_gauss_coef_cpu(&p, &ct, 1 + round % 2, &err);
        int64_t first_bad = -1;
        for (int64_t b = 0; b < B; b++)
            for (int64_t k = 0; k < M; k++) {
                const double w = weights ? (double)lw[b * M + k] : 0.0;
                int bad = !mas_gauss_log_weight_ok(w);
                double sum = 0;
                for (int64_t j = 0; j < J; j++) {
                    double a = 0, q = 0, kt = 0;
                    const int64_t in = b * J * M + j * M + k;
                    if (!mas_gauss_coef_dim(mu[in], ls[in], MAS_SPREAD_LOG_STD, &a, &q, &kt)) bad = 1;
                    sum = sum + kt;
                    const float ar = (float)a, qr = (float)q;
                    if (!mas_gauss_coef_stored_ok(ar, qr)) bad = 1;
                    bad_bits += ts_f32_bits(ar) != ts_f32_bits(coef[b * P * M + (1 + j) * M + k]);
                    bad_bits += ts_f32_bits(qr) != ts_f32_bits(coef[b * P * M + (1 + J + j) * M + k]);
                }
                const float kr = (float)mas_gauss_coef_k(w, sum);
                if (!mas_gauss_coef_k_ok(kr, w)) bad = 1;
                bad_bits += ts_f32_bits(kr) != ts_f32_bits(coef[b * P * M + k]);
                if (bad && first_bad < 0) first_bad = b * M + k;
            }
        if (first_bad < 0) bad_status += st != MAS_OK;
        else bad_status += st != MAS_ERR_BAD_MODEL || err.item != first_bad;
        free(mu);
        free(ls);
        free(lw);
        free(coef);
    }
    TS_CHECK(bad_bits == 0, "%lld coefficients differ from the scalar definition's bits",
             (long long)bad_bits);
    TS_CHECK(bad_status == 0, "%lld calls reported another status or first bad Gaussian",
             (long long)bad_status);
    ts_case_end();
}

/* mas_gauss_coef_dim_log_std_f32 (the range cases told apart on the
 * float inputs) against mas_gauss_coef_dim, bit for bit, verdicts and all
 * three outputs: random means and log-stds, the edges of its ordinary
 * range (|log_std| < 340) and of the exp's special cases beyond it (the
 * subnormal scaling from ~346.6, underflow and overflow from ~354.9 and
 * ~372.5), means whose a or K term overflows, NaN, infinities, signed
 * zeros, subnormals; and mas_gauss_coef_stored_ok_f32 against
 * mas_gauss_coef_stored_ok on the floats widened. */
static void test_coef_dim_f32(ts_rng *rng) {
    ts_case_begin("gauss_coef: float32 log-std dimension = general definition, bit for bit");
    const float ls_edges[] = {0.0f, -0.0f, 1e-40f, -1e-40f, 339.99997f, -339.99997f, 340.0f,
                              -340.0f, 340.00003f, -340.00003f, 346.0f, 347.0f, 350.0f, -350.0f,
                              354.8f, 354.9f, 355.0f, -355.0f, 372.5f, -372.5f, 372.6f,
                              -372.6f, 400.0f, -400.0f, 3.4e38f, -3.4e38f, NAN, INFINITY,
                              -INFINITY};
    const float mu_edges[] = {0.0f, -0.0f, 1e-40f, 1.0f, -3.0f, 1e19f, -1e19f, 1e38f,
                              3.4e38f, -3.4e38f, NAN, INFINITY, -INFINITY};
    const int n_ls = (int)(sizeof ls_edges / sizeof ls_edges[0]);
    const int n_mu = (int)(sizeof mu_edges / sizeof mu_edges[0]);
    int64_t bad = 0, bad_stored = 0, cases = 0;
    for (int i = 0; i < 400000; i++) {
        float mu, ls;
        if (i < n_ls * n_mu) {
            mu = mu_edges[i % n_mu];
            ls = ls_edges[i / n_mu];
        } else {
            mu = (float)(ts_rng_uniform(rng, -1, 1) * ldexp(1, (int)ts_rng_uniform(rng, -20, 70)));
            ls = i % 4 ? (float)ts_rng_uniform(rng, -6, 6) : (float)ts_rng_uniform(rng, -420, 420);
        }
        double a0 = 0, b0 = 0, k0 = 0, a1 = 0, b1 = 0, k1 = 0;
        const int ok0 = mas_gauss_coef_dim(mu, ls, MAS_SPREAD_LOG_STD, &a0, &b0, &k0);
        const int ok1 = mas_gauss_coef_dim_log_std_f32(mu, ls, &a1, &b1, &k1);
        if (ok0 != ok1 || ts_f64_bits(a0) != ts_f64_bits(a1) || ts_f64_bits(b0) != ts_f64_bits(b1) ||
            ts_f64_bits(k0) != ts_f64_bits(k1)) {
            if (bad < 5)
                printf("coef_dim_f32(mu %.9g, log_std %.9g): ok %d a %.17g b %.17g k %.17g, "
                       "general ok %d a %.17g b %.17g k %.17g\n",
                       mu, ls, ok1, a1, b1, k1, ok0, a0, b0, k0);
            bad++;
        }
        const float ar = (float)a0, br = (float)b0;
        bad_stored += !mas_gauss_coef_stored_ok_f32(ar, br) != !mas_gauss_coef_stored_ok(ar, br);
        bad_stored += !mas_gauss_coef_stored_ok_f32(mu, ls) != !mas_gauss_coef_stored_ok(mu, ls);
        cases++;
    }
    TS_CHECK(bad == 0, "%lld of %lld dimensions differ from mas_gauss_coef_dim", (long long)bad,
             (long long)cases);
    TS_CHECK(bad_stored == 0, "%lld stored-value verdicts differ", (long long)bad_stored);
    ts_case_end();
}

int main(int argc, char **argv) {
    ts_rng rng;
    ts_rng_init(&rng, ts_seed_from_args(argc, argv));
    test_det_exp_vector(&rng);
    test_coef_lanes(&rng);
    test_coef_dim_f32(&rng);
    test_errors();
    test_tts_views(&rng);
    test_all_groupings(&rng);
    test_precision(&rng);
    test_random(&rng, 150);
    return ts_finish();
}
