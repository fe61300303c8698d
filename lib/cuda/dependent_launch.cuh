/* Programmatic dependent launch (sm_90 on): a kernel enqueued with
 * launch_dependent() may have its blocks placed, and its launch paid, while
 * the kernel before it in the stream still runs; it must call
 * dependent_wait() before it touches any memory, which returns once the
 * kernel before has finished and its writes are visible. Why: at training
 * shapes a fused call is three kernels of 8-60 us, and the gaps between
 * them (the next kernel's launch and block start after the last block of
 * the one before ends) were ~4 us of its 86 (B=32 T=150 S=800, H200,
 * session 20).
 *
 * dependent_trigger() in the kernel before lets the next one's blocks be
 * placed once every block of this one has called it (or ended): no earlier,
 * so a waiting block never holds a multiprocessor that one of this kernel's
 * blocks still needs. Both are no-ops before sm_90 and in a kernel
 * launched plainly; launch_dependent() launches plainly before sm_90. */
#ifndef MAS_CUDA_DEPENDENT_LAUNCH_CUH
#define MAS_CUDA_DEPENDENT_LAUNCH_CUH

#include <cuda_runtime.h>

namespace mas_cuda {

__device__ __forceinline__ void dependent_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

__device__ __forceinline__ void dependent_trigger() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

/* kernel<<<grid, block, smem, s>>>(args...), as a dependent launch where
 * the device has them (cc_major >= 9). Returns the launch's error. */
template <typename... Params, typename... Args>
static inline cudaError_t launch_dependent(int cc_major, void (*kernel)(Params...), dim3 grid,
                                           dim3 block, size_t smem, cudaStream_t s,
                                           Args &&...args) {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = smem;
    cfg.stream = s;
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = attr;
    cfg.numAttrs = cc_major >= 9 ? 1 : 0;
    return cudaLaunchKernelEx(&cfg, kernel, static_cast<Args &&>(args)...);
}

} // namespace mas_cuda

#endif
