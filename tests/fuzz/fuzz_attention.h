/* Shared by the monotonic-attention targets (forward, backward): decoding of
 * the call's arguments and a float64 reference of log phi written from the
 * recurrences of mas.h section 5. */
#ifndef MAS_FUZZ_ATTENTION_H
#define MAS_FUZZ_ATTENTION_H

#include "fuzz_common.h"

typedef struct att_args {
    fz_dims dm;
    int64_t B, N, M;
    int32_t dtype, accum, threads, kind;
    int64_t *n_len, *m_len;   /* NULL: full lengths */
    int64_t *rows, *cols;     /* cells the call may read, per item */
    fz_view logits;
    size_t need;              /* workspace size */
    int built;                /* 0: the input could not be built, skip */
} att_args;

static inline double att_log_sigmoid(double z) {
    return z >= 0 ? -log1p(exp(-z)) : z - log1p(exp(z));
}

static inline double att_lse(double a, double b) {
    double m = a > b ? a : b;
    if (m == -INFINITY) return -INFINITY;
    return m + log(exp(a - m) + exp(b - m));
}

/* log phi of item b over n x m into ref[i*m + j]; x(i, j) gives a logit. */
static inline void att_reference(int32_t kind, const mas_tensor3 *x, int64_t b, int64_t n,
                                 int64_t m, const double *delta, int64_t delta_at,
                                 double *ref) {
#define LOGIT(i, j) (fz_at(x, b, i, j) + ((i) * m + (j) == delta_at ? *delta : 0))
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < m; j++) {
            double v;
            if (i == 0 && j == 0) v = 0;
            else if (kind == MAS_ATTENTION_ONE_TO_MANY) {
                if (i == 0) v = -INFINITY;
                else v = att_lse(ref[(i - 1) * m + j] + att_log_sigmoid(LOGIT(i - 1, j)),
                                 j ? ref[(i - 1) * m + j - 1] + att_log_sigmoid(-LOGIT(i - 1, j - 1))
                                   : -INFINITY);
            } else {
                v = att_lse(j ? ref[i * m + j - 1] + att_log_sigmoid(LOGIT(i, j - 1)) : -INFINITY,
                            i ? ref[(i - 1) * m + j] + att_log_sigmoid(-LOGIT(i - 1, j))
                              : -INFINITY);
            }
            ref[i * m + j] = v;
        }
#undef LOGIT
}

static inline mas_status att_length_status(const att_args *a, int64_t b, int64_t *n,
                                           int64_t *m) {
    *n = a->n_len ? a->n_len[b] : a->N;
    *m = a->m_len ? a->m_len[b] : a->M;
    return *n < 1 || *m < 1 || *n > a->N || *m > a->M ? MAS_ERR_BAD_LENGTH : MAS_OK;
}

/* Decodes everything but the op's own arrays. Returns 0 to skip the input. */
static inline int att_decode(att_args *a, fz_reader *r) {
    memset(a, 0, sizeof *a);
    a->dm = fz_read_dims(r);
    a->B = a->dm.d[0];
    a->N = a->dm.d[1];
    a->M = a->dm.d[2];
    a->dtype = fz_float_dtype(r);
    a->accum = fz_accum(a->dtype);
    a->threads = fz_threads(r);
    uint8_t k = fz_u8(r);
    a->kind = k < 250 ? k % 2 : (k % 2 ? 2 : -1);
    a->need = mas_attention_cpu_workspace_size(a->B, a->N, a->M, (mas_dtype)a->dtype, a->threads);
    if (!fz_dims_ok(&a->dm)) fz_check(a->need == 0, "workspace size %zu for bad dims", a->need);
    if (a->B > 4096) return 0;
    int64_t nb = a->B > 0 ? a->B : 0;
    uint8_t lc = fz_u8(r);
    fz_lengths(r, a->B, a->N, a->M, 0, &a->n_len, &a->m_len);
    if (lc < 40) { free(a->n_len); a->n_len = NULL; }
    if (lc >= 20 && lc < 60) { free(a->m_len); a->m_len = NULL; }
    a->rows = (int64_t *)calloc((size_t)nb + 1, sizeof(int64_t));
    a->cols = (int64_t *)calloc((size_t)nb + 1, sizeof(int64_t));
    fz_read_extent(nb, a->n_len, a->m_len, a->N, a->M, a->rows, a->cols);
    if (!fz_view_make(&a->logits, r, a->dm.d, a->dtype, 1, nb, a->rows, a->cols)) return 0;
    fz_fill(&a->logits, r);
    a->built = 1;
    return 1;
}

static inline void att_free(att_args *a) {
    fz_view_free(&a->logits);
    free(a->n_len);
    free(a->m_len);
    free(a->rows);
    free(a->cols);
}

/* The call-level status both ops share (before their own arrays). */
static inline mas_status att_call_status(const att_args *a, const fz_workspace *ws) {
    int is_float = a->dtype == MAS_FLOAT32 || a->dtype == MAS_FLOAT64 ||
                   a->dtype == MAS_FLOAT16 || a->dtype == MAS_BFLOAT16;
    if (!ws->alloc) return MAS_ERR_NULL_POINTER;
    if (a->kind != 0 && a->kind != 1) return MAS_ERR_BAD_ARGUMENT;
    if (!is_float) return MAS_ERR_BAD_DTYPE;
    if (!fz_dims_ok(&a->dm)) return MAS_ERR_BAD_SHAPE;
    if (ws->size < a->need) return MAS_ERR_WORKSPACE_TOO_SMALL;
    return MAS_OK;
}

/* An array of the logits' shape: dtype `want` mostly, sometimes another
 * or a shape off by one; *expect gets the status it must cause. An input
 * (any float dtype accepted) is built over the lengths unless `whole`. */
static inline int att_array(fz_view *v, fz_reader *r, const att_args *a, int32_t want,
                            int as_input, int whole, mas_status *expect) {
    uint8_t c = fz_u8(r);
    int64_t d[3] = {a->B, a->N, a->M};
    int32_t dtype = want;
    if (c >= 245 && c < 250) {
        dtype = c % 2 ? MAS_INT32 : (want == MAS_FLOAT64 ? MAS_FLOAT32 : MAS_FLOAT64);
        if (*expect == MAS_OK && (as_input ? dtype == MAS_INT32 : 1)) *expect = MAS_ERR_BAD_DTYPE;
    } else if (c >= 250 && fz_cells(&a->dm) > 0) {
        d[c % 3] += 1;
        if (*expect == MAS_OK) *expect = MAS_ERR_BAD_SHAPE;
    } else if (as_input && c >= 200) {
        dtype = c % 4 == 0 ? MAS_FLOAT32 : c % 4 == 1 ? MAS_FLOAT64 : c % 4 == 2 ? MAS_FLOAT16
                                                                                : MAS_BFLOAT16;
    }
    if (!fz_dims_ok(&a->dm)) { /* refused before it is read: a token buffer */
        memset(v, 0, sizeof *v);
        v->t.dtype = dtype;
        for (int k = 0; k < 3; k++) v->t.dim[k] = d[k];
        v->bytes = 64;
        v->alloc = (uint8_t *)calloc(1, 64);
        v->t.data = v->alloc;
        return 1;
    }
    if (fz_cells(&a->dm) < 0) return 0;
    int64_t nb = a->B;
    if (as_input && !whole) return fz_view_make(v, r, d, dtype, 1, nb, a->rows, a->cols);
    return fz_output_make(v, r, d, dtype);
}

/* Outside the lengths the dense outputs hold `fill`. */
static inline void att_check_outside(const mas_tensor3 *t, int64_t b, int64_t n, int64_t m,
                                     double fill, const char *what) {
    for (int64_t i = 0; i < t->dim[1]; i++)
        for (int64_t j = 0; j < t->dim[2]; j++) {
            if (i < n && j < m) continue;
            double x = fz_at(t, b, i, j);
            fz_check(x == fill, "item %lld: %s(%lld,%lld) = %g outside the lengths (%lld, %lld)",
                     (long long)b, what, (long long)i, (long long)j, x, (long long)n,
                     (long long)m);
        }
}

#endif
