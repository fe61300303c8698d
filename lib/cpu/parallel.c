#define _GNU_SOURCE
#include "cpu/parallel.h"

#include <pthread.h>
#include <sched.h>
#include <unistd.h>

int32_t mas_thread_count(int32_t threads) {
    if (threads > 0) return threads;
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        int n = CPU_COUNT(&set);
        if (n > 0) return n;
    }
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int32_t)n : 1;
}

typedef struct task {
    void (*fn)(void *, int32_t);
    void *ctx;
    int32_t rank;
} task;

static void *run_task(void *arg) {
    task *t = (task *)arg;
    t->fn(t->ctx, t->rank);
    return NULL;
}

#define MAS_MAX_THREADS 256

void mas_parallel_run(int32_t n, void (*fn)(void *ctx, int32_t rank), void *ctx) {
    pthread_t ids[MAS_MAX_THREADS];
    task tasks[MAS_MAX_THREADS];
    if (n > MAS_MAX_THREADS) n = MAS_MAX_THREADS;
    int32_t started = 1;
    for (int32_t r = 1; r < n; r++) {
        tasks[r] = (task){fn, ctx, r};
        if (pthread_create(&ids[r], NULL, run_task, &tasks[r]) != 0) break;
        started++;
    }
    fn(ctx, 0);
    for (int32_t r = started; r < n; r++) fn(ctx, r);
    for (int32_t r = 1; r < started; r++) pthread_join(ids[r], NULL);
}
