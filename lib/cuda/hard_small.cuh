/* Hard MAS in one launch for items that fit one block (issue: small-shape
 * kernels at their latency floor): the forward sweep, the backtrack and
 * every output of an item in one block, the decision bits in shared memory.
 *
 * Why a second forward. At training shapes (T <= a few hundred tokens) the
 * time of hard_forward is its per-frame chain: a lane cannot start frame f
 * before the shuffle that brings the score of the token below it at frame
 * f-1, so every frame costs a shuffle round trip plus the cell arithmetic.
 * Here the lanes are skewed: at step t lane l works on frame t - l (its K=2
 * tokens), so the score it needs from lane l-1 (frame f-1) was made two
 * steps earlier and the shuffle that carries it overlaps a whole step. The
 * chain per step is one compare-select-add; the warp is bound by issue.
 * Warps are skewed the same way through a shared-memory row of the top
 * token's scores (lane 31 of warp w-1 feeds lane 0 of warp w), handed on a
 * chunk of 32 steps at a time in rounds separated by __syncthreads (the
 * synchronisation compute-sanitizer's racecheck can follow; a warp that
 * waits at it costs what spinning on a flag would). The tiles of values
 * come by cp.async from copy warps (one a sweep warp, or one for three):
 * the sweep warps, bound by issue, spend none of their slots on copies.
 *
 * Decision bits come out per token: a lane sets bit j of a word at step j
 * of a chunk and, at the chunk's end, stores the word of frames it has
 * completed (a funnel shift of two chunks' words by its lane), so the steps
 * store nothing; word m of token r holds frames 32m..32m+31, frame 32m+k
 * at bit k. The backtrack walks tokens, not frames: from token r ending at
 * frame f, the run starts at the last frame s in [r, f] whose bit says
 * "moved" (the bit of frame r is always set on a finite path: a token equal
 * to its frame must move), found a word at a time; T steps instead of S.
 *
 * The same rules and the same arithmetic as hard_forward (the compare of
 * MaxPlus::plus is the bit; NaN/+inf checked on band cells only; cells below
 * the band are -inf; nothing outside the lengths is read), so the outputs
 * are bit for bit those of the multi-kernel path and of the CPU.
 *
 * CHAIN: the same kernel runs a plain chain topology (mas.h section 7,
 * hard_chain.h): the edges' log-scores are added before the compare, the
 * lengths are token counts, and the topology's outputs (frame labels,
 * token spans, token scores) come from the same runs. */
#ifndef MAS_CUDA_HARD_SMALL_CUH
#define MAS_CUDA_HARD_SMALL_CUH

#include "cuda/device_cache.cuh"
#include "cuda/dp_semiring.cuh"
#include "cuda/hard_common.cuh"
#include "cuda/hard_mask.cuh"
#include "cuda/hard_path.cuh"

namespace mas_cuda {

constexpr int kSmallRows = 64;   /* tokens per warp: 2 per lane */
constexpr int kSmallRing = 128;  /* frames of the tile ring: 4 chunks of 32 */
/* Tile columns: the ring plus a copy of its first chunk after it, so that a
 * lane's 32 frames of a chunk are 32 consecutive columns (no wrap-around
 * arithmetic per step). */
constexpr int kSmallCols = kSmallRing + 32;
/* Sweep warps at most: with as many copy warps, 512 threads. (More would
 * not fit 227 KB of shared memory in float32; a 16-bit shape with more than
 * 512 tokens and so few frames that it would is left to the multi-kernel
 * path.) */
constexpr int kSmallMaxWarps = 8;
/* Tokens a group of the backtrack's walk runs without a branch. */
constexpr int kSmallWalk = 8;
/* Copy warps: warps W .. W + C - 1 issue the sweep warps' tile copies, copy
 * warp k those of sweep warps k, k + C, ... With 3 sweep warps one copy
 * warp, alone on the fourth scheduler (warp w issues on scheduler w % 4). */
__host__ __device__ inline int small_copiers(int W) { return W == 3 ? 1 : W; }
/* Threads a block: the sweep warps, the copy warps, at least 4 warps (the
 * outputs are written by all). */
__host__ __device__ inline int small_threads(int W) {
    const int n = W + small_copiers(W);
    return 32 * (n < 4 ? 4 : n);
}
/* Rounds between warp w-1's chunk c and warp w's (see the sweep). */
constexpr int kSmallLag = 2;
/* Boundary rows: 64 entries of padding on each side, so that the stores of
 * frames -31..-1 and the reads past y_len (up to frame y_len + 61, in the
 * fast tail chunks) stay inside the row. */
constexpr int kBndPad = 64;

/* A plain chain topology (hard_common.cuh ChainEdges) in place of hard
 * MAS: x_len then holds token counts (k states a token) and the item
 * checks, errors and outputs are the topology's (mas_viterbi_cuda). */
struct SmallChain {
    ChainEdges edges;
    int64_t tokens;        /* the outputs' token axis */
    const int32_t *labels; /* [B][labels_stride], state s of the chain at s; NULL: none */
    int64_t labels_stride;
    int32_t *frame_labels;
    int64_t frame_labels_stride;
    int32_t *token_spans;
    int64_t token_spans_stride;
    void *token_scores; /* accumulator type */
    int64_t token_scores_stride;
};

struct SmallArgs {
    const unsigned char *value;
    int64_t s0, s1, s2; /* element strides of value ([B, T, S] view) */
    int64_t T, S;
    const int64_t *x_len, *y_len; /* NULL when the lengths come from mask */
    MaskView mask;                /* Glow-TTS mask, value's dims (data NULL: none) */
    int warps;                    /* sweep warps: warps * 64 >= T */
    int sw;                       /* decision words per token: ceil(S / 32) */
    int32_t *durations;
    int64_t durations_stride;
    int32_t *indices;
    int64_t indices_stride;
    void *score;
    int score_f64;
    PathArgs path;                /* data NULL: no dense path here */
    /* the dense path by hard_path instead (large items): these three are
     * written for it (NULL: not wanted) */
    int32_t *frame_token, *run_begin, *run_end;
    unsigned long long *error_word;
    SmallChain chain; /* read by the CHAIN kernels only */
    /* [grid][kPhaseSlots] clock64() stamps, written by the PHASES kernels
     * only (tests/cuda/bench_small_phases.cu; the library never sets it) */
    unsigned long long *phases;
};

/* Phase stamps of the PHASES kernels, per block: kernel start, lengths
 * known, sweep done, backtrack done, outputs done; the round count; each
 * warp's cycles in its chunks' sweeps and before them in each round; the
 * start of every round (up to kPhaseMaxRounds); when warp 0 and the first
 * copy warp were done in each round. */
enum { kPhStart, kPhLengths, kPhSweep, kPhBacktrack, kPhEnd, kPhRounds, kPhSweepW = 8,
       kPhLoadW = 24, kPhRound0 = 40 };
constexpr int kPhaseMaxRounds = 216, kPhSweepDone0 = kPhRound0 + kPhaseMaxRounds,
              kPhCopyDone0 = kPhSweepDone0 + kPhaseMaxRounds, kPhaseSlots = kPhCopyDone0 + kPhaseMaxRounds;

/* The stamps of one block; every call is empty when ON is false. */
template <bool ON> struct SmallStamps {
    unsigned long long *p = nullptr;
    long long t0 = 0, load = 0, sweep = 0;
    __device__ explicit SmallStamps(const SmallArgs &a) {
        if constexpr (ON) p = a.phases + (size_t)blockIdx.x * kPhaseSlots;
    }
    /* thread 0 stamps a phase */
    __device__ __forceinline__ void at(int slot) {
        if constexpr (ON)
            if (threadIdx.x == 0) p[slot] = clock64();
    }
    /* round i begins (after its barrier) */
    __device__ __forceinline__ void round(int i) {
        if constexpr (ON) {
            if (threadIdx.x == 0 && i < kPhaseMaxRounds) p[kPhRound0 + i] = clock64();
            t0 = clock64();
        }
    }
    /* the chunk's sweep begins; then it is swept */
    __device__ __forceinline__ void loaded() {
        if constexpr (ON) {
            const long long t = clock64();
            load += t - t0;
            t0 = t;
        }
    }
    __device__ __forceinline__ void swept() {
        if constexpr (ON) sweep += clock64() - t0;
    }
    /* warp 0 done with round i's chunk; a copy warp done with round i */
    __device__ __forceinline__ void done(int slot0, int i) {
        if constexpr (ON)
            if ((threadIdx.x & 31) == 0 && i < kPhaseMaxRounds) p[slot0 + i] = clock64();
    }
    /* each warp's totals, after the rounds */
    __device__ __forceinline__ void totals(int w, int rounds) {
        if constexpr (ON) {
            if ((threadIdx.x & 31) == 0 && w < 16) {
                p[kPhSweepW + w] = (unsigned long long)sweep;
                p[kPhLoadW + w] = (unsigned long long)load;
            }
            if (threadIdx.x == 0) p[kPhRounds] = (unsigned long long)rounds;
        }
    }
};

/* Shared-memory layout, in bytes, the same on host and device. */
struct SmallSmem {
    size_t tiles, bnd, bits, rb, ft, total;
};
__host__ __device__ inline int64_t small_bnd_stride(int64_t S) { return S + 2 * kBndPad; }
__host__ __device__ inline SmallSmem small_smem(int warps, int64_t S, int sw, int es, int acc) {
    SmallSmem L;
    size_t at = 0;
    L.tiles = at;
    at += (size_t)warps * kSmallRows * kSmallCols * es;
    L.bnd = at; /* rows 0..W: row w is warp w's input (row 0: -inf, row W: unread) */
    at += ((size_t)(warps + 1) * small_bnd_stride(S) * acc + 15) / 16 * 16;
    L.bits = at;
    at += (size_t)warps * kSmallRows * sw * 4;
    L.rb = at + 4 * kSmallWalk; /* the walk's last group stores below token 0 */
    at = L.rb + (size_t)warps * kSmallRows * 4;
    L.ft = at;
    at += ((size_t)S * 4 + 15) / 16 * 16;
    L.total = at;
    return L;
}


/* 16 bytes to shared memory, of which the first `bytes` (16 or 0) are read
 * from gsrc and the rest zero-filled: 0 reads nothing. */
__device__ __forceinline__ void cp_async16_n(uint32_t smem_addr, const void *gsrc, int bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr), "l"(gsrc),
                 "r"(bytes) : "memory");
#else
    /* older targets (the 75-virtual PTX): a plain copy, which must not
     * hold sm_80 instructions or the whole module fails to load there */
    const int4 v = bytes ? *(const int4 *)gsrc : make_int4(0, 0, 0, 0);
    asm volatile("st.shared.v4.s32 [%0], {%1, %2, %3, %4};" ::"r"(smem_addr), "r"(v.x), "r"(v.y),
                 "r"(v.z), "r"(v.w) : "memory");
#endif
}

/* -inf in the value type (the tile holds the caller's dtype). */
template <typename TV> __device__ __forceinline__ TV narrow_neg_inf();
template <> __device__ __forceinline__ float narrow_neg_inf<float>() { return -INFINITY; }
template <> __device__ __forceinline__ double narrow_neg_inf<double>() { return -(double)INFINITY; }
template <> __device__ __forceinline__ __half narrow_neg_inf<__half>() { return __ushort_as_half(0xfc00); }
template <> __device__ __forceinline__ __nv_bfloat16 narrow_neg_inf<__nv_bfloat16>() {
    return __ushort_as_bfloat16(0xff80);
}

/* The per-lane plan of the tile loads, made once per sweep: every chunk
 * then costs the lane a pointer add and a 16-byte cp.async per pass (pass k
 * at src + k * pass_step, dst + k * kPass bytes), with no division and no
 * 64-bit multiply. A lane always moves the same piece p of a row (16 bytes)
 * in rows r0, r0 + RPP, ...
 * Token rows (frames contiguous): tile row r holds token base+r, kSmallCols
 * columns of frames; a pass covers RPP tokens. Frame rows (tokens
 * contiguous): tile row (f % kSmallRing) holds the 64 tokens of frame f; a
 * pass covers RPP frames. */
template <typename TV, bool FRAME_ROWS> struct SmallLoader {
    static constexpr int ES = (int)sizeof(TV), EPC = 16 / ES;
    static constexpr int P = FRAME_ROWS ? kSmallRows / EPC : 32 / EPC; /* pieces per row */
    static constexpr int RPP = 32 / P;                                  /* rows per pass */
    static constexpr int PASSES = (FRAME_ROWS ? 32 : kSmallRows) / RPP;
    /* tile bytes between a lane's pieces of consecutive passes */
    static constexpr int kPass = RPP * (FRAME_ROWS ? kSmallRows : kSmallCols) * ES;
    /* tile bytes from slot 0 to the mirror copy after the ring */
    static constexpr int kMirror = kSmallRing * (FRAME_ROWS ? kSmallRows : 1) * ES;
    const unsigned char *src; /* the lane's first piece of chunk 0 */
    int64_t pass_step;        /* bytes between its pieces of consecutive passes */
    int64_t chunk_step;       /* bytes between chunks */
    uint32_t dst;             /* shared address of its first piece in slot 0 */
    unsigned char *dst_g;     /* the same, generic (the element-wise cut pieces) */
    int t0;                   /* frame rows: the piece's first token */
    int q;                    /* token rows: first frame of the piece in a chunk;
                                 frame rows: the frame of pass 0 in a chunk */
    int passes;               /* token rows: passes whose row is a token < x_len */
    bool whole, cut;          /* frame rows: the piece's tokens all < x_len / some */

    __device__ __forceinline__ SmallLoader(unsigned char *tile, const TV *item, int64_t s1, int64_t s2,
                                           int base, int X, int lane) {
        const int p = lane % P, r0 = lane / P;
        if constexpr (!FRAME_ROWS) {
            src = (const unsigned char *)(item + (int64_t)(base + r0) * s1 + p * EPC);
            pass_step = (int64_t)RPP * s1 * ES;
            chunk_step = 32 * ES;
            dst_g = tile + ((size_t)r0 * kSmallCols + p * EPC) * ES;
            t0 = 0;
            q = p * EPC;
            const int rows = X - base < kSmallRows ? X - base : kSmallRows;
            const int n = (rows - r0 + RPP - 1) / RPP;
            passes = n < 0 ? 0 : n;
            whole = cut = false;
        } else {
            t0 = base + p * EPC;
            src = (const unsigned char *)(item + (int64_t)r0 * s2 + t0);
            pass_step = (int64_t)RPP * s2 * ES;
            chunk_step = (int64_t)32 * s2 * ES;
            dst_g = tile + ((size_t)r0 * kSmallRows + p * EPC) * ES;
            q = r0;
            passes = 0;
            whole = t0 + EPC <= X;
            cut = !whole && t0 < X;
        }
        dst = (uint32_t)__cvta_generic_to_shared(dst_g);
    }

    /* Passes [0, n) of one copy of a chunk: a 16-byte cp.async each, no
     * branch; passes k >= n (rows past the lengths) copy nothing (source
     * size 0: the tile gets zeros; their address is sp).
     * The pointer steps through the passes unconditionally and a pass past
     * n reads from sp: stepping it only while k + 1 < n chained a 64-bit add
     * and two selects a pass (a chunk's issue took ~520 cycles, ~360
     * without them: tests/cuda/bench_small_phases.cu); addresses made from
     * sp a pass at a time were hoisted out of the rounds by ptxas into 32
     * registers (spills in the float64 and chain kernels). */
    __device__ __forceinline__ void passes_async(uint32_t d, const unsigned char *sp, int n) const {
        const unsigned char *p = sp;
#pragma unroll
        for (int k = 0; k < PASSES; ++k) {
            cp_async16_n(d + k * kPass, k < n ? p : sp, k < n ? 16 : 0);
            p += pass_step;
        }
    }

    /* Copies chunk c (frames [32c, 32c+32)) of the warp's 64 tokens into
     * tile slot c % 4 (and, for slot 0, into the mirror after the ring),
     * cells inside the lengths only: whole 16-byte pieces asynchronously, a
     * piece cut by a length element by element. */
    __device__ __forceinline__ void load(int c, int X, int Y) const {
        const int f_lo = 32 * c;
        if (f_lo >= Y) return;
        const unsigned char *sp = src + (int64_t)c * chunk_step;
        const uint32_t d0 = dst + (uint32_t)((c & 3) * 32 * (FRAME_ROWS ? kSmallRows : 1) * ES);
        const bool mirror = (c & 3) == 0;
        if constexpr (!FRAME_ROWS) {
            const int f0 = f_lo + q;
            if (f0 + EPC <= Y) {
                passes_async(d0, sp, passes);
                if (mirror) passes_async(d0 + kMirror, sp, passes);
            } else if (f0 < Y) {
                unsigned char *dg = dst_g + (c & 3) * 32 * ES;
                for (int k = 0; k < passes; ++k)
                    for (int e = 0; e < EPC && f0 + e < Y; ++e) {
                        const TV x = ((const TV *)(sp + k * pass_step))[e];
                        ((TV *)(dg + k * kPass))[e] = x;
                        if (mirror) ((TV *)(dg + kMirror + k * kPass))[e] = x;
                    }
            }
        } else {
            const int fr = f_lo + q;
            const int n = fr < Y ? (Y - fr + RPP - 1) / RPP : 0; /* passes with a frame < y_len */
            if (whole) {
                passes_async(d0, sp, n);
                if (mirror) passes_async(d0 + kMirror, sp, n);
            } else if (cut) {
                unsigned char *dg = dst_g + (c & 3) * 32 * kSmallRows * ES;
                for (int k = 0; k < n && k < PASSES; ++k)
                    for (int e = 0; e < EPC && t0 + e < X; ++e) {
                        const TV x = ((const TV *)(sp + k * pass_step))[e];
                        ((TV *)(dg + k * kPass))[e] = x;
                        if (mirror) ((TV *)(dg + kMirror + k * kPass))[e] = x;
                    }
            }
        }
    }
};

/* Sets the cells of chunk c (tile columns of frames 32c..32c+31) below the
 * band (token > frame) of the warp's tokens base..base+63 to -inf, once the
 * chunk has landed (or for a slot never loaded). The fast body then needs
 * no predicate for them: by induction every score below the band is -inf
 * (both its predecessors are below the band, from the -inf start), exactly
 * what the masked step forces. Tokens >= x_len are left alone. The caller
 * orders the stores before the sweep's reads (a __syncwarp or the round's
 * barrier): lanes write cells of other lanes' tokens.
 * Token rows: a row at a time, lane k at frame 32c + k, so that a store
 * touches consecutive words (a lane a row, 160 floats apart, put every
 * lane in one bank: ~6k cycles a chunk). Frame rows: a frame at a time,
 * each lane its two tokens. Called by the warps above the first in their
 * idle rounds and by warp 0's copy warp for its chunk 1 (see the sweep). */
template <typename TV, bool FRAME_ROWS>
__device__ __forceinline__ void small_below(unsigned char *tile, int lane, int base, int c, int X) {
    const int f_lo = 32 * c;
    const TV ninf = narrow_neg_inf<TV>();
    TV *t = (TV *)tile;
    for (int copy = 0; copy < ((c & 3) == 0 ? 2 : 1); ++copy) {
        const int slot = (c & 3) * 32 + copy * kSmallRing;
        if constexpr (FRAME_ROWS) {
            const int j0 = base + 2 * lane;
            const bool top = j0 + 1 < X;
            const int n1 = j0 + 1 - f_lo < 32 ? j0 + 1 - f_lo : 32; /* frames below token j0+1 */
            if (j0 >= X) continue;
            for (int k = 0; k < n1; ++k) {
                TV *row = t + (size_t)(slot + k) * kSmallRows + 2 * lane;
                if (f_lo + k < j0) row[0] = ninf;
                if (top) row[1] = ninf;
            }
        } else {
            const int f = f_lo + lane;
            const int r_end = X - base < kSmallRows ? X - base : kSmallRows; /* tokens < x_len */
            for (int r = f_lo - base + 1 > 0 ? f_lo - base + 1 : 0; r < r_end; ++r)
                if (f < base + r) t[(size_t)r * kSmallCols + slot + lane] = ninf;
        }
    }
}

/* Warp 0's chunk 0 in the fast body: before the first round, its copy
 * warp sets every cell that chunk reads below the band to -inf: the columns
 * of frames -32..-1 (slot 3, not loaded before round 1; lane l's first l
 * steps) and, in slot 0 and its mirror, the cells of frames 0..31 below the
 * band (token > frame; slot 0's are read by chunk 1 too). A store
 * instruction writes 32 consecutive elements (a token's frames, or a
 * frame's tokens): no bank conflict in either layout. Rows of tokens >=
 * x_len are filled too: nothing reads their scores. (small_below of chunks
 * -1 and 0 sets the same cells, but its loops, on the critical path before
 * round 0, made the T=60 kernel 0.5 us slower: results/calls-gpu-h100.md,
 * session 8 review.) */
template <typename TV, bool FRAME_ROWS>
__device__ __forceinline__ void small_head_fill(unsigned char *tile, int lane) {
    const TV ninf = narrow_neg_inf<TV>();
    TV *t = (TV *)tile;
    auto at = [&](int r, int col) -> TV & { /* token r, tile column col */
        return t[FRAME_ROWS ? (size_t)col * kSmallRows + r : (size_t)r * kSmallCols + col];
    };
    if constexpr (FRAME_ROWS) {
#pragma unroll 4
        for (int k = 0; k < 32; ++k) {
            at(lane, 96 + k) = ninf;
            at(32 + lane, 96 + k) = ninf;
            at(32 + lane, k) = ninf;
            at(32 + lane, kSmallRing + k) = ninf;
            if (lane > k) {
                at(lane, k) = ninf;
                at(lane, kSmallRing + k) = ninf;
            }
        }
    } else {
#pragma unroll 4
        for (int r = 0; r < kSmallRows; ++r) {
            at(r, 96 + lane) = ninf;
            if (lane < r) {
                at(r, lane) = ninf;
                at(r, kSmallRing + lane) = ninf;
            }
        }
    }
}

/* The lane's two cells at column col of the tile (col in [0, kSmallCols)). */
template <typename TV, bool FRAME_ROWS, typename TA>
__device__ __forceinline__ void small_cells(const unsigned char *tile, int lane, int col, TA &v0, TA &v1) {
    constexpr int ES = (int)sizeof(TV);
    if constexpr (FRAME_ROWS) {
        const unsigned char *p = tile + ((size_t)col * kSmallRows + 2 * lane) * ES;
        if constexpr (ES == 4) {
            const float2 x = *(const float2 *)p;
            v0 = widen(*(const TV *)&x.x);
            v1 = widen(*(const TV *)&x.y);
        } else if constexpr (ES == 8) {
            const double2 x = *(const double2 *)p;
            v0 = widen(x.x);
            v1 = widen(x.y);
        } else {
            const uint32_t x = *(const uint32_t *)p;
            const uint16_t lo = (uint16_t)x, hi = (uint16_t)(x >> 16);
            v0 = widen(*(const TV *)&lo);
            v1 = widen(*(const TV *)&hi);
        }
    } else {
        const TV *row = (const TV *)tile + (size_t)(2 * lane) * kSmallCols + col;
        v0 = widen(row[0]);
        v1 = widen(row[kSmallCols]);
    }
}

/* The sweep state of one lane: scores of its two tokens, the input from the
 * token below for this step, NaN/+inf guards, the decision bits of the
 * chunk being swept (step j at bit j) and of the chunk before. */
template <typename TA> struct SmallLane {
    TA q0, q1, in, g0, g1, fin;
    uint32_t w0, w1, p0, p1;
};

/* One chunk: steps t = 32c .. 32c+31, lane l at frame f = 32c + j - l.
 * kFast: the chunk's cells below the band are -inf in the tile
 * (small_below: the warps above the first in their idle rounds, warp 0's
 * copy warp for its chunk 1; small_head_fill for warp 0's chunk 0), so
 * their scores come out -inf with no predicate. Tokens >= x_len compute on
 * stale tile cells (their scores only reach tokens above them, their guards
 * are ignored), and so do frames >= y_len (above the band: nothing of
 * theirs is read); the guard skips cells above the band.
 * kFinal: the fast body for the chunk in which token x_len-1 reaches frame
 * y_len-1, which also catches that score (s.fin, in the lane that holds
 * the token) at its step.
 * kMasked: warp 0's chunk 0 when it is also that chunk (tiny items): cells
 * below the band and frames before 0 forced to -inf whatever the tile
 * holds, the lanes' states left as they were at frame y_len-1, stores only
 * for frames in [0, y_len).
 * (The masked body cost 3.5-4x a fast chunk: at T=60 the first and last
 * rounds took 5.1k and 4.2k cycles against ~1.45k for a fast one;
 * results/calls-gpu-h100.md, sessions 3 and 8.)
 * The tile cells of step j+2 are loaded at step j: a step's chain is
 * compare, select, add, and a load's latency would be most of it. */
enum { kFast, kMasked, kFinal };

template <typename TV, bool FRAME_ROWS, int MODE, bool CHAIN, typename TA>
__device__ __forceinline__ void small_chunk(const unsigned char *tile, SmallLane<TA> &s, int lane,
                                            int c, int j0, int X, int Y, int width,
                                            const TA *bnd_in, TA *bnd_out, uint32_t *bits0,
                                            uint32_t *bits1, const LaneEdges<TA, 2> &wt) {
    const int fbase = 32 * c - lane;
    const int col = fbase & (kSmallRing - 1); /* + j < kSmallCols */
    const int edge = j0 - fbase + width;      /* token j0 in the band at step j <=> j <= edge */
    TA* const out = bnd_out + fbase;           /* lane 31's frame of step j at out[j] */
    /* kFinal: the step at which the lane reaches frame Y-1, and whether
     * its token x_len-1 is the top one */
    const int jf = Y - 1 - fbase;
    const bool hi = j0 + 1 == X - 1;
    TA va[3], vb[3];
    small_cells<TV, FRAME_ROWS>(tile, lane, col, va[0], vb[0]);
    small_cells<TV, FRAME_ROWS>(tile, lane, col + 1, va[1], vb[1]);
#pragma unroll
    for (int j = 0; j < 32; ++j) {
        const int f = fbase + j, t = 32 * c + j;
        if (j + 2 < 32) small_cells<TV, FRAME_ROWS>(tile, lane, col + j + 2, va[(j + 2) % 3], vb[(j + 2) % 3]);
        const TA v0 = va[j % 3], v1 = vb[j % 3];
        /* the input of the next step: lane l-1's top score of the step
         * before this one (frame f-1 of token j0-1 at the next step's f);
         * lane 0's from the warp below (row 0: -inf for warp 0) */
        TA nx = __shfl_up_sync(kFullMask, s.q1, 1);
        TA b;
        if constexpr (MODE == kMasked) b = t < Y ? bnd_in[t] : neg_inf<TA>();
        else b = bnd_in[t];
        nx = lane == 0 ? b : nx;
        bool a1, a0;
        TA n1, n0;
        if constexpr (CHAIN) {
            const TA st1 = s.q1 + wt.s[1], mv1 = s.q0 + wt.m[1];
            const TA st0 = s.q0 + wt.s[0], mv0 = s.in + wt.m[0];
            a1 = st1 < mv1; /* MaxPlus::plus's compare */
            a0 = st0 < mv0;
            n1 = (a1 ? mv1 : st1) + v1;
            n0 = (a0 ? mv0 : st0) + v0;
        } else {
            a1 = s.q1 < s.q0; /* MaxPlus::plus's compare */
            a0 = s.q0 < s.in;
            n1 = (a1 ? s.q0 : s.q1) + v1;
            n0 = (a0 ? s.in : s.q0) + v0;
        }
        if constexpr (MODE == kMasked) {
            const int d0 = j0 - f; /* token - frame */
            const bool live = f < Y, below0 = d0 > 0, below1 = d0 + 1 > 0;
            const bool band0 = !below0 && d0 >= -width && j0 < X;
            const bool band1 = !below1 && d0 + 1 >= -width && j0 + 1 < X;
            s.g0 = band0 ? guard_max(s.g0, v0) : s.g0;
            s.g1 = band1 ? guard_max(s.g1, v1) : s.g1;
            n0 = below0 ? neg_inf<TA>() : n0;
            n1 = below1 ? neg_inf<TA>() : n1;
            s.q0 = live ? n0 : s.q0;
            s.q1 = live ? n1 : s.q1;
            s.w0 |= a0 && live ? 1u << j : 0u;
            s.w1 |= a1 && live ? 1u << j : 0u;
            if (lane == 31 && f >= 0 && live) out[j] = s.q1;
        } else {
            s.g0 = j <= edge ? guard_max(s.g0, v0) : s.g0;
            s.g1 = j <= edge + 1 ? guard_max(s.g1, v1) : s.g1;
            if constexpr (MODE == kFinal) s.fin = j == jf ? (hi ? n1 : n0) : s.fin;
            s.q0 = n0;
            s.q1 = n1;
            s.w0 |= a0 ? 1u << j : 0u;
            s.w1 |= a1 ? 1u << j : 0u;
            if (lane == 31) out[j] = s.q1;
        }
        s.in = nx;
    }
    /* Word c-1 of frames is complete: its frames came from chunks c-1 and
     * c (bit k = frame 32(c-1) + k is step k + lane of chunk c-1, or step
     * k + lane - 32 of chunk c). The warp's words before its first chunk
     * (c0 = 2 * (j0 / 64)) are never read. */
    if (c > ((j0 >> 6) << 1)) {
        bits0[c - 1] = __funnelshift_r(s.p0, s.w0, lane);
        bits1[c - 1] = __funnelshift_r(s.p1, s.w1, lane);
    }
    s.p0 = s.w0;
    s.p1 = s.w1;
    s.w0 = s.w1 = 0;
}

/* The kFinal chunk, once a kernel, in a function of its own: inlined in
 * the rounds' loop, its registers slowed every fast round (~50 cycles a
 * round at T=60) and the kernel gained less (bench_small_phases). */
template <typename TV, bool FRAME_ROWS, bool CHAIN, typename TA>
static __device__ __noinline__ SmallLane<TA>
small_final(const unsigned char *tile, SmallLane<TA> s, int lane, int c, int j0, int X, int Y,
            int width, const TA *bnd_in, TA *bnd_out, uint32_t *bits0, uint32_t *bits1,
            LaneEdges<TA, 2> wt) {
    small_chunk<TV, FRAME_ROWS, kFinal, CHAIN>(tile, s, lane, c, j0, X, Y, width, bnd_in, bnd_out,
                                               bits0, bits1, wt);
    return s;
}

__device__ __forceinline__ uint32_t small_lds(uint32_t addr) {
    uint32_t v;
    asm("ld.shared.u32 %0, [%1];" : "=r"(v) : "r"(addr));
    return v;
}

__device__ __forceinline__ void small_sts(uint32_t addr, int v) {
    asm volatile("st.shared.u32 [%0], %1;" ::"r"(addr), "r"(v) : "memory");
}

/* Three words of one row: the word of frame 32 * base and the two below. */
struct SmallWords {
    uint32_t c0, c1, c2;
    int lo; /* 32 * base */
};

/* In the steps past token 1 (small_walk_fast) row and m go below the first
 * row and word, by at most ~10 rows: the words read are then the boundary
 * rows' (bnd, before the bits and longer than that), never used as bits. */
__device__ __forceinline__ void small_words(SmallWords &q, uint32_t row, int m) {
    const uint32_t at = row + 4u * (uint32_t)m;
    q.lo = 32 * m;
    q.c0 = small_lds(at);
    q.c1 = small_lds(at - 4u);
    q.c2 = small_lds(at - 8u);
}

/* One token of the walk without a branch. Token r ends at f; hi and lo are
 * its row's words holding f and the one below. Stores rb[r] = s, moves to
 * token r-1 ending at s - 1, takes that row's two words from q (loaded two
 * tokens ago around the end frame of token r+1) and refills q for row r-2.
 * A run that starts two words below f's, or an end frame below q's window,
 * sets bail for the caller to redo the group. Steps past token 1 (r <= 0)
 * store into rb's pad and read rows below the first, inside shared memory
 * (the boundary rows come first): their values are never used. */
__device__ __forceinline__ void small_walk_fast(uint32_t &row, uint32_t row_bytes, int &r, int &f, uint32_t &hi,
                                                uint32_t &lo, SmallWords &q, uint32_t rb, bool &bail) {
    const uint32_t x = hi << (~f & 31); /* frame f at bit 31, later frames gone */
    const int top = 32 * (f >> 5) - 1;  /* the last frame of lo's word */
    /* s >= r on a path with a finite score (the bit of frame r is set and
     * f >= r): the max guards only the stored value, off the chain */
    const int s = x ? f - __clz(x) : top - __clz(lo);
    bail |= (r > 0) & (((x | lo) == 0u) | (s <= q.lo - 64)); /* no && (a branch) */
    small_sts(rb + 4u * (uint32_t)r, max(s, r));
    f = s - 1;
    row -= row_bytes; /* row r-1 */
    --r;
    const bool in0 = s > q.lo, in1 = s > q.lo - 32;
    hi = in0 ? q.c0 : in1 ? q.c1 : q.c2;
    lo = in0 ? q.c1 : in1 ? q.c2 : 0u;
    small_words(q, row - 2u * row_bytes, f >> 5);
}

/* The backtrack (one thread): the run of token r ending at frame f starts
 * at the last frame s in [r, f] whose bit says moved (frame F at bit F & 31
 * of word F / 32 of row r); rb[r] = s, and token r-1 ends at s - 1. The bit
 * of frame r is set on any path with a finite score (cell (r, r) can only be
 * reached from (r-1, r-1), its stay input is -inf), so s >= r; the max only
 * guards the outputs if that ever failed.
 * Why this shape (H100, notes-gpu.md 2026-11-27 session 7): one thread pays
 * ~20 cycles a branch and ~30 a shared load on its chain; the plain loop
 * (load the word of f, mask, count, a branch for runs that start in a lower
 * word) took ~110 cycles a token. Here groups of kSmallWalk tokens run
 * without a branch: the words of row r-2 that can hold its end frame are
 * loaded two tokens ahead, each token looks at two words (a run that starts
 * in the word below f's is common), and the rare rest (a run longer than a
 * word, two runs longer than two) redoes the group with the plain loop.
 * Not inlined and with shared addresses: inlined, other forms made ptxas
 * schedule the sweep's tile loads late (bench/sass_load_use.py); through
 * generic pointers the loads would not be LDS. */
static __device__ __noinline__ void small_walk(uint32_t bits, uint32_t row_bytes, int X, int Y, uint32_t rb) {
    int r = X - 1, f = Y - 1;
    uint32_t row = bits + (uint32_t)r * row_bytes;
    while (r > 0) {
        const uint32_t at = row + 4u * (uint32_t)(f >> 5);
        uint32_t hi = small_lds(at), lo = small_lds(at - 4u);
        SmallWords qa, qb; /* rows r-1 and r-2 */
        small_words(qa, row - row_bytes, f >> 5);
        small_words(qb, row - 2u * row_bytes, f >> 5);
        for (;;) {
            const int r0 = r, f0 = f;
            const uint32_t row0 = row;
            bool bail = false;
#pragma unroll
            for (int k = 0; k < kSmallWalk / 2; ++k) {
                small_walk_fast(row, row_bytes, r, f, hi, lo, qa, rb, bail);
                small_walk_fast(row, row_bytes, r, f, hi, lo, qb, rb, bail);
            }
            if (bail) {
                r = r0;
                f = f0;
                row = row0;
                break;
            }
            if (r <= 0) break;
        }
        /* the group that bailed, a token at a time */
        for (int k = 0; k < kSmallWalk && r > 0; ++k) {
            int mm = f >> 5;
            uint32_t u = small_lds(row + 4u * mm) & (0xffffffffu >> (~f & 31));
            while (!u && mm > (r >> 5)) u = small_lds(row + 4u * --mm);
            const int s = max(u ? 32 * mm + 31 - __clz(u) : r, r);
            small_sts(rb + 4u * r, s);
            f = s - 1;
            row -= row_bytes;
            --r;
        }
    }
    small_sts(rb, 0);
}

template <typename TV, bool FRAME_ROWS, bool CHAIN, bool PHASES = false>
__global__ void __launch_bounds__(512, 1) hard_small(SmallArgs a) {
    using TA = typename AccOf<TV>::type;
    extern __shared__ __align__(16) unsigned char smem[];
    __shared__ int s_x, s_y, s_status, s_bad;
    __shared__ double s_final;

    const int tid = threadIdx.x, lane = tid & 31, w = tid >> 5, NT = blockDim.x;
    const int W = a.warps, sw = a.sw;
    const int64_t b = blockIdx.x;
    const SmallSmem L = small_smem(W, a.S, sw, (int)sizeof(TV), (int)sizeof(TA));
    TA *bnd = (TA *)(smem + L.bnd);
    uint32_t *bits = (uint32_t *)(smem + L.bits);
    int32_t *rb = (int32_t *)(smem + L.rb);
    int32_t *ft = (int32_t *)(smem + L.ft);

    SmallStamps<PHASES> stamps(a);
    stamps.at(kPhStart);
    /* ---- lengths ---- */
    if (tid == 0) {
        s_bad = 0;
        s_x = s_y = 0;
    }
    for (int64_t i = tid; i < small_bnd_stride(a.S); i += NT) bnd[i] = neg_inf<TA>(); /* row 0 */
    if (a.mask.data) {
        __syncthreads();
        int nx, ny;
        mask_counts(a.mask, b, a.T, a.S, tid, NT, nx, ny);
        if (lane == 0) {
            atomicAdd(&s_x, nx);
            atomicAdd(&s_y, ny);
        }
        __syncthreads();
        if (tid == 0) s_status = length_status(s_x, s_y, a.T, a.S);
    } else if (tid == 0) {
        int64_t x = a.x_len[b], y = a.y_len[b];
        if constexpr (CHAIN) {
            s_status = chain_length_status(a.chain.edges.k, a.chain.tokens, x, y, a.T, a.S);
            if (s_status == MAS_OK) x *= a.chain.edges.k; /* states; checked lengths only */
        } else {
            s_status = length_status(x, y, a.T, a.S);
        }
        s_x = s_status == MAS_OK ? (int)x : 0;
        s_y = s_status == MAS_OK ? (int)y : 0;
    }
    __syncthreads();
    const int X = s_x, Y = s_y;
    const bool sweep = s_status == MAS_OK;
    stamps.at(kPhLengths);

    /* ---- forward sweep ---- */
    /* Rounds separated by __syncthreads: warp w runs chunk c in round
     * c + kSmallLag * w. Chunk c of warp w reads the top scores of warp w-1
     * up to frame 32c+31, which lane 31 of warp w-1 writes by the end of its
     * chunk c+1 (lane 31 is 31 frames behind lane 0): one round earlier.
     * Chunks before c0 = base / 32 lie wholly below the band for the warp
     * (every frame of a lane's chunk before its tokens): their scores stay
     * -inf, their decision bits are never read and the warp above reads no
     * score of theirs, so they are not loaded or swept (at T=150 they were
     * a fifth of the kernel: rounds of 9-10k cycles instead of ~2k,
     * tests/cuda/bench_small_phases.cu).
     * Cells below the band: warp w > 0 waits c0 + 2w rounds for its first
     * chunk; in the last three of them it sets, one chunk a round, the
     * cells below the band of chunk c0-1's slot (never loaded; lane l's
     * first l frames of chunk c0 lie there, and no copy goes to that slot
     * before chunk c0+3's) and of chunks c0 and c0+1 (asked before the
     * rounds, landed by then) to -inf, off the critical path, and then runs
     * the fast body from its first chunk. Warp 0 has no idle round: its
     * copy warp sets those of chunk 0 before the first round
     * (small_head_fill, while warp 0 waits; a fill on warp 0's own path
     * cost more than the masked chunk it saved) and those of chunk 1 in the
     * first round, and warp 0 runs the fast body from chunk 0. */
    const int base = w * kSmallRows;
    const int c0 = base / 32;
    const bool active = sweep && w < W && base < X;
    const int nch = (Y + 31 + 31) / 32; /* lane 31 reaches frame Y-1 */
    const int rounds = sweep ? nch + kSmallLag * ((X + kSmallRows - 1) / kSmallRows - 1) : 0;
    constexpr int TB = kSmallRows * kSmallCols * (int)sizeof(TV);
    unsigned char *tile = smem + L.tiles + (size_t)(active ? w : 0) * TB;
    const TV *item = (const TV *)a.value + b * a.s0;
    const int width = Y - X, j0 = base + 2 * lane;
    /* The chunks past frame y_len-1 run the fast body too: their scores,
     * bits and guards beyond it are never read (frames >= y_len lie above
     * the band of every token < x_len; the backtrack reads no bit above its
     * token's end frame; the warp above's cells beyond it only reach
     * cells beyond it), and so does the chunk in which the lane of token
     * x_len-1 reaches frame y_len-1 (kFinal), catching the final score at
     * that step. (Chunks past y_len in the masked body took ~2.4x a fast
     * round, rounds 3.3k against 1.35k cycles at T=60.) */
    const bool last_warp = base <= X - 1 && X - 1 < base + kSmallRows; /* holds token X-1 */
    const int c_final = last_warp ? (Y - 1 + ((X - 1 - base) >> 1)) >> 5 : -1;
    const int64_t stride = small_bnd_stride(a.S);
    const TA *bnd_in = bnd + (size_t)w * stride + kBndPad;
    TA *bnd_out = bnd + (size_t)(w + 1) * stride + kBndPad;
    uint32_t *bits0 = bits + (size_t)(active ? j0 : 0) * sw, *bits1 = bits0 + sw;
    LaneEdges<TA, 2> wt = {};
    if constexpr (CHAIN) wt = lane_edges<TA, 2>(a.chain.edges, j0);
    SmallLane<TA> s;
    s.q0 = s.q1 = s.g0 = s.g1 = s.fin = neg_inf<TA>();
    s.in = (w == 0 && lane == 0) ? (TA)0 : neg_inf<TA>(); /* the virtual start */
    s.w0 = s.w1 = s.p0 = s.p1 = 0;
    /* The copy warps (small_threads) issue each sweep warp's copies on its
     * schedule (chunk c + 2 in the round that sweeps chunk c) and wait for
     * them a round before their sweep, so that the round's barrier hands
     * them over. A sweep warp then spends no issue slots on its 16-32
     * cp.async a chunk and their addresses (~500 of each ~2.1k-cycle
     * round: tests/cuda/bench_small_phases.cu, 2026-11-27). They run a
     * loop of their own with the same barriers (warp-uniform), so that the
     * sweep's loop keeps its code and ptxas its schedule. */
    const int C = small_copiers(W);
    if (w >= W && w < W + C) {
        /* warp v's copies: its loader (tokens 64v..), from its c0 = 2v */
        auto loader_of = [&](int v) {
            return SmallLoader<TV, FRAME_ROWS>(smem + L.tiles + (size_t)v * TB, item, a.s1, a.s2,
                                               v * kSmallRows, X, lane);
        };
        auto sweeps = [&](int v) { return sweep && v * kSmallRows < X; };
        for (int v = w - W; v < W; v += C)
            if (sweeps(v)) loader_of(v).load(2 * v, X, Y);
        async_commit();
        for (int v = w - W; v < W; v += C)
            if (sweeps(v)) loader_of(v).load(2 * v + 1, X, Y);
        async_commit();
        async_wait<1>(); /* chunk c0 of each, swept in its first round */
        if (w == W && sweeps(0)) {
            __syncwarp(); /* every lane's pieces of chunk 0 have landed */
            small_head_fill<TV, FRAME_ROWS>(smem + L.tiles, lane);
        }
        /* Warp 0's cells below the band (see the sweep): chunk 0's above,
         * chunk 1's in the first round (landed by then), while warp 0
         * sweeps chunk 0, which reads none of slot 1. */
        const bool head = w == W && sweeps(0);
#pragma unroll 1
        for (int i = 0; i < rounds; ++i) {
            __syncthreads();
            for (int v = w - W; v < W; v += C) {
                const int cv = i - kSmallLag * v; /* the chunk warp v sweeps */
                if (sweeps(v) && cv >= 2 * v && cv < nch) loader_of(v).load(cv + 2, X, Y);
            }
            async_commit();
            async_wait<1>(); /* what the sweep warps sweep next round */
            if (head && i == 0) {
                __syncwarp(); /* every lane's pieces have landed */
                small_below<TV, FRAME_ROWS>(smem + L.tiles, lane, 0, 1, X);
            }
            if (w == W) stamps.done(kPhCopyDone0, i);
        }
        async_wait<0>();
    } else {
        /* Round 0, peeled: warp 0's chunk 0 in the fast body, unless it is
         * the final chunk (then the loop runs it masked). A body of its own
         * outside the loop: with c = 0 reaching the loop's fast call, ptxas
         * ran out of registers (spills, the tile loads sunk next to their
         * use). The condition is block-uniform (a barrier inside). */
        const bool peel = sweep && !(X <= kSmallRows && (Y - 1 + ((X - 1) >> 1)) >> 5 == 0);
        int i = 0;
        if (peel) {
            __syncthreads();
            stamps.round(0);
            if (w == 0 && active) {
                stamps.loaded();
                small_chunk<TV, FRAME_ROWS, kFast, CHAIN>(tile, s, lane, 0, j0, X, Y, width, bnd_in,
                                                          bnd_out, bits0, bits1, wt);
                stamps.swept();
                stamps.done(kPhSweepDone0, 0);
            }
            i = 1;
        }
#pragma unroll 1
        for (; i < rounds; ++i) {
            /* the warp below's scores of the last round are written, the
             * copies of chunk c have landed, and every lane is done with
             * the slot chunk c+2 goes to (chunk c-2's) */
            __syncthreads();
            stamps.round(i);
            const int c = i - kSmallLag * w;
            if (!active || c >= nch) continue;
            if (c < c0) {
                if (c >= c0 - 3) small_below<TV, FRAME_ROWS>(tile, lane, base, c + 2, X);
                continue;
            }
            /* lane 0's input of the first step, which the skipped chunks'
             * last step would have read (frame 32c-1 of the warp below's
             * top token, on the band's diagonal); the other lanes' inputs
             * are below the band, -inf as set */
            if (c == c0 && c > 0 && lane == 0) s.in = bnd_in[32 * c - 1];
            stamps.loaded();
            /* c = 0 only when round 0 was not peeled: warp 0's chunk 0 is
             * the final one */
            if (c != c_final && c > 0)
                small_chunk<TV, FRAME_ROWS, kFast, CHAIN>(tile, s, lane, c, j0, X, Y, width, bnd_in,
                                                          bnd_out, bits0, bits1, wt);
            else if (c > 0)
                s = small_final<TV, FRAME_ROWS, CHAIN>(tile, s, lane, c, j0, X, Y, width, bnd_in,
                                                       bnd_out, bits0, bits1, wt);
            else
                small_chunk<TV, FRAME_ROWS, kMasked, CHAIN>(tile, s, lane, c, j0, X, Y, width,
                                                            bnd_in, bnd_out, bits0, bits1, wt);
            if (c == c_final) { /* frame Y-1's scores: kept by the masked body, caught by kFinal */
                if (j0 == X - 1) s_final = (double)(c > 0 ? s.fin : s.q0);
                if (j0 + 1 == X - 1) s_final = (double)(c > 0 ? s.fin : s.q1);
            }
            stamps.swept();
            if (w == 0) stamps.done(kPhSweepDone0, i);
        }
    }
    stamps.totals(w, rounds);
    if (active) {
        /* the last chunk's word, when it holds frames < y_len (its frames
         * from chunk nch, never swept, are beyond) */
        if (nch - 1 <= (Y - 1) >> 5) {
            bits0[nch - 1] = s.p0 >> lane;
            bits1[nch - 1] = s.p1 >> lane;
        }
        const bool bad = (j0 < X && !(s.g0 < pos_inf<TA>())) || (j0 + 1 < X && !(s.g1 < pos_inf<TA>()));
        if (__any_sync(kFullMask, bad) && lane == 0) s_bad = 1;
    }
    __syncthreads();
    stamps.at(kPhSweep);

    /* ---- status and backtrack (one thread: T steps) ---- */
    if (tid == 0) {
        int st = s_status;
        if (st == MAS_OK && s_bad) st = MAS_ERR_NONFINITE_VALUE;
        if (st == MAS_OK && s_final == -(double)INFINITY) st = MAS_ERR_NO_FINITE_PATH;
        s_status = st;
        if (st == MAS_OK) {
            small_walk((uint32_t)__cvta_generic_to_shared(bits), 4u * (uint32_t)sw, X, Y,
                       (uint32_t)__cvta_generic_to_shared(rb));
        }
    }
    __syncthreads();
    stamps.at(kPhBacktrack);
    const bool ok = s_status == MAS_OK;

    /* ---- outputs ---- */
    /* Without the outputs that read frames' tokens (CHAIN's, frame_token,
     * path), the runs go to indices directly: no pass through ft. */
    const bool direct = !CHAIN && !a.frame_token && !a.path.data;
    if (direct) {
        if (a.indices) {
            int32_t *o = a.indices + b * a.indices_stride;
            if (ok) {
                for (int r = tid; r < X; r += NT) {
                    const int e = r + 1 < X ? rb[r + 1] : Y;
                    for (int f = rb[r]; f < e; ++f) o[f] = r;
                }
            }
            for (int f = (ok ? Y : 0) + tid; f < a.S; f += NT) o[f] = -1;
        }
    } else if (ok) {
        for (int r = tid; r < X; r += NT) {
            const int e = r + 1 < X ? rb[r + 1] : Y;
            for (int f = rb[r]; f < e; ++f) ft[f] = r;
        }
        for (int f = Y + tid; f < a.S; f += NT) ft[f] = -1;
    } else {
        for (int f = tid; f < a.S; f += NT) ft[f] = -1;
    }
    if (tid == 0) {
        const double score = ok ? s_final : -(double)INFINITY;
        if (a.score) {
            if (a.score_f64) ((double *)a.score)[b] = score;
            else ((float *)a.score)[b] = (float)score;
        }
        if (!ok && a.error_word)
            atomicMin(a.error_word, ((unsigned long long)b << 8) | (unsigned long long)s_status);
    }
    if (a.durations) {
        int32_t *d = a.durations + b * a.durations_stride;
        for (int r = tid; r < a.T; r += NT) d[r] = ok && r < X ? (r + 1 < X ? rb[r + 1] : Y) - rb[r] : 0;
    }
    if (!direct) __syncthreads(); /* ft complete */
    if (a.indices && !direct) {
        int32_t *o = a.indices + b * a.indices_stride;
        for (int f = tid; f < a.S; f += NT) o[f] = ft[f];
    }
    if constexpr (CHAIN) {
        /* the topology's outputs (topology.c walk_frames): labels of the
         * frames' states, each token's first and last frame and the mean of
         * its frames' emissions (summed in float64 from its last frame
         * down, as the CPU walks); failed items as beyond the lengths */
        const SmallChain &ch = a.chain;
        const int k = ch.edges.k;
        const int L = ok ? X / k : 0;
        if (ch.frame_labels) {
            int32_t *o = ch.frame_labels + b * ch.frame_labels_stride;
            const int32_t *lab = ch.labels + b * ch.labels_stride;
            for (int f = tid; f < a.S; f += NT) o[f] = ft[f] >= 0 ? lab[ft[f]] : -1;
        }
        if (ch.token_spans) {
            int32_t *o = ch.token_spans + b * ch.token_spans_stride;
            for (int64_t i = tid; i < ch.tokens; i += NT) {
                const int r = (int)(i < L ? i : 0) * k;
                o[2 * i] = i < L ? rb[r] : -1;
                o[2 * i + 1] = i < L ? (r + k < X ? rb[r + k] : Y) - 1 : -1;
            }
        }
        if (ch.token_scores) {
            TA *em = bnd; /* the sweep's rows are done with */
            for (int f = tid; f < (ok ? Y : 0); f += NT)
                em[f] = widen(item[(int64_t)ft[f] * a.s1 + (int64_t)f * a.s2]);
            __syncthreads();
            TA *o = (TA *)ch.token_scores + b * ch.token_scores_stride;
            for (int64_t i = tid; i < ch.tokens; i += NT) {
                TA v = (TA)0;
                if (i < L) {
                    const int r = (int)i * k, first = rb[r], last = (r + k < X ? rb[r + k] : Y) - 1;
                    double sum = 0;
                    for (int f = last; f >= first; --f) sum += (double)em[f];
                    v = (TA)(sum / (double)(last - first + 1));
                }
                o[i] = v;
            }
        }
    }
    if (a.frame_token) { /* for hard_path, as hard_backtrack leaves them */
        int32_t *o = a.frame_token + b * a.S, *rbo = a.run_begin + b * a.T, *reo = a.run_end + b * a.T;
        for (int f = tid; f < a.S; f += NT) o[f] = ft[f];
        for (int r = tid; r < a.T; r += NT) {
            const bool in = ok && r < X;
            rbo[r] = in ? rb[r] : 0;
            reo[r] = in ? (r + 1 < X ? rb[r + 1] : Y) : 0;
        }
    }
    if (a.path.data) {
        const PathArgs &p = a.path;
        int shift = p.group_shift; /* planned for 256 threads: at most the block's */
        while ((NT >> shift) == 0) --shift;
        const int gsize = 1 << shift;
        const int sub = tid >> shift, gl = tid & (gsize - 1), per_block = NT >> shift;
        const int64_t rows = p.rows_over_frames ? a.T : a.S;
        const int64_t len = p.rows_over_frames ? a.S : a.T;
        const int64_t inner = p.rows_over_frames ? p.s2 : p.s1;
        const int64_t outer = p.rows_over_frames ? p.s1 : p.s2;
        for (int64_t r = sub; r < rows; r += per_block) {
            int64_t lo = 0, hi = 0;
            if (p.rows_over_frames) {
                if (ok && r < X) {
                    lo = rb[r];
                    hi = r + 1 < X ? rb[r + 1] : Y;
                }
            } else {
                lo = ft[r];
                hi = lo + 1;
            }
            unsigned char *rowp = p.data + (b * p.s0 + r * outer) * p.es;
            switch (p.es) {
            case 1: path_row<1>(rowp, len, inner, p.vec != 0, lo, hi, p.one, gl, gsize); break;
            case 2: path_row<2>(rowp, len, inner, p.vec != 0, lo, hi, p.one, gl, gsize); break;
            case 4: path_row<4>(rowp, len, inner, p.vec != 0, lo, hi, p.one, gl, gsize); break;
            default: path_row<8>(rowp, len, inner, p.vec != 0, lo, hi, p.one, gl, gsize); break;
            }
        }
    }
    if constexpr (PHASES) __syncthreads(); /* every output written */
    stamps.at(kPhEnd);
}

/* ---- host: plan and launch ---- */

/* Largest dense path of one item the one-block kernel writes itself. */
constexpr size_t kSmallPathBytes = 128 * 1024;

/* Shared memory the one-block kernel needs for this shape, 0 when it cannot
 * run it (layout, size); warps: its sweep warps. */
static inline size_t small_plan(int64_t T, int64_t S, int mode, mas_dtype dtype,
                                const DeviceInfo &dev, int *warps) {
    if (mode == LOAD_ANY || T < 1 || S < 1 || S > (1 << 24)) return 0;
    const int64_t w = (T + kSmallRows - 1) / kSmallRows;
    if (w > kSmallMaxWarps) return 0;
    const int es = (int)mas_dtype_size(dtype), acc = dtype == MAS_FLOAT64 ? 8 : 4;
    const SmallSmem L = small_smem((int)w, S, (int)((S + 31) / 32), es, acc);
    /* the static shared variables and the driver's reserve */
    if (L.total + 1024 > (size_t)dev.smem_optin) return 0;
    *warps = (int)w;
    return L.total;
}

template <typename TV, bool FRAME_ROWS, bool CHAIN>
mas_status launch_small(const SmallArgs &sa, int64_t B, size_t smem, const DeviceInfo &dev,
                        cudaStream_t stream) {
    static KernelCache cache;
    auto kernel = hard_small<TV, FRAME_ROWS, CHAIN>;
    mas_status st = ensure_smem(cache, kernel, dev, smem);
    if (st != MAS_OK) return st;
    kernel<<<(unsigned)B, small_threads(sa.warps), smem, stream>>>(sa);
    return MAS_OK;
}

/* The kernel for the dtype and load mode (LOAD_BTS or LOAD_BST). */
template <bool CHAIN>
mas_status launch_small_type(mas_dtype dtype, int mode, const SmallArgs &sa, int64_t B,
                             size_t smem, const DeviceInfo &dev, cudaStream_t stream) {
    const bool fr = mode != LOAD_BTS;
    switch (dtype) {
    case MAS_FLOAT32:
        return fr ? launch_small<float, true, CHAIN>(sa, B, smem, dev, stream)
                  : launch_small<float, false, CHAIN>(sa, B, smem, dev, stream);
    case MAS_FLOAT64:
        return fr ? launch_small<double, true, CHAIN>(sa, B, smem, dev, stream)
                  : launch_small<double, false, CHAIN>(sa, B, smem, dev, stream);
    case MAS_FLOAT16:
        return fr ? launch_small<__half, true, CHAIN>(sa, B, smem, dev, stream)
                  : launch_small<__half, false, CHAIN>(sa, B, smem, dev, stream);
    default:
        return fr ? launch_small<__nv_bfloat16, true, CHAIN>(sa, B, smem, dev, stream)
                  : launch_small<__nv_bfloat16, false, CHAIN>(sa, B, smem, dev, stream);
    }
}

} // namespace mas_cuda

#endif
