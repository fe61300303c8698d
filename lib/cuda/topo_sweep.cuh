/* Topologies on CUDA (mas.h section 7): one block per item sweeps the
 * item's chain of states frame by frame, the semiring (max-plus for Viterbi,
 * log-plus for log Z) and the direction (forwards, or reversed for the
 * posterior) being template parameters of one sweep. The one-block
 * Viterbi's forward is the round sweep of topo_rounds.cuh (no barrier a
 * frame); the forward Viterbi can also run pipelined (TopoPipe below):
 * several blocks an item, each a slab of the chain, over one segment of
 * frames at a time (long form).
 *
 * Why this shape: a transcript's chain has skip edges (s-d -> s: CTC blanks,
 * token skips), so a state needs the scores of d states below it from the
 * previous frame. Keeping the whole column of scores in shared memory (two
 * buffers, one barrier a frame) serves any d without the warp hand-overs of
 * hard MAS's pipeline; a thread owns J states (u = tid + j*blockDim).
 * Emissions are loaded kTopoAhead frames before they are used (a register
 * ring), so the L2 round trip stays off the frame's critical path.
 *
 * The arithmetic is the CPU core's (lib/cpu/dp_sweep_impl.h), in the same
 * order: stay = q[s] + w_stay, move = q[s-1] + w_move, q = plus(stay, move),
 * skip = q[s-d] + w_skip, q = plus(q, skip), q += e(t, s); max-plus keeps
 * stay on a tie, then move (a later edge only when strictly better), so the
 * Viterbi outputs are the CPU's bit for bit. Cells the CPU does not read
 * (outside the band of a topology without skips) count as -inf here and are
 * not read either.
 *
 * Hard: one decision bit per cell and edge (move, skip) in the workspace;
 * warp 0 then walks back a run of frames at a time through windows of 32
 * frames' words staged in shared memory (topo_walk), and the block writes
 * the outputs. Soft: log Z alone is one forward; the posterior and the
 * gradient of the log-probs (summed per label in shared memory) take two
 * blocks an item that sweep from both ends and meet in the middle
 * (topo_soft_half). */
#ifndef MAS_CUDA_TOPO_SWEEP_CUH
#define MAS_CUDA_TOPO_SWEEP_CUH

#include <cuda_pipeline.h>

#include "cuda/topo_chain.cuh"
#include "cuda/topo_rounds.cuh"

namespace mas_cuda {

/* The frames of one sweep: sweep frames [tb, te) (reversed: frame
 * t = S-1-tau), starting from `start` (the column before frame tb, by
 * original state) or from the virtual start (NULL; tb = 0). MODE_ALPHA
 * writes frame te-1's scores to `tail` (by original state) instead of
 * a.alpha when it is set. */
template <typename TA> struct SweepSpan {
    int tb, te;
    const TA *start;
    TA *tail;
};

/* A cell's posterior before its frame is normalised (topo_normalize_*),
 * from the scores of both directions (each holding the cell's emission
 * once) and an estimate of log Z: not clamped, as the ratios within a frame
 * are what counts. */
template <typename TA>
__device__ __forceinline__ TA topo_posterior(TA al, TA q, TA cell, TA log_z) {
    if (al == neg_inf<TA>() || q == neg_inf<TA>()) return (TA)0;
    return soft_exp(al + q - cell - log_z);
}

/* 1 / x correctly rounded (the CPU's 1 / x). */
__device__ __forceinline__ float topo_recip(float x) { return __frcp_rn(x); }
__device__ __forceinline__ double topo_recip(double x) { return __drcp_rn(x); }

/* The sum over the warp, every lane getting it (one fixed order). */
template <typename T> __device__ __forceinline__ T topo_warp_sum(T v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(kFullMask, v, o);
    return v;
}

/* A log Z as the outputs hold it: rounded to the accumulator type, NaN (an
 * overflowed accumulator) as +inf, as on the CPU (mas.h section 5). */
template <typename TA> __device__ __forceinline__ double topo_settle_log_z(double lz) {
    if (sizeof(TA) == 4) lz = (double)(float)lz;
    return lz != lz ? INFINITY : lz;
}

/* One sweep over the item. REV: states and frames reversed, with the
 * reversed edges (stay'[u] = stay[s], move'[u] = move[s+1], skip'[u] =
 * skip[s+d], the second final state entered from the virtual start).
 * Leaves the last frame's column in the returned buffer; returns 1 (every
 * thread) when a read cell was NaN or +inf.
 *   MODE_BITS: max-plus, decision bits to a.bits.
 *   MODE_ALPHA: log-plus, every score to a.alpha (by original frame and
 *     state).
 *   MODE_COMBINE: log-plus, posterior / gradient with the other
 *     direction's scores from a.alpha.
 *   MODE_NONE: scores only (log Z). */

template <typename TV, typename SEMI, int J, bool REV, int MODE, bool SKIP, bool PIPE>
__device__ int topo_sweep_impl(const TopoArgs &a, const TopoItem &it, int slab,
                               const SweepSpan<typename AccOf<TV>::type> &span,
                               typename AccOf<TV>::type *col0, typename AccOf<TV>::type *col1,
                               typename AccOf<TV>::type log_z, typename AccOf<TV>::type *gsum,
                               typename AccOf<TV>::type **last) {
    using TA = typename AccOf<TV>::type;
    static_assert(!PIPE || (MODE == MODE_BITS && !REV), "the pipeline is the forward Viterbi's");
    const int BD = blockDim.x, tid = threadIdx.x;
    /* int32 in the frame loop: the host keeps frames and states < 2^31 */
    const int n = (int)it.n, S = (int)it.S, d = it.d, width = (int)(it.S - it.n);
    const int64_t b = it.b;
    /* This block's states [u0, u0 + J*BD) and sweep frames [tb, te). */
    const int u0 = PIPE ? slab * a.pipe.states : 0;
    const int tb = span.tb, te = span.te < S ? span.te : S;
    /* Per state: weights, emission row and original state; the emission of
     * the next frame to load (a running pointer, `step` elements a frame)
     * and, when combining, the forward's score likewise. */
    TA wst[J], wmv[J], wsk[J];
    int row[J], orig[J];
    const TV *ep[J];
    const TA *ap[J];
    const int64_t estep = (a.gathered ? a.es1 : a.es2) * (REV ? -1 : 1);
    const int64_t astep = REV ? -a.n_max : a.n_max;
#pragma unroll
    for (int j = 0; j < J; ++j) {
        const int u = u0 + tid + j * BD;
        wst[j] = wmv[j] = wsk[j] = neg_inf<TA>();
        row[j] = 0;
        orig[j] = 0;
        ep[j] = (const TV *)a.e;
        ap[j] = (const TA *)a.alpha;
        if (u < n) {
            const int64_t s = REV ? n - 1 - u : u;
            double st, mv, sk;
            topo_weights(a, it, s, &st, &mv, &sk);
            if (REV) {
                double m2, s2, x;
                if (u == 0) mv = 0;
                else topo_weights(a, it, s + 1, &x, &mv, &s2);
                sk = -INFINITY;
                if (d && s + d <= n - 1) topo_weights(a, it, s + d, &x, &m2, &sk);
                if (d && u == d - 1 && it.alt_final == s) sk = it.alt_weight;
            }
            wst[j] = (TA)st;
            wmv[j] = (TA)mv;
            wsk[j] = (TA)sk;
            row[j] = (int)topo_row(a, it, s);
            orig[j] = (int)s;
            const int64_t t0 = REV ? S - 1 - tb : tb;
            ep[j] = (const TV *)a.e + b * a.es0 +
                    (a.gathered ? t0 * a.es1 + row[j] * a.es2 : s * a.es1 + t0 * a.es2);
            ap[j] = (const TA *)a.alpha + (b * a.frames + t0) * a.n_max + s;
        }
    }
    const int stride = kTopoPad + J * BD;
    for (int q = tid; q < stride; q += BD) {
        col0[q] = neg_inf<TA>();
        col1[q] = neg_inf<TA>();
    }
    if (MODE == MODE_COMBINE && gsum)
        for (int64_t v = tid; v < 2 * a.V; v += BD) gsum[v] = (TA)0;
    __syncthreads();
    if (span.start) {
        /* the column before frame tb: every state of the slab and the
         * kTopoPad below it */
        for (int q = tid; q < stride; q += BD) {
            const int u = u0 - kTopoPad + q;
            if (u >= 0 && u < n) col0[q] = span.start[REV ? n - 1 - u : u];
        }
    } else if (tid == 0 && u0 == 0) {
        col0[kTopoPad - 1] = (TA)0; /* the virtual start */
    }
    __syncthreads();

    /* Links with the blocks below and above (PIPE): lanes 0..kTopoPad-1 of
     * warp 0 take the scores of the kTopoPad states below the slab, a frame
     * at a time, loaded kTopoAhead frames early; the top kTopoPad states'
     * threads (the last warp's last lanes) send theirs up. */
    using RL = Link<TA>;
    constexpr int RW = RL::N;
    typedef unsigned long long ull;
    const int warp_count = BD / 32;
    const int lane = tid & 31, warp = tid >> 5;
    const volatile ull *in_ring = nullptr;
    volatile ull *out_ring = nullptr;
    int *in_progress = nullptr;
    const int *out_progress = nullptr;
    int seen = 0;
    ull pend[kTopoAhead][RW];
    if (PIPE) {
        const size_t line = (size_t)b * a.pipe.slabs + slab;
        if (slab > 0 && warp == 0) {
            in_ring = (const volatile ull *)a.pipe.ring + (line - 1) * kTopoRing * kTopoPad * RW;
            in_progress = a.pipe.progress + (line - 1) * kFlagStride;
        }
        if (u0 + J * BD < n && warp == warp_count - 1) {
            out_ring = (volatile ull *)a.pipe.ring + line * kTopoRing * kTopoPad * RW;
            out_progress = a.pipe.progress + line * kFlagStride;
        }
#pragma unroll
        for (int f = 0; f < kTopoAhead; ++f) {
#pragma unroll
            for (int k = 0; k < RW; ++k) pend[f][k] = 0;
            const int r = f; /* frame tb + r */
            if (in_ring && lane < kTopoPad && tb + r < te)
                RL::fetch(in_ring + ((size_t)(r % kTopoRing) * kTopoPad + lane) * RW, pend[f]);
        }
    }

    /* Does the CPU read the cell of sweep state u at sweep frame tau? Every
     * cell with skip edges; else the band, tau - width <= u <= tau in either
     * direction. */
    auto readable = [&](int u, int tau) {
        return u < n && tau < S && (SKIP || (unsigned)(tau - u) <= (unsigned)width);
    };
    TA ring[J][kTopoAhead], aring[J][kTopoAhead];
#pragma unroll
    for (int f = 0; f < kTopoAhead; ++f)
#pragma unroll
        for (int j = 0; j < J; ++j) {
            const int u = u0 + tid + j * BD;
            ring[j][f] = readable(u, tb + f) ? widen(ep[j][f * estep]) : neg_inf<TA>();
            if (MODE == MODE_COMBINE)
                aring[j][f] = u < n && tb + f < S ? ap[j][f * astep] : neg_inf<TA>();
        }
#pragma unroll
    for (int j = 0; j < J; ++j) {
        ep[j] += kTopoAhead * estep;
        if (MODE == MODE_COMBINE) ap[j] += kTopoAhead * astep;
    }

    int bad = 0;
    TA *prev = col0, *cur = col1;
    uint32_t *bits_t = a.bits + (b * a.bits_frames + (REV ? S - 1 : 0)) * a.words * 2;
    const int64_t bits_step = (REV ? -2 : 2) * a.words;
    const int blank_row = a.has_blank ? a.blank : -1;
#pragma unroll 1
    for (int t0 = tb; t0 < te; t0 += kTopoAhead) {
#pragma unroll
        for (int f = 0; f < kTopoAhead; ++f) {
            const int tau = t0 + f;
            if (tau >= te) break; /* the same for every thread */
            const int tn = tau + kTopoAhead;
            TA top = neg_inf<TA>(); /* the last state's score (J-1), sent up */
#pragma unroll
            for (int j = 0; j < J; ++j) {
                const int ul = tid + j * BD, u = u0 + ul;
                const TA cell = ring[j][f];
                ring[j][f] = readable(u, tn) ? widen(*ep[j]) : neg_inf<TA>();
                ep[j] += estep;
                TA al = (TA)0;
                if (MODE == MODE_COMBINE) {
                    al = aring[j][f];
                    aring[j][f] = u < n && tn < S ? *ap[j] : neg_inf<TA>();
                    ap[j] += astep;
                }
                const bool live = u < n;
                TA q = neg_inf<TA>();
                bool mv_bit = false, sk_bit = false;
                if (live) {
                    const TA *p = prev + kTopoPad + ul;
                    const TA stay = p[0] + wst[j], move = p[-1] + wmv[j];
                    mv_bit = stay < move;
                    q = SEMI::plus(stay, move);
                    if (SKIP) {
                        const TA skip = p[-d] + wsk[j];
                        sk_bit = q < skip;
                        q = SEMI::plus(q, skip);
                    }
                    bad |= readable(u, tau) & !(cell < pos_inf<TA>());
                    q = q + cell;
                    cur[kTopoPad + ul] = q;
                    if (PIPE) {
                        if (tau == S - 1 && a.pipe.final_val && (u == n - 1 || u == it.alt_final))
                            a.pipe.final_val[2 * b + (u == n - 1 ? 0 : 1)] = (double)q;
                        if (tau == te - 1 && te < S && a.pipe.ckpt_out)
                            ((TA *)a.pipe.ckpt_out)[b * a.n_max + u] = q;
                    }
                }
                if (j == J - 1) top = q;
                if (MODE == MODE_BITS) {
                    const uint32_t wm = __ballot_sync(kFullMask, mv_bit);
                    const uint32_t ws = SKIP ? __ballot_sync(kFullMask, sk_bit) : 0u;
                    const int wi = u0 / 32 + (j * BD) / 32 + warp;
                    if (lane == 0 && wi < a.words) *(uint2 *)(bits_t + 2 * wi) = make_uint2(wm, ws);
                } else if (MODE == MODE_ALPHA) {
                    if (live) *(span.tail && tau == te - 1 ? span.tail + orig[j] : (TA *)ap[j]) = q;
                    ap[j] += astep;
                } else if (MODE == MODE_COMBINE) {
                    const TA g = live ? topo_posterior(al, q, cell, log_z) : (TA)0;
                    if (a.post && live) {
                        const int t = REV ? S - 1 - tau : tau;
                        ((TA *)a.post)[b * a.ps0 + orig[j] * a.ps1 + t * a.ps2] = g;
                    }
                    if (gsum) {
                        /* the blank is every other state of a CTC chain: sum
                         * its lanes first (one atomic a warp, not sixteen) */
                        const bool is_blank = live && row[j] == blank_row;
                        const TA bs = topo_warp_sum(is_blank ? g : (TA)0);
                        TA *gs = gsum + (tau & 1) * a.V;
                        if (lane == 0 && bs != (TA)0) atomicAdd(&gs[blank_row], bs);
                        if (!is_blank && g != (TA)0) atomicAdd(&gs[row[j]], g);
                    }
                }
            }
            if (MODE == MODE_BITS) bits_t += bits_step;
            if (MODE == MODE_COMBINE && gsum && tau > tb) {
                /* the previous frame's sums are complete (barrier below) */
                const int t = REV ? S - tau : tau - 1;
                TA *gs = gsum + ((tau - 1) & 1) * a.V;
                TA *out = (TA *)a.grad + b * a.gs0 + (int64_t)t * a.gs1;
                for (int64_t v = tid; v < a.V; v += BD) {
                    out[v * a.gs2] = gs[v];
                    gs[v] = (TA)0;
                }
            }
            if (PIPE && out_ring) {
                /* Slot reuse: the consumer must have read that frame's lap
                 * before (rarely waits: the ring is far longer than its lag). */
                const int r = tau - tb, need = r - kTopoRing + 1;
                if (seen < need) {
                    int got = 0;
                    if (lane == 0) {
                        do {
                            got = load_acquire(out_progress);
                        } while (got < need);
                    }
                    seen = __shfl_sync(kFullMask, got, 0);
                    __syncwarp(); /* lane 0's acquire before every lane's store */
                }
                const int m = lane - (32 - kTopoPad);
                if (m >= 0)
                    RL::put(out_ring + ((size_t)(r % kTopoRing) * kTopoPad + m) * RW, top,
                            (unsigned)(r / kTopoRing) + 1u);
            }
            if (PIPE && in_ring) {
                /* The states below at frame tau, for frame tau + 1. */
                const int r = tau - tb;
                const bool want = lane < kTopoPad;
                const volatile ull *slot = in_ring + ((size_t)(r % kTopoRing) * kTopoPad + (want ? lane : 0)) * RW;
                const TA v = RL::settle(slot, pend[f], (unsigned)(r / kTopoRing) + 1u, want, neg_inf<TA>());
                if (want) cur[lane] = v;
                if (want && tn < te)
                    RL::fetch(in_ring + ((size_t)((tn - tb) % kTopoRing) * kTopoPad + lane) * RW, pend[f]);
                if (r % kTopoProgress == kTopoProgress - 1) {
                    __syncwarp(); /* every lane's read before lane 0's release */
                    if (lane == 0) store_release(in_progress, r + 1);
                }
            } else if (tid == 0) {
                cur[kTopoPad - 1] = neg_inf<TA>(); /* no virtual start after frame 0 */
            }
            __syncthreads();
            TA *tmp = prev;
            prev = cur;
            cur = tmp;
        }
    }
    if (MODE == MODE_COMBINE && gsum && te > tb) {
        /* the last frame's sums */
        const int t = REV ? S - te : te - 1;
        TA *gs = gsum + ((te - 1) & 1) * a.V;
        TA *out = (TA *)a.grad + b * a.gs0 + (int64_t)t * a.gs1;
        for (int64_t v = tid; v < a.V; v += BD) out[v * a.gs2] = gs[v];
    }
    *last = prev;
    return __syncthreads_or(bad);
}

/* The sweep with or without skip edges (a compile-time choice: the
 * three-way cell and the band test cost instructions every frame). */
template <typename TV, typename SEMI, int J, bool REV, int MODE, bool PIPE = false>
__device__ int topo_sweep(const TopoArgs &a, const TopoItem &it,
                          const SweepSpan<typename AccOf<TV>::type> &span,
                          typename AccOf<TV>::type *col0, typename AccOf<TV>::type *col1,
                          typename AccOf<TV>::type log_z, typename AccOf<TV>::type *gsum,
                          typename AccOf<TV>::type **last, int slab = 0) {
    if (it.d)
        return topo_sweep_impl<TV, SEMI, J, REV, MODE, true, PIPE>(a, it, slab, span, col0, col1,
                                                                   log_z, gsum, last);
    return topo_sweep_impl<TV, SEMI, J, REV, MODE, false, PIPE>(a, it, slab, span, col0, col1,
                                                                log_z, gsum, last);
}

/* The final states' total (the CPU's final_total) from the scores of state
 * n-1 (last) and of the other final state (alt, unused without one). */
template <typename TA, bool MAXPLUS>
__device__ double topo_final_of(const TopoItem &it, double last, double alt_col, int64_t *best_state) {
    *best_state = it.n - 1;
    if (it.alt_final < 0) return last;
    double alt = alt_col + it.alt_weight;
    if (sizeof(TA) == 4) alt = (double)(float)alt;
    if (MAXPLUS) {
        if (last < alt) {
            *best_state = it.alt_final;
            return alt;
        }
        return last;
    }
    double hi = last > alt ? last : alt, lo = last > alt ? alt : last;
    if (hi == -INFINITY) return hi;
    return hi + log1p(exp(lo - hi));
}

/* The same from the last frame's column; thread 0's answer. */
template <typename TA, bool MAXPLUS>
__device__ double topo_final(const TopoItem &it, const TA *col, int64_t *best_state) {
    const double alt = it.alt_final < 0 ? 0 : (double)col[kTopoPad + it.alt_final];
    return topo_final_of<TA, MAXPLUS>(it, (double)col[kTopoPad + it.n - 1], alt, best_state);
}

__device__ __forceinline__ void topo_record_error(const TopoArgs &a, int64_t b, int status) {
    if (threadIdx.x == 0 && a.error_word)
        atomicMin(a.error_word, ((unsigned long long)b << 8) | (unsigned long long)status);
}

template <typename TA> __device__ __forceinline__ void topo_store(void *base, int64_t i, double x) {
    ((TA *)base)[i] = (TA)x;
}

/* The backtrack over frames [t_lo, t_hi] from state s at frame t_hi, by
 * one warp (all 32 lanes call): path[t] for those frames; returns the state
 * at frame t_lo - 1 (t_lo > 0). bits: the item's rows, frame t_lo first;
 * win: 2 * kTopoWalkWin words of shared memory. From state s at frame t the
 * path at frame t-f lies in [s - d f, s]: a window of 32 frames needs at
 * most d+1 words of each kind.
 *
 * A run at a time, not a frame at a time (a lane-0 loop over frames was a
 * third of the CTC Viterbi's time): lane f reads frame t-f's bits of the
 * current state, a ballot finds the first frame that leaves it (a skip bit
 * first, then a move bit; never frame 0), the lanes of the run write the
 * path, and the walk goes on from there in one step. The next window's
 * words are copied in (asynchronously where the device can) while this one
 * is walked: those of states [s - 64 d, s], which hold the next window's
 * states whatever this one does (when they fit; else after the walk). */
constexpr int kTopoWalkWin = 32 * kTopoWinWords;
static __device__ int64_t topo_walk(const TopoArgs &a, const TopoItem &it, int64_t s, int64_t t_hi,
                             int64_t t_lo, const uint32_t *bits, uint32_t *win, int32_t *path) {
    const int lane = threadIdx.x & 31;
    const int64_t dd = it.d > 1 ? it.d : 1;
    /* frames [t-31, t] of words [w_lo, w_lo + nw) into buf, zeros before
     * t_lo: lane f copies frame t-f's (move, skip) pairs (no division in
     * the index arithmetic: a 64-bit one is a long routine on the GPU) */
    auto stage = [&](uint32_t *buf, int64_t t, int64_t w_lo, int64_t nw) {
        const int64_t tf = t - lane;
        uint2 *dst = (uint2 *)(buf + lane * kTopoWinWords);
        const uint2 *src = (const uint2 *)(bits + ((tf >= t_lo ? tf - t_lo : 0) * a.words + w_lo) * 2);
        for (int r = 0; r < (int)nw; ++r) {
            if (tf >= t_lo) __pipeline_memcpy_async(dst + r, src + r, 8);
            else dst[r] = make_uint2(0u, 0u);
        }
        __pipeline_commit();
    };
    auto range = [&](int64_t span, int64_t *w_lo) {
        int64_t lo = s - span;
        lo = lo < 0 ? 0 : lo;
        *w_lo = lo / 32;
        return s / 32 - *w_lo + 1;
    };
    int64_t t = t_hi, w_lo;
    const int64_t nw0 = range(32 * dd, &w_lo);
    int cur = 0;
    stage(win, t, w_lo, nw0);
    while (t >= t_lo) {
        /* the next window, from a range that holds it */
        int64_t w_next = 0;
        const int64_t nw_next = range(64 * dd, &w_next);
        const bool ahead = t - 32 >= t_lo && 2 * nw_next <= kTopoWinWords;
        if (ahead) stage(win + (cur ^ 1) * kTopoWalkWin, t - 32, w_next, nw_next);
        else __pipeline_commit(); /* an empty group: the wait below counts groups */
        __pipeline_wait_prior(1); /* this window's copies are done */
        __syncwarp();
        /* the run loop in 32-bit arithmetic (states < 2^30): its chain of
         * dependent instructions is the walk's time */
        const uint2 *wl = (const uint2 *)(win + cur * kTopoWalkWin + lane * kTopoWinWords);
        const int wlo = (int)w_lo;
        const int64_t tf = t - lane; /* this lane's frame */
        const bool valid = tf >= t_lo, can_leave = valid && tf > 0;
        int32_t *path_l = path + (valid ? tf : t_lo);
        int si = (int)s, f0 = 0;
        const int d = it.d;
        while (f0 < 32) {
            const uint2 w = wl[(si >> 5) - wlo];
            const uint32_t bit = 1u << (si & 31);
            const bool sk = d && (w.y & bit), mv = (w.x & bit) != 0;
            const uint32_t m = __ballot_sync(kFullMask, can_leave && (sk || mv)) & (~0u << f0);
            const uint32_t ms = __ballot_sync(kFullMask, sk);
            const int f1 = m ? __ffs(m) - 1 : 31; /* the run's last frame */
            if (valid && lane >= f0 && lane <= f1) *path_l = si;
            if (!m) break;
            si -= (ms >> f1) & 1u ? d : 1;
            f0 = f1 + 1;
        }
        s = si;
        t -= 32;
        __syncwarp(); /* every lane is done with this window */
        cur ^= 1;
        if (ahead) {
            w_lo = w_next;
        } else if (t >= t_lo) {
            const int64_t nw = range(32 * dd, &w_lo);
            stage(win + cur * kTopoWalkWin, t, w_lo, nw);
        }
    }
    __pipeline_wait_prior(0);
    return s;
}

/* The outputs of item b from its path (block-wide): state ids, frame
 * labels, token spans and scores, the score; as beyond the lengths when
 * status is not MAS_OK (the error recorded). */
template <typename TV>
__device__ void topo_outputs(const TopoArgs &a, const TopoItem &it, int status, double score) {
    using TA = typename AccOf<TV>::type;
    const int BD = blockDim.x, tid = threadIdx.x;
    const int64_t b = it.b;
    const int32_t *path = a.path + b * a.frames;
    const int64_t S = status == MAS_OK ? it.S : 0, L = status == MAS_OK ? it.L : 0;
    if (status != MAS_OK) topo_record_error(a, b, status);
    if (tid == 0 && a.score) topo_store<TA>(a.score, b, status == MAS_OK ? score : -INFINITY);
    /* each frame's emission on the path, for the token scores: gathered by
     * every thread at once into the item's decision bits (read by nobody
     * after the walk), so that a token's sum below is a loop over loads that
     * do not wait on each other (the gather in that loop was a chain of
     * three dependent loads a frame: ~30 us of the CTC benchmark's call) */
    TA *em = a.token_scores && a.em_in_bits ? (TA *)(a.bits + b * a.bits_frames * a.words * 2)
                                            : nullptr;
    for (int64_t t = tid; t < a.frames; t += BD) {
        int32_t s = t < S ? path[t] : -1;
        if (a.state_ids) a.state_ids[b * a.state_ids_stride + t] = s;
        if (a.frame_token) a.frame_token[b * a.frames + t] = s;
        /* the label, not the emission row: they differ for per-state emissions */
        if (a.frame_labels)
            a.frame_labels[b * a.frame_labels_stride + t] = s < 0 ? -1 : topo_state_label(a, it, s);
        if (em && s >= 0) em[t] = topo_emission<TV>(a, b, t, topo_row(a, it, s));
    }
    /* the scores and runs need the spans: the workspace's when not wanted */
    const bool need_spans = a.token_scores || a.durations || a.run_begin;
    int32_t *spans = a.token_spans ? a.token_spans + b * a.token_spans_stride
                     : need_spans  ? a.span_ws + b * 2 * a.tokens
                                   : nullptr;
    if (spans)
        for (int64_t i = tid; i < a.tokens; i += BD) spans[2 * i] = spans[2 * i + 1] = -1;
    __syncthreads();
    if (spans) {
        for (int64_t t = tid; t < S; t += BD) {
            int64_t j, i = topo_token(a, path[t], &j);
            if (i < 0) continue;
            int64_t jp, jn;
            if (t == 0 || topo_token(a, path[t - 1], &jp) != i) spans[2 * i] = (int32_t)t;
            if (t == S - 1 || topo_token(a, path[t + 1], &jn) != i) spans[2 * i + 1] = (int32_t)t;
        }
    }
    __syncthreads();
    if (a.token_scores) {
        for (int64_t i = tid; i < a.tokens; i += BD) {
            double v = 0;
            if (i < L) {
                v = -INFINITY;
                const int32_t first = spans[2 * i], end = spans[2 * i + 1];
                if (first >= 0) {
                    double sum = 0;
                    if (em)
                        for (int64_t t = end; t >= first; --t) sum += (double)em[t];
                    else
                        for (int64_t t = end; t >= first; --t)
                            sum += (double)topo_emission<TV>(a, b, t, topo_row(a, it, path[t]));
                    v = sum / (double)(end - first + 1);
                }
            }
            topo_store<TA>(a.token_scores, b * a.token_scores_stride + i, v);
        }
    }
    if (a.durations || a.run_begin) {
        for (int64_t i = tid; i < a.tokens; i += BD) {
            const int32_t first = i < L ? spans[2 * i] : -1, last = spans[2 * i + 1];
            const bool run = first >= 0;
            if (a.durations) a.durations[b * a.durations_stride + i] = run ? last - first + 1 : 0;
            if (a.run_begin) {
                a.run_begin[b * a.tokens + i] = run ? first : 0;
                a.run_end[b * a.tokens + i] = run ? last + 1 : 0;
            }
        }
    }
}

/* Viterbi of one item in one block: the forward with decision bits (the
 * round sweep), the backtrack, the outputs. */
template <typename TV>
__global__ void __launch_bounds__(kTopoMaxThreads) topo_viterbi(TopoArgs a) {
    using TA = typename AccOf<TV>::type;
    extern __shared__ __align__(16) unsigned char smem[];
    __shared__ int s_status;
    __shared__ int64_t s_best;
    __shared__ double s_score;
    __shared__ TA s_fin[2];
    const int tid = threadIdx.x;
    const int64_t b = blockIdx.x;
    TA *edge = (TA *)smem;
    uint32_t *win = (uint32_t *)(smem + topo_rounds_smem(blockDim.x, sizeof(TA)));

    TopoItem it;
    int status = topo_check_item(a, b, &it);
    if (status == MAS_OK) {
        const int bad = topo_rounds<TV>(a, it, edge, s_fin);
        if (tid == 0) {
            int64_t best;
            const double score = topo_final_of<TA, true>(it, (double)s_fin[0], (double)s_fin[1], &best);
            s_status = bad ? MAS_ERR_NONFINITE_VALUE
                           : score == -INFINITY ? MAS_ERR_NO_FINITE_PATH : MAS_OK;
            s_best = best;
            s_score = score;
        }
        __syncthreads();
        status = s_status;
    }
    if (status == MAS_OK && tid < 32)
        topo_walk(a, it, s_best, it.S - 1, 0, a.bits + b * a.bits_frames * a.words * 2, win,
                  a.path + b * a.frames);
    __syncthreads();
    topo_outputs<TV>(a, it, status, status == MAS_OK ? s_score : 0);
}

/* ---- the pipelined Viterbi: several blocks an item, frames in segments ---- */

/* One segment's forward over every slab: blocks take (item, slab) from a
 * ticket, so that a block only ever waits on blocks that started before it
 * (the host launches no more blocks at once than can be resident). */
template <typename TV, int J>
__global__ void __launch_bounds__(512) topo_pipe_sweep(TopoArgs a) {
    using TA = typename AccOf<TV>::type;
    extern __shared__ __align__(16) unsigned char smem[];
    __shared__ unsigned s_ticket;
    const int BD = blockDim.x;
    if (threadIdx.x == 0) s_ticket = atomicAdd(a.pipe.ticket, 1u) - a.pipe.ticket0;
    __syncthreads();
    const unsigned ticket = s_ticket;
    const int64_t b = a.pipe.item0 + ticket / (unsigned)a.pipe.slabs;
    const int slab = (int)(ticket % (unsigned)a.pipe.slabs);
    const int64_t stride = kTopoPad + (int64_t)J * BD;
    TA *col0 = (TA *)smem, *col1 = col0 + stride;
    TopoItem it;
    if (topo_check_item(a, b, &it) != MAS_OK) return; /* the settle kernel reports it */
    /* slabs above the chain and segments after the item: nothing to do
     * (and nobody waits on them) */
    if ((int64_t)slab * a.pipe.states >= it.n || a.pipe.t_begin >= it.S) return;
    TA *last = nullptr;
    SweepSpan<TA> span = {a.pipe.t_begin, a.pipe.t_end, nullptr, nullptr};
    if (a.pipe.t_begin > 0) span.start = (const TA *)a.pipe.ckpt_in + b * a.n_max;
    const int bad = topo_sweep<TV, MaxPlus, J, false, MODE_BITS, true>(
        a, it, span, col0, col1, (TA)0, nullptr, &last, slab);
    if (bad && threadIdx.x == 0 && a.pipe.bad) atomicOr(&a.pipe.bad[b], 1);
}

/* After the first pass: each item's status, best final state and score. */
template <typename TV>
__global__ void __launch_bounds__(256) topo_pipe_settle(TopoArgs a) {
    using TA = typename AccOf<TV>::type;
    const int64_t b = blockIdx.x;
    TopoItem it;
    int status = topo_check_item(a, b, &it);
    if (threadIdx.x != 0) return;
    int64_t best = 0;
    double score = -INFINITY;
    if (status == MAS_OK) {
        score = topo_final_of<TA, true>(it, a.pipe.final_val[2 * b], a.pipe.final_val[2 * b + 1], &best);
        status = a.pipe.bad[b] ? MAS_ERR_NONFINITE_VALUE
                 : score == -INFINITY ? MAS_ERR_NO_FINITE_PATH : MAS_OK;
    }
    a.pipe.status[b] = status;
    a.pipe.walk[b] = best;
    a.pipe.score[b] = score;
}

/* The backtrack through one segment's bits, a warp an item, from where the
 * later segment left the path (or the best final state in the item's last
 * segment). */
static __global__ void __launch_bounds__(128) topo_pipe_walk(TopoArgs a, int64_t B) {
    __shared__ __align__(8) uint32_t win[4][2 * kTopoWalkWin]; /* uint2 reads */
    const int w = threadIdx.x >> 5;
    const int64_t b = (int64_t)blockIdx.x * 4 + w;
    if (b >= B || a.pipe.status[b] != MAS_OK) return;
    const int64_t S = a.frame_len[b], tb = a.pipe.t_begin;
    if (tb >= S) return;
    TopoItem it; /* what the walk needs: the skip distance */
    it.d = a.has_blank ? (a.token_len[b] >= 1 ? 2 : 0)
                       : (a.skips && a.token_len[b] >= 2 ? a.k + 1 : 0);
    const int64_t t_hi = (S < a.pipe.t_end ? S : a.pipe.t_end) - 1;
    const int64_t s = a.pipe.walk[b];
    const uint32_t *bits = a.bits + b * a.bits_frames * a.words * 2;
    const int64_t end = topo_walk(a, it, s, t_hi, tb, bits, win[w], a.path + b * a.frames);
    if ((threadIdx.x & 31) == 0) a.pipe.walk[b] = end;
}

/* The outputs, a block an item. */
template <typename TV>
__global__ void __launch_bounds__(256) topo_pipe_emit(TopoArgs a) {
    const int64_t b = blockIdx.x;
    TopoItem it;
    int status = topo_check_item(a, b, &it);
    if (status == MAS_OK) status = a.pipe.status[b];
    topo_outputs<TV>(a, it, status, status == MAS_OK ? a.pipe.score[b] : 0);
}

/* Forward-sum, log Z only: the forward's scores, the final states' total. */
template <typename TV, int J>
__global__ void __launch_bounds__(kTopoMaxThreads) topo_forward_sum(TopoArgs a) {
    using TA = typename AccOf<TV>::type;
    extern __shared__ __align__(16) unsigned char smem[];
    const int64_t b = blockIdx.x;
    const int64_t stride = kTopoPad + (int64_t)J * blockDim.x;
    TA *col0 = (TA *)smem, *col1 = col0 + stride;
    TopoItem it;
    int status = topo_check_item(a, b, &it);
    double lz = -INFINITY;
    if (status == MAS_OK) {
        TA *last = nullptr;
        const SweepSpan<TA> span = {0, (int)it.S, nullptr, nullptr};
        const int bad = topo_sweep<TV, LogPlus, J, false, MODE_NONE>(a, it, span, col0, col1, (TA)0,
                                                                     nullptr, &last);
        int64_t unused;
        lz = topo_settle_log_z<TA>(topo_final<TA, false>(it, last, &unused));
        status = bad ? MAS_ERR_NONFINITE_VALUE : lz == -INFINITY ? MAS_ERR_NO_FINITE_PATH : MAS_OK;
    }
    if (status != MAS_OK) topo_record_error(a, b, status);
    if (threadIdx.x == 0) topo_store<TA>(a.log_z, b, status == MAS_OK ? lz : -INFINITY);
}

/* ---- posterior and gradient: two blocks an item, meeting in the middle ----
 *
 * The forward and the reversed sweep are independent until they combine,
 * so an item's two blocks run them at once, each over half the frames,
 * with m = S/2:
 *   phase 1: block 0 the forward over frames [0, m] (rows 0..m-1 to
 *            a.alpha, frame m to a.mid), block 1 the reversed sweep over
 *            frames [m, S) (rows m..S-1 to a.alpha); each its NaN flag;
 *   phase 2: both take log Z at frame m (topo_meet_log_z, the same bits in
 *            both); block 0 goes on forwards from row m-1 over [m, S)
 *            combining with the reversed rows (and ends at the forward's
 *            log Z, bit for bit the one-block forward's), block 1 goes on
 *            reversed from row m over [0, m) combining with the forward
 *            rows.
 * Every frame is swept twice as before, but an item's time is about half:
 * the sweep is a chain of dependent frames (bench/results/topology-gpu-h100.md). */

/* log Z at frame m: the log-sum over the readable states of forward +
 * reversed score - emission, in float64 and in one fixed order. Block-wide
 * (every thread gets it); red: 32 doubles of shared memory. */
template <typename TV>
__device__ double topo_meet_log_z(const TopoArgs &a, const TopoItem &it, int m, double *red) {
    using TA = typename AccOf<TV>::type;
    const int BD = blockDim.x, tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const TA *fw = (const TA *)a.mid + it.b * a.n_max;
    const TA *rv = (const TA *)a.alpha + (it.b * a.frames + m) * a.n_max;
    auto term = [&](int64_t s) {
        if (!topo_readable(it, m, s)) return -(double)INFINITY;
        const TA f = fw[s], r = rv[s];
        if (f == neg_inf<TA>() || r == neg_inf<TA>()) return -(double)INFINITY;
        return (double)f + (double)r - (double)topo_emission<TV>(a, it.b, m, topo_row(a, it, s));
    };
    auto block_reduce = [&](double v, bool is_max) {
        for (int o = 16; o > 0; o >>= 1) {
            const double w = __shfl_xor_sync(kFullMask, v, o);
            v = is_max ? fmax(v, w) : v + w;
        }
        __syncthreads(); /* red's earlier use is over */
        if (lane == 0) red[warp] = v;
        __syncthreads();
        double r = red[0];
        for (int w = 1; w < BD / 32; ++w) r = is_max ? fmax(r, red[w]) : r + red[w];
        return r;
    };
    double hi = -INFINITY;
    for (int64_t s = tid; s < it.n; s += BD) hi = fmax(hi, term(s));
    hi = block_reduce(hi, true);
    if (hi == -INFINITY || hi != hi) return hi;
    double sum = 0;
    for (int64_t s = tid; s < it.n; s += BD) sum += exp(term(s) - hi);
    return hi + log(block_reduce(sum, false));
}

/* Zeros in the posterior (block 0) or the gradient (block 1) beyond
 * frame S and state n of item b (everything for S = n = 0). */
template <typename TA>
__device__ void topo_soft_zeros(const TopoArgs &a, int64_t b, int half, int64_t n, int64_t S) {
    const int BD = blockDim.x, tid = threadIdx.x;
    if (half == 0 && a.post) {
        TA *p = (TA *)a.post + b * a.ps0;
        for (int64_t s = 0; s < a.post_rows; ++s) {
            const int64_t from = s < n ? S : 0;
            for (int64_t t = from + tid; t < a.frames; t += BD) p[s * a.ps1 + t * a.ps2] = (TA)0;
        }
    } else if (half == 1 && a.grad) {
        TA *g = (TA *)a.grad + b * a.gs0;
        const int64_t cells = (a.frames - S) * a.V;
        for (int64_t q = tid; q < cells; q += BD) {
            const int64_t t = S + q / a.V, v = q % a.V;
            g[t * a.gs1 + v * a.gs2] = (TA)0;
        }
    }
}

template <typename TV, int J, int PHASE>
__global__ void __launch_bounds__(kTopoMaxThreads) topo_soft_half(TopoArgs a) {
    using TA = typename AccOf<TV>::type;
    extern __shared__ __align__(16) unsigned char smem[];
    __shared__ double s_red[32];
    const int tid = threadIdx.x;
    const int64_t b = blockIdx.x >> 1;
    const int half = blockIdx.x & 1;
    const int64_t stride = kTopoPad + (int64_t)J * blockDim.x;
    TA *col0 = (TA *)smem, *col1 = col0 + stride;
    TA *rows = (TA *)a.alpha + b * a.frames * a.n_max;
    TopoItem it;
    int status = topo_check_item(a, b, &it);
    const int S = status == MAS_OK ? (int)it.S : 0, m = S / 2;
    TA *last = nullptr;
    if (PHASE == 1) {
        if (status != MAS_OK) return; /* phase 2 reports it */
        topo_soft_zeros<TA>(a, b, half, it.n, S);
        int bad;
        if (half == 0) {
            const SweepSpan<TA> span = {0, m + 1, nullptr, (TA *)a.mid + b * a.n_max};
            bad = topo_sweep<TV, LogPlus, J, false, MODE_ALPHA>(a, it, span, col0, col1, (TA)0,
                                                                nullptr, &last);
        } else {
            const SweepSpan<TA> span = {0, S - m, nullptr, nullptr};
            bad = topo_sweep<TV, LogPlus, J, true, MODE_ALPHA>(a, it, span, col0, col1, (TA)0,
                                                               nullptr, &last);
        }
        if (tid == 0) a.half_bad[2 * b + half] = bad;
        return;
    }
    double lz_mid = 0;
    if (status == MAS_OK) {
        lz_mid = topo_settle_log_z<TA>(topo_meet_log_z<TV>(a, it, m, s_red));
        status = (a.half_bad[2 * b] | a.half_bad[2 * b + 1]) ? MAS_ERR_NONFINITE_VALUE
                 : lz_mid == -INFINITY                       ? MAS_ERR_NO_FINITE_PATH
                                                             : MAS_OK;
    }
    if (status != MAS_OK) {
        /* every output of the item zero, log Z -inf */
        if (half == 0) {
            topo_record_error(a, b, status);
            if (tid == 0 && a.log_z) topo_store<TA>(a.log_z, b, -INFINITY);
        }
        topo_soft_zeros<TA>(a, b, half, 0, 0);
        return;
    }
    TA *gsum = a.grad ? col1 + stride : nullptr;
    if (half == 0) {
        const SweepSpan<TA> span = {m, S, m > 0 ? rows + (int64_t)(m - 1) * a.n_max : nullptr,
                                    nullptr};
        topo_sweep<TV, LogPlus, J, false, MODE_COMBINE>(a, it, span, col0, col1, (TA)lz_mid, gsum,
                                                        &last);
        if (tid == 0 && a.log_z) {
            int64_t unused;
            const double lz = topo_final<TA, false>(it, last, &unused);
            topo_store<TA>(a.log_z, b, topo_settle_log_z<TA>(lz));
        }
    } else if (m > 0) {
        const SweepSpan<TA> span = {S - m, S, rows + (int64_t)m * a.n_max, nullptr};
        topo_sweep<TV, LogPlus, J, true, MODE_COMBINE>(a, it, span, col0, col1, (TA)lz_mid, gsum,
                                                       &last);
    }
}

/* ---- each frame of the posterior and the gradient divided by its sum ----
 * In exact arithmetic a frame's posteriors sum to 1 (every path is in one
 * state a frame); the sweeps' log Z estimate drifts by rounding along the
 * frames (~1e-2 in float32 at S = 1500), and that drift would be the
 * posterior's error. The CPU divides likewise (lib/cpu/topology.c,
 * combine). Zeros (beyond the lengths, failed items) stay zeros. */

/* The posterior [B, rows, frames]: a thread a frame, summing over the
 * rows in order. Grid (frame blocks, items; a block goes on to item
 * b + gridDim.y). */
template <typename TA>
__global__ void __launch_bounds__(256) topo_normalize_post(TopoArgs a, int64_t B) {
    const int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= a.frames) return;
    for (int64_t b = blockIdx.y; b < B; b += gridDim.y) {
        TA *p = (TA *)a.post + b * a.ps0 + t * a.ps2;
        TA sum = (TA)0;
        for (int64_t s = 0; s < a.post_rows; ++s) sum += p[s * a.ps1];
        if (!(sum > (TA)0)) continue;
        const TA inv = topo_recip(sum);
        for (int64_t s = 0; s < a.post_rows; ++s) p[s * a.ps1] *= inv;
    }
}

/* The gradient [B, frames, V] (the posterior summed per label): a warp a
 * frame. Grid (frame blocks of 8, items) as above. */
template <typename TA>
__global__ void __launch_bounds__(256) topo_normalize_grad(TopoArgs a, int64_t B) {
    const int lane = threadIdx.x & 31;
    const int64_t t = (int64_t)blockIdx.x * 8 + (threadIdx.x >> 5);
    if (t >= a.frames) return;
    for (int64_t b = blockIdx.y; b < B; b += gridDim.y) {
        TA *g = (TA *)a.grad + b * a.gs0 + t * a.gs1;
        TA sum = (TA)0;
        for (int64_t v = lane; v < a.V; v += 32) sum += g[v * a.gs2];
        sum = topo_warp_sum(sum);
        if (!(sum > (TA)0)) continue;
        const TA inv = topo_recip(sum);
        for (int64_t v = lane; v < a.V; v += 32) g[v * a.gs2] *= inv;
    }
}

} // namespace mas_cuda

#endif
