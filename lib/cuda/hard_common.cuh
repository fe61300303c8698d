/* Shared pieces of the CUDA hard MAS: element widening, infinities, the
 * length rules, cp.async wrappers and the workspace layout that the host
 * sizes and the three kernels (forward sweep, backtrack, dense path) share. */
#ifndef MAS_CUDA_HARD_COMMON_CUH
#define MAS_CUDA_HARD_COMMON_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stddef.h>
#include <stdint.h>

#include "mas.h"

namespace mas_cuda {

constexpr unsigned kFullMask = 0xffffffffu;
/* Frames per chunk: the unit of tile loads, decision-word stores and the
 * hand-over of boundary scores between pipeline stages. */
constexpr int kChunk = 32;
/* Tile buffers per warp: loads run this many chunks minus one ahead. */
constexpr int kStages = 3;
/* Chunks in the shared-memory ring between two warps of one block: the
 * producer writes chunk c+1 while the consumer reads chunks c and c-1. */
constexpr int kSmemRingChunks = 3;
/* Frames in the global ring between the last warp of one block and the first
 * warp of the next block of the same item: far more than the consumer lags,
 * so the producer almost never waits for it. */
constexpr int kGlobalRingFrames = 1024;
/* The consumer reports its progress to the producer every this many chunks. */
constexpr int kProgressChunks = 8;
/* The planner gives every block at least this many tokens of an item when
 * the device's shared memory allows (fewer block boundaries, fewer rings). */
constexpr int64_t kMinSlabTokens = 128;
/* Tokens of the smallest block (one warp of 32 lanes x 2 tokens): what the
 * workspace's rings per item are sized for, whatever the device allows. */
constexpr int64_t kMinBlockTokens = 64;
/* One flag per 128-byte line. */
constexpr int kFlagStride = 32;

__device__ __forceinline__ void store_release(int *p, int v) {
    asm volatile("st.release.gpu.global.s32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ int load_acquire(const int *p) {
    int v;
    asm volatile("ld.acquire.gpu.global.s32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

/* A polling thread's pause between loads of a flag (sm_70 on). */
__device__ __forceinline__ void backoff_sleep() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700
    __nanosleep(64);
#endif
}

template <typename TV> struct AccOf { using type = float; };
template <> struct AccOf<double> { using type = double; };

__device__ __forceinline__ float widen(float x) { return x; }
__device__ __forceinline__ double widen(double x) { return x; }
__device__ __forceinline__ float widen(__half x) { return __half2float(x); }
__device__ __forceinline__ float widen(__nv_bfloat16 x) { return __bfloat162float(x); }

template <typename TA> __device__ __forceinline__ TA neg_inf();
template <> __device__ __forceinline__ float neg_inf<float>() { return __int_as_float(0xff800000); }
template <> __device__ __forceinline__ double neg_inf<double>() {
    return __longlong_as_double((long long)0xfff0000000000000ull);
}
template <typename TA> __device__ __forceinline__ TA pos_inf();
template <> __device__ __forceinline__ float pos_inf<float>() { return __int_as_float(0x7f800000); }
template <> __device__ __forceinline__ double pos_inf<double>() {
    return __longlong_as_double((long long)0x7ff0000000000000ull);
}

/* The rules of mas.h, in the order the CPU backend checks them. */
__device__ __forceinline__ int length_status(int64_t x, int64_t y, int64_t T, int64_t S) {
    if (x < 1 || y < 1 || x > T || y > S) return MAS_ERR_BAD_LENGTH;
    if (x > y) return MAS_ERR_X_LEN_GT_Y_LEN;
    return MAS_OK;
}

/* 16-byte global-to-shared copy that completes asynchronously on sm_80 and
 * later; a plain copy on older targets (the PTX fallback). */
__host__ __device__ __forceinline__ void copy16_async(void *smem_dst, const void *gsrc) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    unsigned s = (unsigned)__cvta_generic_to_shared(smem_dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(gsrc) : "memory");
#else
    *(int4 *)smem_dst = *(const int4 *)gsrc;
#endif
}
/* copy16_async, or 16 zero bytes where !real (which reads nothing) */
__device__ __forceinline__ void copy16_async_or_zero(void *smem_dst, const void *gsrc, bool real) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    const unsigned s = (unsigned)__cvta_generic_to_shared(smem_dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gsrc),
                 "r"(real ? 16 : 0) : "memory");
#else
    *(int4 *)smem_dst = real ? *(const int4 *)gsrc : make_int4(0, 0, 0, 0);
#endif
}
/* One 4- or 8-byte element to shared memory asynchronously on sm_80 and
 * later, zero where !real (which reads nothing); a plain copy on older
 * targets. */
template <typename T>
__device__ __forceinline__ void copy_elem_async(T *smem_dst, const T *gsrc, bool real) {
    static_assert(sizeof(T) == 4 || sizeof(T) == 8, "cp.async copies 4, 8 or 16 bytes");
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    const unsigned s = (unsigned)__cvta_generic_to_shared(smem_dst);
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" ::"r"(s), "l"(gsrc),
                 "n"((int)sizeof(T)), "r"(real ? (int)sizeof(T) : 0) : "memory");
#else
    *smem_dst = real ? *gsrc : T(0);
#endif
}
__device__ __forceinline__ void async_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}
template <int N> __device__ __forceinline__ void async_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
#endif
}

/* Workspace regions, each 256-byte aligned. Sizes depend on the shape and
 * dtype only, never on the device, so *_workspace_size needs no device. */
struct HardLayout {
    int64_t groups;      /* G = ceil(T/32): decision words per frame */
    int64_t max_slabs;   /* upper bound on blocks per item */
    size_t bits;         /* uint32 [B][G][S]: bit i%32 of word (i/32, j) */
    size_t ring;         /* tagged entries [B][max_slabs][kGlobalRingFrames] */
    size_t flags;        /* int [B][max_slabs][kFlagStride] + ticket line */
    size_t group_flag;   /* int [B][G]: 1 when a NaN/+inf band cell of group g was seen */
    size_t final_score;  /* double [B]: Q(X-1, Y-1) */
    size_t frame_token;  /* int32 [B][S]: the path's token at each frame, -1 past y_len */
    size_t run_begin;    /* int32 [B][T]: first frame of token i's run */
    size_t run_end;      /* int32 [B][T]: one past its last frame */
    size_t total;
};

static inline size_t align256(size_t x) { return (x + 255) / 256 * 256; }

/* The caller's workspace, rounded up to the 256 bytes every *_layout keeps
 * in reserve for it. */
static inline unsigned char *align_workspace(void *workspace) {
    return (unsigned char *)align256((size_t)(uintptr_t)workspace);
}

/* A view: dims {d0, d1, d2}, strides {s0, s1, s2} in elements. */
static inline mas_tensor3 make_tensor3(void *data, int32_t dtype, int64_t d0, int64_t d1,
                                       int64_t d2, int64_t s0, int64_t s1, int64_t s2) {
    mas_tensor3 t;
    t.data = data;
    t.dtype = dtype;
    t.reserved_ = 0;
    t.dim[0] = d0;
    t.dim[1] = d1;
    t.dim[2] = d2;
    t.stride[0] = s0;
    t.stride[1] = s1;
    t.stride[2] = s2;
    return t;
}

/* Stride of an axis as far as addressing goes: a size-1 axis is never
 * stepped along, whatever stride the caller gave it. */
static inline int64_t view_stride(const mas_tensor3 *t, int k) {
    return t->dim[k] == 1 ? 0 : t->stride[k];
}

/* A plain chain topology (mas.h section 7: k states a token, per-state
 * stay and advance log-scores, no blanks, no token skips) run by hard MAS's
 * forward sweeps: hard MAS over the states with the edges' log-scores
 * added before the compare, as the CPU's dp_core adds them
 * (PLUS(alpha + stay, alpha' + move) + cell). */
constexpr int kChainMaxK = 8;
/* Most states (emission rows) a plain chain runs on hard MAS's kernels. */
constexpr int64_t kChainMaxRows = 65536;
struct ChainEdges {
    int k;                                      /* states a token */
    double stay[kChainMaxK], move[kChainMaxK]; /* 0 where the topology has none */
};
/* A lane's edges into its K consecutive states from `first`, converted to
 * the accumulator type once (as the CPU converts them); the move into
 * state 0 comes from the virtual start: 0. */
template <typename TA, int K> struct LaneEdges {
    TA s[K], m[K];
};
template <typename TA, int K>
__device__ __forceinline__ LaneEdges<TA, K> lane_edges(const ChainEdges &e, int64_t first) {
    LaneEdges<TA, K> w;
#pragma unroll
    for (int k = 0; k < K; ++k) {
        const int j = (int)((first + k) % e.k);
        w.s[k] = (TA)e.stay[j];
        w.m[k] = first + k == 0 ? (TA)0 : (TA)e.move[j];
    }
    return w;
}

/* The chain's item checks, in the CPU's order (topology.c check_item):
 * L tokens of k states, F frames, per-state emissions of n_max states and
 * S frames. */
__device__ __forceinline__ int chain_length_status(int k, int64_t tokens, int64_t L, int64_t F,
                                                   int64_t n_max, int64_t S) {
    if (L < 1 || L > tokens || F < 1 || F > S) return MAS_ERR_BAD_LENGTH;
    if (L > n_max / k) return MAS_ERR_BAD_LENGTH; /* k L states > n_max */
    if (L * k > F) return MAS_ERR_TARGET_TOO_LONG;
    return MAS_OK;
}

/* How the forward kernels' value tiles reach shared memory. */
enum { LOAD_BTS = 0, /* frames contiguous, 16-byte aligned rows: cp.async */
       LOAD_BST = 1, /* tokens contiguous, 16-byte aligned rows: cp.async */
       LOAD_ANY = 2  /* any strides: element by element */ };

static inline bool aligned16(const void *p, int64_t s_a, int64_t s_b, int64_t es) {
    return ((uintptr_t)p % 16) == 0 && (s_a * es) % 16 == 0 && (s_b * es) % 16 == 0;
}

/* The value tile loads that a [B, T, S] view's strides allow. */
static inline int load_mode(const mas_tensor3 *value, int64_t es) {
    const int64_t s0 = view_stride(value, 0), s1 = view_stride(value, 1), s2 = view_stride(value, 2);
    if (s2 == 1 && aligned16(value->data, s0, s1, es)) return LOAD_BTS;
    if (s1 == 1 && aligned16(value->data, s0, s2, es)) return LOAD_BST;
    return LOAD_ANY;
}

/* ring_frames: entries a global ring (the fused sweep's consumers lag less
 * than hard_forward's and take a shorter one). */
static inline HardLayout hard_layout(int64_t B, int64_t T, int64_t S, mas_dtype dtype,
                                     int ring_frames = kGlobalRingFrames) {
    HardLayout L;
    size_t acc = dtype == MAS_FLOAT64 ? 8 : 4;
    L.groups = (T + 31) / 32;
    L.max_slabs = (T + kMinBlockTokens - 1) / kMinBlockTokens;
    size_t at = 0;
    L.bits = at;
    at += align256((size_t)B * (size_t)L.groups * (size_t)S * 4);
    L.ring = at;
    at += align256((size_t)B * (size_t)L.max_slabs * (size_t)ring_frames * acc * 2);
    L.flags = at;
    at += align256(((size_t)B * (size_t)L.max_slabs + 1) * kFlagStride * sizeof(int));
    L.group_flag = at;
    at += align256((size_t)B * (size_t)L.groups * sizeof(int));
    L.final_score = at;
    at += align256((size_t)B * sizeof(double));
    L.frame_token = at;
    at += align256((size_t)B * (size_t)S * 4);
    L.run_begin = at;
    at += align256((size_t)B * (size_t)T * 4);
    L.run_end = at;
    at += align256((size_t)B * (size_t)T * 4);
    L.total = at + 256; /* room to align the caller's pointer */
    return L;
}

/* hard_backtrack_block (hard_backtrack_block.cuh): windows of 32 frames a
 * block of a cluster of c holds at most; the rows of words it keeps: all
 * 1 + groups (row -1 first), or, streamed a stage of `stage` groups at a
 * time, the stage's and the row below it (what a stage's walks read); its
 * dynamic shared memory in bytes for clusters of c blocks (those rows of
 * [32 windows] words; the moves [windows][groups * 32] of every start of
 * every window; the token below the block's windows for every start at
 * their top; the path's token at each window's top); the most hard_finish
 * gives a block (else the warp an item of hard_backtrack). */
__host__ __device__ __forceinline__ int64_t backtrack_block_windows(int64_t S, int c) {
    return ((S + 31) / 32 + c - 1) / c;
}
__host__ __device__ __forceinline__ int64_t backtrack_block_rows(int64_t groups, int stage) {
    return stage > 0 && stage < groups ? stage + 1 : 1 + groups;
}
static inline size_t backtrack_block_smem(int64_t groups, int64_t S, int c, int stage = 0) {
    const int64_t w = backtrack_block_windows(S, c), starts = groups * 32;
    return (size_t)(backtrack_block_rows(groups, stage) * 32 * w + w * starts + starts + w) * 4;
}
/* Streamed (hard_finish's slab_done, stages of `stage` groups): the
 * smallest cluster (up to `most` blocks) whose share fits `budget` bytes a
 * block, with all rows of words or, where they do not fit, a stage's
 * (*ring). Its blocks are placed on the multiprocessors the forward leaves
 * idle or its first slabs free, and the fewer it needs the sooner every
 * item's is in place. */
static inline int backtrack_streamed_cluster(int64_t groups, int64_t S, int stage, size_t budget,
                                             int most, bool *ring) {
    int c = 1;
    for (;; c *= 2) {
        *ring = false;
        if (backtrack_block_smem(groups, S, c) <= budget) break;
        *ring = true;
        if (backtrack_block_smem(groups, S, c, stage) <= budget || c >= most) break;
    }
    return c;
}
constexpr size_t kBacktrackBlockSmem = 160 * 1024;
constexpr int kMaxCluster = 8; /* the portable cluster size */
/* The shared memory hard_finish gives a block of hard_backtrack_block on a
 * device that lets a block opt in to smem_optin bytes (less the launch's
 * 1 KB margin), and the largest cluster it uses (clusters from sm_90 on). */
static inline size_t backtrack_block_budget(int smem_optin) {
    if (smem_optin <= 1024) return 0;
    const size_t room = (size_t)smem_optin - 1024;
    return room < kBacktrackBlockSmem ? room : kBacktrackBlockSmem;
}
static inline int backtrack_cluster_most(int cc_major) { return cc_major >= 9 ? kMaxCluster : 1; }
/* Whether hard_finish may take the block form: the item's share fits the
 * budget in clusters of up to backtrack_cluster_most blocks. It still takes
 * the warp form where the cluster cannot be placed. */
static inline bool backtrack_block_fits(int64_t groups, int64_t S, int smem_optin, int cc_major) {
    const size_t budget = backtrack_block_budget(smem_optin);
    for (int c = 1; c <= backtrack_cluster_most(cc_major); c *= 2)
        if (backtrack_block_smem(groups, S, c) <= budget) return true;
    return false;
}

/* Whether the fused call streams its backtrack (hard_finish's slab_done):
 * its forward took split_blocks blocks of one launch, one a multiprocessor
 * (0: another form), lets the backtrack's blocks be placed at its start
 * (early), and zeroed the slab-done flags (cleared); and either each of the
 * B items' backtrack blocks finds one of the sms multiprocessors it leaves
 * idle, so that no block waits for one while it polls, or its slabs are
 * 128 tokens (wide): there the slabs of an item end one after another (the
 * first ~20% of the forward's time before the last), and the backtrack's
 * blocks, placed on the multiprocessors the first ones leave, read each
 * slab as it ends instead of all of them after the forward. */
static inline bool backtrack_streams(int64_t split_blocks, bool cleared, bool early, int64_t B,
                                     int sms, bool wide = false) {
    return split_blocks > 0 && cleared && early && (wide || B <= (int64_t)sms - split_blocks);
}

/* Running maximum that keeps NaN (and +inf, the largest value): checking the
 * cells for NaN/+inf costs one instruction a cell. */
__device__ __forceinline__ float guard_max(float g, float v) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    float r;
    asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(g), "f"(v));
    return r;
#else
    return (g >= v || g != g) ? g : v;
#endif
}
__device__ __forceinline__ double guard_max(double g, double v) { return (g >= v || g != g) ? g : v; }

} // namespace mas_cuda

#endif
