/* Log-likelihoods of frames under one diagonal Gaussian a state with a model
 * per item (mas.h section 6: offsets NULL, coef [B, 2J+1, M]): Glow-TTS's
 * logp, the default precision (the fma chain of mas.h on CUDA cores, float32
 * arithmetic), each score the same bits as loglik_kernel.cuh's and the CPU's
 * (K, then rows 1..2J in order).
 *
 * Why a kernel of its own: with one Gaussian a state there is no log-add,
 * so the scores are the outputs and the cost is the multiply-adds (2J a
 * score). loglik_kernel.cuh streams both operands through registers in
 * slices of 8-16 rows and runs one block of 211 registers a multiprocessor:
 * 0.49 ms for B=32 T=512 S=2048 D=80 on an H100, a third of the FP32 peak.
 * Here, as in loglik_uniform.cuh's SIMT path: two blocks of 8 warps a
 * multiprocessor, a unit (item, tile of kUniFrames frames, range of states)
 * keeps its e = [x, x*x] tile in shared memory ([KP][frames]), a thread
 * holds 8 frames x 8 states (four 16-byte shared loads a row for 64
 * fmas). With 2J = 160 the coefficients of a chunk of 128 states do not fit
 * next to e for two blocks, so they stream through a ring of slices,
 * copied asynchronously (cp.async) across chunk boundaries; row 0 (K)
 * comes with a chunk's first slice into a buffer of its own. Slices are 32
 * rows in a ring of two (one read, one in flight) where 2J is a multiple
 * of 32, else 16 rows in a ring of three: a slice costs a barrier and ~120
 * instructions of copy addressing a thread, so 32 rows took the Glow-TTS
 * row from 300 to 289 us (H100, 2026-11-27), and 2 x 33 rows of 128 states
 * next to an e tile of 160 rows are exactly the 113 KB that two blocks a
 * multiprocessor may have.
 *
 * Lengths: nothing outside them is read (the copies of the last columns of
 * a range read only the states inside it); outputs outside them are 0. */
#ifndef MAS_CUDA_LOGLIK_ITEMS_CUH
#define MAS_CUDA_LOGLIK_ITEMS_CUH

#include "cuda/loglik_uniform.cuh"

namespace mas_cuda {

struct ItemsParams {
    LLParams l;
    int kp;               /* 2J rounded up to whole slices */
    int64_t ranges, spr;  /* units: B x ranges x l.ftiles; spr states a range */
};

/* Rows of coefficients a slice for 2J, and slices in the ring for them */
__host__ __device__ constexpr int items_rows(int64_t J) { return (2 * J) % 32 == 0 ? 32 : 16; }
__host__ __device__ constexpr int items_stages(int rows) { return rows == 32 ? 2 : 3; }

/* 2J rounded up to whole slices */
__host__ __device__ inline int items_kp(int64_t J) {
    const int r = items_rows(J);
    return (int)((2 * J + r - 1) / r * r);
}

/* Shared memory: the e tile [KP][frames], the ring [stages][rows][128] and
 * K of as many chunks [stages][128] (chunk c's K is copied stages - 1
 * slices before its first, which with one slice a chunk is during chunk
 * c - stages + 1). */
__host__ __device__ inline size_t items_smem(int64_t J) {
    const int r = items_rows(J);
    return ((size_t)items_kp(J) * kUniFrames + (size_t)items_stages(r) * (r + 1) * kUniGauss) *
           sizeof(float);
}

template <typename TX, int ROWS>
__global__ void __launch_bounds__(kUniThreads, 2) loglik_items(ItemsParams p) {
    constexpr int STAGES = items_stages(ROWS);
    extern __shared__ __align__(16) float it_sm[];
    const int KP = p.kp;
    float *e_s = it_sm;                          /* [KP][kUniFrames] */
    float *ring = e_s + KP * kUniFrames;         /* [STAGES][ROWS][kUniGauss] */
    float *k_s = ring + STAGES * ROWS * kUniGauss; /* [STAGES][kUniGauss] */
    const int tid = threadIdx.x, tf = tid >> 4, tg = tid & 15;
    const LLParams &lp = p.l;
    const int J = (int)lp.J, J2 = 2 * J, nsl = KP / ROWS;
    const int64_t units = lp.B * p.ranges * lp.ftiles;
    float *out = (float *)lp.out;

    for (int64_t u = blockIdx.x; u < units; u += gridDim.x) {
        const LLUnit w = ll_unit(lp, u, p.ranges, kUniFrames);
        const int64_t b = w.b, f0 = w.f0, f_end = w.f_end;
        const int64_t s_a = w.range * p.spr, s_b = min(lp.n_states, s_a + p.spr);
        const int64_t s_end = min(s_b, max(w.sl, s_a)); /* states computed: [s_a, s_end) */
        const int64_t f_valid = min(f_end, max(w.nl, f0)); /* frames computed: [f0, f_valid) */
        auto zero = [&](int64_t fa, int64_t fb, int64_t sa, int64_t sb) {
            const int64_t nf = fb - fa, ns = sb - sa;
            if (nf <= 0 || ns <= 0) return;
            for (int64_t k = tid; k < nf * ns; k += kUniThreads)
                out[b * lp.os0 + (fa + k % nf) * lp.os1 + (sa + k / nf) * lp.os2] = 0.0f;
        };
        zero(f0, f_end, s_end, s_b);
        zero(f_valid, f_end, s_a, s_end);
        if (f_valid == f0 || s_end == s_a) continue;
        const int nf = (int)(f_valid - f0);
        const int gspan = (int)(s_end - s_a); /* states of the unit, < 2^31 (host) */

        __syncthreads(); /* the previous unit is done with e, the ring and K */

        /* slice q = (chunk q / nsl, slice q % nsl): rows 1 + ROWS slice ..
         * of states [128 chunk, +128) into ring stage q % STAGES; a thread
         * copies columns [n4, n4 + 4) of rows r0, r0 + 8, ..., and of row 0
         * (K) with a chunk's first slice (threads 0..31). Columns past the
         * unit's states are zero-filled, not read. */
        const float *coef_u = (const float *)lp.coef + b * lp.cs0 + s_a;
        const int r0 = tid >> 5, n4 = 4 * (tid & 31);
        const int total = (gspan + kUniGauss - 1) / kUniGauss * nsl;
        auto fetch = [&](int q, int chunk, int slice) {
            if (q < total) {
                const int col = chunk * kUniGauss + n4;
                const int bytes = 4 * max(0, min(4, gspan - col));
                float *dst = ring + (q % STAGES) * ROWS * kUniGauss + r0 * kUniGauss + n4;
#pragma unroll
                for (int h = 0; h < ROWS / 8; h++) {
                    const int r = 1 + slice * ROWS + r0 + 8 * h;
                    const bool in = r <= J2 && bytes > 0;
                    uni_copy16(dst + 8 * h * kUniGauss, in ? coef_u + (int64_t)r * lp.cs1 + col : coef_u,
                               in ? bytes : 0);
                }
                if (slice == 0 && tid < 32)
                    uni_copy16(k_s + (chunk % STAGES) * kUniGauss + n4, bytes > 0 ? coef_u + col : coef_u,
                               bytes);
            }
            async_commit(); /* a group every slice, empty past the end: the wait stays exact */
        };
        /* the slice fetched next: STAGES - 1 ahead of the one computed */
        int fq = 0, fchunk = 0, fslice = 0;
        auto fetch_next = [&]() {
            fetch(fq, fchunk, fslice);
            fq++;
            if (++fslice == nsl) {
                fslice = 0;
                fchunk++;
            }
        };
        for (int k = 0; k < STAGES - 1; k++) fetch_next(); /* in flight while e is filled */
        /* a unit is a few chunks here: the fill's memory latency shows, so
         * more loads in flight than loglik_uniform.cuh's */
        uni_fill_e<TX, false, 10>(e_s, KP, J, (const TX *)lp.x + b * lp.xs0 + f0 * lp.xs1, lp.xs1,
                                  lp.xs2, nf);

        float acc[8][8];
        int q = 0;
        for (int chunk = 0; chunk * kUniGauss < gspan; chunk++) {
            const int gofs = chunk * kUniGauss;
            for (int slice = 0; slice < nsl; slice++, q++) {
                async_wait<STAGES - 2>();
                __syncthreads(); /* slice q (and e) visible; stage (q - 1) % STAGES free */
                fetch_next();
                if (slice == 0) {
                    const float *kc = k_s + (chunk % STAGES) * kUniGauss;
                    const float4 ka = *(const float4 *)(kc + tg * 4);
                    const float4 kb = *(const float4 *)(kc + 64 + tg * 4);
                    const float kv[8] = {ka.x, ka.y, ka.z, ka.w, kb.x, kb.y, kb.z, kb.w};
#pragma unroll
                    for (int j = 0; j < 8; j++)
#pragma unroll
                        for (int i = 0; i < 8; i++) acc[i][j] = kv[j];
                }
                /* the rows as loglik_uniform.cuh's simt_rows multiplies them,
                 * written out here (and the zeros above not by ll_zero):
                 * through those helpers ptxas spilled this kernel at 128
                 * registers (48-88 bytes) */
                const float *ep = e_s + slice * ROWS * kUniFrames + tf * 4;
                const float *cp = ring + (q % STAGES) * ROWS * kUniGauss + tg * 4;
#pragma unroll
                for (int k = 0; k < ROWS; k++) {
                    const float4 ea = *(const float4 *)(ep + k * kUniFrames);
                    const float4 eb = *(const float4 *)(ep + k * kUniFrames + 64);
                    const float4 ca = *(const float4 *)(cp + k * kUniGauss);
                    const float4 cb = *(const float4 *)(cp + k * kUniGauss + 64);
                    const float ev[8] = {ea.x, ea.y, ea.z, ea.w, eb.x, eb.y, eb.z, eb.w};
                    const float cv[8] = {ca.x, ca.y, ca.z, ca.w, cb.x, cb.y, cb.z, cb.w};
#pragma unroll
                    for (int i = 0; i < 8; i++)
#pragma unroll
                        for (int j = 0; j < 8; j++) acc[i][j] = ll_fma(ev[i], cv[j], acc[i][j]);
                }
            }
            /* the chunk's scores are the outputs: frame tf*4 + i (+ 64 - 4
             * for i >= 4), state gofs + tg*4 + j (likewise) */
            float *o = out + b * lp.os0 + f0 * lp.os1 + (s_a + gofs) * lp.os2;
            const bool vec = lp.os1 == 1 && lp.os2 % 4 == 0 && ((uintptr_t)out % 16) == 0 &&
                             (lp.os0 % 4) == 0 && (f0 % 4) == 0;
#pragma unroll
            for (int j = 0; j < 8; j++) {
                const int g = (j < 4 ? 0 : 64 - 4) + tg * 4 + j;
                if (gofs + g >= gspan) continue;
#pragma unroll
                for (int h = 0; h < 2; h++) {
                    const int fa = 64 * h + tf * 4; /* the run's first frame */
                    float *d = o + (int64_t)g * lp.os2 + (int64_t)fa * lp.os1;
                    if (vec && fa + 4 <= nf) {
                        const float v[4] = {acc[4 * h][j], acc[4 * h + 1][j], acc[4 * h + 2][j],
                                            acc[4 * h + 3][j]};
                        store_vec(d, v);
                    } else {
#pragma unroll
                        for (int i = 0; i < 4; i++)
                            if (fa + i < nf) d[(int64_t)i * lp.os1] = acc[4 * h + i][j];
                    }
                }
            }
        }
    }
}

} // namespace mas_cuda

#endif
