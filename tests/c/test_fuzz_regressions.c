/* Regressions of the fuzz targets' findings (bench/results/fuzz.md). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mas.h"

static int failures;
#define CHECK(c, ...) do { if (!(c)) { printf("FAIL %s:%d: ", __FILE__, __LINE__); \
    printf(__VA_ARGS__); printf("\n"); failures++; } } while (0)

/* Finding 1: huge shapes give SIZE_MAX, and a call with a real workspace is
 * refused, not run. */
static void huge_workspace(void) {
    int64_t big = (int64_t)1 << 40;
    CHECK(mas_hard_cpu_workspace_size(2, big, big, MAS_FLOAT32, 1) == SIZE_MAX, "hard");
    CHECK(mas_hard_cpu_workspace_size(INT64_MAX, 2, 2, MAS_FLOAT32, 1) == SIZE_MAX, "hard B");
    CHECK(mas_forward_sum_cpu_workspace_size(1, big, big, MAS_FLOAT64, 1) == SIZE_MAX, "fs");
    CHECK(mas_attention_cpu_workspace_size(1, big, big, MAS_FLOAT32, 1) == SIZE_MAX, "att");
    float v[4] = {0, 0, 0, 0}, score = 0;
    mas_tensor3 value = {v, MAS_FLOAT32, 0, {1, big, big}, {0, 2, 1}};
    int64_t x = 2, y = 2;
    mas_hard_outputs out;
    memset(&out, 0, sizeof out);
    out.score = &score;
    static unsigned char ws[1 << 16];
    mas_status st = mas_hard_cpu(&value, &x, &y, &out, ws, sizeof ws, 1, NULL);
    CHECK(st == MAS_ERR_WORKSPACE_TOO_SMALL, "hard on huge dims: %d", (int)st);
}

/* Finding 2: forward-sum with a posterior, 256 < B < threads. */
static void many_items_many_threads(void) {
    const int64_t B = 300, T = 2, S = 3;
    double *v = calloc((size_t)(B * T * S), sizeof(double));
    double *post = calloc((size_t)(B * T * S), sizeof(double));
    double *lz = calloc((size_t)B, sizeof(double));
    int64_t *x = malloc((size_t)B * sizeof(int64_t)), *y = malloc((size_t)B * sizeof(int64_t));
    for (int64_t b = 0; b < B; b++) { x[b] = 2; y[b] = 3; }
    mas_tensor3 value = {v, MAS_FLOAT64, 0, {B, T, S}, {T * S, S, 1}};
    mas_tensor3 p = {post, MAS_FLOAT64, 0, {B, T, S}, {T * S, S, 1}};
    int32_t threads = 1000;
    size_t n = mas_forward_sum_cpu_workspace_size(B, T, S, MAS_FLOAT64, threads);
    void *ws = malloc(n);
    mas_error err;
    mas_status st = mas_forward_sum_cpu(&value, x, y, lz, &p, ws, n, threads, &err);
    CHECK(st == MAS_OK, "status %d item %lld", (int)st, (long long)err.item);
    /* all-zero values over 2 x 3: two paths, log_z = log 2 */
    for (int64_t b = 0; b < B; b++)
        CHECK(fabs(lz[b] - log(2.0)) < 1e-12, "item %lld: log_z %g", (long long)b, lz[b]);
    free(ws); free(x); free(y); free(lz); free(post); free(v);
}

/* Finding 3: m2m with a hostile stride on an axis of size 1. */
static void hostile_stride_size_one_axis(void) {
    float logits[4] = {0, 0, 0, 0}, log_phi[4];
    mas_tensor3 x = {logits, MAS_FLOAT32, 0, {1, 1, 4}, {4, INT64_MIN + 1, 1}};
    mas_tensor3 out = {log_phi, MAS_FLOAT32, 0, {1, 1, 4}, {4, 4, 1}};
    size_t n = mas_attention_cpu_workspace_size(1, 1, 4, MAS_FLOAT32, 1);
    void *ws = malloc(n);
    mas_status st = mas_attention_forward_cpu(MAS_ATTENTION_MANY_TO_MANY, &x, NULL, NULL, &out,
                                              ws, n, 1, NULL);
    CHECK(st == MAS_OK, "status %d", (int)st);
    /* one row: phi[0,j] = prod of sigmoid(0) = 2^-j */
    for (int j = 0; j < 4; j++)
        CHECK(fabsf(log_phi[j] + (float)j * logf(2.0f)) < 1e-5f, "log_phi[%d] = %g", j,
              (double)log_phi[j]);
    free(ws);
}

/* fuzz2 finding 1: mas_loglik_cpu_workspace_size with huge sizes overflowed
 * (signed B*N*M in the plan, (2J)*block*bytes*team in size_t) instead of
 * returning SIZE_MAX like the other workspace functions; the call must then
 * refuse any real workspace. */
static mas_loglik_args loglik_args(void *data, int64_t B, int64_t N, int64_t J, int64_t M) {
    mas_loglik_args a;
    memset(&a, 0, sizeof a);
    a.x = (mas_tensor3){data, MAS_FLOAT32, 0, {B, N, J}, {0, 0, 0}};
    a.coef = (mas_tensor3){data, MAS_FLOAT32, 0, {1, 2 * J + 1, M}, {0, 0, 0}};
    a.n_states = M;
    a.out = (mas_tensor3){data, MAS_FLOAT32, 0, {B, N, M}, {0, 0, 0}};
    return a;
}

static void huge_loglik_workspace(void) {
    static float cell[1];
    const int64_t big = (int64_t)1 << 40;
    struct { int64_t B, N, J, M; } cases[] = {
        {1, 4, (int64_t)1 << 61, 4},          /* 2J * block * bytes wraps size_t */
        {1, 4, ((int64_t)1 << 62) - 1, 2},    /* 2J+1 near INT64_MAX */
        {1 << 10, big, 1, 1 << 30},           /* B*N*M past INT64_MAX */
        {1, big, 1, 1 << 20},                 /* 2^60 score cells */
        {INT64_MAX, 2, 1, 2},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        mas_loglik_args a = loglik_args(cell, cases[c].B, cases[c].N, cases[c].J, cases[c].M);
        for (int32_t threads = 1; threads <= 256; threads *= 16) {
            size_t n = mas_loglik_cpu_workspace_size(&a, threads);
            CHECK(n == SIZE_MAX, "loglik case %zu threads %d: %zu", c, (int)threads, n);
        }
        static unsigned char ws[1 << 16];
        mas_error err;
        mas_status st = mas_loglik_cpu(&a, ws, sizeof ws, 1, &err);
        CHECK(st == MAS_ERR_WORKSPACE_TOO_SMALL, "loglik case %zu: status %d", c, (int)st);
    }
    /* an ordinary shape still gets a finite size */
    mas_loglik_args a = loglik_args(cell, 2, 8, 3, 5);
    size_t n = mas_loglik_cpu_workspace_size(&a, 4);
    CHECK(n > 0 && n < ((size_t)1 << 30), "loglik small: %zu", n);
}

/* fuzz2 finding 2: mas_topology_states and mas_topo_cpu_workspace_size with
 * a huge token axis: signed overflow of tokens * k; now INT64_MAX states and
 * a SIZE_MAX workspace, and the calls refuse any real workspace. */
static void huge_topology(void) {
    static float cell[4];
    static unsigned char ws[1 << 16];
    int64_t L = 1, F = 2;
    int32_t labels[3] = {0, 0, 0};
    mas_topo_args a;
    memset(&a, 0, sizeof a);
    a.topology.states_per_token = 3;
    a.topology.skip_penalty = -INFINITY;
    a.emissions = (mas_tensor3){cell, MAS_FLOAT32, 0, {1, 4, 2}, {8, 2, 1}};
    a.token_len = &L;
    a.frame_len = &F;
    a.labels = labels;
    a.tokens = INT64_MAX - 1;
    CHECK(mas_topology_states(&a.topology, a.tokens) == INT64_MAX, "states");
    a.topology.has_blank = 1;
    CHECK(mas_topology_states(&a.topology, INT64_MAX / 2) == INT64_MAX, "states, blanks");
    CHECK(mas_topology_states(&a.topology, 2) == 9, "states, 2 tokens");
    for (int soft = 0; soft <= 1; soft++)
        CHECK(mas_topo_cpu_workspace_size(&a, soft, 4) == SIZE_MAX, "workspace soft %d", soft);
    a.tokens = (int64_t)1 << 40; /* 2^42 states x 2^20 frames: 2^62 cells */
    a.emissions.dim[2] = (int64_t)1 << 20;
    CHECK(mas_topo_cpu_workspace_size(&a, 1, 1) == SIZE_MAX, "workspace 2^60 cells");
    int32_t ids[2];
    mas_topo_hard_outputs out;
    memset(&out, 0, sizeof out);
    out.state_ids = ids;
    out.state_ids_stride = 2;
    mas_status st = mas_viterbi_cpu(&a, &out, ws, sizeof ws, 1, NULL);
    CHECK(st == MAS_ERR_WORKSPACE_TOO_SMALL, "viterbi on a huge chain: %d", (int)st);
}

/* fuzz2 finding 3 (the open question of fuzz.md): float32 sums past FLT_MAX
 * meeting a -inf cell gave log_z = NaN with MAS_OK; now +inf (mas.h
 * section 5), for the forward-sum and the topology forward-sum. */
static void overflow_log_z(void) {
    float v[3] = {3e38f, 3e38f, -INFINITY}, post[3];
    float lz = 0;
    int64_t x = 1, y = 3;
    mas_tensor3 value = {v, MAS_FLOAT32, 0, {1, 1, 3}, {3, 3, 1}};
    mas_tensor3 p = {post, MAS_FLOAT32, 0, {1, 1, 3}, {3, 3, 1}};
    size_t n = mas_forward_sum_cpu_workspace_size(1, 1, 3, MAS_FLOAT32, 1);
    void *ws = malloc(n);
    mas_status st = mas_forward_sum_cpu(&value, &x, &y, &lz, &p, ws, n, 1, NULL);
    CHECK(st == MAS_OK && lz == INFINITY, "forward-sum: status %d log_z %g", (int)st, (double)lz);
    free(ws);

    int64_t L = 1, F = 3;
    mas_topo_args a;
    memset(&a, 0, sizeof a);
    a.topology.states_per_token = 1;
    a.topology.skip_penalty = -INFINITY;
    a.emissions = value; /* per state: [1, 1 state, 3 frames] */
    a.tokens = 1;
    a.token_len = &L;
    a.frame_len = &F;
    mas_topo_soft_outputs out;
    memset(&out, 0, sizeof out);
    out.log_z = &lz;
    n = mas_topo_cpu_workspace_size(&a, 1, 1);
    ws = malloc(n);
    lz = 0;
    st = mas_topo_forward_sum_cpu(&a, &out, ws, n, 1, NULL);
    CHECK(st == MAS_OK && lz == INFINITY, "topology: status %d log_z %g", (int)st, (double)lz);
    free(ws);
}

/* Finding 7: many-to-many attention with M << N (a band one cell wide
 * along a long diagonal) walked every (state tile, step block) pair: N=2^20,
 * M=1 took over a minute under the fuzzer. The DP core now visits only the
 * blocks a tile or the next one meets; the values must not change: log phi
 * against a float64 loop of mas.h's recurrence, on thin and wide shapes. */
static void thin_band_attention(void) {
    const int64_t shapes[4][2] = {{3000, 1}, {2500, 3}, {70, 70}, {5, 400}};
    for (int c = 0; c < 4; c++) {
        int64_t N = shapes[c][0], M = shapes[c][1];
        double *x = malloc((size_t)(N * M) * sizeof(double));
        double *lp = malloc((size_t)(N * M) * sizeof(double));
        double *ref = malloc((size_t)(N * M) * sizeof(double));
        uint64_t r = 7 + (uint64_t)c;
        for (int64_t i = 0; i < N * M; i++) {
            r ^= r << 13; r ^= r >> 7; r ^= r << 17;
            x[i] = 4.0 * (double)(r >> 11) / 9007199254740992.0 - 2.0;
        }
        /* phi[i,j] = phi[i,j-1] p[i,j-1] + phi[i-1,j] (1 - p[i-1,j]), in logs */
        for (int64_t i = 0; i < N; i++)
            for (int64_t j = 0; j < M; j++) {
                double a = -INFINITY, b = -INFINITY;
                if (i == 0 && j == 0) { ref[0] = 0; continue; }
                if (j > 0) a = ref[i * M + j - 1] - log1p(exp(-x[i * M + j - 1]));
                if (i > 0) b = ref[(i - 1) * M + j] - log1p(exp(x[(i - 1) * M + j]));
                double m = a > b ? a : b;
                ref[i * M + j] = m == -INFINITY ? m : m + log(exp(a - m) + exp(b - m));
            }
        mas_tensor3 xv = {x, MAS_FLOAT64, 0, {1, N, M}, {N * M, M, 1}};
        mas_tensor3 ov = {lp, MAS_FLOAT64, 0, {1, N, M}, {N * M, M, 1}};
        size_t ws = mas_attention_cpu_workspace_size(1, N, M, MAS_FLOAT64, 1);
        void *w = malloc(ws);
        mas_status st = mas_attention_forward_cpu(MAS_ATTENTION_MANY_TO_MANY, &xv, NULL, NULL,
                                                  &ov, w, ws, 1, NULL);
        CHECK(st == MAS_OK, "m2m N=%lld M=%lld: status %d", (long long)N, (long long)M, (int)st);
        double worst = 0;
        for (int64_t i = 0; i < N * M; i++) {
            double d = fabs(lp[i] - ref[i]) / (1 + fabs(ref[i]));
            if (!(d <= worst)) worst = d;
        }
        CHECK(worst <= 1e-9, "m2m N=%lld M=%lld: log phi off by %g (relative)", (long long)N,
              (long long)M, worst);
        free(x); free(lp); free(ref); free(w);
    }
}

/* fuzz_fused finding 1: the fused ops' argument checks with a huge token
 * axis (T = 2^63-1: legal dims, the call must refuse any workspace):
 * rows * tokens of the coefficient view in fg_plan_call overflowed (UBSan:
 * signed overflow). Now SIZE_MAX and MAS_ERR_WORKSPACE_TOO_SMALL. */
static void fused_huge_tokens(void) {
    float z[8] = {0}, mu[4] = {0, 0, 0, 0}, sp[4] = {1, 1, 1, 1}, score = 0, lz = 0;
    int64_t x = 1, y = 2;
    mas_gauss_align_args a;
    memset(&a, 0, sizeof a);
    a.x = (mas_tensor3){z, MAS_FLOAT32, 0, {1, 2, 4}, {8, 4, 1}};
    a.params.means = (mas_tensor3){mu, MAS_FLOAT32, 0, {1, INT64_MAX, 4}, {0, 0, 1}};
    a.params.spread = (mas_tensor3){sp, MAS_FLOAT32, 0, {1, INT64_MAX, 4}, {0, 0, 1}};
    a.params.spread_kind = MAS_SPREAD_VARIANCE;
    a.x_len = &x;
    a.y_len = &y;
    CHECK(mas_align_gaussian_cpu_workspace_size(&a, 1) == SIZE_MAX, "align workspace");
    CHECK(mas_forward_sum_gaussian_cpu_workspace_size(&a, 1) == SIZE_MAX, "forward-sum workspace");
    static unsigned char ws[1 << 16];
    mas_hard_outputs out;
    memset(&out, 0, sizeof out);
    out.score = &score;
    mas_status st = mas_align_gaussian_cpu(&a, &out, ws, sizeof ws, 1, NULL);
    CHECK(st == MAS_ERR_WORKSPACE_TOO_SMALL, "align on T = 2^63-1: %d", (int)st);
    mas_gauss_soft_outputs so;
    memset(&so, 0, sizeof so);
    so.log_z = &lz;
    st = mas_forward_sum_gaussian_cpu(&a, &so, ws, sizeof ws, 1, NULL);
    CHECK(st == MAS_ERR_WORKSPACE_TOO_SMALL, "forward-sum on T = 2^63-1: %d", (int)st);
}

/* fuzz_fused finding 2: the fused forward-sum in float32 with a sum past
 * FLT_MAX meeting a -inf cell (a frame of +inf under a negative mean)
 * returned MAS_OK with log_z = NaN; mas_forward_sum_cpu on the same cells
 * gives +inf (mas.h section 5), and section 8 promises its bits. */
static void fused_overflow_log_z(void) {
    float z[3] = {0, 0, INFINITY}, mu[1] = {-1}, var[1] = {1}, lw[1] = {3e38f};
    float lz = 0, gx[3];
    int64_t x = 1, y = 3;
    mas_gauss_align_args a;
    memset(&a, 0, sizeof a);
    a.x = (mas_tensor3){z, MAS_FLOAT32, 0, {1, 3, 1}, {3, 1, 1}};
    a.params.means = (mas_tensor3){mu, MAS_FLOAT32, 0, {1, 1, 1}, {1, 1, 1}};
    a.params.spread = (mas_tensor3){var, MAS_FLOAT32, 0, {1, 1, 1}, {1, 1, 1}};
    a.params.log_weights = (mas_tensor3){lw, MAS_FLOAT32, 0, {1, 1, 1}, {1, 1, 1}};
    a.params.spread_kind = MAS_SPREAD_VARIANCE;
    a.x_len = &x;
    a.y_len = &y;
    mas_gauss_soft_outputs so;
    memset(&so, 0, sizeof so);
    so.log_z = &lz;
    size_t n = mas_forward_sum_gaussian_cpu_workspace_size(&a, 1);
    void *ws = malloc(n);
    mas_status st = mas_forward_sum_gaussian_cpu(&a, &so, ws, n, 1, NULL);
    CHECK(st == MAS_OK && lz == INFINITY, "fused forward-sum: status %d log_z %g", (int)st,
          (double)lz);
    /* with a gradient (its values unspecified then) */
    so.grad_x = (mas_tensor3){gx, MAS_FLOAT32, 0, {1, 3, 1}, {3, 1, 1}};
    lz = 0;
    st = mas_forward_sum_gaussian_cpu(&a, &so, ws, n, 1, NULL);
    CHECK(st == MAS_OK && lz == INFINITY, "with grad_x: status %d log_z %g", (int)st, (double)lz);
    free(ws);
}

int main(void) {
    huge_workspace();
    thin_band_attention();
    fused_huge_tokens();
    fused_overflow_log_z();
    overflow_log_z();
    huge_topology();
    huge_loglik_workspace();
    many_items_many_threads();
    hostile_stride_size_one_axis();
    printf("test_fuzz_regressions: %s\n", failures ? "FAILED" : "ok");
    return failures != 0;
}
