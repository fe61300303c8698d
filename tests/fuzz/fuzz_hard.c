/* Fuzz target: hard MAS on the CPU (mas_hard_cpu, mas_hard_cpu_workspace_size).
 * Every call's status is predicted from the arguments and a reference search
 * written here (the Glow-TTS rules of mas.h over the band, in the library's
 * accumulator type so that float32 ties break the same way); on success the
 * outputs must equal the reference's and keep their invariants. */
#include "fuzz_common.h"

/* Reference of one item: status, and for MAS_OK the indices and the score.
 * `comparable` is 0 when the sums overflowed into NaN (the max of a NaN is
 * not specified; only the invariants are checked then). */
typedef struct ref_item {
    mas_status st;
    int comparable;
    double score;
} ref_item;

#define REF_SEARCH(REAL, MAX)                                                         \
    do {                                                                             \
        REAL *q = (REAL *)malloc((size_t)(X * Y) * sizeof(REAL));                    \
        for (int64_t j = 0; j < Y; j++)                                              \
            for (int64_t i = 0; i < X; i++) {                                        \
                REAL *cell = q + i * Y + j;                                          \
                *cell = (REAL)-INFINITY;                                             \
                if (i > j || i < j - (Y - X)) continue; /* off the band */           \
                REAL v = (REAL)fz_at(value, b, i, j);                                \
                if (v != v || v == (REAL)INFINITY) bad = 1;                          \
                if (j == 0) { *cell = v; continue; }                                 \
                REAL stay = q[i * Y + j - 1];                                        \
                REAL move = i > 0 ? q[(i - 1) * Y + j - 1] : (REAL)-INFINITY;        \
                *cell = MAX(stay, move) + v;                                         \
                if (*cell != *cell) nan_seen = 1;                                    \
            }                                                                        \
        ref.score = q[(X - 1) * Y + Y - 1];                                          \
        int64_t i = X - 1;                                                           \
        for (int64_t j = Y - 1; j >= 0; j--) {                                       \
            idx[j] = (int32_t)i;                                                     \
            if (i > 0 && (i == j || q[i * Y + j - 1] < q[(i - 1) * Y + j - 1])) i--; \
        }                                                                            \
        free(q);                                                                     \
    } while (0)

static float max_f(float a, float b) { return a < b ? b : a; }
static double max_d(double a, double b) { return a < b ? b : a; }

static ref_item reference(const mas_tensor3 *value, int64_t b, int64_t X, int64_t Y,
                          int32_t *idx) {
    ref_item ref = {MAS_OK, 1, -INFINITY};
    int bad = 0, nan_seen = 0;
    if (value->dtype == MAS_FLOAT64) REF_SEARCH(double, max_d);
    else REF_SEARCH(float, max_f);
    if (bad) ref.st = MAS_ERR_NONFINITE_VALUE;
    else if (ref.score == -INFINITY) ref.st = MAS_ERR_NO_FINITE_PATH;
    ref.comparable = !nan_seen && ref.score == ref.score;
    return ref;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fz_reader r = fz_reader_init(data, size);
    fz_dims dm = fz_read_dims(&r);
    int64_t B = dm.d[0], T = dm.d[1], S = dm.d[2];
    int32_t dtype = fz_float_dtype(&r);
    int32_t threads = fz_threads(&r);
    uint8_t want = fz_u8(&r);
    uint8_t path_c = fz_u8(&r);
    int32_t path_dtype = path_c < 240 ? (int32_t)(path_c % MAS_DTYPE_COUNT_) : 77;
    int path_mismatch = path_c >= 250;

    size_t need = mas_hard_cpu_workspace_size(B, T, S, (mas_dtype)dtype, threads);
    if (!fz_dims_ok(&dm)) fz_check(need == 0, "workspace size %zu for bad dims", need);
    if (B > 4096) return 0; /* the length arrays alone are too big */

    int64_t *x_len, *y_len;
    fz_lengths(&r, B, T, S, 1, &x_len, &y_len);
    int64_t nb = B > 0 ? B : 0;
    int64_t *rows = (int64_t *)calloc((size_t)nb + 1, sizeof(int64_t));
    int64_t *cols = (int64_t *)calloc((size_t)nb + 1, sizeof(int64_t));
    fz_read_extent(nb, x_len, y_len, T, S, rows, cols);

    fz_view value, path;
    memset(&path, 0, sizeof path);
    if (!fz_view_make(&value, &r, dm.d, dtype, 1, nb, rows, cols)) goto out_lengths;
    fz_fill(&value, &r);

    /* Outputs: path (dense, whole view), durations [B, >= T], indices
     * [B, >= S], score [B]; any subset, the dense ones only when they fit. */
    int64_t cells = fz_cells(&dm);
    int dense_ok = cells > 0;
    int64_t dur_stride = dense_ok ? T + fz_range(&r, 0, 2) : 0;
    int64_t idx_stride = dense_ok ? S + fz_range(&r, 0, 2) : 0;
    int want_path = (want & 1) && dense_ok, want_dur = (want & 2) && dense_ok,
        want_idx = (want & 4) && dense_ok, want_score = (want & 8) != 0;
    if (want_path) {
        int64_t pd[3] = {B, T, S};
        if (path_mismatch) pd[path_c % 3] += 1;
        if (!fz_output_make(&path, &r, pd, path_dtype)) want_path = 0;
    }
    int32_t *durations = NULL, *indices = NULL;
    void *score = NULL;
    size_t dur_n = 0, idx_n = 0;
    if (want_dur && fz_dims_ok(&dm)) {
        dur_n = (size_t)((B - 1) * dur_stride + T);
        durations = (int32_t *)malloc(dur_n * sizeof(int32_t));
        memset(durations, 0x5a, dur_n * sizeof(int32_t));
    }
    if (want_idx && fz_dims_ok(&dm)) {
        idx_n = (size_t)((B - 1) * idx_stride + S);
        indices = (int32_t *)malloc(idx_n * sizeof(int32_t));
        memset(indices, 0x5a, idx_n * sizeof(int32_t));
    }
    size_t acc = fz_accum(dtype) == MAS_FLOAT64 ? 8 : 4;
    if (want_score && nb > 0) score = malloc((size_t)nb * acc);

    mas_hard_outputs out;
    memset(&out, 0, sizeof out);
    if (want_path) out.path = path.t;
    out.durations = durations;
    out.durations_stride = dur_stride;
    out.indices = indices;
    out.indices_stride = idx_stride;
    out.score = score;

    fz_workspace ws;
    fz_workspace_make(&ws, &r, need);

    /* The status the call must return. */
    int is_float = dtype == MAS_FLOAT32 || dtype == MAS_FLOAT64 || dtype == MAS_FLOAT16 ||
                   dtype == MAS_BFLOAT16;
    int any_out = out.path.data || durations || indices || score;
    mas_status expect = MAS_OK;
    int64_t expect_item = -1;
    if (!is_float) expect = MAS_ERR_BAD_DTYPE;
    else if (!fz_dims_ok(&dm)) expect = MAS_ERR_BAD_SHAPE;
    else if (!any_out) expect = MAS_ERR_BAD_ARGUMENT;
    else if (out.path.data && (path_dtype < 0 || path_dtype >= MAS_DTYPE_COUNT_))
        expect = MAS_ERR_BAD_DTYPE;
    else if (out.path.data && path_mismatch) expect = MAS_ERR_BAD_SHAPE;
    else if (!ws.alloc) expect = MAS_ERR_NULL_POINTER;
    /* Below the unbounded size the call runs long-form (checkpointed, the
     * same outputs); only below the smallest that works is it an error. */
    else if (ws.size < mas_hard_cpu_min_workspace_size(B, T, S, (mas_dtype)dtype, threads))
        expect = MAS_ERR_WORKSPACE_TOO_SMALL;

    /* Per item: lengths, then the reference search. */
    mas_status *item_st = (mas_status *)calloc((size_t)nb + 1, sizeof(mas_status));
    ref_item *refs = (ref_item *)calloc((size_t)nb + 1, sizeof(ref_item));
    int32_t **ref_idx = (int32_t **)calloc((size_t)nb + 1, sizeof(int32_t *));
    if (expect == MAS_OK) {
        for (int64_t b = 0; b < B; b++) {
            item_st[b] = fz_hard_length_status(x_len[b], y_len[b], T, S);
            if (item_st[b] != MAS_OK) continue;
            ref_idx[b] = (int32_t *)malloc((size_t)y_len[b] * sizeof(int32_t));
            refs[b] = reference(&value.t, b, x_len[b], y_len[b], ref_idx[b]);
            item_st[b] = refs[b].st;
        }
        expect = fz_first_error(item_st, B, &expect_item);
    }

    mas_error err;
    mas_status st = mas_hard_cpu(&value.t, x_len, y_len, &out, ws.alloc, ws.size, threads, &err);
    fz_check_status(st, &err);
    FZ_REPLAY_HOOK(fz_replay_hard(&value, &path, x_len, y_len, &out, dur_n, idx_n, st));
    fz_check(st == expect, "status %d, expected %d (B=%lld T=%lld S=%lld dtype=%d ws mode %d)",
             (int)st, (int)expect, (long long)B, (long long)T, (long long)S, dtype, ws.mode);
    fz_check(err.item == expect_item, "err.item %lld, expected %lld", (long long)err.item,
             (long long)expect_item);
    fz_check_unchanged(&value, "value");

    /* Outputs, when the call got to the items. */
    if (expect == MAS_OK || expect_item >= 0) {
        for (int64_t b = 0; b < B; b++) {
            int ok = item_st[b] == MAS_OK;
            int64_t X = ok ? x_len[b] : 0, Y = ok ? y_len[b] : 0;
            const int32_t *ri = ref_idx[b];
            int exact = ok && refs[b].comparable;
            if (indices) {
                const int32_t *ix = indices + b * idx_stride;
                for (int64_t j = 0; j < S; j++) {
                    if (j >= Y) {
                        fz_check(ix[j] == -1, "item %lld: indices[%lld] = %d beyond y_len",
                                 (long long)b, (long long)j, ix[j]);
                        continue;
                    }
                    int32_t prev = j ? ix[j - 1] : 0;
                    fz_check(ix[j] == prev || ix[j] == prev + 1,
                             "item %lld: indices step %d -> %d", (long long)b, prev, ix[j]);
                    if (exact) fz_check(ix[j] == ri[j], "item %lld: indices[%lld] = %d, "
                                        "reference %d", (long long)b, (long long)j, ix[j], ri[j]);
                }
                if (ok) fz_check(ix[0] == 0 && ix[Y - 1] == X - 1,
                                 "item %lld: indices do not run from 0 to x_len-1", (long long)b);
            }
            if (durations) {
                const int32_t *du = durations + b * dur_stride;
                int64_t sum = 0;
                for (int64_t i = 0; i < T; i++) {
                    fz_check(i < X ? du[i] >= 1 : du[i] == 0,
                             "item %lld: durations[%lld] = %d", (long long)b, (long long)i, du[i]);
                    sum += du[i];
                }
                fz_check(sum == Y, "item %lld: durations sum to %lld, y_len %lld", (long long)b,
                         (long long)sum, (long long)Y);
                if (exact) {
                    int64_t j = 0;
                    for (int64_t i = 0; i < X; i++)
                        for (int32_t k = 0; k < du[i]; k++, j++)
                            fz_check(ri[j] == i, "item %lld: durations disagree with the "
                                     "reference at frame %lld", (long long)b, (long long)j);
                }
            }
            if (score) {
                double sc = acc == 8 ? ((double *)score)[b] : ((float *)score)[b];
                if (!ok) fz_check(sc == -INFINITY, "item %lld failed, score %g", (long long)b, sc);
                else if (exact) fz_check(sc == refs[b].score || (sc != sc && refs[b].score !=
                                         refs[b].score), "item %lld: score %.9g, reference %.9g",
                                         (long long)b, sc, refs[b].score);
            }
            if (out.path.data) {
                /* one 1 per frame j < y_len, at a token that indices agree with */
                for (int64_t j = 0; j < S; j++) {
                    int64_t ones = 0, at = -1;
                    for (int64_t i = 0; i < T; i++) {
                        double p = fz_at(&path.t, b, i, j);
                        fz_check(p == 0 || p == 1, "item %lld: path value %g", (long long)b, p);
                        if (p == 1) { ones++; at = i; }
                    }
                    fz_check(ones == (j < Y), "item %lld: frame %lld has %lld ones",
                             (long long)b, (long long)j, (long long)ones);
                    if (exact && j < Y) fz_check(at == ri[j], "item %lld: path at frame %lld "
                                                 "on token %lld, reference %d", (long long)b,
                                                 (long long)j, (long long)at, ri[j]);
                }
            }
        }
    }

    for (int64_t b = 0; b < nb; b++) free(ref_idx[b]);
    free(ref_idx);
    free(refs);
    free(item_st);
    fz_workspace_free(&ws);
    free(durations);
    free(indices);
    free(score);
    fz_view_free(&path);
    fz_view_free(&value);
out_lengths:
    free(rows);
    free(cols);
    free(x_len);
    free(y_len);
    return 0;
}
