/* Topologies on CUDA (mas.h section 7): host entry points. The checks that
 * need no values are the CPU's (common/checks.h); item checks run in the
 * kernel and go to the error word. One block per item (topo_sweep.cuh),
 * launched on the caller's stream with no synchronisation and no
 * allocation. The kernels are instantiated per dtype in topology_<dtype>.cu
 * (topo_launch.cuh), so that the four compile in parallel. */
#include <cuda_runtime.h>

#include "common/checks.h"
#include "cuda/device_cache.cuh"
#include "cuda/topo_launch.cuh"
#include "mas.h"

using namespace mas_cuda;

namespace {

/* Workspace regions (256-byte aligned): hard keeps decision bits, the path
 * and span scratch; soft every score of the forward. */
struct TopoLayout {
    int64_t n_max, words;
    size_t bits, path, spans, alpha, total;
};

int64_t topo_frames(const mas_topo_args *a) {
    return a->gathered ? a->emissions.dim[1] : a->emissions.dim[2];
}

TopoLayout topo_layout(const mas_topo_args *a, int soft) {
    TopoLayout L;
    const int64_t B = a->emissions.dim[0], S = topo_frames(a);
    L.n_max = mas_topology_states(&a->topology, a->tokens);
    if (L.n_max < 1) L.n_max = 1;
    L.words = (L.n_max + 31) / 32;
    const size_t acc = a->emissions.dtype == MAS_FLOAT64 ? 8 : 4;
    size_t at = 0;
    L.bits = at;
    if (!soft) at += align256((size_t)B * (size_t)S * (size_t)L.words * 8);
    L.path = at;
    if (!soft) at += align256((size_t)B * (size_t)S * 4);
    L.spans = at;
    if (!soft) at += align256((size_t)B * (size_t)(a->tokens > 0 ? a->tokens : 1) * 8);
    L.alpha = at;
    if (soft) at += align256((size_t)B * (size_t)S * (size_t)L.n_max * acc);
    L.total = at + 256;
    return L;
}

/* States per thread and threads per block for n_max states; 0 when the
 * kernel cannot hold them. */
int pick_j(int64_t n_max, int *threads) {
    int64_t bd = n_max < kTopoMaxThreads ? (n_max + 31) / 32 * 32 : kTopoMaxThreads;
    int64_t j = (n_max + bd - 1) / bd;
    int jj = j <= 1 ? 1 : j <= 2 ? 2 : j <= 4 ? 4 : j <= 8 ? 8 : 0;
    if (jj > kTopoMaxJ) jj = 0;
    *threads = (int)bd;
    return jj;
}

/* What only the CUDA kernel limits: k, the states a block holds, the byte
 * size of a blank-free skip (shared with the CPU's checks). */
mas_status cuda_limits(const mas_topo_args *a) {
    if (a->topology.states_per_token > kTopoMaxK) return MAS_ERR_BAD_ARGUMENT;
    int threads;
    if (!pick_j(topo_layout(a, 0).n_max, &threads)) return MAS_ERR_BAD_ARGUMENT;
    /* one block an item; int32 frame and state indices in the sweep */
    if (a->emissions.dim[0] > INT32_MAX || topo_frames(a) > INT32_MAX) return MAS_ERR_BAD_SHAPE;
    return MAS_OK;
}

void fill_args(TopoArgs &t, const mas_topo_args *a, const TopoLayout &L, unsigned char *ws) {
    const mas_topology &tp = a->topology;
    t.e = (const unsigned char *)a->emissions.data;
    t.dtype = a->emissions.dtype;
    t.gathered = a->gathered;
    t.es0 = view_stride(&a->emissions, 0);
    t.es1 = view_stride(&a->emissions, 1);
    t.es2 = view_stride(&a->emissions, 2);
    t.rows = a->emissions.dim[1];
    t.frames = topo_frames(a);
    t.V = a->gathered ? a->emissions.dim[2] : 0;
    t.k = tp.states_per_token;
    t.has_blank = tp.has_blank != 0;
    t.blank = tp.blank;
    t.skips = tp.skip_penalty > -INFINITY;
    for (int j = 0; j < kTopoMaxK; ++j) {
        t.stay[j] = j < t.k && tp.stay ? tp.stay[j] : 0;
        t.adv[j] = j < t.k && tp.advance ? tp.advance[j] : 0;
    }
    t.blank_stay = tp.blank_stay;
    t.blank_adv = tp.blank_advance;
    t.skip_pen = tp.skip_penalty;
    t.labels = a->labels;
    t.labels_stride = a->labels_stride;
    t.tokens = a->tokens;
    t.n_max = L.n_max;
    t.token_len = a->token_len;
    t.frame_len = a->frame_len;
    t.bits = (uint32_t *)(ws + L.bits);
    t.words = L.words;
    t.path = (int32_t *)(ws + L.path);
    t.span_ws = (int32_t *)(ws + L.spans);
    t.alpha = ws + L.alpha;
}

mas_status launch(bool soft, TopoArgs &t, const mas_topo_args *a, void *stream) {
    int threads;
    const int j = pick_j(t.n_max, &threads);
    const size_t acc = a->emissions.dtype == MAS_FLOAT64 ? 8 : 4;
    size_t smem = 2 * (size_t)(kTopoPad + (int64_t)j * threads) * acc;
    if (soft && t.grad) smem += 2 * (size_t)t.V * acc;
    if (!soft) smem += 32 * kTopoWinWords * sizeof(uint32_t);
    DeviceInfo dev;
    mas_status st = current_device(&dev);
    if (st != MAS_OK) return st;
    if (smem + 1024 > (size_t)dev.smem_optin) return MAS_ERR_BAD_ARGUMENT;
    const int64_t B = a->emissions.dim[0];
    cudaStream_t s = (cudaStream_t)stream;
    switch (a->emissions.dtype) {
    case MAS_FLOAT32: st = topo_launch_type<float>(j, soft, t, B, threads, smem, dev, s); break;
    case MAS_FLOAT64: st = topo_launch_type<double>(j, soft, t, B, threads, smem, dev, s); break;
    case MAS_FLOAT16: st = topo_launch_type<__half>(j, soft, t, B, threads, smem, dev, s); break;
    default: st = topo_launch_type<__nv_bfloat16>(j, soft, t, B, threads, smem, dev, s); break;
    }
    if (st != MAS_OK) return st;
    return cudaGetLastError() == cudaSuccess ? MAS_OK : MAS_ERR_CUDA;
}

} // namespace

extern "C" size_t mas_topo_cuda_workspace_size(const mas_topo_args *args, int32_t soft) {
    if (mas_topo_check_args(args) != MAS_OK || cuda_limits(args) != MAS_OK) return 0;
    return topo_layout(args, soft != 0).total;
}

extern "C" mas_status mas_viterbi_cuda(const mas_topo_args *args,
                                       const mas_topo_hard_outputs *out, void *workspace,
                                       size_t workspace_size, void *stream,
                                       uint64_t *error_word) {
    mas_status st = out ? mas_topo_check_args(args) : MAS_ERR_NULL_POINTER;
    if (st == MAS_OK) st = cuda_limits(args);
    if (st == MAS_OK && !workspace) st = MAS_ERR_NULL_POINTER;
    if (st == MAS_OK && !out->state_ids && !out->frame_labels && !out->token_spans &&
        !out->token_scores && !out->score)
        st = MAS_ERR_BAD_ARGUMENT;
    if (st == MAS_OK && out->frame_labels && !args->labels) st = MAS_ERR_BAD_ARGUMENT;
    if (st != MAS_OK) return st;
    const TopoLayout L = topo_layout(args, 0);
    if (workspace_size < L.total) return MAS_ERR_WORKSPACE_TOO_SMALL;
    TopoArgs t = {};
    fill_args(t, args, L, align_workspace(workspace));
    t.state_ids = out->state_ids;
    t.state_ids_stride = out->state_ids_stride;
    t.frame_labels = out->frame_labels;
    t.frame_labels_stride = out->frame_labels_stride;
    t.token_spans = out->token_spans;
    t.token_spans_stride = out->token_spans_stride;
    t.token_scores = out->token_scores;
    t.token_scores_stride = out->token_scores_stride;
    t.score = out->score;
    t.error_word = (unsigned long long *)error_word;
    return launch(false, t, args, stream);
}

extern "C" mas_status mas_topo_forward_sum_cuda(const mas_topo_args *args,
                                                const mas_topo_soft_outputs *out,
                                                void *workspace, size_t workspace_size,
                                                void *stream, uint64_t *error_word) {
    mas_status st = out ? mas_topo_check_args(args) : MAS_ERR_NULL_POINTER;
    if (st == MAS_OK) st = cuda_limits(args);
    if (st == MAS_OK && !workspace) st = MAS_ERR_NULL_POINTER;
    if (st == MAS_OK && !out->log_z && !out->posterior.data && !out->grad.data)
        st = MAS_ERR_BAD_ARGUMENT;
    const int32_t acc = st == MAS_OK ? mas_accum_dtype(args->emissions.dtype) : 0;
    const int64_t B = st == MAS_OK ? args->emissions.dim[0] : 0;
    if (st == MAS_OK && out->posterior.data) {
        const mas_tensor3 *p = &out->posterior;
        if ((st = mas_check_tensor(p, acc)) == MAS_OK &&
            (p->dim[0] != B || p->dim[1] < mas_topology_states(&args->topology, args->tokens) ||
             p->dim[2] != topo_frames(args)))
            st = MAS_ERR_BAD_SHAPE;
    }
    if (st == MAS_OK && out->grad.data) {
        if (!args->gathered) st = MAS_ERR_BAD_ARGUMENT;
        else if ((st = mas_check_tensor(&out->grad, acc)) == MAS_OK &&
                 !mas_same_dims(&out->grad, &args->emissions))
            st = MAS_ERR_BAD_SHAPE;
    }
    if (st != MAS_OK) return st;
    const TopoLayout L = topo_layout(args, 1);
    if (workspace_size < L.total) return MAS_ERR_WORKSPACE_TOO_SMALL;
    TopoArgs t = {};
    fill_args(t, args, L, align_workspace(workspace));
    t.log_z = out->log_z;
    if (out->posterior.data) {
        t.post = out->posterior.data;
        t.ps0 = view_stride(&out->posterior, 0);
        t.ps1 = view_stride(&out->posterior, 1);
        t.ps2 = view_stride(&out->posterior, 2);
        t.post_rows = out->posterior.dim[1];
    }
    if (out->grad.data) {
        t.grad = out->grad.data;
        t.gs0 = view_stride(&out->grad, 0);
        t.gs1 = view_stride(&out->grad, 1);
        t.gs2 = view_stride(&out->grad, 2);
    }
    t.error_word = (unsigned long long *)error_word;
    return launch(true, t, args, stream);
}
