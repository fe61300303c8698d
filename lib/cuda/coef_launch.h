/* The tokens' coefficients on CUDA (mas_gauss_coef_cuda, mas.h section 6)
 * with a region of the caller's workspace zeroed by the same kernel, for the
 * fused entry points (fused.cu). Host code only. */
#ifndef MAS_CUDA_COEF_LAUNCH_H
#define MAS_CUDA_COEF_LAUNCH_H

#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

#include "mas.h"

namespace mas_cuda {

/* mas_gauss_coef_cuda's checks and kernel, which also zeroes clear[0 ..
 * clear_bytes) (16-byte aligned, a multiple of 16 bytes; NULL and 0: none).
 * The kernel lets a dependent launch after it (dependent_launch.cuh) place
 * its blocks early. hold (float32 coefficients; else ignored): it reads
 * the model and computes its first pass before it waits for the kernel
 * before it, and writes nothing until then (likelihood.cu). Returns MAS_OK,
 * a check's status or MAS_ERR_CUDA. */
mas_status gauss_coef_and_clear(const mas_gauss_params *params, const mas_tensor3 *coef,
                                cudaStream_t s, uint64_t *error_word, void *clear,
                                size_t clear_bytes, bool hold);

/* Gaussians a tile of the coefficient kernel for items x M Gaussians on
 * sms multiprocessors: 32, unless tiles of 16 spread the work over the
 * multiprocessors by a sixth more evenly (the most tiles a multiprocessor
 * holds, times their Gaussians). Why: a block's work is issue-bound
 * (~200 instructions a Gaussian and dimension, mostly the float64 exp),
 * and at B=32 T=150 the 160 tiles of 32 put two on 28 of 132
 * multiprocessors, which the kernel waited for: 8.5 us, 6.8 in tiles of
 * 16 (H200, session 22; 0.0821 -> 0.0800 ms a fused TF32 call). Tiles of
 * 8 took 6.8 us too but their 608 blocks cost the call 0.7 us more. */
int coef_tile(int64_t items, int64_t M, int sms);

} // namespace mas_cuda

#endif
