/* The one-core float32 FMA peak of an AVX-512 CPU, measured: twelve
 * independent chains of 512-bit fmas (more than latency x pipes on the
 * cores we run on), so the loop is bound by the FMA pipes alone. The
 * ceiling that bench/fused_cpu.c's cell rates are read against
 * (results/fused-cpu.md, session 36: an earlier analysis took it from the
 * clock lscpu reports and got it 40% low).
 *   gcc -O3 -funroll-all-loops -mavx512f -mfma bench/fma_peak_cpu.c -o fma_peak_cpu */
#include <immintrin.h>
#include <stdio.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(void) {
    enum { CHAINS = 12 };
    __m512 a[CHAINS];
    const __m512 x = _mm512_set1_ps(1.0000001f), y = _mm512_set1_ps(0.9999999f);
    for (int i = 0; i < CHAINS; i++) a[i] = _mm512_set1_ps((float)i);
    const long n = 200000000L / CHAINS;
    double best = 0;
    for (int rep = 0; rep < 3; rep++) {
        const double t0 = now();
        for (long k = 0; k < n; k++)
            for (int i = 0; i < CHAINS; i++) a[i] = _mm512_fmadd_ps(a[i], x, y);
        const double gf = n * (double)CHAINS * 16 * 2 / (now() - t0) / 1e9;
        best = gf > best ? gf : best;
    }
    float s = 0; /* the chains' results used, so that none is dropped */
    for (int i = 0; i < CHAINS; i++) s += _mm512_reduce_add_ps(a[i]);
    printf("float32 FMA peak, one core: %.1f GFLOP/s (best of 3; checksum %g)\n", best, s);
    return 0;
}
