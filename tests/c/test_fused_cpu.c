/* Fused Gaussian alignment on the CPU (mas.h section 8) against the unfused
 * path and independent references:
 *   - mas_align_gaussian_cpu == mas_gauss_coef_cpu + mas_loglik_cpu +
 *     mas_hard_cpu, bit for bit (durations, indices, path, score, status),
 *     float32 (float32 and float16 frames) and float64, uneven lengths,
 *     repeated tokens and frames (ties), 1 and 2 threads;
 *   - mas_forward_sum_gaussian_cpu: log_z against a plain float64 loop over
 *     the formula, and equal to mas_forward_sum_cpu on the unfused matrix;
 *     its gradients against central finite differences (float64);
 *   - bad input: the statuses and items of the unfused calls;
 *   - the workspace: far below one [B, T, S] matrix, within the documented
 *     bound. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support.h"

static size_t dsize(mas_dtype d) { return mas_dtype_size(d); }

/* Glow-TTS arrays, channel-first: z [B, J, S], mean / log_std [B, J, T]. */
typedef struct tts {
    int64_t B, T, S, J;
    mas_dtype zt; /* z's dtype; the model is float32 or float64 alike */
    mas_dtype mt;
    void *z, *mean, *logs;
    int64_t *x_len, *y_len;
} tts;

static void tts_free(tts *t) {
    free(t->z);
    free(t->mean);
    free(t->logs);
    free(t->x_len);
    free(t->y_len);
}

static void tts_make(ts_rng *rng, tts *t, int64_t B, int64_t T, int64_t S, int64_t J,
                     mas_dtype zt, mas_dtype mt, int ties) {
    t->B = B;
    t->T = T;
    t->S = S;
    t->J = J;
    t->zt = zt;
    t->mt = mt;
    t->z = calloc((size_t)(B * J * S), dsize(zt));
    t->mean = calloc((size_t)(B * J * T), dsize(mt));
    t->logs = calloc((size_t)(B * J * T), dsize(mt));
    t->x_len = malloc(sizeof(int64_t) * (size_t)B);
    t->y_len = malloc(sizeof(int64_t) * (size_t)B);
    for (int64_t b = 0; b < B; b++) {
        int64_t y = ts_rng_chance(rng, 0.4) ? S : ts_rng_int(rng, 1, S);
        int64_t x = ts_rng_int(rng, 1, y < T ? y : T);
        if (ts_rng_chance(rng, 0.3)) x = y < T ? y : T;
        t->x_len[b] = x;
        t->y_len[b] = y;
        for (int64_t k = 0; k < T; k++)
            for (int64_t j = 0; j < J; j++) {
                int64_t at = (b * J + j) * T + k;
                int copy = ties && k > 0 && ts_rng_chance(rng, 0.3);
                double m = copy ? ts_load(t->mean, at - 1, mt) : ts_rng_uniform(rng, -2, 2);
                double l = copy ? ts_load(t->logs, at - 1, mt) : ts_rng_uniform(rng, -1, 0.5);
                ts_store(t->mean, at, mt, m);
                ts_store(t->logs, at, mt, l);
            }
        for (int64_t s = 0; s < S; s++)
            for (int64_t j = 0; j < J; j++) {
                int64_t at = (b * J + j) * S + s;
                int copy = ties && s > 0 && ts_rng_chance(rng, 0.3);
                double v = copy ? ts_load(t->z, at - 1, zt) : ts_rng_uniform(rng, -2.5, 2.5);
                ts_store(t->z, at, zt, v);
            }
    }
}

/* The views of mas.h: x {B, S, J}, means / spread {B, T, J}. */
static mas_gauss_align_args tts_args(const tts *t) {
    mas_gauss_align_args a;
    memset(&a, 0, sizeof a);
    a.x = (mas_tensor3){t->z, t->zt, 0, {t->B, t->S, t->J}, {t->J * t->S, 1, t->S}};
    a.params.means = (mas_tensor3){t->mean, t->mt, 0, {t->B, t->T, t->J}, {t->J * t->T, 1, t->T}};
    a.params.spread = (mas_tensor3){t->logs, t->mt, 0, {t->B, t->T, t->J}, {t->J * t->T, 1, t->T}};
    a.params.spread_kind = MAS_SPREAD_LOG_STD;
    a.x_len = t->x_len;
    a.y_len = t->y_len;
    return a;
}

static mas_dtype accum_of(mas_dtype zt) { return zt == MAS_FLOAT64 ? MAS_FLOAT64 : MAS_FLOAT32; }

/* The unfused matrix value [B, T, S] (accumulator type), as gaussian_loglik
 * makes it: coefficients, then the likelihood kernel with the lengths.
 * Returns the first failing status (a bad model). */
static mas_status unfused_matrix(const tts *t, void **value, mas_error *err) {
    mas_gauss_align_args a = tts_args(t);
    mas_dtype acc = accum_of(t->zt);
    int64_t P = 2 * t->J + 1;
    void *coef = malloc((size_t)(t->B * P * t->T) * dsize(acc));
    mas_tensor3 c = {coef, acc, 0, {t->B, P, t->T}, {P * t->T, t->T, 1}};
    mas_status st = mas_gauss_coef_cpu(&a.params, &c, 1, err);
    *value = calloc((size_t)(t->B * t->T * t->S), dsize(acc));
    if (st == MAS_OK) {
        mas_loglik_args la;
        memset(&la, 0, sizeof la);
        la.x = a.x;
        la.coef = c;
        la.n_states = t->T;
        la.n_len = t->y_len;
        la.s_len = t->x_len;
        /* out [B, S, T] viewed from the [B, T, S] matrix */
        la.out = (mas_tensor3){*value, acc, 0, {t->B, t->S, t->T}, {t->T * t->S, 1, t->S}};
        size_t ws = mas_loglik_cpu_workspace_size(&la, 1);
        void *w = malloc(ws);
        st = mas_loglik_cpu(&la, w, ws, 1, err);
        free(w);
    }
    free(coef);
    return st;
}

typedef struct hard_out {
    int32_t *dur, *idx;
    uint8_t *path;
    double *score; /* as many bytes as B doubles: holds float or double */
} hard_out;

static mas_hard_outputs hard_outputs_of(hard_out *o, const tts *t) {
    o->dur = calloc((size_t)(t->B * t->T), 4);
    o->idx = calloc((size_t)(t->B * t->S), 4);
    o->path = calloc((size_t)(t->B * t->T * t->S), 1);
    o->score = calloc((size_t)t->B, 8);
    mas_hard_outputs h;
    memset(&h, 0, sizeof h);
    h.path = (mas_tensor3){o->path, MAS_UINT8, 0, {t->B, t->T, t->S}, {t->T * t->S, t->S, 1}};
    h.durations = o->dur;
    h.durations_stride = t->T;
    h.indices = o->idx;
    h.indices_stride = t->S;
    h.score = o->score;
    return h;
}

static void hard_out_free(hard_out *o) {
    free(o->dur);
    free(o->idx);
    free(o->path);
    free(o->score);
}

static void check_hard_equal(ts_rng *rng, int64_t B, int64_t T, int64_t S, int64_t J,
                             mas_dtype zt, int ties, int threads, int poison) {
    ts_case_begin("align_gaussian == hard(loglik): B=%lld T=%lld S=%lld J=%lld z %s ties %d "
                  "threads %d poison %d", (long long)B, (long long)T, (long long)S,
                  (long long)J, ts_dtype_name(zt), ties, threads, poison);
    tts t;
    mas_dtype mt = ts_rng_chance(rng, 0.5) ? MAS_FLOAT32 : MAS_FLOAT64;
    tts_make(rng, &t, B, T, S, J, zt, mt, ties);
    if (poison) { /* a NaN frame inside one item's lengths */
        int64_t b = ts_rng_int(rng, 0, B - 1), s = ts_rng_int(rng, 0, t.y_len[b] - 1);
        ts_store(t.z, (b * J + ts_rng_int(rng, 0, J - 1)) * S + s, zt, NAN);
    }
    mas_dtype acc = accum_of(zt);
    void *value;
    mas_error e1, e2;
    mas_status st = unfused_matrix(&t, &value, &e1);
    TS_CHECK(st == MAS_OK, "unfused likelihood: %d", (int)st);
    hard_out o1, o2;
    mas_hard_outputs h1 = hard_outputs_of(&o1, &t), h2 = hard_outputs_of(&o2, &t);
    mas_tensor3 v = {value, acc, 0, {B, T, S}, {T * S, S, 1}};
    size_t ws1 = mas_hard_cpu_workspace_size(B, T, S, acc, threads);
    void *w1 = malloc(ws1);
    mas_status s1 = mas_hard_cpu(&v, t.x_len, t.y_len, &h1, w1, ws1, threads, &e1);
    mas_gauss_align_args a = tts_args(&t);
    size_t ws2 = mas_align_gaussian_cpu_workspace_size(&a, threads);
    void *w2 = malloc(ws2);
    mas_status s2 = mas_align_gaussian_cpu(&a, &h2, w2, ws2, threads, &e2);
    TS_CHECK(s1 == s2 && e1.item == e2.item, "status %d item %lld vs fused %d item %lld",
             (int)s1, (long long)e1.item, (int)s2, (long long)e2.item);
    TS_CHECK(poison || s1 == MAS_OK, "unfused hard MAS failed: %d", (int)s1);
    TS_CHECK(memcmp(o1.dur, o2.dur, (size_t)(B * T) * 4) == 0, "durations differ");
    TS_CHECK(memcmp(o1.idx, o2.idx, (size_t)(B * S) * 4) == 0, "indices differ");
    TS_CHECK(memcmp(o1.path, o2.path, (size_t)(B * T * S)) == 0, "path differs");
    TS_CHECK(memcmp(o1.score, o2.score, (size_t)B * dsize(acc)) == 0, "score bits differ");
    { /* the CPU computes the default precision whatever is asked */
        hard_out o4;
        mas_hard_outputs h4 = hard_outputs_of(&o4, &t);
        mas_gauss_align_args a4 = a;
        a4.precision = MAS_PRECISION_TF32;
        mas_error e4;
        mas_status s4 = mas_align_gaussian_cpu(&a4, &h4, w2, ws2, threads, &e4);
        TS_CHECK(s4 == s2 && memcmp(o2.idx, o4.idx, (size_t)(B * S) * 4) == 0 &&
                     memcmp(o2.score, o4.score, (size_t)B * dsize(acc)) == 0,
                 "precision TF32 on the CPU: status %d, outputs differ from the default", (int)s4);
        hard_out_free(&o4);
    }
    /* long-form below the unbounded size (issue 15): the same bits at the
     * smallest size, one in between and one byte short; below the smallest
     * a clear refusal */
    size_t lo = mas_align_gaussian_cpu_min_workspace_size(&a, threads);
    TS_CHECK(lo >= 1 && lo <= ws2, "min workspace %zu, full %zu", lo, ws2);
    size_t budgets[3] = {lo, lo + (ws2 - lo) / 2, ws2 - 1};
    for (int k = 0; k < 3 && lo < ws2; k++) {
        hard_out o3;
        mas_hard_outputs h3 = hard_outputs_of(&o3, &t);
        void *w3 = malloc(budgets[k]);
        mas_error e3;
        mas_status s3 = mas_align_gaussian_cpu(&a, &h3, w3, budgets[k], threads, &e3);
        TS_CHECK(s3 == s1 && e3.item == e1.item, "budget %zu of %zu: status %d item %lld",
                 budgets[k], ws2, (int)s3, (long long)e3.item);
        TS_CHECK(memcmp(o1.dur, o3.dur, (size_t)(B * T) * 4) == 0 &&
                     memcmp(o1.idx, o3.idx, (size_t)(B * S) * 4) == 0 &&
                     memcmp(o1.path, o3.path, (size_t)(B * T * S)) == 0 &&
                     memcmp(o1.score, o3.score, (size_t)B * dsize(acc)) == 0,
                 "budget %zu of %zu (min %zu): outputs differ from the unbounded", budgets[k],
                 ws2, lo);
        free(w3);
        hard_out_free(&o3);
    }
    {
        hard_out o4;
        mas_hard_outputs h4 = hard_outputs_of(&o4, &t);
        void *w4 = malloc(lo);
        mas_status s4 = mas_align_gaussian_cpu(&a, &h4, w4, lo - 1, threads, NULL);
        TS_CHECK(s4 == MAS_ERR_WORKSPACE_TOO_SMALL, "below the minimum (%zu): status %d", lo,
                 (int)s4);
        free(w4);
        hard_out_free(&o4);
    }
    free(w1);
    free(w2);
    free(value);
    hard_out_free(&o1);
    hard_out_free(&o2);
    tts_free(&t);
    ts_case_end();
}

/* log(e^a + e^b) in float64, -inf for two -inf */
static double lae(double a, double c) {
    double hi = a > c ? a : c, lo = a > c ? c : a;
    return hi == -INFINITY ? hi : hi + log1p(exp(lo - hi));
}

/* log_z of item b by plain float64 loops from the formula (Glow-TTS logp
 * and the forward-sum recurrence of mas.h section 5). */
static double ref_log_z(const tts *t, int64_t b) {
    int64_t X = t->x_len[b], Y = t->y_len[b], J = t->J, T = t->T, S = t->S;
    double *alpha = malloc(sizeof(double) * (size_t)(X * Y));
    for (int64_t j = 0; j < Y; j++)
        for (int64_t i = 0; i < X; i++) {
            double v = 0;
            for (int64_t d = 0; d < J; d++) {
                double m = ts_load(t->mean, (b * J + d) * T + i, t->mt);
                double l = ts_load(t->logs, (b * J + d) * T + i, t->mt);
                double z = ts_load(t->z, (b * J + d) * S + j, t->zt);
                v += -0.5 * log(2 * 3.14159265358979323846) - l - 0.5 * (z - m) * (z - m) * exp(-2 * l);
            }
            double prev;
            if (j == 0) prev = i == 0 ? 0 : -INFINITY;
            else {
                double a = alpha[i * Y + j - 1], c = i > 0 ? alpha[(i - 1) * Y + j - 1] : -INFINITY;
                double hi = a > c ? a : c, lo = a > c ? c : a;
                prev = hi == -INFINITY ? hi : hi + log1p(exp(lo - hi));
            }
            alpha[i * Y + j] = prev + v;
        }
    double r = alpha[(X - 1) * Y + Y - 1];
    free(alpha);
    return r;
}

/* The gradients of item b's log_z by plain float64 loops from the formula:
 * the cells (as ref_log_z), alpha and beta over the band, gamma =
 * exp(alpha + beta - log_z), and per cell d/dmean = gamma (z - m) / var,
 * d/dlog_std = gamma ((z - m)^2 / var - 1), d/dz = -gamma (z - m) / var;
 * into gx [J, S], gm and gl [J, T] of the item (channel-first). */
static void ref_grads(const tts *t, int64_t b, double *gx, double *gm, double *gl) {
    int64_t X = t->x_len[b], Y = t->y_len[b], J = t->J, T = t->T, S = t->S;
    double *L = malloc(sizeof(double) * (size_t)(X * Y)), *al = malloc(sizeof(double) * (size_t)(X * Y));
    double *be = malloc(sizeof(double) * (size_t)(X * Y));
#define M_(d, i) ts_load(t->mean, (b * J + (d)) * T + (i), t->mt)
#define L_(d, i) ts_load(t->logs, (b * J + (d)) * T + (i), t->mt)
#define Z_(d, j) ts_load(t->z, (b * J + (d)) * S + (j), t->zt)
    for (int64_t i = 0; i < X; i++)
        for (int64_t j = 0; j < Y; j++) {
            double v = 0;
            for (int64_t d = 0; d < J; d++) {
                double m = M_(d, i), l = L_(d, i), z = Z_(d, j);
                v += -0.5 * log(2 * 3.14159265358979323846) - l - 0.5 * (z - m) * (z - m) * exp(-2 * l);
            }
            L[i * Y + j] = v;
        }
    for (int64_t j = 0; j < Y; j++)
        for (int64_t i = 0; i < X; i++) {
            double prev = j == 0 ? (i == 0 ? 0 : -INFINITY)
                                 : lae(al[i * Y + j - 1], i > 0 ? al[(i - 1) * Y + j - 1] : -INFINITY);
            al[i * Y + j] = prev + L[i * Y + j];
        }
    for (int64_t j = Y - 1; j >= 0; j--)
        for (int64_t i = X - 1; i >= 0; i--) {
            if (j == Y - 1) {
                be[i * Y + j] = i == X - 1 ? 0 : -INFINITY;
                continue;
            }
            double stay = be[i * Y + j + 1] + L[i * Y + j + 1];
            double move = i + 1 < X ? be[(i + 1) * Y + j + 1] + L[(i + 1) * Y + j + 1] : -INFINITY;
            be[i * Y + j] = lae(stay, move);
        }
    const double log_z = al[(X - 1) * Y + Y - 1];
    memset(gx, 0, sizeof(double) * (size_t)(J * S));
    memset(gm, 0, sizeof(double) * (size_t)(J * T));
    memset(gl, 0, sizeof(double) * (size_t)(J * T));
    for (int64_t i = 0; i < X; i++)
        for (int64_t j = 0; j < Y; j++) {
            double g = exp(al[i * Y + j] + be[i * Y + j] - log_z);
            if (!(g > 0)) continue;
            for (int64_t d = 0; d < J; d++) {
                double m = M_(d, i), inv = exp(-2 * L_(d, i)), diff = Z_(d, j) - m;
                gm[d * T + i] += g * diff * inv;
                gl[d * T + i] += g * (diff * diff * inv - 1);
                gx[d * S + j] -= g * diff * inv;
            }
        }
#undef M_
#undef L_
#undef Z_
    free(L);
    free(al);
    free(be);
}

typedef struct soft_out {
    void *log_z, *gx, *gm, *gl;
} soft_out;

static mas_gauss_soft_outputs soft_outputs_of(soft_out *o, const tts *t, int grads) {
    mas_dtype acc = accum_of(t->zt);
    size_t a = dsize(acc);
    o->log_z = calloc((size_t)t->B, a);
    o->gx = grads ? calloc((size_t)(t->B * t->S * t->J), a) : NULL;
    o->gm = grads ? calloc((size_t)(t->B * t->T * t->J), a) : NULL;
    o->gl = grads ? calloc((size_t)(t->B * t->T * t->J), a) : NULL;
    mas_gauss_soft_outputs s;
    memset(&s, 0, sizeof s);
    s.log_z = o->log_z;
    /* channel-first like the inputs */
    s.grad_x = (mas_tensor3){o->gx, acc, 0, {t->B, t->S, t->J}, {t->J * t->S, 1, t->S}};
    s.grad_means = (mas_tensor3){o->gm, acc, 0, {t->B, t->T, t->J}, {t->J * t->T, 1, t->T}};
    s.grad_spread = (mas_tensor3){o->gl, acc, 0, {t->B, t->T, t->J}, {t->J * t->T, 1, t->T}};
    return s;
}

static void soft_out_free(soft_out *o) {
    free(o->log_z);
    free(o->gx);
    free(o->gm);
    free(o->gl);
}

static mas_status fused_log_z(const tts *t, soft_out *o, int grads, int threads, mas_error *err) {
    mas_gauss_align_args a = tts_args(t);
    mas_gauss_soft_outputs s = soft_outputs_of(o, t, grads);
    size_t ws = mas_forward_sum_gaussian_cpu_workspace_size(&a, threads);
    void *w = malloc(ws);
    mas_status st = mas_forward_sum_gaussian_cpu(&a, &s, w, ws, threads, err);
    free(w);
    return st;
}

static void check_soft(ts_rng *rng, int64_t B, int64_t T, int64_t S, int64_t J, mas_dtype zt,
                       int threads) {
    ts_case_begin("forward_sum_gaussian: B=%lld T=%lld S=%lld J=%lld z %s threads %d",
                  (long long)B, (long long)T, (long long)S, (long long)J, ts_dtype_name(zt),
                  threads);
    tts t;
    tts_make(rng, &t, B, T, S, J, zt, zt == MAS_FLOAT64 ? MAS_FLOAT64 : MAS_FLOAT32, 0);
    mas_dtype acc = accum_of(zt);
    soft_out o;
    mas_error err;
    mas_status st = fused_log_z(&t, &o, 1, threads, &err);
    TS_CHECK(st == MAS_OK, "fused forward-sum: status %d", (int)st);
    /* the unfused forward-sum on the matrix: the same sweep, the same bits */
    void *value;
    unfused_matrix(&t, &value, &err);
    mas_tensor3 v = {value, acc, 0, {B, T, S}, {T * S, S, 1}};
    void *lz = calloc((size_t)B, 8);
    size_t ws = mas_forward_sum_cpu_workspace_size(B, T, S, acc, threads);
    void *w = malloc(ws);
    TS_CHECK(mas_forward_sum_cpu(&v, t.x_len, t.y_len, lz, NULL, w, ws, threads, &err) == MAS_OK,
             "unfused forward-sum");
    TS_CHECK(memcmp(lz, o.log_z, (size_t)B * dsize(acc)) == 0, "log_z bits differ from unfused");
    for (int64_t b = 0; b < B; b++) {
        double ref = ref_log_z(&t, b), got = ts_load(o.log_z, b, acc);
        double tol = acc == MAS_FLOAT64 ? 1e-9 * (1 + fabs(ref))
                                        : 2e-5 * (fabs(ref) + 10) * sqrt((double)(t.y_len[b] * J));
        TS_CHECK(fabs(got - ref) <= tol, "item %lld: log_z %.10g, float64 loops %.10g",
                 (long long)b, got, ref);
    }
    free(w);
    free(lz);
    free(value);
    soft_out_free(&o);
    tts_free(&t);
    ts_case_end();
}

/* Gradients against central differences of the fused log_z (float64).
 * sharp: frames and means scaled by 12, so that cells differ by hundreds
 * and most gammas underflow (the cells and rows the sums skip). */
static void check_soft_grad(ts_rng *rng, int64_t B, int64_t T, int64_t S, int64_t J, int sharp) {
    ts_case_begin("forward_sum_gaussian gradients: B=%lld T=%lld S=%lld J=%lld sharp %d",
                  (long long)B, (long long)T, (long long)S, (long long)J, sharp);
    tts t;
    tts_make(rng, &t, B, T, S, J, MAS_FLOAT64, MAS_FLOAT64, 0);
    if (sharp) {
        for (int64_t k = 0; k < B * J * S; k++) ((double *)t.z)[k] *= 12;
        for (int64_t k = 0; k < B * J * T; k++) ((double *)t.mean)[k] *= 12;
    }
    soft_out o;
    mas_error err;
    TS_CHECK(fused_log_z(&t, &o, 1, 2, &err) == MAS_OK, "fused forward-sum");
    /* every element against the float64 loops */
    double *rx = malloc(sizeof(double) * (size_t)(J * S)), *rm = malloc(sizeof(double) * (size_t)(J * T));
    double *rl = malloc(sizeof(double) * (size_t)(J * T));
    int64_t off = 0;
    for (int64_t b = 0; b < B; b++) {
        ref_grads(&t, b, rx, rm, rl);
        for (int which = 0; which < 3; which++) {
            const double *got = (const double *)(which == 0 ? o.gx : which == 1 ? o.gm : o.gl);
            const double *ref = which == 0 ? rx : which == 1 ? rm : rl;
            const int64_t n = J * (which == 0 ? S : T);
            for (int64_t k = 0; k < n; k++) {
                const double g = got[b * n + k];
                if (!(fabs(g - ref[k]) <= 1e-6 * (1 + fabs(ref[k])))) {
                    if (off < 3)
                        printf("item %lld array %d element %lld: gradient %.12g, float64 loops %.12g\n",
                               (long long)b, which, (long long)k, g, ref[k]);
                    off++;
                }
            }
        }
    }
    TS_CHECK(off == 0, "%lld gradients off the float64 loops", (long long)off);
    free(rx);
    free(rm);
    free(rl);
    /* and a few against central differences of the fused log_z itself (the
     * sharp items' log_z is too large for differences at h = 1e-6) */
    const double h = 1e-6;
    for (int which = 0; which < 3 && !sharp; which++) {
        void *arr = which == 0 ? t.z : which == 1 ? t.mean : t.logs;
        const double *grad = (const double *)(which == 0 ? o.gx : which == 1 ? o.gm : o.gl);
        int64_t n = B * J * (which == 0 ? S : T);
        for (int64_t rep = 0; rep < 12; rep++) {
            int64_t k = ts_rng_int(rng, 0, n - 1);
            double x0 = ((double *)arr)[k];
            soft_out p1, p2;
            ((double *)arr)[k] = x0 + h;
            fused_log_z(&t, &p1, 0, 1, &err);
            ((double *)arr)[k] = x0 - h;
            fused_log_z(&t, &p2, 0, 1, &err);
            ((double *)arr)[k] = x0;
            int64_t b = k / (n / B);
            double fd = (((double *)p1.log_z)[b] - ((double *)p2.log_z)[b]) / (2 * h);
            TS_CHECK(fabs(fd - grad[k]) <= 1e-5 * (1 + fabs(fd)),
                     "array %d element %lld: gradient %.9g, finite difference %.9g", which,
                     (long long)k, grad[k], fd);
            soft_out_free(&p1);
            soft_out_free(&p2);
        }
    }
    soft_out_free(&o);
    tts_free(&t);
    ts_case_end();
}

/* Bad input: the statuses and items of the unfused calls. */
static void check_errors(ts_rng *rng) {
    ts_case_begin("fused: bad input");
    tts t;
    int64_t B = 3, T = 10, S = 30, J = 4;
    tts_make(rng, &t, B, T, S, J, MAS_FLOAT32, MAS_FLOAT32, 0);
    mas_gauss_align_args a = tts_args(&t);
    hard_out o;
    mas_hard_outputs h = hard_outputs_of(&o, &t);
    soft_out so;
    mas_gauss_soft_outputs sh = soft_outputs_of(&so, &t, 1);
    size_t ws = mas_align_gaussian_cpu_workspace_size(&a, 1);
    size_t ws2 = mas_forward_sum_gaussian_cpu_workspace_size(&a, 1);
    if (ws2 > ws) ws = ws2;
    void *w = malloc(ws);
    mas_error err;
    /* a NaN mean beyond x_len: a bad model, item b*T + k, as gauss_coef */
    t.x_len[1] = 3;
    ts_store(t.mean, (1 * J + 2) * T + 7, MAS_FLOAT32, NAN);
    TS_CHECK(mas_align_gaussian_cpu(&a, &h, w, ws, 1, &err) == MAS_ERR_BAD_MODEL &&
                 err.item == 1 * T + 7, "NaN mean: status %d item %lld", (int)err.status,
             (long long)err.item);
    TS_CHECK(mas_forward_sum_gaussian_cpu(&a, &sh, w, ws, 1, &err) == MAS_ERR_BAD_MODEL &&
                 err.item == 1 * T + 7, "NaN mean (soft)");
    ts_store(t.mean, (1 * J + 2) * T + 7, MAS_FLOAT32, 0.5);
    /* lengths: x_len > y_len on item 2, bad length on item 1 */
    t.x_len[2] = 9;
    t.y_len[2] = 5;
    t.x_len[1] = 11;
    TS_CHECK(mas_align_gaussian_cpu(&a, &h, w, ws, 1, &err) == MAS_ERR_BAD_LENGTH && err.item == 1,
             "bad length first: %d %lld", (int)err.status, (long long)err.item);
    t.x_len[1] = 3;
    t.y_len[1] = 5;
    TS_CHECK(mas_align_gaussian_cpu(&a, &h, w, ws, 1, &err) == MAS_ERR_X_LEN_GT_Y_LEN &&
                 err.item == 2, "x_len > y_len: %d %lld", (int)err.status, (long long)err.item);
    TS_CHECK(o.idx[1 * S] == 0 && o.idx[2 * S] == -1, "other items written, failing item -1");
    TS_CHECK(mas_forward_sum_gaussian_cpu(&a, &sh, w, ws, 1, &err) == MAS_ERR_X_LEN_GT_Y_LEN &&
                 err.item == 2, "x_len > y_len (soft)");
    TS_CHECK(isinf(((float *)so.log_z)[2]) && ((float *)so.gx)[2 * S * J] == 0, "failed item: -inf, zeros");
    t.x_len[2] = 2;
    /* argument errors */
    mas_gauss_align_args bad = a;
    bad.x.dim[2] = J + 1;
    TS_CHECK(mas_align_gaussian_cpu(&bad, &h, w, ws, 1, &err) == MAS_ERR_BAD_SHAPE, "J differs");
    bad = a;
    bad.x_len = NULL;
    TS_CHECK(mas_align_gaussian_cpu(&bad, &h, w, ws, 1, &err) == MAS_ERR_NULL_POINTER, "NULL x_len");
    bad = a;
    bad.x.dtype = MAS_INT32;
    TS_CHECK(mas_align_gaussian_cpu(&bad, &h, w, ws, 1, &err) == MAS_ERR_BAD_DTYPE, "int x");
    bad = a;
    bad.params.spread_kind = 7;
    TS_CHECK(mas_forward_sum_gaussian_cpu(&bad, &sh, w, ws, 1, &err) == MAS_ERR_BAD_ARGUMENT,
             "spread kind");
    bad = a;
    bad.precision = MAS_PRECISION_BF16 + 1;
    TS_CHECK(mas_align_gaussian_cpu(&bad, &h, w, ws, 1, &err) == MAS_ERR_BAD_ARGUMENT &&
                 mas_forward_sum_gaussian_cpu(&bad, &sh, w, ws, 1, &err) == MAS_ERR_BAD_ARGUMENT &&
                 mas_align_gaussian_cpu_workspace_size(&bad, 1) == 0,
             "unknown precision");
    TS_CHECK(mas_align_gaussian_cpu(&a, &h, w, mas_align_gaussian_cpu_workspace_size(&a, 1) - 1,
                                    1, &err) == MAS_ERR_WORKSPACE_TOO_SMALL, "workspace");
    mas_hard_outputs none;
    memset(&none, 0, sizeof none);
    TS_CHECK(mas_align_gaussian_cpu(&a, &none, w, ws, 1, &err) == MAS_ERR_BAD_ARGUMENT, "no output");
    h.path.dim[2] = S + 1;
    TS_CHECK(mas_align_gaussian_cpu(&a, &h, w, ws, 1, &err) == MAS_ERR_BAD_SHAPE, "path shape");
    sh.grad_means.dim[1] = T - 1;
    TS_CHECK(mas_forward_sum_gaussian_cpu(&a, &sh, w, ws, 1, &err) == MAS_ERR_BAD_SHAPE,
             "grad shape");
    TS_CHECK(mas_align_gaussian_cuda(&a, &h, w, ws, NULL, NULL) == MAS_ERR_NO_CUDA, "CUDA stub");
    free(w);
    hard_out_free(&o);
    soft_out_free(&so);
    tts_free(&t);
    ts_case_end();
}

/* The workspace: the coefficients, per thread O((T+S) J) plus the decision
 * bits (hard) or O(T sqrt(S)) (soft); far below one [B, T, S] matrix. */
static void check_workspace_bound(void) {
    static const int64_t shapes[3][4] = {{32, 512, 2048, 80}, {16, 1024, 4096, 80},
                                         {8, 4096, 32768, 80}};
    for (int k = 0; k < 3; k++) {
        int64_t B = shapes[k][0], T = shapes[k][1], S = shapes[k][2], J = shapes[k][3];
        ts_case_begin("workspace bound B=%lld T=%lld S=%lld J=%lld", (long long)B, (long long)T,
                      (long long)S, (long long)J);
        float dummy = 0;
        int64_t xl = 1;
        mas_gauss_align_args a;
        memset(&a, 0, sizeof a);
        a.x = (mas_tensor3){&dummy, MAS_FLOAT32, 0, {B, S, J}, {0, 0, 0}};
        a.params.means = (mas_tensor3){&dummy, MAS_FLOAT32, 0, {B, T, J}, {0, 0, 0}};
        a.params.spread = a.params.means;
        a.params.spread_kind = MAS_SPREAD_LOG_STD;
        a.x_len = a.y_len = &xl;
        double matrix = (double)B * (double)T * (double)S * 4;
        for (int threads = 1; threads <= 4; threads *= 2) {
            double n = (double)(threads < B ? threads : B);
            double coef = (double)B * (double)(2 * J + 1) * (double)T * 4;
            double per = (double)(T + 128) * (double)(S + 64) / 8 +
                         (double)((2 * J + 1) * (T + 64) * 2 + 2 * J * (S + 64) * 2) * 4 +
                         (double)(T + S) * 16 + 4096;
            double hard = (double)mas_align_gaussian_cpu_workspace_size(&a, threads);
            TS_CHECK(hard <= coef + n * per + (double)B * 4 + 4096,
                     "hard workspace %.0f > bound %.0f", hard, coef + n * per);
            double sq = ceil(sqrt((double)S)) + 32;
            double soft_per = (double)(T + 64) * (4 * sq + S / sq + 8) * 4 +
                              (double)(T + S) * (double)J * 40 + per;
            double soft = (double)mas_forward_sum_gaussian_cpu_workspace_size(&a, threads);
            TS_CHECK(soft <= coef + n * soft_per, "soft workspace %.0f > bound %.0f", soft,
                     coef + n * soft_per);
            TS_CHECK(threads > 1 || (hard < matrix / 8 && soft < matrix / 4),
                     "workspace not far below the [B,T,S] matrix: %.0f, %.0f vs %.0f", hard,
                     soft, matrix);
        }
        ts_case_end();
    }
}

int main(int argc, char **argv) {
    uint64_t seed = ts_seed_from_args(argc, argv);
    ts_rng rng;
    ts_rng_init(&rng, seed);
    static const mas_dtype zts[3] = {MAS_FLOAT32, MAS_FLOAT64, MAS_FLOAT16};
    for (int rep = 0; rep < 40; rep++) {
        int64_t B = ts_rng_int(&rng, 1, 4), T = ts_rng_int(&rng, 1, 150);
        int64_t S = ts_rng_int(&rng, T, 300), J = ts_rng_chance(&rng, 0.2) ? 80 : ts_rng_int(&rng, 1, 9);
        check_hard_equal(&rng, B, T, S, J, zts[rep % 3], rep % 2, rep % 4 < 2 ? 1 : 2,
                         rep % 7 == 3);
    }
    check_hard_equal(&rng, 2, 1, 1, 3, MAS_FLOAT32, 0, 1, 0);
    check_hard_equal(&rng, 3, 200, 200, 5, MAS_FLOAT64, 1, 2, 0);
    for (int rep = 0; rep < 12; rep++) {
        int64_t B = ts_rng_int(&rng, 1, 3), T = ts_rng_int(&rng, 1, 90);
        int64_t S = ts_rng_int(&rng, T, 400), J = ts_rng_int(&rng, 1, 6);
        check_soft(&rng, B, T, S, J, zts[rep % 3], rep % 2 ? 1 : 2);
    }
    for (int rep = 0; rep < 5; rep++)
        check_soft_grad(&rng, ts_rng_int(&rng, 1, 3), ts_rng_int(&rng, 1, 20),
                        ts_rng_int(&rng, 20, 150), ts_rng_int(&rng, 1, 40), rep >= 3);
    check_errors(&rng);
    check_workspace_bound();
    return ts_finish();
}
