/* Hard MAS in the long form on CUDA: the Viterbi of the k = 1 chain
 * (topology.cu), whose pipelined, checkpointed sweep gives hard MAS's
 * outputs bit for bit (the same cells, the same max and add, stay kept on a
 * tie, the same band), in any workspace down to its checkpoints and one
 * segment's bits. hard_mas.cu runs it when the caller's workspace is below
 * the unbounded size. Host code only. */
#ifndef MAS_CUDA_HARD_TOPO_H
#define MAS_CUDA_HARD_TOPO_H

#include <stddef.h>
#include <stdint.h>

#include "mas.h"

namespace mas_cuda {

/* Regions before the chain's own workspace, from the aligned workspace:
 * the token of each frame [B][S] and the runs [B][T] (for the dense path),
 * and the lengths a mask call counts [B][2]. */
struct HardTopoExtra {
    size_t frame_token, run_begin, run_end, lengths, total;
};
HardTopoExtra hard_topo_extra(int64_t B, int64_t T, int64_t S);

/* The smallest workspace of the long form (0 for shapes it cannot run). */
size_t hard_topo_min_bytes(int64_t B, int64_t T, int64_t S, mas_dtype dtype);

/* Hard MAS of value (lengths device arrays) within workspace_size bytes:
 * durations, indices, score and, when out->path is wanted, the runs and
 * frame tokens in the extra regions (the caller writes the dense path).
 * Item errors as mas_hard_cuda's, in *error_word. */
mas_status hard_topo_run(const mas_tensor3 *value, const int64_t *x_len, const int64_t *y_len,
                         const mas_hard_outputs *out, void *workspace, size_t workspace_size,
                         void *stream, uint64_t *error_word);

} // namespace mas_cuda

#endif
