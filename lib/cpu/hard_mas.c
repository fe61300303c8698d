/* Hard MAS on the CPU: the max-plus sweep of dp_core with one decision bit
 * per cell, then a backtrack over the bits and the requested outputs.
 *
 * Work split: with at least as many items as threads, each thread takes whole
 * items. With fewer items, the threads of the team pipeline one item at a
 * time: thread r owns a range of token tiles and runs block of frames jb as
 * soon as thread r-1 has finished jb, reading r-1's last token through a
 * per-thread edge array of one value per frame. */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "common/checks.h"
#include "cpu/dp_core.h"
#include "cpu/hard_outputs.h"
#include "cpu/longform.h"
#include "cpu/parallel.h"
#include "mas.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define CPU_RELAX() _mm_pause()
#else
#define CPU_RELAX() ((void)0)
#endif

/* Frames per handshake between pipelined threads: long enough that each
 * token row streams from memory and the wait is amortised, short enough that
 * the pipeline fills quickly. */
#define PIPELINE_STEPS 512

typedef struct worker_layout {
    size_t decisions; /* bytes of the decision bitmap of one item */
    size_t column;    /* bytes of alpha's running column (whole tiles) */
    size_t edge;      /* bytes of the edge array: one value per frame */
    size_t scratch;   /* bytes of int32 durations scratch (T) */
    size_t checkpoints; /* long-form (a budget): the columns kept, else 0 */
    int64_t seg_steps;  /* long-form: frames per segment (K), else 0 */
    size_t total;
} worker_layout;

static size_t accum_size(mas_dtype dtype) { return dtype == MAS_FLOAT64 ? 8 : 4; }

static worker_layout layout_for(int64_t T, int64_t S, mas_dtype dtype) {
    worker_layout w;
    int32_t acc = dtype == MAS_FLOAT64 ? MAS_FLOAT64 : MAS_FLOAT32;
    int64_t lanes = dp_lanes(acc);
    int64_t padded_T = MAS_ALIGN_UP(T, lanes);
    w.decisions = MAS_ALIGN_UP((size_t)dp_decision_bytes(T, S, acc), MAS_CACHE_LINE);
    w.column = MAS_ALIGN_UP((size_t)padded_T * accum_size(dtype), MAS_CACHE_LINE);
    w.edge = MAS_ALIGN_UP((size_t)(S + DP_BLOCK_STEPS) * accum_size(dtype), MAS_CACHE_LINE);
    w.scratch = MAS_ALIGN_UP((size_t)T * sizeof(int32_t), MAS_CACHE_LINE);
    w.checkpoints = 0;
    w.seg_steps = 0;
    w.total = w.decisions + w.column + w.edge + w.scratch + MAS_CACHE_LINE /* progress */;
    return w;
}

/* Long-form (longform.h): the bits and edges of one segment of K frames,
 * and a column kept before every segment but the first. */
static worker_layout longform_layout(int64_t T, int64_t S, mas_dtype dtype, int64_t K) {
    worker_layout w = layout_for(T, K, dtype);
    w.checkpoints = (size_t)(lf_segments(S, K) - 1) * w.column;
    w.seg_steps = K;
    w.total += w.checkpoints;
    return w;
}

typedef struct shape_key {
    int64_t T, S;
    mas_dtype dtype;
} shape_key;

static size_t longform_bytes(const void *ctx, int64_t K) {
    const shape_key *k = (const shape_key *)ctx;
    return longform_layout(k->T, k->S, k->dtype, K).total;
}

/* Bytes of the call that are not a worker's: alignment slack, statuses. */
static size_t shared_bytes(int64_t batch) {
    return MAS_CACHE_LINE + MAS_ALIGN_UP((size_t)batch * sizeof(int32_t), MAS_CACHE_LINE);
}

/* Pipelined long-form: one shared worker_layout-like area (decisions of K
 * frames, column, durations, checkpoints; its total counts no progress
 * line) and per rank an edge array of every frame and a progress line. */
typedef struct pipe_key {
    int64_t T, S;
    mas_dtype dtype;
    int32_t team;
} pipe_key;

static size_t lf_rank_bytes(int64_t S, mas_dtype dtype) {
    return MAS_ALIGN_UP((size_t)(S + DP_BLOCK_STEPS) * accum_size(dtype), MAS_CACHE_LINE) +
           MAS_CACHE_LINE;
}

static size_t pipe_bytes(const void *ctx, int64_t K) {
    const pipe_key *k = (const pipe_key *)ctx;
    worker_layout w = longform_layout(k->T, k->S, k->dtype, K);
    return w.total - w.edge - MAS_CACHE_LINE + (size_t)k->team * lf_rank_bytes(k->S, k->dtype);
}

/* Below this many cells per thread, starting a thread costs more than it
 * saves (tens of microseconds against a few nanoseconds a cell). The tests
 * lower it with MAS_CPU_MIN_CELLS_PER_THREAD to split even tiny problems. */
static int64_t min_cells_per_thread(void) {
    const char *s = getenv("MAS_CPU_MIN_CELLS_PER_THREAD");
    long long v = s ? atoll(s) : 0;
    return v > 0 ? (int64_t)v : (int64_t)1 << 16;
}

static int32_t team_size(int64_t B, int64_t T, int64_t S, mas_dtype dtype, int32_t threads) {
    int64_t n = mas_thread_count(threads);
    if (n >= 256) n = 256;
    int64_t by_work = B * T * S / min_cells_per_thread();
    if (n > by_work) n = by_work > 1 ? by_work : 1;
    /* Pipelining needs at least one tile per thread. */
    int64_t tiles = (T + dp_lanes(dtype == MAS_FLOAT64 ? MAS_FLOAT64 : MAS_FLOAT32) - 1) /
                    dp_lanes(dtype == MAS_FLOAT64 ? MAS_FLOAT64 : MAS_FLOAT32);
    int64_t cap = B >= n ? n : (B > tiles ? B : tiles);
    return (int32_t)(n < cap ? n : cap);
}

size_t mas_hard_cpu_workspace_size(int64_t batch, int64_t tokens, int64_t frames,
                                   mas_dtype dtype, int32_t threads) {
    if (batch < 1 || tokens < 1 || frames < 1) return 0;
    if (mas_shape_too_big(batch, tokens, frames)) return SIZE_MAX;
    worker_layout w = layout_for(tokens, frames, dtype);
    int32_t n = team_size(batch, tokens, frames, dtype, threads);
    return MAS_CACHE_LINE + (size_t)n * w.total + MAS_ALIGN_UP((size_t)batch * sizeof(int32_t), MAS_CACHE_LINE);
}

/* The smallest long-form workspace: one worker, the best K. */
static size_t longform_min_size(int64_t batch, int64_t tokens, int64_t frames,
                                mas_dtype dtype) {
    shape_key key = {tokens, frames, dtype};
    size_t one = lf_min_bytes(frames, longform_bytes, &key);
    size_t shared = shared_bytes(batch);
    return one > SIZE_MAX - shared ? SIZE_MAX : one + shared;
}

size_t mas_hard_cpu_min_workspace_size(int64_t batch, int64_t tokens, int64_t frames,
                                       mas_dtype dtype, int32_t threads) {
    if (batch < 1 || tokens < 1 || frames < 1) return 0;
    if (mas_shape_too_big(batch, tokens, frames)) return SIZE_MAX;
    size_t full = mas_hard_cpu_workspace_size(batch, tokens, frames, dtype, threads);
    size_t lf = longform_min_size(batch, tokens, frames, dtype);
    return lf < full ? lf : full;
}

/* The long-form plan for a workspace below the unbounded size: as many
 * workers (items at a time) as the threads allow and the budget holds at
 * the smallest size each, then the longest segments their share holds.
 * Returns 0 when even one worker does not fit. */
static int plan_longform(int64_t B, int64_t T, int64_t S, mas_dtype dtype, int32_t threads,
                         size_t size, int32_t *team, worker_layout *w, int *pipelined) {
    size_t shared = shared_bytes(B);
    if (size <= shared) return 0;
    size_t avail = size - shared;
    *pipelined = 0;
    int32_t t = team_size(B, T, S, dtype, threads);
    if (t > 1 && B < t) {
        /* fewer items than threads: one item at a time over the team, as
         * the unbounded call pipelines, if the budget holds the team's
         * edge arrays; else items one per thread below */
        pipe_key pk = {T, S, dtype, t};
        int64_t K = lf_pick_steps(S, avail, pipe_bytes, &pk);
        if (K > 0) {
            *team = t;
            *w = longform_layout(T, S, dtype, K);
            *pipelined = 1;
            return 1;
        }
    }
    shape_key key = {T, S, dtype};
    size_t one = lf_min_bytes(S, longform_bytes, &key);
    if (one == 0 || one > avail) return 0;
    int64_t n = team_size(B, T, S, dtype, threads);
    if (n > B) n = B; /* whole items per worker: no pipelining here */
    if ((size_t)n > avail / one) n = (int64_t)(avail / one);
    int64_t K = lf_pick_steps(S, avail / (size_t)n, longform_bytes, &key);
    if (K == 0) return 0;
    *team = (int32_t)n;
    *w = longform_layout(T, S, dtype, K);
    return 1;
}

typedef struct hard_call {
    const mas_tensor3 *value;
    const int64_t *x_len, *y_len;
    const mas_hard_outputs *out;
    uint8_t *ws; /* aligned */
    worker_layout w;
    int32_t team;
    int32_t accum;
    int32_t *item_status; /* [B] */
    /* pipelined mode: the item in flight and each rank's progress */
    int64_t item;
    int64_t tiles_per_rank;
    /* the pipelined sweep's frames [t_begin, t_end) and states [0, s_limit):
     * the whole item, except for a long-form re-run */
    int64_t t_begin, t_end, s_limit;
    /* Pipelined long-form (one item over the team within a budget): one
     * shared area (decisions of a segment, column, checkpoints, durations)
     * and per rank an edge array of every frame plus a progress line. NULL
     * otherwise: every rank's slice is a worker_layout. */
    uint8_t *lf_ranks;
    size_t lf_rank_bytes;
    int save_checkpoints; /* the forward keeps the column at segment starts */
} hard_call;

static uint8_t *worker_base(const hard_call *c, int32_t rank) {
    return c->ws + (size_t)rank * c->w.total;
}

/* The pipelined sweep's arrays: rank 0's decisions and column, each rank's
 * edge array (both layouts). */
static uint8_t *pipe_shared(const hard_call *c) { return c->lf_ranks ? c->ws : worker_base(c, 0); }
static uint8_t *pipe_edge(const hard_call *c, int32_t rank) {
    return c->lf_ranks ? c->lf_ranks + (size_t)rank * c->lf_rank_bytes
                       : worker_base(c, rank) + c->w.decisions + c->w.column;
}

static dp_problem problem_for(const hard_call *c, int64_t b, uint8_t *decisions) {
    const mas_tensor3 *v = c->value;
    dp_problem p;
    memset(&p, 0, sizeof p);
    p.n_states = c->x_len[b];
    p.n_steps = c->y_len[b];
    p.semiring = DP_MAXPLUS;
    p.accum = c->accum;
    p.cell.base = (const uint8_t *)v->data + b * v->stride[0] * (int64_t)mas_dtype_size(v->dtype);
    p.cell.dtype = v->dtype;
    p.cell.stride_state = v->stride[1];
    p.cell.stride_step = v->stride[2];
    /* Only cells on some monotonic path from (0,0) to (X-1,Y-1) are read:
     * j - (Y - X) <= i <= j. No other cell can change any output. */
    p.band = p.n_steps - p.n_states;
    p.readable = 1;
    p.decisions = decisions;
    return p;
}

static void fill_real(void *dst, int32_t accum, int64_t n, double x) {
    if (accum == MAS_FLOAT64)
        for (int64_t i = 0; i < n; i++) ((double *)dst)[i] = x;
    else
        for (int64_t i = 0; i < n; i++) ((float *)dst)[i] = (float)x;
}

/* Edge for steps [t0, t0+n) entering state 0 from the virtual start. */
static void start_edge(void *edge, int32_t accum, int64_t t0, int64_t n) {
    fill_real(edge, accum, n, -INFINITY);
    if (t0 == 0) fill_real(edge, accum, 1, 0.0);
}

static double read_real(const void *p, int32_t accum, int64_t i) {
    return accum == MAS_FLOAT64 ? ((const double *)p)[i] : (double)((const float *)p)[i];
}

static mas_status check_lengths(int64_t X, int64_t Y, int64_t T, int64_t S) {
    if (X < 1 || Y < 1 || X > T || Y > S) return MAS_ERR_BAD_LENGTH;
    if (X > Y) return MAS_ERR_X_LEN_GT_Y_LEN;
    return MAS_OK;
}

/* After the sweep: validate, backtrack, write outputs. */
static void finish_item(hard_call *c, int64_t b, int bad, double score,
                        const uint8_t *decisions, int32_t *scratch) {
    mas_status st = MAS_OK;
    if (bad) st = MAS_ERR_NONFINITE_VALUE;
    else if (score == -INFINITY) st = MAS_ERR_NO_FINITE_PATH;
    c->item_status[b] = st;
    hard_item_outputs o = {
        .n_tokens = st == MAS_OK ? c->x_len[b] : 0,
        .n_frames = st == MAS_OK ? c->y_len[b] : 0,
        .decisions = decisions,
        .lanes = dp_lanes(c->accum),
        .score = st == MAS_OK ? score : -INFINITY,
        .durations = scratch,
    };
    hard_write_outputs(c->value, c->out, b, &o);
}

static void fail_item(hard_call *c, int64_t b, mas_status st, int32_t *scratch) {
    c->item_status[b] = st;
    hard_item_outputs o = {.n_tokens = 0, .n_frames = 0, .lanes = dp_lanes(c->accum),
                           .score = -INFINITY, .durations = scratch};
    hard_write_outputs(c->value, c->out, b, &o);
}

/* One thread, one item, start to end. */
static void run_item(hard_call *c, int64_t b, int32_t rank) {
    uint8_t *base = worker_base(c, rank);
    uint8_t *decisions = base;
    void *column = base + c->w.decisions;
    void *edge = base + c->w.decisions + c->w.column;
    int32_t *scratch = (int32_t *)(base + c->w.decisions + c->w.column + c->w.edge);
    int64_t T = c->value->dim[1], S = c->value->dim[2];
    mas_status st = check_lengths(c->x_len[b], c->y_len[b], T, S);
    if (st != MAS_OK) {
        fail_item(c, b, st, scratch);
        return;
    }
    dp_problem p = problem_for(c, b, decisions);
    int64_t lanes = dp_lanes(c->accum);
    fill_real(column, c->accum, MAS_ALIGN_UP(p.n_states, lanes), -INFINITY);
    start_edge(edge, c->accum, 0, p.n_steps);
    int bad = dp_sweep(&p, 0, p.n_states, 0, p.n_steps, column, edge);
    finish_item(c, b, bad, read_real(column, c->accum, p.n_states - 1), decisions, scratch);
}

/* One thread, one item, within a budget: checkpointed (longform.h). */
static void run_item_longform(hard_call *c, int64_t b, int32_t rank) {
    uint8_t *base = worker_base(c, rank);
    uint8_t *decisions = base;
    void *column = base + c->w.decisions;
    void *edge = base + c->w.decisions + c->w.column;
    int32_t *scratch = (int32_t *)(base + c->w.decisions + c->w.column + c->w.edge);
    uint8_t *checkpoints = (uint8_t *)scratch + c->w.scratch;
    int64_t T = c->value->dim[1], S = c->value->dim[2];
    mas_status st = check_lengths(c->x_len[b], c->y_len[b], T, S);
    if (st != MAS_OK) {
        fail_item(c, b, st, scratch);
        return;
    }
    dp_problem p = problem_for(c, b, decisions);
    int64_t lanes = dp_lanes(c->accum);
    lf_run r = {
        .p = &p,
        .seg_steps = c->w.seg_steps,
        .column = column,
        .column_bytes = (size_t)MAS_ALIGN_UP(p.n_states, lanes) * accum_size(c->accum),
        .edge = edge,
        .checkpoints = checkpoints,
        .checkpoint_stride = c->w.column,
    };
    int bad = lf_forward(&r);
    double score = read_real(column, c->accum, p.n_states - 1);
    st = bad ? MAS_ERR_NONFINITE_VALUE : score == -INFINITY ? MAS_ERR_NO_FINITE_PATH : MAS_OK;
    if (st != MAS_OK) {
        fail_item(c, b, st, scratch);
        return;
    }
    c->item_status[b] = MAS_OK;
    const mas_hard_outputs *out = c->out;
    hard_segment_walk walk = {decisions, lanes, c->w.seg_steps, p.n_states - 1, scratch,
                    out->indices ? out->indices + b * out->indices_stride : NULL};
    memset(scratch, 0, (size_t)T * sizeof *scratch);
    lf_backtrack(&r, p.n_states - 1, hard_walk_segment, &walk);
    hard_item_outputs o = {
        .n_tokens = p.n_states,
        .n_frames = p.n_steps,
        .lanes = lanes,
        .score = score,
        .durations = scratch,
        .backtracked = 1,
    };
    hard_write_outputs(c->value, out, b, &o);
}

static void item_task(void *ctx, int64_t b, int32_t rank) { run_item((hard_call *)ctx, b, rank); }

static void item_task_longform(void *ctx, int64_t b, int32_t rank) {
    run_item_longform((hard_call *)ctx, b, rank);
}

/* Pipelined: rank r sweeps tiles [r*k, (r+1)*k) of item c->item. */
static atomic_llong *progress_of(hard_call *c, int32_t rank) {
    if (c->lf_ranks)
        return (atomic_llong *)(c->lf_ranks + (size_t)(rank + 1) * c->lf_rank_bytes -
                                MAS_CACHE_LINE);
    uint8_t *base = worker_base(c, rank);
    return (atomic_llong *)(base + c->w.total - MAS_CACHE_LINE);
}

static int32_t *bad_flag_of(hard_call *c, int32_t rank) {
    return (int32_t *)(progress_of(c, rank) + 1);
}

static void pipeline_worker(void *ctx, int32_t rank) {
    hard_call *c = (hard_call *)ctx;
    int64_t b = c->item;
    int64_t X = c->s_limit, t_begin = c->t_begin, t_end = c->t_end;
    int64_t lanes = dp_lanes(c->accum);
    int64_t s_begin = rank * c->tiles_per_rank * lanes;
    int64_t s_end = s_begin + c->tiles_per_rank * lanes;
    if (s_end > X) s_end = X;
    atomic_llong *mine = progress_of(c, rank);
    *bad_flag_of(c, rank) = 0;
    if (s_begin >= s_end) {
        atomic_store_explicit(mine, t_end, memory_order_release);
        return;
    }
    uint8_t *shared = pipe_shared(c);
    dp_problem p = problem_for(c, b, shared);
    size_t acc = accum_size(c->accum == MAS_FLOAT64 ? MAS_FLOAT64 : MAS_FLOAT32);
    /* Each rank's column slice lives in rank 0's column array; each rank's
     * edge (its last token, every frame) in its own edge array, which the
     * next rank copies block by block. */
    uint8_t *column = shared + c->w.decisions + (size_t)s_begin * acc;
    size_t slice = (size_t)MAS_ALIGN_UP(s_end - s_begin, lanes) * acc;
    uint8_t *my_edge = pipe_edge(c, rank);
    const uint8_t *prev_edge = rank > 0 ? pipe_edge(c, rank - 1) : NULL;
    atomic_llong *prev = rank > 0 ? progress_of(c, rank - 1) : NULL;
    /* long-form: segments of K frames, each block inside one */
    int64_t K = c->w.seg_steps;
    if (t_begin == 0) fill_real(column, c->accum, MAS_ALIGN_UP(s_end - s_begin, lanes), -INFINITY);
    int bad = 0;
    for (int64_t t0 = t_begin; t0 < t_end; t0 += PIPELINE_STEPS) {
        int64_t t1 = t0 + PIPELINE_STEPS < t_end ? t0 + PIPELINE_STEPS : t_end;
        if (K > 0) {
            int64_t seg0 = t0 - t0 % K;
            if (t1 > seg0 + K) t1 = seg0 + K;
            p.decisions_t0 = seg0;
            p.decisions_steps = K;
            if (c->save_checkpoints && t0 == seg0 && t0 > 0) /* the column before segment t0/K */
                memcpy(shared + c->w.decisions + c->w.column + c->w.scratch +
                           (size_t)(t0 / K - 1) * c->w.column + (size_t)s_begin * acc,
                       column, slice);
        }
        uint8_t *e = my_edge + (size_t)t0 * acc;
        if (prev) {
            while (atomic_load_explicit(prev, memory_order_acquire) < t1) CPU_RELAX();
            memcpy(e, prev_edge + (size_t)t0 * acc, (size_t)(t1 - t0) * acc);
        } else {
            start_edge(e, c->accum, t0, t1 - t0);
        }
        bad |= dp_sweep(&p, s_begin, s_end, t0, t1, column, e);
        atomic_store_explicit(mine, t1, memory_order_release);
        if (K > 0) t0 = t1 - PIPELINE_STEPS; /* the next block starts at t1 */
    }
    *bad_flag_of(c, rank) = bad;
}

/* Runs pipeline_worker over the team for frames [t0, t1), states [0, X). */
static void run_pipeline(hard_call *c, int64_t t0, int64_t t1, int64_t X) {
    int64_t lanes = dp_lanes(c->accum);
    int64_t tiles = (X + lanes - 1) / lanes;
    c->t_begin = t0;
    c->t_end = t1;
    c->s_limit = X;
    c->tiles_per_rank = (tiles + c->team - 1) / c->team;
    for (int32_t r = 0; r < c->team; r++) atomic_init(progress_of(c, r), t0);
    mas_parallel_run(c->team, pipeline_worker, c);
}

/* Pipelined long-form (layout: pipe_bytes): one item over the whole team, the
 * forward keeping checkpoints, then each segment re-run from its
 * checkpoint over the states up to the path's, and walked. The same
 * sweeps as longform.c's driver, split over ranks as the unbounded
 * pipeline splits them. */
static void run_item_pipelined_longform(hard_call *c, int64_t b) {
    uint8_t *shared = c->ws;
    uint8_t *decisions = shared;
    uint8_t *column = shared + c->w.decisions;
    int32_t *scratch = (int32_t *)(shared + c->w.decisions + c->w.column);
    uint8_t *checkpoints = (uint8_t *)scratch + c->w.scratch;
    int64_t T = c->value->dim[1], S = c->value->dim[2];
    mas_status st = check_lengths(c->x_len[b], c->y_len[b], T, S);
    if (st != MAS_OK) {
        fail_item(c, b, st, scratch);
        return;
    }
    int64_t X = c->x_len[b], Y = c->y_len[b], K = c->w.seg_steps;
    int64_t lanes = dp_lanes(c->accum);
    size_t acc = accum_size(c->accum);
    c->item = b;
    c->save_checkpoints = 1;
    run_pipeline(c, 0, Y, X);
    c->save_checkpoints = 0;
    double score = read_real(column + (size_t)(X - 1) * acc, c->accum, 0);
    int bad = 0;
    for (int32_t r = 0; r < c->team; r++) bad |= *bad_flag_of(c, r);
    st = bad ? MAS_ERR_NONFINITE_VALUE : score == -INFINITY ? MAS_ERR_NO_FINITE_PATH : MAS_OK;
    if (st != MAS_OK) {
        fail_item(c, b, st, scratch);
        return;
    }
    c->item_status[b] = MAS_OK;
    const mas_hard_outputs *out = c->out;
    int32_t *idx = out->indices ? out->indices + b * out->indices_stride : NULL;
    memset(scratch, 0, (size_t)T * sizeof *scratch);
    size_t column_bytes = (size_t)MAS_ALIGN_UP(X, lanes) * acc;
    int64_t m = lf_segments(Y, K), i = X - 1;
    for (int64_t g = m - 1; g >= 0; g--) {
        int64_t t0 = g * K, t1 = t0 + K < Y ? t0 + K : Y;
        if (g < m - 1) {
            if (g == 0) fill_real(column, c->accum, MAS_ALIGN_UP(X, lanes), -INFINITY);
            else memcpy(column, checkpoints + (size_t)(g - 1) * c->w.column, column_bytes);
            run_pipeline(c, t0, t1, i + 1); /* the states up to the path's */
        }
        hard_backtrack(decisions, lanes, t0, K, t0, t1, &i, scratch, idx);
    }
    hard_item_outputs o = {
        .n_tokens = X,
        .n_frames = Y,
        .lanes = lanes,
        .score = score,
        .durations = scratch,
        .backtracked = 1,
    };
    hard_write_outputs(c->value, out, b, &o);
}

mas_status mas_hard_cpu(const mas_tensor3 *value, const int64_t *x_len,
                        const int64_t *y_len, const mas_hard_outputs *out,
                        void *workspace, size_t workspace_size, int32_t threads,
                        mas_error *err) {
    if (err) *err = (mas_error){MAS_OK, 0, -1};
    mas_status st = mas_hard_check_call(value, x_len, y_len, out);
    if (st == MAS_OK && !workspace) st = MAS_ERR_NULL_POINTER;
    if (st != MAS_OK) {
        if (err) err->status = st;
        return st;
    }
    int64_t B = value->dim[0], T = value->dim[1], S = value->dim[2];
    mas_dtype dtype = (mas_dtype)value->dtype;
    hard_call c;
    memset(&c, 0, sizeof c);
    int pipelined = 0;
    if (workspace_size >= mas_hard_cpu_workspace_size(B, T, S, dtype, threads)) {
        c.w = layout_for(T, S, dtype);
        c.team = team_size(B, T, S, dtype, threads);
    } else if (mas_shape_too_big(B, T, S) ||
               !plan_longform(B, T, S, dtype, threads, workspace_size, &c.team, &c.w,
                              &pipelined)) {
        /* below mas_hard_cpu_min_workspace_size */
        if (err) err->status = MAS_ERR_WORKSPACE_TOO_SMALL;
        return MAS_ERR_WORKSPACE_TOO_SMALL;
    }
    c.value = value;
    c.x_len = x_len;
    c.y_len = y_len;
    c.out = out;
    c.ws = (uint8_t *)MAS_ALIGN_UP((uintptr_t)workspace, MAS_CACHE_LINE);
    c.accum = dtype == MAS_FLOAT64 ? MAS_FLOAT64 : MAS_FLOAT32;
    c.item_status = (int32_t *)(c.ws + (size_t)c.team * c.w.total);

    if (pipelined) {
        /* the shared area (as one worker's, without its edge and progress
         * line), then the ranks' edge arrays, then the statuses */
        size_t shared = c.w.total - c.w.edge - MAS_CACHE_LINE;
        c.lf_rank_bytes = lf_rank_bytes(S, dtype);
        c.lf_ranks = c.ws + shared;
        c.item_status = (int32_t *)(c.lf_ranks + (size_t)c.team * c.lf_rank_bytes);
        /* the shared area has no edge: its decisions, column, durations and
         * checkpoints follow one another */
        c.w.edge = 0;
        for (int64_t b = 0; b < B; b++) run_item_pipelined_longform(&c, b);
    } else if (c.w.seg_steps > 0) {
        mas_parallel_items(c.team, B, item_task_longform, &c);
    } else if (c.team <= 1 || B >= c.team) {
        mas_parallel_items(c.team, B, item_task, &c);
    } else {
        for (int64_t b = 0; b < B; b++) {
            int32_t *scratch = (int32_t *)(worker_base(&c, 0) + c.w.decisions + c.w.column + c.w.edge);
            st = check_lengths(x_len[b], y_len[b], T, S);
            if (st != MAS_OK) {
                fail_item(&c, b, st, scratch);
                continue;
            }
            c.item = b;
            c.item_status[b] = MAS_OK;
            run_pipeline(&c, 0, y_len[b], x_len[b]);
            /* The last state lives in the column slice of whichever rank owns it. */
            size_t acc = accum_size(dtype);
            const uint8_t *column = worker_base(&c, 0) + c.w.decisions;
            double score = read_real(column + (size_t)(x_len[b] - 1) * acc, c.accum, 0);
            int bad = 0;
            for (int32_t r = 0; r < c.team; r++) bad |= *bad_flag_of(&c, r);
            finish_item(&c, b, bad, score, worker_base(&c, 0), scratch);
        }
    }

    return mas_first_item_error(c.item_status, B, err);
}
