/* Issue 11's CPU row from C, without Python in the way: the fused Gaussian
 * hard MAS (mas_align_gaussian_cpu) against its unfused equal
 * (mas_gauss_coef_cpu + mas_loglik_cpu + mas_hard_cpu), Glow-TTS layouts
 * (z [B, D, S], mean / log_std [B, D, T], float32), every item at full
 * length, and the coefficients alone (a part of both). Checks that both
 * give the same indices and score bits before timing. Median of --repeat.
 *   fused_cpu [--B 8] [--T 256] [--S 1024] [--D 80] [--threads 1] [--repeat 9]
 * Prints the cells' rates against the core's FMA peak, measured (fma_peak.h).
 * Build: gcc -O2 -Iinclude bench/fused_cpu.c build/rel/libmas.a -lm -lpthread */
#include "fma_peak.h"
#include "fused_cpu_common.h"
#include "mas.h"

#define OK(call)                                                                      \
    do {                                                                              \
        mas_status st_ = (call);                                                      \
        if (st_ != MAS_OK) {                                                          \
            fprintf(stderr, "%s: %s\n", #call, mas_status_string(st_));               \
            return 1;                                                                 \
        }                                                                             \
    } while (0)

int main(int argc, char **argv) {
    fused_opts o = {8, 256, 1024, 80, 1, 9, -1};
    if (fused_opts_parse(argc, argv, &o)) return 2;
    const int64_t B = o.B, T = o.T, S = o.S, D = o.D;
    const int threads = o.threads;
    int repeat = o.repeat;
    if (repeat < 1 || repeat > 1000) repeat = 9;
    float *z = malloc((size_t)(B * D * S) * 4), *mu = malloc((size_t)(B * D * T) * 4);
    float *ls = malloc((size_t)(B * D * T) * 4);
    for (int64_t i = 0; i < B * D * S; i++) z[i] = (float)(2 * uniform() - 1);
    for (int64_t i = 0; i < B * D * T; i++) {
        mu[i] = (float)(2 * uniform() - 1);
        ls[i] = (float)(0.5 * uniform() - 0.25);
    }
    int64_t *xl = malloc((size_t)B * 8), *yl = malloc((size_t)B * 8);
    mas_gauss_align_args ga = glow_args(z, mu, ls, xl, yl, B, T, S, D);

    int32_t *idx_f = malloc((size_t)(B * S) * 4), *idx_u = malloc((size_t)(B * S) * 4);
    float sc_f[4096], sc_u[4096];
    if (B > 4096) return 2;
    mas_hard_outputs of, ou;
    memset(&of, 0, sizeof of);
    memset(&ou, 0, sizeof ou);
    of.indices = idx_f;
    of.indices_stride = S;
    of.score = sc_f;
    ou.indices = idx_u;
    ou.indices_stride = S;
    ou.score = sc_u;

    /* fused */
    size_t wf = mas_align_gaussian_cpu_workspace_size(&ga, threads);
    void *work_f = malloc(wf);
    /* unfused: coef [B, P, T], loglik [B, S, T] viewed as value [B, T, S] */
    const int64_t P = 2 * D + 1;
    float *coef = malloc((size_t)(B * P * T) * 4), *ll = malloc((size_t)(B * S * T) * 4);
    mas_tensor3 cv = {coef, MAS_FLOAT32, 0, {B, P, T}, {P * T, T, 1}};
    mas_loglik_args la;
    memset(&la, 0, sizeof la);
    la.x = ga.x;
    la.coef = cv;
    la.n_states = T;
    la.out = (mas_tensor3){ll, MAS_FLOAT32, 0, {B, S, T}, {S * T, T, 1}};
    size_t wl = mas_loglik_cpu_workspace_size(&la, threads);
    void *work_l = malloc(wl ? wl : 1);
    mas_tensor3 value = {ll, MAS_FLOAT32, 0, {B, T, S}, {S * T, 1, T}};
    size_t wh = mas_hard_cpu_workspace_size(B, T, S, MAS_FLOAT32, threads);
    void *work_h = malloc(wh);

    OK(mas_align_gaussian_cpu(&ga, &of, work_f, wf, threads, NULL));
    OK(mas_gauss_coef_cpu(&ga.params, &cv, threads, NULL));
    OK(mas_loglik_cpu(&la, work_l, wl, threads, NULL));
    OK(mas_hard_cpu(&value, xl, yl, &ou, work_h, wh, threads, NULL));
    int same = !memcmp(idx_f, idx_u, (size_t)(B * S) * 4) && !memcmp(sc_f, sc_u, (size_t)B * 4);

    double *tf = malloc((size_t)repeat * 8), *tu = malloc((size_t)repeat * 8);
    double *tc = malloc((size_t)repeat * 8), *tl = malloc((size_t)repeat * 8);
    double *th = malloc((size_t)repeat * 8);
    for (int r = 0; r < repeat; r++) {
        double t0 = now_ms();
        OK(mas_align_gaussian_cpu(&ga, &of, work_f, wf, threads, NULL));
        double t1 = now_ms();
        OK(mas_gauss_coef_cpu(&ga.params, &cv, threads, NULL));
        double t2 = now_ms();
        OK(mas_loglik_cpu(&la, work_l, wl, threads, NULL));
        double t3 = now_ms();
        OK(mas_hard_cpu(&value, xl, yl, &ou, work_h, wh, threads, NULL));
        double t4 = now_ms();
        tf[r] = t1 - t0;
        tc[r] = t2 - t1;
        tl[r] = t3 - t2;
        th[r] = t4 - t3;
        tu[r] = t4 - t1;
    }
    double mf = median(tf, repeat), mu_ = median(tu, repeat), ml = median(tl, repeat);
    double cells = (double)B * (double)T * (double)S;
    printf("fused Gaussian hard MAS, CPU, B=%lld T=%lld S=%lld D=%lld float32, %d thread(s), "
           "full lengths, median of %d\n", (long long)B, (long long)T, (long long)S,
           (long long)D, threads, repeat);
    printf("| part | ms |\n|---|---|\n");
    printf("| fused (mas_align_gaussian_cpu) | %.2f |\n", mf);
    printf("| unfused: coef + loglik + hard | %.2f |\n", mu_);
    printf("|   coef (mas_gauss_coef_cpu) | %.2f |\n", median(tc, repeat));
    printf("|   loglik (mas_loglik_cpu) | %.2f |\n", ml);
    printf("|   hard MAS (mas_hard_cpu) | %.2f |\n", median(th, repeat));
    printf("speed-up %.2fx; same indices and score bits: %s\n", mu_ / mf, same ? "yes" : "NO");
    printf("rate: %.1f GFLOP/s fused (2 flops x %lld coefficients a cell, every cell counted)\n",
           2.0 * (double)P * cells / (mf * 1e6), (long long)P);
    /* the ceiling: the cells' rates against the FMA peak measured on this
     * machine (fma_peak.h), the fused call's band cells over its whole time
     * (its coefficients and sweep included, so a floor of its cells' rate) */
    const double band = (double)B * (double)T * (double)(S >= T ? S - T + 1 : 0);
    const double r_fused = 2.0 * (double)P * band / (mf * 1e6);
    const double r_loglik = 2.0 * (double)P * cells / (ml * 1e6);
    const double peak = fma_peak_gflops() * threads;
    printf("cells: fused %.1f GFLOP/s (the band's cells, over the whole call), loglik %.1f GFLOP/s",
           r_fused, r_loglik);
    if (peak > 0)
        printf("; ceiling: the FMA peak measured here, %.1f GFLOP/s on %d core(s): %.0f%% / %.0f%%\n",
               peak, threads, 100 * r_fused / peak, 100 * r_loglik / peak);
    else
        printf("; ceiling: not measured on this CPU (bench/fma_peak.h)\n");
    free(z); free(mu); free(ls); free(xl); free(yl); free(idx_f); free(idx_u);
    free(work_f); free(coef); free(ll); free(work_l); free(work_h);
    free(tf); free(tu); free(tc); free(tl); free(th);
    return same ? 0 : 1;
}
