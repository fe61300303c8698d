/* Checkpointed hard alignment under a workspace budget (see longform.h). */
#include "cpu/longform.h"

#include <math.h>
#include <string.h>

#include "common/checks.h"

/* The segment length of `segments` segments, in whole blocks of steps. */
static int64_t steps_for(int64_t n_steps, int64_t segments) {
    int64_t k = (n_steps + segments - 1) / segments;
    return (k + DP_BLOCK_STEPS - 1) / DP_BLOCK_STEPS * DP_BLOCK_STEPS;
}

/* Candidates run from one segment (K = n_steps rounded up) to segments of
 * one block each; only distinct K are tried (after K, the fewest segments
 * that give K - DP_BLOCK_STEPS or less): at most about 2 sqrt(n_steps). */
size_t lf_min_bytes(int64_t n_steps, lf_bytes_fn bytes, const void *ctx) {
    size_t best = SIZE_MAX;
    for (int64_t m = 1; m <= n_steps;) {
        int64_t k = steps_for(n_steps, m);
        size_t b = bytes(ctx, k);
        if (b < best) best = b;
        if (k <= DP_BLOCK_STEPS) break;
        m = lf_segments(n_steps, k - DP_BLOCK_STEPS); /* the first with a shorter K */
    }
    return best;
}

int64_t lf_pick_steps(int64_t n_steps, size_t budget, lf_bytes_fn bytes, const void *ctx) {
    for (int64_t m = 1; m <= n_steps;) {
        int64_t k = steps_for(n_steps, m);
        if (bytes(ctx, k) <= budget) return k;
        if (k <= DP_BLOCK_STEPS) break;
        m = lf_segments(n_steps, k - DP_BLOCK_STEPS); /* the first with a shorter K */
    }
    return 0;
}

static void fill(void *dst, int32_t accum, int64_t n, double x) {
    if (accum == MAS_FLOAT64)
        for (int64_t i = 0; i < n; i++) ((double *)dst)[i] = x;
    else
        for (int64_t i = 0; i < n; i++) ((float *)dst)[i] = (float)x;
}

static size_t real_size(int32_t accum) { return accum == MAS_FLOAT64 ? 8 : 4; }

/* Sweeps steps [t0, t1) over every state from the column in r->column,
 * writing the bits of those steps at the start of the bitmaps. The edges
 * into state 0 come from the virtual start: 0 at step 0, else -inf. */
static int sweep_segment(lf_run *r, int64_t t0, int64_t t1, int64_t s_end) {
    dp_problem *p = r->p;
    int32_t acc = p->accum;
    fill(r->edge, acc, t1 - t0, -INFINITY);
    if (t0 == 0) fill(r->edge, acc, 1, 0.0);
    const dp_topology *tp = p->topo;
    if (tp && tp->skip) {
        fill(tp->skip_edge, acc, (t1 - t0) * DP_MAX_SKIP, -INFINITY);
        if (t0 == 0)
            fill((uint8_t *)tp->skip_edge + (size_t)(tp->skip_dist - 1) * real_size(acc), acc,
                 1, 0.0);
    }
    p->decisions_t0 = t0;
    p->decisions_steps = r->seg_steps;
    return dp_sweep(p, 0, s_end, t0, t1, r->column, r->edge);
}

int lf_forward(lf_run *r) {
    int64_t Y = r->p->n_steps, K = r->seg_steps;
    int64_t m = lf_segments(Y, K);
    fill(r->column, r->p->accum, (int64_t)(r->column_bytes / real_size(r->p->accum)), -INFINITY);
    int bad = 0;
    for (int64_t g = 0; g < m; g++) {
        int64_t t0 = g * K, t1 = t0 + K < Y ? t0 + K : Y;
        if (g > 0)
            memcpy(r->checkpoints + (size_t)(g - 1) * r->checkpoint_stride, r->column,
                   r->column_bytes);
        bad |= sweep_segment(r, t0, t1, r->p->n_states);
    }
    return bad;
}

void lf_backtrack(lf_run *r, int64_t top, int64_t (*visit)(void *ctx, int64_t t0, int64_t t1),
                  void *ctx) {
    int64_t Y = r->p->n_steps, K = r->seg_steps;
    int64_t m = lf_segments(Y, K);
    for (int64_t g = m - 1; g >= 0; g--) {
        int64_t t0 = g * K, t1 = t0 + K < Y ? t0 + K : Y;
        if (g < m - 1) {
            if (g == 0)
                fill(r->column, r->p->accum, (int64_t)(r->column_bytes / real_size(r->p->accum)),
                     -INFINITY);
            else
                memcpy(r->column, r->checkpoints + (size_t)(g - 1) * r->checkpoint_stride,
                       r->column_bytes);
            /* states [0, top]: whole tiles of them, the same tiles as the
             * forward's, so the same values and bits */
            sweep_segment(r, t0, t1, top + 1);
        }
        top = visit(ctx, t0, t1);
    }
}
