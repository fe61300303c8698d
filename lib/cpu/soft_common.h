/* Small pieces shared by the soft-alignment ops on the CPU (forward-sum and
 * monotonic attention): argument checks, element access in any float dtype,
 * and the thread count. */
#ifndef MAS_CPU_SOFT_COMMON_H
#define MAS_CPU_SOFT_COMMON_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "common/checks.h"
#include "common/convert.h"
#include "cpu/parallel.h"
#include "mas.h"

/* A function built for AVX-512, AVX2 and the baseline, the best picked when
 * the library loads: for the vectorised element-wise loops outside the DP
 * sweep (which has its own per-ISA builds). */
#if defined(__GNUC__) && defined(__x86_64__) && defined(__ELF__)
#define SOFT_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define SOFT_CLONES
#endif

static inline size_t soft_accum_size(int32_t accum) { return accum == MAS_FLOAT64 ? 8 : 4; }

/* Address of element (b, i, j) of t. */
static inline void *soft_at(const mas_tensor3 *t, int64_t b, int64_t i, int64_t j) {
    int64_t off = b * t->stride[0] + i * t->stride[1] + j * t->stride[2];
    return (char *)t->data + off * (int64_t)mas_dtype_size((mas_dtype)t->dtype);
}

/* Element `off` (in elements) from base, widened to double. */
static inline double soft_load(const void *base, int32_t dtype, int64_t off) {
    switch (dtype) {
    case MAS_FLOAT32: return ((const float *)base)[off];
    case MAS_FLOAT64: return ((const double *)base)[off];
    case MAS_FLOAT16: return mas_f16_to_f32(((const uint16_t *)base)[off]);
    case MAS_BFLOAT16: return mas_bf16_to_f32(((const uint16_t *)base)[off]);
    default: return 0;
    }
}

/* Stores x at `off` of an accumulator-typed array. */
static inline void soft_store(void *base, int32_t accum, int64_t off, double x) {
    if (accum == MAS_FLOAT64) ((double *)base)[off] = x;
    else ((float *)base)[off] = (float)x;
}

static inline void soft_fill(void *dst, int32_t accum, int64_t n, double x) {
    if (accum == MAS_FLOAT64)
        for (int64_t i = 0; i < n; i++) ((double *)dst)[i] = x;
    else
        for (int64_t i = 0; i < n; i++) ((float *)dst)[i] = (float)x;
}

/* Writes x to every cell of item b of an accumulator-typed tensor outside
 * the columns [lo, hi) that kept(ctx, i, &lo, &hi) gives for row i: the
 * cells the op's sweep does not write. kept NULL: the whole item. */
typedef void (*soft_kept_fn)(const void *ctx, int64_t i, int64_t *lo, int64_t *hi);
static inline void soft_fill_item_except(const mas_tensor3 *t, int64_t b, double x,
                                         soft_kept_fn kept, const void *ctx) {
    for (int64_t i = 0; i < t->dim[1]; i++) {
        char *row = (char *)soft_at(t, b, i, 0);
        int64_t lo = 0, hi = 0;
        if (kept) kept(ctx, i, &lo, &hi);
        if (hi < lo) hi = lo;
        for (int64_t j = 0; j < t->dim[2]; j++) {
            if (j == lo) j = hi;
            if (j >= t->dim[2]) break;
            soft_store(row, t->dtype, j * t->stride[2], x);
        }
    }
}

/* Threads that get work: never more than items. */
static inline int32_t soft_team(int64_t batch, int32_t threads) {
    int64_t n = mas_thread_count(threads);
    if (n > 256) n = 256;
    if (n > batch) n = batch;
    return n < 1 ? 1 : (int32_t)n;
}

#endif
