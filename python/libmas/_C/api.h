/* The library's entry points that libmas._torch calls, handed over by
 * libmas._C as a capsule (libmas._C._api). The PyTorch glue thus calls the
 * very library this module links, with its CUDA state and device caches,
 * instead of linking a second copy of it (a second static CUDA runtime and
 * every kernel twice in the process).
 *
 * Append only: a field is never moved or removed, and `size` tells the
 * reader how many of them the module it got the table from has. */
#ifndef LIBMAS_PY_API_H
#define LIBMAS_PY_API_H

#include "mas.h"

#define MAS_PY_API_CAPSULE "libmas._C._api"

typedef struct mas_py_api {
    size_t size; /* sizeof(mas_py_api) of the module that filled it */
    size_t (*hard_cpu_workspace_size)(int64_t batch, int64_t tokens, int64_t frames,
                                      mas_dtype dtype, int32_t threads);
    mas_status (*hard_cpu)(const mas_tensor3 *value, const int64_t *x_len, const int64_t *y_len,
                           const mas_hard_outputs *out, void *workspace, size_t workspace_size,
                           int32_t threads, mas_error *err);
    size_t (*hard_cuda_workspace_size)(int64_t batch, int64_t tokens, int64_t frames,
                                       mas_dtype dtype);
    mas_status (*hard_cuda)(const mas_tensor3 *value, const int64_t *x_len, const int64_t *y_len,
                            const mas_hard_outputs *out, void *workspace, size_t workspace_size,
                            void *stream, uint64_t *error_word);
    size_t (*attention_cpu_workspace_size)(int64_t batch, int64_t n, int64_t m, mas_dtype dtype,
                                           int32_t threads);
    mas_status (*attention_forward_cpu)(mas_attention_kind kind, const mas_tensor3 *logits,
                                        const int64_t *n_len, const int64_t *m_len,
                                        const mas_tensor3 *log_phi, void *workspace,
                                        size_t workspace_size, int32_t threads, mas_error *err);
    size_t (*attention_cuda_workspace_size)(int64_t batch, int64_t n, int64_t m,
                                            mas_dtype dtype);
    mas_status (*attention_forward_cuda)(mas_attention_kind kind, const mas_tensor3 *logits,
                                         const int64_t *n_len, const int64_t *m_len,
                                         const mas_tensor3 *log_phi, void *workspace,
                                         size_t workspace_size, void *stream,
                                         uint64_t *error_word);
    size_t (*hard_cuda_mask_workspace_size)(int64_t batch, int64_t tokens, int64_t frames,
                                            mas_dtype dtype);
    mas_status (*hard_cuda_mask)(const mas_tensor3 *value, const mas_tensor3 *mask,
                                 const mas_hard_outputs *out, void *workspace,
                                 size_t workspace_size, void *stream, uint64_t *error_word);
    size_t (*forward_sum_cpu_workspace_size)(int64_t batch, int64_t tokens, int64_t frames,
                                             mas_dtype dtype, int32_t threads);
    mas_status (*forward_sum_cpu)(const mas_tensor3 *value, const int64_t *x_len,
                                  const int64_t *y_len, void *log_z,
                                  const mas_tensor3 *posterior, void *workspace,
                                  size_t workspace_size, int32_t threads, mas_error *err);
    size_t (*forward_sum_cuda_workspace_size)(int64_t batch, int64_t tokens, int64_t frames,
                                              mas_dtype dtype);
    mas_status (*forward_sum_cuda)(const mas_tensor3 *value, const int64_t *x_len,
                                   const int64_t *y_len, void *log_z,
                                   const mas_tensor3 *posterior, void *workspace,
                                   size_t workspace_size, void *stream, uint64_t *error_word);
    mas_status (*attention_backward_cpu)(mas_attention_kind kind, const mas_tensor3 *logits,
                                         const int64_t *n_len, const int64_t *m_len,
                                         const mas_tensor3 *log_phi,
                                         const mas_tensor3 *grad_log_phi,
                                         const mas_tensor3 *grad_logits, void *workspace,
                                         size_t workspace_size, int32_t threads, mas_error *err);
    mas_status (*attention_backward_cuda)(mas_attention_kind kind, const mas_tensor3 *logits,
                                          const int64_t *n_len, const int64_t *m_len,
                                          const mas_tensor3 *log_phi,
                                          const mas_tensor3 *grad_log_phi,
                                          const mas_tensor3 *grad_logits, void *workspace,
                                          size_t workspace_size, void *stream,
                                          uint64_t *error_word);
} mas_py_api;

#endif
