/* Topologies on CUDA (mas.h section 7) against the CPU backend, which
 * tests/c/test_topology_cpu.c checks against a float64 reference and brute
 * force: Viterbi outputs bit for bit (state ids, frame labels, spans, token
 * scores, score), log Z / posterior / gradient of the log-probs within
 * tolerance, and the same first failing item and status. Topologies: k =
 * 1..3 with stay/advance scores, token skips, CTC blanks with repeated
 * labels; emissions per state or gathered by label; float32, float64,
 * float16; items that fail (target too long, a bad label, NaN); more than
 * 1024 states (several states per thread); a CTC batch of the benchmark's
 * shape. Prints "skipped" without a device.
 * The hard calls also run in the long form (the smallest workspace and one
 * between it and the unbounded one), bit for bit the CPU's too; items of
 * more than 1024 states (and every long-form call) run on several blocks
 * each. Plain chains (no blanks, no skips, per-state emissions, k <= 8)
 * run on hard MAS's kernels (hard_chain.h): one block an item when it fits
 * (small ones), several (hundreds of states): both layouts, ties, failing
 * items, float32 / float64 / float16, k = 8 and k = 9 (the topology's own
 * kernels).
 *   test_topology_cuda [seed] [--small] [--bench] [--longform L S] */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_fp16.h>

#include "cuda_check.h"
#include "mas.h"

static uint64_t rng_state;
static uint64_t rng_next(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}
static double rng_unit(void) { return (double)(rng_next() >> 11) / 9007199254740992.0; }
static int rng_int(int lo, int hi) { return lo + (int)(rng_next() % (uint64_t)(hi - lo + 1)); }

static int checks = 0, failures = 0;
#define CHECK(cond, ...)                                                                   \
    do {                                                                                   \
        checks++;                                                                          \
        if (!(cond)) {                                                                     \
            failures++;                                                                    \
            if (failures <= 30) {                                                          \
                printf("FAIL %s:%d: ", __FILE__, __LINE__);                                \
                printf(__VA_ARGS__);                                                       \
                printf("\n");                                                              \
            }                                                                              \
        }                                                                                  \
    } while (0)

typedef struct config {
    const char *name;
    int k, blank, skips, gathered;
    int B, L_max, S_max, V;
    mas_dtype dtype;
    int bad_items; /* 1: some items fail */
    int hard_only; /* 1: no soft call (more states than its one block holds) */
    int ties;      /* 1: emissions and edge scores on a coarse grid (ties in the max) */
    int rows_inner; /* 1: per-state emissions stored [B][S][n] (states contiguous) */
} config;

static size_t esize(mas_dtype d) { return d == MAS_FLOAT64 ? 8 : d == MAS_FLOAT32 ? 4 : 2; }

static void put(void *base, mas_dtype d, size_t i, double x) {
    if (d == MAS_FLOAT64) ((double *)base)[i] = x;
    else if (d == MAS_FLOAT32) ((float *)base)[i] = (float)x;
    else ((__half *)base)[i] = __float2half((float)x);
}

static double get_acc(const void *base, int f64, size_t i) {
    return f64 ? ((const double *)base)[i] : (double)((const float *)base)[i];
}

static void *to_dev(const void *h, size_t bytes) {
    void *d = NULL;
    CUDA_OK(cudaMalloc(&d, bytes ? bytes : 1));
    if (bytes) CUDA_OK(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice));
    return d;
}

/* The CPU's hard outputs of a config. */
typedef struct hard_host {
    int32_t *ids, *flab, *spans;
    void *tsc, *score;
} hard_host;

/* mas_viterbi_cuda with a workspace of ws_bytes (the unbounded size or
 * less: the long form) against the CPU's outputs, bit for bit, and the
 * same first failing item and status. */
static void cuda_hard_vs_cpu(const config *c, const mas_topo_args *da, size_t ws_bytes,
                             const char *how, const hard_host *cpu, mas_status st_cpu,
                             const mas_error *err, int want_labels) {
    const int B = c->B, S_max = c->S_max, Lm = c->L_max;
    const size_t acc = c->dtype == MAS_FLOAT64 ? 8 : 4;
    const int f64 = c->dtype == MAS_FLOAT64;
    int32_t *d_ids, *d_flab, *d_spans;
    void *d_tsc, *d_score, *d_work;
    uint64_t *d_word;
    CUDA_OK(cudaMalloc(&d_ids, (size_t)B * S_max * 4));
    CUDA_OK(cudaMalloc(&d_flab, (size_t)B * S_max * 4));
    CUDA_OK(cudaMalloc(&d_spans, (size_t)B * Lm * 8 + 8));
    CUDA_OK(cudaMalloc(&d_tsc, (size_t)B * Lm * acc + 8));
    CUDA_OK(cudaMalloc(&d_score, B * acc));
    CUDA_OK(cudaMalloc(&d_word, 8));
    CUDA_OK(cudaMemset(d_word, 0xff, 8));
    /* outputs poisoned: everything must be written */
    CUDA_OK(cudaMemset(d_ids, 0x5a, (size_t)B * S_max * 4));
    CUDA_OK(cudaMemset(d_spans, 0x5a, (size_t)B * Lm * 8));
    mas_topo_hard_outputs dout = {d_ids, S_max, want_labels ? d_flab : NULL, S_max, d_spans, 2 * Lm, d_tsc, Lm, d_score};
    CUDA_OK(cudaMalloc(&d_work, ws_bytes));
    mas_status st = mas_viterbi_cuda(da, &dout, d_work, ws_bytes, 0, d_word);
    CHECK(st == MAS_OK, "%s (%s): mas_viterbi_cuda returned %d", c->name, how, (int)st);
    CUDA_OK(cudaDeviceSynchronize());
    uint64_t word;
    CUDA_OK(cudaMemcpy(&word, d_word, 8, cudaMemcpyDeviceToHost));
    mas_error derr;
    mas_decode_device_error(word, &derr);
    CHECK(derr.status == (st_cpu == MAS_OK ? MAS_OK : err->status) &&
              (st_cpu == MAS_OK || derr.item == err->item),
          "%s (%s): hard error cpu (%d, item %lld) cuda (%d, item %lld)", c->name, how,
          (int)err->status, (long long)err->item, derr.status, (long long)derr.item);
    int32_t *g_ids = (int32_t *)malloc((size_t)B * S_max * 4), *g_flab = (int32_t *)malloc((size_t)B * S_max * 4);
    int32_t *g_spans = (int32_t *)malloc((size_t)B * Lm * 8 + 8);
    void *g_tsc = malloc((size_t)B * Lm * acc + 8), *g_score = malloc(B * acc);
    CUDA_OK(cudaMemcpy(g_ids, d_ids, (size_t)B * S_max * 4, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(g_flab, d_flab, (size_t)B * S_max * 4, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(g_spans, d_spans, (size_t)B * Lm * 8, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(g_tsc, d_tsc, (size_t)B * Lm * acc, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(g_score, d_score, B * acc, cudaMemcpyDeviceToHost));
    int mism = 0;
    for (size_t i = 0; i < (size_t)B * S_max; i++) mism += cpu->ids[i] != g_ids[i];
    CHECK(mism == 0, "%s (%s): state_ids differ in %d cells", c->name, how, mism);
    if (want_labels) {
        mism = 0;
        for (size_t i = 0; i < (size_t)B * S_max; i++) mism += cpu->flab[i] != g_flab[i];
        CHECK(mism == 0, "%s (%s): frame_labels differ in %d cells", c->name, how, mism);
    }
    mism = 0;
    for (size_t i = 0; i < (size_t)B * Lm * 2; i++) mism += cpu->spans[i] != g_spans[i];
    CHECK(mism == 0, "%s (%s): token_spans differ in %d", c->name, how, mism);
    CHECK(memcmp(cpu->tsc, g_tsc, (size_t)B * Lm * acc) == 0, "%s (%s): token_scores differ",
          c->name, how);
    CHECK(memcmp(cpu->score, g_score, B * acc) == 0, "%s (%s): score differs (cpu %g cuda %g)",
          c->name, how, get_acc(cpu->score, f64, 0), get_acc(g_score, f64, 0));
    cudaFree(d_ids); cudaFree(d_flab); cudaFree(d_spans); cudaFree(d_tsc); cudaFree(d_score);
    cudaFree(d_word); cudaFree(d_work);
    free(g_ids); free(g_flab); free(g_spans); free(g_tsc); free(g_score);
}

static void run_config(const config *c) {
    const int k = c->k, B = c->B, S_max = c->S_max, Lm = c->L_max;
    mas_topology tp;
    memset(&tp, 0, sizeof tp);
    double stay[16], adv[16];
    for (int j = 0; j < 16; j++) {
        stay[j] = c->ties ? -0.5 * rng_int(0, 2) : -rng_unit();
        adv[j] = c->ties ? -0.5 * rng_int(0, 2) : -rng_unit();
    }
    tp.states_per_token = k;
    tp.has_blank = c->blank;
    tp.blank = 0;
    tp.stay = k > 1 || c->blank ? stay : NULL;
    tp.advance = k > 1 || c->blank ? adv : NULL;
    tp.blank_stay = c->blank ? -0.1 : 0;
    tp.blank_advance = c->blank ? -0.2 : 0;
    tp.skip_penalty = c->skips ? -1.5 : -INFINITY;
    const int64_t n_max = mas_topology_states(&tp, Lm);
    const int V = c->V;
    const int64_t d1 = c->gathered ? S_max : n_max, d2 = c->gathered ? V : S_max;
    const size_t ecount = (size_t)B * d1 * d2;
    void *e = malloc(ecount * esize(c->dtype));
    for (size_t i = 0; i < ecount; i++)
        put(e, c->dtype, i,
            c->ties ? -0.5 * rng_int(0, 4) : -3.0 * rng_unit() - (rng_unit() < 0.05 ? 4 : 0));
    int32_t *labels = (int32_t *)malloc((size_t)B * Lm * k * sizeof(int32_t));
    int64_t *Lh = (int64_t *)malloc(B * sizeof(int64_t)), *Sh = (int64_t *)malloc(B * sizeof(int64_t));
    for (int b = 0; b < B; b++) {
        Lh[b] = rng_int(c->blank ? 0 : 1, Lm);
        if (b == 0) Lh[b] = Lm;
        int64_t need = k * Lh[b] * (c->blank ? 2 : 1);
        Sh[b] = need > S_max ? S_max : rng_int((int)need, S_max);
        if (b == 0) Sh[b] = S_max;
        for (int q = 0; q < Lm * k; q++) {
            int lab = c->gathered || c->blank ? rng_int(1, V > 1 ? V - 1 : 1) : rng_int(0, 99);
            /* some repeated neighbours (the CTC rule) */
            if (q > 0 && rng_unit() < 0.2) lab = labels[b * Lm * k + q - 1];
            labels[b * Lm * k + q] = lab;
        }
    }
    if (c->bad_items && B >= 3) {
        Sh[1] = 1;                          /* target too long (unless L = 0) */
        if (Lh[1] == 0) Lh[1] = 1;
        labels[2 * Lm * k] = c->blank ? 0 : (c->gathered ? V : 0); /* bad label */
        if (!c->blank && !c->gathered) put(e, c->dtype, (size_t)2 * d1 * d2, NAN); /* NaN cell */
    }
    mas_topo_args a;
    memset(&a, 0, sizeof a);
    a.topology = tp;
    a.gathered = c->gathered;
    a.emissions.data = e;
    a.emissions.dtype = c->dtype;
    a.emissions.dim[0] = B;
    a.emissions.dim[1] = d1;
    a.emissions.dim[2] = d2;
    a.emissions.stride[0] = d1 * d2;
    a.emissions.stride[1] = c->rows_inner ? 1 : d2;
    a.emissions.stride[2] = c->rows_inner ? d1 : 1;
    /* per-state chains of k >= 2 get labels too: frame_labels only */
    a.labels = c->gathered || c->blank || k > 1 ? labels : NULL;
    a.labels_stride = Lm * k;
    a.tokens = Lm;
    a.token_len = Lh;
    a.frame_len = Sh;
    const int f64 = c->dtype == MAS_FLOAT64;
    const size_t acc = f64 ? 8 : 4;
    const int want_labels = a.labels != NULL;

    /* ---- hard ---- */
    int32_t *ids = (int32_t *)malloc((size_t)B * S_max * 4), *flab = (int32_t *)malloc((size_t)B * S_max * 4);
    int32_t *spans = (int32_t *)malloc((size_t)B * Lm * 8);
    void *tsc = malloc((size_t)B * Lm * acc), *score = malloc(B * acc);
    mas_topo_hard_outputs o = {ids, S_max, want_labels ? flab : NULL, S_max, spans, 2 * Lm, tsc, Lm, score};
    size_t wcpu = mas_topo_cpu_workspace_size(&a, 0, 1);
    void *w = malloc(wcpu);
    mas_error err;
    mas_status st_cpu = mas_viterbi_cpu(&a, &o, w, wcpu, 1, &err);
    free(w);

    mas_topo_args da = a;
    da.emissions.data = to_dev(e, ecount * esize(c->dtype));
    da.labels = a.labels ? (const int32_t *)to_dev(labels, (size_t)B * Lm * k * 4) : NULL;
    da.token_len = (const int64_t *)to_dev(Lh, B * 8);
    da.frame_len = (const int64_t *)to_dev(Sh, B * 8);
    hard_host cpu = {ids, flab, spans, tsc, score};
    const size_t full = mas_topo_cuda_workspace_size(&da, 0);
    const size_t least = mas_topo_cuda_min_workspace_size(&da);
    CHECK(full > 0 && least > 0 && least <= full, "%s: workspace sizes full %zu min %zu", c->name,
          full, least);
    /* unbounded, then the long form at the smallest workspace and between */
    const size_t budgets[3] = {full, least, least + (full - least) / 3};
    for (int q = 0; q < 3; q++) {
        if (q > 0 && budgets[q] >= full) continue;
        cuda_hard_vs_cpu(c, &da, budgets[q], q == 0 ? "unbounded" : q == 1 ? "min" : "mid", &cpu,
                         st_cpu, &err, want_labels);
    }
    if (least < full) {
        void *d_work;
        int32_t *d_ids;
        CUDA_OK(cudaMalloc(&d_work, least));
        CUDA_OK(cudaMalloc(&d_ids, (size_t)B * S_max * 4));
        mas_topo_hard_outputs o1 = {d_ids, S_max, NULL, 0, NULL, 0, NULL, 0, NULL};
        CHECK(mas_viterbi_cuda(&da, &o1, d_work, least - 1, 0, NULL) == MAS_ERR_WORKSPACE_TOO_SMALL,
              "%s: one byte below the minimum is not WORKSPACE_TOO_SMALL", c->name);
        CUDA_OK(cudaDeviceSynchronize());
        cudaFree(d_work);
        cudaFree(d_ids);
    }
    if (c->hard_only) {
        printf("  %-34s B=%d L<=%d S<=%d n_max=%lld: hard %s (workspace %zu, min %zu)\n", c->name,
               B, Lm, S_max, (long long)n_max, st_cpu == MAS_OK ? "ok" : "item error", full, least);
        cudaFree((void *)da.emissions.data);
        cudaFree((void *)da.labels);
        cudaFree((void *)da.token_len);
        cudaFree((void *)da.frame_len);
        free(e); free(labels); free(Lh); free(Sh); free(ids); free(flab); free(spans); free(tsc);
        free(score);
        return;
    }

    /* ---- soft ---- */
    const size_t pcount = (size_t)B * n_max * S_max;
    void *lz = malloc(B * acc), *post = malloc(pcount * acc), *grad = NULL;
    mas_topo_soft_outputs so;
    memset(&so, 0, sizeof so);
    so.log_z = lz;
    mas_tensor3 pt = {post, f64 ? MAS_FLOAT64 : MAS_FLOAT32, 0, {B, n_max, S_max}, {n_max * S_max, S_max, 1}};
    so.posterior = pt;
    if (c->gathered) {
        grad = malloc(ecount * acc);
        mas_tensor3 gt = {grad, pt.dtype, 0, {B, d1, d2}, {d1 * d2, d2, 1}};
        so.grad = gt;
    }
    wcpu = mas_topo_cpu_workspace_size(&a, 1, 1);
    w = malloc(wcpu);
    st_cpu = mas_topo_forward_sum_cpu(&a, &so, w, wcpu, 1, &err);
    free(w);
    void *d_lz, *d_post, *d_grad = NULL, *d_work2;
    CUDA_OK(cudaMalloc(&d_lz, B * acc));
    CUDA_OK(cudaMalloc(&d_post, pcount * acc));
    mas_topo_soft_outputs dso = so;
    dso.log_z = d_lz;
    dso.posterior.data = d_post;
    if (c->gathered) {
        CUDA_OK(cudaMalloc(&d_grad, ecount * acc));
        dso.grad.data = d_grad;
    }
    uint64_t *d_word, word;
    CUDA_OK(cudaMalloc(&d_word, 8));
    CUDA_OK(cudaMemset(d_word, 0xff, 8));
    mas_error derr;
    size_t wg;
    wg = mas_topo_cuda_workspace_size(&da, 1);
    CUDA_OK(cudaMalloc(&d_work2, wg));
    mas_status st = mas_topo_forward_sum_cuda(&da, &dso, d_work2, wg, 0, d_word);
    CHECK(st == MAS_OK, "%s: mas_topo_forward_sum_cuda returned %d", c->name, (int)st);
    CUDA_OK(cudaDeviceSynchronize());
    CUDA_OK(cudaMemcpy(&word, d_word, 8, cudaMemcpyDeviceToHost));
    mas_decode_device_error(word, &derr);
    CHECK(derr.status == (st_cpu == MAS_OK ? MAS_OK : err.status) &&
              (st_cpu == MAS_OK || derr.item == err.item),
          "%s: soft error cpu (%d, item %lld) cuda (%d, item %lld)", c->name, (int)err.status,
          (long long)err.item, derr.status, (long long)derr.item);
    void *g_lz = malloc(B * acc), *g_post = malloc(pcount * acc), *g_grad = c->gathered ? malloc(ecount * acc) : NULL;
    CUDA_OK(cudaMemcpy(g_lz, d_lz, B * acc, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(g_post, d_post, pcount * acc, cudaMemcpyDeviceToHost));
    if (g_grad) CUDA_OK(cudaMemcpy(g_grad, d_grad, ecount * acc, cudaMemcpyDeviceToHost));
    const double tol = f64 ? 1e-9 : 2e-4;
    double worst = 0;
    for (int b = 0; b < B; b++) {
        double x = get_acc(lz, f64, b), y = get_acc(g_lz, f64, b);
        double dlt = (isinf(x) && isinf(y) && x == y) ? 0 : fabs(x - y) / (1 + fabs(x));
        worst = dlt > worst ? dlt : worst;
    }
    CHECK(worst <= tol, "%s: log_z differs by %g relative", c->name, worst);
    double wp = 0, wgr = 0;
    for (size_t i = 0; i < pcount; i++) {
        double dlt = fabs(get_acc(post, f64, i) - get_acc(g_post, f64, i));
        wp = dlt > wp ? dlt : wp;
    }
    if (g_grad)
        for (size_t i = 0; i < ecount; i++) {
            double dlt = fabs(get_acc(grad, f64, i) - get_acc(g_grad, f64, i));
            wgr = dlt > wgr ? dlt : wgr;
        }
    const double ptol = f64 ? 1e-7 : 2e-3 * (1 + sqrt((double)S_max) / 8);
    CHECK(wp <= ptol, "%s: posterior differs by %g", c->name, wp);
    CHECK(wgr <= ptol * 2, "%s: grad differs by %g", c->name, wgr);
    printf("  %-34s B=%d L<=%d S<=%d n_max=%lld: hard %s, log_z %.2g, posterior %.2g, grad %.2g\n",
           c->name, B, Lm, S_max, (long long)n_max, st_cpu == MAS_OK ? "ok" : "item error",
           worst, wp, wgr);

    cudaFree((void *)da.emissions.data);
    cudaFree((void *)da.labels);
    cudaFree((void *)da.token_len);
    cudaFree((void *)da.frame_len);
    cudaFree(d_word); cudaFree(d_lz); cudaFree(d_post); cudaFree(d_grad);
    cudaFree(d_work2);
    free(e); free(labels); free(Lh); free(Sh); free(ids); free(flab); free(spans); free(tsc);
    free(score);
    free(lz); free(post); free(grad); free(g_lz); free(g_post); free(g_grad);
}

/* --bench: kernel time of the benchmark rows of issue 12 (CUDA events over
 * back-to-back calls), for quick kernel work; the recorded table comes from
 * `python -m libmas bench --topology --device cuda`. */
static void bench_row(const char *name, int k, int blank, int gathered, int B, int L, int S, int V,
                      int soft) {
    mas_topology tp;
    memset(&tp, 0, sizeof tp);
    double stay[3] = {-0.2, -0.3, -0.2}, adv[3] = {-1.0, -1.2, -1.1};
    tp.states_per_token = k;
    tp.has_blank = blank;
    tp.stay = k > 1 ? stay : NULL;
    tp.advance = k > 1 ? adv : NULL;
    tp.skip_penalty = -INFINITY;
    const int64_t n = mas_topology_states(&tp, L);
    const int64_t d1 = gathered ? S : n, d2 = gathered ? V : S;
    const size_t cnt = (size_t)B * d1 * d2;
    float *e = (float *)malloc(cnt * 4);
    for (size_t i = 0; i < cnt; i++) e[i] = (float)(-3.0 * rng_unit());
    int32_t *lab = (int32_t *)malloc((size_t)B * L * k * 4);
    for (int q = 0; q < B * L * k; q++) lab[q] = 1 + q % (V > 2 ? V - 1 : 1);
    int64_t *Lh = (int64_t *)malloc(B * 8), *Sh = (int64_t *)malloc(B * 8);
    for (int b = 0; b < B; b++) { Lh[b] = L; Sh[b] = S; }
    mas_topo_args a;
    memset(&a, 0, sizeof a);
    a.topology = tp;
    a.gathered = gathered;
    mas_tensor3 et = {to_dev(e, cnt * 4), MAS_FLOAT32, 0, {B, d1, d2}, {d1 * d2, d2, 1}};
    a.emissions = et;
    a.labels = gathered || blank ? (const int32_t *)to_dev(lab, (size_t)B * L * k * 4) : NULL;
    a.labels_stride = L * k;
    a.tokens = L;
    a.token_len = (const int64_t *)to_dev(Lh, B * 8);
    a.frame_len = (const int64_t *)to_dev(Sh, B * 8);
    void *work, *o1, *o2;
    size_t ws = mas_topo_cuda_workspace_size(&a, soft);
    CUDA_OK(cudaMalloc(&work, ws));
    CUDA_OK(cudaMalloc(&o1, (size_t)B * S * 4 + (size_t)B * L * 8 + 64));
    CUDA_OK(cudaMalloc(&o2, cnt * 4));
    mas_topo_hard_outputs ho = {(int32_t *)o1, S, NULL, 0, NULL, 0, NULL, 0, (char *)o1 + (size_t)B * S * 4};
    mas_topo_soft_outputs so;
    memset(&so, 0, sizeof so);
    so.log_z = o1;
    mas_tensor3 gt = {o2, MAS_FLOAT32, 0, {B, d1, d2}, {d1 * d2, d2, 1}};
    if (gathered) so.grad = gt;
    cudaEvent_t t0, t1;
    CUDA_OK(cudaEventCreate(&t0));
    CUDA_OK(cudaEventCreate(&t1));
    const int reps = 20;
    for (int r = -3; r < reps; r++) {
        if (r == 0) CUDA_OK(cudaEventRecord(t0));
        mas_status st = soft ? mas_topo_forward_sum_cuda(&a, &so, work, ws, 0, NULL)
                             : mas_viterbi_cuda(&a, &ho, work, ws, 0, NULL);
        if (st != MAS_OK) { printf("%s: status %d\n", name, (int)st); break; }
    }
    CUDA_OK(cudaEventRecord(t1));
    CUDA_OK(cudaEventSynchronize(t1));
    float ms = 0;
    CUDA_OK(cudaEventElapsedTime(&ms, t0, t1));
    printf("  bench %-44s %.3f ms (%.0f ns a frame)\n", name, ms / reps, ms / reps * 1e6 / S);
    cudaFree((void *)a.emissions.data); cudaFree((void *)a.labels); cudaFree((void *)a.token_len);
    cudaFree((void *)a.frame_len); cudaFree(work); cudaFree(o1); cudaFree(o2);
    free(e); free(lab); free(Lh); free(Sh);
}

/* --longform L S: CTC Viterbi of one item of L labels over S frames (V =
 * 32, float32 log-probs), unbounded when its workspace fits on the device
 * and within budgets of 1 GB and the smallest; each run's state ids and
 * score compared with the first run's, byte for byte. */
static void bench_longform(int L, int S) {
    const int V = 32;
    mas_topology tp;
    memset(&tp, 0, sizeof tp);
    tp.states_per_token = 1;
    tp.has_blank = 1;
    tp.skip_penalty = -INFINITY;
    const size_t cnt = (size_t)S * V;
    float *e = (float *)malloc(cnt * 4);
    for (size_t i = 0; i < cnt; i++) e[i] = (float)(-3.0 * rng_unit());
    int32_t *lab = (int32_t *)malloc((size_t)L * 4);
    for (int q = 0; q < L; q++) lab[q] = 1 + (int)(rng_next() % (V - 1));
    int64_t Lh = L, Sh = S;
    mas_topo_args a;
    memset(&a, 0, sizeof a);
    a.topology = tp;
    a.gathered = 1;
    mas_tensor3 et = {to_dev(e, cnt * 4), MAS_FLOAT32, 0, {1, S, V}, {(int64_t)cnt, V, 1}};
    a.emissions = et;
    a.labels = (const int32_t *)to_dev(lab, (size_t)L * 4);
    a.labels_stride = L;
    a.tokens = L;
    a.token_len = (const int64_t *)to_dev(&Lh, 8);
    a.frame_len = (const int64_t *)to_dev(&Sh, 8);
    const size_t full = mas_topo_cuda_workspace_size(&a, 0), least = mas_topo_cuda_min_workspace_size(&a);
    size_t free_b = 0, total_b = 0;
    CUDA_OK(cudaMemGetInfo(&free_b, &total_b));
    printf("CTC long-form, L=%d labels (%lld states), S=%d frames, V=%d, float32, one item\n", L,
           (long long)mas_topology_states(&tp, L), S, V);
    printf("| workspace | bytes | ms | equal to the first run |\n|---|---|---|---|\n");
    int32_t *d_ids, *ref = (int32_t *)malloc((size_t)S * 4), *got = (int32_t *)malloc((size_t)S * 4);
    float *d_score, ref_score = 0, got_score = 0;
    CUDA_OK(cudaMalloc(&d_ids, (size_t)S * 4));
    CUDA_OK(cudaMalloc(&d_score, 4));
    mas_topo_hard_outputs ho = {d_ids, S, NULL, 0, NULL, 0, NULL, 0, d_score};
    const size_t budgets[3] = {full, (size_t)1 << 30, least};
    const char *names[3] = {"unbounded", "1 GB budget", "smallest"};
    int first = 1;
    for (int q = 0; q < 3; q++) {
        size_t ws = budgets[q] < full ? budgets[q] : full;
        if (q > 0 && budgets[q] >= full) continue;
        if (ws + ((size_t)1 << 28) > free_b) {
            printf("| %s | %zu | (does not fit: %zu bytes free) | - |\n", names[q], ws, free_b);
            continue;
        }
        void *work;
        CUDA_OK(cudaMalloc(&work, ws));
        cudaEvent_t t0, t1;
        CUDA_OK(cudaEventCreate(&t0));
        CUDA_OK(cudaEventCreate(&t1));
        CUDA_OK(cudaEventRecord(t0));
        mas_status st = mas_viterbi_cuda(&a, &ho, work, ws, 0, NULL);
        CUDA_OK(cudaEventRecord(t1));
        CUDA_OK(cudaEventSynchronize(t1));
        float ms = 0;
        CUDA_OK(cudaEventElapsedTime(&ms, t0, t1));
        CUDA_OK(cudaMemcpy(first ? ref : got, d_ids, (size_t)S * 4, cudaMemcpyDeviceToHost));
        CUDA_OK(cudaMemcpy(first ? &ref_score : &got_score, d_score, 4, cudaMemcpyDeviceToHost));
        const char *same = first ? "-" : (!memcmp(ref, got, (size_t)S * 4) && ref_score == got_score) ? "yes" : "NO";
        CHECK(first || same[0] == 'y', "long-form %s differs from the first run", names[q]);
        CHECK(st == MAS_OK, "long-form %s: status %d", names[q], (int)st);
        printf("| %s | %zu | %.1f | %s |\n", names[q], ws, ms, same);
        first = 0;
        cudaFree(work);
    }
    printf("score %.3f\n", (double)ref_score);
    cudaFree((void *)a.emissions.data); cudaFree((void *)a.labels); cudaFree((void *)a.token_len);
    cudaFree((void *)a.frame_len); cudaFree(d_ids); cudaFree(d_score);
    free(e); free(lab); free(ref); free(got);
}

int main(int argc, char **argv) {
    uint64_t seed = (uint64_t)time(NULL);
    int small = 0, bench = 0, lf_L = 0, lf_S = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--small")) small = 1;
        else if (!strcmp(argv[i], "--bench")) bench = 1;
        else if (!strcmp(argv[i], "--longform") && i + 2 < argc) {
            lf_L = atoi(argv[i + 1]);
            lf_S = atoi(argv[i + 2]);
            i += 2;
        } else seed = strtoull(argv[i], NULL, 10);
    }
    printf("test_topology_cuda seed %llu\n", (unsigned long long)seed);
    {
        /* host-only sizes, no device needed: a transcript of no tokens
         * without blanks has no states (the CUDA replay found a division
         * by zero here) */
        mas_topology tp;
        memset(&tp, 0, sizeof tp);
        tp.states_per_token = 1;
        tp.skip_penalty = -INFINITY;
        static const int64_t one = 1;
        float x = 0;
        mas_topo_args a;
        memset(&a, 0, sizeof a);
        a.topology = tp;
        mas_tensor3 et = {&x, MAS_FLOAT32, 0, {1, 1, 4}, {4, 4, 1}};
        a.emissions = et;
        a.tokens = 0;
        a.token_len = &one;
        a.frame_len = &one;
        for (int soft = 0; soft < 2; soft++) {
            size_t n = mas_topo_cuda_workspace_size(&a, soft);
            CHECK(n > 0 || !mas_has_cuda(), "tokens = 0: workspace size %zu (soft %d)", n, soft);
        }
        CHECK(mas_topo_cuda_min_workspace_size(&a) > 0 || !mas_has_cuda(), "tokens = 0: minimum");
    }
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
        printf("skipped: no CUDA device (%d host checks, %d failed)\n", checks, failures);
        return failures ? 1 : 0;
    }
    rng_state = seed ? seed : 1;
    if (lf_L > 0) {
        bench_longform(lf_L, lf_S);
        printf("%d checks, %d failed\n", checks, failures);
        return failures ? 1 : 0;
    }
    if (bench) {
        bench_row("CTC Viterbi B=32 S=1500 L=300 V=32", 1, 1, 1, 32, 300, 1500, 32, 0);
        bench_row("CTC log Z + gradient (fwd+bwd), same shape", 1, 1, 1, 32, 300, 1500, 32, 1);
        bench_row("3-state HMM Viterbi B=32 P=150 S=800", 3, 0, 0, 32, 150, 800, 0, 0);
        bench_row("k=1 Viterbi B=32 T=150 S=800 (hard MAS shape)", 1, 0, 0, 32, 150, 800, 0, 0);
        return 0;
    }
    const config configs[] = {
        {"k=1 plain (hard MAS), per state", 1, 0, 0, 0, 5, 20, 60, 0, MAS_FLOAT32, 0},
        {"k=3 HMM, per state", 3, 0, 0, 0, 5, 12, 80, 0, MAS_FLOAT32, 0},
        {"k=3 HMM, gathered", 3, 0, 0, 1, 4, 10, 70, 12, MAS_FLOAT32, 0},
        {"k=2 token skips, per state", 2, 0, 1, 0, 5, 10, 50, 0, MAS_FLOAT32, 0},
        {"CTC k=1, gathered", 1, 1, 0, 1, 6, 25, 90, 8, MAS_FLOAT32, 0},
        {"CTC k=2, gathered", 2, 1, 0, 1, 4, 10, 70, 6, MAS_FLOAT32, 0},
        {"CTC k=1, float64", 1, 1, 0, 1, 4, 20, 70, 5, MAS_FLOAT64, 0},
        {"k=3 HMM, float64", 3, 0, 0, 0, 3, 8, 40, 0, MAS_FLOAT64, 0},
        {"CTC k=1, float16", 1, 1, 0, 1, 4, 20, 70, 5, MAS_FLOAT16, 0},
        /* per-state emissions with blanks: frame labels come from the labels,
         * not from the emission rows (a fuzz replay finding) */
        {"CTC k=1, per state", 1, 1, 0, 0, 4, 12, 50, 6, MAS_FLOAT32, 0},
        {"CTC k=2, per state, float64", 2, 1, 0, 0, 3, 8, 50, 5, MAS_FLOAT64, 0},
        {"CTC with failing items", 1, 1, 0, 1, 5, 12, 40, 6, MAS_FLOAT32, 1},
        /* 1 to 3 frames: the soft sweeps' halves of no or one frame */
        {"CTC k=1, 1-3 frames", 1, 1, 0, 1, 8, 1, 3, 5, MAS_FLOAT32, 0},
        {"k=1 plain, 1-3 frames", 1, 0, 0, 0, 8, 2, 3, 0, MAS_FLOAT32, 0},
        {"k=2 token skips, 2-3 frames", 2, 0, 1, 0, 8, 2, 3, 0, MAS_FLOAT64, 0},
        {"k=2 per state, failing items", 2, 0, 0, 0, 5, 8, 40, 0, MAS_FLOAT32, 1},
        /* unbounded: several blocks an item from 1025 states */
        {"k=3 HMM 1500 states, failing items", 3, 0, 0, 0, 5, 500, 1600, 0, MAS_FLOAT32, 1, 0},
        {"k=2 token skips 600 states, float64", 2, 0, 1, 0, 3, 300, 900, 0, MAS_FLOAT64, 0, 0},
        {"CTC 601 states, float16", 1, 1, 0, 1, 4, 300, 800, 20, MAS_FLOAT16, 0, 0},
        {"CTC 1401 states (2 per thread)", 1, 1, 0, 1, 2, 700, 1600, 30, MAS_FLOAT32, 0},
        {"k=1 5000 states (8 per thread)", 1, 0, 0, 0, 1, 5000, 5200, 0, MAS_FLOAT32, 0},
        {"CTC 10001 states (hard only)", 1, 1, 0, 1, 2, 5000, 12000, 40, MAS_FLOAT32, 0, 1},
        {"CTC bench shape B=32 S=1500 L=300", 1, 1, 0, 1, 32, 300, 1500, 32, MAS_FLOAT32, 0},
        /* plain chains that hard MAS's one-block kernel runs (hard_chain.h):
         * ties, both layouts, every dtype the test writes, k up to its
         * limit and one past it, the benchmark's HMM */
        {"k=3 HMM, ties", 3, 0, 0, 0, 6, 12, 80, 0, MAS_FLOAT32, 0, 0, 1, 0},
        {"k=2 HMM, ties, float64, failing items", 2, 0, 0, 0, 5, 10, 60, 0, MAS_FLOAT64, 1, 0, 1, 0},
        {"k=3 HMM, states contiguous", 3, 0, 0, 0, 5, 12, 80, 0, MAS_FLOAT32, 0, 0, 0, 1},
        {"k=3 HMM, states contiguous, ties, float16", 3, 0, 0, 0, 5, 16, 96, 0, MAS_FLOAT16, 1, 0, 1, 1},
        {"k=3 HMM, float16", 3, 0, 0, 0, 4, 12, 80, 0, MAS_FLOAT16, 0},
        {"k=8 HMM", 8, 0, 0, 0, 4, 6, 80, 0, MAS_FLOAT32, 1},
        {"k=9 HMM (past the one-block chain)", 9, 0, 0, 0, 3, 5, 64, 0, MAS_FLOAT32, 0},
        {"k=3 HMM 990 states, ties", 3, 0, 0, 0, 3, 330, 1200, 0, MAS_FLOAT32, 1, 0, 1, 0},
        {"k=3 HMM bench shape B=32 P=150 S=800", 3, 0, 0, 0, 32, 150, 800, 0, MAS_FLOAT32, 0},
        {"k=2 HMM 700 states, states contiguous, float64, failing items", 2, 0, 0, 0, 4, 350, 900,
         0, MAS_FLOAT64, 1, 0, 0, 1},
        {"k=3 HMM 600 states, ties, float16", 3, 0, 0, 0, 4, 200, 700, 0, MAS_FLOAT16, 0, 0, 1, 0},
    };
    const int nconf = (int)(sizeof configs / sizeof configs[0]);
    for (int rep = 0; rep < (small ? 1 : 3); rep++)
        for (int i = 0; i < nconf; i++) {
            /* the large ones: the four before the plain chains, their last four */
            if (small && ((i >= nconf - 15 && i < nconf - 11) || i >= nconf - 4)) continue;
            run_config(&configs[i]);
        }
    printf("%d checks, %d failed\n", checks, failures);
    return failures ? 1 : 0;
}
