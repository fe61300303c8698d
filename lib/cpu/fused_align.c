/* Hard MAS on Gaussian log-likelihoods computed inside the sweep (mas.h
 * section 8): the max-plus sweep of dp_core with a cell source
 * (gauss_cells.h) instead of a value view, then the backtrack and outputs of
 * hard MAS (hard_outputs.h). Items are split over threads, one at a time
 * per thread; each thread owns one item's decision bits, expanded frames
 * and packed coefficients. Given less than the unbounded workspace, items
 * run checkpointed (longform.h): the bits of one segment of frames at a
 * time plus a column per segment, the same bits and outputs. */
#include <math.h>
#include <string.h>

#include "common/checks.h"
#include "cpu/dp_core.h"
#include "cpu/fused_gauss.h"
#include "cpu/hard_outputs.h"
#include "cpu/longform.h"
#include "cpu/parallel.h"
#include "cpu/soft_common.h"
#include "mas.h"

typedef struct fa_layout {
    size_t decisions, column, edge, scratch, e, cp;
    size_t checkpoints; /* long-form: a column before every segment but the first */
    int64_t seg_steps;  /* long-form: frames per segment (K); 0: unbounded */
    size_t total;
} fa_layout;

/* A worker's bytes with the decision bits and edges of `steps` frames. */
static fa_layout layout_steps(const fg_plan *p, int64_t steps) {
    fa_layout w;
    int64_t T = p->tokens, lanes = dp_lanes(p->accum);
    w.decisions = MAS_ALIGN_UP((size_t)dp_decision_bytes(T, steps, p->accum), MAS_CACHE_LINE);
    w.column = MAS_ALIGN_UP((size_t)MAS_ALIGN_UP(T, lanes) * p->acc, MAS_CACHE_LINE);
    w.edge = MAS_ALIGN_UP((size_t)(steps + DP_BLOCK_STEPS) * p->acc, MAS_CACHE_LINE);
    w.scratch = MAS_ALIGN_UP((size_t)T * sizeof(int32_t), MAS_CACHE_LINE);
    w.e = p->e_bytes;
    w.cp = p->cp_bytes;
    w.checkpoints = 0;
    w.seg_steps = 0;
    w.total = w.decisions + w.column + w.edge + w.scratch + w.e + w.cp;
    return w;
}

static fa_layout layout_for(const fg_plan *p) { return layout_steps(p, p->frames); }

/* Long-form: segments of K frames. */
static fa_layout longform_layout(const fg_plan *p, int64_t K) {
    fa_layout w = layout_steps(p, K);
    w.checkpoints = (size_t)(lf_segments(p->frames, K) - 1) * w.column;
    w.seg_steps = K;
    w.total += w.checkpoints;
    return w;
}

static size_t longform_bytes(const void *ctx, int64_t K) {
    return longform_layout((const fg_plan *)ctx, K).total;
}

size_t mas_align_gaussian_cpu_workspace_size(const mas_gauss_align_args *args,
                                             int32_t threads) {
    fg_plan p;
    if (fg_plan_call(args, &p) != MAS_OK) return 0;
    if (mas_shape_too_big(p.batch, p.tokens, p.frames) ||
        mas_shape_too_big(p.batch, p.tokens + p.frames, p.rows))
        return SIZE_MAX;
    fa_layout w = layout_for(&p);
    return fg_shared_bytes(&p) + (size_t)soft_team(p.batch, threads) * w.total;
}

size_t mas_align_gaussian_cpu_min_workspace_size(const mas_gauss_align_args *args,
                                                 int32_t threads) {
    size_t full = mas_align_gaussian_cpu_workspace_size(args, threads);
    if (full == 0 || full == SIZE_MAX) return full;
    fg_plan p;
    fg_plan_call(args, &p);
    size_t one = lf_min_bytes(p.frames, longform_bytes, &p), shared = fg_shared_bytes(&p);
    size_t lf = one > SIZE_MAX - shared ? SIZE_MAX : one + shared;
    return lf < full ? lf : full;
}

/* The long-form plan below the unbounded size: as many workers (items at a
 * time) as the threads allow and the size holds at the smallest each, then
 * the longest segments their share holds. 0 when one worker does not fit. */
static int plan_longform(const fg_plan *p, int32_t threads, size_t size, int32_t *team,
                         fa_layout *w) {
    size_t shared = fg_shared_bytes(p);
    if (size <= shared) return 0;
    size_t avail = size - shared;
    size_t one = lf_min_bytes(p->frames, longform_bytes, p);
    if (one == 0 || one > avail) return 0;
    int64_t n = soft_team(p->batch, threads);
    if ((size_t)n > avail / one) n = (int64_t)(avail / one);
    int64_t K = lf_pick_steps(p->frames, avail / (size_t)n, longform_bytes, p);
    if (K == 0) return 0;
    *team = (int32_t)n;
    *w = longform_layout(p, K);
    return 1;
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
    int backtracked = 0;
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
        int bad;
        if (c->w.seg_steps > 0) {
            /* long-form (longform.h): the checkpoints after the packed coefficients */
            lf_run r = {
                .p = &q,
                .seg_steps = c->w.seg_steps,
                .column = column,
                .column_bytes = (size_t)MAS_ALIGN_UP(X, lanes) * p->acc,
                .edge = edge,
                .checkpoints = (uint8_t *)cp + c->w.cp,
                .checkpoint_stride = c->w.column,
            };
            bad = lf_forward(&r);
            score = soft_load(column, p->accum, X - 1);
            if (!bad && score > -INFINITY) {
                const mas_hard_outputs *out = c->out;
                hard_segment_walk walk = {decisions, lanes, c->w.seg_steps, X - 1, scratch,
                                out->indices ? out->indices + b * out->indices_stride : NULL};
                memset(scratch, 0, (size_t)p->tokens * sizeof *scratch);
                lf_backtrack(&r, X - 1, hard_walk_segment, &walk);
                backtracked = 1;
            }
        } else {
            soft_fill(column, p->accum, MAS_ALIGN_UP(X, lanes), -INFINITY);
            soft_fill(edge, p->accum, Y, -INFINITY);
            soft_fill(edge, p->accum, 1, 0.0); /* the virtual start */
            bad = dp_sweep(&q, 0, X, 0, Y, column, edge);
            score = soft_load(column, p->accum, X - 1);
        }
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
        .backtracked = st == MAS_OK && backtracked,
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
    size_t full = st == MAS_OK ? mas_align_gaussian_cpu_workspace_size(args, threads) : 0;
    int32_t team = soft_team(p.batch, threads);
    fa_layout w;
    memset(&w, 0, sizeof w);
    if (st == MAS_OK && full == SIZE_MAX) st = MAS_ERR_WORKSPACE_TOO_SMALL;
    else if (st == MAS_OK && workspace_size >= full) w = layout_for(&p);
    else if (st == MAS_OK && !plan_longform(&p, threads, workspace_size, &team, &w))
        st = MAS_ERR_WORKSPACE_TOO_SMALL; /* below mas_align_gaussian_cpu_min_workspace_size */
    if (st != MAS_OK) {
        if (err) err->status = st;
        return st;
    }
    uint8_t *ws = (uint8_t *)MAS_ALIGN_UP((uintptr_t)workspace, MAS_CACHE_LINE);
    st = fg_coefficients(&p, ws, threads, err);
    if (st != MAS_OK) return st;
    c.p = &p;
    c.out = out;
    c.coef = ws;
    c.w = w;
    c.slots = ws + p.coef_bytes;
    c.status = (int32_t *)(c.slots + (size_t)team * c.w.total);
    mas_parallel_items(team, p.batch, run_item, &c);
    return mas_first_item_error(c.status, p.batch, err);
}
