/* Topologies on the CPU (mas.h section 7): the chain of states of a
 * transcript (k HMM states per token, CTC blanks, token skips) as per-state
 * edge weights for the one DP core (dp_core.h, dp_topology), hard (max-plus
 * with decision bits, then a backtrack) and soft (log-plus forward and
 * reversed sweeps, then posteriors).
 *
 * The reversed sweep is the same recurrence over the states and frames in
 * reverse order: state s' = n-1-s at step t' = S-1-t, its edge weights the
 * forward's edges read backwards (stay'[s'] = stay[s], move'[s'] =
 * move[s+1], skip'[s'] = skip[s+d]). The forward's final states become its
 * first states: n-1 through the virtual start's move edge (weight 0), the
 * other final state n-d through its skip edge (the final weight), which is
 * why both topologies with a second final state put it at distance d-1.
 * alpha' then holds e(t,s) + the paths from (t,s) to the end, so
 *   gamma(t,s) = exp(alpha(t,s) + alpha'(t',s') - e(t,s) - log_z),
 * then divided by its frame's sum over s (1 but for rounding: combine).
 * Items run in parallel, one per thread. A hard call given less than the
 * unbounded workspace runs checkpointed (longform.h): the same bits,
 * segment by segment. */
/* The posterior's per-state loops are branch-free so that they vectorise:
 * GCC if-converts them only without -ftrapping-math (nothing here reads FP
 * flags). */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
#endif

#include <math.h>
#include <string.h>

#include "common/checks.h"
#include "cpu/dp_core.h"
#include "cpu/longform.h"
#include "cpu/parallel.h"
#include "cpu/soft_common.h"
#include "cpu/soft_math.h"
#include "mas.h"

int64_t mas_topology_states(const mas_topology *t, int64_t tokens) {
    if (!t || t->states_per_token < 1 || tokens < 0) return 0;
    int64_t per = (int64_t)t->states_per_token + (t->has_blank ? 1 : 0), n;
    if (__builtin_mul_overflow(tokens, per, &n) || n > INT64_MAX - 1)
        return INT64_MAX; /* saturates (mas.h): no workspace fits such a chain */
    return n + (t->has_blank ? 1 : 0);
}

/* Per-thread scratch of one item. */
typedef struct topo_layout {
    size_t column, edge, skip_edge, weights, rows, decisions, alpha;
    size_t checkpoints; /* long-form: the columns kept, else 0 */
    int64_t seg_steps;  /* long-form: frames per segment (K), else 0 */
    size_t total;
} topo_layout;

/* Hard calls keep decision bits, soft ones alpha and beta~. */
static topo_layout layout_for(int64_t n, int64_t S, int32_t accum, int soft) {
    topo_layout w;
    size_t a = soft_accum_size(accum);
    int64_t lanes = 64; /* the widest tile of any ISA */
    w.column = MAS_ALIGN_UP((size_t)MAS_ALIGN_UP(n, lanes) * a, MAS_CACHE_LINE);
    w.edge = MAS_ALIGN_UP((size_t)(S + DP_BLOCK_STEPS) * a, MAS_CACHE_LINE);
    w.skip_edge = MAS_ALIGN_UP((size_t)(S + DP_BLOCK_STEPS) * DP_MAX_SKIP * a, MAS_CACHE_LINE);
    w.weights = MAS_ALIGN_UP((size_t)n * a, MAS_CACHE_LINE); /* one of six arrays */
    w.rows = MAS_ALIGN_UP((size_t)n * sizeof(int32_t), MAS_CACHE_LINE); /* one of two */
    w.decisions = soft ? 0 : MAS_ALIGN_UP((size_t)dp_decision_bytes(n, S, accum), MAS_CACHE_LINE);
    w.alpha = soft ? MAS_ALIGN_UP((size_t)n * (size_t)S * a, MAS_CACHE_LINE) : 0; /* one of two */
    w.checkpoints = 0;
    w.seg_steps = 0;
    w.total = w.column + w.edge + w.skip_edge + 6 * w.weights + 2 * w.rows +
              2 * w.decisions + 2 * w.alpha;
    return w;
}

/* Long-form Viterbi (longform.h): edges and bits of one segment of K
 * frames, a column kept before every segment but the first. */
static topo_layout longform_layout(int64_t n, int64_t S, int32_t accum, int64_t K) {
    topo_layout w = layout_for(n, K, accum, 0);
    w.checkpoints = (size_t)(lf_segments(S, K) - 1) * w.column;
    w.seg_steps = K;
    w.total += w.checkpoints;
    return w;
}

typedef struct topo_key {
    int64_t n, S;
    int32_t accum;
} topo_key;

static size_t longform_bytes(const void *ctx, int64_t K) {
    const topo_key *k = (const topo_key *)ctx;
    return longform_layout(k->n, k->S, k->accum, K).total;
}

/* Bytes of the call that are not a worker's: alignment slack, statuses. */
static size_t shared_bytes(int64_t batch) {
    return MAS_CACHE_LINE + MAS_ALIGN_UP((size_t)batch * sizeof(int32_t), MAS_CACHE_LINE);
}

static int64_t topo_max_states(const mas_topo_args *a) {
    return mas_topology_states(&a->topology, a->tokens);
}

/* Frames of the emissions (S') and, gathered, the label count V. */
static int64_t emit_frames(const mas_topo_args *a) {
    return a->gathered ? a->emissions.dim[1] : a->emissions.dim[2];
}

/* Checks that need no item values (shared with CUDA). */
_Static_assert(DP_MAX_SKIP == MAS_TOPO_MAX_SKIP, "one skip limit for the core and the checks");
static mas_status check_args(const mas_topo_args *a) { return mas_topo_check_args(a); }

size_t mas_topo_cpu_workspace_size(const mas_topo_args *args, int32_t soft, int32_t threads) {
    if (check_args(args) != MAS_OK) return 0;
    int64_t B = args->emissions.dim[0];
    int64_t n = topo_max_states(args);
    if (n < 1) n = 1;
    /* beyond 2^52 cells (states x frames, or items): SIZE_MAX, as every
     * workspace function (mas.h conventions); the layout's products and the
     * team's total are then checked against size_t as well */
    if (mas_shape_too_big(1, n, emit_frames(args)) || mas_shape_too_big(B, 1, 1)) return SIZE_MAX;
    topo_layout w = layout_for(n, emit_frames(args), mas_accum_dtype(args->emissions.dtype), soft);
    size_t total;
    if (__builtin_mul_overflow((size_t)soft_team(B, threads), w.total, &total) ||
        __builtin_add_overflow(total, MAS_CACHE_LINE + MAS_ALIGN_UP((size_t)B * sizeof(int32_t),
                                                                    MAS_CACHE_LINE), &total))
        return SIZE_MAX;
    return total;
}

static topo_key key_of(const mas_topo_args *args) {
    int64_t n = topo_max_states(args);
    topo_key key = {n < 1 ? 1 : n, emit_frames(args), mas_accum_dtype(args->emissions.dtype)};
    return key;
}

size_t mas_topo_cpu_min_workspace_size(const mas_topo_args *args, int32_t threads) {
    size_t full = mas_topo_cpu_workspace_size(args, 0, threads);
    if (full == 0) return 0;
    topo_key key = key_of(args);
    size_t one = lf_min_bytes(key.S, longform_bytes, &key);
    size_t shared = shared_bytes(args->emissions.dim[0]);
    size_t lf = one > SIZE_MAX - shared ? SIZE_MAX : one + shared;
    return lf < full ? lf : full;
}

/* The long-form plan below the unbounded size: as many workers (items at a
 * time) as the threads allow and the size holds at the smallest each, then
 * the longest segments their share holds. 0 when one worker does not fit. */
static int plan_longform(const mas_topo_args *args, int32_t threads, size_t size,
                         int32_t *team, topo_layout *w) {
    int64_t B = args->emissions.dim[0];
    size_t shared = shared_bytes(B);
    if (size <= shared) return 0;
    size_t avail = size - shared;
    topo_key key = key_of(args);
    size_t one = lf_min_bytes(key.S, longform_bytes, &key);
    if (one == 0 || one > avail) return 0;
    int64_t n = soft_team(B, threads);
    if ((size_t)n > avail / one) n = (int64_t)(avail / one);
    int64_t K = lf_pick_steps(key.S, avail / (size_t)n, longform_bytes, &key);
    if (K == 0) return 0;
    *team = (int32_t)n;
    *w = longform_layout(key.n, key.S, key.accum, K);
    return 1;
}

/* One item's chain: sizes, weights (double, before conversion) and the
 * per-thread arrays. */
typedef struct topo_item {
    int64_t b, L, S, n, k;
    int64_t d;          /* skip distance, 0 without skip edges */
    int64_t alt_final;  /* the second final state, -1 if none */
    double alt_weight;  /* its log-score */
    uint8_t *column, *edge, *skip_edge, *dec, *skip_dec;
    uint8_t *checkpoints; /* long-form only */
    void *w[6];         /* stay, move, skip; reversed stay, move, skip */
    int32_t *rows, *rows_rev; /* label per state (NULL without labels) */
    void *alpha, *beta;
} topo_item;

typedef struct topo_call {
    const mas_topo_args *a;
    const mas_topo_hard_outputs *hard;
    const mas_topo_soft_outputs *soft;
    uint8_t *ws;
    topo_layout w;
    int32_t team;
    int32_t accum;
    int32_t *status; /* [B] */
} topo_call;

static int32_t label_of(const mas_topo_args *a, int64_t b, int64_t i, int64_t j) {
    return a->labels[b * a->labels_stride + i * a->topology.states_per_token + j];
}

/* Token of state s (-1 for a blank) and its place j in the token. */
static int64_t token_of(const mas_topology *t, int64_t s, int64_t *j) {
    int64_t k = t->states_per_token;
    if (!t->has_blank) {
        *j = s % k;
        return s / k;
    }
    int64_t r = s % (k + 1);
    *j = r - 1;
    return r == 0 ? -1 : s / (k + 1);
}

/* Lengths, labels and the frames the transcript needs. */
static mas_status check_item(const topo_call *c, int64_t b, int64_t *L_out, int64_t *S_out) {
    const mas_topo_args *a = c->a;
    const mas_topology *t = &a->topology;
    int64_t L = a->token_len[b], S = a->frame_len[b], k = t->states_per_token;
    *L_out = L;
    *S_out = S;
    if (L < (t->has_blank ? 0 : 1) || L > a->tokens || S < 1 || S > emit_frames(a))
        return MAS_ERR_BAD_LENGTH;
    int64_t n = mas_topology_states(t, L);
    if (!a->gathered && n > a->emissions.dim[1]) return MAS_ERR_BAD_LENGTH;
    int64_t V = a->gathered ? a->emissions.dim[2] : INT64_MAX;
    if (a->labels)
        for (int64_t i = 0; i < L; i++)
            for (int64_t j = 0; j < k; j++) {
                int32_t l = label_of(a, b, i, j);
                if (a->gathered && (l < 0 || l >= V)) return MAS_ERR_BAD_ARGUMENT;
                if (t->has_blank && l == t->blank) return MAS_ERR_BAD_ARGUMENT;
            }
    int64_t need = k * L;
    if (t->has_blank)
        for (int64_t i = 1; i < L; i++)
            need += label_of(a, b, i - 1, k - 1) == label_of(a, b, i, 0);
    if (t->skip_penalty > -INFINITY) need = k * (L / 2 > 1 ? L / 2 : 1);
    return need > S ? MAS_ERR_TARGET_TOO_LONG : MAS_OK;
}

static void store(void *base, int32_t accum, int64_t i, double x) { soft_store(base, accum, i, x); }

/* Carves the thread's scratch and builds the item's edge weights. */
static void build_item(const topo_call *c, int64_t b, int64_t L, int64_t S, int32_t rank,
                       topo_item *it) {
    const mas_topo_args *a = c->a;
    const mas_topology *t = &a->topology;
    const topo_layout *w = &c->w;
    int32_t acc = c->accum;
    uint8_t *p = c->ws + (size_t)rank * w->total;
    memset(it, 0, sizeof *it);
    it->b = b;
    it->L = L;
    it->S = S;
    it->k = t->states_per_token;
    it->n = mas_topology_states(t, L);
    it->column = p; p += w->column;
    it->edge = p; p += w->edge;
    it->skip_edge = p; p += w->skip_edge;
    for (int q = 0; q < 6; q++) { it->w[q] = p; p += w->weights; }
    it->rows = (int32_t *)p; p += w->rows;
    it->rows_rev = (int32_t *)p; p += w->rows;
    it->dec = p; p += w->decisions;
    it->skip_dec = p; p += w->decisions;
    it->alpha = p; p += w->alpha;
    it->beta = p; p += w->alpha;
    it->checkpoints = p;

    int64_t n = it->n, k = it->k;
    int skips = t->skip_penalty > -INFINITY && L >= 2;
    it->d = t->has_blank ? (L >= 1 ? 2 : 0) : skips ? k + 1 : 0;
    it->alt_final = -1;
    if (t->has_blank && L >= 1) {
        it->alt_final = n - 2;
        it->alt_weight = 0;
    } else if (skips) {
        it->alt_final = n - 1 - k;
        it->alt_weight = t->skip_penalty;
    }
    for (int64_t s = 0; s < n; s++) {
        int64_t j, i = token_of(t, s, &j);
        double stay = i < 0 ? t->blank_stay : t->stay ? t->stay[j] : 0;
        double move = s == 0 ? 0 : i < 0 ? t->blank_advance : t->advance ? t->advance[j] : 0;
        double skip = -INFINITY;
        if (it->d && i >= 0 && j == 0) {
            if (t->has_blank)
                skip = i == 0 ? 0
                       : label_of(a, b, i - 1, k - 1) != label_of(a, b, i, 0)
                           ? (t->advance ? t->advance[0] : 0)
                           : -INFINITY;
            else if (i >= 1)
                skip = i == 1 ? t->skip_penalty
                              : (t->advance ? t->advance[0] : 0) + t->skip_penalty;
        }
        store(it->w[0], acc, s, stay);
        store(it->w[1], acc, s, move);
        store(it->w[2], acc, s, skip);
        if (a->labels) it->rows[s] = i < 0 ? t->blank : label_of(a, b, i, j);
    }
    /* reversed: stay'[s'] = stay[s], move'[s'] = move[s+1], skip'[s'] = skip[s+d] */
    for (int64_t r = 0; r < n; r++) {
        int64_t s = n - 1 - r;
        double stay = soft_load(it->w[0], acc, s);
        double move = r == 0 ? 0 : soft_load(it->w[1], acc, s + 1);
        double skip = -INFINITY;
        if (it->d && s + it->d <= n - 1) skip = soft_load(it->w[2], acc, s + it->d);
        if (it->d && r == it->d - 1 && it->alt_final == s) skip = it->alt_weight;
        store(it->w[3], acc, r, stay);
        store(it->w[4], acc, r, move);
        store(it->w[5], acc, r, skip);
        if (a->labels) it->rows_rev[r] = it->rows[s];
    }
}

/* The item's emissions as a dp view, forwards or reversed. */
static dp_view emission_view(const mas_topo_args *a, const topo_item *it, int reversed) {
    const mas_tensor3 *e = &a->emissions;
    dp_view v;
    v.dtype = e->dtype;
    if (a->gathered) {
        v.base = soft_at(e, it->b, reversed ? it->S - 1 : 0, 0);
        v.stride_step = reversed ? -e->stride[1] : e->stride[1];
        v.stride_state = e->stride[2]; /* applied to the row (label) */
    } else {
        v.base = soft_at(e, it->b, reversed ? it->n - 1 : 0, reversed ? it->S - 1 : 0);
        v.stride_state = reversed ? -e->stride[1] : e->stride[1];
        v.stride_step = reversed ? -e->stride[2] : e->stride[2];
    }
    return v;
}

/* e(t, s) widened to double. */
static double emission_at(const mas_topo_args *a, const topo_item *it, int64_t t, int64_t s) {
    const mas_tensor3 *e = &a->emissions;
    if (a->gathered)
        return soft_load(soft_at(e, it->b, t, it->rows[s]), e->dtype, 0);
    return soft_load(soft_at(e, it->b, s, t), e->dtype, 0);
}

/* The item's problem for dp_sweep, its topology in *tp. */
static void problem_for(const topo_call *c, topo_item *it, int semiring, int reversed,
                        dp_topology *tp_out, dp_problem *p_out) {
    dp_topology tp;
    memset(&tp, 0, sizeof tp);
    tp.stay = it->w[reversed ? 3 : 0];
    tp.move = it->w[reversed ? 4 : 1];
    if (it->d) {
        tp.skip = it->w[reversed ? 5 : 2];
        tp.skip_dist = it->d;
        tp.skip_edge = it->skip_edge;
        if (semiring == DP_MAXPLUS) tp.skip_decisions = it->skip_dec;
    }
    dp_problem p;
    memset(&p, 0, sizeof p);
    p.n_states = it->n;
    p.n_steps = it->S;
    p.semiring = semiring;
    p.accum = c->accum;
    p.cell = emission_view(c->a, it, reversed);
    p.readable = 1;
    p.topo = &tp;
    if (c->a->gathered) p.cell_rows = reversed ? it->rows_rev : it->rows;
    if (it->d) {
        /* paths run up to d states a frame: no cut */
        p.band = DP_NO_BAND;
        p.diag = DP_NO_BAND;
    } else {
        p.band = it->S - it->n;
        p.diag = 0;
    }
    if (semiring == DP_MAXPLUS) p.decisions = it->dec;
    *tp_out = tp;
    *p_out = p;
    p_out->topo = tp_out;
}

/* One sweep over the whole item; returns 1 for a bad cell. Leaves alpha of
 * the last frame in it->column. */
static int sweep(const topo_call *c, topo_item *it, int semiring, int reversed, void *alpha_out) {
    dp_topology tp;
    dp_problem p;
    problem_for(c, it, semiring, reversed, &tp, &p);
    if (alpha_out) {
        p.alpha_out = alpha_out;
        p.alpha_stride_state = it->S;
        p.alpha_stride_step = 1;
        soft_fill(alpha_out, c->accum, it->n * it->S, -INFINITY);
    }
    soft_fill(it->column, c->accum, MAS_ALIGN_UP(it->n, 64), -INFINITY);
    soft_fill(it->edge, c->accum, it->S, -INFINITY);
    soft_fill(it->edge, c->accum, 1, 0.0); /* the virtual start */
    if (it->d) {
        soft_fill(it->skip_edge, c->accum, it->S * DP_MAX_SKIP, -INFINITY);
        soft_store(it->skip_edge, c->accum, it->d - 1, 0.0); /* the virtual start */
    }
    return dp_sweep(&p, 0, it->n, 0, it->S, it->column, it->edge);
}

/* The final states' total: PLUS(alpha[n-1], alpha[alt] + weight); *best_state
 * the final state the best path ends in (n-1 unless alt is strictly better). */
static double final_total(const topo_call *c, const topo_item *it, int semiring,
                          int64_t *best_state) {
    double last = soft_load(it->column, c->accum, it->n - 1);
    *best_state = it->n - 1;
    if (it->alt_final < 0) return last;
    double alt = soft_load(it->column, c->accum, it->alt_final) + it->alt_weight;
    if (c->accum == MAS_FLOAT32) alt = (float)alt;
    if (semiring == DP_MAXPLUS) {
        if (last < alt) {
            *best_state = it->alt_final;
            return alt;
        }
        return last;
    }
    double hi = last > alt ? last : alt, lo = last > alt ? alt : last;
    if (hi == -INFINITY) return hi;
    return hi + log1p(exp(lo - hi));
}

/* The bit of (t, s) in a bitmap of the frames [t0, t0 + n_steps). */
static int bit_at(const uint8_t *bits, int64_t lanes, int64_t t0, int64_t n_steps, int64_t t,
                  int64_t s) {
    const uint8_t *row = bits + ((s / lanes) * n_steps + t - t0) * (lanes / 8);
    int64_t l = s % lanes;
    return (row[l / 8] >> (l % 8)) & 1;
}

/* Outputs of item b beyond its lengths (all of them on an error). */
static void clear_hard(const topo_call *c, int64_t b, int64_t L_from, int64_t S_from) {
    const mas_topo_hard_outputs *o = c->hard;
    const mas_topo_args *a = c->a;
    int64_t Smax = emit_frames(a);
    for (int64_t t = S_from; t < Smax; t++) {
        if (o->state_ids) o->state_ids[b * o->state_ids_stride + t] = -1;
        if (o->frame_labels) o->frame_labels[b * o->frame_labels_stride + t] = -1;
    }
    for (int64_t i = L_from; i < a->tokens; i++) {
        if (o->token_spans) {
            o->token_spans[b * o->token_spans_stride + 2 * i] = -1;
            o->token_spans[b * o->token_spans_stride + 2 * i + 1] = -1;
        }
        if (o->token_scores) store(o->token_scores, c->accum, b * o->token_scores_stride + i, 0);
    }
}

/* The backward walk of the best path: state, and the token being summed. */
typedef struct topo_walk {
    const topo_call *c;
    const topo_item *it;
    int32_t *spans;
    int64_t s;          /* the state of the frame being walked */
    int64_t cur, count; /* the token of the frames walked last, their count */
    double sum;         /* and their emissions' sum */
} topo_walk;

/* Walks frames [t_lo, t_hi) from t_hi-1 down through bits of the frames
 * [dec_t0, dec_t0 + dec_steps). A token's frames are consecutive: spans,
 * sums and counts in one backward walk. */
static void walk_frames(topo_walk *w, int64_t t_lo, int64_t t_hi, int64_t dec_t0,
                        int64_t dec_steps) {
    const topo_call *c = w->c;
    const topo_item *it = w->it;
    const mas_topo_args *a = c->a;
    const mas_topo_hard_outputs *o = c->hard;
    int64_t b = it->b, lanes = dp_lanes(c->accum), s = w->s;
    for (int64_t t = t_hi - 1; t >= t_lo; t--) {
        int64_t j, i = token_of(&a->topology, s, &j);
        if (o->state_ids) o->state_ids[b * o->state_ids_stride + t] = (int32_t)s;
        if (o->frame_labels) o->frame_labels[b * o->frame_labels_stride + t] = it->rows[s];
        if (i != w->cur) {
            if (w->cur >= 0 && o->token_scores)
                store(o->token_scores, c->accum, b * o->token_scores_stride + w->cur,
                      w->sum / w->count);
            w->cur = i;
            w->count = 0;
            w->sum = 0;
            if (i >= 0 && w->spans) w->spans[2 * i + 1] = (int32_t)t;
        }
        if (i >= 0) {
            w->count++;
            w->sum += emission_at(a, it, t, s);
            if (w->spans) w->spans[2 * i] = (int32_t)t;
        }
        if (t == 0) break;
        if (it->d && bit_at(it->skip_dec, lanes, dec_t0, dec_steps, t, s)) s -= it->d;
        else if (bit_at(it->dec, lanes, dec_t0, dec_steps, t, s)) s -= 1;
    }
    w->s = s;
}

/* lf_backtrack's visit: one segment, its bits at the start of the bitmaps. */
static int64_t walk_segment(void *ctx, int64_t t0, int64_t t1) {
    topo_walk *w = (topo_walk *)ctx;
    walk_frames(w, t0, t1, t0, w->c->w.seg_steps);
    return w->s;
}

static mas_status hard_item(topo_call *c, int64_t b, int32_t rank) {
    const mas_topo_hard_outputs *o = c->hard;
    int64_t L, S;
    mas_status st = check_item(c, b, &L, &S);
    if (st != MAS_OK) return st;
    topo_item it;
    build_item(c, b, L, S, rank, &it);
    int bad;
    dp_topology tp;
    dp_problem p;
    lf_run r;
    if (c->w.seg_steps > 0) {
        /* long-form: checkpoints every K frames, bits of K frames */
        problem_for(c, &it, DP_MAXPLUS, 0, &tp, &p);
        memset(&r, 0, sizeof r);
        r.p = &p;
        r.seg_steps = c->w.seg_steps;
        r.column = it.column;
        r.column_bytes = (size_t)MAS_ALIGN_UP(it.n, 64) * soft_accum_size(c->accum);
        r.edge = it.edge;
        r.checkpoints = it.checkpoints;
        r.checkpoint_stride = c->w.column;
        bad = lf_forward(&r);
    } else {
        bad = sweep(c, &it, DP_MAXPLUS, 0, NULL);
    }
    int64_t s;
    double score = final_total(c, &it, DP_MAXPLUS, &s);
    if (bad) return MAS_ERR_NONFINITE_VALUE;
    if (score == -INFINITY) return MAS_ERR_NO_FINITE_PATH;
    if (o->score) store(o->score, c->accum, b, score);
    /* tokens the path skips keep -1, -1 and -inf */
    int32_t *spans = o->token_spans ? o->token_spans + b * o->token_spans_stride : NULL;
    for (int64_t i = 0; i < L; i++) {
        if (spans) spans[2 * i] = spans[2 * i + 1] = -1;
        if (o->token_scores)
            store(o->token_scores, c->accum, b * o->token_scores_stride + i, -INFINITY);
    }
    topo_walk w = {c, &it, spans, s, -1, 0, 0};
    if (c->w.seg_steps > 0) lf_backtrack(&r, s, walk_segment, &w);
    else walk_frames(&w, 0, S, 0, S);
    if (w.cur >= 0 && o->token_scores)
        store(o->token_scores, c->accum, b * o->token_scores_stride + w.cur, w.sum / w.count);
    return MAS_OK;
}

static void run_hard_item(void *ctx, int64_t b, int32_t rank) {
    topo_call *c = (topo_call *)ctx;
    mas_status st = hard_item(c, b, rank);
    c->status[b] = st;
    int64_t L = c->a->token_len[b], S = c->a->frame_len[b];
    if (st != MAS_OK) {
        clear_hard(c, b, 0, 0);
        if (c->hard->score) store(c->hard->score, c->accum, b, -INFINITY);
    } else {
        clear_hard(c, b, L, S);
    }
}

/* Sets up the call: checks, aligned workspace, status array. */
static mas_status begin_call(topo_call *c, const mas_topo_args *args, int soft, void *workspace,
                             size_t workspace_size, int32_t threads) {
    mas_status st = check_args(args);
    if (st != MAS_OK) return st;
    if (!workspace) return MAS_ERR_NULL_POINTER;
    /* SIZE_MAX: a shape past what the sizes can count */
    if (mas_topo_cpu_workspace_size(args, soft, threads) == SIZE_MAX)
        return MAS_ERR_WORKSPACE_TOO_SMALL;
    c->a = args;
    c->accum = mas_accum_dtype(args->emissions.dtype);
    if (workspace_size >= mas_topo_cpu_workspace_size(args, soft, threads)) {
        int64_t n = topo_max_states(args);
        c->w = layout_for(n < 1 ? 1 : n, emit_frames(args), c->accum, soft);
        c->team = soft_team(args->emissions.dim[0], threads);
    } else if (soft || !plan_longform(args, threads, workspace_size, &c->team, &c->w)) {
        return MAS_ERR_WORKSPACE_TOO_SMALL; /* below mas_topo_cpu_min_workspace_size */
    }
    c->ws = (uint8_t *)MAS_ALIGN_UP((uintptr_t)workspace, MAS_CACHE_LINE);
    c->status = (int32_t *)(c->ws + (size_t)c->team * c->w.total);
    return MAS_OK;
}

mas_status mas_viterbi_cpu(const mas_topo_args *args, const mas_topo_hard_outputs *out,
                           void *workspace, size_t workspace_size, int32_t threads,
                           mas_error *err) {
    if (err) *err = (mas_error){MAS_OK, 0, -1};
    topo_call c;
    memset(&c, 0, sizeof c);
    mas_status st = out ? begin_call(&c, args, 0, workspace, workspace_size, threads)
                        : MAS_ERR_NULL_POINTER;
    if (st == MAS_OK && !out->state_ids && !out->frame_labels && !out->token_spans &&
        !out->token_scores && !out->score)
        st = MAS_ERR_BAD_ARGUMENT;
    if (st == MAS_OK && out->frame_labels && !args->labels) st = MAS_ERR_BAD_ARGUMENT;
    if (st != MAS_OK) {
        if (err) err->status = st;
        return st;
    }
    c.hard = out;
    int64_t B = args->emissions.dim[0];
    mas_parallel_items(c.team, B, run_hard_item, &c);
    return mas_first_item_error(c.status, B, err);
}

/* One state's row: ev[t] = e(t, s) converted to the accumulator type. */
static void emission_row(const mas_topo_args *a, const topo_item *it, int64_t s, void *ev,
                         int32_t accum) {
    const mas_tensor3 *e = &a->emissions;
    const void *base = a->gathered ? soft_at(e, it->b, 0, it->rows[s]) : soft_at(e, it->b, s, 0);
    int64_t stride = a->gathered ? e->stride[1] : e->stride[2];
    if (accum == MAS_FLOAT32 && e->dtype == MAS_FLOAT32) {
        const float *src = (const float *)base;
        for (int64_t t = 0; t < it->S; t++) ((float *)ev)[t] = src[t * stride];
        return;
    }
    for (int64_t t = 0; t < it->S; t++) soft_store(ev, accum, t, soft_load(base, e->dtype, t * stride));
}

/* g[t] = exp(alpha[t] + beta~[S-1-t] - ev[t] - log_z), 0 where alpha or
 * beta~ is -inf (no path crosses the cell), and tot[t] += g[t]: the
 * posterior before each frame is normalised by its sum. Not clamped: the
 * exponent exceeds 0 only by log Z's rounding drift (sm_exp_nonpos holds
 * to 87). */
SOFT_CLONES static void gamma_row_f32(const float *al, const float *be_last, const float *ev,
                                      float lz, int64_t S, float *g, float *tot) {
    for (int64_t t = 0; t < S; t++) {
        float a = al[t], e = be_last[-t];
        float x = a + e - ev[t] - lz;
        x = (a == -INFINITY || e == -INFINITY) ? -INFINITY : x;
        g[t] = sm_exp_nonpos(x);
        tot[t] += g[t];
    }
}

static void gamma_row_f64(const double *al, const double *be_last, const double *ev,
                          double lz, int64_t S, double *g, double *tot) {
    for (int64_t t = 0; t < S; t++) {
        double a = al[t], e = be_last[-t];
        g[t] = (a == -INFINITY || e == -INFINITY) ? 0 : exp(a + e - ev[t] - lz);
        tot[t] += g[t];
    }
}

/* The frame sums into their reciprocals, in place (0 for a sum of 0). */
static void recip_row(void *tot, int32_t accum, int64_t S) {
    for (int64_t t = 0; t < S; t++) {
        if (accum == MAS_FLOAT32) {
            float *x = (float *)tot + t;
            *x = *x > 0 ? 1.0f / *x : 0.0f;
        } else {
            double *x = (double *)tot + t;
            *x = *x > 0 ? 1.0 / *x : 0.0;
        }
    }
}

/* post[b, s, t] *= inv[t] for t < S. */
SOFT_CLONES static void scale_row(const mas_tensor3 *post, int64_t b, int64_t s, const void *inv,
                                  int32_t accum, int64_t S) {
    if (accum == MAS_FLOAT32 && post->stride[2] == 1) {
        float *p = (float *)soft_at(post, b, s, 0);
        const float *f = (const float *)inv;
        for (int64_t t = 0; t < S; t++) p[t] *= f[t];
        return;
    }
    for (int64_t t = 0; t < S; t++) {
        void *x = soft_at(post, b, s, t);
        if (accum == MAS_FLOAT32) *(float *)x *= ((const float *)inv)[t];
        else *(double *)x *= ((const double *)inv)[t];
    }
}

/* gamma(t,s) of a swept item into the posterior and / or the gradient, state
 * by state, then each frame scaled by 1 / its sum: in exact arithmetic the
 * sum is 1 (every path is in one state a frame), in floating point it is
 * off by log Z's rounding drift along the sweeps (~1e-2 in float32 at
 * S = 1500), which would otherwise be the posterior's error. The edge and
 * skip-edge buffers (free after the sweeps, at least S and 8 S values)
 * hold a row of gamma, of emissions and the frame sums. */
static void combine(const topo_call *c, topo_item *it, double log_z) {
    const mas_topo_soft_outputs *o = c->soft;
    int64_t n = it->n, S = it->S;
    const mas_tensor3 *post = o->posterior.data ? &o->posterior : NULL;
    const mas_tensor3 *grad = o->grad.data ? &o->grad : NULL;
    size_t as = soft_accum_size(c->accum);
    void *g = it->edge, *ev = it->skip_edge;
    void *tot = (uint8_t *)it->skip_edge + (size_t)MAS_ALIGN_UP(S, 16) * as;
    soft_fill(tot, c->accum, S, 0.0);
    for (int64_t s = 0; s < n; s++) {
        emission_row(c->a, it, s, ev, c->accum);
        const uint8_t *al = (const uint8_t *)it->alpha + (size_t)(s * S) * as;
        const uint8_t *be = (const uint8_t *)it->beta + (size_t)((n - 1 - s) * S + S - 1) * as;
        if (c->accum == MAS_FLOAT64)
            gamma_row_f64((const double *)al, (const double *)be, (const double *)ev, log_z, S,
                          (double *)g, (double *)tot);
        else
            gamma_row_f32((const float *)al, (const float *)be, (const float *)ev, (float)log_z,
                          S, (float *)g, (float *)tot);
        if (post) {
            if (c->accum == MAS_FLOAT32 && post->stride[2] == 1)
                memcpy(soft_at(post, it->b, s, 0), g, (size_t)S * as);
            else
                for (int64_t t = 0; t < S; t++)
                    soft_store(soft_at(post, it->b, s, t), c->accum, 0, soft_load(g, c->accum, t));
        }
        if (grad) {
            char *col = (char *)soft_at(grad, it->b, 0, it->rows[s]);
            int64_t step = grad->stride[1] * (int64_t)as;
            if (c->accum == MAS_FLOAT32)
                for (int64_t t = 0; t < S; t++) *(float *)(col + t * step) += ((const float *)g)[t];
            else
                for (int64_t t = 0; t < S; t++) *(double *)(col + t * step) += ((const double *)g)[t];
        }
    }
    recip_row(tot, c->accum, S);
    if (post)
        for (int64_t s = 0; s < n; s++) scale_row(post, it->b, s, tot, c->accum, S);
    if (grad) {
        for (int64_t t = 0; t < S; t++) {
            double inv = soft_load(tot, c->accum, t);
            for (int64_t v = 0; v < grad->dim[2]; v++) {
                void *x = soft_at(grad, it->b, t, v);
                if (c->accum == MAS_FLOAT32) *(float *)x *= (float)inv;
                else *(double *)x *= inv;
            }
        }
    }
}

static void clear_soft(const topo_call *c, int64_t b, int64_t n_from, int64_t S_from,
                       int whole_grad) {
    const mas_topo_soft_outputs *o = c->soft;
    if (o->posterior.data) {
        const mas_tensor3 *p = &o->posterior;
        for (int64_t s = 0; s < p->dim[1]; s++)
            for (int64_t t = (s < n_from ? S_from : 0); t < p->dim[2]; t++)
                soft_store(soft_at(p, b, s, t), c->accum, 0, 0.0);
    }
    if (o->grad.data && whole_grad) {
        const mas_tensor3 *g = &o->grad;
        for (int64_t t = 0; t < g->dim[1]; t++)
            for (int64_t v = 0; v < g->dim[2]; v++)
                soft_store(soft_at(g, b, t, v), c->accum, 0, 0.0);
    }
}

static mas_status soft_item(topo_call *c, int64_t b, int32_t rank) {
    int64_t L, S;
    mas_status st = check_item(c, b, &L, &S);
    if (st != MAS_OK) return st;
    topo_item it;
    build_item(c, b, L, S, rank, &it);
    int want = c->soft->posterior.data || c->soft->grad.data;
    int bad = sweep(c, &it, DP_LOGPLUS, 0, want ? it.alpha : NULL);
    int64_t unused;
    double log_z = final_total(c, &it, DP_LOGPLUS, &unused);
    if (c->accum == MAS_FLOAT32) log_z = (float)log_z;
    if (bad) return MAS_ERR_NONFINITE_VALUE;
    if (log_z != log_z) log_z = INFINITY; /* accumulator overflow (mas.h section 5) */
    if (log_z == -INFINITY) return MAS_ERR_NO_FINITE_PATH;
    if (c->soft->log_z) store(c->soft->log_z, c->accum, b, log_z);
    if (want) {
        sweep(c, &it, DP_LOGPLUS, 1, it.beta);
        clear_soft(c, b, it.n, S, 1);
        combine(c, &it, log_z);
    }
    return MAS_OK;
}

static void run_soft_item(void *ctx, int64_t b, int32_t rank) {
    topo_call *c = (topo_call *)ctx;
    mas_status st = soft_item(c, b, rank);
    c->status[b] = st;
    if (st != MAS_OK) {
        if (c->soft->log_z) store(c->soft->log_z, c->accum, b, -INFINITY);
        clear_soft(c, b, 0, 0, 1);
    }
}

mas_status mas_topo_forward_sum_cpu(const mas_topo_args *args,
                                    const mas_topo_soft_outputs *out, void *workspace,
                                    size_t workspace_size, int32_t threads, mas_error *err) {
    if (err) *err = (mas_error){MAS_OK, 0, -1};
    topo_call c;
    memset(&c, 0, sizeof c);
    mas_status st = out ? begin_call(&c, args, 1, workspace, workspace_size, threads)
                        : MAS_ERR_NULL_POINTER;
    if (st == MAS_OK && !out->log_z && !out->posterior.data && !out->grad.data)
        st = MAS_ERR_BAD_ARGUMENT;
    int32_t acc = st == MAS_OK ? mas_accum_dtype(args->emissions.dtype) : 0;
    int64_t B = st == MAS_OK ? args->emissions.dim[0] : 0;
    if (st == MAS_OK && out->posterior.data) {
        const mas_tensor3 *p = &out->posterior;
        if ((st = mas_check_tensor(p, acc)) == MAS_OK &&
            (p->dim[0] != B || p->dim[1] < topo_max_states(args) || p->dim[2] != emit_frames(args)))
            st = MAS_ERR_BAD_SHAPE;
    }
    if (st == MAS_OK && out->grad.data) {
        if (!args->gathered) st = MAS_ERR_BAD_ARGUMENT;
        else if ((st = mas_check_tensor(&out->grad, acc)) == MAS_OK &&
                 !mas_same_dims(&out->grad, &args->emissions))
            st = MAS_ERR_BAD_SHAPE;
    }
    if (st != MAS_OK) {
        if (err) err->status = st;
        return st;
    }
    c.soft = out;
    mas_parallel_items(c.team, B, run_soft_item, &c);
    return mas_first_item_error(c.status, B, err);
}
