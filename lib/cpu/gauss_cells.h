/* Cells of the fused Gaussian likelihood + alignment ops (mas.h section 8):
 * the log-likelihood of frame t under token s's diagonal Gaussian, computed
 * tile by tile where the DP sweep asks for it (dp_cell_source), never
 * written as a matrix. The score of each cell is the micro-kernel of the
 * likelihood kernel (likelihood_micro.h) on the same expanded frames and
 * the same coefficients, so it has the bits mas_loglik_cpu stores.
 *
 * One item's sources are prepared once per item and direction:
 *   e:  its frames expanded by lk_expand (the sweep's step t is frame t, or
 *       frame Y-1-t for the reversed walk of forward-sum),
 *   cp: its tokens' coefficients packed [G-block][P][G] (the sweep's state s
 *       is token s, or X-1-s reversed), zeros past the tokens,
 * and the cell source's fill() runs the micro-kernel on each G-block x
 * frame-tile piece that meets the band, writing -inf elsewhere. */
#ifndef MAS_CPU_GAUSS_CELLS_H
#define MAS_CPU_GAUSS_CELLS_H

#include <stdint.h>

#include "cpu/likelihood.h"

typedef struct gc_item {
    const void *e;  /* expanded frames (accumulator type) */
    const void *cp; /* packed coefficients (accumulator type) */
    int64_t dim;    /* J */
} gc_item;

/* dp_cell_source.fill for a gc_item context, per accumulator type and
 * instruction set. */
#define GC_DECLARE(isa)                                                                     \
    void gc_fill_f32_##isa(const void *ctx, int64_t s0, int64_t lanes, int64_t t0,          \
                           int64_t steps, int64_t band, int64_t diag, void *dst, int64_t ld); \
    void gc_fill_f64_##isa(const void *ctx, int64_t s0, int64_t lanes, int64_t t0,          \
                           int64_t steps, int64_t band, int64_t diag, void *dst, int64_t ld); \
    void gc_expand_f32_##isa(const char *xb, int32_t dtype, int64_t off0, int64_t stride_n,  \
                             int64_t stride_j, int64_t J, int64_t nv, int64_t ld, void *e);  \
    void gc_expand_f64_##isa(const char *xb, int32_t dtype, int64_t off0, int64_t stride_n,  \
                             int64_t stride_j, int64_t J, int64_t nv, int64_t ld, void *e);
GC_DECLARE(avx512)
GC_DECLARE(avx2)
GC_DECLARE(sse2)
#undef GC_DECLARE

#endif
