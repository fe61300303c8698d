/* Cell policies of the soft sweep (soft_sweep.cuh): what a cell computes from
 * the values on its two incoming edges and its inputs.
 *
 * PlusCell: alpha = PLUS(in_stay, in_move) + c, PLUS the semiring's
 *   (dp_semiring.cuh: LogPlus, MaxPlus),
 *   with optional cell weights c (input 0) and edge weights from logits
 *   (the next input): out_stay = alpha + log sigmoid(x), out_move = alpha +
 *   log sigmoid(-x). Its output is alpha, or with POSTERIOR the posterior
 *   exp(alpha + alpha_fwd - c - log_z) of a reversed sweep, alpha_fwd being
 *   the last input (forward-sum's backward).
 * AdjointCell: the reverse-mode derivative of the log-plus sweep with logit
 *   weights, run over the reversed view; one policy for both attention kinds,
 *   since the skew is only a view. */
#ifndef MAS_CUDA_SOFT_CELLS_CUH
#define MAS_CUDA_SOFT_CELLS_CUH

#include "cuda/soft_sweep.cuh"

namespace mas_cuda {

template <typename TA, class Semiring, bool HAS_CELL, bool HAS_LOGITS, bool POSTERIOR>
struct PlusCell {
    static constexpr int NIN = (HAS_CELL ? 1 : 0) + (HAS_LOGITS ? 1 : 0) + (POSTERIOR ? 1 : 0);
    static constexpr int CELL = 0, LOGITS = HAS_CELL ? 1 : 0, FWD = NIN - 1;
    using Edge = TA;
    /* Inputs outside the cells: -inf cells (never on a path), 0 logits. */
    __device__ static TA pad(int v) {
        return (HAS_CELL && v == CELL) || (POSTERIOR && v == FWD) ? neg_inf<TA>() : (TA)0;
    }
    __device__ static TA zero() { return neg_inf<TA>(); }
    /* The virtual start: one edge of weight 0 into (0, 0). */
    __device__ static TA start(int64_t t) { return t == 0 ? (TA)0 : neg_inf<TA>(); }
    __device__ static TA final_value(TA stay) { return stay; }

    /* What a cell needs that does not depend on its incoming edges (so it
     * is off the chain of steps; the compiler schedules it freely). */
    struct Pre {
        TA cell, ws, wm, fwd;
    };
    __device__ static Pre prepare(const TA (&x)[NIN > 0 ? NIN : 1]) {
        Pre p;
        p.cell = HAS_CELL ? x[CELL] : (TA)0;
        p.ws = p.wm = 0;
        if (HAS_LOGITS) log_sigmoid_pair(x[LOGITS], p.ws, p.wm);
        p.fwd = POSTERIOR ? x[FWD] : (TA)0;
        return p;
    }
    /* Branch-free (soft_sweep.cuh): everything is computed, then cells
     * that do not exist give the zero edges. */
    __device__ static void step(TA in_stay, TA in_move, const Pre &p, bool exists, TA scalar,
                                TA &out_stay, TA &out_move, TA &out) {
        TA alpha = Semiring::plus(in_stay, in_move);
        if (HAS_CELL) alpha += p.cell;
        out_stay = exists ? alpha + p.ws : neg_inf<TA>();
        out_move = exists ? alpha + p.wm : neg_inf<TA>();
        if (POSTERIOR) {
            /* alpha here is beta~ (the reversed sweep), p.fwd the forward's
             * alpha; -inf on either side: no path crosses the cell. The
             * exponent is a log probability, <= 0 but for rounding (or
             * +inf where two huge sums overflow): clamped as on the CPU, so
             * that gamma <= 1 (the CUDA replay found inf there). */
            TA x = alpha + p.fwd - p.cell - scalar;
            x = x > (TA)0 ? (TA)0 : x;
            const TA g = soft_exp(x);
            out = !exists || alpha == neg_inf<TA>() || p.fwd == neg_inf<TA>() ? (TA)0 : g;
        } else {
            out = exists ? alpha : neg_inf<TA>();
        }
    }
};

/* Reverse mode of alpha(t,s) = LSE(alpha(t-1,s) + ws(t-1,s),
 * alpha(t-1,s-1) + wm(t-1,s-1)), ws = log sigmoid(x), wm = log sigmoid(-x):
 *   abar(t,s) = g(t,s) + A_stay + A_move,
 *   A_stay = abar(t+1,s)   exp(alpha(t,s) + ws(t,s) - alpha(t+1,s)),
 *   A_move = abar(t+1,s+1) exp(alpha(t,s) + wm(t,s) - alpha(t+1,s+1)),
 *   dL/dx(t,s) = A_stay sigmoid(-x) - A_move sigmoid(x).
 * Swept over the reversed view, (t+1, s) and (t+1, s+1) are the stay and move
 * predecessors, and both edges carry the source's (abar, alpha). A cell or a
 * successor with alpha = -inf contributes 0 (never 0 * inf). Inputs: logits,
 * the forward's log phi, the upstream gradient. */
template <typename TA> struct AdjointCell {
    static constexpr int NIN = 3;
    static constexpr int LOGITS = 0, ALPHA = 1, GRAD = 2;
    using Edge = Pair<TA>;
    __device__ static TA pad(int v) { return v == ALPHA ? neg_inf<TA>() : (TA)0; }
    __device__ static Edge zero() {
        Edge e;
        e.a = 0;
        e.b = neg_inf<TA>();
        return e;
    }
    __device__ static Edge start(int64_t) { return zero(); }
    __device__ static TA final_value(Edge e) { return e.a; }

    struct Pre {
        TA alpha, grad, ws, wm, sig_pos, sig_neg;
    };
    __device__ static Pre prepare(const TA (&x)[3]) {
        Pre p;
        const TA xv = x[LOGITS];
        p.alpha = x[ALPHA];
        p.grad = x[GRAD];
        const TA ex = log_sigmoid_pair(xv, p.ws, p.wm);
        /* sigmoid(|x|) = 1/(1+e), sigmoid(-|x|) = e/(1+e), e = exp(-|x|) */
        const TA big = soft_rcp((TA)1 + ex), small = ex * big;
        p.sig_pos = xv >= 0 ? big : small;
        p.sig_neg = xv >= 0 ? small : big;
        return p;
    }
    __device__ static void step(Edge in_stay, Edge in_move, const Pre &p, bool exists, TA,
                                Edge &out_stay, Edge &out_move, TA &out) {
        const bool live = exists && p.alpha != neg_inf<TA>();
        /* computed always, selected (branch-free); never 0 * inf */
        const TA e_stay = in_stay.a * soft_exp(p.alpha + p.ws - in_stay.b);
        const TA e_move = in_move.a * soft_exp(p.alpha + p.wm - in_move.b);
        const TA a_stay = in_stay.b != neg_inf<TA>() && in_stay.a != 0 ? e_stay : (TA)0;
        const TA a_move = in_move.b != neg_inf<TA>() && in_move.a != 0 ? e_move : (TA)0;
        Edge e;
        e.a = live ? p.grad + a_stay + a_move : (TA)0;
        e.b = live ? p.alpha : neg_inf<TA>();
        out = live ? a_stay * p.sig_neg - a_move * p.sig_pos : (TA)0;
        out_stay = out_move = e;
    }
};

} // namespace mas_cuda

#endif
