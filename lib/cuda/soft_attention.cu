/* Monotonic attention on CUDA (stub until the kernels land). */
#include <cuda_runtime.h>

#include "mas.h"

extern "C" size_t mas_attention_cuda_workspace_size(int64_t batch, int64_t n, int64_t m,
                                                    mas_dtype dtype) {
    (void)batch; (void)n; (void)m; (void)dtype;
    return 0;
}

extern "C" mas_status mas_attention_forward_cuda(mas_attention_kind kind, const mas_tensor3 *logits,
                                                 const int64_t *n_len, const int64_t *m_len,
                                                 const mas_tensor3 *log_phi, void *workspace,
                                                 size_t workspace_size, void *stream,
                                                 uint64_t *error_word) {
    (void)kind; (void)logits; (void)n_len; (void)m_len; (void)log_phi; (void)workspace;
    (void)workspace_size; (void)stream; (void)error_word;
    return MAS_ERR_BAD_ARGUMENT;
}

extern "C" mas_status mas_attention_backward_cuda(mas_attention_kind kind,
                                                  const mas_tensor3 *logits, const int64_t *n_len,
                                                  const int64_t *m_len, const mas_tensor3 *log_phi,
                                                  const mas_tensor3 *grad_log_phi,
                                                  const mas_tensor3 *grad_logits, void *workspace,
                                                  size_t workspace_size, void *stream,
                                                  uint64_t *error_word) {
    (void)kind; (void)logits; (void)n_len; (void)m_len; (void)log_phi; (void)grad_log_phi;
    (void)grad_logits; (void)workspace; (void)workspace_size; (void)stream; (void)error_word;
    return MAS_ERR_BAD_ARGUMENT;
}
