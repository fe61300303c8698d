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
 * its blocks early. Returns MAS_OK, a check's status or MAS_ERR_CUDA. */
mas_status gauss_coef_and_clear(const mas_gauss_params *params, const mas_tensor3 *coef,
                                cudaStream_t s, uint64_t *error_word, void *clear,
                                size_t clear_bytes);

} // namespace mas_cuda

#endif
