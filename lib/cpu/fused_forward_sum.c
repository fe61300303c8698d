/* Forward-sum on Gaussian log-likelihoods computed inside the sweep, with
 * the gradients of log_z to the frames and the Gaussians' parameters
 * (mas.h section 8), never holding a [T, S] matrix:
 *   1. the log-plus sweep of dp_core over the cell source (gauss_cells.h),
 *      block of K ~ sqrt(S) frames by block, keeping alpha's column at the
 *      start of every block (the checkpoints);
 *   2. blocks from the last to the first: the reversed sweep (beta~, as
 *      mas_forward_sum_cpu's second sweep) advances by one block, alpha of
 *      the block is recomputed from its checkpoint, the block's cells v are
 *      scored again, and gamma = exp(alpha + beta~ - v - log_z) weights the
 *      derivatives of each cell's Gaussian log-likelihood, summed in float64
 *      per frame and per token.
 * Memory per thread: O(T sqrt(S)) for the checkpoints and three blocks,
 * O((T + S) J) for the expanded frames, packed coefficients and sums. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
#endif

#include <math.h>
#include <string.h>

#include "common/checks.h"
#include "common/convert.h"
#include "cpu/dp_core.h"
#include "cpu/fused_gauss.h"
#include "cpu/parallel.h"
#include "cpu/soft_common.h"
#include "mas.h"

typedef struct ff_layout {
    int64_t tp;     /* tokens padded to whole tiles: a block row */
    int64_t block;  /* K frames per block, a multiple of DP_BLOCK_STEPS */
    int64_t blocks; /* checkpoints: ceil(S / K) */
    size_t column, edge, ckpt, blk, tok, frm, e, cp;
    size_t total;
} ff_layout;

static size_t up(size_t n) { return MAS_ALIGN_UP(n, MAS_CACHE_LINE); }

static ff_layout layout_for(const fg_plan *p) {
    ff_layout w;
    int64_t T = p->tokens, S = p->frames, J = p->dim;
    w.tp = MAS_ALIGN_UP(T, dp_lanes(p->accum));
    int64_t k = (int64_t)ceil(sqrt((double)S));
    w.block = MAS_ALIGN_UP(k < 1 ? 1 : k, DP_BLOCK_STEPS);
    w.blocks = (S + w.block - 1) / w.block;
    w.column = up((size_t)w.tp * p->acc);
    w.edge = up((size_t)(w.block + DP_BLOCK_STEPS) * p->acc);
    w.ckpt = up((size_t)(w.blocks * w.tp) * p->acc);
    w.blk = up((size_t)(w.block * w.tp) * p->acc);
    w.tok = up((size_t)(T * J) * sizeof(double));
    w.frm = up((size_t)(S * J) * sizeof(double));
    w.e = p->e_bytes;
    w.cp = p->cp_bytes;
    /* two columns and edges, checkpoints, alpha / beta~ / v blocks; mu, inv,
     * d/dmu, d/dspread per token and dimension, the token sums; frames and
     * d/dx per frame and dimension; both walks' cell sources */
    w.total = 2 * (w.column + w.edge) + w.ckpt + 3 * w.blk + 4 * w.tok +
              up((size_t)T * sizeof(double)) + 2 * w.frm + 2 * (w.e + w.cp);
    return w;
}

size_t mas_forward_sum_gaussian_cpu_workspace_size(const mas_gauss_align_args *args,
                                                   int32_t threads) {
    fg_plan p;
    if (fg_plan_call(args, &p) != MAS_OK) return 0;
    if (mas_shape_too_big(p.batch, p.tokens, p.frames) ||
        mas_shape_too_big(p.batch, p.tokens + p.frames, p.rows))
        return SIZE_MAX;
    ff_layout w = layout_for(&p);
    return fg_shared_bytes(&p) + (size_t)soft_team(p.batch, threads) * w.total;
}

typedef struct ff_call {
    const fg_plan *p;
    const mas_gauss_soft_outputs *out;
    const void *coef;
    uint8_t *slots;
    ff_layout w;
    int32_t *status;
    int want_grad;
} ff_call;

static double load_at(const mas_tensor3 *t, int64_t b, int64_t i, int64_t j) {
    return soft_load(t->data, t->dtype, b * t->stride[0] + i * t->stride[1] + j * t->stride[2]);
}

static void store_at(const mas_tensor3 *t, int64_t b, int64_t i, int64_t j, double x) {
    soft_store(t->data, t->dtype, b * t->stride[0] + i * t->stride[1] + j * t->stride[2], x);
}

/* Sweep state: a column and an edge array for one walk. */
static void start_block(void *edge, int32_t accum, int64_t t0, int64_t n) {
    soft_fill(edge, accum, n, -INFINITY);
    if (t0 == 0) soft_fill(edge, accum, 1, 0.0); /* the virtual start */
}

typedef struct ff_item {
    int64_t X, Y, J, tp;
    double log_z;
    const double *mu, *inv, *z;
    double *gm, *gl, *gs, *gz;
} ff_item;

/* gamma of the block's band cells and the sums of the derivatives. REAL is
 * the accumulator type (alpha, beta~ and v as the sweeps keep them). */
#define ACCUMULATE(REAL)                                                                     \
    do {                                                                                     \
        const REAL *A = (const REAL *)a_blk, *Bt = (const REAL *)b_blk,                      \
                   *V = (const REAL *)v_blk;                                                 \
        const REAL lz = (REAL)it->log_z;                                                     \
        for (int64_t t = t0; t < t1; t++) {                                                  \
            int64_t lo = t - (it->Y - it->X) > 0 ? t - (it->Y - it->X) : 0;                  \
            int64_t hi = t < it->X - 1 ? t : it->X - 1;                                      \
            const int64_t row = (t - t0) * it->tp;                                           \
            const double *zt = it->z + t * J;                                                \
            double *gzt = it->gz + t * J;                                                    \
            for (int64_t s = lo; s <= hi; s++) {                                             \
                REAL a = A[row + s], bb = Bt[row + s], v = V[row + s];                       \
                if (a == -INFINITY || bb == -INFINITY) continue;                             \
                REAL x = a + bb - v - lz;                                                    \
                double g = exp((double)(x > 0 ? 0 : x));                                     \
                if (g == 0) continue;                                                        \
                const double *mu = it->mu + s * J, *inv = it->inv + s * J;                   \
                double *gm = it->gm + s * J, *gl = it->gl + s * J;                           \
                it->gs[s] += g;                                                              \
                for (int64_t d = 0; d < J; d++) {                                            \
                    double diff = zt[d] - mu[d], w = g * inv[d];                             \
                    gm[d] += w * diff;                                                       \
                    gl[d] += w * diff * diff;                                                \
                    gzt[d] -= w * diff;                                                      \
                }                                                                            \
            }                                                                                \
        }                                                                                    \
    } while (0)

static void accumulate(const fg_plan *p, ff_item *it, int64_t t0, int64_t t1,
                       const void *a_blk, const void *b_blk, const void *v_blk) {
    const int64_t J = it->J;
    if (p->accum == MAS_FLOAT64) ACCUMULATE(double);
    else ACCUMULATE(float);
}
#undef ACCUMULATE

/* Writes the item's gradients (zeros beyond the lengths; all zeros when
 * it == NULL: a failed item). */
static void write_grads(const ff_call *c, int64_t b, const ff_item *it) {
    const fg_plan *p = c->p;
    const mas_gauss_soft_outputs *o = c->out;
    const int64_t J = p->dim;
    int64_t X = it ? it->X : 0, Y = it ? it->Y : 0;
    int variance = p->a->params.spread_kind == MAS_SPREAD_VARIANCE;
    if (o->grad_x.data)
        for (int64_t t = 0; t < p->frames; t++)
            for (int64_t d = 0; d < J; d++)
                store_at(&o->grad_x, b, t, d, t < Y ? it->gz[t * J + d] : 0.0);
    for (int64_t s = 0; s < p->tokens; s++)
        for (int64_t d = 0; d < J; d++) {
            int in = s < X;
            if (o->grad_means.data)
                store_at(&o->grad_means, b, s, d, in ? it->gm[s * J + d] : 0.0);
            if (o->grad_spread.data) {
                double g = 0;
                if (in) {
                    g = it->gl[s * J + d] - it->gs[s];
                    if (variance) g *= 0.5 * it->inv[s * J + d];
                }
                store_at(&o->grad_spread, b, s, d, g);
            }
        }
}

static void run_item(void *ctx, int64_t b, int32_t rank) {
    ff_call *c = (ff_call *)ctx;
    const fg_plan *p = c->p;
    const ff_layout *w = &c->w;
    const int64_t X = p->a->x_len[b], Y = p->a->y_len[b], J = p->dim, K = w->block;
    uint8_t *at = c->slots + (size_t)rank * w->total;
#define CARVE(n) (at += (n), at - (n))
    void *column = CARVE(w->column), *rcolumn = CARVE(w->column);
    void *edge = CARVE(w->edge), *redge = CARVE(w->edge);
    uint8_t *ckpt = CARVE(w->ckpt);
    uint8_t *a_blk = CARVE(w->blk), *b_blk = CARVE(w->blk), *v_blk = CARVE(w->blk);
    double *mu = (double *)CARVE(w->tok), *inv = (double *)CARVE(w->tok);
    double *gm = (double *)CARVE(w->tok), *gl = (double *)CARVE(w->tok);
    double *gs = (double *)CARVE(up((size_t)p->tokens * sizeof(double)));
    double *z = (double *)CARVE(w->frm), *gz = (double *)CARVE(w->frm);
    void *e_f = CARVE(w->e), *e_r = CARVE(w->e), *cp_f = CARVE(w->cp), *cp_r = CARVE(w->cp);
#undef CARVE
    const size_t acc = p->acc;
    const size_t col_bytes = (size_t)w->tp * acc;
    mas_status st = fg_check_lengths(X, Y, p->tokens, p->frames);
    double log_z = -INFINITY;
    gc_item item_f, item_r;
    dp_cell_source src_f, src_r;
    dp_problem q;
    memset(&q, 0, sizeof q);
    if (st == MAS_OK) {
        fg_prepare(p, c->coef, b, X, Y, 0, e_f, cp_f, &item_f, &src_f);
        q.n_states = X;
        q.n_steps = Y;
        q.semiring = DP_LOGPLUS;
        q.accum = p->accum;
        q.cell_source = &src_f;
        q.band = Y - X;
        q.readable = 1;
        soft_fill(column, p->accum, w->tp, -INFINITY);
        int bad = 0;
        for (int64_t t0 = 0; t0 < Y; t0 += K) {
            int64_t t1 = t0 + K < Y ? t0 + K : Y;
            memcpy(ckpt + (size_t)(t0 / K) * col_bytes, column, col_bytes);
            start_block(edge, p->accum, t0, t1 - t0);
            bad |= dp_sweep(&q, 0, X, t0, t1, column, edge);
        }
        log_z = soft_load(column, p->accum, X - 1);
        /* No NaN or +inf cell was read, so a NaN is the accumulator's
         * overflow (+inf meeting a -inf cell): +inf, as mas_forward_sum_cpu
         * (mas.h section 5; found by fuzz_fused) */
        if (!bad && log_z != log_z) log_z = INFINITY;
        if (bad) st = MAS_ERR_NONFINITE_VALUE;
        else if (log_z == -INFINITY) st = MAS_ERR_NO_FINITE_PATH;
    }
    c->status[b] = st;
    if (c->out->log_z) soft_store(c->out->log_z, p->accum, b, st == MAS_OK ? log_z : -INFINITY);
    if (!c->want_grad) return;
    if (st != MAS_OK) {
        write_grads(c, b, NULL);
        return;
    }
    /* the parameters and frames in float64 for the derivatives */
    const mas_gauss_params *prm = &p->a->params;
    const int64_t mb = p->model_batch == 1 ? 0 : b;
    for (int64_t s = 0; s < X; s++)
        for (int64_t d = 0; d < J; d++) {
            double sp = load_at(&prm->spread, mb, s, d);
            mu[s * J + d] = load_at(&prm->means, mb, s, d);
            inv[s * J + d] = prm->spread_kind == MAS_SPREAD_LOG_STD ? exp(-2.0 * sp) : 1.0 / sp;
            gm[s * J + d] = gl[s * J + d] = 0;
        }
    for (int64_t s = 0; s < X; s++) gs[s] = 0;
    for (int64_t t = 0; t < Y; t++)
        for (int64_t d = 0; d < J; d++) {
            z[t * J + d] = load_at(&p->a->x, b, t, d);
            gz[t * J + d] = 0;
        }
    fg_prepare(p, c->coef, b, X, Y, 1, e_r, cp_r, &item_r, &src_r);
    dp_problem r = q;
    r.cell_source = &src_r;
    r.alpha_stride_state = -1;
    r.alpha_stride_step = -w->tp;
    q.alpha_stride_state = 1;
    q.alpha_stride_step = w->tp;
    soft_fill(rcolumn, p->accum, w->tp, -INFINITY);
    ff_item it = {X, Y, J, w->tp, log_z, mu, inv, z, gm, gl, gs, gz};
    for (int64_t t0 = (Y - 1) / K * K; t0 >= 0; t0 -= K) {
        int64_t t1 = t0 + K < Y ? t0 + K : Y, n = t1 - t0;
        /* beta~ of frames [t0, t1): the reversed walk's steps [Y-t1, Y-t0),
         * cell (s', t') stored at block row Y-1-t'-t0, token X-1-s' */
        r.alpha_out = b_blk + ((Y - 1 - t0) * w->tp + (X - 1)) * (int64_t)acc;
        start_block(redge, p->accum, Y - t1, n);
        dp_sweep(&r, 0, X, Y - t1, Y - t0, rcolumn, redge);
        /* alpha of the block again, from its checkpoint */
        memcpy(column, ckpt + (size_t)(t0 / K) * col_bytes, col_bytes);
        q.alpha_out = a_blk - t0 * w->tp * (int64_t)acc;
        start_block(edge, p->accum, t0, n);
        dp_sweep(&q, 0, X, t0, t1, column, edge);
        /* the block's cells */
        p->fill(&item_f, 0, X, t0, n, Y - X, 0, v_blk, w->tp);
        accumulate(p, &it, t0, t1, a_blk, b_blk, v_blk);
    }
    write_grads(c, b, &it);
}

mas_status mas_forward_sum_gaussian_cpu(const mas_gauss_align_args *args,
                                        const mas_gauss_soft_outputs *out, void *workspace,
                                        size_t workspace_size, int32_t threads,
                                        mas_error *err) {
    if (err) *err = (mas_error){MAS_OK, 0, -1};
    fg_plan p;
    mas_status st = fg_plan_call(args, &p);
    if (st == MAS_OK) {
        const mas_gauss_align_shape sh = {p.batch, p.tokens, p.frames, p.dim, p.model_batch};
        st = mas_gauss_soft_check_outputs(out, workspace, &sh, p.accum);
    }
    if (st == MAS_OK &&
        workspace_size < mas_forward_sum_gaussian_cpu_workspace_size(args, threads))
        st = MAS_ERR_WORKSPACE_TOO_SMALL;
    if (st != MAS_OK) {
        if (err) err->status = st;
        return st;
    }
    uint8_t *ws = (uint8_t *)MAS_ALIGN_UP((uintptr_t)workspace, MAS_CACHE_LINE);
    st = fg_coefficients(&p, ws, threads, err);
    if (st != MAS_OK) return st;
    int32_t team = soft_team(p.batch, threads);
    ff_call c;
    memset(&c, 0, sizeof c);
    c.p = &p;
    c.out = out;
    c.coef = ws;
    c.w = layout_for(&p);
    c.slots = ws + p.coef_bytes;
    c.status = (int32_t *)(c.slots + (size_t)team * c.w.total);
    c.want_grad = out->grad_x.data || out->grad_means.data || out->grad_spread.data;
    mas_parallel_items(team, p.batch, run_item, &c);
    return mas_first_item_error(c.status, p.batch, err);
}
