/* Lengths from a Glow-TTS mask on the device (mas_hard_cuda_mask): x_len is
 * the number of non-zero entries of mask[b, :, 0], y_len of mask[b, 0, :]
 * (for a 0/1 prefix mask, what Glow-TTS's mask.sum(1)[:, 0] and
 * mask.sum(2)[:, 0] give). Read by the kernels themselves, so a call needs
 * no reduction of its own on the host's stream. */
#ifndef MAS_CUDA_HARD_MASK_CUH
#define MAS_CUDA_HARD_MASK_CUH

#include "cuda/hard_common.cuh"

namespace mas_cuda {

/* Non-zero test of a mask element of es bytes (floats: -0.0 is zero, NaN
 * is not). */
__device__ __forceinline__ bool mask_nonzero(const unsigned char *p, int es, int is_float) {
    switch (es) {
    case 1: return *p != 0;
    case 2: return (*(const uint16_t *)p & (is_float ? 0x7fffu : 0xffffu)) != 0;
    case 4: return (*(const uint32_t *)p & (is_float ? 0x7fffffffu : 0xffffffffu)) != 0;
    default: return (*(const uint64_t *)p & (is_float ? 0x7fffffffffffffffull : ~0ull)) != 0;
    }
}

/* A mask as the kernels read it (data NULL: the lengths are given). */
struct MaskView {
    const unsigned char *data;
    int64_t s0, s1, s2; /* element strides (size-1 axes: 0) */
    int es, is_float;   /* element bytes; 1 for a float dtype */
};

/* This thread's share (n threads, index tid) of the two counts of item b,
 * summed over the warp: every lane gets the warp's sums. */
__device__ __forceinline__ void mask_counts(const MaskView &mv, int64_t b, int64_t T, int64_t S,
                                            int tid, int n, int &nx, int &ny) {
    const unsigned char *m = mv.data + b * mv.s0 * mv.es;
    nx = ny = 0;
    for (int64_t i = tid; i < T; i += n) nx += mask_nonzero(m + i * mv.s1 * mv.es, mv.es, mv.is_float);
    for (int64_t j = tid; j < S; j += n) ny += mask_nonzero(m + j * mv.s2 * mv.es, mv.es, mv.is_float);
    for (int o = 16; o > 0; o >>= 1) {
        nx += __shfl_xor_sync(kFullMask, nx, o);
        ny += __shfl_xor_sync(kFullMask, ny, o);
    }
}

struct MaskArgs {
    MaskView mask;
    int64_t B, T, S;
    int64_t *x_len, *y_len; /* written: [B] each */
};

} // namespace mas_cuda

#endif
