/* Backtrack of hard MAS on CUDA: one warp per item walks the decision bits
 * from (x_len-1, y_len-1) down to frame 0, 32 frames per window.
 *
 * From token r at frame j the path at frame j-k lies in [r-k, r], so a
 * window of 32 frames needs the bits of only 32 tokens: lane k holds the
 * 32-bit word of frame j-k for tokens [r-31, r]. Every lane then reads the
 * window's 32 words back from shared memory and walks them in registers on
 * a one-hot mask m of the current token:
 *   m' = (m & ~w) | ((m & w) >> 1)
 * (three dependent integer operations a frame, no branch). The words of the
 * window after next are loaded before the walk (the 4 groups it can need),
 * so each load has two walks to arrive.
 * The rules that do not come from the bits are folded into the words first:
 * a token equal to its frame must move, token 0 never moves.
 *
 * The warp also validates the item (lengths, the forward's NaN/+inf flag, no
 * finite path), records errors in the device error word, and writes the
 * requested small outputs plus, for the dense path, the run of each token
 * (run_begin/run_end) and the token of each frame (frame_token). */
#ifndef MAS_CUDA_HARD_BACKTRACK_CUH
#define MAS_CUDA_HARD_BACKTRACK_CUH

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
};

/* Word of group g (tokens 32g..32g+31) at frame f; 0 outside what the
 * forward wrote. */
__device__ __forceinline__ uint32_t decision_word(const uint32_t *item_bits, int64_t S,
                                                  int64_t live_groups, int64_t g, int64_t f) {
    return (g >= 0 && g < live_groups && f >= 0) ? item_bits[g * S + f] : 0u;
}

__device__ __forceinline__ int64_t floor_div32(int64_t x) { return x >= 0 ? x / 32 : -((-x + 31) / 32); }

/* Warps a block, one an item (hard_finish launches it so). */
constexpr int kBacktrackWarps = 4;

__global__ void __launch_bounds__(32 * kBacktrackWarps) hard_backtrack(BacktrackArgs a) {
    __shared__ __align__(16) uint32_t windows[kBacktrackWarps][32]; /* a warp's words of a window */
    const int lane = threadIdx.x & 31;
    uint32_t *const win = windows[threadIdx.x >> 5];
    const int64_t b = (int64_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    if (b >= a.B) return;
    const int64_t T = a.T, S = a.S;
    const int64_t X = a.x_len[b], Y = a.y_len[b];
    const int pre = a.item_status ? a.item_status[b] : MAS_OK;
    int status = pre != MAS_OK ? pre : length_status(X, Y, T, S);
    double final_score = 0;
    if (status == MAS_OK) {
        int bad = 0;
        for (int64_t g = lane; g < (X + 31) / 32; g += 32) bad |= a.group_flag[b * a.groups + g];
        if (__any_sync(kFullMask, bad)) {
            status = MAS_ERR_NONFINITE_VALUE;
        } else {
            final_score = a.final_score[b];
            if (final_score == -(double)INFINITY) status = MAS_ERR_NO_FINITE_PATH;
        }
    }
    int32_t *ft = a.frame_token + b * S;
    int32_t *rb = a.run_begin + b * T;
    int32_t *re = a.run_end + b * T;
    int32_t *idx_out = a.indices ? a.indices + b * a.indices_stride : nullptr;
    int32_t *dur_out = a.durations ? a.durations + b * a.durations_stride : nullptr;

    if (status != MAS_OK) {
        if (lane == 0 && a.error_word)
            atomicMin(a.error_word, ((unsigned long long)b << 8) | (unsigned long long)status);
        if (lane == 0 && a.score) {
            if (a.score_f64) ((double *)a.score)[b] = -(double)INFINITY;
            else ((float *)a.score)[b] = -INFINITY;
        }
        for (int64_t j = lane; j < S; j += 32) {
            ft[j] = -1;
            if (idx_out) idx_out[j] = -1;
        }
        for (int64_t i = lane; i < T; i += 32) {
            rb[i] = 0;
            re[i] = 0;
            if (dur_out) dur_out[i] = 0;
        }
        return;
    }
    if (lane == 0 && a.score) {
        if (a.score_f64) ((double *)a.score)[b] = final_score;
        else ((float *)a.score)[b] = (float)final_score;
    }
    for (int64_t j = Y + lane; j < S; j += 32) {
        ft[j] = -1;
        if (idx_out) idx_out[j] = -1;
    }

    const uint32_t *item_bits = a.bits + (size_t)b * a.groups * S;
    const int64_t live = (X + 31) / 32;
    int64_t top = X - 1; /* token at frame j */
    int64_t j = Y - 1;
    int64_t g1 = floor_div32(top - 31);
    uint32_t lo = decision_word(item_bits, S, live, g1, j - lane);
    uint32_t hi = decision_word(item_bits, S, live, g1 + 1, j - lane);
    /* The next window starts at a token in [top-32, top]: its words lie in
     * the 3 groups from h1; kept in c1 (4 slots, the layout of c2). */
    int64_t h1 = floor_div32(top - 63);
    uint32_t c1[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) c1[k] = decision_word(item_bits, S, live, h1 + k, j - 32 - lane);
    while (j >= 0) {
        /* Loads two windows ahead, so that an L2 round trip overlaps two
         * walks: that window starts at a token in [top-64, top], so its
         * words lie in the 4 groups from h2. */
        const int64_t h2 = floor_div32(top - 95);
        const int64_t jn = j - 32;
        uint32_t c2[4];
#pragma unroll
        for (int k = 0; k < 4; ++k) c2[k] = decision_word(item_bits, S, live, h2 + k, jn - 32 - lane);

        /* Lane k's word: tokens [tb, tb+31] at frame j-k, rules folded in. */
        const int64_t tb = top - 31;
        const int64_t frame = j - lane;
        uint32_t word = __funnelshift_r(lo, hi, (unsigned)(tb - 32 * g1));
        const int64_t diag = frame - tb; /* bit of the token equal to the frame */
        if (diag >= 0 && diag < 32) word |= 1u << diag;
        if (tb <= 0 && tb > -32) word &= ~(1u << (-tb));
        if (frame < 0) word = 0; /* past frame 0: the walk idles */

        uint32_t m = 1u << 31, mine = 0;
        const int steps = j + 1 < 32 ? (int)(j + 1) : 32;
        /* Every lane walks all 32 frames, no exit, on the window's words
         * read back from shared memory 16 bytes at a time (broadcast): 8
         * loads issued before the walk. With a shuffle a frame, ptxas put
         * each shuffle next to its use and the walk waited on every one
         * (short scoreboard; 449 instructions and ~1.7k cycles a window;
         * results/calls-gpu-h100.md, session 8). */
        __syncwarp(); /* every lane has read the last window's words */
        win[lane] = word;
        __syncwarp();
        uint4 q[8];
#pragma unroll
        for (int i = 0; i < 8; ++i) q[i] = reinterpret_cast<const uint4 *>(win)[i];
#pragma unroll
        for (int k = 0; k < 32; ++k) {
            const uint4 &v = q[k >> 2];
            const uint32_t wk = (k & 3) == 0 ? v.x : (k & 3) == 1 ? v.y : (k & 3) == 2 ? v.z : v.w;
            mine = lane == k ? m : mine;
            uint32_t moved = m & wk;
            m = (m & ~wk) | (moved >> 1);
        }
        /* Token of frame j-k-1: lane k+1's, or the walk's end for lane 31. */
        const int64_t my_token = tb + 31 - __clz(mine | 1u); /* lanes past steps: unused */
        const int64_t end_token = tb + 31 - __clz(m);
        int64_t below = __shfl_down_sync(kFullMask, my_token, 1);
        if (lane == 31) below = end_token;
        if (lane < steps) {
            ft[frame] = (int32_t)my_token;
            if (idx_out) idx_out[frame] = (int32_t)my_token;
            if (frame == 0 || below != my_token) rb[my_token] = (int32_t)frame;
        }
        top = end_token;
        j = jn;
        g1 = floor_div32(top - 31);
        const int64_t d = g1 - h1; /* 0, 1 or 2 */
        lo = d == 0 ? c1[0] : d == 1 ? c1[1] : c1[2];
        hi = d == 0 ? c1[1] : d == 1 ? c1[2] : c1[3];
        h1 = h2;
#pragma unroll
        for (int k = 0; k < 4; ++k) c1[k] = c2[k];
    }
    __syncwarp();
    for (int64_t i = lane; i < T; i += 32) {
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

} // namespace mas_cuda

#endif
