/* The end of a CUDA hard-MAS call after its forward sweep: the backtrack of
 * the decision bits (validation, errors, durations, indices, score) and the
 * dense path, shared by hard MAS (hard_mas.cu) and the fused Gaussian
 * alignment (fused.cu), whose forward sweeps leave the same bits, flags and
 * final scores in the same workspace regions. Host code only. */
#ifndef MAS_CUDA_HARD_FINISH_H
#define MAS_CUDA_HARD_FINISH_H

#include <cuda_runtime.h>
#include <stdint.h>

#include "cuda/device_cache.cuh"
#include "cuda/hard_common.cuh"
#include "mas.h"

namespace mas_cuda {

/* Enqueues the backtrack and, when out->path is wanted, the dense path,
 * reading what the forward left in the HardLayout regions of the aligned
 * workspace ws (decision words, NaN/+inf flags per group, final scores;
 * the frame tokens and runs are written there). score_f64: out->score is
 * float64 (else float32). Item errors go to *error_word; item_status
 * (device [B], NULL: none): an item whose entry is not MAS_OK fails with
 * that status instead of the length rules' (the chain topologies' own
 * item checks, hard_chain.cu). slab_done (device, NULL: none): the fused
 * forward's slab-done flags (fused_forward.cuh), set once a slab of
 * slab_groups groups has written its words, flags and final score; with
 * them the block form, a block or a cluster an item, is placed while the
 * forward runs and reads each slab as it ends (the forward must have every
 * block in place before it lets the backtrack's be placed). early_next
 * (with slab_done): the next kernel in the stream may be placed once every
 * item's last slab is done, while the last walks, the chain and the
 * outputs still run; before its dependent_wait that kernel must write
 * nothing and read nothing this call writes (the next fused call's
 * coefficient kernel reads the caller's model: likelihood.cu, mas.h).
 * Returns MAS_OK or MAS_ERR_CUDA. */
mas_status hard_finish(const HardLayout &L, unsigned char *ws, int64_t B, int64_t T, int64_t S,
                       const int64_t *x_len, const int64_t *y_len, bool score_f64,
                       const mas_hard_outputs *out, const DeviceInfo &dev, cudaStream_t s,
                       uint64_t *error_word, const int *item_status = nullptr,
                       const int *slab_done = nullptr, int slab_groups = 0,
                       bool early_next = false);

} // namespace mas_cuda

#endif
