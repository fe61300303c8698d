/* Fuzz target: the fused Gaussian ops on the CPU (mas.h section 8):
 * mas_align_gaussian_cpu and mas_forward_sum_gaussian_cpu with their
 * workspace sizes. Frames x [B, S, J] and the tokens' Gaussians (means and
 * variance or log-std [B or 1, T, J], optional log weights [B or 1, 1, T])
 * of every dtype and layout; bad shapes, dtypes, spread kinds and NULLs;
 * lengths, threads, workspaces (exact, one byte short, NULL).
 *
 * The status is predicted in mas.h's order: argument errors (the checks of
 * common/checks.h that mas.h documents per status), the workspace, then
 * MAS_ERR_BAD_MODEL with the item mas_gauss_coef_cpu gives on the same
 * parameters (never after the first plainly bad parameter), then the item
 * errors of the unfused path. That path is mas.h's exactness contract, run
 * here item by item: mas_gauss_coef_cpu + mas_loglik_cpu, then mas_hard_cpu
 * (durations, indices, path and score bit for bit) or mas_forward_sum_cpu
 * (log_z bit for bit). Items of moderate values are also compared with a
 * float64 DP over log N(x; mu, var) written here: the score or log_z within
 * a tolerance, the returned path's float64 score near the best; the
 * gradients obey the Gaussian's shift and scale identities, and (float64,
 * tiny) equal central differences of the float64 log-sum-exp. */
#include "fuzz_common.h"

/* Caps on the target's own work, so that every input runs in milliseconds
 * (bigger views become dummies or are not wanted, as when too big to build) */
#define MAX_ELEMS 65536.0            /* elements of one input or gradient view */
#define MAX_PATH ((int64_t)1 << 20)  /* cells of the path output */
#define REF_CELLS ((int64_t)1 << 16) /* X*Y of an item beyond which no unfused reference */
#define REF_TOTAL ((int64_t)1 << 17) /* cells of all items' unfused references */
#define REF_ITEMS 64                 /* items with an unfused reference */
#define MODEL_ITEMS 64               /* items compared with the float64 model */
#define SMALL_WORK 16384             /* X*Y*J of the float64 references */
#define FD_CELLS 48                  /* X*Y of the central differences */
#define FD_PARAMS 128                /* (Y + 2X) * J of the central differences */
#define LOG_2PI 1.8378770664093454836

static int is_float(int32_t d) {
    return d == MAS_FLOAT32 || d == MAS_FLOAT64 || d == MAS_FLOAT16 || d == MAS_BFLOAT16;
}

/* x + 1, or x - 1 where that overflows: a size that differs from x */
static int64_t other(int64_t x) { return x < INT64_MAX ? x + 1 : x - 1; }

/* ---- the expected status of the arguments ---------------------------- */

/* One tensor as common/checks.h checks it: NULL data, then the dtype (want
 * -1: any float, -2: any mas_dtype, else exactly), then a size < 1. */
static mas_status tensor_status(const mas_tensor3 *t, int32_t want) {
    if (!t->data) return MAS_ERR_NULL_POINTER;
    int ok = want == -2 ? t->dtype >= 0 && t->dtype < MAS_DTYPE_COUNT_
           : want == -1 ? is_float(t->dtype) : t->dtype == want;
    if (!ok) return MAS_ERR_BAD_DTYPE;
    for (int k = 0; k < 3; k++)
        if (t->dim[k] < 1) return MAS_ERR_BAD_SHAPE;
    return MAS_OK;
}

static int same_dims(const mas_tensor3 *a, const int64_t d[3]) {
    return a->dim[0] == d[0] && a->dim[1] == d[1] && a->dim[2] == d[2];
}

/* The checks both calls share: the frames, then the parameters as
 * mas_gauss_coef_cpu checks them (against coefficients [means' B, 2J+1, T]
 * for x's J), then the model batch (1 or B). */
static mas_status plan_status(const mas_gauss_align_args *a) {
    if (!a || !a->x_len || !a->y_len) return MAS_ERR_NULL_POINTER;
    mas_status st = tensor_status(&a->x, -1);
    if (st != MAS_OK) return st;
    if (a->x.dim[2] > (INT64_MAX - 1) / 2) return MAS_ERR_BAD_SHAPE;
    const mas_gauss_params *p = &a->params;
    if ((st = tensor_status(&p->means, -1)) != MAS_OK) return st;
    if ((st = tensor_status(&p->spread, -1)) != MAS_OK) return st;
    if (p->log_weights.data && (st = tensor_status(&p->log_weights, -1)) != MAS_OK) return st;
    if (p->spread_kind != MAS_SPREAD_VARIANCE && p->spread_kind != MAS_SPREAD_LOG_STD)
        return MAS_ERR_BAD_ARGUMENT;
    const int64_t *d = p->means.dim;
    if (!same_dims(&p->spread, d)) return MAS_ERR_BAD_SHAPE;
    int64_t wd[3] = {d[0], 1, d[1]};
    if (p->log_weights.data && !same_dims(&p->log_weights, wd)) return MAS_ERR_BAD_SHAPE;
    if (d[2] != a->x.dim[2]) return MAS_ERR_BAD_SHAPE; /* the coefficients' 2J+1 rows */
    if (d[0] != 1 && d[0] != a->x.dim[0]) return MAS_ERR_BAD_SHAPE;
    return MAS_OK;
}

/* mas_align_gaussian_cpu after the plan: the outputs as mas_hard_cpu checks
 * them (value = the virtual [B, T, S]), then the workspace. */
static mas_status hard_status(const mas_gauss_align_args *a, const mas_hard_outputs *out,
                              const void *ws, size_t ws_size, size_t need) {
    mas_status st = plan_status(a);
    if (st != MAS_OK) return st;
    if (!out) return MAS_ERR_NULL_POINTER;
    if (!out->path.data && !out->durations && !out->indices && !out->score)
        return MAS_ERR_BAD_ARGUMENT;
    if (out->path.data) {
        if ((st = tensor_status(&out->path, -2)) != MAS_OK) return st;
        int64_t vd[3] = {a->x.dim[0], a->params.means.dim[1], a->x.dim[1]};
        if (!same_dims(&out->path, vd)) return MAS_ERR_BAD_SHAPE;
    }
    if (!ws) return MAS_ERR_NULL_POINTER;
    if (ws_size < need) return MAS_ERR_WORKSPACE_TOO_SMALL;
    return MAS_OK;
}

/* mas_forward_sum_gaussian_cpu after the plan: NULLs, at least one output,
 * the gradients (accumulator type; [B, S, J], [B, T, J], [B, T, J]), then
 * the workspace. */
static mas_status soft_status(const mas_gauss_align_args *a, const mas_gauss_soft_outputs *out,
                              const void *ws, size_t ws_size, size_t need) {
    mas_status st = plan_status(a);
    if (st != MAS_OK) return st;
    if (!out || !ws) return MAS_ERR_NULL_POINTER;
    if (!out->log_z && !out->grad_x.data && !out->grad_means.data && !out->grad_spread.data)
        return MAS_ERR_BAD_ARGUMENT;
    const mas_tensor3 *g[3] = {&out->grad_x, &out->grad_means, &out->grad_spread};
    for (int k = 0; k < 3; k++) {
        if (!g[k]->data) continue;
        if ((st = tensor_status(g[k], fz_accum(a->x.dtype))) != MAS_OK) return st;
        int64_t gd[3] = {a->x.dim[0], k == 0 ? a->x.dim[1] : a->params.means.dim[1],
                         a->x.dim[2]};
        if (!same_dims(g[k], gd)) return MAS_ERR_BAD_SHAPE;
    }
    if (ws_size < need) return MAS_ERR_WORKSPACE_TOO_SMALL;
    return MAS_OK;
}

/* The first Gaussian (b*T + k) with a parameter plainly out of range: NaN
 * or inf mean or spread, a variance <= 0, a log weight NaN or +inf;
 * INT64_MAX if none. (mas_gauss_coef_cpu may stop earlier, where a
 * coefficient does not fit its dtype.) */
static int64_t plainly_bad(const mas_gauss_params *p) {
    const int64_t MB = p->means.dim[0], T = p->means.dim[1], J = p->means.dim[2];
    for (int64_t b = 0; b < MB; b++)
        for (int64_t k = 0; k < T; k++) {
            double lw = p->log_weights.data ? fz_at(&p->log_weights, b, 0, k) : 0;
            int bad = lw != lw || lw == INFINITY;
            for (int64_t j = 0; j < J && !bad; j++) {
                double mu = fz_at(&p->means, b, k, j), sp = fz_at(&p->spread, b, k, j);
                bad = !isfinite(mu) || !isfinite(sp) ||
                      (p->spread_kind == MAS_SPREAD_VARIANCE && !(sp > 0));
            }
            if (bad) return b * T + k;
        }
    return INT64_MAX;
}

/* ---- values ---------------------------------------------------------- */

/* 0 or 1 in any float dtype. */
static void store_01(uint8_t *p, int32_t dtype, int one) {
    switch (dtype) {
    case MAS_FLOAT64: { double d = one; memcpy(p, &d, 8); } break;
    case MAS_FLOAT32: { float f = (float)one; memcpy(p, &f, 4); } break;
    case MAS_FLOAT16: fz_store_bits(p, 2, one ? 0x3c00 : 0); break;
    case MAS_BFLOAT16: fz_store_bits(p, 2, one ? 0x3f80 : 0); break;
    default: break;
    }
}

/* Moderate values for more comparable items: every element beyond +-8 (NaN
 * and inf included; -inf kept where keep_ninf) becomes 0 or 1. */
static void moderate_fill(fz_view *v, int one, int keep_ninf) {
    if (!v->alloc || !is_float(v->t.dtype)) return;
    size_t size = fz_dtype_size(v->t.dtype), n = v->bytes / size;
    for (size_t k = 0; k < n; k++) {
        double x = fz_load(v->alloc, v->t.dtype, (int64_t)k);
        if (fabs(x) <= 8 || (keep_ninf && x == -INFINITY)) continue;
        store_01(v->alloc + k * size, v->t.dtype, one);
    }
    memcpy(v->copy, v->alloc, v->bytes);
}

/* Variances mostly valid: finite values within +-64 become |x| + 1/8. */
static void variances_mostly_valid(fz_view *v) {
    if (!v->alloc || !is_float(v->t.dtype)) return;
    size_t size = fz_dtype_size(v->t.dtype), n = v->bytes / size;
    for (size_t k = 0; k < n; k++) {
        double x = fz_load(v->alloc, v->t.dtype, (int64_t)k);
        if (!isfinite(x) || fabs(x) > 64) continue;
        double y = fabs(x) + 0.125; /* k/8 + 1/8 with |k| <= 512: exact in every dtype */
        uint64_t bits;
        if (v->t.dtype == MAS_FLOAT64) memcpy(&bits, &y, 8);
        else if (v->t.dtype == MAS_FLOAT16) {
            int e;
            double m = frexp(y, &e);
            bits = (uint64_t)((e - 1 + 15) << 10) | (uint64_t)((m * 2 - 1) * 1024);
        } else {
            float f = (float)y;
            uint32_t u;
            memcpy(&u, &f, 4);
            bits = v->t.dtype == MAS_FLOAT32 ? u : u >> 16;
        }
        fz_store_bits(v->alloc + k * size, size, bits);
    }
    memcpy(v->copy, v->alloc, v->bytes);
}

static double load_acc(const void *p, int32_t acc, int64_t k) {
    return acc == MAS_FLOAT64 ? ((const double *)p)[k] : ((const float *)p)[k];
}

/* Equal bits, or both NaN. */
static int same_real(double a, double b) { return (a == b && signbit(a) == signbit(b)) || (a != a && b != b); }

/* ---- the unfused path, item by item ----------------------------------- */

typedef struct item_ref {
    int known;     /* the unfused calls ran */
    mas_status st; /* their item status */
    double score;  /* hard: score; soft: log_z (accumulator values) */
    int32_t *idx;  /* hard: indices [Y] */
    int32_t *dur;  /* hard: durations [X] */
} item_ref;

/* Item b through mas_loglik_cpu (coefficients coef [MB, 2J+1, T] made by
 * mas_gauss_coef_cpu) into its [Y, X] log-likelihoods, viewed as value
 * [1, X, Y], then mas_hard_cpu or mas_forward_sum_cpu. */
static void unfused_item(const mas_gauss_align_args *a, const void *coef, int64_t b, int soft,
                         item_ref *ref) {
    int64_t X = a->x_len[b], Y = a->y_len[b];
    const int64_t J = a->x.dim[2], P = 2 * J + 1, T = a->params.means.dim[1];
    const int64_t mb = a->params.means.dim[0] == 1 ? 0 : b;
    const int32_t acc = fz_accum(a->x.dtype);
    const int64_t es = acc == MAS_FLOAT64 ? 8 : 4;
    mas_loglik_args la;
    memset(&la, 0, sizeof la);
    la.x = a->x;
    la.x.data = (char *)a->x.data + b * a->x.stride[0] * (int64_t)fz_dtype_size(a->x.dtype);
    la.x.dim[0] = 1;
    la.x.dim[1] = Y;
    la.coef = (mas_tensor3){(char *)coef + mb * P * T * es, acc, 0, {1, P, X}, {P * T, T, 1}};
    la.n_states = X;
    void *v = malloc((size_t)(X * Y * es));
    la.out = (mas_tensor3){v, acc, 0, {1, Y, X}, {X * Y, X, 1}};
    size_t n = mas_loglik_cpu_workspace_size(&la, 1);
    void *w = malloc(n ? n : 1);
    mas_error e;
    mas_status st = mas_loglik_cpu(&la, w, n, 1, &e);
    fz_check(st == MAS_OK, "unfused loglik of item %lld: status %d", (long long)b, (int)st);
    free(w);
    mas_tensor3 value = {v, acc, 0, {1, X, Y}, {X * Y, 1, X}};
    if (getenv("FZ_DEBUG") && X * Y <= 256)
        for (int64_t i = 0; i < X; i++) {
            fz_debug("item %lld token %lld cells:", (long long)b, (long long)i);
            for (int64_t j = 0; j < Y; j++) fz_debug(" %.9g", fz_at(&value, 0, i, j));
            fz_debug("\n");
        }
    double score_buf[1] = {0};
    if (soft) {
        n = mas_forward_sum_cpu_workspace_size(1, X, Y, (mas_dtype)acc, 1);
        w = malloc(n ? n : 1);
        st = mas_forward_sum_cpu(&value, &X, &Y, score_buf, NULL, w, n, 1, &e);
    } else {
        mas_hard_outputs o;
        memset(&o, 0, sizeof o);
        ref->dur = (int32_t *)malloc((size_t)X * sizeof(int32_t));
        ref->idx = (int32_t *)malloc((size_t)Y * sizeof(int32_t));
        o.durations = ref->dur;
        o.durations_stride = X;
        o.indices = ref->idx;
        o.indices_stride = Y;
        o.score = score_buf;
        n = mas_hard_cpu_workspace_size(1, X, Y, (mas_dtype)acc, 1);
        w = malloc(n ? n : 1);
        st = mas_hard_cpu(&value, &X, &Y, &o, w, n, 1, &e);
    }
    fz_check(st == MAS_OK || st == MAS_ERR_NONFINITE_VALUE || st == MAS_ERR_NO_FINITE_PATH,
             "unfused %s of item %lld: status %d", soft ? "forward-sum" : "hard MAS",
             (long long)b, (int)st);
    free(w);
    free(v);
    ref->known = 1;
    ref->st = st;
    ref->score = load_acc(score_buf, acc, 0);
}

/* ---- the float64 model of one item ----------------------------------- */

typedef struct model64 {
    int64_t X, Y, J;
    int variance;
    double *x, *mu, *sp, *lw; /* [Y*J], [X*J], [X*J], [X] */
    double *q;                /* DP scratch [X*Y] */
} model64;

static void model64_load(model64 *m, const mas_gauss_align_args *a, int64_t b) {
    const mas_gauss_params *p = &a->params;
    const int64_t X = a->x_len[b], Y = a->y_len[b], J = a->x.dim[2];
    const int64_t mb = p->means.dim[0] == 1 ? 0 : b;
    m->X = X;
    m->Y = Y;
    m->J = J;
    m->variance = p->spread_kind == MAS_SPREAD_VARIANCE;
    m->x = (double *)malloc((size_t)(Y * J) * sizeof(double));
    m->mu = (double *)malloc((size_t)(X * J) * sizeof(double));
    m->sp = (double *)malloc((size_t)(X * J) * sizeof(double));
    m->lw = (double *)malloc((size_t)X * sizeof(double));
    m->q = (double *)malloc((size_t)(X * Y) * sizeof(double));
    for (int64_t t = 0; t < Y; t++)
        for (int64_t d = 0; d < J; d++) m->x[t * J + d] = fz_at(&a->x, b, t, d);
    for (int64_t s = 0; s < X; s++) {
        m->lw[s] = p->log_weights.data ? fz_at(&p->log_weights, mb, 0, s) : 0;
        for (int64_t d = 0; d < J; d++) {
            m->mu[s * J + d] = fz_at(&p->means, mb, s, d);
            m->sp[s * J + d] = fz_at(&p->spread, mb, s, d);
        }
    }
}

static void model64_free(model64 *m) {
    free(m->x);
    free(m->mu);
    free(m->sp);
    free(m->lw);
    free(m->q);
}

static double var_of(const model64 *m, double sp) { return m->variance ? sp : exp(2 * sp); }

/* log w_i + log N(x_j; mu_i, diag var_i), straight from the formula. */
static double cell64(const model64 *m, int64_t i, int64_t j) {
    double v = m->lw[i];
    for (int64_t d = 0; d < m->J; d++) {
        double sp = m->sp[i * m->J + d], var = var_of(m, sp);
        double log_var = m->variance ? log(sp) : 2 * sp;
        double diff = m->x[j * m->J + d] - m->mu[i * m->J + d];
        v -= 0.5 * (LOG_2PI + log_var + diff * diff / var);
    }
    return v;
}

static double lse(double a, double b) {
    double hi = a > b ? a : b;
    if (hi == -INFINITY) return -INFINITY;
    return hi + log(exp(a - hi) + exp(b - hi));
}

/* Best (max-plus) or log-sum (soft) over the monotonic paths from (0, 0)
 * to (X-1, Y-1): a plain DP over every cell. */
static double dp64(const model64 *m, int soft) {
    const int64_t X = m->X, Y = m->Y;
    double *q = m->q;
    for (int64_t j = 0; j < Y; j++)
        for (int64_t i = 0; i < X; i++) {
            double v = cell64(m, i, j), prev;
            if (j == 0) prev = i == 0 ? 0 : -INFINITY;
            else {
                double stay = q[i * Y + j - 1], move = i ? q[(i - 1) * Y + j - 1] : -INFINITY;
                prev = soft ? lse(stay, move) : stay > move ? stay : move;
            }
            q[i * Y + j] = prev + v;
        }
    return q[(X - 1) * Y + Y - 1];
}

/* 2: every value small enough for central differences (|x|, |mu|, |log w|
 * <= 8, variances in [1/8, 8]); 1: moderate (64 and [1/64, 64]); 0: else.
 * Log weights of -inf are allowed (weight 0). *mag: the largest sum of the
 * magnitudes of one cell's terms (the scale of its rounding errors). */
static int model64_level(const model64 *m, double *mag) {
    int level = 2;
    const int64_t X = m->X, Y = m->Y, J = m->J;
    for (int64_t k = 0; k < Y * J; k++) {
        if (!(fabs(m->x[k]) <= 64)) return 0;
        if (fabs(m->x[k]) > 8) level = 1;
    }
    for (int64_t k = 0; k < X * J; k++) {
        double var = var_of(m, m->sp[k]);
        if (!(fabs(m->mu[k]) <= 64) || !(var >= 1.0 / 64 && var <= 64)) return 0;
        if (fabs(m->mu[k]) > 8 || !(var >= 0.125 && var <= 8)) level = 1;
    }
    for (int64_t s = 0; s < X; s++) {
        if (m->lw[s] == -INFINITY) continue;
        if (!(fabs(m->lw[s]) <= 64)) return 0;
        if (fabs(m->lw[s]) > 8) level = 1;
    }
    *mag = 0;
    for (int64_t s = 0; s < X; s++)
        for (int64_t t = 0; t < Y; t++) {
            double c = m->lw[s] == -INFINITY ? 0 : fabs(m->lw[s]);
            for (int64_t d = 0; d < J; d++) {
                double mu = m->mu[s * J + d], x = m->x[t * J + d], var = var_of(m, m->sp[s * J + d]);
                c += LOG_2PI + fabs(log(var)) + (mu * mu + 2 * fabs(mu * x) + x * x) / var;
            }
            if (c > *mag) *mag = c;
        }
    return level;
}

/* ---- the call --------------------------------------------------------- */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fz_reader r = fz_reader_init(data, size);
    fz_dims dm = fz_read_dims(&r);
    int64_t B = dm.d[0], T = dm.d[1], S = dm.d[2];
    int64_t J = fz_dim(&r, 4);
    int32_t dtype = fz_float_dtype(&r);
    int32_t acc_dtype = fz_accum(dtype);
    size_t acc = acc_dtype == MAS_FLOAT64 ? 8 : 4;
    int32_t threads = fz_threads(&r);
    uint8_t op = fz_u8(&r);      /* bit 0: soft; bits 1..4: which outputs */
    uint8_t pdt_c = fz_u8(&r);   /* the parameters' dtype */
    uint8_t kind_c = fz_u8(&r);  /* spread kind */
    uint8_t model_c = fz_u8(&r); /* bit 0 shared model, 1 log weights, 2-3 spread, 4 moderate */
    uint8_t mis = fz_u8(&r);     /* >= 200: a mismatch or NULL (mis % 16) */
    if (B > 4096) return 0; /* the length arrays alone are too big */
    const int soft = op & 1;
    const int want = (op >> 1) & 15;
    const int mcase = mis >= 200 ? mis % 16 : -1;
    static const int32_t f4[4] = {MAS_FLOAT32, MAS_FLOAT64, MAS_FLOAT16, MAS_BFLOAT16};
    int32_t pdt = pdt_c < 128 ? (is_float(dtype) ? dtype : MAS_FLOAT32)
                : pdt_c < 250 ? f4[pdt_c % 4] : pdt_c % 2 ? MAS_INT32 : 99;
    int32_t sdt = mcase == 12 ? f4[(pdt_c >> 2) % 4] : mcase == 14 ? MAS_UINT8 : pdt;
    int32_t wdt = mcase == 13 ? MAS_INT64 : pdt;
    int32_t kind = kind_c < 110 ? MAS_SPREAD_VARIANCE : kind_c < 250 ? MAS_SPREAD_LOG_STD
                 : kind_c % 2 ? 2 : -1;
    int64_t MB = (model_c & 1) && B >= 1 ? 1 : B;
    if (mcase == 1 && B >= 1) MB = B + 1; /* neither 1 nor B */
    int with_w = (model_c & 2) || mcase == 3 || mcase == 13;
    int moderate = (model_c & 16) != 0;

    int64_t *x_len, *y_len;
    fz_lengths(&r, B, T, S, 1, &x_len, &y_len);
    int64_t nb = B > 0 ? B : 0;
    int64_t *rows = (int64_t *)calloc((size_t)nb + 1, sizeof(int64_t));
    int64_t *cols = (int64_t *)calloc((size_t)nb + 1, sizeof(int64_t));
    /* the frames the call may read: y_len rows (all J) of items whose
     * lengths pass the hard-MAS rules (T: the means' tokens) */
    for (int64_t b = 0; b < nb; b++) {
        int ok = fz_hard_length_status(x_len[b], y_len[b], T, S) == MAS_OK;
        rows[b] = ok ? y_len[b] : 0;
        cols[b] = ok ? J : 0;
    }

    /* ---- the inputs; a view too big to build becomes a zero-stride dummy
     * (then the call is made only where it must stop before any value) */
    static uint8_t dummy[64] __attribute__((aligned(16)));
    memset(dummy, 0, sizeof dummy);
    fz_view x, means, spread, lw, path, gx, gm, gs;
    memset(&x, 0, sizeof x); memset(&means, 0, sizeof means); memset(&spread, 0, sizeof spread);
    memset(&lw, 0, sizeof lw); memset(&path, 0, sizeof path); memset(&gx, 0, sizeof gx);
    memset(&gm, 0, sizeof gm); memset(&gs, 0, sizeof gs);
    int64_t xd[3] = {B, S, J}, md[3] = {MB, T, J}, sd[3] = {MB, T, J}, wd[3] = {MB, 1, T};
    if (mcase == 0) md[2] = sd[2] = other(J);  /* J of the means differs from x's */
    if (mcase == 2) sd[1] = other(T);          /* spread unlike the means */
    if (mcase == 3) wd[mis % 2 ? 1 : 2] = other(wd[mis % 2 ? 1 : 2]); /* another shape */
    int built = 1;
#define INPUT(v, dims, dt, nbi, rws, cls, elems)                                            \
    do {                                                                                   \
        if (fz_dims_ok(&(fz_dims){{dims[0], dims[1], dims[2]}}) && (elems) <= MAX_ELEMS &&   \
            fz_view_make(&v, &r, dims, dt, 1, nbi, rws, cls)) {                             \
            fz_fill(&v, &r);                                                               \
        } else {                                                                           \
            fz_view_free(&v);                                                              \
            v.t = (mas_tensor3){dummy, dt, 0, {dims[0], dims[1], dims[2]}, {0, 0, 0}};     \
            built = 0;                                                                     \
        }                                                                                  \
    } while (0)
    double x_elems = 0;
    for (int64_t b = 0; b < nb; b++) x_elems += (double)rows[b] * (double)cols[b];
    INPUT(x, xd, dtype, nb, rows, cols, x_elems);
    INPUT(means, md, pdt, md[0], NULL, NULL, (double)md[0] * (double)md[1] * (double)md[2]);
    INPUT(spread, sd, sdt, sd[0], NULL, NULL, (double)sd[0] * (double)sd[1] * (double)sd[2]);
    if (with_w) INPUT(lw, wd, wdt, wd[0], NULL, NULL, (double)wd[0] * (double)wd[1] * (double)wd[2]);
#undef INPUT
    if (kind == MAS_SPREAD_VARIANCE && ((model_c >> 2) & 3) != 3) variances_mostly_valid(&spread);
    if (moderate) {
        moderate_fill(&x, 0, 0);
        moderate_fill(&means, 0, 0);
        moderate_fill(&spread, kind == MAS_SPREAD_VARIANCE, 0);
        moderate_fill(&lw, 0, 1);
    }

    mas_gauss_align_args args;
    memset(&args, 0, sizeof args);
    args.x = x.t;
    args.params.means = means.t;
    args.params.spread = spread.t;
    args.params.spread_kind = kind;
    if (with_w) args.params.log_weights = lw.t;
    args.x_len = mcase == 6 ? NULL : x_len;
    args.y_len = mcase == 7 ? NULL : y_len;
    if (mcase == 10) args.x.data = NULL;
    if (mcase == 11) args.params.means.data = NULL;
    if (mcase == 15) args.params.spread.data = NULL;
    const mas_gauss_align_args *ap = mcase == 8 ? NULL : &args;

    size_t need = soft ? mas_forward_sum_gaussian_cpu_workspace_size(ap, threads)
                       : mas_align_gaussian_cpu_workspace_size(ap, threads);
    mas_status plan = plan_status(ap);
    fz_check((need == 0) == (plan != MAS_OK), "workspace size %zu with plan status %d", need,
             (int)plan);
    if (plan == MAS_OK) {
        /* beyond 2^52 cells: SIZE_MAX (mas.h conventions) */
        double cells[2] = {(double)B * (double)T * (double)S,
                           (double)B * ((double)T + (double)S) * (2 * (double)J + 1)};
        for (int k = 0; k < 2; k++)
            if (cells[k] > 0x1p52 * 1.01)
                fz_check(need == SIZE_MAX, "workspace %zu for %g cells", need, cells[k]);
    }

    /* ---- the outputs ---- */
    /* path [B, T, S]; durations [B, >= T] and indices [B, >= S] */
    int path_ok = fz_cells(&dm) > 0 && fz_cells(&dm) <= MAX_PATH;
    int lin_ok = fz_dims_ok(&dm) && (double)B * ((double)T + 2) <= (double)MAX_PATH &&
                 (double)B * ((double)S + 2) <= (double)MAX_PATH;
    int32_t *durations = NULL, *indices = NULL;
    void *score = NULL, *log_z = NULL;
    int64_t dur_stride = 0, idx_stride = 0;
    mas_hard_outputs hout;
    mas_gauss_soft_outputs sout;
    memset(&hout, 0, sizeof hout);
    memset(&sout, 0, sizeof sout);
    if (!soft) {
        uint8_t pc = fz_u8(&r);
        int32_t path_dtype = mcase == 5 ? (pc % 2 ? 77 : -1) : (int32_t)(pc % MAS_DTYPE_COUNT_);
        if ((want & 1) && path_ok) {
            int64_t pd[3] = {B, T, S};
            if (mcase == 4) pd[pc % 3] = other(pd[pc % 3]);
            if (fz_cells(&(fz_dims){{pd[0], pd[1], pd[2]}}) > 0 &&
                fz_output_make(&path, &r, pd, path_dtype))
                hout.path = path.t;
        }
        if (lin_ok) {
            dur_stride = T + fz_range(&r, 0, 2);
            idx_stride = S + fz_range(&r, 0, 2);
        }
        if ((want & 2) && lin_ok) {
            size_t n = (size_t)((B - 1) * dur_stride + T);
            durations = (int32_t *)malloc(n * sizeof(int32_t));
            memset(durations, 0x5a, n * sizeof(int32_t));
        }
        if ((want & 4) && lin_ok) {
            size_t n = (size_t)((B - 1) * idx_stride + S);
            indices = (int32_t *)malloc(n * sizeof(int32_t));
            memset(indices, 0x5a, n * sizeof(int32_t));
        }
        if ((want & 8) && nb > 0) score = malloc((size_t)nb * acc);
        hout.durations = durations;
        hout.durations_stride = dur_stride;
        hout.indices = indices;
        hout.indices_stride = idx_stride;
        hout.score = score;
    } else {
        uint8_t gc = fz_u8(&r);
        int bad_g = gc % 3; /* which gradient a mismatch hits */
        int64_t gdims[3][3] = {{B, S, J}, {B, T, J}, {B, T, J}};
        int32_t gdt[3] = {acc_dtype, acc_dtype, acc_dtype};
        if (mcase == 4) gdims[bad_g][(gc >> 2) % 3] = other(gdims[bad_g][(gc >> 2) % 3]);
        if (mcase == 5) gdt[bad_g] = gc & 16 ? (acc_dtype ^ 1) : MAS_INT32;
        fz_view *gv[3] = {&gx, &gm, &gs};
        mas_tensor3 *gt[3] = {&sout.grad_x, &sout.grad_means, &sout.grad_spread};
        for (int k = 0; k < 3; k++) {
            if (!(want & (2 << k))) continue;
            int64_t *g = gdims[k];
            int64_t cells = fz_cells(&(fz_dims){{g[0], g[1], g[2]}});
            if (cells > 0 && (double)cells <= MAX_ELEMS && fz_output_make(gv[k], &r, g, gdt[k]))
                *gt[k] = gv[k]->t;
        }
        if ((want & 1) && nb > 0) log_z = malloc((size_t)nb * acc);
        sout.log_z = log_z;
    }
    const mas_hard_outputs *hop = mcase == 9 ? NULL : &hout;
    const mas_gauss_soft_outputs *sop = mcase == 9 ? NULL : &sout;

    fz_workspace ws;
    fz_workspace_make(&ws, &r, need);
    mas_status expect = soft ? soft_status(ap, sop, ws.alloc, ws.size, need)
                             : hard_status(ap, hop, ws.alloc, ws.size,
                                           /* below the full size: long-form, to the minimum */
                                           mas_align_gaussian_cpu_min_workspace_size(ap, threads));
    int64_t expect_item = -1;

    /* ---- the model's status: mas_gauss_coef_cpu on the same parameters ---- */
    void *coef = NULL;
    item_ref *refs = (item_ref *)calloc((size_t)nb + 1, sizeof(item_ref));
    if (expect == MAS_OK && !built) goto done; /* it would read what was not built */
    if (expect == MAS_OK) {
        const int64_t P = 2 * J + 1;
        coef = malloc((size_t)(MB * P * T) * acc);
        mas_tensor3 c = {coef, acc_dtype, 0, {MB, P, T}, {P * T, T, 1}};
        mas_error cerr;
        mas_status cst = mas_gauss_coef_cpu(&args.params, &c, 1, &cerr);
        int64_t plain = plainly_bad(&args.params);
        if (cst == MAS_OK) {
            fz_check(plain == INT64_MAX, "gauss_coef OK but Gaussian %lld is bad", (long long)plain);
        } else {
            fz_check(cst == MAS_ERR_BAD_MODEL && cerr.item >= 0 && cerr.item <= plain &&
                         cerr.item < MB * T,
                     "gauss_coef status %d item %lld, first plainly bad %lld", (int)cst,
                     (long long)cerr.item, (long long)plain);
            expect = MAS_ERR_BAD_MODEL;
            expect_item = cerr.item;
        }
    }

    /* ---- the items: lengths, then the unfused path ---- */
    int items = expect == MAS_OK;
    int64_t ref_cells = 0;
    for (int64_t b = 0; b < B && items; b++) {
        mas_status ls = fz_hard_length_status(x_len[b], y_len[b], T, S);
        if (ls != MAS_OK) {
            refs[b].known = 1;
            refs[b].st = ls;
            continue;
        }
        int64_t cells = x_len[b] * y_len[b];
        if (cells > REF_CELLS || ref_cells + cells > REF_TOTAL || b >= REF_ITEMS)
            continue; /* unknown */
        ref_cells += cells;
        unfused_item(&args, coef, b, soft, &refs[b]);
    }
    if (items) {
        /* the lowest failing item; an unknown item before it may fail too */
        int64_t b = 0;
        for (; b < B; b++)
            if (refs[b].known && refs[b].st != MAS_OK) break;
        expect = b < B ? refs[b].st : MAS_OK;
        expect_item = b < B ? b : -1;
    }

    fz_debug("fused %s: B=%lld T=%lld S=%lld J=%lld dtype %d params %d/%d/%d kind %d MB %lld "
             "weights %d moderate %d want %d mis %d threads %d ws %zu of %zu (mode %d), "
             "expect %d item %lld\n", soft ? "soft" : "hard", (long long)B, (long long)T,
             (long long)S, (long long)J, dtype, pdt, sdt, wdt, kind, (long long)MB, with_w,
             moderate, want, mcase, threads, ws.size, need, ws.mode, (int)expect,
             (long long)expect_item);
    mas_error err;
    mas_status st = soft ? mas_forward_sum_gaussian_cpu(ap, sop, ws.alloc, ws.size, threads, &err)
                         : mas_align_gaussian_cpu(ap, hop, ws.alloc, ws.size, threads, &err);
    fz_check_status(st, &err);
    fz_check_unchanged(&x, "x");
    fz_check_unchanged(&means, "means");
    fz_check_unchanged(&spread, "spread");
    fz_check_unchanged(&lw, "log_weights");
    /* an item without a reference, before the expected one, may be the one
     * that failed (with a value error) */
    if (items && (st == MAS_ERR_NONFINITE_VALUE || st == MAS_ERR_NO_FINITE_PATH) &&
        err.item >= 0 && err.item < B && !refs[err.item].known &&
        (expect_item < 0 || err.item < expect_item)) {
        expect = st;
        expect_item = err.item;
    }
    fz_check(st == expect, "status %d, expected %d (%s B=%lld T=%lld S=%lld J=%lld dtype=%d "
             "ws mode %d)", (int)st, (int)expect, soft ? "soft" : "hard", (long long)B,
             (long long)T, (long long)S, (long long)J, dtype, ws.mode);
    fz_check(err.item == expect_item, "err.item %lld, expected %lld", (long long)err.item,
             (long long)expect_item);
    if (!items) goto done;

    /* ---- outputs, item by item ---- */
    for (int64_t b = 0; b < B; b++) {
        const item_ref *rf = &refs[b];
        if (!rf->known) continue;
        int ok = rf->st == MAS_OK;
        int64_t X = ok ? x_len[b] : 0, Y = ok ? y_len[b] : 0;
        /* the float64 model of small items of moderate values */
        model64 m;
        memset(&m, 0, sizeof m);
        int level = 0;
        double mag = 0;
        if (fz_hard_length_status(x_len[b], y_len[b], T, S) == MAS_OK && b < MODEL_ITEMS &&
            x_len[b] * y_len[b] * J <= SMALL_WORK) {
            model64_load(&m, &args, b);
            level = model64_level(&m, &mag);
        }
        const double eps = acc == 8 ? 0x1p-52 : 0x1p-23;
        const int64_t YY = m.Y, XX = m.X;
        double tol = 16 * eps * ((double)(2 * J + 4) * YY + (double)YY * YY) * (mag + 1) +
                     (soft ? (acc == 8 ? 1e-12 : 1e-6) * (double)(XX + YY) : 0);
        double best64 = level ? dp64(&m, soft) : 0;
        fz_debug("item %lld: X %lld Y %lld status %d unfused %.17g level %d float64 %g\n",
                 (long long)b, (long long)x_len[b], (long long)y_len[b], (int)rf->st, rf->score,
                 level, best64);
        if (level) {
            /* moderate values: no NaN or +inf cell, so OK or no finite path */
            fz_check(rf->st == (best64 == -INFINITY ? MAS_ERR_NO_FINITE_PATH : MAS_OK),
                     "item %lld: status %d, the float64 DP gives %g", (long long)b,
                     (int)rf->st, best64);
        }

        if (!soft) {
            const int32_t *ri = rf->idx;
            int32_t *fidx = ok ? (int32_t *)malloc((size_t)Y * sizeof(int32_t)) : NULL;
            if (ok) memcpy(fidx, ri, (size_t)Y * sizeof(int32_t));
            if (indices) {
                const int32_t *ix = indices + b * idx_stride;
                for (int64_t j = 0; j < S; j++) {
                    if (j >= Y) {
                        fz_check(ix[j] == -1, "item %lld: indices[%lld] = %d beyond y_len",
                                 (long long)b, (long long)j, ix[j]);
                        continue;
                    }
                    int32_t prev = j ? ix[j - 1] : 0;
                    fz_check(ix[j] == prev || ix[j] == prev + 1, "item %lld: indices step %d -> %d",
                             (long long)b, prev, ix[j]);
                    fz_check(ix[j] == ri[j], "item %lld: indices[%lld] = %d, unfused %d",
                             (long long)b, (long long)j, ix[j], ri[j]);
                }
                if (ok) fz_check(ix[0] == 0 && ix[Y - 1] == X - 1,
                                 "item %lld: indices do not run from 0 to x_len-1", (long long)b);
            }
            if (durations) {
                const int32_t *du = durations + b * dur_stride;
                int64_t sum = 0;
                for (int64_t i = 0; i < T; i++) {
                    fz_check(i < X ? du[i] >= 1 : du[i] == 0, "item %lld: durations[%lld] = %d",
                             (long long)b, (long long)i, du[i]);
                    if (i < X) fz_check(du[i] == rf->dur[i], "item %lld: durations[%lld] = %d, "
                                        "unfused %d", (long long)b, (long long)i, du[i], rf->dur[i]);
                    sum += du[i];
                }
                fz_check(sum == Y, "item %lld: durations sum to %lld, y_len %lld", (long long)b,
                         (long long)sum, (long long)Y);
                int64_t j = 0; /* durations and indices: the same path */
                for (int64_t i = 0; i < X && indices; i++)
                    for (int32_t k = 0; k < du[i]; k++, j++)
                        fz_check(indices[b * idx_stride + j] == i, "item %lld: durations "
                                 "disagree with indices at frame %lld", (long long)b, (long long)j);
            }
            if (score) {
                double sc = load_acc(score, acc_dtype, b);
                if (!ok) fz_check(sc == -INFINITY, "item %lld failed, score %g", (long long)b, sc);
                else fz_check(same_real(sc, rf->score), "item %lld: score %.17g, unfused %.17g",
                              (long long)b, sc, rf->score);
                if (ok && level)
                    fz_check(fabs(sc - best64) <= tol, "item %lld: score %.17g, float64 DP %.17g "
                             "(tol %g)", (long long)b, sc, best64, tol);
            }
            if (hout.path.data) {
                /* one 1 per frame j < y_len, on the unfused path's token */
                for (int64_t j = 0; j < S; j++) {
                    int64_t ones = 0, at = -1;
                    for (int64_t i = 0; i < T; i++) {
                        double p = fz_at(&path.t, b, i, j);
                        fz_check(p == 0 || p == 1, "item %lld: path value %g", (long long)b, p);
                        if (p == 1) { ones++; at = i; }
                    }
                    fz_check(ones == (j < Y), "item %lld: frame %lld has %lld ones", (long long)b,
                             (long long)j, (long long)ones);
                    if (j < Y) fz_check(at == ri[j], "item %lld: path at frame %lld on token %lld, "
                                        "unfused %d", (long long)b, (long long)j, (long long)at, ri[j]);
                }
            }
            /* the returned path's float64 score is the best's, within the tolerance */
            if (ok && level && best64 > -INFINITY) {
                double on = 0;
                for (int64_t j = 0; j < Y; j++) on += cell64(&m, fidx[j], j);
                fz_check(on >= best64 - 2 * tol && on <= best64 + tol, "item %lld: the path "
                         "scores %.17g in float64, the best %.17g (tol %g)", (long long)b, on,
                         best64, tol);
            }
            free(fidx);
        } else {
            double lz = log_z ? load_acc(log_z, acc_dtype, b) : 0;
            if (log_z) {
                if (!ok) fz_check(lz == -INFINITY, "item %lld failed, log_z %g", (long long)b, lz);
                else {
                    /* mas.h section 5: an overflowing sum is +inf, never NaN */
                    fz_check(lz == lz, "item %lld: log_z NaN", (long long)b);
                    fz_check(same_real(lz, rf->score), "item %lld: log_z %.17g, unfused %.17g",
                             (long long)b, lz, rf->score);
                }
                if (ok && level)
                    fz_check(fabs(lz - best64) <= tol, "item %lld: log_z %.17g, float64 DP "
                             "%.17g (tol %g)", (long long)b, lz, best64, tol);
            }
            /* gradients: zeros beyond the lengths (everywhere for a failed item) */
            const mas_tensor3 *g3[3] = {&sout.grad_x, &sout.grad_means, &sout.grad_spread};
            static const char *const gname[3] = {"grad_x", "grad_means", "grad_spread"};
            for (int k = 0; k < 3; k++) {
                if (!g3[k]->data) continue;
                int64_t n = k == 0 ? S : T, in = k == 0 ? Y : X;
                for (int64_t i = 0; i < n; i++)
                    for (int64_t d = 0; d < J; d++) {
                        double g = fz_at(g3[k], b, i, d);
                        if (i >= in) fz_check(g == 0, "item %lld: %s(%lld,%lld) = %g beyond the "
                                              "lengths", (long long)b, gname[k], (long long)i,
                                              (long long)d, g);
                        else if (level) fz_check(isfinite(g), "item %lld: %s(%lld,%lld) = %g",
                                                 (long long)b, gname[k], (long long)i,
                                                 (long long)d, g);
                    }
            }
            if (ok && level && best64 > -INFINITY) {
                /* shift: v depends on x - mu only, so per dimension the sums of
                 * d/dx and d/dmu cancel; scale: x, mu and the std times c adds
                 * -J log c per cell, so sum x gx + mu gm + d/dlog std = -J Y */
                double maxc = 0, maxs = 0;
                for (int64_t s = 0; s < X; s++)
                    for (int64_t t = 0; t < Y; t++) {
                        double cs = J;
                        for (int64_t d = 0; d < J; d++) {
                            double xv = m.x[t * J + d], mu = m.mu[s * J + d];
                            double inv = 1 / var_of(&m, m.sp[s * J + d]), diff = xv - mu;
                            double c = fabs(diff) * inv;
                            if (c > maxc) maxc = c;
                            cs += c * (fabs(xv) + fabs(mu) + fabs(diff));
                        }
                        if (cs > maxs) maxs = cs;
                    }
                /* the outputs' rounding: relative, and absolute among the
                 * subnormals (one step per stored value) */
                const double rel = acc == 8 ? 1e-12 : 0x1p-21;
                const double tiny = acc == 8 ? 0x1p-1074 : 0x1p-149;
                if (sout.grad_x.data && sout.grad_means.data)
                    for (int64_t d = 0; d < J; d++) {
                        double sum = 0, abs_sum = 0;
                        for (int64_t t = 0; t < Y; t++) {
                            double g = fz_at(&sout.grad_x, b, t, d);
                            sum += g;
                            abs_sum += fabs(g);
                        }
                        for (int64_t s = 0; s < X; s++) {
                            double g = fz_at(&sout.grad_means, b, s, d);
                            sum += g;
                            abs_sum += fabs(g);
                        }
                        fz_check(fabs(sum) <= rel * (abs_sum + (double)Y * maxc) * 4 +
                                                  tiny * (double)(X + Y),
                                 "item %lld dim %lld: grad_x and grad_means sum to %.9g, not 0 "
                                 "(of %.9g)", (long long)b, (long long)d, sum, abs_sum);
                    }
                /* gamma from the accumulator's alpha + beta - v - log_z: its
                 * relative error, which breaks the per-frame sum of 1 */
                double delta = 32 * eps * ((double)(Y + 2) * (double)Y * (mag + 1) + fabs(best64) + 1) +
                               (acc == 8 ? 0 : 1e-6 * (double)Y);
                if (sout.grad_x.data && sout.grad_means.data && sout.grad_spread.data &&
                    delta < 0.25) {
                    double sum = 0, abs_sum = 0;
                    for (int64_t t = 0; t < Y; t++)
                        for (int64_t d = 0; d < J; d++) {
                            double v = m.x[t * J + d] * fz_at(&sout.grad_x, b, t, d);
                            sum += v;
                            abs_sum += fabs(v);
                        }
                    for (int64_t s = 0; s < X; s++)
                        for (int64_t d = 0; d < J; d++) {
                            double c = m.variance ? 2 * m.sp[s * J + d] : 1;
                            double v = m.mu[s * J + d] * fz_at(&sout.grad_means, b, s, d) +
                                       c * fz_at(&sout.grad_spread, b, s, d);
                            sum += v;
                            abs_sum += fabs(v);
                        }
                    double want_sum = -(double)(J * Y);
                    double t_sc = delta * (double)(J * Y) + rel * 4 * (abs_sum + (double)Y * maxs) +
                                  64 * tiny * (double)((Y + 2 * X) * J);
                    fz_check(fabs(sum - want_sum) <= t_sc, "item %lld: scale identity %.9g, "
                             "expected %.9g (tol %g)", (long long)b, sum, want_sum, t_sc);
                }
                /* float64, tiny: central differences of the float64 log-sum */
                if (dtype == MAS_FLOAT64 && level == 2 && X * Y <= FD_CELLS &&
                    (Y + 2 * X) * J <= FD_PARAMS) {
                    double *arr[3] = {m.x, m.mu, m.sp};
                    int64_t len[3] = {Y, X, X};
                    fz_debug("item %lld: central differences\n", (long long)b);
                    for (int k = 0; k < 3; k++) {
                        if (!g3[k]->data) continue;
                        for (int64_t i = 0; i < len[k]; i++)
                            for (int64_t d = 0; d < J; d++) {
                                double *p = arr[k] + i * J + d, keep = *p;
                                double h = 1e-6 * (1 + fabs(keep));
                                *p = keep + h;
                                double up = dp64(&m, 1);
                                *p = keep - h;
                                double down = dp64(&m, 1);
                                *p = keep;
                                double fd = (up - down) / (2 * h);
                                double g = fz_at(g3[k], b, i, d);
                                /* truncation as fuzz_attention_backward, plus the
                                 * rounding of two float64 sums of Y cells */
                                double t_fd = 1e-4 * (1 + fabs(fd)) * (double)(X + Y) +
                                              4 * DBL_EPSILON * (1 + (double)Y * mag) / h;
                                fz_check(fabs(g - fd) <= t_fd, "item %lld (X %lld Y %lld J %lld "
                                         "kind %d): %s(%lld,%lld) = %.9g, central difference "
                                         "%.9g", (long long)b, (long long)X, (long long)Y,
                                         (long long)J, kind, gname[k], (long long)i,
                                         (long long)d, g, fd);
                            }
                    }
                }
            }
        }
        model64_free(&m);
    }

done:
    for (int64_t b = 0; b < nb; b++) {
        free(refs[b].idx);
        free(refs[b].dur);
    }
    free(refs);
    free(coef);
    fz_workspace_free(&ws);
    free(durations);
    free(indices);
    free(score);
    free(log_z);
    fz_view_free(&path);
    fz_view_free(&gx);
    fz_view_free(&gm);
    fz_view_free(&gs);
    fz_view_free(&x);
    fz_view_free(&means);
    fz_view_free(&spread);
    fz_view_free(&lw);
    free(rows);
    free(cols);
    free(x_len);
    free(y_len);
    return 0;
}
