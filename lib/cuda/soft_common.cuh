/* Pieces shared by the soft-alignment kernels on CUDA (forward-sum and
 * monotonic attention): log-sigmoid pairs, the NaN/+inf test, and the device
 * error word. */
#ifndef MAS_CUDA_SOFT_COMMON_CUH
#define MAS_CUDA_SOFT_COMMON_CUH

#include <cuda_runtime.h>
#include <stdint.h>

#include "common/checks.h"
#include "cuda/dp_semiring.cuh"
#include "cuda/hard_common.cuh"
#include "mas.h"

namespace mas_cuda {

/* ---- log-semiring arithmetic ------------------------------------------ */

__device__ __forceinline__ float soft_rcp(float y) { return __fdividef(1.0f, y); }
__device__ __forceinline__ double soft_rcp(double y) { return 1.0 / y; }

/* Both log sigmoid(x) and log sigmoid(-x) from one exp and one log:
 * with e = exp(-|x|) and l = log1p(e), they are min(x,0) - l and
 * min(-x,0) - l. Also returns e for sigmoids: sigmoid(|x|) = 1/(1+e). */
template <typename TA>
__device__ __forceinline__ TA log_sigmoid_pair(TA x, TA &ls_pos, TA &ls_neg) {
    const TA e = soft_exp(-fabs(x)), l = soft_log1p_small(e);
    ls_pos = (x < 0 ? x : (TA)0) - l;
    ls_neg = (x > 0 ? -x : (TA)0) - l;
    return e;
}

template <typename TA> __device__ __forceinline__ bool is_nan_or_pinf(TA x) {
    return !(x < pos_inf<TA>()) && !(x == neg_inf<TA>());
}

/* ---- errors -------------------------------------------------------------- */

__device__ __forceinline__ void report_error(uint64_t *word, int64_t item, int status) {
    if (word)
        atomicMin((unsigned long long *)word,
                  ((unsigned long long)item << 8) | (unsigned long long)status);
}

/* A forward-sum's status from its sweep: a NaN/+inf cell read, then no
 * finite path. A NaN log_z from finite-or--inf cells is the accumulator's
 * overflow: *last becomes +inf, as on the CPU (mas.h section 5). */
template <typename TA> __device__ __forceinline__ int forward_sum_status(bool bad, TA *last) {
    const int st = bad ? MAS_ERR_NONFINITE_VALUE
                       : (*last == neg_inf<TA>() ? MAS_ERR_NO_FINITE_PATH : MAS_OK);
    if (st == MAS_OK && *last != *last) *last = pos_inf<TA>();
    return st;
}

/* A forward-sum item's outcome where the plans keep it: its status, log_z
 * (-inf when it failed) in the workspace and, when wanted, the caller's,
 * and the error word. */
template <typename TA>
__device__ __forceinline__ void forward_sum_record(int64_t b, int st, TA lz, int32_t *status,
                                                   TA *log_z_ws, TA *log_z, uint64_t *word) {
    if (st != MAS_OK) lz = neg_inf<TA>();
    status[b] = st;
    log_z_ws[b] = lz;
    if (log_z) log_z[b] = lz;
    if (st != MAS_OK) report_error(word, b, st);
}

} // namespace mas_cuda

#endif
