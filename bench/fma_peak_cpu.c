/* Prints the one-core float32 FMA peak that bench/fma_peak.h measures.
 *   gcc -O2 -Ibench bench/fma_peak_cpu.c -o fma_peak_cpu */
#include <stdio.h>

#include "fma_peak.h"

int main(void) {
    const double g = fma_peak_gflops();
    if (g > 0)
        printf("float32 FMA peak, one core: %.1f GFLOP/s (best of 3)\n", g);
    else
        printf("float32 FMA peak: not measured (no AVX-512F, no AVX2 + FMA)\n");
    return 0;
}
