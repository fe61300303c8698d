/* Forward-sum on Gaussian log-likelihoods computed inside the sweep, with
 * the gradients of log_z to the frames and the Gaussians' parameters
 * (mas.h section 8), never holding a [T, S] matrix:
 *   1. the log-plus sweep of dp_core over the cell source (gauss_cells.h),
 *      block of K ~ sqrt(S) frames by block, keeping alpha's column at the
 *      start of every block (the checkpoints);
 *   2. blocks from the last to the first: alpha of the block is
 *      recomputed from its checkpoint (its cells v kept as that sweep
 *      scores them), the reversed sweep (beta~, as mas_forward_sum_cpu's
 *      second sweep) advances by one block on those cells, and gamma =
 *      exp(alpha + beta~ - v - log_z) weights the derivatives of each
 *      cell's Gaussian log-likelihood, summed in float64 per frame and per
 *      token. A band cell is scored twice in all (the forward sweep, the
 *      recomputing one); the reversed sweep scored it a third time before
 *      it read v.
 * The derivatives of a cell, with w = gamma / var (per dimension):
 *   d/dmu = w (x - mu), d/dlog_std = w (x - mu)^2 - gamma, d/dx = -w (x - mu).
 * Their sums are not taken cell by cell (a pass over the J dimensions of
 * three arrays for every cell was 40-60% of a call with gradients) but as
 * sums over a block of the gammas times a frame's or a token's row, in
 * which the squares are expanded: per token sum gamma, sum gamma x and
 * sum gamma x^2; per frame sum gamma / var and sum gamma mu / var. Frames
 * and means are centred on the item's mean frame first, so that the
 * expansion cancels no more than the differences themselves.
 * Memory per thread: O(T sqrt(S)) for the checkpoints and four blocks,
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
    size_t column, edge, ckpt, blk, gam, tok, frm, row, list, e, cp;
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
    w.gam = up((size_t)(w.block * w.tp) * sizeof(double));
    w.row = up((size_t)J * sizeof(double));
    /* a frame's live tokens or a token's live frames, index and gamma */
    w.list = up((size_t)(w.tp > w.block ? w.tp : w.block) * sizeof(double));
    w.tok = up((size_t)(T * J) * sizeof(double));
    w.frm = up((size_t)(S * J) * sizeof(double));
    w.e = p->e_bytes;
    w.cp = p->cp_bytes;
    /* two columns and edges, checkpoints, alpha / beta~ / v blocks, the
     * block's gammas; per token and dimension the centred mean, 1/var,
     * mean/var and the sums of gamma x and gamma x^2, per token the sum of
     * gamma; per frame and dimension the centred frame, its square and
     * d/dx; the centre and two rows of sums; a list of cells; the forward
     * walks' cell source */
    w.total = 2 * (w.column + w.edge) + w.ckpt + 3 * w.blk + w.gam + 5 * w.tok +
              up((size_t)T * sizeof(double)) + 3 * w.frm + 3 * w.row + 2 * w.list + w.e + w.cp;
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
    const double *mu, *inv, *invmu; /* [X, J]: centred means, 1/var, their product */
    const double *z, *z2;           /* [Y, J]: centred frames and their squares */
    double *sz, *sz2, *gs, *gz;     /* sums: per token gamma x, gamma x^2, gamma; d/dx */
    double *gam;                    /* the block's gammas, [K, tp] */
} ff_item;

/* gamma = exp(alpha + beta~ - v - log_z) of the band cells of frames
 * [t0, t1), 0 where it underflows. REAL is the accumulator type (alpha,
 * beta~ and v as the sweeps keep them). */
#define GAMMAS(REAL)                                                                         \
    do {                                                                                     \
        const REAL *A = (const REAL *)a_blk, *Bt = (const REAL *)b_blk,                      \
                   *V = (const REAL *)v_blk;                                                 \
        const REAL lz = (REAL)it->log_z;                                                     \
        for (int64_t t = t0; t < t1; t++) {                                                  \
            const int64_t row = (t - t0) * it->tp;                                           \
            for (int64_t s = band_lo(it, t); s <= band_hi(it, t); s++) {                     \
                REAL a = A[row + s], bb = Bt[row + s], v = V[row + s];                       \
                double g = 0;                                                                \
                /* exp underflows to 0 below -745.2 (through libm's slow path) */          \
                if (a != -INFINITY && bb != -INFINITY) {                                     \
                    REAL x = a + bb - v - lz;                                                \
                    if (x >= (REAL)-745.2) g = exp((double)(x > 0 ? 0 : x));                 \
                }                                                                            \
                it->gam[row + s] = g;                                                        \
            }                                                                                \
        }                                                                                    \
    } while (0)

static int64_t band_lo(const ff_item *it, int64_t t) {
    return t - (it->Y - it->X) > 0 ? t - (it->Y - it->X) : 0;
}
static int64_t band_hi(const ff_item *it, int64_t t) { return t < it->X - 1 ? t : it->X - 1; }

/* The weighted row sums of block_sums, one build per instruction set
 * (fused_rows_impl.h), picked as the DP sweep's (dp_isa_level, so
 * MAS_CPU_ISA picks them too): 32 dimensions at a time with AVX-512, 16
 * with AVX2, 8 with SSE2. */
typedef void (*ff_rows_fn)(const int64_t *restrict idx, const double *restrict g, int64_t n,
                           const double *restrict A, const double *restrict Bm, int64_t J,
                           double *restrict out_a, double *restrict out_b);
#if defined(__GNUC__) && defined(__x86_64__)
typedef double ff_v8 __attribute__((vector_size(64)));
typedef double ff_v4 __attribute__((vector_size(32)));
#define FR_NAME rows_weighted_avx512
#define FR_VT ff_v8
#define FR_W 8
#define FR_ATTR __attribute__((target("avx512f")))
#include "cpu/fused_rows_impl.h"
#define FR_NAME rows_weighted_avx2
#define FR_VT ff_v4
#define FR_W 4
#define FR_ATTR __attribute__((target("avx2")))
#include "cpu/fused_rows_impl.h"
#endif
typedef double ff_v2 __attribute__((vector_size(16)));
#define FR_NAME rows_weighted_base
#define FR_VT ff_v2
#define FR_W 2
#define FR_ATTR
#include "cpu/fused_rows_impl.h"

static ff_rows_fn rows_for_cpu(void) {
#if defined(__GNUC__) && defined(__x86_64__)
    const int32_t level = dp_isa_level();
    if (level >= 2) return rows_weighted_avx512;
    if (level == 1) return rows_weighted_avx2;
#endif
    return rows_weighted_base;
}

/* The sums of the block's frames [t0, t1): per frame (its d/dx, complete
 * after its block) over its band's tokens, per token over its frames in
 * the block; each side first lists its cells whose gamma did not
 * underflow. */
static void block_sums(ff_item *it, int64_t t0, int64_t t1, double *row_a, double *row_b,
                       int64_t *list_i, double *list_g) {
    const int64_t J = it->J, tp = it->tp;
    const ff_rows_fn rows_weighted = rows_for_cpu();
    for (int64_t t = t0; t < t1; t++) {
        const double *gt = it->gam + (t - t0) * tp;
        int64_t n = 0;
        for (int64_t s = band_lo(it, t); s <= band_hi(it, t); s++)
            if (gt[s] != 0) {
                list_i[n] = s;
                list_g[n++] = gt[s];
            }
        rows_weighted(list_i, list_g, n, it->inv, it->invmu, J, row_a, row_b);
        /* -sum gamma (x - mu) / var */
        const double *zt = it->z + t * J;
        double *gzt = it->gz + t * J;
        for (int64_t d = 0; d < J; d++) gzt[d] = row_b[d] - zt[d] * row_a[d];
    }
    const int64_t s_lo = band_lo(it, t0), s_hi = band_hi(it, t1 - 1);
    for (int64_t s = s_lo; s <= s_hi; s++) {
        /* the block's frames whose band holds token s */
        const int64_t f_lo = s > t0 ? s : t0;
        const int64_t f_hi = s + (it->Y - it->X) < t1 - 1 ? s + (it->Y - it->X) : t1 - 1;
        double sg = 0;
        int64_t n = 0;
        for (int64_t t = f_lo; t <= f_hi; t++) {
            const double g = it->gam[(t - t0) * tp + s];
            if (g == 0) continue;
            sg += g;
            list_i[n] = t;
            list_g[n++] = g;
        }
        if (n == 0) continue;
        rows_weighted(list_i, list_g, n, it->z, it->z2, J, row_a, row_b);
        it->gs[s] += sg;
        double *sz = it->sz + s * J, *sz2 = it->sz2 + s * J;
        for (int64_t d = 0; d < J; d++) {
            sz[d] += row_a[d];
            sz2[d] += row_b[d];
        }
    }
}

static void accumulate(const fg_plan *p, ff_item *it, int64_t t0, int64_t t1,
                       const void *a_blk, const void *b_blk, const void *v_blk, double *row_a,
                       double *row_b, int64_t *list_i, double *list_g) {
    if (p->accum == MAS_FLOAT64) GAMMAS(double);
    else GAMMAS(float);
    block_sums(it, t0, t1, row_a, row_b, list_i, list_g);
}
#undef GAMMAS

/* Writes the item's gradients (zeros beyond the lengths; all zeros when
 * it == NULL: a failed item), the token sums turned into the derivatives:
 * with m the centred mean, sum gamma (x - mu) = sz - m sg and
 * sum gamma (x - mu)^2 = sz2 - m (2 sz - m sg). */
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
            double gm = 0, gl = 0;
            if (s < X) {
                const int64_t k = s * J + d;
                const double m = it->mu[k], sg = it->gs[s], inv = it->inv[k];
                gm = inv * (it->sz[k] - m * sg);
                gl = inv * (it->sz2[k] - m * (2 * it->sz[k] - m * sg)) - sg;
                if (variance) gl *= 0.5 * inv;
            }
            if (o->grad_means.data) store_at(&o->grad_means, b, s, d, gm);
            if (o->grad_spread.data) store_at(&o->grad_spread, b, s, d, gl);
        }
}

/* The recomputing walk's cell source: the Gaussian cells as the sweep
 * asks for them, each tile also copied to the block's v (rows: frames
 * from t0, columns: tokens), which the gammas need: a fourth pass over the
 * cells saved (the sweep asks for every band cell of the block). */
typedef struct ff_tee {
    const dp_cell_source *inner;
    uint8_t *v;
    int64_t t0, tp;
    size_t acc;
} ff_tee;

static void tee_fill(const void *ctx, int64_t s0, int64_t lanes, int64_t t0, int64_t steps,
                     int64_t band, int64_t diag, void *dst, int64_t ld) {
    const ff_tee *c = (const ff_tee *)ctx;
    c->inner->fill(c->inner->ctx, s0, lanes, t0, steps, band, diag, dst, ld);
    for (int64_t k = 0; k < steps; k++)
        memcpy(c->v + ((t0 + k - c->t0) * c->tp + s0) * c->acc,
               (const uint8_t *)dst + (size_t)(k * ld) * c->acc, (size_t)lanes * c->acc);
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
    double *gam = (double *)CARVE(w->gam);
    double *mu = (double *)CARVE(w->tok), *inv = (double *)CARVE(w->tok);
    double *invmu = (double *)CARVE(w->tok);
    double *sz = (double *)CARVE(w->tok), *sz2 = (double *)CARVE(w->tok);
    double *gs = (double *)CARVE(up((size_t)p->tokens * sizeof(double)));
    double *z = (double *)CARVE(w->frm), *z2 = (double *)CARVE(w->frm);
    double *gz = (double *)CARVE(w->frm);
    double *centre = (double *)CARVE(w->row), *row_a = (double *)CARVE(w->row);
    double *row_b = (double *)CARVE(w->row);
    int64_t *list_i = (int64_t *)CARVE(w->list);
    double *list_g = (double *)CARVE(w->list);
    void *e_f = CARVE(w->e), *cp_f = CARVE(w->cp);
#undef CARVE
    const size_t acc = p->acc;
    const size_t col_bytes = (size_t)w->tp * acc;
    mas_status st = fg_check_lengths(X, Y, p->tokens, p->frames);
    double log_z = -INFINITY;
    gc_item item_f;
    dp_cell_source src_f;
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
    /* the parameters and frames in float64 for the derivatives, centred on
     * the item's mean frame */
    const mas_gauss_params *prm = &p->a->params;
    const int64_t mb = p->model_batch == 1 ? 0 : b;
    for (int64_t d = 0; d < J; d++) centre[d] = 0;
    for (int64_t t = 0; t < Y; t++)
        for (int64_t d = 0; d < J; d++) {
            z[t * J + d] = load_at(&p->a->x, b, t, d);
            centre[d] += z[t * J + d];
        }
    for (int64_t d = 0; d < J; d++) centre[d] /= (double)Y;
    for (int64_t t = 0; t < Y; t++)
        for (int64_t d = 0; d < J; d++) {
            const double x = z[t * J + d] - centre[d];
            z[t * J + d] = x;
            z2[t * J + d] = x * x;
        }
    for (int64_t s = 0; s < X; s++)
        for (int64_t d = 0; d < J; d++) {
            const int64_t k = s * J + d;
            double sp = load_at(&prm->spread, mb, s, d);
            mu[k] = load_at(&prm->means, mb, s, d) - centre[d];
            inv[k] = prm->spread_kind == MAS_SPREAD_LOG_STD ? exp(-2.0 * sp) : 1.0 / sp;
            invmu[k] = inv[k] * mu[k];
            sz[k] = sz2[k] = 0;
        }
    for (int64_t s = 0; s < X; s++) gs[s] = 0;
    /* the reversed walk reads the block's cells v through a reversed view
     * (set per block), as mas_forward_sum_cpu's second sweep reads its
     * matrix: v holds every band cell of the block, the view's fill pads the
     * rest */
    dp_problem r = q;
    r.cell_source = NULL;
    r.cell.dtype = p->accum;
    r.cell.stride_state = -1;
    r.cell.stride_step = -w->tp;
    r.alpha_stride_state = -1;
    r.alpha_stride_step = -w->tp;
    q.alpha_stride_state = 1;
    q.alpha_stride_step = w->tp;
    ff_tee tee = {&src_f, v_blk, 0, w->tp, acc};
    const dp_cell_source src_tee = {tee_fill, &tee};
    q.cell_source = &src_tee;
    soft_fill(rcolumn, p->accum, w->tp, -INFINITY);
    ff_item it = {X, Y, J, w->tp, log_z, mu, inv, invmu, z, z2, sz, sz2, gs, gz, gam};
    for (int64_t t0 = (Y - 1) / K * K; t0 >= 0; t0 -= K) {
        int64_t t1 = t0 + K < Y ? t0 + K : Y, n = t1 - t0;
        /* alpha of the block again, from its checkpoint, and the block's cells, v */
        memcpy(column, ckpt + (size_t)(t0 / K) * col_bytes, col_bytes);
        q.alpha_out = a_blk - t0 * w->tp * (int64_t)acc;
        start_block(edge, p->accum, t0, n);
        tee.t0 = t0;
        dp_sweep(&q, 0, X, t0, t1, column, edge);
        /* beta~ of frames [t0, t1) on v: the reversed walk's steps
         * [Y-t1, Y-t0); its cell (s', t') and beta~ at block row
         * Y-1-t'-t0, token X-1-s' */
        r.cell.base = v_blk + ((Y - 1 - t0) * w->tp + (X - 1)) * (int64_t)acc;
        r.alpha_out = b_blk + ((Y - 1 - t0) * w->tp + (X - 1)) * (int64_t)acc;
        start_block(redge, p->accum, Y - t1, n);
        dp_sweep(&r, 0, X, Y - t1, Y - t0, rcolumn, redge);
        accumulate(p, &it, t0, t1, a_blk, b_blk, v_blk, row_a, row_b, list_i, list_g);
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
