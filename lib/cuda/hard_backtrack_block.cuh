/* Backtrack of hard MAS on CUDA for items whose decision words fit in the
 * shared memory of a few blocks: a cluster of blocks an item (sm_90; one
 * block elsewhere), every window walked from every token at once, then
 * short chains.
 *
 * hard_backtrack's warp walks window i from the 32 tokens it can start at,
 * which needs where window i-1 started: a chain of ~730 instructions a pair
 * of windows at ~0.35 a cycle (14.6 us at B=32 T=150 S=800, H200), on one
 * warp of a multiprocessor. Here:
 *  - block r of an item's cluster of C holds the windows of 32 frames
 *    [32i, 32i + 31] for i in [r W / C, (r + 1) W / C), W = ceil(y_len /
 *    32): it copies their words to shared memory with the rules that do not
 *    come from the bits folded in (a token equal to its frame must move,
 *    token 0 never moves, nothing moves at or past y_len), bit-reversed
 *    (below);
 *  - its warps walk each window from every token below x_len, two windows
 *    side by side a warp, and keep each start's moves (bit k: moved at the
 *    window's k-th frame from its top);
 *  - for every token at its top window's top, the token below its lowest
 *    window (a shared load and a popc a window);
 *  - after the cluster's barrier, its first window's top is x_len - 1 taken
 *    through the blocks above (a load from each one's shared memory), its
 *    windows' tops follow (top(i-1) = top(i) - popc(moves of window i from
 *    top(i))), and every thread writes a frame's outputs; after a second
 *    barrier the blocks share the durations.
 * A lane's start s = 32g + lane walks the word of tokens [s - 31, s]: a
 * funnel shift of rows g - 1 and g (row -1 is zeros) at a frame, whose
 * words, 16 bytes a load, are the same for the warp's lanes. The words are
 * stored bit-reversed so that the walk's one-hot token moves left: the
 * shift that follows a move is an IMAD (the FMA pipe) rather than a third
 * instruction a step on the integer ALU, which bounds the walk.
 *
 * The work is (x_len/32) x (y_len/32) windows on C multiprocessors instead
 * of y_len/31 on one warp, so hard_finish takes this form only for items
 * whose share fits (backtrack_block_smem).
 *
 * Streamed (a.slab_done: the fused forward, backtrack_streams): an item's
 * block or cluster, placed while the forward sweeps (on multiprocessors it
 * leaves idle, or that its first slabs leave), copies, folds and walks the
 * groups of each of the forward's slabs once that slab's flag is set; after
 * the forward only the last slab's walks, the chain and the outputs are
 * left (B=32 T=150 S=800, H200: a call 3 us shorter, of 79; B=32 T=512
 * S=2048, H100: ~20 us, of 380). Where an item's rows of words would not
 * fit the smallest cluster, only a stage's are kept (a.ring_rows: the
 * walks need no others), so that fewer multiprocessors hold it (B=16
 * T=1024 S=4096: clusters of 4 instead of 8, 0.711 -> 0.676-0.689 ms a
 * call; results/fused-gpu-h100.md, session 27).
 * Its griddepcontrol.wait is its last step, so that it still ends after the
 * forward. */
#ifndef MAS_CUDA_HARD_BACKTRACK_BLOCK_CUH
#define MAS_CUDA_HARD_BACKTRACK_BLOCK_CUH

#include "cuda/hard_backtrack.cuh"

namespace mas_cuda {

constexpr int kBlockWarps = 32;

/* Its shared memory: backtrack_block_smem (hard_common.cuh). */

/* All threads of the cluster (of the block when c == 1) arrive, then wait;
 * what each wrote before, shared or global, is seen after. */
__device__ __forceinline__ void cluster_barrier(int c) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    if (c > 1) {
        asm volatile("barrier.cluster.arrive.release.aligned;\n\t"
                     "barrier.cluster.wait.acquire.aligned;" ::: "memory");
        return;
    }
#endif
    (void)c;
    __syncthreads();
}

/* *p in the shared memory of the cluster's block `rank` (p: this block's
 * address of the same variable). */
__device__ __forceinline__ int cluster_load(const int *p, int rank) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    const unsigned local = (unsigned)__cvta_generic_to_shared(p);
    unsigned remote;
    int v;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(local), "r"(rank));
    asm volatile("ld.shared::cluster.u32 %0, [%1];" : "=r"(v) : "r"(remote) : "memory");
    return v;
#else
    (void)rank;
    return *p;
#endif
}

/* Two windows' walks side by side from every lane's start, on the reversed
 * rows g - 1 and g (lo, hi: the window's first frame of each): the moves of
 * each start. */
__device__ __forceinline__ void block_walk_pair(const uint32_t *lo0, const uint32_t *hi0,
                                                const uint32_t *lo1, const uint32_t *hi1,
                                                int lane, uint32_t &mv0, uint32_t &mv1) {
    /* reversed, rows g - 1 and g are the high and low words: bit j of the
     * funnel is token 32g + lane - j */
    const unsigned shift = 31u - (unsigned)lane;
    uint32_t m0 = 1u, m1 = 1u;
    mv0 = mv1 = 0u;
#pragma unroll
    for (int q = 7; q >= 0; --q) {
        const uint4 a0 = *reinterpret_cast<const uint4 *>(lo0 + 4 * q);
        const uint4 b0 = *reinterpret_cast<const uint4 *>(hi0 + 4 * q);
        const uint4 a1 = *reinterpret_cast<const uint4 *>(lo1 + 4 * q);
        const uint4 b1 = *reinterpret_cast<const uint4 *>(hi1 + 4 * q);
        const uint32_t l0[4] = {a0.x, a0.y, a0.z, a0.w}, h0[4] = {b0.x, b0.y, b0.z, b0.w};
        const uint32_t l1[4] = {a1.x, a1.y, a1.z, a1.w}, h1[4] = {b1.x, b1.y, b1.z, b1.w};
#pragma unroll
        for (int e = 3; e >= 0; --e) {
            const uint32_t bit = 1u << (31 - 4 * q - e); /* frame 4q + e is step 31 - 4q - e */
            walk_step<true>(m0, mv0, __funnelshift_r(h0[e], l0[e], shift), bit);
            walk_step<true>(m1, mv1, __funnelshift_r(h1[e], l1[e], shift), bit);
        }
    }
}

/* Indices in int: hard_finish takes this form only for items whose words
 * fit in shared memory. Grid: a.cluster blocks an item, in clusters of
 * a.cluster where it is over 1. */
__global__ void __launch_bounds__(32 * kBlockWarps) hard_backtrack_block(BacktrackArgs a) {
    extern __shared__ __align__(16) uint32_t bt_smem[];
    __shared__ int item_status;
    __shared__ double item_score;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, threads = blockDim.x;
    /* a dependent launch (hard_finish): the forward's words. Streamed (one
     * block an item), a slab's words are read once its flag is set and the
     * wait is the kernel's last step, so that its end still follows the
     * forward's. */
    const bool streamed = a.slab_done != nullptr;
    if (!streamed) dependent_wait();
    const int c = a.cluster, rank = (int)(blockIdx.x % (unsigned)c);
    const int64_t b = blockIdx.x / (unsigned)c;
    const int S = (int)a.S, tp = (int)a.groups * 32; /* tp: starts a window */
    const int wmax = (int)backtrack_block_windows(a.S, c), row = 32 * wmax;
    const int64_t X64 = a.x_len[b], Y64 = a.y_len[b];
    /* groups [g0, g1) at a time: all at once, or streamed a slab's, the
     * rows of words kept all or (ring_rows) a ring of the stage's and the
     * one below */
    const int stage = streamed ? a.slab_groups : max(1, (int)a.groups);
    const int kept = (int)backtrack_block_rows(a.groups, streamed && a.ring_rows ? stage : 0);
    uint32_t *const moves = bt_smem + kept * row;
    int *const below = (int *)(moves + wmax * tp);
    int *const tops = below + tp;

    /* this block's windows [w0, w0 + nw) of the item's; their words of the
     * groups below x_len, frames below y_len */
    const bool lengths_ok = length_status(X64, Y64, a.T, a.S) == MAS_OK;
    const int X = lengths_ok ? (int)X64 : 0, Y = lengths_ok ? (int)Y64 : 0;
    const int live = (X + 31) / 32, windows = (Y + 31) / 32;
    const int w0 = rank * windows / c, nw = (rank + 1) * windows / c - w0;
    const int f0 = 32 * w0, f1 = min(32 * (w0 + nw), Y); /* frames copied */
    const uint32_t *src = a.bits + (size_t)b * a.groups * a.S;
    auto read_status = [&]() {
        if (warp == 0) {
            double score;
            const int status = backtrack_status(a, b, X64, Y64, lane, &score);
            if (lane == 0) {
                item_status = status;
                item_score = score;
            }
        }
    };
    for (int g0 = 0; g0 < live; g0 += stage) {
        const int g1 = min(live, g0 + stage);
        /* row g of the stage's [g0 - 1, g1): slot g + 1 of the ring, with
         * one modulo a stage rather than one a row */
        const int s0 = (g0 + 1) % kept;
        auto words = [&](int g) {
            int at = s0 + (g - g0);
            at += at < 0 ? kept : 0;
            at -= at >= kept ? kept : 0;
            return bt_smem + at * row;
        };
        if (streamed) {
            if (tid == 0) {
                const int *done = a.slab_done + ((size_t)b * a.max_slabs + g0 / stage) * kFlagStride;
                while (load_acquire(done) == 0) backoff_sleep();
            }
            __syncthreads();
            /* the item's last slab is done: once every item's is, the
             * forward has ended its work and the next kernel may be placed */
            if (g1 == live && a.early_next) dependent_trigger();
        }
        /* 16 bytes a copy where rows are 16-byte aligned; in flight during
         * the item's checks at the last stage */
        if ((S & 3) == 0) {
            for (int r = g0; r < g1; ++r) {
                uint32_t *const dst = words(r);
                for (int f = f0 + 4 * tid; f < f1; f += 4 * threads)
                    copy16_async(dst + (f - f0), src + (int64_t)r * S + f);
            }
        } else {
            for (int r = g0; r < g1; ++r) {
                uint32_t *const dst = words(r);
                for (int f = f0 + tid; f < f1; f += threads)
                    copy_elem_async(dst + (f - f0), src + (int64_t)r * S + f, true);
            }
        }
        async_commit();
        if (g1 == live) read_status();
        async_wait<0>();
        __syncthreads();

        /* the rules folded in, bit-reversed: row -1 zeros; frames at or past
         * y_len zeros (the walk from x_len - 1 at the top window's first
         * frame stays there until y_len - 1); the token equal to the frame
         * moves; token 0 never */
        for (int r = g0 == 0 ? -1 : g0; r < g1; ++r) {
            uint32_t *const wr = words(r);
            for (int f = f0 + tid; f < 32 * (w0 + nw); f += threads) {
                uint32_t w = r >= 0 && f < Y ? wr[f - f0] : 0u;
                const int d = f - 32 * r;
                if (r >= 0 && d >= 0 && d < 32) w |= 1u << d;
                if (r == 0) w &= ~1u;
                wr[f - f0] = __brev(w);
            }
        }
        __syncthreads();

        /* window i from every start of group g, for g in [g0, g1): rows g - 1
         * and g, folded at this stage or the one before */
        const int ng = g1 - g0, tasks = nw * ng;
        for (int t0 = 2 * warp; t0 < tasks; t0 += 2 * kBlockWarps) {
            const int t1 = t0 + 1 < tasks ? t0 + 1 : t0;
            const int i0 = t0 / ng, i1 = t1 / ng;
            const int gA = g0 + t0 - i0 * ng, gB = g0 + t1 - i1 * ng;
            uint32_t mv0, mv1;
            block_walk_pair(words(gA - 1) + 32 * i0, words(gA) + 32 * i0, words(gB - 1) + 32 * i1,
                            words(gB) + 32 * i1, lane, mv0, mv1);
            moves[i0 * tp + 32 * gA + lane] = mv0;
            moves[i1 * tp + 32 * gB + lane] = mv1; /* the same words when t1 == t0 */
        }
    }
    if (live == 0) read_status();
    __syncthreads();
    const int status = item_status;
    backtrack_outputs_off_path(a, b, Y64, status, item_score, rank * threads + tid, c * threads);
    if (status != MAS_OK) { /* every block of the cluster: none waits */
        if (streamed) dependent_wait();
        return;
    }

    if (rank > 0) /* for the blocks below: each start's token below these windows */
        for (int t = tid; t < 32 * live; t += threads) {
            int tok = t;
            for (int i = nw - 1; i >= 0; --i) tok -= __popc(moves[i * tp + tok]);
            below[t] = tok;
        }
    cluster_barrier(c);

    if (tid == 0) { /* the path's token at each window's top */
        int top = X - 1;
        for (int q = c - 1; q > rank; --q) top = cluster_load(below + top, q);
        for (int i = nw - 1; i >= 0; --i) {
            tops[i] = top;
            top -= __popc(moves[i * tp + top]);
        }
    }
    __syncthreads();

    int32_t *ft = a.frame_token + b * a.S;
    int32_t *rb = a.run_begin + b * a.T;
    int32_t *idx_out = a.indices ? a.indices + b * a.indices_stride : nullptr;
    for (int f = f0 + tid; f < f1; f += threads) {
        const int i = (f >> 5) - w0, k = 31 - (f & 31); /* the window's k-th frame from its top */
        const int top = tops[i];
        const uint32_t mv = moves[i * tp + top];
        const int tok = top - __popc(mv & ((1u << k) - 1u));
        ft[f] = tok;
        if (idx_out) idx_out[f] = tok;
        if (f == 0 || (mv >> k & 1u)) rb[tok] = f;
    }
    cluster_barrier(c); /* every block's run begins; no shared load of another block after */
    backtrack_runs(a, b, X64, Y64, rank * threads + tid, c * threads);
    if (streamed) dependent_wait();
}

} // namespace mas_cuda

#endif
