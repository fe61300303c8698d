/* forward_sum_gaussian on the CPU from C, without Python in the way:
 * mas_forward_sum_gaussian_cpu for log_z alone and with the three gradients
 * (to the frames, the means and the log-stds), Glow-TTS layouts (z [B, D, S],
 * mean / log_std [B, D, T], float32), every item at full length; median of
 * --repeat. Prints a checksum of the gradients so that two builds can be
 * compared (they are not bit-contracted: sums in float64, order free).
 * --random 1: every value standard normal (log-std 0.3 N(0,1)), as the
 * Python bench; else frames near their diagonal token's mean.
 *   fused_soft_cpu [--B 8] [--T 256] [--S 1024] [--D 80] [--threads 1] [--repeat 5]
 *                  [--random 0]
 * Build: gcc -O2 -Iinclude bench/fused_soft_cpu.c build/rel/libmas.a -lm -lpthread */
#include "fused_cpu_common.h"
#include "mas.h"

/* standard normal (Box-Muller) */
static double normal(void) {
    const double u0 = 1 - uniform(), u1 = uniform(); /* u0 in (0, 1] */
    return sqrt(-2 * log(u0)) * cos(6.283185307179586 * u1);
}

int main(int argc, char **argv) {
    fused_opts o = {8, 256, 1024, 80, 1, 5, 0};
    if (fused_opts_parse(argc, argv, &o)) return 2;
    const int64_t B = o.B, T = o.T, S = o.S, D = o.D;
    const int threads = o.threads, random_data = o.random;
    int repeat = o.repeat;
    if (repeat < 1 || repeat > 1000) repeat = 5;
    /* frames near their tokens' means, as after some training: z = mean of
     * the token at the frame's place on the diagonal + noise */
    float *z = malloc((size_t)(B * D * S) * 4), *mu = malloc((size_t)(B * D * T) * 4);
    float *ls = malloc((size_t)(B * D * T) * 4);
    for (int64_t i = 0; i < B * D * T; i++) {
        mu[i] = (float)normal();
        ls[i] = (float)((random_data ? 0.3 : 0.2) * normal());
    }
    for (int64_t b = 0; b < B; b++)
        for (int64_t d = 0; d < D; d++)
            for (int64_t s = 0; s < S; s++)
                z[(b * D + d) * S + s] = random_data ? (float)normal()
                                                      : mu[(b * D + d) * T + s * T / S] + (float)(0.5 * normal());
    int64_t *xl = malloc((size_t)B * 8), *yl = malloc((size_t)B * 8);
    mas_gauss_align_args ga = glow_args(z, mu, ls, xl, yl, B, T, S, D);
    float *log_z = malloc((size_t)B * 4), *gx = malloc((size_t)(B * S * D) * 4);
    float *gm = malloc((size_t)(B * T * D) * 4), *gl = malloc((size_t)(B * T * D) * 4);
    mas_gauss_soft_outputs with, without;
    memset(&with, 0, sizeof with);
    with.log_z = log_z;
    with.grad_x = (mas_tensor3){gx, MAS_FLOAT32, 0, {B, S, D}, {D * S, 1, S}};
    with.grad_means = (mas_tensor3){gm, MAS_FLOAT32, 0, {B, T, D}, {D * T, 1, T}};
    with.grad_spread = (mas_tensor3){gl, MAS_FLOAT32, 0, {B, T, D}, {D * T, 1, T}};
    without = with;
    memset(&without.grad_x, 0, sizeof without.grad_x);
    memset(&without.grad_means, 0, sizeof without.grad_means);
    memset(&without.grad_spread, 0, sizeof without.grad_spread);
    size_t ws = mas_forward_sum_gaussian_cpu_workspace_size(&ga, threads);
    void *work = malloc(ws);
    double *t_fwd = malloc((size_t)repeat * 8), *t_grad = malloc((size_t)repeat * 8);
    for (int r = -1; r < repeat; r++) {
        double t0 = now_ms();
        mas_status st = mas_forward_sum_gaussian_cpu(&ga, &without, work, ws, threads, NULL);
        double t1 = now_ms();
        mas_status st2 = mas_forward_sum_gaussian_cpu(&ga, &with, work, ws, threads, NULL);
        double t2 = now_ms();
        if (st != MAS_OK || st2 != MAS_OK) {
            fprintf(stderr, "forward_sum_gaussian: %s\n", mas_status_string(st != MAS_OK ? st : st2));
            return 1;
        }
        if (r >= 0) {
            t_fwd[r] = t1 - t0;
            t_grad[r] = t2 - t1;
        }
    }
    const double m_fwd = median(t_fwd, repeat), m_grad = median(t_grad, repeat);
    double sum[3] = {0, 0, 0};
    for (int64_t i = 0; i < B * S * D; i++) sum[0] += fabs(gx[i]);
    for (int64_t i = 0; i < B * T * D; i++) sum[1] += fabs(gm[i]), sum[2] += fabs(gl[i]);
    printf("forward_sum_gaussian, CPU, B=%lld T=%lld S=%lld D=%lld float32, %d thread(s), "
           "full lengths, %s data, median of %d\n", (long long)B, (long long)T, (long long)S,
           (long long)D, threads, random_data ? "random" : "trained-like", repeat);
    printf("| part | ms |\n|---|---|\n");
    printf("| log_z only | %.2f |\n", m_fwd);
    printf("| log_z and the three gradients | %.2f |\n", m_grad);
    printf("log_z[0] %.9g; sum |grad|: frames %.9g, means %.9g, log-stds %.9g\n", log_z[0], sum[0],
           sum[1], sum[2]);
    free(z); free(mu); free(ls); free(xl); free(yl); free(log_z); free(gx); free(gm); free(gl);
    free(work); free(t_fwd); free(t_grad);
    return 0;
}
