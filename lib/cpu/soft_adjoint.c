/* dp_adjoint (soft_adjoint.h), once per accumulator type.
 *
 * The row loops are branch-free so that they vectorise; GCC if-converts them
 * only without -ftrapping-math (nothing here reads the FP exception flags),
 * and builds them for AVX-512 and AVX2 as well, picked at load time. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
#endif
#include "cpu/soft_adjoint.h"

#include "cpu/soft_common.h"
#include "cpu/soft_math.h"
#include "mas.h"

#define ADJ_REAL float
#define ADJ_EXPN sm_exp_nonpos
#define ADJ_LOG1P01 sm_log1p_01
#define ADJ_FN dp_adjoint_f32
#include "cpu/soft_adjoint_impl.h"

#define ADJ_REAL double
#define ADJ_EXPN exp
#define ADJ_LOG1P01 log1p
#define ADJ_FN dp_adjoint_f64
#include "cpu/soft_adjoint_impl.h"

/* Rows of one block at one step: a, abar, x and the gradient at the step, a
 * and abar at the next; then a and abar of a block's lowest state at every
 * step. */
#define ADJ_ROWS 6

size_t dp_adjoint_workspace_size(int64_t n_steps, int32_t accum) {
    size_t acc = accum == MAS_FLOAT64 ? sizeof(double) : sizeof(float);
    return ((size_t)ADJ_ROWS * (ADJ_BLOCK + 1) + 2 * (size_t)n_steps) * acc;
}

void dp_adjoint(const dp_adjoint_problem *p, void *workspace) {
    if (p->accum == MAS_FLOAT64) dp_adjoint_f64(p, (double *)workspace);
    else dp_adjoint_f32(p, (float *)workspace);
}
