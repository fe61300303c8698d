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
    w.total = w.decisions + w.column + w.edge + w.scratch + MAS_CACHE_LINE /* progress */;
    return w;
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
} hard_call;

static uint8_t *worker_base(const hard_call *c, int32_t rank) {
    return c->ws + (size_t)rank * c->w.total;
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

static void item_task(void *ctx, int64_t b, int32_t rank) { run_item((hard_call *)ctx, b, rank); }

/* Pipelined: rank r sweeps tiles [r*k, (r+1)*k) of item c->item. */
static atomic_llong *progress_of(hard_call *c, int32_t rank) {
    uint8_t *base = worker_base(c, rank);
    return (atomic_llong *)(base + c->w.total - MAS_CACHE_LINE);
}

static int32_t *bad_flag_of(hard_call *c, int32_t rank) {
    return (int32_t *)(progress_of(c, rank) + 1);
}

static void pipeline_worker(void *ctx, int32_t rank) {
    hard_call *c = (hard_call *)ctx;
    int64_t b = c->item;
    int64_t X = c->x_len[b], Y = c->y_len[b];
    int64_t lanes = dp_lanes(c->accum);
    int64_t s_begin = rank * c->tiles_per_rank * lanes;
    int64_t s_end = s_begin + c->tiles_per_rank * lanes;
    if (s_end > X) s_end = X;
    atomic_llong *mine = progress_of(c, rank);
    *bad_flag_of(c, rank) = 0;
    if (s_begin >= s_end) {
        atomic_store_explicit(mine, Y, memory_order_release);
        return;
    }
    dp_problem p = problem_for(c, b, worker_base(c, 0));
    size_t acc = accum_size(c->accum == MAS_FLOAT64 ? MAS_FLOAT64 : MAS_FLOAT32);
    /* Each rank's column slice lives in rank 0's column array; each rank's
     * edge (its last token, every frame) in its own edge array, which the
     * next rank copies block by block. */
    uint8_t *column = worker_base(c, 0) + c->w.decisions + (size_t)s_begin * acc;
    uint8_t *my_edge = worker_base(c, rank) + c->w.decisions + c->w.column;
    const uint8_t *prev_edge =
        rank > 0 ? worker_base(c, rank - 1) + c->w.decisions + c->w.column : NULL;
    atomic_llong *prev = rank > 0 ? progress_of(c, rank - 1) : NULL;
    fill_real(column, c->accum, MAS_ALIGN_UP(s_end - s_begin, lanes), -INFINITY);
    int bad = 0;
    for (int64_t t0 = 0; t0 < Y; t0 += PIPELINE_STEPS) {
        int64_t t1 = t0 + PIPELINE_STEPS < Y ? t0 + PIPELINE_STEPS : Y;
        uint8_t *e = my_edge + (size_t)t0 * acc;
        if (prev) {
            while (atomic_load_explicit(prev, memory_order_acquire) < t1) CPU_RELAX();
            memcpy(e, prev_edge + (size_t)t0 * acc, (size_t)(t1 - t0) * acc);
        } else {
            start_edge(e, c->accum, t0, t1 - t0);
        }
        bad |= dp_sweep(&p, s_begin, s_end, t0, t1, column, e);
        atomic_store_explicit(mine, t1, memory_order_release);
    }
    *bad_flag_of(c, rank) = bad;
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
    if (workspace_size < mas_hard_cpu_workspace_size(B, T, S, dtype, threads)) {
        if (err) err->status = MAS_ERR_WORKSPACE_TOO_SMALL;
        return MAS_ERR_WORKSPACE_TOO_SMALL;
    }
    hard_call c;
    memset(&c, 0, sizeof c);
    c.value = value;
    c.x_len = x_len;
    c.y_len = y_len;
    c.out = out;
    c.ws = (uint8_t *)MAS_ALIGN_UP((uintptr_t)workspace, MAS_CACHE_LINE);
    c.w = layout_for(T, S, dtype);
    c.team = team_size(B, T, S, dtype, threads);
    c.accum = dtype == MAS_FLOAT64 ? MAS_FLOAT64 : MAS_FLOAT32;
    c.item_status = (int32_t *)(c.ws + (size_t)c.team * c.w.total);

    if (c.team <= 1 || B >= c.team) {
        mas_parallel_items(c.team, B, item_task, &c);
    } else {
        int64_t lanes = dp_lanes(c.accum);
        for (int64_t b = 0; b < B; b++) {
            int32_t *scratch = (int32_t *)(worker_base(&c, 0) + c.w.decisions + c.w.column + c.w.edge);
            st = check_lengths(x_len[b], y_len[b], T, S);
            if (st != MAS_OK) {
                fail_item(&c, b, st, scratch);
                continue;
            }
            int64_t tiles = (x_len[b] + lanes - 1) / lanes;
            c.item = b;
            c.item_status[b] = MAS_OK;
            c.tiles_per_rank = (tiles + c.team - 1) / c.team;
            for (int32_t r = 0; r < c.team; r++) atomic_init(progress_of(&c, r), 0);
            mas_parallel_run(c.team, pipeline_worker, &c);
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
