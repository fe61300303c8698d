/* The forward sweep of hard MAS on CUDA: the max-plus recurrence over every
 * cell inside the lengths, one decision bit per cell, no score written to
 * global memory.
 *
 * Work split. A warp owns 32*K consecutive tokens of one item (K adjacent
 * tokens per lane) and walks the frames in chunks of kChunk. Per frame the
 * only cross-lane dependency is the score of the token just below a lane's
 * first token, one shuffle away; the token below the warp's first comes from
 * the warp below through a ring (shared memory inside a block, global memory
 * between the blocks of one item). So the warps of an item form a pipeline
 * over tokens, each one or two chunks behind the one below.
 *
 * Loads of the value tile of chunk c+kStages-1 are in flight (cp.async) while
 * chunk c is computed: the loads never depend on the recurrence.
 *
 * Blocks take their (item, slab) from a ticket counter, so a block only ever
 * waits for blocks that have already started; the host launches no more
 * blocks at once than can be resident, so the backpressure of the rings can
 * never wait on a block that has not started either. */
#ifndef MAS_CUDA_HARD_FORWARD_CUH
#define MAS_CUDA_HARD_FORWARD_CUH

#include "cuda/hard_common.cuh"

namespace mas_cuda {

/* How a warp's value tile reaches shared memory. */
enum { LOAD_BTS = 0, /* frames contiguous, 16-byte aligned rows: cp.async */
       LOAD_BST = 1, /* tokens contiguous, 16-byte aligned rows: cp.async */
       LOAD_ANY = 2  /* any strides: element by element */ };

struct ForwardArgs {
    const unsigned char *value;
    int64_t s0, s1, s2; /* element strides of value */
    int64_t T, S;
    const int64_t *x_len, *y_len;
    uint32_t *bits;
    int64_t groups;
    unsigned char *ring;
    int64_t max_slabs;
    int *flags;
    unsigned *ticket;
    int *item_flag;
    double *final_score;
    int slabs;          /* blocks per item */
    int warps;          /* warps per block */
    int64_t item0;      /* first item of this launch */
    unsigned ticket0;   /* tickets taken by earlier launches of the call */
    int frames_inner;   /* LOAD_ANY: consecutive lanes walk frames */
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
__device__ __forceinline__ int swizzle(int row, int k_per_lane) {
    int l = row / k_per_lane;
    return G::PIECES >= 8 ? (l & 7) : ((l >> 1) & (G::PIECES - 1));
}

template <typename TV, int K, int MODE>
__device__ __forceinline__ int token_row_offset(int r, int f) {
    using G = TileGeom<TV, K, MODE>;
    return r * G::ROW_BYTES + (((f / G::EPC) ^ swizzle<G>(r, K)) << 4) + (f % G::EPC) * G::ES;
}

template <typename TV, int K, int MODE>
__device__ __forceinline__ void load_tile(unsigned char *tile, const ForwardArgs &a,
                                          const TV *item, int64_t base, int64_t j0,
                                          int64_t X, int64_t Y, int lane) {
    using G = TileGeom<TV, K, MODE>;
    if constexpr (MODE == LOAD_BTS) {
        for (int idx = lane; idx < G::ROWS * G::PIECES; idx += 32) {
            int r = idx / G::PIECES, c = idx % G::PIECES;
            int64_t tok = base + r, f0 = j0 + (int64_t)c * G::EPC;
            if (tok >= X || f0 >= Y) continue;
            const TV *src = item + tok * a.s1 + f0;
            unsigned char *dst = tile + r * G::ROW_BYTES + ((c ^ swizzle<G>(r, K)) << 4);
            if (f0 + G::EPC <= Y) {
                copy16_async(dst, src);
            } else {
                for (int e = 0; e < G::EPC && f0 + e < Y; ++e) ((TV *)dst)[e] = src[e];
            }
        }
    } else if constexpr (MODE == LOAD_BST) {
        for (int idx = lane; idx < kChunk * G::PIECES; idx += 32) {
            int f = idx / G::PIECES, c = idx % G::PIECES;
            int64_t fr = j0 + f, t0 = base + (int64_t)c * G::EPC;
            if (fr >= Y || t0 >= X) continue;
            const TV *src = item + fr * a.s2 + t0;
            unsigned char *dst = tile + f * G::ROW_BYTES + (c << 4);
            if (t0 + G::EPC <= X) {
                copy16_async(dst, src);
            } else {
                for (int e = 0; e < G::EPC && t0 + e < X; ++e) ((TV *)dst)[e] = src[e];
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
            if (tok < X && fr < Y)
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

template <typename TV, int K, int MODE>
__global__ void __launch_bounds__(512) hard_forward(ForwardArgs a) {
    using TA = typename AccOf<TV>::type;
    using G = TileGeom<TV, K, MODE>;
    constexpr int kRing = kSmemRingChunks * kChunk;
    extern __shared__ __align__(16) unsigned char smem[];
    __shared__ unsigned s_ticket;

    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, W = a.warps;
    unsigned char *tiles = smem + (size_t)w * kStages * G::BYTES;
    TA *rings = (TA *)(smem + (size_t)W * kStages * G::BYTES);
    volatile int *s_prod = (volatile int *)(rings + W * kRing);
    volatile int *s_cons = s_prod + W;
    if (threadIdx.x == 0) s_ticket = atomicAdd(a.ticket, 1u) - a.ticket0;
    if (threadIdx.x < W) {
        s_prod[threadIdx.x] = 0;
        s_cons[threadIdx.x] = 0;
    }
    __syncthreads();
    const unsigned ticket = s_ticket;
    const int64_t b = a.item0 + ticket / (unsigned)a.slabs;
    const int slab = (int)(ticket % (unsigned)a.slabs);
    const int64_t X = a.x_len[b], Y = a.y_len[b];
    if (length_status(X, Y, a.T, a.S) != MAS_OK) return;
    const int64_t base = ((int64_t)slab * W + w) * G::ROWS;
    if (base >= X) return;
    const TV *item = (const TV *)a.value + b * a.s0;

    /* Where the score of token base-1 comes from, and where token
     * base+ROWS-1's goes. */
    volatile TA *in_data = nullptr, *out_data = nullptr;
    volatile int *in_prod = nullptr, *in_cons = nullptr, *out_prod = nullptr, *out_cons = nullptr;
    int in_frames = kRing, out_frames = kRing;
    bool in_global = false, out_global = false;
    if (w > 0) {
        in_data = rings + (w - 1) * kRing;
        in_prod = s_prod + (w - 1);
        in_cons = s_cons + (w - 1);
    } else if (slab > 0) {
        size_t line = (size_t)b * a.max_slabs + (slab - 1);
        in_data = (TA *)a.ring + line * kGlobalRingFrames;
        in_prod = a.flags + line * 2 * kFlagStride;
        in_cons = in_prod + kFlagStride;
        in_frames = kGlobalRingFrames;
        in_global = true;
    }
    if (base + G::ROWS < X) {
        if (w + 1 < W) {
            out_data = rings + w * kRing;
            out_prod = s_prod + w;
            out_cons = s_cons + w;
        } else {
            size_t line = (size_t)b * a.max_slabs + slab;
            out_data = (TA *)a.ring + line * kGlobalRingFrames;
            out_prod = a.flags + line * 2 * kFlagStride;
            out_cons = out_prod + kFlagStride;
            out_frames = kGlobalRingFrames;
            out_global = true;
        }
    }
    const bool virtual_start = base == 0; /* lane 0 holds token 0 */
    const int out_ring_chunks = out_frames / kChunk;

    const int64_t nch = (Y + kChunk - 1) / kChunk;
    int seen_prod = 0, seen_cons = 0;

    /* Boundary value for frame j0+lane: score of token base-1 at frame
     * j0+lane-1 (the virtual start 0 before token 0's first frame). */
    auto fetch_boundary = [&](int64_t c) -> TA {
        const int64_t j0 = c * kChunk;
        const int64_t jj = j0 + lane - 1;
        if (!in_data) return (virtual_start && jj == -1) ? (TA)0 : neg_inf<TA>();
        if (seen_prod < (int)c + 1) {
            int seen = 0;
            if (lane == 0) {
                do {
                    seen = *in_prod;
                } while (seen < (int)c + 1);
            }
            seen_prod = __shfl_sync(kFullMask, seen, 0);
            if (in_global) __threadfence();
            else __threadfence_block();
        }
        return (jj >= 0 && j0 + lane < Y) ? in_data[jj % in_frames] : neg_inf<TA>();
    };

#pragma unroll 1
    for (int s = 0; s < kStages - 1; ++s) {
        if (s < nch)
            load_tile<TV, K, MODE>(tiles + s * G::BYTES, a, item, base, (int64_t)s * kChunk, X, Y, lane);
        async_commit();
    }

    TA q[K];
#pragma unroll
    for (int k = 0; k < K; ++k) q[k] = neg_inf<TA>();
    bool bad[K];
#pragma unroll
    for (int k = 0; k < K; ++k) bad[k] = false;
    const int64_t first_group = base / 32;
    const int64_t live_groups = (X + 31) / 32;
    uint32_t *item_bits = a.bits + (size_t)b * a.groups * a.S;

    TA next_boundary = neg_inf<TA>();
    if (in_global) next_boundary = fetch_boundary(0);

#pragma unroll 1
    for (int64_t c = 0; c < nch; ++c) {
        const int64_t j0 = c * kChunk;
        const int nf = (int)(Y - j0 < kChunk ? Y - j0 : kChunk);
        if (c + kStages - 1 < nch)
            load_tile<TV, K, MODE>(tiles + ((c + kStages - 1) % kStages) * G::BYTES, a, item, base,
                                   j0 + (kStages - 1) * kChunk, X, Y, lane);
        async_commit();

        /* Global boundaries are fetched one chunk ahead: their latency is an
         * L2 round trip. Shared ones are read just before use. */
        TA boundary;
        if (in_global) {
            boundary = next_boundary;
            if (c + 1 < nch) next_boundary = fetch_boundary(c + 1);
        } else {
            boundary = fetch_boundary(c);
        }

        async_wait<kStages - 1>();
        __syncwarp();
        const unsigned char *tile = tiles + (c % kStages) * G::BYTES;

        uint32_t ballots[K];
#pragma unroll
        for (int k = 0; k < K; ++k) ballots[k] = 0;
        TA top = neg_inf<TA>();
        int4 raw[K];
#pragma unroll
        for (int f = 0; f < kChunk; ++f) {
            if (f >= nf) break;
            TA v[K];
            if constexpr (G::TOKEN_ROWS) {
                if (f % G::EPC == 0) {
#pragma unroll
                    for (int k = 0; k < K; ++k) {
                        int r = K * lane + k;
                        raw[k] = *(const int4 *)(tile + r * G::ROW_BYTES +
                                                 (((f / G::EPC) ^ swizzle<G>(r, K)) << 4));
                    }
                }
#pragma unroll
                for (int k = 0; k < K; ++k) v[k] = widen(((const TV *)&raw[k])[f % G::EPC]);
            } else {
                load_frame_row<TV, K>(tile + f * G::ROW_BYTES, lane, v);
            }
            TA below = __shfl_up_sync(kFullMask, q[K - 1], 1);
            TA edge = __shfl_sync(kFullMask, boundary, f);
            if (lane == 0) below = edge;
#pragma unroll
            for (int k = K - 1; k >= 0; --k) {
                TA move = k == 0 ? below : q[k - 1];
                TA stay = q[k];
                bool advance = stay < move; /* the CPU's max(move, stay) */
                q[k] = (advance ? move : stay) + v[k];
                uint32_t word = __ballot_sync(kFullMask, advance);
                if (lane == f) ballots[k] = word;
                bad[k] |= !(v[k] < pos_inf<TA>());
            }
            if (out_data) {
                TA t = __shfl_sync(kFullMask, q[K - 1], 31);
                if (lane == f) top = t;
            }
        }

        if (lane < nf) {
#pragma unroll
            for (int m = 0; m < K; ++m) {
                int64_t g = first_group + m;
                if (g < live_groups) item_bits[g * a.S + j0 + lane] = token_order_word<K>(ballots, m);
            }
        }
        if (in_data) {
            /* Chunks before c are no longer read (c's last frame is read by
             * the boundary of chunk c+1). */
            __syncwarp();
            if (lane == 0) *in_cons = (int)c;
        }
        if (out_data) {
            const int need = (int)c + 1 - out_ring_chunks;
            if (seen_cons < need) {
                int seen = 0;
                if (lane == 0) {
                    do {
                        seen = *out_cons;
                    } while (seen < need);
                }
                seen_cons = __shfl_sync(kFullMask, seen, 0);
                if (out_global) __threadfence();
                else __threadfence_block();
            }
            if (lane < nf) out_data[(j0 + lane) % out_frames] = top;
            if (out_global) __threadfence();
            else __threadfence_block();
            __syncwarp();
            if (lane == 0) *out_prod = (int)c + 1;
        }
        __syncwarp();
    }

    bool any_bad = false;
#pragma unroll
    for (int k = 0; k < K; ++k) {
        int64_t tok = base + K * lane + k;
        if (tok < X) any_bad |= bad[k];
        if (tok == X - 1) a.final_score[b] = (double)q[k];
    }
    if (__any_sync(kFullMask, any_bad) && lane == 0) atomicOr(&a.item_flag[b], 1);
}

} // namespace mas_cuda

#endif
