/* Fuzz target: likelihoods on the CPU (mas.h section 6): mas_gauss_coef_cpu,
 * then mas_loglik_cpu_workspace_size and mas_loglik_cpu over the
 * coefficients it made or over coefficients filled directly (any values).
 * GMMs of varying mixture sizes (offsets), one Gaussian per state, shared
 * (dim[0] = 1 or stride[0] = 0) or per-item models (TTS), every dtype and
 * layout, bad shapes/dtypes/offsets/flags, lengths, threads, workspaces.
 * Statuses are predicted from the arguments. On success:
 *   - coefficients: against the formula in float64 (direct, not the
 *     library's order), rounded once, and BAD_MODEL exactly where a
 *     parameter is out of range or a coefficient does not fit its dtype;
 *   - log-likelihoods: every Gaussian's score recomputed here with the fma
 *     chain of mas.h in the accumulator type; a state of one Gaussian, and
 *     MAS_LOGLIK_MAX, must give those bits; a mixture its float64 log-sum
 *     within a few ulps; best the lowest index of the max; 0 and -1 outside
 *     the lengths. */
#include "fuzz_common.h"

#define MAX_REF_WORK 200000 /* N*M*J above which values are not recomputed */

/* x + 1, or x - 1 where that overflows: a size that differs from x */
static int64_t other(int64_t x) { return x < INT64_MAX ? x + 1 : x - 1; }

static int64_t off_of(const int64_t *off, int64_t s) { return off ? off[s] : s; }

/* ---- the coefficients ----------------------------------------------- */

typedef struct coef_ref {
    int64_t first_bad;       /* certain: a parameter is out of range, or overflow */
    int64_t first_uncertain; /* a value near a limit of its dtype: either way */
} coef_ref;

/* Whether v, stored in dtype (float32 or float64), surely fits (1), surely
 * not (0), or is too close to tell (-1). b must also not round to 0. */
static int fits(double v, int32_t dtype, int nonzero) {
    double big = dtype == MAS_FLOAT64 ? DBL_MAX : FLT_MAX;
    double tiny = dtype == MAS_FLOAT64 ? 4.9e-324 : 1.4e-45;
    double a = fabs(v);
    if (v != v) return 0;
    if (a == INFINITY) return 0;
    if (a > big * 0.999999 && a < big * 1.000001) return -1;
    if (a > big) return 0;
    if (nonzero) {
        if (a < tiny * 0.49) return 0; /* rounds to 0 */
        if (a < tiny * 4) return -1;
    }
    return 1;
}

/* Checks the stored coefficients of Gaussian (b, k) against the formula
 * and says whether it is bad (1), fine (0) or uncertain (-1). */
static int coef_gaussian(const mas_gauss_params *p, const mas_tensor3 *coef, int64_t b,
                         int64_t k, int check) {
    int64_t J = p->means.dim[2];
    double lw = p->log_weights.data ? fz_at(&p->log_weights, b, 0, k) : 0;
    int bad = lw != lw || lw == INFINITY, unsure = 0;
    double ksum = 0, kabs = 0;
    for (int64_t j = 0; j < J; j++) {
        double mu = fz_at(&p->means, b, k, j), sp = fz_at(&p->spread, b, k, j);
        if (!isfinite(mu) || !isfinite(sp)) { bad = 1; continue; }
        double var, log_var;
        if (p->spread_kind == MAS_SPREAD_VARIANCE) {
            if (!(sp > 0)) { bad = 1; continue; }
            var = sp;
            log_var = log(sp);
        } else {
            if (fabs(sp) >= 380) { bad = 1; continue; } /* exp(-2 sp) over/underflows */
            if (fabs(sp) > 350) unsure = 1;
            var = exp(2 * sp);
            log_var = 2 * sp;
        }
        double a = mu / var, q = -0.5 / var, kt = 1.8378770664093454836 /* log(2 pi) */ + log_var + mu * mu / var;
        int fa = fits(a, coef->dtype, 0), fq = fits(q, coef->dtype, 1);
        if (!isfinite(kt) || fabs(kt) > DBL_MAX / 4) unsure = 1;
        if (fa == 0 || fq == 0) bad = 1;
        if (fa < 0 || fq < 0) unsure = 1;
        ksum += kt;
        kabs += fabs(log_var) + 2 + fabs(mu * mu / var);
        if (check && fa == 1 && fq == 1) {
            double ga = fz_at(coef, b, 1 + j, k), gq = fz_at(coef, b, 1 + J + j, k);
            double tol = coef->dtype == MAS_FLOAT64 ? 2e-15 : 1.2e-7;
            fz_check(fabs(ga - a) <= tol * fabs(a) + (coef->dtype == MAS_FLOAT64 ? 1e-320 : 1.5e-45),
                     "coef a(%lld,%lld,%lld) = %.17g, formula %.17g", (long long)b, (long long)k,
                     (long long)j, ga, a);
            fz_check(fabs(gq - q) <= tol * fabs(q) + (coef->dtype == MAS_FLOAT64 ? 1e-320 : 1.5e-45),
                     "coef b(%lld,%lld,%lld) = %.17g, formula %.17g", (long long)b, (long long)k,
                     (long long)j, gq, q);
        }
    }
    if (!bad && !unsure) {
        double K = lw - 0.5 * ksum;
        if (lw == -INFINITY) {
            if (check) fz_check(fz_at(coef, b, 0, k) == -INFINITY, "K with weight 0: %g",
                                fz_at(coef, b, 0, k));
        } else {
            int fk = fits(K, coef->dtype, 0);
            if (fk == 0) bad = 1;
            else if (fk < 0) unsure = 1;
            else if (check) {
                double gk = fz_at(coef, b, 0, k);
                double tol = (coef->dtype == MAS_FLOAT64 ? 1e-15 : 1.2e-7) * (fabs(K) + 1) +
                             1e-14 * (kabs + fabs(lw));
                fz_check(fabs(gk - K) <= tol, "coef K(%lld,%lld) = %.17g, formula %.17g",
                         (long long)b, (long long)k, gk, K);
            }
        }
    }
    return bad ? 1 : unsure ? -1 : 0;
}

/* Makes the spread of a fuzzed model mostly valid: finite values turned
 * into variances in [1/8, 8] or kept as log-stds. */
static void spread_mostly_valid(fz_view *v, int32_t kind, uint8_t c) {
    if (c >= 200 || kind != MAS_SPREAD_VARIANCE) return;
    size_t size = fz_dtype_size(v->t.dtype), n = v->bytes / size;
    for (size_t k = 0; k < n; k++) {
        double x = fz_load(v->alloc, v->t.dtype, (int64_t)k);
        if (!isfinite(x) || fabs(x) > 64) continue;
        double y = fabs(x) + 0.125;
        uint64_t bits;
        if (v->t.dtype == MAS_FLOAT64) memcpy(&bits, &y, 8);
        else {
            float f = (float)y;
            uint32_t u;
            memcpy(&u, &f, 4);
            bits = v->t.dtype == MAS_FLOAT32 ? u : u >> 16; /* bf16 truncation */
            if (v->t.dtype == MAS_FLOAT16) {               /* k/8 + 1/8: exact in half */
                int e;
                double m = frexp(y, &e);
                bits = (uint64_t)((e - 1 + 15) << 10) | (uint64_t)((m * 2 - 1) * 1024);
            }
        }
        fz_store_bits(v->alloc + k * size, size, bits);
    }
    memcpy(v->copy, v->alloc, v->bytes);
}

/* Expected status of mas_gauss_coef_cpu's argument checks (mas.h order). */
static mas_status coef_expect(const mas_gauss_params *p, const mas_tensor3 *coef) {
    const mas_tensor3 *ts[3] = {&p->means, &p->spread, &p->log_weights};
    for (int k = 0; k < 3; k++) {
        if (k == 2 && !p->log_weights.data) break;
        int32_t d = ts[k]->dtype;
        if (!(d == MAS_FLOAT32 || d == MAS_FLOAT64 || d == MAS_FLOAT16 || d == MAS_BFLOAT16))
            return MAS_ERR_BAD_DTYPE;
        for (int a = 0; a < 3; a++)
            if (ts[k]->dim[a] < 1) return MAS_ERR_BAD_SHAPE;
    }
    if (!(coef->dtype == MAS_FLOAT32 || coef->dtype == MAS_FLOAT64 ||
          coef->dtype == MAS_FLOAT16 || coef->dtype == MAS_BFLOAT16))
        return MAS_ERR_BAD_DTYPE;
    for (int a = 0; a < 3; a++)
        if (coef->dim[a] < 1) return MAS_ERR_BAD_SHAPE;
    if (coef->dtype != MAS_FLOAT32 && coef->dtype != MAS_FLOAT64) return MAS_ERR_BAD_DTYPE;
    if (p->spread_kind != MAS_SPREAD_VARIANCE && p->spread_kind != MAS_SPREAD_LOG_STD)
        return MAS_ERR_BAD_ARGUMENT;
    const int64_t *d = p->means.dim;
    for (int a = 0; a < 3; a++)
        if (p->spread.dim[a] != d[a]) return MAS_ERR_BAD_SHAPE;
    if (p->log_weights.data && (p->log_weights.dim[0] != d[0] || p->log_weights.dim[1] != 1 ||
                                p->log_weights.dim[2] != d[1]))
        return MAS_ERR_BAD_SHAPE;
    if (d[2] > (INT64_MAX - 1) / 2) return MAS_ERR_BAD_SHAPE;
    if (coef->dim[0] != d[0] || coef->dim[1] != 2 * d[2] + 1 || coef->dim[2] != d[1])
        return MAS_ERR_BAD_SHAPE;
    return MAS_OK;
}

/* ---- the log-likelihoods -------------------------------------------- */

static int is_float(int32_t d) {
    return d == MAS_FLOAT32 || d == MAS_FLOAT64 || d == MAS_FLOAT16 || d == MAS_BFLOAT16;
}

static mas_status tensor_expect(const mas_tensor3 *t, int32_t want) {
    if (want < 0 ? !is_float(t->dtype) : t->dtype != want) return MAS_ERR_BAD_DTYPE;
    for (int a = 0; a < 3; a++)
        if (t->dim[a] < 1) return MAS_ERR_BAD_SHAPE;
    return MAS_OK;
}

/* Expected status of the value-free checks (common/checks.h's order, which
 * mas.h documents per status). */
static mas_status loglik_expect(const mas_loglik_args *a) {
    mas_status st = tensor_expect(&a->x, -1);
    if (st != MAS_OK) return st;
    int32_t acc = fz_accum(a->x.dtype);
    if ((st = tensor_expect(&a->coef, acc)) != MAS_OK) return st;
    if ((st = tensor_expect(&a->out, acc)) != MAS_OK) return st;
    if (a->best.data && (st = tensor_expect(&a->best, MAS_INT32)) != MAS_OK) return st;
    if ((a->flags & ~MAS_LOGLIK_MAX) != 0u || a->precision < 0 || a->precision > 2)
        return MAS_ERR_BAD_ARGUMENT;
    const int64_t *x = a->x.dim;
    if (x[2] > (INT64_MAX - 1) / 2 || a->coef.dim[1] != 2 * x[2] + 1) return MAS_ERR_BAD_SHAPE;
    if (a->coef.dim[0] != 1 && a->coef.dim[0] != x[0]) return MAS_ERR_BAD_SHAPE;
    if (a->n_states < 1 || a->n_states > a->coef.dim[2]) return MAS_ERR_BAD_SHAPE;
    if (!a->offsets && a->n_states != a->coef.dim[2]) return MAS_ERR_BAD_SHAPE;
    if (a->out.dim[0] != x[0] || a->out.dim[1] != x[1] || a->out.dim[2] != a->n_states)
        return MAS_ERR_BAD_SHAPE;
    if (a->best.data) {
        for (int k = 0; k < 3; k++)
            if (a->best.dim[k] != a->out.dim[k]) return MAS_ERR_BAD_SHAPE;
        if (a->coef.dim[2] > INT32_MAX) return MAS_ERR_BAD_SHAPE;
    }
    return MAS_OK;
}

/* Score of Gaussian k for frame n of item b: the fma chain of mas.h in the
 * accumulator type. */
static double chain(const mas_loglik_args *a, int64_t b, int64_t n, int64_t k) {
    int64_t J = a->x.dim[2], cb = a->coef.dim[0] == 1 ? 0 : b;
    if (a->x.dtype == MAS_FLOAT64) {
        double acc = fz_at(&a->coef, cb, 0, k);
        for (int64_t j = 0; j < J; j++) acc = fma(fz_at(&a->x, b, n, j), fz_at(&a->coef, cb, 1 + j, k), acc);
        for (int64_t j = 0; j < J; j++) {
            double x = fz_at(&a->x, b, n, j);
            acc = fma(x * x, fz_at(&a->coef, cb, 1 + J + j, k), acc);
        }
        return acc;
    }
    float acc = (float)fz_at(&a->coef, cb, 0, k);
    for (int64_t j = 0; j < J; j++)
        acc = fmaf((float)fz_at(&a->x, b, n, j), (float)fz_at(&a->coef, cb, 1 + j, k), acc);
    for (int64_t j = 0; j < J; j++) {
        float x = (float)fz_at(&a->x, b, n, j);
        float sq = x * x;
        acc = fmaf(sq, (float)fz_at(&a->coef, cb, 1 + J + j, k), acc);
    }
    return acc;
}

static void check_loglik(const mas_loglik_args *a, int values) {
    const int64_t B = a->x.dim[0], N = a->x.dim[1], S = a->n_states;
    const int f64 = a->x.dtype == MAS_FLOAT64;
    const double eps = f64 ? 0x1p-52 : 0x1p-23;
    int64_t mmax = 1;
    for (int64_t s = 0; s < S; s++) {
        int64_t m = off_of(a->offsets, s + 1) - off_of(a->offsets, s);
        if (m > mmax) mmax = m;
    }
    double *sc = (double *)malloc((size_t)mmax * sizeof(double));
    for (int64_t b = 0; b < B; b++) {
        int64_t nl = a->n_len ? a->n_len[b] : N, sl = a->s_len ? a->s_len[b] : S;
        for (int64_t n = 0; n < N; n++)
            for (int64_t s = 0; s < S; s++) {
                double o = fz_at(&a->out, b, n, s);
                double bi = a->best.data ? fz_at(&a->best, b, n, s) : 0;
                if (n >= nl || s >= sl) {
                    fz_check(o == 0 && (!a->best.data || bi == -1),
                             "item %lld (n_len %lld, s_len %lld): out(%lld,%lld) = %g, best %g "
                             "outside the lengths", (long long)b, (long long)nl, (long long)sl,
                             (long long)n, (long long)s, o, bi);
                    continue;
                }
                int64_t k0 = off_of(a->offsets, s), k1 = off_of(a->offsets, s + 1);
                if (a->best.data)
                    fz_check(bi >= (double)k0 && bi < (double)k1,
                             "best(%lld,%lld,%lld) = %g outside the state's [%lld, %lld)",
                             (long long)b, (long long)n, (long long)s, bi, (long long)k0,
                             (long long)k1);
                if (!values) continue;
                int nan = 0, pinf = 0;
                double mx = -INFINITY;
                int64_t arg = k0;
                for (int64_t k = k0; k < k1; k++) {
                    double v = sc[k - k0] = chain(a, b, n, k);
                    if (v != v) nan = 1;
                    if (v == INFINITY) pinf = 1;
                    if (k == k0 || v > mx) { /* ties: the lowest index */
                        mx = v;
                        arg = k;
                    }
                }
                if (nan) continue; /* where a NaN goes in a max is not specified */
                if (a->best.data)
                    fz_check(bi == (double)arg, "best(%lld,%lld,%lld) = %g, expected %lld",
                             (long long)b, (long long)n, (long long)s, bi, (long long)arg);
                if (k1 - k0 == 1 || (a->flags & MAS_LOGLIK_MAX)) {
                    fz_check(o == mx || (o != o && mx != mx),
                             "out(%lld,%lld,%lld) = %.17g, the chain gives %.17g", (long long)b,
                             (long long)n, (long long)s, o, mx);
                    continue;
                }
                if (pinf) {
                    fz_check(o == INFINITY || o != o, "out(%lld,%lld,%lld) = %g with a +inf score",
                             (long long)b, (long long)n, (long long)s, o);
                    continue;
                }
                double ref = -INFINITY;
                if (mx != -INFINITY) {
                    double sum = 0;
                    for (int64_t k = k0; k < k1; k++) sum += exp(sc[k - k0] - mx);
                    ref = mx + log(sum);
                }
                if (ref == -INFINITY) {
                    fz_check(o == -INFINITY, "out(%lld,%lld,%lld) = %g, all scores -inf",
                             (long long)b, (long long)n, (long long)s, o);
                    continue;
                }
                double tol = 16 * eps * (1 + fabs(ref) + (double)(k1 - k0));
                fz_check(fabs(o - ref) <= tol,
                         "out(%lld,%lld,%lld) = %.17g, log-sum of the chain %.17g (mixture %lld)",
                         (long long)b, (long long)n, (long long)s, o, ref, (long long)(k1 - k0));
            }
    }
    free(sc);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fz_reader r = fz_reader_init(data, size);
    int64_t B = fz_dim(&r, 3), N = fz_dim(&r, 12), J = fz_dim(&r, 4), M = fz_dim(&r, 8);
    int32_t dtype = fz_float_dtype(&r);
    int32_t acc = fz_accum(dtype);
    int32_t threads = fz_threads(&r);
    uint8_t src = fz_u8(&r);       /* coefficients: from a model, or filled */
    uint8_t shared = fz_u8(&r);    /* model shared by the items, or per item */
    uint8_t off_c = fz_u8(&r);     /* offsets: NULL, valid, bad */
    uint8_t mis = fz_u8(&r);       /* a shape or dtype mismatch */
    uint8_t want = fz_u8(&r);      /* best, lengths, flags */
    if (B > 4096 || B < -8) return 0;

    /* ---- offsets ---- */
    int64_t n_states = M, *offsets = NULL;
    if (off_c >= 100 && M >= 1 && M <= 4096) {
        offsets = (int64_t *)malloc((size_t)(M + 2) * sizeof(int64_t));
        uint8_t cut = fz_u8(&r);
        n_states = 0;
        offsets[0] = 0;
        for (int64_t k = 1; k < M; k++)
            if (fz_u8(&r) <= cut) offsets[++n_states] = k;
        offsets[++n_states] = M;
        if (off_c >= 235) { /* broken */
            switch (off_c % 5) {
            case 0: offsets[0] = 1; break;
            case 1: offsets[n_states] = M + 1; break;
            case 2: if (n_states >= 2) offsets[1] = offsets[0]; else offsets[0] = -1; break;
            case 3: n_states = off_c % 2 ? 0 : M + 1; break;
            default: if (n_states >= 2) { offsets[1] = offsets[2]; } else offsets[1] = 0; break;
            }
        }
    } else if (off_c >= 95) {
        n_states = off_c % 2 ? other(M) : M - (M > INT64_MIN); /* no offsets, n_states != M */
    }

    int64_t CB = shared < 100 && B >= 1 ? 1 : B; /* model items */
    int64_t P = J >= 1 && J <= (INT64_MAX - 1) / 2 ? 2 * J + 1 : J;
    int64_t xd[3] = {B, N, J}, cd[3] = {CB, P, M}, od[3] = {B, N, n_states};
    int32_t coef_dtype = acc, out_dtype = acc, best_dtype = MAS_INT32;
    mas_loglik_args a;
    memset(&a, 0, sizeof a);
    a.flags = want & 4 ? MAS_LOGLIK_MAX : 0;
    a.precision = (int32_t)(want >> 6) % 3;
    if (mis >= 200) {
        switch (mis % 10) {
        case 0: cd[1] = other(cd[1]); break;
        case 1: cd[0] = other(B); break;
        case 2: od[1] = other(od[1]); break;
        case 3: od[2] = mis % 4 == 3 ? other(od[2]) : od[2] - (od[2] > INT64_MIN); break;
        case 4: coef_dtype = acc ^ 1; break;
        case 5: out_dtype = mis % 2 ? acc ^ 1 : MAS_INT32; break;
        case 6: best_dtype = MAS_FLOAT32; break;
        case 7: a.flags |= 2u; break;
        case 8: a.precision = mis % 2 ? 3 : -1; break;
        default: cd[2] = other(cd[2]); break;
        }
    }
    int want_best = (want & 8) != 0, n_lens = (want & 16) != 0, s_lens = (want & 32) != 0;

    /* ---- lengths ---- */
    int64_t nb = B > 0 ? B : 0;
    int64_t *n_len = (int64_t *)malloc(((size_t)nb + 1) * sizeof(int64_t));
    int64_t *s_len = (int64_t *)malloc(((size_t)nb + 1) * sizeof(int64_t));
    int64_t *rows = (int64_t *)calloc((size_t)nb + 1, sizeof(int64_t));
    int64_t *xcols = (int64_t *)calloc((size_t)nb + 1, sizeof(int64_t));
    int64_t *ccols = (int64_t *)calloc((size_t)nb + 1, sizeof(int64_t));
    int64_t *crows = (int64_t *)calloc((size_t)nb + 1, sizeof(int64_t));
    int lengths_ok = 1;
    for (int64_t b = 0; b < nb; b++) {
        n_len[b] = n_lens ? fz_length(&r, N) : N;
        s_len[b] = s_lens ? fz_length(&r, n_states) : n_states;
        if (n_lens && n_len[b] >= 1 && fz_u8(&r) < 20) n_len[b] = 0;
        if (s_lens && s_len[b] >= 1 && fz_u8(&r) < 20) s_len[b] = 0;
        int ok = n_len[b] >= 0 && n_len[b] <= N && s_len[b] >= 0 && s_len[b] <= n_states;
        if (!ok) lengths_ok = 0;
    }
    a.n_len = n_lens ? n_len : NULL;
    a.s_len = s_lens ? s_len : NULL;

    /* ---- the model and its coefficients ---- */
    mas_gauss_params p;
    memset(&p, 0, sizeof p);
    fz_view means, spread, lw, coef, x, out, best;
    memset(&means, 0, sizeof means); memset(&spread, 0, sizeof spread);
    memset(&lw, 0, sizeof lw); memset(&coef, 0, sizeof coef); memset(&x, 0, sizeof x);
    memset(&out, 0, sizeof out); memset(&best, 0, sizeof best);
    uint8_t dummy[64] __attribute__((aligned(16)));
    memset(dummy, 0, sizeof dummy);
    int built = 1;
    int from_model = src < 128;
    /* the offsets as read by the library: valid ones, else none is read */
    int offsets_valid = 1;
    if (offsets) {
        /* against coef's M (a mismatch may have changed it) */
        offsets_valid = n_states >= 1 && n_states <= cd[2] && offsets[0] == 0 &&
                        offsets[n_states] == cd[2];
        for (int64_t s = 0; offsets_valid && s < n_states; s++)
            offsets_valid = offsets[s] < offsets[s + 1];
    }

    if (from_model) {
        int32_t pd = src < 120 ? (src % 2 ? dtype : fz_float_dtype(&r)) : 99;
        int64_t md[3] = {CB, M, J}, wd[3] = {CB, 1, M};
        if (mis >= 200 && mis % 10 == 9) md[1] = M; /* coef has M+1: BAD_SHAPE */
        p.spread_kind = src % 3 == 0 ? MAS_SPREAD_LOG_STD : MAS_SPREAD_VARIANCE;
        if (src == 127) p.spread_kind = 7;
        int with_w = (src >> 2) & 1;
        if (fz_cells(&(fz_dims){{md[0], md[1], md[2]}}) > 0 &&
            fz_cells(&(fz_dims){{cd[0], cd[1], cd[2]}}) > 0 &&
            (int64_t)md[0] * md[1] * md[2] <= MAX_REF_WORK) {
            built = fz_view_make(&means, &r, md, pd, 1, md[0], NULL, NULL);
            if (built) fz_fill(&means, &r);
            built = built && fz_view_make(&spread, &r, md, pd, 1, md[0], NULL, NULL);
            if (built) { fz_fill(&spread, &r); spread_mostly_valid(&spread, p.spread_kind, fz_u8(&r)); }
            if (built && with_w) {
                built = fz_view_make(&lw, &r, wd, pd, 1, wd[0], NULL, NULL);
                if (built) fz_fill(&lw, &r);
            }
            built = built && fz_output_make(&coef, &r, cd, coef_dtype == acc ? acc : coef_dtype);
        } else built = 0;
        if (built) {
            p.means = means.t;
            p.spread = spread.t;
            if (with_w) p.log_weights = lw.t;
            mas_status ce = coef_expect(&p, &coef.t);
            mas_error err;
            mas_status st = mas_gauss_coef_cpu(&p, &coef.t, threads, &err);
            fz_check_status(st, &err);
            fz_check_unchanged(&means, "means");
            fz_check_unchanged(&spread, "spread");
            fz_check_unchanged(&lw, "log_weights");
            if (ce != MAS_OK) {
                fz_check(st == ce && err.item == -1, "gauss_coef status %d item %lld, expected %d",
                         (int)st, (long long)err.item, (int)ce);
                goto out; /* no coefficients */
            }
            /* the first bad Gaussian, checking the values of the good ones */
            int64_t first_bad = INT64_MAX;
            char *unsure = (char *)calloc((size_t)(CB * M), 1);
            for (int64_t b = 0; b < CB; b++)
                for (int64_t k = 0; k < M; k++) {
                    int g = coef_gaussian(&p, &coef.t, b, k, st == MAS_OK);
                    if (g < 0) unsure[b * M + k] = 1;
                    if (g == 1 && first_bad == INT64_MAX) first_bad = b * M + k;
                }
            if (st == MAS_OK)
                fz_check(first_bad == INT64_MAX, "gauss_coef OK but Gaussian %lld is bad",
                         (long long)first_bad);
            else {
                fz_check(st == MAS_ERR_BAD_MODEL, "gauss_coef status %d", (int)st);
                fz_check(err.item == first_bad ||
                             (err.item >= 0 && err.item < first_bad && err.item < CB * M &&
                              unsure[err.item]),
                         "gauss_coef BAD_MODEL at %lld, first bad %lld", (long long)err.item,
                         (long long)first_bad);
            }
            free(unsure);
            if (st != MAS_OK) goto out;
            /* coef is now an input of the log-likelihoods */
            coef.copy = (uint8_t *)malloc(coef.bytes ? coef.bytes : 1);
            memcpy(coef.copy, coef.alloc, coef.bytes);
        }
    } else {
        /* coefficients filled directly: only the Gaussians of states < s_len
         * of items with frames are addressed */
        for (int64_t b = 0; b < nb; b++) {
            int64_t cbi = CB == 1 ? 0 : b;
            int live = lengths_ok && offsets_valid && n_len[b] >= 1 && s_len[b] >= 1;
            if (!live) continue;
            int64_t g = off_of(offsets, s_len[b]);
            crows[cbi] = P;
            if (g > ccols[cbi]) ccols[cbi] = g;
        }
        built = fz_cells(&(fz_dims){{cd[0], cd[1], cd[2] < 1 ? 1 : cd[2]}}) != 0 &&
                fz_view_make(&coef, &r, cd, coef_dtype, 1, CB > 0 ? CB : 0, crows, ccols);
        if (built) fz_fill(&coef, &r);
    }

    /* ---- frames and outputs ---- */
    for (int64_t b = 0; b < nb; b++) {
        int live = lengths_ok && offsets_valid && n_len[b] >= 1 && s_len[b] >= 1;
        rows[b] = live ? n_len[b] : 0;
        xcols[b] = live ? J : 0;
    }
    if (built) built = fz_view_make(&x, &r, xd, dtype, 1, nb, rows, xcols);
    if (built) fz_fill(&x, &r);
    if (built) built = fz_cells(&(fz_dims){{od[0], od[1], od[2]}}) > 0 && fz_output_make(&out, &r, od, out_dtype);
    if (built && want_best) built = fz_output_make(&best, &r, od, best_dtype);

    a.x = built ? x.t : (mas_tensor3){dummy, dtype, 0, {xd[0], xd[1], xd[2]}, {0, 0, 0}};
    a.coef = built ? coef.t : (mas_tensor3){dummy, coef_dtype, 0, {cd[0], cd[1], cd[2]}, {0, 0, 0}};
    a.out = built ? out.t : (mas_tensor3){dummy, out_dtype, 0, {od[0], od[1], od[2]}, {0, 0, 0}};
    if (want_best)
        a.best = built ? best.t : (mas_tensor3){dummy, best_dtype, 0, {od[0], od[1], od[2]}, {0, 0, 0}};
    a.offsets = offsets;
    a.n_states = n_states;

    mas_status expect = loglik_expect(&a);
    size_t need = mas_loglik_cpu_workspace_size(&a, threads);
    if (expect != MAS_OK) fz_check(need == 0, "workspace size %zu for a bad call", need);
    else {
        /* beyond 2^52 cells: SIZE_MAX (mas.h conventions) */
        double cells[4] = {(double)B * N * M, (double)B * N * J, (double)CB * P * M,
                           (double)B * N * n_states};
        for (int k = 0; k < 4; k++)
            if (cells[k] > 0x1p52 * 1.01) fz_check(need == SIZE_MAX, "workspace %zu for %g cells", need, cells[k]);
        fz_check(need > 0, "workspace size 0 for a good call");
    }
    /* with offsets, n_states cannot exceed what was allocated */
    if (offsets && (n_states < 1 || n_states > cd[2])) fz_check(expect != MAS_OK, "bad n_states accepted");
    if (!built && expect == MAS_OK) {
        /* too big to build: the call must still stop before reading values
         * when the lengths or offsets are bad or no workspace can be had */
        if (!(need == SIZE_MAX || !offsets_valid || !lengths_ok)) goto out;
    }
    fz_workspace ws;
    fz_workspace_make(&ws, &r, need == SIZE_MAX ? 4096 : need);
    if (need == SIZE_MAX && ws.mode != 2) ws.mode = 3;
    int64_t expect_item = -1;
    if (expect == MAS_OK) {
        if (!offsets_valid) expect = MAS_ERR_BAD_ARGUMENT;
        else if (!lengths_ok) {
            expect = MAS_ERR_BAD_LENGTH;
            for (int64_t b = 0; b < nb; b++)
                if (!(n_len[b] >= 0 && n_len[b] <= N && s_len[b] >= 0 && s_len[b] <= n_states)) {
                    expect_item = b;
                    break;
                }
        } else if (!ws.alloc || ws.size < need || need == SIZE_MAX)
            expect = MAS_ERR_WORKSPACE_TOO_SMALL;
    }
    if (!built && expect == MAS_OK) { fz_workspace_free(&ws); goto out; }

    fz_debug("loglik: B=%lld N=%lld J=%lld M=%lld S=%lld dtype %d model %d shared %d offsets "
             "%d best %d flags %u threads %d ws %zu of %zu, expect %d\n", (long long)B,
             (long long)N, (long long)J, (long long)M, (long long)n_states, dtype, from_model,
             CB == 1, offsets != NULL, want_best, a.flags, threads, ws.size, need, (int)expect);
    mas_error err;
    mas_status st = mas_loglik_cpu(&a, ws.alloc, ws.size, threads, &err);
    fz_check_status(st, &err);
    if (getenv("FZ_DEBUG") && st == MAS_OK && built && B <= 128 && N <= 4 && J <= 8 && M <= 8) {
        for (int64_t b = 0; b < B; b++)
            for (int64_t n = 0; n < N; n++) {
                fz_debug("b %lld n %lld x:", (long long)b, (long long)n);
                for (int64_t j = 0; j < J; j++) fz_debug(" %g", fz_at(&a.x, b, n, j));
                fz_debug("  out:");
                for (int64_t s = 0; s < n_states; s++) fz_debug(" %g", fz_at(&a.out, b, n, s));
                fz_debug("\n");
            }
        for (int64_t b = 0; b < CB; b++)
            for (int64_t row = 0; row < 2 * J + 1; row++) {
                fz_debug("coef b %lld row %lld:", (long long)b, (long long)row);
                for (int64_t m = 0; m < M; m++) fz_debug(" %g", fz_at(&a.coef, b, row, m));
                fz_debug("\n");
            }
    }
    if (built) FZ_REPLAY_HOOK(fz_replay_loglik(&a, &x, &coef, &out, want_best ? &best : NULL, st));
    fz_check(st == expect && err.item == expect_item,
             "loglik status %d item %lld, expected %d item %lld (B=%lld N=%lld J=%lld M=%lld "
             "S=%lld)", (int)st, (long long)err.item, (int)expect, (long long)expect_item,
             (long long)B, (long long)N, (long long)J, (long long)M, (long long)n_states);
    if (built) {
        fz_check_unchanged(&x, "x");
        fz_check_unchanged(&coef, "coef");
    }
    if (st == MAS_OK)
        check_loglik(&a, (double)N * (double)M * ((double)J + 1) * (double)B <= MAX_REF_WORK);
    fz_workspace_free(&ws);

out:
    fz_view_free(&means); fz_view_free(&spread); fz_view_free(&lw); fz_view_free(&coef);
    fz_view_free(&x); fz_view_free(&out); fz_view_free(&best);
    free(offsets); free(n_len); free(s_len); free(rows); free(xcols); free(ccols); free(crows);
    return 0;
}
