/* Topologies on CUDA (mas.h section 7): placeholders until the sweeps of
 * soft_sweep.cuh / hard_forward.cuh take the topology (the CPU core's
 * dp_topology: per-state stay/move/skip weights, skip edge, gathered rows). */
#include "mas.h"

extern "C" size_t mas_topo_cuda_workspace_size(const mas_topo_args *args, int32_t soft) {
    (void)args;
    (void)soft;
    return 0;
}

extern "C" mas_status mas_viterbi_cuda(const mas_topo_args *args,
                                       const mas_topo_hard_outputs *out, void *workspace,
                                       size_t workspace_size, void *stream,
                                       uint64_t *error_word) {
    (void)args; (void)out; (void)workspace; (void)workspace_size; (void)stream;
    (void)error_word;
    return MAS_ERR_NO_CUDA;
}

extern "C" mas_status mas_topo_forward_sum_cuda(const mas_topo_args *args,
                                                const mas_topo_soft_outputs *out,
                                                void *workspace, size_t workspace_size,
                                                void *stream, uint64_t *error_word) {
    (void)args; (void)out; (void)workspace; (void)workspace_size; (void)stream;
    (void)error_word;
    return MAS_ERR_NO_CUDA;
}
