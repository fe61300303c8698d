/* A team of threads for one call: rank 0 is the caller. */
#ifndef MAS_CPU_PARALLEL_H
#define MAS_CPU_PARALLEL_H

#include <stdint.h>

/* Threads to use for `threads` (<= 0: one per core available to the process). */
int32_t mas_thread_count(int32_t threads);

/* Runs fn(ctx, rank) for rank 0..n-1, rank 0 on the calling thread, and
 * returns when all are done. If the system refuses to start a thread, the
 * ranks it would have run are run by the caller after its own, in rank order,
 * so work that waits only on lower ranks still completes. */
void mas_parallel_run(int32_t n, void (*fn)(void *ctx, int32_t rank), void *ctx);

#endif
