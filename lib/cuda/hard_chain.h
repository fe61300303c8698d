/* Viterbi of a plain chain topology (k states a token, stay / advance
 * log-scores; no blanks, no token skips, per-state emissions) by hard
 * MAS's kernels: the chain is hard MAS over the states with the edges'
 * log-scores added (ChainEdges, hard_common.cuh), so the one-block kernel
 * (hard_small.cuh) and the several-blocks forward (hard_forward.cuh) that
 * align a training batch's k = 1 chain do the k-state one too, with the
 * topology's checks, errors and outputs. Host code only. */
#ifndef MAS_CUDA_HARD_CHAIN_H
#define MAS_CUDA_HARD_CHAIN_H

#include <stdint.h>

#include "mas.h"

namespace mas_cuda {

/* Enqueues the Viterbi of args on stream when the one-block kernel can run
 * it (the topology is a plain chain of at most kChainMaxK states a token,
 * the emissions are per state with 16-byte aligned rows along frames or
 * states, and an item's states and frames fit one block's shared memory);
 * *taken says whether it did. The arguments were checked
 * (mas_topo_check_args, cuda_limits). It needs no workspace. Returns
 * MAS_OK or MAS_ERR_CUDA; item errors go to *error_word as the topology
 * kernels report them. */
mas_status chain_viterbi_small(const mas_topo_args *args, const mas_topo_hard_outputs *out,
                               void *stream, uint64_t *error_word, bool *taken);

/* Bytes of workspace chain_viterbi_blocks needs for args; 0 when the
 * topology is not a plain chain of at most kChainMaxK states a token with
 * per-state emissions. */
size_t chain_viterbi_bytes(const mas_topo_args *args);

/* The same for any item size, several blocks an item, in a workspace of
 * chain_viterbi_bytes(args). Returns MAS_OK or MAS_ERR_CUDA. */
mas_status chain_viterbi_blocks(const mas_topo_args *args, const mas_topo_hard_outputs *out,
                                void *workspace, void *stream, uint64_t *error_word);

} // namespace mas_cuda

#endif
