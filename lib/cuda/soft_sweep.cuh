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
 * Work split: one block per segment of an item's states (one segment when B
 * alone fills the GPU; more, running at once and linked through tagged
 * entries in global memory, when it does not, or when an item has more
 * states than a block holds: SoftGeom). Thread p of P owns states q*P + p
 * of its segment for q < K, so per step the only cross-thread value is
 * move(t-1, s-1): a shuffle inside a warp, one shared-memory word per warp
 * and state slot across warps, one link entry across segments, and one
 * barrier per step. Inputs come through shared-memory tiles of TS
 * steps, loaded cooperatively along whichever axis of the view is contiguous
 * and prefetched into registers one tile ahead; outputs leave the same way. */
#ifndef MAS_CUDA_SOFT_SWEEP_CUH
#define MAS_CUDA_SOFT_SWEEP_CUH

#include "cuda/dp_link.cuh"
#include "cuda/soft_common.cuh"

namespace mas_cuda {

constexpr int kSoftMaxThreads = 512;
/* Input elements each thread prefetches per view and tile (K * TS): more
 * for one input, fewer where three share the registers. */
__host__ __device__ constexpr int soft_prefetch(int nin) { return nin <= 1 ? 32 : nin == 2 ? 16 : 8; }

/* A strided 2-D view over (step t, state s) of one item. */
struct SoftView {
    const void *base;
    int64_t s_state, s_step; /* in elements */
    int64_t t_lo, t_hi;      /* only steps in [t_lo, t_hi) are read (pad elsewhere) */
    int32_t dtype;
    int32_t check; /* 0: none; 1: NaN/+inf is an error; 2: NaN is an error */
};

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

/* Launch-wide geometry, uniform over items. */
struct SoftGeom {
    int ts;         /* steps per tile, a power of two */
    int ts_shift;   /* log2(ts) */
    int direct_out; /* 1: outputs go straight to memory (no out tile) */
    /* An item's states run as segments of seg_states states, one block
     * each, n_segs blocks an item, concurrently: the move edges out of a
     * segment's last state reach the next segment's block through a buffer
     * of tagged entries (one per step, then one "done" entry that carries
     * the bad flag down the chain). Blocks take (item, segment) from a
     * ticket counter, so a block waits only on blocks that have started; a
     * producer never waits, so the launch cannot deadlock. */
    int64_t seg_states;
    int64_t n_segs;
    int64_t entries; /* per boundary: max_steps + 2 */
    unsigned long long *links; /* [B][n_segs - 1][entries][words] */
    unsigned *ticket;
};

/* Smallest segment the planner makes (a test hook may go lower). */
constexpr int64_t kSoftMinSegment = 64;

/* Workspace of the segment links for items of up to n_states states and
 * max_steps steps with edges of edge_bytes, plus the ticket counter. */
static inline size_t soft_link_bytes(int64_t B, int64_t n_states, int64_t max_steps,
                                     size_t edge_bytes, int64_t min_segment) {
    const int64_t segs = (n_states + min_segment - 1) / min_segment;
    const size_t words = edge_bytes / 4;
    return align256((size_t)B * (size_t)(segs - 1) * (size_t)(max_steps + 2) * words * 8) + 256;
}

template <typename TA> __device__ __forceinline__ TA shfl_idx(TA v, int k) {
    return __shfl_sync(kFullMask, v, k);
}
template <typename TA> __device__ __forceinline__ Pair<TA> shfl_idx(Pair<TA> v, int k) {
    Pair<TA> r;
    r.a = __shfl_sync(kFullMask, v.a, k);
    r.b = __shfl_sync(kFullMask, v.b, k);
    return r;
}

/* Which axis consecutive threads walk when a view is read or written. */
__device__ __forceinline__ bool along_steps(int64_t s_state, int64_t s_step) {
    int64_t a = s_state < 0 ? -s_state : s_state, b = s_step < 0 ? -s_step : s_step;
    return b <= a;
}

/* Element e of a tile of ts steps and n_pad = K*P states -> (step k, state s).
 * Along steps: ts consecutive threads read one state's row. Along states:
 * e = tid + r*P, so k = r / K and s = (r % K) * P + tid. */
template <int K>
__device__ __forceinline__ void tile_pos(bool steps_fast, int tid, int r, int P, int ts_shift,
                                         int &k, int &s) {
    if (steps_fast) {
        int e = tid + r * P;
        k = e & ((1 << ts_shift) - 1);
        s = e >> ts_shift;
    } else {
        k = r / K;
        s = (r % K) * P + tid;
    }
}

constexpr int64_t kSoftNoBand = INT64_MAX / 4;

template <typename TA, int NIN>
__device__ __forceinline__ bool cell_exists(const SoftItem<TA, NIN> &it, int64_t t, int64_t s) {
    return s < it.n_states && s >= t - it.band_lo && s <= t + it.band_hi;
}

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

/* Policy interface (see soft_ops.cuh):
 *   Cell::NIN, Cell::Edge, Cell::zero(), Cell::start(t),
 *   Cell::step(in_stay, in_move, const TA (&x)[NIN], exists, scalar,
 *              &out_stay, &out_move, &out_value),
 *   Cell::final_value(stay) -> TA (what the plan's finish sees);
 *   Plan::item(b, SoftItem&) -> bool (false: skip, already reported),
 *   Plan::finish(b, final_value_of_last_state, bad) (thread 0). */
template <typename TA, int K, class Cell, class Plan>
__global__ void __launch_bounds__(kSoftMaxThreads)
    soft_sweep(const Plan plan, const SoftGeom geom) {
    constexpr int NIN = Cell::NIN;
    using Edge = typename Cell::Edge;
    extern __shared__ __align__(16) unsigned char smem_raw[];
    __shared__ TA final_value;

    __shared__ unsigned s_ticket;
    if (threadIdx.x == 0) s_ticket = geom.n_segs > 1 ? atomicAdd(geom.ticket, 1u) : blockIdx.x;
    __syncthreads();
    const int64_t b = s_ticket / geom.n_segs, seg = s_ticket % geom.n_segs;
    const int P = blockDim.x, tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int nw = P >> 5;
    const int n_pad = P * K, pitch = n_pad + 1;
    const int ts = geom.ts, ts_shift = geom.ts_shift;

    SoftItem<TA, NIN> whole;
    if (!plan.item(b, whole)) return; /* uniform over the block */
    const int64_t s0 = seg * geom.seg_states;
    if (s0 >= whole.n_states) return; /* a shorter item: no states here */
    const bool last_seg = s0 + geom.seg_states >= whole.n_states;
    const SoftItem<TA, NIN> it =
        soft_segment(whole, s0, last_seg ? whole.n_states - s0 : geom.seg_states);
    /* Links: into state 0 from the previous segment's last state (entry t:
     * its move edge of step t-1), out of the last state to the next. */
    using L = Link<Edge>;
    const size_t link_words = (size_t)geom.entries * L::N;
    const volatile unsigned long long *link_in =
        seg > 0 ? geom.links + ((size_t)b * (geom.n_segs - 1) + (seg - 1)) * link_words : nullptr;
    volatile unsigned long long *link_out =
        !last_seg ? geom.links + ((size_t)b * (geom.n_segs - 1) + seg) * link_words : nullptr;
    const int64_t done_entry = geom.entries - 1;

    Edge *bnd = (Edge *)smem_raw; /* [2][nw][K] */
    TA *tile_in = (TA *)(smem_raw + (((size_t)2 * nw * K * sizeof(Edge) + 15) / 16 * 16));
    TA *tile_out = tile_in + (size_t)NIN * ts * pitch;

    bool fast_in[NIN > 0 ? NIN : 1];
#pragma unroll
    for (int v = 0; v < NIN; v++) fast_in[v] = along_steps(it.in[v].s_state, it.in[v].s_step);
    const bool fast_out = along_steps(it.out.s_state, it.out.s_step);
    const bool want_out = it.out.base != nullptr;
    const int per_thread = K * ts; /* tile elements per thread and view */

    constexpr int PF = soft_prefetch(NIN) > K ? soft_prefetch(NIN) : K; /* ts >= 1 */
    TA pf[NIN > 0 ? NIN : 1][PF];
    bool bad = false;
    /* Along steps, thread tid reads step k = tid % ts of states
     * tid / ts + r * (P / ts); along states, step r / K of state
     * (r % K) * P + tid. Either way one pointer walks with a fixed stride. */
    const int k_fast = tid & (ts - 1), s_fast = tid >> ts_shift, ds_fast = P >> ts_shift;

    /* Loads of a tile, issued back to back: the dtype switch sits outside
     * the loop and nothing uses a loaded value until commit_tile, so all
     * the loads of a tile are in flight together while the previous tile
     * is computed. */
    auto load_tile = [&](int64_t t0) {
#pragma unroll
        for (int v = 0; v < NIN; v++) {
            const SoftView &w = it.in[v];
            auto rows = [&](auto tag) {
                using TV = decltype(tag);
                const TA pad = Cell::pad(v);
                if (fast_in[v]) {
                    const int64_t t = t0 + k_fast;
                    int lo, hi;
                    state_range(it, t, w.t_lo, w.t_hi, lo, hi);
                    const TV *ptr = (const TV *)w.base + t * w.s_step + (int64_t)s_fast * w.s_state;
                    const int64_t dp = (int64_t)ds_fast * w.s_state;
#pragma unroll
                    for (int r = 0; r < PF; r++) {
                        const int s = s_fast + r * ds_fast;
                        if (r < per_thread) pf[v][r] = prefetch_one<TA>(ptr, s >= lo && s <= hi, pad);
                        ptr += dp;
                    }
                } else {
#pragma unroll
                    for (int kk = 0; kk < PF / K; kk++) {
                        if (kk < ts) {
                            const int64_t t = t0 + kk;
                            int lo, hi;
                            state_range(it, t, w.t_lo, w.t_hi, lo, hi);
                            const TV *ptr = (const TV *)w.base + t * w.s_step + (int64_t)tid * w.s_state;
                            const int64_t dp = (int64_t)P * w.s_state;
#pragma unroll
                            for (int q = 0; q < K; q++) {
                                const int s = q * P + tid;
                                pf[v][kk * K + q] = prefetch_one<TA>(ptr + q * dp, s >= lo && s <= hi, pad);
                            }
                        }
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
    auto commit_tile = [&]() {
#pragma unroll
        for (int v = 0; v < NIN; v++) {
            const int32_t check = it.in[v].check;
            TA *dst = tile_in + (size_t)v * ts * pitch;
#pragma unroll
            for (int r = 0; r < PF; r++) {
                if (r < per_thread) {
                    const TA x = pf[v][r];
                    if (check == 1) bad |= is_nan_or_pinf(x);
                    else if (check == 2) bad |= x != x;
                    if (fast_in[v]) dst[k_fast * pitch + s_fast + r * ds_fast] = x;
                    else dst[(r / K) * pitch + (r % K) * P + tid] = x;
                }
            }
        }
    };

    Edge stay[K], move[K];
#pragma unroll
    for (int q = 0; q < K; q++) stay[q] = move[q] = Cell::zero();
    for (int i = tid; i < nw * K; i += P) bnd[i] = Cell::zero();
    if (link_out && tid == 0) L::put(link_out, Cell::zero(), 1u);
    /* Warp 0 holds the incoming edges of a tile, lane k the one of step
     * t0+k, loaded a tile ahead and checked when the tile starts. */
    unsigned long long link_raw[L::N];
    Edge link_edge = Cell::zero();
    auto link_fetch = [&](int64_t t0) {
        const int64_t e = t0 + lane;
        if (lane < ts && e < it.n_steps) L::fetch(link_in + e * L::N, link_raw);
    };
    auto link_settle = [&](int64_t t0) {
        const int64_t e = t0 + lane;
        link_edge = L::settle(link_in + e * L::N, link_raw, (unsigned)e + 1u,
                              lane < ts && e < it.n_steps, Cell::zero());
    };
    if (link_in && warp == 0) link_fetch(0);
    load_tile(0);
    commit_tile();
    __syncthreads();

    int par = 0;
    for (int64_t t0 = 0; t0 < it.n_steps; t0 += ts) {
        const int steps = it.n_steps - t0 < ts ? (int)(it.n_steps - t0) : ts;
        if (t0 + ts < it.n_steps) load_tile(t0 + ts);
        if (link_in && warp == 0) {
            link_settle(t0);
            if (t0 + ts < it.n_steps) link_fetch(t0 + ts);
        }
        for (int k = 0; k < steps; k++) {
            const int64_t t = t0 + k;
            int s_lo, s_hi;
            state_range(it, t, 0, it.n_steps, s_lo, s_hi);
            const Edge *from = bnd + par * nw * K;
            Edge in_move[K];
#pragma unroll
            for (int q = 0; q < K; q++) in_move[q] = shfl_up1(move[q]);
            Edge first = Cell::start(t);
            if (link_in && warp == 0) first = shfl_idx(link_edge, k);
            if (lane == 0) {
#pragma unroll
                for (int q = 0; q < K; q++)
                    in_move[q] = warp > 0 ? from[(warp - 1) * K + q]
                                          : (q > 0 ? from[(nw - 1) * K + q - 1] : first);
            }
#pragma unroll
            for (int q = 0; q < K; q++) {
                const int s = q * P + tid;
                TA x[NIN > 0 ? NIN : 1];
#pragma unroll
                for (int v = 0; v < NIN; v++) x[v] = tile_in[(size_t)v * ts * pitch + k * pitch + s];
                const bool exists = s >= s_lo && s <= s_hi;
                TA out;
                Cell::step(stay[q], in_move[q], x, exists, it.scalar, stay[q], move[q], out);
                if (want_out) {
                    if (geom.direct_out) {
                        if (s < it.n_states && (!it.store_band || exists))
                            it.out.base[s * it.out.s_state + t * it.out.s_step] = out;
                    } else {
                        tile_out[k * pitch + s] = out;
                    }
                }
            }
            if (lane == 31) {
                Edge *to = bnd + (par ^ 1) * nw * K;
#pragma unroll
                for (int q = 0; q < K; q++) to[warp * K + q] = move[q];
            }
            if (link_out) {
#pragma unroll
                for (int q = 0; q < K; q++)
                    if (q * P + tid == it.n_states - 1)
                        L::put(link_out + (t + 1) * L::N, move[q], (unsigned)(t + 2));
            }
            __syncthreads();
            par ^= 1;
        }
        if (want_out && !geom.direct_out) {
            for (int r = 0; r < per_thread; r++) {
                int k, s;
                tile_pos<K>(fast_out, tid, r, P, ts_shift, k, s);
                const int64_t t = t0 + k;
                int lo = 0, hi = it.n_states - 1;
                if (it.store_band) state_range(it, t, 0, it.n_steps, lo, hi);
                if (k < steps && s >= lo && s <= hi)
                    it.out.base[s * it.out.s_state + t * it.out.s_step] = tile_out[k * pitch + s];
            }
        }
        if (t0 + ts < it.n_steps) commit_tile();
        __syncthreads();
    }

    /* The last state's final values go to the plan (log_z for forward-sum),
     * with the bad flag of every segment: each passes the OR of its own and
     * its predecessors' down the chain in its done entry. */
#pragma unroll
    for (int q = 0; q < K; q++)
        if (last_seg && q * P + tid == it.n_states - 1) final_value = Cell::final_value(stay[q]);
    bool any_bad = __syncthreads_or(bad) != 0;
    if (tid == 0) {
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

/* Threads per block and states per thread for n_states states. */
struct SoftShape {
    int k, threads;
};
/* One state per thread up to 512 states, then K states per thread. Measured
 * on an H100 (bench_soft_cuda --shapes, 2026-11-21): the sweep is bound by
 * the latency of each step, which 16 warps hide better than 8, 4 or 2 (64,
 * 128 and 256 threads per item were 1.5x to 2.3x slower). */
constexpr int kSoftTargetThreads = kSoftMaxThreads;
/* Benchmark hook (lib/cuda/soft_forward_sum.cu, not in mas.h): 0 means
 * kSoftTargetThreads. */
extern "C" int32_t mas_soft_cuda_target_threads_;
static inline SoftShape soft_shape(int64_t n_states) {
    SoftShape sh;
    const int64_t target = mas_soft_cuda_target_threads_ > 0 ? mas_soft_cuda_target_threads_
                                                             : kSoftTargetThreads;
    sh.k = 1;
    while (sh.k < 8 && (n_states + sh.k - 1) / sh.k > target) sh.k *= 2;
    while (sh.k < 16 && (n_states + sh.k - 1) / sh.k > kSoftMaxThreads) sh.k *= 2;
    int64_t per = (n_states + sh.k - 1) / sh.k;
    sh.threads = (int)((per + 31) / 32 * 32);
    return sh;
}

/* Shared memory of a launch: the boundary words, NIN input tiles and (unless
 * direct) one output tile of ts steps. */
static inline size_t soft_smem_bytes(const SoftShape &sh, int nin, size_t acc, size_t edge,
                                     int ts, bool direct_out) {
    size_t nw = (size_t)sh.threads / 32;
    size_t bnd = (2 * nw * sh.k * edge + 15) / 16 * 16;
    size_t pitch = (size_t)sh.threads * sh.k + 1;
    size_t tiles = (size_t)(nin + (direct_out ? 0 : 1)) * ts * pitch * acc;
    return bnd + tiles;
}

/* Picks the tile depth: as many steps as the prefetch registers and the
 * shared memory allow (at most 32); direct outputs when even one step of
 * output tile does not fit. Returns false when nothing fits. */
static inline bool soft_plan_geom(const SoftShape &sh, int nin, bool has_out, size_t acc,
                                  size_t edge, size_t smem_limit, SoftGeom *g, size_t *smem) {
    for (int direct = 0; direct <= 1; direct++) {
        if (direct && !has_out) break;
        const int most = soft_prefetch(nin) > sh.k ? soft_prefetch(nin) / sh.k : 1;
        for (int ts = most < 32 ? most : 32; ts >= 1; ts /= 2) {
            bool direct_out = !has_out || direct;
            size_t bytes = soft_smem_bytes(sh, nin, acc, edge, ts, direct_out);
            if (bytes <= smem_limit) {
                g->ts = ts;
                g->ts_shift = 0;
                while ((1 << g->ts_shift) < ts) g->ts_shift++;
                g->direct_out = direct_out ? 1 : 0;
                *smem = bytes;
                return true;
            }
        }
    }
    return false;
}

template <typename TA, int K, class Cell, class Plan>
static inline mas_status soft_launch_k(const Plan &plan, int64_t B, const SoftShape &sh,
                                       SoftGeom g, size_t smem_limit, cudaStream_t stream) {
    size_t smem = 0;
    if (!soft_plan_geom(sh, Cell::NIN, Cell::HAS_OUT, sizeof(TA), sizeof(typename Cell::Edge),
                        smem_limit, &g, &smem))
        return MAS_ERR_BAD_ARGUMENT;
    auto kernel = soft_sweep<TA, K, Cell, Plan>;
    if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem) !=
        cudaSuccess)
        return MAS_ERR_CUDA;
    kernel<<<(unsigned)B, sh.threads, smem, stream>>>(plan, g);
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
    int dev = 0, smem_limit = 0, sms = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&smem_limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) !=
            cudaSuccess ||
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess)
        return MAS_ERR_CUDA;
    const size_t limit = (size_t)smem_limit - 64; /* the static final_value word */
    /* Segments: enough blocks to cover the multiprocessors when B is small
     * (the sweep is bound by the latency of a step, not by its work), none
     * under kSoftMinSegment states, none over what a block holds. */
    int64_t seg_states;
    if (mas_soft_cuda_segment_states_ > 0) {
        seg_states = mas_soft_cuda_segment_states_;
        if (seg_states > (int64_t)kSoftMaxThreads * 16) seg_states = (int64_t)kSoftMaxThreads * 16;
    } else {
        const int64_t want = (sms + B - 1) / B;
        seg_states = (n_states + want - 1) / want;
        seg_states = (seg_states + 31) / 32 * 32;
        if (seg_states < kSoftMinSegment) seg_states = kSoftMinSegment;
        if (seg_states > (int64_t)kSoftMaxThreads * 16) seg_states = (int64_t)kSoftMaxThreads * 16;
    }
    if (seg_states > n_states) seg_states = n_states;
    const SoftShape sh = soft_shape(seg_states);
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
    const int64_t blocks = B * g.n_segs;
    switch (sh.k) {
    case 1: return soft_launch_k<TA, 1, Cell>(plan, blocks, sh, g, limit, stream);
    case 2: return soft_launch_k<TA, 2, Cell>(plan, blocks, sh, g, limit, stream);
    case 4: return soft_launch_k<TA, 4, Cell>(plan, blocks, sh, g, limit, stream);
    case 8: return soft_launch_k<TA, 8, Cell>(plan, blocks, sh, g, limit, stream);
    default: return soft_launch_k<TA, 16, Cell>(plan, blocks, sh, g, limit, stream);
    }
}

} // namespace mas_cuda

#endif
