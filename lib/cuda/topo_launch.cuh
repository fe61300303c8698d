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

/* The pipelined Viterbi's plan (topo_sweep.cuh, TopoPipe): blocks of
 * `threads` threads, one state a thread, `slabs` blocks an item; the frames
 * in nseg segments of seg frames (one segment: the unbounded run). */
struct PipePlan {
    int threads, slabs;
    int64_t seg, nseg, frames;
    size_t smem;
    unsigned char *ring_clear; /* ring, progress and ticket: cleared before each sweep */
    size_t ring_clear_bytes;
    unsigned char *ckpt;       /* nseg - 1 columns [B][n_max], accumulator type */
    size_t ckpt_stride;
};

/* The whole schedule on the stream: the forward segment by segment keeping
 * checkpoints, each item's status, then from the last segment to the first
 * the segment's forward again (its bits) and the backtrack through it, then
 * the outputs. MAS_ERR_BAD_ARGUMENT when an item's slabs cannot all be
 * resident at once on this device. */
template <typename TV>
mas_status topo_pipe_type(const TopoArgs &t, const PipePlan &p, int64_t B, const DeviceInfo &dev,
                          cudaStream_t stream);

#ifdef MAS_TOPO_INSTANTIATE
template <int J, typename TV>
static mas_status launch_one(bool soft, const TopoArgs &t, int64_t B, int threads,
                             size_t smem, const DeviceInfo &dev, cudaStream_t stream) {
    if (soft && (t.post || t.grad)) {
        /* two blocks an item, two phases (topo_sweep.cuh) */
        static KernelCache cache_one, cache_two;
        auto one = topo_soft_half<TV, J, 1>;
        auto two = topo_soft_half<TV, J, 2>;
        mas_status st = ensure_smem(cache_one, one, dev, smem);
        if (st == MAS_OK) st = ensure_smem(cache_two, two, dev, smem);
        if (st != MAS_OK) return st;
        one<<<(unsigned)(2 * B), threads, smem, stream>>>(t);
        two<<<(unsigned)(2 * B), threads, smem, stream>>>(t);
        using TA = typename AccOf<TV>::type;
        const unsigned items = (unsigned)(B < 65535 ? B : 65535);
        if (t.post) {
            const dim3 grid((unsigned)((t.frames + 255) / 256), items);
            topo_normalize_post<TA><<<grid, 256, 0, stream>>>(t, B);
        }
        if (t.grad) {
            const dim3 grid((unsigned)((t.frames + 7) / 8), items);
            topo_normalize_grad<TA><<<grid, 256, 0, stream>>>(t, B);
        }
    } else if (soft) {
        static KernelCache cache_soft;
        auto kernel = topo_forward_sum<TV, J>;
        mas_status st = ensure_smem(cache_soft, kernel, dev, smem);
        if (st != MAS_OK) return st;
        kernel<<<(unsigned)B, threads, smem, stream>>>(t);
    } else if constexpr (J == 1) {
        /* the one-block Viterbi holds at most 1024 states (topology.cu) */
        static KernelCache cache_hard;
        auto kernel = topo_viterbi<TV>;
        mas_status st = ensure_smem(cache_hard, kernel, dev, smem);
        if (st != MAS_OK) return st;
        kernel<<<(unsigned)B, threads, smem, stream>>>(t);
    } else {
        return MAS_ERR_BAD_ARGUMENT;
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

template <typename TV>
static mas_status pipe_sweep(TopoArgs t, const PipePlan &p, int64_t B, int64_t per_launch,
                             cudaStream_t stream) {
    if (cudaMemsetAsync(p.ring_clear, 0, p.ring_clear_bytes, stream) != cudaSuccess)
        return MAS_ERR_CUDA;
    for (int64_t first = 0; first < B; first += per_launch) {
        const int64_t n = B - first < per_launch ? B - first : per_launch;
        t.pipe.item0 = first;
        t.pipe.ticket0 = (unsigned)(first * p.slabs);
        topo_pipe_sweep<TV, 1><<<(unsigned)(n * p.slabs), p.threads, p.smem, stream>>>(t);
    }
    return MAS_OK;
}

template <typename TV>
mas_status topo_pipe_type(const TopoArgs &t0, const PipePlan &p, int64_t B, const DeviceInfo &dev,
                          cudaStream_t stream) {
    static KernelCache cache;
    int per_sm = 0;
    mas_status st = cached_occupancy(cache, topo_pipe_sweep<TV, 1>, dev, p.threads / 32, p.threads,
                                     p.smem, &per_sm);
    if (st != MAS_OK) return st;
    const int64_t resident = (int64_t)per_sm * dev.sms;
    if (p.slabs > resident) return MAS_ERR_BAD_ARGUMENT;
    const int64_t per_launch = resident / p.slabs;
    TopoArgs t = t0;
    int *bad = t.pipe.bad;
    double *final_val = t.pipe.final_val;
    if (cudaMemsetAsync(bad, 0, (size_t)B * sizeof(int), stream) != cudaSuccess) return MAS_ERR_CUDA;
    auto segment = [&](int64_t g) {
        t.pipe.t_begin = (int)(g * p.seg);
        t.pipe.t_end = (int)((g + 1) * p.seg < p.frames ? (g + 1) * p.seg : p.frames);
        t.pipe.ckpt_in = g > 0 ? p.ckpt + (size_t)(g - 1) * p.ckpt_stride : nullptr;
    };
    for (int64_t g = 0; g < p.nseg; ++g) {
        segment(g);
        t.pipe.ckpt_out = g + 1 < p.nseg ? p.ckpt + (size_t)g * p.ckpt_stride : nullptr;
        t.pipe.bad = bad;
        t.pipe.final_val = final_val;
        if ((st = pipe_sweep<TV>(t, p, B, per_launch, stream)) != MAS_OK) return st;
    }
    topo_pipe_settle<TV><<<(unsigned)B, 256, 0, stream>>>(t);
    t.pipe.ckpt_out = nullptr;
    t.pipe.bad = nullptr;
    t.pipe.final_val = nullptr;
    for (int64_t g = p.nseg - 1; g >= 0; --g) {
        segment(g);
        /* the last segment's bits are still there from the first pass */
        if (g + 1 < p.nseg && (st = pipe_sweep<TV>(t, p, B, per_launch, stream)) != MAS_OK)
            return st;
        topo_pipe_walk<<<(unsigned)((B + 3) / 4), 128, 0, stream>>>(t, B);
    }
    topo_pipe_emit<TV><<<(unsigned)B, 256, 0, stream>>>(t);
    return MAS_OK;
}

template mas_status topo_pipe_type<MAS_TOPO_INSTANTIATE>(const TopoArgs &, const PipePlan &,
                                                         int64_t, const DeviceInfo &, cudaStream_t);
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
extern template mas_status topo_pipe_type<float>(const TopoArgs &, const PipePlan &, int64_t,
                                                 const DeviceInfo &, cudaStream_t);
extern template mas_status topo_pipe_type<double>(const TopoArgs &, const PipePlan &, int64_t,
                                                  const DeviceInfo &, cudaStream_t);
extern template mas_status topo_pipe_type<__half>(const TopoArgs &, const PipePlan &, int64_t,
                                                  const DeviceInfo &, cudaStream_t);
extern template mas_status topo_pipe_type<__nv_bfloat16>(const TopoArgs &, const PipePlan &,
                                                         int64_t, const DeviceInfo &, cudaStream_t);
#endif

} // namespace mas_cuda

#endif
