/* Forward-sum on the CPU: the log-plus sweep of dp_core over the hard-MAS
 * path set, and the posterior from a second sweep over the reversed view.
 *
 * alpha(i,j) = log of the summed weight of the paths from (0,0) to (i,j),
 * v(i,j) included. Sweeping the same recurrence over the view that starts at
 * (X-1, Y-1) with negated strides gives beta~(i,j) = v(i,j) + LSE(beta~(i,j+1),
 * beta~(i+1,j+1)): the paths from (i,j) to the end, v(i,j) included. So
 *   gamma(i,j) = exp(alpha(i,j) + beta~(i,j) - v(i,j) - log_z).
 * alpha goes straight into the posterior array (it is of the accumulator
 * type and written in full anyway), beta~ into the worker's workspace in the
 * reversed walk's order; one pass then turns the pair into gamma. */
/* The combine loops are branch-free so that they vectorise: GCC if-converts
 * them only without -ftrapping-math (nothing here reads FP flags). */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
#endif

#include <math.h>
#include <string.h>

#include "cpu/dp_core.h"
#include "cpu/soft_common.h"
#include "cpu/soft_math.h"
#include "mas.h"

typedef struct fs_layout {
    size_t column; /* alpha's running column, whole tiles */
    size_t edge;   /* one value per frame, plus a block */
    size_t beta;   /* beta~ of one item, X*Y cells */
    size_t total;
} fs_layout;

static fs_layout layout_for(int64_t T, int64_t S, int32_t accum) {
    fs_layout w;
    size_t acc = soft_accum_size(accum);
    w.column = MAS_ALIGN_UP((size_t)MAS_ALIGN_UP(T, dp_lanes(accum)) * acc, MAS_CACHE_LINE);
    w.edge = MAS_ALIGN_UP((size_t)(S + DP_BLOCK_STEPS) * acc, MAS_CACHE_LINE);
    w.beta = MAS_ALIGN_UP((size_t)T * (size_t)S * acc, MAS_CACHE_LINE);
    w.total = w.column + w.edge + w.beta;
    return w;
}

/* With fewer items than threads and a posterior wanted, each item's two
 * sweeps (alpha and the reversed one) run on two threads at once. */
static int split_mode(int64_t batch, int32_t threads) {
    /* item b's sweeps use worker slot b: only with one slot per item (the
     * team is capped at 256 threads, so more items than that never split) */
    return mas_thread_count(threads) > batch && soft_team(batch, threads) == batch;
}

/* Bytes past the worker slots: per item a status and a log_z, then (split
 * mode) a second column and edge per item for the reversed sweeps. */
static size_t tail_bytes(int64_t batch, const fs_layout *w, int split) {
    size_t n = MAS_ALIGN_UP(MAS_ALIGN_UP((size_t)batch * sizeof(int32_t), sizeof(double)) +
                                 (size_t)batch * sizeof(double),
                             MAS_CACHE_LINE);
    return n + (split ? (size_t)batch * (w->column + w->edge) : 0);
}

size_t mas_forward_sum_cpu_workspace_size(int64_t batch, int64_t tokens, int64_t frames,
                                          mas_dtype dtype, int32_t threads) {
    if (batch < 1 || tokens < 1 || frames < 1) return 0;
    if (mas_shape_too_big(batch, tokens, frames)) return SIZE_MAX;
    fs_layout w = layout_for(tokens, frames, mas_accum_dtype(dtype));
    return MAS_CACHE_LINE + (size_t)soft_team(batch, threads) * w.total +
           tail_bytes(batch, &w, split_mode(batch, threads));
}

typedef struct fs_call {
    const mas_tensor3 *value;
    const mas_tensor3 *posterior; /* NULL when not wanted */
    const int64_t *x_len, *y_len;
    void *log_z;
    uint8_t *ws;
    fs_layout w;
    int32_t accum;
    int32_t *status;   /* [B] */
    double *item_log_z; /* [B] */
    uint8_t *extra;    /* split mode: B (column, edge) pairs */
} fs_call;

/* Row i of an item keeps columns [i, i + Y - X] (the band), for i < X. */
typedef struct band_rows {
    int64_t X, Y;
} band_rows;

static void band_kept(const void *ctx, int64_t i, int64_t *lo, int64_t *hi) {
    const band_rows *r = (const band_rows *)ctx;
    *lo = 0;
    *hi = 0;
    if (i < r->X) {
        *lo = i;
        *hi = i + r->Y - r->X + 1;
    }
}

/* The item's cells as a dp view, forwards or reversed (from (X-1, Y-1)). */
static dp_view value_view(const mas_tensor3 *v, int64_t b, int64_t X, int64_t Y, int reversed) {
    dp_view view;
    view.dtype = v->dtype;
    if (!reversed) {
        view.base = soft_at(v, b, 0, 0);
        view.stride_state = v->stride[1];
        view.stride_step = v->stride[2];
    } else {
        view.base = soft_at(v, b, X - 1, Y - 1);
        view.stride_state = -v->stride[1];
        view.stride_step = -v->stride[2];
    }
    return view;
}

/* One log-plus sweep over the whole item; returns 1 for a bad cell. */
static int sweep_item(const fs_call *c, dp_problem *p, uint8_t *base) {
    void *column = base;
    void *edge = base + c->w.column;
    soft_fill(column, c->accum, MAS_ALIGN_UP(p->n_states, dp_lanes(c->accum)), -INFINITY);
    soft_fill(edge, c->accum, p->n_steps, -INFINITY);
    soft_fill(edge, c->accum, 1, 0.0); /* the virtual start */
    return dp_sweep(p, 0, p->n_states, 0, p->n_steps, column, edge);
}

/* gamma = exp(alpha + beta~ - v - log_z) over the band, in place of alpha.
 * Where alpha or beta~ is -inf no path crosses the cell: 0 (v may be -inf
 * there too, and -inf - -inf must not appear). The exponent is a log
 * probability, <= 0 but for rounding; clamping it keeps gamma <= 1. Written
 * branch-free so that the float loop vectorises. */
#define COMBINE(REAL, EXP, VTYPE, LOAD)                                              \
    for (int64_t i = 0; i < X; i++) {                                                \
        REAL *g = (REAL *)soft_at(post, b, i, 0);                                    \
        const REAL *bt = (const REAL *)beta + (X - 1 - i) * Y + (Y - 1); /* at -j */  \
        const VTYPE *vr = (const VTYPE *)soft_at(value, b, i, 0);                    \
        int64_t hi = i + Y - X;                                                      \
        for (int64_t j = i; j <= hi; j++) {                                          \
            REAL a = g[j * gs], e = bt[-j], v = (REAL)LOAD(vr[j * vs]);              \
            REAL x = a + e - v - lz;                                                 \
            x = x > 0 ? 0 : x;                                                       \
            x = (a == -INFINITY || e == -INFINITY) ? -INFINITY : x;                  \
            g[j * gs] = EXP(x);                                                      \
        }                                                                            \
    }
#define AS_IS(x) (x)

SOFT_CLONES static void combine(const fs_call *c, int64_t b, int64_t X, int64_t Y,
                                const void *beta, double log_z) {
    const mas_tensor3 *post = c->posterior, *value = c->value;
    int64_t vs = value->stride[2], gs = post->stride[2];
    if (c->accum == MAS_FLOAT64) {
        double lz = log_z;
        COMBINE(double, exp, double, AS_IS)
        return;
    }
    float lz = (float)log_z;
    switch (value->dtype) {
    case MAS_FLOAT32: COMBINE(float, sm_exp_nonpos, float, AS_IS) break;
    case MAS_FLOAT16: COMBINE(float, sm_exp_nonpos, uint16_t, mas_f16_to_f32) break;
    case MAS_BFLOAT16: COMBINE(float, sm_exp_nonpos, uint16_t, mas_bf16_to_f32) break;
    default: break;
    }
}
#undef AS_IS
#undef COMBINE

static mas_status check_item(const fs_call *c, int64_t b) {
    int64_t T = c->value->dim[1], S = c->value->dim[2];
    int64_t X = c->x_len[b], Y = c->y_len[b];
    if (X < 1 || Y < 1 || X > T || Y > S) return MAS_ERR_BAD_LENGTH;
    if (X > Y) return MAS_ERR_X_LEN_GT_Y_LEN;
    return MAS_OK;
}

static dp_problem problem_for(const fs_call *c, int64_t b) {
    int64_t X = c->x_len[b], Y = c->y_len[b];
    dp_problem p;
    memset(&p, 0, sizeof p);
    p.n_states = X;
    p.n_steps = Y;
    p.semiring = DP_LOGPLUS;
    p.accum = c->accum;
    p.band = Y - X;
    /* cells above the diagonal (i > j) are off the band: never read;
     * every cell of the X x Y rectangle is memory, though */
    p.readable = 1;
    return p;
}

/* The alpha sweep (into the posterior when wanted): status and log_z. */
static mas_status forward_sweep(const fs_call *c, int64_t b, uint8_t *column_edge,
                                double *log_z) {
    dp_problem p = problem_for(c, b);
    p.cell = value_view(c->value, b, p.n_states, p.n_steps, 0);
    if (c->posterior) {
        p.alpha_out = soft_at(c->posterior, b, 0, 0);
        p.alpha_stride_state = c->posterior->stride[1];
        p.alpha_stride_step = c->posterior->stride[2];
    }
    int bad = sweep_item(c, &p, column_edge);
    int64_t last = p.n_states - 1;
    *log_z = c->accum == MAS_FLOAT64 ? ((double *)column_edge)[last]
                                     : ((float *)column_edge)[last];
    if (bad) return MAS_ERR_NONFINITE_VALUE;
    /* No NaN or +inf was read, so a NaN is the accumulator's overflow (+inf
     * meeting a -inf cell): the sum is too big, +inf (mas.h section 5). */
    if (*log_z != *log_z) *log_z = INFINITY;
    return *log_z == -INFINITY ? MAS_ERR_NO_FINITE_PATH : MAS_OK;
}

/* The reversed sweep: beta~ in its own order, steps contiguous, so that
 * beta~(i,j) is at beta[(X-1-i)*Y + (Y-1-j)]. */
static void reversed_sweep(const fs_call *c, int64_t b, uint8_t *column_edge, void *beta) {
    dp_problem p = problem_for(c, b);
    p.cell = value_view(c->value, b, p.n_states, p.n_steps, 1);
    p.alpha_out = beta;
    p.alpha_stride_state = p.n_steps;
    p.alpha_stride_step = 1;
    sweep_item(c, &p, column_edge);
}

/* gamma from alpha and beta~ (when OK), log_z, zeros elsewhere. */
static void finish_item(const fs_call *c, int64_t b, mas_status st, double log_z,
                        const void *beta) {
    int64_t X = c->x_len[b], Y = c->y_len[b];
    c->status[b] = st;
    if (st != MAS_OK) log_z = -INFINITY;
    if (c->log_z) soft_store(c->log_z, c->accum, b, log_z);
    if (c->posterior) {
        if (st == MAS_OK) combine(c, b, X, Y, beta, log_z);
        band_rows rows = {X, Y};
        soft_fill_item_except(c->posterior, b, 0.0, st == MAS_OK ? band_kept : NULL, &rows);
    }
}

/* One item on one thread. */
static void run_item(void *ctx, int64_t b, int32_t rank) {
    fs_call *c = (fs_call *)ctx;
    uint8_t *base = c->ws + (size_t)rank * c->w.total;
    uint8_t *beta = base + c->w.column + c->w.edge;
    double log_z = -INFINITY;
    mas_status st = check_item(c, b);
    if (st == MAS_OK) st = forward_sweep(c, b, base, &log_z);
    if (st == MAS_OK && c->posterior) reversed_sweep(c, b, base, beta);
    finish_item(c, b, st, log_z, beta);
}

/* Split mode, task 2b + phase: item b's alpha sweep (phase 0, in slot b) or
 * its reversed sweep (phase 1, beta in slot b, its own column and edge). */
static void run_sweep_task(void *ctx, int64_t task, int32_t rank) {
    (void)rank;
    fs_call *c = (fs_call *)ctx;
    int64_t b = task / 2;
    uint8_t *slot = c->ws + (size_t)b * c->w.total;
    mas_status st = check_item(c, b);
    if (task % 2 == 0) {
        double log_z = -INFINITY;
        if (st == MAS_OK) st = forward_sweep(c, b, slot, &log_z);
        c->status[b] = st;
        c->item_log_z[b] = log_z;
    } else if (st == MAS_OK) {
        reversed_sweep(c, b, c->extra + (size_t)b * (c->w.column + c->w.edge),
                       slot + c->w.column + c->w.edge);
    }
}

static void run_finish_task(void *ctx, int64_t b, int32_t rank) {
    (void)rank;
    fs_call *c = (fs_call *)ctx;
    uint8_t *slot = c->ws + (size_t)b * c->w.total;
    finish_item(c, b, (mas_status)c->status[b], c->item_log_z[b],
                slot + c->w.column + c->w.edge);
}

mas_status mas_forward_sum_cpu(const mas_tensor3 *value, const int64_t *x_len,
                               const int64_t *y_len, void *log_z,
                               const mas_tensor3 *posterior, void *workspace,
                               size_t workspace_size, int32_t threads, mas_error *err) {
    if (err) *err = (mas_error){MAS_OK, 0, -1};
    mas_status st = MAS_OK;
    const mas_tensor3 *post = posterior && posterior->data ? posterior : NULL;
    if (!value || !x_len || !y_len || !workspace) st = MAS_ERR_NULL_POINTER;
    else if ((st = mas_check_tensor(value, MAS_ANY_FLOAT)) != MAS_OK) {
    } else if (!log_z && !post) st = MAS_ERR_BAD_ARGUMENT;
    else if (post && (st = mas_check_tensor(post, mas_accum_dtype(value->dtype))) != MAS_OK) {
    } else if (post && !mas_same_dims(post, value)) st = MAS_ERR_BAD_SHAPE;
    else if (workspace_size < mas_forward_sum_cpu_workspace_size(value->dim[0], value->dim[1],
                                                                 value->dim[2],
                                                                 (mas_dtype)value->dtype, threads))
        st = MAS_ERR_WORKSPACE_TOO_SMALL;
    if (st != MAS_OK) {
        if (err) err->status = st;
        return st;
    }
    int64_t B = value->dim[0];
    fs_call c;
    memset(&c, 0, sizeof c);
    c.value = value;
    c.posterior = post;
    c.x_len = x_len;
    c.y_len = y_len;
    c.log_z = log_z;
    c.accum = mas_accum_dtype(value->dtype);
    c.w = layout_for(value->dim[1], value->dim[2], c.accum);
    c.ws = (uint8_t *)MAS_ALIGN_UP((uintptr_t)workspace, MAS_CACHE_LINE);
    int32_t team = soft_team(B, threads);
    uint8_t *tail = c.ws + (size_t)team * c.w.total;
    c.status = (int32_t *)tail;
    c.item_log_z = (double *)(tail + MAS_ALIGN_UP((size_t)B * sizeof(int32_t), sizeof(double)));
    c.extra = tail + tail_bytes(B, &c.w, 0);
    if (post && split_mode(B, threads)) {
        int64_t n = mas_thread_count(threads);
        mas_parallel_items(n < 2 * B ? (int32_t)n : (int32_t)(2 * B), 2 * B, run_sweep_task, &c);
        mas_parallel_items(team, B, run_finish_task, &c);
    } else {
        mas_parallel_items(team, B, run_item, &c);
    }
    return mas_first_item_error(c.status, B, err);
}
