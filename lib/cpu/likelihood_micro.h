/* The SIMD layer and the micro-kernel of the CPU log-likelihood kernel,
 * shared by every op that scores frames under diagonal Gaussians: the
 * likelihood units (likelihood_impl.h) and the fused likelihood + alignment
 * cells (gauss_cells_impl.h), so that both compute each score with the same
 * instructions in the same order and store the same bits. Before including,
 * define LK_REAL (float or double), LK_REAL_IS_DOUBLE (0 or 1) and LK_SUFFIX
 * (f32_avx2, ...).
 *
 * Bits: every score is the chain of mas.h, acc = coef[0][k], then
 * acc = fma(e[r], coef[r][k], acc) for r = 1..2J in order, with true fused
 * multiply-adds (the FMA instructions, or fmaf/fma in the SSE2 build), so a
 * state of one Gaussian gives the same bits on every ISA and on CUDA. */
#ifndef MAS_CPU_LIKELIHOOD_MICRO_H
#define MAS_CPU_LIKELIHOOD_MICRO_H

#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "common/convert.h"
#include "cpu/likelihood.h"
#include "cpu/soft_math.h"

#define LK_CAT2(a, b) a##b
#define LK_CAT(a, b) LK_CAT2(a, b)
#define LK_NAME(base) LK_CAT(base, LK_SUFFIX)

typedef LK_REAL real;

/* ---- The SIMD layer: a native vector of frames, and the few operations the
 * micro-kernel needs. ---- */
#if defined(__AVX512F__)
#  if LK_REAL_IS_DOUBLE
typedef __m512d lk_v;
#    define LK_LANES 8
#    define lk_load _mm512_loadu_pd
#    define lk_store _mm512_storeu_pd
#    define lk_set1 _mm512_set1_pd
#    define lk_fma _mm512_fmadd_pd
#  else
typedef __m512 lk_v;
#    define LK_LANES 16
#    define lk_load _mm512_loadu_ps
#    define lk_store _mm512_storeu_ps
#    define lk_set1 _mm512_set1_ps
#    define lk_fma _mm512_fmadd_ps
#  endif
#  define LK_G 12
#elif defined(__AVX2__) && defined(__FMA__)
#  if LK_REAL_IS_DOUBLE
typedef __m256d lk_v;
#    define LK_LANES 4
#    define lk_load _mm256_loadu_pd
#    define lk_store _mm256_storeu_pd
#    define lk_set1 _mm256_set1_pd
#    define lk_fma _mm256_fmadd_pd
#  else
typedef __m256 lk_v;
#    define LK_LANES 8
#    define lk_load _mm256_loadu_ps
#    define lk_store _mm256_storeu_ps
#    define lk_set1 _mm256_set1_ps
#    define lk_fma _mm256_fmadd_ps
#  endif
#  define LK_G 6
#else
/* The x86-64 baseline has no fused multiply-add instruction: lanes in an
 * array, each fused by the C library's fma/fmaf (exact by definition). */
#  define LK_LANES ((int)(16 / sizeof(real)))
typedef struct lk_v {
    real v[16 / sizeof(real)];
} lk_v;
static inline lk_v lk_load(const real *p) {
    lk_v r;
    memcpy(r.v, p, sizeof r.v);
    return r;
}
static inline void lk_store(real *p, lk_v a) { memcpy(p, a.v, sizeof a.v); }
static inline lk_v lk_set1(real x) {
    lk_v r;
    for (int l = 0; l < LK_LANES; l++) r.v[l] = x;
    return r;
}
static inline lk_v lk_fma(lk_v a, lk_v b, lk_v c) {
    for (int l = 0; l < LK_LANES; l++)
#  if LK_REAL_IS_DOUBLE
        c.v[l] = fma(a.v[l], b.v[l], c.v[l]);
#  else
        c.v[l] = fmaf(a.v[l], b.v[l], c.v[l]);
#  endif
    return c;
}
#  define LK_G 4
#endif

#define LK_FV 2                   /* vectors of frames per tile */
#define LK_FT (LK_LANES * LK_FV)  /* frames per tile */

/* ---- Element access ---- */

static inline real lk_load_x(const char *base, int64_t off, int32_t dtype) {
    switch (dtype) {
    case MAS_FLOAT64: return (real)((const double *)base)[off];
    case MAS_FLOAT16: return (real)mas_f16_to_f32(((const uint16_t *)base)[off]);
    case MAS_BFLOAT16: return (real)mas_bf16_to_f32(((const uint16_t *)base)[off]);
    default: return (real)((const float *)base)[off];
    }
}

/* Frames expanded for the micro-kernel: for nv frames starting at element
 * off0 of xb (frame k at off0 + k*stride_n, dimension j at + j*stride_j),
 * tile by tile of LK_FT frames, rows x_j then x_j^2 (each square rounded),
 * so that a tile's 2J rows of LK_FT lanes are contiguous (rows a power of
 * two apart would collide in the L1 sets): frame f of tile t0 at
 * e[t0*2J + j*LK_FT + f]. Frames from nv to ld (a multiple of LK_FT) get 0. */
static inline void lk_expand(const char *xb, int32_t dtype, int64_t off0, int64_t stride_n,
                             int64_t stride_j, int64_t J, int64_t nv, int64_t ld, real *e) {
    const int64_t R = 2 * J;
    if (dtype == MAS_FLOAT32 && stride_n == 1) {
        /* float32 frames contiguous in time (Glow-TTS's z [B, D, S]): whole
         * runs of a dimension at once, the same values as below */
        const float *xf = (const float *)xb + off0;
        for (int64_t t0 = 0; t0 < ld; t0 += LK_FT) {
            real *et = e + t0 * R;
            const int64_t n = nv - t0 < LK_FT ? (nv - t0 > 0 ? nv - t0 : 0) : LK_FT;
            for (int64_t j = 0; j < J; j++) {
                real *ex = et + j * LK_FT, *ex2 = et + (J + j) * LK_FT;
                const float *src = xf + t0 + j * stride_j;
                for (int64_t f = 0; f < n; f++) {
                    real x = (real)src[f];
                    ex[f] = x;
                    ex2[f] = x * x;
                }
                for (int64_t f = n; f < LK_FT; f++) ex[f] = ex2[f] = 0;
            }
        }
        return;
    }
    for (int64_t t0 = 0; t0 < ld; t0 += LK_FT) {
        real *et = e + t0 * R;
        for (int64_t j = 0; j < J; j++) {
            real *ex = et + j * LK_FT, *ex2 = et + (J + j) * LK_FT;
            for (int64_t f = 0; f < LK_FT; f++) {
                real x = 0;
                if (t0 + f < nv) x = lk_load_x(xb, off0 + (t0 + f) * stride_n + j * stride_j, dtype);
                ex[f] = x;
                ex2[f] = x * x;
            }
        }
    }
}

SM_NO_TRAPPING_BEGIN

/* ---- The micro-kernel: scores of G Gaussians (packed [P][G] at cp) for
 * LK_FT frames (rows of e with leading dimension ld), into sc[G][LK_FT]. */
static inline void lk_micro(const real *cp, const real *e, int64_t ld, int64_t n_rows,
                            real *sc) {
    lk_v acc[LK_G][LK_FV];
#pragma GCC unroll 16
    for (int g = 0; g < LK_G; g++)
#pragma GCC unroll 4
        for (int v = 0; v < LK_FV; v++) acc[g][v] = lk_set1(cp[g]);
    for (int64_t r = 1; r <= n_rows; r++) {
        const real *er = e + (r - 1) * ld;
        const real *c = cp + r * LK_G;
        lk_v ev[LK_FV];
#pragma GCC unroll 4
        for (int v = 0; v < LK_FV; v++) ev[v] = lk_load(er + v * LK_LANES);
#pragma GCC unroll 16
        for (int g = 0; g < LK_G; g++) {
            lk_v cb = lk_set1(c[g]);
#pragma GCC unroll 4
            for (int v = 0; v < LK_FV; v++) acc[g][v] = lk_fma(ev[v], cb, acc[g][v]);
        }
    }
#pragma GCC unroll 16
    for (int g = 0; g < LK_G; g++)
#pragma GCC unroll 4
        for (int v = 0; v < LK_FV; v++) lk_store(sc + g * LK_FT + v * LK_LANES, acc[g][v]);
}

SM_NO_TRAPPING_END

#endif
