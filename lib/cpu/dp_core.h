/* The dynamic-programming core shared by every alignment op on the CPU.
 *
 * One recurrence, over states s (tokens) and steps t (frames):
 *   alpha[t][s] = PLUS( alpha[t-1][s]   (+) w_stay(t-1, s),
 *                       alpha[t-1][s-1] (+) w_move(t-1, s-1) )  (+)  c(t, s)
 * with alpha[-1][-1] = 0 (the virtual start) and alpha[-1][s] = -inf otherwise,
 * so alpha[0][0] = c(0,0) and alpha[t][s] = -inf for s > t: no path reaches
 * those cells, so they are never read (in a skewed view they are not even
 * memory) nor written.
 *
 * Parameters, not copies of code:
 *   - the semiring: PLUS is max (max-plus, hard MAS) or logaddexp (log-plus,
 *     forward-sum and monotonic attention); (+) is ordinary addition;
 *   - the weights: per-cell c(t,s) from any strided array of any dtype, and
 *     optional per-edge weights derived from a logits array x(t,s):
 *     w_stay = log sigmoid(x), w_move = log sigmoid(-x) (monotonic attention);
 *   - the topology: the stay/advance step over any strided view, so reversed
 *     (negative strides) and skewed (diagonal) walks reuse the same sweep.
 *
 * The sweep runs tile by tile: DP_LANES states in SIMD lanes, a block of steps
 * at a time, the states' column of alpha kept in `column` and the last state's
 * values handed to the next tile through `edge`. Work is split over states
 * (tiles in order) and over steps (blocks in order) by the caller, which is
 * what lets threads pipeline one item.
 */
#ifndef MAS_CPU_DP_CORE_H
#define MAS_CPU_DP_CORE_H

#include <stddef.h>
#include <stdint.h>

#include "mas.h"

/* Steps per block: one tile's worth of transposed weights stays in L1. */
#define DP_BLOCK_STEPS 32

#define DP_NO_BAND (INT64_MAX / 4)

typedef enum dp_semiring { DP_MAXPLUS = 0, DP_LOGPLUS = 1 } dp_semiring;

/* The longest skip edge a topology may have (s-d -> s, d <= DP_MAX_SKIP). */
#define DP_MAX_SKIP 8

/* A topology other than the plain chain (see dp_problem.topo): per-state
 * edge weights, of the accumulator type, constant over the steps.
 *   alpha[t][s] = PLUS( alpha[t-1][s]   (+) stay[s],
 *                       alpha[t-1][s-1] (+) move[s],
 *                       alpha[t-1][s-d] (+) skip[s] )  (+)  c(t, s)
 * move[0] is the edge from the virtual start; skip[d-1] the skip edge from
 * it. A weight is finite or -inf (no edge). */
typedef struct dp_topology {
    const void *stay; /* [n_states] */
    const void *move; /* [n_states] */
    const void *skip; /* [n_states], or NULL: no skip edges */
    int64_t skip_dist; /* d, 2 <= d <= DP_MAX_SKIP, when skip is set */
    /* The skip edges' hand-over between tiles, as `edge` is for the move
     * edge: skip_edge[k * DP_MAX_SKIP + j] = alpha[t_begin-1+k][s_begin-d+j]
     * for j < d on entry (at s_begin 0: 0 at k = 0, j = d-1, the virtual
     * start; -inf elsewhere), the same for the state after the range on exit.
     * (t_end - t_begin) * DP_MAX_SKIP values of the accumulator type. */
    void *skip_edge;
    /* Max-plus: one bit per cell, 1 where the skip edge won (strictly over
     * stay and move), laid out as dp_problem.decisions. NULL: not wanted. */
    uint8_t *skip_decisions;
} dp_topology;

/* A strided 2-D view over (step t, state s) of one item. */
typedef struct dp_view {
    const void *base;
    int32_t dtype;      /* mas_dtype */
    int64_t stride_state;
    int64_t stride_step;
} dp_view;

/* Cells computed on demand instead of read from a view (the fused
 * likelihood + alignment ops: the [T, S] matrix is never written). fill
 * writes dst[k*ld + l] = c(t0+k, s0+l), of the accumulator type, for
 * l < lanes and k < steps, and -inf for the cells outside the band
 * (s < t - band) or above the diagonal (s > t + diag), which it need not
 * compute. It runs on the sweeping thread and must be safe to call from
 * several threads at once. */
typedef struct dp_cell_source {
    void (*fill)(const void *ctx, int64_t s0, int64_t lanes, int64_t t0, int64_t steps,
                 int64_t band, int64_t diag, void *dst, int64_t ld);
    const void *ctx;
} dp_cell_source;

typedef struct dp_problem {
    int64_t n_states;    /* states that exist: 0 <= s < n_states */
    int64_t n_steps;     /* steps that exist:  0 <= t < n_steps  */
    int32_t semiring;    /* dp_semiring */
    int32_t accum;       /* MAS_FLOAT32 or MAS_FLOAT64: the arithmetic type */
    dp_view cell;        /* c(t,s); base NULL means 0 (unless cell_source) */
    /* Optional: cells from a source instead of the view (plain chain and
     * max-plus or log-plus; not with a topology or logits). */
    const dp_cell_source *cell_source;
    dp_view logits;      /* edge weights from logits; base NULL means none */
    /* Lower band: cells with s < t - band are outside (-inf, never read), as
     * in a skewed walk whose diagonal leaves the matrix. DP_NO_BAND: none. */
    int64_t band;
    /* 1 when every cell with s < n_states, t < n_steps may be read (a plain
     * rectangle such as hard MAS's), so tiles cut by the band or the diagonal
     * are read whole and the cut cells padded afterwards; 0 for views where
     * such cells are not memory (skewed walks). */
    int32_t readable;
    /* Max-plus only: one bit per cell, 1 where the advance edge won
     * (alpha[t-1][s] < alpha[t-1][s-1] after weights). Tile-major:
     * bits of tile k, step t at decisions + (k * n_steps + t) * DP_LANES/8.
     * NULL when not wanted. */
    uint8_t *decisions;
    /* The window of steps the bitmaps (decisions, skip_decisions) hold, so a
     * sweep restarted from a checkpoint column at t_begin can write the bits
     * of its steps only (long-form alignment under a memory budget): the bits
     * of step t are at row t - decisions_t0 of rows of decisions_steps steps
     * per tile. 0 and 0 (a zeroed problem): the whole item, t0 = 0 and
     * n_steps steps. */
    int64_t decisions_t0;
    int64_t decisions_steps;
    /* Optional: alpha[t][s] written here (accumulator type) for every cell
     * inside the band with s <= t; other cells untouched. */
    void *alpha_out;
    int64_t alpha_stride_state, alpha_stride_step;
    /* Optional topology (NULL: the plain chain, zero edge weights: hard MAS,
     * forward-sum). Not with logits. */
    const dp_topology *topo;
    /* The upper cut: cells with s > t + diag are outside (no path reaches
     * them), as s > t is for the plain chain (diag 0). A topology whose
     * paths run faster than one state a step sets DP_NO_BAND. */
    int64_t diag;
    /* Optional state -> row map of the cell view: c(t,s) is read at row
     * cell_rows[s] (gathered emissions: a label's column of log-probs), so
     * the per-state expansion is never written. NULL: row s. */
    const int32_t *cell_rows;
    /* Internal: the t_begin of the running dp_sweep (skip_edge's origin). */
    int64_t skip_edge_t0;
} dp_problem;

/* Bytes of the decision bitmap of one item (rounded up to whole tiles). */
int64_t dp_decision_bytes(int64_t n_states, int64_t n_steps, int32_t accum);
/* Lanes per tile for an accumulator type on this CPU (four SIMD registers:
 * 64 float32 lanes with AVX-512, 32 with AVX2, 16 with SSE2). */
int64_t dp_lanes(int32_t accum);
/* The instruction set the sweeps use: 2 AVX-512, 1 AVX2, 0 SSE2 (the
 * widest the CPU has, lowered by MAS_CPU_ISA=sse2|avx2), for other code
 * that picks a build per set. */
int32_t dp_isa_level(void);

/* Runs the recurrence for states [s_begin, s_end) (s_begin a multiple of the
 * lane count) and steps [t_begin, t_end).
 *   column: alpha[t_begin-1][s] for s in [s_begin, s_end) on entry (padded to
 *           whole tiles; -inf before the first step), alpha[t_end-1][s] on exit.
 *   edge:   edge[k] = alpha[t_begin-1+k][s_begin-1] for k < t_end-t_begin on
 *           entry (the state just before the range; at t_begin == 0 and
 *           s_begin == 0 it is the virtual start: edge[0] = 0, else -inf);
 *           on exit edge[k] = alpha[t_begin-1+k][s_end-1], ready for the next
 *           range of states.
 * Returns 1 when a cell weight inside the range was NaN or +inf, else 0. The
 * arrays are of the accumulator type. */
int dp_sweep(const dp_problem *p, int64_t s_begin, int64_t s_end,
             int64_t t_begin, int64_t t_end, void *column, void *edge);

#endif
