/* The cells of the tensor-core precision (MAS_PRECISION_TF32) for one
 * Gaussian a state, shared by the likelihood kernel (loglik_items_tc.cuh)
 * and the fused alignment (fused_forward.cuh), so that
 * align_gaussian(precision=tf32) is align(gaussian_loglik(precision=tf32))
 * bit for bit, as the default precision is.
 *
 * A cell (token i, frame f) starts at K_i (float32, not rounded) and adds,
 * eight rows at a time in order, the products of the rows of
 * e = [x, x*x, zeros to KP] with coefficient rows 1..2J (zeros to KP),
 * both rounded to TF32 (cvt.rna; the square is rounded after it is taken
 * in float32), on the tensor cores (mma m16n8k8, float32 sums). KP is 2J
 * rounded up to a multiple of 8. An mma's result for one cell depends only
 * on that cell's row of A, column of B and accumulator, so any tiling of
 * the cells gives the same bits as long as the eight-row groups are these.
 *
 * Operands in shared memory, rows of 8-row groups:
 *   coefficients c[r][token], row stride ldc = tokens + 8,
 *   frames       e[r][frame], row stride lde = frames + 8,
 * where the +8 puts a fragment load's 4 rows x 8 columns in 32 banks.
 * A warp computes 16 tokens x 8 NI frames: acc[ni][c] is token
 * tc_token(c), frame 8 ni + tc_frame(c) of its block. */
#ifndef MAS_CUDA_TC_CELLS_CUH
#define MAS_CUDA_TC_CELLS_CUH

#include "cuda/loglik_kernel.cuh"  /* to_operand, mma_tf32 */
#include "cuda/loglik_uniform.cuh" /* uni_copy16 */

namespace mas_cuda {

/* Row-stride padding of both operands */
constexpr int kTcPad = 8;

/* 2J rounded up to whole eight-row groups */
__host__ __device__ inline int tc_rows(int64_t J) { return (int)((2 * J + 7) / 8 * 8); }

/* The token and frame of accumulator c of a lane, within the warp's 16 x 8 tile */
__device__ __forceinline__ int tc_token(int lane, int c) { return (lane >> 2) + 8 * (c >> 1); }
__device__ __forceinline__ int tc_frame(int lane, int c) { return 2 * (lane & 3) + (c & 1); }

/* The accumulators at K of the warp's 16 tokens (k: their first) */
template <int NI>
__device__ __forceinline__ void tc_start(float (&acc)[NI][4], const float *k, int lane) {
    const float k0 = k[lane >> 2], k1 = k[(lane >> 2) + 8];
#pragma unroll
    for (int ni = 0; ni < NI; ni++) {
        acc[ni][0] = acc[ni][1] = k0;
        acc[ni][2] = acc[ni][3] = k1;
    }
}

/* acc += rows [0, nk) of c (at the warp's first token) times the same rows
 * of e (at the warp's first frame); nk a multiple of 8, operands already
 * in TF32. */
template <int NI>
__device__ __forceinline__ void tc_products(float (&acc)[NI][4], const float *c, int ldc,
                                            const float *e, int lde, int nk, int lane) {
    const int g = lane >> 2, t = lane & 3;
#pragma unroll 2
    for (int kk = 0; kk < nk; kk += 8) {
        const float *cr = c + (kk + t) * ldc + g;
        const uint32_t a[4] = {__float_as_uint(cr[0]), __float_as_uint(cr[8]),
                               __float_as_uint(cr[4 * ldc]), __float_as_uint(cr[4 * ldc + 8])};
        const float *er = e + (kk + t) * lde + g;
#pragma unroll
        for (int ni = 0; ni < NI; ni++) {
            const uint32_t bq[2] = {__float_as_uint(er[8 * ni]), __float_as_uint(er[4 * lde + 8 * ni])};
            mma_tf32(acc[ni][0], acc[ni][1], acc[ni][2], acc[ni][3], a, bq);
        }
    }
}

/* Rows [r0, r0 + nr) of an e tile of up to 64 frames, row stride ld: x
 * (x points at the tile's first frame; strides xs1 along frames, xs2 along
 * dimensions) for rows r < J, its squares (ll_mul, as every likelihood
 * kernel) for J <= r < 2J, zeros past 2J (padding) and for frames >= nf;
 * rounded to TF32 with TC. Shared by the fused forward (either precision)
 * and loglik_items_tc.cuh, so both round the same values the same way.
 * Threads tid of nt, NB loads in flight each. */
template <typename TA, typename TX, bool TC>
__device__ __forceinline__ void tile_e_rows(TA *e, int ld, const TX *x, int64_t xs1, int64_t xs2,
                                            int J, int nf, int r0, int nr, int tid, int nt) {
    constexpr int NB = 8, FR = 64;
    const int n = nr * FR;
    for (int k0 = tid; k0 < n; k0 += NB * nt) {
        TA v[NB];
#pragma unroll
        for (int q = 0; q < NB; q++) {
            const int k = k0 + q * nt, r = r0 + k / FR, f = k % FR;
            const int j = r < J ? r : r - J;
            v[q] = k < n && r < 2 * J && f < nf ? (TA)widen(x[f * xs1 + (int64_t)j * xs2]) : (TA)0;
        }
#pragma unroll
        for (int q = 0; q < NB; q++) {
            const int k = k0 + q * nt, rl = k / FR;
            if (k < n) e[rl * ld + k % FR] = to_operand<TC>(r0 + rl < J ? v[q] : ll_mul(v[q], v[q]));
        }
    }
}

/* Whether float frames x (strides xs0 items, xs1 frames, xs2 dimensions,
 * in elements) can be staged by stage_x16: frames contiguous and every
 * item's dimension rows 16-byte aligned. Tile starts are multiples of 64
 * frames. Host code (the launch plans). */
inline bool stage_x16_ok(const void *x, int64_t xs0, int64_t xs1, int64_t xs2) {
    return xs1 == 1 && xs2 % 4 == 0 && xs0 % 4 == 0 && (uintptr_t)x % 16 == 0;
}

/* Float frames that stage_x16_ok: a tile's x comes into a stage [J][64] by
 * 16-byte cp.async, four frames a copy (per-element copies cost ~40
 * instructions an element in address arithmetic), zeros at frames >= nf,
 * whose bytes are not read. Threads me of nt; the caller commits and
 * waits. */
__device__ __forceinline__ void stage_x16(float *st, const float *x, int64_t xs2, int J, int nf,
                                          int me, int nt) {
    for (int k = me; k < J * 16; k += nt) {
        const int j = k >> 4, f = 4 * (k & 15);
        const int bytes = 4 * max(0, min(4, nf - f));
        const float *src = x + (int64_t)j * xs2 + f;
        uni_copy16(st + j * 64 + f, bytes ? src : x, bytes);
    }
}

/* The stage [J][64] into e (row stride lde, a multiple of four): row j
 * its x, row J + j the squares (ll_mul), TF32 with TC, four frames a step:
 * the values tile_e_rows writes. */
template <bool TC>
__device__ __forceinline__ void staged_to_e(float *e, int lde, const float *st, int J, int me,
                                            int nt) {
    for (int k = me; k < J * 16; k += nt) {
        const int j = k >> 4, f = 4 * (k & 15);
        const float4 v = *(const float4 *)(st + j * 64 + f);
        *(float4 *)(e + j * lde + f) = make_float4(to_operand<TC>(v.x), to_operand<TC>(v.y),
                                                   to_operand<TC>(v.z), to_operand<TC>(v.w));
        *(float4 *)(e + (j + J) * lde + f) =
            make_float4(to_operand<TC>(ll_mul(v.x, v.x)), to_operand<TC>(ll_mul(v.y, v.y)),
                        to_operand<TC>(ll_mul(v.z, v.z)), to_operand<TC>(ll_mul(v.w, v.w)));
    }
}

} // namespace mas_cuda

#endif
