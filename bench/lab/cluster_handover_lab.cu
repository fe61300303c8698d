/* Lab (session 26, not yet run): what a tile costs to hand from one block of
 * a cluster to another through distributed shared memory, the piece the
 * "help along the ramps" design of notes-gpu.md (session 26) rests on: a
 * helper multiprocessor writes half a slab's tile of cells (64 tokens x 64
 * frames of float, 16 KB) into the helped block's chunk tiles and signals
 * it on the helped block's mbarrier; the helped block's sweep warp reads the
 * tile and signals back that the slot is free. llm.c style: numbered
 * variants, each checked (every element read back against the value the
 * writer stored) before its time counts.
 *
 * A cluster of two blocks, one a multiprocessor (shared memory asked so
 * that two do not fit), every multiprocessor busy as in the fused kernel.
 * Rank 0 is the consumer: warp 0 waits for slot n % 2 full, reads its
 * elements (lane l: l, l + 32, ...), checks them, and arrives on the
 * writer's empty barrier. The writers (WARPS warps of rank 1, or of rank 0
 * itself in the LOCAL variant: the same hand-over within a block, the
 * baseline) wait for the slot empty, store ELEMS floats (4 or 16 bytes a
 * store) through a shared::cluster address, and arrive on the consumer's
 * full barrier (release / acquire at cluster scope).
 *
 * Device: nvcc -std=c++17 -O3 -arch=sm_90 -Iinclude -Ilib -Itests/cuda
 * bench/lab/cluster_handover_lab.cu -o ha/cluster_handover_lab (built here,
 * carried), then ./ha/cluster_handover_lab (< 1 s).
 * Prints a variant a line: cycles a tile at the consumer (from its first
 * full tile to its last, mean over clusters), bytes a cycle, errors. Against
 * it: the products of such a half tile take ~9-10k cycles on a
 * multiprocessor (results/fused-gpu-h100.md, session 25-26), so a hand-over
 * of a few hundred cycles would leave the design's estimate standing. */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

#include <vector>

#include "cuda/hard_backtrack_block.cuh" /* cluster_barrier */
#include "cuda_check.h"                    /* tests/cuda: CUDA_OK */

using mas_cuda::cluster_barrier;

constexpr int kTileFloats = 64 * 64;

__device__ __forceinline__ unsigned smem_u32(const void *p) {
    return (unsigned)__cvta_generic_to_shared(p);
}
__device__ __forceinline__ unsigned cluster_rank() {
    unsigned r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
    return r;
}
/* the shared::cluster address of local shared address a in block `rank` */
__device__ __forceinline__ unsigned map_rank(unsigned a, unsigned rank) {
    unsigned r;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(rank));
    return r;
}
__device__ __forceinline__ void bar_init(unsigned long long *b, unsigned count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_u32(b)), "r"(count) : "memory");
}
/* arrive on a barrier given by its shared::cluster address (any block's) */
__device__ __forceinline__ void bar_arrive_cluster(unsigned caddr) {
    asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];" ::"r"(caddr)
                 : "memory");
}
__device__ __forceinline__ void bar_wait(unsigned long long *b, unsigned parity) {
    unsigned done = 0;
    while (!done)
        asm volatile("{\n .reg .pred p;\n mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, "
                     "[%1], %2;\n selp.u32 %0, 1, 0, p;\n}"
                     : "=r"(done)
                     : "r"(smem_u32(b)), "r"(parity)
                     : "memory");
}
__device__ __forceinline__ void st_cluster(unsigned caddr, float v) {
    asm volatile("st.shared::cluster.f32 [%0], %1;" ::"r"(caddr), "f"(v) : "memory");
}
__device__ __forceinline__ void st_cluster4(unsigned caddr, float a, float b, float c, float d) {
    asm volatile("st.shared::cluster.v4.f32 [%0], {%1, %2, %3, %4};" ::"r"(caddr), "f"(a), "f"(b),
                 "f"(c), "f"(d)
                 : "memory");
}
/* the value element i of tile n holds (exact in float) */
__host__ __device__ inline float tile_value(int n, int i) {
    return (float)(((unsigned)n * 4099u + (unsigned)i) & 0xffffffu);
}

/* WARPS writer warps; VEC 1 or 4 floats a store; ELEMS floats a tile;
 * LOCAL: the writers are warps 1..WARPS of rank 0 (the baseline) */
template <int WARPS, int VEC, int ELEMS, bool LOCAL>
__global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(32 * (WARPS + 1), 1)
    handover(unsigned long long *gcyc, unsigned *gerr, int tiles) {
    static_assert(ELEMS % (32 * VEC) == 0, "whole stores a lane");
    extern __shared__ __align__(16) float slots[]; /* [2][ELEMS] (rank 0's are read) */
    __shared__ unsigned long long bar[4];          /* full 0 / 1 (rank 0), empty 0 / 1 (writers') */
    const unsigned rank = cluster_rank();
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const unsigned writer_rank = LOCAL ? 0u : 1u;
    if (threadIdx.x == 0) {
        bar_init(bar + 0, 32u * WARPS);
        bar_init(bar + 1, 32u * WARPS);
        bar_init(bar + 2, 32u);
        bar_init(bar + 3, 32u);
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    cluster_barrier(2);
    if (rank == 0 && warp == 0) { /* the consumer */
        unsigned err = 0;
        long long t0 = 0;
        for (int n = 0; n < tiles; n++) {
            bar_wait(bar + (n & 1), (unsigned)(n >> 1) & 1u);
            if (n == 0) t0 = clock64();
            const float *s = slots + (n & 1) * ELEMS;
            for (int i = lane; i < ELEMS; i += 32) err += s[i] != tile_value(n, i);
            bar_arrive_cluster(map_rank(smem_u32(bar + 2 + (n & 1)), writer_rank));
        }
        const long long t1 = clock64();
        for (int o = 16; o > 0; o >>= 1) err += __shfl_xor_sync(0xffffffffu, err, o);
        if (lane == 0) {
            atomicAdd(gerr, err);
            atomicAdd(gcyc, (unsigned long long)(t1 - t0));
        }
    } else if (rank == writer_rank && warp >= (LOCAL ? 1 : 0) && warp < WARPS + (LOCAL ? 1 : 0)) {
        const int w = warp - (LOCAL ? 1 : 0), me = 32 * w + lane, nt = 32 * WARPS;
        const unsigned base = map_rank(smem_u32(slots), 0);
        for (int n = 0; n < tiles; n++) {
            if (n >= 2) bar_wait(bar + 2 + (n & 1), (unsigned)((n >> 1) - 1) & 1u);
            const unsigned dst = base + (unsigned)((n & 1) * ELEMS) * 4u;
            for (int i = me * VEC; i < ELEMS; i += nt * VEC) {
                if constexpr (VEC == 4)
                    st_cluster4(dst + 4u * i, tile_value(n, i), tile_value(n, i + 1),
                                tile_value(n, i + 2), tile_value(n, i + 3));
                else
                    st_cluster(dst + 4u * i, tile_value(n, i));
            }
            bar_arrive_cluster(map_rank(smem_u32(bar + (n & 1)), 0));
        }
    }
    cluster_barrier(2); /* no block leaves while the other may still touch its shared memory */
}

template <int WARPS, int VEC, int ELEMS, bool LOCAL>
static void run(int id, const char *what, int sms, unsigned long long *dcyc, unsigned *derr) {
    auto k = handover<WARPS, VEC, ELEMS, LOCAL>;
    const int smem = 120 * 1024; /* one block a multiprocessor */
    CUDA_OK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    const int clusters = sms / 2, tiles = 2000;
    double best = 1e30;
    unsigned errs = 0;
    for (int rep = 0; rep < 5; rep++) {
        CUDA_OK(cudaMemset(dcyc, 0, 8));
        CUDA_OK(cudaMemset(derr, 0, 4));
        k<<<2 * clusters, 32 * (WARPS + 1), smem>>>(dcyc, derr, tiles);
        CUDA_OK(cudaGetLastError());
        CUDA_OK(cudaDeviceSynchronize());
        unsigned long long cyc;
        unsigned e;
        CUDA_OK(cudaMemcpy(&cyc, dcyc, 8, cudaMemcpyDeviceToHost));
        CUDA_OK(cudaMemcpy(&e, derr, 4, cudaMemcpyDeviceToHost));
        errs += e;
        const double per = (double)cyc / clusters / (tiles - 1);
        if (per < best) best = per;
    }
    printf("%d | %s | %d | %.0f | %.1f | %u\n", id, what, ELEMS * 4, best, ELEMS * 4.0 / best, errs);
}

int main() {
    cudaDeviceProp p;
    CUDA_OK(cudaGetDeviceProperties(&p, 0));
    if (p.major < 9) {
        printf("clusters need sm_90 (this is sm_%d%d)\n", p.major, p.minor);
        return 0;
    }
    unsigned long long *dcyc;
    unsigned *derr;
    CUDA_OK(cudaMalloc(&dcyc, 8));
    CUDA_OK(cudaMalloc(&derr, 4));
    printf("%s, %d multiprocessors; cycles a tile at the consumer, best of 5 launches of 2000 tiles\n",
           p.name, p.multiProcessorCount);
    printf("variant | writers | bytes a tile | cycles a tile | bytes a cycle | errors\n");
    const int sms = p.multiProcessorCount;
    run<8, 4, kTileFloats, true>(1, "8 warps, 16-byte stores, same block (baseline)", sms, dcyc, derr);
    run<8, 4, kTileFloats, false>(2, "8 warps, 16-byte stores, the other block", sms, dcyc, derr);
    run<8, 1, kTileFloats, false>(3, "8 warps, 4-byte stores, the other block", sms, dcyc, derr);
    run<1, 4, kTileFloats, false>(4, "1 warp, 16-byte stores, the other block", sms, dcyc, derr);
    run<1, 1, 32, false>(5, "1 warp, one store a lane (the round trip's latency)", sms, dcyc, derr);
    run<1, 1, 32, true>(6, "1 warp, one store a lane, same block (latency baseline)", sms, dcyc, derr);
    CUDA_OK(cudaFree(dcyc));
    CUDA_OK(cudaFree(derr));
    return 0;
}
