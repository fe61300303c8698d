/* Fuzz target: forward-sum on the CPU (mas_forward_sum_cpu and its workspace
 * size), with and without the posterior. Statuses are predicted from the
 * arguments and the band's values; for items of moderate values (no cell of
 * the band beyond +-64 but -inf) log_z and the posterior are compared with a
 * float64 forward-backward written here, and the posterior must sum to 1 in
 * every frame. Items with huge values may overflow the accumulator: only the
 * status (OK or no finite path), log_z not NaN (+inf on overflow, mas.h
 * section 5) and the dense layout are checked there. */
#include "fuzz_common.h"

static double lse(double a, double b) {
    double m = a > b ? a : b;
    if (m == -INFINITY) return -INFINITY;
    return m + log(exp(a - m) + exp(b - m));
}

/* alpha and beta (v included in both) over the band, -inf off it. */
static double reference(const mas_tensor3 *v, int64_t b, int64_t X, int64_t Y, double *alpha,
                        double *beta) {
    for (int64_t j = 0; j < Y; j++)
        for (int64_t i = 0; i < X; i++) {
            double *a = alpha + i * Y + j;
            *a = -INFINITY;
            if (i > j || i < j - (Y - X)) continue;
            double x = fz_at(v, b, i, j);
            if (j == 0) *a = x;
            else *a = x + lse(alpha[i * Y + j - 1], i ? alpha[(i - 1) * Y + j - 1] : -INFINITY);
        }
    for (int64_t j = Y - 1; j >= 0; j--)
        for (int64_t i = X - 1; i >= 0; i--) {
            double *e = beta + i * Y + j;
            *e = -INFINITY;
            if (i > j || i < j - (Y - X)) continue;
            double x = fz_at(v, b, i, j);
            if (j == Y - 1) *e = x;
            else *e = x + lse(beta[i * Y + j + 1], i + 1 < X ? beta[(i + 1) * Y + j + 1] : -INFINITY);
        }
    return alpha[(X - 1) * Y + Y - 1];
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fz_reader r = fz_reader_init(data, size);
    fz_dims dm = fz_read_dims(&r);
    int64_t B = dm.d[0], T = dm.d[1], S = dm.d[2];
    int32_t dtype = fz_float_dtype(&r);
    int32_t acc_dtype = fz_accum(dtype);
    int32_t threads = fz_threads(&r);
    uint8_t want = fz_u8(&r);
    uint8_t post_c = fz_u8(&r);
    int32_t post_dtype = post_c < 235 ? acc_dtype : post_c < 245 ? (acc_dtype ^ 1) : MAS_INT32;
    int post_mismatch = post_c >= 250;

    size_t need = mas_forward_sum_cpu_workspace_size(B, T, S, (mas_dtype)dtype, threads);
    if (!fz_dims_ok(&dm)) fz_check(need == 0, "workspace size %zu for bad dims", need);
    if (B > 4096) return 0;

    int64_t *x_len, *y_len;
    fz_lengths(&r, B, T, S, 1, &x_len, &y_len);
    int64_t nb = B > 0 ? B : 0;
    int64_t *rows = (int64_t *)calloc((size_t)nb + 1, sizeof(int64_t));
    int64_t *cols = (int64_t *)calloc((size_t)nb + 1, sizeof(int64_t));
    fz_read_extent(nb, x_len, y_len, T, S, rows, cols);

    fz_view value, post;
    memset(&post, 0, sizeof post);
    if (!fz_view_make(&value, &r, dm.d, dtype, 1, nb, rows, cols)) goto out_lengths;
    fz_fill(&value, &r);

    int dense_ok = fz_cells(&dm) > 0;
    int want_post = (want & 1) && dense_ok, want_logz = (want & 2) != 0;
    if (want_post) {
        int64_t pd[3] = {B, T, S};
        if (post_mismatch) pd[post_c % 3] += 1;
        if (!fz_output_make(&post, &r, pd, post_dtype)) want_post = 0;
    }
    size_t acc = acc_dtype == MAS_FLOAT64 ? 8 : 4;
    void *log_z = want_logz && nb > 0 ? malloc((size_t)nb * acc) : NULL;
    fz_workspace ws;
    fz_workspace_make(&ws, &r, need);

    int is_float = dtype == MAS_FLOAT32 || dtype == MAS_FLOAT64 || dtype == MAS_FLOAT16 ||
                   dtype == MAS_BFLOAT16;
    mas_status expect = MAS_OK;
    int64_t expect_item = -1;
    if (!ws.alloc) expect = MAS_ERR_NULL_POINTER;
    else if (!is_float) expect = MAS_ERR_BAD_DTYPE;
    else if (!fz_dims_ok(&dm)) expect = MAS_ERR_BAD_SHAPE;
    else if (!log_z && !want_post) expect = MAS_ERR_BAD_ARGUMENT;
    else if (want_post && post_dtype != acc_dtype) expect = MAS_ERR_BAD_DTYPE;
    else if (want_post && post_mismatch) expect = MAS_ERR_BAD_SHAPE;
    else if (ws.size < need) expect = MAS_ERR_WORKSPACE_TOO_SMALL;

    /* Per item: the statuses it may end with (either OK or no finite path
     * where huge values may overflow the accumulator), and the reference. */
    mas_status *item_st = (mas_status *)calloc((size_t)nb + 1, sizeof(mas_status));
    char *either = (char *)calloc((size_t)nb + 1, 1);
    char *moderate = (char *)calloc((size_t)nb + 1, 1);
    double **alpha = (double **)calloc((size_t)nb + 1, sizeof(double *));
    double **beta = (double **)calloc((size_t)nb + 1, sizeof(double *));
    double *ref_lz = (double *)calloc((size_t)nb + 1, sizeof(double));
    if (expect == MAS_OK) {
        for (int64_t b = 0; b < B; b++) {
            item_st[b] = fz_hard_length_status(x_len[b], y_len[b], T, S);
            if (item_st[b] != MAS_OK) continue;
            int64_t X = x_len[b], Y = y_len[b];
            int bad = 0, huge = 0;
            for (int64_t j = 0; j < Y; j++)
                for (int64_t i = j - (Y - X) > 0 ? j - (Y - X) : 0; i <= j && i < X; i++) {
                    double x = fz_at(&value.t, b, i, j);
                    if (x != x || x == INFINITY) bad = 1;
                    else if (x != -INFINITY && fabs(x) > 64) huge = 1;
                }
            alpha[b] = (double *)malloc((size_t)(X * Y) * sizeof(double));
            beta[b] = (double *)malloc((size_t)(X * Y) * sizeof(double));
            ref_lz[b] = reference(&value.t, b, X, Y, alpha[b], beta[b]);
            /* huge values may overflow the float32 accumulator both ways:
             * to -inf (no finite path) or, with a -inf cell, to NaN */
            if (bad) item_st[b] = MAS_ERR_NONFINITE_VALUE;
            else if (huge) either[b] = 1;
            else if (ref_lz[b] == -INFINITY) item_st[b] = MAS_ERR_NO_FINITE_PATH;
            moderate[b] = !bad && !huge;
        }
    }

    fz_debug("forward_sum: B=%lld T=%lld S=%lld dtype %d threads %d log_z %d posterior %d "
             "(dtype %d) workspace %zu of %zu (mode %d), expect %d\n", (long long)B,
             (long long)T, (long long)S, dtype, threads, log_z != NULL, want_post, post_dtype,
             ws.size, need, ws.mode, (int)expect);
    mas_error err;
    mas_status st = mas_forward_sum_cpu(&value.t, x_len, y_len, log_z,
                                        want_post ? &post.t : NULL, ws.alloc, ws.size,
                                        threads, &err);
    fz_check_status(st, &err);
    FZ_REPLAY_HOOK(fz_replay_forward_sum(&value, x_len, y_len, log_z, want_post ? &post : NULL, st));
    fz_check_unchanged(&value, "value");
    if (expect == MAS_OK) {
        /* the lowest item that did not succeed, allowing "either" items both ways */
        int64_t b = 0;
        for (; b < B; b++) {
            if (item_st[b] != MAS_OK) { expect = item_st[b]; break; }
            if (either[b] && st == MAS_ERR_NO_FINITE_PATH && err.item == b) {
                expect = st; break;
            }
        }
        expect_item = b < B ? b : -1;
        if (b < B && either[b] && item_st[b] == MAS_OK) item_st[b] = MAS_ERR_NO_FINITE_PATH;
    }
    fz_check(st == expect, "status %d, expected %d (B=%lld T=%lld S=%lld dtype=%d ws mode %d)",
             (int)st, (int)expect, (long long)B, (long long)T, (long long)S, dtype, ws.mode);
    fz_check(err.item == expect_item, "err.item %lld, expected %lld", (long long)err.item,
             (long long)expect_item);

    if (expect == MAS_OK || expect_item >= 0) {
        double tol = acc == 8 ? 1e-9 : 2e-3;
        for (int64_t b = 0; b < B; b++) {
            /* items after the reported one may have failed as "either" */
            int ok = item_st[b] == MAS_OK;
            double lz = log_z ? (acc == 8 ? ((double *)log_z)[b] : ((float *)log_z)[b]) : 0;
            if (log_z && either[b] && lz == -INFINITY) ok = 0;
            /* mas.h section 5: an overflowing sum is +inf, never NaN */
            if (log_z) fz_check(lz == lz, "item %lld: log_z NaN (dtype %d)", (long long)b, dtype);
            int64_t X = ok ? x_len[b] : 0, Y = ok ? y_len[b] : 0;
            if (log_z) {
                if (!ok) fz_check(lz == -INFINITY, "item %lld failed (%d, X=%lld Y=%lld T=%lld S=%lld dtype %d), log_z %g", (long long)b, (int)item_st[b], (long long)x_len[b], (long long)y_len[b], (long long)T, (long long)S, dtype, lz);
                else if (moderate[b])
                    fz_check(fabs(lz - ref_lz[b]) <= tol * (X + Y) * (1 + fabs(ref_lz[b])),
                             "item %lld: log_z %.9g, reference %.9g", (long long)b, lz, ref_lz[b]);
            }
            if (!want_post) continue;
            if (either[b]) {
                /* overflowed or not: zeros outside the lengths at least */
                X = x_len[b];
                Y = y_len[b];
            }
            for (int64_t j = 0; j < S; j++) {
                double sum = 0;
                for (int64_t i = 0; i < T; i++) {
                    double g = fz_at(&post.t, b, i, j);
                    int inside = i < X && j < Y && (either[b] || (i <= j && i >= j - (Y - X)));
                    if (!inside) {
                        fz_check(g == 0, "item %lld (x_len %lld, y_len %lld, ok %d): posterior(%lld,%lld) = %g off the band, st %d either %d",
                                 (long long)b, (long long)x_len[b], (long long)y_len[b], ok, (long long)i, (long long)j, g, (int)item_st[b], either[b]);
                        continue;
                    }
                    if (!moderate[b]) continue;
                    fz_check(g >= 0 && g <= 1 + 1e-6, "item %lld: posterior %g", (long long)b, g);
                    double a = alpha[b][i * Y + j], e = beta[b][i * Y + j];
                    double rg = a == -INFINITY || e == -INFINITY
                                    ? 0 : exp(a + e - fz_at(&value.t, b, i, j) - ref_lz[b]);
                    fz_check(fabs(g - rg) <= (acc == 8 ? 1e-9 : 1e-3) * (X + Y),
                             "item %lld: posterior(%lld,%lld) = %.9g, reference %.9g",
                             (long long)b, (long long)i, (long long)j, g, rg);
                    sum += g;
                }
                if (ok && moderate[b] && j < Y)
                    fz_check(fabs(sum - 1) <= (acc == 8 ? 1e-9 : 1e-4) * (X + Y),
                             "item %lld: posterior of frame %lld sums to %.9g", (long long)b,
                             (long long)j, sum);
            }
        }
    }

    for (int64_t b = 0; b < nb; b++) {
        free(alpha[b]);
        free(beta[b]);
    }
    free(alpha);
    free(beta);
    free(ref_lz);
    free(moderate);
    free(either);
    free(item_st);
    fz_workspace_free(&ws);
    free(log_z);
    fz_view_free(&post);
    fz_view_free(&value);
out_lengths:
    free(rows);
    free(cols);
    free(x_len);
    free(y_len);
    return 0;
}
