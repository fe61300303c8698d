/* Forward-sum on CUDA (stub until the kernels land). */
#include <cuda_runtime.h>

#include "mas.h"

extern "C" size_t mas_forward_sum_cuda_workspace_size(int64_t batch, int64_t tokens,
                                                      int64_t frames, mas_dtype dtype) {
    (void)batch; (void)tokens; (void)frames; (void)dtype;
    return 0;
}

extern "C" mas_status mas_forward_sum_cuda(const mas_tensor3 *value, const int64_t *x_len,
                                           const int64_t *y_len, void *log_z,
                                           const mas_tensor3 *posterior, void *workspace,
                                           size_t workspace_size, void *stream,
                                           uint64_t *error_word) {
    (void)value; (void)x_len; (void)y_len; (void)log_z; (void)posterior; (void)workspace;
    (void)workspace_size; (void)stream; (void)error_word;
    return MAS_ERR_BAD_ARGUMENT;
}
