/* The forward sweep of hard MAS on CUDA: the max-plus recurrence over every
 * cell inside the lengths, one decision bit per cell, no score written to
 * global memory.
 *
 * Work split. A warp owns 32*K consecutive tokens of one item (K adjacent
 * tokens per lane) and walks the frames in chunks of kChunk. Per frame the
 * only cross-lane dependency is the score of the token just below a lane's
 * first token, one shuffle away. The token below the warp's first comes from
 * the warp below: inside a block the warps run in lockstep, warp w one chunk
 * behind warp w-1, handing the boundary over through a shared-memory ring
 * ordered by the block barrier of each step; between the blocks of one item
 * it goes through a global ring of entries tagged with their lap (no flags,
 * no fences), loaded one chunk ahead so that the L2 round trip stays off the
 * critical path.
 *
 * Loads of the value tile of chunk c+kStages-1 are in flight (cp.async) while
 * chunk c is computed: the loads never depend on the recurrence.
 *
 * Blocks take their (item, slab) from a ticket counter, so a block only ever
 * waits for blocks that have already started; the host launches no more
 * blocks at once than can be resident, so the backpressure of the global
 * rings never waits on a block that has not started either.
 *
 * CHAIN: the same sweep for a plain chain topology (hard_chain.h): each
 * lane's edge log-scores (ChainEdges) added to stay and move before the
 * compare. */
#ifndef MAS_CUDA_HARD_FORWARD_CUH
#define MAS_CUDA_HARD_FORWARD_CUH

#include "cuda/device_cache.cuh"
#include "cuda/dp_link.cuh"
#include "cuda/dp_semiring.cuh"
#include "cuda/hard_common.cuh"

namespace mas_cuda {

struct ForwardArgs {
    const unsigned char *value;
    int64_t s0, s1, s2; /* element strides of value */
    int64_t T, S;
    const int64_t *x_len, *y_len;
    uint32_t *bits;
    int64_t groups;
    unsigned char *ring;
    size_t ring_clear_bytes; /* rings + flags + ticket: cleared when slabs > 1 */
    int64_t max_slabs;
    int *flags;         /* per ring: frames its consumer has read */
    unsigned *ticket;
    int *group_flag;    /* [B][groups], every live group written */
    double *final_score;
    int slabs;          /* blocks per item */
    int warps;          /* warps per block */
    int64_t item0;      /* first item of this launch */
    unsigned ticket0;   /* tickets taken by earlier launches of the call */
    int frames_inner;   /* LOAD_ANY: consecutive lanes walk frames */
    ChainEdges chain;   /* the CHAIN kernels' edge log-scores */
};

template <typename TV, int K, int MODE> struct TileGeom {
    static constexpr int ES = (int)sizeof(TV);
    static constexpr int EPC = 16 / ES;  /* elements per 16-byte piece */
    static constexpr int ROWS = 32 * K;  /* tokens per warp */
    /* Token rows (ROWS rows of kChunk frames) for LOAD_BTS and LOAD_ANY;
     * frame rows (kChunk rows of ROWS tokens) for LOAD_BST. */
    static constexpr bool TOKEN_ROWS = MODE != LOAD_BST;
    static constexpr int ROW_BYTES = TOKEN_ROWS ? kChunk * ES : ROWS * ES;
    static constexpr int PIECES = ROW_BYTES / 16;
    static constexpr int BYTES = ROWS * kChunk * ES;
};

/* Token rows are read 16 bytes per lane, lane l reading row K*l+k: XOR the
 * piece index with the lane so that 8 consecutive lanes hit 8 different
 * 16-byte bank groups. */
template <typename G>
__host__ __device__ __forceinline__ int swizzle(int row, int k_per_lane) {
    int l = row / k_per_lane;
    return G::PIECES >= 8 ? (l & 7) : ((l >> 1) & (G::PIECES - 1));
}

template <typename TV, int K, int MODE>
__host__ __device__ __forceinline__ int token_row_offset(int r, int f) {
    using G = TileGeom<TV, K, MODE>;
    return r * G::ROW_BYTES + (((f / G::EPC) ^ swizzle<G>(r, K)) << 4) + (f % G::EPC) * G::ES;
}

/* Where token r's cell of frame f lies in a chunk tile of either layout:
 * token rows (swizzled as above) or frame rows (LOAD_BST) */
template <typename TV, int K, int MODE>
__host__ __device__ __forceinline__ int cell_offset(int r, int f) {
    using G = TileGeom<TV, K, MODE>;
    if constexpr (G::TOKEN_ROWS) return token_row_offset<TV, K, MODE>(r, f);
    else return f * G::ROW_BYTES + r * G::ES;
}

/* True when chunk [j0, j0+kChunk) is whole (inside y_len) and every cell of
 * it for tokens [base, base+ROWS) lies in the band. */
__host__ __device__ __forceinline__ bool chunk_inside_band(int64_t base, int rows, int64_t j0,
                                                           int64_t X, int64_t Y) {
    return j0 + kChunk <= Y && base + rows - 1 <= j0 && base >= j0 + kChunk - 1 - (Y - X);
}

/* Copies the cells of chunk [j0, j0+kChunk) x tokens [base, base+ROWS) that
 * lie in the band (tokens [j - width, j] at frame j, width = Y - X) into the
 * tile. A 16-byte piece that meets the band and lies wholly inside the
 * lengths is copied whole, asynchronously, off-band cells included (they
 * change nothing: the sweep counts cells below the band as -inf, checks only
 * band cells for NaN/+inf, and scores above the band reach no band cell); a
 * piece that crosses a length edge is copied cell by cell, band cells only.
 * Nothing outside the lengths is read. Tile cells not copied keep stale data.
 * inside (chunk_inside_band): every piece of a token < x_len is whole and in
 * the band, so no per-piece band arithmetic. */
template <typename TV, int K, int MODE>
__host__ __device__ __forceinline__ void load_tile(unsigned char *tile, const ForwardArgs &a,
                                                   const TV *item, int64_t base, int64_t j0,
                                                   int64_t X, int64_t Y, int lane, bool inside) {
    using G = TileGeom<TV, K, MODE>;
    const int64_t width = Y - X;
    if constexpr (MODE == LOAD_BTS) {
        if (inside) {
            const int rows = X - base < G::ROWS ? (int)(X - base) : G::ROWS;
            const TV *first = item + base * a.s1 + j0;
            for (int idx = lane; idx < rows * G::PIECES; idx += 32) {
                int r = idx / G::PIECES, c = idx % G::PIECES;
                copy16_async(tile + r * G::ROW_BYTES + ((c ^ swizzle<G>(r, K)) << 4),
                             first + r * a.s1 + c * G::EPC);
            }
            return;
        }
        for (int idx = lane; idx < G::ROWS * G::PIECES; idx += 32) {
            int r = idx / G::PIECES, c = idx % G::PIECES;
            int64_t tok = base + r, f0 = j0 + (int64_t)c * G::EPC;
            /* frames of this token inside the band and the lengths */
            int64_t lo = tok, hi = tok + width < Y - 1 ? tok + width : Y - 1;
            if (tok >= X || f0 > hi || f0 + G::EPC - 1 < lo) continue;
            const TV *src = item + tok * a.s1 + f0;
            unsigned char *dst = tile + r * G::ROW_BYTES + ((c ^ swizzle<G>(r, K)) << 4);
            if (f0 + G::EPC <= Y) {
                copy16_async(dst, src);
            } else {
                for (int e = 0; e < G::EPC; ++e)
                    if (f0 + e >= lo && f0 + e <= hi) ((TV *)dst)[e] = src[e];
            }
        }
    } else if constexpr (MODE == LOAD_BST) {
        if (inside) {
            for (int idx = lane; idx < kChunk * G::PIECES; idx += 32) {
                int f = idx / G::PIECES, c = idx % G::PIECES;
                int64_t t0 = base + (int64_t)c * G::EPC;
                if (t0 >= X) continue;
                const TV *src = item + (j0 + f) * a.s2 + t0;
                unsigned char *dst = tile + f * G::ROW_BYTES + (c << 4);
                if (t0 + G::EPC <= X) {
                    copy16_async(dst, src);
                } else {
                    for (int e = 0; e < G::EPC && t0 + e < X; ++e) ((TV *)dst)[e] = src[e];
                }
            }
            return;
        }
        for (int idx = lane; idx < kChunk * G::PIECES; idx += 32) {
            int f = idx / G::PIECES, c = idx % G::PIECES;
            int64_t fr = j0 + f, t0 = base + (int64_t)c * G::EPC;
            /* tokens of this frame inside the band and the lengths */
            int64_t lo = fr - width, hi = fr < X - 1 ? fr : X - 1;
            if (fr >= Y || t0 > hi || t0 + G::EPC - 1 < lo) continue;
            const TV *src = item + fr * a.s2 + t0;
            unsigned char *dst = tile + f * G::ROW_BYTES + (c << 4);
            if (t0 + G::EPC <= X) {
                copy16_async(dst, src);
            } else {
                for (int e = 0; e < G::EPC; ++e)
                    if (t0 + e >= lo && t0 + e <= hi) ((TV *)dst)[e] = src[e];
            }
        }
    } else {
        for (int idx = lane; idx < G::ROWS * kChunk; idx += 32) {
            int r, f;
            if (a.frames_inner) {
                r = idx / kChunk;
                f = idx % kChunk;
            } else {
                r = idx % G::ROWS;
                f = idx / G::ROWS;
            }
            int64_t tok = base + r, fr = j0 + f;
            if (tok < X && fr < Y && tok <= fr && tok >= fr - width)
                *(TV *)(tile + token_row_offset<TV, K, MODE>(r, f)) = item[tok * a.s1 + fr * a.s2];
        }
    }
}

/* Spreads the low 32/K bits of x to every K-th bit. */
template <int K> __device__ __forceinline__ uint32_t spread_bits(uint32_t x) {
    if constexpr (K == 2) {
        x = (x | (x << 8)) & 0x00FF00FFu;
        x = (x | (x << 4)) & 0x0F0F0F0Fu;
        x = (x | (x << 2)) & 0x33333333u;
        x = (x | (x << 1)) & 0x55555555u;
    } else if constexpr (K == 4) {
        x = (x | (x << 12)) & 0x000F000Fu;
        x = (x | (x << 6)) & 0x03030303u;
        x = (x | (x << 3)) & 0x11111111u;
    } else if constexpr (K == 8) {
        x = (x | (x << 14)) & 0x00030003u;
        x = (x | (x << 7)) & 0x01010101u;
    }
    return x;
}

/* The ballots give bit l of word k = token K*l+k of the warp; the stored
 * word m holds tokens 32m..32m+31 in order. */
template <int K>
__device__ __forceinline__ uint32_t token_order_word(const uint32_t (&ballots)[K], int m) {
    if constexpr (K == 1) {
        return ballots[0];
    } else {
        constexpr int n = 32 / K;
        uint32_t out = 0;
#pragma unroll
        for (int k = 0; k < K; ++k)
            out |= spread_bits<K>((ballots[k] >> (m * n)) & ((1u << n) - 1u)) << k;
        return out;
    }
}

template <typename TV, int K>
__device__ __forceinline__ void load_frame_row(const unsigned char *row, int lane,
                                               typename AccOf<TV>::type (&v)[K]) {
    constexpr int bytes = K * (int)sizeof(TV);
    const unsigned char *p = row + lane * bytes;
    if constexpr (bytes % 16 == 0) {
#pragma unroll
        for (int h = 0; h < bytes / 16; ++h) {
            int4 raw = ((const int4 *)p)[h];
            const TV *e = (const TV *)&raw;
#pragma unroll
            for (int k = 0; k < 16 / (int)sizeof(TV); ++k) v[h * (16 / (int)sizeof(TV)) + k] = widen(e[k]);
        }
    } else if constexpr (bytes == 8) {
        int2 raw = *(const int2 *)p;
        const TV *e = (const TV *)&raw;
#pragma unroll
        for (int k = 0; k < K; ++k) v[k] = widen(e[k]);
    } else if constexpr (bytes == 4) {
        int raw = *(const int *)p;
        const TV *e = (const TV *)&raw;
#pragma unroll
        for (int k = 0; k < K; ++k) v[k] = widen(e[k]);
    } else {
#pragma unroll
        for (int k = 0; k < K; ++k) v[k] = widen(((const TV *)p)[k]);
    }
}


/* How a sweep warp trades scores across its lanes each frame.
 *   Shuffles (kSweepShuffles): three shuffles a frame (the token below a
 *   lane's first, the boundary for lane 0, the last token's score for the
 *   lane of the frame), each lane keeping its frame's decision words by a
 *   select, and the cells checked for NaN/+inf here.
 *   Exchange (kSweepExchange, the fused forward): one rotating shuffle a
 *   frame, lane 31 sending the boundary lane 0 wants (read from shared
 *   memory, 16 bytes a load) in place of its own score; lane 31 stores the
 *   last token's score and the frame's decision words to shared memory, read
 *   back once a chunk; the cells are checked by the threads that compute
 *   them (fused_forward.cuh). Next to compute warps on its scheduler the
 *   sweep warp issued about once every 10 cycles (session 24's stamps, B=32
 *   T=150 S=800 float32: ~187 cycles a frame for ~18 instructions at K = 2),
 *   so its time is its instruction count: a frame inside the band went from
 *   ~18 to ~13 instructions at K = 2 (~23 at K = 4), and align_gaussian's
 *   calls from 0.109 / 0.422 / 0.814 to 0.103 / 0.381 / 0.737 ms at B=32
 *   T=150, B=32 T=512, B=16 T=1024 (TF32 0.076 / 0.290 / 0.532 to 0.071 /
 *   0.265 / 0.486; H200, one machine, bench/results/fused-gpu-h100.md). */
constexpr int kSweepShuffles = 0, kSweepExchange = 1;
/*   Exchange ahead (kSweepExchangeAhead): the exchange, with the cells and
 *   boundaries of the next 16-byte group loaded a group ahead, so that the
 *   chain waits on the shared pipe (busy with the compute warps' loads) only
 *   for its shuffle. Which slabs take it, and what it measured:
 *   fused_forward.cuh's PAIRS. */
constexpr int kSweepExchangeAhead = 2;
/* The exchange's shared memory for scores of es bytes: 32 boundaries, 32
 * tops, 32 frames' words of up to 4 tokens a lane */
__host__ __device__ constexpr int sweep_exchange_bytes(int es) { return 64 * es + 32 * 4 * 4; }

/* The recurrence over the frames of one chunk, K tokens a lane. FULL: all
 * kChunk frames, with no per-frame branch, so the whole chunk is one block
 * of straight-line code the scheduler can overlap across frames. MASKED: the
 * chunk crosses an edge of the band; lead = (lane's first token) - (chunk's
 * first frame), clamped. Cells below the band (token > frame) count as -inf
 * and cells outside it are not checked for NaN/+inf (they were not loaded).
 * XCHG (kSweepExchange, kSweepExchangeAhead): xchg is the warp's
 * sweep_exchange_bytes(sizeof the score) of shared memory, 16-byte aligned;
 * guard is not touched; top and ballots are set on every lane (lanes >= nf
 * hold stale values). */
template <typename TV, int K, int MODE, bool FULL, bool MASKED, bool CHAIN,
          int XCHG = kSweepShuffles>
__device__ __forceinline__ void sweep_chunk(const unsigned char *tile, int lane, int nf,
                                            int lead, int width,
                                            typename AccOf<TV>::type boundary,
                                            typename AccOf<TV>::type (&q)[K],
                                            typename AccOf<TV>::type (&guard)[K],
                                            uint32_t (&ballots)[K], typename AccOf<TV>::type &top,
                                            const LaneEdges<typename AccOf<TV>::type, K> &wt,
                                            typename AccOf<TV>::type *xchg = nullptr) {
    using TA = typename AccOf<TV>::type;
    using G = TileGeom<TV, K, MODE>;
    constexpr bool EX = XCHG != kSweepShuffles;
    static_assert(!EX || K == 2 || K == 4, "the exchange stores a frame's K words at once");
    constexpr int EPL = 16 / (int)sizeof(TA); /* boundaries a 16-byte load */
    TA *const edges = xchg, *const tops = xchg + 32;
    uint32_t *const words = (uint32_t *)(xchg + 64); /* [32][K] */
    const bool last_lane = lane == 31;
    const int from = (lane + 31) & 31;
    if constexpr (EX) {
        edges[lane] = boundary;
        __syncwarp();
    }
    int4 raw[K], edge_raw;
    auto load_group = [&](int g, int4(&dst)[K]) { /* frames g EPC .. g EPC + EPC - 1 */
#pragma unroll
        for (int k = 0; k < K; ++k) {
            int r = K * lane + k;
            dst[k] = *(const int4 *)(tile + r * G::ROW_BYTES + ((g ^ swizzle<G>(r, K)) << 4));
        }
    };
    constexpr bool AHEAD = XCHG == kSweepExchangeAhead && G::TOKEN_ROWS;
    int4 nxt[K], edge_nxt;
    if constexpr (AHEAD) {
        load_group(0, nxt);
        edge_nxt = *(const int4 *)edges;
    }
#pragma unroll
    for (int f = 0; f < kChunk; ++f) {
        if (!FULL && f >= nf) break;
        TA v[K];
        if constexpr (G::TOKEN_ROWS) {
            if (f % G::EPC == 0) {
                if constexpr (AHEAD) {
#pragma unroll
                    for (int k = 0; k < K; ++k) raw[k] = nxt[k];
                    if (f + G::EPC < kChunk && (FULL || f + G::EPC < nf))
                        load_group(f / G::EPC + 1, nxt);
                } else {
                    load_group(f / G::EPC, raw);
                }
            }
#pragma unroll
            for (int k = 0; k < K; ++k) v[k] = widen(((const TV *)&raw[k])[f % G::EPC]);
        } else {
            load_frame_row<TV, K>(tile + f * G::ROW_BYTES, lane, v);
        }
        const bool mine = !EX && lane == f; /* the shuffle form's: frame f is lane f's */
        TA below;
        if constexpr (EX) {
            if (f % EPL == 0) {
                if constexpr (AHEAD) {
                    edge_raw = edge_nxt;
                    if (f + EPL < kChunk) edge_nxt = *(const int4 *)(edges + f + EPL);
                } else {
                    edge_raw = *(const int4 *)(edges + f);
                }
            }
            const TA edge = ((const TA *)&edge_raw)[f % EPL];
            below = __shfl_sync(kFullMask, last_lane ? edge : q[K - 1], from);
        } else {
            below = __shfl_up_sync(kFullMask, q[K - 1], 1);
            TA edge = __shfl_sync(kFullMask, boundary, f);
            below = lane == 0 ? edge : below;
        }
#pragma unroll
        for (int k = K - 1; k >= 0; --k) {
            TA move = k == 0 ? below : q[k - 1];
            TA stay = q[k];
            if constexpr (CHAIN) { /* the chain's edges (ChainEdges) */
                move = move + wt.m[k];
                stay = stay + wt.s[k];
            }
            bool advance = stay < move; /* the CPU's max(move, stay) */
            TA cell = v[k];
            if constexpr (MASKED) {
                const int d = lead + k - f; /* token - frame */
                const bool below = d > 0, in_band = !below && d >= -width;
                cell = below ? neg_inf<TA>() : cell;
                if constexpr (!EX) guard[k] = in_band ? guard_max(guard[k], cell) : guard[k];
            } else if constexpr (!EX) {
                guard[k] = guard_max(guard[k], cell);
            }
            q[k] = MaxPlus::plus(stay, move) + cell; /* its compare is advance */
            uint32_t word = __ballot_sync(kFullMask, advance);
            if constexpr (EX) ballots[k] = word; /* the frame's; stored below */
            else ballots[k] = mine ? word : ballots[k];
        }
        if constexpr (EX) {
            if (last_lane) {
                tops[f] = q[K - 1];
                if constexpr (K == 2)
                    *(uint2 *)(words + 2 * f) = make_uint2(ballots[0], ballots[1]);
                else
                    *(uint4 *)(words + 4 * f) =
                        make_uint4(ballots[0], ballots[1], ballots[2], ballots[3]);
            }
        } else {
            TA t = __shfl_sync(kFullMask, q[K - 1], 31);
            top = mine ? t : top;
        }
    }
    if constexpr (EX) {
        __syncwarp(); /* lane 31's stores; every lane's reads of edges before the next chunk */
        top = tops[lane];
        if constexpr (K == 2) {
            const uint2 w = *(const uint2 *)(words + 2 * lane);
            ballots[0] = w.x;
            ballots[1] = w.y;
        } else {
            const uint4 w = *(const uint4 *)(words + 4 * lane);
            ballots[0] = w.x;
            ballots[1] = w.y;
            ballots[2] = w.z;
            ballots[3] = w.w;
        }
    }
}

/* The recurrence over chunk [j0, j0 + nf) for the warp's tokens from base
 * (32 K of them), in the form the chunk needs: whole and inside the band
 * (no per-cell band test), whole and crossing an edge of the band (token ==
 * frame, or token == frame - width), or cut by y_len. */
template <typename TV, int K, int MODE, bool CHAIN = false, int XCHG = kSweepShuffles>
__device__ __forceinline__ void sweep_chunk_at(const unsigned char *tile, int lane, int nf,
                                               int64_t base, int64_t j0, int64_t width,
                                               typename AccOf<TV>::type boundary,
                                               typename AccOf<TV>::type (&q)[K],
                                               typename AccOf<TV>::type (&guard)[K],
                                               uint32_t (&ballots)[K],
                                               typename AccOf<TV>::type &top,
                                               const LaneEdges<typename AccOf<TV>::type, K> &wt = {},
                                               typename AccOf<TV>::type *xchg = nullptr) {
    /* (with nf == kChunk this is chunk_inside_band) */
    const bool inside = base + 32 * K - 1 <= j0 && base >= j0 + kChunk - 1 - width;
    const int64_t lead64 = base + K * lane - j0;
    const int lead = (int)(lead64 > (1 << 30) ? (1 << 30) : (lead64 < -(1 << 30) ? -(1 << 30) : lead64));
    const int wid = (int)(width > (1 << 30) ? (1 << 30) : width);
    if (nf == kChunk && inside)
        sweep_chunk<TV, K, MODE, true, false, CHAIN, XCHG>(tile, lane, kChunk, lead, wid,
                                                           boundary, q, guard, ballots, top, wt,
                                                           xchg);
    else if (nf == kChunk)
        sweep_chunk<TV, K, MODE, true, true, CHAIN, XCHG>(tile, lane, kChunk, lead, wid, boundary,
                                                          q, guard, ballots, top, wt, xchg);
    else
        sweep_chunk<TV, K, MODE, false, true, CHAIN, XCHG>(tile, lane, nf, lead, wid, boundary, q,
                                                           guard, ballots, top, wt, xchg);
}

/* The hand-over of boundary scores between the sweep warps of two blocks
 * of one item: a global ring of FRAMES tagged entries (dp_link.cuh; the
 * tag is the frame's lap + 1), the producer writing the score of its last
 * token at every frame it sweeps, the consumer reading the frames it wants
 * (the score of token base-1 at frame j0 + lane - 1; -inf elsewhere) one
 * chunk ahead, and releasing how far it has read now and then. Before it
 * reuses a slot the producer waits for that release, except for frames
 * before out_first, which its consumer never reads. Shared by hard_forward
 * and the fused sweep (fused_forward.cuh). */
template <typename TA, int FRAMES> struct SlabRing {
    using RL = Link<TA>;
    static constexpr int RW = RL::N;
    typedef unsigned long long ull;
    const volatile ull *in = nullptr; /* from the block before (nullptr: none) */
    volatile ull *out = nullptr;      /* to the block after (nullptr: none) */
    int *in_progress = nullptr;       /* frames this consumer has read */
    const int *out_progress = nullptr; /* frames our consumer has read */
    int64_t out_first = 0;
    int64_t seen = 0;
    ull pending[RW] = {};

    __device__ unsigned tag(int64_t frame) const { return (unsigned)(frame / FRAMES) + 1u; }
    __device__ const volatile ull *slot(int64_t jj) const {
        return in + (jj < 0 ? 0 : jj % FRAMES) * RW;
    }
    /* issue the read of chunk c's boundary (the lane wants its frame) */
    __device__ void fetch(int64_t c, int lane, bool want) {
        const int64_t jj = c * kChunk + lane - 1;
        if (want) RL::fetch(slot(jj), pending);
    }
    /* chunk c's boundary, waiting for the producer where it is behind */
    __device__ TA settle(int64_t c, int lane, bool want) {
        const int64_t jj = c * kChunk + lane - 1;
        return RL::settle(slot(jj), pending, tag(jj), want, neg_inf<TA>());
    }
    /* frames before `read` are read (the warp barrier orders every lane's
     * reads before lane 0's release) */
    __device__ void release(int lane, int64_t read) {
        __syncwarp();
        if (lane == 0) store_release(in_progress, (int)read);
    }
    /* the scores of the last token at frames j0 .. j0 + nf - 1 */
    __device__ void put(int64_t j0, int nf, int lane, TA top) {
        /* slot reuse: the consumer has read the frames of the previous lap
         * (rarely waits: the ring is longer than the consumer's lag) */
        const int64_t need = j0 + kChunk - FRAMES;
        if (need > out_first && seen < need) {
            int got = 0;
            if (lane == 0) {
                do {
                    got = load_acquire(out_progress);
                } while (got < need);
            }
            seen = __shfl_sync(kFullMask, got, 0);
            __syncwarp(); /* lane 0's acquire before every lane's store */
        }
        if (lane < nf) RL::put(out + ((j0 + lane) % FRAMES) * RW, top, tag(j0 + lane));
    }
};

/* A chunk's decision words: lane l < nf stores frame j0 + l of each live
 * group of the warp's K groups. */
template <int K>
__device__ __forceinline__ void store_decisions(uint32_t *item_bits, int64_t S,
                                                int64_t first_group, int64_t live_groups,
                                                int64_t j0, int lane, int nf,
                                                const uint32_t (&ballots)[K]) {
    if (lane >= nf) return;
#pragma unroll
    for (int m = 0; m < K; ++m) {
        const int64_t g = first_group + m;
        if (g < live_groups) item_bits[g * S + j0 + lane] = token_order_word<K>(ballots, m);
    }
}

/* A sweep lane's verdict from its guard (sweep_chunk's NaN-keeping running
 * maxima of the band cells): a NaN or +inf at one of its tokens below X. */
template <typename TA, int K>
__device__ __forceinline__ bool guard_bad(int64_t base, int lane, int64_t X, const TA (&guard)[K]) {
    bool bad = false;
#pragma unroll
    for (int k = 0; k < K; ++k)
        if (base + K * lane + k < X) bad |= !(guard[k] < pos_inf<TA>());
    return bad;
}

/* After a sweep warp's last chunk: the final score (the warp holding token
 * X-1) and the NaN/+inf flag of each of its live groups (group_flag: the
 * item's row), set where any lane's verdict (bad) is, written whatever they
 * hold, so they need no clearing. */
template <typename TA, int K>
__device__ __forceinline__ void finish_sweep(int64_t base, int lane, int64_t X, const TA (&q)[K],
                                             bool bad, double *final_score, int *group_flag,
                                             int64_t first_group, int64_t live_groups) {
#pragma unroll
    for (int k = 0; k < K; ++k)
        if (base + K * lane + k == X - 1) *final_score = (double)q[k];
    const int any = __any_sync(kFullMask, bad) ? 1 : 0;
    if (lane < K && first_group + lane < live_groups) group_flag[first_group + lane] = any;
}

template <typename TV, int K, int MODE, bool CHAIN>
__global__ void __launch_bounds__(512) hard_forward(ForwardArgs a) {
    using TA = typename AccOf<TV>::type;
    using G = TileGeom<TV, K, MODE>;
    constexpr int kRing = kSmemRingChunks * kChunk;
    extern __shared__ __align__(16) unsigned char smem[];
    __shared__ unsigned s_ticket;

    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, W = a.warps;
    unsigned char *tiles = smem + (size_t)w * kStages * G::BYTES;
    TA *rings = (TA *)(smem + (size_t)W * kStages * G::BYTES);
    /* One block an item: no block waits on another, any order will do. */
    if (threadIdx.x == 0) s_ticket = a.slabs == 1 ? blockIdx.x : atomicAdd(a.ticket, 1u) - a.ticket0;
    __syncthreads();
    const unsigned ticket = s_ticket;
    const int64_t b = a.item0 + ticket / (unsigned)a.slabs;
    const int slab = (int)(ticket % (unsigned)a.slabs);
    const int64_t X = a.x_len[b], Y = a.y_len[b];
    if (length_status(X, Y, a.T, a.S) != MAS_OK) return; /* the whole block */
    const int64_t base = ((int64_t)slab * W + w) * G::ROWS;
    const bool active = base < X; /* idle warps still keep the barriers */
    const TV *item = (const TV *)a.value + b * a.s0;

    /* Where the score of token base-1 comes from and where that of token
     * base+ROWS-1 goes: the neighbour warp's shared ring (ordered by the
     * block barrier of each step), or a global ring of tagged entries
     * between the blocks of one item (dp_link.cuh; the tag is the ring's
     * lap + 1). */
    const TA *in_smem = w > 0 ? rings + (w - 1) * kRing : nullptr;
    TA *out_smem = w + 1 < W && base + G::ROWS < X ? rings + w * kRing : nullptr;
    SlabRing<TA, kGlobalRingFrames> ring;
    if (w == 0 && slab > 0) {
        size_t line = (size_t)b * a.max_slabs + (slab - 1);
        ring.in = (const volatile unsigned long long *)a.ring + line * kGlobalRingFrames * ring.RW;
        ring.in_progress = a.flags + line * kFlagStride;
    }
    if (w + 1 == W && base + G::ROWS < X) {
        size_t line = (size_t)b * a.max_slabs + slab;
        ring.out = (volatile unsigned long long *)a.ring + line * kGlobalRingFrames * ring.RW;
        ring.out_progress = a.flags + line * kFlagStride;
    }
    const bool virtual_start = base == 0; /* lane 0 holds token 0 */
    const int64_t width = Y - X;          /* the band: token in [frame - width, frame] */
    const int64_t nch = (Y + kChunk - 1) / kChunk;

    /* The boundary of chunk c: lane l needs the score of token base-1 at
     * frame j0+l-1 (the virtual start, 0, before token 0's first frame). A
     * global boundary is loaded one chunk ahead (fetch) and checked when
     * its chunk comes (settle): the L2 round trip overlaps a chunk. */
    auto frame_real = [&](int64_t c) {
        const int64_t jj = c * kChunk + lane - 1;
        return jj >= 0 && jj + 1 < Y;
    };
    auto boundary_local = [&](int64_t c) -> TA {
        const int64_t jj = c * kChunk + lane - 1;
        if (in_smem) return frame_real(c) ? in_smem[jj % kRing] : neg_inf<TA>();
        return (virtual_start && jj == -1) ? (TA)0 : neg_inf<TA>();
    };

    if (active) {
#pragma unroll 1
        for (int s = 0; s < kStages - 1; ++s) {
            if (s < nch)
                load_tile<TV, K, MODE>(tiles + s * G::BYTES, a, item, base, (int64_t)s * kChunk, X, Y, lane,
                                       chunk_inside_band(base, G::ROWS, (int64_t)s * kChunk, X, Y));
            async_commit();
        }
    }

    LaneEdges<TA, K> wt = {};
    if constexpr (CHAIN) wt = lane_edges<TA, K>(a.chain, base + K * lane);
    TA q[K];
#pragma unroll
    for (int k = 0; k < K; ++k) q[k] = neg_inf<TA>();
    TA guard[K]; /* NaN-keeping running max of the cells: NaN or +inf flags */
#pragma unroll
    for (int k = 0; k < K; ++k) guard[k] = neg_inf<TA>();
    const int64_t first_group = base / 32;
    const int64_t live_groups = (X + 31) / 32;
    uint32_t *item_bits = a.bits + (size_t)b * a.groups * a.S;
    if (active && ring.in) ring.fetch(0, lane, frame_real(0));

    /* Step st: warp w sweeps chunk st-w, so warp w-1 wrote the ring values
     * warp w reads one barrier earlier. */
#pragma unroll 1
    for (int64_t st = 0; st < nch + W - 1; ++st) {
        const int64_t c = st - w;
        if (active && c >= 0 && c < nch) {
            const int64_t j0 = c * kChunk;
            const int nf = (int)(Y - j0 < kChunk ? Y - j0 : kChunk);
            /* A chunk wholly below the band (every token after every frame)
             * holds -inf scores and no decision: nothing to load or sweep. */
            const bool below_band = base > j0 + nf - 1;
            const int64_t jl = j0 + (kStages - 1) * kChunk;
            if (c + kStages - 1 < nch && base <= jl + kChunk - 1)
                load_tile<TV, K, MODE>(tiles + ((c + kStages - 1) % kStages) * G::BYTES, a, item, base,
                                       jl, X, Y, lane, chunk_inside_band(base, G::ROWS, jl, X, Y));
            async_commit();
            TA boundary = neg_inf<TA>();
            if (ring.in) {
                if (!below_band) boundary = ring.settle(c, lane, frame_real(c));
                /* Frames before j0+nf-1 are read: tell the producer now and
                 * then. */
                if (c % kProgressChunks == kProgressChunks - 1 || c + 1 == nch)
                    ring.release(lane, j0 + nf - 1);
                if (c + 1 < nch) ring.fetch(c + 1, lane, frame_real(c + 1));
            } else {
                boundary = boundary_local(c);
            }
            async_wait<kStages - 1>();
            __syncwarp();
            const unsigned char *tile = tiles + (c % kStages) * G::BYTES;

            uint32_t ballots[K];
#pragma unroll
            for (int k = 0; k < K; ++k) ballots[k] = 0;
            TA top = neg_inf<TA>();
            if (!below_band)
                sweep_chunk_at<TV, K, MODE, CHAIN>(tile, lane, nf, base, j0, width, boundary, q,
                                                   guard, ballots, top, wt);
            store_decisions<K>(item_bits, a.S, first_group, live_groups, j0, lane, nf, ballots);
            if (out_smem && lane < nf) out_smem[(j0 + lane) % kRing] = top;
            if (ring.out) ring.put(j0, nf, lane, top);
        }
        __syncthreads();
    }
    if (!active) return;
    finish_sweep<TA, K>(base, lane, X, q, guard_bad<TA, K>(base, lane, X, guard),
                        a.final_score + b, a.group_flag + (size_t)b * a.groups, first_group,
                        live_groups);
}

/* ---- host: plan and launch ---- */

/* The forward's arguments for value [B, T, S] (lengths device arrays) over
 * the HardLayout regions of the aligned workspace ws; the launch fills in
 * the plan (slabs, warps, launches). */
static inline ForwardArgs forward_args(const HardLayout &L, unsigned char *ws,
                                       const mas_tensor3 *value, const int64_t *x_len,
                                       const int64_t *y_len) {
    ForwardArgs fa = {};
    fa.value = (const unsigned char *)value->data;
    fa.s0 = view_stride(value, 0);
    fa.s1 = view_stride(value, 1);
    fa.s2 = view_stride(value, 2);
    fa.T = value->dim[1];
    fa.S = value->dim[2];
    fa.x_len = x_len;
    fa.y_len = y_len;
    fa.bits = (uint32_t *)(ws + L.bits);
    fa.groups = L.groups;
    fa.ring = ws + L.ring;
    fa.ring_clear_bytes = L.group_flag - L.ring;
    fa.max_slabs = L.max_slabs;
    fa.flags = (int *)(ws + L.flags);
    fa.ticket = (unsigned *)(ws + L.flags) + (size_t)value->dim[0] * L.max_slabs * kFlagStride;
    fa.group_flag = (int *)(ws + L.group_flag);
    fa.final_score = (double *)(ws + L.final_score);
    fa.slabs = 1;
    fa.warps = 1;
    const int64_t a1 = fa.s1 < 0 ? -fa.s1 : fa.s1, a2 = fa.s2 < 0 ? -fa.s2 : fa.s2;
    fa.frames_inner = a2 <= a1;
    return fa;
}

/* Everything the forward launch needs besides the kernel's template. */
struct ForwardPlan {
    int warps, slabs;
    size_t smem;
};

template <typename TV, int K, int MODE, bool CHAIN>
mas_status launch_forward(ForwardArgs args, int64_t B, const DeviceInfo &dev, cudaStream_t stream) {
    using G = TileGeom<TV, K, MODE>;
    using TA = typename AccOf<TV>::type;
    auto kernel = hard_forward<TV, K, MODE, CHAIN>;
    const int64_t rows = G::ROWS;
    const int64_t T = args.T;
    /* shared memory: the warp's tile stages and its outgoing ring */
    const size_t per_warp = (size_t)kStages * G::BYTES + (size_t)kSmemRingChunks * kChunk * sizeof(TA);
    const int64_t warps_per_item = (T + rows - 1) / rows;
    int64_t max_w = ((int64_t)dev.smem_optin - 1024) / (int64_t)per_warp;
    if (max_w > 16) max_w = 16;
    if (max_w < 1) return MAS_ERR_CUDA;
    /* At least kMinSlabTokens per block where the shared memory allows;
     * otherwise the fewest warps per block that spread the items' warps
     * over every multiprocessor, grown until all blocks of the launch can be
     * resident at once (the blocks of an item wait on each other). */
    int64_t min_w = (kMinSlabTokens + rows - 1) / rows;
    if (min_w > warps_per_item) min_w = warps_per_item;
    int64_t w = (B * warps_per_item + dev.sms - 1) / dev.sms;
    if (w < min_w) w = min_w;
    if (w > warps_per_item) w = warps_per_item;
    if (w > max_w) w = max_w;
    ForwardPlan plan;
    int per_sm = 0;
    static KernelCache cache; /* this kernel's limit and occupancy per warps */
    for (;; ++w) {
        plan.warps = (int)w;
        plan.slabs = (int)((warps_per_item + w - 1) / w);
        plan.smem = (size_t)w * per_warp;
        mas_status st = cached_occupancy(cache, kernel, dev, (int)w, 32 * plan.warps, plan.smem,
                                         &per_sm);
        if (st != MAS_OK) return st;
        if (plan.slabs == 1 || B * plan.slabs <= (int64_t)per_sm * dev.sms || w >= max_w ||
            w >= warps_per_item)
            break;
    }
    /* The workspace holds rings for blocks of one warp (kMinBlockTokens). */
    if (plan.slabs > args.max_slabs) return MAS_ERR_CUDA;
    const int64_t resident = (int64_t)per_sm * dev.sms;
    if (plan.slabs > resident) return MAS_ERR_BAD_ARGUMENT;
    const int64_t per_launch = plan.slabs == 1 ? B : resident / plan.slabs;
    args.slabs = plan.slabs;
    args.warps = plan.warps;
    /* Items over several blocks: the global rings start with no valid tag
     * (dp_link.cuh), the progress flags and the ticket
     * counter at zero (ring, then flags: one region). */
    if (plan.slabs > 1 &&
        cudaMemsetAsync(args.ring, 0, args.ring_clear_bytes, stream) != cudaSuccess)
        return MAS_ERR_CUDA;
    for (int64_t first = 0; first < B; first += per_launch) {
        int64_t n = B - first < per_launch ? B - first : per_launch;
        args.item0 = first;
        args.ticket0 = (unsigned)(first * plan.slabs);
        kernel<<<(unsigned)(n * plan.slabs), 32 * plan.warps, plan.smem, stream>>>(args);
    }
    return MAS_OK;
}

template <typename TV, int K, bool CHAIN>
mas_status launch_forward_mode(int mode, ForwardArgs args, int64_t B, const DeviceInfo &dev,
                               cudaStream_t stream) {
    switch (mode) {
    case LOAD_BTS: return launch_forward<TV, K, LOAD_BTS, CHAIN>(args, B, dev, stream);
    case LOAD_BST: return launch_forward<TV, K, LOAD_BST, CHAIN>(args, B, dev, stream);
    default: return launch_forward<TV, K, LOAD_ANY, CHAIN>(args, B, dev, stream);
    }
}

/* The forward for the value dtype and load mode (CHAIN: with ChainEdges). */
template <bool CHAIN>
mas_status launch_forward_dtype(mas_dtype dtype, int mode, const ForwardArgs &args, int64_t B,
                                const DeviceInfo &dev, cudaStream_t stream) {
    switch (dtype) {
    case MAS_FLOAT32: return launch_forward_mode<float, 2, CHAIN>(mode, args, B, dev, stream);
    case MAS_FLOAT64: return launch_forward_mode<double, 2, CHAIN>(mode, args, B, dev, stream);
    case MAS_FLOAT16: return launch_forward_mode<__half, 2, CHAIN>(mode, args, B, dev, stream);
    default: return launch_forward_mode<__nv_bfloat16, 2, CHAIN>(mode, args, B, dev, stream);
    }
}

} // namespace mas_cuda

#endif
