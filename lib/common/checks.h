/* Argument checks shared by every entry point, CPU and CUDA, so that both
 * backends reject the same calls with the same status, in the same order.
 * Plain C, includable from CUDA sources. */
#ifndef MAS_COMMON_CHECKS_H
#define MAS_COMMON_CHECKS_H

#include <math.h>
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

/* ---- Likelihoods (mas.h section 6): host-side checks shared by the CPU and
 * CUDA entry points. Neither reads a value behind a pointer. ---- */

/* Everything about a mas_gauss_coef_* call that can be checked without its
 * values: NULLs, dtypes (parameters any float, coef float32/float64), the
 * spread kind, and shapes: spread like means [B or 1, M, J], log_weights
 * [means' B, 1, M], coef [means' B, 2J+1, M]. */
static inline mas_status mas_gauss_coef_check_call(const mas_gauss_params *params,
                                                   const mas_tensor3 *coef) {
    if (!params || !coef) return MAS_ERR_NULL_POINTER;
    mas_status st = mas_check_tensor(&params->means, MAS_ANY_FLOAT);
    if (st == MAS_OK) st = mas_check_tensor(&params->spread, MAS_ANY_FLOAT);
    if (st == MAS_OK && params->log_weights.data)
        st = mas_check_tensor(&params->log_weights, MAS_ANY_FLOAT);
    if (st == MAS_OK) st = mas_check_tensor(coef, MAS_ANY_FLOAT);
    if (st != MAS_OK) return st;
    if (coef->dtype != MAS_FLOAT32 && coef->dtype != MAS_FLOAT64) return MAS_ERR_BAD_DTYPE;
    if (params->spread_kind != MAS_SPREAD_VARIANCE && params->spread_kind != MAS_SPREAD_LOG_STD)
        return MAS_ERR_BAD_ARGUMENT;
    const int64_t *d = params->means.dim;
    if (!mas_same_dims(&params->spread, &params->means)) return MAS_ERR_BAD_SHAPE;
    if (params->log_weights.data &&
        (params->log_weights.dim[0] != d[0] || params->log_weights.dim[1] != 1 ||
         params->log_weights.dim[2] != d[1]))
        return MAS_ERR_BAD_SHAPE;
    if (d[2] > (INT64_MAX - 1) / 2) return MAS_ERR_BAD_SHAPE;
    if (coef->dim[0] != d[0] || coef->dim[1] != 2 * d[2] + 1 || coef->dim[2] != d[1])
        return MAS_ERR_BAD_SHAPE;
    return MAS_OK;
}

/* Everything about a fused Gaussian alignment call (mas.h section 8) that
 * can be checked without its values, in the order of the CPU entry points:
 * NULLs, x's dtype, the parameters as mas_gauss_coef_* checks them against
 * coefficients [means' B, 2J+1, T] of x's accumulator type (J from x), then
 * means' J against x's and means' batch (1 or B). Fills *shape. */
typedef struct mas_gauss_align_shape {
    int64_t batch, tokens, frames, dim, model_batch; /* B, T, S, J, means' B */
} mas_gauss_align_shape;

static inline mas_status mas_gauss_align_check_call(const mas_gauss_align_args *a,
                                                    mas_gauss_align_shape *shape) {
    if (!a || !a->x_len || !a->y_len) return MAS_ERR_NULL_POINTER;
    mas_status st = mas_check_tensor(&a->x, MAS_ANY_FLOAT);
    if (st != MAS_OK) return st;
    const mas_tensor3 *m = &a->params.means;
    shape->batch = a->x.dim[0];
    shape->frames = a->x.dim[1];
    shape->dim = a->x.dim[2];
    shape->tokens = m->dim[1];
    shape->model_batch = m->dim[0];
    if (shape->dim > (INT64_MAX - 1) / 2) return MAS_ERR_BAD_SHAPE;
    mas_tensor3 coef;
    coef.data = a->x.data; /* a non-NULL marker: the checks read no value */
    coef.dtype = mas_accum_dtype(a->x.dtype);
    coef.reserved_ = 0;
    coef.stride[0] = coef.stride[1] = coef.stride[2] = 0;
    coef.dim[0] = shape->model_batch;
    coef.dim[1] = 2 * shape->dim + 1;
    coef.dim[2] = shape->tokens;
    st = mas_gauss_coef_check_call(&a->params, &coef);
    if (st != MAS_OK) return st;
    if (m->dim[2] != shape->dim || (shape->model_batch != 1 && shape->model_batch != shape->batch))
        return MAS_ERR_BAD_SHAPE;
    if (a->precision < MAS_PRECISION_DEFAULT || a->precision > MAS_PRECISION_BF16)
        return MAS_ERR_BAD_ARGUMENT;
    return MAS_OK;
}

/* The outputs of a fused forward-sum call (mas_gauss_soft_outputs) against
 * the checked shape, in the CPU op's order: NULL out or workspace, nothing
 * wanted, then each gradient's dtype (the accumulator's) and shape. */
static inline mas_status mas_gauss_soft_check_outputs(const mas_gauss_soft_outputs *out,
                                                      const void *workspace,
                                                      const mas_gauss_align_shape *sh,
                                                      int32_t accum) {
    if (!out || !workspace) return MAS_ERR_NULL_POINTER;
    if (!out->log_z && !out->grad_x.data && !out->grad_means.data && !out->grad_spread.data)
        return MAS_ERR_BAD_ARGUMENT;
    const mas_tensor3 *grads[3] = {&out->grad_x, &out->grad_means, &out->grad_spread};
    for (int k = 0; k < 3; k++) {
        if (!grads[k]->data) continue;
        mas_status st = mas_check_tensor(grads[k], accum);
        if (st != MAS_OK) return st;
        const int64_t rows = k == 0 ? sh->frames : sh->tokens;
        if (grads[k]->dim[0] != sh->batch || grads[k]->dim[1] != rows ||
            grads[k]->dim[2] != sh->dim)
            return MAS_ERR_BAD_SHAPE;
    }
    return MAS_OK;
}

/* Everything about a mas_loglik_* call that can be checked without its
 * values: NULLs, dtypes (x any float; coef and out of x's accumulator type,
 * best int32), flags and precision, and shapes: coef [B or 1, 2J+1, M] for
 * x [B, N, J], n_states >= 1 (= M when offsets is NULL), out and best
 * [B, N, n_states], M < 2^31 when best is wanted (its indices are int32),
 * mixture_size 0 or M / n_states with offsets given. Offsets and lengths
 * are values (device memory on CUDA). */
static inline mas_status mas_loglik_check_call(const mas_loglik_args *args) {
    if (!args) return MAS_ERR_NULL_POINTER;
    mas_status st = mas_check_tensor(&args->x, MAS_ANY_FLOAT);
    if (st != MAS_OK) return st;
    int32_t acc = mas_accum_dtype(args->x.dtype);
    st = mas_check_tensor(&args->coef, acc);
    if (st == MAS_OK) st = mas_check_tensor(&args->out, acc);
    if (st == MAS_OK && args->best.data) st = mas_check_tensor(&args->best, MAS_INT32);
    if (st != MAS_OK) return st;
    if ((args->flags & ~MAS_LOGLIK_MAX) != 0u || args->precision < MAS_PRECISION_DEFAULT ||
        args->precision > MAS_PRECISION_BF16)
        return MAS_ERR_BAD_ARGUMENT;
    const int64_t *x = args->x.dim;
    if (x[2] > (INT64_MAX - 1) / 2) return MAS_ERR_BAD_SHAPE;
    if (args->coef.dim[1] != 2 * x[2] + 1) return MAS_ERR_BAD_SHAPE;
    if (args->coef.dim[0] != 1 && args->coef.dim[0] != x[0]) return MAS_ERR_BAD_SHAPE;
    if (args->n_states < 1 || args->n_states > args->coef.dim[2]) return MAS_ERR_BAD_SHAPE;
    if (!args->offsets && args->n_states != args->coef.dim[2]) return MAS_ERR_BAD_SHAPE;
    if (args->out.dim[0] != x[0] || args->out.dim[1] != x[1] ||
        args->out.dim[2] != args->n_states)
        return MAS_ERR_BAD_SHAPE;
    if (args->best.data && !mas_same_dims(&args->best, &args->out)) return MAS_ERR_BAD_SHAPE;
    if (args->best.data && args->coef.dim[2] > INT32_MAX) return MAS_ERR_BAD_SHAPE; /* int32 */
    /* a stated mixture size must give M (offsets are values: the kernels) */
    if (args->mixture_size < 0 ||
        (args->mixture_size > 0 &&
         (!args->offsets || args->coef.dim[2] / args->mixture_size != args->n_states ||
          args->coef.dim[2] % args->mixture_size != 0)))
        return MAS_ERR_BAD_ARGUMENT;
    return MAS_OK;
}

/* ---- Topologies (mas.h section 7): the checks of a call that need no item
 * values, shared by the CPU and CUDA entry points. ---- */

/* The longest skip edge a topology may have (s-d -> s, d <= this). */
#define MAS_TOPO_MAX_SKIP 8

static inline mas_status mas_topo_check_args(const mas_topo_args *a) {
    if (!a || !a->token_len || !a->frame_len) return MAS_ERR_NULL_POINTER;
    const mas_topology *t = &a->topology;
    mas_status st = mas_check_tensor(&a->emissions, MAS_ANY_FLOAT);
    if (st != MAS_OK) return st;
    if (t->states_per_token < 1 || a->tokens < 0 || a->reserved_ != 0)
        return MAS_ERR_BAD_ARGUMENT;
    int skips = t->skip_penalty > -INFINITY;
    if (skips && (t->has_blank || t->states_per_token + 1 > MAS_TOPO_MAX_SKIP))
        return MAS_ERR_BAD_ARGUMENT;
    if (t->skip_penalty != t->skip_penalty || t->skip_penalty == INFINITY)
        return MAS_ERR_BAD_ARGUMENT;
    for (int32_t j = 0; j < t->states_per_token; j++) {
        double s = t->stay ? t->stay[j] : 0, m = t->advance ? t->advance[j] : 0;
        if (s != s || m != m || s == INFINITY || m == INFINITY) return MAS_ERR_BAD_ARGUMENT;
    }
    if (t->has_blank) {
        double s = t->blank_stay, m = t->blank_advance;
        if (s != s || m != m || s == INFINITY || m == INFINITY) return MAS_ERR_BAD_ARGUMENT;
    }
    if ((a->gathered || t->has_blank) && !a->labels) return MAS_ERR_NULL_POINTER;
    if (a->gathered && t->has_blank && (t->blank < 0 || t->blank >= a->emissions.dim[2]))
        return MAS_ERR_BAD_ARGUMENT;
    return MAS_OK;
}

#endif
