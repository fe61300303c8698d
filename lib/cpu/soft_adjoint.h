/* The adjoint (backward) sweep of the log-plus recurrence with edge weights
 * from logits (dp_core.h), shared by every monotonic-attention topology: the
 * skewed many-to-many walk is only another view.
 *
 * Forward: a(t,s) = LSE(a(t-1,s) + ws(t-1,s), a(t-1,s-1) + wm(t-1,s-1)),
 * ws = log sigmoid(x), wm = log sigmoid(-x). Given g = dL/da, the adjoint
 *   abar(t,s) = g(t,s) + abar(t+1,s) P_stay + abar(t+1,s+1) P_move,
 *   P_stay = exp(a(t,s) + ws(t,s) - a(t+1,s)),
 *   P_move = exp(a(t,s) + wm(t,s) - a(t+1,s+1)),
 * runs backwards in real (not log) space, since abar has either sign; and
 *   dL/dx(t,s) = abar(t+1,s) P_stay (1-p) - abar(t+1,s+1) P_move p,
 * p = sigmoid(x(t,s)), with 1-p = exp(wm) and p = exp(ws). Each P is a
 * probability (a(t+1,.) is a sum that contains the term), so nothing
 * overflows; where a is -inf no probability flows and the terms are 0
 * (never 0 * inf).
 *
 * Cells: 0 <= t < n_steps, 0 <= s < n_states, t - band <= s <= t. */
#ifndef MAS_CPU_SOFT_ADJOINT_H
#define MAS_CPU_SOFT_ADJOINT_H

#include <stddef.h>
#include <stdint.h>

#include "cpu/dp_core.h"

typedef struct dp_adjoint_problem {
    int64_t n_states, n_steps, band;
    int32_t accum;      /* MAS_FLOAT32 or MAS_FLOAT64 */
    dp_view logits;     /* x(t,s), any float dtype */
    dp_view alpha;      /* the forward's a(t,s), any float dtype */
    dp_view grad_alpha; /* g(t,s), any float dtype */
    void *grad_logits;  /* dL/dx(t,s) written at every cell (accumulator type) */
    int64_t grad_stride_state, grad_stride_step;
} dp_adjoint_problem;

/* States per block of the adjoint sweep. */
#define ADJ_BLOCK 64

/* Bytes of scratch dp_adjoint needs for n_steps steps. */
size_t dp_adjoint_workspace_size(int64_t n_steps, int32_t accum);

void dp_adjoint(const dp_adjoint_problem *p, void *workspace);

#endif
