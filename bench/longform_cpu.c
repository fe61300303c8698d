/* Long-form hard alignment on the CPU (issue 15): one long item aligned
 * unbounded (one decision bit per cell) and within workspace budgets down to
 * the smallest that works (mas_hard_cpu_min_workspace_size,
 * mas_topo_cpu_min_workspace_size), wall time (median of --repeat runs) and
 * workspace bytes; each budgeted result is compared with the unbounded one
 * byte for byte. Rows: hard MAS float32 T x S (random scores) on 1 and 2
 * threads, and CTC forced alignment (gathered log-probs, V = 32) of L
 * labels over S frames.
 * Build: gcc -O2 -Iinclude bench/longform_cpu.c build/rel/libmas.a -lm -lpthread
 * Run:   ./a.out [T S [repeat]]        (default 6000 36000 3) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mas.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static float uniform(void) { /* xorshift64*, in [-4, 0) */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return -4.0f * (float)((rng_state * 2685821657736338717ull) >> 40) / (float)(1 << 24);
}

static int repeat = 3;

/* Hard MAS of one item [1, T, S]; durations, indices and score into the
 * caller's arrays. Returns the median seconds, or -1 on an error. */
static double time_hard(const mas_tensor3 *v, int64_t T, int64_t S, size_t ws_size,
                        int32_t threads, int32_t *dur, int32_t *idx, float *score) {
    void *ws = malloc(ws_size);
    if (!ws) return -1;
    int64_t x = T, y = S;
    mas_hard_outputs out;
    memset(&out, 0, sizeof out);
    out.durations = dur;
    out.durations_stride = T;
    out.indices = idx;
    out.indices_stride = S;
    out.score = score;
    double t[16];
    for (int r = 0; r < repeat; r++) {
        double t0 = now();
        mas_status st = mas_hard_cpu(v, &x, &y, &out, ws, ws_size, threads, NULL);
        t[r] = now() - t0;
        if (st != MAS_OK) {
            fprintf(stderr, "mas_hard_cpu: %s\n", mas_status_string(st));
            free(ws);
            return -1;
        }
    }
    free(ws);
    qsort(t, (size_t)repeat, sizeof *t, cmp_double);
    return t[repeat / 2];
}

static double time_ctc(const mas_topo_args *a, int64_t S, int64_t L, size_t ws_size,
                       int32_t *labels_out, int32_t *spans, float *score) {
    void *ws = malloc(ws_size);
    if (!ws) return -1;
    mas_topo_hard_outputs out;
    memset(&out, 0, sizeof out);
    out.frame_labels = labels_out;
    out.frame_labels_stride = S;
    out.token_spans = spans;
    out.token_spans_stride = 2 * L;
    out.score = score;
    double t[16];
    for (int r = 0; r < repeat; r++) {
        double t0 = now();
        mas_status st = mas_viterbi_cpu(a, &out, ws, ws_size, 1, NULL);
        t[r] = now() - t0;
        if (st != MAS_OK) {
            fprintf(stderr, "mas_viterbi_cpu: %s\n", mas_status_string(st));
            free(ws);
            return -1;
        }
    }
    free(ws);
    qsort(t, (size_t)repeat, sizeof *t, cmp_double);
    return t[repeat / 2];
}

int main(int argc, char **argv) {
    int64_t T = argc > 2 ? atoll(argv[1]) : 6000, S = argc > 2 ? atoll(argv[2]) : 36000;
    if (argc > 3) repeat = atoi(argv[3]);
    if (repeat < 1 || repeat > 16) repeat = 3;
    printf("libmas %s long-form CPU bench: T=%lld S=%lld float32, median of %d\n\n",
           mas_version_string(), (long long)T, (long long)S, repeat);
    printf("| work | workspace | bytes | ms | equal to unbounded |\n|---|---|---|---|---|\n");

    float *value = malloc(sizeof(float) * (size_t)(T * S));
    int32_t *dur0 = malloc(4 * (size_t)T), *dur = malloc(4 * (size_t)T);
    int32_t *idx0 = malloc(4 * (size_t)S), *idx = malloc(4 * (size_t)S);
    if (!value || !dur0 || !dur || !idx0 || !idx) return 2;
    for (int64_t i = 0; i < T * S; i++) value[i] = uniform();
    mas_tensor3 v = {value, MAS_FLOAT32, 0, {1, T, S}, {T * S, S, 1}};
    for (int32_t threads = 1; threads <= 2; threads++) {
        size_t full = mas_hard_cpu_workspace_size(1, T, S, MAS_FLOAT32, threads);
        size_t min = mas_hard_cpu_min_workspace_size(1, T, S, MAS_FLOAT32, threads);
        float s0, s;
        double t0 = time_hard(&v, T, S, full, threads, dur0, idx0, &s0);
        printf("| hard MAS, %d thread(s) | unbounded | %zu | %.1f | - |\n", (int)threads, full,
               1e3 * t0);
        size_t budgets[3] = {min, 4 * min, full / 4};
        for (int k = 0; k < 3; k++) {
            if (budgets[k] >= full || (k > 0 && budgets[k] <= budgets[k - 1])) continue;
            double t1 = time_hard(&v, T, S, budgets[k], threads, dur, idx, &s);
            int same = memcmp(dur, dur0, 4 * (size_t)T) == 0 &&
                       memcmp(idx, idx0, 4 * (size_t)S) == 0 && memcmp(&s, &s0, 4) == 0;
            printf("| hard MAS, %d thread(s) | %s | %zu | %.1f | %s |\n", (int)threads,
                   k == 0 ? "smallest (min_workspace_size)" : k == 1 ? "4x smallest"
                                                                    : "unbounded / 4",
                   budgets[k], 1e3 * t1, same ? "yes" : "NO");
        }
    }
    free(value);

    /* CTC: L labels (no two neighbours equal) over S frames, V = 32 */
    int64_t L = T, V = 32;
    float *lp = malloc(sizeof(float) * (size_t)(S * V));
    int32_t *lab = malloc(4 * (size_t)L), *fl0 = malloc(4 * (size_t)S), *fl = malloc(4 * (size_t)S);
    int32_t *sp0 = malloc(8 * (size_t)L), *sp = malloc(8 * (size_t)L);
    if (!lp || !lab || !fl0 || !fl || !sp0 || !sp) return 2;
    for (int64_t i = 0; i < S * V; i++) lp[i] = uniform();
    for (int64_t i = 0; i < L; i++) lab[i] = (int32_t)(1 + (i * 7 + (i / 3)) % (V - 1));
    for (int64_t i = 1; i < L; i++)
        if (lab[i] == lab[i - 1]) lab[i] = lab[i] % (int32_t)(V - 1) + 1;
    mas_topo_args a;
    memset(&a, 0, sizeof a);
    a.topology.states_per_token = 1;
    a.topology.has_blank = 1;
    a.topology.skip_penalty = -INFINITY;
    a.gathered = 1;
    a.emissions = (mas_tensor3){lp, MAS_FLOAT32, 0, {1, S, V}, {S * V, V, 1}};
    a.labels = lab;
    a.labels_stride = L;
    a.tokens = L;
    a.token_len = &L;
    a.frame_len = &S;
    size_t full = mas_topo_cpu_workspace_size(&a, 0, 1);
    size_t min = mas_topo_cpu_min_workspace_size(&a, 1);
    float s0, s;
    double t0 = time_ctc(&a, S, L, full, fl0, sp0, &s0);
    printf("| CTC forced alignment L=%lld V=32, 1 thread | unbounded | %zu | %.1f | - |\n",
           (long long)L, full, 1e3 * t0);
    size_t budgets[2] = {min, 4 * min};
    for (int k = 0; k < 2; k++) {
        if (budgets[k] >= full) continue;
        double t1 = time_ctc(&a, S, L, budgets[k], fl, sp, &s);
        int same = memcmp(fl, fl0, 4 * (size_t)S) == 0 && memcmp(sp, sp0, 8 * (size_t)L) == 0 &&
                   memcmp(&s, &s0, 4) == 0;
        printf("| CTC forced alignment L=%lld V=32, 1 thread | %s | %zu | %.1f | %s |\n",
               (long long)L, k == 0 ? "smallest (min_workspace_size)" : "4x smallest",
               budgets[k], 1e3 * t1, same ? "yes" : "NO");
    }
    return 0;
}
