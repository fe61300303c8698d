/* Fuzz target: monotonic attention backward on the CPU, both kinds
 * (mas_attention_backward_cpu). Two modes: log phi and its upstream gradient
 * straight from the input (hostile: only statuses, zeros outside the lengths
 * and untouched inputs are checked), or log phi from the forward pass with a
 * moderate gradient, where float64 items of moderate logits are compared
 * with central differences of the float64 reference forward. */
#include "fuzz_attention.h"

/* sum of g * log phi over the cells where log phi is finite */
static double loss(const att_args *a, const mas_tensor3 *g, int64_t b, int64_t n, int64_t m,
                   double delta, int64_t at, double *ref) {
    att_reference(a->kind, &a->logits.t, b, n, m, &delta, at, ref);
    double s = 0;
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < m; j++)
            if (ref[i * m + j] > -INFINITY) s += fz_at(g, b, i, j) * ref[i * m + j];
    return s;
}

/* Item b's lengths are valid and its logits within +-64. */
static int att_moderate(const att_args *a, int64_t b) {
    int64_t n, m;
    if (att_length_status(a, b, &n, &m) != MAS_OK) return 0;
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < m; j++)
            if (!(fabs(fz_at(&a->logits.t, b, i, j)) <= 64)) return 0;
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fz_reader r = fz_reader_init(data, size);
    att_args a;
    fz_view log_phi, grad_phi, grad_x;
    memset(&log_phi, 0, sizeof log_phi);
    memset(&grad_phi, 0, sizeof grad_phi);
    memset(&grad_x, 0, sizeof grad_x);
    if (!att_decode(&a, &r)) goto out;
    int from_forward = fz_u8(&r) < 128;
    fz_workspace ws;
    fz_workspace_make(&ws, &r, a.need);
    mas_status expect = att_call_status(&a, &ws);
    int built = att_array(&log_phi, &r, &a, a.accum, 1, from_forward, &expect);
    built = built && att_array(&grad_phi, &r, &a, a.accum, 1, 0, &expect);
    built = built && att_array(&grad_x, &r, &a, a.accum, 0, 1, &expect);
    if (!built) goto out_ws;
    mas_status fwd = MAS_ERR_BAD_ARGUMENT;
    if (from_forward && expect == MAS_OK) {
        /* log phi by the library's forward pass; then it is an input */
        fwd = mas_attention_forward_cpu((mas_attention_kind)a.kind, &a.logits.t, a.n_len,
                                        a.m_len, &log_phi.t, ws.alloc, ws.size, a.threads, NULL);
        log_phi.copy = (uint8_t *)malloc(log_phi.bytes);
        memcpy(log_phi.copy, log_phi.alloc, log_phi.bytes);
    } else if (!from_forward && log_phi.alloc && !log_phi.copy) {
        fz_fill(&log_phi, &r);
    }
    if (grad_phi.alloc) {
        fz_fill(&grad_phi, &r);
        if (from_forward) { /* a moderate upstream gradient */
            size_t es = fz_dtype_size(grad_phi.t.dtype), n = grad_phi.bytes / es;
            for (size_t k = 0; k < n; k++) {
                double x = fz_load(grad_phi.alloc, grad_phi.t.dtype, (int64_t)k);
                if (!(fabs(x) <= 64)) fz_store_bits(grad_phi.alloc + k * es, es, 0);
            }
            memcpy(grad_phi.copy, grad_phi.alloc, grad_phi.bytes);
        }
    }

    int64_t nb = expect == MAS_OK ? a.B : 0;
    int64_t expect_item = -1;
    for (int64_t b = 0; b < nb; b++) {
        int64_t n, m;
        mas_status s = att_length_status(&a, b, &n, &m);
        if (s != MAS_OK) { expect = s; expect_item = b; break; }
    }
    fz_debug("attention_backward: kind %d B=%lld N=%lld M=%lld dtype %d threads %d from forward "
             "%d (%d) workspace %zu of %zu, expect %d\n", a.kind, (long long)a.B, (long long)a.N,
             (long long)a.M, a.dtype, a.threads, from_forward, (int)fwd, ws.size, a.need,
             (int)expect);
    mas_error err;
    mas_status st = mas_attention_backward_cpu((mas_attention_kind)a.kind, &a.logits.t, a.n_len,
                                               a.m_len, &log_phi.t, &grad_phi.t, &grad_x.t,
                                               ws.alloc, ws.size, a.threads, &err);
    fz_check_status(st, &err);
#ifdef FZ_REPLAY
    /* Given another log_phi than the forward's, the gradient is undefined
     * (mas.h section 5): the backends may differ there, even in inf. */
    unsigned char *cmp = (unsigned char *)calloc((size_t)nb + 1, 1);
    for (int64_t b = 0; b < nb && from_forward && fwd == MAS_OK; b++)
        cmp[b] = att_moderate(&a, b);
    fz_replay_attention(a.kind, &a.logits, a.n_len, a.m_len, &log_phi, &grad_phi, &grad_x, cmp, st);
    free(cmp);
#endif
    fz_check(st == expect, "status %d, expected %d", (int)st, (int)expect);
    fz_check(err.item == expect_item, "err.item %lld, expected %lld", (long long)err.item,
             (long long)expect_item);
    fz_check_unchanged(&a.logits, "logits");
    fz_check_unchanged(&log_phi, "log_phi");
    fz_check_unchanged(&grad_phi, "grad_log_phi");

    for (int64_t b = 0; b < nb && (expect == MAS_OK || expect_item >= 0); b++) {
        int64_t n, m;
        if (att_length_status(&a, b, &n, &m) != MAS_OK) n = m = 0;
        att_check_outside(&grad_x.t, b, n, m, 0.0, "grad_logits");
        if (n == 0 || !from_forward || fwd != MAS_OK) continue;
        if (!att_moderate(&a, b)) continue;
        for (int64_t i = 0; i < n; i++)
            for (int64_t j = 0; j < m; j++) {
                double gx = fz_at(&grad_x.t, b, i, j);
                fz_check(isfinite(gx), "item %lld: grad_logits(%lld,%lld) = %g", (long long)b,
                         (long long)i, (long long)j, gx);
            }
        if (a.dtype != MAS_FLOAT64 || n * m > 48) continue;
        double *ref = (double *)malloc((size_t)(n * m) * sizeof(double));
        for (int64_t k = 0; k < n * m; k++) {
            double h = 1e-6;
            double fd = (loss(&a, &grad_phi.t, b, n, m, h, k, ref) -
                         loss(&a, &grad_phi.t, b, n, m, -h, k, ref)) / (2 * h);
            double gx = fz_at(&grad_x.t, b, k / m, k % m);
            fz_check(fabs(gx - fd) <= 1e-4 * (1 + fabs(fd)) * (double)(n + m),
                     "item %lld (kind %d, n %lld, m %lld): grad_logits(%lld,%lld) = %.9g, "
                     "central difference %.9g", (long long)b, a.kind, (long long)n,
                     (long long)m, (long long)(k / m), (long long)(k % m), gx, fd);
        }
        free(ref);
    }
out_ws:
    fz_workspace_free(&ws);
out:
    fz_view_free(&grad_x);
    fz_view_free(&grad_phi);
    fz_view_free(&log_phi);
    att_free(&a);
    return 0;
}
