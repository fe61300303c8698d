/* What the CUDA test programs share: the check macro (counts checks and
 * failures, prints the first 40 failures with the case they belong to),
 * the case line printed when MAS_TEST_VERBOSE is set (a hang names its
 * case), a seeded xorshift generator and the programs' start (device,
 * seed, --small). Include once per program. */
#ifndef MAS_TESTS_CUDA_TEST_COMMON_H
#define MAS_TESTS_CUDA_TEST_COMMON_H

#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mas.h"

static int64_t g_checks = 0, g_failures = 0;
static char g_case[256];

#define CHECK(ok, ...)                                                                 \
    do {                                                                               \
        g_checks++;                                                                    \
        if (!(ok)) {                                                                   \
            g_failures++;                                                              \
            if (g_failures < 40) {                                                     \
                printf("FAIL %s:%d [%s] ", __FILE__, __LINE__, g_case);                \
                printf(__VA_ARGS__);                                                   \
                printf("\n");                                                          \
            }                                                                          \
        }                                                                              \
    } while (0)

/* Prints g_case when MAS_TEST_VERBOSE is set. */
static inline void progress() {
    static const bool on = getenv("MAS_TEST_VERBOSE") != nullptr;
    if (on) {
        printf("case %s\n", g_case);
        fflush(stdout);
    }
}

/* xorshift64: seed g_rng (non-zero) first. */
static uint64_t g_rng;
static inline double urand() {
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (double)(g_rng >> 11) / 9007199254740992.0;
}
static inline double nrand() {
    double u = urand() + 1e-12, v = urand();
    return sqrt(-2 * log(u)) * cos(6.283185307179586 * v);
}
static inline int64_t irand(int64_t lo, int64_t hi) {
    return lo + (int64_t)(urand() * (double)(hi - lo + 1));
}

/* The start of a program taking [SEED] [--small]: false (after saying so)
 * where there is no CUDA device or no CUDA build; else seeds g_rng from
 * SEED or the clock, prints the seed and sets *small. */
static inline bool test_start(int argc, char **argv, bool *small) {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0 || !mas_has_cuda()) {
        printf("no CUDA device: skipped\n");
        return false;
    }
    uint64_t seed = (uint64_t)time(nullptr);
    *small = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--small")) *small = true;
        else seed = strtoull(argv[i], nullptr, 10);
    }
    printf("seed %llu\n", (unsigned long long)seed);
    g_rng = seed * 2654435761u + 1;
    return true;
}

#endif
