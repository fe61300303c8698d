/* A float32 model of one token's d log_z / d log_std in forward_sum_gaussian's
 * CUDA backward (bench/notes-gpu.md, session 13): 256 frames mu + sigma N(0,1)
 * of one dimension, |mu| ~ 2, gamma on ~4 of them (summing to 4), against the
 * float64 sum gamma ((x - mu)^2 / var - 1). Two float32 forms: the expanded one
 * of lib/cuda/fused_forward_sum.cu (sums of gamma x^2, gamma x and gamma,
 * combined in float64) and the difference-first one (the CPU's, and CUDA's
 * before). Prints the error over sum gamma, median and largest of 2000 draws,
 * and next to it the float32 error of a cell (in nats: the gammas' relative
 * error) for J = 80 dimensions of the same kind.
 *   gcc -O2 bench/fgs_token_grad_precision.c -lm -o fgs_prec && ./fgs_prec */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

enum { DRAWS = 2000, FRAMES = 256 };

static double uniform(void) { return (rand() + 0.5) / ((double)RAND_MAX + 1); }
static double normal(void) { return sqrt(-2 * log(uniform())) * cos(6.283185307179586 * uniform()); }
static int by_value(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(void) {
    static const double sigmas[] = {1, 0.3, 0.1, 0.05, 0.02};
    static double expanded[DRAWS], first[DRAWS];
    srand(1);
    for (int si = 0; si < 5; si++) {
        const double sig = sigmas[si], inv = 1 / (sig * sig);
        for (int r = 0; r < DRAWS; r++) {
            const float mu = (float)(2 * normal());
            float x[FRAMES], g[FRAMES];
            double total = 0, gsum = 0, ref = 0;
            for (int k = 0; k < FRAMES; k++) {
                x[k] = (float)(mu + sig * normal());
                g[k] = (float)pow(-log(uniform()), 8); /* a few frames carry the mass */
                total += g[k];
            }
            for (int k = 0; k < FRAMES; k++) {
                g[k] = (float)(4 * g[k] / total);
                gsum += g[k];
                const double d = (double)x[k] - mu;
                ref += g[k] * d * d;
            }
            ref = ref * inv - gsum;
            float p1 = 0, p2 = 0, s0 = 0, a2 = 0;
            for (int k = 0; k < FRAMES; k++) {
                p1 = fmaf(g[k], x[k], p1);
                p2 = fmaf(g[k], x[k] * x[k], p2);
                s0 += g[k];
                const float d = x[k] - mu, t = g[k] * d;
                a2 = fmaf(t, d, a2);
            }
            const double a2e = (double)p2 - mu * (2.0 * p1 - (double)mu * s0);
            expanded[r] = fabs(a2e * inv - s0 - ref) / gsum;
            first[r] = fabs((double)a2 * inv - s0 - ref) / gsum;
        }
        /* the cells the gammas come from: K + fmas over [x, x^2] of J = 80
         * dimensions (mas.h section 6), coefficients rounded to float32 once,
         * against float64 sum log N; a nats error there is the gammas'
         * relative error */
        static double cell[DRAWS];
        for (int r = 0; r < DRAWS; r++) {
            enum { J = 80 };
            double k64 = 0, exact = 0;
            float b32[J], a32[J], xs[J];
            for (int d = 0; d < J; d++) {
                const double mu = 2 * normal(), x = mu + sig * normal();
                k64 += -log(sig) - 0.9189385332046727 - mu * mu * inv / 2;
                b32[d] = (float)(mu * inv);
                a32[d] = (float)(-inv / 2);
                xs[d] = (float)x;
                exact += -log(sig) - 0.9189385332046727 - ((double)xs[d] - mu) * ((double)xs[d] - mu) * inv / 2;
            }
            float c = (float)k64;
            for (int d = 0; d < J; d++) c = fmaf(xs[d], b32[d], c);
            for (int d = 0; d < J; d++) c = fmaf(xs[d] * xs[d], a32[d], c);
            cell[r] = fabs((double)c - exact);
        }
        qsort(cell, DRAWS, sizeof(double), by_value);
        qsort(expanded, DRAWS, sizeof(double), by_value);
        qsort(first, DRAWS, sizeof(double), by_value);
        printf("sigma %.2f: expanded median %.1e max %.1e | difference first median %.1e max %.1e"
               " | a cell (J = 80, nats) median %.1e max %.1e\n",
               sig, expanded[DRAWS / 2], expanded[DRAWS - 1], first[DRAWS / 2], first[DRAWS - 1],
               cell[DRAWS / 2], cell[DRAWS - 1]);
    }
    return 0;
}
