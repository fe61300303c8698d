/* GMM log-likelihoods on the tensor cores (mas.h section 6, precision TF32
 * or BF16 of mas_loglik_cuda) for a shared model whose states all have G
 * Gaussians (mas_loglik_args.mixture_size), G in {8, 16, 32, 64, 128} or a
 * multiple of 128; the mixture log-add done from the accumulators, so the
 * per-Gaussian scores never leave the registers but as one (max, sum) pair
 * per 8 Gaussians and frame.
 *
 * Why a kernel of its own: loglik_kernel.cuh's TF32 path multiplies on the
 * tensor cores but then goes through the default path's structure (scores
 * to shared memory, one thread a frame walking them, slices of 8 rows with a
 * barrier each), which the multiply-adds never limited: TF32 was 2.1 ms for
 * 5000 states x 256 Gaussians against 2.4 ms for float32
 * (bench/results/likelihood-gpu-h100.md).
 *
 * A block takes units (item, tile of kTcFrames frames, range of states) in
 * turn. The tile's expanded frames e = [x, x*x] (TF32, zero rows padding 2J
 * to KP, a multiple of 8) sit in shared memory for the whole unit; the
 * coefficients of kTcGauss Gaussians at a time are staged next to them
 * (rows 1..2J, TF32; row 0, K, kept in float32 and added exactly as the
 * accumulators' start). Eight warps each multiply 32 frames x 64 Gaussians
 * (m16n8k8: 2 x 8 tiles, 64 accumulators a lane). A lane holds two columns
 * of each 8-column tile for each of its 4 rows: the 4 lanes of a quad
 * reduce them to the tile's (max, sum of exp) by shuffles, one lane stores
 * it, and after a barrier a thread per (frame, state) combines the G/8
 * tiles of a state (states of 128 Gaussians and more: a thread per frame
 * keeps the running pair over the chunks). The combination follows the
 * default path's rules: NaN wins, then +inf; all -inf gives -inf; else
 * max + log(sum).
 *
 * Lengths as in loglik_kernel.cuh: nothing outside them is read, outputs
 * outside them are 0. The offsets are checked against s*G for the states
 * a unit owns (MAS_ERR_BAD_ARGUMENT, outputs 0). */
#ifndef MAS_CUDA_LOGLIK_TC_CUH
#define MAS_CUDA_LOGLIK_TC_CUH

#include "cuda/loglik_kernel.cuh"

namespace mas_cuda {

constexpr int kTcThreads = 256;
constexpr int kTcFrames = 128; /* frames a unit */
constexpr int kTcGauss = 128;  /* Gaussians a chunk */
constexpr int kTcTiles = kTcGauss / 8;

struct TcParams {
    const void *x;
    int32_t x_dtype;
    int64_t xs0, xs1, xs2;
    int64_t B, N, J, M, n_states, G;
    int kp; /* 2J rounded up to a multiple of 8 */
    const float *coef; /* [1, 2J+1, M] */
    int64_t cs1, cs2;
    const int64_t *offsets;
    const int64_t *n_len, *s_len;
    float *out;
    int64_t os0, os1, os2;
    int64_t ftiles, sranges, spr; /* units: B x sranges x ftiles; spr states a range */
    uint64_t *error_word;
};

/* Row stride of the coefficient tile [KP + 1 rows][Gaussians]: 8 rows x 4
 * columns of a fragment load hit 32 banks. */
constexpr int kTcLdc = kTcGauss + 8;

/* Shared memory of the kernel for KP: the e tile [frames][KP] (row stride
 * KP + 4, conflict-free fragment loads), the coefficient tile (row 0 K,
 * rows 1..2J, zero rows to KP; as in memory, copied asynchronously), and
 * the (max, sum) pairs of the 8-column tiles. */
__host__ __device__ inline size_t tc_smem(int kp) {
    return ((size_t)kTcFrames * (kp + 4) + (size_t)(kp + 1) * kTcLdc +
            2 * (size_t)kTcFrames * kTcTiles) * sizeof(float);
}

/* 16 bytes to shared memory, `bytes` (16 or 0) of them from gsrc, the rest
 * zeros; asynchronous on sm_80 and later. */
__device__ __forceinline__ void tc_copy16(float *dst, const float *gsrc, int bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    const unsigned d = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(gsrc), "r"(bytes)
                 : "memory");
#else
    *(float4 *)dst = bytes ? *(const float4 *)gsrc : make_float4(0.f, 0.f, 0.f, 0.f);
#endif
}

/* The running (max, sum) of a log-sum over parts, the default path's rules. */
__device__ __forceinline__ void tc_combine(float &m, float &l, float mo, float lo) {
    const float ninf = -INFINITY, pinf = INFINITY;
    if (m != m) return;
    if (mo != mo) {
        m = mo;
    } else if (mo == ninf) {
    } else if (mo == pinf || m == pinf) {
        m = pinf;
    } else if (m == ninf) {
        m = mo;
        l = lo;
    } else {
        const float nm = mo > m ? mo : m;
        l = l * ll_exp(m - nm) + lo * ll_exp(mo - nm);
        m = nm;
    }
}

__device__ __forceinline__ float tc_value(float m, float l) {
    return (m > -INFINITY && m < INFINITY) ? m + ll_log(l) : m;
}

template <typename TX>
__global__ void __launch_bounds__(kTcThreads, 2) loglik_tc_uniform(TcParams p) {
    extern __shared__ __align__(16) float tc_sm[];
    const int KP = p.kp, LD = KP + 4;
    float *e_s = tc_sm;                    /* [kTcFrames][LD] */
    float *c_s = e_s + kTcFrames * LD;     /* [KP + 1][kTcLdc]: row 0 K, rows 1.. the b's */
    float *pm = c_s + (KP + 1) * kTcLdc;   /* [kTcFrames][kTcTiles] */
    float *pl = pm + kTcFrames * kTcTiles; /* [kTcFrames][kTcTiles] */
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int qg = lane >> 2, qt = lane & 3;
    const int wf = (warp & 3) * 32, wg = (warp >> 2) * 64; /* the warp's frames, Gaussians */
    const int J = (int)p.J, J2 = 2 * J;
    const int64_t G = p.G;
    const int64_t units = p.B * p.sranges * p.ftiles;

    for (int64_t u = blockIdx.x; u < units; u += gridDim.x) {
        const int64_t ftile = u % p.ftiles, srange = (u / p.ftiles) % p.sranges;
        const int64_t b = u / (p.ftiles * p.sranges);
        const int64_t f0 = ftile * kTcFrames, f_end = min(p.N, f0 + (int64_t)kTcFrames);
        int64_t nl = p.n_len ? p.n_len[b] : p.N, sl = p.s_len ? p.s_len[b] : p.n_states;
        if (nl < 0 || nl > p.N || sl < 0 || sl > p.n_states) {
            if (ftile == 0 && srange == 0 && tid == 0) report_error(p.error_word, b, MAS_ERR_BAD_LENGTH);
            nl = sl = 0;
        }
        const int64_t s_a = srange * p.spr, s_b = min(p.n_states, s_a + p.spr);
        /* the offsets of the unit's states must be s * G */
        bool ok = true;
        for (int64_t s = s_a + tid; s <= s_b; s += kTcThreads)
            if (p.offsets[s] != s * G) ok = false;
        ok = __syncthreads_and(ok);
        auto zero = [&](int64_t fa, int64_t fb, int64_t sa, int64_t sb) {
            const int64_t nf = fb - fa, ns = sb - sa;
            if (nf <= 0 || ns <= 0) return;
            for (int64_t k = tid; k < nf * ns; k += kTcThreads)
                p.out[b * p.os0 + (fa + k / ns) * p.os1 + (sa + k % ns) * p.os2] = 0.0f;
        };
        if (!ok) {
            if (ftile == 0 && tid == 0) report_error(p.error_word, -1, MAS_ERR_BAD_ARGUMENT);
            zero(f0, f_end, s_a, s_b);
            continue;
        }
        const int64_t s_end = min(s_b, max(sl, s_a));        /* states computed: [s_a, s_end) */
        const int64_t f_valid = min(f_end, max(nl, f0));     /* frames computed: [f0, f_valid) */
        zero(f0, f_end, s_end, s_b);
        zero(f_valid, f_end, s_a, s_end);
        if (f_valid == f0 || s_end == s_a) continue;
        const int nf = (int)(f_valid - f0);

        /* the tile's e = [x, x*x, 0...] in TF32, zero rows past the length */
        __syncthreads(); /* the previous unit is done with the tiles */
        const TX *xb = (const TX *)p.x + b * p.xs0;
        /* four loads in flight a thread: a loop of one load and its stores
         * waits a memory latency an element */
        for (int k0 = tid; k0 < kTcFrames * J; k0 += 4 * kTcThreads) {
            float v[4];
#pragma unroll
            for (int q = 0; q < 4; q++) {
                const int k = k0 + q * kTcThreads, f = k / J, j = k - f * J;
                v[q] = k < kTcFrames * J && f < nf ? widen(xb[(f0 + f) * p.xs1 + (int64_t)j * p.xs2])
                                                   : 0.0f;
            }
#pragma unroll
            for (int q = 0; q < 4; q++) {
                const int k = k0 + q * kTcThreads, f = k / J, j = k - f * J;
                if (k < kTcFrames * J) {
                    e_s[f * LD + j] = to_operand<true>(v[q]);
                    e_s[f * LD + J + j] = to_operand<true>(ll_mul(v[q], v[q]));
                }
            }
        }
        for (int k = tid; k < kTcFrames * (KP - J2); k += kTcThreads) {
            const int f = k / (KP - J2);
            e_s[f * LD + J2 + (k - f * (KP - J2))] = 0.0f;
        }

        const int64_t ga = s_a * G, gb = s_end * G;
        /* the coefficients of Gaussians [g0, g0 + ng) into c_s, rows 0..KP
         * (zeros past 2J and past ng), 16 bytes a copy */
        auto fetch = [&](int64_t g0) {
            const int ng = (int)min((int64_t)kTcGauss, gb - g0);
            for (int k = tid; k < (KP + 1) * (kTcGauss / 4); k += kTcThreads) {
                const int r = k / (kTcGauss / 4), n = 4 * (k - r * (kTcGauss / 4));
                const bool in = r <= J2 && n < ng;
                const float *src = p.coef + (in ? (int64_t)r * p.cs1 + g0 + n : 0);
                tc_copy16(c_s + r * kTcLdc + n, src, in ? 16 : 0);
            }
            async_commit();
        };
        float run_m = -INFINITY, run_l = 0.0f; /* G > kTcGauss: thread tid's frame */
        fetch(ga);
        for (int64_t g0 = ga; g0 < gb; g0 += kTcGauss) {
            const int ng = (int)min((int64_t)kTcGauss, gb - g0);
            async_wait<0>();
            __syncthreads(); /* this chunk's coefficients (and e) are in */

            /* acc[mi][ni][c]: rows wf + 16 mi + qg (+8 for c >= 2), columns
             * wg + 8 ni + 2 qt (+1 for odd c); they start at K (row 0, in
             * float32: added exactly) */
            float acc[2][8][4];
#pragma unroll
            for (int ni = 0; ni < 8; ni++) {
                const float k0 = c_s[wg + ni * 8 + 2 * qt], k1 = c_s[wg + ni * 8 + 2 * qt + 1];
                const bool in0 = wg + ni * 8 + 2 * qt < ng, in1 = wg + ni * 8 + 2 * qt + 1 < ng;
#pragma unroll
                for (int mi = 0; mi < 2; mi++) {
                    acc[mi][ni][0] = acc[mi][ni][2] = in0 ? k0 : -INFINITY;
                    acc[mi][ni][1] = acc[mi][ni][3] = in1 ? k1 : -INFINITY;
                }
            }
            for (int kk = 0; kk < KP; kk += 8) {
                uint32_t a[2][4];
#pragma unroll
                for (int mi = 0; mi < 2; mi++) {
                    const float *ab = e_s + (wf + mi * 16 + qg) * LD + kk + qt;
                    a[mi][0] = __float_as_uint(ab[0]);
                    a[mi][1] = __float_as_uint(ab[8 * LD]);
                    a[mi][2] = __float_as_uint(ab[4]);
                    a[mi][3] = __float_as_uint(ab[8 * LD + 4]);
                }
                const float *brow = c_s + (1 + kk + qt) * kTcLdc + wg + qg;
#pragma unroll
                for (int ni = 0; ni < 8; ni++) {
                    /* a B fragment at a time (64 accumulators leave few
                     * registers), rounded to TF32 here: the copy is raw */
                    const uint32_t bq[2] = {__float_as_uint(to_operand<true>(brow[ni * 8])),
                                            __float_as_uint(to_operand<true>(brow[ni * 8 + 4 * kTcLdc]))};
#pragma unroll
                    for (int mi = 0; mi < 2; mi++)
                        mma_tf32(acc[mi][ni][0], acc[mi][ni][1], acc[mi][ni][2], acc[mi][ni][3],
                                 a[mi], bq);
                }
            }
            __syncthreads(); /* every warp is done with c_s: the next chunk's copies */
            if (g0 + kTcGauss < gb) fetch(g0 + kTcGauss);

            /* each 8-column tile's (max, sum of exp) per row, by the quad */
#pragma unroll
            for (int mi = 0; mi < 2; mi++)
#pragma unroll
                for (int h = 0; h < 2; h++) {
                    const int row = wf + mi * 16 + qg + 8 * h;
#pragma unroll
                    for (int ni = 0; ni < 8; ni++) {
                        const float v0 = acc[mi][ni][2 * h], v1 = acc[mi][ni][2 * h + 1];
                        float m = ll_max_nan(v0, v1);
                        m = ll_max_nan(m, __shfl_xor_sync(kFullMask, m, 1));
                        m = ll_max_nan(m, __shfl_xor_sync(kFullMask, m, 2));
                        const bool fin = m > -INFINITY && m < INFINITY;
                        float l = fin ? ll_fast_exp(v0 - m) + ll_fast_exp(v1 - m) : 0.0f;
                        l += __shfl_xor_sync(kFullMask, l, 1);
                        l += __shfl_xor_sync(kFullMask, l, 2);
                        if (qt == 0) {
                            pm[row * kTcTiles + (wg >> 3) + ni] = m;
                            pl[row * kTcTiles + (wg >> 3) + ni] = l;
                        }
                    }
                }
            __syncthreads();

            /* the states of the chunk, or the running pair of a state that
             * spans chunks */
            float *out_b = p.out + b * p.os0;
            if (G <= kTcGauss) {
                const int tps = (int)(G >> 3), nst = ng / (int)G;
                const int64_t s0 = g0 / G;
                for (int q = tid; q < nf * nst; q += kTcThreads) {
                    const int f = q / nst, st = q - f * nst;
                    float m = -INFINITY, l = 0.0f;
                    for (int k = 0; k < tps; k++)
                        tc_combine(m, l, pm[f * kTcTiles + st * tps + k], pl[f * kTcTiles + st * tps + k]);
                    out_b[(f0 + f) * p.os1 + (s0 + st) * p.os2] = tc_value(m, l);
                }
            } else if (tid < nf) {
                for (int k = 0; k < kTcTiles; k++)
                    tc_combine(run_m, run_l, pm[tid * kTcTiles + k], pl[tid * kTcTiles + k]);
                if ((g0 + ng - ga) % G == 0) {
                    out_b[(f0 + tid) * p.os1 + ((g0 + ng) / G - 1) * p.os2] = tc_value(run_m, run_l);
                    run_m = -INFINITY;
                    run_l = 0.0f;
                }
            }
        }
    }
}

} // namespace mas_cuda

#endif
