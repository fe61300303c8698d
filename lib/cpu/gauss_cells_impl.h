/* The cell source of the fused Gaussian ops (gauss_cells.h), compiled per
 * instruction set and accumulator type by gauss_cells_<type>_<isa>.c with
 * the likelihood kernel's flags (true FMA), on its micro-kernel. */
#include "cpu/likelihood_micro.h"
#include "cpu/gauss_cells.h"

void LK_NAME(gc_expand_)(const char *xb, int32_t dtype, int64_t off0, int64_t stride_n,
                         int64_t stride_j, int64_t J, int64_t nv, int64_t ld, void *e) {
    lk_expand(xb, dtype, off0, stride_n, stride_j, J, nv, ld, (real *)e);
}

void LK_NAME(gc_fill_)(const void *ctx, int64_t s0, int64_t lanes, int64_t t0, int64_t steps,
                       int64_t band, int64_t diag, void *dst_v, int64_t ld) {
    const gc_item *it = (const gc_item *)ctx;
    const int64_t R = 2 * it->dim, P = R + 1;
    const real *e = (const real *)it->e, *cp = (const real *)it->cp;
    real *dst = (real *)dst_v;
    real sc[LK_G * LK_FT];
    const int64_t s1 = s0 + lanes, t1 = t0 + steps;
    /* frame tiles as expanded (multiples of LK_FT); the walk may start
     * inside one (forward-sum's reversed blocks) */
    for (int64_t ft = t0 - t0 % LK_FT; ft < t1; ft += LK_FT) {
        const int64_t f_lo = ft > t0 ? ft : t0;
        const int64_t f_hi = ft + LK_FT < t1 ? ft + LK_FT : t1; /* frames [f_lo, f_hi) */
        for (int64_t gb = s0 / LK_G; gb * LK_G < s1; gb++) {
            const int64_t g_lo = gb * LK_G > s0 ? gb * LK_G : s0;
            const int64_t g_hi = (gb + 1) * LK_G < s1 ? (gb + 1) * LK_G : s1;
            /* a piece with no cell t - band <= s <= t + diag is not scored */
            int meets = g_lo <= f_hi - 1 + diag && g_hi - 1 >= f_lo - band;
            if (meets) lk_micro(cp + gb * P * LK_G, e + ft * R, LK_FT, R, sc);
            /* every cell of the piece inside (the common case): a plain
             * transpose into the tile */
            if (meets && g_lo >= f_hi - 1 - band && g_hi - 1 <= f_lo + diag) {
                const int64_t ng = g_hi - g_lo;
                const real *src = sc + (g_lo - gb * LK_G) * LK_FT + (f_lo - ft);
                real *out = dst + (f_lo - t0) * ld + (g_lo - s0);
                for (int64_t f = 0; f < f_hi - f_lo; f++)
                    for (int64_t g = 0; g < ng; g++) out[f * ld + g] = src[g * LK_FT + f];
                continue;
            }
            for (int64_t s = g_lo; s < g_hi; s++) {
                const real *row = sc + (s - gb * LK_G) * LK_FT;
                for (int64_t t = f_lo; t < f_hi; t++) {
                    int inside = meets && s >= t - band && s <= t + diag;
                    dst[(t - t0) * ld + (s - s0)] = inside ? row[t - ft] : -INFINITY;
                }
            }
        }
    }
}
