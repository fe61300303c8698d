/* Hard MAS on CUDA: host entry points. Checks what the host can check,
 * plans the launch from the shape and the device, and enqueues on the
 * caller's stream: the forward sweep (hard_forward; a memset of its rings
 * and flags first when an item spans several blocks), the backtrack
 * (hard_backtrack_block or hard_backtrack) and, when wanted, the dense path
 * (hard_path). No synchronisation and no allocation, so the call can be
 * captured into a CUDA graph; value-dependent errors go to the device error
 * word. */
#include <cuda_runtime.h>

#include "common/checks.h"
#include "cuda/device_cache.cuh"
#include "cuda/hard_backtrack_block.cuh"
#include "cuda/hard_common.cuh"
#include "cuda/hard_finish.h"
#include "cuda/hard_forward.cuh"
#include "cuda/hard_mask.cuh"
#include "cuda/hard_path.cuh"
#include "cuda/hard_small.cuh"
#include "cuda/hard_topo.h"
#include "mas.h"

using namespace mas_cuda;

namespace {

uint64_t one_bits(int32_t dtype) {
    switch (dtype) {
    case MAS_FLOAT32: return 0x3f800000u;
    case MAS_FLOAT64: return 0x3ff0000000000000ull;
    case MAS_FLOAT16: return 0x3c00u;
    case MAS_BFLOAT16: return 0x3f80u;
    default: return 1u;
    }
}

using Device = DeviceInfo;

int ceil_log2(int64_t x) {
    int s = 0;
    while (((int64_t)1 << s) < x) s++;
    return s;
}

/* The dense path's plan: rows along the more contiguous axis, the threads
 * of a row (a power of two) from its length in 16-byte units. */
PathArgs make_path_args(const mas_tensor3 *path, int64_t B, int64_t T, int64_t S) {
    const int64_t es = (int64_t)mas_dtype_size((mas_dtype)path->dtype);
    PathArgs p;
    p.data = (unsigned char *)path->data;
    p.s0 = view_stride(path, 0);
    p.s1 = view_stride(path, 1);
    p.s2 = view_stride(path, 2);
    p.B = B;
    p.T = T;
    p.S = S;
    p.one = one_bits(path->dtype);
    p.frame_token = p.run_begin = p.run_end = nullptr;
    p.es = (int)es;
    int64_t a1 = p.s1 < 0 ? -p.s1 : p.s1, a2 = p.s2 < 0 ? -p.s2 : p.s2;
    /* Rows along the more contiguous axis (frames on a tie, as on the CPU). */
    p.rows_over_frames = S == 1 ? 0 : (T == 1 ? 1 : a2 <= a1);
    int64_t inner = p.rows_over_frames ? p.s2 : p.s1;
    int64_t outer = p.rows_over_frames ? p.s1 : p.s2;
    int64_t len = p.rows_over_frames ? S : T;
    p.vec = (inner == 1 || len == 1) && aligned16(p.data, p.s0, outer, es);
    int64_t units = p.vec ? (len * es + 15) / 16 : len;
    int shift = ceil_log2(units);
    if (shift > 8) shift = 8;
    p.group_shift = shift;
    return p;
}

mas_status launch_path(const mas_tensor3 *path, int64_t B, int64_t T, int64_t S,
                       const int32_t *frame_token, const int32_t *run_begin,
                       const int32_t *run_end, const Device &dev, cudaStream_t stream) {
    PathArgs p = make_path_args(path, B, T, S);
    p.frame_token = frame_token;
    p.run_begin = run_begin;
    p.run_end = run_end;
    const int threads = 256;
    int64_t rows = B * (p.rows_over_frames ? T : S);
    int64_t rows_per_block = threads >> p.group_shift;
    int64_t blocks = (rows + rows_per_block - 1) / rows_per_block;
    int64_t cap = (int64_t)dev.sms * 8;
    if (blocks > cap) blocks = cap;
    switch (p.es) {
    case 1: hard_path<1><<<(unsigned)blocks, threads, 0, stream>>>(p); break;
    case 2: hard_path<2><<<(unsigned)blocks, threads, 0, stream>>>(p); break;
    case 4: hard_path<4><<<(unsigned)blocks, threads, 0, stream>>>(p); break;
    default: hard_path<8><<<(unsigned)blocks, threads, 0, stream>>>(p); break;
    }
    return MAS_OK;
}

/* A mask's lengths, one warp per item, for the multi-kernel path. */
__global__ void __launch_bounds__(128) hard_mask_lengths(MaskArgs a) {
    const int lane = threadIdx.x & 31;
    const int64_t b = (int64_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    if (b >= a.B) return;
    int nx, ny;
    mask_counts(a.mask, b, a.T, a.S, lane, 32, nx, ny);
    if (lane == 0) {
        a.x_len[b] = nx;
        a.y_len[b] = ny;
    }
}

/* The kernels' view of a mask (mask NULL: data NULL). */
MaskView mask_view(const mas_tensor3 *mask) {
    MaskView m = {nullptr, 0, 0, 0, 0, 0};
    if (!mask) return m;
    m.data = (const unsigned char *)mask->data;
    m.s0 = view_stride(mask, 0);
    m.s1 = view_stride(mask, 1);
    m.s2 = view_stride(mask, 2);
    m.es = (int)mas_dtype_size((mas_dtype)mask->dtype);
    m.is_float = mas_is_float_dtype((mas_dtype)mask->dtype);
    return m;
}

/* Launches the count of a mask's lengths into lengths ([B] x_len, then
 * [B] y_len); returns lengths. */
const int64_t *count_lengths(const mas_tensor3 *mask, int64_t B, int64_t T, int64_t S,
                             int64_t *lengths, cudaStream_t s) {
    MaskArgs ma;
    ma.mask = mask_view(mask);
    ma.B = B;
    ma.T = T;
    ma.S = S;
    ma.x_len = lengths;
    ma.y_len = lengths + B;
    hard_mask_lengths<<<(unsigned)((B + 3) / 4), 128, 0, s>>>(ma);
    return lengths;
}

/* The long form (hard_topo.h) for a workspace below the unbounded size:
 * lengths counted first when they come from a mask, the dense path from the
 * runs the chain's outputs leave in the workspace. */
mas_status hard_cuda_longform(const mas_tensor3 *value, const int64_t *x_len, const int64_t *y_len,
                              const mas_tensor3 *mask, const mas_hard_outputs *out,
                              void *workspace, size_t workspace_size, void *stream,
                              uint64_t *error_word) {
    const int64_t B = value->dim[0], T = value->dim[1], S = value->dim[2];
    const size_t least = hard_topo_min_bytes(B, T, S, (mas_dtype)value->dtype);
    if (!least || workspace_size < least) return MAS_ERR_WORKSPACE_TOO_SMALL;
    Device dev;
    mas_status st = current_device(&dev);
    if (st != MAS_OK) return st;
    cudaStream_t s = (cudaStream_t)stream;
    const HardTopoExtra e = hard_topo_extra(B, T, S);
    unsigned char *ws = align_workspace(workspace);
    if (mask) {
        x_len = count_lengths(mask, B, T, S, (int64_t *)(ws + e.lengths), s);
        y_len = x_len + B;
    }
    st = hard_topo_run(value, x_len, y_len, out, workspace, workspace_size, stream, error_word);
    if (st != MAS_OK) return st;
    if (out->path.data) {
        st = launch_path(&out->path, B, T, S, (const int32_t *)(ws + e.frame_token),
                         (const int32_t *)(ws + e.run_begin), (const int32_t *)(ws + e.run_end),
                         dev, s);
        if (st != MAS_OK) return st;
    }
    return cudaGetLastError() == cudaSuccess ? MAS_OK : MAS_ERR_CUDA;
}

/* Both entry points: lengths from x_len/y_len, or (mask non-NULL) counted
 * from the mask on the device. A call whose items run one a block
 * (hard_small) and that asks no dense path too large for the block reads no
 * workspace: NULL with size 0 is taken there (an eager call's host time is
 * mostly its allocations; results/calls-gpu-h100.md, session 8); any other
 * call needs the workspace (MAS_ERR_WORKSPACE_TOO_SMALL for NULL and 0). A
 * workspace given is checked as before, whichever kernel runs. */
mas_status hard_cuda_run(const mas_tensor3 *value, const int64_t *x_len, const int64_t *y_len,
                         const mas_tensor3 *mask, const mas_hard_outputs *out, void *workspace,
                         size_t workspace_size, void *stream, uint64_t *error_word) {
    const int64_t B = value->dim[0], T = value->dim[1], S = value->dim[2];
    const mas_dtype dtype = (mas_dtype)value->dtype;
    if (!workspace && workspace_size) return MAS_ERR_NULL_POINTER;
    Device dev;
    mas_status st = current_device(&dev);
    if (st != MAS_OK) return st;
    const int64_t es = (int64_t)mas_dtype_size(dtype);
    const int mode = load_mode(value, es);
    int warps = 0;
    const size_t smem = B <= 0x7fffffff ? small_plan(T, S, mode, dtype, dev, &warps) : 0;
    /* The dense path of a small item from the block itself (no second
     * launch); of a larger one by hard_path over every multiprocessor
     * (one block writing hundreds of KB is slower than the launch). */
    const size_t item_path = out->path.data
        ? (size_t)T * (size_t)S * mas_dtype_size((mas_dtype)out->path.dtype) : 0;
    const bool path_here = out->path.data && item_path <= kSmallPathBytes;
    if (!workspace && !(smem && (!out->path.data || path_here)))
        return MAS_ERR_WORKSPACE_TOO_SMALL;
    const HardLayout L = hard_layout(B, T, S, dtype);
    const size_t lengths_at = L.total - 256; /* mask calls: x_len, y_len after the layout */
    if (workspace && workspace_size < L.total + (mask ? align256((size_t)B * 16) : 0))
        return hard_cuda_longform(value, x_len, y_len, mask, out, workspace, workspace_size,
                                  stream, error_word);
    cudaStream_t s = (cudaStream_t)stream;
    unsigned char *ws = workspace ? align_workspace(workspace) : nullptr;

    if (smem) {
        SmallArgs sa = {};
        sa.value = (const unsigned char *)value->data;
        sa.s0 = view_stride(value, 0);
        sa.s1 = view_stride(value, 1);
        sa.s2 = view_stride(value, 2);
        sa.T = T;
        sa.S = S;
        sa.x_len = x_len;
        sa.y_len = y_len;
        sa.mask = mask_view(mask);
        sa.warps = warps;
        sa.sw = (int)((S + 31) / 32);
        sa.durations = out->durations;
        sa.durations_stride = out->durations_stride;
        sa.indices = out->indices;
        sa.indices_stride = out->indices_stride;
        sa.score = out->score;
        sa.score_f64 = dtype == MAS_FLOAT64;
        sa.path.data = nullptr;
        if (path_here) sa.path = make_path_args(&out->path, B, T, S);
        sa.frame_token = sa.run_begin = sa.run_end = nullptr;
        if (out->path.data && !path_here) {
            sa.frame_token = (int32_t *)(ws + L.frame_token);
            sa.run_begin = (int32_t *)(ws + L.run_begin);
            sa.run_end = (int32_t *)(ws + L.run_end);
        }
        sa.error_word = (unsigned long long *)error_word;
        st = launch_small_type<false>(dtype, mode, sa, B, smem, dev, s);
        if (st != MAS_OK) return st;
        if (out->path.data && !path_here) {
            st = launch_path(&out->path, B, T, S, sa.frame_token, sa.run_begin, sa.run_end, dev, s);
            if (st != MAS_OK) return st;
        }
        return cudaGetLastError() == cudaSuccess ? MAS_OK : MAS_ERR_CUDA;
    }

    if (mask) {
        x_len = count_lengths(mask, B, T, S, (int64_t *)(ws + lengths_at), s);
        y_len = x_len + B;
    }
    const ForwardArgs fa = forward_args(L, ws, value, x_len, y_len);

    st = launch_forward_dtype<false>(dtype, mode, fa, B, dev, s);
    if (st != MAS_OK) return st;

    return hard_finish(L, ws, B, T, S, x_len, y_len, dtype == MAS_FLOAT64, out, dev, s,
                       error_word);
}

/* Clusters of c hard_backtrack_block blocks the device holds at once with
 * cfg's shared memory rounded up to 4 KB (asked once a device, c and 4 KB:
 * the runtime call costs microseconds of host time); 0 where it cannot
 * tell. */
int clusters_at_once(cudaLaunchConfig_t cfg, int c, const Device &dev) {
    constexpr int kSlots = 64; /* of 4 KB: up to 256 KB */
    static std::atomic<int> known[kMaxDevices][4][kSlots]; /* 1 + clusters; 0: not asked */
    const int ci = c == 2 ? 1 : c == 4 ? 2 : 3, slot = (int)((cfg.dynamicSmemBytes + 4095) / 4096);
    if (slot >= kSlots) return 0;
    int v = known[dev.index][ci][slot].load(std::memory_order_relaxed);
    if (v == 0) {
        cfg.dynamicSmemBytes = (size_t)slot * 4096;
        int n = 0;
        if (cfg.dynamicSmemBytes + 1024 > (size_t)dev.smem_optin ||
            cudaOccupancyMaxActiveClusters(&n, hard_backtrack_block, &cfg) != cudaSuccess) {
            (void)cudaGetLastError();
            n = 0;
        }
        v = 1 + n;
        known[dev.index][ci][slot].store(v, std::memory_order_relaxed);
    }
    return v - 1;
}

/* hard_backtrack_block where an item's share of the words fits in
 * kBacktrackBlockSmem (160 KB) of shared memory with clusters of at most
 * kMaxCluster blocks (sm_90 on; one block elsewhere): clusters as large as
 * two blocks a multiprocessor allow (B=32 T=150 S=800: 4, 10 KB a
 * block), larger where the share does not fit (B=16 T=1024 S=4096: 8,
 * 134 KB). Returns false when it did not launch (the warp an item
 * then). */
bool launch_backtrack_block(BacktrackArgs ba, int64_t groups, const Device &dev, cudaStream_t s) {
    static KernelCache cache;
    if (!backtrack_block_fits(groups, ba.S, dev.smem_optin, dev.cc_major)) return false;
    const int most = backtrack_cluster_most(dev.cc_major);
    const size_t budget = backtrack_block_budget(dev.smem_optin);
    const int stage = ba.slab_done ? ba.slab_groups : 0; /* streamed: groups a stage */
    bool ring = false;
    const auto smem = [&](int c) { return backtrack_block_smem(groups, ba.S, c, ring ? stage : 0); };
    int c = 1;
    if (ba.slab_done) {
        /* streamed: B=16 T=1024 S=4096 takes clusters of 4 with a stage's
         * rows (0.711 -> 0.676-0.689 ms a call, where 8 held half the items'
         * back until the forward's last slabs ended), B=32 T=512 S=2048
         * clusters of 2 with all rows (0.3603 ms a call against
         * 0.3634-0.3660 for one block with a stage's at 174 KB; H100,
         * results/fused-gpu-h100.md, session 27) */
        c = backtrack_streamed_cluster(groups, ba.S, stage, budget, most, &ring);
    } else {
        while (c < most && ba.B * 2 * c <= dev.sms) c *= 2;
        while (c < most && smem(c) > budget) c *= 2;
    }
    if (ba.B * c > 0x7fffffff) return false;
    ba.ring_rows = ring ? 1 : 0;
    cudaLaunchConfig_t cfg = {};
    /* the cluster, then the dependent launch (dependent_launch.cuh), which
     * the occupancy query is not asked about */
    cudaLaunchAttribute attr[2];
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.y = 1;
    attr[0].val.clusterDim.z = 1;
    attr[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[1].val.programmaticStreamSerializationAllowed = 1;
    cfg.blockDim = dim3(32 * kBlockWarps);
    cfg.stream = s;
    cfg.attrs = attr;
    /* smaller clusters while the device cannot hold every item's at once
     * and the share still fits (a block a multiprocessor: clusters must
     * find whole free groups of multiprocessors in one GPC) */
    for (;;) {
        cfg.dynamicSmemBytes = smem(c);
        size_t raise = (cfg.dynamicSmemBytes + 4095) / 4096 * 4096; /* as clusters_at_once asks */
        if (raise + 1024 > (size_t)dev.smem_optin) raise = cfg.dynamicSmemBytes;
        if (ensure_smem(cache, hard_backtrack_block, dev, raise) != MAS_OK) return false;
        attr[0].val.clusterDim.x = (unsigned)c;
        cfg.gridDim = dim3((unsigned)(ba.B * c));
        cfg.numAttrs = c > 1 ? 1 : 0;
        if (c == 1 || smem(c / 2) > budget || ba.slab_done ||
            clusters_at_once(cfg, c, dev) >= ba.B)
            break;
        c /= 2;
    }
    ba.cluster = c;
    if (dev.cc_major >= 9) {
        if (c == 1) attr[0] = attr[1];
        cfg.numAttrs = c > 1 ? 2 : 1;
    }
    if (cudaLaunchKernelEx(&cfg, hard_backtrack_block, ba) == cudaSuccess) return true;
    (void)cudaGetLastError(); /* a cluster the device cannot place: the warp form */
    return false;
}

} // namespace

namespace mas_cuda {

mas_status hard_finish(const HardLayout &L, unsigned char *ws, int64_t B, int64_t T, int64_t S,
                       const int64_t *x_len, const int64_t *y_len, bool score_f64,
                       const mas_hard_outputs *out, const DeviceInfo &dev, cudaStream_t s,
                       uint64_t *error_word, const int *item_status, const int *slab_done,
                       int slab_groups, bool early_next) {
    BacktrackArgs ba;
    ba.early_next = early_next;
    ba.item_status = item_status;
    ba.slab_done = slab_done;
    ba.slab_groups = slab_groups;
    ba.max_slabs = L.max_slabs;
    ba.B = B;
    ba.T = T;
    ba.S = S;
    ba.groups = L.groups;
    ba.x_len = x_len;
    ba.y_len = y_len;
    ba.bits = (const uint32_t *)(ws + L.bits);
    ba.group_flag = (const int *)(ws + L.group_flag);
    ba.final_score = (const double *)(ws + L.final_score);
    ba.frame_token = (int32_t *)(ws + L.frame_token);
    ba.run_begin = (int32_t *)(ws + L.run_begin);
    ba.run_end = (int32_t *)(ws + L.run_end);
    ba.durations = out->durations;
    ba.durations_stride = out->durations_stride;
    ba.indices = out->indices;
    ba.indices_stride = out->indices_stride;
    ba.score = out->score;
    ba.score_f64 = score_f64;
    ba.error_word = (unsigned long long *)error_word;
    ba.cluster = 1;
    if (!launch_backtrack_block(ba, L.groups, dev, s) &&
        launch_dependent(dev.cc_major, hard_backtrack,
                         dim3((unsigned)((B + kBacktrackWarps - 1) / kBacktrackWarps)),
                         dim3(32 * kBacktrackWarps), 0, s, ba) != cudaSuccess)
        return MAS_ERR_CUDA;
    if (out->path.data) {
        mas_status st = launch_path(&out->path, B, T, S, ba.frame_token, ba.run_begin,
                                    ba.run_end, dev, s);
        if (st != MAS_OK) return st;
    }
    return cudaGetLastError() == cudaSuccess ? MAS_OK : MAS_ERR_CUDA;
}

} // namespace mas_cuda

extern "C" int32_t mas_has_cuda(void) { return 1; }

extern "C" size_t mas_hard_cuda_workspace_size(int64_t batch, int64_t tokens, int64_t frames,
                                               mas_dtype dtype) {
    if (batch < 1 || tokens < 1 || frames < 1 || !mas_is_float_dtype(dtype)) return 0;
    return hard_layout(batch, tokens, frames, dtype).total;
}

/* The smaller of the unbounded size and the long form's smallest. */
static size_t hard_cuda_min(size_t full, int64_t batch, int64_t tokens, int64_t frames,
                            mas_dtype dtype) {
    if (!full) return 0;
    const size_t least = hard_topo_min_bytes(batch, tokens, frames, dtype);
    return least && least < full ? least : full;
}

extern "C" size_t mas_hard_cuda_min_workspace_size(int64_t batch, int64_t tokens, int64_t frames,
                                                   mas_dtype dtype) {
    return hard_cuda_min(mas_hard_cuda_workspace_size(batch, tokens, frames, dtype), batch, tokens,
                         frames, dtype);
}

extern "C" size_t mas_hard_cuda_mask_min_workspace_size(int64_t batch, int64_t tokens,
                                                        int64_t frames, mas_dtype dtype) {
    return hard_cuda_min(mas_hard_cuda_mask_workspace_size(batch, tokens, frames, dtype), batch,
                         tokens, frames, dtype);
}

extern "C" mas_status mas_hard_cuda(const mas_tensor3 *value, const int64_t *x_len,
                                    const int64_t *y_len, const mas_hard_outputs *out,
                                    void *workspace, size_t workspace_size, void *stream,
                                    uint64_t *error_word) {
    const mas_status st = mas_hard_check_call(value, x_len, y_len, out);
    if (st != MAS_OK) return st;
    return hard_cuda_run(value, x_len, y_len, nullptr, out, workspace, workspace_size, stream,
                         error_word);
}

extern "C" size_t mas_hard_cuda_mask_workspace_size(int64_t batch, int64_t tokens, int64_t frames,
                                                    mas_dtype dtype) {
    if (batch < 1 || tokens < 1 || frames < 1 || !mas_is_float_dtype(dtype)) return 0;
    return hard_layout(batch, tokens, frames, dtype).total + align256((size_t)batch * 16);
}

extern "C" mas_status mas_hard_cuda_mask(const mas_tensor3 *value, const mas_tensor3 *mask,
                                         const mas_hard_outputs *out, void *workspace,
                                         size_t workspace_size, void *stream,
                                         uint64_t *error_word) {
    static const int64_t dummy = 0; /* the check wants lengths; they come from the mask */
    if (!mask) return MAS_ERR_NULL_POINTER;
    mas_status st = mas_hard_check_call(value, &dummy, &dummy, out);
    if (st == MAS_OK) st = mas_check_tensor(mask, MAS_ANY_DTYPE);
    if (st == MAS_OK && !mas_same_dims(mask, value)) st = MAS_ERR_BAD_SHAPE;
    if (st != MAS_OK) return st;
    return hard_cuda_run(value, nullptr, nullptr, mask, out, workspace, workspace_size, stream,
                         error_word);
}
