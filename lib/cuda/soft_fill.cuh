/* The cells of an output that no sweep writes: outside an item's lengths, or
 * the whole item when it failed. One warp per row; a row inside the lengths
 * only has its tail past len2 to fill. */
#ifndef MAS_CUDA_SOFT_FILL_CUH
#define MAS_CUDA_SOFT_FILL_CUH

#include "cuda/soft_common.cuh"

namespace mas_cuda {

template <typename TA> struct FillArgs {
    TA *base;
    int64_t s0, s1, s2;
    int64_t B, n1, n2;
    const int64_t *len1, *len2; /* NULL: n1, n2 */
    const int32_t *status;      /* [B]: anything but MAS_OK fills the item */
    TA value;
};

template <typename TA> __global__ void soft_fill_outside(const FillArgs<TA> a) {
    const int lane = threadIdx.x & 31;
    const int64_t warps = (int64_t)gridDim.x * (blockDim.x >> 5);
    for (int64_t row = (int64_t)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
         row < a.B * a.n1; row += warps) {
        const int64_t b = row / a.n1, i = row % a.n1;
        int64_t from = 0;
        if (a.status[b] == MAS_OK) {
            const int64_t l1 = a.len1 ? a.len1[b] : a.n1, l2 = a.len2 ? a.len2[b] : a.n2;
            if (i < l1) from = l2;
        }
        TA *p = a.base + b * a.s0 + i * a.s1;
        for (int64_t j = from + lane; j < a.n2; j += 32) p[j * a.s2] = a.value;
    }
}

template <typename TA>
static inline mas_status soft_launch_fill(const mas_tensor3 *t, const int64_t *len1,
                                          const int64_t *len2, const int32_t *status, TA value,
                                          cudaStream_t stream) {
    FillArgs<TA> a;
    a.base = (TA *)t->data;
    a.s0 = view_stride(t, 0);
    a.s1 = view_stride(t, 1);
    a.s2 = view_stride(t, 2);
    a.B = t->dim[0];
    a.n1 = t->dim[1];
    a.n2 = t->dim[2];
    a.len1 = len1;
    a.len2 = len2;
    a.status = status;
    a.value = value;
    const int64_t rows = a.B * a.n1;
    int64_t blocks = (rows + 7) / 8;
    if (blocks > 4096) blocks = 4096;
    soft_fill_outside<TA><<<(unsigned)blocks, 256, 0, stream>>>(a);
    return cudaGetLastError() == cudaSuccess ? MAS_OK : MAS_ERR_CUDA;
}

} // namespace mas_cuda

#endif
