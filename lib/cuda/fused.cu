/* Fused Gaussian alignment on CUDA (mas.h section 8): placeholders until the
 * kernels land (the cells from loglik_kernel.cuh inside the sweeps of
 * hard_forward.cuh / soft_sweep.cuh). */
#include "mas.h"

extern "C" size_t mas_align_gaussian_cuda_workspace_size(const mas_gauss_align_args *args) {
    (void)args;
    return 0;
}

extern "C" mas_status mas_align_gaussian_cuda(const mas_gauss_align_args *args,
                                   const mas_hard_outputs *out, void *workspace,
                                   size_t workspace_size, void *stream, uint64_t *error_word) {
    (void)args; (void)out; (void)workspace; (void)workspace_size; (void)stream;
    (void)error_word;
    return MAS_ERR_NO_CUDA;
}

extern "C" size_t mas_forward_sum_gaussian_cuda_workspace_size(const mas_gauss_align_args *args) {
    (void)args;
    return 0;
}

extern "C" mas_status mas_forward_sum_gaussian_cuda(const mas_gauss_align_args *args,
                                         const mas_gauss_soft_outputs *out, void *workspace,
                                         size_t workspace_size, void *stream,
                                         uint64_t *error_word) {
    (void)args; (void)out; (void)workspace; (void)workspace_size; (void)stream;
    (void)error_word;
    return MAS_ERR_NO_CUDA;
}
