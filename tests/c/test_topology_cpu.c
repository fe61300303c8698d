/* Topologies (mas.h section 7) on the CPU against an independent float64
 * reference written from the header's rules (plain loops over states and
 * their predecessors, every edge decided by one function), the reference
 * itself against brute-force enumeration of every state sequence on tiny
 * sizes; k = 1..3, stay/advance scores, token skips, CTC blanks with
 * repeated labels, both emission forms, hard and soft. Hard MAS is the
 * special case k = 1 and must give mas_hard_cpu's bits. Bad inputs. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support.h"

/* ---------------------------------------------------------------------- */
/* The reference                                                           */
/* ---------------------------------------------------------------------- */

typedef struct ref_topo {
    int k, blank_on, skip_on;
    double stay[3], adv[3], blank_stay, blank_adv, penalty;
    int L, n;
    const int32_t *labels; /* [L*k] */
    int blank;
} ref_topo;

/* State s: token (or -1 for a blank) and place in the token. */
static int ref_token(const ref_topo *r, int s, int *j) {
    if (!r->blank_on) {
        *j = s % r->k;
        return s / r->k;
    }
    int q = s % (r->k + 1);
    *j = q - 1;
    return q == 0 ? -1 : s / (r->k + 1);
}

static int ref_label(const ref_topo *r, int s) {
    int j, i = ref_token(r, s, &j);
    return i < 0 ? r->blank : r->labels[i * r->k + j];
}

/* log-score of the edge a -> b between consecutive frames; -inf: none. */
static double ref_edge(const ref_topo *r, int a, int b) {
    int ja, jb, ia = ref_token(r, a, &ja), ib = ref_token(r, b, &jb);
    if (a == b) return ib < 0 ? r->blank_stay : r->stay[jb];
    if (b == a + 1) return ib < 0 ? r->blank_adv : r->adv[jb];
    int a_last = ia >= 0 && ja == r->k - 1, b_first = ib >= 0 && jb == 0;
    if (r->blank_on && a_last && b_first && ib == ia + 1 && b == a + 2 &&
        r->labels[ia * r->k + r->k - 1] != r->labels[ib * r->k])
        return r->adv[0];
    if (r->skip_on && a_last && b_first && ib == ia + 2) return r->adv[0] + r->penalty;
    return -INFINITY;
}

static double ref_start(const ref_topo *r, int s) {
    int j, i = ref_token(r, s, &j);
    if (s == 0) return 0;
    if (r->blank_on && i == 0 && j == 0) return 0;
    if (r->skip_on && i == 1 && j == 0) return r->penalty;
    return -INFINITY;
}

static double ref_final(const ref_topo *r, int s) {
    int j, i = ref_token(r, s, &j);
    if (s == r->n - 1) return 0;
    if (r->blank_on && r->L >= 1 && i == r->L - 1 && j == r->k - 1) return 0;
    if (r->skip_on && r->L >= 2 && i == r->L - 2 && j == r->k - 1) return r->penalty;
    return -INFINITY;
}

static double lse(double a, double b) {
    double hi = a > b ? a : b, lo = a > b ? b : a;
    if (hi == -INFINITY) return hi;
    return hi + log(1 + exp(lo - hi));
}

/* Viterbi (max) or forward-sum (log-sum-exp) over e[t*n + s], S frames.
 * Hard: best path into path[S] (ties: stay, then move, then the rest, as
 * mas.h says: a later predecessor wins only when strictly better; the final
 * n-1 unless another is strictly better). Soft: gamma[t*n + s] when given. */
static double ref_run(const ref_topo *r, const double *e, int S, int hard, int *path,
                      double *gamma) {
    int n = r->n;
    double *al = malloc(sizeof(double) * (size_t)(S * n));
    double *be = malloc(sizeof(double) * (size_t)(S * n));
    int *from = malloc(sizeof(int) * (size_t)(S * n));
    for (int s = 0; s < n; s++) {
        al[s] = ref_start(r, s) + e[s];
        from[s] = -1;
    }
    for (int t = 1; t < S; t++)
        for (int s = 0; s < n; s++) {
            /* predecessors in tie order: s, s-1, then further back */
            double acc = -INFINITY;
            int arg = -1;
            for (int q = 0; q <= s; q++) {
                int a = s - q;
                double x = al[(t - 1) * n + a] + ref_edge(r, a, s);
                if (hard) {
                    if (arg < 0 || acc < x) {
                        acc = x;
                        arg = a;
                    }
                } else {
                    acc = lse(acc, x);
                }
            }
            al[t * n + s] = acc + e[t * n + s];
            from[t * n + s] = arg;
        }
    double tot = -INFINITY;
    int last = -1;
    for (int q = 0; q < n; q++) {
        int s = n - 1 - q;
        double x = al[(S - 1) * n + s] + ref_final(r, s);
        if (hard) {
            if (last < 0 || tot < x) {
                tot = x;
                last = s;
            }
        } else {
            tot = lse(tot, x);
        }
    }
    if (hard && path) {
        int s = last;
        for (int t = S - 1; t >= 0; t--) {
            path[t] = s;
            if (t > 0) s = from[t * n + s];
        }
    }
    if (!hard && gamma) {
        for (int s = 0; s < n; s++) be[(S - 1) * n + s] = ref_final(r, s);
        for (int t = S - 2; t >= 0; t--)
            for (int s = 0; s < n; s++) {
                double acc = -INFINITY;
                for (int b = s; b < n; b++)
                    acc = lse(acc, ref_edge(r, s, b) + e[(t + 1) * n + b] + be[(t + 1) * n + b]);
                be[t * n + s] = acc;
            }
        for (int i = 0; i < S * n; i++) gamma[i] = exp(al[i] + be[i] - tot);
    }
    free(al);
    free(be);
    free(from);
    return tot;
}

/* Every state sequence: max and log-sum-exp of the scores, and gamma. */
static void brute(const ref_topo *r, const double *e, int S, double *best, double *logz,
                  double *gamma) {
    int n = r->n;
    int seq[16] = {0};
    *best = -INFINITY;
    *logz = -INFINITY;
    double *w = malloc(sizeof(double) * (size_t)(S * n));
    for (int i = 0; i < S * n; i++) w[i] = -INFINITY;
    for (;;) {
        double x = ref_start(r, seq[0]) + e[seq[0]];
        for (int t = 1; t < S; t++) x += ref_edge(r, seq[t - 1], seq[t]) + e[t * n + seq[t]];
        x += ref_final(r, seq[S - 1]);
        if (x > -INFINITY) {
            if (x > *best) *best = x;
            *logz = lse(*logz, x);
            for (int t = 0; t < S; t++) w[t * n + seq[t]] = lse(w[t * n + seq[t]], x);
        }
        int t = S - 1;
        while (t >= 0 && ++seq[t] == n) seq[t--] = 0;
        if (t < 0) break;
    }
    for (int i = 0; i < S * n; i++) gamma[i] = exp(w[i] - *logz);
    free(w);
}

/* ---------------------------------------------------------------------- */
/* One case                                                                */
/* ---------------------------------------------------------------------- */

typedef struct topo_case {
    int k, blank_on, skip_on, gathered, weights, repeats;
    mas_dtype dtype;
    int B, Lmax, Smax, V;
    int tiny;
    int tight; /* long float32 items: the posterior within eps |log Z| sqrt(S) of float64 */
} topo_case;

static int close_to(double a, double b, double tol) {
    if (a == b) return 1;
    return fabs(a - b) <= tol * (1 + fabs(b));
}

static void run_case(ts_rng *rng, const topo_case *tc) {
    int B = tc->B, Lmax = tc->Lmax, Smax = tc->Smax, k = tc->k, V = tc->V;
    mas_topology topo;
    memset(&topo, 0, sizeof topo);
    double stay[3] = {0, 0, 0}, adv[3] = {0, 0, 0};
    if (tc->weights)
        for (int j = 0; j < k; j++) {
            stay[j] = ts_rng_uniform(rng, -2, 0);
            adv[j] = ts_rng_uniform(rng, -2, 0);
        }
    topo.states_per_token = k;
    topo.has_blank = tc->blank_on;
    topo.blank = tc->gathered ? (int32_t)ts_rng_int(rng, 0, V - 1) : 0;
    topo.stay = tc->weights ? stay : NULL;
    topo.advance = tc->weights ? adv : NULL;
    topo.blank_stay = tc->weights && tc->blank_on ? ts_rng_uniform(rng, -1, 0) : 0;
    topo.blank_advance = tc->weights && tc->blank_on ? ts_rng_uniform(rng, -1, 0) : 0;
    topo.skip_penalty = tc->skip_on ? ts_rng_uniform(rng, -3, 0) : -INFINITY;
    int64_t nmax = mas_topology_states(&topo, Lmax);

    int32_t *labels = calloc((size_t)(B * Lmax * k), sizeof(int32_t));
    int64_t *Ls = calloc((size_t)B, sizeof(int64_t)), *Ss = calloc((size_t)B, sizeof(int64_t));
    for (int b = 0; b < B; b++) {
        int L = (int)ts_rng_int(rng, tc->blank_on ? 0 : 1, Lmax);
        Ls[b] = L;
        for (int q = 0; q < L * k; q++) {
            int32_t l;
            do {
                l = (int32_t)ts_rng_int(rng, 0, (tc->gathered ? V : 4) - 1);
            } while (tc->blank_on && l == topo.blank);
            if (tc->repeats && q >= k && ts_rng_chance(rng, 0.4)) l = labels[b * Lmax * k + q - 1];
            labels[b * Lmax * k + q] = l;
        }
        /* the frames the transcript needs, and a few more */
        int need = k * L;
        if (tc->blank_on)
            for (int i = 1; i < L; i++)
                need += labels[b * Lmax * k + (i - 1) * k + k - 1] == labels[b * Lmax * k + i * k];
        if (tc->skip_on) need = k * (L / 2 > 1 ? L / 2 : 1);
        if (need < 1) need = 1;
        Ss[b] = need > Smax ? -1 : ts_rng_int(rng, need, Smax);
        if (Ss[b] < 0) { /* shorten the transcript instead */
            Ls[b] = tc->blank_on ? 0 : 1;
            Ss[b] = ts_rng_int(rng, tc->blank_on ? 1 : k, Smax); /* Smax >= k */
        }
    }
    /* emissions */
    mas_tensor3 em;
    memset(&em, 0, sizeof em);
    em.dtype = tc->dtype;
    if (tc->gathered) {
        em.dim[0] = B; em.dim[1] = Smax; em.dim[2] = V;
    } else {
        em.dim[0] = B; em.dim[1] = nmax > 0 ? nmax : 1; em.dim[2] = Smax;
    }
    em.stride[2] = 1;
    em.stride[1] = em.dim[2];
    em.stride[0] = em.dim[1] * em.dim[2];
    int64_t cnt = em.dim[0] * em.dim[1] * em.dim[2];
    em.data = malloc((size_t)cnt * mas_dtype_size(tc->dtype));
    for (int64_t i = 0; i < cnt; i++)
        ts_store(em.data, i, tc->dtype, ts_rng_uniform(rng, -4, 0));

    mas_topo_args args;
    memset(&args, 0, sizeof args);
    args.topology = topo;
    args.gathered = tc->gathered;
    args.emissions = em;
    args.labels = (tc->gathered || tc->blank_on) ? labels : NULL;
    args.labels_stride = Lmax * k;
    args.tokens = Lmax;
    args.token_len = Ls;
    args.frame_len = Ss;
    int32_t threads = (int32_t)ts_rng_int(rng, 1, 3);
    size_t wsn = mas_topo_cpu_workspace_size(&args, 1, threads);
    size_t wsn_hard = mas_topo_cpu_workspace_size(&args, 0, threads);
    void *ws_hard = malloc(wsn_hard); /* exactly the sizes asked: ASan sees any overrun */
    void *ws = malloc(wsn);
    TS_CHECK(wsn > 0, "workspace size");

    int acc64 = tc->dtype == MAS_FLOAT64;
    size_t as = acc64 ? 8 : 4;
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)(B * Smax));
    int32_t *fl = malloc(sizeof(int32_t) * (size_t)(B * Smax));
    int32_t *spans = malloc(sizeof(int32_t) * (size_t)(B * Lmax * 2 + 2));
    void *tsc = malloc(as * (size_t)(B * Lmax + 1));
    void *score = malloc(as * (size_t)B);
    mas_topo_hard_outputs ho;
    memset(&ho, 0, sizeof ho);
    ho.state_ids = ids; ho.state_ids_stride = Smax;
    ho.frame_labels = args.labels ? fl : NULL; ho.frame_labels_stride = Smax;
    ho.token_spans = spans; ho.token_spans_stride = Lmax * 2;
    ho.token_scores = tsc; ho.token_scores_stride = Lmax;
    ho.score = score;
    mas_error err;
    mas_status st = mas_viterbi_cpu(&args, &ho, ws_hard, wsn_hard, threads, &err);
    TS_CHECK(st == MAS_OK, "viterbi status %d (%s) item %lld", st, mas_status_string(st),
             (long long)err.item);

    void *logz = malloc(as * (size_t)B);
    mas_tensor3 post = {0}, grad = {0};
    post.dtype = acc64 ? MAS_FLOAT64 : MAS_FLOAT32;
    post.dim[0] = B; post.dim[1] = nmax > 0 ? nmax : 1; post.dim[2] = Smax;
    post.stride[2] = 1; post.stride[1] = Smax; post.stride[0] = post.dim[1] * Smax;
    post.data = malloc(as * (size_t)(post.dim[0] * post.dim[1] * Smax));
    if (tc->gathered) {
        grad = em;
        grad.dtype = post.dtype;
        grad.data = malloc(as * (size_t)cnt);
    }
    mas_topo_soft_outputs so;
    memset(&so, 0, sizeof so);
    so.log_z = logz;
    so.posterior = post;
    so.grad = grad;
    st = mas_topo_forward_sum_cpu(&args, &so, ws, wsn, threads, &err);
    TS_CHECK(st == MAS_OK, "forward-sum status %d item %lld", st, (long long)err.item);

    double tol = acc64 ? 1e-10 : 2e-5;
    for (int b = 0; b < B && st == MAS_OK; b++) {
        ref_topo r;
        memset(&r, 0, sizeof r);
        r.k = k; r.blank_on = tc->blank_on; r.skip_on = tc->skip_on;
        for (int j = 0; j < k; j++) { r.stay[j] = stay[j]; r.adv[j] = adv[j]; }
        r.blank_stay = topo.blank_stay; r.blank_adv = topo.blank_advance;
        r.penalty = topo.skip_penalty;
        r.L = (int)Ls[b]; r.n = (int)mas_topology_states(&topo, Ls[b]);
        r.labels = labels + b * Lmax * k;
        r.blank = topo.blank;
        int S = (int)Ss[b], n = r.n;
        /* the weights as the library rounds them: the accumulator type */
        if (!acc64) {
            for (int j = 0; j < k; j++) { r.stay[j] = (float)stay[j]; r.adv[j] = (float)adv[j]; }
            r.blank_stay = (float)r.blank_stay; r.blank_adv = (float)r.blank_adv;
            r.penalty = (float)r.penalty;
        }
        double *e = malloc(sizeof(double) * (size_t)(S * n));
        for (int t = 0; t < S; t++)
            for (int s = 0; s < n; s++)
                e[t * n + s] = tc->gathered
                                   ? ts_load(em.data, b * em.stride[0] + t * em.stride[1] + ref_label(&r, s), tc->dtype)
                                   : ts_load(em.data, b * em.stride[0] + s * em.stride[1] + t, tc->dtype);
        int *path = malloc(sizeof(int) * (size_t)S);
        double *gam = malloc(sizeof(double) * (size_t)(S * n));
        double best = ref_run(&r, e, S, 1, path, NULL);
        double lz = ref_run(&r, e, S, 0, NULL, gam);
        if (tc->tiny) {
            double bb, bl;
            double *bg = malloc(sizeof(double) * (size_t)(S * n));
            brute(&r, e, S, &bb, &bl, bg);
            TS_CHECK(close_to(best, bb, 1e-12), "item %d: reference max %.17g, brute %.17g", b, best, bb);
            TS_CHECK(close_to(lz, bl, 1e-12), "item %d: reference log_z %.17g, brute %.17g", b, lz, bl);
            for (int i = 0; i < S * n; i++)
                TS_CHECK(fabs(gam[i] - bg[i]) < 1e-10, "item %d: reference gamma %d", b, i);
            free(bg);
        }
        double got = ts_load(score, b, post.dtype);
        TS_CHECK(close_to(got, best, tol), "item %d: score %.17g, reference %.17g", b, got, best);
        /* the path is valid and scores what it claims */
        double ps = 0;
        int valid = 1;
        for (int t = 0; t < S; t++) {
            int s = ids[b * Smax + t];
            if (s < 0 || s >= n) { valid = 0; break; }
            ps += e[t * n + s] + (t == 0 ? ref_start(&r, s) : ref_edge(&r, ids[b * Smax + t - 1], s));
            if (fl && args.labels) valid &= fl[b * Smax + t] == ref_label(&r, s);
        }
        if (valid) ps += ref_final(&r, ids[b * Smax + S - 1]);
        TS_CHECK(valid && close_to(ps, best, tol), "item %d: path score %.17g, best %.17g", b, ps, best);
        if (acc64 && !tc->gathered) {
            int same = 1;
            for (int t = 0; t < S; t++) same &= ids[b * Smax + t] == path[t];
            TS_CHECK(same, "item %d: path differs from the reference's", b);
        }
        for (int t = S; t < Smax; t++) TS_CHECK(ids[b * Smax + t] == -1, "item %d: id beyond", b);
        /* spans and token scores from the path */
        for (int i = 0; i < Lmax; i++) {
            int lo = -1, hi = -1, c = 0;
            double sum = 0;
            for (int t = 0; valid && t < S && i < r.L; t++) {
                int j, tok = ref_token(&r, ids[b * Smax + t], &j);
                if (tok == i) { if (lo < 0) lo = t; hi = t; c++; sum += e[t * n + ids[b * Smax + t]]; }
            }
            TS_CHECK(spans[(b * Lmax + i) * 2] == lo && spans[(b * Lmax + i) * 2 + 1] == hi,
                     "item %d token %d: span %d..%d, expected %d..%d", b, i,
                     spans[(b * Lmax + i) * 2], spans[(b * Lmax + i) * 2 + 1], lo, hi);
            double want = i >= r.L ? 0 : c ? sum / c : -INFINITY;
            TS_CHECK(close_to(ts_load(tsc, b * Lmax + i, post.dtype), want, tol), "item %d token %d: token score", b, i);
        }
        /* soft */
        double glz = ts_load(logz, b, post.dtype);
        TS_CHECK(close_to(glz, lz, tol), "item %d: log_z %.17g, reference %.17g", b, glz, lz);
        /* float32: alpha and beta~ drift by rounding, in proportion to their
         * size and the square root of the steps */
        double gtol = acc64 ? 1e-9 : 1e-4 + 4e-7 * (1 + fabs(lz)) * sqrt((double)S);
        /* each frame normalised by its sum (combine in lib/cpu/topology.c):
         * log Z's drift along the sweep (up to 0.023 here before, ~1.7 eps
         * |log Z| sqrt(S)) no longer counts, only the cells' own rounding:
         * a cell's alpha + beta carries ~S roundings of terms up to |log Z|.
         * Seen: at most 0.38 eps (1 + |log Z|) sqrt(S) over 1344 items
         * (seeds 2000-2500 and 696124990057, whose 3.4e-3 failed a fixed
         * 3e-3) */
        if (tc->tight) gtol = 1e-4 + FLT_EPSILON * (1 + fabs(lz)) * sqrt((double)S);
        int ok = 1;
        for (int s = 0; s < (int)post.dim[1] && ok; s++)
            for (int t = 0; t < Smax && ok; t++) {
                double g = ts_load(post.data, b * post.stride[0] + s * Smax + t, post.dtype);
                double w = s < n && t < S ? gam[t * n + s] : 0;
                ok = TS_CHECK(fabs(g - w) <= gtol, "item %d: posterior (%d,%d) %.9g, reference %.9g", b, s, t, g, w);
            }
        for (int t = 0; tc->gathered && t < Smax && ok; t++)
            for (int v = 0; v < V && ok; v++) {
                double w = 0;
                for (int s = 0; s < n && t < S; s++) if (ref_label(&r, s) == v) w += gam[t * n + s];
                double g = ts_load(grad.data, b * em.stride[0] + t * V + v, post.dtype);
                ok = TS_CHECK(fabs(g - w) <= gtol, "item %d: grad (%d,%d) %.9g, reference %.9g", b, t, v, g, w);
            }
        free(e); free(path); free(gam);
    }
    free(labels); free(Ls); free(Ss); free(em.data); free(ws); free(ws_hard); free(ids); free(fl);
    free(spans); free(tsc); free(score); free(logz); free(post.data); free(grad.data);
}

/* ---------------------------------------------------------------------- */
/* Hard MAS as the special case k = 1                                      */
/* ---------------------------------------------------------------------- */

static void hard_mas_case(ts_rng *rng, mas_dtype dtype) {
    int64_t B = ts_rng_int(rng, 1, 4), T = ts_rng_int(rng, 1, 90), S = T + ts_rng_int(rng, 0, 200);
    mas_tensor3 v = {0};
    v.dtype = dtype;
    v.dim[0] = B; v.dim[1] = T; v.dim[2] = S;
    v.stride[0] = T * S; v.stride[1] = S; v.stride[2] = 1;
    v.data = malloc((size_t)(B * T * S) * mas_dtype_size(dtype));
    for (int64_t i = 0; i < B * T * S; i++) ts_store(v.data, i, dtype, ts_rng_uniform(rng, -3, 3));
    int64_t *x = malloc(sizeof(int64_t) * (size_t)B), *y = malloc(sizeof(int64_t) * (size_t)B);
    for (int64_t b = 0; b < B; b++) {
        y[b] = ts_rng_int(rng, 1, S);
        x[b] = ts_rng_int(rng, 1, T < y[b] ? T : y[b]);
    }
    size_t as = dtype == MAS_FLOAT64 ? 8 : 4;
    int32_t *ind = malloc(sizeof(int32_t) * (size_t)(B * S)), *ids = malloc(sizeof(int32_t) * (size_t)(B * S));
    void *s1 = malloc(as * (size_t)B), *s2 = malloc(as * (size_t)B);
    mas_hard_outputs ho = {0};
    ho.indices = ind; ho.indices_stride = S; ho.score = s1;
    size_t n1 = mas_hard_cpu_workspace_size(B, T, S, dtype, 1);
    void *w1 = malloc(n1);
    mas_status st = mas_hard_cpu(&v, x, y, &ho, w1, n1, 1, NULL);
    mas_topo_args a;
    memset(&a, 0, sizeof a);
    a.topology.states_per_token = 1;
    a.topology.skip_penalty = -INFINITY;
    a.emissions = v;
    a.tokens = T;
    a.token_len = x;
    a.frame_len = y;
    mas_topo_hard_outputs to;
    memset(&to, 0, sizeof to);
    to.state_ids = ids; to.state_ids_stride = S; to.score = s2;
    size_t n2 = mas_topo_cpu_workspace_size(&a, 0, 2);
    void *w2 = malloc(n2);
    mas_status st2 = mas_viterbi_cpu(&a, &to, w2, n2, 2, NULL);
    TS_CHECK(st == MAS_OK && st2 == MAS_OK, "statuses %d %d", st, st2);
    TS_CHECK(memcmp(s1, s2, as * (size_t)B) == 0, "scores differ in their bits");
    TS_CHECK(memcmp(ind, ids, sizeof(int32_t) * (size_t)(B * S)) == 0, "paths differ");
    free(v.data); free(x); free(y); free(ind); free(ids); free(s1); free(s2); free(w1); free(w2);
}

/* ---------------------------------------------------------------------- */
/* Bad inputs                                                              */
/* ---------------------------------------------------------------------- */

static mas_status ctc_call(const int32_t *labels, int64_t L, int64_t S, float poison,
                           int32_t blank, int skip, mas_error *err) {
    float lp[2 * 6 * 4];
    for (int i = 0; i < 48; i++) lp[i] = -1.0f - (float)(i % 5) * 0.1f;
    lp[4 + 1] = poison; /* item 0? no: frame 1, label 1 of item 0 */
    mas_topo_args a;
    memset(&a, 0, sizeof a);
    a.topology.states_per_token = 1;
    a.topology.has_blank = 1;
    a.topology.blank = blank;
    a.topology.skip_penalty = skip ? -1.0 : -INFINITY;
    a.gathered = 1;
    mas_tensor3 e = {lp, MAS_FLOAT32, 0, {2, 6, 4}, {24, 4, 1}};
    a.emissions = e;
    int32_t lab[2 * 4];
    for (int i = 0; i < 4; i++) lab[i] = lab[4 + i] = labels[i];
    a.labels = lab;
    a.labels_stride = 4;
    a.tokens = 4;
    int64_t Ls[2] = {1, L}, Ss[2] = {6, S};
    a.token_len = Ls;
    a.frame_len = Ss;
    float score[2];
    mas_topo_hard_outputs o;
    memset(&o, 0, sizeof o);
    o.score = score;
    size_t n = mas_topo_cpu_workspace_size(&a, 0, 1);
    void *ws = malloc(n ? n : 64); /* 0 for bad arguments: the call names them */
    mas_status st = mas_viterbi_cpu(&a, &o, ws, n, 1, err);
    free(ws);
    return st;
}

static void error_cases(void) {
    mas_error err;
    int32_t rep[4] = {1, 1, 2, 3}, ok[4] = {1, 2, 3, 1};
    ts_case_begin("errors");
    TS_CHECK(ctc_call(ok, 4, 4, -1, 0, 0, &err) == MAS_OK, "4 distinct labels fit 4 frames");
    TS_CHECK(ctc_call(rep, 4, 4, -1, 0, 0, &err) == MAS_ERR_TARGET_TOO_LONG && err.item == 1,
             "L + repeats > S: item 1, status %d", err.status);
    TS_CHECK(ctc_call(rep, 4, 5, -1, 0, 0, &err) == MAS_OK, "L + repeats == S fits");
    TS_CHECK(ctc_call(ok, 4, 4, -1, 1, 0, &err) == MAS_ERR_BAD_ARGUMENT && err.item == 0,
             "a label equal to the blank");
    int32_t big[4] = {1, 4, 2, 3};
    TS_CHECK(ctc_call(big, 4, 6, -1, 0, 0, &err) == MAS_ERR_BAD_ARGUMENT && err.item == 1,
             "a label >= V");
    TS_CHECK(ctc_call(ok, 4, 7, -1, 0, 0, &err) == MAS_ERR_BAD_LENGTH && err.item == 1,
             "frame_len > S'");
    TS_CHECK(ctc_call(ok, 5, 6, -1, 0, 0, &err) == MAS_ERR_BAD_LENGTH && err.item == 1,
             "token_len > tokens");
    TS_CHECK(ctc_call(ok, 4, 6, NAN, 0, 0, &err) == MAS_ERR_NONFINITE_VALUE && err.item == 0,
             "NaN at a transcript label");
    TS_CHECK(ctc_call(ok, 4, 6, INFINITY, 0, 0, &err) == MAS_ERR_NONFINITE_VALUE,
             "+inf at a transcript label");
    TS_CHECK(ctc_call(ok, 4, 6, -INFINITY, 0, 0, &err) == MAS_OK, "-inf is allowed");
    TS_CHECK(ctc_call(ok, 4, 6, -1, 0, 1, &err) == MAS_ERR_BAD_ARGUMENT,
             "token skips with blanks are refused");
    ts_case_end();
}

int main(int argc, char **argv) {
    uint64_t seed = ts_seed_from_args(argc, argv);
    ts_rng rng;
    ts_rng_init(&rng, seed);
    for (int c = 0; c < 300; c++) {
        topo_case tc;
        memset(&tc, 0, sizeof tc);
        tc.tiny = c < 150;
        tc.k = (int)ts_rng_int(&rng, 1, 3);
        tc.blank_on = ts_rng_chance(&rng, 0.5);
        tc.skip_on = !tc.blank_on && ts_rng_chance(&rng, 0.5);
        tc.gathered = ts_rng_chance(&rng, 0.5);
        tc.weights = ts_rng_chance(&rng, 0.6);
        tc.repeats = ts_rng_chance(&rng, 0.5);
        tc.dtype = ts_rng_chance(&rng, 0.7) ? MAS_FLOAT64 : MAS_FLOAT32;
        tc.V = (int)ts_rng_int(&rng, 2, 6);
        if (tc.tiny) {
            /* n^S sequences: n <= 7, S <= 6 */
            int maxL = tc.blank_on ? (7 - 1) / (tc.k + 1) : 7 / tc.k;
            tc.Lmax = (int)ts_rng_int(&rng, 1, maxL < 1 ? 1 : maxL > 3 ? 3 : maxL);
            tc.Smax = (int)ts_rng_int(&rng, tc.k, 6);
            tc.B = (int)ts_rng_int(&rng, 1, 3);
        } else {
            tc.Lmax = (int)ts_rng_int(&rng, 1, 40);
            tc.Smax = (int)ts_rng_int(&rng, tc.k, 200);
            tc.B = (int)ts_rng_int(&rng, 1, 4);
        }
        ts_case_begin("case %d: k=%d blank=%d skip=%d gathered=%d weights=%d repeats=%d %s "
                      "B=%d L=%d S=%d V=%d%s",
                      c, tc.k, tc.blank_on, tc.skip_on, tc.gathered, tc.weights, tc.repeats,
                      ts_dtype_name(tc.dtype), tc.B, tc.Lmax, tc.Smax, tc.V,
                      tc.tiny ? " (brute force)" : "");
        run_case(&rng, &tc);
        ts_case_end();
    }
    for (int c = 0; c < 2; c++) {
        /* float32 CTC items of the benchmark's length */
        topo_case tc;
        memset(&tc, 0, sizeof tc);
        tc.k = 1;
        tc.blank_on = tc.gathered = tc.repeats = tc.tight = 1;
        tc.weights = c;
        tc.dtype = MAS_FLOAT32;
        tc.V = 32;
        tc.Lmax = 40; /* the reference is quadratic in the states */
        tc.Smax = 1500;
        tc.B = 2;
        ts_case_begin("long CTC case %d: float32 B=2 L<=40 S<=1500 V=32, posterior within eps |log Z| sqrt(S)",
                      c);
        run_case(&rng, &tc);
        ts_case_end();
    }
    for (int c = 0; c < 40; c++) {
        mas_dtype dt = c % 2 ? MAS_FLOAT64 : MAS_FLOAT32;
        ts_case_begin("hard MAS as k=1, case %d, %s", c, ts_dtype_name(dt));
        hard_mas_case(&rng, dt);
        ts_case_end();
    }
    error_cases();
    return ts_finish();
}
