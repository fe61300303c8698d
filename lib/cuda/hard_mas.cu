/* Hard MAS on CUDA: host entry points. Checks what the host can check,
 * plans the launch from the shape and the device, and enqueues on the
 * caller's stream: the forward sweep (hard_forward; a memset of its rings
 * and flags first when an item spans several blocks),
 * the backtrack (hard_backtrack) and, when wanted, the dense path
 * (hard_path). No synchronisation and no allocation, so the call can be
 * captured into a CUDA graph; value-dependent errors go to the device error
 * word. */
#include <cuda_runtime.h>

#include "common/checks.h"
#include "cuda/device_cache.cuh"
#include "cuda/hard_backtrack.cuh"
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

bool aligned16(const void *p, int64_t s_a, int64_t s_b, int64_t es) {
    return ((uintptr_t)p % 16) == 0 && (s_a * es) % 16 == 0 && (s_b * es) % 16 == 0;
}

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

/* Everything the forward launch needs besides the kernel's template. */
struct ForwardPlan {
    int warps, slabs;
    size_t smem;
};

template <typename TV, int K, int MODE>
mas_status launch_forward(ForwardArgs args, int64_t B, const Device &dev, cudaStream_t stream) {
    using G = TileGeom<TV, K, MODE>;
    using TA = typename AccOf<TV>::type;
    auto kernel = hard_forward<TV, K, MODE>;
    const int64_t rows = G::ROWS;
    const int64_t T = args.T;
    /* shared memory: the warp's tile stages and its outgoing ring */
    const size_t per_warp = (size_t)kStages * G::BYTES + (size_t)kSmemRingChunks * kChunk * sizeof(TA);
    const int64_t warps_per_item = (T + rows - 1) / rows;
    int64_t max_w = ((int64_t)dev.smem_optin - 1024) / (int64_t)per_warp;
    if (max_w > 16) max_w = 16;
    if (max_w < 1) return MAS_ERR_CUDA;
    /* At least kMinSlabTokens per block where the shared memory allows;
     * otherwise the fewest warps per block that spread the items' warps
     * over every multiprocessor, grown until all blocks of the launch can be
     * resident at once (the blocks of an item wait on each other). */
    int64_t min_w = (kMinSlabTokens + rows - 1) / rows;
    if (min_w > warps_per_item) min_w = warps_per_item;
    int64_t w = (B * warps_per_item + dev.sms - 1) / dev.sms;
    if (w < min_w) w = min_w;
    if (w > warps_per_item) w = warps_per_item;
    if (w > max_w) w = max_w;
    ForwardPlan plan;
    int per_sm = 0;
    static KernelCache cache; /* this kernel's limit and occupancy per warps */
    for (;; ++w) {
        plan.warps = (int)w;
        plan.slabs = (int)((warps_per_item + w - 1) / w);
        plan.smem = (size_t)w * per_warp;
        mas_status st = cached_occupancy(cache, kernel, dev, (int)w, 32 * plan.warps, plan.smem,
                                         &per_sm);
        if (st != MAS_OK) return st;
        if (plan.slabs == 1 || B * plan.slabs <= (int64_t)per_sm * dev.sms || w >= max_w ||
            w >= warps_per_item)
            break;
    }
    /* The workspace holds rings for blocks of one warp (kMinBlockTokens). */
    if (plan.slabs > args.max_slabs) return MAS_ERR_CUDA;
    const int64_t resident = (int64_t)per_sm * dev.sms;
    if (plan.slabs > resident) return MAS_ERR_BAD_ARGUMENT;
    const int64_t per_launch = plan.slabs == 1 ? B : resident / plan.slabs;
    args.slabs = plan.slabs;
    args.warps = plan.warps;
    /* Items over several blocks: the global rings start with no valid tag
     * (dp_link.cuh), the progress flags and the ticket
     * counter at zero (ring, then flags: one region). */
    if (plan.slabs > 1 &&
        cudaMemsetAsync(args.ring, 0, args.ring_clear_bytes, stream) != cudaSuccess)
        return MAS_ERR_CUDA;
    for (int64_t first = 0; first < B; first += per_launch) {
        int64_t n = B - first < per_launch ? B - first : per_launch;
        args.item0 = first;
        args.ticket0 = (unsigned)(first * plan.slabs);
        kernel<<<(unsigned)(n * plan.slabs), 32 * plan.warps, plan.smem, stream>>>(args);
    }
    return MAS_OK;
}

template <typename TV, int K>
mas_status launch_forward_mode(int mode, ForwardArgs args, int64_t B, const Device &dev,
                               cudaStream_t stream) {
    switch (mode) {
    case LOAD_BTS: return launch_forward<TV, K, LOAD_BTS>(args, B, dev, stream);
    case LOAD_BST: return launch_forward<TV, K, LOAD_BST>(args, B, dev, stream);
    default: return launch_forward<TV, K, LOAD_ANY>(args, B, dev, stream);
    }
}

template <typename TV>
mas_status launch_forward_type(int mode, ForwardArgs args, int64_t B, const Device &dev,
                               cudaStream_t stream) {
    return launch_forward_mode<TV, 2>(mode, args, B, dev, stream);
}

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

/* ---- one block an item (hard_small.cuh) ---- */

/* Largest dense path of one item the one-block kernel writes itself. */
constexpr size_t kSmallPathBytes = 128 * 1024;

/* Shared memory the one-block kernel needs for this shape, 0 when it cannot
 * run it (layout, size); warps: its sweep warps. */
size_t small_plan(int64_t T, int64_t S, int mode, mas_dtype dtype, const Device &dev, int *warps) {
    if (mode == LOAD_ANY || T < 1 || S < 1 || S > (1 << 24)) return 0;
    const int64_t w = (T + kSmallRows - 1) / kSmallRows;
    if (w > kSmallMaxWarps) return 0;
    const int es = (int)mas_dtype_size(dtype), acc = dtype == MAS_FLOAT64 ? 8 : 4;
    const SmallSmem L = small_smem((int)w, S, (int)((S + 31) / 32), es, acc);
    /* the static shared variables and the driver's reserve */
    if (L.total + 1024 > (size_t)dev.smem_optin) return 0;
    *warps = (int)w;
    return L.total;
}

template <typename TV, bool FRAME_ROWS>
mas_status launch_small(const SmallArgs &sa, int64_t B, size_t smem, const Device &dev,
                        cudaStream_t stream) {
    static KernelCache cache;
    auto kernel = hard_small<TV, FRAME_ROWS>;
    mas_status st = ensure_smem(cache, kernel, dev, smem);
    if (st != MAS_OK) return st;
    /* at least 4 warps: the outputs and the path are written by all */
    const int threads = 32 * (sa.warps < 4 ? 4 : sa.warps);
    kernel<<<(unsigned)B, threads, smem, stream>>>(sa);
    return MAS_OK;
}

template <bool FRAME_ROWS>
mas_status launch_small_type(mas_dtype dtype, const SmallArgs &sa, int64_t B, size_t smem,
                             const Device &dev, cudaStream_t stream) {
    switch (dtype) {
    case MAS_FLOAT32: return launch_small<float, FRAME_ROWS>(sa, B, smem, dev, stream);
    case MAS_FLOAT64: return launch_small<double, FRAME_ROWS>(sa, B, smem, dev, stream);
    case MAS_FLOAT16: return launch_small<__half, FRAME_ROWS>(sa, B, smem, dev, stream);
    default: return launch_small<__nv_bfloat16, FRAME_ROWS>(sa, B, smem, dev, stream);
    }
}

/* Value tile loads that the strides allow (hard_forward's modes). */
int load_mode(const mas_tensor3 *value, int64_t es) {
    const int64_t s0 = view_stride(value, 0), s1 = view_stride(value, 1), s2 = view_stride(value, 2);
    if (s2 == 1 && aligned16(value->data, s0, s1, es)) return LOAD_BTS;
    if (s1 == 1 && aligned16(value->data, s0, s2, es)) return LOAD_BST;
    return LOAD_ANY;
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
 * from the mask on the device. */
mas_status hard_cuda_run(const mas_tensor3 *value, const int64_t *x_len, const int64_t *y_len,
                         const mas_tensor3 *mask, const mas_hard_outputs *out, void *workspace,
                         size_t workspace_size, void *stream, uint64_t *error_word) {
    const int64_t B = value->dim[0], T = value->dim[1], S = value->dim[2];
    const mas_dtype dtype = (mas_dtype)value->dtype;
    const HardLayout L = hard_layout(B, T, S, dtype);
    const size_t lengths_at = L.total - 256; /* mask calls: x_len, y_len after the layout */
    if (workspace_size < L.total + (mask ? align256((size_t)B * 16) : 0))
        return hard_cuda_longform(value, x_len, y_len, mask, out, workspace, workspace_size,
                                  stream, error_word);
    Device dev;
    mas_status st = current_device(&dev);
    if (st != MAS_OK) return st;
    cudaStream_t s = (cudaStream_t)stream;
    unsigned char *ws = align_workspace(workspace);
    const int64_t es = (int64_t)mas_dtype_size(dtype);
    const int mode = load_mode(value, es);

    int warps = 0;
    const size_t smem = B <= 0x7fffffff ? small_plan(T, S, mode, dtype, dev, &warps) : 0;
    if (smem) {
        SmallArgs sa;
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
        /* The dense path of a small item from the block itself (no second
         * launch); of a larger one by hard_path over every multiprocessor
         * (one block writing hundreds of KB is slower than the launch). */
        const size_t item_path = out->path.data
            ? (size_t)T * (size_t)S * mas_dtype_size((mas_dtype)out->path.dtype) : 0;
        const bool path_here = out->path.data && item_path <= kSmallPathBytes;
        sa.path.data = nullptr;
        if (path_here) sa.path = make_path_args(&out->path, B, T, S);
        sa.frame_token = sa.run_begin = sa.run_end = nullptr;
        if (out->path.data && !path_here) {
            sa.frame_token = (int32_t *)(ws + L.frame_token);
            sa.run_begin = (int32_t *)(ws + L.run_begin);
            sa.run_end = (int32_t *)(ws + L.run_end);
        }
        sa.error_word = (unsigned long long *)error_word;
        st = mode == LOAD_BTS ? launch_small_type<false>(dtype, sa, B, smem, dev, s)
                              : launch_small_type<true>(dtype, sa, B, smem, dev, s);
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
    ForwardArgs fa;
    fa.value = (const unsigned char *)value->data;
    fa.s0 = view_stride(value, 0);
    fa.s1 = view_stride(value, 1);
    fa.s2 = view_stride(value, 2);
    fa.T = T;
    fa.S = S;
    fa.x_len = x_len;
    fa.y_len = y_len;
    fa.bits = (uint32_t *)(ws + L.bits);
    fa.groups = L.groups;
    fa.ring = ws + L.ring;
    fa.ring_clear_bytes = L.group_flag - L.ring;
    fa.max_slabs = L.max_slabs;
    fa.flags = (int *)(ws + L.flags);
    fa.ticket = (unsigned *)(ws + L.flags) + (size_t)B * L.max_slabs * kFlagStride;
    fa.group_flag = (int *)(ws + L.group_flag);
    fa.final_score = (double *)(ws + L.final_score);
    fa.slabs = 1;
    fa.warps = 1;
    fa.item0 = 0;
    fa.ticket0 = 0;
    int64_t a1 = fa.s1 < 0 ? -fa.s1 : fa.s1, a2 = fa.s2 < 0 ? -fa.s2 : fa.s2;
    fa.frames_inner = a2 <= a1;

    switch (dtype) {
    case MAS_FLOAT32: st = launch_forward_type<float>(mode, fa, B, dev, s); break;
    case MAS_FLOAT64: st = launch_forward_type<double>(mode, fa, B, dev, s); break;
    case MAS_FLOAT16: st = launch_forward_type<__half>(mode, fa, B, dev, s); break;
    default: st = launch_forward_type<__nv_bfloat16>(mode, fa, B, dev, s); break;
    }
    if (st != MAS_OK) return st;

    return hard_finish(L, ws, B, T, S, x_len, y_len, dtype == MAS_FLOAT64, out, dev, s,
                       error_word);
}

} // namespace

namespace mas_cuda {

mas_status hard_finish(const HardLayout &L, unsigned char *ws, int64_t B, int64_t T, int64_t S,
                       const int64_t *x_len, const int64_t *y_len, bool score_f64,
                       const mas_hard_outputs *out, const DeviceInfo &dev, cudaStream_t s,
                       uint64_t *error_word) {
    BacktrackArgs ba;
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
    const int warps_per_block = 4;
    hard_backtrack<<<(unsigned)((B + warps_per_block - 1) / warps_per_block),
                     32 * warps_per_block, 0, s>>>(ba);
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
    mas_status st = mas_hard_check_call(value, x_len, y_len, out);
    if (st == MAS_OK && !workspace) st = MAS_ERR_NULL_POINTER;
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
    if (st == MAS_OK && !workspace) st = MAS_ERR_NULL_POINTER;
    if (st != MAS_OK) return st;
    return hard_cuda_run(value, nullptr, nullptr, mask, out, workspace, workspace_size, stream,
                         error_word);
}
