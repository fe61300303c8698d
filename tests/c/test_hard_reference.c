/* Checks the test reference itself: hand-worked cases, then the reference
 * against brute-force enumeration of every monotonic path on tiny sizes. The
 * library is not called here (apart from mas_dtype_size); the other tests
 * trust the reference because this one passes. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "support.h"

static const mas_dtype value_dtypes[4] = {MAS_FLOAT32, MAS_FLOAT64, MAS_FLOAT16,
                                          MAS_BFLOAT16};

/* One item [1, tokens, frames] from a row-major table of doubles. */
static int make_item(ts_view *view, mas_dtype dtype, int64_t tokens, int64_t frames,
                     const double *rows) {
    ts_layout layout;
    ts_layout_plain(&layout, 0);
    if (!ts_view_make(view, dtype, 1, tokens, frames, &layout, 0)) return 0;
    for (int64_t i = 0; i < tokens; i++)
        for (int64_t j = 0; j < frames; j++)
            ts_store(view->tensor.data, ts_view_offset(&view->tensor, 0, i, j), dtype,
                     rows[i * frames + j]);
    return 1;
}

/* Runs the reference on a hand-worked case and compares with what the spec
 * gives when worked by hand. expect_indices may be NULL for error cases. */
static void hand_case(const char *name, int64_t tokens, int64_t frames,
                      const double *rows, int64_t x_len, int64_t y_len,
                      mas_status expect_status, const int32_t *expect_indices,
                      double expect_score) {
    for (int d = 0; d < 4; d++) {
        ts_case_begin("hand case %s, %s", name, ts_dtype_name(value_dtypes[d]));
        ts_view view;
        ts_ref_item ref;
        if (!make_item(&view, value_dtypes[d], tokens, frames, rows) ||
            !ts_ref_item_alloc(&ref, tokens, frames)) {
            TS_CHECK(0, "out of memory");
            ts_case_end();
            return;
        }
        mas_status st = ts_ref_hard_item(&view.tensor, 0, x_len, y_len, &ref);
        TS_CHECK(st == expect_status, "status %d, expected %d", (int)st, (int)expect_status);
        if (st == MAS_OK && expect_status == MAS_OK) {
            TS_CHECK(ref.score == expect_score, "score %.17g, expected %.17g", ref.score,
                     expect_score);
            for (int64_t j = 0; j < y_len; j++)
                TS_CHECK(ref.indices[j] == expect_indices[j], "frame %lld: token %d, expected %d",
                         (long long)j, ref.indices[j], expect_indices[j]);
        }
        if (st != MAS_OK) {
            TS_CHECK(ref.score == -INFINITY, "failed item's score %.17g, not -inf", ref.score);
            for (int64_t j = 0; j < frames; j++)
                TS_CHECK(ref.indices[j] == -1, "failed item's index %lld is %d", (long long)j,
                         ref.indices[j]);
        }
        ts_ref_item_free(&ref);
        ts_view_free(&view);
        ts_case_end();
    }
}

static void hand_cases(void) {
    const double ninf = -INFINITY;
    {
        /* All ties: walking back, stay on the last token until the diagonal
         * forces a move, so the last token takes every spare frame. */
        double zeros[3 * 5] = {0};
        int32_t idx[5] = {0, 1, 2, 2, 2};
        hand_case("zeros 3x5", 3, 5, zeros, 3, 5, MAS_OK, idx, 0.0);
    }
    {
        double rows[1 * 4] = {1, 2, 3, 4.5};
        int32_t idx[4] = {0, 0, 0, 0};
        hand_case("one token", 1, 4, rows, 1, 4, MAS_OK, idx, 10.5);
    }
    {
        double rows[3 * 3] = {1, 9, 9, 9, 2, 9, 9, 9, 3};
        int32_t idx[3] = {0, 1, 2};
        hand_case("square: diagonal only", 3, 3, rows, 3, 3, MAS_OK, idx, 6.0);
    }
    {
        /* (1,0) = 9 is unreachable: Q(i,0) = -inf for i > 0. */
        double rows[2 * 3] = {1, 5, 1, 9, 1, 2};
        int32_t idx[3] = {0, 0, 1};
        hand_case("2x3 distinct", 2, 3, rows, 2, 3, MAS_OK, idx, 8.0);
    }
    {
        double rows[2 * 3] = {0, 0, 0, 0, 3, 0};
        int32_t idx[3] = {0, 1, 1};
        hand_case("2x3 early move", 2, 3, rows, 2, 3, MAS_OK, idx, 3.0);
    }
    {
        /* Both paths score 1; Q(1,1) == Q(0,1) so the backtrack stays. */
        double rows[2 * 3] = {0, 1, 0, 0, 1, 0};
        int32_t idx[3] = {0, 1, 1};
        hand_case("2x3 tie", 2, 3, rows, 2, 3, MAS_OK, idx, 1.0);
    }
    {
        double rows[2 * 3] = {0, ninf, 0, 0, 0, 0};
        int32_t idx[3] = {0, 1, 1};
        hand_case("2x3 -inf forces move", 2, 3, rows, 2, 3, MAS_OK, idx, 0.0);
    }
    {
        /* Lengths shorter than the array: cells beyond them are ignored even
         * when NaN or +inf. */
        double rows[3 * 4] = {1, 1, NAN, INFINITY, 0, 2, NAN, NAN, NAN, NAN, NAN, NAN};
        int32_t idx[2] = {0, 1};
        hand_case("2x2 inside 3x4 with NaN outside", 3, 4, rows, 2, 2, MAS_OK, idx, 3.0);
    }
    {
        double rows[2 * 3] = {0, ninf, 0, 0, ninf, 0};
        hand_case("-inf wall", 2, 3, rows, 2, 3, MAS_ERR_NO_FINITE_PATH, NULL, 0);
    }
    {
        double rows[2 * 3] = {ninf, 0, 0, 0, 0, 0};
        hand_case("-inf start", 2, 3, rows, 2, 3, MAS_ERR_NO_FINITE_PATH, NULL, 0);
    }
    {
        double rows[2 * 3] = {0, 0, 0, 0, 0, ninf};
        hand_case("-inf end", 2, 3, rows, 2, 3, MAS_ERR_NO_FINITE_PATH, NULL, 0);
    }
    {
        double rows[2 * 3] = {0, 0, 0, 0, NAN, 0};
        hand_case("NaN inside", 2, 3, rows, 2, 3, MAS_ERR_NONFINITE_VALUE, NULL, 0);
    }
    {
        /* (0,1) is in the band; (0,2) would not be: no path ends from it. */
        double rows[2 * 3] = {0, INFINITY, 0, 0, 0, 0};
        hand_case("+inf inside", 2, 3, rows, 2, 3, MAS_ERR_NONFINITE_VALUE, NULL, 0);
    }
    {
        double rows[2 * 3] = {0};
        hand_case("x_len > y_len", 2, 3, rows, 2, 1, MAS_ERR_X_LEN_GT_Y_LEN, NULL, 0);
        hand_case("x_len = 0", 2, 3, rows, 0, 3, MAS_ERR_BAD_LENGTH, NULL, 0);
        hand_case("x_len > T", 2, 3, rows, 3, 3, MAS_ERR_BAD_LENGTH, NULL, 0);
        hand_case("y_len > S", 2, 3, rows, 2, 4, MAS_ERR_BAD_LENGTH, NULL, 0);
    }
}

/* Reference against brute force on one random tiny item. */
static void brute_case(ts_rng *rng, int64_t case_no) {
    mas_dtype dtype = value_dtypes[ts_rng_int(rng, 0, 3)];
    ts_value_kind kind = (ts_value_kind)ts_rng_int(rng, 0, TS_VALUES_KIND_COUNT - 1);
    int64_t y_len = ts_rng_int(rng, 1, 8);
    int64_t x_len = ts_rng_int(rng, 1, y_len);
    int64_t tokens = ts_rng_int(rng, x_len, 8);
    int64_t frames = ts_rng_int(rng, y_len, 8);
    int64_t batch = ts_rng_int(rng, 1, 3);
    int64_t item = ts_rng_int(rng, 0, batch - 1);
    int neg_inf = ts_rng_chance(rng, 0.3);
    int wall = neg_inf && ts_rng_chance(rng, 0.2);
    ts_case_begin("brute case %lld: %s %s B=%lld T=%lld S=%lld item %lld x_len=%lld "
                  "y_len=%lld%s%s",
                  (long long)case_no, ts_dtype_name(dtype), ts_value_kind_name(kind),
                  (long long)batch, (long long)tokens, (long long)frames, (long long)item,
                  (long long)x_len, (long long)y_len, neg_inf ? " -inf cells" : "",
                  wall ? " -inf wall" : "");
    ts_layout layout;
    ts_layout_random(rng, &layout, 1, 0);
    ts_view view;
    ts_ref_item ref;
    if (!ts_view_make(&view, dtype, batch, tokens, frames, &layout, 0) ||
        !ts_ref_item_alloc(&ref, tokens, frames)) {
        TS_CHECK(0, "out of memory");
        ts_case_end();
        return;
    }
    int64_t x_lens[3], y_lens[3];
    for (int64_t b = 0; b < batch; b++) {
        x_lens[b] = x_len;
        y_lens[b] = y_len;
    }
    ts_fill_values(rng, &view.tensor, kind, x_lens, y_lens, 1);
    if (neg_inf) ts_sprinkle_neg_inf(rng, &view.tensor, item, x_len, y_len, 0.3);
    if (wall) {
        /* A whole frame of -inf: no path survives it. */
        int64_t j = ts_rng_int(rng, 0, y_len - 1);
        for (int64_t i = 0; i < x_len; i++)
            ts_store(view.tensor.data, ts_view_offset(&view.tensor, item, i, j), dtype,
                     -INFINITY);
    }

    ts_brute_result brute;
    ts_brute_force(&view.tensor, item, x_len, y_len, &brute);
    mas_status st = ts_ref_hard_item(&view.tensor, item, x_len, y_len, &ref);

    int64_t binom = 1; /* C(y_len-1, x_len-1): every monotonic path once */
    for (int64_t k = 1; k <= x_len - 1; k++) binom = binom * (y_len - x_len + k) / k;
    TS_CHECK(brute.paths == binom, "enumerated %lld paths, expected %lld",
             (long long)brute.paths, (long long)binom);

    if (brute.best_score == -INFINITY) {
        TS_CHECK(st == MAS_ERR_NO_FINITE_PATH, "status %d, expected no finite path", (int)st);
        TS_CHECK(ref.score == -INFINITY, "score %.17g on a failed item", ref.score);
    } else {
        TS_CHECK(!wall, "a -inf frame left a finite path");
        TS_CHECK(st == MAS_OK, "status %d, expected ok", (int)st);
        TS_CHECK(ts_f64_bits(ref.score) == ts_f64_bits(brute.best_score),
                 "score %.17g, brute-force best %.17g", ref.score, brute.best_score);
        TS_CHECK(ts_is_monotonic_path(ref.indices, x_len, y_len), "not a monotonic path");
        double along = ts_path_sum(&view.tensor, item, ref.indices, y_len);
        TS_CHECK(ts_f64_bits(along) == ts_f64_bits(ref.score),
                 "the returned path sums to %.17g, score %.17g", along, ref.score);
        /* Sums of small integers and halves are exact in every accumulation
         * type, so the tie rule is a property of the path set. */
        if (kind == TS_VALUES_HALVES || kind == TS_VALUES_SMALL_INT) {
            for (int64_t j = 0; j < y_len; j++)
                TS_CHECK(ref.indices[j] == brute.tie_rule_indices[j],
                         "frame %lld: token %d, tie rule picks %d (%lld best paths)",
                         (long long)j, ref.indices[j], brute.tie_rule_indices[j],
                         (long long)brute.best_paths);
        }
        int64_t total = 0;
        for (int64_t i = 0; i < tokens; i++) {
            total += ref.durations[i];
            if (i >= x_len) TS_CHECK(ref.durations[i] == 0, "duration beyond x_len");
            else TS_CHECK(ref.durations[i] >= 1, "token %lld has no frame", (long long)i);
        }
        TS_CHECK(total == y_len, "durations sum to %lld", (long long)total);
        for (int64_t j = 0; j < frames; j++) {
            if (j >= y_len) TS_CHECK(ref.indices[j] == -1, "index beyond y_len");
            for (int64_t i = 0; i < tokens; i++) {
                int on = j < y_len && ref.indices[j] == i;
                TS_CHECK(ref.path[i * frames + j] == on, "path cell (%lld,%lld)",
                         (long long)i, (long long)j);
            }
        }
    }
    ts_ref_item_free(&ref);
    ts_view_free(&view);
    ts_case_end();
}

/* The same small-integer table in all four dtypes gives the same answer:
 * the accumulation type cannot matter when every sum is exact. */
static void dtype_agreement_case(ts_rng *rng, int64_t case_no) {
    int64_t tokens = ts_rng_int(rng, 1, 40), frames = ts_rng_int(rng, tokens, 120);
    ts_case_begin("dtype agreement %lld: T=%lld S=%lld", (long long)case_no,
                  (long long)tokens, (long long)frames);
    ts_view views[4];
    ts_ref_item refs[4];
    int ok = 1;
    for (int d = 0; d < 4; d++) {
        ts_layout layout;
        ts_layout_plain(&layout, d & 1);
        ok &= ts_view_make(&views[d], value_dtypes[d], 1, tokens, frames, &layout, 0);
        ok &= ts_ref_item_alloc(&refs[d], tokens, frames);
    }
    if (ok) {
        for (int64_t i = 0; i < tokens; i++)
            for (int64_t j = 0; j < frames; j++) {
                double x = ts_random_value(rng, TS_VALUES_SMALL_INT, MAS_FLOAT16);
                for (int d = 0; d < 4; d++)
                    ts_store(views[d].tensor.data, ts_view_offset(&views[d].tensor, 0, i, j),
                             value_dtypes[d], x);
            }
        for (int d = 0; d < 4; d++)
            ts_ref_hard_item(&views[d].tensor, 0, tokens, frames, &refs[d]);
        for (int d = 1; d < 4; d++) {
            TS_CHECK(refs[d].status == refs[0].status && refs[d].score == refs[0].score,
                     "%s disagrees with float32 on the score", ts_dtype_name(value_dtypes[d]));
            TS_CHECK(memcmp(refs[d].indices, refs[0].indices,
                            (size_t)frames * sizeof(int32_t)) == 0,
                     "%s disagrees with float32 on the path", ts_dtype_name(value_dtypes[d]));
        }
    } else {
        TS_CHECK(0, "out of memory");
    }
    for (int d = 0; d < 4; d++) {
        ts_ref_item_free(&refs[d]);
        ts_view_free(&views[d]);
    }
    ts_case_end();
}

/* The narrowing conversions round to nearest even and widen exactly. */
static void conversion_cases(void) {
    ts_case_begin("float16 conversion round trip");
    for (uint32_t h = 0; h < 0x10000u; h++) {
        float f = ts_f16_to_f32((uint16_t)h);
        if (isnan(f)) continue;
        TS_CHECK(ts_f32_to_f16(f) == h, "half 0x%04x -> %.9g -> 0x%04x", h, (double)f,
                 ts_f32_to_f16(f));
    }
    TS_CHECK(ts_f16_to_f32(0x3c00u) == 1.0f && ts_f16_to_f32(0x7bffu) == 65504.0f &&
                 ts_f16_to_f32(0x0001u) == ldexpf(1.0f, -24),
             "known half values");
    TS_CHECK(ts_f32_to_f16(1.0f + ldexpf(1.0f, -11)) == 0x3c00u, "half tie to even (down)");
    TS_CHECK(ts_f32_to_f16(1.0f + 3 * ldexpf(1.0f, -11)) == 0x3c02u, "half tie to even (up)");
    TS_CHECK(ts_f32_to_f16(65520.0f) == 0x7c00u && ts_f32_to_f16(65519.0f) == 0x7bffu,
             "half overflow threshold");
    ts_case_end();
    ts_case_begin("bfloat16 conversion round trip");
    for (uint32_t h = 0; h < 0x10000u; h++) {
        float f = ts_bf16_to_f32((uint16_t)h);
        if (isnan(f)) continue;
        TS_CHECK(ts_f32_to_bf16(f) == h, "bfloat16 0x%04x round trip", h);
    }
    TS_CHECK(ts_f32_to_bf16(1.0f + ldexpf(1.0f, -8)) == 0x3f80u, "bf16 tie to even (down)");
    TS_CHECK(ts_f32_to_bf16(1.0f + 3 * ldexpf(1.0f, -8)) == 0x3f82u, "bf16 tie to even (up)");
    ts_case_end();
}

int main(int argc, char **argv) {
    uint64_t seed = ts_seed_from_args(argc, argv);
    ts_rng rng;
    ts_rng_init(&rng, seed);
    conversion_cases();
    hand_cases();
    for (int64_t c = 0; c < 10000; c++) brute_case(&rng, c);
    for (int64_t c = 0; c < 40; c++) dtype_agreement_case(&rng, c);
    return ts_finish();
}
