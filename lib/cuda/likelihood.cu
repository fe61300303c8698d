/* Placeholder until the CUDA likelihood kernels land: same answers as a
 * build without CUDA. */
#include "mas.h"

extern "C" mas_status mas_gauss_coef_cuda(const mas_gauss_params *params,
                                          const mas_tensor3 *coef, void *stream,
                                          uint64_t *error_word) {
    (void)params; (void)coef; (void)stream; (void)error_word;
    return MAS_ERR_NO_CUDA;
}

extern "C" size_t mas_loglik_cuda_workspace_size(const mas_loglik_args *args) {
    (void)args;
    return 0;
}

extern "C" mas_status mas_loglik_cuda(const mas_loglik_args *args, void *workspace,
                                      size_t workspace_size, void *stream,
                                      uint64_t *error_word) {
    (void)args; (void)workspace; (void)workspace_size; (void)stream; (void)error_word;
    return MAS_ERR_NO_CUDA;
}
