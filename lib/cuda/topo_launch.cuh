/* The launch of the topology kernels for one emission dtype and the
 * states a thread holds (J = 1, 2, 4, 8). Defined here, instantiated once
 * per dtype by topology_<dtype>.cu (MAS_TOPO_INSTANTIATE) and declared
 * extern everywhere else, so that the kernels of the four dtypes compile in
 * four translation units at once. */
#ifndef MAS_CUDA_TOPO_LAUNCH_CUH
#define MAS_CUDA_TOPO_LAUNCH_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "cuda/device_cache.cuh"
#include "cuda/topo_sweep.cuh"

namespace mas_cuda {

template <typename TV>
mas_status topo_launch_type(int j, bool soft, const TopoArgs &t, int64_t B, int threads,
                            size_t smem, const DeviceInfo &dev, cudaStream_t stream);

#ifdef MAS_TOPO_INSTANTIATE
template <int J, typename TV>
static mas_status launch_one(bool soft, const TopoArgs &t, int64_t B, int threads,
                             size_t smem, const DeviceInfo &dev, cudaStream_t stream) {
    static KernelCache cache_hard, cache_soft;
    if (soft) {
        auto kernel = topo_forward_sum<TV, J>;
        mas_status st = ensure_smem(cache_soft, kernel, dev, smem);
        if (st != MAS_OK) return st;
        kernel<<<(unsigned)B, threads, smem, stream>>>(t);
    } else {
        auto kernel = topo_viterbi<TV, J>;
        mas_status st = ensure_smem(cache_hard, kernel, dev, smem);
        if (st != MAS_OK) return st;
        kernel<<<(unsigned)B, threads, smem, stream>>>(t);
    }
    return MAS_OK;
}

template <typename TV>
mas_status topo_launch_type(int j, bool soft, const TopoArgs &t, int64_t B, int threads,
                            size_t smem, const DeviceInfo &dev, cudaStream_t stream) {
    switch (j) {
    case 1: return launch_one<1, TV>(soft, t, B, threads, smem, dev, stream);
    case 2: return launch_one<2, TV>(soft, t, B, threads, smem, dev, stream);
    case 4: return launch_one<4, TV>(soft, t, B, threads, smem, dev, stream);
    default: return launch_one<8, TV>(soft, t, B, threads, smem, dev, stream);
    }
}

template mas_status topo_launch_type<MAS_TOPO_INSTANTIATE>(int, bool, const TopoArgs &, int64_t,
                                                          int, size_t, const DeviceInfo &,
                                                          cudaStream_t);
#else
extern template mas_status topo_launch_type<float>(int, bool, const TopoArgs &, int64_t, int,
                                                   size_t, const DeviceInfo &, cudaStream_t);
extern template mas_status topo_launch_type<double>(int, bool, const TopoArgs &, int64_t, int,
                                                    size_t, const DeviceInfo &, cudaStream_t);
extern template mas_status topo_launch_type<__half>(int, bool, const TopoArgs &, int64_t, int,
                                                    size_t, const DeviceInfo &, cudaStream_t);
extern template mas_status topo_launch_type<__nv_bfloat16>(int, bool, const TopoArgs &, int64_t,
                                                           int, size_t, const DeviceInfo &,
                                                           cudaStream_t);
#endif

} // namespace mas_cuda

#endif
