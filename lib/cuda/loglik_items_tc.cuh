/* Log-likelihoods of frames under one diagonal Gaussian a state on the
 * tensor cores (mas.h section 6, MAS_PRECISION_TF32, offsets NULL, no
 * best): Glow-TTS's logp with TF32 products. The cells are tc_cells.cuh's,
 * the ones the fused alignment computes in that precision.
 *
 * Why a kernel of its own: the general tensor-core kernel
 * (loglik_kernel.cuh) is built for mixtures, with a log-add stage and
 * slices of 8 rows through registers; with one Gaussian a state the cells
 * are the outputs, the products are nearly free on the tensor cores, and
 * what is left is moving e in and the [B, N, states] scores out.
 *
 * Work: a unit is (item, a range of 64 states, a run of tiles of 64
 * frames). Eight warps, each 16 states x 32 frames of a tile. The unit's
 * coefficients (rounded to TF32) stay in shared memory for all its tiles
 * when the KP rows fit next to a tile of e, two blocks a multiprocessor;
 * then, for 4-byte frames, the next tile's x comes by cp.async into a
 * stage while the products and stores of this one run. Otherwise (large J)
 * both go through in slices of rows, reloaded a tile.
 * Nothing outside the lengths is read; outputs outside them are 0. */
#ifndef MAS_CUDA_LOGLIK_ITEMS_TC_CUH
#define MAS_CUDA_LOGLIK_ITEMS_TC_CUH

#include "cuda/tc_cells.cuh"

namespace mas_cuda {

constexpr int kItcThreads = 256;
constexpr int kItcStates = 64; /* states a unit */
constexpr int kItcFrames = 64; /* frames a tile */
constexpr int kItcLd = 64 + kTcPad;
/* shared memory a block may take for two blocks a multiprocessor: 2 x
 * (113 + 1 reserved) KB of sm_90's 228 (J = 80 with its stage takes 110.3
 * KB; a budget of 110 left the stage out). Less where a block may not
 * have that much (sm_86 / sm_89: 99 KB). */
constexpr size_t kItcBudget = 113 * 1024;

struct ItemsTcParams {
    LLParams l;
    int kp;             /* 2J rounded up to 8 */
    int rows, slices;   /* rows a slice (a multiple of 8), slices of KP */
    int stage;          /* one slice and 4-byte frames: the next tile's x staged */
    int vec;            /* frames contiguous and 16-byte aligned: staged 16 bytes a copy */
    int64_t ranges;     /* ranges of kItcStates states */
    int64_t tpr;        /* tiles a run; l.ftiles: runs over the frames */
};

/* Shared memory: K [64], coefficients and e [rows][kItcLd] each, and with
 * a stage the next tile's x [J][64] */
__host__ __device__ inline size_t itc_smem(int rows, int64_t stage_j = 0) {
    return ((size_t)kItcStates + 2 * (size_t)rows * kItcLd + (size_t)stage_j * kItcFrames) *
           sizeof(float);
}

/* Rows a slice: all KP when they fit the budget next to a stage of J rows
 * (*stage = 1), else without the stage, else balanced slices of whole
 * eight-row groups. smem_optin: the most a block may have. */
inline void itc_plan_rows(int kp, int64_t J, bool can_stage, size_t smem_optin, int *rows,
                          int *slices, int *stage) {
    const size_t budget = smem_optin < kItcBudget ? smem_optin : kItcBudget;
    const size_t per_row = itc_smem(1) - itc_smem(0);
    *stage = can_stage && itc_smem(kp, J) <= budget;
    if (*stage || itc_smem(kp) <= budget) {
        *rows = kp;
        *slices = 1;
        return;
    }
    const int fit = (int)((budget - itc_smem(0)) / per_row) / 8 * 8;
    const int n = (kp + fit - 1) / fit;
    *slices = n;
    *rows = ((kp + n - 1) / n + 7) / 8 * 8;
}

template <typename TX>
__global__ void __launch_bounds__(kItcThreads, 2) loglik_items_tc(ItemsTcParams p) {
    extern __shared__ __align__(16) float itc_sm[];
    float *k_s = itc_sm;                   /* [64] */
    float *c_s = k_s + kItcStates;         /* [rows][kItcLd] */
    float *e_s = c_s + p.rows * kItcLd;    /* [rows][kItcLd] */
    float *x_st = e_s + p.rows * kItcLd; /* [J][64], with p.stage (4-byte frames) */
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int tok0 = 16 * (warp & 3), fr0 = 32 * (warp >> 2);
    const LLParams &lp = p.l;
    const int J = (int)lp.J, J2 = 2 * J;
    const int64_t units = lp.B * p.ranges * lp.ftiles;
    const float *coef = (const float *)lp.coef;
    float *out = (float *)lp.out;
    const bool pairs = lp.os1 == 1 && lp.os0 % 2 == 0 && lp.os2 % 2 == 0 &&
                       (uintptr_t)out % 8 == 0;
    constexpr int NB = 8; /* loads in flight a thread */

    for (int64_t u = blockIdx.x; u < units; u += gridDim.x) {
        /* a run of tpr tiles is ll_unit's frame tile: the same order and length checks */
        const LLUnit w = ll_unit(lp, u, p.ranges, (int)p.tpr * kItcFrames);
        const int64_t range = w.range, b = w.b, nl = w.nl, sl = w.sl;
        const int64_t s_a = range * kItcStates, s_b = min(lp.n_states, s_a + kItcStates);
        const int ns = (int)(min(s_b, max(sl, s_a)) - s_a); /* states computed */
        const float *coef_b = coef + b * lp.cs0;
        const int64_t fa = w.f0, fb = w.f_end;
        const TX *xb = (const TX *)lp.x + b * lp.xs0;

        /* coefficient rows [r0, r0 + nr) of KP, TF32; zeros past 2J and ns */
        auto fill_coef = [&](int r0, int nr) {
            const int n = nr * kItcStates;
            for (int k0 = tid; k0 < n; k0 += NB * kItcThreads) {
                float v[NB];
#pragma unroll
                for (int q = 0; q < NB; q++) {
                    const int k = k0 + q * kItcThreads, r = k / kItcStates, s = k % kItcStates;
                    const int row = 1 + r0 + r;
                    v[q] = k < n && row <= J2 && s < ns ? coef_b[row * lp.cs1 + (s_a + s) * lp.cs2]
                                                        : 0.0f;
                }
#pragma unroll
                for (int q = 0; q < NB; q++) {
                    const int k = k0 + q * kItcThreads;
                    if (k < n) c_s[(k / kItcStates) * kItcLd + k % kItcStates] = to_operand<true>(v[q]);
                }
            }
        };
        /* e rows [r0, r0 + nr) of frames [f0, f0 + 64), TF32; zeros past 2J
         * and past the length */
        auto fill_e = [&](int64_t f0, int r0, int nr) {
            const int nf = (int)max((int64_t)0, min((int64_t)kItcFrames, nl - f0));
            tile_e_rows<float, TX, true>(e_s, kItcLd, xb + f0 * lp.xs1, lp.xs1, lp.xs2, J, nf, r0,
                                         nr, tid, kItcThreads);
        };
        /* p.stage: frames [f0, f0 + 64) of x into x_st by cp.async (zeros
         * past the length, whose addresses are not read), then into e. The
         * per-element form cost ~40 instructions an element in address
         * arithmetic (ncu: the kernel was bound by issue, IMAD 27%). */
        auto stage_x = [&](int64_t f0) {
            if constexpr (sizeof(TX) == 4) {
                const int nf = (int)max((int64_t)0, min((int64_t)kItcFrames, nl - f0));
                if (p.vec) {
                    stage_x16(x_st, (const float *)xb + f0, lp.xs2, J, nf, tid, kItcThreads);
                } else {
                    for (int k = tid; k < J * kItcFrames; k += kItcThreads) {
                        const int j = k / kItcFrames, f = k % kItcFrames;
                        copy_elem_async(x_st + k,
                                        xb + (f < nf ? f0 + f : 0) * lp.xs1 + (int64_t)j * lp.xs2,
                                        f < nf);
                    }
                }
            }
            async_commit();
        };
        /* this thread's two token rows of the output (tc_token: lane / 4 and 8 more) */
        float *row[2];
        bool row_live[2], row_in[2];
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const int64_t st = s_a + tok0 + tc_token(lane, 2 * h);
            row[h] = out + b * lp.os0 + st * lp.os2;
            row_live[h] = st < s_b;
            row_in[h] = st < sl;
        }

        __syncthreads(); /* the previous unit is done with the shared memory */
        for (int k = tid; k < kItcStates; k += kItcThreads)
            k_s[k] = k < ns ? coef_b[(s_a + k) * lp.cs2] : 0.0f;
        if (p.slices == 1) {
            if (p.stage) stage_x(fa);
            fill_coef(0, p.kp);
            for (int k = tid; k < (p.kp - J2) * kItcFrames; k += kItcThreads) /* padding rows */
                e_s[(J2 + k / kItcFrames) * kItcLd + k % kItcFrames] = 0.0f;
        }

        for (int64_t f0 = fa; f0 < fb; f0 += kItcFrames) {
            float acc[4][4];
            if (p.stage) {
                async_wait<0>();
                __syncthreads(); /* this tile's x is staged; the products before are done */
                staged_to_e<true>(e_s, kItcLd, x_st, J, tid, kItcThreads);
                __syncthreads(); /* e is ready, the stage free */
                if (f0 + kItcFrames < fb) stage_x(f0 + kItcFrames);
                tc_start(acc, k_s + tok0, lane);
                tc_products(acc, c_s + tok0, kItcLd, e_s + fr0, kItcLd, p.kp, lane);
            } else {
                for (int s = 0; s < p.slices; s++) {
                    const int r0 = s * p.rows, nr = min(p.rows, p.kp - r0);
                    if (s > 0 || f0 > fa) __syncthreads(); /* the products before are done */
                    if (p.slices > 1) fill_coef(r0, nr);
                    fill_e(f0, r0, nr);
                    __syncthreads();
                    if (s == 0) tc_start(acc, k_s + tok0, lane);
                    tc_products(acc, c_s + tok0, kItcLd, e_s + fr0, kItcLd, nr, lane);
                }
            }
            /* accumulators 2h, 2h + 1: token row h, frames f and f + 1 of
             * the tile (32-bit offsets within it: 64-bit compares and
             * addresses a store were ~45 instructions, a third of a tile) */
            const int n_end = (int)min((int64_t)kItcFrames, fb - f0);
            const int n_in = (int)max((int64_t)0, min((int64_t)kItcFrames, nl - f0));
#pragma unroll
            for (int h = 0; h < 2; h++) {
                if (!row_live[h]) continue;
                float *rt = row[h] + f0 * lp.os1;
#pragma unroll
                for (int ni = 0; ni < 4; ni++) {
                    const int f = fr0 + 8 * ni + tc_frame(lane, 0);
                    if (f >= n_end) continue;
                    const float v0 = row_in[h] && f < n_in ? acc[ni][2 * h] : 0.0f;
                    const float v1 = row_in[h] && f + 1 < n_in ? acc[ni][2 * h + 1] : 0.0f;
                    if (pairs && f + 1 < n_end) {
                        *(float2 *)(rt + f) = make_float2(v0, v1);
                    } else {
                        float *d = rt + f * lp.os1;
                        d[0] = v0;
                        if (f + 1 < n_end) d[lp.os1] = v1;
                    }
                }
            }
        }
    }
}

} // namespace mas_cuda

#endif
