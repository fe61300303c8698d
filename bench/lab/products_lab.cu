/* Lab (session 25): the fused forward's products in isolation, to see what
 * FFMA rate a block's compute warps can reach next to a sweep warp, by the
 * shape of a thread's register tile (llm.c style: numbered variants, each
 * checked against a plain loop before it is timed).
 *
 * A block is one multiprocessor's slab: TOK tokens x 64 frames a tile, 2J =
 * 160 rows of e (frames) and coefficients (tokens) in shared memory, as in
 * lib/cuda/fused_forward.cuh. Each tile the NCW compute warps make the
 * tile's cells (a thread TF frames x TT tokens, the rows in order, runs of 4
 * tokens as the kernel's run_token) and store them to one of two cell
 * tiles; warp 0, when SWEEP, meanwhile runs a max-plus chain over the other
 * tile's cells (a lane's TOK/32 tokens a frame, a shuffle and a vote a
 * token: about the sweep's instructions a frame), then every warp meets at
 * the tile's barrier. The compute warps are the warps not on warp 0's
 * scheduler first (warp index mod 4), so that with 4 compute warps the
 * sweep's scheduler has none.
 *
 * Device: nvcc -std=c++17 -O3 -arch=sm_90 -Itests/cuda bench/lab/products_lab.cu
 * -o /tmp/products_lab && /tmp/products_lab (built here, it can be carried)
 * Prints, a variant a line: cycles a tile (mean over blocks, best of 5
 * launches), the FFMA issue against one a cycle on each of the four
 * schedulers, registers, the cycles a tile that compute warps 0 and 3 spend
 * in their products and the sweep warp in its sweep (clock stamps, session
 * 32: ~3% of a tile), and the largest difference from the plain loop.
 *
 * What it showed (session 25, H200; results/fused-gpu-h100.md): at 128
 * tokens ~63% of the FFMA issue next to the sweep warp whatever the tile
 * (4 x 8 by eight warps as main, 8 x 8 by four; operands a row ahead or an
 * unroll of 16 within 2%), 65-69% without it; the kernel's products are
 * within ~9% of that. At 64 tokens 8 x 4 by four warps beat main's 4 x 4 by
 * eight by 11% here, but lost 5-6% in the kernel.
 *
 * Session 32 (H100; with bench/lab/lds128_lab.cu): grids of the 256
 * threads over the 16 x 16 groups that make the tokens' shared loads
 * cheaper (GRID 1-4, down to 6 wavefronts a row and warp from 10) make the
 * products alone up to 8% faster, but the sweep warp beside them slower by
 * about as much (its loads and shuffles queue behind theirs), and the tile
 * is max(products, sweep): none gained in the kernel. */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <math.h>

#include <vector>

#include "cuda_check.h" /* tests/cuda: CUDA_OK */


constexpr int FR = 64;    /* frames a tile */
constexpr int ROWS = 160; /* 2J at J = 80 */

/* compute warp cw (0..NCW-1) -> warp index. MAP 0 (main's float32 form):
 * warps 1..NCW. MAP 1 (main's TF32 form): the warps not on warp 0's
 * scheduler (warp index mod 4), 1, 2, 3, 5, 6, 7, 9, ... */
__host__ __device__ constexpr int warp_of(int cw, int map) {
    return map ? cw / 3 * 4 + 1 + cw % 3 : cw + 1;
}
__host__ __device__ constexpr int block_warps(int ncw, int map) {
    return warp_of(ncw - 1, map) + 1;
}

template <int TOK, int TF, int TT, int NCW, bool SWEEP, int MAP, int PIPE, int GRID>
__global__ void __launch_bounds__(32 * block_warps(NCW, MAP), 1)
    lab(const float *gc, const float *ge, float *gout, unsigned long long *gcyc, int tiles) {
    constexpr int G = TOK / TT;        /* token groups */
    constexpr int NTH = (FR / TF) * G; /* compute threads */
    static_assert(NTH == 32 * NCW, "the thread tiles cover the tile");
    static_assert(!GRID || (G == 16 && NCW == 8), "the other grids are for 16 x 16 groups");
    constexpr int K = TOK / 32;
    extern __shared__ __align__(16) float sm[];
    float *c_s = sm;                  /* [ROWS][TOK] */
    float *e_s = c_s + ROWS * TOK;    /* [ROWS][FR] */
    float *cells = e_s + ROWS * FR;   /* two tiles [FR][TOK] */
    __shared__ float sink[32];
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    for (int k = tid; k < ROWS * TOK; k += blockDim.x) c_s[k] = gc[k];
    for (int k = tid; k < ROWS * FR; k += blockDim.x) e_s[k] = ge[k];
    __syncthreads();
    /* compute warp index: warp w is compute warp cw where warp_of(cw) == w */
    int cw = -1;
    for (int i = 0; i < NCW; i++)
        if (warp_of(i, MAP) == warp) cw = i;
    const int ct = cw * 32 + lane;
    /* GRID (16 x 16 groups only): 1 (session 31) a half-warp takes 8 token
     * groups of 2 frame groups (bench/lab/half_warp_grid.patch); 2 (session
     * 32) a quarter-warp takes one token group of 8 frame groups, a warp 4
     * x 8; 3 (session 32) a half-warp one token group of 16 frame groups;
     * 4 (session 32) lanes 2k and 2k + 1 one token group of 2 frame groups
     * (bench/lab/lds128_lab.cu: the tokens' loads 2 wavefronts, the
     * frames' 2) */
    const int tg = GRID == 1   ? (ct & 7) + ((ct >> 4) & 1) * 8
                   : GRID == 2 ? (cw >> 1) * 4 + (lane >> 3)
                   : GRID == 3 ? cw * 2 + (lane >> 4)
                   : GRID == 4 ? lane >> 1
                               : ct % G;
    const int tf = GRID == 1   ? (ct >> 5) * 2 + ((ct >> 3) & 1)
                   : GRID == 2 ? (cw & 1) * 8 + (lane & 7)
                   : GRID == 3 ? lane & 15
                   : GRID == 4 ? cw * 2 + (lane & 1)
                               : ct / G;
    auto tok = [&](int j) { return (j / 4) * (4 * G) + tg * 4 + j % 4; };
    const unsigned long long t0 = clock64();
    unsigned long long busy = 0; /* this warp's cycles in its products (or sweeps) */
    float q[K];
    for (int k = 0; k < K; k++) q[k] = 0.f;
    unsigned words = 0;
    for (int t = 0; t < tiles; t++) {
        float *mine = cells + (t & 1) * FR * TOK, *other = cells + ((t & 1) ^ 1) * FR * TOK;
        const unsigned long long ta = clock64();
        if (cw >= 0) {
            float acc[TF][TT];
#pragma unroll
            for (int i = 0; i < TF; i++)
#pragma unroll
                for (int j = 0; j < TT; j++) acc[i][j] = 0.f;
            const float *ep = e_s + tf * TF, *cp = c_s + tg * 4;
            auto load_row = [&](int r, float (&ev)[TF], float (&cv)[TT]) {
#pragma unroll
                for (int h = 0; h < TF / 4; h++) {
                    const float4 v = *(const float4 *)(ep + r * FR + 4 * h);
                    ev[4 * h] = v.x, ev[4 * h + 1] = v.y, ev[4 * h + 2] = v.z, ev[4 * h + 3] = v.w;
                }
#pragma unroll
                for (int h = 0; h < TT / 4; h++) {
                    const float4 v = *(const float4 *)(cp + r * TOK + 4 * G * h);
                    cv[4 * h] = v.x, cv[4 * h + 1] = v.y, cv[4 * h + 2] = v.z, cv[4 * h + 3] = v.w;
                }
            };
            auto fma_row = [&](const float (&ev)[TF], const float (&cv)[TT]) {
#pragma unroll
                for (int i = 0; i < TF; i++)
#pragma unroll
                    for (int j = 0; j < TT; j++) acc[i][j] = fmaf(ev[i], cv[j], acc[i][j]);
            };
            if constexpr (PIPE == 0) {
#pragma unroll 8
                for (int r = 0; r < ROWS; r++) {
                    float ev[TF], cv[TT];
                    load_row(r, ev, cv);
                    fma_row(ev, cv);
                }
            } else if constexpr (PIPE == 1) { /* each row's operands loaded a row ahead */
                float e0[TF], c0[TT], e1[TF], c1[TT];
                load_row(0, e0, c0);
#pragma unroll 4
                for (int r = 0; r < ROWS; r += 2) {
                    load_row(r + 1, e1, c1);
                    fma_row(e0, c0);
                    if (r + 2 < ROWS) load_row(r + 2, e0, c0);
                    fma_row(e1, c1);
                }
            } else if constexpr (PIPE == 3 || PIPE == 4) {
                /* timing only (wrong cells): the tokens' operands (3) or the
                 * frames' (4) loaded every other row, half their shared
                 * bytes, to see whether the shared loads' bytes bound the row */
                float ev[TF], cv[TT];
#pragma unroll 8
                for (int r = 0; r < ROWS; r++) {
                    float en[TF], cn[TT];
                    load_row(r, en, cn);
                    if (r % 2 == 0 || PIPE == 4) {
#pragma unroll
                        for (int j = 0; j < TT; j++) cv[j] = cn[j];
                    }
                    if (r % 2 == 0 || PIPE == 3) {
#pragma unroll
                        for (int i = 0; i < TF; i++) ev[i] = en[i];
                    }
                    fma_row(ev, cv);
                }
            } else { /* unroll 16 */
#pragma unroll 16
                for (int r = 0; r < ROWS; r++) {
                    float ev[TF], cv[TT];
                    load_row(r, ev, cv);
                    fma_row(ev, cv);
                }
            }
#pragma unroll
            for (int i = 0; i < TF; i++)
#pragma unroll
                for (int h = 0; h < TT / 4; h++)
                    *(float4 *)(mine + (tf * TF + i) * TOK + tok(4 * h)) =
                        make_float4(acc[i][4 * h], acc[i][4 * h + 1], acc[i][4 * h + 2],
                                    acc[i][4 * h + 3]);
        } else if (warp == 0 && SWEEP && t > 0) {
            for (int f = 0; f < FR; f++) {
                float v[K];
#pragma unroll
                for (int k = 0; k < K; k++) v[k] = other[f * TOK + K * lane + k];
                float move = __shfl_up_sync(0xffffffffu, q[K - 1], 1);
                if (lane == 0) move = -INFINITY;
#pragma unroll
                for (int k = 0; k < K; k++) {
                    const float stay = q[k];
                    const bool adv = stay < move;
                    const float nm = q[k];
                    q[k] = fmaxf(stay, move) + v[k];
                    words ^= __ballot_sync(0xffffffffu, adv);
                    move = nm;
                }
            }
        }
        busy += clock64() - ta;
        __syncthreads();
    }
    const unsigned long long t1 = clock64();
    if (warp == 0) {
        sink[lane] = q[0] + (float)words;
        __syncwarp();
        if (lane == 0) {
            gcyc[blockIdx.x] = t1 - t0;
            gcyc[gridDim.x + blockIdx.x] = busy; /* the sweep's (or nothing's) */
            gout[(size_t)blockIdx.x * FR * TOK] = sink[3];
        }
    }
    /* compute warps 0 and 3 (warps 1 and 4 in MAP 0: warp 4 shares the
     * sweep's scheduler): their products' cycles */
    if (lane == 0 && (cw == 0 || cw == 3)) gcyc[(cw == 0 ? 2 : 3) * gridDim.x + blockIdx.x] = busy;
    /* the last tile's cells for the check (block 0) */
    if (blockIdx.x == 0) {
        const float *last = cells + ((tiles - 1) & 1) * FR * TOK;
        for (int k = tid; k < FR * TOK; k += blockDim.x)
            gout[(size_t)gridDim.x * FR * TOK + k] = last[k];
    }
}

template <int TOK, int TF, int TT, int NCW, bool SWEEP, int MAP = 0, int PIPE = 0, int GRID = 0>
static void run(const char *name, int sms, const std::vector<float> &c,
                const std::vector<float> &e) {
    const int threads = 32 * block_warps(NCW, MAP), tiles = 40;
    const size_t smem = (size_t)(ROWS * TOK + ROWS * FR + 2 * FR * TOK) * 4;
    auto k = lab<TOK, TF, TT, NCW, SWEEP, MAP, PIPE, GRID>;
    CUDA_OK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    cudaFuncAttributes at;
    CUDA_OK(cudaFuncGetAttributes(&at, k));
    float *dc, *de, *dout;
    unsigned long long *dcyc;
    CUDA_OK(cudaMalloc(&dc, c.size() * 4));
    CUDA_OK(cudaMalloc(&de, e.size() * 4));
    CUDA_OK(cudaMalloc(&dout, ((size_t)sms + 1) * FR * TOK * 4));
    CUDA_OK(cudaMalloc(&dcyc, 4 * sms * 8));
    CUDA_OK(cudaMemset(dcyc, 0, 4 * sms * 8)); /* v7 has no compute warp 3 */
    CUDA_OK(cudaMemcpy(dc, c.data(), c.size() * 4, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(de, e.data(), e.size() * 4, cudaMemcpyHostToDevice));
    double best = 1e30, ph[3] = {0, 0, 0}; /* the best launch's sweep, cw 0, cw 3 a tile */
    for (int rep = 0; rep < 5; rep++) {
        k<<<sms, threads, smem>>>(dc, de, dout, dcyc, tiles);
        CUDA_OK(cudaGetLastError());
        CUDA_OK(cudaDeviceSynchronize());
        std::vector<unsigned long long> cyc(4 * sms);
        CUDA_OK(cudaMemcpy(cyc.data(), dcyc, 4 * sms * 8, cudaMemcpyDeviceToHost));
        double m[4] = {0, 0, 0, 0};
        for (int q = 0; q < 4; q++)
            for (int i = 0; i < sms; i++) m[q] += (double)cyc[(size_t)q * sms + i] / sms / tiles;
        if (m[0] < best) {
            best = m[0];
            for (int q = 0; q < 3; q++) ph[q] = m[q + 1];
        }
    }
    std::vector<float> cells((size_t)FR * TOK);
    CUDA_OK(cudaMemcpy(cells.data(), dout + (size_t)sms * FR * TOK, cells.size() * 4,
                  cudaMemcpyDeviceToHost));
    double err = 0;
    for (int f = 0; f < FR; f++)
        for (int t = 0; t < TOK; t++) {
            float a = 0.f;
            for (int r = 0; r < ROWS; r++)
                a = fmaf(e[(size_t)r * FR + f], c[(size_t)r * TOK + t], a);
            err = fmax(err, fabs((double)a - cells[(size_t)f * TOK + t]));
        }
    const double ffma = (double)FR * TOK * ROWS / 32; /* warp FFMAs a tile */
    printf("| %s | %d | %dx%d | %d (warps %d..) | %s | %d | %.0f | %.1f%% | %.0f / %.0f | %.0f | %g |\n",
           name, TOK, TF, TT, NCW, warp_of(0, MAP), SWEEP ? "yes" : "no", at.numRegs, best,
           100.0 * ffma / 4 / best, ph[1], ph[2], SWEEP ? ph[0] : 0.0, err);
    CUDA_OK(cudaFree(dc));
    CUDA_OK(cudaFree(de));
    CUDA_OK(cudaFree(dout));
    CUDA_OK(cudaFree(dcyc));
}

int main() {
    int sms = 0;
    CUDA_OK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    srand(7);
    auto rnd = [] { return (float)rand() / RAND_MAX - 0.5f; };
    std::vector<float> c128((size_t)ROWS * 128), c64((size_t)ROWS * 64), e((size_t)ROWS * FR);
    for (auto &v : c128) v = rnd();
    for (auto &v : c64) v = rnd();
    for (auto &v : e) v = rnd();
    printf("| variant | tokens | thread tile (frames x tokens) | compute warps | sweep warp | "
           "registers | cycles a tile | FFMA issue (of 4 schedulers) | products a tile, compute "
           "warps 0 / 3 | sweep a tile | max err |\n");
    printf("|---|---|---|---|---|---|---|---|---|---|---|\n");
    /* K = 4 (128 tokens) */
    run<128, 4, 8, 8, true>("v1 (main's K=4)", sms, c128, e);
    run<128, 4, 8, 8, false>("v1 no sweep", sms, c128, e);
    run<128, 4, 8, 8, true, 0, 1>("v1 operands a row ahead", sms, c128, e);
    run<128, 4, 8, 8, true, 0, 2>("v1 unroll 16", sms, c128, e);
    run<128, 4, 8, 8, true, 1>("v1, none on the sweep's scheduler", sms, c128, e);
    run<128, 4, 16, 4, true>("v2", sms, c128, e);
    run<128, 8, 8, 4, true>("v3", sms, c128, e);
    run<128, 8, 8, 4, false>("v3 no sweep", sms, c128, e);
    run<128, 8, 8, 4, true, 0, 1>("v3 operands a row ahead", sms, c128, e);
    run<128, 8, 8, 4, true, 0, 2>("v3 unroll 16", sms, c128, e);
    /* timing only (session 31): half the tokens' or the frames' shared bytes */
    run<128, 4, 8, 8, false, 0, 3>("v1 no sweep, tokens' loads halved (wrong cells)", sms, c128, e);
    run<128, 4, 8, 8, false, 0, 4>("v1 no sweep, frames' loads halved (wrong cells)", sms, c128, e);
    run<128, 8, 8, 4, false, 0, 3>("v3 no sweep, tokens' loads halved (wrong cells)", sms, c128, e);
    run<128, 4, 8, 8, true, 0, 0, 1>("v1, half-warps of 8 token groups x 2 frame groups", sms, c128, e);
    run<128, 4, 8, 8, false, 0, 0, 1>("v1 no sweep, half-warps of 8 x 2", sms, c128, e);
    /* session 32: grids whose token loads are uniform in a quarter or half warp */
    run<128, 4, 8, 8, true, 0, 0, 2>("v1, quarter-warps of 1 token group x 8 frame groups", sms, c128, e);
    run<128, 4, 8, 8, false, 0, 0, 2>("v1 no sweep, quarter-warps of 1 x 8", sms, c128, e);
    run<128, 4, 8, 8, true, 0, 0, 3>("v1, half-warps of 1 token group x 16 frame groups", sms, c128, e);
    run<128, 4, 8, 8, false, 0, 0, 3>("v1 no sweep, half-warps of 1 x 16", sms, c128, e);
    run<128, 4, 8, 8, true, 0, 0, 4>("v1, lane pairs of 1 token group x 2 frame groups", sms, c128, e);
    run<128, 4, 8, 8, false, 0, 0, 4>("v1 no sweep, lane pairs", sms, c128, e);
    run<128, 8, 4, 8, true>("v8: 8 x 4, a warp one frame group x 32 token groups", sms, c128, e);
    run<128, 8, 4, 8, false>("v8 no sweep", sms, c128, e);
    /* K = 2 (64 tokens) */
    run<64, 4, 4, 8, true>("v1 (main's K=2)", sms, c64, e);
    run<64, 4, 4, 8, false>("v1 no sweep", sms, c64, e);
    run<64, 4, 4, 8, true, 0, 1>("v1 operands a row ahead", sms, c64, e);
    run<64, 4, 4, 8, true, 0, 0, 1>("v1, half-warps of 8 x 2", sms, c64, e);
    run<64, 4, 4, 8, true, 0, 0, 2>("v1, quarter-warps of 1 x 8", sms, c64, e);
    run<64, 4, 4, 8, true, 0, 0, 3>("v1, half-warps of 1 x 16", sms, c64, e);
    run<64, 4, 4, 8, true, 0, 0, 4>("v1, lane pairs", sms, c64, e);
    run<64, 8, 4, 4, true>("v3", sms, c64, e);
    run<64, 8, 4, 4, false>("v3 no sweep", sms, c64, e);
    run<64, 8, 8, 2, true>("v7", sms, c64, e);
    return 0;
}
