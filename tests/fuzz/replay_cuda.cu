/* The CUDA replay of the fuzz corpus (issue 14): a plain program, not
 * libFuzzer. The fuzz targets, compiled with -DFZ_REPLAY and their
 * LLVMFuzzerTestOneInput renamed (bench/gpu_fuzz_replay.sh), decode every
 * corpus file of tests/fuzz/corpus/<target>/ exactly as under libFuzzer, run
 * and check the CPU call, and hand the problem to the hooks below. A hook
 * copies the inputs into device buffers of exactly the host buffers' sizes
 * (so compute-sanitizer memcheck sees any stray access), runs the CUDA entry
 * point, and compares with the CPU result where both succeed: hard MAS bit
 * for bit, the soft ops and likelihoods within a tolerance.
 *   replay_cuda [--max-files N] <corpus root>        (default tests/fuzz/corpus)
 * Prints per target: files, calls, both OK and compared, mismatches; exits 1
 * on a mismatch or a CUDA error. Topologies have no CUDA backend yet. */
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
}

static long g_calls, g_compared, g_mismatch, g_cuda_errors, g_skipped;

#define MISMATCH(...)                                  \
    do {                                               \
        fprintf(stderr, "replay mismatch: ");          \
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
        fprintf(stderr, "replay: CUDA error %s\n", cudaGetErrorString(e));
        g_cuda_errors++;
        return MAS_ERR_CUDA;
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
    size_t need = mas_hard_cuda_workspace_size(B, value->t.dim[1], value->t.dim[2],
                                               (mas_dtype)value->t.dtype);
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
            if (memcmp(h, out->indices, idx_n * 4)) MISMATCH("hard: indices differ");
            free(h);
        }
        if (o.durations) {
            int32_t *h = (int32_t *)hget(o.durations, dur_n * 4);
            if (memcmp(h, out->durations, dur_n * 4)) MISMATCH("hard: durations differ");
            free(h);
        }
        if (o.score) {
            void *h = hget(o.score, (size_t)B * acc);
            if (memcmp(h, out->score, (size_t)B * acc)) MISMATCH("hard: scores differ");
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
    void *dlz = log_z ? dalloc((size_t)B * acc) : NULL;
    void *ws = need ? dalloc(need) : NULL;
    uint64_t *w = error_word();
    int64_t item;
    mas_status st = finish(mas_forward_sum_cuda(&v.t, dx, dy, dlz, p.d ? &p.t : NULL, ws, need,
                                                NULL, w), w, &item);
    double tol = acc == 8 ? 1e-9 : 1e-4;
    if (st == MAS_OK && cpu_st == MAS_OK) {
        g_compared++;
        if (dlz) {
            void *h = hget(dlz, (size_t)B * acc);
            for (int64_t b = 0; b < B; b++) {
                double g = acc == 8 ? ((double *)h)[b] : ((float *)h)[b];
                double c = acc == 8 ? ((const double *)log_z)[b] : ((const float *)log_z)[b];
                if (fabs(c) < 1e4 && !close_to(g, c, tol))
                    MISMATCH("forward-sum: item %lld log_z CUDA %.9g CPU %.9g", (long long)b, g, c);
                if (g != g) MISMATCH("forward-sum: item %lld log_z NaN on CUDA", (long long)b);
            }
            free(h);
        }
        if (p.d) {
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
                                    mas_status cpu_st) {
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
        size_t n = gv->bytes / fz_dtype_size(gv->t.dtype);
        double tol = gv->t.dtype == MAS_FLOAT64 ? 1e-8 : 2e-3;
        for (size_t k = 0; k < n; k++) {
            double g = fz_load(h, (int32_t)gv->t.dtype, (int64_t)k);
            double c = fz_load(cv->alloc, cv->t.dtype, (int64_t)k);
            if (c == c && fabs(c) < 1e4 && !close_to(g, c, tol)) {
                MISMATCH("attention %s: element %zu CUDA %.9g CPU %.9g",
                         backward ? "backward" : "forward", k, g, c);
                break;
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
    if (st == MAS_OK && cpu_st == MAS_OK) {
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
        else root = argv[k];
    }
    static const target targets[] = {
        {"fuzz_hard", fz_run_hard},
        {"fuzz_forward_sum", fz_run_forward_sum},
        {"fuzz_attention_forward", fz_run_attention_forward},
        {"fuzz_attention_backward", fz_run_attention_backward},
        {"fuzz_likelihood", fz_run_likelihood},
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
    printf("fuzz_topology              skipped: no CUDA backend (MAS_ERR_NO_CUDA stubs)\n");
    return failed;
}
