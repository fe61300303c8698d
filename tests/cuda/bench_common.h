/* What the CUDA benchmark programs share: the ceiling their GB/s is read
 * against, the device check, and the hash their inputs are filled from. */
#ifndef MAS_TESTS_BENCH_COMMON_H
#define MAS_TESTS_BENCH_COMMON_H

#include "cuda_check.h"

/* Device-to-device copy bandwidth (read + write, GB/s): best of 5 copies of
 * 2 GiB after one warm-up. */
static inline double copy_bandwidth(void) {
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
static inline bool bench_has_device(void) {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
        printf("skipped: no CUDA device\n");
        return false;
    }
    return true;
}

/* The table's header line: device 0 and the copy ceiling. */
static inline void bench_print_device(double copy_gbs) {
    cudaDeviceProp p;
    CUDA_OK(cudaGetDeviceProperties(&p, 0));
    printf("device: %s, %d SMs; device-to-device copy %.0f GB/s (read + write)\n", p.name,
           p.multiProcessorCount, copy_gbs);
}

/* A splitmix64-style hash of element k: the inputs' random bits, the same
 * on every run and device. */
static __device__ __forceinline__ unsigned long long bench_hash(size_t k, unsigned long long seed) {
    unsigned long long h = (k + 1) * 0x9E3779B97F4A7C15ull ^ seed;
    h ^= h >> 31;
    h *= 0xBF58476D1CE4E5B9ull;
    h ^= h >> 29;
    return h;
}

#endif
