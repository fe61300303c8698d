/* The body of dp_sweep() (see dp_core.h), compiled once per instruction set
 * and accumulator type by the dp_sweep_<type>_<isa>.c files, which define
 * DP_REAL, DP_REAL_IS_DOUBLE and DP_FN (the function's name) first.
 *
 * Semiring, weights and the lower band are parameters of one always-inline
 * body; the dispatcher at the bottom calls it with constant arguments so the
 * compiler emits one specialised loop per combination in use. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "common/convert.h"
#include "cpu/dp_core.h"
#include "cpu/dp_simd.h"
#include "cpu/soft_math.h"

#define DP_ALWAYS_INLINE static inline __attribute__((always_inline))

#if defined(__AVX512F__) && !DP_REAL_IS_DOUBLE
#ifndef DP_PREFETCH_FLOATS
#define DP_PREFETCH_FLOATS 128
#endif

/* In-register transpose of 16x16 floats: r[i][j] -> r[j][i]. */
static inline void transpose16(__m512 r[16]) {
    __m512 t[16], u[16];
    for (int i = 0; i < 8; i++) {
        t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    /* u[4g+c], 128-bit lane L: column 4L+c of rows 4g..4g+3 */
    for (int g = 0; g < 4; g++) {
        u[4 * g + 0] = _mm512_shuffle_ps(t[4 * g], t[4 * g + 2], _MM_SHUFFLE(1, 0, 1, 0));
        u[4 * g + 1] = _mm512_shuffle_ps(t[4 * g], t[4 * g + 2], _MM_SHUFFLE(3, 2, 3, 2));
        u[4 * g + 2] = _mm512_shuffle_ps(t[4 * g + 1], t[4 * g + 3], _MM_SHUFFLE(1, 0, 1, 0));
        u[4 * g + 3] = _mm512_shuffle_ps(t[4 * g + 1], t[4 * g + 3], _MM_SHUFFLE(3, 2, 3, 2));
    }
    for (int c = 0; c < 4; c++) {
        __m512 v0 = _mm512_shuffle_f32x4(u[c], u[4 + c], 0x44);
        __m512 v1 = _mm512_shuffle_f32x4(u[c], u[4 + c], 0xEE);
        __m512 v2 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0x44);
        __m512 v3 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0xEE);
        r[0 + c] = _mm512_shuffle_f32x4(v0, v2, 0x88);
        r[4 + c] = _mm512_shuffle_f32x4(v0, v2, 0xDD);
        r[8 + c] = _mm512_shuffle_f32x4(v1, v3, 0x88);
        r[12 + c] = _mm512_shuffle_f32x4(v1, v3, 0xDD);
    }
}

/* float32 rows with contiguous steps (the "bts" layout): 16x16 blocks through
 * registers. Returns the number of leading lanes done (a multiple of 16); the
 * caller fills the rest. Only for tiles with no band cut and steps % 16 == 0. */
static int64_t fill_rows_f32_reversed(const dp_view *v, int64_t s0, int64_t lanes,
                                      int64_t t0, int64_t steps, float *dst);

static int64_t fill_rows_f32_fast(const dp_view *v, int64_t s0, int64_t lanes, int64_t t0,
                                  int64_t steps, float *dst) {
    if (v->dtype == MAS_FLOAT32 && v->stride_step == -1 && steps % 16 == 0)
        return fill_rows_f32_reversed(v, s0, lanes, t0, steps, dst);
    if (v->dtype != MAS_FLOAT32 || v->stride_step != 1 || steps % 16 != 0) return 0;
    int64_t done = lanes / 16 * 16;
    for (int64_t l0 = 0; l0 < done; l0 += 16) {
        const float *base = (const float *)v->base + (s0 + l0) * v->stride_state + t0;
        for (int64_t k0 = 0; k0 < steps; k0 += 16) {
            __m512 r[16];
            for (int i = 0; i < 16; i++) {
                /* 64 rows at once are more streams than the hardware
                 * prefetchers follow: fetch each row's next lines ahead
                 * (a prefetch never faults, past the row's end included). */
                _mm_prefetch((const char *)(base + i * v->stride_state + k0 + DP_PREFETCH_FLOATS),
                             _MM_HINT_T0);
                r[i] = _mm512_loadu_ps(base + i * v->stride_state + k0);
            }
            transpose16(r);
            for (int j = 0; j < 16; j++) _mm512_storeu_ps(dst + (k0 + j) * DP_W + l0, r[j]);
        }
    }
    return done;
}

/* The same for rows whose steps run backwards in memory (stride_step -1: a
 * view walked from its last cell, as forward-sum's second sweep is): each
 * 16 steps are loaded from the lowest address and their order reversed. */
static int64_t fill_rows_f32_reversed(const dp_view *v, int64_t s0, int64_t lanes,
                                      int64_t t0, int64_t steps, float *dst) {
    const __m512i reverse = _mm512_set_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    int64_t done = lanes / 16 * 16;
    for (int64_t l0 = 0; l0 < done; l0 += 16) {
        const float *base = (const float *)v->base + (s0 + l0) * v->stride_state - t0;
        for (int64_t k0 = 0; k0 < steps; k0 += 16) {
            __m512 r[16];
            for (int i = 0; i < 16; i++) {
                const float *at = base + i * v->stride_state - k0 - 15;
                _mm_prefetch((const char *)(at - DP_PREFETCH_FLOATS), _MM_HINT_T0);
                r[i] = _mm512_permutexvar_ps(reverse, _mm512_loadu_ps(at));
            }
            transpose16(r);
            for (int j = 0; j < 16; j++) _mm512_storeu_ps(dst + (k0 + j) * DP_W + l0, r[j]);
        }
    }
    return done;
}

/* The inverse of fill_rows_f32_fast, for alpha_out: the tile's history back
 * to rows with contiguous steps (out at cell (s0, t0)), 16x16 blocks through
 * registers. Returns the leading lanes done. */
static int64_t store_rows_f32_fast(const float *hist, int64_t lanes, int64_t steps, float *out,
                                   int64_t stride_state) {
    if (steps % 16 != 0) return 0;
    int64_t done = lanes / 16 * 16;
    for (int64_t l0 = 0; l0 < done; l0 += 16)
        for (int64_t k0 = 0; k0 < steps; k0 += 16) {
            __m512 r[16];
            for (int j = 0; j < 16; j++) r[j] = _mm512_loadu_ps(hist + (k0 + j) * DP_W + l0);
            transpose16(r);
            for (int i = 0; i < 16; i++)
                _mm512_storeu_ps(out + (l0 + i) * stride_state + k0, r[i]);
        }
    return done;
}
#endif

/* dst[k*DP_W + l] = view(t0+k, s0+l) for l < lanes, k < steps; cells past the
 * lanes, below the band (s < t - band) or above the diagonal
 * (s > t + diag) get `pad`. rows (NULL: identity) maps a state to its row. */
static void fill_tile(const dp_view *v, int64_t s0, int64_t lanes, int64_t t0,
                      int64_t steps, int64_t band, int64_t diag, int readable,
                      const int32_t *rows, DP_REAL pad, DP_REAL *dst) {
    const int64_t td = t0 + diag;
#define FILL_ROWS(TYPE, CONVERT)                                                  \
    for (int64_t l = 0; l < lanes; l++) {                                        \
        int64_t r = rows ? rows[s0 + l] : s0 + l;                                \
        const TYPE *row = (const TYPE *)v->base + r * v->stride_state +          \
                          t0 * v->stride_step;                                   \
        int64_t last = s0 + l + band - t0; /* last step inside the band */       \
        int64_t n = last + 1 < steps ? (last + 1 > 0 ? last + 1 : 0) : steps;    \
        int64_t above = s0 + l > td ? s0 + l - td : 0; /* steps with s > t+diag */ \
        int64_t k = 0;                                                           \
        for (; k < above && k < steps; k++) dst[k * DP_W + l] = pad;             \
        for (; k < n; k++) dst[k * DP_W + l] = (DP_REAL)CONVERT(row[k * v->stride_step]); \
        for (; k < steps; k++) dst[k * DP_W + l] = pad;                          \
    }
#define AS_IS(x) (x)
    int64_t first = 0;
    /* neither the band nor the diagonal cuts a cell of the tile */
    int no_cut = s0 + band - t0 >= steps - 1 && s0 + lanes - 1 <= td;
    /* A cut tile of a plain rectangle is still inside the lengths: read it
     * whole the fast way, then pad the cut cells (below). Gathered rows are
     * read one by one. */
    int whole = (no_cut || readable) && !rows;
#if defined(__AVX512F__) && !DP_REAL_IS_DOUBLE
    if (whole) first = fill_rows_f32_fast(v, s0, lanes, t0, steps, dst);
#endif
    if (whole && v->stride_state == 1 && v->dtype == (DP_REAL_IS_DOUBLE ? MAS_FLOAT64 : MAS_FLOAT32)) {
        /* states contiguous (the "bst" layout): a plain copy per step */
        const DP_REAL *col = (const DP_REAL *)v->base + s0 + t0 * v->stride_step;
        for (int64_t k = 0; k < steps; k++)
            for (int64_t l = 0; l < lanes; l++) dst[k * DP_W + l] = col[k * v->stride_step + l];
        first = lanes;
    }
    if (rows) {
        /* gathered rows (labels' columns of frame log-probs): step by step,
         * each step's few rows of memory serve every lane; the cut cells
         * are padded below */
#define GATHER_ROWS(TYPE, CONVERT)                                                \
        for (int64_t k = 0; k < steps; k++) {                                     \
            const TYPE *at = (const TYPE *)v->base + (t0 + k) * v->stride_step;   \
            for (int64_t l = 0; l < lanes; l++)                                   \
                dst[k * DP_W + l] = (DP_REAL)CONVERT(at[rows[s0 + l] * v->stride_state]); \
        }
#define AS_IS(x) (x)
        int gathered = 0;
#if (defined(__AVX512F__) || defined(__AVX2__)) && !DP_REAL_IS_DOUBLE
        if (v->dtype == MAS_FLOAT32) {
            /* hardware gathers: one per 16 (8) lanes a step */
            _Alignas(64) int32_t idx[DP_W];
            int fits = 1;
            for (int64_t l = 0; l < DP_W; l++) {
                int64_t off = l < lanes ? rows[s0 + l] * v->stride_state : 0;
                fits &= off >= INT32_MIN && off <= INT32_MAX;
                idx[l] = (int32_t)off;
            }
            for (int64_t k = 0; fits && k < steps; k++) {
                const float *at = (const float *)v->base + (t0 + k) * v->stride_step;
#if defined(__AVX512F__)
                for (int g = 0; g < DP_W; g += 16)
                    _mm512_storeu_ps(dst + k * DP_W + g,
                                     _mm512_i32gather_ps(_mm512_load_si512((const void *)(idx + g)),
                                                         at, 4));
#else
                for (int g = 0; g < DP_W; g += 8)
                    _mm256_storeu_ps(dst + k * DP_W + g,
                                     _mm256_i32gather_ps(at, _mm256_load_si256((const __m256i *)(idx + g)),
                                                         4));
#endif
            }
            gathered = fits;
        }
#endif
        if (!gathered) switch (v->dtype) {
        case MAS_FLOAT32: GATHER_ROWS(float, AS_IS); break;
        case MAS_FLOAT64: GATHER_ROWS(double, AS_IS); break;
        case MAS_FLOAT16: GATHER_ROWS(uint16_t, mas_f16_to_f32); break;
        case MAS_BFLOAT16: GATHER_ROWS(uint16_t, mas_bf16_to_f32); break;
        default: break;
        }
#undef AS_IS
#undef GATHER_ROWS
#define AS_IS(x) (x)
        first = lanes;
    }
    s0 += first;
    lanes -= first;
    dst += first;
    switch (v->dtype) {
    case MAS_FLOAT32: FILL_ROWS(float, AS_IS); break;
    case MAS_FLOAT64: FILL_ROWS(double, AS_IS); break;
    case MAS_FLOAT16: FILL_ROWS(uint16_t, mas_f16_to_f32); break;
    case MAS_BFLOAT16: FILL_ROWS(uint16_t, mas_bf16_to_f32); break;
    default: break; /* rejected before the sweep */
    }
#undef AS_IS
#undef FILL_ROWS
    for (int64_t l = lanes; l < DP_W - first; l++)
        for (int64_t k = 0; k < steps; k++) dst[k * DP_W + l] = pad;
    if (!no_cut) {
        dst -= first;
        s0 -= first;
        for (int64_t l = 0; l < first; l++) {
            int64_t above = s0 + l > td ? s0 + l - td : 0;
            int64_t last = s0 + l + band - t0;
            for (int64_t k = 0; k < above && k < steps; k++) dst[k * DP_W + l] = pad;
            for (int64_t k = last + 1 > 0 ? last + 1 : 0; k < steps; k++) dst[k * DP_W + l] = pad;
        }
    }
}

static inline DP_REAL view_at(const dp_view *v, int64_t t, int64_t s) {
    int64_t off = s * v->stride_state + t * v->stride_step;
    switch (v->dtype) {
    case MAS_FLOAT32: return (DP_REAL)((const float *)v->base)[off];
    case MAS_FLOAT64: return (DP_REAL)((const double *)v->base)[off];
    case MAS_FLOAT16: return (DP_REAL)mas_f16_to_f32(((const uint16_t *)v->base)[off]);
    case MAS_BFLOAT16: return (DP_REAL)mas_bf16_to_f32(((const uint16_t *)v->base)[off]);
    default: return 0;
    }
}

/* log(sigmoid(x)) without overflow: min(x,0) - log1p(exp(-|x|)). */
static inline DP_REAL log_sigmoid(DP_REAL x) {
#if DP_REAL_IS_DOUBLE
    return (x < 0 ? x : 0) - log1p(exp(-fabs(x)));
#else
    return (x < 0 ? x : 0) - log1pf(expf(-fabsf(x)));
#endif
}

static inline DP_REAL log_add_exp(DP_REAL a, DP_REAL b) {
    DP_REAL hi = a > b ? a : b, lo = a > b ? b : a;
    if (lo != lo) return lo; /* a NaN must not lose to a -inf */
    if (hi == -INFINITY) return hi;
#if DP_REAL_IS_DOUBLE
    return hi + log1p(exp(lo - hi));
#else
    return hi + log1pf(expf(lo - hi));
#endif
}

#if !DP_REAL_IS_DOUBLE
/* The float log-plus lanes, branch-free (soft_math.h) so that they
 * vectorise; that needs if-conversion, which GCC does only without
 * -ftrapping-math (the library never reads the FP exception flags). Out of
 * line: functions of other options are not inlined. */
SM_NO_TRAPPING_BEGIN
static __attribute__((noinline)) void lanes_log_add_exp(float *restrict x,
                                                        const float *restrict y) {
    for (int l = 0; l < DP_W; l++) x[l] = sm_log_add_exp(x[l], y[l]);
}

static __attribute__((noinline)) void lanes_log_sigmoid(int64_t n, float *restrict stay,
                                                        float *restrict move) {
    for (int64_t k = 0; k < n; k++) sm_log_sigmoid_pair(stay[k], &stay[k], &move[k]);
}
SM_NO_TRAPPING_END
#endif

static inline dp_vec vec_log_add_exp(dp_vec a, dp_vec b) {
    _Alignas(64) DP_REAL x[DP_W];
    _Alignas(64) DP_REAL y[DP_W];
    vec_store(x, a);
    vec_store(y, b);
#if DP_REAL_IS_DOUBLE
    for (int l = 0; l < DP_W; l++) x[l] = log_add_exp(x[l], y[l]);
#else
    lanes_log_add_exp(x, y);
#endif
    return vec_load(x);
}

/* One tile: lanes [s0, s0+DP_W) over `steps` steps from t0. */
DP_ALWAYS_INLINE uint64_t sweep_tile(const dp_problem *p, const int semiring,
                                     const int has_logits, const int has_topo,
                                     const int has_skip, int64_t s0, int64_t t0,
                                     int64_t steps, DP_REAL *col, DP_REAL *edge,
                                     DP_REAL *cells, DP_REAL *wstay, DP_REAL *wmove,
                                     DP_REAL *hist, int64_t out_lane) {
    int64_t lanes = p->n_states - s0 < DP_W ? p->n_states - s0 : DP_W;
    /* the plain chain's diagonal is s <= t: a constant, not a load */
    const int64_t diag = has_topo ? p->diag : 0;
    if (p->cell_source) {
        p->cell_source->fill(p->cell_source->ctx, s0, lanes, t0, steps, p->band, diag, cells,
                             DP_W);
        for (int64_t k = 0; k < steps; k++)
            for (int64_t l = lanes; l < DP_W; l++) cells[k * DP_W + l] = -INFINITY;
    } else if (p->cell.base) {
        fill_tile(&p->cell, s0, lanes, t0, steps, p->band, diag, p->readable,
                  has_topo ? p->cell_rows : NULL, -INFINITY, cells);
    } else {
        for (int64_t k = 0; k < steps; k++)
            for (int64_t l = 0; l < DP_W; l++) {
                int inside = l < lanes && s0 + l >= t0 + k - p->band &&
                             s0 + l <= t0 + k + diag;
                cells[k * DP_W + l] = inside ? 0 : -INFINITY;
            }
    }
    DP_REAL edge_move[DP_BLOCK_STEPS];
    if (has_logits) {
        /* The edges into step t leave step t-1: weights from logits at t-1.
         * Step -1 has no cells; the virtual start's edge has weight 0. */
        int64_t first = t0 == 0 ? 1 : 0;
        for (int64_t k = 0; k < first * DP_W; k++) wstay[k] = 0;
        if (steps > first)
            fill_tile(&p->logits, s0, lanes, t0 - 1 + first, steps - first, p->band,
                      0, p->readable, NULL, 0,
                      wstay + first * DP_W);
#if DP_REAL_IS_DOUBLE
        for (int64_t k = 0; k < steps * DP_W; k++) {
            DP_REAL x = wstay[k];
            wmove[k] = log_sigmoid(-x);
            wstay[k] = log_sigmoid(x);
        }
#else
        lanes_log_sigmoid(steps * DP_W, wstay, wmove);
#endif
        for (int64_t k = 0; k < steps; k++) {
            int64_t t = t0 + k;
            int inside = t >= 1 && s0 >= 1 && s0 - 1 >= t - 1 - p->band && s0 - 1 <= t - 1;
            edge_move[k] = inside ? log_sigmoid(-view_at(&p->logits, t - 1, s0 - 1)) : 0;
        }
    }

    /* A topology's per-state weights, constant over the steps; lanes past
     * the states get 0 (their cells are -inf). */
    _Alignas(64) DP_REAL tw[3][DP_W];
    dp_vec v_stay = vec_set1(0), v_move = vec_set1(0), v_skip = vec_set1(0);
    int64_t skip_d = 0;
    DP_REAL *skip_edge = NULL;
    if (has_topo) {
        const dp_topology *tp = p->topo;
        for (int64_t l = 0; l < DP_W; l++) {
            int in = l < lanes;
            tw[0][l] = in ? ((const DP_REAL *)tp->stay)[s0 + l] : 0;
            tw[1][l] = in ? ((const DP_REAL *)tp->move)[s0 + l] : 0;
            tw[2][l] = in && has_skip ? ((const DP_REAL *)tp->skip)[s0 + l] : 0;
        }
        v_stay = vec_load(tw[0]);
        v_move = vec_load(tw[1]);
        if (has_skip) {
            v_skip = vec_load(tw[2]);
            skip_d = tp->skip_dist;
            skip_edge = (DP_REAL *)tp->skip_edge + (t0 - p->skip_edge_t0) * DP_MAX_SKIP;
        }
    }
    uint64_t bad = 0;
    dp_vec q = vec_load(col);
    const size_t dec_bytes = DP_W / 8;
    /* the bitmaps' row of this tile and step (a window of steps, dp_core.h) */
    const int64_t dec_row =
        (s0 / DP_W) * (p->decisions_steps ? p->decisions_steps : p->n_steps) + t0 -
        p->decisions_t0;
    uint8_t *dec = p->decisions ? p->decisions + dec_row * (int64_t)dec_bytes : NULL;
    uint8_t *skip_dec = has_skip && p->topo->skip_decisions
                            ? p->topo->skip_decisions + dec_row * (int64_t)dec_bytes
                            : NULL;
    for (int64_t k = 0; k < steps; k++) {
        dp_vec c = vec_load(cells + k * DP_W);
        /* NaN/+inf count only on cells a path can reach (s <= t + diag);
         * cells below the band were never read. */
        int64_t reach = t0 + k + diag - s0 + 1;
        bad |= vec_bad_bits(c) &
               (reach >= 64 ? ~(uint64_t)0 : reach <= 0 ? 0 : ((uint64_t)1 << reach) - 1u);
        dp_vec stay = q, move, skip = q;
        if (has_logits) {
            stay = vec_add(q, vec_load(wstay + k * DP_W));
            move = vec_shift_in(vec_add(q, vec_load(wmove + k * DP_W)), edge[k] + edge_move[k]);
        } else if (has_topo) {
            stay = vec_add(q, v_stay);
            move = vec_add(vec_shift_in(q, edge[k]), v_move);
            if (has_skip) {
                /* q moved d states up, the d states before the tile shifted
                 * in: d one-lane shifts in registers (a store and a
                 * misaligned reload would stall on store forwarding) */
                dp_vec up = q;
                for (int64_t j = skip_d - 1; j >= 0; j--)
                    up = vec_shift_in(up, skip_edge[k * DP_MAX_SKIP + j]);
                skip = vec_add(up, v_skip);
            }
        } else {
            move = vec_shift_in(q, edge[k]);
        }
        if (semiring == DP_MAXPLUS) {
            if (dec) {
                uint64_t bits = vec_lt_bits(stay, move);
                memcpy(dec + k * dec_bytes, &bits, dec_bytes);
            }
            q = vec_max(move, stay);
            if (has_skip) {
                /* ties go to stay, then move: skip only when strictly better */
                if (skip_dec) {
                    uint64_t bits = vec_lt_bits(q, skip);
                    memcpy(skip_dec + k * dec_bytes, &bits, dec_bytes);
                }
                q = vec_max(skip, q);
            }
            q = vec_add(q, c);
        } else {
            q = vec_log_add_exp(stay, move);
            if (has_skip) q = vec_log_add_exp(q, skip);
            q = vec_add(q, c);
        }
        vec_store(hist + k * DP_W, q);
    }
    if (has_skip && steps > 0) {
        /* Hand the last d wanted states to the next tile: the state after
         * the range is s0 + out_lane + 1; skip source lane m = out_lane+1-d+j
         * at step t-1 (the column before the block at k = 0), or, for m < 0,
         * the entry this tile received (index j + out_lane + 1 > j: not yet
         * overwritten). */
        for (int64_t k = 0; k < steps; k++) {
            const DP_REAL *prev = k == 0 ? col : hist + (k - 1) * DP_W;
            DP_REAL *se = skip_edge + k * DP_MAX_SKIP;
            for (int64_t j = 0; j < skip_d; j++) {
                int64_t m = out_lane + 1 - skip_d + j;
                se[j] = m >= 0 ? prev[m] : se[j + out_lane + 1];
            }
        }
    }
    /* Hand the last wanted state's values to the next tile: alpha[t-1][out]. */
    if (steps > 0) {
        DP_REAL prev = col[out_lane];
        for (int64_t k = 0; k < steps; k++) {
            DP_REAL cur = hist[k * DP_W + out_lane];
            edge[k] = prev;
            prev = cur;
        }
    }
    vec_store(col, q);
    if (p->alpha_out) {
        DP_REAL *out = (DP_REAL *)p->alpha_out;
        int64_t l = 0;
#if defined(__AVX512F__) && !DP_REAL_IS_DOUBLE
        /* a tile with every cell inside: whole rows through registers */
        int full = s0 + p->band - t0 >= steps - 1 && s0 + lanes - 1 <= t0 + diag;
        if (full && p->alpha_stride_step == 1)
            l = store_rows_f32_fast(hist, lanes, steps,
                                    out + s0 * p->alpha_stride_state + t0, p->alpha_stride_state);
#endif
        for (; l < lanes; l++) {
            /* inside the band and on or below the diagonal only: a skewed view has no
             * cells elsewhere */
            int64_t s = s0 + l;
            int64_t k = s > t0 + diag ? s - t0 - diag : 0;
            int64_t end = s + p->band - t0 + 1 < steps ? s + p->band - t0 + 1 : steps;
            for (; k < end; k++)
                out[s * p->alpha_stride_state + (t0 + k) * p->alpha_stride_step] =
                    hist[k * DP_W + l];
        }
    }
    /* Cells past the lanes hold -inf (not bad); only real cells count. */
    return bad & (lanes >= 64 ? ~(uint64_t)0 : (((uint64_t)1 << lanes) - 1u));
}

DP_ALWAYS_INLINE int sweep_range(const dp_problem *p, const int semiring,
                                 const int has_logits, const int has_topo,
                                 const int has_skip, int64_t s_begin, int64_t s_end,
                                 int64_t t_begin, int64_t t_end, DP_REAL *column,
                                 DP_REAL *edge) {
    _Alignas(64) DP_REAL cells[DP_BLOCK_STEPS * DP_W];
    _Alignas(64) DP_REAL hist[DP_BLOCK_STEPS * DP_W];
    _Alignas(64) DP_REAL wstay[DP_BLOCK_STEPS * DP_W];
    _Alignas(64) DP_REAL wmove[DP_BLOCK_STEPS * DP_W];
    uint64_t bad = 0;
    /* Tile by tile along the states, each over every step: the rows of the
     * weights (frames contiguous in the usual layout) then stream. */
    const int64_t diag = has_topo ? p->diag : 0;
    for (int64_t s0 = s_begin; s0 < s_end; s0 += DP_W) {
        int64_t out_lane = (s_end - s0 < DP_W ? s_end - s0 : DP_W) - 1;
        /* A tile with a tile after it visits only the blocks of steps where
         * it or the next tile meets the band: elsewhere the next tile does
         * not read this one's edge, and walking every block of a thin band
         * (many-to-many attention with M << N) would cost states x steps.
         * The last tile walks every block: its edge is the sweep's output. */
        int64_t t_lo = t_begin, t_hi = t_end;
        if (s0 + DP_W < s_end) {
            int64_t first = s0 - diag; /* the tile's first step in the band */
            if (first > t_begin) t_lo = t_begin + (first - t_begin) / DP_BLOCK_STEPS * DP_BLOCK_STEPS;
            int64_t last = s0 + 2 * DP_W - 1 + p->band; /* the next tile's last */
            if (last + 1 < t_hi) t_hi = last + 1;
        }
        for (int64_t t0 = t_lo; t0 < t_hi; t0 += DP_BLOCK_STEPS) {
            int64_t steps = t_end - t0 < DP_BLOCK_STEPS ? t_end - t0 : DP_BLOCK_STEPS;
            int above = s0 > t0 + steps - 1 + (has_topo ? p->diag : 0); /* s > t + diag */
            int below = s0 + DP_W - 1 < t0 - p->band;     /* every cell outside the band */
            if (above || below) {
                /* alpha is -inf on all of it, and stays so below the band:
                 * nothing to read or compute. */
                DP_REAL *e = edge + (t0 - t_begin);
                DP_REAL *col = column + (s0 - s_begin);
                /* e[0] is the step before the block, which may still be in the
                 * band; every later one is outside it. */
                e[0] = col[out_lane];
                for (int64_t k = 1; k < steps; k++) e[k] = -INFINITY;
                if (has_skip) {
                    DP_REAL *se = (DP_REAL *)p->topo->skip_edge +
                                  (t0 - p->skip_edge_t0) * DP_MAX_SKIP;
                    int64_t d = p->topo->skip_dist;
                    for (int64_t j = 0; j < d; j++) {
                        int64_t m = out_lane + 1 - d + j;
                        se[j] = m >= 0 ? col[m] : se[j + out_lane + 1];
                    }
                    for (int64_t k = 1; k < steps; k++)
                        for (int64_t j = 0; j < d; j++) se[k * DP_MAX_SKIP + j] = -INFINITY;
                }
                if (below) vec_store(col, vec_set1(-INFINITY));
                continue;
            }
            bad |= sweep_tile(p, semiring, has_logits, has_topo, has_skip, s0, t0, steps,
                              column + (s0 - s_begin), edge + (t0 - t_begin), cells,
                              wstay, wmove, hist, out_lane);
        }
        /* blocks not walked past the band: the tile's alpha is -inf there */
        if (t_hi < t_end) vec_store(column + (s0 - s_begin), vec_set1(-INFINITY));
    }
    return bad != 0;
}

int DP_FN(const dp_problem *p, int64_t s_begin, int64_t s_end, int64_t t_begin,
          int64_t t_end, void *column, void *edge) {
    DP_REAL *c = (DP_REAL *)column, *e = (DP_REAL *)edge;
    int logits = p->logits.base != NULL;
    if (p->topo) {
        /* topologies: the skip edge (three-way cells) is its own loop */
        dp_problem q = *p;
        q.skip_edge_t0 = t_begin;
        int skip = p->topo->skip != NULL;
        if (p->semiring == DP_MAXPLUS)
            return skip ? sweep_range(&q, DP_MAXPLUS, 0, 1, 1, s_begin, s_end, t_begin, t_end, c, e)
                        : sweep_range(&q, DP_MAXPLUS, 0, 1, 0, s_begin, s_end, t_begin, t_end, c, e);
        return skip ? sweep_range(&q, DP_LOGPLUS, 0, 1, 1, s_begin, s_end, t_begin, t_end, c, e)
                    : sweep_range(&q, DP_LOGPLUS, 0, 1, 0, s_begin, s_end, t_begin, t_end, c, e);
    }
    if (p->semiring == DP_MAXPLUS)
        return logits ? sweep_range(p, DP_MAXPLUS, 1, 0, 0, s_begin, s_end, t_begin, t_end, c, e)
                      : sweep_range(p, DP_MAXPLUS, 0, 0, 0, s_begin, s_end, t_begin, t_end, c, e);
    return logits ? sweep_range(p, DP_LOGPLUS, 1, 0, 0, s_begin, s_end, t_begin, t_end, c, e)
                  : sweep_range(p, DP_LOGPLUS, 0, 0, 0, s_begin, s_end, t_begin, t_end, c, e);
}
