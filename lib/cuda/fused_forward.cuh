/* The forward sweep of the fused Gaussian alignment on CUDA (mas.h section
 * 8): hard MAS's max-plus recurrence over cells that the block computes
 * from the frames and the tokens' coefficients, so that no cell reaches
 * global memory. The sweep is hard_forward.cuh's (sweep_chunk on the same
 * chunk tiles, the same decision words, NaN/+inf flags and final score,
 * read by the same backtrack); a cell is the chain of mas.h section 6 (K,
 * then fma over rows 1..2J in order, e = [x, x*x] with the squares rounded)
 * as loglik_items.cuh and the CPU compute it, so the result is bit for bit
 * that of mas_hard_cuda on mas_loglik_cuda's matrix.
 *
 * Work: a block owns a slab of 32 K tokens of one item (one sweep warp of
 * 32 lanes x K tokens, K = 2 or 4) and walks the frames of the slab's band
 * in tiles of kFgFrames frames (two chunks):
 *   1. the tile's frames are expanded into e: with all 2J rows in one
 *      slice by the warps that do not sweep, while the sweep runs (e is
 *      not read after the products; measured 8-11% off the kernel), else
 *      (rows in slices, when 2J rows do not fit shared memory next to the
 *      coefficients) by all threads a slice at a time. With a sweep warp
 *      of its own (SPLIT) and x of 4 or 8 bytes, the next tile's x comes
 *      by cp.async into shared memory while the products run and only its
 *      squares are left for after them: the products no longer wait on the
 *      loads' latency (B=32 T=512 S=2048 481 -> 451 us a call, B=16 T=1024
 *      S=4096 913 -> 847; H100, 2026-11-28). Float frames contiguous and
 *      aligned (Glow-TTS's z) come 16 bytes a copy and are squared four
 *      frames a step (tc_cells.cuh's stage_x16 / staged_to_e, shared with
 *      the TF32 likelihood kernel): forward 390 -> 375 us at T=512, TF32
 *      282 -> 267 (H200, 2026-11-29);
 *   2. each compute thread computes 4 frames x 2K tokens of the tile's
 *      cells from e and the slab's coefficients (in shared memory for the
 *      whole block when they fit, else reloaded a slice at a time); in the
 *      tensor-core precision (TC) each compute warp instead makes 16 tokens
 *      x 64 (or 32) frames with tc_cells.cuh's TF32 mma tiles, e and the
 *      coefficients rounded to TF32 as they are stored and their rows
 *      padded (2J up to a multiple of 8, strides + 8): the cells of
 *      gaussian_loglik's TF32 kernel, and the sweep, now the bound, is
 *      unchanged (B=32 T=512 S=2048: forward 390 -> 282 us, H200);
 *   3. the cells go to two chunk tiles in hard_forward's token-row layout
 *      (frame rows in the tensor-core 128-token form: LAYOUT, below)
 *      and warp 0 sweeps them in the exchange form (kSweepExchange, or
 *      kSweepExchangeAhead where PAIRS, below; hard_forward.cuh): the
 *      threads that store the cells check the band's for NaN/+inf (the
 *      sweep's guard, now off its instruction stream) and the sweep trades
 *      scores and decision words through shared memory with one shuffle a
 *      frame (0.109 -> 0.103 ms a call at B=32 T=150 S=800, 0.422 -> 0.381
 *      at B=32 T=512 S=2048; H200, 2026-11-29).
 * Three forms (the host picks, fused.cu):
 *   - K = 2, two blocks a multiprocessor: all 8 warps compute, then warp 0
 *     sweeps while the others fill the next e and wait at the next tile's
 *     barrier; one block computes while the other's warp sweeps.
 *   - SPLIT, K = 2, one block a multiprocessor (no more blocks than
 *     multiprocessors: short items, few slabs; nothing else would overlap
 *     the sweep): a ninth warp sweeps while the eight others compute the
 *     next tile's cells into a second pair of chunk tiles. align_gaussian's
 *     forward at B=32 T=150 S=800 went from 122 to 108 us (H100,
 *     2026-11-27).
 *   - SPLIT, K = 4 (float accumulation, many slabs): the same with
 *     128-token slabs. An item's span is its frames / 64 tile periods
 *     whatever the slab width (a slab starts when the one before has swept
 *     the frames of its first tile), so the gain is per tile: 4 x 8 cells a
 *     compute thread and one sweep warp for 128 tokens. B=32 T=512 S=2048:
 *     502 -> 478 us a call, B=16 T=1024 S=4096: 972 -> 906 (H200,
 *     2026-11-28).
 * Frames outside the slab's band (before its first token's first frame,
 * after its last token's last band frame) are not visited: the cells a
 * band cell depends on are band cells or below the band (-inf), so they
 * change nothing; their decision words are written 0, and the next slab
 * takes -inf for them as its boundary.
 *
 * Between the slabs of an item the boundary scores go through a global ring
 * of tagged entries (dp_link.cuh) as between hard_forward's blocks, with
 * the consumer's progress released every tile. Blocks take (item, slab)
 * from a ticket counter, and the host launches no more blocks at once than
 * can be resident, so a block only waits on blocks that run. */
#ifndef MAS_CUDA_FUSED_FORWARD_CUH
#define MAS_CUDA_FUSED_FORWARD_CUH

#include <type_traits>

#include "cuda/dependent_launch.cuh"
#include "cuda/hard_forward.cuh"
#include "cuda/loglik_kernel.cuh"
#include "cuda/tc_cells.cuh"

namespace mas_cuda {

/* A slab is one sweep warp's tokens: 32 K (K tokens a lane, 2 or 4). */
__host__ __device__ constexpr int fused_tokens(int k) { return 32 * k; }
constexpr int kFgFrames = 64;  /* a tile: two chunks */
constexpr int kFgThreads = 256;
/* Threads of a block: with a sweep warp of its own (SPLIT, below) one warp
 * more; in the tensor-core precision (TC) eleven warps, so that the sweep
 * warp has its scheduler to itself (below). */
__host__ __device__ constexpr int fused_threads(bool split, bool tc = false) {
    return split && tc ? 11 * 32 : kFgThreads + (split ? 32 : 0);
}
/* Warps are given to the four schedulers of a multiprocessor by warp
 * index mod 4. With a scheduler to itself (SPLIT and TC) the sweep warp is
 * warp 0, warps 4 and 8 only pass the barriers, and warps 1, 2, 3, 5, 6,
 * 7, 9, 10 are compute warps 0..7; else warps 1..8 are (warp - 1). */
__host__ __device__ inline int split_compute_warp(int w, bool solo) {
    return solo ? (w % 4 == 0 ? -1 : w - 1 - w / 4) : w - 1;
}
/* Frames in the ring between two slabs: the consumer runs about a tile
 * behind and releases its progress every tile. */
constexpr int kFgRingFrames = 256;

/* The last tiles of a later slab made ahead (AH in fused_forward; the
 * host takes that kernel for items of at most 8 slabs, fused.cu). A slab of
 * an item starts its sweep ~2.25 tile periods after the slab before
 * (128-token slabs: its band starts two tiles later), and ends past the
 * slab before's band by as many tiles, which it makes at one
 * multiprocessor's product pace: the item's last slab ends ~7 periods
 * after the first (B=32 T=512 S=2048). Made while the slab waits for its
 * first boundary and parked in global memory, its last D tiles leave it
 * only the sweep to do at the end, where nothing else of the item runs.
 * The parking place is the item's coefficient rows that the slabs have
 * copied to shared memory, so the workspace grows by nothing: pool slot g
 * is slab L = g / sps's columns [L tok, L tok + tok) of rows 64 (g % sps)
 * .. + 63 (a tile's two chunk tiles, 64 rows of tok floats; sps = (2J + 1)
 * / 64 slots a slab), for slabs whose columns lie inside the rows
 * ((L + 1) tok <= T) and that exist (L tok < x_len). A slab takes slots of
 * slabs up to itself only, after their copies landed (flag 2 of their
 * line): it waits only on blocks that started before it.
 * The plan (ahead_plan): slab j makes (lag16 j - base16) / cost16 tiles
 * ahead (in 16ths of a tile period: its wait, ~2.25 periods a slab before
 * it, less what it does before its ahead tiles, over an ahead tile's
 * cost), no more than its tiles less two; the slots go to the last slab
 * first, then down. lag16 = 0: nothing ahead. */
struct AheadPolicy {
    int lag16, base16, cost16;
};

/* Slab j's tiles made ahead (*tiles) and its first pool slot (*slot0) for
 * an item of x_len X and y_len Y: tok tokens a slab, sps slots a lending
 * slab. Host and device (one thread a block) compute the same. */
__host__ __device__ inline void ahead_plan(int64_t X, int64_t Y, int64_t T, int tok, int sps,
                                           const AheadPolicy &p, int j, int *tiles, int *slot0) {
    *tiles = 0;
    *slot0 = 0;
    if (p.lag16 <= 0 || p.cost16 <= 0 || sps <= 0) return;
    const int64_t n = (X + tok - 1) / tok, lenders = n < T / tok ? n : T / tok;
    int64_t top = lenders * sps; /* slots below top are free */
    for (int64_t i = n - 1; i >= j && i > 0; i--) {
        const int64_t base = i * tok, last = base + tok - 1 < X - 1 ? base + tok - 1 : X - 1;
        const int64_t f_last = last + (Y - X) < Y - 1 ? last + (Y - X) : Y - 1;
        const int64_t nt = (f_last - base / 32 * 32) / 64 + 1; /* the slab's tiles */
        int64_t d = ((int64_t)p.lag16 * i - p.base16) / p.cost16;
        d = d < nt - 2 ? d : nt - 2;
        const int64_t own = (i + 1 < lenders ? i + 1 : lenders) * sps; /* slots of slabs <= i */
        const int64_t hi = top < own ? top : own;
        d = d < hi ? d : hi;
        if (d < 0) d = 0;
        if (i == j) {
            *tiles = (int)d;
            *slot0 = (int)(hi - d);
        }
        top = hi - d;
    }
}

struct FusedArgs {
    const void *x;
    int64_t xs0, xs1, xs2; /* strides of x [B, S, J]: item, frame, dimension */
    const void *coef;      /* [model batch, 2J+1, T]: tokens contiguous, rows cs1 apart */
    int64_t cs0, cs1;      /* item stride of coef (0: one model for all items), row stride
                            * (16-byte rows: fused_coef_row) */
    int64_t T, S, J;
    const int64_t *x_len, *y_len;
    uint32_t *bits;
    int64_t groups;
    unsigned char *ring;
    int *flags;
    unsigned *ticket;
    int64_t max_slabs;
    int *group_flag;
    double *final_score;
    int slabs;
    int rows, slices; /* e and coefficient rows a slice, slices of 2J */
    int64_t item0;
    unsigned ticket0;
    int stage; /* SPLIT, x of 4 or 8 bytes: the next tile's x comes by cp.async
                * to fused_stage_smem more bytes of shared memory */
    int vec;   /* stage, and float frames that stage_x16_ok: the copies are 16
                * bytes, the squares four frames a step */
    int early_dependents; /* let the backtrack's blocks be placed at the start */
    AheadPolicy ahead;    /* the last tiles made ahead (lag16 0: none) */
};

/* The coefficients' row stride for T tokens: T rounded up to 4, so that
 * every row starts 16-byte aligned and a slab's rows come by 16-byte
 * cp.async */
__host__ __device__ constexpr int64_t fused_coef_row(int64_t T) { return (T + 3) / 4 * 4; }

/* Row strides of the coefficients and of e: the tensor-core form (TC)
 * pads both (tc_cells.cuh) */
__host__ __device__ constexpr int fused_ldc(int k, bool tc) { return fused_tokens(k) + (tc ? kTcPad : 0); }
__host__ __device__ constexpr int fused_lde(bool tc) { return kFgFrames + (tc ? kTcPad : 0); }

/* Shared memory for the next tile's x with a.stage: [J][64] of TX */
__host__ __device__ inline size_t fused_stage_smem(int64_t J, int xs) {
    return (size_t)J * kFgFrames * (size_t)xs;
}

/* Shared memory for slabs of 32 k tokens: K [32k], coefficient rows
 * [rows][ldc], e [rows][lde], the sweep warp's exchange
 * (sweep_exchange_bytes) and the two chunk tiles (four with a sweep warp of
 * its own: two tiles' cells). */
__host__ __device__ inline size_t fused_smem(int rows, int es, bool split = false, int k = 2,
                                             bool tc = false) {
    const size_t tok = (size_t)fused_tokens(k);
    return (size_t)es * (tok + (size_t)rows * (fused_ldc(k, tc) + fused_lde(tc))) +
           (size_t)sweep_exchange_bytes(es) + (split ? 4 : 2) * tok * kChunk * es;
}

/* A compute thread's tokens come in runs of 4, kRunStride apart (16
 * threads x 4 tokens), so that 16 threads' 16-byte loads of a row are 256
 * contiguous bytes (runs of 8 were 4-way bank conflicts): its j-th token is
 * run_token(tg, j) for token group tg. */
constexpr int kRunStride = 64;
__device__ __forceinline__ int run_token(int tg, int j) {
    return kRunStride * (j / 4) + tg * 4 + j % 4;
}

/* v[4h .. 4h + 4) from p + kRunStride h (p 16-byte aligned; N a multiple of 4) */
template <typename TA, int N> __device__ __forceinline__ void load_runs(const TA *p, TA (&v)[N]) {
#pragma unroll
    for (int h = 0; h < N / 4; h++) {
        TA w[4];
        load4(p + kRunStride * h, w);
#pragma unroll
        for (int i = 0; i < 4; i++) v[4 * h + i] = w[i];
    }
}

/* The NaN-keeping maximum of the R x C cells a thread made: all of them
 * where its cells all lie in the band (all), else those that in(r, c) says
 * are in it (the sweep's guard, made by the cells' makers in the exchange
 * form; a per-cell test everywhere made TF32 calls 5-9% slower) */
template <typename TA, int R, int C, typename In>
__device__ __forceinline__ TA band_guard(bool all, const TA (&cell)[R][C], In in) {
    TA g = neg_inf<TA>();
    if (all) {
#pragma unroll
        for (int r = 0; r < R; r++)
#pragma unroll
            for (int c = 0; c < C; c++) g = guard_max(g, cell[r][c]);
    } else {
#pragma unroll
        for (int r = 0; r < R; r++)
#pragma unroll
            for (int c = 0; c < C; c++)
                if (in(r, c)) g = guard_max(g, cell[r][c]);
    }
    return g;
}

/* Barrier 0 for all threads of the block, met by its warps at different
 * instructions (the tiles-ahead kernel's loops of their own): PTX's
 * barrier.sync without .aligned, which allows that (bar.sync, as
 * __syncthreads, is aligned: one instruction for every thread). */
__device__ __forceinline__ void role_barrier() { asm volatile("barrier.sync 0;" ::: "memory"); }

/* SPLIT: a ninth warp, warp 0, only sweeps: while it sweeps a tile, warps
 * 1..8 compute the next tile's cells into the other pair of chunk tiles
 * and then fill e for the tile after. For one block a multiprocessor (few
 * slabs: the grid does not fill the GPU), where nothing else overlaps the
 * sweep; with two blocks a multiprocessor the other block does (session 4:
 * warp specialisation lost there). Only with all 2J rows in one slice.
 *
 * SPLIT with TC: the sweep warp shares its scheduler with no compute warp
 * (split_compute_warp). Alone on a scheduler a sweep step of 64 tokens is
 * ~41 cycles a frame; next to two warps issuing FFMA, 207; next to one,
 * 111 (H200, a session-18 lab). In the default precision the products,
 * then on three schedulers, are the longer side and this lost (T=512:
 * forward 390 -> 435 us); with the products on the tensor cores it gains:
 * TF32 forward 71 -> 66 us at B=32 T=150 S=800, 275 -> 255 at T=512,
 * 515 -> 465 at B=16 T=1024 S=4096 (H200, 2026-11-29). */
template <typename TX, typename TA, int K, bool SPLIT, bool TC = false, bool AH = false>
__global__ void __launch_bounds__(fused_threads(SPLIT, TC), SPLIT ? 1 : 2)
    fused_forward(FusedArgs a) {
    static_assert(!TC || sizeof(TA) == 4, "the tensor-core form sums in float32");
    constexpr int NT = fused_threads(SPLIT, TC);
    constexpr int TOK = fused_tokens(K); /* tokens a slab */
    constexpr int LDC = fused_ldc(K, TC), LDE = fused_lde(TC);
    /* tokens a compute thread: 16 x 16 threads cover 64 frames x 32 K tokens */
    constexpr int CT = 2 * K;
    /* A chunk of the slab's cells: in frame rows (32 K tokens a row) for the
     * tensor-core 128-token form, where a sweep lane's 4 cells of a frame are
     * one 16-byte load with its offset in the instruction (token rows took a
     * swizzled address a piece: the sweep's ~23 instructions a frame became
     * ~21; TF32 B=32 T=512 S=2048 0.268 -> 0.249 ms, B=16 T=1024 S=4096
     * 0.491 -> 0.461, H200). In token rows elsewhere: with frame rows the
     * float32 calls lost 4-9% and the 64-token TF32 one 5% (a load a frame
     * whose latency the sweep then waits on, where the compute warps' loads
     * crowd the shared memory; not measured further). */
    constexpr int LAYOUT = TC && K == 4 ? LOAD_BST : LOAD_BTS;
    using G = TileGeom<TA, K, LAYOUT>;
    /* 64-token slabs with a sweep warp of their own: lanes 2i and 2i + 1 of a
     * compute warp take token group i of the warp's two frame groups (6
     * shared wavefronts a row and warp instead of 10, bench/lab/lds128_lab.cu),
     * and the sweep loads its cells a group ahead (kSweepExchangeAhead), so
     * that the denser loads do not slow it: B=32 T=150 S=800 float32 3.5%
     * faster a call, TF32 the same (H100, session 33). 128-token slabs keep a
     * half-warp a frame group and the plain exchange: with both the float32
     * calls were 2-3% slower (their tile is the products', and the sweep
     * ahead holds more registers); the 64-token form without a sweep warp of
     * its own was not timed with them. */
    constexpr bool PAIRS = SPLIT && K == 2;
    /* The last tiles made ahead (AheadPolicy, above; AH: the host's choice,
     * fused.cu): 128-token slabs with the cells on CUDA cores in float (the
     * 64-token form's slabs start a tile apart, where the wait leaves no
     * room for a tile ahead: B=32 T=150 S=800 got none and was 1% slower for
     * the code) */
    static_assert(!AH || (SPLIT && !TC && K == 4 && std::is_same<TA, float>::value),
                  "tiles ahead: 128-token slabs, float cells on CUDA cores");
    extern __shared__ __align__(16) unsigned char fg_sm[];
    __shared__ unsigned s_ticket;
    __shared__ int s_bad; /* a band cell of the slab is NaN or +inf */
    __shared__ int s_ahead, s_slot0; /* AH: tiles made ahead, first pool slot */
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    TA *k_s = (TA *)fg_sm;        /* [32 K] */
    TA *c_s = k_s + TOK;          /* [rows][LDC] */
    TA *e_s = c_s + a.rows * LDC; /* [rows][LDE] */
    TA *xchg = e_s + a.rows * LDE; /* the sweep's boundaries, tops and words */
    unsigned char *tiles = (unsigned char *)xchg + sweep_exchange_bytes((int)sizeof(TA));

    /* a dependent launch (fused.cu): nothing of the coefficient kernel's
     * (the coefficients, the rings, flags and ticket it zeroes) is seen
     * before this */
    dependent_wait();
    /* The backtrack's blocks may be placed now: where it takes the block
     * form, whose 1024 threads fit no multiprocessor that runs a sweep
     * block, so they wait on the idle ones. The warp form's one-warp blocks
     * would wait next to the sweep blocks, and its calls took 13 us more at
     * B=32 T=512 S=2048 (0.303 -> 0.317 ms, H200): they are placed when the
     * last sweep block ends. */
    if (a.early_dependents) dependent_trigger();
    if (tid == 0) {
        s_ticket = a.slabs == 1 ? blockIdx.x : atomicAdd(a.ticket, 1u) - a.ticket0;
        s_bad = 0;
    }
    __syncthreads();
    const unsigned ticket = s_ticket;
    const int64_t b = a.item0 + ticket / (unsigned)a.slabs;
    const int slab = (int)(ticket % (unsigned)a.slabs);
    const int64_t X = a.x_len[b], Y = a.y_len[b];
    if (length_status(X, Y, a.T, a.S) != MAS_OK) return; /* the backtrack reports it */
    const int64_t base = (int64_t)slab * TOK;
    if (base >= X) return;
    const int64_t width = Y - X; /* the band: token in [frame - width, frame] */
    const int64_t last_tok = min(base + TOK - 1, X - 1);
    const int64_t f_first = base, f_last = min(Y - 1, last_tok + width); /* frames visited */
    const int64_t first_group = base / 32, live_groups = (X + 31) / 32;
    uint32_t *item_bits = a.bits + (size_t)b * a.groups * a.S;
    const int J = (int)a.J, J2 = 2 * J;
    const int KR = TC ? tc_rows(J) : J2; /* rows of e and of the coefficients past K */

    const int64_t c_first = f_first / kChunk, c_last = f_last / kChunk;

    /* the slab's coefficients: zeros past x_len (nothing read there) and
     * past 2J (TC's padding); TF32 for TC */
    const TA *coef = (const TA *)a.coef + b * a.cs0 + base;
    const int ntok = (int)(last_tok - base + 1);
    auto fill_coef = [&](int r0, int nr) {
        for (int k = tid; k < nr * TOK; k += NT) {
            const int r = k / TOK, t = k % TOK;
            const TA v = t < ntok && r0 + r < J2 ? coef[(int64_t)(1 + r0 + r) * a.cs1 + t] : (TA)0;
            c_s[r * LDC + t] = to_operand<TC>(v);
        }
    };
    const bool whole = a.slices == 1;
    /* One slice: K and the 2J rows by 16-byte cp.async (the zeros past
     * x_len are the copies' fill), on their way while the item's untouched
     * decision words are written and the first tile's x is fetched;
     * coef_land waits for them. An element a load in a loop took a few L2
     * round trips a thread before the first tile could start. */
    constexpr int EPC = 16 / (int)sizeof(TA), PIECES = TOK / EPC; /* a row's copies */
    if (whole) {
        for (int k = tid; k < (1 + J2) * PIECES; k += NT) {
            const int r = k / PIECES, t = k % PIECES * EPC, n = max(0, min(EPC, ntok - t));
            TA *dst = r == 0 ? k_s + t : c_s + (r - 1) * LDC + t;
            uni_copy16((float *)dst, (const float *)(n ? coef + (int64_t)r * a.cs1 + t : coef),
                       n * (int)sizeof(TA));
        }
        async_commit();
        for (int k = tid; k < (KR - J2) * TOK; k += NT) c_s[(J2 + k / TOK) * LDC + k % TOK] = (TA)0;
    } else {
        for (int t = tid; t < TOK; t += NT) k_s[t] = t < ntok ? coef[t] : (TA)0;
    }
    /* the thread's copies landed (the barrier after the first e fill hands
     * them to the others), rounded to TF32 for TC */
    auto coef_land = [&]() {
        async_wait<0>();
        if constexpr (TC) {
            for (int k = tid; k < (1 + J2) * PIECES; k += NT) {
                if (k < PIECES) continue; /* K stays float */
                TA *p = c_s + (k / PIECES - 1) * LDC + k % PIECES * EPC;
                for (int i = 0; i < EPC; i++) p[i] = to_operand<TC>(p[i]);
            }
        }
    };

    /* AH: the plan, while the copies are on their way */
    constexpr int kSlotRows = 64; /* a pool slot: a tile's cells, 64 rows of TOK floats */
    const int sps = (1 + J2) / kSlotRows;
    const bool ahead_on = AH && a.ahead.lag16 > 0 && a.cs0 != 0 && sps > 0;
    if (AH && tid == 0) {
        int tiles = 0, slot0 = 0;
        if (ahead_on) ahead_plan(X, Y, a.T, TOK, sps, a.ahead, slab, &tiles, &slot0);
        s_ahead = tiles;
        s_slot0 = slot0;
    }

    /* SPLIT with 16-byte staging: the first tile's x comes by cp.async too,
     * next to the coefficients */
    const TX *xb = (const TX *)a.x + b * a.xs0;
    TX *x_stage = (TX *)(tiles + 4 * G::BYTES); /* SPLIT with a.stage: after the four chunk tiles */
    const int64_t f_begin = c_first * kChunk;
    if constexpr (SPLIT && std::is_same<TX, float>::value) {
        if (a.vec) {
            stage_x16((float *)x_stage, xb + f_begin, a.xs2, J,
                      (int)min((int64_t)kFgFrames, Y - f_begin), tid, NT);
            async_commit();
        }
    }

    /* decision words of the frames no sweep writes: before the first chunk
     * visited and after the last */
    const int64_t v_end = min(Y, (c_last + 1) * kChunk);
    for (int m = 0; m < K; m++) {
        const int64_t g = first_group + m, before = c_first * kChunk, after = Y - v_end;
        if (g >= live_groups) break;
        for (int64_t k = tid; k < before + after; k += NT)
            item_bits[g * a.S + (k < before ? k : v_end + (k - before))] = 0u;
    }

    /* e rows [r0, r0 + nr) of the tile's frames [f0, f0 + 64): x, then its
     * squares (ll_mul, as the likelihood kernels), TF32 for TC; 0 at frames
     * >= y_len and in TC's padding rows */
    auto fill_e = [&](int64_t f0, int r0, int nr) {
        const int nf = (int)max((int64_t)0, min((int64_t)kFgFrames, Y - f0));
        tile_e_rows<TA, TX, TC>(e_s, LDE, xb + f0 * a.xs1, a.xs1, a.xs2, J, nf, r0, nr, tid, NT);
    };

    /* All 2J rows at once (one slice): each x is loaded once and its square
     * written next to it, half the loads of fill_e; by nt threads, this one
     * the me-th. */
    auto fill_e_whole = [&](int64_t f0, int me, int nt) {
        constexpr int NB = 8; /* loads in flight a thread */
        const int n = J * kFgFrames;
        for (int k0 = me; k0 < n; k0 += NB * nt) {
            TA v[NB];
#pragma unroll
            for (int q = 0; q < NB; q++) {
                const int k = k0 + q * nt, r = k / kFgFrames, f = k % kFgFrames;
                v[q] = k < n && f0 + f < Y ? (TA)widen(xb[(f0 + f) * a.xs1 + (int64_t)r * a.xs2])
                                           : (TA)0;
            }
#pragma unroll
            for (int q = 0; q < NB; q++) {
                const int k = k0 + q * nt, at = (k / kFgFrames) * LDE + k % kFgFrames;
                if (k < n) {
                    e_s[at] = to_operand<TC>(v[q]);
                    e_s[at + J * LDE] = to_operand<TC>(ll_mul(v[q], v[q]));
                }
            }
        }
    };
    /* TC's padding rows of e, never written by the fills of all rows */
    if (TC && whole)
        for (int k = tid; k < (KR - J2) * LDE; k += NT) e_s[J2 * LDE + k] = (TA)0;

    /* the sweep's state (warp 0): lane l holds tokens base + K l + k, k < K */
    TA q[K], guard[K]; /* guard: the shuffle form's, untouched by the exchange */
#pragma unroll
    for (int k = 0; k < K; k++) q[k] = guard[k] = neg_inf<TA>();
    /* The boundary of chunk c: lane l needs the score of token base-1 at
     * frame c * kChunk + l - 1 where it is in that token's band (else -inf);
     * our consumer reads nothing before our last token's first frame. */
    auto wanted = [&](int64_t c) {
        const int64_t jj = c * kChunk + lane - 1;
        return jj >= base - 1 && jj <= base - 1 + width && jj + 1 < Y;
    };
    SlabRing<TA, kFgRingFrames> ring;
    ring.out_first = base + TOK - 1;
    if (slab > 0) {
        const size_t line = (size_t)b * a.max_slabs + (slab - 1);
        ring.in = (const volatile unsigned long long *)a.ring + line * kFgRingFrames * ring.RW;
        ring.in_progress = a.flags + line * kFlagStride;
    }
    if (base + TOK < X) {
        const size_t line = (size_t)b * a.max_slabs + slab;
        ring.out = (volatile unsigned long long *)a.ring + line * kFgRingFrames * ring.RW;
        ring.out_progress = a.flags + line * kFlagStride;
    }
    if (warp == 0 && ring.in) ring.fetch(c_first, lane, wanted(c_first));

    auto sweep = [&](int64_t c, const unsigned char *tile) {
        const int64_t j0 = c * kChunk;
        const int nf = (int)(Y - j0 < kChunk ? Y - j0 : kChunk);
        TA boundary;
        if (ring.in) {
            boundary = ring.settle(c, lane, wanted(c));
            if (c + 1 <= c_last) ring.fetch(c + 1, lane, wanted(c + 1));
            if (c % 2 == 1 || c == c_last) ring.release(lane, j0 + nf - 1); /* once a tile */
        } else {
            boundary = j0 + lane - 1 == -1 ? (TA)0 : neg_inf<TA>(); /* the virtual start */
        }
        uint32_t ballots[K];
#pragma unroll
        for (int k = 0; k < K; k++) ballots[k] = 0u;
        TA top = neg_inf<TA>();
        constexpr int XCHG = PAIRS ? kSweepExchangeAhead : kSweepExchange;
        sweep_chunk_at<TA, K, LAYOUT, false, XCHG>(tile, lane, nf, base, j0, width, boundary, q,
                                                   guard, ballots, top, {}, xchg);
        store_decisions<K>(item_bits, a.S, first_group, live_groups, j0, lane, nf, ballots);
        if (ring.out) ring.put(j0, nf, lane, top);
    };

    /* the products: compute thread ct of compute warp cw (SPLIT:
     * split_compute_warp; none where cw < 0) holds frames tf*4 + i and
     * tokens run_token(tg, j) of the tile */
    const int cw = SPLIT ? split_compute_warp(warp, TC) : warp;
    const int ct = 32 * cw + lane;
    const int tf = PAIRS ? (ct >> 5) * 2 + (ct & 1) : ct >> 4;
    const int tg = PAIRS ? (ct >> 1) & 15 : ct & 15;
    auto acc_start = [&](TA (&acc)[4][CT]) {
        TA kv[CT];
        load_runs(k_s + tg * 4, kv);
#pragma unroll
        for (int i = 0; i < 4; i++)
#pragma unroll
            for (int j = 0; j < CT; j++) acc[i][j] = kv[j];
    };
    auto acc_rows = [&](TA (&acc)[4][CT], int nr) {
        const TA *ep = e_s + tf * 4, *cp = c_s + tg * 4;
#pragma unroll 8
        for (int r = 0; r < nr; r++) {
            TA ev[4], cv[CT];
            load4(ep + r * kFgFrames, ev);
            load_runs(cp + r * TOK, cv);
#pragma unroll
            for (int i = 0; i < 4; i++)
#pragma unroll
                for (int j = 0; j < CT; j++) acc[i][j] = ll_fma(ev[i], cv[j], acc[i][j]);
        }
    };
    /* The check for NaN/+inf that the sweep leaves to the cells' makers
     * (kSweepExchange): over the band cells of frames [fmin, fmax] and
     * tokens [tmin, tmax] of the slab a thread made, the cells the sweep
     * would have checked (frame < y_len, token < x_len, token in [frame -
     * width, frame]); s_bad is read after the last tile's barrier. */
    auto all_in_band = [&](int64_t fmin, int64_t fmax, int tmin, int tmax) {
        return base + tmax < X && fmax < Y && fmin >= base + tmax && fmax - (base + tmin) <= width;
    };
    auto in_band = [&](int64_t fr, int tok) {
        const int64_t t = base + tok;
        return t < X && fr < Y && fr >= t && fr - t <= width;
    };
    auto flag_bad = [&](TA g) {
        if (!(g < pos_inf<TA>())) s_bad = 1;
    };
    /* into the chunk tiles: frame tf*4 + i is chunk (tf*4 + i) / 32 */
    static_assert(TC || LAYOUT == LOAD_BTS, "the FMA products store token rows");
    auto acc_store = [&](const TA (&acc)[4][CT], unsigned char *tl, int64_t f0) {
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const int f = tf * 4 + i;
            unsigned char *tile = tl + (f / kChunk) * G::BYTES;
#pragma unroll
            for (int j = 0; j < CT; j++)
                *(TA *)(tile + token_row_offset<TA, K, LOAD_BTS>(run_token(tg, j), f % kChunk)) =
                    acc[i][j];
        }
        flag_bad(band_guard(all_in_band(f0 + tf * 4, f0 + tf * 4 + 3, run_token(tg, 0),
                                        run_token(tg, CT - 1)),
                            acc, [&](int i, int j) {
                                return in_band(f0 + tf * 4 + i, run_token(tg, j));
                            }));
    };
    /* AH: a compute thread's cells of token run_token(tg, j) are one
     * 16-byte piece of the chunk tiles (frames tf*4 .. +3) at piece_at(j);
     * in pool slot g it is at the same byte of the slot, a slot's byte o at
     * row 64 (g % sps) + o / (4 TOK) of slab g / sps's columns. A thread
     * parks and copies back the pieces it made itself. */
    auto piece_at = [&](int j) {
        const int f = tf * 4;
        return (f / kChunk) * G::BYTES + token_row_offset<TA, K, LOAD_BTS>(run_token(tg, j), f % kChunk);
    };
    auto park_at = [&](int g, int o) {
        constexpr int PB = TOK * 4; /* bytes of a row's piece */
        const int lender = g / sps;
        const int row = (g - lender * sps) * kSlotRows + o / PB;
        return (float *)a.coef + b * a.cs0 + (int64_t)row * a.cs1 + (int64_t)lender * TOK + (o % PB) / 4;
    };
    /* the tile in chunk tiles tl to slot g, and back */
    auto park_tile = [&](const unsigned char *tl, int g) {
#pragma unroll
        for (int j = 0; j < CT; j++) {
            const int o = piece_at(j);
            const float4 v = *(const float4 *)(tl + o);
            const float w[4] = {v.x, v.y, v.z, v.w};
            store_vec(park_at(g, o), w);
        }
        __threadfence_block(); /* before this thread's copy back by cp.async */
    };
    auto copy_back = [&](int g, unsigned char *tl) {
#pragma unroll
        for (int j = 0; j < CT; j++) {
            const int o = piece_at(j);
            uni_copy16((float *)(tl + o), park_at(g, o), 16);
        }
        async_commit();
    };
    /* TC: warp wc of the compute warps holds 16 tokens x 64 / FPW frames
     * (tc_cells.cuh), the slab's 16-token groups over the warps first */
    constexpr int TGW = TOK / 16, FPW = 8 / TGW, NI = kFgFrames / 8 / FPW;
    const int wc = ct >> 5, tc_tok = 16 * (wc % TGW), tc_fr = (wc / TGW) * (kFgFrames / FPW);
    auto tc_store = [&](const float (&acc)[NI][4], unsigned char *tl, int64_t f0) {
#pragma unroll
        for (int ni = 0; ni < NI; ni++)
#pragma unroll
            for (int c = 0; c < 4; c++) {
                const int f = tc_fr + 8 * ni + tc_frame(lane, c);
                unsigned char *tile = tl + (f / kChunk) * G::BYTES;
                *(float *)(tile + cell_offset<TA, K, LAYOUT>(tc_tok + tc_token(lane, c),
                                                             f % kChunk)) = acc[ni][c];
            }
        flag_bad(band_guard(all_in_band(f0 + tc_fr, f0 + tc_fr + 8 * NI - 1, tc_tok, tc_tok + 15),
                            acc, [&](int ni, int c) {
                                return in_band(f0 + tc_fr + 8 * ni + tc_frame(lane, c),
                                               tc_tok + tc_token(lane, c));
                            }));
    };
    /* the cells of the tile in the precision asked: rows [r0, r0 + nr) */
    using Acc = typename std::conditional<TC, float[NI][4], TA[4][CT]>::type;
    auto cells_start = [&](Acc &acc) {
        if constexpr (TC) tc_start(acc, k_s + tc_tok, lane);
        else acc_start(acc);
    };
    auto cells_rows = [&](Acc &acc, int nr) {
        if constexpr (TC) tc_products(acc, c_s + tc_tok, LDC, e_s + tc_fr, LDE, nr, lane);
        else acc_rows(acc, nr);
    };
    auto cells_store = [&](const Acc &acc, unsigned char *tl, int64_t f0) {
        if constexpr (TC) tc_store(acc, tl, f0);
        else acc_store(acc, tl, f0);
    };
    auto sweep_tile = [&](int64_t f0, const unsigned char *tl) {
        const int64_t c0 = f0 / kChunk;
        sweep(c0, tl);
        if (c0 + 1 <= c_last) sweep(c0 + 1, tl + G::BYTES);
    };

    if constexpr (SPLIT) {
        /* the host takes this kernel only with one slice (whole) */
        coef_land();
        if (std::is_same<TX, float>::value && a.vec) /* staged above by the same threads */
            staged_to_e<TC>((float *)e_s, LDE, (const float *)x_stage, J, tid, NT);
        else
            fill_e_whole(f_begin, tid, NT);
        __syncthreads();
        /* AH: this slab's coefficient rows are free for the slabs after */
        if (ahead_on && tid == 0)
            store_release(a.flags + ((size_t)b * a.max_slabs + slab) * kFlagStride + 2, 1);
        /* warps 1..8: the first tile's cells, then e of the second. With
         * a.stage the next tile's x is on its way to shared memory (after
         * the four chunk tiles) by cp.async during the products, and only
         * its squares are left for after them; a thread reads back the
         * elements it copied, so its own wait orders them. */
        const int n_e = J * kFgFrames;
        auto compute = [&](int64_t f0, unsigned char *tl) {
            const int64_t fn = f0 + kFgFrames;
            const bool next = fn <= f_last;
            if constexpr (sizeof(TX) >= 4) {
                if (next && a.vec) {
                    if constexpr (std::is_same<TX, float>::value)
                        stage_x16((float *)x_stage, xb + fn, a.xs2, J,
                                  (int)min((int64_t)kFgFrames, Y - fn), ct, kFgThreads);
                    async_commit();
                } else if (next && a.stage) {
                    for (int k = ct; k < n_e; k += kFgThreads) {
                        const int r = k / kFgFrames, f = k % kFgFrames;
                        const bool real = fn + f < Y; /* else frame fn's address, not read */
                        const int64_t at = (real ? fn + f : fn) * a.xs1 + (int64_t)r * a.xs2;
                        copy_elem_async(x_stage + k, xb + at, real);
                    }
                    async_commit();
                }
            }
            Acc acc;
            cells_start(acc);
            cells_rows(acc, KR);
            cells_store(acc, tl, f0);
            asm volatile("bar.sync 1, %0;" ::"n"(kFgThreads) : "memory"); /* e is read */
            if (!next) return;
            if (std::is_same<TX, float>::value && a.vec) {
                async_wait<0>();
                staged_to_e<TC>((float *)e_s, LDE, (const float *)x_stage, J, ct, kFgThreads);
            } else if (sizeof(TX) >= 4 && a.stage) {
                async_wait<0>();
                for (int k = ct; k < n_e; k += kFgThreads) {
                    const TA v = (TA)widen(x_stage[k]);
                    const int at = (k / kFgFrames) * LDE + k % kFgFrames;
                    e_s[at] = to_operand<TC>(v);
                    e_s[at + J * LDE] = to_operand<TC>(ll_mul(v, v));
                }
            } else {
                fill_e_whole(fn, ct, kFgThreads);
            }
        };
        if (cw >= 0) compute(f_begin, tiles);
        __syncthreads();
        /* Two loops on purpose: written as one (a tile counter and the
         * copy-back branch in every instance), ptxas re-allocated the
         * kernels that make nothing ahead too (TF32, float64, 64-token
         * slabs), which then lost their measured SASS (bench/sass_same.py). */
        if constexpr (!AH) {
            int t = 0;
#pragma unroll 1
            for (int64_t f0 = f_begin; f0 <= f_last; f0 += kFgFrames, t ^= 1) {
                if (warp == 0)
                    sweep_tile(f0, tiles + t * 2 * G::BYTES);
                else if (cw >= 0 && f0 + kFgFrames <= f_last)
                    compute(f0 + kFgFrames, tiles + (t ^ 1) * 2 * G::BYTES);
                __syncthreads(); /* the tile swept, the next one's cells and e ready */
            }
        } else {
            /* AH: while the first tile waits for its boundary, the slab's last
             * D tiles (n >= nt - D, frames f_begin + 64 n) are made in the next
             * chunk tiles, parked in slots s_slot0 + n - (nt - D) and copied back
             * when their turn comes; then e of tile 1 again. */
            const int D = s_ahead;
            const int64_t n_park = (f_last - f_begin) / kFgFrames + 1 - D; /* the first parked tile */
            auto make_ahead = [&](unsigned char *tl) {
                if (ct == 0) /* the lenders' copies of their rows have landed */
                    for (int g = s_slot0; g < s_slot0 + D; g++)
                        if (g / sps != slab)
                            while (load_acquire(a.flags + ((size_t)b * a.max_slabs + g / sps) * kFlagStride +
                                                2) == 0)
                                backoff_sleep();
                fill_e_whole(f_begin + n_park * kFgFrames, ct, kFgThreads);
                asm volatile("bar.sync 1, %0;" ::"n"(kFgThreads) : "memory");
#pragma unroll 1
                for (int n = 0; n < D; n++) {
                    compute(f_begin + (n_park + n) * kFgFrames, tl); /* then e of the next */
                    park_tile(tl, s_slot0 + n);
                    asm volatile("bar.sync 1, %0;" ::"n"(kFgThreads) : "memory");
                }
                fill_e_whole(f_begin + kFgFrames, ct, kFgThreads);
                asm volatile("bar.sync 1, %0;" ::"n"(kFgThreads) : "memory");
            };
            /* Each role a loop of its own, the compute warps' copy-backs in
             * a loop after their products'; a tile's barrier is met once in
             * either, from different instructions, so it is PTX's
             * barrier.sync without .aligned (role_barrier). Written as
             * main's one loop with the copy-back branch in it (session 37),
             * ptxas gave the products and the sweep an allocation that cost
             * 2-3% a call with nothing made ahead; in loops of their own it
             * costs nothing (H100, B=32 T=512 S=2048, nothing ahead:
             * 0.3635-0.3657 ms against main's kernel's 0.3651-0.3654).
             * Session 39, this form against main's kernel in one call: T=512
             * 0.3442-0.3459 against 0.3625-0.3653, B=16 T=1024 S=4096
             * 0.6683-0.6728 against 0.6879-0.6923. With __syncthreads (an
             * aligned barrier, which every thread must meet at one
             * instruction) it was 0.5% faster and compute-sanitizer's
             * synccheck reported each tile's barrier; merged into two loops
             * of both roles (the sweep's code twice) it was 13% slower; the
             * hand-over by bar.arrive / bar.sync pairs timed as this form,
             * but synccheck did not finish on it. */
            if (warp == 0) {
                int t = 0;
#pragma unroll 1
                for (int64_t f0 = f_begin; f0 <= f_last; f0 += kFgFrames, t ^= 1) {
                    sweep_tile(f0, tiles + t * 2 * G::BYTES);
                    role_barrier(); /* the tile swept, the next one's cells and e ready */
                }
            } else {
                /* (cw >= 0 holds for every warp here; without the tests ptxas
                 * allocated this instance anew, session 39's review) */
                if (cw >= 0 && D > 0 && f_begin + kFgFrames <= f_last) make_ahead(tiles + 2 * G::BYTES);
                /* the tiles made in turn, then the parked ones copied back */
                int t = 0;
                int64_t f0 = f_begin;
                const int64_t f_made = f_begin + (n_park - 1) * kFgFrames;
#pragma unroll 1
                for (; f0 < f_made; f0 += kFgFrames, t ^= 1) {
                    if (cw >= 0) compute(f0 + kFgFrames, tiles + (t ^ 1) * 2 * G::BYTES);
                    role_barrier();
                }
#pragma unroll 1
                for (; f0 <= f_last; f0 += kFgFrames, t ^= 1) {
                    if (cw >= 0 && f0 + kFgFrames <= f_last) {
                        copy_back(s_slot0 + (int)((f0 - f_begin) / kFgFrames + 1 - n_park),
                                  tiles + (t ^ 1) * 2 * G::BYTES);
                        async_wait<0>();
                    }
                    role_barrier();
                }
            }
        }
    } else {
        /* With one slice the next tile's e is filled by warps 1..7 while warp 0
         * sweeps (e is not read after the products), so the barrier that waits
         * for the sweep also hands the next e over. */
        if (whole) {
            coef_land();
            fill_e_whole(c_first * kChunk, tid, kFgThreads);
        }
#pragma unroll 1
        for (int64_t f0 = c_first * kChunk; f0 <= f_last; f0 += kFgFrames) {
            Acc acc;
            __syncthreads(); /* the last tile's sweep and products are done; e is filled */
#pragma unroll 1
            for (int s = 0; s < a.slices; s++) {
                const int r0 = s * a.rows, nr = min(a.rows, KR - r0);
                if (!whole) {
                    if (s > 0) __syncthreads();
                    fill_e(f0, r0, nr);
                    fill_coef(r0, nr);
                    __syncthreads();
                }
                if (s == 0) cells_start(acc);
                cells_rows(acc, nr);
            }
            cells_store(acc, tiles, f0);
            __syncthreads();
            if (warp == 0)
                sweep_tile(f0, tiles);
            else if (whole && f0 + kFgFrames <= f_last)
                fill_e_whole(f0 + kFgFrames, tid - 32, kFgThreads - 32);
        }
    }
    if (warp != 0) return;
    finish_sweep<TA, K>(base, lane, X, q, s_bad != 0, a.final_score + b,
                        a.group_flag + (size_t)b * a.groups, first_group, live_groups);
    /* the slab is done: its words, flags and (last slab) final score, for
     * a backtrack that reads an item's slabs as they end (hard_finish's
     * slab_done; the other threads' words are ordered before by the
     * barriers) */
    __syncwarp();
    if (lane == 0) {
        __threadfence();
        store_release(a.flags + ((size_t)b * a.max_slabs + slab) * kFlagStride + 1, 1);
    }
}

} // namespace mas_cuda

#endif
