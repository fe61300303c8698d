/* What the fused Gaussian ops (mas.h section 8) share on the CPU: the
 * argument checks, the coefficients of every token (mas_gauss_coef_cpu, the
 * bits gaussian_loglik uses), and the per-item preparation of a cell source
 * (gauss_cells.h) for the forward or the reversed walk. */
#ifndef MAS_CPU_FUSED_GAUSS_H
#define MAS_CPU_FUSED_GAUSS_H

#include <stddef.h>
#include <stdint.h>

#include "cpu/dp_core.h"
#include "cpu/gauss_cells.h"
#include "mas.h"

typedef struct fg_plan {
    const mas_gauss_align_args *a;
    int64_t batch, tokens, frames, dim, rows; /* B, T, S, J, P = 2J+1 */
    int64_t model_batch;                      /* means' B: 1 or B */
    int32_t accum;
    size_t acc; /* bytes of one accumulator */
    lk_geometry geo;
    void (*fill)(const void *, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, void *,
                 int64_t);
    void (*expand)(const char *, int32_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                   void *);
    size_t coef_bytes;   /* [model_batch, P, T], cache-line multiple */
    size_t e_bytes;      /* one item's expanded frames, cache-line multiple */
    size_t cp_bytes;     /* one item's packed coefficients, cache-line multiple */
} fg_plan;

/* Checks the arguments (not their values) and fills *plan. */
mas_status fg_plan_call(const mas_gauss_align_args *a, fg_plan *plan);

/* The coefficients of every token into coef (plan->coef_bytes, aligned):
 * MAS_ERR_BAD_MODEL as mas_gauss_coef_cpu. */
mas_status fg_coefficients(const fg_plan *plan, void *coef, int32_t threads, mas_error *err);

/* Item b's cell source over X tokens and Y frames, into e and cp (plan's
 * sizes): the walk's state s is token s and step t frame t, or reversed
 * (token X-1-s, frame Y-1-t). *src points at *item. */
void fg_prepare(const fg_plan *plan, const void *coef, int64_t b, int64_t X, int64_t Y,
                int reversed, void *e, void *cp, gc_item *item, dp_cell_source *src);

/* Bytes of a fused call that are not a worker's: alignment slack, the
 * coefficients (first), the item statuses (after the workers). */
size_t fg_shared_bytes(const fg_plan *plan);

/* Lengths of one item against the shape (the hard-MAS rules). */
mas_status fg_check_lengths(int64_t X, int64_t Y, int64_t T, int64_t S);

#endif
