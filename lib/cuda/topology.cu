/* Topologies on CUDA (mas.h section 7): host entry points. The checks that
 * need no values are the CPU's (common/checks.h); item checks run in the
 * kernel and go to the error word. One block per item (topo_sweep.cuh),
 * launched on the caller's stream with no synchronisation and no
 * allocation. The kernels are instantiated per dtype in topology_<dtype>.cu
 * (topo_launch.cuh), so that the four compile in parallel. */
#include <cuda_runtime.h>
#include <math.h>
#include <string.h>

#include "common/checks.h"
#include "cuda/device_cache.cuh"
#include "cuda/hard_chain.h"
#include "cuda/hard_topo.h"
#include "cuda/topo_launch.cuh"
#include "mas.h"

using namespace mas_cuda;

namespace {

/* States an item may have for the one-block Viterbi (topo_viterbi, one
 * state a thread); more go to the pipelined one, several blocks an item
 * (topo_pipe_sweep), as does every long-form call. On the H100 the one
 * block is the faster up to here: CTC B=32 S=1500 L=300 (601 states) took
 * 0.65 ms in one block an item (block sweep; 0.31 ms on the round sweep)
 * against 0.95 ms in 5 blocks of 128; a cluster of blocks an item with the
 * round sweep took 0.60 ms (bench/results/topology-gpu-h100.md). */
constexpr int64_t kOneBlockStates = 1024;

/* Threads (= states) of a pipelined block: larger blocks for longer chains,
 * so that an item's blocks stay few enough to be resident together. */
int pipe_threads(int64_t n_max) { return n_max <= 65536 ? 128 : 256; }

/* Workspace regions (256-byte aligned): hard keeps decision bits (of every
 * frame, or of one segment of `seg` frames in the long form), the path and
 * span scratch, and for the pipelined Viterbi its links, flags and the
 * checkpoints; soft every score of the two sweeps (the forward's frames
 * before the meeting frame, the reversed sweep's from it on), the forward's
 * column at the meeting frame and each half's NaN flag. */
struct TopoLayout {
    int64_t n_max, words, frames;
    int pipe, threads, slabs;
    int64_t seg, nseg;
    size_t bits, path, spans, alpha, mid, half_bad, ring, progress, bad, final_val, status, walk,
        score, ckpt, ckpt_stride, total;
};

int64_t topo_frames(const mas_topo_args *a) {
    return a->gathered ? a->emissions.dim[1] : a->emissions.dim[2];
}

/* seg: frames a segment (0: every frame, the unbounded run). */
TopoLayout topo_layout(const mas_topo_args *a, int soft, int64_t seg = 0) {
    TopoLayout L;
    const int64_t B = a->emissions.dim[0], S = topo_frames(a);
    L.n_max = mas_topology_states(&a->topology, a->tokens);
    if (L.n_max < 1) L.n_max = 1;
    L.words = (L.n_max + 31) / 32;
    L.frames = S;
    L.seg = seg > 0 && seg < S ? seg : S;
    L.nseg = S > 0 ? (S + L.seg - 1) / L.seg : 1;
    L.pipe = !soft && (L.n_max > kOneBlockStates || L.nseg > 1);
    L.threads = pipe_threads(L.n_max);
    /* (n_max beyond 2^30 is refused by cuda_limits; no overflow before that) */
    L.slabs = L.n_max <= ((int64_t)1 << 30) ? (int)((L.n_max + L.threads - 1) / L.threads) : 1;
    const size_t acc = a->emissions.dtype == MAS_FLOAT64 ? 8 : 4;
    const size_t b = (size_t)B;
    size_t at = 0;
    L.bits = at;
    if (!soft) at += align256(b * (size_t)L.seg * (size_t)L.words * 8);
    L.path = at;
    if (!soft) at += align256(b * (size_t)S * 4);
    L.spans = at;
    if (!soft) at += align256(b * (size_t)(a->tokens > 0 ? a->tokens : 1) * 8);
    L.alpha = at;
    if (soft) at += align256(b * (size_t)S * (size_t)L.n_max * acc);
    L.mid = at;
    if (soft) at += align256(b * (size_t)L.n_max * acc);
    L.half_bad = at;
    if (soft) at += align256(b * 2 * sizeof(int));
    L.ring = at; /* between the blocks of an item: none with one block */
    if (L.pipe && L.slabs > 1) at += align256(b * (size_t)L.slabs * kTopoRing * kTopoPad * acc * 2);
    L.progress = at;
    if (L.pipe) at += align256((b * (size_t)L.slabs + 1) * kFlagStride * sizeof(int));
    L.bad = at;
    if (L.pipe) at += align256(b * sizeof(int));
    L.final_val = at;
    if (L.pipe) at += align256(b * 2 * sizeof(double));
    L.status = at;
    if (L.pipe) at += align256(b * sizeof(int));
    L.walk = at;
    if (L.pipe) at += align256(b * sizeof(int64_t));
    L.score = at;
    if (L.pipe) at += align256(b * sizeof(double));
    L.ckpt = at;
    L.ckpt_stride = align256(b * (size_t)L.n_max * acc);
    at += (size_t)(L.nseg - 1) * L.ckpt_stride;
    L.total = at + 256;
    return L;
}

/* The longest segment (fewest segments) whose layout fits in bytes; 0 when
 * none does. */
int64_t pick_segment(const mas_topo_args *a, size_t bytes) {
    const int64_t S = topo_frames(a);
    for (int64_t nseg = 1; nseg <= S; ++nseg) {
        const int64_t seg = (S + nseg - 1) / nseg;
        if (nseg > 1 && (S + seg - 1) / seg != nseg) continue; /* the same as a smaller count */
        const TopoLayout L = topo_layout(a, 0, seg);
        if (L.total <= bytes) return seg;
        /* the checkpoints alone only grow from here */
        if ((size_t)(nseg - 1) * L.ckpt_stride > bytes) break;
    }
    return 0;
}

/* The smallest hard workspace (the unbounded one when that is smaller). */
size_t min_hard_bytes(const mas_topo_args *a) {
    const int64_t S = topo_frames(a);
    size_t best = topo_layout(a, 0).total;
    for (int64_t nseg = 2; nseg <= S; ++nseg) {
        const int64_t seg = (S + nseg - 1) / nseg;
        if ((S + seg - 1) / seg != nseg) continue;
        const TopoLayout L = topo_layout(a, 0, seg);
        if (L.total < best) best = L.total;
        if ((size_t)(nseg - 1) * L.ckpt_stride > best) break;
    }
    return best;
}

/* States per thread and threads per block for n_max states; 0 when the
 * kernel cannot hold them. */
int pick_j(int64_t n_max, int *threads) {
    if (n_max < 1) n_max = 1;
    int64_t bd = n_max < kTopoMaxThreads ? (n_max + 31) / 32 * 32 : kTopoMaxThreads;
    int64_t j = (n_max + bd - 1) / bd;
    int jj = j <= 1 ? 1 : j <= 2 ? 2 : j <= 4 ? 4 : j <= 8 ? 8 : 0;
    if (jj > kTopoMaxJ) jj = 0;
    *threads = (int)bd;
    return jj;
}

/* What only the CUDA kernels limit: k; the states of the soft sweep's one
 * block an item; int32 frame and state indices in the sweeps. (How many
 * blocks of one item the device holds at once is checked at the call.) */
mas_status cuda_limits(const mas_topo_args *a, int soft) {
    if (a->topology.states_per_token > kTopoMaxK) return MAS_ERR_BAD_ARGUMENT;
    /* as the layout counts them: a transcript of no states still has one */
    const int64_t n_max = topo_layout(a, soft).n_max;
    int threads;
    if (soft && !pick_j(n_max, &threads)) return MAS_ERR_BAD_ARGUMENT;
    if (n_max > ((int64_t)1 << 30)) return MAS_ERR_BAD_ARGUMENT;
    if (a->emissions.dim[0] > INT32_MAX || topo_frames(a) > INT32_MAX) return MAS_ERR_BAD_SHAPE;
    /* the posterior's two blocks an item */
    if (soft && a->emissions.dim[0] > INT32_MAX / 2) return MAS_ERR_BAD_SHAPE;
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
    t.bits_frames = L.seg;
    t.path = (int32_t *)(ws + L.path);
    t.span_ws = (int32_t *)(ws + L.spans);
    t.alpha = ws + L.alpha;
    t.mid = ws + L.mid;
    /* an item's bits (words * 8 bytes a frame of a segment) hold its frames'
     * emissions once the walk is done: always in the unbounded layout */
    const size_t acc = a->emissions.dtype == MAS_FLOAT64 ? 8 : 4;
    t.em_in_bits = (size_t)L.seg * (size_t)L.words * 8 >= (size_t)L.frames * acc;
    t.half_bad = (int *)(ws + L.half_bad);
}

mas_status launch(bool soft, TopoArgs &t, const mas_topo_args *a, void *stream) {
    int threads;
    const int j = pick_j(t.n_max, &threads);
    const size_t acc = a->emissions.dtype == MAS_FLOAT64 ? 8 : 4;
    size_t smem;
    if (soft) {
        /* the block sweep's two columns, the gradient's per-label sums (the
         * round sweep was no faster in log-plus: bench/results/topology-gpu-h100.md) */
        smem = 2 * (size_t)(kTopoPad + (int64_t)j * threads) * acc;
        if (t.grad) smem += 2 * (size_t)t.V * acc;
    } else {
        /* the round sweep's edge rings, the backtrack's two windows */
        smem = topo_rounds_smem(threads, acc) + 2 * kTopoWalkWin * sizeof(uint32_t);
    }
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

/* The pipelined Viterbi over the layout's segments (topo_launch.cuh). */
mas_status launch_pipe(TopoArgs &t, const mas_topo_args *a, const TopoLayout &L,
                       unsigned char *ws, void *stream) {
    PipePlan p;
    p.threads = L.threads;
    p.slabs = L.slabs;
    p.seg = L.seg;
    p.nseg = L.nseg;
    p.frames = L.frames;
    const size_t acc = a->emissions.dtype == MAS_FLOAT64 ? 8 : 4;
    p.smem = 2 * (size_t)(kTopoPad + p.threads) * acc;
    p.ring_clear = ws + L.ring;
    p.ring_clear_bytes = L.bad - L.ring;
    p.ckpt = ws + L.ckpt;
    p.ckpt_stride = L.ckpt_stride;
    t.pipe.slabs = L.slabs;
    t.pipe.states = L.threads;
    t.pipe.ring = (unsigned long long *)(ws + L.ring);
    t.pipe.progress = (int *)(ws + L.progress);
    t.pipe.ticket = (unsigned *)(ws + L.progress) +
                    (size_t)a->emissions.dim[0] * L.slabs * kFlagStride;
    t.pipe.bad = (int *)(ws + L.bad);
    t.pipe.final_val = (double *)(ws + L.final_val);
    t.pipe.status = (int *)(ws + L.status);
    t.pipe.walk = (int64_t *)(ws + L.walk);
    t.pipe.score = (double *)(ws + L.score);
    DeviceInfo dev;
    mas_status st = current_device(&dev);
    if (st != MAS_OK) return st;
    const int64_t B = a->emissions.dim[0];
    cudaStream_t s = (cudaStream_t)stream;
    switch (a->emissions.dtype) {
    case MAS_FLOAT32: st = topo_pipe_type<float>(t, p, B, dev, s); break;
    case MAS_FLOAT64: st = topo_pipe_type<double>(t, p, B, dev, s); break;
    case MAS_FLOAT16: st = topo_pipe_type<__half>(t, p, B, dev, s); break;
    default: st = topo_pipe_type<__nv_bfloat16>(t, p, B, dev, s); break;
    }
    if (st != MAS_OK) return st;
    return cudaGetLastError() == cudaSuccess ? MAS_OK : MAS_ERR_CUDA;
}

/* Hard MAS's item as the k = 1 chain: per-state emissions = value. */
mas_topo_args hard_chain(const mas_tensor3 *value, const int64_t *x_len, const int64_t *y_len) {
    mas_topo_args a;
    memset(&a, 0, sizeof a);
    a.topology.states_per_token = 1;
    a.topology.skip_penalty = -INFINITY;
    a.emissions = *value;
    a.tokens = value->dim[1];
    a.token_len = x_len;
    a.frame_len = y_len;
    return a;
}

} // namespace

namespace mas_cuda {

HardTopoExtra hard_topo_extra(int64_t B, int64_t T, int64_t S) {
    HardTopoExtra e;
    size_t at = 0;
    e.frame_token = at;
    at += align256((size_t)B * (size_t)S * 4);
    e.run_begin = at;
    at += align256((size_t)B * (size_t)T * 4);
    e.run_end = at;
    at += align256((size_t)B * (size_t)T * 4);
    e.lengths = at;
    at += align256((size_t)B * 16);
    e.total = at;
    return e;
}

size_t hard_topo_min_bytes(int64_t B, int64_t T, int64_t S, mas_dtype dtype) {
    static const int64_t one = 1;
    char dummy = 0;
    mas_tensor3 v = {&dummy, (int32_t)dtype, 0, {B, T, S}, {0, 0, 0}};
    const mas_topo_args a = hard_chain(&v, &one, &one);
    if (mas_topo_check_args(&a) != MAS_OK || cuda_limits(&a, 0) != MAS_OK) return 0;
    return hard_topo_extra(B, T, S).total + min_hard_bytes(&a);
}

mas_status hard_topo_run(const mas_tensor3 *value, const int64_t *x_len, const int64_t *y_len,
                         const mas_hard_outputs *out, void *workspace, size_t workspace_size,
                         void *stream, uint64_t *error_word) {
    const int64_t B = value->dim[0], T = value->dim[1], S = value->dim[2];
    const mas_topo_args a = hard_chain(value, x_len, y_len);
    mas_status st = mas_topo_check_args(&a);
    if (st == MAS_OK) st = cuda_limits(&a, 0);
    if (st != MAS_OK) return st;
    const HardTopoExtra e = hard_topo_extra(B, T, S);
    if (workspace_size < e.total) return MAS_ERR_WORKSPACE_TOO_SMALL;
    const size_t rest = workspace_size - e.total;
    TopoLayout L = topo_layout(&a, 0);
    if (rest < L.total) {
        const int64_t seg = pick_segment(&a, rest);
        if (!seg) return MAS_ERR_WORKSPACE_TOO_SMALL;
        L = topo_layout(&a, 0, seg);
    }
    unsigned char *ws = align_workspace(workspace), *base = ws + e.total;
    TopoArgs t = {};
    fill_args(t, &a, L, base);
    t.hard_mas = 1;
    t.state_ids = out->indices;
    t.state_ids_stride = out->indices_stride;
    t.durations = out->durations;
    t.durations_stride = out->durations_stride;
    if (out->path.data) {
        t.frame_token = (int32_t *)(ws + e.frame_token);
        t.run_begin = (int32_t *)(ws + e.run_begin);
        t.run_end = (int32_t *)(ws + e.run_end);
    }
    t.score = out->score;
    t.error_word = (unsigned long long *)error_word;
    return L.pipe ? launch_pipe(t, &a, L, base, stream) : launch(false, t, &a, stream);
}

} // namespace mas_cuda

extern "C" size_t mas_topo_cuda_workspace_size(const mas_topo_args *args, int32_t soft) {
    if (mas_topo_check_args(args) != MAS_OK || cuda_limits(args, soft != 0) != MAS_OK) return 0;
    const size_t own = topo_layout(args, soft != 0).total;
    const size_t chain = soft ? 0 : chain_viterbi_bytes(args); /* hard_chain.h */
    return chain > own ? chain : own;
}

extern "C" size_t mas_topo_cuda_min_workspace_size(const mas_topo_args *args) {
    if (mas_topo_check_args(args) != MAS_OK || cuda_limits(args, 0) != MAS_OK) return 0;
    return min_hard_bytes(args);
}

extern "C" mas_status mas_viterbi_cuda(const mas_topo_args *args,
                                       const mas_topo_hard_outputs *out, void *workspace,
                                       size_t workspace_size, void *stream,
                                       uint64_t *error_word) {
    mas_status st = out ? mas_topo_check_args(args) : MAS_ERR_NULL_POINTER;
    if (st == MAS_OK) st = cuda_limits(args, 0);
    if (st == MAS_OK && !workspace) st = MAS_ERR_NULL_POINTER;
    if (st == MAS_OK && !out->state_ids && !out->frame_labels && !out->token_spans &&
        !out->token_scores && !out->score)
        st = MAS_ERR_BAD_ARGUMENT;
    if (st == MAS_OK && out->frame_labels && !args->labels) st = MAS_ERR_BAD_ARGUMENT;
    if (st != MAS_OK) return st;
    /* the unbounded layout when it fits, else the long form's longest segment */
    TopoLayout L = topo_layout(args, 0);
    if (workspace_size < L.total) {
        const int64_t seg = pick_segment(args, workspace_size);
        if (!seg) return MAS_ERR_WORKSPACE_TOO_SMALL;
        L = topo_layout(args, 0, seg);
    }
    /* a plain chain: hard MAS's kernels (the same bits), one launch when
     * its items fit one block (no workspace), else several blocks an item
     * in the unbounded workspace */
    bool taken = false;
    st = chain_viterbi_small(args, out, stream, error_word, &taken);
    if (taken || st != MAS_OK) return st;
    const size_t chain = chain_viterbi_bytes(args);
    if (chain && workspace_size >= chain)
        return chain_viterbi_blocks(args, out, workspace, stream, error_word);
    unsigned char *ws = align_workspace(workspace);
    TopoArgs t = {};
    fill_args(t, args, L, ws);
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
    if (L.pipe) return launch_pipe(t, args, L, ws, stream);
    return launch(false, t, args, stream);
}

extern "C" mas_status mas_topo_forward_sum_cuda(const mas_topo_args *args,
                                                const mas_topo_soft_outputs *out,
                                                void *workspace, size_t workspace_size,
                                                void *stream, uint64_t *error_word) {
    mas_status st = out ? mas_topo_check_args(args) : MAS_ERR_NULL_POINTER;
    if (st == MAS_OK) st = cuda_limits(args, 1);
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
