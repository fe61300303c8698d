#define _GNU_SOURCE
#include "cpu/parallel.h"

#include <pthread.h>
#include <stdatomic.h>
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

typedef struct item_loop {
    void (*item)(void *, int64_t, int32_t);
    void *ctx;
    int64_t n_items;
    atomic_llong next;
} item_loop;

static void item_worker(void *arg, int32_t rank) {
    item_loop *l = (item_loop *)arg;
    for (;;) {
        int64_t b = atomic_fetch_add(&l->next, 1);
        if (b >= l->n_items) break;
        l->item(l->ctx, b, rank);
    }
}

void mas_parallel_items(int32_t team, int64_t n_items,
                        void (*item)(void *ctx, int64_t b, int32_t rank), void *ctx) {
    item_loop l;
    l.item = item;
    l.ctx = ctx;
    l.n_items = n_items;
    atomic_init(&l.next, 0);
    if (team <= 1) item_worker(&l, 0);
    else mas_parallel_run(team, item_worker, &l);
}

mas_status mas_first_item_error(const int32_t *status, int64_t n_items, mas_error *err) {
    for (int64_t b = 0; b < n_items; b++)
        if (status[b] != MAS_OK) {
            if (err) *err = (mas_error){status[b], 0, b};
            return (mas_status)status[b];
        }
    return MAS_OK;
}
