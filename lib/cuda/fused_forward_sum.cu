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
 *     leaving beta~'s column for the block before; then two kernels weigh
 *     the Gaussians' derivatives with gamma: per frame (d log_z / dx,
 *     written) and per token (summed over the blocks in float64, written at
 *     the end).
 * A resumed sweep hands on the very edges the whole sweep would, so log_z
 * is the unfused CUDA path's (mas_forward_sum_cuda on mas_loglik_cuda's
 * matrix) bit for bit. Memory: three blocks [B, K, T] with K ~ 6 sqrt(S)
 * in whole units of the cell kernel, the checkpoints, two columns, mu and
 * 1/var [B, T, J] and the float64 token sums [B, T, 2J+1] (mas.h has the
 * total).
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
    size_t coef, status, log_z, ckpt, beta, v, alpha, gamma, mu, inv, gm, gl, gs, seg;
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
    L->gamma = take(block);
    L->mu = take((size_t)Bm * (size_t)T * (size_t)J * es);
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
    const TA *mu, *inv;      /* [model batch][T][J] */
    int64_t ms;              /* item stride of mu and inv (0: one model) */
    const int64_t *x_len, *y_len;
    const int32_t *status;
    int64_t k, K, T, S, J;
    double *gm, *gl, *gs;    /* [B][T][J], [B][T][J], [B][T] */
    TA *gx;                  /* d log_z / dx, [B, S, J] view */
    int64_t gx0, gx1, gx2;
};

/* mu and 1/var of every token and dimension, as the CPU op takes them
 * (exp(-2 log_std) or 1/var in float64), rounded to the accumulator type. */
template <typename TA>
__global__ void fgs_params(mas_gauss_params prm, int64_t s0, int64_t s1, int64_t s2, int64_t p0,
                           int64_t p1, int64_t p2, int64_t T, int64_t J, TA *mu, TA *inv) {
    const int64_t n = prm.means.dim[0] * T * J;
    for (int64_t g = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; g < n;
         g += (int64_t)gridDim.x * blockDim.x) {
        const int64_t b = g / (T * J), i = g / J % T, d = g % J;
        const double m = load_elem<double>(prm.means.data, prm.means.dtype, b * s0 + i * s1 + d * s2);
        const double sp = load_elem<double>(prm.spread.data, prm.spread.dtype, b * p0 + i * p1 + d * p2);
        mu[g] = (TA)m;
        inv[g] = (TA)(prm.spread_kind == MAS_SPREAD_LOG_STD ? exp(-2.0 * sp) : 1.0 / sp);
    }
}

/* The gradient kernels' tiles: a block holds 8 warps; lane l takes the
 * dimensions d0 + l + 32q, q < Q, of a pass (Q = 1..4 as J needs: J = 80
 * takes Q = 3), warp w rows w, w + 8, ... of the tile; what the rows meet
 * (tokens for a frame, frames for a token) goes through shared memory 32
 * at a time, so that a token's mu and 1/var, or a frame's x, is read from
 * memory once a tile, not once a row. The sums run in the accumulator type
 * over one item's block of frames (frames: over its tokens), then go to
 * float64. Two or three blocks a multiprocessor, so that one loads its
 * chunk while another computes (three for the frame kernel: its grid, a
 * block per 32 frames of every item, would take 1.1 waves of two). */
constexpr int kGradChunk = 32;

/* d log_z / dx of 32 frames of the block (4 a warp), the band's tokens in
 * order:  dx_j = sum_i gamma(i, j) / var_i (mu_i - x_j)
 *              = sum_i gamma mu_i / var_i  -  x_j sum_i gamma / var_i,
 * two fmas a token and dimension (the cancellation when x_j ~ mu_i costs
 * eps |mu| / |mu - x| of relative error, in float32 ~1e-6 at |mu - x| ~
 * 0.1 |mu|; the CPU takes the difference first). */
constexpr int kFrameTile = 32;
template <typename TA, int Q>
__global__ void __launch_bounds__(256, 3) fgs_frame_grads(FgsGrad<TA> g) {
    constexpr int D = 32 * Q, R = kFrameTile / 8;
    __shared__ TA gam_s[kGradChunk][kFrameTile + 1]; /* [token][frame] */
    __shared__ TA mv_s[kGradChunk][D], inv_s[kGradChunk][D]; /* mu / var, 1 / var */
    const int64_t b = blockIdx.y;
    if (g.status[b] != MAS_OK) return;
    const int64_t X = g.x_len[b], Y = g.y_len[b], f0 = g.k * g.K;
    const int64_t n = Y - f0 < g.K ? Y - f0 : g.K, t0 = (int64_t)blockIdx.x * kFrameTile;
    if (t0 >= n) return; /* uniform over the block */
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int64_t nf = n - t0 < kFrameTile ? n - t0 : kFrameTile, jfirst = f0 + t0;
    const int64_t ilo = jfirst - (Y - X) > 0 ? jfirst - (Y - X) : 0;
    const int64_t ihi = jfirst + nf - 1 < X - 1 ? jfirst + nf - 1 : X - 1;
    const TA *gam = g.gamma + (size_t)b * g.K * g.T;
    const TA *mu = g.mu + b * g.ms, *inv = g.inv + b * g.ms;
    for (int64_t d0 = 0; d0 < g.J; d0 += D) {
        TA s_mv[R][Q] = {}, s_inv[R][Q] = {};
        for (int64_t i0 = ilo; i0 <= ihi; i0 += kGradChunk) {
            const int ni = ihi - i0 + 1 < kGradChunk ? (int)(ihi - i0 + 1) : kGradChunk;
            __syncthreads(); /* the last chunk is read */
            for (int e = tid; e < kGradChunk * kFrameTile; e += 256) {
                const int f = e / kGradChunk, i = e % kGradChunk;
                gam_s[i][f] = i < ni && f < nf ? gam[(t0 + f) * g.T + i0 + i] : (TA)0;
            }
            for (int e = tid; e < kGradChunk * D; e += 256) {
                const int i = e / D, dd = e % D;
                const bool in = i < ni && d0 + dd < g.J;
                const TA v = in ? inv[(i0 + i) * g.J + d0 + dd] : (TA)0;
                mv_s[i][dd] = in ? mu[(i0 + i) * g.J + d0 + dd] * v : (TA)0;
                inv_s[i][dd] = v;
            }
            __syncthreads();
            for (int i = 0; i < ni; i++) {
                TA gv[R];
#pragma unroll
                for (int r = 0; r < R; r++) gv[r] = gam_s[i][warp + 8 * r];
#pragma unroll
                for (int q = 0; q < Q; q++) {
                    const TA mv = mv_s[i][lane + 32 * q], v = inv_s[i][lane + 32 * q];
#pragma unroll
                    for (int r = 0; r < R; r++) {
                        s_mv[r][q] += gv[r] * mv;
                        s_inv[r][q] += gv[r] * v;
                    }
                }
            }
        }
#pragma unroll
        for (int r = 0; r < R; r++)
#pragma unroll
            for (int q = 0; q < Q; q++) {
                const int64_t f = warp + 8 * r, d = d0 + lane + 32 * q;
                if (f < nf && d < g.J) {
                    const double x = load_elem<double>(g.x, g.x_dtype,
                                                       b * g.xs0 + (jfirst + f) * g.xs1 + d * g.xs2);
                    g.gx[b * g.gx0 + (jfirst + f) * g.gx1 + d * g.gx2] =
                        (TA)((double)s_mv[r][q] - x * (double)s_inv[r][q]);
                }
            }
    }
}

/* The block's share of the token sums for 32 tokens (4 a warp), their band
 * frames of the block in order:
 *   gm += 1/var sum gamma (x - mu),  gl += 1/var sum gamma (x - mu)^2,
 *   gs += sum gamma. */
constexpr int kTokenTile = 32;
template <typename TA, int Q>
__global__ void __launch_bounds__(256, 2) fgs_token_sums(FgsGrad<TA> g) {
    constexpr int D = 32 * Q, R = kTokenTile / 8;
    __shared__ TA gam_s[kGradChunk][kTokenTile + 1]; /* [frame][token] */
    __shared__ TA x_s[kGradChunk][D];                /* [frame][dimension] */
    const int64_t b = blockIdx.y;
    if (g.status[b] != MAS_OK) return;
    const int64_t X = g.x_len[b], Y = g.y_len[b], f0 = g.k * g.K;
    const int64_t i0 = (int64_t)blockIdx.x * kTokenTile;
    if (f0 >= Y || i0 >= X) return; /* uniform over the block */
    const int64_t n = Y - f0 < g.K ? Y - f0 : g.K, ni = X - i0 < kTokenTile ? X - i0 : kTokenTile;
    const int64_t jlo = i0 > f0 ? i0 : f0;
    const int64_t jhi = i0 + ni - 1 + (Y - X) < f0 + n - 1 ? i0 + ni - 1 + (Y - X) : f0 + n - 1;
    if (jlo > jhi) return;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const TA *gam = g.gamma + (size_t)b * g.K * g.T;
    /* x tiles along its contiguous axis: frames (Glow-TTS z) or dimensions */
    const bool frames_fast = (g.xs1 < 0 ? -g.xs1 : g.xs1) <= (g.xs2 < 0 ? -g.xs2 : g.xs2);
    for (int64_t d0 = 0; d0 < g.J; d0 += D) {
        TA m[R][Q], v[R][Q], a1[R][Q] = {}, a2[R][Q] = {}, s0[R] = {};
#pragma unroll
        for (int r = 0; r < R; r++)
#pragma unroll
            for (int q = 0; q < Q; q++) {
                const int64_t i = warp + 8 * r, d = d0 + lane + 32 * q;
                const bool in = i < ni && d < g.J;
                m[r][q] = in ? g.mu[b * g.ms + (i0 + i) * g.J + d] : (TA)0;
                v[r][q] = in ? g.inv[b * g.ms + (i0 + i) * g.J + d] : (TA)0;
            }
        for (int64_t j0 = jlo; j0 <= jhi; j0 += kGradChunk) {
            const int nf = jhi - j0 + 1 < kGradChunk ? (int)(jhi - j0 + 1) : kGradChunk;
            __syncthreads(); /* the last chunk is read */
            for (int e = tid; e < kGradChunk * kTokenTile; e += 256) {
                const int f = e / kTokenTile, i = e % kTokenTile;
                gam_s[f][i] = f < nf && i < ni ? gam[(j0 - f0 + f) * g.T + i0 + i] : (TA)0;
            }
            for (int e = tid; e < kGradChunk * D; e += 256) {
                const int f = frames_fast ? e % kGradChunk : e / D;
                const int dd = frames_fast ? e / kGradChunk : e % D;
                x_s[f][dd] = f < nf && d0 + dd < g.J
                                 ? load_elem<TA>(g.x, g.x_dtype,
                                                 b * g.xs0 + (j0 + f) * g.xs1 + (d0 + dd) * g.xs2)
                                 : (TA)0;
            }
            __syncthreads();
            for (int f = 0; f < nf; f++) {
                TA gv[R];
#pragma unroll
                for (int r = 0; r < R; r++) gv[r] = gam_s[f][warp + 8 * r];
                if (d0 == 0)
#pragma unroll
                    for (int r = 0; r < R; r++) s0[r] += gv[r];
#pragma unroll
                for (int q = 0; q < Q; q++) {
                    const TA xv = x_s[f][lane + 32 * q];
#pragma unroll
                    for (int r = 0; r < R; r++) {
                        const TA diff = xv - m[r][q], t = gv[r] * diff;
                        a1[r][q] += t;
                        a2[r][q] += t * diff;
                    }
                }
            }
        }
#pragma unroll
        for (int r = 0; r < R; r++) {
            const int64_t i = warp + 8 * r;
            if (i >= ni) continue;
            const size_t at = ((size_t)b * g.T + i0 + i) * g.J;
#pragma unroll
            for (int q = 0; q < Q; q++) {
                const int64_t d = d0 + lane + 32 * q;
                if (d < g.J) {
                    g.gm[at + d] += (double)v[r][q] * (double)a1[r][q];
                    g.gl[at + d] += (double)v[r][q] * (double)a2[r][q];
                }
            }
            if (d0 == 0 && lane == 0) g.gs[(size_t)b * g.T + i0 + i] += (double)s0[r];
        }
    }
}

/* The outputs of the token sums (zeros beyond x_len and for a failed
 * item): d/dmu = gm, d/dlog_std = gl - gs, d/dvar = (gl - gs) / (2 var). */
template <typename TA>
__global__ void fgs_token_out(FgsGrad<TA> g, mas_tensor3 om, mas_tensor3 os, int variance) {
    const int64_t b = blockIdx.y;
    const bool live = g.status[b] == MAS_OK;
    const int64_t X = g.x_len[b];
    for (int64_t r = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; r < g.T * g.J;
         r += (int64_t)gridDim.x * blockDim.x) {
        const int64_t i = r / g.J, d = r % g.J;
        const bool in = live && i < X;
        const size_t at = (size_t)b * g.T * g.J + r;
        if (om.data) {
            TA *o = (TA *)om.data + b * om.stride[0] + i * om.stride[1] + d * om.stride[2];
            *o = in ? (TA)g.gm[at] : (TA)0;
        }
        if (os.data) {
            double v = 0;
            if (in) {
                v = g.gl[at] - g.gs[(size_t)b * g.T + i];
                if (variance) v *= 0.5 * (double)g.inv[b * g.ms + i * g.J + d];
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

/* The frame (d/dx) or token kernel with the dimensions a lane that J needs. */
template <typename TA, bool FRAMES>
void grad_launch(const FgsGrad<TA> &g, int64_t J, dim3 grid, cudaStream_t s) {
    /* float64 tiles of more than 64 dimensions overflow the registers and
     * the static shared memory: more passes instead */
    constexpr int most = sizeof(TA) == 8 ? 2 : 4;
    const int q = J > 32 * most ? most : (int)((J + 31) / 32);
    auto go = [&](auto kernel) { kernel<<<grid, 256, 0, s>>>(g); };
    switch (q) {
    case 1: FRAMES ? go(fgs_frame_grads<TA, 1>) : go(fgs_token_sums<TA, 1>); break;
    case 2: FRAMES ? go(fgs_frame_grads<TA, 2>) : go(fgs_token_sums<TA, 2>); break;
    case 3:
        FRAMES ? go(fgs_frame_grads<TA, 3 < most ? 3 : most>)
               : go(fgs_token_sums<TA, 3 < most ? 3 : most>);
        break;
    default: FRAMES ? go(fgs_frame_grads<TA, most>) : go(fgs_token_sums<TA, most>); break;
    }
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
    g.mu = (const TA *)(ws + L.mu);
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
            J, (TA *)(ws + L.mu), (TA *)(ws + L.inv));
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
        const unsigned frame_tiles = (unsigned)((L.K + kFrameTile - 1) / kFrameTile);
        const unsigned token_tiles = (unsigned)((T + kTokenTile - 1) / kTokenTile);
        if (want_x) grad_launch<TA, true>(g, J, dim3(frame_tiles, (unsigned)B), s);
        if (want_tok) grad_launch<TA, false>(g, J, dim3(token_tiles, (unsigned)B), s);
    }
    if (st != MAS_OK) return st;
    const int64_t per_item = 32;
    if (want_tok)
        fgs_token_out<TA><<<dim3((unsigned)per_item, (unsigned)B), 256, 0, s>>>(
            g, out->grad_means, out->grad_spread, prm.spread_kind == MAS_SPREAD_VARIANCE);
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
