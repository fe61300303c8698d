/* Test support: see support.h. Nothing here calls the library's kernels or
 * includes its private headers: the reference and the conversions are written
 * from the semantics in mas.h so that they can disagree with the library. */
#include "support.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---------------------------------------------------------------------- */
/* Cases and checks                                                        */
/* ---------------------------------------------------------------------- */

/* Failures beyond this many in one case are counted but not printed, so one
 * broken case cannot drown the log. */
#define TS_PRINTED_FAILURES_PER_CASE 6

static uint64_t ts_program_seed;
static int ts_have_seed;
static char ts_case_text[512];
static int ts_case_open;
static int64_t ts_case_failed_checks;
static int64_t ts_cases_passed;
static int64_t ts_cases_failed;

void ts_case_begin(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ts_case_text, sizeof ts_case_text, fmt, ap);
    va_end(ap);
    ts_case_open = 1;
    ts_case_failed_checks = 0;
}

void ts_case_end(void) {
    if (!ts_case_open) return;
    if (ts_case_failed_checks == 0) {
        ts_cases_passed++;
    } else {
        ts_cases_failed++;
        if (ts_case_failed_checks > TS_PRINTED_FAILURES_PER_CASE)
            printf("  (%lld failed checks in this case, %d printed)\n",
                   (long long)ts_case_failed_checks, TS_PRINTED_FAILURES_PER_CASE);
    }
    ts_case_open = 0;
}

int ts_check_at(int ok, const char *file, int line, const char *fmt, ...) {
    if (ok) return 1;
    if (!ts_case_open) {
        /* A check outside any case is a case of its own. */
        ts_cases_failed++;
        ts_case_text[0] = '\0';
    } else {
        ts_case_failed_checks++;
        if (ts_case_failed_checks > TS_PRINTED_FAILURES_PER_CASE) return 0;
    }
    printf("FAIL %s:%d [seed %llu] %s: ", file, line,
           (unsigned long long)ts_program_seed, ts_case_text);
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    fflush(stdout);
    return 0;
}

int64_t ts_case_failures(void) { return ts_case_failed_checks; }

int ts_finish(void) {
    ts_case_end();
    if (ts_have_seed && ts_cases_failed > 0)
        printf("replay with seed %llu (argument 1 or MAS_TEST_SEED)\n",
               (unsigned long long)ts_program_seed);
    printf("%lld passed, %lld failed\n", (long long)ts_cases_passed,
           (long long)ts_cases_failed);
    return ts_cases_failed == 0 && ts_cases_passed > 0 ? 0 : 1;
}

/* ---------------------------------------------------------------------- */
/* Random numbers: splitmix64, small and good enough for test inputs.     */
/* ---------------------------------------------------------------------- */

uint64_t ts_seed_from_args(int argc, char **argv) {
    const char *text = argc > 1 ? argv[1] : getenv("MAS_TEST_SEED");
    uint64_t seed;
    if (text && *text) {
        seed = (uint64_t)strtoull(text, NULL, 0);
    } else {
        seed = (uint64_t)time(NULL) * 2654435761u ^ (uint64_t)clock();
        seed &= 0xffffffffffull; /* short enough to type */
    }
    ts_program_seed = seed;
    ts_have_seed = 1;
    printf("%s: seed %llu\n", argc > 0 ? argv[0] : "test", (unsigned long long)seed);
    fflush(stdout);
    return seed;
}

void ts_rng_init(ts_rng *rng, uint64_t seed) { rng->state = seed; }

uint64_t ts_rng_next(ts_rng *rng) {
    uint64_t z = (rng->state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

int64_t ts_rng_int(ts_rng *rng, int64_t lo, int64_t hi) {
    if (hi <= lo) return lo;
    uint64_t span = (uint64_t)(hi - lo) + 1u;
    return lo + (int64_t)(ts_rng_next(rng) % span);
}

double ts_rng_unit(ts_rng *rng) {
    return (double)(ts_rng_next(rng) >> 11) * (1.0 / 9007199254740992.0);
}

double ts_rng_uniform(ts_rng *rng, double lo, double hi) {
    return lo + (hi - lo) * ts_rng_unit(rng);
}

int ts_rng_chance(ts_rng *rng, double p) { return ts_rng_unit(rng) < p; }

/* ---------------------------------------------------------------------- */
/* Elements                                                                */
/* ---------------------------------------------------------------------- */

uint64_t ts_f64_bits(double x) {
    uint64_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

uint32_t ts_f32_bits(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

/* Arithmetic rather than bit tricks, so that it is unlike the library's. */
uint16_t ts_f32_to_f16(float x) {
    uint16_t sign = signbit(x) ? 0x8000u : 0u;
    if (isnan(x)) return (uint16_t)(sign | 0x7e00u);
    double a = fabs((double)x);
    if (a >= 65520.0) return (uint16_t)(sign | 0x7c00u); /* rounds to inf */
    if (a < ldexp(1.0, -14)) {
        /* Subnormal: a multiple of 2^-24; rint rounds half to even. 1024
         * units is the smallest normal, whose bits are also 1024. */
        double units = rint(a * ldexp(1.0, 24));
        return (uint16_t)(sign | (uint16_t)units);
    }
    int e2;
    (void)frexp(a, &e2); /* a = f * 2^e2, f in [0.5, 1) */
    int exponent = e2 - 1;
    double fraction = rint((ldexp(a, -exponent) - 1.0) * 1024.0);
    if (fraction >= 1024.0) {
        fraction = 0.0;
        exponent++;
    }
    if (exponent > 15) return (uint16_t)(sign | 0x7c00u);
    return (uint16_t)(sign | (uint16_t)((exponent + 15) << 10) | (uint16_t)fraction);
}

float ts_f16_to_f32(uint16_t h) {
    int exponent = (h >> 10) & 0x1f;
    int fraction = h & 0x3ff;
    double magnitude;
    if (exponent == 0x1f) magnitude = fraction ? NAN : INFINITY;
    else if (exponent == 0) magnitude = ldexp((double)fraction, -24);
    else magnitude = ldexp((double)(1024 + fraction), exponent - 25);
    return (float)((h & 0x8000u) ? -magnitude : magnitude);
}

uint16_t ts_f32_to_bf16(float x) {
    uint32_t u = ts_f32_bits(x);
    if (isnan(x)) return (uint16_t)((u >> 16) | 0x40u);
    uint32_t lower = u & 0xffffu;
    uint32_t upper = u >> 16;
    /* Round half to even on the 16 dropped bits. */
    if (lower > 0x8000u || (lower == 0x8000u && (upper & 1u))) upper++;
    return (uint16_t)upper;
}

float ts_bf16_to_f32(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

double ts_round_to_dtype(double x, mas_dtype dtype) {
    switch (dtype) {
    case MAS_FLOAT32: return (double)(float)x;
    case MAS_FLOAT16: return (double)ts_f16_to_f32(ts_f32_to_f16((float)x));
    case MAS_BFLOAT16: return (double)ts_bf16_to_f32(ts_f32_to_bf16((float)x));
    default: return x;
    }
}

double ts_load(const void *base, int64_t offset, mas_dtype dtype) {
    const unsigned char *p = (const unsigned char *)base;
    switch (dtype) {
    case MAS_FLOAT32: { float v; memcpy(&v, p + offset * 4, 4); return v; }
    case MAS_FLOAT64: { double v; memcpy(&v, p + offset * 8, 8); return v; }
    case MAS_FLOAT16: { uint16_t v; memcpy(&v, p + offset * 2, 2); return ts_f16_to_f32(v); }
    case MAS_BFLOAT16: { uint16_t v; memcpy(&v, p + offset * 2, 2); return ts_bf16_to_f32(v); }
    case MAS_INT32: { int32_t v; memcpy(&v, p + offset * 4, 4); return v; }
    case MAS_INT64: { int64_t v; memcpy(&v, p + offset * 8, 8); return (double)v; }
    case MAS_UINT8: return p[offset];
    default: return NAN;
    }
}

void ts_store(void *base, int64_t offset, mas_dtype dtype, double x) {
    unsigned char *p = (unsigned char *)base;
    switch (dtype) {
    case MAS_FLOAT32: { float v = (float)x; memcpy(p + offset * 4, &v, 4); break; }
    case MAS_FLOAT64: memcpy(p + offset * 8, &x, 8); break;
    case MAS_FLOAT16: { uint16_t v = ts_f32_to_f16((float)x); memcpy(p + offset * 2, &v, 2); break; }
    case MAS_BFLOAT16: { uint16_t v = ts_f32_to_bf16((float)x); memcpy(p + offset * 2, &v, 2); break; }
    case MAS_INT32: { int32_t v = (int32_t)x; memcpy(p + offset * 4, &v, 4); break; }
    case MAS_INT64: { int64_t v = (int64_t)x; memcpy(p + offset * 8, &v, 8); break; }
    case MAS_UINT8: p[offset] = (unsigned char)x; break;
    default: break;
    }
}

const char *ts_dtype_name(mas_dtype dtype) {
    switch (dtype) {
    case MAS_FLOAT32: return "float32";
    case MAS_FLOAT64: return "float64";
    case MAS_FLOAT16: return "float16";
    case MAS_BFLOAT16: return "bfloat16";
    case MAS_INT32: return "int32";
    case MAS_INT64: return "int64";
    case MAS_UINT8: return "uint8";
    default: return "bad-dtype";
    }
}

/* ---------------------------------------------------------------------- */
/* Views                                                                   */
/* ---------------------------------------------------------------------- */

void ts_layout_plain(ts_layout *layout, int bst) {
    memset(layout, 0, sizeof *layout);
    layout->axis_order[0] = 0;
    layout->axis_order[1] = bst ? 2 : 1;
    layout->axis_order[2] = bst ? 1 : 2;
    layout->inner_step = 1;
}

void ts_layout_random(ts_rng *rng, ts_layout *layout, int allow_negative,
                      int allow_zero_batch) {
    ts_layout_plain(layout, ts_rng_chance(rng, 0.5));
    if (ts_rng_chance(rng, 0.15)) {
        /* Batch not outermost: any permutation of the three axes. */
        static const int perms[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2},
                                        {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
        int p = (int)ts_rng_int(rng, 0, 5);
        memcpy(layout->axis_order, perms[p], sizeof layout->axis_order);
    }
    if (ts_rng_chance(rng, 0.3)) layout->inner_step = ts_rng_int(rng, 2, 3);
    if (ts_rng_chance(rng, 0.4)) layout->pad_inner = ts_rng_int(rng, 1, 9);
    if (ts_rng_chance(rng, 0.4)) layout->pad_middle = ts_rng_int(rng, 1, 17);
    if (allow_negative)
        for (int k = 0; k < 3; k++) layout->flip[k] = ts_rng_chance(rng, 0.2);
    layout->zero_batch_stride = allow_zero_batch && ts_rng_chance(rng, 0.1);
    layout->guard = ts_rng_int(rng, 0, 1) ? 16 : 3;
}

void ts_layout_describe(const ts_layout *layout, char *buf, size_t size) {
    static const char axis_letter[3] = {'b', 't', 's'};
    snprintf(buf, size, "%c%c%c step%lld pad%lld/%lld flip%d%d%d%s",
             axis_letter[layout->axis_order[0]], axis_letter[layout->axis_order[1]],
             axis_letter[layout->axis_order[2]], (long long)layout->inner_step,
             (long long)layout->pad_inner, (long long)layout->pad_middle,
             layout->flip[0], layout->flip[1], layout->flip[2],
             layout->zero_batch_stride ? " b-stride0" : "");
}

int ts_view_make(ts_view *view, mas_dtype dtype, int64_t batch, int64_t tokens,
                 int64_t frames, const ts_layout *layout, unsigned char fill_byte) {
    memset(view, 0, sizeof *view);
    int64_t dim[3] = {batch, tokens, frames};
    int64_t stride[3];
    int outer = layout->axis_order[0], middle = layout->axis_order[1],
        inner = layout->axis_order[2];
    stride[inner] = layout->inner_step;
    stride[middle] = dim[inner] * layout->inner_step + layout->pad_inner;
    stride[outer] = dim[middle] * stride[middle] + layout->pad_middle;
    int64_t span = dim[outer] * stride[outer];
    if (layout->zero_batch_stride) stride[0] = 0;
    int64_t start = layout->guard;
    for (int k = 0; k < 3; k++) {
        if (layout->flip[k]) {
            start += (dim[k] - 1) * stride[k];
            stride[k] = -stride[k];
        }
    }
    size_t esize = mas_dtype_size(dtype);
    view->alloc_bytes = (size_t)(span + 2 * layout->guard) * esize;
    view->alloc = (unsigned char *)malloc(view->alloc_bytes);
    if (!view->alloc) return 0;
    memset(view->alloc, fill_byte, view->alloc_bytes);
    view->tensor.data = view->alloc + (size_t)start * esize;
    view->tensor.dtype = (int32_t)dtype;
    view->tensor.reserved_ = 0;
    for (int k = 0; k < 3; k++) {
        view->tensor.dim[k] = dim[k];
        view->tensor.stride[k] = stride[k];
    }
    return 1;
}

void ts_view_free(ts_view *view) {
    free(view->alloc);
    memset(view, 0, sizeof *view);
}

int64_t ts_view_offset(const mas_tensor3 *t, int64_t b, int64_t i, int64_t j) {
    return b * t->stride[0] + i * t->stride[1] + j * t->stride[2];
}

int64_t ts_view_stray_bytes(const ts_view *view, unsigned char fill_byte) {
    unsigned char *addressed = (unsigned char *)calloc(view->alloc_bytes, 1);
    if (!addressed) return -1;
    const mas_tensor3 *t = &view->tensor;
    size_t esize = mas_dtype_size((mas_dtype)t->dtype);
    ptrdiff_t base = (unsigned char *)t->data - view->alloc;
    for (int64_t b = 0; b < t->dim[0]; b++)
        for (int64_t i = 0; i < t->dim[1]; i++)
            for (int64_t j = 0; j < t->dim[2]; j++) {
                ptrdiff_t at = base + (ptrdiff_t)(ts_view_offset(t, b, i, j) * (int64_t)esize);
                memset(addressed + at, 1, esize);
            }
    int64_t stray = 0;
    for (size_t k = 0; k < view->alloc_bytes; k++)
        if (!addressed[k] && view->alloc[k] != fill_byte) stray++;
    free(addressed);
    return stray;
}

int ts_guarded_make(ts_guarded *g, size_t bytes, size_t guard_bytes,
                    unsigned char fill_byte) {
    g->guard_bytes = guard_bytes;
    g->alloc_bytes = bytes + 2 * guard_bytes;
    g->alloc = (unsigned char *)malloc(g->alloc_bytes ? g->alloc_bytes : 1);
    if (!g->alloc) return 0;
    memset(g->alloc, fill_byte, g->alloc_bytes);
    g->data = g->alloc + guard_bytes;
    return 1;
}

void ts_guarded_free(ts_guarded *g) {
    free(g->alloc);
    memset(g, 0, sizeof *g);
}

int64_t ts_guarded_stray_bytes(const ts_guarded *g, unsigned char fill_byte) {
    int64_t stray = 0;
    for (size_t k = 0; k < g->guard_bytes; k++) {
        if (g->alloc[k] != fill_byte) stray++;
        if (g->alloc[g->alloc_bytes - 1 - k] != fill_byte) stray++;
    }
    return stray;
}

/* ---------------------------------------------------------------------- */
/* Reference hard MAS                                                      */
/* ---------------------------------------------------------------------- */

int ts_accumulates_f64(mas_dtype dtype) { return dtype == MAS_FLOAT64; }

int ts_ref_item_alloc(ts_ref_item *r, int64_t tokens, int64_t frames) {
    memset(r, 0, sizeof *r);
    r->durations = (int32_t *)malloc((size_t)tokens * sizeof(int32_t));
    r->indices = (int32_t *)malloc((size_t)frames * sizeof(int32_t));
    r->path = (uint8_t *)malloc((size_t)(tokens * frames));
    return r->durations && r->indices && r->path;
}

void ts_ref_item_free(ts_ref_item *r) {
    free(r->durations);
    free(r->indices);
    free(r->path);
    memset(r, 0, sizeof *r);
}

static double ts_item_value(const mas_tensor3 *value, int64_t b, int64_t i, int64_t j) {
    return ts_load(value->data, ts_view_offset(value, b, i, j), (mas_dtype)value->dtype);
}

/* Q(i,j) = max(Q(i,j-1), Q(i-1,j-1)) + v(i,j) in the accumulation type: the
 * float32 branch rounds the one add to float, the float64 branch does not. */
static double ts_ref_cell(double left, double diagonal, double v, int f64) {
    double best = left < diagonal ? diagonal : left;
    if (f64) return best + v;
    return (double)((float)best + (float)v);
}

mas_status ts_ref_hard_item(const mas_tensor3 *value, int64_t b, int64_t x_len,
                            int64_t y_len, ts_ref_item *r) {
    const int64_t tokens = value->dim[1], frames = value->dim[2];
    const int f64 = ts_accumulates_f64((mas_dtype)value->dtype);
    memset(r->durations, 0, (size_t)tokens * sizeof(int32_t));
    for (int64_t j = 0; j < frames; j++) r->indices[j] = -1;
    memset(r->path, 0, (size_t)(tokens * frames));
    r->score = -INFINITY;

    if (x_len < 1 || x_len > tokens || y_len < 1 || y_len > frames)
        return r->status = MAS_ERR_BAD_LENGTH;
    if (x_len > y_len) return r->status = MAS_ERR_X_LEN_GT_Y_LEN;
    /* Only the band j - (y_len - x_len) <= i <= j can hold a path (mas.h):
     * a NaN elsewhere is not an error. */
    for (int64_t i = 0; i < x_len; i++)
        for (int64_t j = i; j <= i + (y_len - x_len); j++) {
            double v = ts_item_value(value, b, i, j);
            if (isnan(v) || v == INFINITY) return r->status = MAS_ERR_NONFINITE_VALUE;
        }

    /* The whole score table, column by column: Q[i * y_len + j]. */
    double *q = (double *)malloc((size_t)(x_len * y_len) * sizeof(double));
    if (!q) return r->status = MAS_ERR_BAD_ARGUMENT;
    for (int64_t j = 0; j < y_len; j++) {
        for (int64_t i = 0; i < x_len; i++) {
            /* Off the band no path passes: the cell is -inf and never read,
             * so a NaN or +inf there cannot leak into the table. */
            int in_band = i <= j && j - (y_len - x_len) <= i;
            double v = in_band ? ts_item_value(value, b, i, j) : -INFINITY;
            double cell;
            if (j == 0) {
                cell = i == 0 ? v : -INFINITY;
            } else {
                double left = q[i * y_len + j - 1];
                double diagonal = i > 0 ? q[(i - 1) * y_len + j - 1] : -INFINITY;
                cell = ts_ref_cell(left, diagonal, v, f64);
            }
            q[i * y_len + j] = cell;
        }
    }
    double score = q[(x_len - 1) * y_len + y_len - 1];
    if (score == -INFINITY) {
        free(q);
        return r->status = MAS_ERR_NO_FINITE_PATH;
    }

    int64_t i = x_len - 1;
    for (int64_t j = y_len - 1; j >= 0; j--) {
        r->path[i * frames + j] = 1;
        r->indices[j] = (int32_t)i;
        r->durations[i]++;
        if (i > 0 && (i == j || q[i * y_len + j - 1] < q[(i - 1) * y_len + j - 1])) i--;
    }
    free(q);
    r->score = score;
    return r->status = MAS_OK;
}

double ts_path_sum(const mas_tensor3 *value, int64_t b, const int32_t *indices,
                   int64_t y_len) {
    const int f64 = ts_accumulates_f64((mas_dtype)value->dtype);
    double sum = ts_item_value(value, b, indices[0], 0);
    for (int64_t j = 1; j < y_len; j++) {
        double v = ts_item_value(value, b, indices[j], j);
        sum = f64 ? sum + v : (double)((float)sum + (float)v);
    }
    return sum;
}

int ts_is_monotonic_path(const int32_t *indices, int64_t x_len, int64_t y_len) {
    if (y_len < 1 || indices[0] != 0 || indices[y_len - 1] != x_len - 1) return 0;
    for (int64_t j = 1; j < y_len; j++) {
        int32_t step = indices[j] - indices[j - 1];
        if (step != 0 && step != 1) return 0;
    }
    return 1;
}

/* 1 when path a is preferred to path b by the tie rule (see support.h). */
static int ts_tie_rule_prefers(const int32_t *a, const int32_t *b, int64_t y_len) {
    for (int64_t j = y_len - 1; j >= 0; j--)
        if (a[j] != b[j]) return a[j] > b[j];
    return 0;
}

void ts_brute_force(const mas_tensor3 *value, int64_t b, int64_t x_len,
                    int64_t y_len, ts_brute_result *out) {
    memset(out, 0, sizeof *out);
    out->best_score = -INFINITY;
    int have_best = 0;
    /* Bit j-1 of `steps` set: the path moves up one token at frame j. */
    for (uint32_t steps = 0; steps < (1u << (y_len - 1)); steps++) {
        int ups = 0;
        for (int64_t k = 0; k + 1 < y_len; k++) ups += (int)((steps >> k) & 1u);
        if (ups != x_len - 1) continue;
        int32_t indices[8] = {0};
        for (int64_t j = 1; j < y_len; j++)
            indices[j] = indices[j - 1] + (int32_t)((steps >> (j - 1)) & 1u);
        double sum = ts_path_sum(value, b, indices, y_len);
        out->paths++;
        if (!have_best || sum > out->best_score) {
            have_best = 1;
            out->best_score = sum;
            out->best_paths = 1;
            memcpy(out->tie_rule_indices, indices, sizeof indices);
        } else if (sum == out->best_score) {
            out->best_paths++;
            if (ts_tie_rule_prefers(indices, out->tie_rule_indices, y_len))
                memcpy(out->tie_rule_indices, indices, sizeof indices);
        }
    }
}

/* ---------------------------------------------------------------------- */
/* Random inputs                                                           */
/* ---------------------------------------------------------------------- */

const char *ts_value_kind_name(ts_value_kind kind) {
    switch (kind) {
    case TS_VALUES_LOGLIK: return "loglik";
    case TS_VALUES_HALVES: return "halves";
    case TS_VALUES_SMALL_INT: return "small-int";
    case TS_VALUES_HUGE: return "huge";
    default: return "bad-kind";
    }
}

double ts_random_value(ts_rng *rng, ts_value_kind kind, mas_dtype dtype) {
    double x;
    switch (kind) {
    case TS_VALUES_HALVES: x = floor(ts_rng_uniform(rng, -6.0, 7.0)) * 0.5; break;
    case TS_VALUES_SMALL_INT: x = (double)ts_rng_int(rng, -2, 2); break;
    case TS_VALUES_HUGE: {
        /* float16 tops out at 65504. */
        double scale = dtype == MAS_FLOAT16 ? 6.0e4 : 1.0e6;
        x = scale * ts_rng_uniform(rng, -1.0, 1.0);
        break;
    }
    default: x = ts_rng_uniform(rng, -8.0, 2.0); break;
    }
    /* + 0.0 turns a -0.0 into +0.0: with signed zeros the one max of the
     * recurrence could pick either zero, and the bits would differ. */
    return ts_round_to_dtype(x, dtype) + 0.0;
}

void ts_fill_values(ts_rng *rng, const mas_tensor3 *value, ts_value_kind kind,
                    const int64_t *x_len, const int64_t *y_len, int poison_outside) {
    mas_dtype dtype = (mas_dtype)value->dtype;
    for (int64_t b = 0; b < value->dim[0]; b++)
        for (int64_t i = 0; i < value->dim[1]; i++)
            for (int64_t j = 0; j < value->dim[2]; j++) {
                /* outside the lengths, or (lengths that hold a path) off the band */
                int outside = i >= x_len[b] || j >= y_len[b] ||
                              (x_len[b] <= y_len[b] && (i > j || i < j - (y_len[b] - x_len[b])));
                double x = ts_random_value(rng, kind, dtype);
                if (poison_outside && outside)
                    x = ts_rng_chance(rng, 0.5) ? NAN : INFINITY;
                ts_store(value->data, ts_view_offset(value, b, i, j), dtype, x);
            }
}

void ts_random_path(ts_rng *rng, int64_t x_len, int64_t y_len, int32_t *indices) {
    /* Choose the x_len-1 frames (of 1..y_len-1) where the token moves up by
     * drawing them one by one without replacement. */
    int64_t ups_left = x_len - 1;
    indices[0] = 0;
    for (int64_t j = 1; j < y_len; j++) {
        int64_t frames_left = y_len - j;
        int up = ts_rng_int(rng, 1, frames_left) <= ups_left;
        if (up) ups_left--;
        indices[j] = indices[j - 1] + up;
    }
}

void ts_sprinkle_neg_inf(ts_rng *rng, const mas_tensor3 *value, int64_t b,
                         int64_t x_len, int64_t y_len, double fraction) {
    int32_t *keep = (int32_t *)malloc((size_t)y_len * sizeof(int32_t));
    if (!keep) return;
    ts_random_path(rng, x_len, y_len, keep);
    for (int64_t i = 0; i < x_len; i++)
        for (int64_t j = 0; j < y_len; j++)
            if (keep[j] != i && ts_rng_chance(rng, fraction))
                ts_store(value->data, ts_view_offset(value, b, i, j),
                         (mas_dtype)value->dtype, -INFINITY);
    free(keep);
}

/* ---------------------------------------------------------------------- */
/* One call of mas_hard_cpu                                                */
/* ---------------------------------------------------------------------- */

void ts_hard_plan_default(ts_hard_plan *plan, mas_dtype dtype, int64_t batch,
                          int64_t tokens, int64_t frames) {
    memset(plan, 0, sizeof *plan);
    plan->dtype = dtype;
    plan->batch = batch;
    plan->tokens = tokens;
    plan->frames = frames;
    ts_layout_plain(&plan->value_layout, 0);
    plan->wants = TS_WANT_ALL;
    plan->path_dtype = MAS_FLOAT32;
    ts_layout_plain(&plan->path_layout, 0);
    ts_layout_plain(&plan->durations_layout, 0);
    ts_layout_plain(&plan->indices_layout, 0);
    plan->path_layout.guard = 8;
    plan->durations_layout.guard = 8;
    plan->indices_layout.guard = 8;
    plan->threads = 1;
}

void ts_row_layout_random(ts_rng *rng, ts_layout *layout) {
    ts_layout_plain(layout, 0);
    if (ts_rng_chance(rng, 0.5)) layout->pad_inner = ts_rng_int(rng, 1, 5);
    if (ts_rng_chance(rng, 0.3)) layout->pad_middle = ts_rng_int(rng, 1, 7);
    layout->flip[0] = ts_rng_chance(rng, 0.15);
    layout->guard = 8;
}

void ts_hard_plan_describe(const ts_hard_plan *plan, char *buf, size_t size) {
    char vl[96], pl[96];
    ts_layout_describe(&plan->value_layout, vl, sizeof vl);
    ts_layout_describe(&plan->path_layout, pl, sizeof pl);
    snprintf(buf, size, "value{%s} out{%s%s%s%s} path %s{%s} rows%s%s threads=%d%s", vl,
             plan->wants & TS_WANT_PATH ? "path " : "",
             plan->wants & TS_WANT_DURATIONS ? "dur " : "",
             plan->wants & TS_WANT_INDICES ? "idx " : "",
             plan->wants & TS_WANT_SCORE ? "score" : "", ts_dtype_name(plan->path_dtype), pl,
             plan->durations_layout.flip[0] ? " dur-stride<0" : "",
             plan->indices_layout.flip[0] ? " idx-stride<0" : "", (int)plan->threads,
             plan->workspace_misalign ? " ws-misaligned" : "");
}

int ts_hard_call_make(ts_hard_call *call, const ts_hard_plan *plan) {
    memset(call, 0, sizeof *call);
    call->plan = *plan;
    const int64_t B = plan->batch, T = plan->tokens, S = plan->frames;
    size_t score_bytes = (size_t)B * (ts_accumulates_f64(plan->dtype) ? 8u : 4u);
    call->x_len = (int64_t *)calloc((size_t)B, sizeof(int64_t));
    call->y_len = (int64_t *)calloc((size_t)B, sizeof(int64_t));
    call->x_before = (int64_t *)calloc((size_t)B, sizeof(int64_t));
    call->y_before = (int64_t *)calloc((size_t)B, sizeof(int64_t));
    call->refs = (ts_ref_item *)calloc((size_t)B, sizeof(ts_ref_item));
    if (!call->x_len || !call->y_len || !call->x_before || !call->y_before || !call->refs)
        return 0;
    for (int64_t b = 0; b < B; b++)
        if (!ts_ref_item_alloc(&call->refs[b], T, S)) return 0;
    /* Value, path and score arrays exist even when their dtype is bad, so
     * that error tests can use the plan unchanged: a bad dtype's element
     * size is 0, so allocate as float32. */
    mas_dtype value_alloc = mas_dtype_size(plan->dtype) ? plan->dtype : MAS_FLOAT32;
    mas_dtype path_alloc = mas_dtype_size(plan->path_dtype) ? plan->path_dtype : MAS_FLOAT32;
    if (!ts_view_make(&call->value, value_alloc, B, T, S, &plan->value_layout, TS_VALUE_FILL) ||
        !ts_view_make(&call->path, path_alloc, B, T, S, &plan->path_layout, TS_PATH_FILL) ||
        !ts_view_make(&call->durations, MAS_INT32, B, 1, T, &plan->durations_layout,
                      TS_DURATIONS_FILL) ||
        !ts_view_make(&call->indices, MAS_INT32, B, 1, S, &plan->indices_layout,
                      TS_INDICES_FILL) ||
        !ts_guarded_make(&call->score, score_bytes, 16, TS_SCORE_FILL))
        return 0;
    call->value.tensor.dtype = (int32_t)plan->dtype;
    call->path.tensor.dtype = (int32_t)plan->path_dtype;
    call->workspace_size =
        mas_hard_cpu_workspace_size(B, T, S, plan->dtype, plan->threads);
    if (!ts_guarded_make(&call->workspace, call->workspace_size + plan->workspace_misalign, 32,
                         TS_WORKSPACE_FILL))
        return 0;
    call->value_before = (unsigned char *)malloc(call->value.alloc_bytes);
    if (!call->value_before) return 0;
    if (plan->wants & TS_WANT_PATH) call->out.path = call->path.tensor;
    if (plan->wants & TS_WANT_DURATIONS) {
        call->out.durations = (int32_t *)call->durations.tensor.data;
        call->out.durations_stride = call->durations.tensor.stride[0];
    }
    if (plan->wants & TS_WANT_INDICES) {
        call->out.indices = (int32_t *)call->indices.tensor.data;
        call->out.indices_stride = call->indices.tensor.stride[0];
    }
    if (plan->wants & TS_WANT_SCORE) call->out.score = call->score.data;
    return 1;
}

void ts_hard_call_free(ts_hard_call *call) {
    if (call->refs)
        for (int64_t b = 0; b < call->plan.batch; b++) ts_ref_item_free(&call->refs[b]);
    free(call->refs);
    free(call->x_len);
    free(call->y_len);
    free(call->x_before);
    free(call->y_before);
    free(call->value_before);
    ts_view_free(&call->value);
    ts_view_free(&call->path);
    ts_view_free(&call->durations);
    ts_view_free(&call->indices);
    ts_guarded_free(&call->score);
    ts_guarded_free(&call->workspace);
    memset(call, 0, sizeof *call);
}

void ts_hard_call_prepare(ts_hard_call *call) {
    const int64_t B = call->plan.batch;
    if (mas_dtype_size(call->plan.dtype))
        for (int64_t b = 0; b < B; b++)
            ts_ref_hard_item(&call->value.tensor, b, call->x_len[b], call->y_len[b],
                             &call->refs[b]);
    memcpy(call->value_before, call->value.alloc, call->value.alloc_bytes);
    memcpy(call->x_before, call->x_len, (size_t)B * sizeof(int64_t));
    memcpy(call->y_before, call->y_len, (size_t)B * sizeof(int64_t));
}

mas_status ts_hard_call_run(ts_hard_call *call, mas_error *err) {
    void *ws = (unsigned char *)call->workspace.data + call->plan.workspace_misalign;
    return mas_hard_cpu(&call->value.tensor, call->x_len, call->y_len, &call->out, ws,
                        call->workspace_size, call->plan.threads, err);
}

static const int32_t *ts_row(const ts_view *rows, int64_t b) {
    return (const int32_t *)rows->tensor.data + b * rows->tensor.stride[0];
}

static void ts_check_path(const ts_hard_call *call) {
    const ts_hard_plan *p = &call->plan;
    const mas_tensor3 *t = &call->path.tensor;
    size_t esize = mas_dtype_size(p->path_dtype);
    unsigned char one[8], zero[8];
    ts_store(one, 0, p->path_dtype, 1.0);
    ts_store(zero, 0, p->path_dtype, 0.0);
    int64_t bad = 0;
    for (int64_t b = 0; b < p->batch; b++)
        for (int64_t i = 0; i < p->tokens; i++)
            for (int64_t j = 0; j < p->frames; j++) {
                int64_t at = ts_view_offset(t, b, i, j);
                int on = call->refs[b].path[i * p->frames + j];
                if (memcmp((const unsigned char *)t->data + at * (int64_t)esize, on ? one : zero,
                           esize) == 0)
                    continue;
                if (bad++ < 3)
                    TS_CHECK(0, "path[%lld,%lld,%lld] = %g, expected %d (item status %d)",
                             (long long)b, (long long)i, (long long)j,
                             ts_load(t->data, at, p->path_dtype), on, (int)call->refs[b].status);
            }
    TS_CHECK(bad == 0, "%lld path cells differ from the reference", (long long)bad);
}

static void ts_check_durations(const ts_hard_call *call) {
    const ts_hard_plan *p = &call->plan;
    for (int64_t b = 0; b < p->batch; b++) {
        const int32_t *row = ts_row(&call->durations, b);
        const ts_ref_item *ref = &call->refs[b];
        if (ref->status == MAS_OK) {
            int64_t total = 0;
            for (int64_t i = 0; i < p->tokens; i++) {
                total += row[i];
                if (i >= call->x_len[b])
                    TS_CHECK(row[i] == 0, "item %lld: durations[%lld] = %d beyond x_len",
                             (long long)b, (long long)i, row[i]);
            }
            TS_CHECK(total == call->y_len[b], "item %lld: durations sum to %lld, y_len %lld",
                     (long long)b, (long long)total, (long long)call->y_len[b]);
        }
        for (int64_t i = 0; i < p->tokens; i++)
            if (row[i] != ref->durations[i]) {
                TS_CHECK(0, "item %lld: durations[%lld] = %d, reference %d (item status %d)",
                         (long long)b, (long long)i, row[i], ref->durations[i], (int)ref->status);
                break;
            }
    }
}

static void ts_check_indices(const ts_hard_call *call) {
    const ts_hard_plan *p = &call->plan;
    for (int64_t b = 0; b < p->batch; b++) {
        const int32_t *row = ts_row(&call->indices, b);
        const ts_ref_item *ref = &call->refs[b];
        if (ref->status == MAS_OK) {
            TS_CHECK(row[0] == 0, "item %lld: first frame on token %d", (long long)b, row[0]);
            for (int64_t j = 1; j < p->frames; j++) {
                if (j >= call->y_len[b])
                    TS_CHECK(row[j] == -1, "item %lld: indices[%lld] = %d beyond y_len",
                             (long long)b, (long long)j, row[j]);
                else
                    TS_CHECK(row[j] - row[j - 1] == 0 || row[j] - row[j - 1] == 1,
                             "item %lld: indices step %d at frame %lld", (long long)b,
                             row[j] - row[j - 1], (long long)j);
            }
        }
        for (int64_t j = 0; j < p->frames; j++)
            if (row[j] != ref->indices[j]) {
                TS_CHECK(0, "item %lld: indices[%lld] = %d, reference %d (item status %d)",
                         (long long)b, (long long)j, row[j], ref->indices[j], (int)ref->status);
                break;
            }
    }
}

static void ts_check_score(const ts_hard_call *call) {
    const ts_hard_plan *p = &call->plan;
    for (int64_t b = 0; b < p->batch; b++) {
        double want = call->refs[b].score;
        if (ts_accumulates_f64(p->dtype)) {
            double got = ((const double *)call->score.data)[b];
            TS_CHECK(ts_f64_bits(got) == ts_f64_bits(want),
                     "item %lld: score %.17g (0x%016llx), reference %.17g", (long long)b, got,
                     (unsigned long long)ts_f64_bits(got), want);
        } else {
            float got = ((const float *)call->score.data)[b];
            TS_CHECK(ts_f32_bits(got) == ts_f32_bits((float)want),
                     "item %lld: score %.9g (0x%08x), reference %.9g (0x%08x)", (long long)b,
                     (double)got, ts_f32_bits(got), want, ts_f32_bits((float)want));
        }
    }
}

void ts_hard_call_check_untouched(const ts_hard_call *call) {
    const ts_hard_plan *p = &call->plan;
    int64_t stray;
    if (p->wants & TS_WANT_PATH) {
        stray = ts_view_stray_bytes(&call->path, TS_PATH_FILL);
        TS_CHECK(stray == 0, "%lld bytes written outside the path view", (long long)stray);
    }
    stray = ts_view_stray_bytes(&call->durations, TS_DURATIONS_FILL);
    TS_CHECK(stray == 0, "%lld bytes written outside the durations rows", (long long)stray);
    stray = ts_view_stray_bytes(&call->indices, TS_INDICES_FILL);
    TS_CHECK(stray == 0, "%lld bytes written outside the indices rows", (long long)stray);
    stray = ts_guarded_stray_bytes(&call->score, TS_SCORE_FILL);
    TS_CHECK(stray == 0, "%lld bytes written around the score array", (long long)stray);
    /* Outputs not requested must not be touched at all. */
    if (!(p->wants & TS_WANT_PATH)) {
        int64_t touched = 0;
        for (size_t k = 0; k < call->path.alloc_bytes; k++) touched += call->path.alloc[k] != TS_PATH_FILL;
        TS_CHECK(touched == 0, "path not requested but %lld bytes written", (long long)touched);
    }
    if (!(p->wants & TS_WANT_DURATIONS)) {
        int64_t touched = 0;
        for (size_t k = 0; k < call->durations.alloc_bytes; k++)
            touched += call->durations.alloc[k] != TS_DURATIONS_FILL;
        TS_CHECK(touched == 0, "durations not requested but %lld bytes written", (long long)touched);
    }
    if (!(p->wants & TS_WANT_INDICES)) {
        int64_t touched = 0;
        for (size_t k = 0; k < call->indices.alloc_bytes; k++)
            touched += call->indices.alloc[k] != TS_INDICES_FILL;
        TS_CHECK(touched == 0, "indices not requested but %lld bytes written", (long long)touched);
    }
    if (!(p->wants & TS_WANT_SCORE)) {
        int64_t touched = 0;
        for (size_t k = 0; k < call->score.alloc_bytes; k++)
            touched += call->score.alloc[k] != TS_SCORE_FILL;
        TS_CHECK(touched == 0, "score not requested but %lld bytes written", (long long)touched);
    }
    /* The workspace may be written only inside [data + misalign, + size). */
    size_t begin = call->workspace.guard_bytes + p->workspace_misalign;
    size_t end = begin + call->workspace_size;
    int64_t ws_stray = 0;
    for (size_t k = 0; k < call->workspace.alloc_bytes; k++)
        if ((k < begin || k >= end) && call->workspace.alloc[k] != TS_WORKSPACE_FILL) ws_stray++;
    TS_CHECK(ws_stray == 0, "%lld bytes written outside the %zu-byte workspace",
             (long long)ws_stray, call->workspace_size);
    TS_CHECK(memcmp(call->value_before, call->value.alloc, call->value.alloc_bytes) == 0,
             "the value array (or the bytes around its view) changed");
    TS_CHECK(memcmp(call->x_before, call->x_len, (size_t)p->batch * sizeof(int64_t)) == 0 &&
                 memcmp(call->y_before, call->y_len, (size_t)p->batch * sizeof(int64_t)) == 0,
             "the length arrays changed");
}

void ts_hard_call_check_outputs(const ts_hard_call *call) {
    const ts_hard_plan *p = &call->plan;
    if (p->wants & TS_WANT_PATH) ts_check_path(call);
    if (p->wants & TS_WANT_DURATIONS) ts_check_durations(call);
    if (p->wants & TS_WANT_INDICES) ts_check_indices(call);
    if (p->wants & TS_WANT_SCORE) ts_check_score(call);
    ts_hard_call_check_untouched(call);
}

void ts_hard_plan_random_sizes(ts_rng *rng, ts_hard_plan *plan, int64_t max_batch,
                               int64_t max_tokens, int64_t max_frames) {
    plan->batch = ts_rng_int(rng, 1, max_batch);
    plan->tokens = ts_rng_int(rng, 1, max_tokens);
    plan->frames = ts_rng_int(rng, 1, max_frames);
    if (plan->frames < plan->tokens && ts_rng_chance(rng, 0.7)) {
        int64_t t = plan->tokens;
        plan->tokens = plan->frames;
        plan->frames = t;
    }
}

ts_hard_values ts_hard_plan_random_rest(ts_rng *rng, ts_hard_plan *plan) {
    ts_hard_values v;
    ts_row_layout_random(rng, &plan->durations_layout);
    ts_row_layout_random(rng, &plan->indices_layout);
    plan->workspace_misalign = (size_t)ts_rng_int(rng, 0, 7);
    v.kind = (ts_value_kind)ts_rng_int(rng, 0, TS_VALUES_KIND_COUNT - 1);
    v.shared = plan->value_layout.zero_batch_stride;
    v.poison_outside = !v.shared && ts_rng_chance(rng, 0.5);
    v.neg_inf_fraction = !v.shared && ts_rng_chance(rng, 0.25) ? ts_rng_uniform(rng, 0.05, 0.5) : 0.0;
    return v;
}
