/* The float32 FMA peak of one core, measured (GFLOP/s): the ceiling the CPU
 * benchmarks print their cell rates against. Twelve independent chains of
 * vector fmas (more than latency x pipes on the cores we run on), so the
 * loop is bound by the FMA pipes alone; 512-bit where the CPU has AVX-512F,
 * else 256-bit with FMA, else 0 (not measured). Best of three runs of 0.1-0.3
 * s. Session 36: an earlier analysis took the peak from the clock lscpu
 * reports and got it 40% low (results/fused-cpu.md). Header-only, x86-64
 * GCC / Clang (target attributes: no -m flags needed). */
#ifndef MAS_BENCH_FMA_PEAK_H
#define MAS_BENCH_FMA_PEAK_H

#include <time.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#include <string.h>

static double fma_peak_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

/* VEC, SET1, FMA: the vector type and ops; LANES floats a vector. Each run
 * returns GFLOP/s, and folds the chains into *sink so that none is dropped. */
#define FMA_PEAK_RUN(NAME, TARGET, VEC, SET1, FMA, LANES)                                       \
    __attribute__((target(TARGET))) static double NAME(long n, float *sink) {                  \
        const VEC x = SET1(1.0000001f), y = SET1(0.9999999f);                                   \
        VEC a0 = SET1(0), a1 = SET1(1), a2 = SET1(2), a3 = SET1(3), a4 = SET1(4), a5 = SET1(5);  \
        VEC a6 = SET1(6), a7 = SET1(7), a8 = SET1(8), a9 = SET1(9), a10 = SET1(10), a11 = SET1(11); \
        const double t0 = fma_peak_now();                                                       \
        for (long k = 0; k < n; k++) {                                                          \
            a0 = FMA(a0, x, y); a1 = FMA(a1, x, y); a2 = FMA(a2, x, y); a3 = FMA(a3, x, y);      \
            a4 = FMA(a4, x, y); a5 = FMA(a5, x, y); a6 = FMA(a6, x, y); a7 = FMA(a7, x, y);      \
            a8 = FMA(a8, x, y); a9 = FMA(a9, x, y); a10 = FMA(a10, x, y); a11 = FMA(a11, x, y);  \
        }                                                                                       \
        const double t = fma_peak_now() - t0;                                                   \
        float out[LANES];                                                                       \
        VEC s = FMA(a0, a1, a2);                                                                \
        s = FMA(s, a3, a4); s = FMA(s, a5, a6); s = FMA(s, a7, a8); s = FMA(s, a9, a10);        \
        s = FMA(s, a11, x);                                                                     \
        memcpy(out, &s, sizeof out);                                                            \
        *sink += out[0];                                                                        \
        return n * 12.0 * LANES * 2 / t / 1e9;                                                  \
    }
FMA_PEAK_RUN(fma_peak_512, "avx512f", __m512, _mm512_set1_ps, _mm512_fmadd_ps, 16)
FMA_PEAK_RUN(fma_peak_256, "avx2,fma", __m256, _mm256_set1_ps, _mm256_fmadd_ps, 8)
#undef FMA_PEAK_RUN

/* GFLOP/s, or 0 where neither AVX-512F nor AVX2 + FMA is present. */
static double fma_peak_gflops(void) {
    __builtin_cpu_init();
    const int wide = __builtin_cpu_supports("avx512f");
    if (!wide && !(__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))) return 0;
    double best = 0;
    float sink = 0;
    for (int rep = 0; rep < 3; rep++) {
        const double g = wide ? fma_peak_512(16000000L, &sink) : fma_peak_256(16000000L, &sink);
        best = g > best ? g : best;
    }
    volatile float keep = sink; /* the chains' results used */
    (void)keep;
    return best;
}
#else
static double fma_peak_gflops(void) { return 0; }
#endif

#endif
