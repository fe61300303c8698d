/* The CPU log-likelihood kernel (mas.h section 6): one design, compiled once
 * per instruction set (likelihood_{f32,f64}_{avx512,avx2,sse2}.c include
 * likelihood_impl.h) and picked at run time by likelihood.c.
 *
 * The work of a call is cut into units: (item b, a block of frames, a group of
 * whole states). A unit
 *   - expands its frames once into rows e[r][f] = x_f, x_f^2 (accumulator
 *     type, zero-padded to whole tiles);
 *   - walks its Gaussians in chunks that end on state boundaries (a state
 *     larger than a chunk is split, carrying a running (max, sum, best));
 *   - packs each chunk's coefficients in the order the micro-kernel reads
 *     them, [G-block][P][G], and for each tile of frames computes the scores of
 *     the chunk's Gaussians, frames in SIMD lanes and G Gaussians broadcast,
 *     with the fma chain of mas.h;
 *   - log-adds (or maxes) each state's scores across lanes before writing the
 *     state's outputs, so no per-Gaussian score ever leaves the thread.
 */
#ifndef MAS_CPU_LIKELIHOOD_H
#define MAS_CPU_LIKELIHOOD_H

#include <stddef.h>
#include <stdint.h>

#include "mas.h"

/* The register tile of one instruction set: ft frames (SIMD lanes times
 * vectors) by g Gaussians. */
typedef struct lk_geometry {
    int64_t ft;
    int64_t g;
} lk_geometry;

typedef struct lk_job {
    const mas_loglik_args *a;
    int64_t batch, frames, dim, rows, gaussians, states; /* B, N, J, P = 2J+1, M, S */
    const int64_t *offsets;  /* NULL: one Gaussian per state */
    int want_max, want_best;
    lk_geometry geo;
    int64_t block;            /* frames per unit, a multiple of geo.ft */
    int64_t chunk;            /* Gaussians per chunk, a multiple of geo.g */
    int64_t n_blocks;         /* per item */
    int64_t n_groups;         /* state groups per item */
    char *workspace;          /* aligned */
    size_t per_thread;        /* bytes of one thread's slice, a cache-line multiple */
} lk_job;

/* Bytes of one thread's slice for these sizes (elements of `real_size` bytes). */
size_t lk_thread_bytes(int64_t rows, int64_t block, int64_t chunk, lk_geometry geo,
                       size_t real_size);

/* Runs one unit on the thread's slice `ws`. */
typedef void (*lk_unit_fn)(const lk_job *job, int64_t unit, char *ws);

#define LK_DECLARE(isa)                                              \
    void lk_geometry_f32_##isa(lk_geometry *g);                      \
    void lk_geometry_f64_##isa(lk_geometry *g);                      \
    void lk_unit_f32_##isa(const lk_job *job, int64_t unit, char *ws); \
    void lk_unit_f64_##isa(const lk_job *job, int64_t unit, char *ws);
LK_DECLARE(avx512)
LK_DECLARE(avx2)
LK_DECLARE(sse2)
#undef LK_DECLARE

#endif
