/* Hard MAS on Gaussian log-likelihoods computed inside the sweep (mas.h
 * section 8): the max-plus sweep of dp_core with a cell source
 * (gauss_cells.h) instead of a value view, then the backtrack and outputs of
 * hard MAS (hard_outputs.h). Items are split over threads, one at a time
 * per thread; each thread owns one item's decision bits, expanded frames
 * and packed coefficients. */
#include <math.h>
#include <string.h>

#include "common/checks.h"
#include "cpu/dp_core.h"
#include "cpu/fused_gauss.h"
#include "cpu/hard_outputs.h"
#include "cpu/parallel.h"
#include "mas.h"

typedef struct fa_layout {
    size_t decisions, column, edge, scratch, e, cp, total;
} fa_layout;

static fa_layout layout_for(const fg_plan *p) {
    fa_layout w;
    int64_t T = p->tokens, S = p->frames, lanes = dp_lanes(p->accum);
    w.decisions = MAS_ALIGN_UP((size_t)dp_decision_bytes(T, S, p->accum), MAS_CACHE_LINE);
    w.column = MAS_ALIGN_UP((size_t)MAS_ALIGN_UP(T, lanes) * p->acc, MAS_CACHE_LINE);
    w.edge = MAS_ALIGN_UP((size_t)(S + DP_BLOCK_STEPS) * p->acc, MAS_CACHE_LINE);
    w.scratch = MAS_ALIGN_UP((size_t)T * sizeof(int32_t), MAS_CACHE_LINE);
    w.e = p->e_bytes;
    w.cp = p->cp_bytes;
    w.total = w.decisions + w.column + w.edge + w.scratch + w.e + w.cp;
    return w;
}

static int32_t team_of(int64_t batch, int32_t threads) {
    int64_t n = mas_thread_count(threads);
    if (n > 256) n = 256;
    if (n > batch) n = batch;
    return n < 1 ? 1 : (int32_t)n;
}

size_t mas_align_gaussian_cpu_workspace_size(const mas_gauss_align_args *args,
                                             int32_t threads) {
    fg_plan p;
    if (fg_plan_call(args, &p) != MAS_OK) return 0;
    if (mas_shape_too_big(p.batch, p.tokens, p.frames) ||
        mas_shape_too_big(p.batch, p.tokens + p.frames, p.rows))
        return SIZE_MAX;
    fa_layout w = layout_for(&p);
    return MAS_CACHE_LINE + p.coef_bytes + (size_t)team_of(p.batch, threads) * w.total +
           MAS_ALIGN_UP((size_t)p.batch * sizeof(int32_t), MAS_CACHE_LINE);
}

typedef struct fa_call {
    const fg_plan *p;
    const mas_hard_outputs *out;
    mas_tensor3 value; /* the virtual [B, T, S] matrix: shape and score type */
    const void *coef;
    uint8_t *slots;
    fa_layout w;
    int32_t *status;
} fa_call;

static void fill_real(void *dst, int32_t accum, int64_t n, double x) {
    if (accum == MAS_FLOAT64)
        for (int64_t i = 0; i < n; i++) ((double *)dst)[i] = x;
    else
        for (int64_t i = 0; i < n; i++) ((float *)dst)[i] = (float)x;
}

static void run_item(void *ctx, int64_t b, int32_t rank) {
    fa_call *c = (fa_call *)ctx;
    const fg_plan *p = c->p;
    uint8_t *slot = c->slots + (size_t)rank * c->w.total;
    uint8_t *decisions = slot;
    void *column = slot + c->w.decisions;
    void *edge = (uint8_t *)column + c->w.column;
    int32_t *scratch = (int32_t *)((uint8_t *)edge + c->w.edge);
    void *e = (uint8_t *)scratch + c->w.scratch;
    void *cp = (uint8_t *)e + c->w.e;
    int64_t X = p->a->x_len[b], Y = p->a->y_len[b];
    int64_t lanes = dp_lanes(p->accum);
    mas_status st = fg_check_lengths(X, Y, p->tokens, p->frames);
    double score = -INFINITY;
    if (st == MAS_OK) {
        gc_item item;
        dp_cell_source src;
        fg_prepare(p, c->coef, b, X, Y, 0, e, cp, &item, &src);
        dp_problem q;
        memset(&q, 0, sizeof q);
        q.n_states = X;
        q.n_steps = Y;
        q.semiring = DP_MAXPLUS;
        q.accum = p->accum;
        q.cell_source = &src;
        /* the band of hard MAS: the cells some path crosses */
        q.band = Y - X;
        q.readable = 1;
        q.decisions = decisions;
        fill_real(column, p->accum, MAS_ALIGN_UP(X, lanes), -INFINITY);
        fill_real(edge, p->accum, Y, -INFINITY);
        fill_real(edge, p->accum, 1, 0.0); /* the virtual start */
        int bad = dp_sweep(&q, 0, X, 0, Y, column, edge);
        score = p->accum == MAS_FLOAT64 ? ((double *)column)[X - 1] : ((float *)column)[X - 1];
        if (bad) st = MAS_ERR_NONFINITE_VALUE;
        else if (score == -INFINITY) st = MAS_ERR_NO_FINITE_PATH;
    }
    c->status[b] = st;
    hard_item_outputs o = {
        .n_tokens = st == MAS_OK ? X : 0,
        .n_frames = st == MAS_OK ? Y : 0,
        .decisions = decisions,
        .lanes = lanes,
        .score = st == MAS_OK ? score : -INFINITY,
        .durations = scratch,
    };
    hard_write_outputs(&c->value, c->out, b, &o);
}

mas_status mas_align_gaussian_cpu(const mas_gauss_align_args *args,
                                  const mas_hard_outputs *out, void *workspace,
                                  size_t workspace_size, int32_t threads, mas_error *err) {
    if (err) *err = (mas_error){MAS_OK, 0, -1};
    fg_plan p;
    mas_status st = fg_plan_call(args, &p);
    fa_call c;
    memset(&c, 0, sizeof c);
    if (st == MAS_OK) {
        c.value.data = args->x.data;
        c.value.dtype = args->x.dtype;
        c.value.dim[0] = p.batch;
        c.value.dim[1] = p.tokens;
        c.value.dim[2] = p.frames;
        st = mas_hard_check_call(&c.value, args->x_len, args->y_len, out);
    }
    if (st == MAS_OK && !workspace) st = MAS_ERR_NULL_POINTER;
    if (st == MAS_OK && workspace_size < mas_align_gaussian_cpu_workspace_size(args, threads))
        st = MAS_ERR_WORKSPACE_TOO_SMALL;
    if (st != MAS_OK) {
        if (err) err->status = st;
        return st;
    }
    uint8_t *ws = (uint8_t *)MAS_ALIGN_UP((uintptr_t)workspace, MAS_CACHE_LINE);
    st = fg_coefficients(&p, ws, threads, err);
    if (st != MAS_OK) return st;
    int32_t team = team_of(p.batch, threads);
    c.p = &p;
    c.out = out;
    c.coef = ws;
    c.w = layout_for(&p);
    c.slots = ws + p.coef_bytes;
    c.status = (int32_t *)(c.slots + (size_t)team * c.w.total);
    mas_parallel_items(team, p.batch, run_item, &c);
    return mas_first_item_error(c.status, p.batch, err);
}
