/* GPU test of the likelihood kernels (mas.h section 6).
 *
 * References written here from the formula: the state log-likelihood in
 * float64 by the direct form log sum_k exp(log w_k - 1/2 sum_j (log 2 pi var
 * + (x-mu)^2/var)), not the expansion; and, for one-Gaussian states, the
 * float chain of mas.h (fma in order) on the host with the same coefficients,
 * which the GPU must match bit for bit. The coefficients themselves must be
 * the bits lib/common/gauss_coef.h gives on the host. Outputs are poisoned
 * before each call. Random cases print the seed: `test_likelihood_cuda SEED`
 * replays them; `--small` keeps the cases small (compute-sanitizer). */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <vector>

#include "common/gauss_coef.h"
#include "cuda/coef_launch.h"
#include "cuda_check.h"
#include "mas.h"
#include "test_common.h"

static double g_tf32_worst = 0, g_tf32_worst_abs = 0;

template <typename T> struct Dev {
    T *p = nullptr;
    size_t n = 0;
    explicit Dev(size_t count) : n(count) { CUDA_OK(cudaMalloc(&p, (count ? count : 1) * sizeof(T))); }
    ~Dev() { cudaFree(p); }
    void put(const std::vector<T> &v) { CUDA_OK(cudaMemcpy(p, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice)); }
    std::vector<T> get() const {
        std::vector<T> v(n);
        CUDA_OK(cudaMemcpy(v.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost));
        return v;
    }
};

static uint16_t to_half_bits(float f) {
    __half h = __float2half_rn(f);
    uint16_t b;
    memcpy(&b, &h, 2);
    return b;
}
static uint16_t to_bf16_bits(float f) {
    __nv_bfloat16 h = __float2bfloat16_rn(f);
    uint16_t b;
    memcpy(&b, &h, 2);
    return b;
}
static float from_half_bits(uint16_t b) {
    __half h;
    memcpy(&h, &b, 2);
    return __half2float(h);
}
static float from_bf16_bits(uint16_t b) {
    __nv_bfloat16 h;
    memcpy(&h, &b, 2);
    return __bfloat162float(h);
}

static uint64_t read_word(uint64_t *d_word) {
    uint64_t w;
    CUDA_OK(cudaMemcpy(&w, d_word, 8, cudaMemcpyDeviceToHost));
    return w;
}

/* One case: B items, N frames of J dims, a model of n_states states. */
struct Case {
    int64_t B, N, J, M, n_states;
    bool per_item;      /* a model per item (TTS) or one shared */
    bool mixture;       /* offsets given (else one Gaussian per state) */
    bool log_std;       /* spread as log-std (else variances) */
    bool weights;
    bool lengths;
    bool max_mode;
    bool want_best;
    bool bst;           /* out laid out [B, states, N] in memory */
    bool frame_major_x; /* x stored [B, J, N] (Glow-TTS z) */
    int32_t x_dtype;
    int32_t precision;  /* mas_precision: TF32 is checked against an error bound */
    int64_t uniform;    /* G: every state G Gaussians, stated as mixture_size (0: random sizes) */
    bool f32_model;     /* means and spreads float32 (Glow-TTS's; else float64) */
};

static const char *dtype_name(int32_t d) {
    return d == MAS_FLOAT32 ? "f32" : d == MAS_FLOAT64 ? "f64" : d == MAS_FLOAT16 ? "f16" : "bf16";
}

static void run_case(const Case &c) {
    snprintf(g_case, sizeof g_case,
             "B=%lld N=%lld J=%lld M=%lld S=%lld item=%d mix=%d logstd=%d w=%d len=%d max=%d best=%d bst=%d zx=%d %s prec=%d G=%lld m32=%d",
             (long long)c.B, (long long)c.N, (long long)c.J, (long long)c.M, (long long)c.n_states,
             c.per_item, c.mixture, c.log_std, c.weights, c.lengths, c.max_mode, c.want_best, c.bst,
             c.frame_major_x, dtype_name(c.x_dtype), (int)c.precision, (long long)c.uniform, c.f32_model);
    const int64_t B = c.B, N = c.N, J = c.J, M = c.M, S = c.n_states, P = 2 * J + 1;
    const int64_t Bp = c.per_item ? B : 1;
    const bool f64 = c.x_dtype == MAS_FLOAT64;
    const int32_t acc = f64 ? MAS_FLOAT64 : MAS_FLOAT32;
    const size_t es = f64 ? 8 : 4;

    /* offsets: random mixture sizes >= 1 summing to M */
    std::vector<int64_t> offsets(S + 1, 0);
    if (c.mixture && c.uniform) {
        for (int64_t s = 0; s <= S; s++) offsets[s] = s * c.uniform;
    } else if (c.mixture) {
        std::vector<int64_t> cuts;
        for (int64_t s = 0; s < S - 1; s++) cuts.push_back(0);
        /* S-1 distinct cut points in [1, M-1] */
        std::vector<char> used(M, 0);
        int64_t k = 0;
        while (k < S - 1) {
            int64_t v = irand(1, M - 1);
            if (!used[v]) {
                used[v] = 1;
                k++;
            }
        }
        int64_t s = 1;
        for (int64_t v = 1; v < M; v++)
            if (used[v]) offsets[s++] = v;
        offsets[S] = M;
    }
    /* parameters, host float64 (means [Bp, M, J], spread, log weights [Bp, M]) */
    std::vector<double> mu(Bp * M * J), sp(Bp * M * J), lw(Bp * M, 0.0);
    for (auto &v : mu) v = nrand();
    for (auto &v : sp) v = c.log_std ? 0.3 * nrand() : 0.5 + 1.5 * urand();
    if (c.weights)
        for (auto &v : lw) v = urand() < 0.05 ? -INFINITY : log(0.05 + urand());
    if (c.f32_model) /* the values the kernel reads */
        for (auto *p : {&mu, &sp})
            for (auto &v : *p) v = (double)(float)v;
    /* frames, standardised; x stored [B, N, J] or [B, J, N] */
    std::vector<double> xv(B * N * J);
    for (auto &v : xv) v = nrand();
    auto x_off = [&](int64_t b, int64_t n, int64_t j) {
        return c.frame_major_x ? b * N * J + j * N + n : b * N * J + n * J + j;
    };
    std::vector<unsigned char> xbytes(B * N * J * 8);
    for (int64_t b = 0; b < B; b++)
        for (int64_t n = 0; n < N; n++)
            for (int64_t j = 0; j < J; j++) {
                double v = xv[b * N * J + n * J + j];
                int64_t o = x_off(b, n, j);
                switch (c.x_dtype) {
                case MAS_FLOAT32: ((float *)xbytes.data())[o] = (float)v; v = (float)v; break;
                case MAS_FLOAT64: ((double *)xbytes.data())[o] = v; break;
                case MAS_FLOAT16: ((uint16_t *)xbytes.data())[o] = to_half_bits((float)v); v = from_half_bits(to_half_bits((float)v)); break;
                default: ((uint16_t *)xbytes.data())[o] = to_bf16_bits((float)v); v = from_bf16_bits(to_bf16_bits((float)v)); break;
                }
                xv[b * N * J + n * J + j] = v; /* what the kernel sees */
            }
    std::vector<int64_t> n_len(B, N), s_len(B, S);
    if (c.lengths)
        for (int64_t b = 0; b < B; b++) {
            n_len[b] = irand(0, N);
            s_len[b] = irand(0, S);
        }

    /* device copies (parameters as float64 arrays, or float32 ones) */
    Dev<double> d_mu(mu.size()), d_sp(sp.size()), d_lw(lw.size());
    Dev<float> d_mu32(mu.size()), d_sp32(sp.size());
    d_mu.put(mu);
    d_sp.put(sp);
    d_mu32.put(std::vector<float>(mu.begin(), mu.end()));
    d_sp32.put(std::vector<float>(sp.begin(), sp.end()));
    d_lw.put(lw);
    Dev<unsigned char> d_x(xbytes.size());
    CUDA_OK(cudaMemcpy(d_x.p, xbytes.data(), xbytes.size(), cudaMemcpyHostToDevice));
    Dev<unsigned char> d_coef(Bp * P * M * es);
    Dev<int64_t> d_off(S + 1), d_nl(B), d_sl(B);
    d_off.put(offsets);
    d_nl.put(n_len);
    d_sl.put(s_len);
    Dev<unsigned char> d_out(B * N * S * es);
    Dev<int32_t> d_best(B * N * S);
    Dev<uint64_t> d_word(1);
    CUDA_OK(cudaMemset(d_word.p, 0xff, 8));

    mas_gauss_params prm;
    memset(&prm, 0, sizeof prm);
    prm.means = {d_mu.p, MAS_FLOAT64, 0, {Bp, M, J}, {M * J, J, 1}};
    prm.spread = {d_sp.p, MAS_FLOAT64, 0, {Bp, M, J}, {M * J, J, 1}};
    if (c.f32_model) {
        prm.means = {d_mu32.p, MAS_FLOAT32, 0, {Bp, M, J}, {M * J, J, 1}};
        prm.spread = {d_sp32.p, MAS_FLOAT32, 0, {Bp, M, J}, {M * J, J, 1}};
    }
    prm.spread_kind = c.log_std ? MAS_SPREAD_LOG_STD : MAS_SPREAD_VARIANCE;
    if (c.weights) prm.log_weights = {d_lw.p, MAS_FLOAT64, 0, {Bp, 1, M}, {M, M, 1}};
    mas_tensor3 coef = {d_coef.p, acc, 0, {Bp, P, M}, {P * M, M, 1}};
    mas_status st = mas_gauss_coef_cuda(&prm, &coef, nullptr, d_word.p);
    CHECK(st == MAS_OK, "coef status %d", (int)st);
    CUDA_OK(cudaDeviceSynchronize());
    CHECK(read_word(d_word.p) == MAS_DEVICE_NO_ERROR, "coef error word set");

    /* the coefficients: the host's gauss_coef.h bits */
    std::vector<unsigned char> coef_h = d_coef.get();
    std::vector<double> cref(Bp * P * M); /* as the accumulator type, widened */
    int64_t coef_bad = 0;
    for (int64_t b = 0; b < Bp; b++)
        for (int64_t k = 0; k < M; k++) {
            double ksum = 0;
            for (int64_t j = 0; j < J; j++) {
                double a, bb, kt;
                mas_gauss_coef_dim(mu[(b * M + k) * J + j], sp[(b * M + k) * J + j], prm.spread_kind, &a, &bb, &kt);
                ksum = ksum + kt;
                cref[(b * P + 1 + j) * M + k] = f64 ? a : (double)(float)a;
                cref[(b * P + 1 + J + j) * M + k] = f64 ? bb : (double)(float)bb;
            }
            double K = mas_gauss_coef_k(c.weights ? lw[b * M + k] : 0.0, ksum);
            cref[(b * P) * M + k] = f64 ? K : (double)(float)K;
        }
    for (int64_t i = 0; i < Bp * P * M; i++) {
        double got = f64 ? ((double *)coef_h.data())[i] : (double)((float *)coef_h.data())[i];
        if (memcmp(&got, &cref[i], 8) != 0 && !(got != got && cref[i] != cref[i])) coef_bad++;
    }
    CHECK(coef_bad == 0, "%lld coefficients differ from the host's bits", (long long)coef_bad);

    /* the call */
    CUDA_OK(cudaMemset(d_out.p, 0xff, d_out.n)); /* NaN poison */
    CUDA_OK(cudaMemset(d_best.p, 0x7f, d_best.n * 4));
    mas_loglik_args a;
    memset(&a, 0, sizeof a);
    a.x = {d_x.p, c.x_dtype, 0, {B, N, J},
           {N * J, c.frame_major_x ? 1 : J, c.frame_major_x ? N : 1}};
    a.coef = coef;
    a.offsets = c.mixture ? d_off.p : nullptr;
    a.n_states = S;
    a.n_len = c.lengths ? d_nl.p : nullptr;
    a.s_len = c.lengths ? d_sl.p : nullptr;
    a.out = {d_out.p, acc, 0, {B, N, S}, {N * S, c.bst ? 1 : S, c.bst ? N : 1}};
    if (c.want_best) a.best = {d_best.p, MAS_INT32, 0, {B, N, S}, {N * S, c.bst ? 1 : S, c.bst ? N : 1}};
    a.flags = c.max_mode ? MAS_LOGLIK_MAX : 0;
    a.precision = c.precision;
    a.mixture_size = c.mixture ? c.uniform : 0;
    const bool tf32 = c.precision != MAS_PRECISION_DEFAULT && !f64;
    st = mas_loglik_cuda(&a, nullptr, 0, nullptr, d_word.p);
    CHECK(st == MAS_OK, "loglik status %d", (int)st);
    CUDA_OK(cudaDeviceSynchronize());
    CHECK(read_word(d_word.p) == MAS_DEVICE_NO_ERROR, "loglik error word set");
    std::vector<unsigned char> out_h = d_out.get();
    std::vector<int32_t> best_h = d_best.get();

    double worst = 0, worst_tc = 0, worst_tc_abs = 0;
    int64_t bad_exact = 0, bad_zero = 0, bad_best = 0, bad_tc = 0;
    for (int64_t b = 0; b < B; b++)
        for (int64_t n = 0; n < N; n++)
            for (int64_t s = 0; s < S; s++) {
                int64_t o = b * N * S + (c.bst ? s * N + n : n * S + s);
                double got = f64 ? ((double *)out_h.data())[o] : (double)((float *)out_h.data())[o];
                int32_t gb = best_h[o];
                bool inside = n < n_len[b] && s < s_len[b];
                if (!inside) {
                    if (got != 0 || (c.want_best && gb != -1)) bad_zero++;
                    continue;
                }
                const int64_t pb = c.per_item ? b : 0;
                const int64_t g0 = c.mixture ? offsets[s] : s, g1 = c.mixture ? offsets[s + 1] : s + 1;
                /* direct float64 reference and the float chain */
                double mx = -INFINITY, chain_best = -INFINITY, mag = 0;
                int64_t arg = g0;
                std::vector<double> refs, chains;
                for (int64_t k = g0; k < g1; k++) {
                    double q = c.weights ? lw[pb * M + k] : 0.0;
                    for (int64_t j = 0; j < J; j++) {
                        double m_ = mu[(pb * M + k) * J + j], s_ = sp[(pb * M + k) * J + j];
                        double var = c.log_std ? exp(2 * s_) : s_;
                        double d = xv[(b * N + n) * J + j] - m_;
                        q -= 0.5 * (log(2 * M_PI * var) + d * d / var);
                    }
                    double m_k = 0; /* sum of |products| of the expansion */
                    for (int64_t j = 0; j < J; j++) {
                        double xj = xv[(b * N + n) * J + j];
                        m_k += fabs(xj * cref[(pb * P + 1 + j) * M + k]) +
                               fabs(xj * xj * cref[(pb * P + 1 + J + j) * M + k]);
                    }
                    mag = fmax(mag, m_k);
                    refs.push_back(q);
                    if (q > mx) mx = q;
                    /* the chain */
                    double ch;
                    if (f64) {
                        double acc_d = cref[(pb * P) * M + k];
                        for (int64_t j = 0; j < J; j++)
                            acc_d = fma(xv[(b * N + n) * J + j], cref[(pb * P + 1 + j) * M + k], acc_d);
                        for (int64_t j = 0; j < J; j++) {
                            double xx = xv[(b * N + n) * J + j] * xv[(b * N + n) * J + j];
                            acc_d = fma(xx, cref[(pb * P + 1 + J + j) * M + k], acc_d);
                        }
                        ch = acc_d;
                    } else {
                        float acc_f = (float)cref[(pb * P) * M + k];
                        for (int64_t j = 0; j < J; j++)
                            acc_f = fmaf((float)xv[(b * N + n) * J + j], (float)cref[(pb * P + 1 + j) * M + k], acc_f);
                        for (int64_t j = 0; j < J; j++) {
                            float xf = (float)xv[(b * N + n) * J + j];
                            acc_f = fmaf(xf * xf, (float)cref[(pb * P + 1 + J + j) * M + k], acc_f);
                        }
                        ch = acc_f;
                    }
                    chains.push_back(ch);
                    if (ch > chain_best) {
                        chain_best = ch;
                        arg = k;
                    }
                }
                double ref;
                if (c.max_mode) ref = mx;
                else if (mx == -INFINITY) ref = -INFINITY;
                else {
                    double sum = 0;
                    for (double q : refs) sum += exp(q - mx);
                    ref = mx + log(sum);
                }
                if (tf32) {
                    /* operands rounded to 10 bits: each product off by at most 2^-10 relative */
                    const double err = fabs(got - ref), bound = 1.2e-3 * mag + 1e-4 * fabs(ref) + 1e-4;
                    if (ref == -INFINITY ? got != -INFINITY : !(err <= bound)) bad_tc++;
                    if (ref != -INFINITY) {
                        worst_tc_abs = fmax(worst_tc_abs, err);
                        worst_tc = fmax(worst_tc, err / fmax(1.0, fabs(ref)));
                    }
                    continue;
                }
                if (g1 - g0 == 1 || c.max_mode) {
                    /* one Gaussian, or the max: the chain's bits exactly */
                    if (memcmp(&got, &chain_best, 8) != 0) bad_exact++;
                } else if (ref == -INFINITY) {
                    if (got != -INFINITY) bad_exact++;
                } else {
                    double err = fabs(got - ref) / fmax(1.0, fabs(ref));
                    if (!(err <= worst)) worst = err; /* NaN too */
                }
                if (c.want_best && gb != (int32_t)arg) bad_best++;
            }
    CHECK(!(worst > (f64 ? 1e-10 : 1e-4)), "worst relative error %g", worst);
    CHECK(bad_exact == 0, "%lld cells differ from the fma chain's bits", (long long)bad_exact);
    CHECK(bad_zero == 0, "%lld cells outside the lengths not 0 / -1", (long long)bad_zero);
    CHECK(bad_best == 0, "%lld best indices differ", (long long)bad_best);
    CHECK(bad_tc == 0, "%lld TF32 cells beyond the error bound", (long long)bad_tc);
    if (tf32) g_tf32_worst = fmax(g_tf32_worst, worst_tc), g_tf32_worst_abs = fmax(g_tf32_worst_abs, worst_tc_abs);
}

/* Value errors land in the error word; the call itself returns MAS_OK. */
static void error_cases() {
    snprintf(g_case, sizeof g_case, "errors");
    const int64_t M = 6, J = 3, P = 7, N = 5;
    std::vector<double> mu(M * J, 0.1), sp(M * J, 1.0);
    sp[2 * J + 1] = -1.0; /* Gaussian 2: variance <= 0 */
    Dev<double> d_mu(mu.size()), d_sp(sp.size());
    d_mu.put(mu);
    d_sp.put(sp);
    Dev<float> d_coef(P * M), d_x(N * J), d_out(N * 3);
    Dev<uint64_t> d_word(1);
    CUDA_OK(cudaMemset(d_word.p, 0xff, 8));
    mas_gauss_params prm;
    memset(&prm, 0, sizeof prm);
    prm.means = {d_mu.p, MAS_FLOAT64, 0, {1, M, J}, {M * J, J, 1}};
    prm.spread = {d_sp.p, MAS_FLOAT64, 0, {1, M, J}, {M * J, J, 1}};
    mas_tensor3 coef = {d_coef.p, MAS_FLOAT32, 0, {1, P, M}, {P * M, M, 1}};
    CHECK(mas_gauss_coef_cuda(&prm, &coef, nullptr, d_word.p) == MAS_OK, "status");
    CUDA_OK(cudaDeviceSynchronize());
    mas_error e;
    mas_decode_device_error(read_word(d_word.p), &e);
    CHECK(e.status == MAS_ERR_BAD_MODEL && e.item == 2, "bad model: status %d item %lld", e.status, (long long)e.item);
    /* host-checked shapes */
    mas_tensor3 bad = coef;
    bad.dim[1] = P + 2;
    CHECK(mas_gauss_coef_cuda(&prm, &bad, nullptr, d_word.p) == MAS_ERR_BAD_SHAPE, "coef shape");
    /* offsets that do not rise, and lengths beyond the array */
    std::vector<float> xs(N * J, 0.5f);
    d_x.put(xs);
    std::vector<int64_t> off = {0, 3, 3, M};
    Dev<int64_t> d_off(4), d_nl(1);
    d_off.put(off);
    mas_loglik_args a;
    memset(&a, 0, sizeof a);
    a.x = {d_x.p, MAS_FLOAT32, 0, {1, N, J}, {N * J, J, 1}};
    a.coef = coef;
    a.offsets = d_off.p;
    a.n_states = 3;
    a.out = {d_out.p, MAS_FLOAT32, 0, {1, N, 3}, {N * 3, 3, 1}};
    CUDA_OK(cudaMemset(d_word.p, 0xff, 8));
    CHECK(mas_loglik_cuda(&a, nullptr, 0, nullptr, d_word.p) == MAS_OK, "status");
    CUDA_OK(cudaDeviceSynchronize());
    mas_decode_device_error(read_word(d_word.p), &e);
    CHECK(e.status == MAS_ERR_BAD_ARGUMENT && e.item == -1, "offsets: status %d item %lld", e.status, (long long)e.item);
    off[2] = 4;
    d_off.put(off);
    std::vector<int64_t> nl = {N + 1};
    d_nl.put(nl);
    a.n_len = d_nl.p;
    CUDA_OK(cudaMemset(d_word.p, 0xff, 8));
    CHECK(mas_loglik_cuda(&a, nullptr, 0, nullptr, d_word.p) == MAS_OK, "status");
    CUDA_OK(cudaDeviceSynchronize());
    mas_decode_device_error(read_word(d_word.p), &e);
    CHECK(e.status == MAS_ERR_BAD_LENGTH && e.item == 0, "length: status %d item %lld", e.status, (long long)e.item);
    a.n_len = nullptr;
    /* a stated mixture size: host-checked against M, kernel-checked against
     * the offsets, on both paths */
    a.mixture_size = 4;
    CHECK(mas_loglik_cuda(&a, nullptr, 0, nullptr, d_word.p) == MAS_ERR_BAD_ARGUMENT, "size vs M");
    a.mixture_size = 2; /* M = 6 = 3 x 2, but offsets {0, 3, 4, 6} */
    for (int32_t prec : {MAS_PRECISION_DEFAULT, MAS_PRECISION_TF32}) {
        a.precision = prec;
        CUDA_OK(cudaMemset(d_word.p, 0xff, 8));
        CHECK(mas_loglik_cuda(&a, nullptr, 0, nullptr, d_word.p) == MAS_OK, "status");
        CUDA_OK(cudaDeviceSynchronize());
        mas_decode_device_error(read_word(d_word.p), &e);
        CHECK(e.status == MAS_ERR_BAD_ARGUMENT, "size vs offsets (precision %d): status %d", prec, e.status);
    }
    a.precision = MAS_PRECISION_DEFAULT;
    a.mixture_size = 0;
    a.coef.dtype = MAS_FLOAT64;
    CHECK(mas_loglik_cuda(&a, nullptr, 0, nullptr, d_word.p) == MAS_ERR_BAD_DTYPE, "coef dtype");
    a.coef.dtype = MAS_FLOAT32;
    a.out.dim[2] = 4;
    CHECK(mas_loglik_cuda(&a, nullptr, 0, nullptr, d_word.p) == MAS_ERR_BAD_SHAPE, "out shape");
}

/* The coefficient kernel's tiles (coef_tile, lib/cuda/coef_launch.h): 16
 * where tiles of 32 fall unevenly on the multiprocessors (B=32 T=150 on
 * 132: 160 tiles, two on 28 of them), 32 where they fall evenly (T=256,
 * T=512) and for a large model on any device. Host arithmetic: runs
 * without a GPU too. */
static void coef_tiles() {
    snprintf(g_case, sizeof g_case, "coefficient tiles");
    const int h200 = 132, sm86 = 84;
    CHECK(mas_cuda::coef_tile(32, 150, h200) == 16, "B=32 T=150 on 132: tiles of 16 expected");
    CHECK(mas_cuda::coef_tile(32, 256, h200) == 32, "B=32 T=256 on 132: tiles of 32 expected");
    CHECK(mas_cuda::coef_tile(32, 512, h200) == 32, "B=32 T=512 on 132: tiles of 32 expected");
    CHECK(mas_cuda::coef_tile(1, 5, h200) == 16, "one short item: tiles of 16 expected");
    CHECK(mas_cuda::coef_tile(1, 100000, h200) == 32 && mas_cuda::coef_tile(1, 100000, sm86) == 32,
          "100000 Gaussians: tiles of 32 expected");
}

int main(int argc, char **argv) {
    bool small = false;
    coef_tiles();
    if (!test_start(argc, argv, &small)) return g_failures ? 1 : 0;
    error_cases();
    const int32_t dtypes[4] = {MAS_FLOAT32, MAS_FLOAT64, MAS_FLOAT16, MAS_BFLOAT16};
    const int rounds = small ? 12 : 60;
    for (int r = 0; r < rounds; r++) {
        Case c;
        c.per_item = urand() < 0.4;
        c.mixture = !c.per_item && urand() < 0.7;
        c.B = c.per_item ? irand(1, 4) : irand(1, 2);
        c.N = irand(1, small ? 40 : 300);
        c.J = irand(1, small ? 8 : (urand() < 0.2 ? 200 : 40));
        c.n_states = irand(1, small ? 20 : 150);
        c.M = c.mixture ? c.n_states + irand(0, small ? 30 : 500) : c.n_states;
        c.log_std = urand() < 0.5;
        c.weights = urand() < 0.6;
        c.lengths = urand() < 0.5;
        c.max_mode = urand() < 0.25;
        c.want_best = urand() < 0.5;
        c.bst = urand() < 0.5;
        c.frame_major_x = urand() < 0.5;
        c.x_dtype = dtypes[irand(0, 3)];
        c.precision = urand() < 0.25 ? MAS_PRECISION_TF32 : MAS_PRECISION_DEFAULT;
        c.uniform = 0;
        c.f32_model = urand() < 0.5;
        run_case(c);
    }
    /* one Gaussian a state with 2J a multiple of 32 (loglik_items.cuh's
     * 32-row slices; J = 16 also in the small set, which the sanitizers
     * run), float32 log-std models (the coefficient kernel's fast path),
     * uneven lengths */
    for (int r = 0; r < 2; r++) {
        Case g = {2, small ? 70 : 260, 16, 0, small ? 20 : 140, true, false, true, r == 0, true,
                  false, false, r == 1, r == 0, MAS_FLOAT32, MAS_PRECISION_DEFAULT, 0, true};
        g.M = g.n_states;
        run_case(g);
    }
    /* a model of 100000 Gaussians: the coefficient kernel's tiles of 32
     * (coef_tiles), which the other small cases do not take */
    {
        Case g = {1, 4, 3, 100000, 100000, false, false, true, true, false,
                  false, false, false, false, MAS_FLOAT32, MAS_PRECISION_DEFAULT, 0, true};
        run_case(g);
    }
    /* every state G Gaussians, stated: the register log-add kernel
     * (loglik_uniform.cuh) in both precisions, 24 the general kernel; a
     * third of the rounds in the default precision, which covers every
     * size over 21 rounds */
    const int64_t sizes[7] = {8, 16, 32, 64, 128, 256, 24};
    for (int r = 0; r < (small ? 14 : 28); r++) {
        Case c;
        c.uniform = sizes[r % 7];
        c.per_item = false;
        c.mixture = true;
        c.B = irand(1, 2);
        c.N = irand(1, small ? 150 : 300);
        c.J = irand(1, small ? 8 : (urand() < 0.2 ? 120 : 40));
        c.n_states = irand(1, small ? 6 : (c.uniform >= 128 ? 12 : 40));
        c.M = c.n_states * c.uniform;
        c.log_std = urand() < 0.5;
        c.weights = urand() < 0.8;
        c.lengths = urand() < 0.5;
        c.max_mode = false;
        c.want_best = false;
        c.bst = urand() < 0.3;
        c.frame_major_x = urand() < 0.5;
        c.x_dtype = dtypes[r % 4];
        c.precision = r % 3 == 0 ? MAS_PRECISION_DEFAULT : (r % 2 ? MAS_PRECISION_BF16 : MAS_PRECISION_TF32);
        c.f32_model = r % 2 == 1;
        run_case(c);
    }
    if (!small) {
        /* shapes of the benchmark rows, smaller: many chunks per state, states over chunks */
        Case c = {1, 256, 36, 64 * 256, 64, false, true, false, true, false, false, true, false, false, MAS_FLOAT32, MAS_PRECISION_DEFAULT, 0};
        run_case(c);
        Case t = {2, 700, 80, 300, 300, true, false, true, false, true, false, false, false, true, MAS_FLOAT32, MAS_PRECISION_DEFAULT, 0, true};
        run_case(t);
        c.precision = t.precision = MAS_PRECISION_TF32;
        run_case(c);
        run_case(t);
        c.uniform = 256; /* the benchmark's GMM: 256 Gaussians every state */
        c.want_best = false;
        run_case(c);
        c.lengths = true;
        run_case(c);
        c.precision = MAS_PRECISION_DEFAULT; /* the same on CUDA cores */
        run_case(c);
        c.lengths = false;
        run_case(c);
        c.uniform = 16; /* and the 5000 x 16 row's size */
        c.n_states = 300;
        c.M = 300 * 16;
        run_case(c);
    }
    printf("TF32: worst error %.3g relative (to max(1, |ref|)), %.3g absolute\n", g_tf32_worst, g_tf32_worst_abs);
    printf("%lld checks, %lld failed\n", (long long)g_checks, (long long)g_failures);
    return g_failures ? 1 : 0;
}
