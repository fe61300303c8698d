/* Forward-sum on the Gaussian log-likelihoods on CUDA (mas.h section 8),
 * with the gradients of log_z, never holding a [B, T, S] matrix. The CPU
 * op's blocks of frames (lib/cpu/fused_forward_sum.c), each block a few
 * launches over the whole batch:
 *   forward, blocks k = 0, 1, ...: the block's cells [B, K, T] (the
 *     likelihood kernels of mas_loglik_cuda on the block's frames, so the
 *     bits of gaussian_loglik), then the log-plus soft sweep
 *     (soft_sweep.cuh) over them, resumed from alpha's column at the end of
 *     block k-1 (the checkpoints [B, blocks, T]) and leaving its own; log_z
 *     from the block that holds the item's last frame;
 *   backward, blocks from the last: the cells again, alpha of the block
 *     again from its checkpoint, the reversed sweep resumed from beta~'s
 *     column after the block, writing the posterior gamma [B, K, T] and
 *     leaving beta~'s column for the block before; then one launch weighs
 *     the Gaussians' derivatives with gamma: per frame (d log_z / dx,
 *     written) and per token (sums of gamma, gamma x and gamma x^2 over
 *     the blocks in float64, turned into the gradients at the end).
 * A resumed sweep hands on the very edges the whole sweep would, so log_z
 * is the unfused CUDA path's (mas_forward_sum_cuda on mas_loglik_cuda's
 * matrix) bit for bit. Memory: two blocks [B, K, T] with K ~ 6 sqrt(S)
 * in whole units of the cell kernel, the checkpoints, two columns, mu / var
 * and 1 / var [B, T, J] and the float64 token sums [B, T, 2J+1] (mas.h has
 * the total).
 * No synchronisation, no allocation. */
#include <cuda_runtime.h>
#include <math.h>

#include "common/checks.h"
#include "cpu/parallel.h" /* mas_shape_too_big */
#include "cuda/device_cache.cuh"
#include "cuda/loglik_kernel.cuh"  /* load_elem */
#include "cuda/loglik_uniform.cuh" /* kUniFrames */
#include "cuda/soft_cells.cuh"
#include "cuda/soft_sweep.cuh"
#include "mas.h"

using namespace mas_cuda;

namespace {

/* Frames a block: the multiple of the likelihood kernels' 128-frame unit
 * (kUniFrames) nearest ~6 sqrt(S) (S = 2048: 8 blocks of 256 frames, 3 x
 * 16.8 MB of cells at B=32 T=512), at least two units and at most the
 * sweep's tiles of S. A block of whole units leaves none of the cell
 * kernel's work unused: 6 sqrt(2048) = 272 frames were 2 units and a
 * sixteenth, and the cells took twice as long a cell as gaussian_loglik's
 * one launch (H100, 2026-11-28). Fewer, longer blocks cost memory; more,
 * shorter ones launches and the sweep's pipeline fill (a tile a segment of
 * 128 tokens) on every block: one unit a block at S = 800 (7 blocks) took
 * 1.50 ms forward and backward against 1.33 with 5 blocks of 176 frames
 * (H100, 2026-11-28), and 4 sqrt(S) took 7-16% longer a call at the four
 * shapes of bench --fused (H200, 2026-11-27; 133 instead of 114 MB at
 * B=32 T=512 S=2048). MAS_FGS_BLOCK_SQRTS (compile time) changes the 6, to
 * measure. */
#ifndef MAS_FGS_BLOCK_SQRTS
#define MAS_FGS_BLOCK_SQRTS 6
#endif
int64_t block_frames(int64_t S) {
    const int64_t want = MAS_FGS_BLOCK_SQRTS * (int64_t)ceil(sqrt((double)S));
    int64_t k = (want + kUniFrames / 2) / kUniFrames * kUniFrames;
    if (k < 2 * kUniFrames) k = 2 * kUniFrames;
    const int64_t whole = (S + kSoftTileSteps - 1) / kSoftTileSteps * kSoftTileSteps;
    return k < whole ? k : whole;
}

/* The coefficients' row stride: whole 16-byte rows, so that the cells are
 * the one-Gaussian kernel's (loglik_items.cuh copies rows 16 bytes at a
 * time; other strides take the general kernel, 2.3x slower a cell). */
int64_t coef_pitch(int64_t T) { return (T + 3) / 4 * 4; }

struct FgsLayout {
    int64_t K, blocks;
    size_t coef, status, log_z, ckpt, beta, v, alpha, gamma, mv, inv, gm, gl, gs, seg;
    size_t total;
};

/* 0 when the call is rejected; SIZE_MAX for shapes beyond 2^52 cells. */
size_t fgs_layout(const mas_gauss_align_args *args, FgsLayout *L, mas_gauss_align_shape *sh) {
    if (mas_gauss_align_check_call(args, sh) != MAS_OK) return 0;
    const int64_t B = sh->batch, T = sh->tokens, S = sh->frames, J = sh->dim, P = 2 * J + 1;
    const int64_t Bm = sh->model_batch;
    if (mas_shape_too_big(B, T, S) || mas_shape_too_big(B, T + S, P)) return SIZE_MAX;
    const size_t es = mas_accum_dtype(args->x.dtype) == MAS_FLOAT64 ? 8 : 4;
    L->K = block_frames(S);
    L->blocks = L->K > 0 ? (S + L->K - 1) / L->K : 0;
    size_t at = 0;
    auto take = [&](size_t n) {
        const size_t r = at;
        at += align256(n);
        return r;
    };
    const size_t bt = (size_t)B * (size_t)T, block = bt * (size_t)L->K * es;
    L->coef = take((size_t)Bm * (size_t)P * (size_t)coef_pitch(T) * es);
    L->status = take((size_t)B * sizeof(int32_t));
    L->log_z = take((size_t)B * es);
    L->ckpt = take(bt * (size_t)L->blocks * es);
    L->beta = take(2 * bt * es);
    L->v = take(block);
    L->alpha = take(block);
    /* the posterior overwrites alpha: the sweep's helper warp loads a tile's
     * alpha two phases before it stores that tile's gamma, and each warp
     * holds its own states (soft_sweep.cuh) */
    L->gamma = L->alpha;
    L->mv = take((size_t)Bm * (size_t)T * (size_t)J * es);
    L->inv = take((size_t)Bm * (size_t)T * (size_t)J * es);
    L->gm = take(bt * (size_t)J * 8);
    L->gl = take(bt * (size_t)J * 8);
    L->gs = take(bt * 8);
    L->seg = take(soft_link_bytes(B, T, L->K, 2 * es, soft_min_segment()));
    L->total = at + 256; /* room to align the caller's pointer */
    return L->total;
}

enum { FGS_FORWARD, FGS_ALPHA, FGS_POSTERIOR };

/* The sweeps' plan (soft_sweep.cuh) for block k: frames [kK, kK + n) of
 * each item as steps 0..n-1, tokens as states; the band shifted by kK. */
template <typename TA> struct FgsPlan {
    int phase;
    int64_t k, K, blocks, T, S;
    const int64_t *x_len, *y_len;
    const TA *v;       /* the block's cells [B][K][T] */
    TA *alpha, *gamma; /* [B][K][T] */
    TA *ckpt;          /* alpha's column after block k: [B][blocks][T] */
    const TA *beta_in; /* beta~'s column at the first frame after the block: [B][T] */
    TA *beta_out;      /* the same at the block's first frame */
    int32_t *status;
    TA *log_z_ws;
    TA *log_z; /* the caller's, may be NULL */
    uint64_t *error_word;

    /* a [K][T] block of the item: tokens contiguous, steps 0..n-1 read */
    __device__ SoftView block_view(const TA *blk, int64_t n, int32_t check) const {
        return soft_view(blk, sizeof(TA) == 8 ? MAS_FLOAT64 : MAS_FLOAT32, 1, T, 0, n, check);
    }

    template <int NIN> __device__ bool item(int64_t b, SoftItem<TA, NIN> &it) const {
        const int64_t X = x_len[b], Y = y_len[b], f0 = k * K;
        if (phase == FGS_FORWARD) {
            const int st = length_status(X, Y, T, S);
            if (st != MAS_OK) {
                if (k == 0 && threadIdx.x == 0)
                    forward_sum_record(b, st, (TA)0, status, log_z_ws, log_z, error_word);
                return false;
            }
        } else if (status[b] != MAS_OK) {
            return false; /* no gradient: the finishing kernels zero it */
        }
        if (f0 >= Y) return false;
        const int64_t n = Y - f0 < K ? Y - f0 : K, last_block = (Y - 1) / K;
        const size_t blk = (size_t)b * K * T;
        it.n_states = X;
        it.n_steps = n;
        it.band_lo = Y - X - f0;
        it.band_hi = f0;
        it.store_band = false;
        it.in[0] = block_view(v + blk, n, phase == FGS_FORWARD ? 1 : 0);
        it.scalar = 0;
        it.init_stride = it.last_stride = 1;
        it.out.s_state = 1;
        it.out.s_step = T;
        if constexpr (NIN == 1) {
            it.init = k == 0 ? nullptr : ckpt + ((size_t)b * blocks + (k - 1)) * T;
            it.out.base = phase == FGS_ALPHA ? alpha + blk : nullptr;
            it.last = phase == FGS_FORWARD && k < last_block
                          ? ckpt + ((size_t)b * blocks + k) * T
                          : nullptr;
        } else {
            it.in[1] = block_view(alpha + blk, n, 0);
            it.out.base = gamma + blk;
            it.scalar = log_z_ws[b];
            it.init = k == last_block ? nullptr : beta_in + (size_t)b * T;
            it.last = k > 0 ? beta_out + (size_t)b * T : nullptr;
            soft_reverse(it);
        }
        return true;
    }

    /* thread 0 of the item's last segment, after the block's sweep */
    __device__ void finish(int64_t b, TA last, bool bad) const {
        if (phase != FGS_FORWARD) return;
        bad = bad || status[b] == MAS_ERR_NONFINITE_VALUE;
        if (k != (y_len[b] - 1) / K) {
            if (bad) status[b] = MAS_ERR_NONFINITE_VALUE;
            return;
        }
        const int st = forward_sum_status(bad, &last);
        forward_sum_record(b, st, last, status, log_z_ws, log_z, error_word);
    }
};

/* What the gradient kernels read and write. */
template <typename TA> struct FgsGrad {
    const void *x;
    int32_t x_dtype;
    int64_t xs0, xs1, xs2;
    const TA *gamma;         /* [B][K][T] */
    const TA *mv, *inv;      /* mu / var and 1 / var, [model batch][T][J] */
    int64_t ms;              /* item stride of mv and inv (0: one model) */
    const int64_t *x_len, *y_len;
    const int32_t *status;
    int64_t k, K, T, S, J;
    double *gm, *gl, *gs;    /* sums of gamma x [B][T][J], gamma x^2 [B][T][J], gamma [B][T] */
    TA *gx;                  /* d log_z / dx, [B, S, J] view */
    int64_t gx0, gx1, gx2;
};

/* mu / var and 1 / var of every token and dimension (1 / var as the CPU
 * op takes it: exp(-2 log_std) or 1/var in float64), rounded to the
 * accumulator type once. */
template <typename TA>
__global__ void fgs_params(mas_gauss_params prm, int64_t s0, int64_t s1, int64_t s2, int64_t p0,
                           int64_t p1, int64_t p2, int64_t T, int64_t J, TA *mv, TA *inv) {
    const int64_t n = prm.means.dim[0] * T * J;
    for (int64_t g = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; g < n;
         g += (int64_t)gridDim.x * blockDim.x) {
        const int64_t b = g / (T * J), i = g / J % T, d = g % J;
        const double m = load_elem<double>(prm.means.data, prm.means.dtype, b * s0 + i * s1 + d * s2);
        const double sp = load_elem<double>(prm.spread.data, prm.spread.dtype, b * p0 + i * p1 + d * p2);
        const double iv = prm.spread_kind == MAS_SPREAD_LOG_STD ? exp(-2.0 * sp) : 1.0 / sp;
        mv[g] = (TA)(m * iv);
        inv[g] = (TA)iv;
    }
}

/* The gradient kernels weigh two operands with the block's posteriors, as
 * two products of one shape: over the steps s of an item's band,
 *   out1[r][d] = sum_s A[s][r] U[s][d],   out2[r][d] = sum_s A[s][r] V[s][d]
 * (frames: r a frame, s a token, U = mu / var, V = 1 / var; tokens: r a
 * token, s a frame, U = x, V = x * x). A block takes kGradRows rows of one
 * item and 4 G dimensions a pass; thread (r4, g) holds rows 4 r4 .. +3 x
 * dimensions 4 g .. +3 of both, so that a step is three 16-byte shared
 * loads for 32 fmas. The steps come into shared memory grad_steps() at a
 * time by cp.async, the next chunk's copies in flight while the current one
 * is multiplied, zeros past the ends (outside the band gamma is 0). The
 * sums run in the accumulator type over one block of frames, then go to
 * float64. The frame tiles and the token tiles of a block of frames are one
 * launch, so that each kind's blocks fill the other's idle multiprocessors.
 * (The earlier kernels, one token or frame a thread row and scalar shared
 * loads, took 2.25 ms of the 4.46 of a call at B=32 T=512 S=2048 on the
 * H100; the same tiles as now with loads waited for chunk by chunk took as
 * long on the H200, and with cp.async element by element in two launches
 * 1.37 ms.) */
template <typename TA> __host__ __device__ constexpr int grad_steps() {
    return sizeof(TA) == 8 ? 8 : 16; /* two buffers of 32 KB at G = 24 */
}
constexpr int kGradRows = 64;
/* Groups of 4 dimensions a pass, at most (J = 80 takes 21, with the token
 * sums' column of ones): 16 x 24 threads make two blocks a multiprocessor
 * at 80 registers, where ptxas spills 100 bytes (one block at 122 and no
 * spills was no faster at T=512, 4% slower at T=1024; H200) */
constexpr int kGradGroups = 24;
constexpr int kGradThreads = kGradRows / 4 * kGradGroups;

/* Groups of 4 dimensions a pass for J (and the ones). */
inline int grad_groups(int64_t J) {
    const int64_t g = (J + 1 + 3) / 4;
    return g < kGradGroups ? (int)g : kGradGroups;
}
/* A, U and V of one chunk: [steps][rows + 4] and two [steps][4 G] */
template <typename TA> __host__ __device__ constexpr int grad_buffer(int groups) {
    return grad_steps<TA>() * (kGradRows + 4 + 8 * groups);
}
template <typename TA> size_t grad_smem(int groups) {
    return 2 * (size_t)grad_buffer<TA>(groups) * sizeof(TA);
}

/* One chunk of steps: a points at the thread's 4 rows of step 0 (pitch
 * ap), u and v at its 4 dimensions (pitch up). */
template <typename TA>
__device__ __forceinline__ void grad_products(TA (&p1)[4][4], TA (&p2)[4][4], const TA *a, int ap,
                                              const TA *u, const TA *v, int up) {
#pragma unroll 4
    for (int s = 0; s < grad_steps<TA>(); s++) {
        TA av[4], uv[4], vv[4];
        load4(a + s * ap, av);
        load4(u + s * up, uv);
        load4(v + s * up, vv);
#pragma unroll
        for (int r = 0; r < 4; r++)
#pragma unroll
            for (int q = 0; q < 4; q++) {
                p1[r][q] = ll_fma(av[r], uv[q], p1[r][q]);
                p2[r][q] = ll_fma(av[r], vv[q], p2[r][q]);
            }
    }
}

/* The chunks of steps [lo, hi] in order through two buffers: fill(s0, n,
 * buf) starts the copies of steps s0 .. s0 + n - 1 (n <= ST) into buf;
 * ready(buf) runs after the thread's own copies landed (before the barrier
 * that shows them to the block); use(buf) reads a chunk. */
template <int ST, typename Fill, typename Ready, typename Use>
__device__ __forceinline__ void grad_chunks(int64_t lo, int64_t hi, Fill fill, Ready ready,
                                            Use use) {
    if (lo > hi) return;
    auto count = [&](int64_t s0) { return hi - s0 + 1 < ST ? (int)(hi - s0 + 1) : ST; };
    fill(lo, count(lo), 0);
    async_commit();
    int p = 0;
    for (int64_t s0 = lo; s0 <= hi; s0 += ST, p ^= 1) {
        if (s0 + ST <= hi) {
            fill(s0 + ST, count(s0 + ST), p ^ 1);
            async_commit();
            async_wait<1>();
        } else {
            async_wait<0>();
        }
        ready(p);
        __syncthreads(); /* chunk p visible */
        use(p);
        __syncthreads(); /* chunk p read: the next fill may take its buffer */
    }
}

/* d log_z / dx of frame tile `tile` of the block, the band's tokens as
 * steps:
 *   dx_j = sum_i gamma(i, j) / var_i (mu_i - x_j)
 *        = sum_i gamma mu_i / var_i  -  x_j sum_i gamma / var_i
 * (the cancellation when x_j ~ mu_i costs eps |mu| / |mu - x| of relative
 * error, in float32 ~1e-6 at |mu - x| ~ 0.1 |mu|; the CPU takes the
 * difference first). */
template <typename TA>
__device__ __forceinline__ void frame_tile(const FgsGrad<TA> &g, TA *sm, int64_t b, int64_t tile) {
    constexpr int ROWS = kGradRows, ST = grad_steps<TA>(), AP = ROWS + 4, V = 16 / sizeof(TA);
    const int tid = threadIdx.x, nt = blockDim.x, G = nt / (ROWS / 4), UP = 4 * G;
    const int BUF = grad_buffer<TA>(G), r4 = tid % (ROWS / 4), gq = tid / (ROWS / 4);
    const int64_t X = g.x_len[b], Y = g.y_len[b], f0 = g.k * g.K;
    const int64_t n = Y - f0 < g.K ? Y - f0 : g.K, t0 = tile * ROWS;
    if (t0 >= n) return; /* uniform over the block */
    const int nf = n - t0 < ROWS ? (int)(n - t0) : ROWS;
    const int64_t jfirst = f0 + t0;
    const int64_t ilo = jfirst - (Y - X) > 0 ? jfirst - (Y - X) : 0;
    const int64_t ihi = jfirst + nf - 1 < X - 1 ? jfirst + nf - 1 : X - 1;
    const TA *gam = g.gamma + (size_t)b * g.K * g.T + (size_t)t0 * g.T;
    const TA *mv = g.mv + b * g.ms, *inv = g.inv + b * g.ms;
    const bool vec = g.J % 4 == 0; /* rows of mu / var and 1 / var in 16-byte pieces */
    for (int64_t d0 = 0; d0 < g.J; d0 += UP) {
        TA p1[4][4] = {}, p2[4][4] = {};
        auto fill = [&](int64_t i0, int ni, int p) {
            TA *a_s = sm + p * BUF, *u_s = a_s + ST * AP, *v_s = u_s + ST * UP;
            const int i = tid % ST; /* along a frame's tokens */
            for (int f = tid / ST; f < ROWS; f += nt / ST) {
                const bool real = i < ni && f < nf;
                copy_elem_async(a_s + i * AP + f, gam + (real ? (size_t)f * g.T + i0 + i : 0), real);
            }
            if (vec) {
                for (int e = tid; e < ST * (UP / V); e += nt) {
                    const int k = e / (UP / V), dd = e % (UP / V) * V;
                    const bool real = k < ni && d0 + dd < g.J;
                    const int64_t at = real ? (i0 + k) * g.J + d0 + dd : 0;
                    copy16_async_or_zero(u_s + k * UP + dd, mv + at, real);
                    copy16_async_or_zero(v_s + k * UP + dd, inv + at, real);
                }
            } else {
                for (int k = tid / UP; k < ST; k += nt / UP) { /* nt = 4 UP */
                    const int dd = tid % UP;
                    const bool real = k < ni && d0 + dd < g.J;
                    const int64_t at = real ? (i0 + k) * g.J + d0 + dd : 0;
                    copy_elem_async(u_s + k * UP + dd, mv + at, real);
                    copy_elem_async(v_s + k * UP + dd, inv + at, real);
                }
            }
        };
        grad_chunks<ST>(ilo, ihi, fill, [](int) {}, [&](int p) {
            const TA *a_s = sm + p * BUF, *u_s = a_s + ST * AP, *v_s = u_s + ST * UP;
            grad_products(p1, p2, a_s + 4 * r4, AP, u_s + 4 * gq, v_s + 4 * gq, UP);
        });
#pragma unroll
        for (int r = 0; r < 4; r++)
#pragma unroll
            for (int q = 0; q < 4; q++) {
                const int64_t f = 4 * r4 + r, d = d0 + 4 * gq + q;
                if (f < nf && d < g.J) {
                    const double x = load_elem<double>(g.x, g.x_dtype,
                                                       b * g.xs0 + (jfirst + f) * g.xs1 + d * g.xs2);
                    g.gx[b * g.gx0 + (jfirst + f) * g.gx1 + d * g.gx2] =
                        (TA)((double)p1[r][q] - x * (double)p2[r][q]);
                }
            }
    }
}

/* The block of frames' share of the token sums of token tile `tile`, their
 * band frames as steps:  gm += sum gamma x,  gl += sum gamma x^2,
 * gs += sum gamma (a column of ones after the J of x; fgs_token_out takes
 * mu and 1/var in). x of the accumulator's type is copied as it is, other
 * types converted on the way (loads the block waits for). */
template <typename TA>
__device__ __forceinline__ void token_tile(const FgsGrad<TA> &g, TA *sm, int64_t b, int64_t tile) {
    constexpr int ROWS = kGradRows, ST = grad_steps<TA>(), AP = ROWS + 4, V = 16 / sizeof(TA);
    const int tid = threadIdx.x, nt = blockDim.x, G = nt / (ROWS / 4), UP = 4 * G;
    const int BUF = grad_buffer<TA>(G), r4 = tid % (ROWS / 4), gq = tid / (ROWS / 4);
    const int64_t X = g.x_len[b], Y = g.y_len[b], f0 = g.k * g.K, i0 = tile * ROWS;
    if (f0 >= Y || i0 >= X) return; /* uniform over the block */
    const int64_t n = Y - f0 < g.K ? Y - f0 : g.K;
    const int ni = X - i0 < ROWS ? (int)(X - i0) : ROWS;
    const int64_t jlo = i0 > f0 ? i0 : f0;
    const int64_t jhi = i0 + ni - 1 + (Y - X) < f0 + n - 1 ? i0 + ni - 1 + (Y - X) : f0 + n - 1;
    if (jlo > jhi) return;
    const TA *gam = g.gamma + (size_t)b * g.K * g.T + i0;
    /* gamma's rows in 16-byte pieces; those past x_len carry what the
     * sweep left there into rows of the tile no one writes out */
    const bool vec = g.T % 4 == 0;
    const bool direct = g.x_dtype == (sizeof(TA) == 8 ? MAS_FLOAT64 : MAS_FLOAT32);
    const TA *xd = (const TA *)g.x + b * g.xs0;
    /* x along its contiguous axis, frames (Glow-TTS z) or dimensions: this
     * thread's first (frame, dimension) of a chunk and the steps to its
     * others (nt = 4 UP, a multiple of ST) */
    const bool frames_fast = (g.xs1 < 0 ? -g.xs1 : g.xs1) <= (g.xs2 < 0 ? -g.xs2 : g.xs2);
    const int xf = frames_fast ? tid % ST : tid / UP, xd0 = frames_fast ? tid / ST : tid % UP;
    const int xf_step = frames_fast ? 0 : nt / UP, xd_step = frames_fast ? nt / ST : 0;
    constexpr int kXs = ST * 4 / (ROWS / 4); /* elements a thread: ST UP / nt */
    for (int64_t d0 = 0; d0 <= g.J; d0 += UP) {
        TA p1[4][4] = {}, p2[4][4] = {};
        auto fill = [&](int64_t j0, int nf, int p) {
            TA *a_s = sm + p * BUF, *u_s = a_s + ST * AP;
            if (vec) {
                for (int e = tid; e < ST * (ROWS / V); e += nt) {
                    const int f = e / (ROWS / V), i = e % (ROWS / V) * V;
                    const bool real = f < nf && i < ni;
                    copy16_async_or_zero(a_s + f * AP + i,
                                         gam + (real ? (size_t)(j0 - f0 + f) * g.T + i : 0), real);
                }
            } else {
                for (int e = tid; e < ST * ROWS; e += nt) {
                    const int f = e / ROWS, i = e % ROWS;
                    const bool real = f < nf && i < ni;
                    copy_elem_async(a_s + f * AP + i,
                                    gam + (real ? (size_t)(j0 - f0 + f) * g.T + i : 0), real);
                }
            }
#pragma unroll
            for (int k = 0; k < kXs; k++) {
                const int f = xf + k * xf_step, dd = xd0 + k * xd_step;
                const int64_t d = d0 + dd, at = (j0 + f) * g.xs1 + d * g.xs2;
                TA *to = u_s + f * UP + dd;
                if (f < nf && d < g.J) {
                    if (direct)
                        copy_elem_async(to, xd + at, true);
                    else
                        *to = load_elem<TA>(g.x, g.x_dtype, b * g.xs0 + at);
                } else {
                    *to = f < nf && d == g.J ? (TA)1 : (TA)0;
                }
            }
        };
        auto squares = [&](int p) { /* of the elements this thread copied */
            TA *u_s = sm + p * BUF + ST * AP, *v_s = u_s + ST * UP;
#pragma unroll
            for (int k = 0; k < kXs; k++) {
                const int f = xf + k * xf_step, dd = xd0 + k * xd_step;
                const TA v = u_s[f * UP + dd];
                v_s[f * UP + dd] = ll_mul(v, v);
            }
        };
        grad_chunks<ST>(jlo, jhi, fill, squares, [&](int p) {
            const TA *a_s = sm + p * BUF, *u_s = a_s + ST * AP, *v_s = u_s + ST * UP;
            grad_products(p1, p2, a_s + 4 * r4, AP, u_s + 4 * gq, v_s + 4 * gq, UP);
        });
#pragma unroll
        for (int r = 0; r < 4; r++) {
            const int i = 4 * r4 + r;
            if (i >= ni) continue;
            const size_t at = ((size_t)b * g.T + i0 + i) * g.J;
#pragma unroll
            for (int q = 0; q < 4; q++) {
                const int64_t d = d0 + 4 * gq + q;
                if (d < g.J) {
                    g.gm[at + d] += (double)p1[r][q];
                    g.gl[at + d] += (double)p2[r][q];
                } else if (d == g.J) {
                    g.gs[(size_t)b * g.T + i0 + i] += (double)p1[r][q];
                }
            }
        }
    }
}

/* Block of frames k's gradient tiles: blockIdx.x < frame_tiles a frame
 * tile, the rest token tiles; blockIdx.y the item. 16 G threads. */
template <typename TA>
__global__ void __launch_bounds__(kGradThreads, sizeof(TA) == 8 ? 1 : 2)
    fgs_grads(FgsGrad<TA> g, int frame_tiles) {
    extern __shared__ __align__(16) unsigned char fgs_sm[];
    const int64_t b = blockIdx.y;
    if (g.status[b] != MAS_OK) return;
    if ((int)blockIdx.x < frame_tiles)
        frame_tile(g, (TA *)fgs_sm, b, blockIdx.x);
    else
        token_tile(g, (TA *)fgs_sm, b, blockIdx.x - frame_tiles);
}

/* The outputs of the token sums (zeros beyond x_len and for a failed
 * item), in float64 from the sums of gamma x (gm), gamma x^2 (gl) and
 * gamma (gs), the caller's means and 1/var:  with a1 = gm - mu gs =
 * sum gamma (x - mu) and a2 = gl - mu (2 gm - mu gs) = sum gamma (x - mu)^2,
 * d/dmu = a1 / var, d/dlog_std = a2 / var - gs, d/dvar = that / (2 var). */
template <typename TA>
__global__ void fgs_token_out(FgsGrad<TA> g, mas_tensor3 means, mas_tensor3 om, mas_tensor3 os,
                              int variance) {
    const int64_t b = blockIdx.y;
    const bool live = g.status[b] == MAS_OK;
    const int64_t X = g.x_len[b], mb = means.dim[0] == 1 ? 0 : b;
    for (int64_t r = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; r < g.T * g.J;
         r += (int64_t)gridDim.x * blockDim.x) {
        const int64_t i = r / g.J, d = r % g.J;
        const bool in = live && i < X;
        const size_t at = (size_t)b * g.T * g.J + r;
        double a1 = 0, a2 = 0, s = 0, iv = 0;
        if (in) {
            const double mu = load_elem<double>(
                means.data, means.dtype,
                mb * means.stride[0] + i * means.stride[1] + d * means.stride[2]);
            iv = (double)g.inv[b * g.ms + i * g.J + d];
            s = g.gs[(size_t)b * g.T + i];
            a1 = g.gm[at] - mu * s;
            a2 = g.gl[at] - mu * (2 * g.gm[at] - mu * s);
        }
        if (om.data) {
            TA *o = (TA *)om.data + b * om.stride[0] + i * om.stride[1] + d * om.stride[2];
            *o = in ? (TA)(a1 * iv) : (TA)0;
        }
        if (os.data) {
            double v = 0;
            if (in) {
                v = a2 * iv - s;
                if (variance) v *= 0.5 * iv;
            }
            *((TA *)os.data + b * os.stride[0] + i * os.stride[1] + d * os.stride[2]) = (TA)v;
        }
    }
}

/* Zeros of d log_z / dx where the frame kernel wrote nothing: frames from
 * y_len on, and every frame of a failed item. */
template <typename TA> __global__ void fgs_frame_zeros(FgsGrad<TA> g) {
    const int64_t b = blockIdx.y;
    const bool live = g.status[b] == MAS_OK;
    const int64_t Y = g.y_len[b];
    for (int64_t r = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; r < g.S * g.J;
         r += (int64_t)gridDim.x * blockDim.x) {
        const int64_t j = r / g.J, d = r % g.J;
        if (!live || j >= Y) g.gx[b * g.gx0 + j * g.gx1 + d * g.gx2] = (TA)0;
    }
}

/* The gradient tiles of block k: frames (d/dx) if want_x, tokens if
 * want_tok. */
template <typename TA>
void grad_launch(const FgsGrad<TA> &g, int64_t B, bool want_x, bool want_tok, cudaStream_t s) {
    const int G = grad_groups(g.J);
    const int64_t ft = want_x ? (g.K + kGradRows - 1) / kGradRows : 0;
    const int64_t tt = want_tok ? (g.T + kGradRows - 1) / kGradRows : 0;
    fgs_grads<TA><<<dim3((unsigned)(ft + tt), (unsigned)B), (unsigned)(kGradRows / 4 * G),
                    grad_smem<TA>(G), s>>>(g, (int)ft);
}

/* The cells of block k's frames for every item into the v block. */
mas_status block_cells(const mas_gauss_align_args *args, const mas_tensor3 &coef, void *v,
                       const FgsLayout &L, int64_t k, int64_t T, int32_t acc, cudaStream_t s,
                       uint64_t *error_word) {
    const int64_t S = args->x.dim[1], f0 = k * L.K, n = S - f0 < L.K ? S - f0 : L.K;
    mas_loglik_args la;
    memset(&la, 0, sizeof la);
    la.x = args->x;
    la.x.data = (char *)args->x.data + (size_t)(f0 * view_stride(&args->x, 1)) *
                                           mas_dtype_size((mas_dtype)args->x.dtype);
    la.x.dim[1] = n;
    la.coef = coef;
    la.n_states = T;
    la.out = make_tensor3(v, acc, args->x.dim[0], n, T, L.K * T, T, 1);
    return mas_loglik_cuda(&la, nullptr, 0, s, error_word);
}

template <typename TA>
mas_status run(const mas_gauss_align_args *args, const mas_gauss_soft_outputs *out,
               const mas_gauss_align_shape &sh, const FgsLayout &L, const mas_tensor3 &coef,
               unsigned char *ws, cudaStream_t s, uint64_t *error_word) {
    const int64_t B = sh.batch, T = sh.tokens, S = sh.frames, J = sh.dim;
    const int32_t acc = sizeof(TA) == 8 ? MAS_FLOAT64 : MAS_FLOAT32;
    using Fwd = PlusCell<TA, LogPlus, true, false, false>;
    using Bwd = PlusCell<TA, LogPlus, true, false, true>;
    FgsPlan<TA> plan;
    plan.K = L.K;
    plan.blocks = L.blocks;
    plan.T = T;
    plan.S = S;
    plan.x_len = args->x_len;
    plan.y_len = args->y_len;
    plan.v = (const TA *)(ws + L.v);
    plan.alpha = (TA *)(ws + L.alpha);
    plan.gamma = (TA *)(ws + L.gamma);
    plan.ckpt = (TA *)(ws + L.ckpt);
    plan.status = (int32_t *)(ws + L.status);
    plan.log_z_ws = (TA *)(ws + L.log_z);
    plan.log_z = (TA *)out->log_z;
    plan.error_word = error_word;
    void *links = ws + L.seg;
    if (cudaMemsetAsync(plan.status, 0, (size_t)B * sizeof(int32_t), s) != cudaSuccess)
        return MAS_ERR_CUDA;
    mas_status st = MAS_OK;
    plan.phase = FGS_FORWARD;
    for (int64_t k = 0; k < L.blocks && st == MAS_OK; k++) {
        plan.k = k;
        st = block_cells(args, coef, ws + L.v, L, k, T, acc, s, error_word);
        if (st == MAS_OK) st = soft_launch<TA, Fwd>(plan, B, T, L.K, links, s);
    }
    const bool want_x = out->grad_x.data != nullptr;
    const bool want_tok = out->grad_means.data || out->grad_spread.data;
    if (st != MAS_OK || (!want_x && !want_tok)) return st;

    FgsGrad<TA> g;
    g.x = args->x.data;
    g.x_dtype = args->x.dtype;
    g.xs0 = view_stride(&args->x, 0);
    g.xs1 = view_stride(&args->x, 1);
    g.xs2 = view_stride(&args->x, 2);
    g.gamma = plan.gamma;
    g.mv = (const TA *)(ws + L.mv);
    g.inv = (const TA *)(ws + L.inv);
    g.ms = sh.model_batch == 1 ? 0 : T * J;
    g.x_len = args->x_len;
    g.y_len = args->y_len;
    g.status = plan.status;
    g.K = L.K;
    g.T = T;
    g.S = S;
    g.J = J;
    g.gm = (double *)(ws + L.gm);
    g.gl = (double *)(ws + L.gl);
    g.gs = (double *)(ws + L.gs);
    g.gx = (TA *)out->grad_x.data;
    g.gx0 = out->grad_x.stride[0];
    g.gx1 = out->grad_x.stride[1];
    g.gx2 = out->grad_x.stride[2];
    DeviceInfo dev;
    if ((st = current_device(&dev)) != MAS_OK) return st;
    const mas_gauss_params &prm = args->params;
    {
        const int64_t n = sh.model_batch * T * J;
        int64_t blocks = (n + 255) / 256;
        if (blocks > (int64_t)dev.sms * 32) blocks = (int64_t)dev.sms * 32;
        fgs_params<TA><<<(unsigned)blocks, 256, 0, s>>>(
            prm, view_stride(&prm.means, 0), view_stride(&prm.means, 1), view_stride(&prm.means, 2),
            view_stride(&prm.spread, 0), view_stride(&prm.spread, 1), view_stride(&prm.spread, 2), T,
            J, (TA *)(ws + L.mv), (TA *)(ws + L.inv));
    }
    const size_t sums = (size_t)B * T * J * 8;
    if (cudaMemsetAsync(g.gm, 0, sums, s) != cudaSuccess ||
        cudaMemsetAsync(g.gl, 0, sums, s) != cudaSuccess ||
        cudaMemsetAsync(g.gs, 0, (size_t)B * T * 8, s) != cudaSuccess)
        return MAS_ERR_CUDA;
    TA *beta = (TA *)(ws + L.beta);
    for (int64_t k = L.blocks - 1; k >= 0 && st == MAS_OK; k--) {
        plan.k = g.k = k;
        plan.beta_in = beta + (size_t)((k + 1) & 1) * B * T;
        plan.beta_out = beta + (size_t)(k & 1) * B * T;
        st = block_cells(args, coef, ws + L.v, L, k, T, acc, s, error_word);
        plan.phase = FGS_ALPHA;
        if (st == MAS_OK) st = soft_launch<TA, Fwd>(plan, B, T, L.K, links, s);
        plan.phase = FGS_POSTERIOR;
        if (st == MAS_OK) st = soft_launch<TA, Bwd>(plan, B, T, L.K, links, s);
        if (st != MAS_OK) break;
        grad_launch<TA>(g, B, want_x, want_tok, s);
    }
    if (st != MAS_OK) return st;
    const int64_t per_item = 32;
    if (want_tok)
        fgs_token_out<TA><<<dim3((unsigned)per_item, (unsigned)B), 256, 0, s>>>(
            g, prm.means, out->grad_means, out->grad_spread, prm.spread_kind == MAS_SPREAD_VARIANCE);
    if (want_x) fgs_frame_zeros<TA><<<dim3((unsigned)per_item, (unsigned)B), 256, 0, s>>>(g);
    return cudaGetLastError() == cudaSuccess ? MAS_OK : MAS_ERR_CUDA;
}

} // namespace

extern "C" size_t mas_forward_sum_gaussian_cuda_workspace_size(const mas_gauss_align_args *args) {
    FgsLayout L;
    mas_gauss_align_shape sh;
    return fgs_layout(args, &L, &sh);
}

extern "C" mas_status mas_forward_sum_gaussian_cuda(const mas_gauss_align_args *args,
                                                    const mas_gauss_soft_outputs *out,
                                                    void *workspace, size_t workspace_size,
                                                    void *stream, uint64_t *error_word) {
    mas_gauss_align_shape sh;
    mas_status st = mas_gauss_align_check_call(args, &sh);
    if (st != MAS_OK) return st;
    const int32_t acc = mas_accum_dtype(args->x.dtype);
    if ((st = mas_gauss_soft_check_outputs(out, workspace, &sh, acc)) != MAS_OK) return st;
    FgsLayout L;
    const size_t need = fgs_layout(args, &L, &sh);
    if (need == SIZE_MAX || workspace_size < need) return MAS_ERR_WORKSPACE_TOO_SMALL;
    if (sh.batch == 0) return MAS_OK;
    if (sh.tokens < 1 || sh.frames < 1 || sh.tokens > INT32_MAX / 2 || sh.dim > (1 << 20))
        return MAS_ERR_BAD_SHAPE;
    cudaStream_t s = (cudaStream_t)stream;
    unsigned char *ws = align_workspace(workspace);
    const int64_t T = sh.tokens, J = sh.dim;
    const int64_t pitch = coef_pitch(T);
    const mas_tensor3 coef = make_tensor3(ws + L.coef, acc, sh.model_batch, 2 * J + 1, T,
                                          (2 * J + 1) * pitch, pitch, 1);
    st = mas_gauss_coef_cuda(&args->params, &coef, stream, error_word);
    if (st != MAS_OK) return st;
    if (acc == MAS_FLOAT64) return run<double>(args, out, sh, L, coef, ws, s, error_word);
    return run<float>(args, out, sh, L, coef, ws, s, error_word);
}
