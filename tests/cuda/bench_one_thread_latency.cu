/* One thread's dependent chains, timed with clock64: the latency lab behind
 * hard_small's backtrack walk (notes-gpu.md, 2026-11-27 session 7). Each row
 * is a loop of 256 iterations whose body is one dependent chain; cycles per
 * iteration include the loop's own branch. What it showed on the H100: two
 * dependent ALU ops and the back edge ~31 cycles, a shared-load chase ~36,
 * FLO ~9 more than an IMAD, DADD as much as FLO, and a predicated-off shared
 * load still holds its consumer ~40 cycles.
 * Build and run (GPU machine):
 *   build/bench_one_thread_latency (built with the CUDA tests), or
 *   nvcc -O2 -arch=sm_90 tests/cuda/bench_one_thread_latency.cu -o /tmp/lat && /tmp/lat */
#include <cstdint>
#include <cstdio>

__device__ __forceinline__ uint32_t lds(uint32_t a) {
    uint32_t v;
    asm volatile("ld.shared.u32 %0, [%1];" : "=r"(v) : "r"(a));
    return v;
}

/* leading zeros by the double unit (2^52 + v, 2^52 subtracted, exponent) */
__device__ __forceinline__ int dclz(uint32_t v) {
    const double d = __hiloint2double(0x43300000, (int)v) - 4503599627370496.0;
    return 1054 - (__double2hiint(d) >> 20);
}

constexpr int kRows = 10;

__global__ void lab(long long *cycles, uint32_t *sink, int n, uint32_t seed) {
    __shared__ uint32_t sm[4096];
    for (int i = threadIdx.x; i < 4096; i += blockDim.x) {
        uint32_t h = (i * 2654435761u) ^ seed;
        h ^= h >> 13;
        h *= 0x5bd1e995u;
        h ^= h >> 15;
        sm[i] = h | 1u;
    }
    __syncthreads();
    if (threadIdx.x) return;
    const uint32_t base = (uint32_t)__cvta_generic_to_shared(sm);
    long long t0;
    uint32_t x;
    int f, r;
#define ROW(k, init, body, result)                                                                                     \
    init;                                                                                                              \
    t0 = clock64();                                                                                                    \
    _Pragma("unroll 1") for (int i = 0; i < n; ++i) { body; }                                                          \
    cycles[k] = clock64() - t0;                                                                                        \
    sink[k] = (uint32_t)(result);
    ROW(0, x = seed | 1, (x = x + i, x = x ^ (x >> 3)), x)
    ROW(1, x = 0, x = lds(base + 4u * (x & 4095u)), x)
    ROW(2, x = seed | 1, x = (x * 0x9e3779b9u + __clz(x)) | 1u, x)
    ROW(3, x = seed | 1, x = (x * 0x9e3779b9u + dclz(x)) | 1u, x)
    ROW(4, x = seed | 1, x = (x * 0x9e3779b9u + (x >> 7)) | 1u, x)
    ROW(5, x = seed | 1, (x = x * 0x9e3779b9u + 1, x = x == 7u ? lds(base + 4u * (x & 4095u)) : x), x)
    ROW(6, (f = 100000, r = n), {
        const int m = f >> 5;
        uint32_t w = lds(base + 4u * (m & 4095)) & (0xffffffffu >> (~f & 31));
        if (!w) w = 1u;
        f = max(32 * m + 30 - __clz(w), r - 1) - 3;
        --r;
    }, f)
    ROW(7, x = 1, {
        x = x + i;
        x = x ^ (x >> 3);
        asm volatile("st.shared.u32 [%0], %1;" ::"r"(base + 4u * (i & 4095)), "r"(x) : "memory");
    }, x)
    ROW(8, x = seed, x = x > 0x80000000u ? x * 3u : x + 0x12345u, x)
    ROW(9, x = seed | 1, x = (x * 0x9e3779b9u + (uint32_t)(__popc(x))) | 1u, x)
#undef ROW
}

int main() {
    const char *names[kRows] = {"IADD + SHF/LOP pair",      "LDS chase",
                                "FLO + IMAD + IADD + LOP",  "DADD clz + IMAD + IADD + LOP",
                                "IMAD + SHF + IADD + LOP",  "IMAD + IADD, predicated LDS (off)",
                                "plain walk step (LDS, FLO, branch)", "pair + STS",
                                "ISETP + SEL chain",        "POPC + IMAD + IADD + LOP"};
    long long *dc;
    uint32_t *ds;
    if (cudaMalloc(&dc, kRows * sizeof(long long)) != cudaSuccess || cudaMalloc(&ds, kRows * 4) != cudaSuccess) {
        printf("skipped: no CUDA device\n");
        return 0;
    }
    const int n = 256;
    long long h[kRows];
    for (int rep = 0; rep < 2; ++rep) {
        lab<<<1, 128>>>(dc, ds, n, 12345u + rep);
        cudaMemcpy(h, dc, sizeof h, cudaMemcpyDeviceToHost);
        for (int i = 0; i < kRows; ++i) printf("%-38s %7.1f cycles / iteration\n", names[i], (double)h[i] / n);
        printf("--\n");
    }
    return 0;
}
