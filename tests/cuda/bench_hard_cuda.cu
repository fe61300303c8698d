/* Benchmark of mas_hard_cuda in the paper's setting: B=32, S=4T, float32
 * standard-normal value, dense float32 path, T = 128..2048; plus durations
 * only at T=2048 and one long item (B=1, T=2048, S=8192).
 *
 * Each row: calls enqueued back to back on one stream over rotating input
 * and output sets (together well above L2), timed with events around each
 * batch; the median batch over the call count. Bytes counted: value read
 * once plus path written once (durations-only: value read once). The copy
 * bandwidth is a device-to-device cudaMemcpy of 2 GiB (read + write).
 *
 * Usage: bench_hard_cuda [--quick]   (prints "skipped: no CUDA device"
 * without a GPU). */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mas.h"

#include "cuda_check.h"
#include "bench_common.h"

__global__ void fill_normal(float *x, size_t n, unsigned long long seed) {
    for (size_t k = blockIdx.x * (size_t)blockDim.x + threadIdx.x; k < n; k += (size_t)gridDim.x * blockDim.x) {
        const unsigned long long h = bench_hash(k, seed);
        float u1 = ((h >> 40) + 1) * (1.0f / 16777217.0f);
        float u2 = ((h >> 16) & 0xffffff) * (1.0f / 16777216.0f);
        x[k] = sqrtf(-2.0f * logf(u1)) * cospif(2.0f * u2);
    }
}

static int cmp_float(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

typedef struct row_result {
    double ms, gbs;
} row_result;

static row_result bench_row(int64_t B, int64_t T, int64_t S, int want_path, int quick) {
    const size_t n = (size_t)(B * T * S);
    const size_t vbytes = n * 4;
    /* Enough sets that value + path of all of them exceed 4x L2 (50 MB). */
    int sets = (int)((200u << 20) / (vbytes * (want_path ? 2 : 1)) + 1);
    if (sets > 16) sets = 16;
    float **v = (float **)calloc(sets, sizeof(float *)), **p = (float **)calloc(sets, sizeof(float *));
    for (int s = 0; s < sets; s++) {
        CUDA_OK(cudaMalloc((void **)&v[s], vbytes));
        fill_normal<<<1024, 256>>>(v[s], n, 1234567ull + s);
        if (want_path) CUDA_OK(cudaMalloc((void **)&p[s], vbytes));
    }
    int64_t *xl_h = (int64_t *)malloc(B * 8), *yl_h = (int64_t *)malloc(B * 8);
    for (int64_t b = 0; b < B; b++) {
        xl_h[b] = T;
        yl_h[b] = S;
    }
    int64_t *xl, *yl;
    CUDA_OK(cudaMalloc((void **)&xl, B * 8));
    CUDA_OK(cudaMalloc((void **)&yl, B * 8));
    CUDA_OK(cudaMemcpy(xl, xl_h, B * 8, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(yl, yl_h, B * 8, cudaMemcpyHostToDevice));
    int32_t *dur;
    CUDA_OK(cudaMalloc((void **)&dur, B * T * 4));
    size_t wss = mas_hard_cuda_workspace_size(B, T, S, MAS_FLOAT32);
    void *ws;
    CUDA_OK(cudaMalloc(&ws, wss));
    uint64_t *err;
    CUDA_OK(cudaMalloc((void **)&err, 8));
    CUDA_OK(cudaMemset(err, 0xff, 8));
    CUDA_OK(cudaDeviceSynchronize());

    cudaStream_t stream;
    CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    int calls = quick ? 5 : 20;
    int batches = quick ? 3 : 7;
    float *times = (float *)malloc(batches * sizeof(float));
    cudaEvent_t e0, e1;
    CUDA_OK(cudaEventCreate(&e0));
    CUDA_OK(cudaEventCreate(&e1));
    for (int batch = -1; batch < batches; batch++) { /* batch -1 warms up */
        CUDA_OK(cudaEventRecord(e0, stream));
        clock_t host0 = clock();
        for (int c = 0; c < calls; c++) {
            int s = c % sets;
            mas_tensor3 value = {v[s], MAS_FLOAT32, 0, {B, T, S}, {T * S, S, 1}};
            mas_hard_outputs out;
            memset(&out, 0, sizeof out);
            if (want_path) out.path = (mas_tensor3){p[s], MAS_FLOAT32, 0, {B, T, S}, {T * S, S, 1}};
            else {
                out.durations = dur;
                out.durations_stride = T;
            }
            mas_status st = mas_hard_cuda(&value, xl, yl, &out, ws, wss, stream, err);
            if (st != MAS_OK) {
                fprintf(stderr, "mas_hard_cuda: %s\n", mas_status_string(st));
                exit(2);
            }
        }
        CUDA_OK(cudaEventRecord(e1, stream));
        double host_us = (double)(clock() - host0) * 1e6 / CLOCKS_PER_SEC / calls;
        CUDA_OK(cudaEventSynchronize(e1));
        if (batch == 0 && getenv("MAS_BENCH_HOST")) printf("  host enqueue %.1f us per call\n", host_us);
        float ms;
        CUDA_OK(cudaEventElapsedTime(&ms, e0, e1));
        if (batch >= 0) times[batch] = ms / calls;
    }
    uint64_t word;
    CUDA_OK(cudaMemcpy(&word, err, 8, cudaMemcpyDeviceToHost));
    if (word != MAS_DEVICE_NO_ERROR) {
        fprintf(stderr, "device error word %llx\n", (unsigned long long)word);
        exit(2);
    }
    qsort(times, batches, sizeof(float), cmp_float);
    row_result r;
    r.ms = times[batches / 2];
    r.gbs = (double)vbytes * (want_path ? 2 : 1) / (r.ms * 1e-3) / 1e9;
    for (int s = 0; s < sets; s++) {
        cudaFree(v[s]);
        if (want_path) cudaFree(p[s]);
    }
    free(v);
    free(p);
    free(xl_h);
    free(yl_h);
    free(times);
    cudaFree(xl);
    cudaFree(yl);
    cudaFree(dur);
    cudaFree(ws);
    cudaFree(err);
    CUDA_OK(cudaStreamDestroy(stream));
    return r;
}

int main(int argc, char **argv) {
    int quick = argc > 1 && !strcmp(argv[1], "--quick");
    /* --one B T S path|durations: a single row, for profilers. */
    int one = argc > 5 && !strcmp(argv[1], "--one");
    if (!bench_has_device()) return 0;
    if (one) {
        row_result r = bench_row(atoll(argv[2]), atoll(argv[3]), atoll(argv[4]),
                                 !strcmp(argv[5], "path"), 1);
        printf("B=%s T=%s S=%s %s: %.4f ms, %.0f GB/s\n", argv[2], argv[3], argv[4], argv[5], r.ms, r.gbs);
        return 0;
    }
    const double copy = copy_bandwidth();
    bench_print_device(copy);
    printf("| case | B | T | S | output | ms | GB/s | of copy | target ms |\n");
    printf("|---|---|---|---|---|---|---|---|---|\n");
    static const int64_t Ts[5] = {128, 256, 512, 1024, 2048};
    static const double targets[5] = {0.025, 0.06, 0.20, 0.80, 3.0};
    for (int k = 0; k < 5; k++) {
        row_result r = bench_row(32, Ts[k], 4 * Ts[k], 1, quick);
        printf("| paper | 32 | %lld | %lld | path f32 | %.4f | %.0f | %.0f%% | %.3f |\n", (long long)Ts[k],
               (long long)(4 * Ts[k]), r.ms, r.gbs, 100.0 * r.gbs / copy, targets[k]);
        fflush(stdout);
    }
    row_result r = bench_row(32, 2048, 8192, 0, quick);
    printf("| durations only | 32 | 2048 | 8192 | durations | %.4f | %.0f | %.0f%% | 1.5 |\n", r.ms, r.gbs,
           100.0 * r.gbs / copy);
    r = bench_row(1, 2048, 8192, 1, quick);
    printf("| one long item | 1 | 2048 | 8192 | path f32 | %.4f | %.0f | %.0f%% | 1.0 |\n", r.ms, r.gbs,
           100.0 * r.gbs / copy);
    return 0;
}
