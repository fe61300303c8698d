/* What the CUDA benchmark programs share: the ceiling their GB/s is read
 * against. */
#ifndef MAS_TESTS_BENCH_COMMON_H
#define MAS_TESTS_BENCH_COMMON_H

#include "cuda_check.h"

/* Device-to-device copy bandwidth (read + write, GB/s): best of 5 copies of
 * 2 GiB after one warm-up. */
static double copy_bandwidth(void) {
    size_t bytes = (size_t)1 << 31;
    void *a, *b;
    CUDA_OK(cudaMalloc(&a, bytes));
    CUDA_OK(cudaMalloc(&b, bytes));
    CUDA_OK(cudaMemset(a, 1, bytes));
    cudaEvent_t e0, e1;
    CUDA_OK(cudaEventCreate(&e0));
    CUDA_OK(cudaEventCreate(&e1));
    float best = 1e30f;
    for (int r = 0; r < 6; r++) {
        CUDA_OK(cudaEventRecord(e0));
        CUDA_OK(cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice));
        CUDA_OK(cudaEventRecord(e1));
        CUDA_OK(cudaEventSynchronize(e1));
        float ms;
        CUDA_OK(cudaEventElapsedTime(&ms, e0, e1));
        if (r > 0 && ms < best) best = ms;
    }
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    cudaFree(a);
    cudaFree(b);
    return 2.0 * bytes / (best * 1e-3) / 1e9;
}

#endif
