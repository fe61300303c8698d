/* Viterbi of a plain chain topology by hard MAS's kernels (hard_chain.h):
 * the one-block kernel (hard_small.cuh) when an item fits it, else the
 * forward of hard MAS's several blocks an item (hard_forward.cuh) and its
 * backtrack (hard_finish.h), between a kernel that makes the chain's
 * lengths and item checks and one that writes the topology's outputs. */
#include <cuda_runtime.h>
#include <math.h>

#include "cuda/device_cache.cuh"
#include "cuda/hard_chain.h"
#include "cuda/hard_finish.h"
#include "cuda/hard_forward.cuh"
#include "cuda/hard_small.cuh"

namespace mas_cuda {

namespace {

bool plain_chain(const mas_topo_args *a) {
    const mas_topology &t = a->topology;
    const int64_t k = t.states_per_token, rows = a->emissions.dim[1];
    /* hard MAS's kernels size their workspace and blocks by the emissions'
     * state rows, the topology sweep by the chain's k x tokens: rows beyond
     * that stay on the sweep, and so do chains longer than kChainMaxRows
     * (hard_forward's blocks of one item must all be resident) */
    return !t.has_blank && !(t.skip_penalty > -INFINITY) && !a->gathered && k >= 1 &&
           k <= kChainMaxK && rows <= kChainMaxRows && (rows + k - 1) / k <= a->tokens;
}

ChainEdges chain_edges(const mas_topology &t) {
    ChainEdges e = {};
    e.k = t.states_per_token;
    for (int j = 0; j < e.k; ++j) {
        e.stay[j] = t.stay ? t.stay[j] : 0.0;
        e.move[j] = t.advance ? t.advance[j] : 0.0;
    }
    return e;
}

/* The several-blocks path's workspace: hard MAS's regions over the states
 * (bits, rings, flags, the path's frames and runs), then per item its
 * states and frames (int64, the forward's x_len / y_len) and its status. */
struct ChainLayout {
    HardLayout hard;
    size_t lens, status, total;
};

ChainLayout chain_layout(const mas_topo_args *a) {
    const mas_tensor3 &e = a->emissions;
    const int64_t B = e.dim[0];
    ChainLayout L;
    L.hard = hard_layout(B, e.dim[1], e.dim[2], (mas_dtype)e.dtype);
    size_t at = L.hard.total - 256; /* its regions' end (the 256 align the pointer) */
    L.lens = at;
    at += align256((size_t)B * 2 * sizeof(int64_t));
    L.status = at;
    at += align256((size_t)B * sizeof(int));
    L.total = at + 256;
    return L;
}

struct ChainPrepArgs {
    int64_t B, tokens, n_max, S;
    int k;
    const int64_t *token_len, *frame_len;
    int64_t *states, *frames; /* [B] each: 0 for a failing item */
    int *status;
};

/* The topology's item checks (as the CPU's, in its order) and the states
 * and frames hard MAS's forward and backtrack take. */
__global__ void chain_prep(ChainPrepArgs p) {
    const int64_t b = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= p.B) return;
    const int64_t L = p.token_len[b], F = p.frame_len[b];
    const int st = chain_length_status(p.k, p.tokens, L, F, p.n_max, p.S);
    p.states[b] = st == MAS_OK ? L * p.k : 0;
    p.frames[b] = st == MAS_OK ? F : 0;
    p.status[b] = st;
}

struct ChainOutArgs {
    int64_t B, T, S, tokens;
    int k;
    const unsigned char *value; /* emissions [B, T, S] */
    int64_t s0, s1, s2;
    const int64_t *token_len;
    const int32_t *frame_state, *run_begin, *run_end; /* the backtrack's ([B][S], [B][T]) */
    const int32_t *labels;
    int64_t labels_stride;
    int32_t *frame_labels;
    int64_t frame_labels_stride;
    int32_t *token_spans;
    int64_t token_spans_stride;
    void *token_scores;
    int64_t token_scores_stride;
};

/* The topology's outputs from the backtrack's path (topology.c
 * walk_frames): the label of each frame's state, each token's first and
 * last frame and the mean emission of its frames, summed in float64 from
 * its last frame down as the CPU walks; a failed item (its frame 0 has no
 * state) as beyond the lengths. */
template <typename TV> __global__ void chain_outputs(ChainOutArgs a) {
    using TA = typename AccOf<TV>::type;
    const int64_t n = (int64_t)gridDim.x * blockDim.x;
    const int64_t first = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (a.token_spans || a.token_scores)
        for (int64_t x = first; x < a.B * a.tokens; x += n) {
            const int64_t b = x / a.tokens, i = x % a.tokens;
            const int32_t *ft = a.frame_state + b * a.S;
            const int64_t L = ft[0] >= 0 ? a.token_len[b] : 0;
            int32_t lo = -1, hi = -1;
            if (i < L) {
                lo = a.run_begin[b * a.T + i * a.k];
                hi = a.run_end[b * a.T + i * a.k + a.k - 1] - 1;
            }
            if (a.token_spans) {
                a.token_spans[b * a.token_spans_stride + 2 * i] = lo;
                a.token_spans[b * a.token_spans_stride + 2 * i + 1] = hi;
            }
            if (a.token_scores) {
                const TV *e = (const TV *)a.value + b * a.s0;
                double sum = 0;
                for (int64_t f = hi; f >= lo && f >= 0; --f)
                    sum += (double)widen(e[(int64_t)ft[f] * a.s1 + f * a.s2]);
                ((TA *)a.token_scores)[b * a.token_scores_stride + i] =
                    i < L ? (TA)(sum / (double)(hi - lo + 1)) : (TA)0;
            }
        }
    if (a.frame_labels)
        for (int64_t x = first; x < a.B * a.S; x += n) {
            const int64_t b = x / a.S, f = x % a.S;
            const int32_t s = a.frame_state[x];
            a.frame_labels[b * a.frame_labels_stride + f] = s >= 0 ? a.labels[b * a.labels_stride + s] : -1;
        }
}

} // namespace

mas_status chain_viterbi_small(const mas_topo_args *args, const mas_topo_hard_outputs *out,
                               void *stream, uint64_t *error_word, bool *taken) {
    *taken = false;
    const mas_tensor3 &e = args->emissions;
    if (!plain_chain(args) || e.dim[0] > 0x7fffffff) return MAS_OK;
    const mas_dtype dtype = (mas_dtype)e.dtype;
    const int mode = load_mode(&e, (int64_t)mas_dtype_size(dtype));
    DeviceInfo dev;
    mas_status st = current_device(&dev);
    if (st != MAS_OK) return st;
    int warps = 0;
    const size_t smem = small_plan(e.dim[1], e.dim[2], mode, dtype, dev, &warps);
    if (!smem) return MAS_OK;
    *taken = true;

    SmallArgs sa = {};
    sa.value = (const unsigned char *)e.data;
    sa.s0 = view_stride(&e, 0);
    sa.s1 = view_stride(&e, 1);
    sa.s2 = view_stride(&e, 2);
    sa.T = e.dim[1];
    sa.S = e.dim[2];
    sa.x_len = args->token_len;
    sa.y_len = args->frame_len;
    sa.warps = warps;
    sa.sw = (int)((e.dim[2] + 31) / 32);
    sa.indices = out->state_ids;
    sa.indices_stride = out->state_ids_stride;
    sa.score = out->score;
    sa.score_f64 = dtype == MAS_FLOAT64;
    sa.error_word = (unsigned long long *)error_word;
    SmallChain &c = sa.chain;
    c.edges = chain_edges(args->topology);
    c.tokens = args->tokens;
    c.labels = args->labels;
    c.labels_stride = args->labels_stride;
    c.frame_labels = out->frame_labels;
    c.frame_labels_stride = out->frame_labels_stride;
    c.token_spans = out->token_spans;
    c.token_spans_stride = out->token_spans_stride;
    c.token_scores = out->token_scores;
    c.token_scores_stride = out->token_scores_stride;
    st = launch_small_type<true>(dtype, mode, sa, e.dim[0], smem, dev, (cudaStream_t)stream);
    if (st != MAS_OK) return st;
    return cudaGetLastError() == cudaSuccess ? MAS_OK : MAS_ERR_CUDA;
}

size_t chain_viterbi_bytes(const mas_topo_args *args) {
    return plain_chain(args) ? chain_layout(args).total : 0;
}

mas_status chain_viterbi_blocks(const mas_topo_args *args, const mas_topo_hard_outputs *out,
                                void *workspace, void *stream, uint64_t *error_word) {
    const mas_tensor3 &e = args->emissions;
    const int64_t B = e.dim[0], T = e.dim[1], S = e.dim[2];
    const mas_dtype dtype = (mas_dtype)e.dtype;
    DeviceInfo dev;
    mas_status st = current_device(&dev);
    if (st != MAS_OK) return st;
    cudaStream_t s = (cudaStream_t)stream;
    const ChainLayout CL = chain_layout(args);
    unsigned char *ws = align_workspace(workspace);
    int64_t *states = (int64_t *)(ws + CL.lens), *frames = states + B;
    int *status = (int *)(ws + CL.status);

    ChainPrepArgs p;
    p.B = B;
    p.tokens = args->tokens;
    p.n_max = T;
    p.S = S;
    p.k = args->topology.states_per_token;
    p.token_len = args->token_len;
    p.frame_len = args->frame_len;
    p.states = states;
    p.frames = frames;
    p.status = status;
    chain_prep<<<(unsigned)((B + 127) / 128), 128, 0, s>>>(p);

    ForwardArgs fa = forward_args(CL.hard, ws, &e, states, frames);
    fa.chain = chain_edges(args->topology);
    st = launch_forward_dtype<true>(dtype, load_mode(&e, (int64_t)mas_dtype_size(dtype)), fa, B,
                                    dev, s);
    if (st != MAS_OK) return st;
    mas_hard_outputs ho = {};
    ho.indices = out->state_ids;
    ho.indices_stride = out->state_ids_stride;
    ho.score = out->score;
    st = hard_finish(CL.hard, ws, B, T, S, states, frames, dtype == MAS_FLOAT64, &ho, dev, s,
                     error_word, status);
    if (st != MAS_OK) return st;

    if (out->frame_labels || out->token_spans || out->token_scores) {
        ChainOutArgs o;
        o.B = B;
        o.T = T;
        o.S = S;
        o.tokens = args->tokens;
        o.k = args->topology.states_per_token;
        o.value = (const unsigned char *)e.data;
        o.s0 = view_stride(&e, 0);
        o.s1 = view_stride(&e, 1);
        o.s2 = view_stride(&e, 2);
        o.token_len = args->token_len;
        o.frame_state = (const int32_t *)(ws + CL.hard.frame_token);
        o.run_begin = (const int32_t *)(ws + CL.hard.run_begin);
        o.run_end = (const int32_t *)(ws + CL.hard.run_end);
        o.labels = args->labels;
        o.labels_stride = args->labels_stride;
        o.frame_labels = out->frame_labels;
        o.frame_labels_stride = out->frame_labels_stride;
        o.token_spans = out->token_spans;
        o.token_spans_stride = out->token_spans_stride;
        o.token_scores = out->token_scores;
        o.token_scores_stride = out->token_scores_stride;
        const int64_t work = B * (S > args->tokens ? S : args->tokens);
        int64_t blocks = (work + 255) / 256;
        if (blocks > (int64_t)dev.sms * 8) blocks = (int64_t)dev.sms * 8;
        switch (dtype) {
        case MAS_FLOAT32: chain_outputs<float><<<(unsigned)blocks, 256, 0, s>>>(o); break;
        case MAS_FLOAT64: chain_outputs<double><<<(unsigned)blocks, 256, 0, s>>>(o); break;
        case MAS_FLOAT16: chain_outputs<__half><<<(unsigned)blocks, 256, 0, s>>>(o); break;
        default: chain_outputs<__nv_bfloat16><<<(unsigned)blocks, 256, 0, s>>>(o); break;
        }
    }
    return cudaGetLastError() == cudaSuccess ? MAS_OK : MAS_ERR_CUDA;
}

} // namespace mas_cuda
