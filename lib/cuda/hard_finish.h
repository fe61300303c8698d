/* The end of a CUDA hard-MAS call after its forward sweep: the backtrack of
 * the decision bits (validation, errors, durations, indices, score) and the
 * dense path, shared by hard MAS (hard_mas.cu) and the fused Gaussian
 * alignment (fused.cu), whose forward sweeps leave the same bits, flags and
 * final scores. Host code only. */
#ifndef MAS_CUDA_HARD_FINISH_H
#define MAS_CUDA_HARD_FINISH_H

#include <cuda_runtime.h>
#include <stdint.h>

#include "cuda/device_cache.cuh"
#include "mas.h"

namespace mas_cuda {

/* What the forward left, in device memory (hard_common.cuh's HardLayout
 * regions, or the fused call's): the decision words [B][groups][S], a
 * NaN/+inf flag per group [B][groups], the final score [B], and room for
 * the frame tokens [B][S] and runs [B][T] of the dense path. */
struct HardFinish {
    int64_t B, T, S, groups;
    const int64_t *x_len, *y_len;
    const uint32_t *bits;
    const int *group_flag;
    const double *final_score;
    int32_t *frame_token, *run_begin, *run_end;
    int score_f64; /* out->score is float64 (else float32) */
};

/* Enqueues the backtrack and, when out->path is wanted, the dense path;
 * item errors go to *error_word. Returns MAS_OK or MAS_ERR_CUDA. */
mas_status hard_finish(const HardFinish &f, const mas_hard_outputs *out, const DeviceInfo &dev,
                       cudaStream_t s, uint64_t *error_word);

} // namespace mas_cuda

#endif
