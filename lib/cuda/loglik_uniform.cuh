/* GMM log-likelihoods of a shared model whose states all have G Gaussians
 * (mas_loglik_args.mixture_size), G in {8, 16, 32, 64, 128} or a multiple
 * of 128, mixture log-add done from the accumulators, so the per-Gaussian
 * scores never leave the registers. Two ways to multiply, one kernel:
 *   - TC (precision TF32 / BF16 of mas_loglik_cuda): the tensor cores,
 *     mma.sync m16n8k8, operands rounded to TF32;
 *   - SIMT (the default precision, float32): the fma chain of mas.h on CUDA
 *     cores, each Gaussian's score the same bits as loglik_kernel.cuh's
 *     (K, then rows 1..2J in order).
 *
 * Why a kernel of its own: loglik_kernel.cuh (any mixture sizes) sends
 * every chunk's scores through shared memory, where one thread a frame
 * walks them state by state, and streams both operands in slices of 8 rows
 * with a barrier each: 2.4 ms for 5000 states x 256 Gaussians in float32,
 * 2.1 with TF32; this kernel 0.45 ms with TF32
 * (bench/results/likelihood-gpu-h100.md, with each step).
 *
 * A block (8 warps, two a multiprocessor) takes units (item, tile of
 * kUniFrames frames, range of states) in turn. The tile's expanded frames
 * e = [x, x*x] (zero rows padding 2J to KP, a multiple of 8) sit in shared
 * memory for the whole unit; the coefficients of kUniGauss Gaussians at a
 * time are copied next to them asynchronously as they lie in memory (row
 * 0, K, is the accumulators' start). The next chunk's copy starts as soon
 * as every warp is done with this chunk's products and runs under its
 * log-add.
 *   TC: e is [frame][KP] in TF32; rows 1..2J of the coefficients are
 * rounded to TF32 by the thread that copied them (K stays float32: it is
 * added exactly). Each warp multiplies 32 frames x 64 Gaussians (2 x 8
 * tiles, 64 accumulators a lane). A lane holds two columns of each
 * 8-column tile for each of its 4 rows: per row and state (up to 64
 * columns) the 4 lanes of a quad reduce theirs to a (max, sum of exp) pair
 * by shuffles, and a state of at most 64 Gaussians is written from there;
 * larger states combine the two warp columns' pairs (and the chunks before)
 * in a thread a frame.
 *   SIMT: e is [KP][frame]. Thread (tf, tg) of a 16 x 16 grid holds frames
 * tf*4 + i and 64 + tf*4 + i, Gaussians tg*4 + j and 64 + tg*4 + j (i, j <
 * 4): per row k, four 16-byte shared loads feed 64 multiply-adds. A state
 * of at most 64 Gaussians lies in one run of 4 columns of G/4 adjacent
 * lanes, which reduce it by shuffles; a larger one spans the chunk, whose
 * 16 lanes of a frame reduce both runs, and the lane tg = 0 carries the
 * running pair over chunks in shared memory (its own frames: no barrier).
 * The combination follows the default path's rules: NaN wins, then +inf;
 * all -inf gives -inf; else max + log(sum).
 *
 * Lengths as in loglik_kernel.cuh: nothing outside them is read, outputs
 * outside them are 0. The offsets are checked against s*G for the states
 * a unit owns (MAS_ERR_BAD_ARGUMENT, outputs 0). */
#ifndef MAS_CUDA_LOGLIK_UNIFORM_CUH
#define MAS_CUDA_LOGLIK_UNIFORM_CUH

#include "cuda/loglik_kernel.cuh"

namespace mas_cuda {

constexpr int kUniThreads = 256;
constexpr int kUniFrames = 128; /* frames a unit */
constexpr int kUniGauss = 128;  /* Gaussians a chunk */

/* The call as the default kernel takes it (coef float32 [1, 2J+1, M]
 * with unit stride along M, out float32), and this kernel's plan. */
struct UniParams {
    LLParams l;
    int64_t G;              /* Gaussians a state */
    int kp;                 /* 2J rounded up to a multiple of 8 */
    int64_t sranges, spr;   /* units: B x sranges x l.ftiles; spr states a range */
};

/* Row stride of the coefficient tile [KP + 1 rows][Gaussians]: 8 rows x 4
 * columns of a fragment load hit 32 banks; rows stay 16-byte aligned for
 * the SIMT path's loads. */
constexpr int kUniLdc = kUniGauss + 8;

/* Row stride of the e tile: TC [frames][KP], where a fragment load's 8 rows
 * x 4 columns hit 32 banks (columns k and k+4 side by side, for one 8-byte
 * load of a fragment's two, were tried: as 8-byte loads they cost registers
 * and spilled, as scalar ones they conflicted 2-way); SIMT [KP][frames]. */
__host__ __device__ inline int uni_lde(int kp, bool tc) { return tc ? kp + 4 : kUniFrames; }

/* Shared memory of the kernel for KP: the e tile, the coefficient tile
 * (row 0 K, rows 1..2J, zero rows to KP; as in memory, copied
 * asynchronously), and per frame two (max, sum) pairs: TC, the two warp
 * columns' (states of more than 64 Gaussians); SIMT, the running pair of a
 * state over chunks. */
__host__ __device__ inline size_t uni_smem(int kp, bool tc) {
    const size_t e = tc ? (size_t)kUniFrames * uni_lde(kp, tc) : (size_t)kp * kUniFrames;
    return (e + (size_t)(kp + 1) * kUniLdc + 2 * (size_t)kUniFrames * 2) * sizeof(float);
}

/* e^(v - m) as 2^(v log2e - m log2e): one fma and the exp unit (ml = m log2e) */
__device__ __forceinline__ float uni_exp_from(float v, float ml) {
    float r;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(__fmaf_rn(v, 1.4426950408889634f, -ml)));
    return r;
}

/* 16 bytes to shared memory, `bytes` (0, 4, 8, 12 or 16) of them from gsrc,
 * the rest zeros; asynchronous on sm_80 and later. */
__device__ __forceinline__ void uni_copy16(float *dst, const float *gsrc, int bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    const unsigned d = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(gsrc), "r"(bytes)
                 : "memory");
#else
    for (int k = 0; k < 4; k++) dst[k] = 4 * k < bytes ? gsrc[k] : 0.0f; /* reads only `bytes` */
#endif
}

__device__ __forceinline__ float uni_value(float m, float l) {
    return (m > -INFINITY && m < INFINITY) ? m + ll_log(l) : m;
}

/* The (max, sum of exp) pair of n values, NaN winning the max; the sum 0
 * when the max is not finite. The values are the caller's registers. */
template <int N> __device__ __forceinline__ float uni_max(const float *v) {
    float m = v[0];
#pragma unroll
    for (int k = 1; k < N; k++) m = guard_max(m, v[k]);
    return m;
}
template <int N> __device__ __forceinline__ float uni_sum_exp(const float *v, float m) {
    const float ml = m * 1.4426950408889634f;
    float l = 0.0f;
#pragma unroll
    for (int k = 0; k < N; k++) l += uni_exp_from(v[k], ml);
    return l;
}
/* ... over the lanes xor 1, 2, ..< L as well (L a power of two <= 16) */
template <int L> __device__ __forceinline__ float uni_lanes_max(float m) {
#pragma unroll
    for (int o = 1; o < L; o <<= 1) m = guard_max(m, __shfl_xor_sync(kFullMask, m, o));
    return m;
}
template <int L> __device__ __forceinline__ float uni_lanes_sum(float l, float m) {
#pragma unroll
    for (int o = 1; o < L; o <<= 1) l += __shfl_xor_sync(kFullMask, l, o);
    return (m > -INFINITY && m < INFINITY) ? l : 0.0f;
}

/* The e tile of kUniFrames frames from x (the tile's first frame; strides
 * xs1 along frames, xs2 along dimensions; nf frames inside the length):
 * e = [x, x*x, zeros to KP], zeros for frames >= nf. TC: [frame][KP + 4]
 * in TF32; SIMT: [KP][frames]. Every thread of the block takes part, NB
 * loads in flight each. */
template <typename TX, bool TC, int NB = 4>
__device__ __forceinline__ void uni_fill_e(float *e_s, int KP, int J, const TX *x, int64_t xs1,
                                           int64_t xs2, int nf) {
    const int tid = threadIdx.x, LD = uni_lde(KP, TC), J2 = 2 * J;
    const int n = kUniFrames * J;
    /* NB loads in flight a thread: a loop of one load and its stores
     * waits a memory latency an element. TC takes k = frame * J + j (rows
     * of e contiguous), SIMT k = j * frames + frame (columns of e
     * contiguous: conflict-free stores, and loads along frames coalesce
     * for Glow-TTS's z) */
    for (int k0 = tid; k0 < n; k0 += NB * (int)blockDim.x) {
        float v[NB];
#pragma unroll
        for (int q = 0; q < NB; q++) {
            const int k = k0 + q * (int)blockDim.x;
            const int f = TC ? k / J : k % kUniFrames, j = TC ? k - f * J : k / kUniFrames;
            v[q] = k < n && f < nf ? widen(x[f * xs1 + (int64_t)j * xs2]) : 0.0f;
        }
#pragma unroll
        for (int q = 0; q < NB; q++) {
            const int k = k0 + q * (int)blockDim.x;
            const int f = TC ? k / J : k % kUniFrames, j = TC ? k - f * J : k / kUniFrames;
            if (k < n) {
                if (TC) {
                    e_s[f * LD + j] = to_operand<true>(v[q]);
                    e_s[f * LD + J + j] = to_operand<true>(ll_mul(v[q], v[q]));
                } else {
                    e_s[j * LD + f] = v[q];
                    e_s[(J + j) * LD + f] = ll_mul(v[q], v[q]);
                }
            }
        }
    }
    for (int k = tid; k < kUniFrames * (KP - J2); k += blockDim.x) {
        if (TC) {
            const int f = k / (KP - J2);
            e_s[f * LD + J2 + (k - f * (KP - J2))] = 0.0f;
        } else {
            e_s[J2 * LD + k] = 0.0f;
        }
    }
}

/* SIMT: thread (tf, tg) of the 16 x 16 grid holds acc[i][j] for frame
 * tf*4 + i (+ 64 - 4 for i >= 4) and column tg*4 + j (likewise). */

/* The accumulators start at row 0 (K) of the coefficients: krow[128];
 * columns >= ng at -inf. */
__device__ __forceinline__ void simt_start(float (&acc)[8][8], const float *krow, int tg, int ng) {
    const float4 ka = *(const float4 *)(krow + tg * 4);
    const float4 kb = *(const float4 *)(krow + 64 + tg * 4);
    const float kv[8] = {ka.x, ka.y, ka.z, ka.w, kb.x, kb.y, kb.z, kb.w};
#pragma unroll
    for (int j = 0; j < 8; j++) {
        const int c = (j < 4 ? 0 : 64 - 4) + tg * 4 + j;
        const float k = c < ng ? kv[j] : -INFINITY;
#pragma unroll
        for (int i = 0; i < 8; i++) acc[i][j] = k;
    }
}

/* acc += e row x coefficient row, for N rows: ep the thread's frames in
 * the first e row (rows kUniFrames apart), cp its columns in the first
 * coefficient row (rows LDC apart). Four 16-byte shared loads a row feed
 * 64 fmas, in the order of mas.h's chain. */
template <int N, int LDC>
__device__ __forceinline__ void simt_rows(float (&acc)[8][8], const float *ep, const float *cp) {
#pragma unroll
    for (int k = 0; k < N; k++) {
        const float4 ea = *(const float4 *)(ep + k * kUniFrames);
        const float4 eb = *(const float4 *)(ep + k * kUniFrames + 64);
        const float4 ca = *(const float4 *)(cp + k * LDC);
        const float4 cb = *(const float4 *)(cp + k * LDC + 64);
        const float ev[8] = {ea.x, ea.y, ea.z, ea.w, eb.x, eb.y, eb.z, eb.w};
        const float cv[8] = {ca.x, ca.y, ca.z, ca.w, cb.x, cb.y, cb.z, cb.w};
#pragma unroll
        for (int i = 0; i < 8; i++)
#pragma unroll
            for (int j = 0; j < 8; j++) acc[i][j] = ll_fma(ev[i], cv[j], acc[i][j]);
    }
}

/* TPS: 8-column tiles a state covers within 64 columns (G / 8, at most 8).
 * TC: the tensor cores, else the fma chain on CUDA cores. */
template <typename TX, int TPS, bool TC>
__global__ void __launch_bounds__(kUniThreads, 2) loglik_uniform(UniParams p) {
    extern __shared__ __align__(16) float uni_sm[];
    const int KP = p.kp, LD = uni_lde(KP, TC);
    float *e_s = uni_sm;                                          /* the e tile */
    float *c_s = e_s + (TC ? kUniFrames * LD : KP * kUniFrames); /* [KP + 1][kUniLdc] */
    float *pm = c_s + (KP + 1) * kUniLdc;                         /* [kUniFrames][2] */
    float *pl = pm + kUniFrames * 2;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    /* TC: the quad's lanes and the warp's frames, Gaussians */
    const int qg = lane >> 2, qt = lane & 3;
    const int wf = (warp & 3) * 32, wg = (warp >> 2) * 64;
    /* SIMT: the thread's place in the 16 x 16 grid */
    const int tf = tid >> 4, tg = tid & 15;
    const LLParams &lp = p.l;
    const int J = (int)lp.J, J2 = 2 * J, G = (int)p.G;
    const int64_t units = lp.B * p.sranges * lp.ftiles;
    const float *coef = (const float *)lp.coef;
    float *out = (float *)lp.out;

    for (int64_t u = blockIdx.x; u < units; u += gridDim.x) {
        const LLUnit w = ll_unit(lp, u, p.sranges, kUniFrames);
        const int64_t ftile = w.ftile, srange = w.range, b = w.b, f0 = w.f0, f_end = w.f_end;
        const int64_t nl = w.nl, sl = w.sl;
        const int64_t s_a = srange * p.spr, s_b = min(lp.n_states, s_a + p.spr);
        /* the offsets of the unit's states must be s * G */
        bool ok = true;
        for (int64_t s = s_a + tid; s <= s_b; s += kUniThreads)
            if (lp.offsets[s] != s * (int64_t)G) ok = false;
        ok = __syncthreads_and(ok);
        if (!ok) {
            if (ftile == 0 && tid == 0) report_error(lp.error_word, -1, MAS_ERR_BAD_ARGUMENT);
            ll_zero<float>(lp, b, f0, f_end, s_a, s_b);
            continue;
        }
        const int64_t s_end = min(s_b, max(sl, s_a));    /* states computed: [s_a, s_end) */
        const int64_t f_valid = min(f_end, max(nl, f0)); /* frames computed: [f0, f_valid) */
        ll_zero<float>(lp, b, f0, f_end, s_end, s_b);
        ll_zero<float>(lp, b, f_valid, f_end, s_a, s_end);
        if (f_valid == f0 || s_end == s_a) continue;
        const int nf = (int)(f_valid - f0);

        /* the tile's e = [x, x*x, 0...] (TF32 for TC), zero frames past the length */
        __syncthreads(); /* the previous unit is done with the tiles */
        uni_fill_e<TX, TC>(e_s, KP, J, (const TX *)lp.x + b * lp.xs0 + f0 * lp.xs1, lp.xs1, lp.xs2, nf);

        /* The unit's Gaussians in 32-bit offsets from its first (the host
         * keeps M < 2^31): chunk at gofs, Gaussians [0, gspan). */
        const float *coef_u = coef + s_a * (int64_t)G;
        const int gspan = (int)((s_end - s_a) * G);
        float *out_u = out + b * lp.os0 + f0 * lp.os1 + s_a * lp.os2;
        /* the coefficients of Gaussians [gofs, gofs + 128) into c_s, rows
         * 0..KP (zeros past 2J and past the unit), 16 bytes a copy. A thread
         * always moves columns [n, n+4) of rows r0, r0 + RS, ...: its
         * addresses are a base and a step (no index arithmetic a copy). */
        constexpr int RS = kUniThreads / (kUniGauss / 4); /* rows a pass */
        const int r0 = tid / (kUniGauss / 4), n4 = 4 * (tid % (kUniGauss / 4));
        const int passes = (KP + 1 - r0 + RS - 1) / RS;
        float *const c_own = c_s + r0 * kUniLdc + n4;
        const int64_t src_step = (int64_t)RS * lp.cs1;
        auto fetch = [&](int gofs) {
            const bool col_in = gofs + n4 < gspan;
            const float *src = coef_u + (int64_t)r0 * lp.cs1 + gofs + n4;
            for (int j = 0; j < passes; ++j, src += src_step) {
                const bool in = col_in && r0 + j * RS <= J2;
                uni_copy16(c_own + j * RS * kUniLdc, in ? src : coef_u, in ? 16 : 0);
            }
            async_commit();
        };
        float run_m = -INFINITY, run_l = 0.0f; /* TC, G > 64: thread tid's frame */
        fetch(0);
        for (int gofs = 0; gofs < gspan; gofs += kUniGauss) {
            const int ng = min(kUniGauss, gspan - gofs);
            async_wait<0>();
            if (TC) {
                /* the b rows this thread copied, rounded to TF32 (row 0, K,
                 * stays float32: it is added exactly) */
                for (int j = r0 == 0 ? 1 : 0; j < passes; ++j) {
                    float4 *q = (float4 *)(c_own + j * RS * kUniLdc);
                    float4 v = *q;
                    v.x = to_operand<true>(v.x);
                    v.y = to_operand<true>(v.y);
                    v.z = to_operand<true>(v.z);
                    v.w = to_operand<true>(v.w);
                    *q = v;
                }
            }
            __syncthreads(); /* this chunk's coefficients (and e) are in */

            if constexpr (TC) {
                /* acc[mi][ni][c]: rows wf + 16 mi + qg (+8 for c >= 2),
                 * columns wg + 8 ni + 2 qt (+1 for odd c); they start at K */
                float acc[2][8][4];
#pragma unroll
                for (int ni = 0; ni < 8; ni++) {
                    const int c0 = wg + ni * 8 + 2 * qt;
                    const float k0 = c0 < ng ? c_s[c0] : -INFINITY, k1 = c0 + 1 < ng ? c_s[c0 + 1] : -INFINITY;
#pragma unroll
                    for (int mi = 0; mi < 2; mi++) {
                        acc[mi][ni][0] = acc[mi][ni][2] = k0;
                        acc[mi][ni][1] = acc[mi][ni][3] = k1;
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
                    const float *brow = c_s + (1 + kk + qt) * kUniLdc + wg + qg;
#pragma unroll
                    for (int ni = 0; ni < 8; ni++) {
                        /* a B fragment at a time: 64 accumulators leave few registers */
                        const uint32_t bq[2] = {__float_as_uint(brow[ni * 8]),
                                                __float_as_uint(brow[ni * 8 + 4 * kUniLdc])};
#pragma unroll
                        for (int mi = 0; mi < 2; mi++)
                            mma_tf32(acc[mi][ni][0], acc[mi][ni][1], acc[mi][ni][2], acc[mi][ni][3],
                                     a[mi], bq);
                    }
                }
                __syncthreads(); /* every warp is done with c_s: the next chunk's copies */
                if (gofs + kUniGauss < gspan) fetch(gofs + kUniGauss);

                /* per row, the (max, sum of exp) of each state's columns
                 * among the warp's 64 (TPS tiles), by the lanes of the quad;
                 * states of at most 64 Gaussians are complete here and
                 * written */
                constexpr int NQ = 8 / TPS;
#pragma unroll
                for (int mi = 0; mi < 2; mi++)
#pragma unroll
                    for (int h = 0; h < 2; h++) {
                        const int row = wf + mi * 16 + qg + 8 * h;
#pragma unroll
                        for (int q = 0; q < NQ; q++) {
                            float v[2 * TPS];
#pragma unroll
                            for (int k = 0; k < TPS; k++) {
                                v[2 * k] = acc[mi][q * TPS + k][2 * h];
                                v[2 * k + 1] = acc[mi][q * TPS + k][2 * h + 1];
                            }
                            const float m = uni_lanes_max<4>(uni_max<2 * TPS>(v));
                            const float l = uni_lanes_sum<4>(uni_sum_exp<2 * TPS>(v, m), m);
                            if (qt != 0) continue;
                            if (TPS < 8 || G == 64) {
                                const int c = gofs + wg + q * TPS * 8; /* the state's first column */
                                if (row < nf && c < gspan)
                                    out_u[row * lp.os1 + (c / G) * lp.os2] = uni_value(m, l);
                            } else {
                                pm[row * 2 + (wg >> 6)] = m;
                                pl[row * 2 + (wg >> 6)] = l;
                            }
                        }
                    }
                if (TPS == 8 && G > 64) {
                    /* a state of 128 Gaussians or more: both warp columns,
                     * and (G > 128) the chunks before, by a thread a frame */
                    __syncthreads();
                    if (tid < nf) {
                        ll_logadd_into(run_m, run_l, pm[tid * 2], pl[tid * 2]);
                        ll_logadd_into(run_m, run_l, pm[tid * 2 + 1], pl[tid * 2 + 1]);
                        if ((gofs + ng) % G == 0) {
                            out_u[tid * lp.os1 + ((gofs + ng) / G - 1) * lp.os2] = uni_value(run_m, run_l);
                            run_m = -INFINITY;
                            run_l = 0.0f;
                        }
                    }
                }
            } else {
                /* acc[i][j] (simt_start); they start at K */
                float acc[8][8];
                simt_start(acc, c_s, tg, ng);
                const float *ep = e_s + tf * 4, *cp = c_s + kUniLdc + tg * 4;
                for (int kk = 0; kk < KP; kk += 8) {
                    simt_rows<8, kUniLdc>(acc, ep, cp);
                    ep += 8 * kUniFrames;
                    cp += 8 * kUniLdc;
                }
                __syncthreads(); /* every warp is done with c_s: the next chunk's copies */
                if (gofs + kUniGauss < gspan) fetch(gofs + kUniGauss);

#pragma unroll
                for (int i = 0; i < 8; i++) {
                    const int row = (i < 4 ? 0 : 64 - 4) + tf * 4 + i;
                    if (TPS < 8 || G == 64) {
                        /* a state: one run of 4 columns of G / 4 lanes */
                        constexpr int L = TPS < 8 ? 2 * TPS : 16;
#pragma unroll
                        for (int h = 0; h < 2; h++) {
                            const float *v = acc[i] + 4 * h;
                            const float m = uni_lanes_max<L>(uni_max<4>(v));
                            const float l = uni_lanes_sum<L>(uni_sum_exp<4>(v, m), m);
                            const int c = gofs + 64 * h + tg * 4; /* the state's first column */
                            if (tg % L == 0 && row < nf && c < gspan)
                                out_u[row * lp.os1 + (c / G) * lp.os2] = uni_value(m, l);
                        }
                    } else {
                        /* the chunk is one state's: both runs, 16 lanes,
                         * and the running pair of the chunks before */
                        const float m = uni_lanes_max<16>(uni_max<8>(acc[i]));
                        const float l = uni_lanes_sum<16>(uni_sum_exp<8>(acc[i], m), m);
                        if (tg == 0 && row < nf) {
                            float rm = m, rl = l;
                            if (gofs % G != 0) {
                                rm = pm[row];
                                rl = pl[row];
                                ll_logadd_into(rm, rl, m, l);
                            }
                            if ((gofs + ng) % G == 0) {
                                out_u[row * lp.os1 + (gofs / G) * lp.os2] = uni_value(rm, rl);
                            } else {
                                pm[row] = rm;
                                pl[row] = rl;
                            }
                        }
                    }
                }
            }
        }
    }
}

} // namespace mas_cuda

#endif
