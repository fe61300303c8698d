/* Long-form hard alignment (a workspace below the unbounded size, mas.h
 * sections 4 and 7): mas_hard_cpu and mas_viterbi_cpu given budgets from
 * the smallest that works (mas_*_min_workspace_size) up to one byte below
 * the unbounded size, on 1 to 3 threads, must give the unbounded run's
 * outputs bit for bit (durations, indices, path, score; state ids, labels,
 * spans, token scores, score) and statuses, and hard MAS also the plain
 * reference's (support.c). Random sizes long enough for many segments,
 * tie-heavy values, -inf cells and bad items; every topology option (k
 * states, stay/advance scores, token skips, CTC blanks, gathered
 * emissions). The workspace is exactly the budget, with guard bands, so a
 * write beyond it is caught. One byte below the smallest:
 * MAS_ERR_WORKSPACE_TOO_SMALL. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support.h"

#define GUARD 64
#define WS_FILL 0x69

/* Budgeted calls made (printed: the test must not pass by making none). */
static int64_t budget_runs;

static const mas_dtype value_dtypes[4] = {MAS_FLOAT32, MAS_FLOAT64, MAS_FLOAT16,
                                          MAS_BFLOAT16};

/* Budgets to try between min and full (exclusive of full). */
static int pick_budgets(ts_rng *rng, size_t min, size_t full, size_t *out) {
    int n = 0;
    if (min >= full) return 0;
    out[n++] = min;
    out[n++] = min + (size_t)ts_rng_int(rng, 0, (int64_t)(full - min - 1));
    out[n++] = min + (full - min) / 8;
    out[n++] = full - 1;
    budget_runs += n;
    return n;
}

/* ---------------------------------------------------------------------- */
/* Hard MAS                                                                */
/* ---------------------------------------------------------------------- */

typedef struct hard_out {
    int32_t *dur, *idx;
    uint8_t *path;
    double *score64;
    float *score32;
    mas_status st;
    mas_error err;
} hard_out;

static void hard_out_alloc(hard_out *o, int64_t B, int64_t T, int64_t S) {
    o->dur = calloc((size_t)(B * T), sizeof(int32_t));
    o->idx = calloc((size_t)(B * S), sizeof(int32_t));
    o->path = calloc((size_t)(B * T * S), 1);
    o->score64 = calloc((size_t)B, sizeof(double));
    o->score32 = calloc((size_t)B, sizeof(float));
}

static void hard_out_free(hard_out *o) {
    free(o->dur);
    free(o->idx);
    free(o->path);
    free(o->score64);
    free(o->score32);
}

static void hard_call(const mas_tensor3 *v, const int64_t *x, const int64_t *y, size_t ws_size,
                      int32_t threads, hard_out *o, int64_t *stray) {
    int64_t B = v->dim[0], T = v->dim[1], S = v->dim[2];
    mas_hard_outputs out;
    memset(&out, 0, sizeof out);
    out.durations = o->dur;
    out.durations_stride = T;
    out.indices = o->idx;
    out.indices_stride = S;
    out.path = (mas_tensor3){o->path, MAS_UINT8, 0, {B, T, S}, {T * S, S, 1}};
    out.score = v->dtype == MAS_FLOAT64 ? (void *)o->score64 : (void *)o->score32;
    ts_guarded ws;
    if (!ts_guarded_make(&ws, ws_size, GUARD, WS_FILL)) {
        TS_CHECK(0, "out of memory");
        return;
    }
    o->st = mas_hard_cpu(v, x, y, &out, ws.data, ws_size, threads, &o->err);
    *stray = ts_guarded_stray_bytes(&ws, WS_FILL);
    ts_guarded_free(&ws);
}

/* One random case; B, T, S > 0: those sizes (one long item over a team of
 * threads: the pipelined long form), else random ones. */
static void hard_case(ts_rng *rng, int64_t case_no, int64_t B, int64_t T, int64_t S) {
    mas_dtype dtype = value_dtypes[ts_rng_int(rng, 0, 3)];
    if (B <= 0) {
        B = ts_rng_int(rng, 1, 3);
        T = ts_rng_int(rng, 1, ts_rng_chance(rng, 0.4) ? 260 : 20); /* several tiles */
        S = T + ts_rng_int(rng, 0, ts_rng_chance(rng, 0.5) ? 700 : 150);
    }
    ts_value_kind kind = (ts_value_kind)ts_rng_int(rng, 0, TS_VALUES_KIND_COUNT - 1);
    ts_case_begin("hard case %lld: %s B=%lld T=%lld S=%lld values %s", (long long)case_no,
                  ts_dtype_name(dtype), (long long)B, (long long)T, (long long)S,
                  ts_value_kind_name(kind));
    ts_layout lay;
    ts_layout_plain(&lay, ts_rng_chance(rng, 0.3));
    ts_view v;
    if (!ts_view_make(&v, dtype, B, T, S, &lay, 0x77)) {
        TS_CHECK(0, "out of memory");
        ts_case_end();
        return;
    }
    int64_t x[3], y[3];
    for (int64_t b = 0; b < B; b++) {
        y[b] = ts_rng_chance(rng, 0.5) ? S : ts_rng_int(rng, 1, S);
        x[b] = ts_rng_int(rng, 1, y[b] < T ? y[b] : T);
    }
    ts_fill_values(rng, &v.tensor, kind, x, y, 1);
    for (int64_t b = 0; b < B; b++) {
        if (ts_rng_chance(rng, 0.3)) ts_sprinkle_neg_inf(rng, &v.tensor, b, x[b], y[b], 0.2);
        if (ts_rng_chance(rng, 0.1)) x[b] = y[b] + 1; /* a bad item */
        if (ts_rng_chance(rng, 0.05)) /* NaN in the band */
            ts_store(v.tensor.data, ts_view_offset(&v.tensor, b, 0, 0), dtype, NAN);
    }
    /* the plain reference */
    ts_ref_item ref[3];
    for (int64_t b = 0; b < B; b++) {
        ts_ref_item_alloc(&ref[b], T, S);
        ts_ref_hard_item(&v.tensor, b, x[b], y[b], &ref[b]);
    }
    size_t full1 = mas_hard_cpu_workspace_size(B, T, S, dtype, 1);
    hard_out base;
    hard_out_alloc(&base, B, T, S);
    int64_t stray = 0;
    hard_call(&v.tensor, x, y, full1, 1, &base, &stray);
    for (int64_t b = 0; b < B; b++) {
        TS_CHECK(base.st != MAS_OK || ref[b].status == MAS_OK, "unbounded vs reference status");
        if (ref[b].status != MAS_OK) continue;
        double sc = dtype == MAS_FLOAT64 ? base.score64[b] : (double)base.score32[b];
        TS_CHECK(ts_f64_bits(sc) == ts_f64_bits(ref[b].score), "item %lld: unbounded score",
                 (long long)b);
    }
    for (int32_t threads = 1; threads <= 3; threads++) {
        size_t full = mas_hard_cpu_workspace_size(B, T, S, dtype, threads);
        size_t min = mas_hard_cpu_min_workspace_size(B, T, S, dtype, threads);
        TS_CHECK(min > 0 && min <= full, "min %zu full %zu", min, full);
        size_t budgets[6];
        int nb = pick_budgets(rng, min, full, budgets);
        if (nb > 0 && full / 2 > min) budgets[nb++] = full / 2;
        if (nb > 0 && full / 4 > min) budgets[nb++] = full / 4;
        for (int k = 0; k < nb; k++) {
            hard_out o;
            hard_out_alloc(&o, B, T, S);
            hard_call(&v.tensor, x, y, budgets[k], threads, &o, &stray);
            TS_CHECK(stray == 0, "threads %d budget %zu: %lld bytes written outside",
                     (int)threads, budgets[k], (long long)stray);
            TS_CHECK(o.st == base.st && o.err.item == base.err.item,
                     "threads %d budget %zu (min %zu, full %zu): status %d item %lld, "
                     "unbounded %d item %lld", (int)threads, budgets[k], min, full, (int)o.st,
                     (long long)o.err.item, (int)base.st, (long long)base.err.item);
            TS_CHECK(memcmp(o.dur, base.dur, (size_t)(B * T) * 4) == 0,
                     "threads %d budget %zu: durations differ", (int)threads, budgets[k]);
            TS_CHECK(memcmp(o.idx, base.idx, (size_t)(B * S) * 4) == 0,
                     "threads %d budget %zu: indices differ", (int)threads, budgets[k]);
            TS_CHECK(memcmp(o.path, base.path, (size_t)(B * T * S)) == 0,
                     "threads %d budget %zu: path differs", (int)threads, budgets[k]);
            TS_CHECK(memcmp(o.score64, base.score64, (size_t)B * 8) == 0 &&
                         memcmp(o.score32, base.score32, (size_t)B * 4) == 0,
                     "threads %d budget %zu: score differs", (int)threads, budgets[k]);
            for (int64_t b = 0; b < B; b++) {
                if (ref[b].status != MAS_OK) continue;
                TS_CHECK(memcmp(o.dur + b * T, ref[b].durations, (size_t)T * 4) == 0 &&
                             memcmp(o.idx + b * S, ref[b].indices, (size_t)S * 4) == 0,
                         "threads %d budget %zu item %lld: differs from the reference",
                         (int)threads, budgets[k], (long long)b);
            }
            hard_out_free(&o);
        }
        if (min > 64 && min < full) {
            hard_out o;
            hard_out_alloc(&o, B, T, S);
            hard_call(&v.tensor, x, y, min - 1, threads, &o, &stray);
            TS_CHECK(o.st == MAS_ERR_WORKSPACE_TOO_SMALL && o.err.status == (int32_t)o.st,
                     "min - 1 bytes: status %d", (int)o.st);
            TS_CHECK(stray == 0, "min - 1 bytes: written");
            hard_out_free(&o);
        }
    }
    hard_out_free(&base);
    for (int64_t b = 0; b < B; b++) ts_ref_item_free(&ref[b]);
    ts_view_free(&v);
    ts_case_end();
}

/* ---------------------------------------------------------------------- */
/* Topologies                                                              */
/* ---------------------------------------------------------------------- */

typedef struct topo_out {
    int32_t *ids, *labels, *spans;
    double *tscore64, *score64;
    float *tscore32, *score32;
    mas_status st;
    mas_error err;
} topo_out;

static void topo_out_alloc(topo_out *o, int64_t B, int64_t L, int64_t S) {
    o->ids = calloc((size_t)(B * S), 4);
    o->labels = calloc((size_t)(B * S), 4);
    o->spans = calloc((size_t)(B * L * 2), 4);
    o->tscore64 = calloc((size_t)(B * L), 8);
    o->tscore32 = calloc((size_t)(B * L), 4);
    o->score64 = calloc((size_t)B, 8);
    o->score32 = calloc((size_t)B, 4);
}

static void topo_out_free(topo_out *o) {
    free(o->ids);
    free(o->labels);
    free(o->spans);
    free(o->tscore64);
    free(o->tscore32);
    free(o->score64);
    free(o->score32);
}

static void topo_call(const mas_topo_args *a, int64_t B, int64_t L, int64_t S, int f64,
                      size_t ws_size, int32_t threads, topo_out *o, int64_t *stray) {
    mas_topo_hard_outputs out;
    memset(&out, 0, sizeof out);
    out.state_ids = o->ids;
    out.state_ids_stride = S;
    out.frame_labels = a->labels ? o->labels : NULL;
    out.frame_labels_stride = S;
    out.token_spans = o->spans;
    out.token_spans_stride = 2 * L;
    out.token_scores = f64 ? (void *)o->tscore64 : (void *)o->tscore32;
    out.token_scores_stride = L;
    out.score = f64 ? (void *)o->score64 : (void *)o->score32;
    (void)B;
    ts_guarded ws;
    if (!ts_guarded_make(&ws, ws_size, GUARD, WS_FILL)) {
        TS_CHECK(0, "out of memory");
        return;
    }
    o->st = mas_viterbi_cpu(a, &out, ws.data, ws_size, threads, &o->err);
    *stray = ts_guarded_stray_bytes(&ws, WS_FILL);
    ts_guarded_free(&ws);
}

static void topo_case(ts_rng *rng, int64_t case_no) {
    mas_dtype dtype = value_dtypes[ts_rng_int(rng, 0, 3)];
    int f64 = dtype == MAS_FLOAT64;
    int kind = (int)ts_rng_int(rng, 0, 2); /* 0 plain, 1 CTC blanks, 2 token skips */
    int64_t k = kind == 1 ? ts_rng_int(rng, 1, 2) : ts_rng_int(rng, 1, 3);
    int gathered = kind == 1 ? 1 : (int)ts_rng_chance(rng, 0.5);
    int64_t B = ts_rng_int(rng, 1, 3);
    int64_t L = ts_rng_int(rng, 1, ts_rng_chance(rng, 0.4) ? 90 : 8); /* several tiles */
    int64_t V = 6;
    double stay[3], adv[3];
    for (int j = 0; j < 3; j++) {
        stay[j] = -ts_rng_int(rng, 0, 4) * 0.25; /* quarters: ties happen */
        adv[j] = -ts_rng_int(rng, 0, 4) * 0.25;
    }
    mas_topo_args a;
    memset(&a, 0, sizeof a);
    a.topology.states_per_token = (int32_t)k;
    a.topology.has_blank = kind == 1;
    a.topology.blank = 0;
    a.topology.stay = stay;
    a.topology.advance = adv;
    a.topology.blank_stay = -0.5;
    a.topology.blank_advance = -0.25;
    a.topology.skip_penalty = kind == 2 ? -1.0 : -INFINITY;
    a.gathered = gathered;
    a.tokens = L;
    int64_t n = mas_topology_states(&a.topology, L);
    int64_t S = n + ts_rng_int(rng, 0, ts_rng_chance(rng, 0.5) ? 600 : 120);
    ts_case_begin("topology case %lld: %s kind %d k=%lld gathered %d B=%lld L=%lld S=%lld",
                  (long long)case_no, ts_dtype_name(dtype), kind, (long long)k, gathered,
                  (long long)B, (long long)L, (long long)S);
    int32_t *labels = malloc((size_t)(B * L * k) * 4);
    for (int64_t q = 0; q < B * L * k; q++)
        labels[q] = (int32_t)ts_rng_int(rng, kind == 1 ? 1 : 0, V - 1);
    a.labels = (kind == 1 || gathered || ts_rng_chance(rng, 0.5)) ? labels : NULL;
    a.labels_stride = L * k;
    ts_layout lay;
    ts_layout_plain(&lay, 0);
    ts_view v;
    int64_t d1 = gathered ? S : n, d2 = gathered ? V : S;
    if (!ts_view_make(&v, dtype, B, d1, d2, &lay, 0x77)) {
        TS_CHECK(0, "out of memory");
        free(labels);
        ts_case_end();
        return;
    }
    ts_value_kind vk = ts_rng_chance(rng, 0.5) ? TS_VALUES_HALVES : TS_VALUES_LOGLIK;
    for (int64_t b = 0; b < B; b++)
        for (int64_t i = 0; i < d1; i++)
            for (int64_t j = 0; j < d2; j++)
                ts_store(v.tensor.data, ts_view_offset(&v.tensor, b, i, j), dtype,
                         ts_random_value(rng, vk, dtype));
    a.emissions = v.tensor;
    int64_t tl[3], fl[3];
    for (int64_t b = 0; b < B; b++) {
        tl[b] = ts_rng_chance(rng, 0.5) ? L : ts_rng_int(rng, 1, L);
        int64_t nb = mas_topology_states(&a.topology, tl[b]);
        fl[b] = ts_rng_chance(rng, 0.5) ? S : ts_rng_int(rng, nb < S ? nb : S, S);
        if (ts_rng_chance(rng, 0.05)) fl[b] = 0; /* a bad item */
    }
    a.token_len = tl;
    a.frame_len = fl;
    size_t full1 = mas_topo_cpu_workspace_size(&a, 0, 1);
    topo_out base;
    topo_out_alloc(&base, B, L, S);
    int64_t stray = 0;
    topo_call(&a, B, L, S, f64, full1, 1, &base, &stray);
    for (int32_t threads = 1; threads <= 3; threads++) {
        size_t full = mas_topo_cpu_workspace_size(&a, 0, threads);
        size_t min = mas_topo_cpu_min_workspace_size(&a, threads);
        TS_CHECK(min > 0 && min <= full, "min %zu full %zu", min, full);
        size_t budgets[4];
        int nbud = pick_budgets(rng, min, full, budgets);
        for (int q = 0; q < nbud; q++) {
            topo_out o;
            topo_out_alloc(&o, B, L, S);
            topo_call(&a, B, L, S, f64, budgets[q], threads, &o, &stray);
            TS_CHECK(stray == 0, "threads %d budget %zu: %lld bytes written outside",
                     (int)threads, budgets[q], (long long)stray);
            TS_CHECK(o.st == base.st && o.err.item == base.err.item,
                     "threads %d budget %zu (min %zu full %zu): status %d item %lld, "
                     "unbounded %d item %lld", (int)threads, budgets[q], min, full, (int)o.st,
                     (long long)o.err.item, (int)base.st, (long long)base.err.item);
            TS_CHECK(memcmp(o.ids, base.ids, (size_t)(B * S) * 4) == 0 &&
                         memcmp(o.labels, base.labels, (size_t)(B * S) * 4) == 0,
                     "threads %d budget %zu: state ids / labels differ", (int)threads,
                     budgets[q]);
            TS_CHECK(memcmp(o.spans, base.spans, (size_t)(B * L * 2) * 4) == 0,
                     "threads %d budget %zu: spans differ", (int)threads, budgets[q]);
            TS_CHECK(memcmp(o.tscore64, base.tscore64, (size_t)(B * L) * 8) == 0 &&
                         memcmp(o.tscore32, base.tscore32, (size_t)(B * L) * 4) == 0 &&
                         memcmp(o.score64, base.score64, (size_t)B * 8) == 0 &&
                         memcmp(o.score32, base.score32, (size_t)B * 4) == 0,
                     "threads %d budget %zu: scores differ", (int)threads, budgets[q]);
            topo_out_free(&o);
        }
        if (min > 64 && min < full) {
            topo_out o;
            topo_out_alloc(&o, B, L, S);
            topo_call(&a, B, L, S, f64, min - 1, threads, &o, &stray);
            TS_CHECK(o.st == MAS_ERR_WORKSPACE_TOO_SMALL, "min - 1 bytes: status %d",
                     (int)o.st);
            topo_out_free(&o);
        }
    }
    topo_out_free(&base);
    ts_view_free(&v);
    free(labels);
    ts_case_end();
}

/* The sizes scale as the header says: far below the unbounded size for a
 * long item, and the smallest size is one worker whatever the threads. */
static void size_cases(void) {
    ts_case_begin("sizes");
    size_t full = mas_hard_cpu_workspace_size(1, 6000, 36000, MAS_FLOAT32, 1);
    size_t min = mas_hard_cpu_min_workspace_size(1, 6000, 36000, MAS_FLOAT32, 1);
    TS_CHECK(min < full / 8, "T=6000 S=36000: min %zu full %zu", min, full);
    TS_CHECK(mas_hard_cpu_min_workspace_size(4, 6000, 36000, MAS_FLOAT32, 4) <= min + 64,
             "min with 4 threads");
    TS_CHECK(mas_hard_cpu_min_workspace_size(0, 6000, 36000, MAS_FLOAT32, 1) == 0, "B=0");
    TS_CHECK(mas_hard_cpu_min_workspace_size(1, (int64_t)1 << 30, (int64_t)1 << 30,
                                             MAS_FLOAT32, 1) == SIZE_MAX,
             "too big");
    /* 2 hours: 60,000 tokens x 360,000 frames, well under 1 GB */
    size_t two_hours = mas_hard_cpu_min_workspace_size(1, 60000, 360000, MAS_FLOAT32, 1);
    TS_CHECK(two_hours < ((size_t)1 << 30), "2 hours: %zu", two_hours);
    printf("sizes: T=6000 S=36000 unbounded %zu, min %zu; T=60000 S=360000 min %zu\n", full,
           min, two_hours);
    ts_case_end();
}

int main(int argc, char **argv) {
    ts_rng rng;
    ts_rng_init(&rng, ts_seed_from_args(argc, argv));
    size_cases();
    for (int64_t c = 0; c < 60; c++) hard_case(&rng, c, 0, 0, 0);
    /* one long item and a pair: more tiles than threads, so the team
     * pipelines the item (the budgets above the smallest hold its edges) */
    for (int64_t c = 0; c < 6; c++)
        hard_case(&rng, 60 + c, 1 + c % 2, ts_rng_int(&rng, 130, 400), ts_rng_int(&rng, 1500, 4000));
    for (int64_t c = 0; c < 60; c++) topo_case(&rng, c);
    printf("%lld budgeted calls\n", (long long)budget_runs);
    TS_CHECK(budget_runs > 300, "budgeted calls: %lld", (long long)budget_runs);
    return ts_finish();
}
