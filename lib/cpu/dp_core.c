/* Picks the widest instruction set this CPU has for the DP sweep. */
#include <stdlib.h>
#include <string.h>

#include "cpu/dp_core.h"

int dp_sweep_f32_avx512(const dp_problem *, int64_t, int64_t, int64_t, int64_t, void *, void *);
int dp_sweep_f64_avx512(const dp_problem *, int64_t, int64_t, int64_t, int64_t, void *, void *);
int dp_sweep_f32_avx2(const dp_problem *, int64_t, int64_t, int64_t, int64_t, void *, void *);
int dp_sweep_f64_avx2(const dp_problem *, int64_t, int64_t, int64_t, int64_t, void *, void *);
int dp_sweep_f32_sse2(const dp_problem *, int64_t, int64_t, int64_t, int64_t, void *, void *);
int dp_sweep_f64_sse2(const dp_problem *, int64_t, int64_t, int64_t, int64_t, void *, void *);



typedef int (*dp_sweep_fn)(const dp_problem *, int64_t, int64_t, int64_t, int64_t, void *,
                           void *);

/* The widest level the CPU supports, lowered by MAS_CPU_ISA=sse2|avx2 so the
 * tests can check every variant on one machine. */
static int isa_level(void) {
    int level = 0;
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq"))
        level = 2;
    else if (__builtin_cpu_supports("avx2"))
        level = 1;
    const char *cap = getenv("MAS_CPU_ISA");
    if (cap && strcmp(cap, "sse2") == 0) level = 0;
    if (cap && strcmp(cap, "avx2") == 0 && level > 1) level = 1;
    return level;
}

int32_t dp_isa_level(void) { return isa_level(); }

int64_t dp_lanes(int32_t accum) {
    int64_t f32_lanes = (int64_t)16 << isa_level();
    return accum == MAS_FLOAT64 ? f32_lanes / 2 : f32_lanes;
}

int64_t dp_decision_bytes(int64_t n_states, int64_t n_steps, int32_t accum) {
    int64_t w = dp_lanes(accum);
    int64_t tiles = (n_states + w - 1) / w;
    return tiles * n_steps * (w / 8);
}

int dp_sweep(const dp_problem *p, int64_t s_begin, int64_t s_end, int64_t t_begin,
             int64_t t_end, void *column, void *edge) {
    static const dp_sweep_fn f32[3] = {dp_sweep_f32_sse2, dp_sweep_f32_avx2, dp_sweep_f32_avx512};
    static const dp_sweep_fn f64[3] = {dp_sweep_f64_sse2, dp_sweep_f64_avx2, dp_sweep_f64_avx512};
    int level = isa_level();
    return (p->accum == MAS_FLOAT64 ? f64 : f32)[level](p, s_begin, s_end, t_begin, t_end,
                                                        column, edge);
}
