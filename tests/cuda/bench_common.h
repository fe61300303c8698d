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

/* True when there is a device to time on; otherwise says so (the program
 * then ends with status 0, as the GPU tests skip). */
static bool bench_has_device(void) {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
        printf("skipped: no CUDA device\n");
        return false;
    }
    return true;
}

/* The table's header line: device 0 and the copy ceiling. */
static void bench_print_device(double copy_gbs) {
    cudaDeviceProp p;
    CUDA_OK(cudaGetDeviceProperties(&p, 0));
    printf("device: %s, %d SMs; device-to-device copy %.0f GB/s (read + write)\n", p.name,
           p.multiProcessorCount, copy_gbs);
}

#endif
