/* Benchmark of the CUDA likelihood kernel (mas.h section 6) at the shapes of
 * the likelihood issue: GPU time per call between CUDA events (median of
 * many, after warm-up), the multiply-adds as TFLOP/s against the device's
 * FP32 peak (SMs x 128 lanes x 2 x clock), the output's bytes as GB/s against
 * the measured copy bandwidth, and the real-time factor at 100 frames/s.
 *   bench_likelihood_cuda [--quick] */
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <vector>

#include "bench_common.h"
#include "mas.h"

__global__ void fill_normal(float *p, int64_t n, uint64_t seed) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        uint64_t z = (uint64_t)i * 0x9E3779B97F4A7C15ull + seed;
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        z ^= z >> 31;
        float u1 = ((z >> 40) + 1) * (1.0f / 16777217.0f), u2 = ((z >> 16) & 0xffffff) * (1.0f / 16777216.0f);
        p[i] = sqrtf(-2.0f * logf(u1)) * cosf(6.2831853f * u2);
    }
}

static float *normal(int64_t n, uint64_t seed) {
    float *p;
    CUDA_OK(cudaMalloc(&p, n * sizeof(float)));
    fill_normal<<<1024, 256>>>(p, n, seed);
    CUDA_OK(cudaGetLastError());
    return p;
}

struct Row {
    const char *name;
    int64_t B, N, J, states, per_state; /* per_state 1 and per-item: TTS */
    bool per_item;
    int32_t precision;
};

static double peak_fp32_tflops() {
    cudaDeviceProp p;
    CUDA_OK(cudaGetDeviceProperties(&p, 0));
    int clock_khz = 0;
    cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0);
    return (double)p.multiProcessorCount * 128 * 2 * clock_khz * 1e3 / 1e12;
}

int main(int argc, char **argv) {
    if (!bench_has_device()) return 0;
    bool quick = argc > 1 && !strcmp(argv[1], "--quick");
    const double copy = copy_bandwidth();
    bench_print_device(copy);
    const double peak = peak_fp32_tflops();
    printf("FP32 peak (CUDA cores, boost clock): %.1f TFLOP/s\n", peak);
    const Row rows[] = {
        {"GMM 5000x256 J=36 N=256", 1, 256, 36, 5000, 256, false, MAS_PRECISION_DEFAULT},
        {"GMM 5000x16 J=36 N=256", 1, 256, 36, 5000, 16, false, MAS_PRECISION_DEFAULT},
        {"Glow-TTS B=32 T=512 S=2048 D=80", 32, 2048, 80, 512, 1, true, MAS_PRECISION_DEFAULT},
        {"Glow-TTS B=32 T=150 S=800 D=80", 32, 800, 80, 150, 1, true, MAS_PRECISION_DEFAULT},
        {"GMM 5000x256 J=36 N=256, TF32", 1, 256, 36, 5000, 256, false, MAS_PRECISION_TF32},
        {"GMM 5000x16 J=36 N=256, TF32", 1, 256, 36, 5000, 16, false, MAS_PRECISION_TF32},
        {"Glow-TTS B=32 T=512 S=2048 D=80, TF32", 32, 2048, 80, 512, 1, true, MAS_PRECISION_TF32},
    };
    printf("\n| work | ms | TFLOP/s | of peak | out GB/s | note |\n|---|---|---|---|---|---|\n");
    for (const Row &r : rows) {
        const int64_t M = r.states * r.per_state, P = 2 * r.J + 1, Bp = r.per_item ? r.B : 1;
        float *mu = normal(Bp * M * r.J, 1), *ls = normal(Bp * M * r.J, 2), *x = normal(r.B * r.N * r.J, 3);
        /* log-std around 0 (variances near 1) */
        float *coef, *out;
        CUDA_OK(cudaMalloc(&coef, Bp * P * M * sizeof(float)));
        CUDA_OK(cudaMalloc(&out, r.B * r.N * r.states * sizeof(float)));
        int64_t *offsets = nullptr;
        if (r.per_state > 1) {
            std::vector<int64_t> off(r.states + 1);
            for (int64_t s = 0; s <= r.states; s++) off[s] = s * r.per_state;
            CUDA_OK(cudaMalloc(&offsets, off.size() * 8));
            CUDA_OK(cudaMemcpy(offsets, off.data(), off.size() * 8, cudaMemcpyHostToDevice));
        }
        mas_gauss_params prm;
        memset(&prm, 0, sizeof prm);
        /* TTS tensors are channel-first: mean [B, D, T] seen as [B, T, D]; z [B, D, S] as [B, S, D] */
        if (r.per_item) {
            prm.means = {mu, MAS_FLOAT32, 0, {Bp, M, r.J}, {M * r.J, 1, M}};
            prm.spread = {ls, MAS_FLOAT32, 0, {Bp, M, r.J}, {M * r.J, 1, M}};
        } else {
            prm.means = {mu, MAS_FLOAT32, 0, {Bp, M, r.J}, {M * r.J, r.J, 1}};
            prm.spread = {ls, MAS_FLOAT32, 0, {Bp, M, r.J}, {M * r.J, r.J, 1}};
        }
        prm.spread_kind = MAS_SPREAD_LOG_STD;
        mas_tensor3 ct = {coef, MAS_FLOAT32, 0, {Bp, P, M}, {P * M, M, 1}};
        /* scale the log-std down so that variances stay near 1 */
        CUDA_OK(cudaMemset(ls, 0, Bp * M * r.J * sizeof(float)));
        if (mas_gauss_coef_cuda(&prm, &ct, nullptr, nullptr) != MAS_OK) {
            printf("coef failed\n");
            return 1;
        }
        mas_loglik_args a;
        memset(&a, 0, sizeof a);
        if (r.per_item) {
            a.x = {x, MAS_FLOAT32, 0, {r.B, r.N, r.J}, {r.N * r.J, 1, r.N}};
            /* out [B, T, S] ("bts"): frames contiguous */
            a.out = {out, MAS_FLOAT32, 0, {r.B, r.N, r.states}, {r.N * r.states, 1, r.N}};
        } else {
            a.x = {x, MAS_FLOAT32, 0, {r.B, r.N, r.J}, {r.N * r.J, r.J, 1}};
            a.out = {out, MAS_FLOAT32, 0, {r.B, r.N, r.states}, {r.N * r.states, r.states, 1}};
        }
        a.coef = ct;
        a.offsets = offsets;
        a.n_states = r.states;
        a.precision = r.precision;
        cudaEvent_t e0, e1;
        CUDA_OK(cudaEventCreate(&e0));
        CUDA_OK(cudaEventCreate(&e1));
        std::vector<float> ms;
        const int reps = quick ? 5 : 25;
        for (int k = 0; k < reps + 3; k++) {
            CUDA_OK(cudaEventRecord(e0));
            mas_status st = mas_loglik_cuda(&a, nullptr, 0, nullptr, nullptr);
            CUDA_OK(cudaEventRecord(e1));
            CUDA_OK(cudaEventSynchronize(e1));
            if (st != MAS_OK) {
                printf("loglik failed %d\n", (int)st);
                return 1;
            }
            float t;
            CUDA_OK(cudaEventElapsedTime(&t, e0, e1));
            if (k >= 3) ms.push_back(t);
        }
        std::sort(ms.begin(), ms.end());
        const double med = ms[ms.size() / 2];
        const double flop = 2.0 * r.B * r.N * M * (double)(P - 1);
        const double tf = flop / (med * 1e-3) / 1e12;
        const double gbs = (double)r.B * r.N * r.states * 4 / (med * 1e-3) / 1e9;
        char note[96] = "";
        if (!r.per_item) snprintf(note, sizeof note, "real-time factor %.4f (100 frames/s)", med * 1e-3 / (r.N / 100.0));
        printf("| %s | %.3f | %.1f | %.0f%% | %.0f (copy %.0f) | %s |\n", r.name, med, tf, 100 * tf / peak, gbs, copy, note);
        cudaFree(mu);
        cudaFree(ls);
        cudaFree(x);
        cudaFree(coef);
        cudaFree(out);
        cudaFree(offsets);
        cudaEventDestroy(e0);
        cudaEventDestroy(e1);
    }
    return 0;
}
