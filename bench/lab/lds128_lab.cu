/* Lab (session 32): how many shared-memory wavefronts a warp's 16-byte load
 * (LDS.128) takes, by which 16-byte vector each lane reads. Session 31's
 * half-warp grid (bench/lab/half_warp_grid.patch) assumed a wavefront serves
 * a half-warp's distinct vectors up to 128 bytes; ncu of the products lab
 * said otherwise (the grid left the wavefronts of the products unchanged),
 * so this asks the hardware directly, pattern by pattern.
 *
 * Each pattern is one launch: a block of one warp a multiprocessor, lane l
 * loading vector map(l) of a 1 KB shared array (64 vectors; the loop adds 32
 * vectors every other iteration, which moves every lane by 512 bytes and so
 * keeps the banks), ITERS loads through volatile PTX so none is merged.
 * Here:   nvcc -std=c++17 -O3 -arch=sm_90 -Itests/cuda bench/lab/lds128_lab.cu -o LAB
 * Device: bash bench/lab/lds128_ncu.sh LAB (ncu of each launch: wavefronts a load)
 * The program prints the patterns in launch order (name, the 32 vectors). */
#include <cuda_runtime.h>
#include <stdio.h>

#include "cuda_check.h" /* tests/cuda: CUDA_OK */

constexpr int ITERS = 4096;

__global__ void lds128(const int *map, float *out) {
    __shared__ __align__(16) float4 s[64];
    const int lane = threadIdx.x & 31;
    for (int k = threadIdx.x; k < 64; k += blockDim.x) s[k] = make_float4(k, 1.f, 2.f, 3.f);
    __syncthreads();
    const int v = map[lane];
    const unsigned base = (unsigned)__cvta_generic_to_shared(s);
    float a = 0.f;
    for (int i = 0; i < ITERS; i++) {
        const unsigned addr = base + 16u * (unsigned)(v + 32 * (i & 1));
        float x, y, z, w;
        asm volatile("ld.shared.v4.f32 {%0, %1, %2, %3}, [%4];"
                     : "=f"(x), "=f"(y), "=f"(z), "=f"(w)
                     : "r"(addr)
                     : "memory");
        a += x + y + z + w;
    }
    out[blockIdx.x * 32 + lane] = a;
}

struct Pattern {
    const char *name;
    int (*f)(int);
};

/* the fused forward's float32 grids: ct = lane of compute warp 0 */
static const Pattern patterns[] = {
    {"32 distinct, in lane order", [](int l) { return l; }},
    {"all one vector", [](int) { return 0; }},
    {"2 uniform halves (main's frames)", [](int l) { return l >> 4; }},
    {"4 uniform quarters, 4 vectors", [](int l) { return l >> 3; }},
    {"uniform quarters A B A B (session 31's frames)", [](int l) { return (l >> 3) & 1; }},
    {"16 distinct, halves alike (main's tokens)", [](int l) { return l & 15; }},
    {"16 distinct, session 31's tokens", [](int l) { return (l & 7) + ((l >> 4) & 1) * 8; }},
    {"8 distinct, quarters alike", [](int l) { return l & 7; }},
    {"8 distinct, runs of 4 lanes", [](int l) { return l >> 2; }},
    {"16 distinct, pairs of lanes", [](int l) { return l >> 1; }},
    {"4 distinct, each quarter all 4", [](int l) { return l & 3; }},
    {"8 distinct, quarters 0-3 0-3 4-7 4-7 (pairs)", [](int l) { return (l & 3) + (l >> 4) * 4; }},
    {"2 vectors, lanes alternate", [](int l) { return l & 1; }},
    {"32 distinct, quarters' banks crossed", [](int l) { return (l & 7) * 4 + (l >> 3); }},
};

int main() {
    const int n = (int)(sizeof patterns / sizeof patterns[0]);
    int *dmap;
    float *dout;
    CUDA_OK(cudaMalloc(&dmap, 32 * sizeof(int)));
    CUDA_OK(cudaMalloc(&dout, 132 * 32 * sizeof(float)));
    for (int p = 0; p < n; p++) {
        int map[32];
        printf("pattern %d: %s:", p, patterns[p].name);
        for (int l = 0; l < 32; l++) printf(" %d", map[l] = patterns[p].f(l));
        printf("\n");
        CUDA_OK(cudaMemcpy(dmap, map, sizeof map, cudaMemcpyHostToDevice));
        lds128<<<132, 32>>>(dmap, dout);
        CUDA_OK(cudaGetLastError());
        CUDA_OK(cudaDeviceSynchronize());
    }
    CUDA_OK(cudaFree(dmap));
    CUDA_OK(cudaFree(dout));
    return 0;
}
