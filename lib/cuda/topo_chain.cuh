/* A topology's chain on CUDA (mas.h section 7): the arguments of the
 * sweeps, an item's shape and checks, its edges' weights and emission rows
 * (the CPU's lib/cpu/topology.c in the same order). Shared by the block
 * sweep (topo_sweep.cuh) and the round sweep (topo_rounds.cuh). */
#ifndef MAS_CUDA_TOPO_CHAIN_CUH
#define MAS_CUDA_TOPO_CHAIN_CUH

#include "common/checks.h"
#include "cuda/dp_link.cuh"
#include "cuda/dp_semiring.cuh"
#include "cuda/hard_common.cuh"

namespace mas_cuda {

constexpr int kTopoMaxK = 16;              /* states per token the parameters hold */
constexpr int kTopoPad = MAS_TOPO_MAX_SKIP; /* scores of states -8..-1 (virtual start at -1) */
constexpr int kTopoAhead = 4;              /* emission loads this many frames ahead */
constexpr int kTopoMaxThreads = 1024;
constexpr int kTopoMaxJ = 8; /* states per thread: at most 8192 states */
constexpr int kTopoWinWords = 2 * (MAS_TOPO_MAX_SKIP + 2); /* per frame of a backtrack window */
constexpr int kTopoRing = 256;    /* frames in the ring between two blocks of one item */
constexpr int kTopoProgress = 32; /* the consumer reports its progress every this many frames */

/* The pipelined Viterbi (several blocks an item, frames in segments): each
 * block sweeps `states` consecutive states of its item (a slab) over frames
 * [t_begin, t_end); the scores of the kTopoPad states below a slab come from
 * the block below through a ring of tagged entries (dp_link.cuh), one
 * entry a frame, as hard_forward.cuh hands its boundary over. Long-form:
 * the column of every state before a segment is a checkpoint, the segment's
 * bits the only ones kept (lib/cpu/longform.h describes the scheme). */
struct TopoPipe {
    int slabs, states;       /* blocks an item; states a block (J * threads) */
    int t_begin, t_end;      /* the frames of this sweep */
    int64_t item0;           /* first item of this launch */
    unsigned ticket0;        /* tickets taken by earlier launches of the sweep */
    unsigned *ticket;
    unsigned long long *ring; /* [B][slabs][kTopoRing][kTopoPad] tagged values */
    int *progress;           /* [B][slabs][kFlagStride]: frames the consumer has read */
    const void *ckpt_in;     /* accumulator [B][n_max]: the column at frame t_begin-1 */
    void *ckpt_out;          /* the column at frame t_end-1; NULL: not kept */
    int *bad;                /* [B]: OR of the slabs' NaN/+inf flags; NULL on a re-run */
    double *final_val;       /* [B][2]: states n-1 and alt_final at the last frame; NULL on a re-run */
    int *status;             /* [B] after the sweep (topo_pipe_settle) */
    int64_t *walk;           /* [B]: the path's state where the walk goes on */
    double *score;           /* [B]: the best path's score */
};

struct TopoArgs {
    const unsigned char *e;
    int32_t dtype, gathered;
    int64_t es0, es1, es2; /* element strides of the emissions */
    int64_t rows;          /* per-state emissions: dim[1] */
    int64_t frames;        /* S' */
    int64_t V;             /* gathered: dim[2] */
    int32_t k, has_blank, blank, skips;
    double stay[kTopoMaxK], adv[kTopoMaxK];
    double blank_stay, blank_adv, skip_pen;
    const int32_t *labels;
    int64_t labels_stride, tokens, n_max;
    const int64_t *token_len, *frame_len;
    /* workspace */
    uint32_t *bits; /* hard: [B][bits_frames][words][2] (move, skip) */
    int64_t words;  /* ceil(n_max / 32) */
    int64_t bits_frames; /* frames a row of bits holds: frames, or one segment's */
    int32_t *path;  /* hard: [B][frames] */
    int32_t *span_ws; /* hard: [B][tokens][2] */
    void *alpha;    /* soft: [B][frames][n_max], accumulator type */
    void *mid;      /* soft: [B][n_max], the forward's column at the meeting frame */
    int em_in_bits; /* hard: the outputs may use an item's bits as [frames] accumulators */
    int *half_bad;  /* soft: [B][2], each half's NaN/+inf flag */
    /* hard outputs (NULL: not wanted) */
    int32_t *state_ids;
    int64_t state_ids_stride;
    int32_t *frame_labels;
    int64_t frame_labels_stride;
    int32_t *token_spans;
    int64_t token_spans_stride;
    void *token_scores;
    int64_t token_scores_stride;
    void *score;
    /* soft outputs */
    void *log_z;
    void *post;
    int64_t ps0, ps1, ps2, post_rows;
    void *grad;
    int64_t gs0, gs1, gs2;
    unsigned long long *error_word;
    TopoPipe pipe;
    /* Hard MAS as the k = 1 chain (its long form, hard_topo.cuh): its
     * status for a transcript longer than the frames, and its outputs. */
    int hard_mas;
    int32_t *durations;
    int64_t durations_stride;
    int32_t *run_begin, *run_end; /* [B][tokens], for the dense path */
    int32_t *frame_token;         /* [B][frames], for the dense path */
};

/* The block's item: sizes and the chain's shape (lib/cpu/topology.c's
 * build_item). */
struct TopoItem {
    int64_t b, L, S, n;
    int d;               /* skip distance, 0 without skip edges */
    int64_t alt_final;   /* the second final state, -1 if none */
    double alt_weight;
};

__device__ __forceinline__ int32_t topo_label(const TopoArgs &a, int64_t b, int64_t i, int64_t j) {
    return a.labels[b * a.labels_stride + i * a.k + j];
}

/* Token of state s (-1 for a blank) and its place j in the token; s >= 0.
 * In 32 bits (states < 2^30, cuda_limits): a 64-bit division is a long
 * routine on the GPU, and the outputs take three of these a frame. */
__device__ __forceinline__ int64_t topo_token(const TopoArgs &a, int64_t s, int64_t *j) {
    const uint32_t k = (uint32_t)a.k, u = (uint32_t)s;
    if (!a.has_blank) {
        *j = u % k;
        return u / k;
    }
    const uint32_t r = u % (k + 1);
    *j = (int64_t)r - 1;
    return r == 0 ? -1 : (int64_t)(u / (k + 1));
}

/* Edge log-scores into state s (double, as the CPU builds them). */
__device__ __forceinline__ void topo_weights(const TopoArgs &a, const TopoItem &it, int64_t s,
                                             double *stay, double *move, double *skip) {
    int64_t j, i = topo_token(a, s, &j);
    *stay = i < 0 ? a.blank_stay : a.stay[j];
    *move = s == 0 ? 0 : i < 0 ? a.blank_adv : a.adv[j];
    *skip = -INFINITY;
    if (it.d && i >= 0 && j == 0) {
        if (a.has_blank)
            *skip = i == 0 ? 0
                    : topo_label(a, it.b, i - 1, a.k - 1) != topo_label(a, it.b, i, 0) ? a.adv[0]
                                                                                   : -INFINITY;
        else if (i >= 1)
            *skip = i == 1 ? a.skip_pen : a.adv[0] + a.skip_pen;
    }
}

/* The label of state s (the blank's on a blank); needs labels. */
__device__ __forceinline__ int32_t topo_state_label(const TopoArgs &a, const TopoItem &it,
                                                    int64_t s) {
    int64_t j, i = topo_token(a, s, &j);
    return i < 0 ? a.blank : topo_label(a, it.b, i, j);
}

/* The emission row of state s: its label (gathered) or s. */
__device__ __forceinline__ int64_t topo_row(const TopoArgs &a, const TopoItem &it, int64_t s) {
    return a.gathered ? topo_state_label(a, it, s) : s;
}

template <typename TV>
__device__ __forceinline__ typename AccOf<TV>::type topo_emission(const TopoArgs &a, int64_t b,
                                                                  int64_t t, int64_t row) {
    const TV *e = (const TV *)a.e;
    return widen(a.gathered ? e[b * a.es0 + t * a.es1 + row * a.es2]
                            : e[b * a.es0 + row * a.es1 + t * a.es2]);
}

/* Does the CPU read cell (t, s)? Every cell with skip edges, else the band
 * t - (S - n) <= s <= t. */
__device__ __forceinline__ bool topo_readable(const TopoItem &it, int64_t t, int64_t s) {
    return it.d ? true : (s <= t && s >= t - (it.S - it.n));
}

/* The item's checks (the CPU's check_item), block-wide; returns the status
 * and fills *it. Every thread gets the same answer. */
static __device__ int topo_check_item(const TopoArgs &a, int64_t b, TopoItem *it) {
    const int64_t L = a.token_len[b], S = a.frame_len[b], k = a.k;
    it->b = b;
    it->L = L;
    it->S = S;
    it->n = L * k + (a.has_blank ? L + 1 : 0);
    it->d = 0;
    it->alt_final = -1;
    it->alt_weight = 0;
    if (L < (a.has_blank ? 0 : 1) || L > a.tokens || S < 1 || S > a.frames) return MAS_ERR_BAD_LENGTH;
    if (!a.gathered && it->n > a.rows) return MAS_ERR_BAD_LENGTH;
    __shared__ int s_repeats;
    if (threadIdx.x == 0) s_repeats = 0;
    int bad = 0, repeats = 0;
    if (a.labels) {
        for (int64_t q = threadIdx.x; q < L * k; q += blockDim.x) {
            int32_t l = a.labels[b * a.labels_stride + q];
            bad |= a.gathered && (l < 0 || l >= a.V);
            bad |= a.has_blank && l == a.blank;
        }
        if (a.has_blank)
            for (int64_t i = 1 + threadIdx.x; i < L; i += blockDim.x)
                repeats += topo_label(a, b, i - 1, k - 1) == topo_label(a, b, i, 0);
    }
    __syncthreads();
    if (repeats) atomicAdd(&s_repeats, repeats);
    bad = __syncthreads_or(bad);
    if (bad) return MAS_ERR_BAD_ARGUMENT;
    int64_t need = k * L + s_repeats;
    const int skips = a.skips && L >= 2;
    if (a.skips) need = k * (L / 2 > 1 ? L / 2 : 1);
    if (need > S) return a.hard_mas ? MAS_ERR_X_LEN_GT_Y_LEN : MAS_ERR_TARGET_TOO_LONG;
    it->d = a.has_blank ? (L >= 1 ? 2 : 0) : skips ? (int)k + 1 : 0;
    if (a.has_blank && L >= 1) {
        it->alt_final = it->n - 2;
        it->alt_weight = 0;
    } else if (skips) {
        it->alt_final = it->n - 1 - k;
        it->alt_weight = a.skip_pen;
    }
    return MAS_OK;
}

/* What a sweep keeps (topo_sweep_impl, topo_rounds_impl). */
enum { MODE_BITS = 0, MODE_ALPHA = 1, MODE_COMBINE = 2, MODE_NONE = 3 };

} // namespace mas_cuda

#endif
