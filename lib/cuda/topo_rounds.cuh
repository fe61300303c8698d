/* The Viterbi's forward sweep of a topology in one block without a barrier
 * per frame (mas.h section 7): the decision bits of chains of at most 1024
 * states (one state a thread). The log-plus forward stays on the block
 * sweep: on the round sweep it was no faster (its cell is long enough to
 * hide the barrier; bench/results/topology-gpu-h100.md).
 *
 * Why: topo_sweep.cuh's block sweep keeps the whole column in shared memory
 * and pays a __syncthreads per frame; at 601 states (CTC, 300 labels) a
 * frame cost ~430 ns, most of it the barrier and the shared-memory round
 * trip on the frame's chain (bench/results/topology-gpu-h100.md). Here warp
 * w owns states [32w, 32w+32), one a lane, and keeps its scores in
 * registers: the scores of the states below a lane at the previous frame
 * come by shuffles within the warp, and from the warp below through a
 * shared-memory ring of that warp's top kTopoPad scores a frame. Frames go
 * in chunks of kRoundFrames: in round r warp w sweeps chunk r - w, so the
 * warp below finished the same chunk one round earlier, and a __syncthreads
 * separates rounds (not frames; the synchronisation compute-sanitizer's
 * racecheck can follow, as in hard_small.cuh).
 *
 * The ring holds 4 chunks a warp: in one round warp w reads frames
 * [cC-1, cC+C-2] of the warp below while that warp writes [cC+C, cC+2C-1];
 * with 2C slots frame cC-1 and cC+2C-1 would share one. Warp 0 reads a
 * virtual ring: -inf but for the virtual start.
 *
 * The cell arithmetic is the block sweep's, in the same order and with the
 * same rules (stay on a tie, then move, a skip only when strictly better;
 * NaN/+inf checked on cells the CPU reads; the virtual start is state -1 at
 * frame -1), so the bits, scores and outputs are the same bit for bit. */
#ifndef MAS_CUDA_TOPO_ROUNDS_CUH
#define MAS_CUDA_TOPO_ROUNDS_CUH

#include "cuda/topo_chain.cuh"

namespace mas_cuda {

#ifndef MAS_ROUND_FRAMES
#define MAS_ROUND_FRAMES 16 /* a build option only for the experiments of bench/results */
#endif
constexpr int kRoundFrames = MAS_ROUND_FRAMES;    /* frames of a chunk */
constexpr int kRoundRing = 4 * kRoundFrames;      /* frames of a warp's edge ring */
static_assert(kRoundFrames % kTopoAhead == 0, "a chunk starts at a whole emission ring");

/* Shared memory of the edge rings for `threads` threads, accumulator bytes
 * acc: one ring a warp, and one for a virtual warp below warp 0 (the
 * virtual start, state -1 at frame -1). */
__host__ __device__ constexpr size_t topo_rounds_smem(int threads, size_t acc) {
    return (size_t)(threads / 32 + 1) * kRoundRing * kTopoPad * acc;
}

/* The max-plus forward over item `it` by one block, its decision bits to
 * a.bits. Every thread calls it. Leaves the last frame's scores of state
 * n-1 and of the other final state in fin[0] and fin[1], and returns 1
 * (every thread) when a read cell was NaN or +inf. edge: topo_rounds_smem
 * bytes of shared memory; fin: shared.
 *
 * A frame is straight-line code (ncu: the first version, with branches
 * around the edge loads and the bit stores, issued ~95 instructions a frame
 * and warp, and its chain of dependent instructions was the frame's time):
 * the edge entries are loaded by every lane and selected; a lane outside
 * the chain computes -inf (its weights are -inf, so its bits stay 0); lane
 * f keeps frame f's decision words and the warp stores a chunk's words at
 * once. */
template <typename TV, bool SKIP>
__device__ int topo_rounds_impl(const TopoArgs &a, const TopoItem &it,
                                typename AccOf<TV>::type *edge, typename AccOf<TV>::type *fin) {
    using TA = typename AccOf<TV>::type;
    constexpr int P = kTopoPad, C = kRoundFrames, R = kRoundRing;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, warps = blockDim.x / 32;
    const int n = (int)it.n, S = (int)it.S, d = it.d, width = (int)(it.S - it.n);
    const int64_t b = it.b;
    const int u = tid;
    const bool live = u < n;
    TA wst = neg_inf<TA>(), wmv = neg_inf<TA>(), wsk = neg_inf<TA>();
    const TV *ep = (const TV *)a.e;
    const int64_t estep = a.gathered ? a.es1 : a.es2;
    if (live) {
        double st, mv, sk;
        topo_weights(a, it, u, &st, &mv, &sk);
        wst = (TA)st;
        wmv = (TA)mv;
        wsk = (TA)sk;
        const int64_t row = topo_row(a, it, u);
        ep = (const TV *)a.e + b * a.es0 + (a.gathered ? row * a.es2 : row * a.es1);
    }
    /* the frames whose cell the CPU reads: [lo, lo + cnt) (none off the chain) */
    const int lo = SKIP ? 0 : u;
    const unsigned cnt = !live ? 0u : SKIP ? (unsigned)S : (unsigned)width + 1u;
    auto readable = [&](int tau) { return (unsigned)(tau - lo) < cnt; };
    TA ring[kTopoAhead];
#pragma unroll
    for (int f = 0; f < kTopoAhead; ++f) ring[f] = readable(f) ? widen(ep[f * estep]) : neg_inf<TA>();
    ep += kTopoAhead * estep;

    /* the rings: -inf, but the virtual start */
    for (int q = tid; q < (warps + 1) * R * P; q += blockDim.x) edge[q] = neg_inf<TA>();
    if (tid == 0) fin[0] = fin[1] = neg_inf<TA>();
    __syncthreads();
    if (tid == 0) edge[(R - 1) * P + P - 1] = (TA)0; /* virtual ring, frame -1, state -1 */
    __syncthreads();

    /* warps above the chain have nothing to do; the rest run nch + Wl - 1 rounds */
    const int live_warps = (n + 31) / 32, nch = (S + C - 1) / C;
    const int rounds = nch + live_warps - 1;
    TA *mine = edge + (size_t)(warp + 1) * R * P;
    const TA *below = mine - R * P; /* the warp below's ring, or the virtual one */
    uint32_t *bits_w = a.bits + b * a.bits_frames * a.words * 2 + 2 * warp;
    const int sk_idx = SKIP && lane < d ? P - d + lane : 0; /* ring entry of state u - d */
    const int top_idx = lane - (32 - P);                     /* >= 0: sent up */
    TA q = neg_inf<TA>();
    uint32_t kw_m = 0, kw_s = 0; /* lane f: the words of the chunk's frame f */
    /* the largest cell read, NaN when one was: one instruction a frame */
    TA worst = neg_inf<TA>();

    /* frame tau = t0 + f (t0 a multiple of kTopoAhead, so that frames
     * t0 .. t0+3 lie in consecutive ring slots): eb the ring entries of
     * frame tau-1, wb this lane's entry of frame t0, kl = lane - (t0 mod C)
     * (the lane that keeps frame tau's words is the one with kl == f) */
    auto frame = [&](const int f, const int tau, const TA *eb, TA *wb, const int kl) {
        const TA cell = ring[f];
        ring[f] = readable(tau + kTopoAhead) ? widen(*ep) : neg_inf<TA>();
        ep += estep;
        /* the scores of states u-1 and u-d at frame tau-1: the lanes below,
         * or the warp below's ring */
        const TA e_mv = eb[P - 1];
        const TA e_sk = SKIP ? eb[sk_idx] : neg_inf<TA>();
        const TA up1 = __shfl_up_sync(kFullMask, q, 1);
        const TA upd = SKIP ? __shfl_up_sync(kFullMask, q, d) : neg_inf<TA>();
        const TA stay = q + wst, move = (lane == 0 ? e_mv : up1) + wmv;
        const bool mv_bit = stay < move;
        TA qn = MaxPlus::plus(stay, move);
        bool sk_bit = false;
        if (SKIP) {
            const TA skip = (lane < d ? e_sk : upd) + wsk;
            sk_bit = qn < skip;
            qn = MaxPlus::plus(qn, skip);
        }
        worst = guard_max(worst, cell); /* unread cells are -inf */
        /* a lane off the chain stays -inf with no select: its weights and
         * cells are -inf, so stay is -inf and a NaN move or skip (from an
         * overflowed +inf below) loses the compare */
        q = qn + cell;
        const uint32_t wm = __ballot_sync(kFullMask, mv_bit);
        const uint32_t ws = SKIP ? __ballot_sync(kFullMask, sk_bit) : 0u;
        const bool keep = kl == f;
        kw_m = keep ? wm : kw_m;
        kw_s = keep ? ws : kw_s;
        if (top_idx >= 0) wb[f * P] = q;
    };
    auto frames = [&](const int t0, const int t_hi) {
        const TA *prev = below + ((t0 - 1) & (R - 1)) * P, *cur = below + (t0 & (R - 1)) * P;
        TA *wb = mine + (t0 & (R - 1)) * P + top_idx;
        const int kl = lane - (t0 & (C - 1));
#pragma unroll
        for (int f = 0; f < kTopoAhead; ++f) {
            if (t0 + f >= t_hi) break; /* the same for every lane */
            frame(f, t0 + f, f == 0 ? prev : cur + (f - 1) * P, wb, kl);
        }
    };

    /* Without skip edges the CPU reads a state's cells only in the band
     * [u, u + width]: a chunk where none of the warp's states is in it is
     * all -inf, and the warp only writes that into its ring for the warp
     * above (its bits there are never read: the path stays in the band).
     * With 450 states in 800 frames a warp is idle for half the chunks,
     * and the others issue faster. */
    const int top_state = n - 1 < 32 * warp + 31 ? n - 1 : 32 * warp + 31;
    const int band_lo = 32 * warp, band_hi = top_state + width;
    for (int r = 0; r < rounds; ++r) {
        const int c = r - warp;
        if (warp < live_warps && c >= 0 && c < nch) {
            const int t_lo = c * C, t_hi = t_lo + C < S ? t_lo + C : S;
            const bool idle = !SKIP && (t_hi <= band_lo || t_lo > band_hi);
            if (idle) {
                if (top_idx >= 0)
                    for (int t = t_lo; t < t_hi; ++t)
                        mine[(t & (R - 1)) * P + top_idx] = neg_inf<TA>();
                /* the emission ring moves on to the next chunk */
                ep += (int64_t)(t_hi - t_lo) * estep;
#pragma unroll
                for (int f = 0; f < kTopoAhead; ++f)
                    ring[f] = readable(t_hi + f) ? widen(ep[(f - kTopoAhead) * estep])
                                                 : neg_inf<TA>();
            } else if (t_hi - t_lo == C) {
#pragma unroll 1
                for (int t0 = t_lo; t0 < t_hi; t0 += kTopoAhead) frames(t0, t0 + kTopoAhead);
            } else {
#pragma unroll 1
                for (int t0 = t_lo; t0 < t_hi; t0 += kTopoAhead) frames(t0, t_hi);
            }
            if (!idle && lane < t_hi - t_lo)
                *(uint2 *)(bits_w + (int64_t)(t_lo + lane) * a.words * 2) = make_uint2(kw_m, kw_s);
            if (c == nch - 1 && (u == n - 1 || u == it.alt_final)) fin[u == n - 1 ? 0 : 1] = q;
            if (warp == 0 && c == 0) {
                /* the virtual start is frame -1's only: the ring's slot R-1
                 * is frame R-1 from now on */
                __syncwarp();
                if (lane == 0) edge[(R - 1) * P + P - 1] = neg_inf<TA>();
            }
        }
        __syncthreads(); /* the round's ring entries are visible to the warp above */
    }
    return __syncthreads_or(!(worst < pos_inf<TA>()));
}

/* The sweep with or without skip edges (a compile-time choice, as in
 * topo_sweep). */
template <typename TV>
__device__ int topo_rounds(const TopoArgs &a, const TopoItem &it, typename AccOf<TV>::type *edge,
                           typename AccOf<TV>::type *fin) {
    if (it.d) return topo_rounds_impl<TV, true>(a, it, edge, fin);
    return topo_rounds_impl<TV, false>(a, it, edge, fin);
}

} // namespace mas_cuda

#endif
