/* Kernel lab (session 38): the coefficient kernel of the fused Gaussian
 * calls, float32 log-std models (Glow-TTS's), numbered variants each checked
 * bit for bit against mas_gauss_coef_cuda before it is timed. Why: in a loop
 * of align_gaussian calls the coefficient kernel sits between the last
 * call's backtrack and this call's forward (11.2 us of B=32 T=512's ~352,
 * 4.7 of T=150's ~99; session 28's timeline), and its 6.5 M instructions
 * would take ~5 us at the issue rate: ncu had it at 64-68% issue active
 * with 31 warps a multiprocessor (48 registers, 512 blocks of 256), a
 * thread's ten dimensions one float64 chain after another, and a
 * block's second pass waiting for warp 0 to add the first pass's K terms.
 * Variants (v0 is the library):
 *   v1  the library's design restated (G 32, 64 dimensions a pass, one
 *       dimension at a time, two ahead): the lab's own baseline;
 *   v2  all of a Gaussian's dimensions in one pass (J <= 80 fits 20 KB):
 *       no mid-kernel barrier behind the K sums;
 *   v3  v2 with two dimensions side by side a thread (two exp chains);
 *   v4  v2 at 16 Gaussians a block (twice the blocks, 5 dimensions a
 *       thread) with at most 40 registers (6 blocks a multiprocessor);
 *   v5  v4 at 32 registers (8 blocks);
 *   v6  v3 at 16 Gaussians a block;
 *   v7  v2 at 16 Gaussians a block (the compiler's registers);
 *   v8-v12  the dimensions' ordinary cases in one straight block (SPLIT in
 *       coef_body), one, two or four a thread (a dimension out of range
 *       keeps the ordinary case's values where mas_gauss_coef_dim stops
 *       early: the lab's inputs are all in range; bench/lab/coef_split.patch
 *       zeroes them as the library does).
 * Measured once (session 38, H100; results/fused-gpu-h100.md): only v2 was
 * faster (9.5 against 10.2 us at B=32 T=512).
 * Build (here): nvcc -std=c++17 -O3 -arch=sm_90 -Iinclude -Ilib -Itests/c
 *   -Itests/cuda -Ibench/lab bench/lab/coef_lab.cu -cudart shared -Xlinker --allow-shlib-undefined
 *   -Xlinker -rpath='$ORIGIN' -L<dir of a prebuilt_ab.sh libmas.so> -lmas -o coef_lab
 * Run: coef_lab [B T]...  (default: 32 512, 32 150, 16 1024; D = 80) */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

#include "common/gauss_coef.h"
#include "cuda_check.h"
#include "mas.h"
#include "test_common.h"
#include "fused_test_data.h"
#include "glow_inputs.h" /* loop_ms */

namespace {

struct CoefIn {
    const float *mean, *log_std; /* [B, J, T]: tokens contiguous */
    int64_t B, T, J;
    float *coef; /* [B, 2J+1, T] */
    unsigned *bad;
};

/* mas_gauss_coef_dim_log_std_f32's ordinary case alone (no branch): the
 * caller has checked the range and passes zeros for a dimension out of it */
__device__ __forceinline__ bool coef_ordinary(float mu, float log_std, double *a, double *b,
                                              double *k_term) {
    const double m = (double)mu, ls = (double)log_std;
    const double inv = mas_det_exp_ordinary(mas_gauss_log_std_arg(ls));
    *a = DM_MUL(m, inv);
    *b = DM_MUL(-0.5, inv);
    *k_term = DM_ADD(DM_ADD(MAS_LOG_2PI, DM_MUL(2.0, ls)), DM_MUL(DM_MUL(m, m), inv));
    return *a - *a == 0 && *k_term - *k_term == 0;
}

/* G Gaussians a block (lane l: Gaussian l % G), DIMS dimensions a pass, IL
 * dimensions side by side a thread; SPLIT: the IL dimensions' ordinary
 * cases computed in one straight block (the range test's branch kept each
 * exp chain in a block of its own, which ptxas then ran one after the
 * other), the rare others after it */
template <int G, int DIMS, int IL, bool SPLIT = false>
__device__ __forceinline__ void coef_body(const CoefIn p) {
    constexpr int STEP = 256 / G;
    __shared__ double park[DIMS][G];
    __shared__ int good[G];
    const int g = threadIdx.x % G, first = threadIdx.x / G;
    const bool summer = threadIdx.x < G;
    const int64_t tiles = (p.T + G - 1) / G, J = p.J;
    for (int64_t tile = blockIdx.x; tile < p.B * tiles; tile += gridDim.x) {
        const int64_t b = tile / tiles, k = tile % tiles * G + g;
        const bool live = k < p.T;
        float *out = p.coef + (b * (2 * J + 1)) * p.T + k;
        const float *mu_p = p.mean + b * J * p.T + k, *ls_p = p.log_std + b * J * p.T + k;
        if (summer) good[g] = 1;
        double k_sum = 0;
        for (int64_t j0 = 0; j0 < J; j0 += DIMS) {
            const int nj = J - j0 < DIMS ? (int)(J - j0) : DIMS;
            __syncthreads();
            float mu_n[IL], ls_n[IL];
#pragma unroll
            for (int i = 0; i < IL; i++) {
                const int q = first + i * STEP;
                mu_n[i] = q < nj && live ? __ldg(mu_p + (j0 + q) * p.T) : 0.f;
                ls_n[i] = q < nj && live ? __ldg(ls_p + (j0 + q) * p.T) : 0.f;
            }
            for (int q = first; q < nj && live; q += IL * STEP) {
                float mu[IL], ls[IL];
#pragma unroll
                for (int i = 0; i < IL; i++) {
                    mu[i] = mu_n[i];
                    ls[i] = ls_n[i];
                    const int qn = q + (IL + i) * STEP;
                    if (qn < nj) {
                        mu_n[i] = __ldg(mu_p + (j0 + qn) * p.T);
                        ls_n[i] = __ldg(ls_p + (j0 + qn) * p.T);
                    }
                }
                double a[IL], bb[IL], kt[IL];
                bool ok[IL];
                if constexpr (SPLIT) {
                    bool in[IL];
#pragma unroll
                    for (int i = 0; i < IL; i++) {
                        in[i] = mu[i] - mu[i] == 0.0f && ls[i] < 340.0f && ls[i] > -340.0f;
                        ok[i] = coef_ordinary(in[i] ? mu[i] : 0.f, in[i] ? ls[i] : 0.f, &a[i], &bb[i],
                                              &kt[i]);
                    }
#pragma unroll
                    for (int i = 0; i < IL; i++)
                        if (!in[i])
                            ok[i] = mas_gauss_coef_dim((double)mu[i], (double)ls[i], MAS_SPREAD_LOG_STD,
                                                       &a[i], &bb[i], &kt[i]);
                } else {
#pragma unroll
                    for (int i = 0; i < IL; i++)
                        ok[i] = mas_gauss_coef_dim_log_std_f32(mu[i], ls[i], &a[i], &bb[i], &kt[i]);
                }
#pragma unroll
                for (int i = 0; i < IL; i++) {
                    const int qi = q + i * STEP;
                    if (i > 0 && qi >= nj) break;
                    park[qi][g] = kt[i];
                    const float ar = (float)a[i], br = (float)bb[i];
                    out[(1 + j0 + qi) * p.T] = ar;
                    out[(1 + J + j0 + qi) * p.T] = br;
                    if (!ok[i] || !mas_gauss_coef_stored_ok_f32(ar, br)) good[g] = 0;
                }
            }
            __syncthreads();
            if (summer && live)
                for (int q = 0; q < nj; q++) k_sum = __dadd_rn(k_sum, park[q][g]);
        }
        __syncthreads();
        if (summer && live) {
            const float kr = (float)mas_gauss_coef_k(0.0, k_sum);
            out[0] = kr;
            if (!good[g] || !mas_gauss_coef_k_ok((double)kr, 0.0)) atomicOr(p.bad, 1u);
        }
    }
}

template <int G, int DIMS, int IL, bool SPLIT = false>
__global__ void __launch_bounds__(256) coef_free(const CoefIn p) {
    coef_body<G, DIMS, IL, SPLIT>(p);
}
template <int G, int DIMS, int IL, int MINB>
__global__ void __launch_bounds__(256, MINB) coef_bound(const CoefIn p) {
    coef_body<G, DIMS, IL>(p);
}

struct Variant {
    const char *name;
    void (*kernel)(const CoefIn);
    int G;
};

const Variant kVariants[] = {
    {"v1 G32 pass64 x1", coef_free<32, 64, 1>, 32},
    {"v2 G32 pass80 x1", coef_free<32, 80, 1>, 32},
    {"v3 G32 pass80 x2", coef_free<32, 80, 2>, 32},
    {"v4 G16 pass80 x1 6/SM", coef_bound<16, 80, 1, 6>, 16},
    {"v5 G16 pass80 x1 8/SM", coef_bound<16, 80, 1, 8>, 16},
    {"v6 G16 pass80 x2", coef_free<16, 80, 2>, 16},
    {"v7 G16 pass80 x1", coef_free<16, 80, 1>, 16},
    {"v8 G32 pass80 x1 split", coef_free<32, 80, 1, true>, 32},
    {"v9 G32 pass80 x2 split", coef_free<32, 80, 2, true>, 32},
    {"v10 G16 pass80 x2 split", coef_free<16, 80, 2, true>, 16},
    {"v11 G32 pass80 x4 split", coef_free<32, 80, 4, true>, 32},
    {"v12 G32 pass64 x2 split", coef_free<32, 64, 2, true>, 32},
};

} // namespace

int main(int argc, char **argv) {
    std::vector<std::pair<int64_t, int64_t>> shapes = {{32, 512}, {32, 150}, {16, 1024}};
    if (argc > 2) {
        shapes.clear();
        for (int i = 1; i + 1 < argc; i += 2) shapes.push_back({atoll(argv[i]), atoll(argv[i + 1])});
    }
    int sms = 0;
    CUDA_OK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    int failed = 0;
    for (const auto &sh : shapes) {
        const int64_t B = sh.first, T = sh.second, J = 80;
        g_rng = 88172645463325252ull;
        std::vector<float> m((size_t)(B * J * T)), l((size_t)(B * J * T));
        for (auto &v : m) v = (float)nrand();
        for (auto &v : l) v = 0.3f * (float)nrand();
        const size_t nc = (size_t)(B * (2 * J + 1) * T);
        DevBuf dm(m.size() * 4), dl(l.size() * 4), ref(nc * 4), got(nc * 4), bad(4), word(8);
        upload(dm, m.data(), m.size() * 4);
        upload(dl, l.data(), l.size() * 4);
        mas_gauss_params prm;
        memset(&prm, 0, sizeof prm);
        prm.means = t3(dm.p, MAS_FLOAT32, B, T, J, J * T, 1, T);
        prm.spread = t3(dl.p, MAS_FLOAT32, B, T, J, J * T, 1, T);
        prm.spread_kind = MAS_SPREAD_LOG_STD;
        const mas_tensor3 cref = t3(ref.p, MAS_FLOAT32, B, 2 * J + 1, T, (2 * J + 1) * T, T, 1);
        CUDA_OK(cudaMemset(word.p, 0xff, 8));
        auto lib = [&]() {
            if (mas_gauss_coef_cuda(&prm, &cref, nullptr, (uint64_t *)word.p) != MAS_OK) exit(1);
        };
        const float t0 = loop_ms(lib, 100, 5);
        std::vector<float> r(nc), o(nc);
        CUDA_OK(cudaMemcpy(r.data(), ref.p, nc * 4, cudaMemcpyDeviceToHost));
        printf("B=%lld T=%lld J=80: v0 library %.2f us a launch\n", (long long)B, (long long)T,
               1e3 * t0);
        const CoefIn in{(const float *)dm.p, (const float *)dl.p, B, T, J, (float *)got.p,
                        (unsigned *)bad.p};
        for (const Variant &v : kVariants) {
            const int64_t tiles = B * ((T + v.G - 1) / v.G), most = (int64_t)sms * 16;
            const unsigned blocks = (unsigned)(tiles < most ? tiles : most);
            CUDA_OK(cudaMemset(got.p, 0, nc * 4));
            CUDA_OK(cudaMemset(bad.p, 0, 4));
            v.kernel<<<blocks, 256>>>(in);
            CUDA_OK(cudaDeviceSynchronize());
            CUDA_OK(cudaMemcpy(o.data(), got.p, nc * 4, cudaMemcpyDeviceToHost));
            unsigned bw = 0;
            CUDA_OK(cudaMemcpy(&bw, bad.p, 4, cudaMemcpyDeviceToHost));
            const bool same = memcmp(o.data(), r.data(), nc * 4) == 0 && bw == 0;
            cudaFuncAttributes fa;
            CUDA_OK(cudaFuncGetAttributes(&fa, v.kernel));
            int per_sm = 0;
            CUDA_OK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, v.kernel, 256, 0));
            const float t = loop_ms([&]() { v.kernel<<<blocks, 256>>>(in); }, 100, 5);
            printf("  %-24s %s %.2f us a launch (%u blocks, %d regs, %d B local, %d a SM)\n", v.name,
                   same ? "same bits" : "DIFFERENT", 1e3 * t, blocks, fa.numRegs,
                   (int)fa.localSizeBytes, per_sm);
            failed += !same;
        }
    }
    printf("%s\n", failed ? "FAILED" : "all variants the same bits as the library");
    return failed != 0;
}
