/* What the fused-op GPU tests share (include once, after test_common.h):
 * views, host values stored in any float dtype, device buffers, random
 * lengths and the unfused path's cells. */
#ifndef MAS_TESTS_CUDA_FUSED_TEST_DATA_H
#define MAS_TESTS_CUDA_FUSED_TEST_DATA_H

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <string.h>

#include <vector>

#include "cuda_check.h"
#include "mas.h"

static size_t dsize(mas_dtype d) { return mas_dtype_size(d); }

static bool chance(double p) { return urand() < p; }

static mas_tensor3 t3(void *data, mas_dtype dtype, int64_t d0, int64_t d1, int64_t d2, int64_t s0,
                      int64_t s1, int64_t s2) {
    mas_tensor3 t;
    memset(&t, 0, sizeof t);
    t.data = data;
    t.dtype = dtype;
    t.dim[0] = d0;
    t.dim[1] = d1;
    t.dim[2] = d2;
    t.stride[0] = s0;
    t.stride[1] = s1;
    t.stride[2] = s2;
    return t;
}

/* The arguments of a float32 Glow-TTS call: z [B, J, S], mean and log_std
 * [B, J, T] contiguous, lengths [B], the default precision. */
static mas_gauss_align_args glow_args(const void *z, const void *mean, const void *log_std,
                                      const int64_t *x_len, const int64_t *y_len, int64_t B,
                                      int64_t T, int64_t S, int64_t J) {
    mas_gauss_align_args a;
    memset(&a, 0, sizeof a);
    a.x = t3((void *)z, MAS_FLOAT32, B, S, J, S * J, 1, S);
    a.params.means = t3((void *)mean, MAS_FLOAT32, B, T, J, J * T, 1, T);
    a.params.spread = t3((void *)log_std, MAS_FLOAT32, B, T, J, J * T, 1, T);
    a.params.spread_kind = MAS_SPREAD_LOG_STD;
    a.x_len = x_len;
    a.y_len = y_len;
    return a;
}

/* The same for the workspace size functions only: the pointers are
 * placeholders they never read (so the bounds hold on a machine without a
 * GPU). */
static mas_gauss_align_args shape_args(int64_t B, int64_t T, int64_t S, int64_t J) {
    static unsigned char placeholder[64];
    const int64_t *len = (const int64_t *)placeholder;
    return glow_args(placeholder, placeholder, placeholder, len, len, B, T, S, J);
}

/* The bench's shapes (issue 11), a long item and small ones: B, T, S */
static const int64_t kBoundShapes[][3] = {{32, 150, 800}, {32, 512, 2048}, {16, 1024, 4096},
                                          {8, 4096, 32768}, {1, 1, 1}, {3, 33, 70}, {2, 300, 200}};

/* An op's workspace at each of kBoundShapes (J = 80), printed next to its
 * bound(B, T, S, J) in bytes and the float32 [B, T, S] matrix; checks
 * 0 < ws <= bound. */
template <class Bound>
static void check_workspaces(const char *op, size_t (*size)(const mas_gauss_align_args *),
                             Bound bound) {
    snprintf(g_case, sizeof g_case, "%s workspace bounds", op);
    const int64_t J = 80;
    for (const auto &sh : kBoundShapes) {
        const int64_t B = sh[0], T = sh[1], S = sh[2];
        const mas_gauss_align_args a = shape_args(B, T, S, J);
        const size_t ws = size(&a);
        const double most = bound(B, T, S, J);
        printf("%s workspace B=%lld T=%lld S=%lld D=80: %.2f MB (bound %.2f; the matrix %.1f MB)\n",
               op, (long long)B, (long long)T, (long long)S, ws / 1e6, most / 1e6,
               4.0 * B * T * S / 1e6);
        CHECK(ws > 0 && (double)ws <= most, "%s B=%lld T=%lld S=%lld: %zu bytes, bound %.0f", op,
              (long long)B, (long long)T, (long long)S, ws, most);
    }
}

/* Every output of hard MAS (path uint8 [B, T, S]). */
static mas_hard_outputs hard_outputs(void *path, int32_t *dur, int32_t *idx, void *score, int64_t B,
                                     int64_t T, int64_t S) {
    mas_hard_outputs o;
    memset(&o, 0, sizeof o);
    o.path = t3(path, MAS_UINT8, B, T, S, T * S, S, 1);
    o.durations = dur;
    o.durations_stride = T;
    o.indices = idx;
    o.indices_stride = S;
    o.score = score;
    return o;
}

/* value v stored as dtype d at element k of buf */
static void store(std::vector<unsigned char> &buf, int64_t k, mas_dtype d, double v) {
    unsigned char *p = buf.data() + (size_t)k * dsize(d);
    if (d == MAS_FLOAT64) {
        memcpy(p, &v, 8);
    } else if (d == MAS_FLOAT32) {
        float f = (float)v;
        memcpy(p, &f, 4);
    } else if (d == MAS_FLOAT16) {
        __half h = __float2half_rn((float)v);
        memcpy(p, &h, 2);
    } else {
        __nv_bfloat16 h = __float2bfloat16_rn((float)v);
        memcpy(p, &h, 2);
    }
}

/* element k of buf, stored as dtype d (float64 or float32) */
static double load(const std::vector<unsigned char> &buf, int64_t k, mas_dtype d) {
    const unsigned char *p = buf.data() + (size_t)k * dsize(d);
    if (d == MAS_FLOAT64) {
        double v;
        memcpy(&v, p, 8);
        return v;
    }
    float f;
    memcpy(&f, p, 4);
    return f;
}

struct DevBuf {
    void *p = nullptr;
    explicit DevBuf(size_t n) { CUDA_OK(cudaMalloc(&p, n ? n : 1)); }
    ~DevBuf() { cudaFree(p); }
};
static void *upload(DevBuf &d, const void *h, size_t n) {
    CUDA_OK(cudaMemcpy(d.p, h, n, cudaMemcpyHostToDevice));
    return d.p;
}

/* Lengths as a batch has them: y_len S 40% of the time, x_len up to
 * min(y_len, T) (equal 30% of the time), and 5% of the items an x_len
 * from -1 to T + 1 (length errors). */
static void random_lengths(int64_t B, int64_t T, int64_t S, std::vector<int64_t> &xl,
                           std::vector<int64_t> &yl) {
    xl.resize((size_t)B);
    yl.resize((size_t)B);
    for (int64_t b = 0; b < B; b++) {
        int64_t y = chance(0.4) ? S : irand(1, S);
        int64_t x = irand(1, y < T ? y : T);
        if (chance(0.3)) x = y < T ? y : T;
        if (chance(0.05)) x = irand(-1, T + 1);
        xl[b] = x;
        yl[b] = y;
    }
}

/* The unfused CUDA path's cells of a fused call's arguments: the
 * coefficients (coef: MB * (2J+1) * T elements), then mas_loglik_cuda (in
 * a.precision) into
 * value, a [B, T, S] matrix of the accumulator type (device buffers the
 * caller owns); value errors to word. Returns the matrix's view. */
static mas_tensor3 unfused_cells(const mas_gauss_align_args &a, mas_dtype acc, void *coef,
                                 void *value, uint64_t *word) {
    const int64_t B = a.x.dim[0], S = a.x.dim[1], J = a.x.dim[2];
    const int64_t MB = a.params.means.dim[0], T = a.params.means.dim[1], P = 2 * J + 1;
    mas_tensor3 cv = t3(coef, acc, MB, P, T, P * T, T, 1);
    mas_status st = mas_gauss_coef_cuda(&a.params, &cv, nullptr, word);
    CHECK(st == MAS_OK, "coef status %d", (int)st);
    mas_loglik_args la;
    memset(&la, 0, sizeof la);
    la.x = a.x;
    la.coef = cv;
    la.n_states = T;
    la.n_len = a.y_len;
    la.s_len = a.x_len;
    la.out = t3(value, acc, B, S, T, T * S, 1, S); /* [B, T, S] seen as [B, S, T] */
    la.precision = a.precision;
    st = mas_loglik_cuda(&la, nullptr, 0, nullptr, word);
    CHECK(st == MAS_OK, "loglik status %d", (int)st);
    return t3(value, acc, B, T, S, T * S, S, 1);
}

#endif
