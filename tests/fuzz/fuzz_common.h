/* The shared decoder of the fuzz targets: turns libFuzzer's bytes into the
 * arguments of a libmas call (sizes, dtypes, strided views, lengths, values,
 * thread counts, workspaces) and holds the checks every target repeats.
 *
 * Buffers are sized exactly as the call may address them: an input view gets
 * one allocation spanning the elements inside the per-item lengths (what the
 * header lets the library read), an output view the elements of the whole
 * view (outputs are written in full), so ASan flags any stray access. Each
 * input is copied after it is filled and compared after the call.
 *
 * A new target (likelihoods, topologies) includes this header, decodes its
 * arguments with the fz_* functions and calls fz_fail() on a broken promise.
 * Plain C11; also compiled by the CUDA replay program (tests/fuzz/replay_cuda.c)
 * without libFuzzer. */
#ifndef MAS_FUZZ_COMMON_H
#define MAS_FUZZ_COMMON_H

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mas.h"

/* Largest buffer a target allocates (bytes); bigger views are not built. */
#define FZ_MAX_BYTES ((size_t)16 << 20)
/* Largest element span a view may have: keeps every offset * element size
 * inside int64 (hostile strides are as hostile as the promise allows). */
#define FZ_MAX_SPAN ((int64_t)1 << 56)

/* ---- failure --------------------------------------------------------- */

#define fz_fail(...)                                                       \
    do {                                                                   \
        fprintf(stderr, "fuzz check failed at %s:%d: ", __FILE__, __LINE__); \
        fprintf(stderr, __VA_ARGS__);                                      \
        fprintf(stderr, "\n");                                             \
        abort();                                                           \
    } while (0)
#define fz_check(cond, ...)             \
    do {                                \
        if (!(cond)) fz_fail(__VA_ARGS__); \
    } while (0)

/* FZ_DEBUG=1 in the environment: the targets describe each call on stderr. */
#define fz_debug(...)                                              \
    do {                                                           \
        if (getenv("FZ_DEBUG")) fprintf(stderr, __VA_ARGS__);      \
    } while (0)

/* ---- reading the input ----------------------------------------------- */

/* Bytes of the input, then (when they run out) a generator seeded by them,
 * so that short inputs still decode to whole calls and every input decodes
 * the same way every time. */
typedef struct fz_reader {
    const uint8_t *p;
    size_t n, at;
    uint64_t state;
} fz_reader;

static inline fz_reader fz_reader_init(const uint8_t *data, size_t size) {
    fz_reader r = {data, size, 0, 0x9e3779b97f4a7c15ull};
    for (size_t k = 0; k < size; k++) r.state = (r.state ^ data[k]) * 0x100000001b3ull;
    return r;
}

static inline uint8_t fz_u8(fz_reader *r) {
    if (r->at < r->n) return r->p[r->at++];
    r->state = r->state * 6364136223846793005ull + 1442695040888963407ull;
    return (uint8_t)(r->state >> 56);
}

static inline uint64_t fz_u64(fz_reader *r) {
    uint64_t x = 0;
    for (int k = 0; k < 8; k++) x = x << 8 | fz_u8(r);
    return x;
}

/* Uniform-ish in [lo, hi] (hi - lo < 2^32). */
static inline int64_t fz_range(fz_reader *r, int64_t lo, int64_t hi) {
    uint32_t x = (uint32_t)fz_u8(r) << 8 | fz_u8(r);
    x = x << 16 | (uint32_t)fz_u8(r) << 8 | fz_u8(r);
    return lo + (int64_t)(x % (uint64_t)(hi - lo + 1));
}

/* ---- sizes ----------------------------------------------------------- */

/* One dimension: mostly small, sometimes 0 or negative (BAD_SHAPE), medium,
 * or huge (with buffers sized by the lengths, not the dims). */
static inline int64_t fz_dim(fz_reader *r, int64_t small_max) {
    uint8_t c = fz_u8(r);
    if (c < 200) return 1 + c % small_max;
    if (c < 215) return fz_range(r, 1, 300);
    if (c < 220) return 0;
    if (c < 223) return -fz_range(r, 1, 5);
    if (c < 240) return (int64_t)1 << fz_range(r, 20, 40);
    if (c < 250) return ((int64_t)1 << fz_range(r, 31, 62)) + fz_range(r, -1, 1);
    return INT64_MAX;
}

/* B, T, S (or B, N, M). */
typedef struct fz_dims {
    int64_t d[3];
} fz_dims;

static inline fz_dims fz_read_dims(fz_reader *r) {
    fz_dims s;
    s.d[0] = fz_dim(r, 4);
    s.d[1] = fz_dim(r, 12);
    s.d[2] = fz_dim(r, 16);
    return s;
}

static inline int fz_dims_ok(const fz_dims *s) {
    return s->d[0] >= 1 && s->d[1] >= 1 && s->d[2] >= 1;
}

/* Cells of a whole view, or -1 beyond FZ_MAX_BYTES/1 (it cannot be built). */
static inline int64_t fz_cells(const fz_dims *s) {
    if (!fz_dims_ok(s)) return 0;
    int64_t n = 1;
    for (int k = 0; k < 3; k++) {
        if (s->d[k] > (int64_t)FZ_MAX_BYTES / n) return -1;
        n *= s->d[k];
    }
    return n;
}

/* ---- dtypes ---------------------------------------------------------- */

static inline int32_t fz_float_dtype(fz_reader *r) {
    static const int32_t f[4] = {MAS_FLOAT32, MAS_FLOAT64, MAS_FLOAT16, MAS_BFLOAT16};
    uint8_t c = fz_u8(r);
    if (c < 250) return f[c % 4];
    return c % 2 ? MAS_INT32 : 99; /* not a value dtype; not a dtype at all */
}

static inline int32_t fz_accum(int32_t dtype) {
    return dtype == MAS_FLOAT64 ? MAS_FLOAT64 : MAS_FLOAT32;
}

static inline size_t fz_dtype_size(int32_t dtype) {
    switch (dtype) {
    case MAS_FLOAT64: case MAS_INT64: return 8;
    case MAS_FLOAT32: case MAS_INT32: return 4;
    case MAS_FLOAT16: case MAS_BFLOAT16: return 2;
    case MAS_UINT8: return 1;
    default: return 4; /* unknown dtypes: buffers as for float32 */
    }
}

/* Element conversions written here (not the library's) for the references. */
static inline double fz_half_to_double(uint16_t h) {
    int e = (h >> 10) & 0x1f, m = h & 0x3ff;
    double x = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(m + 1024, e - 25);
    return h & 0x8000 ? -x : x;
}

static inline double fz_bf16_to_double(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static inline double fz_load(const void *base, int32_t dtype, int64_t off) {
    const char *p = (const char *)base + off * (int64_t)fz_dtype_size(dtype);
    switch (dtype) {
    case MAS_FLOAT32: { float f; memcpy(&f, p, 4); return f; }
    case MAS_FLOAT64: { double d; memcpy(&d, p, 8); return d; }
    case MAS_FLOAT16: { uint16_t h; memcpy(&h, p, 2); return fz_half_to_double(h); }
    case MAS_BFLOAT16: { uint16_t h; memcpy(&h, p, 2); return fz_bf16_to_double(h); }
    case MAS_INT32: { int32_t i; memcpy(&i, p, 4); return i; }
    case MAS_INT64: { int64_t i; memcpy(&i, p, 8); return (double)i; }
    case MAS_UINT8: return (uint8_t)*p;
    default: return 0;
    }
}

/* ---- values ---------------------------------------------------------- */

/* Bit patterns of one element: an ordinary value most of the time, else
 * NaN, +-inf, huge, or subnormal; `special` (0..255) raises the odds. */
static inline uint64_t fz_value_bits(fz_reader *r, int32_t dtype, uint8_t special) {
    uint8_t c = fz_u8(r);
    int kind = c < 255 - special / 2 ? 0 : 1 + c % 7; /* 0: ordinary */
    double x;
    switch (kind) {
    case 0: x = ((int)(fz_u8(r) % 129) - 64) / 8.0; break;
    case 1: x = NAN; break;
    case 2: x = INFINITY; break;
    case 3: case 4: x = -INFINITY; break;
    case 5: x = c % 2 ? 6e4 : -6e4; break; /* near half's max; huge for f32/f64 below */
    case 6: x = 0; break;                  /* subnormal below */
    default: x = 1e300; break;
    }
    switch (dtype) {
    case MAS_FLOAT64: {
        if (kind == 5) x = c % 2 ? 1e300 : -1e300;
        if (kind == 6) x = 4.9e-324;
        if (kind == 7) x = DBL_MAX;
        uint64_t u;
        memcpy(&u, &x, 8);
        return u;
    }
    case MAS_FLOAT32: {
        float f = (float)x;
        if (kind == 5) f = c % 2 ? 3e38f : -3e38f;
        if (kind == 6) f = 1e-45f;
        if (kind == 7) f = -3.4e38f;
        uint32_t u;
        memcpy(&u, &f, 4);
        return u;
    }
    case MAS_BFLOAT16: {
        float f = (float)x;
        if (kind == 5) f = c % 2 ? 3e38f : -3e38f;
        uint32_t u;
        memcpy(&u, &f, 4);
        if (kind == 6) return 0x0001;
        if (kind == 7) return 0x7f7f;
        return u >> 16;
    }
    case MAS_FLOAT16: {
        if (kind == 1) return 0x7e00;
        if (kind == 2) return 0x7c00;
        if (kind == 3 || kind == 4) return 0xfc00;
        if (kind == 5) return c % 2 ? 0x7bff : 0xfbff;
        if (kind == 6) return 0x0001;
        if (kind == 7) return 0x7bff;
        /* ordinary: k/8 with |k| <= 64, exact in half */
        if (x == 0) return 0;
        uint16_t sign = x < 0 ? 0x8000 : 0;
        int e;
        double m = frexp(fabs(x), &e); /* x = m 2^e, m in [0.5, 1) */
        return (uint64_t)(sign | (uint16_t)((e - 1 + 15) << 10) |
                          (uint16_t)((m * 2 - 1) * 1024));
    }
    default:
        return fz_u8(r);
    }
}

static inline void fz_store_bits(void *p, size_t size, uint64_t bits) {
    switch (size) {
    case 1: { uint8_t v = (uint8_t)bits; memcpy(p, &v, 1); } break;
    case 2: { uint16_t v = (uint16_t)bits; memcpy(p, &v, 2); } break;
    case 4: { uint32_t v = (uint32_t)bits; memcpy(p, &v, 4); } break;
    default: memcpy(p, &bits, 8); break;
    }
}

/* ---- views ----------------------------------------------------------- */

/* A strided view and the one allocation behind it. */
typedef struct fz_view {
    mas_tensor3 t;
    uint8_t *alloc;   /* malloc'd, exactly `bytes` long (NULL: no buffer) */
    size_t bytes;
    uint8_t *copy;    /* inputs: the contents before the call */
} fz_view;

/* Strides of a view of dims d: contiguous, transposed, padded, reversed,
 * zero (inputs only: an output must not alias itself), or hostile (any
 * small value on each axis, or a huge one on an axis of size 1). */
static inline void fz_strides(fz_reader *r, const int64_t d[3], int allow_zero, int64_t s[3]) {
    /* dims beyond 2^28 give strides that fz_span refuses unless their axis is
     * never walked (one item, or lengths far below the dims) */
    int64_t T = d[1] < 1 ? 1 : d[1] > ((int64_t)1 << 28) ? (int64_t)1 << 28 : d[1];
    int64_t S = d[2] < 1 ? 1 : d[2] > ((int64_t)1 << 28) ? (int64_t)1 << 28 : d[2];
    uint8_t c = fz_u8(r) % (allow_zero ? 7 : 5);
    int64_t pad = fz_range(r, 0, 3);
    s[2] = 1; s[1] = S; s[0] = T * S;
    switch (c) {
    case 0: break;                                   /* contiguous */
    case 1: s[1] = 1; s[2] = T; break;               /* transposed (bst) */
    case 2: s[1] = S + pad; s[0] = T * (S + pad) + pad; break; /* padded */
    case 3: s[2] = -1; if (pad & 1) s[1] = -S; if (pad & 2) s[0] = -T * S; break;
    case 4: s[0] = 2 * T * S * (int64_t)fz_range(r, 1, 3); s[1] = -2 * S; break;
    case 5: s[fz_u8(r) % 3] = 0; break;              /* a broadcast axis */
    default:                                         /* hostile */
        for (int k = 0; k < 3; k++) {
            uint8_t h = fz_u8(r);
            s[k] = h < 200 ? (int64_t)(h % 41) - 20
                 : (d[k] == 1 ? (h % 2 ? INT64_MAX : INT64_MIN + 1) : s[k]);
        }
    }
}

/* Element offsets [lo, hi] of the cells b < nb, i < rows[b], j < cols[b];
 * 0 when the span exceeds FZ_MAX_SPAN or overflows, else 1 (empty: lo > hi). */
static inline int fz_span(const mas_tensor3 *t, int64_t nb, const int64_t *rows,
                          const int64_t *cols, int64_t *lo, int64_t *hi) {
    *lo = INT64_MAX;
    *hi = INT64_MIN;
    for (int64_t b = 0; b < nb; b++) {
        int64_t n[3] = {b, (rows ? rows[b] : t->dim[1]) - 1, (cols ? cols[b] : t->dim[2]) - 1};
        if (n[1] < 0 || n[2] < 0) continue;
        int64_t a = 0, z = 0;
        for (int k = 0; k < 3; k++) {
            int64_t s = t->stride[k], e;
            if (n[k] == 0 || s == 0) continue;
            if (s > FZ_MAX_SPAN || s < -FZ_MAX_SPAN || n[k] > FZ_MAX_SPAN / (s < 0 ? -s : s))
                return 0;
            e = n[k] * s;
            if (e < 0) a += e; else z += e;
            if (a < -FZ_MAX_SPAN || z > FZ_MAX_SPAN) return 0;
        }
        if (a < *lo) *lo = a;
        if (z > *hi) *hi = z;
    }
    return 1;
}

/* Builds a view of dims d and dtype; the buffer spans the cells b < nb,
 * i < rows[b], j < cols[b] (rows/cols NULL: the whole dims). Returns 0 when
 * it cannot be built (too big). */
static inline int fz_view_make(fz_view *v, fz_reader *r, const int64_t d[3], int32_t dtype,
                               int allow_zero, int64_t nb, const int64_t *rows,
                               const int64_t *cols) {
    memset(v, 0, sizeof *v);
    v->t.dtype = dtype;
    for (int k = 0; k < 3; k++) v->t.dim[k] = d[k];
    fz_strides(r, d, allow_zero, v->t.stride);
    int64_t lo, hi;
    if (!fz_span(&v->t, nb, rows, cols, &lo, &hi)) return 0;
    size_t size = fz_dtype_size(dtype);
    if (lo > hi) { lo = 0; hi = 0; } /* nothing addressed: one element */
    if ((uint64_t)(hi - lo + 1) > FZ_MAX_BYTES / size) return 0;
    v->bytes = (size_t)(hi - lo + 1) * size;
    v->alloc = (uint8_t *)malloc(v->bytes);
    if (!v->alloc) return 0;
    memset(v->alloc, 0xa5, v->bytes);
    v->t.data = v->alloc - lo * (int64_t)size;
    return 1;
}

/* A whole-view output (written in full). */
static inline int fz_output_make(fz_view *v, fz_reader *r, const int64_t d[3], int32_t dtype) {
    return fz_view_make(v, r, d, dtype, 0, d[0], NULL, NULL);
}

/* Fills an input's whole buffer with values of its dtype, optionally turns
 * rows of it to -inf, then keeps a copy. */
static inline void fz_fill(fz_view *v, fz_reader *r) {
    size_t size = fz_dtype_size(v->t.dtype), n = v->bytes / size;
    uint8_t special = fz_u8(r);
    for (size_t k = 0; k < n; k++)
        fz_store_bits(v->alloc + k * size, size, fz_value_bits(r, v->t.dtype, special));
    uint8_t rows = fz_u8(r);
    if (rows > 230 && n > 0) { /* a -inf row: a stretch of the buffer */
        size_t start = fz_range(r, 0, (int64_t)n - 1), len = fz_range(r, 1, 16);
        uint64_t ninf = v->t.dtype == MAS_FLOAT64 ? 0xfff0000000000000ull
                      : v->t.dtype == MAS_FLOAT32 ? 0xff800000u
                      : v->t.dtype == MAS_FLOAT16 ? 0xfc00u : 0xff80u;
        for (size_t k = start; k < n && k < start + len; k++)
            fz_store_bits(v->alloc + k * size, size, ninf);
    }
    v->copy = (uint8_t *)malloc(v->bytes ? v->bytes : 1);
    memcpy(v->copy, v->alloc, v->bytes);
}

static inline void fz_check_unchanged(const fz_view *v, const char *what) {
    if (v->alloc && v->copy) fz_check(memcmp(v->alloc, v->copy, v->bytes) == 0,
                                      "%s was modified", what);
}

static inline void fz_view_free(fz_view *v) {
    free(v->alloc);
    free(v->copy);
    memset(v, 0, sizeof *v);
}

/* Element (b, i, j) of a view. */
static inline double fz_at(const mas_tensor3 *t, int64_t b, int64_t i, int64_t j) {
    return fz_load(t->data, t->dtype, b * t->stride[0] + i * t->stride[1] + j * t->stride[2]);
}

/* ---- lengths --------------------------------------------------------- */

/* One length against its dim: valid most of the time; else 0, negative,
 * beyond the dim, or extreme. */
static inline int64_t fz_length(fz_reader *r, int64_t dim) {
    uint8_t c = fz_u8(r);
    int64_t cap = dim < 64 ? dim : 64;
    if (c < 215 && cap >= 1) return fz_range(r, 1, cap);
    if (c < 225) return cap >= 1 && c % 2 ? cap : 0;
    if (c < 232) return -fz_range(r, 1, 3);
    if (c < 240) return dim < INT64_MAX - 3 ? dim + fz_range(r, 1, 3) : dim;
    if (c < 248) return c % 2 ? INT64_MAX : INT64_MIN;
    return c % 2 ? dim : fz_range(r, 0, 4);
}

/* Lengths x_len (against dim1) and y_len (against dim2) of B items; with
 * `ordered` a valid pair keeps x <= y most of the time (x_len > y_len is
 * still drawn). Returns malloc'd [B] arrays, exactly B long. */
static inline void fz_lengths(fz_reader *r, int64_t B, int64_t dim1, int64_t dim2, int ordered,
                              int64_t **x_len, int64_t **y_len) {
    size_t n = B > 0 ? (size_t)B : 1;
    *x_len = (int64_t *)malloc(n * sizeof(int64_t));
    *y_len = (int64_t *)malloc(n * sizeof(int64_t));
    for (int64_t b = 0; b < B; b++) {
        int64_t x = fz_length(r, dim1), y = fz_length(r, dim2);
        if (ordered && x > y && x >= 1 && x <= dim1 && y >= 1 && fz_u8(r) < 200) {
            int64_t t = x; /* swap when it keeps both inside their dims */
            if (t <= dim2 && y <= dim1) { x = y; y = t; }
            else x = y;
        }
        (*x_len)[b] = x;
        (*y_len)[b] = y;
    }
}

/* Rows and cols of the cells the library may read for item b: its lengths
 * when both are inside the dims, else none. */
static inline void fz_read_extent(int64_t B, const int64_t *x_len, const int64_t *y_len,
                                  int64_t dim1, int64_t dim2, int64_t *rows, int64_t *cols) {
    for (int64_t b = 0; b < B; b++) {
        int64_t x = x_len ? x_len[b] : dim1, y = y_len ? y_len[b] : dim2;
        int ok = x >= 1 && y >= 1 && x <= dim1 && y <= dim2;
        rows[b] = ok ? x : 0;
        cols[b] = ok ? y : 0;
    }
}

/* ---- threads and workspaces ----------------------------------------- */

static inline int32_t fz_threads(fz_reader *r) {
    uint8_t c = fz_u8(r);
    if (c < 150) return 1;
    if (c < 210) return 2 + c % 3;
    if (c < 225) return 0;
    if (c < 235) return -1;
    if (c < 245) return 1000000000;
    return c % 2 ? INT32_MAX : INT32_MIN;
}

/* The workspace of a call: exact, one byte short, NULL, or (when the size
 * asked for is beyond what a target allocates) a small one. */
typedef struct fz_workspace {
    uint8_t *alloc;
    size_t size;
    int mode; /* 0 exact, 1 one byte short, 2 NULL, 3 small (too big to build) */
} fz_workspace;

static inline void fz_workspace_make(fz_workspace *w, fz_reader *r, size_t need) {
    uint8_t c = fz_u8(r);
    w->mode = c < 220 ? 0 : c < 240 ? 1 : 2;
    if (need > FZ_MAX_BYTES && w->mode != 2) w->mode = 3;
    w->size = w->mode == 0 ? need : w->mode == 1 ? (need ? need - 1 : 0) : w->mode == 3 ? 4096 : 0;
    w->alloc = w->mode == 2 ? NULL : (uint8_t *)malloc(w->size ? w->size : 1);
}

static inline void fz_workspace_free(fz_workspace *w) { free(w->alloc); }

/* ---- checks shared by the targets ------------------------------------ */

/* A status is one of the enum's values and has a sentence. */
static inline void fz_check_status(mas_status st, const mas_error *err) {
    fz_check(st >= MAS_OK && st < MAS_STATUS_COUNT_, "status %d out of range", (int)st);
    fz_check(mas_status_string(st) != NULL, "no status string");
    fz_check(err->status == (int32_t)st, "err.status %d != returned %d", err->status, (int)st);
}

/* The first item whose expected status is not MAS_OK, and that status. */
static inline mas_status fz_first_error(const mas_status *item_st, int64_t B, int64_t *item) {
    for (int64_t b = 0; b < B; b++)
        if (item_st[b] != MAS_OK) {
            *item = b;
            return item_st[b];
        }
    *item = -1;
    return MAS_OK;
}

/* Status of a length pair for the hard-MAS path set. */
static inline mas_status fz_hard_length_status(int64_t X, int64_t Y, int64_t T, int64_t S) {
    if (X < 1 || Y < 1 || X > T || Y > S) return MAS_ERR_BAD_LENGTH;
    if (X > Y) return MAS_ERR_X_LEN_GT_Y_LEN;
    return MAS_OK;
}

/* ---- the CUDA replay ------------------------------------------------ */

/* Built with -DFZ_REPLAY (bench/gpu_fuzz_replay.sh), a target hands each
 * decoded problem, after its CPU call and checks, to the replay program
 * (tests/fuzz/replay_cuda.cu), which runs the same problem through the CUDA
 * entry point on exactly sized device copies and compares. Without
 * FZ_REPLAY the hooks compile to nothing. */
#ifdef FZ_REPLAY
#ifdef __cplusplus
extern "C" {
#endif
void fz_replay_hard(const fz_view *value, const fz_view *path, const int64_t *x_len,
                    const int64_t *y_len, const mas_hard_outputs *out, size_t dur_n,
                    size_t idx_n, mas_status cpu_st);
void fz_replay_forward_sum(const fz_view *value, const int64_t *x_len, const int64_t *y_len,
                           const void *log_z, const fz_view *post, mas_status cpu_st);
/* compare: per item, whether the CPU result is defined (backward: log_phi
 * from the forward, moderate logits) and so comparable; NULL: every item. */
void fz_replay_attention(int kind, const fz_view *logits, const int64_t *n_len,
                         const int64_t *m_len, const fz_view *log_phi, const fz_view *grad_phi,
                         const fz_view *grad_x, const unsigned char *compare, mas_status cpu_st);
void fz_replay_loglik(const mas_loglik_args *a, const fz_view *x, const fz_view *coef,
                      const fz_view *out, const fz_view *best, mas_status cpu_st);
/* Topologies: labels_n int32 labels on the host; the outputs as the CPU
 * call had them (ho for hard, so with post / grad for soft); moderate: per
 * item, values small enough that both backends must agree. */
void fz_replay_topology(const mas_topo_args *a, int soft, int64_t labels_n,
                        const fz_view *emissions, const mas_topo_hard_outputs *ho,
                        const mas_topo_soft_outputs *so, const fz_view *post,
                        const fz_view *grad, const unsigned char *moderate, mas_status cpu_st);
#ifdef __cplusplus
}
#endif
#define FZ_REPLAY_HOOK(call) call
#else
#define FZ_REPLAY_HOOK(call) ((void)0)
#endif

#endif
