/* The CUDA replay of the fuzz corpus (issue 14): a plain program, not
 * libFuzzer. The fuzz targets, compiled with -DFZ_REPLAY and their
 * LLVMFuzzerTestOneInput renamed (bench/gpu_fuzz_replay.sh), decode every
 * corpus file of tests/fuzz/corpus/<target>/ exactly as under libFuzzer, run
 * and check the CPU call, and hand the problem to the hooks below. A hook
 * copies the inputs into device buffers of exactly the host buffers' sizes
 * (so compute-sanitizer memcheck sees any stray access), runs the CUDA entry
 * point, and compares with the CPU result where both succeed: hard MAS bit
 * for bit, the soft ops and likelihoods within a tolerance.
 * With --min-workspace the hard calls (hard MAS, Viterbi) get the smallest
 * workspace their CUDA entry points accept instead of the unbounded one:
 * the long form, compared with the CPU's unbounded results the same way.
 *   replay_cuda [--max-files N] [--min-workspace] <corpus root>   (default tests/fuzz/corpus)
 * Prints per target: files, calls, both OK and compared, mismatches; exits 1
 * on a mismatch or a CUDA error. */
#include <cuda_runtime.h>
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FZ_REPLAY 1
#include "fuzz_common.h"

extern "C" {
int fz_run_hard(const uint8_t *, size_t);
int fz_run_forward_sum(const uint8_t *, size_t);
int fz_run_attention_forward(const uint8_t *, size_t);
int fz_run_attention_backward(const uint8_t *, size_t);
int fz_run_likelihood(const uint8_t *, size_t);
int fz_run_topology(const uint8_t *, size_t);
}

static long g_calls, g_compared, g_mismatch, g_cuda_errors, g_skipped;
static const char *g_file = ""; /* the corpus file being replayed */
static bool g_min_ws = false;     /* hard calls in the long form */

/* Rows of B items, `width` elements of `es` bytes each at `stride`
 * elements apart: equal byte for byte? (The padding between rows is not
 * an output.) */
static bool rows_equal(const void *a, const void *b, int64_t B, int64_t stride, int64_t width,
                       size_t es) {
    for (int64_t i = 0; i < B; i++)
        if (width > 0 && memcmp((const char *)a + (size_t)(i * stride) * es,
                                (const char *)b + (size_t)(i * stride) * es, (size_t)width * es))
            return false;
    return true;
}

/* With FZ_DEBUG set: the int32 words of two buffers side by side. */
static void dump_i32(const char *what, const void *cpu, const void *gpu, size_t bytes) {
    if (!getenv("FZ_DEBUG")) return;
    const int32_t *c = (const int32_t *)cpu, *g = (const int32_t *)gpu;
    fprintf(stderr, "%s (CPU/CUDA):", what);
    for (size_t i = 0; i < bytes / 4 && i < 64; i++) fprintf(stderr, " %d/%d", c[i], g[i]);
    fprintf(stderr, "\n");
}

#define MISMATCH(...)                                  \
    do {                                               \
        fprintf(stderr, "replay mismatch (%s): ", g_file); \
        fprintf(stderr, __VA_ARGS__);                  \
        fprintf(stderr, "\n");                         \
        g_mismatch++;                                  \
    } while (0)

/* A device copy of a host view: the same bytes, the same offset of data. */
struct dview {
    mas_tensor3 t;
    void *d;
    size_t bytes;
};

static bool dmirror(const fz_view *v, dview *o, bool copy) {
    memset(o, 0, sizeof *o);
    if (!v || !v->alloc) return true;
    o->t = v->t;
    o->bytes = v->bytes;
    if (cudaMalloc(&o->d, v->bytes ? v->bytes : 1) != cudaSuccess) return false;
    if (copy) cudaMemcpy(o->d, v->alloc, v->bytes, cudaMemcpyHostToDevice);
    else cudaMemset(o->d, 0xa5, v->bytes);
    o->t.data = (char *)o->d + ((const char *)v->t.data - (const char *)v->alloc);
    return true;
}

static void *dcopy(const void *h, size_t bytes) {
    if (!h) return NULL;
    void *d = NULL;
    if (cudaMalloc(&d, bytes ? bytes : 1) != cudaSuccess) return NULL;
    cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice);
    return d;
}

static void *dalloc(size_t bytes) {
    void *d = NULL;
    if (cudaMalloc(&d, bytes ? bytes : 1) != cudaSuccess) return NULL;
    cudaMemset(d, 0xa5, bytes);
    return d;
}

static void *hget(const void *d, size_t bytes) {
    void *h = malloc(bytes ? bytes : 1);
    cudaMemcpy(h, d, bytes, cudaMemcpyDeviceToHost);
    return h;
}

/* Runs a CUDA call's error word back to a status; MAS_ERR_CUDA on a
 * runtime error (counted). */
static mas_status finish(mas_status host, uint64_t *dword, int64_t *item) {
    *item = -1;
    if (host != MAS_OK) return host;
    cudaError_t e = cudaDeviceSynchronize();
    if (e != cudaSuccess) {
        /* sticky: every later call would fail too, so the replay ends here */
        fprintf(stderr, "replay: CUDA error %s (%s)\n", cudaGetErrorString(e), g_file);
        printf("replay stopped: CUDA error %s on %s\n", cudaGetErrorString(e), g_file);
        exit(1);
    }
    uint64_t w;
    cudaMemcpy(&w, dword, 8, cudaMemcpyDeviceToHost);
    mas_error err;
    mas_decode_device_error(w, &err);
    *item = err.item;
    return (mas_status)err.status;
}

static uint64_t *error_word(void) {
    uint64_t *d = (uint64_t *)dalloc(8);
    cudaMemset(d, 0xff, 8);
    return d;
}

static bool close_to(double a, double b, double tol) {
    if (a == b) return true;
    if (a != a || b != b) return false;
    return fabs(a - b) <= tol * (1 + fabs(b));
}

/* ---- hard MAS ---- */
extern "C" void fz_replay_hard(const fz_view *value, const fz_view *path, const int64_t *x_len,
                               const int64_t *y_len, const mas_hard_outputs *out, size_t dur_n,
                               size_t idx_n, mas_status cpu_st) {
    int64_t B = value->t.dim[0];
    if (B < 1 || !value->alloc) return;
    g_calls++;
    size_t need = (g_min_ws ? mas_hard_cuda_min_workspace_size : mas_hard_cuda_workspace_size)(
        B, value->t.dim[1], value->t.dim[2], (mas_dtype)value->t.dtype);
    if (need > FZ_MAX_BYTES * 4) { g_skipped++; return; }
    dview v, p;
    if (!dmirror(value, &v, true) || !dmirror(path, &p, false)) { g_skipped++; return; }
    size_t acc = value->t.dtype == MAS_FLOAT64 ? 8 : 4;
    int64_t *dx = (int64_t *)dcopy(x_len, (size_t)B * 8), *dy = (int64_t *)dcopy(y_len, (size_t)B * 8);
    mas_hard_outputs o = *out;
    if (path && path->alloc) o.path = p.t;
    o.durations = out->durations ? (int32_t *)dalloc(dur_n * 4) : NULL;
    o.indices = out->indices ? (int32_t *)dalloc(idx_n * 4) : NULL;
    o.score = out->score ? dalloc((size_t)B * acc) : NULL;
    void *ws = need ? dalloc(need) : NULL;
    uint64_t *w = error_word();
    int64_t item;
    mas_status st = finish(mas_hard_cuda(&v.t, dx, dy, &o, ws, need, NULL, w), w, &item);
    if (st == MAS_OK && cpu_st == MAS_OK) {
        g_compared++;
        if (o.indices) {
            int32_t *h = (int32_t *)hget(o.indices, idx_n * 4);
            if (!rows_equal(h, out->indices, B, out->indices_stride, value->t.dim[2], 4)) {
                MISMATCH("hard: indices differ");
                dump_i32("indices", out->indices, h, idx_n * 4);
            }
            free(h);
        }
        if (o.durations) {
            int32_t *h = (int32_t *)hget(o.durations, dur_n * 4);
            if (!rows_equal(h, out->durations, B, out->durations_stride, value->t.dim[1], 4)) {
                MISMATCH("hard: durations differ (B=%lld T=%lld S=%lld dtype %d)", (long long)B,
                         (long long)value->t.dim[1], (long long)value->t.dim[2], value->t.dtype);
                dump_i32("durations", out->durations, h, dur_n * 4);
            }
            free(h);
        }
        if (o.score) {
            void *h = hget(o.score, (size_t)B * acc);
            /* a score of sums that overflowed may be NaN (inf + -inf), its sign
             * bit unspecified: NaN equals NaN here */
            bool same = true;
            for (int64_t b = 0; b < B; b++) {
                const int32_t adt = acc == 8 ? MAS_FLOAT64 : MAS_FLOAT32;
                const double g = fz_load(h, adt, b), c = fz_load(out->score, adt, b);
                same &= (g != g && c != c) || !memcmp((const char *)h + b * acc,
                                                      (const char *)out->score + b * acc, acc);
            }
            if (!same) {
                MISMATCH("hard: scores differ");
                if (getenv("FZ_DEBUG"))
                    for (int64_t b = 0; b < B; b++)
                        printf("  item %lld score CPU %.17g CUDA %.17g\n", (long long)b,
                               fz_load(out->score, acc == 8 ? MAS_FLOAT64 : MAS_FLOAT32, b),
                               fz_load(h, acc == 8 ? MAS_FLOAT64 : MAS_FLOAT32, b));
            }
            free(h);
        }
    } else if ((st == MAS_OK) != (cpu_st == MAS_OK) && cpu_st != MAS_ERR_WORKSPACE_TOO_SMALL &&
               cpu_st != MAS_ERR_NULL_POINTER && st != MAS_ERR_CUDA) {
        MISMATCH("hard: CPU status %d, CUDA %d (item %lld)", (int)cpu_st, (int)st, (long long)item);
    }
    cudaFree(v.d); cudaFree(p.d); cudaFree(dx); cudaFree(dy); cudaFree(o.durations);
    cudaFree(o.indices); cudaFree(o.score); cudaFree(ws); cudaFree(w);
}

/* ---- forward-sum ---- */
extern "C" void fz_replay_forward_sum(const fz_view *value, const int64_t *x_len,
                                      const int64_t *y_len, const void *log_z, const fz_view *post,
                                      mas_status cpu_st) {
    int64_t B = value->t.dim[0];
    if (B < 1 || !value->alloc) return;
    g_calls++;
    size_t need = mas_forward_sum_cuda_workspace_size(B, value->t.dim[1], value->t.dim[2],
                                                      (mas_dtype)value->t.dtype);
    if (need > FZ_MAX_BYTES * 4) { g_skipped++; return; }
    dview v, p;
    if (!dmirror(value, &v, true) || !dmirror(post, &p, false)) { g_skipped++; return; }
    size_t acc = value->t.dtype == MAS_FLOAT64 ? 8 : 4;
    int64_t *dx = (int64_t *)dcopy(x_len, (size_t)B * 8), *dy = (int64_t *)dcopy(y_len, (size_t)B * 8);
    /* log_z with every posterior: an item whose sums overflow (log_z +inf)
     * has an unspecified posterior (mas.h section 5), so it is not compared */
    void *dlz = log_z || p.d ? dalloc((size_t)B * acc) : NULL;
    void *ws = need ? dalloc(need) : NULL;
    uint64_t *w = error_word();
    int64_t item;
    mas_status st = finish(mas_forward_sum_cuda(&v.t, dx, dy, dlz, p.d ? &p.t : NULL, ws, need,
                                                NULL, w), w, &item);
    double tol = acc == 8 ? 1e-9 : 1e-4;
    if (st == MAS_OK && cpu_st == MAS_OK) {
        g_compared++;
        bool overflow = false;
        void *h = dlz ? hget(dlz, (size_t)B * acc) : NULL;
        for (int64_t b = 0; h && b < B; b++) {
            double g = acc == 8 ? ((double *)h)[b] : ((float *)h)[b];
            overflow |= g == INFINITY;
            if (g != g) MISMATCH("forward-sum: item %lld log_z NaN on CUDA", (long long)b);
            if (!log_z) continue;
            double c = acc == 8 ? ((const double *)log_z)[b] : ((const float *)log_z)[b];
            if (fabs(c) < 1e4 && !close_to(g, c, tol))
                MISMATCH("forward-sum: item %lld log_z CUDA %.9g CPU %.9g", (long long)b, g, c);
        }
        free(h);
        if (p.d && !overflow) {
            uint8_t *h = (uint8_t *)hget(p.d, p.bytes);
            size_t n = p.bytes / acc;
            for (size_t k = 0; k < n; k++) {
                double g = fz_load(h, (int32_t)p.t.dtype, (int64_t)k);
                double c = fz_load(post->alloc, post->t.dtype, (int64_t)k);
                if (c == c && fabs(c) <= 1 && fabs(g - c) > (acc == 8 ? 1e-9 : 2e-3)) {
                    MISMATCH("forward-sum: posterior element %zu CUDA %.9g CPU %.9g", k, g, c);
                    break;
                }
            }
            free(h);
        }
    } else if ((st == MAS_OK) != (cpu_st == MAS_OK) && cpu_st != MAS_ERR_WORKSPACE_TOO_SMALL &&
               cpu_st != MAS_ERR_NULL_POINTER && cpu_st != MAS_ERR_NO_FINITE_PATH &&
               st != MAS_ERR_NO_FINITE_PATH && st != MAS_ERR_CUDA) {
        MISMATCH("forward-sum: CPU status %d, CUDA %d (item %lld)", (int)cpu_st, (int)st,
                 (long long)item);
    }
    cudaFree(v.d); cudaFree(p.d); cudaFree(dx); cudaFree(dy); cudaFree(dlz); cudaFree(ws);
    cudaFree(w);
}

/* ---- monotonic attention, forward (grad_phi NULL) or backward ---- */
extern "C" void fz_replay_attention(int kind, const fz_view *logits, const int64_t *n_len,
                                    const int64_t *m_len, const fz_view *log_phi,
                                    const fz_view *grad_phi, const fz_view *grad_x,
                                    const unsigned char *compare, mas_status cpu_st) {
    int64_t B = logits->t.dim[0];
    if (B < 1 || !logits->alloc || !log_phi->alloc) return;
    bool backward = grad_phi != NULL;
    if (backward && (!grad_phi->alloc || !grad_x->alloc)) return;
    g_calls++;
    size_t need = mas_attention_cuda_workspace_size(B, logits->t.dim[1], logits->t.dim[2],
                                                    (mas_dtype)logits->t.dtype);
    if (need > FZ_MAX_BYTES * 4) { g_skipped++; return; }
    dview x, lp, gp, gx;
    if (!dmirror(logits, &x, true) || !dmirror(log_phi, &lp, backward) ||
        !dmirror(backward ? grad_phi : NULL, &gp, true) ||
        !dmirror(backward ? grad_x : NULL, &gx, false)) { g_skipped++; return; }
    int64_t *dn = (int64_t *)dcopy(n_len, (size_t)B * 8), *dm = (int64_t *)dcopy(m_len, (size_t)B * 8);
    void *ws = need ? dalloc(need) : NULL;
    uint64_t *w = error_word();
    int64_t item;
    mas_status host =
        backward ? mas_attention_backward_cuda((mas_attention_kind)kind, &x.t, dn, dm, &lp.t, &gp.t,
                                               &gx.t, ws, need, NULL, w)
                 : mas_attention_forward_cuda((mas_attention_kind)kind, &x.t, dn, dm, &lp.t, ws,
                                              need, NULL, w);
    mas_status st = finish(host, w, &item);
    const fz_view *cv = backward ? grad_x : log_phi;
    const dview *gv = backward ? &gx : &lp;
    if (st == MAS_OK && cpu_st == MAS_OK) {
        g_compared++;
        uint8_t *h = (uint8_t *)hget(gv->d, gv->bytes);
        mas_tensor3 ht = gv->t; /* the device view's layout over the host copy */
        ht.data = h + ((const uint8_t *)cv->t.data - cv->alloc);
        double tol = gv->t.dtype == MAS_FLOAT64 ? 1e-8 : 2e-3;
        bool found = false;
        for (int64_t b = 0; b < B && !found; b++) {
            if (compare && !compare[b]) continue;
            int64_t n = n_len ? n_len[b] : logits->t.dim[1], m = m_len ? m_len[b] : logits->t.dim[2];
            for (int64_t i = 0; i < n && !found; i++)
                for (int64_t j = 0; j < m && !found; j++) {
                    double g = fz_at(&ht, b, i, j), c = fz_at(&cv->t, b, i, j);
                    if (c == c && fabs(c) < 1e4 && !close_to(g, c, tol)) {
                        MISMATCH("attention %s: item %lld (%lld, %lld) CUDA %.9g CPU %.9g",
                                 backward ? "backward" : "forward", (long long)b, (long long)i,
                                 (long long)j, g, c);
                        found = true;
                    }
                }
        }
        free(h);
    }
    cudaFree(x.d); cudaFree(lp.d); cudaFree(gp.d); cudaFree(gx.d); cudaFree(dn); cudaFree(dm);
    cudaFree(ws); cudaFree(w);
}

/* ---- log-likelihoods ---- */
extern "C" void fz_replay_loglik(const mas_loglik_args *a, const fz_view *x, const fz_view *coef,
                                 const fz_view *out, const fz_view *best, mas_status cpu_st) {
    int64_t B = a->x.dim[0];
    if (B < 1 || !x->alloc || !coef->alloc || !out->alloc) return;
    /* The harness sizes x for the CPU, which reads nothing when a length or
     * the offsets are bad; the CUDA kernel validates per item and per state
     * range on the device and still reads the items that are fine. */
    if (cpu_st == MAS_ERR_BAD_LENGTH || cpu_st == MAS_ERR_BAD_ARGUMENT) return;
    g_calls++;
    size_t need = mas_loglik_cuda_workspace_size(a);
    if (need > FZ_MAX_BYTES * 4) { g_skipped++; return; }
    dview dx, dc, dout, dbest;
    if (!dmirror(x, &dx, true) || !dmirror(coef, &dc, true) || !dmirror(out, &dout, false) ||
        !dmirror(best, &dbest, false)) { g_skipped++; return; }
    mas_loglik_args g = *a;
    g.x = dx.t;
    g.coef = dc.t;
    g.out = dout.t;
    if (best && best->alloc) g.best = dbest.t;
    int64_t *doff = a->offsets && a->n_states >= 1 && a->n_states < (1 << 20)
                        ? (int64_t *)dcopy(a->offsets, (size_t)(a->n_states + 1) * 8) : NULL;
    g.offsets = doff;
    if (a->offsets && !doff) { g_skipped++; return; }
    g.n_len = (const int64_t *)dcopy(a->n_len, (size_t)B * 8);
    g.s_len = (const int64_t *)dcopy(a->s_len, (size_t)B * 8);
    void *ws = need ? dalloc(need) : NULL;
    uint64_t *w = error_word();
    int64_t item;
    mas_status st = finish(mas_loglik_cuda(&g, ws, need, NULL, w), w, &item);
    /* Scores are specified for coefficients as mas_gauss_coef_* makes them
     * (a, b finite, K finite or -inf) and frames whose squares fit float32
     * (mas.h section 6); elsewhere NaN / inf may come in any order. */
    bool domain = true;
    for (int64_t b = 0; b < B && domain && st == MAS_OK && cpu_st == MAS_OK; b++) {
        /* only what the call read: the buffers are sized to it */
        int64_t nl = a->n_len ? a->n_len[b] : a->x.dim[1];
        int64_t sl = a->s_len ? a->s_len[b] : a->n_states;
        if (nl < 1 || sl < 1) continue;
        int64_t g = a->offsets ? a->offsets[sl] : sl, cb = coef->t.dim[0] == 1 ? 0 : b;
        for (int64_t r = 0; r < coef->t.dim[1] && domain; r++)
            for (int64_t m = 0; m < g && domain; m++) {
                double v = fz_at(&coef->t, cb, r, m);
                domain = isfinite(v) || (r == 0 && v == -INFINITY);
            }
        for (int64_t n = 0; n < nl && domain; n++)
            for (int64_t j = 0; j < a->x.dim[2] && domain; j++)
                domain = fabs(fz_at(&x->t, b, n, j)) <= 1e15;
    }
    if (st == MAS_OK && cpu_st == MAS_OK && !domain) g_skipped++;
    else if (st == MAS_OK && cpu_st == MAS_OK) {
        g_compared++;
        uint8_t *h = (uint8_t *)hget(dout.d, dout.bytes);
        size_t n = dout.bytes / fz_dtype_size(dout.t.dtype);
        /* the default precision is the same fma chain: single-Gaussian states
         * agree bit for bit, mixtures within a few ulps; TF32/BF16 loosely */
        double tol = a->precision != MAS_PRECISION_DEFAULT ? 5e-2
                     : dout.t.dtype == MAS_FLOAT64 ? 1e-12 : 1e-5;
        for (size_t k = 0; k < n; k++) {
            double gv = fz_load(h, (int32_t)dout.t.dtype, (int64_t)k);
            double c = fz_load(out->alloc, out->t.dtype, (int64_t)k);
            if (c == c && isfinite(c) && fabs(c) < 1e6 && !close_to(gv, c, tol)) {
                MISMATCH("loglik: element %zu CUDA %.9g CPU %.9g (precision %d)", k, gv, c,
                         a->precision);
                break;
            }
        }
        free(h);
    } else if ((st == MAS_OK) != (cpu_st == MAS_OK) && cpu_st != MAS_ERR_WORKSPACE_TOO_SMALL &&
               st != MAS_ERR_CUDA) {
        MISMATCH("loglik: CPU status %d, CUDA %d (item %lld)", (int)cpu_st, (int)st, (long long)item);
    }
    cudaFree(dx.d); cudaFree(dc.d); cudaFree(dout.d); cudaFree(dbest.d); cudaFree(doff);
    cudaFree((void *)g.n_len); cudaFree((void *)g.s_len); cudaFree(ws); cudaFree(w);
}

/* ---- topologies: Viterbi and forward-sum ---- */
static bool item_status(mas_status st) {
    return st == MAS_ERR_BAD_LENGTH || st == MAS_ERR_NONFINITE_VALUE ||
           st == MAS_ERR_NO_FINITE_PATH || st == MAS_ERR_TARGET_TOO_LONG ||
           st == MAS_ERR_BAD_ARGUMENT;
}

static void *dcopy_or_alloc(const void *h, size_t bytes) {
    return h ? dalloc(bytes) : NULL;
}

extern "C" void fz_replay_topology(const mas_topo_args *a, int soft, int64_t labels_n,
                                   const fz_view *em, const mas_topo_hard_outputs *ho,
                                   const mas_topo_soft_outputs *so, const fz_view *post,
                                   const fz_view *grad, const unsigned char *moderate,
                                   mas_status cpu_st) {
    int64_t B = a->emissions.dim[0];
    if (B < 1 || !em->alloc) return;
    g_calls++;
    mas_topo_args da = *a;
    size_t need = g_min_ws && !soft ? mas_topo_cuda_min_workspace_size(a)
                                    : mas_topo_cuda_workspace_size(a, soft);
    if (need == 0 || need > FZ_MAX_BYTES * 4) { g_skipped++; return; }
    dview e;
    if (!dmirror(em, &e, true)) { g_skipped++; return; }
    da.emissions = e.t;
    da.labels = a->labels ? (const int32_t *)dcopy(a->labels, (size_t)labels_n * 4) : NULL;
    da.token_len = (const int64_t *)dcopy(a->token_len, (size_t)B * 8);
    da.frame_len = (const int64_t *)dcopy(a->frame_len, (size_t)B * 8);
    const int64_t Sp = a->gathered ? a->emissions.dim[1] : a->emissions.dim[2], L = a->tokens;
    const size_t as = a->emissions.dtype == MAS_FLOAT64 ? 8 : 4;
    /* host output sizes as fuzz_topology.c allocates them */
    size_t n_ids = ho->state_ids ? (size_t)((B - 1) * ho->state_ids_stride + Sp) * 4 : 0;
    size_t n_lab = ho->frame_labels ? (size_t)((B - 1) * ho->frame_labels_stride + Sp) * 4 : 0;
    size_t n_spans = ho->token_spans ? (size_t)((B - 1) * ho->token_spans_stride + 2 * L) * 4 : 0;
    size_t n_ts = ho->token_scores ? (size_t)((B - 1) * ho->token_scores_stride + L) * as : 0;
    mas_topo_hard_outputs dh = *ho;
    mas_topo_soft_outputs ds = *so;
    dview dp, dg;
    memset(&dp, 0, sizeof dp);
    memset(&dg, 0, sizeof dg);
    if (!soft) {
        dh.state_ids = (int32_t *)dcopy_or_alloc(ho->state_ids, n_ids);
        dh.frame_labels = (int32_t *)dcopy_or_alloc(ho->frame_labels, n_lab);
        dh.token_spans = (int32_t *)dcopy_or_alloc(ho->token_spans, n_spans);
        dh.token_scores = dcopy_or_alloc(ho->token_scores, n_ts);
        dh.score = dcopy_or_alloc(ho->score, (size_t)B * as);
    } else {
        ds.log_z = dcopy_or_alloc(so->log_z, (size_t)B * as);
        if (!dmirror(post, &dp, false) || !dmirror(grad, &dg, false)) { g_skipped++; return; }
        ds.posterior = post && post->alloc ? dp.t : so->posterior;
        ds.grad = grad && grad->alloc ? dg.t : so->grad;
    }
    void *ws = dalloc(need);
    uint64_t *w = error_word();
    int64_t item;
    mas_status host = soft ? mas_topo_forward_sum_cuda(&da, &ds, ws, need, NULL, w)
                           : mas_viterbi_cuda(&da, &dh, ws, need, NULL, w);
    mas_status st = finish(host, w, &item);
    bool all_moderate = true;
    for (int64_t b = 0; b < B; b++) all_moderate &= moderate[b] != 0;
    if (st == MAS_OK && cpu_st == MAS_OK) {
        g_compared++;
        if (!soft) {
            /* the same tie rule and arithmetic: bit for bit */
            struct { const void *h, *d; size_t n; int64_t stride, width; size_t es; const char *what; } o[] = {
                {ho->state_ids, dh.state_ids, n_ids, ho->state_ids_stride, Sp, 4, "state_ids"},
                {ho->frame_labels, dh.frame_labels, n_lab, ho->frame_labels_stride, Sp, 4, "frame_labels"},
                {ho->token_spans, dh.token_spans, n_spans, ho->token_spans_stride, 2 * L, 4, "token_spans"},
                {ho->token_scores, dh.token_scores, n_ts, ho->token_scores_stride, L, as, "token_scores"},
                {ho->score, dh.score, (size_t)B * as, 1, 1, as, "score"}};
            for (auto &x : o) {
                if (!x.h || !all_moderate) continue;
                void *h = hget(x.d, x.n);
                if (!rows_equal(h, x.h, B, x.stride, x.width, x.es)) {
                    MISMATCH("viterbi: %s differ", x.what);
                    dump_i32(x.what, x.h, h, x.n);
                }
                free(h);
            }
        } else {
            double tol = as == 8 ? 1e-9 : 1e-4;
            if (so->log_z) {
                uint8_t *h = (uint8_t *)hget(ds.log_z, (size_t)B * as);
                for (int64_t b = 0; b < B; b++) {
                    int32_t adt = as == 8 ? MAS_FLOAT64 : MAS_FLOAT32;
                    double g = fz_load(h, adt, b), c = fz_load(so->log_z, adt, b);
                    if (g != g) MISMATCH("topology log_z: item %lld NaN on CUDA", (long long)b);
                    else if (moderate[b] && !(g == c || close_to(g, c, tol)))
                        MISMATCH("topology log_z: item %lld CUDA %.9g CPU %.9g", (long long)b, g, c);
                }
                free(h);
            }
            const fz_view *hv[2] = {post, grad};
            const dview *dv[2] = {&dp, &dg};
            for (int q = 0; q < 2; q++) {
                if (!hv[q] || !hv[q]->alloc) continue;
                uint8_t *h = (uint8_t *)hget(dv[q]->d, dv[q]->bytes);
                mas_tensor3 ht = dv[q]->t;
                ht.data = h + ((const uint8_t *)hv[q]->t.data - hv[q]->alloc);
                bool found = false;
                for (int64_t b = 0; b < B && !found; b++) {
                    if (!moderate[b]) continue;
                    for (int64_t i = 0; i < ht.dim[1] && !found; i++)
                        for (int64_t j = 0; j < ht.dim[2] && !found; j++) {
                            double g = fz_at(&ht, b, i, j), c = fz_at(&hv[q]->t, b, i, j);
                            if (!(fabs(g - c) <= (as == 8 ? 1e-9 : 2e-3))) {
                                MISMATCH("topology %s: item %lld (%lld, %lld) CUDA %.9g CPU %.9g",
                                         q ? "grad" : "posterior", (long long)b, (long long)i,
                                         (long long)j, g, c);
                                found = true;
                            }
                        }
                }
                free(h);
            }
        }
    } else if (host == MAS_OK && st != MAS_ERR_CUDA && all_moderate && st != cpu_st &&
               (cpu_st == MAS_OK || item_status(cpu_st))) {
        MISMATCH("topology: CPU status %d, CUDA %d (item %lld)", (int)cpu_st, (int)st,
                 (long long)item);
    }
    cudaFree(e.d); cudaFree((void *)da.labels); cudaFree((void *)da.token_len);
    cudaFree((void *)da.frame_len); cudaFree(dh.state_ids); cudaFree(dh.frame_labels);
    cudaFree(dh.token_spans); cudaFree(dh.token_scores); cudaFree(dh.score);
    cudaFree(ds.log_z); cudaFree(dp.d); cudaFree(dg.d); cudaFree(ws); cudaFree(w);
}

/* ---- the corpus ---- */
struct target {
    const char *name;
    int (*run)(const uint8_t *, size_t);
};

int main(int argc, char **argv) {
    const char *root = "tests/fuzz/corpus";
    long max_files = 2000;
    for (int k = 1; k < argc; k++) {
        if (!strcmp(argv[k], "--max-files") && k + 1 < argc) max_files = atol(argv[++k]);
        else if (!strcmp(argv[k], "--min-workspace")) g_min_ws = true;
        else root = argv[k];
    }
    /* the newest entry points first: a run cut short has replayed them */
    static const target targets[] = {
        {"fuzz_topology", fz_run_topology},
        {"fuzz_attention_backward", fz_run_attention_backward},
        {"fuzz_likelihood", fz_run_likelihood},
        {"fuzz_hard", fz_run_hard},
        {"fuzz_forward_sum", fz_run_forward_sum},
        {"fuzz_attention_forward", fz_run_attention_forward},
    };
    int dev = 0;
    if (cudaGetDeviceCount(&dev) != cudaSuccess || dev < 1) {
        fprintf(stderr, "replay_cuda: no CUDA device\n");
        return 2;
    }
    int failed = 0;
    for (const target &t : targets) {
        char dir[4096];
        snprintf(dir, sizeof dir, "%s/%s", root, t.name);
        DIR *d = opendir(dir);
        if (!d) {
            printf("%-26s no corpus at %s\n", t.name, dir);
            failed = 1;
            continue;
        }
        long files = 0;
        g_calls = g_compared = g_mismatch = g_skipped = 0;
        long errors_before = g_cuda_errors;
        struct dirent *e;
        while ((e = readdir(d)) && files < max_files) {
            if (e->d_name[0] == '.') continue;
            char path[8192];
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            FILE *f = fopen(path, "rb");
            if (!f) continue;
            fseek(f, 0, SEEK_END);
            long n = ftell(f);
            fseek(f, 0, SEEK_SET);
            uint8_t *buf = (uint8_t *)malloc(n > 0 ? (size_t)n : 1);
            size_t got = fread(buf, 1, (size_t)(n > 0 ? n : 0), f);
            fclose(f);
            g_file = path;
            t.run(buf, got);
            free(buf);
            files++;
        }
        closedir(d);
        printf("%-26s files %6ld  CUDA calls %6ld  both OK, compared %6ld  skipped %4ld  "
               "mismatches %ld  CUDA errors %ld\n", t.name, files, g_calls, g_compared, g_skipped,
               g_mismatch, g_cuda_errors - errors_before);
        if (g_mismatch || g_cuda_errors != errors_before) failed = 1;
    }
    return failed;
}
