/* The CPU log-likelihood kernel alone on the CPU row (GMM 500 states
 * x 16 Gaussians, J=36, N=1000, float32, one thread), timed in thread CPU
 * time so that other processes on a shared machine do not count; min of 7.
 * Any argument selects MAS_LOGLIK_MAX. Random coefficients: the time does
 * not depend on the values.
 * Build: gcc -O2 -Iinclude bench/likelihood_kernel.c build/rel/libmas.a -lm -lpthread */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "mas.h"

static double thread_seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static float uniform(void) { return (float)rand() / (float)RAND_MAX - 0.5f; }

int main(int argc, char **argv) {
    (void)argv;
    const int64_t states = 500, mix = 16, J = 36, N = 1000, M = states * mix, P = 2 * J + 1;
    float *x = malloc(sizeof(float) * (size_t)(N * J));
    float *coef = malloc(sizeof(float) * (size_t)(P * M));
    float *out = malloc(sizeof(float) * (size_t)(N * states));
    int64_t *off = malloc(sizeof(int64_t) * (size_t)(states + 1));
    if (!x || !coef || !out || !off) return 2;
    for (int64_t i = 0; i < N * J; i++) x[i] = uniform();
    for (int64_t i = 0; i < P * M; i++) coef[i] = 0.1f * uniform();
    for (int64_t s = 0; s <= states; s++) off[s] = s * mix;
    mas_loglik_args a = {0};
    a.x = (mas_tensor3){x, MAS_FLOAT32, 0, {1, N, J}, {N * J, J, 1}};
    a.coef = (mas_tensor3){coef, MAS_FLOAT32, 0, {1, P, M}, {P * M, M, 1}};
    a.offsets = off;
    a.n_states = states;
    a.out = (mas_tensor3){out, MAS_FLOAT32, 0, {1, N, states}, {N * states, states, 1}};
    a.flags = argc > 1 ? MAS_LOGLIK_MAX : 0u;
    size_t wsize = mas_loglik_cpu_workspace_size(&a, 1);
    void *ws = malloc(wsize);
    double best = 1e30;
    for (int r = 0; r < 7; r++) {
        double t = thread_seconds();
        mas_status st = mas_loglik_cpu(&a, ws, wsize, 1, NULL);
        t = thread_seconds() - t;
        if (st != MAS_OK) return 1;
        if (t < best) best = t;
    }
    printf("%s: %.2f ms, %.1f GFLOP/s\n", argc > 1 ? "max" : "log-sum-exp", best * 1e3,
           2.0 * (double)N * (double)M * (double)(P - 1) / best / 1e9);
    free(x);
    free(coef);
    free(out);
    free(off);
    free(ws);
    return 0;
}
