/* Lab (session 23): where a tile's cycles go in the fused forward's split
 * kernel (64-token slabs, a sweep warp of its own), from the stamps that
 * bench/lab/fused_stamps.patch adds (clock64 around the sweep warp's and
 * the compute warps' work of each tile and around each tile's barrier).
 *
 * Device: run(command="bash bench/lab/fused_stamps.sh"), which builds
 * libmas.a with the patch in a copy of the tree and this driver against
 * it; `fused_stamps [B T S]` (default 32 150 800) runs both precisions.
 * Prints, a tile and averaged over the blocks of 20 calls: the sweep warp's
 * busy cycles, warp 1's (a compute warp on its own scheduler), warp 4's
 * (scheduler 0, the sweep warp's, in the float32 form; idle in TF32), the
 * tile period (to the barrier's end), and each block's set-up before its
 * first tile; also the wall a call (CUDA events). */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <random>
#include <vector>

#include "mas.h"

extern "C" int mas_lab_fused_stamps(unsigned long long *out);

static mas_tensor3 t3(void *p, mas_dtype dt, int64_t d0, int64_t d1, int64_t d2, int64_t s0,
                      int64_t s1, int64_t s2) {
    mas_tensor3 t;
    memset(&t, 0, sizeof t);
    t.data = p;
    t.dtype = dt;
    t.dim[0] = d0;
    t.dim[1] = d1;
    t.dim[2] = d2;
    t.stride[0] = s0;
    t.stride[1] = s1;
    t.stride[2] = s2;
    return t;
}

#define CK(x)                                                                                    \
    do {                                                                                         \
        cudaError_t e_ = (x);                                                                    \
        if (e_ != cudaSuccess) {                                                                 \
            fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_));                             \
            return 1;                                                                            \
        }                                                                                        \
    } while (0)

int main(int argc, char **argv) {
    const int64_t B = argc > 3 ? atoll(argv[1]) : 32, T = argc > 3 ? atoll(argv[2]) : 150,
                  S = argc > 3 ? atoll(argv[3]) : 800, J = 80;
    std::mt19937 rng(0);
    std::normal_distribution<float> nd(0.f, 1.f);
    /* Glow-TTS's layouts: z [B, J, S], mean and log_std [B, J, T] */
    std::vector<float> z((size_t)(B * J * S)), m((size_t)(B * J * T)), l((size_t)(B * J * T));
    for (auto &v : z) v = nd(rng);
    for (auto &v : m) v = nd(rng);
    for (auto &v : l) v = 0.3f * nd(rng);
    std::vector<int64_t> xl((size_t)B, T), yl((size_t)B, S);
    float *dz, *dm, *dl, *dscore;
    int64_t *dx, *dy;
    int32_t *ddur, *didx;
    CK(cudaMalloc(&dz, z.size() * 4));
    CK(cudaMalloc(&dm, m.size() * 4));
    CK(cudaMalloc(&dl, l.size() * 4));
    CK(cudaMalloc(&dx, B * 8));
    CK(cudaMalloc(&dy, B * 8));
    CK(cudaMalloc(&ddur, B * T * 4));
    CK(cudaMalloc(&didx, B * S * 4));
    CK(cudaMalloc(&dscore, B * 4));
    CK(cudaMemcpy(dz, z.data(), z.size() * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dm, m.data(), m.size() * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dl, l.data(), l.size() * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dx, xl.data(), B * 8, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dy, yl.data(), B * 8, cudaMemcpyHostToDevice));
    int clock_khz = 0;
    CK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0));
    for (int prec = 0; prec < 2; prec++) {
        mas_gauss_align_args a;
        memset(&a, 0, sizeof a);
        a.x = t3(dz, MAS_FLOAT32, B, S, J, J * S, 1, S);
        a.params.means = t3(dm, MAS_FLOAT32, B, T, J, J * T, 1, T);
        a.params.spread = t3(dl, MAS_FLOAT32, B, T, J, J * T, 1, T);
        a.params.spread_kind = MAS_SPREAD_LOG_STD;
        a.x_len = dx;
        a.y_len = dy;
        a.precision = prec ? MAS_PRECISION_TF32 : MAS_PRECISION_DEFAULT;
        mas_hard_outputs o;
        memset(&o, 0, sizeof o);
        o.durations = ddur;
        o.durations_stride = T;
        o.indices = didx;
        o.indices_stride = S;
        o.score = dscore;
        const size_t ws = mas_align_gaussian_cuda_workspace_size(&a);
        void *w;
        uint64_t *word;
        CK(cudaMalloc(&w, ws));
        CK(cudaMalloc(&word, 8));
        CK(cudaMemset(word, 0xff, 8));
        const int calls = 20;
        unsigned long long st[16];
        for (int k = 0; k < 5; k++) mas_align_gaussian_cuda(&a, &o, w, ws, nullptr, word);
        if (mas_lab_fused_stamps(st)) return 1;
        cudaEvent_t e0, e1;
        CK(cudaEventCreate(&e0));
        CK(cudaEventCreate(&e1));
        CK(cudaEventRecord(e0));
        for (int k = 0; k < calls; k++) {
            const mas_status s = mas_align_gaussian_cuda(&a, &o, w, ws, nullptr, word);
            if (s != MAS_OK) {
                fprintf(stderr, "call: %s\n", mas_status_string(s));
                return 1;
            }
        }
        CK(cudaEventRecord(e1));
        CK(cudaEventSynchronize(e1));
        float ms = 0;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        if (mas_lab_fused_stamps(st)) return 1;
        const double tiles = (double)st[4], blocks = (double)st[5];
        printf("B=%lld T=%lld S=%lld %s: %.4f ms a call; %llu blocks, %.1f tiles a block "
               "(cycles a tile; clock %d MHz)\n",
               (long long)B, (long long)T, (long long)S, prec ? "tf32" : "float32", ms / calls,
               (unsigned long long)(blocks / calls), tiles / blocks, clock_khz / 1000);
        printf("  sweep warp %.0f | warp 1 %.0f | warp 4 %.0f | period %.0f | set-up a block %.0f\n",
               st[0] / tiles, st[1] / tiles, st[2] / tiles, st[3] / tiles, st[6] / blocks);
        CK(cudaFree(w));
        CK(cudaFree(word));
    }
    return 0;
}
