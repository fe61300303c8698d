/* Fuzz target: topologies on the CPU (mas.h section 7): mas_topology_states,
 * mas_topo_cpu_workspace_size, mas_viterbi_cpu, mas_topo_forward_sum_cpu.
 * k states per token, transitions, token skips with a penalty, CTC blanks,
 * emissions per state or gathered by label, lengths (impossible transcripts
 * included), labels, threads, workspaces. The chain is rebuilt here from the
 * header's prose as an explicit edge list, and a float64 DP over it (and,
 * on tiny sizes, a brute force over every path) gives the reference: the
 * statuses (TARGET_TOO_LONG exactly where no path exists), the Viterbi
 * score, log_z and the posteriors. On success: state ids monotone along
 * the edges, from a first to a final state, -1 beyond frame_len; the score
 * equals the sum along the returned path; labels, spans and token scores
 * agree with the path; posteriors sum to 1 per frame, 0 beyond the lengths;
 * the gradient is the posterior summed per label. */
#include "fuzz_common.h"

#define MAXN 64  /* states of a reference chain */
#define MAXS 48  /* frames of a reference */

/* The chain of one item, from mas.h's description. */
typedef struct chain {
    int64_t n, L, k;
    int32_t label[MAXN]; /* -1: no labels */
    int tok[MAXN], place[MAXN]; /* token (-1: blank) and place j */
    double start[MAXN], fin[MAXN], stay[MAXN], adv[MAXN]; /* adv: s-1 -> s */
    double skip[MAXN]; /* into s from s - dist */
    char skip_ok[MAXN], start_ok[MAXN], fin_ok[MAXN]; /* the edge exists (any weight) */
    int64_t dist;
    int band; /* no skip edges: the library reads only the band */
} chain;

static void chain_build(chain *c, const mas_topo_args *a, int64_t b, int64_t L) {
    const mas_topology *t = &a->topology;
    int64_t k = t->states_per_token;
    memset(c, 0, sizeof *c);
    c->L = L;
    c->k = k;
    c->n = t->has_blank ? L * k + L + 1 : L * k;
    if (c->n > MAXN) return; /* no reference */
    int skips = !t->has_blank && t->skip_penalty > -INFINITY && L >= 2;
    c->dist = t->has_blank ? 2 : k + 1;
    c->band = !(t->has_blank && L >= 1) && !skips;
    for (int64_t s = 0; s < c->n; s++) {
        int64_t i, j;
        if (t->has_blank) {
            i = s % (k + 1) == 0 ? -1 : s / (k + 1);
            j = s % (k + 1) - 1;
        } else {
            i = s / k;
            j = s % k;
        }
        c->tok[s] = (int)i;
        c->place[s] = (int)j;
        c->label[s] = !a->labels ? -1 : i < 0 ? t->blank : a->labels[b * a->labels_stride + i * k + j];
        c->start[s] = c->fin[s] = c->skip[s] = -INFINITY;
        c->stay[s] = i < 0 ? t->blank_stay : t->stay ? t->stay[j] : 0;
        c->adv[s] = i < 0 ? t->blank_advance : t->advance ? t->advance[j] : 0;
        double a0 = t->advance ? t->advance[0] : 0;
        if (t->has_blank && i >= 1 && j == 0 &&
            a->labels[b * a->labels_stride + (i - 1) * k + k - 1] != c->label[s]) {
            c->skip[s] = a0; /* over the blank between tokens i-1 and i */
            c->skip_ok[s] = 1;
        }
        if (skips && i >= 2 && j == 0) {
            c->skip[s] = a0 + t->skip_penalty;
            c->skip_ok[s] = 1;
        }
    }
    c->start[0] = 0;
    c->fin[c->n - 1] = 0;
    c->start_ok[0] = c->fin_ok[c->n - 1] = 1;
    if (t->has_blank && L >= 1) {
        c->start[1] = 0;
        c->fin[c->n - 2] = 0;
        c->start_ok[1] = c->fin_ok[c->n - 2] = 1;
    }
    if (skips) {
        c->start[k] = t->skip_penalty;
        c->fin[c->n - 1 - k] = t->skip_penalty;
        c->start_ok[k] = c->fin_ok[c->n - 1 - k] = 1;
    }
}

static double lse2(double x, double y) {
    double m = x > y ? x : y;
    if (m == -INFINITY) return m;
    return m + log(exp(x - m) + exp(y - m));
}

/* Emission e(t, s) of item b in double (as the accumulator rounds it). */
static double emit(const mas_topo_args *a, const chain *c, int64_t b, int64_t t, int64_t s) {
    double v = a->gathered ? fz_at(&a->emissions, b, t, c->label[s]) : fz_at(&a->emissions, b, s, t);
    return a->emissions.dtype == MAS_FLOAT64 ? v : (double)(float)v;
}

static double w_acc(const mas_topo_args *a, double w) {
    return a->emissions.dtype == MAS_FLOAT64 ? w : (double)(float)w;
}

/* DP over the edges: semiring max (soft 0) or log-sum (soft 1); alpha and
 * beta [s][t] (emission included in both); returns the total. `exists`:
 * the same over the structure only (every weight 0, every cell 0). */
static double chain_dp(const mas_topo_args *a, const chain *c, int64_t b, int64_t S, int soft,
                       int structure, double (*al)[MAXS], double (*be)[MAXS]) {
    int64_t n = c->n;
/* structure: an edge that exists weighs 0 whatever its log-score */
#define W(x) (structure ? 0.0 : w_acc(a, x))
/* cells off the band are on no path; the library does not read them */
#define E(t, s) (structure ? 0.0 : c->band && ((s) > (t) || (s) < (t) - (S - n)) ? -INFINITY \
                                                                            : emit(a, c, b, t, s))
#define PLUS(x, y) (soft ? lse2(x, y) : ((x) > (y) ? (x) : (y)))
    for (int64_t t = 0; t < S; t++)
        for (int64_t s = 0; s < n; s++) {
            double v;
            if (t == 0) v = structure ? (c->start_ok[s] ? 0.0 : -INFINITY) : W(c->start[s]);
            else {
                v = al[s][t - 1] + W(c->stay[s]);
                if (s >= 1) v = PLUS(v, al[s - 1][t - 1] + W(c->adv[s]));
                if (s >= c->dist && c->skip_ok[s])
                    v = PLUS(v, al[s - c->dist][t - 1] + W(c->skip[s]));
            }
            al[s][t] = v == -INFINITY ? v : v + E(t, s);
        }
    for (int64_t t = S - 1; t >= 0; t--)
        for (int64_t s = n - 1; s >= 0; s--) {
            double v;
            if (t == S - 1) v = structure ? (c->fin_ok[s] ? 0.0 : -INFINITY) : W(c->fin[s]);
            else {
                v = be[s][t + 1] + W(c->stay[s]);
                if (s + 1 < n) v = PLUS(v, be[s + 1][t + 1] + W(c->adv[s + 1]));
                if (s + c->dist < n && c->skip_ok[s + c->dist])
                    v = PLUS(v, be[s + c->dist][t + 1] + W(c->skip[s + c->dist]));
            }
            be[s][t] = v == -INFINITY ? v : v + E(t, s);
        }
    double tot = -INFINITY;
    for (int64_t s = 0; s < n; s++)
        tot = PLUS(tot, al[s][S - 1] + (structure ? (c->fin_ok[s] ? 0.0 : -INFINITY) : W(c->fin[s])));
    return tot;
#undef W
#undef E
#undef PLUS
}

/* Brute force over every state sequence (tiny sizes): the best score. */
static void brute(const mas_topo_args *a, const chain *c, int64_t b, int64_t S, int64_t t,
                  int64_t s, double acc, double *best) {
    acc += emit(a, c, b, t, s);
    if (t == S - 1) {
        double v = acc + w_acc(a, c->fin[s]);
        if (c->fin[s] > -INFINITY && v > *best) *best = v;
        return;
    }
    brute(a, c, b, S, t + 1, s, acc + w_acc(a, c->stay[s]), best);
    if (s + 1 < c->n) brute(a, c, b, S, t + 1, s + 1, acc + w_acc(a, c->adv[s + 1]), best);
    if (s + c->dist < c->n && c->skip[s + c->dist] > -INFINITY)
        brute(a, c, b, S, t + 1, s + c->dist, acc + w_acc(a, c->skip[s + c->dist]), best);
}

static double edge_w(const chain *c, int64_t from, int64_t to, int *ok) {
    *ok = 1;
    if (to == from) return c->stay[to];
    if (to == from + 1) return c->adv[to];
    if (to == from + c->dist && c->skip[to] > -INFINITY) return c->skip[to];
    *ok = 0;
    return 0;
}

static double fz_double(fz_reader *r) {
    uint8_t c = fz_u8(r);
    if (c < 180) return ((int)(fz_u8(r) % 65) - 48) / 8.0;
    if (c < 200) return 0;
    if (c < 240) return -INFINITY;
    if (c < 247) return -1e30;
    return c % 3 == 0 ? NAN : c % 3 == 1 ? INFINITY : 1e30;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fz_reader r = fz_reader_init(data, size);
    int64_t B = fz_dim(&r, 3), Lmax = fz_dim(&r, 4) - 1, Sp = fz_dim(&r, 10);
    int32_t dtype = fz_float_dtype(&r);
    int32_t acc = fz_accum(dtype);
    int32_t threads = fz_threads(&r);
    uint8_t kc = fz_u8(&r), topo_c = fz_u8(&r), out_c = fz_u8(&r), mis = fz_u8(&r);
    if (B > 64 || B < -4) return 0;

    mas_topo_args a;
    memset(&a, 0, sizeof a);
    mas_topology *t = &a.topology;
    t->states_per_token = kc < 240 ? 1 + kc % 3 : kc < 250 ? 4 + kc % 5 : (int32_t)(kc % 2) - 1;
    int skips = 0;
    t->has_blank = topo_c % 3 == 0;
    if (!t->has_blank && topo_c % 3 == 1) skips = 1;
    if (mis >= 250 && mis % 2) skips = 1; /* with blanks: BAD_ARGUMENT */
    t->skip_penalty = skips ? fz_double(&r) : -INFINITY;
    if (skips && t->skip_penalty == -INFINITY) t->skip_penalty = -1;
    a.gathered = (topo_c >> 2) & 1;
    int64_t k = t->states_per_token;
    double stay[16], adv[16];
    int kk = k >= 1 && k <= 16 ? (int)k : 0;
    int with_w = (topo_c >> 3) & 3;
    for (int j = 0; j < kk; j++) {
        stay[j] = fz_double(&r);
        adv[j] = fz_double(&r);
        if (stay[j] == -INFINITY && fz_u8(&r) < 200) stay[j] = -0.5;
        if (adv[j] == -INFINITY && fz_u8(&r) < 200) adv[j] = -0.25;
    }
    t->stay = with_w & 1 ? stay : NULL;
    t->advance = with_w & 2 ? adv : NULL;
    t->blank_stay = topo_c & 0x20 ? fz_double(&r) : 0;
    t->blank_advance = topo_c & 0x40 ? fz_double(&r) : 0;
    if (t->blank_stay == -INFINITY && fz_u8(&r) < 200) t->blank_stay = -0.5;
    a.tokens = Lmax;
    if (mis >= 245 && mis < 250) a.reserved_ = 1;

    /* V (gathered) and the blank */
    int64_t V = a.gathered ? (fz_u8(&r) < 245 ? 1 + fz_u8(&r) % 6 : fz_dim(&r, 6)) : 0;
    t->blank = (int32_t)(fz_u8(&r) % 8) - (mis >= 240 && mis < 245 ? 8 : 0);

    /* lengths: valid mostly */
    int64_t nb = B > 0 ? B : 0;
    int64_t *L = (int64_t *)malloc(((size_t)nb + 1) * sizeof(int64_t));
    int64_t *F = (int64_t *)malloc(((size_t)nb + 1) * sizeof(int64_t));
    for (int64_t b = 0; b < nb; b++) {
        L[b] = fz_length(&r, Lmax < 0 ? 0 : Lmax);
        if (t->has_blank && fz_u8(&r) < 20) L[b] = 0;
        F[b] = fz_length(&r, Sp);
    }
    a.token_len = L;
    a.frame_len = F;
    int64_t n_max = mas_topology_states(t, a.tokens);
    if (k >= 1 && a.tokens >= 0 && a.tokens <= 1000)
        fz_check(n_max == (t->has_blank ? a.tokens * k + a.tokens + 1 : a.tokens * k),
                 "mas_topology_states %lld", (long long)n_max);
    if (k < 1) fz_check(n_max == 0, "states for k < 1: %lld", (long long)n_max);

    /* labels: int32, stride >= tokens * k, exactly as long as read */
    int32_t *labels = NULL;
    int need_labels = a.gathered || t->has_blank;
    int64_t lstride = 0;
    int sane = B >= 1 && Lmax >= 0 && Lmax <= 64 && k >= 1 && k <= 8 && Sp >= 1;
    if (sane && (need_labels || (out_c & 0x80)) && !(mis >= 235 && mis < 240)) {
        lstride = Lmax * k + fz_range(&r, 0, 2);
        int64_t nl = (B - 1) * lstride + Lmax * k;
        labels = (int32_t *)malloc(((size_t)nl + 1) * sizeof(int32_t));
        int64_t lv = a.gathered ? V : 6;
        for (int64_t q = 0; q < nl; q++) {
            uint8_t c = fz_u8(&r);
            labels[q] = c < 235 ? (int32_t)(c % (lv < 1 ? 1 : lv > 255 ? 255 : lv))
                      : c < 245 ? t->blank : c % 2 ? -1 : (int32_t)(lv < INT32_MAX ? lv : 0);
            /* mostly not the blank */
            if (labels[q] == t->blank && c < 235 && lv > 1 && lv <= 255) labels[q] = (labels[q] + 1) % (int32_t)lv;
        }
    }
    a.labels = labels;
    a.labels_stride = lstride;

    /* emissions: per state [B, n', S'] or gathered [B, S', V] */
    int64_t ed[3];
    ed[0] = B;
    if (a.gathered) { ed[1] = Sp; ed[2] = V; }
    else { ed[1] = n_max + (fz_u8(&r) < 220 || n_max > ((int64_t)1 << 40) ? 0 : fz_range(&r, -2, 2)); ed[2] = Sp; }
    if (!sane || n_max > 512 || Sp > 4096 || (!a.gathered && ed[1] < 1) || (a.gathered && (V < 1 || V > 64))) {
        /* only the sizes and the value-free checks */
        size_t need = mas_topo_cpu_workspace_size(&a, out_c & 1, threads);
        (void)need;
        free(labels); free(L); free(F);
        return 0;
    }
    /* cells read: per item, states < n(L) and frames < frame_len (all
     * labels when gathered: the buffer spans V) */
    int64_t *rows = (int64_t *)calloc((size_t)nb + 1, sizeof(int64_t));
    int64_t *cols = (int64_t *)calloc((size_t)nb + 1, sizeof(int64_t));
    for (int64_t b = 0; b < nb; b++) {
        int ok = L[b] >= (t->has_blank ? 0 : 1) && L[b] <= a.tokens && F[b] >= 1 && F[b] <= Sp;
        int64_t n = ok ? mas_topology_states(t, L[b]) : 0;
        if (!a.gathered && n > ed[1]) ok = 0;
        rows[b] = ok ? (a.gathered ? F[b] : n) : 0;
        cols[b] = ok ? (a.gathered ? V : F[b]) : 0;
    }
    fz_view em;
    if (!fz_view_make(&em, &r, ed, dtype, 1, nb, rows, cols)) {
        free(rows); free(cols); free(labels); free(L); free(F);
        return 0;
    }
    fz_fill(&em, &r);
    a.emissions = em.t;

    int soft = out_c & 1;
    int32_t want = (out_c >> 1) & 31;
    size_t need = mas_topo_cpu_workspace_size(&a, soft, threads);
    fz_workspace ws;
    fz_workspace_make(&ws, &r, need);

    /* outputs */
    int64_t os = Sp + (out_c & 0x40 ? 1 : 0), ts = 2 * Lmax + 1;
    int32_t *state_ids = NULL, *frame_labels = NULL, *spans = NULL;
    void *token_scores = NULL, *score = NULL, *log_z = NULL;
    size_t as = acc == MAS_FLOAT64 ? 8 : 4;
    fz_view post, grad;
    memset(&post, 0, sizeof post);
    memset(&grad, 0, sizeof grad);
    mas_topo_hard_outputs ho;
    mas_topo_soft_outputs so;
    memset(&ho, 0, sizeof ho);
    memset(&so, 0, sizeof so);
    int64_t tss = Lmax + 1;
    if (!soft) {
        if (want & 1) state_ids = (int32_t *)malloc((size_t)((B - 1) * os + Sp) * 4);
        if (want & 2) frame_labels = (int32_t *)malloc((size_t)((B - 1) * os + Sp) * 4);
        if ((want & 4) && Lmax >= 1) spans = (int32_t *)malloc((size_t)((B - 1) * ts + 2 * Lmax) * 4);
        if ((want & 8) && Lmax >= 1) token_scores = malloc((size_t)((B - 1) * tss + Lmax) * as);
        if (want & 16) score = malloc((size_t)B * as);
        ho = (mas_topo_hard_outputs){state_ids, os, frame_labels, os, spans, ts, token_scores,
                                     tss, score};
    } else {
        if (want & 1) log_z = malloc((size_t)B * as);
        if (want & 2) {
            int64_t pd[3] = {B, n_max + (want & 8 ? 1 : 0), Sp};
            if (mis >= 230 && mis < 235) pd[2] += 1;
            if (!fz_output_make(&post, &r, pd, mis >= 225 && mis < 230 ? (acc ^ 1) : acc))
                memset(&post, 0, sizeof post);
        }
        if ((want & 4) && (a.gathered || mis < 220)) {
            if (!fz_output_make(&grad, &r, ed, acc)) memset(&grad, 0, sizeof grad);
        }
        so.log_z = log_z;
        so.posterior = post.t;
        so.grad = grad.t;
    }

    /* ---- expected status ---- */
    mas_status expect = MAS_OK;
    int64_t expect_item = -1;
    int bad_w = 0;
    for (int j = 0; j < kk; j++)
        if (t->stay && (stay[j] != stay[j] || stay[j] == INFINITY)) bad_w = 1;
    for (int j = 0; j < kk; j++)
        if (t->advance && (adv[j] != adv[j] || adv[j] == INFINITY)) bad_w = 1;
    if (t->has_blank && (t->blank_stay != t->blank_stay || t->blank_stay == INFINITY ||
                         t->blank_advance != t->blank_advance || t->blank_advance == INFINITY))
        bad_w = 1;
    int has_skip = t->skip_penalty > -INFINITY;
    /* log-scores like -1e30 swamp the sums: statuses only, no value checks */
    int huge_w = fabs(t->skip_penalty) > 64 && isfinite(t->skip_penalty);
    for (int j = 0; j < kk; j++)
        huge_w |= (isfinite(stay[j]) && fabs(stay[j]) > 64 && t->stay) ||
                  (isfinite(adv[j]) && fabs(adv[j]) > 64 && t->advance);
    huge_w |= t->has_blank && ((isfinite(t->blank_stay) && fabs(t->blank_stay) > 64) ||
                               (isfinite(t->blank_advance) && fabs(t->blank_advance) > 64));
    if (!(dtype == MAS_FLOAT32 || dtype == MAS_FLOAT64 || dtype == MAS_FLOAT16 ||
          dtype == MAS_BFLOAT16))
        expect = MAS_ERR_BAD_DTYPE;
    else if (a.reserved_ != 0 || (has_skip && (t->has_blank || k + 1 > 8)) ||
        t->skip_penalty != t->skip_penalty || t->skip_penalty == INFINITY || bad_w)
        expect = MAS_ERR_BAD_ARGUMENT;
    else if (need_labels && !labels) expect = MAS_ERR_NULL_POINTER;
    else if (a.gathered && t->has_blank && (t->blank < 0 || t->blank >= V))
        expect = MAS_ERR_BAD_ARGUMENT;
    else if (!ws.alloc) expect = MAS_ERR_NULL_POINTER;
    /* a hard call below the full size runs checkpointed down to the minimum */
    else if (ws.size < (soft ? need : mas_topo_cpu_min_workspace_size(&a, threads)))
        expect = MAS_ERR_WORKSPACE_TOO_SMALL;
    else if (!soft && !state_ids && !frame_labels && !spans && !token_scores && !score)
        expect = MAS_ERR_BAD_ARGUMENT;
    else if (!soft && frame_labels && !labels) expect = MAS_ERR_BAD_ARGUMENT;
    else if (soft && !log_z && !post.t.data && !grad.t.data) expect = MAS_ERR_BAD_ARGUMENT;
    else if (soft && post.t.data && post.t.dtype != acc) expect = MAS_ERR_BAD_DTYPE;
    else if (soft && post.t.data && (post.t.dim[1] < 1 || post.t.dim[1] < n_max || post.t.dim[2] != Sp))
        expect = MAS_ERR_BAD_SHAPE;
    else if (soft && grad.t.data && !a.gathered) expect = MAS_ERR_BAD_ARGUMENT;
    if (expect == MAS_OK && need == 0) fz_fail("workspace size 0 for a good call");

    /* per item */
    mas_status *ist = (mas_status *)calloc((size_t)nb + 1, sizeof(mas_status));
    char *either = (char *)calloc((size_t)nb + 1, 1), *moderate = (char *)calloc((size_t)nb + 1, 1);
    chain *ch = (chain *)calloc((size_t)nb + 1, sizeof(chain));
    double *ref = (double *)calloc((size_t)nb + 1, sizeof(double));
    double (*al)[MAXS] = (double (*)[MAXS])malloc(sizeof(double) * MAXN * MAXS);
    double (*be)[MAXS] = (double (*)[MAXS])malloc(sizeof(double) * MAXN * MAXS);
    double (*gam)[MAXN][MAXS] = (double (*)[MAXN][MAXS])calloc((size_t)nb + 1, sizeof(double) * MAXN * MAXS);
    int refs = 1;
    if (expect == MAS_OK) {
        for (int64_t b = 0; b < nb; b++) {
            int64_t Lb = L[b], Sb = F[b];
            if (Lb < (t->has_blank ? 0 : 1) || Lb > a.tokens || Sb < 1 || Sb > Sp ||
                (!a.gathered && mas_topology_states(t, Lb) > ed[1])) {
                ist[b] = MAS_ERR_BAD_LENGTH;
                continue;
            }
            if (labels) {
                int badl = 0;
                for (int64_t q = 0; q < Lb * k; q++) {
                    int32_t l = labels[b * lstride + q];
                    if ((a.gathered && (l < 0 || l >= V)) || (t->has_blank && l == t->blank)) badl = 1;
                }
                if (badl) { ist[b] = MAS_ERR_BAD_ARGUMENT; continue; }
            }
            chain *c = &ch[b];
            chain_build(c, &a, b, Lb);
            if (c->n > MAXN || Sb > MAXS) { refs = 0; either[b] = 2; continue; }
            if (chain_dp(&a, c, b, Sb, 0, 1, al, be) == -INFINITY) {
                ist[b] = MAS_ERR_TARGET_TOO_LONG;
                continue;
            }
            /* cells the sweep reads: every cell with skip edges, else the band */
            int band = !(t->has_blank && Lb >= 1) && !(has_skip && Lb >= 2);
            int bad = 0, huge = 0;
            for (int64_t tt = 0; tt < Sb; tt++)
                for (int64_t s = 0; s < c->n; s++) {
                    if (band && (s > tt || s < tt - (Sb - c->n))) continue;
                    double v = emit(&a, c, b, tt, s);
                    if (v != v || v == INFINITY) bad = 1;
                    else if (v != -INFINITY && fabs(v) > 64) huge = 1;
                }
            if (bad) { ist[b] = MAS_ERR_NONFINITE_VALUE; continue; }
            double w = chain_dp(&a, c, b, Sb, soft, 0, al, be);
            ref[b] = w;
            if (getenv("FZ_DEBUG"))
                for (int64_t s = 0; s < c->n; s++) {
                    fz_debug("  state %lld (stay %g adv %g skip %g start %g fin %g):", (long long)s,
                             c->stay[s], c->adv[s], c->skip[s], c->start[s], c->fin[s]);
                    for (int64_t tt = 0; tt < Sb; tt++)
                        fz_debug(" %g/%g", emit(&a, c, b, tt, s), al[s][tt]);
                    fz_debug("\n");
                }
            if (huge) either[b] = 1;
            else if (w == -INFINITY) ist[b] = MAS_ERR_NO_FINITE_PATH;
            moderate[b] = !huge && !huge_w;
            if (!soft && !huge && Sb <= 6 && c->n <= 12) {
                double bf = -INFINITY;
                for (int64_t s = 0; s < c->n; s++)
                    if (c->start[s] > -INFINITY)
                        brute(&a, c, b, Sb, 0, s, w_acc(&a, c->start[s]), &bf);
                fz_check(bf == w || fabs(bf - w) <= 1e-9 * (1 + fabs(w)),
                         "reference DP %.17g != brute force %.17g", w, bf);
            }
            if (soft && !huge && w > -INFINITY)
                for (int64_t s = 0; s < c->n; s++)
                    for (int64_t tt = 0; tt < Sb; tt++)
                        gam[b][s][tt] = al[s][tt] == -INFINITY || be[s][tt] == -INFINITY ? 0
                                        : exp(al[s][tt] + be[s][tt] - emit(&a, c, b, tt, s) - w);
        }
    }

    fz_debug("topology: B=%lld tokens=%lld S'=%lld k=%lld blank %d skips %d gathered %d V=%lld "
             "dtype %d soft %d want %d threads %d ws %zu of %zu, expect %d\n", (long long)B,
             (long long)Lmax, (long long)Sp, (long long)k, t->has_blank, has_skip, a.gathered,
             (long long)V, dtype, soft, want, threads, ws.size, need, (int)expect);
    mas_error err;
    mas_status st = soft ? mas_topo_forward_sum_cpu(&a, &so, ws.alloc, ws.size, threads, &err)
                         : mas_viterbi_cpu(&a, &ho, ws.alloc, ws.size, threads, &err);
    fz_check_status(st, &err);
    fz_debug("topology: status %d item %lld\n", (int)st, (long long)err.item);
#ifdef FZ_REPLAY
    {
        /* items whose read cells and weights are moderate: both backends
         * must agree there (huge values may overflow in either) */
        unsigned char *mod = (unsigned char *)calloc((size_t)nb + 1, 1);
        for (int64_t b = 0; b < nb; b++) {
            mod[b] = !huge_w;
            for (int64_t i = 0; i < rows[b]; i++)
                for (int64_t j = 0; j < cols[b]; j++) {
                    double v = fz_at(&em.t, b, i, j);
                    if (v != v || v == INFINITY || (v != -INFINITY && fabs(v) > 64)) mod[b] = 0;
                }
        }
        int64_t labels_n = labels ? (B - 1) * lstride + Lmax * k : 0;
        fz_replay_topology(&a, soft, labels_n, &em, &ho, &so, &post, &grad, mod, st);
        free(mod);
    }
#endif
    fz_check_unchanged(&em, "emissions");
    if (expect == MAS_OK) {
        int64_t b = 0;
        for (; b < B; b++) {
            if (either[b] == 2) break; /* no reference: accept what comes */
            if (ist[b] != MAS_OK) { expect = ist[b]; break; }
            if (either[b] && st == MAS_ERR_NO_FINITE_PATH && err.item == b) { expect = st; break; }
        }
        if (b < B && either[b] == 2) { expect = st; b = st == MAS_OK ? B : err.item; }
        expect_item = b < B ? b : -1;
        if (b < B && ist[b] == MAS_OK) ist[b] = st;
    }
    fz_check(st == expect && err.item == expect_item,
             "status %d item %lld, expected %d item %lld (B=%lld k=%lld blank %d skips %d "
             "gathered %d soft %d)", (int)st, (long long)err.item, (int)expect,
             (long long)expect_item, (long long)B, (long long)k, t->has_blank, has_skip,
             a.gathered, soft);

    if (expect == MAS_OK || expect_item >= 0) {
        double eps = acc == MAS_FLOAT64 ? 1e-12 : 1e-5;
        for (int64_t b = 0; b < B; b++) {
            int ok = ist[b] == MAS_OK && either[b] != 2 && (expect_item < 0 || b < expect_item || ist[b] == MAS_OK);
            int64_t Sb = ok ? F[b] : 0, Lb = ok ? L[b] : 0;
            const chain *c = &ch[b];
            if (!soft) {
                double sc = score ? (as == 8 ? ((double *)score)[b] : ((float *)score)[b]) : 0;
                /* huge values may overflow to "no finite path" or not */
                if (either[b] == 1 && !score && !state_ids) continue; /* cannot tell */
                if (either[b] == 1 && ((score && sc == -INFINITY) ||
                                       (!score && state_ids[b * os] == -1)))
                    ok = 0, Sb = 0, Lb = 0;
                if (score && !ok && either[b] != 2) fz_check(sc == -INFINITY, "item %lld failed, score %g", (long long)b, sc);
                if (either[b] == 2) continue;
                for (int64_t tt = Sb; tt < Sp; tt++) {
                    if (state_ids) fz_check(state_ids[b * os + tt] == -1, "state_ids beyond frame_len");
                    if (frame_labels) fz_check(frame_labels[b * os + tt] == -1, "frame_labels beyond frame_len");
                }
                for (int64_t i = Lb; i < Lmax; i++) {
                    if (spans) fz_check(spans[b * ts + 2 * i] == -1 && spans[b * ts + 2 * i + 1] == -1, "item %lld (ok %d, L %lld, F %lld): span %lld = %d..%d beyond L", (long long)b, ok, (long long)L[b], (long long)F[b], (long long)i, spans[b * ts + 2 * i], spans[b * ts + 2 * i + 1]);
                    if (token_scores) {
                        double v = as == 8 ? ((double *)token_scores)[b * tss + i] : ((float *)token_scores)[b * tss + i];
                        fz_check(v == 0, "token score beyond L: %g", v);
                    }
                }
                if (!ok || !state_ids) continue;
                /* the path: along the edges, first to final state */
                const int32_t *p = state_ids + b * os;
                if (p[0] < 0) fz_debug("item %lld: L %lld F %lld n %lld ref %g either %d\n", (long long)b,
                                       (long long)L[b], (long long)F[b], (long long)c->n, ref[b], either[b]);
                fz_check(p[0] >= 0 && p[0] < c->n && c->start[p[0]] > -INFINITY,
                         "item %lld starts in state %d", (long long)b, p[0]);
                fz_check(p[Sb - 1] >= 0 && p[Sb - 1] < c->n && c->fin[p[Sb - 1]] > -INFINITY,
                         "item %lld ends in state %d", (long long)b, p[Sb - 1]);
                double sum = w_acc(&a, c->start[p[0]]) + emit(&a, c, b, 0, p[0]), mag = fabs(sum);
                for (int64_t tt = 1; tt < Sb; tt++) {
                    int e_ok;
                    double w = edge_w(c, p[tt - 1], p[tt], &e_ok);
                    fz_check(e_ok && p[tt] < c->n, "item %lld: no edge %d -> %d at frame %lld",
                             (long long)b, p[tt - 1], p[tt], (long long)tt);
                    sum += w_acc(&a, w) + emit(&a, c, b, tt, p[tt]);
                    mag += fabs(w_acc(&a, w)) + fabs(emit(&a, c, b, tt, p[tt]));
                }
                sum += w_acc(&a, c->fin[p[Sb - 1]]);
                if (!moderate[b]) continue;
                fz_check(fabs(sum - ref[b]) <= eps * (1 + mag),
                         "item %lld: path sums to %.17g, best %.17g", (long long)b, sum, ref[b]);
                if (score) fz_check(fabs(sc - ref[b]) <= eps * (1 + mag),
                                    "item %lld: score %.17g, reference %.17g", (long long)b, sc, ref[b]);
                for (int64_t tt = 0; tt < Sb; tt++) {
                    if (frame_labels) fz_check(frame_labels[b * os + tt] == c->label[p[tt]], "frame label");
                }
                if (spans || token_scores)
                    for (int64_t i = 0; i < Lb; i++) {
                        int64_t first = -1, last = -1, cnt = 0;
                        double es = 0;
                        for (int64_t tt = 0; tt < Sb; tt++)
                            if (c->tok[p[tt]] == i) {
                                if (first < 0) first = tt;
                                last = tt;
                                cnt++;
                                es += emit(&a, c, b, tt, p[tt]);
                            }
                        if (spans)
                            fz_check(spans[b * ts + 2 * i] == first && spans[b * ts + 2 * i + 1] == last,
                                     "item %lld token %lld span %d..%d, path %lld..%lld", (long long)b,
                                     (long long)i, spans[b * ts + 2 * i], spans[b * ts + 2 * i + 1],
                                     (long long)first, (long long)last);
                        if (token_scores) {
                            double v = as == 8 ? ((double *)token_scores)[b * tss + i]
                                                : ((float *)token_scores)[b * tss + i];
                            if (cnt == 0) fz_check(v == -INFINITY, "skipped token score %g", v);
                            else fz_check(fabs(v - es / cnt) <= eps * (1 + fabs(es)),
                                          "token score %.9g, mean %.9g", v, es / cnt);
                        }
                    }
            } else {
                double lz = log_z ? (as == 8 ? ((double *)log_z)[b] : ((float *)log_z)[b]) : 0;
                if (either[b] == 2) continue;
                if (log_z && either[b] && lz == -INFINITY) ok = 0, Sb = 0;
                /* mas.h section 5 rule: never NaN from finite-or--inf inputs */
                if (log_z) fz_check(lz == lz, "item %lld: log_z NaN", (long long)b);
                if (log_z && !ok) fz_check(lz == -INFINITY, "item %lld failed, log_z %g", (long long)b, lz);
                double mag = 0;
                if (ok)
                    for (int64_t tt = 0; tt < Sb; tt++)
                        for (int64_t s = 0; s < c->n; s++) {
                            double v = emit(&a, c, b, tt, s);
                            if (v > -INFINITY) mag += fabs(v);
                        }
                if (log_z && ok && moderate[b])
                    fz_check(fabs(lz - ref[b]) <= eps * 10 * (1 + mag + fabs(ref[b])),
                             "item %lld: log_z %.17g, reference %.17g", (long long)b, lz, ref[b]);
                if (post.t.data) {
                    int64_t n = ok ? c->n : 0;
                    for (int64_t tt = 0; tt < Sp; tt++) {
                        double s1 = 0;
                        for (int64_t s = 0; s < post.t.dim[1]; s++) {
                            double g = fz_at(&post.t, b, s, tt);
                            if (s >= n || tt >= Sb) {
                                if (!either[b] || s >= c->n || tt >= F[b])
                                    fz_check(g == 0, "item %lld: posterior(%lld,%lld) = %g beyond the lengths",
                                             (long long)b, (long long)s, (long long)tt, g);
                                continue;
                            }
                            if (!moderate[b]) continue;
                            fz_check(fabs(g - gam[b][s][tt]) <= (as == 8 ? 1e-9 : 2e-3),
                                     "item %lld: posterior(%lld,%lld) = %.9g, reference %.9g",
                                     (long long)b, (long long)s, (long long)tt, g, gam[b][s][tt]);
                            s1 += g;
                        }
                        if (ok && moderate[b] && tt < Sb && fabs(s1 - 1) > 1e-3)
                            for (int64_t s = 0; s < c->n; s++)
                                fz_debug("  item %lld L %lld F %lld n %lld ref %g: frame %lld state %lld: %g ref %g\n", (long long)b, (long long)L[b], (long long)F[b], (long long)c->n, ref[b], (long long)tt, (long long)s,
                                         fz_at(&post.t, b, s, tt), gam[b][s][tt]);
                        if (ok && moderate[b] && tt < Sb)
                            fz_check(fabs(s1 - 1) <= (as == 8 ? 1e-9 : 1e-3) * (1 + c->n),
                                     "item %lld: posterior of frame %lld sums to %.9g", (long long)b,
                                     (long long)tt, s1);
                    }
                }
                if (grad.t.data && ok && moderate[b]) {
                    for (int64_t tt = 0; tt < Sp; tt++)
                        for (int64_t v = 0; v < V; v++) {
                            double want_g = 0;
                            if (tt < Sb)
                                for (int64_t s = 0; s < c->n; s++)
                                    if (c->label[s] == v) want_g += gam[b][s][tt];
                            double g = fz_at(&grad.t, b, tt, v);
                            fz_check(fabs(g - want_g) <= (as == 8 ? 1e-9 : 2e-3) * (1 + c->n),
                                     "item %lld: grad(%lld,%lld) = %.9g, posterior sum %.9g",
                                     (long long)b, (long long)tt, (long long)v, g, want_g);
                        }
                } else if (grad.t.data && !ok && !either[b]) {
                    for (int64_t tt = 0; tt < Sp; tt++)
                        for (int64_t v = 0; v < V; v++)
                            fz_check(fz_at(&grad.t, b, tt, v) == 0, "grad of a failed item");
                }
            }
        }
    }
    (void)refs;

    free(al); free(be); free(gam); free(ref); free(ch); free(moderate); free(either); free(ist);
    fz_workspace_free(&ws);
    free(state_ids); free(frame_labels); free(spans); free(token_scores); free(score); free(log_z);
    fz_view_free(&post); fz_view_free(&grad); fz_view_free(&em);
    free(rows); free(cols); free(labels); free(L); free(F);
    return 0;
}
