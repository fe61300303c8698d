/* Log-likelihoods of frames under Gaussian states on CUDA (mas.h section 6),
 * in the default precision: the fma chain of mas.h on CUDA cores, with the
 * log-add over each state's mixture done in the block before anything is
 * written, so the per-Gaussian scores [N, M] never reach device memory.
 *
 * Work: a unit is (item, a tile of FT frames, a range of Gaussians). The
 * range is cut at state boundaries: a unit owns the states whose first
 * Gaussian lies in its range (a binary search of the offsets), so no state
 * is split between blocks. A block of 256 threads takes units in turn and
 * walks a unit's Gaussians in chunks of GC. Per chunk it is a matrix product
 * with a short inner dimension: every thread keeps TF frames x TG Gaussians
 * of scores in registers, starts them at K (row 0 of the coefficients) and
 * adds the rows r = 1..2J in order, acc = fma(e[r], coef[r], acc), with
 * e = [x, x*x] (the bits the CPU gives for the same coefficients). Both
 * operands stream through shared memory in slices of KS rows (two buffers;
 * the next slice, of this chunk or the next, waits in registers while this
 * one is used); e is made on the way in from x of any dtype and strides.
 * Rows past 2J (padding to whole slices) are zeros and change nothing.
 *   - One Gaussian per state: the scores are the outputs, stored from the
 *     registers (16-byte stores where the output is contiguous).
 *   - A mixture: the chunk's scores go to shared memory and one thread per
 *     frame walks them state by state (the max, then the sum of
 *     exponentials; a state running over chunks keeps a running max and sum
 *     in registers) and writes each state once.
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

constexpr int kLLThreads = 256;
/* Thread grid 16 (frames) x 16 (Gaussians); rows of e and coef per slice. */
constexpr int kLLGrid = 16;

/* TF frames x 8 Gaussians a thread: float keeps 64 scores, double 32; KS
 * rows a slice (16 where 2J allows it without padding: fewer barriers and
 * loads per multiply-add). */
template <typename TA, int TF_, int KS_> struct LLGeom {
    static constexpr int TF = TF_, TG = 8;
    static constexpr int FT = kLLGrid * TF, GC = kLLGrid * TG, KS = KS_;
    /* slice elements each thread moves, for e and for coef */
    static constexpr int EQ = KS * FT / kLLThreads, CQ = KS * GC / kLLThreads;
};

struct LLParams {
    const void *x;
    int32_t x_dtype;
    int64_t xs0, xs1, xs2; /* strides of x: item, frame, dimension */
    int64_t B, N, J, M, n_states;
    int64_t slices;        /* ceil(2J / KS) */
    const void *coef;
    int64_t cs0, cs1, cs2; /* cs0 = 0 for a shared model */
    const int64_t *offsets;
    int64_t uniform; /* mixture_size: offsets[s] must be s * uniform (0: not stated) */
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

/* v = p[0..4), p 16-byte aligned in shared or global memory */
__device__ __forceinline__ void load4(const float *p, float (&v)[4]) {
    const float4 a = *(const float4 *)p;
    v[0] = a.x;
    v[1] = a.y;
    v[2] = a.z;
    v[3] = a.w;
}
__device__ __forceinline__ void load4(const double *p, double (&v)[4]) {
    const double2 a = *(const double2 *)p, b = *(const double2 *)(p + 2);
    v[0] = a.x;
    v[1] = a.y;
    v[2] = b.x;
    v[3] = b.y;
}

__device__ __forceinline__ float ll_fma(float a, float b, float c) { return __fmaf_rn(a, b, c); }
__device__ __forceinline__ double ll_fma(double a, double b, double c) { return __fma_rn(a, b, c); }
__device__ __forceinline__ float ll_mul(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ double ll_mul(double a, double b) { return __dmul_rn(a, b); }
__device__ __forceinline__ float ll_exp(float x) { return exp2f(x * 1.4426950408889634f); }
__device__ __forceinline__ double ll_exp(double x) { return exp(x); }
__device__ __forceinline__ float ll_log(float x) { return __logf(x); }
/* e^x for x <= 0 in a log-sum: ex2.approx, flushing results under 2^-126 */
__device__ __forceinline__ float ll_fast_exp(float x) { return __expf(x); }
__device__ __forceinline__ double ll_fast_exp(double x) { return exp(x); }
__device__ __forceinline__ float shfl_xor_acc(float v, int o) { return __shfl_xor_sync(kFullMask, v, o); }
__device__ __forceinline__ double shfl_xor_acc(double v, int o) { return __shfl_xor_sync(kFullMask, v, o); }
__device__ __forceinline__ double ll_log(double x) { return log(x); }

/* A running log-sum (max m, sum l of exp(score - m)) taking in a part's
 * (mo, lo), by the rules of mas.h: NaN wins, then +inf; -inf parts change
 * nothing; else both sums rescaled to the larger max. Shared by the
 * default kernel and the uniform-mixture one (loglik_uniform.cuh). */
template <typename TA> __device__ __forceinline__ void ll_logadd_into(TA &m, TA &l, TA mo, TA lo) {
    const TA ninf = neg_inf<TA>(), pinf = pos_inf<TA>();
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
        const TA nm = mo > m ? mo : m;
        l = l * ll_exp(m - nm) + lo * ll_exp(mo - nm);
        m = nm;
    }
}

/* A unit of work: item b, tile `ftile` of FT frames [f0, f_end), range
 * `range` of `ranges` over the Gaussians or states (tiles vary fastest),
 * and the item's lengths nl (frames), sl (states): both 0, the error
 * recorded once (by the unit of tile 0 and range 0), when out of range.
 * Shared by the default kernel and the uniform-mixture one (loglik_uniform.cuh). */
struct LLUnit {
    int64_t b, ftile, range, f0, f_end, nl, sl;
};
__device__ __forceinline__ LLUnit ll_unit(const LLParams &p, int64_t u, int64_t ranges, int FT) {
    LLUnit w;
    w.ftile = u % p.ftiles;
    w.range = (u / p.ftiles) % ranges;
    w.b = u / (p.ftiles * ranges);
    w.f0 = w.ftile * FT;
    w.f_end = min(p.N, w.f0 + (int64_t)FT);
    w.nl = p.n_len ? p.n_len[w.b] : p.N;
    w.sl = p.s_len ? p.s_len[w.b] : p.n_states;
    if (w.nl < 0 || w.nl > p.N || w.sl < 0 || w.sl > p.n_states) {
        if (w.ftile == 0 && w.range == 0 && threadIdx.x == 0)
            report_error(p.error_word, w.b, MAS_ERR_BAD_LENGTH);
        w.nl = w.sl = 0;
    }
    return w;
}

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

/* 16-byte store of 4 consecutive accumulators (float) or 2 (double), dst
 * 16-byte aligned global memory. In PTX: written as a float4 store, the
 * compiler split it into four. */
__device__ __forceinline__ void store_vec(float *dst, const float *v) {
    asm volatile("st.global.v4.f32 [%0], {%1, %2, %3, %4};" ::"l"(dst), "f"(v[0]), "f"(v[1]),
                 "f"(v[2]), "f"(v[3])
                 : "memory");
}
__device__ __forceinline__ void store_vec(double *dst, const double *v) {
    asm volatile("st.global.v2.f64 [%0], {%1, %2};" ::"l"(dst), "d"(v[0]), "d"(v[1]) : "memory");
}

/* An operand as the multiply-adds take it: itself, or rounded to TF32 (the
 * tensor cores' input, 10 mantissa bits) for the TF32 path. */
template <bool TC> __device__ __forceinline__ float to_operand(float x) {
    if (!TC) return x;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    uint32_t r;
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
    return __uint_as_float(r);
#else
    return x; /* never run: the host takes the tensor-core paths from sm_80 on */
#endif
}
template <bool TC> __device__ __forceinline__ double to_operand(double x) { return x; }

/* D = A B + D on the tensor cores, TF32 operands, float32 sums (m16n8k8). */
__device__ __forceinline__ void mma_tf32(float &c0, float &c1, float &c2, float &c3,
                                         const uint32_t a[4], const uint32_t b[2]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, "
                 "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
                 : "+f"(c0), "+f"(c1), "+f"(c2), "+f"(c3)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
    /* PTX for older GPUs (75-virtual) must not hold sm_80 instructions, or
     * the whole module fails to load there; the host never runs this */
    (void)c0, (void)c1, (void)c2, (void)c3, (void)a, (void)b;
    __trap();
#endif
}
__device__ __forceinline__ void mma_tf32(double &, double &, double &, double &, const uint32_t *,
                                         const uint32_t *) {}

template <typename TA, typename TX, int TF, int KS_, bool MIX, bool TC>
__global__ void __launch_bounds__(kLLThreads, 1) loglik_kernel(LLParams p) {
    using G = LLGeom<TA, TF, KS_>;
    constexpr int FT = G::FT, GC = G::GC, KS = G::KS, TG = G::TG, EQ = G::EQ, CQ = G::CQ;
    constexpr int VW = 16 / sizeof(TA); /* accumulators per 16-byte store */
    /* row strides of the slices: tensor-core fragments read 8 rows x 4
     * columns at once, so rows are padded to fall in different banks */
    constexpr int LDF = TC ? FT + 4 : FT, LDG = TC ? GC + 4 : GC;
    extern __shared__ __align__(16) unsigned char ll_smem[];
    TA *e_s = (TA *)ll_smem;          /* [2][KS][LDF] */
    TA *c_s = e_s + 2 * KS * LDF;     /* [2][KS][LDG] */
    TA *k_s = c_s + 2 * KS * LDG;     /* [2][GC]: row 0 (K) of the chunk */
    TA *sc_s = k_s + 2 * GC;          /* [FT][GC+1], mixtures only */
    const int tid = threadIdx.x;
    const int tg = tid % kLLGrid, tf = tid / kLLGrid;
    /* A thread's frames and Gaussians come in two runs of half its tile,
     * half a block apart, so a warp's 16-byte shared-memory reads of one
     * row are contiguous (no bank conflicts) and its stores coalesce. */
    constexpr int HF = TF / 2, HG = TG / 2;
    auto FI = [&](int i) { return i < HF ? tf * HF + i : FT / 2 + tf * HF + i - HF; };
    auto GJ = [&](int j) { return j < HG ? tg * HG + j : GC / 2 + tg * HG + j - HG; };
    /* Tensor cores (TF32, m16n8k8): a warp owns 32 frames x 64 Gaussians,
     * acc[i][j] is the fragment value (mi, ni = j, c): i = 4 mi + c. */
    const int lane = tid % 32, warp = tid / 32, fr_g = lane >> 2, fr_t = lane & 3;
    const int w_f = (warp % 4) * 32, w_g = (warp / 4) * 64;
    auto FL = [&](int i, int j) {
        (void)j;
        return TC ? w_f + (i >> 2) * 16 + fr_g + 8 * ((i >> 1) & 1) : FI(i);
    };
    auto GL = [&](int i, int j) { return TC ? w_g + j * 8 + 2 * fr_t + (i & 1) : GJ(j); };
    const int64_t units = p.B * p.granges * p.ftiles;
    const int64_t J = p.J, J2 = 2 * p.J;

    for (int64_t u = blockIdx.x; u < units; u += gridDim.x) {
        const LLUnit w = ll_unit(p, u, p.granges, FT);
        const int64_t ftile = w.ftile, grange = w.range, b = w.b, f0 = w.f0, f_end = w.f_end;
        const int64_t nl = w.nl, sl = w.sl;
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
        if (MIX) {
            /* the offsets this unit uses must rise within [0, M] */
            bool ok = true;
            for (int64_t s = s_a; s < s_end; s++)
                if (!(p.offsets[s] >= 0 && p.offsets[s] < p.offsets[s + 1] &&
                      p.offsets[s + 1] <= p.M) ||
                    (p.uniform && p.offsets[s] != s * p.uniform))
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
        const int64_t steps = (gb - ga + GC - 1) / GC * p.slices; /* (chunk, slice) pairs */

        /* slice `step` into registers: e rows [1 + k*KS, ...) of the tile's
         * frames, coef rows likewise of the chunk's Gaussians (and row 0 with
         * a chunk's first slice); zeros past 2J, the lengths or the chunk.
         * A thread always moves the same frame and the same Gaussian column. */
        /* A thread always moves the same frame and the same Gaussian column.
         * Branch-free: out-of-range elements load from a clamped address
         * inside the lengths and are then replaced by 0. */
        const int fl = tid % FT, gl = tid % GC;
        const bool f_ok = f0 + fl < f_valid;
        const TX *x_f = (const TX *)p.x + b * p.xs0 + min(f0 + fl, f_valid - 1) * p.xs1;
        const int Ji = (int)J, J2i = (int)J2;
        /* Raw loads only: what a load feeds is computed in stash(), after
         * the slice's multiply-adds, so no warp waits for a load early. */
        TX xr[EQ];
        TA cr[CQ], kr = (TA)0;
        /* (chunk, slice) pairs are counted, not divided out of a step index:
         * a 64-bit division is a long software routine on the GPU */
        const int slices = (int)p.slices;
        auto fetch = [&](int64_t chunk, int slice) {
            const int64_t gc = ga + chunk * GC;
            const int r0 = 1 + slice * KS;
            const TA *c_g = coef + min(gc + gl, gb - 1) * p.cs2;
#pragma unroll
            for (int q = 0; q < EQ; q++) {
                const int rc = min(r0 + tid / FT + q * (kLLThreads / FT), J2i);
                xr[q] = x_f[(int64_t)(rc > Ji ? rc - 1 - Ji : rc - 1) * p.xs2];
            }
#pragma unroll
            for (int q = 0; q < CQ; q++)
                cr[q] = c_g[(int64_t)min(r0 + tid / GC + q * (kLLThreads / GC), J2i) * p.cs1];
            if (r0 == 1 && tid < GC) kr = c_g[0];
        };
        auto stash = [&](int64_t step, int64_t chunk, int slice) {
            const int buf = (int)(step & 1);
            const int r0 = 1 + slice * KS;
            const bool g_ok = ga + chunk * GC + gl < gb;
#pragma unroll
            for (int q = 0; q < EQ; q++) {
                const int r = r0 + tid / FT + q * (kLLThreads / FT);
                const TA v = widen(xr[q]);
                const TA e = r > Ji ? ll_mul(v, v) : v;
                const int idx = tid + q * kLLThreads;
                e_s[buf * KS * LDF + idx / FT * LDF + idx % FT] =
                    to_operand<TC>((r <= J2i && f_ok) ? e : (TA)0);
            }
#pragma unroll
            for (int q = 0; q < CQ; q++) {
                const int r = r0 + tid / GC + q * (kLLThreads / GC);
                const int idx = tid + q * kLLThreads;
                c_s[buf * KS * LDG + idx / GC * LDG + idx % GC] =
                    to_operand<TC>((r <= J2i && g_ok) ? cr[q] : (TA)0);
            }
            if (slice == 0 && tid < GC) k_s[(chunk & 1) * GC + tid] = g_ok ? kr : (TA)0;
        };

        /* reduction state of the thread's frame (mixtures): the open state */
        int64_t cur_s = s_a, cur_begin = ga, cur_end = MIX ? p.offsets[s_a + 1] : 0;
        TA run_m = neg_inf<TA>(), run_l = (TA)0;
        int32_t run_best = -1;
        TA acc[TF][TG];

        fetch(0, 0);
        __syncthreads(); /* the previous unit is done with the buffers */
        stash(0, 0, 0);
        int64_t chunk = 0;
        int slice = 0;
        for (int64_t step = 0; step < steps; step++) {
            const int buf = (int)(step & 1);
            const int64_t next_chunk = slice + 1 == slices ? chunk + 1 : chunk;
            const int next_slice = slice + 1 == slices ? 0 : slice + 1;
            const int64_t gc = ga + chunk * GC;
            __syncthreads(); /* slice `step` is visible */
            if (step + 1 < steps) fetch(next_chunk, next_slice);
            if (slice == 0) {
                const TA *ks = k_s + (chunk & 1) * GC;
#pragma unroll
                for (int j = 0; j < TG; j++)
#pragma unroll
                    for (int i = 0; i < TF; i++) acc[i][j] = ks[GL(i, j)];
            }
            const TA *es = e_s + buf * KS * LDF;
            const TA *cs = c_s + buf * KS * LDG;
            if constexpr (TC) {
                static_assert(!TC || (TF == 8 && TG == 8 && FT == 128 && GC == 128), "TC tile");
#pragma unroll
                for (int kk = 0; kk < KS; kk += 8) {
                    uint32_t a[2][4], bq[8][2];
#pragma unroll
                    for (int mi = 0; mi < 2; mi++) {
                        const TA *ab = es + (kk + fr_t) * LDF + w_f + mi * 16 + fr_g;
                        a[mi][0] = __float_as_uint((float)ab[0]);
                        a[mi][1] = __float_as_uint((float)ab[8]);
                        a[mi][2] = __float_as_uint((float)ab[4 * LDF]);
                        a[mi][3] = __float_as_uint((float)ab[4 * LDF + 8]);
                    }
#pragma unroll
                    for (int ni = 0; ni < 8; ni++) {
                        const TA *bb = cs + (kk + fr_t) * LDG + w_g + ni * 8 + fr_g;
                        bq[ni][0] = __float_as_uint((float)bb[0]);
                        bq[ni][1] = __float_as_uint((float)bb[4 * LDG]);
                    }
#pragma unroll
                    for (int mi = 0; mi < 2; mi++)
#pragma unroll
                        for (int ni = 0; ni < 8; ni++)
                            mma_tf32(acc[4 * mi][ni], acc[4 * mi + 1][ni], acc[4 * mi + 2][ni],
                                     acc[4 * mi + 3][ni], a[mi], bq[ni]);
                }
            } else
#pragma unroll
            for (int r = 0; r < KS; r++) {
                TA ev[TF], cv[TG];
#pragma unroll
                for (int i = 0; i < TF; i++) ev[i] = es[r * LDF + FI(i)];
#pragma unroll
                for (int j = 0; j < TG; j++) cv[j] = cs[r * LDG + GJ(j)];
#pragma unroll
                for (int i = 0; i < TF; i++)
#pragma unroll
                    for (int j = 0; j < TG; j++) acc[i][j] = ll_fma(ev[i], cv[j], acc[i][j]);
            }
            if (step + 1 < steps) stash(step + 1, next_chunk, next_slice);
            const bool chunk_done = slice == slices - 1;
            chunk = next_chunk;
            slice = next_slice;
            if (!chunk_done) continue;

            /* the chunk's scores are complete */
            const int64_t ng = min((int64_t)GC, gb - gc);
            if constexpr (!MIX) {
                /* one Gaussian per state: the scores are the outputs */
                TA *out = (TA *)p.out + b * p.os0;
                const bool full = f0 + FI(TF - 1) < f_valid && GJ(TG - 1) < ng;
                const int64_t fa = f0 + FI(0), gca = gc + GJ(0);
                if (!TC && full && !p.best && p.os1 == 1 &&
                    ((uintptr_t)(out + fa + gca * p.os2) % 16) == 0 && p.os2 % VW == 0) {
                    /* frames contiguous ([B, T, S] of Glow-TTS) */
#pragma unroll
                    for (int j = 0; j < TG; j++) {
                        TA col[TF];
#pragma unroll
                        for (int i = 0; i < TF; i++) col[i] = acc[i][j];
                        TA *o = out + (gc + GJ(j)) * p.os2;
#pragma unroll
                        for (int i = 0; i < TF; i += VW) store_vec(o + f0 + FI(i), col + i);
                    }
                } else if (!TC && full && !p.best && p.os2 == 1 &&
                           ((uintptr_t)(out + fa * p.os1 + gca) % 16) == 0 && p.os1 % VW == 0) {
                    /* states contiguous */
#pragma unroll
                    for (int i = 0; i < TF; i++) {
                        TA *o = out + (f0 + FI(i)) * p.os1 + gc;
#pragma unroll
                        for (int j = 0; j < TG; j += VW) store_vec(o + GJ(j), acc[i] + j);
                    }
                } else {
#pragma unroll
                    for (int i = 0; i < TF; i++) {
#pragma unroll
                        for (int j = 0; j < TG; j++) {
                            const int64_t f = f0 + FL(i, j);
                            if (f >= f_end || GL(i, j) >= ng) continue;
                            const int64_t g = gc + GL(i, j);
                            if (f < f_valid) ll_write<TA>(p, b, f, g, acc[i][j], (int32_t)g);
                            else ll_write<TA>(p, b, f, g, (TA)0, -1);
                        }
                    }
                }
                /* frames of the tile past the length: zeros */
                if (f_valid < f_end) ll_zero<TA>(p, b, f_valid, f_end, gc, gc + ng);
            } else {
                /* a mixture: the chunk's scores through shared memory */
#pragma unroll
                for (int i = 0; i < TF; i++)
#pragma unroll
                    for (int j = 0; j < TG; j++) sc_s[FL(i, j) * (GC + 1) + GL(i, j)] = acc[i][j];
                __syncthreads();
                {
                    /* H threads a frame (adjacent lanes), each a slice of
                     * the chunk's columns; segment results combined by
                     * shuffles, so every part holds the same running state */
                    constexpr int H = kLLThreads / FT, W = GC / H;
                    const int part = tid % H, c_lo = part * W;
                    const int64_t f = f0 + tid / H;
                    const TA *row = sc_s + (tid / H) * (GC + 1);
                    const bool need_arg = p.max_mode || p.best;
                    int g = 0; /* columns of the chunk */
                    while (g < ng) {
                        const int seg_end = (int)min(cur_end - gc, ng);
                        const int lo = max(g, c_lo), hi = min(seg_end, c_lo + W);
                        TA m = neg_inf<TA>();
                        int32_t bi = INT32_MAX;
                        if (need_arg) {
                            /* the max; NaN wins, then the lowest index */
                            for (int k = lo; k < hi; k++) {
                                const TA s = row[k];
                                if (bi == INT32_MAX || s > m || (s != s && m == m)) {
                                    m = s;
                                    bi = (int32_t)(gc + k);
                                }
                            }
#pragma unroll
                            for (int o = 1; o < H; o <<= 1) {
                                const TA om = shfl_xor_acc(m, o);
                                const int32_t ob = __shfl_xor_sync(kFullMask, bi, o);
                                const bool mn = m != m, on = om != om;
                                if (om > m || (on && !mn) || ((om == m || (on && mn)) && ob < bi)) {
                                    m = om;
                                    bi = ob;
                                }
                            }
                        } else {
                            TA m4[4] = {m, m, m, m};
                            int k = lo;
                            for (; k + 4 <= hi; k += 4)
#pragma unroll
                                for (int u = 0; u < 4; u++) m4[u] = guard_max(m4[u], row[k + u]);
                            for (; k < hi; k++) m4[0] = guard_max(m4[0], row[k]);
                            m = guard_max(guard_max(m4[0], m4[1]), guard_max(m4[2], m4[3]));
#pragma unroll
                            for (int o = 1; o < H; o <<= 1) m = guard_max(m, shfl_xor_acc(m, o));
                        }
                        const bool take = run_best < 0 || m > run_m || (m != m && run_m == run_m);
                        if (!p.max_mode) {
                            /* log-add the segment into the running (max, sum) */
                            const TA ninf = neg_inf<TA>(), pinf = pos_inf<TA>();
                            const bool finite = m > ninf && m < pinf;
                            TA l = (TA)0;
                            if (finite) {
                                TA l4[4] = {0, 0, 0, 0};
                                int k = lo;
                                for (; k + 4 <= hi; k += 4)
#pragma unroll
                                    for (int u = 0; u < 4; u++) l4[u] += ll_fast_exp(row[k + u] - m);
                                for (; k < hi; k++) l4[0] += ll_fast_exp(row[k] - m);
                                l = (l4[0] + l4[1]) + (l4[2] + l4[3]);
                            }
#pragma unroll
                            for (int o = 1; o < H; o <<= 1) l += shfl_xor_acc(l, o);
                            ll_logadd_into(run_m, run_l, m, l);
                        } else if (take) {
                            run_m = m;
                        }
                        if (take) run_best = bi;
                        if (gc + seg_end == cur_end) {
                            /* the state is complete */
                            if (part == 0 && f < f_end) {
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
                /* sc_s is read again only after the next chunk's slices,
                 * each behind a barrier */
            }
        }
    }
}

} // namespace mas_cuda

#endif
