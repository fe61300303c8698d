/* Monotonic attention on the CPU, one-to-many and many-to-many: both are the
 * log-plus sweep of dp_core with logits edge weights, over two views.
 *
 *   one-to-many: step t = i (the path advances along N every step), state
 *     s = j; staying on column j weighs log sigmoid(x[i-1,j]), moving to j+1
 *     log sigmoid(-x[i-1,j-1]). No band: every j < m may be reached.
 *   many-to-many: the anti-diagonals. Step d = i + j, state i, cell
 *     (i, d - i): stride_step = stride_j, stride_state = stride_i - stride_j.
 *     A move right keeps i ("stay", log sigmoid(x[i,j-1])), a move down
 *     advances it (log sigmoid(-x[i-1,j])). j < m is the band d - i <= m - 1,
 *     and j >= 0 the diagonal i <= d, which the core never crosses.
 *
 * The backward pass is the shared adjoint sweep (soft_adjoint.h) over the
 * same views. */
#include <math.h>
#include <string.h>

#include "cpu/dp_core.h"
#include "cpu/soft_adjoint.h"
#include "cpu/soft_common.h"
#include "mas.h"

typedef struct att_layout {
    size_t column;  /* forward: alpha's running column, whole tiles */
    size_t edge;    /* forward: one value per step, plus a block */
    size_t adjoint; /* backward: the adjoint sweep's rows */
    size_t total;
} att_layout;

static att_layout layout_for(int64_t N, int64_t M, int32_t accum) {
    att_layout w;
    size_t acc = soft_accum_size(accum);
    int64_t states = N > M ? N : M, steps = N + M - 1;
    w.column = MAS_ALIGN_UP((size_t)MAS_ALIGN_UP(states, dp_lanes(accum)) * acc,
                             MAS_CACHE_LINE);
    w.edge = MAS_ALIGN_UP((size_t)(steps + DP_BLOCK_STEPS) * acc, MAS_CACHE_LINE);
    w.adjoint = MAS_ALIGN_UP(dp_adjoint_workspace_size(steps, accum), MAS_CACHE_LINE);
    w.total = w.column + w.edge > w.adjoint ? w.column + w.edge : w.adjoint;
    return w;
}

size_t mas_attention_cpu_workspace_size(int64_t batch, int64_t n, int64_t m, mas_dtype dtype,
                                        int32_t threads) {
    if (batch < 1 || n < 1 || m < 1) return 0;
    if (mas_shape_too_big(batch, n, m)) return SIZE_MAX;
    att_layout w = layout_for(n, m, mas_accum_dtype(dtype));
    return MAS_CACHE_LINE + (size_t)soft_team(batch, threads) * w.total +
           MAS_ALIGN_UP((size_t)batch * sizeof(int32_t), MAS_CACHE_LINE);
}

/* One item's walk: lengths, and the recurrence's shape over them. */
typedef struct att_item {
    int32_t kind;
    int64_t n, m;
    int64_t states, steps, band;
} att_item;

static att_item item_for(int32_t kind, int64_t n, int64_t m) {
    att_item it = {kind, n, m, m, n, DP_NO_BAND};
    if (kind == MAS_ATTENTION_MANY_TO_MANY) {
        it.states = n;
        it.steps = n + m - 1;
        it.band = m - 1;
    }
    return it;
}

/* Item b of t in the walk's (step, state) coordinates. */
static dp_view walk_view(const att_item *it, const mas_tensor3 *t, int64_t b) {
    dp_view v;
    v.base = soft_at(t, b, 0, 0);
    v.dtype = t->dtype;
    /* An axis the item does not walk may have any stride (even one whose
     * difference with the other overflows): it is never used. */
    int64_t si = it->n > 1 ? t->stride[1] : 0, sj = it->m > 1 ? t->stride[2] : 0;
    if (it->kind == MAS_ATTENTION_MANY_TO_MANY) {
        v.stride_state = si - sj;
        v.stride_step = sj;
    } else {
        v.stride_state = sj;
        v.stride_step = si;
    }
    return v;
}

/* The columns of row i that the sweeps write: j <= i for one-to-many (a
 * path cannot be past column i after i steps), all of them for m2m. */
static void walk_kept(const void *ctx, int64_t i, int64_t *lo, int64_t *hi) {
    const att_item *it = (const att_item *)ctx;
    *lo = 0;
    *hi = 0;
    if (i >= it->n) return;
    *hi = it->m;
    if (it->kind == MAS_ATTENTION_ONE_TO_MANY && i + 1 < it->m) *hi = i + 1;
}

typedef struct att_call {
    att_item shape;          /* kind; n, m = N, M */
    const mas_tensor3 *logits, *log_phi, *grad_log_phi, *grad_logits;
    const int64_t *n_len, *m_len;
    uint8_t *ws;
    att_layout w;
    int32_t accum;
    int32_t *status; /* [B] */
} att_call;

/* Lengths of item b, or MAS_ERR_BAD_LENGTH. */
static mas_status item_lengths(const att_call *c, int64_t b, att_item *it) {
    int64_t N = c->logits->dim[1], M = c->logits->dim[2];
    int64_t n = c->n_len ? c->n_len[b] : N, m = c->m_len ? c->m_len[b] : M;
    if (n < 1 || m < 1 || n > N || m > M) return MAS_ERR_BAD_LENGTH;
    *it = item_for(c->shape.kind, n, m);
    return MAS_OK;
}

static int any_nan(const void *x, int32_t accum, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        double v = accum == MAS_FLOAT64 ? ((const double *)x)[i] : ((const float *)x)[i];
        if (v != v) return 1;
    }
    return 0;
}

static void forward_item(void *ctx, int64_t b, int32_t rank) {
    att_call *c = (att_call *)ctx;
    uint8_t *base = c->ws + (size_t)rank * c->w.total;
    att_item it = c->shape;
    mas_status st = item_lengths(c, b, &it);
    if (st == MAS_OK) {
        dp_problem p;
        memset(&p, 0, sizeof p);
        p.n_states = it.states;
        p.n_steps = it.steps;
        p.semiring = DP_LOGPLUS;
        p.accum = c->accum;
        p.logits = walk_view(&it, c->logits, b);
        p.band = it.band;
        dp_view out = walk_view(&it, c->log_phi, b);
        p.alpha_out = (void *)out.base;
        p.alpha_stride_state = out.stride_state;
        p.alpha_stride_step = out.stride_step;
        void *column = base, *edge = base + c->w.column;
        soft_fill(column, c->accum, MAS_ALIGN_UP(it.states, dp_lanes(c->accum)), -INFINITY);
        soft_fill(edge, c->accum, it.steps, -INFINITY);
        soft_fill(edge, c->accum, 1, 0.0); /* the virtual start: log phi[0,0] = 0 */
        dp_sweep(&p, 0, p.n_states, 0, p.n_steps, column, edge);
        /* A NaN logit reaches the last step whatever its cell: every cell
         * leads there and a NaN survives the sums. */
        if (any_nan(column, c->accum, it.states)) st = MAS_ERR_NONFINITE_VALUE;
    }
    c->status[b] = st;
    soft_fill_item_except(c->log_phi, b, -INFINITY, st == MAS_OK ? walk_kept : NULL, &it);
}

static void backward_item(void *ctx, int64_t b, int32_t rank) {
    att_call *c = (att_call *)ctx;
    att_item it = c->shape;
    mas_status st = item_lengths(c, b, &it);
    if (st == MAS_OK) {
        dp_adjoint_problem p;
        memset(&p, 0, sizeof p);
        p.n_states = it.states;
        p.n_steps = it.steps;
        p.band = it.band;
        p.accum = c->accum;
        p.logits = walk_view(&it, c->logits, b);
        p.alpha = walk_view(&it, c->log_phi, b);
        p.grad_alpha = walk_view(&it, c->grad_log_phi, b);
        dp_view out = walk_view(&it, c->grad_logits, b);
        p.grad_logits = (void *)out.base;
        p.grad_stride_state = out.stride_state;
        p.grad_stride_step = out.stride_step;
        dp_adjoint(&p, c->ws + (size_t)rank * c->w.total);
    }
    c->status[b] = st;
    soft_fill_item_except(c->grad_logits, b, 0.0, st == MAS_OK ? walk_kept : NULL, &it);
}

/* Checks shared by forward and backward; fills c on success. */
static mas_status prepare(att_call *c, mas_attention_kind kind, const mas_tensor3 *logits,
                          const int64_t *n_len, const int64_t *m_len, void *workspace,
                          size_t workspace_size, int32_t threads) {
    memset(c, 0, sizeof *c);
    if (!logits || !workspace) return MAS_ERR_NULL_POINTER;
    if (kind != MAS_ATTENTION_ONE_TO_MANY && kind != MAS_ATTENTION_MANY_TO_MANY)
        return MAS_ERR_BAD_ARGUMENT;
    mas_status st = mas_check_tensor(logits, MAS_ANY_FLOAT);
    if (st != MAS_OK) return st;
    int64_t B = logits->dim[0], N = logits->dim[1], M = logits->dim[2];
    if (workspace_size <
        mas_attention_cpu_workspace_size(B, N, M, (mas_dtype)logits->dtype, threads))
        return MAS_ERR_WORKSPACE_TOO_SMALL;
    c->shape = item_for(kind, N, M);
    c->logits = logits;
    c->n_len = n_len;
    c->m_len = m_len;
    c->accum = mas_accum_dtype(logits->dtype);
    c->w = layout_for(N, M, c->accum);
    c->ws = (uint8_t *)MAS_ALIGN_UP((uintptr_t)workspace, MAS_CACHE_LINE);
    c->status = (int32_t *)(c->ws + (size_t)soft_team(B, threads) * c->w.total);
    return MAS_OK;
}

/* An output or input array of the logits' shape, of dtype `want` (mas_check_tensor). */
static mas_status check_like(const mas_tensor3 *t, const mas_tensor3 *logits, int32_t want) {
    if (!t) return MAS_ERR_NULL_POINTER;
    mas_status st = mas_check_tensor(t, want);
    if (st != MAS_OK) return st;
    return mas_same_dims(t, logits) ? MAS_OK : MAS_ERR_BAD_SHAPE;
}

static mas_status fail(mas_status st, mas_error *err) {
    if (err) err->status = st;
    return st;
}

mas_status mas_attention_forward_cpu(mas_attention_kind kind, const mas_tensor3 *logits,
                                     const int64_t *n_len, const int64_t *m_len,
                                     const mas_tensor3 *log_phi, void *workspace,
                                     size_t workspace_size, int32_t threads, mas_error *err) {
    if (err) *err = (mas_error){MAS_OK, 0, -1};
    att_call c;
    mas_status st = prepare(&c, kind, logits, n_len, m_len, workspace, workspace_size, threads);
    if (st == MAS_OK) st = check_like(log_phi, logits, mas_accum_dtype(logits->dtype));
    if (st != MAS_OK) return fail(st, err);
    c.log_phi = log_phi;
    int64_t B = logits->dim[0];
    mas_parallel_items(soft_team(B, threads), B, forward_item, &c);
    return mas_first_item_error(c.status, B, err);
}

mas_status mas_attention_backward_cpu(mas_attention_kind kind, const mas_tensor3 *logits,
                                      const int64_t *n_len, const int64_t *m_len,
                                      const mas_tensor3 *log_phi,
                                      const mas_tensor3 *grad_log_phi,
                                      const mas_tensor3 *grad_logits, void *workspace,
                                      size_t workspace_size, int32_t threads, mas_error *err) {
    if (err) *err = (mas_error){MAS_OK, 0, -1};
    att_call c;
    mas_status st = prepare(&c, kind, logits, n_len, m_len, workspace, workspace_size, threads);
    if (st == MAS_OK) st = check_like(log_phi, logits, MAS_ANY_FLOAT);
    if (st == MAS_OK) st = check_like(grad_log_phi, logits, MAS_ANY_FLOAT);
    if (st == MAS_OK) st = check_like(grad_logits, logits, mas_accum_dtype(logits->dtype));
    if (st != MAS_OK) return fail(st, err);
    c.log_phi = log_phi;
    c.grad_log_phi = grad_log_phi;
    c.grad_logits = grad_logits;
    int64_t B = logits->dim[0];
    mas_parallel_items(soft_team(B, threads), B, backward_item, &c);
    return mas_first_item_error(c.status, B, err);
}
