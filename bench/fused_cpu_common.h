/* What the fused-op C drivers (bench/fused_cpu.c, bench/fused_soft_cpu.c)
 * share: the clock, the median, the random numbers their inputs come from
 * and the shape options. */
#ifndef MAS_BENCH_FUSED_CPU_COMMON_H
#define MAS_BENCH_FUSED_CPU_COMMON_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mas.h"

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* sorts v */
static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return v[n / 2];
}

static uint64_t rng = 88172645463325252ull;
/* uniform in [0, 1) */
static double uniform(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (double)(rng >> 11) * (1.0 / 9007199254740992.0);
}

typedef struct fused_opts {
    int64_t B, T, S, D;
    int threads, repeat, random; /* random: fused_soft_cpu's --random; -1: no such option */
} fused_opts;

/* Reads --B --T --S --D --threads --repeat (and --random unless o->random
 * is -1) over the defaults in *o. Returns 0, or 2 after printing the
 * unknown option. */
static int fused_opts_parse(int argc, char **argv, fused_opts *o) {
    for (int k = 1; k + 1 < argc; k += 2) {
        long v = atol(argv[k + 1]);
        if (!strcmp(argv[k], "--B")) o->B = v;
        else if (!strcmp(argv[k], "--T")) o->T = v;
        else if (!strcmp(argv[k], "--S")) o->S = v;
        else if (!strcmp(argv[k], "--D")) o->D = v;
        else if (!strcmp(argv[k], "--threads")) o->threads = (int)v;
        else if (!strcmp(argv[k], "--repeat")) o->repeat = (int)v;
        else if (!strcmp(argv[k], "--random") && o->random >= 0) o->random = (int)v;
        else {
            fprintf(stderr, "unknown option %s\n", argv[k]);
            return 2;
        }
    }
    return 0;
}

/* The fused ops' arguments in Glow-TTS's layouts (z [B, D, S], mean and
 * log_std [B, D, T], float32), every item at full length: xl and yl (B
 * each) are filled. */
static mas_gauss_align_args glow_args(float *z, float *mu, float *ls, int64_t *xl, int64_t *yl,
                                      int64_t B, int64_t T, int64_t S, int64_t D) {
    for (int64_t b = 0; b < B; b++) {
        xl[b] = T;
        yl[b] = S;
    }
    mas_gauss_align_args ga;
    memset(&ga, 0, sizeof ga);
    ga.x = (mas_tensor3){z, MAS_FLOAT32, 0, {B, S, D}, {D * S, 1, S}};
    ga.params.means = (mas_tensor3){mu, MAS_FLOAT32, 0, {B, T, D}, {D * T, 1, T}};
    ga.params.spread = (mas_tensor3){ls, MAS_FLOAT32, 0, {B, T, D}, {D * T, 1, T}};
    ga.params.spread_kind = MAS_SPREAD_LOG_STD;
    ga.x_len = xl;
    ga.y_len = yl;
    return ga;
}

#endif
