/* Where the one-block hard MAS kernel's time goes (issue 9's kernel floors):
 * hard_small built with its PHASES stamps (clock64() at each phase and
 * round, each warp's cycles in its chunks' loads and sweeps) at the
 * training shapes, float32 [B, T, S], full lengths. Prints per shape the
 * mean over items of each phase, the sweep's rounds and each warp's busy
 * cycles, when in each round warp 0 and the first copy warp were done
 * (which of them the round's barrier waited for), next to the kernel's
 * event time with and without the stamps.
 * The sample-based reading of ncu's stall reasons misjudged these shares
 * (results/calls-gpu-h100.md, 2026-11-26); this measures them.
 *
 * Usage: bench_small_phases [B T S ...]  (default: the three shapes of
 * issue 9; prints "skipped: no CUDA device" without a GPU). */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mas.h"

#include "cuda/hard_small.cuh"

#include "bench_common.h"
#include "cuda_check.h"

using namespace mas_cuda;

__global__ void fill_value(float *x, size_t n, unsigned long long seed) {
    for (size_t k = blockIdx.x * (size_t)blockDim.x + threadIdx.x; k < n; k += (size_t)gridDim.x * blockDim.x) {
        const unsigned long long h = bench_hash(k, seed);
        x[k] = (float)((double)(h >> 11) * (1.0 / 9007199254740992.0)) * 4.0f - 2.0f;
    }
}

static float time_ms(void (*launch)(const SmallArgs &, int64_t, size_t), const SmallArgs &sa,
                     int64_t B, size_t smem) {
    cudaEvent_t e0, e1;
    CUDA_OK(cudaEventCreate(&e0));
    CUDA_OK(cudaEventCreate(&e1));
    const int calls = 50;
    launch(sa, B, smem);
    CUDA_OK(cudaEventRecord(e0));
    for (int c = 0; c < calls; c++) launch(sa, B, smem);
    CUDA_OK(cudaEventRecord(e1));
    CUDA_OK(cudaEventSynchronize(e1));
    float ms;
    CUDA_OK(cudaEventElapsedTime(&ms, e0, e1));
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    return ms / calls;
}

template <bool PHASES> static void launch(const SmallArgs &sa, int64_t B, size_t smem) {
    const int threads = small_threads(sa.warps);
    hard_small<float, false, false, PHASES><<<(unsigned)B, threads, smem>>>(sa);
    CUDA_OK(cudaGetLastError());
}

static void shape(int64_t B, int64_t T, int64_t S, double clock_ghz, const DeviceInfo &dev) {
    int warps = 0;
    const size_t smem = small_plan(T, S, LOAD_BTS, MAS_FLOAT32, dev, &warps);
    if (!smem) {
        printf("B=%lld T=%lld S=%lld: not a one-block shape\n", (long long)B, (long long)T,
               (long long)S);
        return;
    }
    CUDA_OK(cudaFuncSetAttribute(hard_small<float, false, false, true>,
                                 cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    CUDA_OK(cudaFuncSetAttribute(hard_small<float, false, false, false>,
                                 cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    const size_t n = (size_t)(B * T * S);
    float *v;
    int64_t *len;
    int32_t *dur, *idx;
    float *score;
    unsigned long long *err, *ph;
    CUDA_OK(cudaMalloc((void **)&v, n * 4));
    CUDA_OK(cudaMalloc((void **)&len, (size_t)B * 16));
    CUDA_OK(cudaMalloc((void **)&dur, (size_t)(B * T) * 4));
    CUDA_OK(cudaMalloc((void **)&idx, (size_t)(B * S) * 4));
    CUDA_OK(cudaMalloc((void **)&score, (size_t)B * 4));
    CUDA_OK(cudaMalloc((void **)&err, 8));
    CUDA_OK(cudaMalloc((void **)&ph, (size_t)B * kPhaseSlots * 8));
    fill_value<<<1024, 256>>>(v, n, 12345);
    int64_t *len_h = (int64_t *)malloc((size_t)B * 16);
    for (int64_t b = 0; b < B; b++) {
        len_h[b] = T;
        len_h[B + b] = S;
    }
    CUDA_OK(cudaMemcpy(len, len_h, (size_t)B * 16, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemset(err, 0xff, 8));
    CUDA_OK(cudaMemset(ph, 0, (size_t)B * kPhaseSlots * 8));

    SmallArgs sa = {};
    sa.value = (const unsigned char *)v;
    sa.s0 = T * S;
    sa.s1 = S;
    sa.s2 = 1;
    sa.T = T;
    sa.S = S;
    sa.x_len = len;
    sa.y_len = len + B;
    sa.warps = warps;
    sa.sw = (int)((S + 31) / 32);
    sa.durations = dur;
    sa.durations_stride = T;
    sa.indices = idx;
    sa.indices_stride = S;
    sa.score = score;
    sa.error_word = err;
    sa.phases = ph;
    const float plain = time_ms(launch<false>, sa, B, smem);
    const float stamped = time_ms(launch<true>, sa, B, smem);

    unsigned long long *h = (unsigned long long *)malloc((size_t)B * kPhaseSlots * 8);
    CUDA_OK(cudaMemcpy(h, ph, (size_t)B * kPhaseSlots * 8, cudaMemcpyDeviceToHost));
    double lengths = 0, sweep = 0, backtrack = 0, outputs = 0, total = 0;
    double busy[16] = {0}, load[16] = {0};
    const int rounds = (int)h[kPhRounds];
    const int kept = rounds < kPhaseMaxRounds ? rounds : kPhaseMaxRounds;
    double *round = (double *)calloc((size_t)kept + 1, sizeof(double));
    double *sdone = (double *)calloc((size_t)kept + 1, sizeof(double));
    double *cdone = (double *)calloc((size_t)kept + 1, sizeof(double));
    for (int64_t b = 0; b < B; b++) {
        const unsigned long long *p = h + b * kPhaseSlots;
        lengths += (double)(p[kPhLengths] - p[kPhStart]);
        sweep += (double)(p[kPhSweep] - p[kPhLengths]);
        backtrack += (double)(p[kPhBacktrack] - p[kPhSweep]);
        outputs += (double)(p[kPhEnd] - p[kPhBacktrack]);
        total += (double)(p[kPhEnd] - p[kPhStart]);
        for (int w = 0; w < warps && w < 16; w++) {
            busy[w] += (double)p[kPhSweepW + w];
            load[w] += (double)p[kPhLoadW + w];
        }
        for (int i = 0; i < kept; i++) {
            const unsigned long long next = i + 1 < kept ? p[kPhRound0 + i + 1] : p[kPhSweep];
            round[i] += (double)(next - p[kPhRound0 + i]);
            sdone[i] += (double)(long long)(p[kPhSweepDone0 + i] - p[kPhRound0 + i]);
            cdone[i] += (double)(long long)(p[kPhCopyDone0 + i] - p[kPhRound0 + i]);
        }
    }
    const double k = 1.0 / (double)B, us = 1e-3 / clock_ghz;
    printf("\nB=%lld T=%lld S=%lld: %d sweep warps, %d rounds of 32 steps; kernel %.1f us "
           "(with stamps %.1f us); cycles at %.2f GHz, means over items\n",
           (long long)B, (long long)T, (long long)S, warps, rounds, plain * 1e3, stamped * 1e3,
           clock_ghz);
    printf("| phase | cycles | us | share |\n|---|---|---|---|\n");
    const char *names[4] = {"lengths (start to sweep)", "sweep (rounds)", "status + backtrack",
                            "outputs"};
    const double parts[4] = {lengths, sweep, backtrack, outputs};
    for (int i = 0; i < 4; i++)
        printf("| %s | %.0f | %.2f | %.0f%% |\n", names[i], parts[i] * k, parts[i] * k * us,
               100.0 * parts[i] / total);
    printf("| total (stamps) | %.0f | %.2f | |\n", total * k, total * k * us);
    printf("(the stamps' total over the stamped kernel's event time: %.2f GHz)\n",
           total * k / (stamped * 1e6));
    printf("sweep: %.0f cycles a round, %.1f a step; per warp, cycles in chunk "
           "before their sweep (the round's start) / chunk sweeps / waiting (the rest):\n",
           sweep * k / rounds, sweep * k / rounds / 32);
    for (int w = 0; w < warps && w < 16; w++)
        printf("  warp %d: %.0f / %.0f / %.0f  (%.1f cycles a step in its chunks)\n", w,
               load[w] * k, busy[w] * k, (sweep - load[w] - busy[w]) * k,
               busy[w] * k / ((double)(rounds - 2 * (warps - 1)) * 32));
    printf("rounds (cycles):");
    for (int i = 0; i < kept; i++) printf(" %.0f", round[i] * k);
    printf("\n");
    printf("warp 0 done at (cycles after the round's start):");
    for (int i = 0; i < kept; i++) printf(" %.0f", sdone[i] * k);
    printf("\ncopy warp done at:");
    for (int i = 0; i < kept; i++) printf(" %.0f", cdone[i] * k);
    printf("\n");
    uint64_t word;
    CUDA_OK(cudaMemcpy(&word, err, 8, cudaMemcpyDeviceToHost));
    if (word != MAS_DEVICE_NO_ERROR) printf("device error word %llx\n", (unsigned long long)word);
    free(round);
    free(h);
    free(len_h);
    cudaFree(v);
    cudaFree(len);
    cudaFree(dur);
    cudaFree(idx);
    cudaFree(score);
    cudaFree(err);
    cudaFree(ph);
}

int main(int argc, char **argv) {
    if (!bench_has_device()) return 0;
    DeviceInfo dev;
    if (current_device(&dev) != MAS_OK) return 1;
    int khz = 0;
    CUDA_OK(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, 0));
    const double ghz = khz * 1e-6;
    if (argc >= 4) {
        for (int a = 1; a + 2 < argc; a += 3)
            shape(atoll(argv[a]), atoll(argv[a + 1]), atoll(argv[a + 2]), ghz, dev);
        return 0;
    }
    shape(16, 60, 300, ghz, dev);
    shape(32, 128, 512, ghz, dev);
    shape(32, 150, 800, ghz, dev);
    return 0;
}
