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

int main(void) {
    huge_workspace();
    many_items_many_threads();
    hostile_stride_size_one_axis();
    printf("test_fuzz_regressions: %s\n", failures ? "FAILED" : "ok");
    return failures != 0;
}
