/* mas_hard_cpu against the reference, bit for bit, over random lengths,
 * layouts and strided views, value and path dtypes, thread counts, output
 * subsets, tie-heavy, -inf and huge inputs. Every output is surrounded by
 * poison so that writes outside it are caught; inputs are compared byte for
 * byte before and after the call. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support.h"

static const mas_dtype value_dtypes[4] = {MAS_FLOAT32, MAS_FLOAT64, MAS_FLOAT16,
                                          MAS_BFLOAT16};
static const mas_dtype path_dtypes[7] = {MAS_FLOAT32, MAS_FLOAT64, MAS_FLOAT16,
                                         MAS_BFLOAT16, MAS_INT32, MAS_INT64, MAS_UINT8};
static const int32_t thread_counts[6] = {1, 2, 3, 8, 0, -1};

typedef struct size_class {
    const char *name;
    int64_t max_batch, max_tokens, max_frames;
} size_class;

/* Lengths for one item (1 <= x_len <= min(T, y_len), y_len <= S), favouring
 * the edges the issue lists. */
static void pick_lengths(ts_rng *rng, int64_t tokens, int64_t frames, int64_t *x,
                         int64_t *y) {
    int64_t most_x = tokens < frames ? tokens : frames;
    int64_t y_len = ts_rng_int(rng, 1, frames), x_len;
    switch (ts_rng_int(rng, 0, 7)) {
    case 0: /* y_len == S */
        y_len = frames;
        x_len = ts_rng_int(rng, 1, most_x);
        break;
    case 1: /* x_len == y_len */
        x_len = y_len = ts_rng_int(rng, 1, most_x);
        break;
    case 2: /* x_len == 1 */
        x_len = 1;
        break;
    case 3: /* x_len == T whenever T <= S */
        x_len = most_x;
        y_len = ts_rng_int(rng, x_len, frames);
        break;
    case 4: /* the whole array */
        x_len = most_x;
        y_len = frames;
        break;
    default:
        x_len = ts_rng_int(rng, 1, tokens < y_len ? tokens : y_len);
        break;
    }
    *x = x_len;
    *y = y_len;
}

/* One random case: plan, inputs, call, every check. */
static void run_case(ts_rng *rng, int64_t case_no, const size_class *size) {
    ts_hard_plan plan;
    memset(&plan, 0, sizeof plan);
    /* Value and path dtypes cycle with coprime periods, so every pair meets
     * once in 28 cases; the rest is random. */
    plan.dtype = value_dtypes[case_no % 4];
    plan.path_dtype = path_dtypes[case_no % 7];
    plan.wants = (int)ts_rng_int(rng, 1, TS_WANT_ALL);
    plan.threads = thread_counts[ts_rng_int(rng, 0, 5)];
    ts_hard_plan_random_sizes(rng, &plan, size->max_batch, size->max_tokens, size->max_frames);
    ts_layout_random(rng, &plan.value_layout, 1, 1);
    ts_layout_random(rng, &plan.path_layout, 1, 0);
    const ts_hard_values vals = ts_hard_plan_random_rest(rng, &plan);
    const ts_value_kind kind = vals.kind;
    const int poison_outside = vals.poison_outside;
    const double neg_inf_fraction = vals.neg_inf_fraction;

    ts_hard_call call;
    int made = ts_hard_call_make(&call, &plan);
    if (made)
        for (int64_t b = 0; b < plan.batch; b++)
            pick_lengths(rng, plan.tokens, plan.frames, &call.x_len[b], &call.y_len[b]);

    char plan_text[320], lengths[128];
    ts_hard_plan_describe(&plan, plan_text, sizeof plan_text);
    int at = 0;
    lengths[0] = '\0';
    for (int64_t b = 0; made && b < plan.batch && b < 6; b++)
        at += snprintf(lengths + at, sizeof lengths - (size_t)at, "%s%lldx%lld", b ? "," : "",
                       (long long)call.x_len[b], (long long)call.y_len[b]);
    ts_case_begin("%s case %lld: %s %s B=%lld T=%lld S=%lld lens[%s%s] %s%s%s", size->name,
                  (long long)case_no, ts_dtype_name(plan.dtype), ts_value_kind_name(kind),
                  (long long)plan.batch, (long long)plan.tokens, (long long)plan.frames,
                  lengths, plan.batch > 6 ? ",..." : "", plan_text,
                  poison_outside ? " poison-outside" : "",
                  neg_inf_fraction > 0 ? " -inf-cells" : "");
    if (!made) {
        TS_CHECK(0, "out of memory");
        ts_hard_call_free(&call);
        ts_case_end();
        return;
    }
    ts_fill_values(rng, &call.value.tensor, kind, call.x_len, call.y_len, poison_outside);
    if (neg_inf_fraction > 0)
        for (int64_t b = 0; b < plan.batch; b++)
            ts_sprinkle_neg_inf(rng, &call.value.tensor, b, call.x_len[b], call.y_len[b],
                                neg_inf_fraction);
    ts_hard_call_prepare(&call);
    for (int64_t b = 0; b < plan.batch; b++)
        TS_CHECK(call.refs[b].status == MAS_OK, "test bug: item %lld invalid (%d)",
                 (long long)b, (int)call.refs[b].status);

    mas_error err = {-5, 0, 77};
    mas_status st = ts_hard_call_run(&call, &err);
    TS_CHECK(st == MAS_OK, "status %d (%s), err.item %lld", (int)st, mas_status_string(st),
             (long long)err.item);
    if (st == MAS_OK) ts_hard_call_check_outputs(&call);
    else ts_hard_call_check_untouched(&call);
    /* Tiny items with exact sums: the library's path is the brute-force
     * optimum the tie rule picks, checked directly, not only through the
     * reference. */
    int exact = kind == TS_VALUES_HALVES || kind == TS_VALUES_SMALL_INT;
    if (st == MAS_OK && exact && (plan.wants & TS_WANT_INDICES) && plan.frames <= 8) {
        for (int64_t b = 0; b < plan.batch; b++) {
            ts_brute_result brute;
            ts_brute_force(&call.value.tensor, b, call.x_len[b], call.y_len[b], &brute);
            const int32_t *row = (const int32_t *)call.indices.tensor.data +
                                 b * call.indices.tensor.stride[0];
            TS_CHECK(memcmp(row, brute.tie_rule_indices,
                            (size_t)call.y_len[b] * sizeof(int32_t)) == 0,
                     "item %lld: not the path the tie rule picks among %lld best",
                     (long long)b, (long long)brute.best_paths);
        }
    }
    ts_hard_call_free(&call);
    ts_case_end();
}

/* The same input through every thread count gives the same bytes: covered
 * by the reference comparisons above, but checked directly on one long item
 * too, where a thread count above 1 has to split columns, not items. */
static void long_item_threads_case(ts_rng *rng) {
    const int64_t T = 300, S = 1200;
    ts_case_begin("long item T=%lld S=%lld, float32, every thread count", (long long)T,
                  (long long)S);
    ts_layout layout;
    ts_layout_plain(&layout, 0);
    ts_view value;
    int64_t x_len[1] = {T}, y_len[1] = {S};
    int32_t first_indices[1200];
    float first_score = 0;
    if (!ts_view_make(&value, MAS_FLOAT32, 1, T, S, &layout, 0)) {
        TS_CHECK(0, "out of memory");
        ts_case_end();
        return;
    }
    ts_fill_values(rng, &value.tensor, TS_VALUES_HALVES, x_len, y_len, 0);
    for (int k = 0; k < 6; k++) {
        int32_t threads = thread_counts[k];
        size_t ws_size = mas_hard_cpu_workspace_size(1, T, S, MAS_FLOAT32, threads);
        void *ws = malloc(ws_size ? ws_size : 1);
        int32_t indices[1200];
        float score = 0;
        mas_hard_outputs out;
        memset(&out, 0, sizeof out);
        out.indices = indices;
        out.indices_stride = S;
        out.score = &score;
        mas_status st = mas_hard_cpu(&value.tensor, x_len, y_len, &out, ws, ws_size, threads, NULL);
        TS_CHECK(st == MAS_OK, "threads=%d: status %d", (int)threads, (int)st);
        if (k == 0) {
            memcpy(first_indices, indices, sizeof indices);
            first_score = score;
        } else {
            TS_CHECK(memcmp(first_indices, indices, sizeof indices) == 0 &&
                         ts_f32_bits(first_score) == ts_f32_bits(score),
                     "threads=%d differs from threads=1", (int)threads);
        }
        free(ws);
    }
    ts_view_free(&value);
    ts_case_end();
}

int main(int argc, char **argv) {
    uint64_t seed = ts_seed_from_args(argc, argv);
    ts_rng rng;
    ts_rng_init(&rng, seed);
    static const size_class tiny = {"tiny", 4, 8, 8};
    static const size_class small = {"small", 9, 40, 160};
    static const size_class medium = {"medium", 5, 100, 400};
    static const size_class large = {"large", 3, 300, 1200};
    int64_t case_no = 0;
    /* A few seconds on two cores under ASan and UBSan. */
    for (int64_t c = 0; c < 2520; c++) run_case(&rng, case_no++, &tiny);
    for (int64_t c = 0; c < 1260; c++) run_case(&rng, case_no++, &small);
    for (int64_t c = 0; c < 400; c++) run_case(&rng, case_no++, &medium);
    for (int64_t c = 0; c < 30; c++) run_case(&rng, case_no++, &large);
    long_item_threads_case(&rng);
    return ts_finish();
}
