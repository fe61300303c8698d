/* Argument checks shared by every entry point, CPU and CUDA, so that both
 * backends reject the same calls with the same status, in the same order.
 * Plain C, includable from CUDA sources. */
#ifndef MAS_COMMON_CHECKS_H
#define MAS_COMMON_CHECKS_H

#include <stdint.h>

#include "mas.h"

#define MAS_ANY_FLOAT (-1) /* mas_check_tensor: any of the four value dtypes */
#define MAS_ANY_DTYPE (-2) /* mas_check_tensor: any mas_dtype */

static inline int mas_is_float_dtype(int32_t dtype) {
    return dtype == MAS_FLOAT32 || dtype == MAS_FLOAT64 || dtype == MAS_FLOAT16 ||
           dtype == MAS_BFLOAT16;
}

/* The arithmetic type of an input dtype: float64 stays, the rest is float32. */
static inline int32_t mas_accum_dtype(int32_t dtype) {
    return dtype == MAS_FLOAT64 ? MAS_FLOAT64 : MAS_FLOAT32;
}

/* NULL data; a dtype other than `want` (or than any float / any dtype); a
 * size < 1. */
static inline mas_status mas_check_tensor(const mas_tensor3 *t, int32_t want) {
    if (!t->data) return MAS_ERR_NULL_POINTER;
    if (want == MAS_ANY_DTYPE ? (t->dtype < 0 || t->dtype >= MAS_DTYPE_COUNT_)
        : want == MAS_ANY_FLOAT ? !mas_is_float_dtype(t->dtype)
                                : t->dtype != want)
        return MAS_ERR_BAD_DTYPE;
    for (int k = 0; k < 3; k++)
        if (t->dim[k] < 1) return MAS_ERR_BAD_SHAPE;
    return MAS_OK;
}

static inline int mas_same_dims(const mas_tensor3 *a, const mas_tensor3 *b) {
    return a->dim[0] == b->dim[0] && a->dim[1] == b->dim[1] && a->dim[2] == b->dim[2];
}

/* Everything about a hard-MAS call that can be checked without its values. */
static inline mas_status mas_hard_check_call(const mas_tensor3 *value, const int64_t *x_len,
                                             const int64_t *y_len, const mas_hard_outputs *out) {
    if (!value || !x_len || !y_len || !out) return MAS_ERR_NULL_POINTER;
    mas_status st = mas_check_tensor(value, MAS_ANY_FLOAT);
    if (st != MAS_OK) return st;
    if (!out->path.data && !out->durations && !out->indices && !out->score)
        return MAS_ERR_BAD_ARGUMENT;
    if (out->path.data) {
        st = mas_check_tensor(&out->path, MAS_ANY_DTYPE);
        if (st != MAS_OK) return st;
        if (!mas_same_dims(&out->path, value)) return MAS_ERR_BAD_SHAPE;
    }
    return MAS_OK;
}

/* Everything about a Gaussian-coefficient call that can be checked without
 * its values: params [Bp, M, J] (Bp = B or 1), log weights [Bp, 1, M],
 * coef [Bp, 2J+1, M] of float32 or float64. */
static inline mas_status mas_gauss_coef_check_call(const mas_gauss_params *p,
                                                   const mas_tensor3 *coef) {
    if (!p || !coef) return MAS_ERR_NULL_POINTER;
    mas_status st = mas_check_tensor(&p->means, MAS_ANY_FLOAT);
    if (st == MAS_OK) st = mas_check_tensor(&p->spread, MAS_ANY_FLOAT);
    if (st == MAS_OK && p->log_weights.data) st = mas_check_tensor(&p->log_weights, MAS_ANY_FLOAT);
    if (st == MAS_OK) st = mas_check_tensor(coef, MAS_ANY_FLOAT);
    if (st != MAS_OK) return st;
    if (coef->dtype != MAS_FLOAT32 && coef->dtype != MAS_FLOAT64) return MAS_ERR_BAD_DTYPE;
    if (p->spread_kind != MAS_SPREAD_VARIANCE && p->spread_kind != MAS_SPREAD_LOG_STD)
        return MAS_ERR_BAD_ARGUMENT;
    const int64_t B = p->means.dim[0], M = p->means.dim[1], J = p->means.dim[2];
    if (!mas_same_dims(&p->means, &p->spread)) return MAS_ERR_BAD_SHAPE;
    if (p->log_weights.data &&
        (p->log_weights.dim[0] != B || p->log_weights.dim[1] != 1 || p->log_weights.dim[2] != M))
        return MAS_ERR_BAD_SHAPE;
    if (coef->dim[0] != B || coef->dim[1] != 2 * J + 1 || coef->dim[2] != M)
        return MAS_ERR_BAD_SHAPE;
    return MAS_OK;
}

/* Everything about a log-likelihood call that can be checked without its
 * values (offsets and lengths are values: checked by the backends). */
static inline mas_status mas_loglik_check_call(const mas_loglik_args *a) {
    if (!a) return MAS_ERR_NULL_POINTER;
    mas_status st = mas_check_tensor(&a->x, MAS_ANY_FLOAT);
    if (st == MAS_OK) st = mas_check_tensor(&a->coef, mas_accum_dtype(a->x.dtype));
    if (st == MAS_OK) st = mas_check_tensor(&a->out, mas_accum_dtype(a->x.dtype));
    if (st == MAS_OK && a->best.data) st = mas_check_tensor(&a->best, MAS_INT32);
    if (st != MAS_OK) return st;
    if ((a->flags & ~(uint32_t)MAS_LOGLIK_MAX) != 0 || a->precision < MAS_PRECISION_DEFAULT ||
        a->precision > MAS_PRECISION_BF16)
        return MAS_ERR_BAD_ARGUMENT;
    const int64_t B = a->x.dim[0], N = a->x.dim[1], J = a->x.dim[2], M = a->coef.dim[2];
    if (a->n_states < 1) return MAS_ERR_BAD_SHAPE;
    if (!a->offsets && a->n_states != M) return MAS_ERR_BAD_SHAPE;
    if (a->n_states > M) return MAS_ERR_BAD_SHAPE;
    if ((a->coef.dim[0] != 1 && a->coef.dim[0] != B) || a->coef.dim[1] != 2 * J + 1)
        return MAS_ERR_BAD_SHAPE;
    if (a->out.dim[0] != B || a->out.dim[1] != N || a->out.dim[2] != a->n_states)
        return MAS_ERR_BAD_SHAPE;
    if (a->best.data && (!mas_same_dims(&a->best, &a->out) || M > INT32_MAX))
        return MAS_ERR_BAD_SHAPE; /* best holds int32 Gaussian indices */
    return MAS_OK;
}

#endif
