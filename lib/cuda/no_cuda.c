/* Built instead of the CUDA sources when no CUDA compiler is found: the API
 * stays the same and answers MAS_ERR_NO_CUDA. */
#include "mas.h"

int32_t mas_has_cuda(void) { return 0; }

size_t mas_hard_cuda_workspace_size(int64_t batch, int64_t tokens, int64_t frames,
                                    mas_dtype dtype) {
    (void)batch; (void)tokens; (void)frames; (void)dtype;
    return 0;
}

mas_status mas_hard_cuda(const mas_tensor3 *value, const int64_t *x_len,
                         const int64_t *y_len, const mas_hard_outputs *out,
                         void *workspace, size_t workspace_size, void *stream,
                         uint64_t *error_word) {
    (void)value; (void)x_len; (void)y_len; (void)out; (void)workspace;
    (void)workspace_size; (void)stream; (void)error_word;
    return MAS_ERR_NO_CUDA;
}

size_t mas_hard_cuda_mask_workspace_size(int64_t batch, int64_t tokens, int64_t frames,
                                         mas_dtype dtype) {
    (void)batch; (void)tokens; (void)frames; (void)dtype;
    return 0;
}

mas_status mas_hard_cuda_mask(const mas_tensor3 *value, const mas_tensor3 *mask,
                              const mas_hard_outputs *out, void *workspace,
                              size_t workspace_size, void *stream, uint64_t *error_word) {
    (void)value; (void)mask; (void)out; (void)workspace; (void)workspace_size; (void)stream;
    (void)error_word;
    return MAS_ERR_NO_CUDA;
}

size_t mas_forward_sum_cuda_workspace_size(int64_t batch, int64_t tokens, int64_t frames,
                                           mas_dtype dtype) {
    (void)batch; (void)tokens; (void)frames; (void)dtype;
    return 0;
}

mas_status mas_forward_sum_cuda(const mas_tensor3 *value, const int64_t *x_len,
                                const int64_t *y_len, void *log_z,
                                const mas_tensor3 *posterior, void *workspace,
                                size_t workspace_size, void *stream, uint64_t *error_word) {
    (void)value; (void)x_len; (void)y_len; (void)log_z; (void)posterior; (void)workspace;
    (void)workspace_size; (void)stream; (void)error_word;
    return MAS_ERR_NO_CUDA;
}

size_t mas_attention_cuda_workspace_size(int64_t batch, int64_t n, int64_t m, mas_dtype dtype) {
    (void)batch; (void)n; (void)m; (void)dtype;
    return 0;
}

mas_status mas_attention_forward_cuda(mas_attention_kind kind, const mas_tensor3 *logits,
                                      const int64_t *n_len, const int64_t *m_len,
                                      const mas_tensor3 *log_phi, void *workspace,
                                      size_t workspace_size, void *stream,
                                      uint64_t *error_word) {
    (void)kind; (void)logits; (void)n_len; (void)m_len; (void)log_phi; (void)workspace;
    (void)workspace_size; (void)stream; (void)error_word;
    return MAS_ERR_NO_CUDA;
}

mas_status mas_attention_backward_cuda(mas_attention_kind kind, const mas_tensor3 *logits,
                                       const int64_t *n_len, const int64_t *m_len,
                                       const mas_tensor3 *log_phi,
                                       const mas_tensor3 *grad_log_phi,
                                       const mas_tensor3 *grad_logits, void *workspace,
                                       size_t workspace_size, void *stream,
                                       uint64_t *error_word) {
    (void)kind; (void)logits; (void)n_len; (void)m_len; (void)log_phi; (void)grad_log_phi;
    (void)grad_logits; (void)workspace; (void)workspace_size; (void)stream; (void)error_word;
    return MAS_ERR_NO_CUDA;
}

mas_status mas_gauss_coef_cuda(const mas_gauss_params *params, const mas_tensor3 *coef,
                               void *stream, uint64_t *error_word) {
    (void)params; (void)coef; (void)stream; (void)error_word;
    return MAS_ERR_NO_CUDA;
}

size_t mas_loglik_cuda_workspace_size(const mas_loglik_args *args) {
    (void)args;
    return 0;
}

mas_status mas_loglik_cuda(const mas_loglik_args *args, void *workspace, size_t workspace_size,
                           void *stream, uint64_t *error_word) {
    (void)args; (void)workspace; (void)workspace_size; (void)stream; (void)error_word;
    return MAS_ERR_NO_CUDA;
}

size_t mas_topo_cuda_workspace_size(const mas_topo_args *args, int32_t soft) {
    (void)args;
    (void)soft;
    return 0;
}

size_t mas_hard_cuda_min_workspace_size(int64_t batch, int64_t tokens, int64_t frames,
                                        mas_dtype dtype) {
    (void)batch; (void)tokens; (void)frames; (void)dtype;
    return 0;
}

size_t mas_hard_cuda_mask_min_workspace_size(int64_t batch, int64_t tokens, int64_t frames,
                                             mas_dtype dtype) {
    (void)batch; (void)tokens; (void)frames; (void)dtype;
    return 0;
}

size_t mas_topo_cuda_min_workspace_size(const mas_topo_args *args) {
    (void)args;
    return 0;
}

mas_status mas_viterbi_cuda(const mas_topo_args *args, const mas_topo_hard_outputs *out,
                            void *workspace, size_t workspace_size, void *stream,
                            uint64_t *error_word) {
    (void)args; (void)out; (void)workspace; (void)workspace_size; (void)stream;
    (void)error_word;
    return MAS_ERR_NO_CUDA;
}

mas_status mas_topo_forward_sum_cuda(const mas_topo_args *args,
                                     const mas_topo_soft_outputs *out, void *workspace,
                                     size_t workspace_size, void *stream,
                                     uint64_t *error_word) {
    (void)args; (void)out; (void)workspace; (void)workspace_size; (void)stream;
    (void)error_word;
    return MAS_ERR_NO_CUDA;
}

size_t mas_align_gaussian_cuda_workspace_size(const mas_gauss_align_args *args) {
    (void)args;
    return 0;
}

mas_status mas_align_gaussian_cuda(const mas_gauss_align_args *args,
                                   const mas_hard_outputs *out, void *workspace,
                                   size_t workspace_size, void *stream, uint64_t *error_word) {
    (void)args; (void)out; (void)workspace; (void)workspace_size; (void)stream;
    (void)error_word;
    return MAS_ERR_NO_CUDA;
}

size_t mas_forward_sum_gaussian_cuda_workspace_size(const mas_gauss_align_args *args) {
    (void)args;
    return 0;
}

mas_status mas_forward_sum_gaussian_cuda(const mas_gauss_align_args *args,
                                         const mas_gauss_soft_outputs *out, void *workspace,
                                         size_t workspace_size, void *stream,
                                         uint64_t *error_word) {
    (void)args; (void)out; (void)workspace; (void)workspace_size; (void)stream;
    (void)error_word;
    return MAS_ERR_NO_CUDA;
}
