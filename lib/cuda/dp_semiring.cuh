/* The semirings of the dynamic program on CUDA, shared by every sweep: hard
 * MAS's forward (hard_forward.cuh) runs max-plus, the soft ops (soft_cells.cuh)
 * log-plus, and "times" is + in both. The CPU counterpart is
 * lib/cpu/dp_simd.h. */
#ifndef MAS_CUDA_DP_SEMIRING_CUH
#define MAS_CUDA_DP_SEMIRING_CUH

#include "cuda/hard_common.cuh"

namespace mas_cuda {

/* Single precision uses the multi-function unit (ex2/lg2): a log-plus sweep
 * is a chain of dependent logaddexps, and their latency is the sweep's
 * time. Each call's absolute error stays near 4e-7, well inside float32
 * tolerances. */
__device__ __forceinline__ float soft_exp(float x) {
    /* ex2 flushing subnormals (results under 1e-38 become 0): __expf's
     * subnormal fix-up costs three more instructions on the chain */
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x * 1.4426950408889634f));
    return y;
}
__device__ __forceinline__ double soft_exp(double x) { return exp(x); }
/* log(1 + e) for e in [0, 1]: the argument is never subnormal */
__device__ __forceinline__ float soft_log1p_small(float e) {
    float y;
    asm("lg2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(1.0f + e));
    return y * 0.6931471805599453f;
}
__device__ __forceinline__ double soft_log1p_small(double e) { return log1p(e); }

/* logaddexp; -inf + -inf stays -inf (never -inf - -inf). A select, not a
 * branch: the steps of a sweep's tile run as one straight line. */
template <typename TA> __device__ __forceinline__ TA log_add_exp(TA a, TA b) {
    const TA hi = a > b ? a : b, lo = a > b ? b : a;
    const TA r = hi + soft_log1p_small(soft_exp(lo - hi));
    return hi == neg_inf<TA>() ? hi : r;
}

/* plus(stay, move): the sum of a cell's two incoming paths. */
struct MaxPlus {
    /* The CPU's rule (lib/cpu, max(move, stay)): stay unless move is larger,
     * so ties stay and a NaN on either side gives what the CPU gives (a max
     * instruction would drop a NaN stay, which overflowing scores can make:
     * +inf plus a -inf cell). Hard MAS's decision bit is the same compare. */
    template <typename TA> __device__ static __forceinline__ TA plus(TA stay, TA move) {
        return stay < move ? move : stay;
    }
};
struct LogPlus {
    template <typename TA> __device__ static __forceinline__ TA plus(TA stay, TA move) {
        return log_add_exp(stay, move);
    }
};

} // namespace mas_cuda

#endif
