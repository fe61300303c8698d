/* The dense path on CUDA, written in one pass with no separate memset: every
 * element of the view, zeros outside the lengths too. A row of the output is
 * a run of the view's most contiguous axis: along frames, row (b,i) is one in
 * [run_begin, run_end); along tokens, row (b,j) is one at frame_token. */
#ifndef MAS_CUDA_HARD_PATH_CUH
#define MAS_CUDA_HARD_PATH_CUH

#include "cuda/hard_common.cuh"

namespace mas_cuda {

struct PathArgs {
    unsigned char *data;
    int64_t s0, s1, s2; /* element strides */
    int64_t B, T, S;
    uint64_t one;       /* the bit pattern of 1 in the output dtype */
    const int32_t *frame_token, *run_begin, *run_end;
    int rows_over_frames;
    int vec;            /* rows contiguous and 16-byte aligned */
    int group_shift;    /* log2(threads per row) */
    int es;             /* element bytes */
};

template <int ES> __device__ __forceinline__ void store_bits(unsigned char *p, uint64_t bits) {
    if constexpr (ES == 1) *p = (uint8_t)bits;
    else if constexpr (ES == 2) *(uint16_t *)p = (uint16_t)bits;
    else if constexpr (ES == 4) *(uint32_t *)p = (uint32_t)bits;
    else *(uint64_t *)p = bits;
}

/* One row of the dense path: `len` elements `inner` apart from rowp, one in
 * [lo, hi) and zero elsewhere, written by the gsize threads of a group (gl
 * its thread); vec: the row is contiguous and 16-byte aligned. Also used by
 * the one-block kernel (hard_small.cuh) for its item's rows. */
template <int ES>
__device__ __forceinline__ void path_row(unsigned char *rowp, int64_t len, int64_t inner, bool vec,
                                         int64_t lo, int64_t hi, uint64_t one, int gl, int gsize) {
    constexpr int VEC = 16 / ES;
    if (vec) {
        for (int64_t e0 = (int64_t)gl * VEC; e0 < len; e0 += (int64_t)gsize * VEC) {
            if (e0 + VEC <= len) {
                uint64_t w[2] = {0, 0};
                if (e0 < hi && e0 + VEC > lo) {
#pragma unroll
                    for (int e = 0; e < VEC; ++e)
                        if (e0 + e >= lo && e0 + e < hi) w[(e * ES) / 8] |= one << ((e * ES * 8) % 64);
                }
                *(int4 *)(rowp + e0 * ES) =
                    make_int4((int)(uint32_t)w[0], (int)(uint32_t)(w[0] >> 32),
                              (int)(uint32_t)w[1], (int)(uint32_t)(w[1] >> 32));
            } else {
                for (int64_t e = e0; e < len; ++e)
                    store_bits<ES>(rowp + e * ES, (e >= lo && e < hi) ? one : 0);
            }
        }
    } else {
        for (int64_t e = gl; e < len; e += gsize)
            store_bits<ES>(rowp + e * inner * ES, (e >= lo && e < hi) ? one : 0);
    }
}

template <int ES> __global__ void __launch_bounds__(256) hard_path(PathArgs a) {
    const int gsize = 1 << a.group_shift;
    const int sub = threadIdx.x >> a.group_shift, gl = threadIdx.x & (gsize - 1);
    const int rows_per_block = blockDim.x >> a.group_shift;
    const int64_t per_item = a.rows_over_frames ? a.T : a.S;
    const int64_t nrows = a.B * per_item;
    const int64_t len = a.rows_over_frames ? a.S : a.T;
    const int64_t inner = a.rows_over_frames ? a.s2 : a.s1;
    const int64_t outer = a.rows_over_frames ? a.s1 : a.s2;
    for (int64_t row = (int64_t)blockIdx.x * rows_per_block + sub; row < nrows;
         row += (int64_t)gridDim.x * rows_per_block) {
        const int64_t bb = row / per_item, r = row - bb * per_item;
        int64_t lo, hi;
        if (a.rows_over_frames) {
            lo = a.run_begin[row];
            hi = a.run_end[row];
        } else {
            lo = a.frame_token[row];
            hi = lo + 1; /* -1 past y_len: [-1, 0) holds no element */
        }
        path_row<ES>(a.data + (bb * a.s0 + r * outer) * ES, len, inner, a.vec != 0, lo, hi, a.one,
                     gl, gsize);
    }
}

} // namespace mas_cuda

#endif
