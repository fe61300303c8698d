/* What the CUDA test programs share: the check macro (counts checks and
 * failures, prints the first 40 failures with the case they belong to),
 * the case line printed when MAS_TEST_VERBOSE is set (a hang names its
 * case), and a seeded xorshift generator. Include once per program. */
#ifndef MAS_TESTS_CUDA_TEST_COMMON_H
#define MAS_TESTS_CUDA_TEST_COMMON_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

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

#endif
