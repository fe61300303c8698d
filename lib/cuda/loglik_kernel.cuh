/* Log-likelihoods of frames under Gaussian states on CUDA (mas.h section 6),
 * in the default precision: the fma chain of mas.h on CUDA cores, with the
 * log-add over each state's mixture done in the block before anything is
 * written, so the per-Gaussian scores [N, M] never reach device memory.
 *
 * Work: a unit is (item, a tile of FT frames, a range of Gaussians). The
 * range is cut at state boundaries: a unit owns the states whose first
 * Gaussian lies in its range (a binary search of the offsets), so no state
 * is split between blocks. A block of 128 threads takes units in turn:
 *   - the tile's expanded frames e = [1, x, x*x] go to shared memory once
 *     ([P][FT], rows of frames), converted from any dtype and strides;
 *   - the unit's Gaussians are walked in chunks of GC; for each chunk the
 *     coefficient rows stream through shared memory in slices of KS rows
 *     (two buffers, the next slice in registers while this one is used), and
 *     every thread keeps TF frames x TG Gaussians of scores in registers, each
 *     the chain acc = coef[0]; acc = fma(e[r], coef[r], acc) for r = 1..2J
 *     in order (the bits the CPU gives for the same coefficients);
 *   - one Gaussian per state: the scores are the outputs, stored from the
 *     registers; a mixture: the chunk's scores go to shared memory and one
 *     thread per frame walks them state by state (max, then the sum of
 *     exponentials; a state running over chunks keeps a running max and
 *     sum in the thread's registers) and writes each state once.
 * Nothing outside the lengths is read; outputs outside them are written 0
 * (best: -1). */
#ifndef MAS_CUDA_LOGLIK_KERNEL_CUH
#define MAS_CUDA_LOGLIK_KERNEL_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#include "cuda/hard_common.cuh"
#include "cuda/soft_common.cuh"
#include "mas.h"

namespace mas_cuda {

constexpr int kLLThreads = 128;
/* Thread grid 16 (frames) x 8 (Gaussians); coefficient rows per slice. */
constexpr int kLLGridF = 16, kLLGridG = 8, kLLSlice = 16;

/* TF frames x TG Gaussians a thread: float keeps 64 scores, double 32. */
template <typename TA, int TF_> struct LLGeom {
    static constexpr int TF = TF_, TG = 8;
    static constexpr int FT = kLLGridF * TF, GC = kLLGridG * TG, KS = kLLSlice;
};

struct LLParams {
    const void *x;
    int32_t x_dtype;
    int64_t xs0, xs1, xs2; /* strides of x: item, frame, dimension */
    int64_t B, N, J, P, M, n_states;
    const void *coef;
    int64_t cs0, cs1, cs2; /* cs0 = 0 for a shared model */
    const int64_t *offsets;
    const int64_t *n_len, *s_len;
    void *out;
    int64_t os0, os1, os2;
    int32_t *best;
    int64_t bs0, bs1, bs2;
    int max_mode;
    int64_t ftiles, granges, gu; /* units: B x granges x ftiles, gu Gaussians a range */
    uint64_t *error_word;
};

template <typename TA> __device__ __forceinline__ TA load_elem(const void *base, int32_t dtype,
                                                              int64_t off) {
    switch (dtype) {
    case MAS_FLOAT32: return (TA)((const float *)base)[off];
    case MAS_FLOAT64: return (TA)((const double *)base)[off];
    case MAS_FLOAT16: return (TA)__half2float(((const __half *)base)[off]);
    case MAS_BFLOAT16: return (TA)__bfloat162float(((const __nv_bfloat16 *)base)[off]);
    default: return (TA)0;
    }
}

__device__ __forceinline__ float ll_fma(float a, float b, float c) { return __fmaf_rn(a, b, c); }
__device__ __forceinline__ double ll_fma(double a, double b, double c) { return __fma_rn(a, b, c); }
__device__ __forceinline__ float ll_exp(float x) { return exp2f(x * 1.4426950408889634f); }
__device__ __forceinline__ double ll_exp(double x) { return exp(x); }
__device__ __forceinline__ float ll_log(float x) { return __logf(x); }
__device__ __forceinline__ double ll_log(double x) { return log(x); }

/* First s in [0, n] with offsets[s] >= g (offsets[n] is M). */
__device__ __forceinline__ int64_t ll_lower_bound(const int64_t *offsets, int64_t n, int64_t g) {
    int64_t lo = 0, hi = n;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (offsets[mid] < g) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

template <typename TA>
__device__ __forceinline__ void ll_write(const LLParams &p, int64_t b, int64_t f, int64_t s, TA v,
                                         int32_t bi) {
    ((TA *)p.out)[b * p.os0 + f * p.os1 + s * p.os2] = v;
    if (p.best) p.best[b * p.bs0 + f * p.bs1 + s * p.bs2] = bi;
}

/* Zeros (best -1) for frames [f0, f1) x states [s0, s1) of item b. */
template <typename TA>
__device__ void ll_zero(const LLParams &p, int64_t b, int64_t f0, int64_t f1, int64_t s0,
                        int64_t s1) {
    const int64_t nf = f1 - f0, ns = s1 - s0;
    if (nf <= 0 || ns <= 0) return;
    for (int64_t k = threadIdx.x; k < nf * ns; k += blockDim.x) {
        int64_t f = f0 + k % nf, s = s0 + k / nf;
        ll_write<TA>(p, b, f, s, (TA)0, -1);
    }
}

template <typename TA, int TF, bool MIX>
__global__ void __launch_bounds__(kLLThreads) loglik_kernel(LLParams p) {
    using G = LLGeom<TA, TF>;
    constexpr int FT = G::FT, GC = G::GC, KS = G::KS, TG = G::TG;
    extern __shared__ __align__(16) unsigned char ll_smem[];
    TA *e_s = (TA *)ll_smem;                       /* [P][FT] */
    TA *c_s = e_s + p.P * FT;                      /* [2][KS][GC] */
    TA *sc_s = c_s + 2 * KS * GC;                  /* [FT][GC+1], mixtures only */
    const int tid = threadIdx.x;
    const int tg = tid % kLLGridG, tf = tid / kLLGridG;
    const int64_t units = p.B * p.granges * p.ftiles;

    for (int64_t u = blockIdx.x; u < units; u += gridDim.x) {
        const int64_t ftile = u % p.ftiles, grange = (u / p.ftiles) % p.granges;
        const int64_t b = u / (p.ftiles * p.granges);
        const int64_t f0 = ftile * FT, f_end = min(p.N, f0 + (int64_t)FT);
        int64_t nl = p.n_len ? p.n_len[b] : p.N, sl = p.s_len ? p.s_len[b] : p.n_states;
        if (nl < 0 || nl > p.N || sl < 0 || sl > p.n_states) {
            if (ftile == 0 && grange == 0 && tid == 0) report_error(p.error_word, b, MAS_ERR_BAD_LENGTH);
            nl = sl = 0;
        }
        /* the unit's states [s_a, s_b) */
        const int64_t g_lo = grange * p.gu, g_hi = min(p.M, g_lo + p.gu);
        int64_t s_a, s_b;
        if (MIX) {
            s_a = ll_lower_bound(p.offsets, p.n_states, g_lo);
            s_b = g_hi == p.M ? p.n_states : ll_lower_bound(p.offsets, p.n_states, g_hi);
            if (s_b < s_a) s_b = s_a;
        } else {
            s_a = g_lo;
            s_b = g_hi;
        }
        const int64_t s_end = min(s_b, max(sl, s_a)); /* states computed: [s_a, s_end) */
        bool ok = true;
        if (MIX) {
            /* the offsets this unit uses must rise within [0, M] */
            for (int64_t s = s_a; s < s_end; s++)
                if (!(p.offsets[s] >= 0 && p.offsets[s] < p.offsets[s + 1] &&
                      p.offsets[s + 1] <= p.M))
                    ok = false;
            if (grange == 0 && p.offsets[0] != 0) ok = false;
            if (grange == p.granges - 1 && p.offsets[p.n_states] != p.M) ok = false;
            if (!ok) {
                if (ftile == 0 && tid == 0) report_error(p.error_word, -1, MAS_ERR_BAD_ARGUMENT);
                ll_zero<TA>(p, b, f0, f_end, s_a, s_b);
                continue;
            }
        }
        ll_zero<TA>(p, b, f0, f_end, s_end, s_b);
        const int64_t f_valid = min(f_end, max(nl, f0)); /* frames computed: [f0, f_valid) */
        if (f_valid == f0 || s_end == s_a) {
            ll_zero<TA>(p, b, f0, f_end, s_a, s_end);
            continue;
        }
        const int64_t ga = MIX ? p.offsets[s_a] : s_a, gb = MIX ? p.offsets[s_end] : s_end;
        const TA *coef = (const TA *)p.coef + b * p.cs0;

        __syncthreads(); /* the previous unit is done with e_s */
        /* expanded frames: e_s[1+j][f] = x, e_s[1+J+j][f] = x*x; frames past
         * the length read nothing and hold 0 */
        {
            const int64_t total = (int64_t)FT * p.J;
            const bool frame_fast = llabs(p.xs1) <= llabs(p.xs2);
            for (int64_t k = tid; k < total; k += kLLThreads) {
                int64_t fl = frame_fast ? k % FT : k / p.J, j = frame_fast ? k / FT : k % p.J;
                int64_t f = f0 + fl;
                TA v = f < f_valid ? load_elem<TA>(p.x, p.x_dtype, b * p.xs0 + f * p.xs1 + j * p.xs2)
                                   : (TA)0;
                e_s[(1 + j) * FT + fl] = v;
                e_s[(1 + p.J + j) * FT + fl] = v * v;
            }
        }

        /* reduction state of the thread's frame (mixtures): the open state */
        int64_t cur_s = s_a, cur_begin = ga, cur_end = MIX ? p.offsets[s_a + 1] : 0;
        TA run_m = neg_inf<TA>(), run_l = (TA)0;
        int32_t run_best = -1;

        for (int64_t gc = ga; gc < gb; gc += GC) {
            const int64_t ng = min((int64_t)GC, gb - gc);
            TA acc[TF][TG];
            TA pre[KS * GC / kLLThreads];
            const int64_t slices = (p.P + KS - 1) / KS;
            auto fetch = [&](int64_t r0) {
#pragma unroll
                for (int q = 0; q < KS * GC / kLLThreads; q++) {
                    int idx = tid + q * kLLThreads, rr = idx / GC, gl = idx % GC;
                    int64_t r = r0 + rr;
                    pre[q] = (r < p.P && gl < ng) ? coef[r * p.cs1 + (gc + gl) * p.cs2] : (TA)0;
                }
            };
            auto stash = [&](int buf) {
#pragma unroll
                for (int q = 0; q < KS * GC / kLLThreads; q++)
                    c_s[buf * KS * GC + tid + q * kLLThreads] = pre[q];
            };
            fetch(0);
            __syncthreads(); /* e_s written; c_s free */
            stash(0);
            for (int64_t sl_i = 0; sl_i < slices; sl_i++) {
                const int buf = (int)(sl_i & 1);
                __syncthreads(); /* slice sl_i visible */
                if (sl_i + 1 < slices) fetch((sl_i + 1) * KS);
                const TA *cs = c_s + buf * KS * GC + tg * TG;
                const int64_t r0 = sl_i * KS;
                const int rows = (int)min((int64_t)KS, p.P - r0);
                int rr = 0;
                if (r0 == 0) {
#pragma unroll
                    for (int j = 0; j < TG; j++) {
                        TA c = cs[j];
#pragma unroll
                        for (int i = 0; i < TF; i++) acc[i][j] = c;
                    }
                    rr = 1;
                }
                const TA *es = e_s + r0 * FT + tf * TF;
                if (rows == KS && rr == 0) {
#pragma unroll
                    for (int r = 0; r < KS; r++) {
                        TA ev[TF], cv[TG];
#pragma unroll
                        for (int i = 0; i < TF; i++) ev[i] = es[r * FT + i];
#pragma unroll
                        for (int j = 0; j < TG; j++) cv[j] = cs[r * GC + j];
#pragma unroll
                        for (int i = 0; i < TF; i++)
#pragma unroll
                            for (int j = 0; j < TG; j++) acc[i][j] = ll_fma(ev[i], cv[j], acc[i][j]);
                    }
                } else {
                    for (int r = rr; r < rows; r++) {
                        TA ev[TF], cv[TG];
#pragma unroll
                        for (int i = 0; i < TF; i++) ev[i] = es[r * FT + i];
#pragma unroll
                        for (int j = 0; j < TG; j++) cv[j] = cs[r * GC + j];
#pragma unroll
                        for (int i = 0; i < TF; i++)
#pragma unroll
                            for (int j = 0; j < TG; j++) acc[i][j] = ll_fma(ev[i], cv[j], acc[i][j]);
                    }
                }
                if (sl_i + 1 < slices) stash(buf ^ 1);
            }

            if constexpr (!MIX) {
                /* one Gaussian per state: the scores are the outputs */
#pragma unroll
                for (int i = 0; i < TF; i++) {
                    const int64_t f = f0 + tf * TF + i;
                    if (f >= f_end) continue;
#pragma unroll
                    for (int j = 0; j < TG; j++) {
                        const int64_t g = gc + tg * TG + j;
                        if (g - gc >= ng) continue;
                        if (f < f_valid) ll_write<TA>(p, b, f, g, acc[i][j], (int32_t)g);
                        else ll_write<TA>(p, b, f, g, (TA)0, -1);
                    }
                }
            } else {
            /* a mixture: the chunk's scores through shared memory */
#pragma unroll
            for (int i = 0; i < TF; i++)
#pragma unroll
                for (int j = 0; j < TG; j++) sc_s[(tf * TF + i) * (GC + 1) + tg * TG + j] = acc[i][j];
            __syncthreads();
            if (tid < FT) {
                const int64_t f = f0 + tid;
                const TA *row = sc_s + tid * (GC + 1) - gc;
                int64_t g = gc;
                while (g < gc + ng) {
                    const int64_t seg_end = min(cur_end, gc + ng);
                    /* the segment's max (NaN wins; the lowest index on ties) */
                    TA m = neg_inf<TA>();
                    int32_t bi = (int32_t)g;
                    for (int64_t k = g; k < seg_end; k++) {
                        TA s = row[k];
                        if (s > m || (s != s && m == m)) {
                            m = s;
                            bi = (int32_t)k;
                        }
                    }
                    const bool take = run_best < 0 || m > run_m || (m != m && run_m == run_m);
                    if (!p.max_mode) {
                        /* log-add the segment into the running (max, sum) */
                        const TA ninf = neg_inf<TA>(), pinf = pos_inf<TA>();
                        if (run_m != run_m) {
                        } else if (m != m) {
                            run_m = m;
                        } else if (m == ninf) {
                        } else if (m == pinf || run_m == pinf) {
                            run_m = pinf;
                        } else {
                            TA l = (TA)0;
                            for (int64_t k = g; k < seg_end; k++) l += ll_exp(row[k] - m);
                            if (run_m == ninf) {
                                run_m = m;
                                run_l = l;
                            } else {
                                const TA nm = m > run_m ? m : run_m;
                                run_l = run_l * ll_exp(run_m - nm) + l * ll_exp(m - nm);
                                run_m = nm;
                            }
                        }
                    } else if (take) {
                        run_m = m;
                    }
                    if (take) run_best = bi;
                    if (seg_end == cur_end) {
                        /* the state is complete */
                        if (f < f_end) {
                            TA v = run_m;
                            if (!p.max_mode && cur_end - cur_begin > 1 && run_m > neg_inf<TA>() &&
                                run_m < pos_inf<TA>())
                                v = run_m + ll_log(run_l);
                            if (f < f_valid) ll_write<TA>(p, b, f, cur_s, v, run_best);
                            else ll_write<TA>(p, b, f, cur_s, (TA)0, -1);
                        }
                        cur_s++;
                        cur_begin = cur_end;
                        cur_end = cur_s < s_end ? p.offsets[cur_s + 1] : cur_end;
                        run_m = neg_inf<TA>();
                        run_l = (TA)0;
                        run_best = -1;
                    }
                    g = seg_end;
                }
            }
            __syncthreads(); /* sc_s free for the next chunk */
            }
        }
    }
}

} // namespace mas_cuda

#endif
