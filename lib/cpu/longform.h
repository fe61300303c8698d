/* Long-form hard alignment under a workspace budget, by checkpointing.
 *
 * The unbounded hard alignment keeps one decision bit per cell of the item
 * ([states x steps]; a 2-hour recording is gigabytes of bits). Here the
 * steps are cut into segments of K steps: the forward runs once over every
 * segment in order, keeping the column of alpha (every state) before each
 * segment (a checkpoint) and the bits of the segment being swept only. Then,
 * for the segments from the last to the first, the forward of that segment
 * is run again from its checkpoint, which rewrites its bits, and the
 * backtrack walks through them from the state the later segment entered
 * with; only the states up to that one are re-run (none above it can be on
 * the path). Memory: (segments - 1) columns plus one segment of bits,
 * against all the bits; time: one forward plus the re-runs below the path,
 * about half a forward more when the path runs along the diagonal.
 *
 * Exact: each cell's value is the same max and add of the same two values
 * whether the sweep started at step 0 or at a checkpoint (dp_sweep's column
 * and edges carry all the state there is between steps), so the bits, the
 * path and the score are those of the unbounded run, bit for bit. K is a
 * multiple of DP_BLOCK_STEPS so that the blocks of steps coincide too.
 *
 * One driver for every hard op on the CPU (hard MAS, topologies): the op
 * builds its dp_problem as usual (decisions and skip decisions pointing at
 * a bitmap of K steps) and gives the backtrack of one segment. */
#ifndef MAS_CPU_LONGFORM_H
#define MAS_CPU_LONGFORM_H

#include <stddef.h>
#include <stdint.h>

#include "cpu/dp_core.h"

/* Bytes one worker needs when segments are seg_steps long. */
typedef size_t (*lf_bytes_fn)(const void *ctx, int64_t seg_steps);

/* Segments of n_steps steps at seg_steps each. */
static inline int64_t lf_segments(int64_t n_steps, int64_t seg_steps) {
    return (n_steps + seg_steps - 1) / seg_steps;
}

/* The smallest bytes(K) over the segment lengths K worth trying (multiples
 * of DP_BLOCK_STEPS, one per segment count); SIZE_MAX if bytes says so. */
size_t lf_min_bytes(int64_t n_steps, lf_bytes_fn bytes, const void *ctx);

/* The longest segment length K with bytes(K) <= budget (fewest
 * checkpoints, longest sweeps), or 0 when none fits. */
int64_t lf_pick_steps(int64_t n_steps, size_t budget, lf_bytes_fn bytes, const void *ctx);

/* One item's checkpointed run. */
typedef struct lf_run {
    dp_problem *p;          /* the item's problem; its bitmaps hold seg_steps steps */
    int64_t seg_steps;      /* K, a multiple of DP_BLOCK_STEPS */
    void *column;           /* the running column (as for dp_sweep) */
    size_t column_bytes;    /* bytes of it the sweep uses (whole tiles) */
    void *edge;             /* seg_steps + DP_BLOCK_STEPS values */
    uint8_t *checkpoints;   /* (segments - 1) * checkpoint_stride bytes */
    size_t checkpoint_stride;
} lf_run;

/* The forward over every segment: leaves alpha of the last step in column
 * and the last segment's bits in the bitmaps. Returns 1 when a cell the
 * sweep read was NaN or +inf (dp_sweep's rule), else 0. */
int lf_forward(lf_run *r);

/* The backtrack, segment by segment from the last: for each, the bits of
 * steps [t0, t1) are put in the bitmaps (the last segment's are there
 * already) and visit(ctx, t0, t1) walks them, returning the state the path
 * is in at step t0 - 1 (where the earlier segment ends). Since no state's
 * score depends on a later state's, the earlier segment is re-run over the
 * states up to that one only: its bits there are the same, and the path
 * never goes above it. `top` is the path's state at the last step.
 * Overwrites column. */
void lf_backtrack(lf_run *r, int64_t top, int64_t (*visit)(void *ctx, int64_t t0, int64_t t1),
                  void *ctx);

#endif
