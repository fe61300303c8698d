/* Soft alignment on the CPU (mas.h section 5) against independent references:
 * plain float64 loops written from the formulas in mas.h, brute-force path
 * enumeration on tiny sizes, float64 central finite differences for every
 * gradient, and hard MAS for the max-plus limit. Random layouts with guard
 * bands catch stray writes; inputs are compared byte for byte after calls. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support.h"

static const mas_dtype float_dtypes[4] = {MAS_FLOAT32, MAS_FLOAT64, MAS_FLOAT16, MAS_BFLOAT16};
static const int32_t thread_counts[5] = {1, 2, 3, 0, 8};
static const mas_attention_kind kinds[2] = {MAS_ATTENTION_ONE_TO_MANY,
                                            MAS_ATTENTION_MANY_TO_MANY};
static const char *const kind_names[2] = {"one-to-many", "many-to-many"};

#define OUT_FILL 0xb7
#define WS_FILL 0x69

/* ---------------------------------------------------------------------- */
/* Scalar helpers, written from the definitions                            */
/* ---------------------------------------------------------------------- */

static double lse(double a, double b) {
    double hi = a > b ? a : b, lo = a > b ? b : a;
    if (hi == -INFINITY) return -INFINITY;
    return hi + log1p(exp(lo - hi));
}

static double log_sig(double x) { return x >= 0 ? -log1p(exp(-x)) : x - log1p(exp(x)); }

static mas_dtype accum_of(mas_dtype d) { return d == MAS_FLOAT64 ? MAS_FLOAT64 : MAS_FLOAT32; }

/* Tolerance for a log-domain value of magnitude ref after `ops` additions. */
static double log_tol(mas_dtype accum, double ref, int64_t ops) {
    double eps = accum == MAS_FLOAT64 ? 1e-13 : 2e-6;
    return eps * (1.0 + fabs(ref)) * (4.0 + sqrt((double)ops) * 4.0);
}

static int same_or_close(double got, double want, double tol) {
    if (isinf(want) || isinf(got)) return got == want;
    if (isnan(want) || isnan(got)) return 0;
    return fabs(got - want) <= tol;
}

static void make_view(ts_view *v, mas_dtype dtype, int64_t B, int64_t T, int64_t S, ts_rng *rng,
                      int allow_zero_batch, unsigned char fill) {
    ts_layout layout;
    if (rng) ts_layout_random(rng, &layout, 1, allow_zero_batch);
    else ts_layout_plain(&layout, 0);
    if (!ts_view_make(v, dtype, B, T, S, &layout, fill)) {
        fprintf(stderr, "out of memory\n");
        exit(2);
    }
}

static double at(const mas_tensor3 *t, int64_t b, int64_t i, int64_t j) {
    return ts_load(t->data, ts_view_offset(t, b, i, j), (mas_dtype)t->dtype);
}

static void put(const mas_tensor3 *t, int64_t b, int64_t i, int64_t j, double x) {
    ts_store(t->data, ts_view_offset(t, b, i, j), (mas_dtype)t->dtype, x);
}

/* A snapshot of an input's bytes, to check that a call left it alone. */
typedef struct snapshot {
    unsigned char *bytes;
    size_t n;
} snapshot;
static snapshot snap(const ts_view *v) {
    snapshot s = {malloc(v->alloc_bytes), v->alloc_bytes};
    memcpy(s.bytes, v->alloc, s.n);
    return s;
}
static int unchanged(snapshot *s, const ts_view *v) {
    int ok = memcmp(s->bytes, v->alloc, s->n) == 0;
    free(s->bytes);
    return ok;
}

/* A workspace of `size` bytes, misaligned by 0..7, between guard bands. */
static void *make_workspace(ts_guarded *g, size_t size, ts_rng *rng) {
    size_t mis = (size_t)ts_rng_int(rng, 0, 7);
    if (!ts_guarded_make(g, size + mis, 32, WS_FILL)) exit(2);
    return (unsigned char *)g->data + mis;
}

/* ---------------------------------------------------------------------- */
/* Reference forward-sum                                                   */
/* ---------------------------------------------------------------------- */

/* Cell weight inside the band j - (Y-X) <= i <= j, else -inf (never read). */
static double band_cell(const mas_tensor3 *v, int64_t b, int64_t X, int64_t Y, int64_t i,
                        int64_t j) {
    if (i > j || i < j - (Y - X)) return -INFINITY;
    return at(v, b, i, j);
}

/* log_z and (gamma non-NULL) gamma[i*Y+j] by alpha/beta tables in float64. */
static double ref_forward_sum(const mas_tensor3 *v, int64_t b, int64_t X, int64_t Y,
                              double *gamma) {
    double *al = malloc(sizeof(double) * X * Y), *be = malloc(sizeof(double) * X * Y);
    for (int64_t j = 0; j < Y; j++)
        for (int64_t i = 0; i < X; i++) {
            double stay = j > 0 ? al[i * Y + j - 1] : -INFINITY;
            double move = j > 0 && i > 0 ? al[(i - 1) * Y + j - 1] : (i == 0 && j == 0 ? 0 : -INFINITY);
            al[i * Y + j] = lse(stay, move) + band_cell(v, b, X, Y, i, j);
        }
    for (int64_t j = Y - 1; j >= 0; j--)
        for (int64_t i = X - 1; i >= 0; i--) {
            double stay = j < Y - 1 ? be[i * Y + j + 1] : -INFINITY;
            double move = j < Y - 1 && i < X - 1 ? be[(i + 1) * Y + j + 1]
                                                 : (i == X - 1 && j == Y - 1 ? 0 : -INFINITY);
            be[i * Y + j] = lse(stay, move) + band_cell(v, b, X, Y, i, j);
        }
    double log_z = al[(X - 1) * Y + Y - 1];
    if (gamma)
        for (int64_t k = 0; k < X * Y; k++) {
            double c = band_cell(v, b, X, Y, k / Y, k % Y);
            gamma[k] = al[k] == -INFINITY || be[k] == -INFINITY ? 0 : exp(al[k] + be[k] - c - log_z);
        }
    free(al);
    free(be);
    return log_z;
}

/* log sum over every monotonic path of exp(path sum), by enumeration. */
static double brute_forward_sum(const mas_tensor3 *v, int64_t b, int64_t X, int64_t Y) {
    double total = -INFINITY;
    /* a path = the Y-1 steps, bit k set when frame k+1 advances */
    for (uint32_t mask = 0; mask < (1u << (Y - 1)); mask++) {
        if (__builtin_popcount(mask) != X - 1) continue;
        int64_t i = 0;
        double sum = at(v, b, 0, 0);
        for (int64_t j = 1; j < Y; j++) {
            i += (mask >> (j - 1)) & 1;
            sum += at(v, b, i, j);
        }
        total = lse(total, sum);
    }
    return total;
}

/* ---------------------------------------------------------------------- */
/* One forward-sum call                                                    */
/* ---------------------------------------------------------------------- */

typedef struct fs_case {
    mas_dtype dtype;
    int64_t B, T, S;
    int32_t threads;
    int want_post, want_log_z;
    ts_view value, post;
    ts_guarded log_z, ws;
    int64_t *x, *y;
} fs_case;

static void fs_case_make(fs_case *c, ts_rng *rng, mas_dtype dtype, int64_t B, int64_t T,
                         int64_t S, int random_layout) {
    memset(c, 0, sizeof *c);
    c->dtype = dtype;
    c->B = B;
    c->T = T;
    c->S = S;
    c->threads = thread_counts[ts_rng_int(rng, 0, 4)];
    c->want_post = 1;
    c->want_log_z = 1;
    make_view(&c->value, dtype, B, T, S, random_layout ? rng : NULL, 0, 0);
    make_view(&c->post, accum_of(dtype), B, T, S, random_layout ? rng : NULL, 0, OUT_FILL);
    if (!ts_guarded_make(&c->log_z, (size_t)B * 8, 16, OUT_FILL)) exit(2);
    c->x = calloc((size_t)B, sizeof(int64_t));
    c->y = calloc((size_t)B, sizeof(int64_t));
}

static void fs_case_free(fs_case *c) {
    ts_view_free(&c->value);
    ts_view_free(&c->post);
    ts_guarded_free(&c->log_z);
    ts_guarded_free(&c->ws);
    free(c->x);
    free(c->y);
}

static mas_status fs_case_run(fs_case *c, ts_rng *rng, mas_error *err) {
    size_t size = mas_forward_sum_cpu_workspace_size(c->B, c->T, c->S, c->dtype, c->threads);
    ts_guarded_free(&c->ws);
    void *ws = make_workspace(&c->ws, size, rng);
    mas_tensor3 none;
    memset(&none, 0, sizeof none);
    return mas_forward_sum_cpu(&c->value.tensor, c->x, c->y,
                               c->want_log_z ? c->log_z.data : NULL,
                               c->want_post ? &c->post.tensor : &none, ws, size, c->threads, err);
}

static double log_z_at(const fs_case *c, int64_t b) {
    return accum_of(c->dtype) == MAS_FLOAT64 ? ((double *)c->log_z.data)[b]
                                              : ((float *)c->log_z.data)[b];
}

static void random_lengths(ts_rng *rng, int64_t T, int64_t S, int64_t *x, int64_t *y) {
    *y = ts_rng_chance(rng, 0.3) ? S : ts_rng_int(rng, 1, S);
    int64_t most = T < *y ? T : *y;
    *x = ts_rng_chance(rng, 0.2) ? most : ts_rng_int(rng, 1, most);
}

/* Random values in the lengths (uniform [-3, 1], exact in dtype), -inf on a
 * fraction of them off one random path; outside the lengths and the band,
 * NaN poison (never read). */
static void fs_fill(ts_rng *rng, fs_case *c, double neg_inf_fraction) {
    const mas_tensor3 *v = &c->value.tensor;
    for (int64_t b = 0; b < c->B; b++)
        for (int64_t i = 0; i < c->T; i++)
            for (int64_t j = 0; j < c->S; j++) {
                int inside = i < c->x[b] && j < c->y[b] && i <= j && i >= j - (c->y[b] - c->x[b]);
                double r = ts_round_to_dtype(ts_rng_uniform(rng, -3, 1), c->dtype);
                put(v, b, i, j, inside ? r : NAN);
            }
    if (neg_inf_fraction > 0)
        for (int64_t b = 0; b < c->B; b++)
            if (v->stride[0] != 0 || b == 0)
                ts_sprinkle_neg_inf(rng, v, b, c->x[b], c->y[b], neg_inf_fraction);
}

/* Checks log_z and the posterior of every item against the reference. */
static void fs_check(const fs_case *c) {
    mas_dtype acc = accum_of(c->dtype);
    double *gamma = malloc(sizeof(double) * c->T * c->S);
    int64_t bad_cells = 0, bad_sums = 0;
    for (int64_t b = 0; b < c->B; b++) {
        int64_t X = c->x[b], Y = c->y[b];
        double want = ref_forward_sum(&c->value.tensor, b, X, Y, gamma);
        if (c->want_log_z)
            TS_CHECK(same_or_close(log_z_at(c, b), want, log_tol(acc, want, X + Y)),
                     "item %lld: log_z %.17g, reference %.17g", (long long)b, log_z_at(c, b), want);
        if (!c->want_post) continue;
        double ptol = acc == MAS_FLOAT64 ? 1e-11 : 3e-4;
        for (int64_t j = 0; j < c->S; j++) {
            double sum = 0;
            for (int64_t i = 0; i < c->T; i++) {
                double got = at(&c->post.tensor, b, i, j);
                double w = i < X && j < Y ? gamma[i * Y + j] : 0.0;
                if (!(fabs(got - w) <= ptol) || (w == 0 && got != 0)) {
                    if (bad_cells++ < 5)
                        TS_CHECK(0, "item %lld: gamma[%lld,%lld] = %.9g, reference %.9g",
                                 (long long)b, (long long)i, (long long)j, got, w);
                }
                sum += got;
            }
            if (j < Y && !(fabs(sum - 1) <= ptol * 4 * (1 + X / 8.0)) && bad_sums++ < 3)
                TS_CHECK(0, "item %lld: frame %lld's posterior sums to %.9g", (long long)b,
                         (long long)j, sum);
        }
    }
    TS_CHECK(bad_cells == 0, "%lld posterior cells differ", (long long)bad_cells);
    TS_CHECK(bad_sums == 0, "%lld frames do not sum to 1", (long long)bad_sums);
    TS_CHECK(ts_view_stray_bytes(&c->post, OUT_FILL) == 0, "stray writes around the posterior");
    TS_CHECK(ts_guarded_stray_bytes(&c->log_z, OUT_FILL) == 0, "stray writes around log_z");
    TS_CHECK(ts_guarded_stray_bytes(&c->ws, WS_FILL) == 0, "stray writes around the workspace");
    free(gamma);
}

static void test_forward_sum_random(ts_rng *rng) {
    for (int n = 0; n < 160; n++) {
        int big = n % 8 == 7;
        mas_dtype dt = float_dtypes[ts_rng_int(rng, 0, 3)];
        int64_t B = ts_rng_int(rng, 1, big ? 3 : 5);
        int64_t T = ts_rng_int(rng, 1, big ? 150 : 12), S = ts_rng_int(rng, 1, big ? 260 : 24);
        fs_case c;
        fs_case_make(&c, rng, dt, B, T, S, 1);
        for (int64_t b = 0; b < B; b++) random_lengths(rng, T, S, &c.x[b], &c.y[b]);
        if (c.value.tensor.stride[0] == 0)
            for (int64_t b = 1; b < B; b++) c.x[b] = c.x[0], c.y[b] = c.y[0];
        c.want_post = ts_rng_chance(rng, 0.85);
        c.want_log_z = !c.want_post || ts_rng_chance(rng, 0.8);
        fs_fill(rng, &c, ts_rng_chance(rng, 0.3) ? 0.3 : 0);
        ts_case_begin("forward-sum random %d: %s B=%lld T=%lld S=%lld threads=%d post=%d", n,
                      ts_dtype_name(dt), (long long)B, (long long)T, (long long)S, c.threads,
                      c.want_post);
        snapshot before = snap(&c.value);
        mas_error err;
        mas_status st = fs_case_run(&c, rng, &err);
        TS_CHECK(st == MAS_OK, "status %d (item %lld)", (int)st, (long long)err.item);
        TS_CHECK(unchanged(&before, &c.value), "value was modified");
        if (st == MAS_OK) fs_check(&c);
        ts_case_end();
        fs_case_free(&c);
    }
}

/* The reference and the library against path enumeration. */
static void test_forward_sum_brute(ts_rng *rng) {
    for (int n = 0; n < 60; n++) {
        int64_t T = ts_rng_int(rng, 1, 6), S = ts_rng_int(rng, 1, 9);
        fs_case c;
        fs_case_make(&c, rng, MAS_FLOAT64, 1, T, S, 0);
        random_lengths(rng, T, S, &c.x[0], &c.y[0]);
        fs_fill(rng, &c, 0);
        ts_case_begin("forward-sum brute force %d: X=%lld Y=%lld", n, (long long)c.x[0],
                      (long long)c.y[0]);
        double want = brute_forward_sum(&c.value.tensor, 0, c.x[0], c.y[0]);
        double ref = ref_forward_sum(&c.value.tensor, 0, c.x[0], c.y[0], NULL);
        TS_CHECK(fabs(ref - want) <= 1e-12 * (1 + fabs(want)), "reference %.17g, paths %.17g",
                 ref, want);
        TS_CHECK(fs_case_run(&c, rng, NULL) == MAS_OK, "status");
        TS_CHECK(fabs(log_z_at(&c, 0) - want) <= 1e-12 * (1 + fabs(want)),
                 "log_z %.17g, paths %.17g", log_z_at(&c, 0), want);
        ts_case_end();
        fs_case_free(&c);
    }
}

/* gamma = d log_z / d v by float64 central differences. */
static void test_forward_sum_gradient(ts_rng *rng) {
    for (int n = 0; n < 12; n++) {
        int64_t T = ts_rng_int(rng, 1, 7), S = ts_rng_int(rng, 1, 12);
        fs_case c;
        fs_case_make(&c, rng, MAS_FLOAT64, 1, T, S, 1);
        random_lengths(rng, T, S, &c.x[0], &c.y[0]);
        fs_fill(rng, &c, 0);
        int64_t X = c.x[0], Y = c.y[0];
        ts_case_begin("forward-sum gradient %d: X=%lld Y=%lld", n, (long long)X, (long long)Y);
        TS_CHECK(fs_case_run(&c, rng, NULL) == MAS_OK, "status");
        double *gamma = malloc(sizeof(double) * X * Y);
        for (int64_t i = 0; i < X; i++)
            for (int64_t j = 0; j < Y; j++) gamma[i * Y + j] = at(&c.post.tensor, 0, i, j);
        const double h = 1e-6;
        for (int64_t i = 0; i < X; i++)
            for (int64_t j = i; j <= i + Y - X; j++) {
                double v0 = at(&c.value.tensor, 0, i, j), lz[2];
                for (int k = 0; k < 2; k++) {
                    put(&c.value.tensor, 0, i, j, v0 + (k ? -h : h));
                    fs_case_run(&c, rng, NULL);
                    lz[k] = log_z_at(&c, 0);
                }
                put(&c.value.tensor, 0, i, j, v0);
                double fd = (lz[0] - lz[1]) / (2 * h);
                TS_CHECK(fabs(fd - gamma[i * Y + j]) <= 1e-7, "cell (%lld,%lld): gamma %.12g, fd %.12g",
                         (long long)i, (long long)j, gamma[i * Y + j], fd);
            }
        free(gamma);
        ts_case_end();
        fs_case_free(&c);
    }
}

/* tau * log_z(v / tau) -> the hard-MAS score as tau -> 0: the gap lies in
 * [0, tau * log(number of paths)]. */
static void test_max_plus_limit(ts_rng *rng) {
    for (int n = 0; n < 20; n++) {
        int64_t T = ts_rng_int(rng, 1, 40), S = ts_rng_int(rng, 1, 90);
        const double tau = 1e-5;
        fs_case c;
        fs_case_make(&c, rng, MAS_FLOAT64, 2, T, S, 0);
        for (int b = 0; b < 2; b++) random_lengths(rng, T, S, &c.x[b], &c.y[b]);
        fs_fill(rng, &c, 0);
        double score[2];
        mas_hard_outputs out;
        memset(&out, 0, sizeof out);
        out.score = score;
        size_t hsize = mas_hard_cpu_workspace_size(2, T, S, MAS_FLOAT64, 1);
        void *hws = malloc(hsize);
        mas_status hst = mas_hard_cpu(&c.value.tensor, c.x, c.y, &out, hws, hsize, 1, NULL);
        free(hws);
        for (int b = 0; b < 2; b++)
            for (int64_t i = 0; i < T; i++)
                for (int64_t j = 0; j < S; j++)
                    put(&c.value.tensor, b, i, j, at(&c.value.tensor, b, i, j) / tau);
        c.want_post = 0;
        ts_case_begin("max-plus limit %d: T=%lld S=%lld", n, (long long)T, (long long)S);
        TS_CHECK(hst == MAS_OK, "hard status %d", (int)hst);
        TS_CHECK(fs_case_run(&c, rng, NULL) == MAS_OK, "status");
        for (int b = 0; b < 2; b++) {
            double gap = tau * log_z_at(&c, b) - score[b];
            double most = tau * (double)(c.y[b] - 1) * log(2.0) + 1e-9 * (1 + fabs(score[b]));
            TS_CHECK(gap >= -1e-9 * (1 + fabs(score[b])) && gap <= most,
                     "item %d: tau*log_z - score = %.3g (bound %.3g; log_z %g score %g)", b, gap,
                     most, log_z_at(&c, b), score[b]);
        }
        ts_case_end();
        fs_case_free(&c);
    }
}

/* -inf cells (masked scores) off a path: finite log_z, no NaN anywhere. */
static void test_forward_sum_neg_inf(ts_rng *rng) {
    for (int n = 0; n < 30; n++) {
        mas_dtype dt = float_dtypes[n % 4];
        int64_t T = ts_rng_int(rng, 1, 70), S = ts_rng_int(rng, 1, 140);
        fs_case c;
        fs_case_make(&c, rng, dt, 2, T, S, 1);
        for (int b = 0; b < 2; b++) random_lengths(rng, T, S, &c.x[b], &c.y[b]);
        if (c.value.tensor.stride[0] == 0) c.x[1] = c.x[0], c.y[1] = c.y[0];
        fs_fill(rng, &c, 0.7);
        ts_case_begin("forward-sum -inf cells %d: %s T=%lld S=%lld", n, ts_dtype_name(dt),
                      (long long)T, (long long)S);
        TS_CHECK(fs_case_run(&c, rng, NULL) == MAS_OK, "status");
        int64_t nans = 0;
        for (int64_t b = 0; b < 2; b++)
            for (int64_t i = 0; i < T; i++)
                for (int64_t j = 0; j < S; j++) nans += isnan(at(&c.post.tensor, b, i, j));
        TS_CHECK(nans == 0, "%lld NaN in the posterior", (long long)nans);
        fs_check(&c);
        ts_case_end();
        fs_case_free(&c);
    }
}

static void test_forward_sum_errors(ts_rng *rng) {
    /* item errors: the lowest failing item is reported, the others computed */
    static const char *const what[6] = {"x_len > y_len", "x_len = 0", "y_len > S",
                                        "NaN in the band", "no finite path", "+inf in the band"};
    static const mas_status expect[6] = {MAS_ERR_X_LEN_GT_Y_LEN, MAS_ERR_BAD_LENGTH,
                                         MAS_ERR_BAD_LENGTH, MAS_ERR_NONFINITE_VALUE,
                                         MAS_ERR_NO_FINITE_PATH, MAS_ERR_NONFINITE_VALUE};
    for (int e = 0; e < 6; e++) {
        fs_case c;
        fs_case_make(&c, rng, float_dtypes[e % 4], 4, 6, 10, 1);
        if (c.value.tensor.stride[0] == 0) {
            fs_case_free(&c);
            fs_case_make(&c, rng, float_dtypes[e % 4], 4, 6, 10, 0);
        }
        for (int b = 0; b < 4; b++) {
            c.x[b] = 3 + b % 2;
            c.y[b] = 8;
        }
        fs_fill(rng, &c, 0);
        int64_t bad = ts_rng_int(rng, 0, 2);
        switch (e) {
        case 0: c.x[bad] = 6, c.y[bad] = 5; break;
        case 1: c.x[bad] = 0; break;
        case 2: c.y[bad] = 11; break;
        case 3: put(&c.value.tensor, bad, 1, 2, NAN); break;
        case 4:
            for (int64_t i = 0; i < c.x[bad]; i++) put(&c.value.tensor, bad, i, 4, -INFINITY);
            break;
        case 5: put(&c.value.tensor, bad, c.x[bad] - 1, 7, INFINITY); break;
        }
        c.x[3] = 0; /* a later bad item */
        ts_case_begin("forward-sum error: %s at item %lld", what[e], (long long)bad);
        mas_error err;
        mas_status st = fs_case_run(&c, rng, &err);
        TS_CHECK(st == expect[e], "status %d, expected %d", (int)st, (int)expect[e]);
        TS_CHECK(err.status == (int32_t)expect[e] && err.item == bad, "err (%d, %lld)",
                 (int)err.status, (long long)err.item);
        TS_CHECK(log_z_at(&c, bad) == -INFINITY, "failed item's log_z %g", log_z_at(&c, bad));
        for (int64_t i = 0; i < 6; i++)
            for (int64_t j = 0; j < 10; j++)
                if (at(&c.post.tensor, bad, i, j) != 0) {
                    TS_CHECK(0, "failed item's gamma[%lld,%lld] != 0", (long long)i, (long long)j);
                    i = 6;
                    break;
                }
        /* the good items are still right */
        for (int64_t b = 0; b < 3; b++) {
            if (b == bad) continue;
            double want = ref_forward_sum(&c.value.tensor, b, c.x[b], c.y[b], NULL);
            TS_CHECK(same_or_close(log_z_at(&c, b), want, log_tol(accum_of(c.dtype), want, 20)),
                     "item %lld: log_z %.9g, reference %.9g", (long long)b, log_z_at(&c, b), want);
        }
        ts_case_end();
        fs_case_free(&c);
    }
    {
        /* NaN off the band and outside the lengths is never read */
        fs_case c;
        fs_case_make(&c, rng, MAS_FLOAT32, 1, 5, 9, 0);
        c.x[0] = 3;
        c.y[0] = 6;
        fs_fill(rng, &c, 0);
        put(&c.value.tensor, 0, 2, 1, NAN);      /* i > j */
        put(&c.value.tensor, 0, 0, 5, INFINITY); /* j - i > Y - X */
        ts_case_begin("forward-sum: NaN and +inf off the band are ignored");
        TS_CHECK(fs_case_run(&c, rng, NULL) == MAS_OK, "status");
        fs_check(&c);
        ts_case_end();
        fs_case_free(&c);
    }
    {
        fs_case c;
        fs_case_make(&c, rng, MAS_FLOAT32, 2, 4, 5, 0);
        for (int b = 0; b < 2; b++) c.x[b] = 2, c.y[b] = 4;
        fs_fill(rng, &c, 0);
        ts_case_begin("forward-sum argument errors");
        size_t size = mas_forward_sum_cpu_workspace_size(2, 4, 5, MAS_FLOAT32, 1);
        void *ws = malloc(size);
        mas_error err;
        TS_CHECK(mas_forward_sum_cpu(&c.value.tensor, c.x, c.y, c.log_z.data, &c.post.tensor, ws,
                                     size - 1, 1, &err) == MAS_ERR_WORKSPACE_TOO_SMALL &&
                     err.item == -1,
                 "small workspace");
        TS_CHECK(mas_forward_sum_cpu(&c.value.tensor, NULL, c.y, c.log_z.data, NULL, ws, size, 1,
                                     &err) == MAS_ERR_NULL_POINTER,
                 "NULL x_len");
        c.post.tensor.dtype = MAS_FLOAT64;
        TS_CHECK(mas_forward_sum_cpu(&c.value.tensor, c.x, c.y, c.log_z.data, &c.post.tensor, ws,
                                     size, 1, &err) == MAS_ERR_BAD_DTYPE,
                 "posterior of another dtype than the accumulator");
        c.post.tensor.dtype = MAS_FLOAT32;
        c.post.tensor.dim[2] = 4;
        TS_CHECK(mas_forward_sum_cpu(&c.value.tensor, c.x, c.y, c.log_z.data, &c.post.tensor, ws,
                                     size, 1, &err) == MAS_ERR_BAD_SHAPE,
                 "posterior of another shape");
        c.post.tensor.dim[2] = 5;
        TS_CHECK(mas_forward_sum_cpu(&c.value.tensor, c.x, c.y, NULL, NULL, ws, size, 1, &err) ==
                     MAS_ERR_BAD_ARGUMENT,
                 "no output");
        free(ws);
        ts_case_end();
        fs_case_free(&c);
    }
}

/* ---------------------------------------------------------------------- */
/* Reference monotonic attention                                           */
/* ---------------------------------------------------------------------- */

/* log phi[i*m + j] of item b for n x m, straight from the formulas. */
static void ref_attention(mas_attention_kind kind, const mas_tensor3 *x, int64_t b, int64_t n,
                          int64_t m, double *lp) {
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < m; j++) {
            double r;
            if (i == 0 && j == 0) r = 0;
            else if (kind == MAS_ATTENTION_ONE_TO_MANY) {
                if (i == 0) r = -INFINITY;
                else {
                    double stay = lp[(i - 1) * m + j] + log_sig(at(x, b, i - 1, j));
                    double move = j > 0 ? lp[(i - 1) * m + j - 1] + log_sig(-at(x, b, i - 1, j - 1))
                                        : -INFINITY;
                    r = lse(stay, move);
                }
            } else {
                double right = j > 0 ? lp[i * m + j - 1] + log_sig(at(x, b, i, j - 1)) : -INFINITY;
                double down = i > 0 ? lp[(i - 1) * m + j] + log_sig(-at(x, b, i - 1, j)) : -INFINITY;
                r = lse(right, down);
            }
            lp[i * m + j] = r;
        }
}

/* m2m phi(i,j) as the sum over every right/down path of its probability. */
static double brute_m2m(const mas_tensor3 *x, int64_t b, int64_t i, int64_t j) {
    double total = 0;
    int64_t len = i + j;
    for (uint32_t mask = 0; mask < (1u << len); mask++) {
        if (__builtin_popcount(mask) != i) continue; /* bit set: a move down */
        int64_t r = 0, c = 0;
        double p = 1;
        for (int64_t k = 0; k < len; k++) {
            double s = 1 / (1 + exp(-at(x, b, r, c)));
            if ((mask >> k) & 1) p *= 1 - s, r++;
            else p *= s, c++;
        }
        total += p;
    }
    return total;
}

typedef struct att_case {
    mas_attention_kind kind;
    mas_dtype dtype;
    int64_t B, N, M;
    int32_t threads;
    ts_view logits, log_phi, grad_out, grad;
    ts_guarded ws;
    int64_t *n, *m;
    int lengths_given;
} att_case;

static void att_case_make(att_case *c, ts_rng *rng, mas_attention_kind kind, mas_dtype dtype,
                          int64_t B, int64_t N, int64_t M, int random_layout) {
    memset(c, 0, sizeof *c);
    c->kind = kind;
    c->dtype = dtype;
    c->B = B;
    c->N = N;
    c->M = M;
    c->threads = thread_counts[ts_rng_int(rng, 0, 4)];
    ts_rng *lr = random_layout ? rng : NULL;
    make_view(&c->logits, dtype, B, N, M, lr, 0, 0);
    make_view(&c->log_phi, accum_of(dtype), B, N, M, lr, 0, OUT_FILL);
    make_view(&c->grad_out, accum_of(dtype), B, N, M, lr, 0, 0);
    make_view(&c->grad, accum_of(dtype), B, N, M, lr, 0, OUT_FILL);
    c->n = calloc((size_t)B, sizeof(int64_t));
    c->m = calloc((size_t)B, sizeof(int64_t));
    c->lengths_given = 1;
    for (int64_t b = 0; b < B; b++) c->n[b] = N, c->m[b] = M;
}

static void att_case_free(att_case *c) {
    ts_view_free(&c->logits);
    ts_view_free(&c->log_phi);
    ts_view_free(&c->grad_out);
    ts_view_free(&c->grad);
    ts_guarded_free(&c->ws);
    free(c->n);
    free(c->m);
}

static void *att_workspace(att_case *c, ts_rng *rng, size_t *size) {
    *size = mas_attention_cpu_workspace_size(c->B, c->N, c->M, c->dtype, c->threads);
    ts_guarded_free(&c->ws);
    return make_workspace(&c->ws, *size, rng);
}

static mas_status att_forward(att_case *c, ts_rng *rng, mas_error *err) {
    size_t size;
    void *ws = att_workspace(c, rng, &size);
    return mas_attention_forward_cpu(c->kind, &c->logits.tensor, c->lengths_given ? c->n : NULL,
                                     c->lengths_given ? c->m : NULL, &c->log_phi.tensor, ws, size,
                                     c->threads, err);
}

static mas_status att_backward(att_case *c, ts_rng *rng, mas_error *err) {
    size_t size;
    void *ws = att_workspace(c, rng, &size);
    return mas_attention_backward_cpu(c->kind, &c->logits.tensor, c->lengths_given ? c->n : NULL,
                                      c->lengths_given ? c->m : NULL, &c->log_phi.tensor,
                                      &c->grad_out.tensor, &c->grad.tensor, ws, size, c->threads,
                                      err);
}

/* Logits in [-lo, hi], exact in dtype; NaN poison outside the lengths. */
static void att_fill(ts_rng *rng, att_case *c, double scale) {
    for (int64_t b = 0; b < c->B; b++)
        for (int64_t i = 0; i < c->N; i++)
            for (int64_t j = 0; j < c->M; j++) {
                int inside = i < c->n[b] && j < c->m[b];
                double r = ts_round_to_dtype(ts_rng_uniform(rng, -scale, scale), c->dtype);
                put(&c->logits.tensor, b, i, j, inside ? r : NAN);
                put(&c->grad_out.tensor, b, i, j, ts_rng_uniform(rng, -1, 1));
            }
}

static void att_check_forward(const att_case *c) {
    mas_dtype acc = accum_of(c->dtype);
    double *lp = malloc(sizeof(double) * c->N * c->M);
    int64_t bad = 0;
    for (int64_t b = 0; b < c->B; b++) {
        int64_t n = c->n[b], m = c->m[b];
        ref_attention(c->kind, &c->logits.tensor, b, n, m, lp);
        for (int64_t i = 0; i < c->N; i++)
            for (int64_t j = 0; j < c->M; j++) {
                double want = i < n && j < m ? lp[i * m + j] : -INFINITY;
                double got = at(&c->log_phi.tensor, b, i, j);
                if (!same_or_close(got, want, log_tol(acc, want, i + j + 1)) && bad++ < 5)
                    TS_CHECK(0, "item %lld: log_phi[%lld,%lld] = %.9g, reference %.9g",
                             (long long)b, (long long)i, (long long)j, got, want);
            }
    }
    TS_CHECK(bad == 0, "%lld log_phi cells differ", (long long)bad);
    TS_CHECK(ts_view_stray_bytes(&c->log_phi, OUT_FILL) == 0, "stray writes around log_phi");
    TS_CHECK(ts_guarded_stray_bytes(&c->ws, WS_FILL) == 0, "stray writes around the workspace");
    free(lp);
}

static void test_attention_forward_random(ts_rng *rng) {
    for (int n = 0; n < 200; n++) {
        int big = n % 8 == 7;
        mas_attention_kind kind = kinds[n % 2];
        mas_dtype dt = float_dtypes[ts_rng_int(rng, 0, 3)];
        int64_t B = ts_rng_int(rng, 1, big ? 3 : 5);
        int64_t N = ts_rng_int(rng, 1, big ? 150 : 12), M = ts_rng_int(rng, 1, big ? 150 : 12);
        att_case c;
        att_case_make(&c, rng, kind, dt, B, N, M, 1);
        c.lengths_given = ts_rng_chance(rng, 0.8);
        if (c.lengths_given)
            for (int64_t b = 0; b < B; b++) {
                c.n[b] = ts_rng_chance(rng, 0.3) ? N : ts_rng_int(rng, 1, N);
                c.m[b] = ts_rng_chance(rng, 0.3) ? M : ts_rng_int(rng, 1, M);
            }
        att_fill(rng, &c, 4);
        ts_case_begin("%s forward random %d: %s B=%lld N=%lld M=%lld threads=%d lengths=%d "
                      "(n0=%lld m0=%lld) strides %lld,%lld,%lld out %lld,%lld,%lld",
                      kind_names[n % 2], n, ts_dtype_name(dt), (long long)B, (long long)N,
                      (long long)M, c.threads, c.lengths_given, (long long)c.n[0],
                      (long long)c.m[0], (long long)c.logits.tensor.stride[0],
                      (long long)c.logits.tensor.stride[1], (long long)c.logits.tensor.stride[2],
                      (long long)c.log_phi.tensor.stride[0], (long long)c.log_phi.tensor.stride[1],
                      (long long)c.log_phi.tensor.stride[2]);
        snapshot before = snap(&c.logits);
        mas_error err;
        mas_status st = att_forward(&c, rng, &err);
        TS_CHECK(st == MAS_OK, "status %d (item %lld)", (int)st, (long long)err.item);
        TS_CHECK(unchanged(&before, &c.logits), "logits were modified");
        att_check_forward(&c);
        ts_case_end();
        att_case_free(&c);
    }
}

static void test_m2m_brute(ts_rng *rng) {
    for (int n = 0; n < 30; n++) {
        int64_t N = ts_rng_int(rng, 1, 6), M = ts_rng_int(rng, 1, 6);
        att_case c;
        att_case_make(&c, rng, MAS_ATTENTION_MANY_TO_MANY, MAS_FLOAT64, 1, N, M, 0);
        att_fill(rng, &c, 3);
        ts_case_begin("m2m brute force %d: N=%lld M=%lld", n, (long long)N, (long long)M);
        TS_CHECK(att_forward(&c, rng, NULL) == MAS_OK, "status");
        double *lp = malloc(sizeof(double) * N * M);
        ref_attention(c.kind, &c.logits.tensor, 0, N, M, lp);
        for (int64_t i = 0; i < N; i++)
            for (int64_t j = 0; j < M; j++) {
                double phi = brute_m2m(&c.logits.tensor, 0, i, j);
                TS_CHECK(fabs(exp(lp[i * M + j]) - phi) <= 1e-13, "reference (%lld,%lld)",
                         (long long)i, (long long)j);
                TS_CHECK(fabs(exp(at(&c.log_phi.tensor, 0, i, j)) - phi) <= 1e-13,
                         "phi(%lld,%lld) = %.17g, paths %.17g", (long long)i, (long long)j,
                         exp(at(&c.log_phi.tensor, 0, i, j)), phi);
            }
        free(lp);
        ts_case_end();
        att_case_free(&c);
    }
}

/* L = sum of g * log_phi over the finite cells, from the library's float64
 * forward. */
static double att_loss(att_case *c, ts_rng *rng) {
    att_forward(c, rng, NULL);
    double loss = 0;
    for (int64_t b = 0; b < c->B; b++)
        for (int64_t i = 0; i < c->N; i++)
            for (int64_t j = 0; j < c->M; j++) {
                double lp = at(&c->log_phi.tensor, b, i, j);
                if (lp != -INFINITY) loss += at(&c->grad_out.tensor, b, i, j) * lp;
            }
    return loss;
}

static void test_attention_gradient(ts_rng *rng) {
    for (int n = 0; n < 24; n++) {
        mas_attention_kind kind = kinds[n % 2];
        int64_t B = ts_rng_int(rng, 1, 2), N = ts_rng_int(rng, 1, 6), M = ts_rng_int(rng, 1, 6);
        att_case c;
        att_case_make(&c, rng, kind, MAS_FLOAT64, B, N, M, 1);
        for (int64_t b = 0; b < B; b++) c.n[b] = ts_rng_int(rng, 1, N), c.m[b] = ts_rng_int(rng, 1, M);
        att_fill(rng, &c, 3);
        ts_case_begin("%s gradient %d: B=%lld N=%lld M=%lld", kind_names[n % 2], n, (long long)B,
                      (long long)N, (long long)M);
        TS_CHECK(att_forward(&c, rng, NULL) == MAS_OK, "forward status");
        snapshot before = snap(&c.log_phi);
        TS_CHECK(att_backward(&c, rng, NULL) == MAS_OK, "backward status");
        TS_CHECK(unchanged(&before, &c.log_phi), "log_phi was modified");
        TS_CHECK(ts_view_stray_bytes(&c.grad, OUT_FILL) == 0, "stray writes around the gradient");
        double *grad = malloc(sizeof(double) * B * N * M);
        for (int64_t b = 0; b < B; b++)
            for (int64_t i = 0; i < N; i++)
                for (int64_t j = 0; j < M; j++) grad[(b * N + i) * M + j] = at(&c.grad.tensor, b, i, j);
        const double h = 1e-6;
        for (int64_t b = 0; b < B; b++)
            for (int64_t i = 0; i < N; i++)
                for (int64_t j = 0; j < M; j++) {
                    double got = grad[(b * N + i) * M + j];
                    if (i >= c.n[b] || j >= c.m[b]) {
                        TS_CHECK(got == 0, "item %lld: grad[%lld,%lld] = %g outside the lengths",
                                 (long long)b, (long long)i, (long long)j, got);
                        continue;
                    }
                    double x0 = at(&c.logits.tensor, b, i, j), l[2];
                    for (int k = 0; k < 2; k++) {
                        put(&c.logits.tensor, b, i, j, x0 + (k ? -h : h));
                        l[k] = att_loss(&c, rng);
                    }
                    put(&c.logits.tensor, b, i, j, x0);
                    double fd = (l[0] - l[1]) / (2 * h);
                    TS_CHECK(fabs(fd - got) <= 1e-7 * (1 + fabs(fd)),
                             "item %lld: grad[%lld,%lld] = %.12g, fd %.12g", (long long)b,
                             (long long)i, (long long)j, got, fd);
                }
        free(grad);
        ts_case_end();
        att_case_free(&c);
    }
}

/* float32 (and float16/bfloat16) backward against the float64 one on the
 * same logits, over sizes that span several tiles. */
static void test_attention_backward_dtypes(ts_rng *rng) {
    for (int n = 0; n < 24; n++) {
        mas_attention_kind kind = kinds[n % 2];
        mas_dtype dt = float_dtypes[n / 2 % 4 == 1 ? 0 : n / 2 % 4];
        int64_t B = ts_rng_int(rng, 1, 3), N = ts_rng_int(rng, 1, 90), M = ts_rng_int(rng, 1, 90);
        att_case c, d;
        att_case_make(&c, rng, kind, dt, B, N, M, 1);
        att_case_make(&d, rng, kind, MAS_FLOAT64, B, N, M, 0);
        for (int64_t b = 0; b < B; b++) {
            c.n[b] = d.n[b] = ts_rng_int(rng, 1, N);
            c.m[b] = d.m[b] = ts_rng_int(rng, 1, M);
        }
        att_fill(rng, &c, 3);
        for (int64_t b = 0; b < B; b++)
            for (int64_t i = 0; i < N; i++)
                for (int64_t j = 0; j < M; j++) {
                    put(&d.logits.tensor, b, i, j, at(&c.logits.tensor, b, i, j));
                    put(&d.grad_out.tensor, b, i, j, at(&c.grad_out.tensor, b, i, j));
                }
        ts_case_begin("%s backward %s vs float64 %d: B=%lld N=%lld M=%lld threads=%d",
                      kind_names[n % 2], ts_dtype_name(dt), n, (long long)B, (long long)N,
                      (long long)M, c.threads);
        TS_CHECK(att_forward(&c, rng, NULL) == MAS_OK && att_forward(&d, rng, NULL) == MAS_OK,
                 "forward status");
        att_check_forward(&c);
        TS_CHECK(att_backward(&c, rng, NULL) == MAS_OK && att_backward(&d, rng, NULL) == MAS_OK,
                 "backward status");
        double scale = 0;
        for (int64_t b = 0; b < B; b++)
            for (int64_t i = 0; i < N; i++)
                for (int64_t j = 0; j < M; j++) scale = fmax(scale, fabs(at(&d.grad.tensor, b, i, j)));
        int64_t bad = 0;
        double tol = dt == MAS_FLOAT64 ? 1e-12 : 2e-4 * (1 + scale) * (1 + sqrt((double)(N + M)));
        for (int64_t b = 0; b < B; b++)
            for (int64_t i = 0; i < N; i++)
                for (int64_t j = 0; j < M; j++) {
                    double got = at(&c.grad.tensor, b, i, j), want = at(&d.grad.tensor, b, i, j);
                    if (!(fabs(got - want) <= tol) && bad++ < 5)
                        TS_CHECK(0, "item %lld: grad[%lld,%lld] = %.9g, float64 %.9g",
                                 (long long)b, (long long)i, (long long)j, got, want);
                }
        TS_CHECK(bad == 0, "%lld gradient cells differ", (long long)bad);
        TS_CHECK(ts_view_stray_bytes(&c.grad, OUT_FILL) == 0, "stray writes around the gradient");
        ts_case_end();
        att_case_free(&c);
        att_case_free(&d);
    }
}

/* Logits of +-1e4 and -inf: no NaN in log_phi or the gradient. */
static void test_attention_extremes(ts_rng *rng) {
    for (int n = 0; n < 40; n++) {
        mas_attention_kind kind = kinds[n % 2];
        mas_dtype dt = float_dtypes[n / 2 % 4];
        int64_t N = ts_rng_int(rng, 1, 70), M = ts_rng_int(rng, 1, 70);
        att_case c;
        att_case_make(&c, rng, kind, dt, 2, N, M, 1);
        att_fill(rng, &c, 3);
        for (int64_t b = 0; b < 2; b++)
            for (int64_t i = 0; i < N; i++)
                for (int64_t j = 0; j < M; j++) {
                    double r = ts_rng_unit(rng);
                    double x = r < 0.3 ? 1e4 : r < 0.6 ? -1e4 : r < 0.7 ? -INFINITY
                               : r < 0.75 ? INFINITY : at(&c.logits.tensor, b, i, j);
                    put(&c.logits.tensor, b, i, j, x);
                }
        ts_case_begin("%s extremes %d: %s N=%lld M=%lld", kind_names[n % 2], n, ts_dtype_name(dt),
                      (long long)N, (long long)M);
        TS_CHECK(att_forward(&c, rng, NULL) == MAS_OK, "forward status");
        att_check_forward(&c);
        TS_CHECK(att_backward(&c, rng, NULL) == MAS_OK, "backward status");
        int64_t nans = 0;
        for (int64_t b = 0; b < 2; b++)
            for (int64_t i = 0; i < N; i++)
                for (int64_t j = 0; j < M; j++)
                    nans += isnan(at(&c.log_phi.tensor, b, i, j)) ||
                            !isfinite(at(&c.grad.tensor, b, i, j));
        TS_CHECK(nans == 0, "%lld NaN or infinite cells", (long long)nans);
        ts_case_end();
        att_case_free(&c);
    }
}

static void test_attention_errors(ts_rng *rng) {
    for (int k = 0; k < 2; k++) {
        att_case c;
        att_case_make(&c, rng, kinds[k], MAS_FLOAT32, 4, 6, 7, 0);
        att_fill(rng, &c, 3);
        ts_case_begin("%s errors", kind_names[k]);
        c.n[1] = 0;
        c.m[3] = 8;
        mas_error err;
        TS_CHECK(att_forward(&c, rng, &err) == MAS_ERR_BAD_LENGTH && err.item == 1,
                 "n_len 0: item %lld", (long long)err.item);
        TS_CHECK(at(&c.log_phi.tensor, 1, 0, 0) == -INFINITY, "failed item's log_phi");
        TS_CHECK(att_backward(&c, rng, &err) == MAS_ERR_BAD_LENGTH && err.item == 1,
                 "backward n_len 0");
        TS_CHECK(at(&c.grad.tensor, 1, 0, 0) == 0, "failed item's gradient");
        c.n[1] = 6;
        c.m[3] = 7;
        put(&c.logits.tensor, 2, 1, 1, NAN);
        TS_CHECK(att_forward(&c, rng, &err) == MAS_ERR_NONFINITE_VALUE && err.item == 2,
                 "NaN logit: status %d item %lld", (int)err.status, (long long)err.item);
        put(&c.logits.tensor, 2, 1, 1, 0.5);
        /* at (0,0) the NaN meets a -inf (no state below state 0) */
        put(&c.logits.tensor, 0, 0, 0, NAN);
        TS_CHECK(att_forward(&c, rng, &err) == MAS_ERR_NONFINITE_VALUE && err.item == 0,
                 "NaN logit at (0,0): status %d item %lld", (int)err.status, (long long)err.item);
        put(&c.logits.tensor, 0, 0, 0, 0.5);
        /* NaN that no cell reads: one-to-many, the last row's (no edge
         * leaves it) and one above the diagonal (unreachable); m2m, the
         * last cell's */
        int64_t ni = k == 0 ? 5 : 5, nj = k == 0 ? 3 : 6;
        put(&c.logits.tensor, 2, ni, nj, NAN);
        if (k == 0) put(&c.logits.tensor, 2, 1, 4, NAN);
        TS_CHECK(att_forward(&c, rng, &err) == MAS_OK, "NaN that is never read");
        if (k == 0) put(&c.logits.tensor, 2, 1, 4, 0.25);
        put(&c.logits.tensor, 2, ni, nj, 0.25);
        size_t size = mas_attention_cpu_workspace_size(4, 6, 7, MAS_FLOAT32, c.threads);
        void *ws = malloc(size);
        TS_CHECK(mas_attention_forward_cpu(kinds[k], &c.logits.tensor, c.n, c.m, &c.log_phi.tensor,
                                           ws, size - 1, c.threads, &err) ==
                     MAS_ERR_WORKSPACE_TOO_SMALL,
                 "small workspace");
        TS_CHECK(mas_attention_forward_cpu((mas_attention_kind)7, &c.logits.tensor, c.n, c.m,
                                           &c.log_phi.tensor, ws, size, c.threads, &err) ==
                     MAS_ERR_BAD_ARGUMENT,
                 "bad kind");
        c.log_phi.tensor.dtype = MAS_FLOAT16;
        TS_CHECK(mas_attention_forward_cpu(kinds[k], &c.logits.tensor, c.n, c.m, &c.log_phi.tensor,
                                           ws, size, c.threads, &err) == MAS_ERR_BAD_DTYPE,
                 "log_phi not of the accumulator type");
        c.log_phi.tensor.dtype = MAS_FLOAT32;
        c.grad.tensor.dim[1] = 5;
        TS_CHECK(mas_attention_backward_cpu(kinds[k], &c.logits.tensor, c.n, c.m,
                                            &c.log_phi.tensor, &c.grad_out.tensor, &c.grad.tensor,
                                            ws, size, c.threads, &err) == MAS_ERR_BAD_SHAPE,
                 "gradient of another shape");
        c.grad.tensor.dim[1] = 6;
        free(ws);
        ts_case_end();
        att_case_free(&c);
    }
}

int main(int argc, char **argv) {
    uint64_t seed = ts_seed_from_args(argc, argv);
    ts_rng rng;
    ts_rng_init(&rng, seed);
    test_forward_sum_random(&rng);
    test_forward_sum_brute(&rng);
    test_forward_sum_gradient(&rng);
    test_max_plus_limit(&rng);
    test_forward_sum_neg_inf(&rng);
    test_forward_sum_errors(&rng);
    test_attention_forward_random(&rng);
    test_m2m_brute(&rng);
    test_attention_gradient(&rng);
    test_attention_backward_dtypes(&rng);
    test_attention_extremes(&rng);
    test_attention_errors(&rng);
    return ts_finish();
}
