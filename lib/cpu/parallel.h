/* A team of threads for one call: rank 0 is the caller. */
#ifndef MAS_CPU_PARALLEL_H
#define MAS_CPU_PARALLEL_H

#include <stdint.h>

#include "mas.h"

/* Each thread's slice of a workspace starts on its own cache line (no
 * false sharing between the slices). */
#define MAS_CACHE_LINE 64
#define MAS_ALIGN_UP(x, a) (((x) + (a)-1) / (a) * (a))

/* Shapes too big for any workspace: more than 2^52 cells in all (or one
 * size beyond that), where the layout arithmetic of the ops (products of
 * sizes, in bytes, times a team of up to 256 threads) could overflow. Their
 * *_workspace_size() functions return SIZE_MAX, which no allocation meets. */
#define MAS_MAX_CELLS ((int64_t)1 << 52)
static inline int mas_shape_too_big(int64_t batch, int64_t rows, int64_t cols) {
    int64_t bt, cells;
    return __builtin_mul_overflow(batch, rows, &bt) || __builtin_mul_overflow(bt, cols, &cells) ||
           cells > MAS_MAX_CELLS;
}

/* Threads to use for `threads` (<= 0: one per core available to the process). */
int32_t mas_thread_count(int32_t threads);

/* Runs fn(ctx, rank) for rank 0..n-1, rank 0 on the calling thread, and
 * returns when all are done. If the system refuses to start a thread, the
 * ranks it would have run are run by the caller after its own, in rank order,
 * so work that waits only on lower ranks still completes. */
void mas_parallel_run(int32_t n, void (*fn)(void *ctx, int32_t rank), void *ctx);

/* Runs item(ctx, b, rank) for every b < n_items over a team of `team`
 * threads, each taking the next item as it finishes one. */
void mas_parallel_items(int32_t team, int64_t n_items,
                        void (*item)(void *ctx, int64_t b, int32_t rank), void *ctx);

/* The lowest failing item of a per-item status array: its status (MAS_OK if
 * none) and, in *err (may be NULL), the item. */
mas_status mas_first_item_error(const int32_t *status, int64_t n_items, mas_error *err);

#endif
