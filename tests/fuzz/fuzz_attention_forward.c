/* Fuzz target: monotonic attention forward on the CPU, both kinds
 * (mas_attention_forward_cpu, mas_attention_cpu_workspace_size). Statuses
 * are predicted from the arguments; log phi is compared with a float64
 * reference where the logits are moderate (finite, |x| <= 64) and must be
 * free of NaN and <= 0 where they hold no NaN; -inf outside the lengths. */
#include "fuzz_attention.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fz_reader r = fz_reader_init(data, size);
    att_args a;
    fz_view log_phi;
    memset(&log_phi, 0, sizeof log_phi);
    if (!att_decode(&a, &r)) goto out;
    fz_workspace ws;
    fz_workspace_make(&ws, &r, a.need);
    mas_status expect = att_call_status(&a, &ws);
    if (!att_array(&log_phi, &r, &a, a.accum, 0, 1, &expect)) goto out_ws;

    int64_t nb = expect == MAS_OK ? a.B : 0;
    mas_status *item_st = (mas_status *)calloc((size_t)nb + 1, sizeof(mas_status));
    char *has_nan = (char *)calloc((size_t)nb + 1, 1), *moderate = (char *)calloc((size_t)nb + 1, 1);
    for (int64_t b = 0; b < nb; b++) {
        int64_t n, m;
        item_st[b] = att_length_status(&a, b, &n, &m);
        if (item_st[b] != MAS_OK) continue;
        moderate[b] = 1;
        for (int64_t i = 0; i < n; i++)
            for (int64_t j = 0; j < m; j++) {
                double x = fz_at(&a.logits.t, b, i, j);
                if (x != x) has_nan[b] = 1;
                if (!(fabs(x) <= 64)) moderate[b] = 0;
            }
    }
    fz_debug("attention_forward: kind %d B=%lld N=%lld M=%lld dtype %d threads %d lengths %d/%d "
             "workspace %zu of %zu, expect %d\n", a.kind, (long long)a.B, (long long)a.N,
             (long long)a.M, a.dtype, a.threads, a.n_len != NULL, a.m_len != NULL, ws.size,
             a.need, (int)expect);
    mas_error err;
    mas_status st = mas_attention_forward_cpu((mas_attention_kind)a.kind, &a.logits.t, a.n_len,
                                              a.m_len, &log_phi.t, ws.alloc, ws.size, a.threads,
                                              &err);
    fz_check_status(st, &err);
    FZ_REPLAY_HOOK(fz_replay_attention(a.kind, &a.logits, a.n_len, a.m_len, &log_phi, NULL, NULL, NULL, st));
    fz_check_unchanged(&a.logits, "logits");
    int64_t expect_item = -1;
    if (expect == MAS_OK) {
        /* the first item that fails; an item with a NaN logit may fail or not */
        for (int64_t b = 0; b < nb; b++) {
            if (item_st[b] != MAS_OK || (has_nan[b] && err.item == b)) {
                expect = item_st[b] != MAS_OK ? item_st[b] : MAS_ERR_NONFINITE_VALUE;
                expect_item = b;
                break;
            }
        }
    }
    fz_check(st == expect, "status %d, expected %d", (int)st, (int)expect);
    fz_check(err.item == expect_item, "err.item %lld, expected %lld", (long long)err.item,
             (long long)expect_item);

    for (int64_t b = 0; b < nb && (expect == MAS_OK || expect_item >= 0); b++) {
        int64_t n, m;
        if (att_length_status(&a, b, &n, &m) != MAS_OK) n = m = 0;
        att_check_outside(&log_phi.t, b, n, m, -INFINITY, "log_phi");
        if (n == 0 || has_nan[b]) continue;
        double *ref = (double *)malloc((size_t)(n * m) * sizeof(double));
        att_reference(a.kind, &a.logits.t, b, n, m, NULL, -1, ref);
        double tol = (a.accum == MAS_FLOAT64 ? 1e-10 : 2e-5) * (double)(n + m);
        for (int64_t i = 0; i < n; i++)
            for (int64_t j = 0; j < m; j++) {
                double y = fz_at(&log_phi.t, b, i, j), e = ref[i * m + j];
                fz_check(y == y && y <= 1e-5, "item %lld: log_phi(%lld,%lld) = %g",
                         (long long)b, (long long)i, (long long)j, y);
                if (!moderate[b]) continue;
                fz_check(e == -INFINITY ? y == -INFINITY : fabs(y - e) <= tol * (1 + fabs(e)),
                         "item %lld (kind %d, n %lld, m %lld): log_phi(%lld,%lld) = %.9g, "
                         "reference %.9g", (long long)b, a.kind, (long long)n, (long long)m,
                         (long long)i, (long long)j, y, e);
            }
        free(ref);
    }
    free(item_st);
    free(has_nan);
    free(moderate);
out_ws:
    fz_workspace_free(&ws);
out:
    fz_view_free(&log_phi);
    att_free(&a);
    return 0;
}
