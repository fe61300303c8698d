/* Backtrack of hard MAS on CUDA: one warp per item walks the decision bits
 * from (x_len-1, y_len-1) down to frame 0, 31 frames per window.
 *
 * From token r at frame j the path at frame j-31 lies in [r-31, r]: 32
 * candidates, one a lane. So a window is walked from all 32 tokens it can
 * start at before its start is known: lane l walks window i from token
 * top(i-1) - 31 + l (top(i) is the path's token at window i's first frame),
 * and once top(i) is known the lane that started there holds the window's
 * moves (a shuffle). Window i's walk needs top(i-1), not top(i), so the
 * walks of windows i and i+1 are independent and run side by side, and the
 * chain from window to window is a shuffle, not a walk: two walks of 31
 * steps and two shuffles every 62 frames. (Walking the one path, 32 frames
 * a window with its start known, every window waited on the last: ~1.3k
 * cycles a window. The kernel: 41 -> 34 us at B=32 T=512 S=2048, 80 -> 65
 * at B=16 T=1024 S=4096, 17.6 -> 14.6 at B=32 T=150 S=800; H200,
 * 2026-11-28, bench/results/calls-gpu-h100.md "session 14".)
 *
 * A lane's walk runs on 32-bit words of the tokens [s-31, s] below its
 * start s, one a frame (a funnel shift of two group words), with a one-hot
 * mask m of the current token: a move is (m & w) != 0, then m >>= 1; the
 * walk records its moves as bits of mv (bit k: moved at the window's k-th
 * frame), so the token at any frame of the window is the start minus the
 * moves before it. The group words of the windows two ahead are loaded
 * during this pair's walks (from top(i), they lie in 4 and 5 groups) and
 * staged in shared memory, the rules that do not come from the bits folded
 * in: a token equal to its frame must move, token 0 never moves, nothing
 * moves before frame 0.
 *
 * The warp also validates the item (lengths, the forward's NaN/+inf flag, no
 * finite path), records errors in the device error word, and writes the
 * requested small outputs plus, for the dense path, the run of each token
 * (run_begin/run_end) and the token of each frame (frame_token). */
#ifndef MAS_CUDA_HARD_BACKTRACK_CUH
#define MAS_CUDA_HARD_BACKTRACK_CUH

#include "cuda/dependent_launch.cuh"
#include "cuda/hard_common.cuh"

namespace mas_cuda {

struct BacktrackArgs {
    int64_t B, T, S, groups;
    const int64_t *x_len, *y_len;
    const uint32_t *bits;
    const int *group_flag;
    const double *final_score;
    int32_t *frame_token, *run_begin, *run_end;
    int32_t *durations;
    int64_t durations_stride;
    int32_t *indices;
    int64_t indices_stride;
    void *score;
    int score_f64;
    unsigned long long *error_word;
    const int *item_status; /* [B] checks made before (NULL: none); not MAS_OK: the item fails */
    int cluster;            /* hard_backtrack_block: blocks an item (a cluster of them) */
    /* hard_backtrack_block: NULL, or the fused forward's slab-done flags
     * (line b * max_slabs + k, kFlagStride ints apart), for slabs of
     * slab_groups groups: the words are read slab by slab as the forward's
     * blocks end (hard_finish.h); then with ring_rows only a stage's rows
     * of words are kept (backtrack_block_rows) */
    const int *slab_done;
    int slab_groups;
    int ring_rows;
    int64_t max_slabs;
    /* streamed: the next kernel in the stream (the next fused call's
     * coefficient kernel) may be placed once every item's last slab is done
     * (hard_finish.h) */
    int early_next;
};

constexpr int kWalkFrames = 31; /* a window: its end is one of 32 tokens */
constexpr int kWalkRow = 36;    /* staged words a group: 32 frames, 16-byte rows, no bank conflicts */
/* Groups staged a pair of windows: window i's candidates' words lie in 4
 * groups from top(i-2), window i+1's in 5 */
constexpr int kWalkRows0 = 4, kWalkRows = 9;

/* First group staged for the pair's first (second) window from top(i-2)
 * (>> is floor division: tokens are below 2^31, as int32 outputs hold them) */
__device__ __forceinline__ int walk_group0(int base) { return (base - 93) >> 5; }
__device__ __forceinline__ int walk_group1(int base) { return (base - 124) >> 5; }

/* Lane k's words of groups [g, g + N) at frame f (f = a window's first
 * frame - k) into w as loaded; returns the rows that hold a word the
 * forward wrote (bit r; not where f < 0, outside the item's groups, or for
 * lane 31). The loads are not branched around: a word out of range is
 * loaded from the item's first, and only walk_stage, a pair of windows
 * later, replaces it by 0, so that nothing waits on the loads before then
 * (a select right after them held every pair for the loads' latency: 39%
 * of the stall samples, ncu, H200). */
template <int N>
__device__ __forceinline__ uint32_t walk_fetch(uint32_t *w, const uint32_t *item_bits, int64_t S,
                                               int live, int g, int64_t f, bool lane_on) {
    const bool f_ok = lane_on && f >= 0;
    const uint32_t *at = item_bits + (f_ok ? f : 0);
    uint32_t rows = 0u;
#pragma unroll
    for (int r = 0; r < N; ++r) {
        const bool ok = f_ok && g + r >= 0 && g + r < live;
        w[r] = __ldg(at + (int64_t)(ok ? g + r : 0) * S);
        rows |= ok ? 1u << r : 0u;
    }
    return rows;
}

/* Staged words of groups [g, g + N) at frame f from walk_fetch's w and
 * rows: the rules that do not come from the bits folded in (a token equal
 * to its frame must move, token 0 never moves, nothing moves before frame
 * 0). */
template <int N>
__device__ __forceinline__ void walk_stage(uint32_t *row, const uint32_t *w, uint32_t rows, int g,
                                           int64_t f, int lane) {
    const int64_t d = f - 32 * (int64_t)g; /* bit of the token equal to the frame, row 0 */
    const int d0 = (int)(d < -64 ? -64 : d > 1024 ? 1024 : d);
#pragma unroll
    for (int r = 0; r < N; ++r) {
        const int diag = d0 - 32 * r;
        uint32_t v = (rows >> r & 1u ? w[r] : 0u) | ((unsigned)diag < 32u ? 1u << diag : 0u);
        v &= g + r == 0 ? ~1u : ~0u;
        row[r * kWalkRow + lane] = f >= 0 && lane < kWalkFrames ? v : 0u;
    }
}

/* A lane's place in a window's staged rows: its start is top(i-1) - 31 +
 * lane, its word's lowest token lo = start - 31 lies in row (group of lo) -
 * first group, shifted by lo mod 32. */
struct WalkLane {
    int row, shift;
};
__device__ __forceinline__ WalkLane walk_lane(int top_before, int first_group, int lane) {
    const int lo = top_before - 62 + lane;
    return WalkLane{(lo >> 5) - first_group, lo & 31};
}

/* One frame of a lane's walk: a move is the current token's bit, recorded
 * in mv; then the one-hot m follows it, right (LEFT false: bit j of m is
 * token 31 - j of the word) or left (bit-reversed words,
 * hard_backtrack_block.cuh). Written with a predicate, so that a frame is
 * two dependent instructions (a LOP3 that sets it, a shift under it); as
 * C, nvcc shifted by a selected 0 or 1 (three). The bit is recorded before
 * m is written: nvcc may give an input the register of an in/out operand
 * holding the same value, and where m and the bit were both 1 on a first
 * step a shift first recorded the move as the shifted bit (session 20's
 * lab walk: a window's top frame moved to the next token). */
template <bool LEFT>
__device__ __forceinline__ void walk_step(uint32_t &m, uint32_t &mv, uint32_t w, uint32_t bit) {
    if constexpr (LEFT)
        asm("{\n\t.reg .pred p;\n\t.reg .b32 t;\n\t"
            "and.b32 t, %0, %2;\n\tsetp.ne.u32 p, t, 0;\n\t"
            "@p or.b32 %1, %1, %3;\n\t@p shl.b32 %0, %0, 1;\n\t}"
            : "+r"(m), "+r"(mv)
            : "r"(w), "r"(bit));
    else
        asm("{\n\t.reg .pred p;\n\t.reg .b32 t;\n\t"
            "and.b32 t, %0, %2;\n\tsetp.ne.u32 p, t, 0;\n\t"
            "@p or.b32 %1, %1, %3;\n\t@p shr.b32 %0, %0, 1;\n\t}"
            : "+r"(m), "+r"(mv)
            : "r"(w), "r"(bit));
}

/* The two windows' walks side by side on the staged rows st (window i's
 * from row 0, window i+1's from row kWalkRows0): the moves of each lane's
 * start. */
__device__ __forceinline__ void walk_pair(const uint32_t *st, WalkLane p0, WalkLane p1, uint32_t &mv0,
                                          uint32_t &mv1) {
    const uint32_t *r0 = st + p0.row * kWalkRow, *r1 = st + (kWalkRows0 + p1.row) * kWalkRow;
    uint32_t m0 = 1u << 31, m1 = 1u << 31;
    mv0 = mv1 = 0u;
#pragma unroll
    for (int q = 0; q < 8; ++q) {
        const uint4 lo0 = *reinterpret_cast<const uint4 *>(r0 + 4 * q);
        const uint4 hi0 = *reinterpret_cast<const uint4 *>(r0 + kWalkRow + 4 * q);
        const uint4 lo1 = *reinterpret_cast<const uint4 *>(r1 + 4 * q);
        const uint4 hi1 = *reinterpret_cast<const uint4 *>(r1 + kWalkRow + 4 * q);
        const uint32_t l0[4] = {lo0.x, lo0.y, lo0.z, lo0.w}, h0[4] = {hi0.x, hi0.y, hi0.z, hi0.w};
        const uint32_t l1[4] = {lo1.x, lo1.y, lo1.z, lo1.w}, h1[4] = {hi1.x, hi1.y, hi1.z, hi1.w};
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            const int k = 4 * q + e;
            if (k < kWalkFrames) {
                walk_step<false>(m0, mv0, __funnelshift_r(l0[e], h0[e], (unsigned)p0.shift), 1u << k);
                walk_step<false>(m1, mv1, __funnelshift_r(l1[e], h1[e], (unsigned)p1.shift), 1u << k);
            }
        }
    }
}

/* The item's status (the status given before, the length rules, the
 * forward's NaN/+inf flags, a finite path; a warp: lane 0-31) and, when
 * MAS_OK, its final score. */
__device__ __forceinline__ int backtrack_status(const BacktrackArgs &a, int64_t b, int64_t X,
                                                int64_t Y, int lane, double *final_score) {
    const double score = a.final_score[b]; /* in flight with the flags' loads */
    const int pre = a.item_status ? a.item_status[b] : MAS_OK;
    int status = pre != MAS_OK ? pre : length_status(X, Y, a.T, a.S);
    *final_score = 0;
    if (status == MAS_OK) {
        int bad = 0;
        for (int64_t g = lane; g < (X + 31) / 32; g += 32) bad |= a.group_flag[b * a.groups + g];
        if (__any_sync(kFullMask, bad)) {
            status = MAS_ERR_NONFINITE_VALUE;
        } else {
            *final_score = score;
            if (score == -(double)INFINITY) status = MAS_ERR_NO_FINITE_PATH;
        }
    }
    return status;
}

/* The outputs of item b that do not come from its path, by n threads (this
 * one is k of them): for a failed item (status not MAS_OK) the error word,
 * a score of -inf and every output empty; else the score and the frames
 * past y_len. */
__device__ __forceinline__ void backtrack_outputs_off_path(const BacktrackArgs &a, int64_t b,
                                                           int64_t Y, int status,
                                                           double final_score, int k, int n) {
    int32_t *ft = a.frame_token + b * a.S;
    int32_t *idx_out = a.indices ? a.indices + b * a.indices_stride : nullptr;
    if (k == 0 && status != MAS_OK && a.error_word)
        atomicMin(a.error_word, ((unsigned long long)b << 8) | (unsigned long long)status);
    if (k == 0 && a.score) {
        const double v = status == MAS_OK ? final_score : -(double)INFINITY;
        if (a.score_f64) ((double *)a.score)[b] = v;
        else ((float *)a.score)[b] = (float)v;
    }
    for (int64_t j = (status == MAS_OK ? Y : 0) + k; j < a.S; j += n) {
        ft[j] = -1;
        if (idx_out) idx_out[j] = -1;
    }
    if (status == MAS_OK) return;
    int32_t *dur_out = a.durations ? a.durations + b * a.durations_stride : nullptr;
    for (int64_t i = k; i < a.T; i += n) {
        a.run_begin[b * a.T + i] = 0;
        a.run_end[b * a.T + i] = 0;
        if (dur_out) dur_out[i] = 0;
    }
}

/* Durations and run ends from the run begins the walk left (n threads,
 * this one k; every thread's run begins visible to all). */
__device__ __forceinline__ void backtrack_runs(const BacktrackArgs &a, int64_t b, int64_t X,
                                               int64_t Y, int k, int n) {
    int32_t *rb = a.run_begin + b * a.T;
    int32_t *re = a.run_end + b * a.T;
    int32_t *dur_out = a.durations ? a.durations + b * a.durations_stride : nullptr;
    for (int64_t i = k; i < a.T; i += n) {
        int32_t d = 0, e = 0;
        if (i < X) {
            e = i + 1 < X ? rb[i + 1] : (int32_t)Y;
            d = e - rb[i];
        } else {
            rb[i] = 0;
        }
        re[i] = e;
        if (dur_out) dur_out[i] = d;
    }
}

/* Warps a block, one an item (hard_finish launches it so). One: each item's
 * warp has a multiprocessor to itself (4 a block were ~5% slower). */
constexpr int kBacktrackWarps = 1;

__global__ void __launch_bounds__(32 * kBacktrackWarps) hard_backtrack(BacktrackArgs a) {
    /* a warp's staged words of a pair of windows */
    __shared__ __align__(16) uint32_t staged[kBacktrackWarps][kWalkRows * kWalkRow];
    const int lane = threadIdx.x & 31;
    uint32_t *const st = staged[threadIdx.x >> 5];
    dependent_wait(); /* a dependent launch (hard_finish): the forward's words */
    const int64_t b = (int64_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    if (b >= a.B) return;
    const int64_t S = a.S;
    const int64_t X = a.x_len[b], Y = a.y_len[b];
    double final_score;
    const int status = backtrack_status(a, b, X, Y, lane, &final_score);
    backtrack_outputs_off_path(a, b, Y, status, final_score, lane, 32);
    if (status != MAS_OK) return;
    int32_t *ft = a.frame_token + b * S;
    int32_t *rb = a.run_begin + b * a.T;
    int32_t *idx_out = a.indices ? a.indices + b * a.indices_stride : nullptr;

    const uint32_t *item_bits = a.bits + (size_t)b * a.groups * S;
    const int live = (int)((X + 31) / 32);
    const bool lane_on = lane < kWalkFrames;
    /* Windows i, i+1 start at frames j and j-31; top_b = top(i-1), top_c =
     * top(i), base = top(i-2), where the staged words were fetched from
     * (before the first window all are x_len-1). */
    int top_b = (int)(X - 1), top_c = top_b, base = top_b;
    int64_t j = Y - 1;
    uint32_t cur[kWalkRows];
    uint32_t cur_rows =
        walk_fetch<kWalkRows0>(cur, item_bits, S, live, walk_group0(base), j - lane, lane_on) |
        walk_fetch<kWalkRows - kWalkRows0>(cur + kWalkRows0, item_bits, S, live,
                                           walk_group1(base), j - kWalkFrames - lane, lane_on)
            << kWalkRows0;
    /* the token at frame jw-k of a window starting at frame jw at token top with moves mv */
    auto put = [&](int64_t jw, int top, uint32_t mv) {
        const int64_t frame = jw - lane;
        const int tok = top - __popc(mv & ((1u << lane) - 1u));
        if (lane_on && frame >= 0) {
            ft[frame] = tok;
            if (idx_out) idx_out[frame] = tok;
            if (frame == 0 || (mv >> lane & 1u)) rb[tok] = (int32_t)frame;
        }
    };
    while (j >= 0) {
        /* the next pair's words, in flight during this pair's walks */
        uint32_t next[kWalkRows];
        const int64_t jn = j - 2 * kWalkFrames;
        const uint32_t next_rows =
            walk_fetch<kWalkRows0>(next, item_bits, S, live, walk_group0(top_c), jn - lane,
                                   lane_on) |
            walk_fetch<kWalkRows - kWalkRows0>(next + kWalkRows0, item_bits, S, live,
                                               walk_group1(top_c), jn - kWalkFrames - lane, lane_on)
                << kWalkRows0;
        const int g0 = walk_group0(base), g1 = walk_group1(base);
        __syncwarp(); /* every lane has read the last pair's rows */
        walk_stage<kWalkRows0>(st, cur, cur_rows, g0, j - lane, lane);
        walk_stage<kWalkRows - kWalkRows0>(st + kWalkRows0 * kWalkRow, cur + kWalkRows0,
                                           cur_rows >> kWalkRows0, g1, j - kWalkFrames - lane, lane);
        __syncwarp();
        uint32_t mv0, mv1;
        walk_pair(st, walk_lane(top_b, g0, lane), walk_lane(top_c, g1, lane), mv0, mv1);
        /* top(i) started lane top(i) - top(i-1) + 31 of window i's walk */
        const uint32_t moves0 = __shfl_sync(kFullMask, mv0, top_c - top_b + 31);
        const int top_n = top_c - __popc(moves0); /* top(i+1) */
        const uint32_t moves1 = __shfl_sync(kFullMask, mv1, top_n - top_c + 31);
        put(j, top_c, moves0);
        put(j - kWalkFrames, top_n, moves1);
        base = top_c;
        top_b = top_n;
        top_c = top_n - __popc(moves1); /* top(i+2) */
        j = jn;
#pragma unroll
        for (int r = 0; r < kWalkRows; ++r) cur[r] = next[r];
        cur_rows = next_rows;
    }
    __syncwarp();
    backtrack_runs(a, b, X, Y, lane, 32);
}

} // namespace mas_cuda

#endif
