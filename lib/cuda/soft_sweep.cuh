/* The dynamic-programming core shared by the soft-alignment ops on CUDA, the
 * counterpart of lib/cpu/dp_core.h.
 *
 * One recurrence over states s and steps t, on a strided view of one item:
 *   (stay, move)(t, s) = CELL( stay(t-1, s), move(t-1, s-1), inputs(t, s) )
 * "stay" is what cell (t,s) hands to (t+1, s), "move" what it hands to
 * (t+1, s+1). A cell policy says what the edges carry and how a cell combines
 * them (log-plus or max-plus with optional cell and logit weights, or the
 * adjoint of the log-plus sweep); a plan says, per item, where the views
 * start and how they step. So the semiring, the weights and the topology are
 * parameters: reversed walks are views with negated strides and the
 * anti-diagonal walk of many-to-many attention is a skewed view.
 *
 * Cells exist for 0 <= s < n_states, 0 <= t < n_steps and
 * t - band_lo <= s <= t + band_hi; only those are read (inputs outside get
 * the view's pad value) and a cell policy forces the carried values of the
 * others to its zero. Forward walks have band_hi = 0 (no path from the start
 * reaches s > t); soft_reverse() maps both bands onto the reversed walk.
 *
 * Work split (the pipeline of hard MAS's forward, hard_forward.cuh): a
 * compute warp owns 32 consecutive states of an item, one a lane, and walks
 * the steps in tiles of TS; per step the only cross-lane value is
 * move(t-1, s-1), one shuffle away, and the warp's first state takes it from
 * a shared-memory ring of tagged entries that the warp below fills step by
 * step (dp_link.cuh), so warps trail each other by a step or two and no
 * block barrier runs in the sweep. A helper warp per compute warp loads,
 * checks and commits its input tiles and stores its output tiles (two
 * buffers, a named barrier per tile), along whichever axis of each view is
 * contiguous, so the compute warp issues only the chain of steps. A block
 * holds a segment of an item's states (a few compute warps); segments run
 * at once and hand the edges on through tagged entries in global memory,
 * a tile at a time, fetched a tile ahead.
 */
#ifndef MAS_CUDA_SOFT_SWEEP_CUH
#define MAS_CUDA_SOFT_SWEEP_CUH

#include <type_traits>

#include "cuda/device_cache.cuh"
#include "cuda/dp_link.cuh"
#include "cuda/soft_common.cuh"

namespace mas_cuda {

constexpr int kSoftMaxThreads = 256; /* 4 compute + 4 helper warps: up to 255 registers a thread */

/* A strided 2-D view over (step t, state s) of one item. */
struct SoftView {
    const void *base;
    int64_t s_state, s_step; /* in elements */
    int64_t t_lo, t_hi;      /* only steps in [t_lo, t_hi) are read (pad elsewhere) */
    int32_t dtype;
    int32_t check; /* 0: none; 1: NaN/+inf is an error; 2: NaN is an error */
};

__device__ __forceinline__ SoftView soft_view(const void *base, int32_t dtype, int64_t s_state,
                                              int64_t s_step, int64_t t_lo, int64_t t_hi,
                                              int32_t check) {
    SoftView v;
    v.base = base;
    v.dtype = dtype;
    v.s_state = s_state;
    v.s_step = s_step;
    v.t_lo = t_lo;
    v.t_hi = t_hi;
    v.check = check;
    return v;
}

template <typename TA> struct SoftOut {
    TA *base; /* NULL: not wanted */
    int64_t s_state, s_step;
};

template <typename TA, int NIN> struct SoftItem {
    int64_t n_states, n_steps, band_lo, band_hi;
    bool store_band; /* outputs exist only inside the bands (skewed views) */
    SoftView in[NIN];
    SoftOut<TA> out;
    TA scalar; /* a per-item constant for the cell policy (log_z) */
    /* A walk resumed where another stopped (policies whose edges carry
     * the cell's value, Edge = TA): init[s * init_stride] is the edge out
     * of state s at step -1, both ways, in place of the virtual start
     * (NULL: the virtual start); last[s * last_stride] receives state s's
     * stay edge after the last step (NULL: not wanted). The kernel clears
     * both before Plan::item. */
    const TA *init;
    int64_t init_stride;
    TA *last;
    int64_t last_stride;
};

/* Edge carriers: one value, or a pair (the adjoint's (abar, alpha)). */
template <typename TA> struct Pair {
    TA a, b;
};
template <typename TA> __device__ __forceinline__ TA shfl_up1(TA v) {
    return __shfl_up_sync(kFullMask, v, 1);
}
template <typename TA> __device__ __forceinline__ Pair<TA> shfl_up1(Pair<TA> v) {
    Pair<TA> r;
    r.a = __shfl_up_sync(kFullMask, v.a, 1);
    r.b = __shfl_up_sync(kFullMask, v.b, 1);
    return r;
}

/* Launch-wide geometry, uniform over items.
 * An item's states run as segments of seg_states states, one block each,
 * n_segs blocks an item, concurrently: the move edges out of a segment's
 * last state reach the next segment's block through a buffer of tagged
 * entries (one per step, then one "done" entry that carries the bad flag
 * down the chain). Blocks take (item, segment) from a ticket counter, so a
 * block waits only on blocks that have started, and a block never waits on
 * a later one (a segment's producer warps wait only on consumers inside
 * their block, and those never on the next segment): no deadlock. */
struct SoftGeom {
    int64_t seg_states;
    int64_t n_segs;
    int64_t entries; /* per boundary: max_steps + 2 */
    unsigned long long *links; /* [B][n_segs - 1][entries][words] */
    unsigned *ticket;
};

/* Smallest segment the planner makes, one warp (a test hook may go lower). */
constexpr int64_t kSoftMinSegment = 32;

/* Workspace of the segment links for items of up to n_states states and
 * max_steps steps with edges of edge_bytes, plus the ticket counter. */
static inline size_t soft_link_bytes(int64_t B, int64_t n_states, int64_t max_steps,
                                     size_t edge_bytes, int64_t min_segment) {
    const int64_t segs = (n_states + min_segment - 1) / min_segment;
    const size_t words = edge_bytes / 4;
    return align256((size_t)B * (size_t)(segs - 1) * (size_t)(max_steps + 2) * words * 8) + 256;
}

/* The hand-over rings at the start of a block's shared memory: entries of
 * edge_bytes / 4 tagged 64-bit words; then the warps' progress counters. */
static inline __host__ __device__ size_t soft_ring_bytes(int rings, int ring, size_t edge) {
    return (size_t)rings * ring * (edge / 4) * 8;
}
static inline __host__ __device__ size_t soft_progress_bytes(int nw) {
    return ((size_t)nw * 8 + 15) / 16 * 16;
}

/* Which axis consecutive threads walk when a view is read or written. */
__device__ __forceinline__ bool along_steps(int64_t s_state, int64_t s_step) {
    int64_t a = s_state < 0 ? -s_state : s_state, b = s_step < 0 ? -s_step : s_step;
    return b <= a;
}

constexpr int64_t kSoftNoBand = INT64_MAX / 4;

/* The states of step t that exist, [*lo, *hi] (empty when lo > hi), and
 * that a view reads (its step range too), as 32-bit bounds. */
template <typename TA, int NIN>
__device__ __forceinline__ void state_range(const SoftItem<TA, NIN> &it, int64_t t, int64_t t_lo,
                                            int64_t t_hi, int &lo, int &hi) {
    int64_t a = t - it.band_lo, b = t + it.band_hi;
    if (a < 0) a = 0;
    if (b > it.n_states - 1) b = it.n_states - 1;
    if (t < t_lo || t >= t_hi || a > b) {
        lo = 1;
        hi = 0;
    } else {
        lo = (int)a;
        hi = (int)b;
    }
}

__host__ __device__ inline int64_t soft_dtype_bytes(int32_t d) {
    return d == MAS_FLOAT64 ? 8 : d == MAS_FLOAT32 ? 4 : 2;
}

/* The same item walked from its last cell: every view starts at
 * (n_steps-1, n_states-1) with negated strides, and the bands and read
 * ranges are mirrored. */
template <typename TA, int NIN> __device__ inline void soft_reverse(SoftItem<TA, NIN> &it) {
    const int64_t ls = it.n_steps - 1, lst = it.n_states - 1;
    for (int v = 0; v < NIN; v++) {
        SoftView &w = it.in[v];
        w.base = (const char *)w.base + (lst * w.s_state + ls * w.s_step) * soft_dtype_bytes(w.dtype);
        w.s_state = -w.s_state;
        w.s_step = -w.s_step;
        const int64_t lo = it.n_steps - w.t_hi, hi = it.n_steps - w.t_lo;
        w.t_lo = lo;
        w.t_hi = hi;
    }
    if (it.out.base) it.out.base += lst * it.out.s_state + ls * it.out.s_step;
    it.out.s_state = -it.out.s_state;
    it.out.s_step = -it.out.s_step;
    if (it.init) it.init += lst * it.init_stride;
    it.init_stride = -it.init_stride;
    if (it.last) it.last += lst * it.last_stride;
    it.last_stride = -it.last_stride;
    const int64_t lo = it.n_steps - it.n_states + it.band_hi;
    const int64_t hi = it.n_states - it.n_steps + it.band_lo;
    it.band_lo = lo;
    it.band_hi = hi;
}

/* States [s0, s0 + n) of an item as an item of its own: the views start s0
 * states in and the bands shift with them. */
template <typename TA, int NIN>
__device__ inline SoftItem<TA, NIN> soft_segment(const SoftItem<TA, NIN> &whole, int64_t s0, int64_t n) {
    SoftItem<TA, NIN> it = whole;
    it.n_states = n;
    it.band_lo = whole.band_lo + s0;
    it.band_hi = whole.band_hi - s0;
    for (int v = 0; v < NIN; v++) {
        SoftView &w = it.in[v];
        w.base = (const char *)w.base + s0 * w.s_state * soft_dtype_bytes(w.dtype);
    }
    if (it.out.base) it.out.base += s0 * it.out.s_state;
    if (it.init) it.init += s0 * it.init_stride;
    if (it.last) it.last += s0 * it.last_stride;
    return it;
}

/* One prefetched element, or pad where there is none to read. The register
 * gets the pad first and the load second: a select after the load would
 * wait for it there and then (seen as 40% of the stalls of forward-sum's
 * sweep), while this way the load stays in flight until the tile is
 * committed. Elements that need widening are converted at once (float16 and
 * bfloat16 inputs only). */
template <typename TA, typename TV>
__device__ __forceinline__ TA prefetch_one(const TV *ptr, bool in, TA pad) {
    if constexpr (sizeof(TV) == sizeof(TA)) {
        TA x = pad;
        if (in) x = *(const TA *)ptr;
        return x;
    } else {
        return in ? (TA)widen(*ptr) : pad;
    }
}

/* Edge of state s at step -1 from a resumed walk's column (SoftItem::init);
 * policies with other edges never resume (zero). */
template <class Cell, typename TA, int NIN>
__device__ __forceinline__ typename Cell::Edge init_edge(const SoftItem<TA, NIN> &it, int64_t s) {
    if constexpr (std::is_same<typename Cell::Edge, TA>::value) return it.init[s * it.init_stride];
    else return Cell::zero();
}

/* Steps per tile: the prefetch distance (one register per step and
 * input) and how often a warp does its per-tile work. Measured on an H100
 * (2026-11-21): 16 steps for every cell policy; 8 for the adjoint was 7-10%
 * slower, 32 for forward-sum's backward 23% slower (registers). */
constexpr int kSoftTileSteps = 16, kSoftTileShift = 4;
static_assert(1 << kSoftTileShift == kSoftTileSteps, "tile steps a power of two");
/* The rings a warp hands its last state's move edges to the warp above
 * through: four tiles of tagged entries (a producer runs at most three tiles
 * ahead, so a ring of more than two can never deadlock). */
constexpr int kSoftRingTiles = 4;
constexpr int kSoftPitch = 33; /* a tile row of 32 states, padded for the banks */

/* The steps t0 + k, 0 <= k < TS, on which cell (t, s) exists and a view
 * that reads steps [t_lo, t_hi) reads it, as [klo, khi] (empty: klo > khi):
 * per tile, so that the per-step tests are two 32-bit compares. */
template <int TS, typename TA, int NIN>
__device__ __forceinline__ void step_range(const SoftItem<TA, NIN> &it, int64_t s, int64_t t0,
                                           int64_t t_lo, int64_t t_hi, int &klo, int &khi) {
    int64_t a = s - it.band_hi, b = s + it.band_lo;
    if (a < t_lo) a = t_lo;
    if (b > t_hi - 1) b = t_hi - 1;
    a -= t0;
    b -= t0;
    if (s >= it.n_states) a = TS;
    klo = a < 0 ? 0 : a > TS ? TS : (int)a;
    khi = b < -1 ? -1 : b >= TS ? TS - 1 : (int)b;
}

/* Policy interface (soft_cells.cuh):
 *   Cell::NIN, Cell::Edge, Cell::zero(), Cell::start(t), Cell::pad(v),
 *   Cell::Pre, Cell::prepare(const TA (&x)[NIN]) -> Pre (what does not
 *              depend on the incoming edges),
 *   Cell::step(in_stay, in_move, const Pre &, exists, scalar,
 *              &out_stay, &out_move, &out_value) (branch-free: the steps
 *              of a tile run as one straight line),
 *   Cell::final_value(stay) -> TA (what the plan's finish sees);
 *   Plan::item(b, SoftItem&) -> bool (false: skip, already reported),
 *   Plan::finish(b, final_value_of_last_state, bad) (thread 0).
 *
 * Block: nw compute warps over one segment's states, lane l of warp w on
 * state 32w + l, and nw helper warps that move their tiles. Compute warps
 * run on their own (no block barrier in the sweep): warp w
 * reads the edge into its first state at step t from entry t-1 of ring w,
 * which warp w-1 (for warp 0: warp 0 itself, from the link or the virtual
 * start, a tile at a time) fills with tagged entries as it goes, so warp w
 * trails warp w-1 by a step or two, not by a tile. A producer waits only
 * when it is a whole ring ahead of its consumer. */
template <typename TA, class Cell, class Plan>
__global__ void __launch_bounds__(kSoftMaxThreads)
    soft_sweep(const Plan plan, const SoftGeom geom) {
    constexpr int NIN = Cell::NIN, NV = NIN > 0 ? NIN : 1;
    constexpr int TS = kSoftTileSteps, TS_SHIFT = kSoftTileShift;
    constexpr int RING = kSoftRingTiles * TS, PITCH = kSoftPitch;
    constexpr int SPR = 32 / TS; /* states per row-load instruction along steps */
    using Edge = typename Cell::Edge;
    using L = Link<Edge>;
    extern __shared__ __align__(16) unsigned char smem_raw[];
    __shared__ TA final_value;

    __shared__ unsigned s_ticket;
    if (threadIdx.x == 0) s_ticket = geom.n_segs > 1 ? atomicAdd(geom.ticket, 1u) : blockIdx.x;
    __syncthreads();
    const int64_t b = s_ticket / geom.n_segs, seg = s_ticket % geom.n_segs;
    /* Warps [0, nw) compute, warp nw + w moves the tiles of compute warp w
     * (its helper): the loads, checks and stores stay off the chain of steps. */
    const int lane = threadIdx.x & 31, nw = blockDim.x >> 6;
    const bool helper = (int)(threadIdx.x >> 5) >= nw;
    const int warp = helper ? (int)(threadIdx.x >> 5) - nw : (int)(threadIdx.x >> 5);

    SoftItem<TA, NIN> whole;
    whole.init = nullptr;
    whole.last = nullptr;
    whole.init_stride = whole.last_stride = 0;
    if (!plan.item(b, whole)) return; /* uniform over the block */
    const int64_t s0 = seg * geom.seg_states;
    if (s0 >= whole.n_states) return; /* a shorter item: no states here */
    const bool last_seg = s0 + geom.seg_states >= whole.n_states;
    const SoftItem<TA, NIN> it =
        soft_segment(whole, s0, last_seg ? whole.n_states - s0 : geom.seg_states);
    /* This warp's states as an item of their own. */
    const int64_t w0 = (int64_t)warp * 32;
    const bool active = w0 < it.n_states;
    const int wn = !active ? 0 : it.n_states - w0 < 32 ? (int)(it.n_states - w0) : 32;
    const SoftItem<TA, NIN> wi = soft_segment(it, active ? w0 : 0, active ? wn : 1);
    const int nw_active = (int)((it.n_states + 31) / 32);

    /* Links: into state 0 from the previous segment's last state (entry t:
     * its move edge of step t-1), out of the last state to the next. */
    const size_t link_words = (size_t)geom.entries * L::N;
    const volatile unsigned long long *link_in =
        seg > 0 ? geom.links + ((size_t)b * (geom.n_segs - 1) + (seg - 1)) * link_words : nullptr;
    volatile unsigned long long *link_out =
        !last_seg ? geom.links + ((size_t)b * (geom.n_segs - 1) + seg) * link_words : nullptr;
    const int64_t done_entry = geom.entries - 1;
    /* the warp that holds the segment's last state sends its edges on */
    const bool link_warp = link_out && warp == nw_active - 1;

    /* rings [nw + 1][RING][L::N] of tagged words: ring r entry t (tag t+1)
     * is the edge into warp r's first state at step t+1; warp r-1 writes it
     * (ring 0: warp 0 itself). progress[w]: steps warp w has finished. */
    volatile unsigned long long *rings = (volatile unsigned long long *)smem_raw;
    const size_t ring_bytes = soft_ring_bytes(nw + 1, RING, sizeof(Edge));
    volatile long long *progress = (volatile long long *)(smem_raw + ring_bytes);
    TA *tiles = (TA *)(smem_raw + ring_bytes + soft_progress_bytes(nw));
    /* per compute warp two buffers, each NIN input tiles and one output
     * tile: the warp computes tile c in buffer c % 2 while its helper fills
     * and empties the other */
    constexpr int BUF = (NIN + 1) * TS * PITCH;
    TA *const bufs = tiles + (size_t)warp * 2 * BUF;
    const unsigned pair_bar = 1u + (unsigned)warp; /* 0 is __syncthreads' */
    auto pair_sync = [&]() { asm volatile("bar.sync %0, 64;" ::"r"(pair_bar) : "memory"); };
    volatile unsigned long long *ring_in = rings + (size_t)warp * RING * L::N;
    volatile unsigned long long *ring_out = ring_in + (size_t)RING * L::N;

    bool fast_in[NV];
#pragma unroll
    for (int v = 0; v < NIN; v++) fast_in[v] = along_steps(wi.in[v].s_state, wi.in[v].s_step);
    const bool fast_out = along_steps(wi.out.s_state, wi.out.s_step);
    const bool want_out = wi.out.base != nullptr;
    /* Along steps lane l reads step l % TS of states l / TS + r * SPR; along
     * states, state l of step r. */
    const int k_fast = lane & (TS - 1), s_fast = lane >> TS_SHIFT;

    TA pf[NV][TS];
    bool bad = false;
    /* The loads of a tile, issued back to back and used only at commit, so
     * they are in flight while the previous tile is computed. */
    auto load_tile = [&](int64_t t0) {
#pragma unroll
        for (int v = 0; v < NIN; v++) {
            const SoftView &w = wi.in[v];
            auto rows = [&](auto tag) {
                using TV = decltype(tag);
                const TA pad = Cell::pad(v);
                if (fast_in[v]) {
                    const int64_t t = t0 + k_fast;
                    int lo, hi;
                    state_range(wi, t, w.t_lo, w.t_hi, lo, hi);
                    const TV *ptr = (const TV *)w.base + t * w.s_step + (int64_t)s_fast * w.s_state;
                    const int64_t dp = (int64_t)SPR * w.s_state;
#pragma unroll
                    for (int r = 0; r < TS; r++) {
                        const int s = s_fast + r * SPR;
                        pf[v][r] = prefetch_one<TA>(ptr, s >= lo && s <= hi, pad);
                        ptr += dp;
                    }
                } else {
                    int klo, khi;
                    step_range<TS>(wi, lane, t0, w.t_lo, w.t_hi, klo, khi);
                    const TV *ptr = (const TV *)w.base + t0 * w.s_step + (int64_t)lane * w.s_state;
#pragma unroll
                    for (int r = 0; r < TS; r++) {
                        pf[v][r] = prefetch_one<TA>(ptr, r >= klo && r <= khi, pad);
                        ptr += w.s_step;
                    }
                }
            };
            switch (w.dtype) {
            case MAS_FLOAT32: rows(float()); break;
            case MAS_FLOAT64: rows(double()); break;
            case MAS_FLOAT16: rows(__half()); break;
            default: rows(__nv_bfloat16()); break;
            }
        }
    };
    /* Pad values (-inf cells, 0 logits) never count as bad. */
    auto commit_tile = [&](TA *tile_in) {
#pragma unroll
        for (int v = 0; v < NIN; v++) {
            const int32_t check = wi.in[v].check;
            TA *dst = tile_in + (size_t)v * TS * PITCH;
            if (fast_in[v]) dst += k_fast * PITCH + s_fast;
            else dst += lane;
#pragma unroll
            for (int r = 0; r < TS; r++) {
                const TA x = pf[v][r];
                if (check == 1) bad |= is_nan_or_pinf(x);
                else if (check == 2) bad |= x != x;
                dst[fast_in[v] ? r * SPR : r * PITCH] = x;
            }
        }
    };
    /* The outputs of a tile, from the output tile to memory, along the
     * contiguous axis of the output view. */
    auto store_tile = [&](const TA *tile_out, int64_t t0) {
        TA *ptr;
        int64_t dp;
        int lo, hi;
        const TA *src;
        if (fast_out) {
            const int64_t t = t0 + k_fast;
            state_range(wi, t, 0, wi.n_steps, lo, hi);
            if (!wi.store_band) { /* every state of a step inside the item */
                lo = t < wi.n_steps ? 0 : 1;
                hi = t < wi.n_steps ? wn - 1 : 0;
            }
            ptr = wi.out.base + t * wi.out.s_step + (int64_t)s_fast * wi.out.s_state;
            dp = (int64_t)SPR * wi.out.s_state;
            src = tile_out + k_fast * PITCH + s_fast;
        } else {
            step_range<TS>(wi, lane, t0, 0, wi.n_steps, lo, hi);
            if (!wi.store_band && lane < wn) {
                lo = 0;
                hi = wi.n_steps - t0 < TS ? (int)(wi.n_steps - t0) - 1 : TS - 1;
            }
            ptr = wi.out.base + t0 * wi.out.s_step + (int64_t)lane * wi.out.s_state;
            dp = wi.out.s_step;
            src = tile_out + lane;
        }
#pragma unroll
        for (int r = 0; r < TS; r++) {
            const int q = fast_out ? s_fast + r * SPR : r;
            if (q >= lo && q <= hi) *ptr = src[fast_out ? r * SPR : r * PITCH];
            ptr += dp;
        }
    };

    for (int i = threadIdx.x; i < (nw + 1) * RING * L::N; i += blockDim.x) rings[i] = 0ull;
    for (int i = threadIdx.x; i < nw; i += blockDim.x) progress[i] = 0;
    if (link_out && threadIdx.x == 0) /* entry 0: the edge out of step -1 */
        L::put(link_out, it.init ? init_edge<Cell>(it, it.n_states - 1) : Cell::zero(), 1u);
    unsigned long long link_raw[L::N];
    auto link_fetch = [&](int64_t t0) {
        const int64_t e = t0 + lane;
        if (lane < TS && e < it.n_steps) L::fetch(link_in + e * L::N, link_raw);
    };
    if (link_in && warp == 0 && !helper) link_fetch(0);
    __syncthreads();

    const int64_t n_tiles = (it.n_steps + TS - 1) / TS;
    if (active && helper) {
        /* phase c (between pair barriers c and c+1): the compute warp works
         * on tile c; the helper commits tile c+1, loads tile c+2 and stores
         * the outputs of tile c-1 */
        load_tile(0);
        commit_tile(bufs);
        if (n_tiles > 1) load_tile(TS);
        pair_sync();
        for (int64_t c = 0; c < n_tiles; c++) {
            if (c + 1 < n_tiles) {
                commit_tile(bufs + ((c + 1) & 1) * BUF);
                if (c + 2 < n_tiles) load_tile((c + 2) * TS);
            }
            if (c >= 1 && want_out) store_tile(bufs + ((c - 1) & 1) * BUF + NIN * TS * PITCH, (c - 1) * TS);
            pair_sync();
        }
        if (want_out) store_tile(bufs + ((n_tiles - 1) & 1) * BUF + NIN * TS * PITCH, (n_tiles - 1) * TS);
    } else if (active) {
        const int ring_lane = wn - 1;
        const bool has_consumer = warp + 1 < nw_active;
        Edge stay = Cell::zero(), move = Cell::zero();
        if (wi.init && lane < wn) stay = move = init_edge<Cell>(wi, lane);
        /* entry t-1 of the ring in (tag t), the edge in at step t, fetched a
         * step ahead. Entry -1: warp 0 writes it (the virtual start or the
         * link); for the others no producer writes it: the zero edge, or
         * the resumed column's edge out of the state below. */
        unsigned long long raw[L::N];
        {
            uint32_t w[L::N];
            const Edge z = warp > 0 && it.init ? init_edge<Cell>(it, w0 - 1) : Cell::zero();
            memcpy(w, &z, sizeof(Edge));
#pragma unroll
            for (int q = 0; q < L::N; q++)
                raw[q] = warp == 0 ? ~0ull : (unsigned long long)w[q]; /* tag 0 */
        }
        pair_sync();
        for (int64_t c = 0; c < n_tiles; c++) {
            const int64_t t0 = c * TS;
            const int steps = it.n_steps - t0 < TS ? (int)(it.n_steps - t0) : TS;
            const TA *tile_in = bufs + (c & 1) * BUF;
            TA *tile_out = bufs + (c & 1) * BUF + NIN * TS * PITCH;
            if (warp == 0) { /* ring 0: the edges in for this tile's steps */
                Edge feed;
                if (link_in) {
                    const int64_t e = t0 + lane;
                    feed = L::settle(link_in + e * L::N, link_raw, (unsigned)e + 1u,
                                     lane < TS && e < it.n_steps, Cell::zero());
                    if (t0 + TS < it.n_steps) link_fetch(t0 + TS);
                } else {
                    feed = it.init ? Cell::zero() : Cell::start(t0 + lane);
                }
                if (lane < TS) /* entry t0+lane-1, tag t0+lane */
                    L::put(ring_in + ((t0 + lane - 1) & (RING - 1)) * L::N, feed, (unsigned)(t0 + lane));
                __syncwarp();
            }
            if (has_consumer) /* never more than a ring ahead of the consumer */
                Progress::wait_at_least(progress + warp + 1, t0 + TS + 1 - RING);
            int k_lo, k_hi; /* the steps of this tile on which this lane's cell exists */
            step_range<TS>(wi, lane, t0, 0, wi.n_steps, k_lo, k_hi);
            auto step = [&](int k) {
                const int64_t t = t0 + k;
                /* entry t-1 (tag t), fetched a step ago; then entry t */
                while (!L::ok(raw, (unsigned)t)) L::fetch(ring_in + ((t - 1) & (RING - 1)) * L::N, raw);
                const Edge first = L::value(raw);
                L::fetch(ring_in + (t & (RING - 1)) * L::N, raw);
                Edge in_move = shfl_up1(move);
                if (lane == 0) in_move = first;
                TA x[NV];
#pragma unroll
                for (int v = 0; v < NIN; v++) x[v] = tile_in[v * TS * PITCH + k * PITCH + lane];
                TA out;
                Cell::step(stay, in_move, Cell::prepare(x), k >= k_lo && k <= k_hi, wi.scalar, stay,
                           move, out);
                tile_out[k * PITCH + lane] = out;
                if (lane == ring_lane) L::put(ring_out + (t & (RING - 1)) * L::N, move, (unsigned)(t + 1));
            };
            if (steps == TS) {
#pragma unroll
                for (int k = 0; k < TS; k++) step(k);
            } else {
#pragma unroll 1
                for (int k = 0; k < steps; k++) step(k);
            }
            if (lane == 0) Progress::publish(progress + warp, t0 + steps); /* entries < t0+steps-1 read */
            __syncwarp();
            if (link_warp && lane < steps) { /* this tile's edges to the next segment */
                unsigned long long e[L::N];
                L::fetch(ring_out + ((t0 + lane) & (RING - 1)) * L::N, e);
                L::put(link_out + (t0 + lane + 1) * L::N, L::value(e), (unsigned)(t0 + lane + 2));
            }
            pair_sync();
        }
        if (last_seg && w0 + lane == it.n_states - 1) final_value = Cell::final_value(stay);
        if constexpr (std::is_same<Edge, TA>::value)
            if (wi.last && lane < wn) wi.last[lane * wi.last_stride] = stay;
    }

    /* The last state's final values go to the plan (log_z for forward-sum),
     * with the bad flag of every segment: each passes the OR of its own and
     * its predecessors' down the chain in its done entry. */
    bool any_bad = __syncthreads_or(bad) != 0;
    if (threadIdx.x == 0) {
        /* the done entry: one word, the tag over the flag */
        const unsigned long long tag = (unsigned long long)done_entry + 1u;
        if (link_in) {
            unsigned long long w;
            do {
                w = link_in[done_entry * L::N];
            } while ((w >> 32) != tag);
            any_bad = any_bad || (w & 1u);
        }
        if (link_out) {
            link_out[done_entry * L::N] = (tag << 32) | (any_bad ? 1u : 0u);
        } else {
            plan.finish(b, final_value, any_bad);
        }
    }
}

/* Shared memory of a block of nw warps: nw + 1 rings of tagged words, the
 * warps' progress, then per warp NIN input tiles and one output tile. */
static inline size_t soft_smem_bytes(int nw, int nin, size_t acc, size_t edge) {
    const int ts = kSoftTileSteps;
    return soft_ring_bytes(nw + 1, kSoftRingTiles * ts, edge) + soft_progress_bytes(nw) +
           (size_t)nw * 2 * (nin + 1) * ts * kSoftPitch * acc;
}

/* Compute warps per block (segment; each has a helper warp), measured on an
 * H100 (bench_soft_cuda --shapes, 2026-11-21): 4 (128 states a block) were
 * 1.06-1.37x faster than 2 and 1.2-1.6x faster than 1; the segment links
 * between blocks cost a tile of lag each. Benchmark hook
 * (soft_forward_sum.cu, not in mas.h): compute threads per block, 0 for the
 * default. */
extern "C" int32_t mas_soft_cuda_target_threads_;
constexpr int kSoftDefaultWarps = 4;

template <typename TA, class Cell, class Plan>
static inline mas_status soft_launch_nw(const Plan &plan, int64_t blocks, int nw, SoftGeom g,
                                        cudaStream_t stream) {
    const size_t smem = soft_smem_bytes(nw, Cell::NIN, sizeof(TA), sizeof(typename Cell::Edge));
    auto kernel = soft_sweep<TA, Cell, Plan>;
    static KernelCache cache; /* the limit is raised once per device */
    DeviceInfo dev;
    mas_status st = current_device(&dev);
    if (st == MAS_OK) st = ensure_smem(cache, kernel, dev, smem);
    if (st != MAS_OK) return st;
    kernel<<<(unsigned)blocks, nw * 64, smem, stream>>>(plan, g); /* and a helper each */
    return cudaGetLastError() == cudaSuccess ? MAS_OK : MAS_ERR_CUDA;
}

/* States per segment (soft_sweep) for tests: 0 lets the planner choose.
 * Set only by the test program, to run many segments at small sizes. Not
 * part of the API. */
extern "C" int32_t mas_soft_cuda_segment_states_;

static inline int64_t soft_min_segment() {
    const int64_t hook = mas_soft_cuda_segment_states_;
    return hook > 0 && hook < kSoftMinSegment ? hook : kSoftMinSegment;
}

/* One launch of the sweep over B items of up to n_states states and
 * max_steps steps; links: soft_link_bytes(B, n_states, max_steps,
 * sizeof(Pair<TA>), soft_min_segment()) bytes of workspace. */
template <typename TA, class Cell, class Plan>
static inline mas_status soft_launch(const Plan &plan, int64_t B, int64_t n_states,
                                     int64_t max_steps, void *links, cudaStream_t stream) {
    /* nw compute warps a block, each with its helper */
    constexpr int most = kSoftMaxThreads / 64;
    int nw = kSoftDefaultWarps;
    if (mas_soft_cuda_target_threads_ >= 32)
        nw = mas_soft_cuda_target_threads_ / 32 < most ? mas_soft_cuda_target_threads_ / 32 : most;
    const int64_t item_warps = (n_states + 31) / 32;
    if (nw > item_warps) nw = (int)item_warps;
    int64_t seg_states = (int64_t)nw * 32;
    if (mas_soft_cuda_segment_states_ > 0) {
        seg_states = mas_soft_cuda_segment_states_;
        if (seg_states > most * 32) seg_states = most * 32;
        nw = (int)((seg_states + 31) / 32);
    }
    /* Fewer warps a block where the device's shared memory is smaller
     * (the tiles of float64 attention's backward take 36 KB a warp pair). */
    DeviceInfo dev;
    if (current_device(&dev) != MAS_OK) return MAS_ERR_CUDA;
    const size_t fits = (size_t)dev.smem_optin - 64; /* the kernel's static words */
    while (nw > 1 && soft_smem_bytes(nw, Cell::NIN, sizeof(TA), sizeof(typename Cell::Edge)) > fits) {
        nw--;
        if (seg_states > (int64_t)nw * 32) seg_states = (int64_t)nw * 32;
    }
    if (soft_smem_bytes(nw, Cell::NIN, sizeof(TA), sizeof(typename Cell::Edge)) > fits)
        return MAS_ERR_BAD_ARGUMENT;
    if (seg_states > n_states) seg_states = n_states;
    SoftGeom g;
    g.seg_states = seg_states;
    g.n_segs = (n_states + seg_states - 1) / seg_states;
    g.entries = max_steps + 2;
    g.links = (unsigned long long *)links;
    const size_t link_bytes = (size_t)B * (size_t)(g.n_segs - 1) * (size_t)g.entries *
                              (sizeof(typename Cell::Edge) / 4) * 8;
    g.ticket = (unsigned *)((unsigned char *)links + align256(link_bytes));
    if (g.n_segs > 1 &&
        cudaMemsetAsync(links, 0, align256(link_bytes) + 256, stream) != cudaSuccess)
        return MAS_ERR_CUDA;
    return soft_launch_nw<TA, Cell>(plan, B * g.n_segs, nw, g, stream);
}

} // namespace mas_cuda

#endif
