/* Shared parts of the fused Gaussian ops on the CPU (fused_gauss.h). */
#include "cpu/fused_gauss.h"

#include <string.h>

#include "common/checks.h"
#include "cpu/parallel.h"

/* 0 sse2, 1 avx2, 2 avx512: the DP sweep's and the likelihood kernel's. */
static int isa_level(void) {
    int64_t lanes = dp_lanes(MAS_FLOAT32);
    return lanes >= 64 ? 2 : lanes >= 32 ? 1 : 0;
}

/* A coef descriptor (data is only a non-NULL marker for the checks). The
 * checks see any shape, so rows * tokens may overflow there: stride 0 then
 * (fg_coefficients only runs on coefficients that fit a workspace). */
static mas_tensor3 coef_view(const fg_plan *p, void *data) {
    mas_tensor3 c;
    memset(&c, 0, sizeof c);
    c.data = data;
    c.dtype = p->accum;
    c.dim[0] = p->model_batch;
    c.dim[1] = p->rows;
    c.dim[2] = p->tokens;
    if (__builtin_mul_overflow(p->rows, p->tokens, &c.stride[0])) c.stride[0] = 0;
    c.stride[1] = p->tokens;
    c.stride[2] = 1;
    return c;
}

static size_t up(size_t n) { return MAS_ALIGN_UP(n, MAS_CACHE_LINE); }

mas_status fg_plan_call(const mas_gauss_align_args *a, fg_plan *p) {
    memset(p, 0, sizeof *p);
    mas_gauss_align_shape shape;
    mas_status st = mas_gauss_align_check_call(a, &shape);
    if (st != MAS_OK) return st;
    p->a = a;
    p->batch = shape.batch;
    p->frames = shape.frames;
    p->dim = shape.dim;
    p->tokens = shape.tokens;
    p->model_batch = shape.model_batch;
    p->accum = mas_accum_dtype(a->x.dtype);
    p->acc = p->accum == MAS_FLOAT64 ? 8 : 4;
    p->rows = 2 * p->dim + 1;
    if (mas_shape_too_big(p->batch, p->tokens, p->frames) ||
        mas_shape_too_big(p->batch, p->tokens + p->frames, p->rows))
        return MAS_OK; /* the workspace size says SIZE_MAX */
    int level = isa_level(), f64 = p->accum == MAS_FLOAT64;
    static void (*const geos[2][3])(lk_geometry *) = {
        {lk_geometry_f32_sse2, lk_geometry_f32_avx2, lk_geometry_f32_avx512},
        {lk_geometry_f64_sse2, lk_geometry_f64_avx2, lk_geometry_f64_avx512}};
    static void (*const fills[2][3])(const void *, int64_t, int64_t, int64_t, int64_t, int64_t,
                                     int64_t, void *, int64_t) = {
        {gc_fill_f32_sse2, gc_fill_f32_avx2, gc_fill_f32_avx512},
        {gc_fill_f64_sse2, gc_fill_f64_avx2, gc_fill_f64_avx512}};
    static void (*const expands[2][3])(const char *, int32_t, int64_t, int64_t, int64_t, int64_t,
                                       int64_t, int64_t, void *) = {
        {gc_expand_f32_sse2, gc_expand_f32_avx2, gc_expand_f32_avx512},
        {gc_expand_f64_sse2, gc_expand_f64_avx2, gc_expand_f64_avx512}};
    geos[f64][level](&p->geo);
    p->fill = fills[f64][level];
    p->expand = expands[f64][level];
    int64_t ft = p->geo.ft, g = p->geo.g;
    p->coef_bytes = up((size_t)(p->model_batch * p->rows * p->tokens) * p->acc);
    p->e_bytes = up((size_t)(2 * p->dim * MAS_ALIGN_UP(p->frames, ft)) * p->acc);
    p->cp_bytes = up((size_t)((p->tokens + g - 1) / g * g * p->rows) * p->acc);
    return MAS_OK;
}

mas_status fg_coefficients(const fg_plan *p, void *coef, int32_t threads, mas_error *err) {
    mas_tensor3 c = coef_view(p, coef);
    return mas_gauss_coef_cpu(&p->a->params, &c, threads, err);
}

void fg_prepare(const fg_plan *p, const void *coef, int64_t b, int64_t X, int64_t Y,
                int reversed, void *e, void *cp, gc_item *item, dp_cell_source *src) {
    const mas_tensor3 *x = &p->a->x;
    const int64_t ft = p->geo.ft, G = p->geo.g, P = p->rows, T = p->tokens;
    int64_t first = reversed ? Y - 1 : 0;
    int64_t step = reversed ? -x->stride[1] : x->stride[1];
    p->expand((const char *)x->data, x->dtype, b * x->stride[0] + first * x->stride[1], step,
              x->stride[2], p->dim, Y, MAS_ALIGN_UP(Y, ft), e);
    /* [G-block][P][G], zeros past the X tokens */
    const int64_t blocks = (X + G - 1) / G;
    const int64_t cb = (p->model_batch == 1 ? 0 : b) * P * T;
    for (int64_t gb = 0; gb < blocks; gb++)
        for (int64_t r = 0; r < P; r++)
            for (int64_t g = 0; g < G; g++) {
                int64_t s = gb * G + g;
                int64_t k = reversed ? X - 1 - s : s;
                int64_t at = (gb * P + r) * G + g;
                int in = s < X;
                if (p->accum == MAS_FLOAT64)
                    ((double *)cp)[at] = in ? ((const double *)coef)[cb + r * T + k] : 0;
                else
                    ((float *)cp)[at] = in ? ((const float *)coef)[cb + r * T + k] : 0;
            }
    item->e = e;
    item->cp = cp;
    item->dim = p->dim;
    src->fill = p->fill;
    src->ctx = item;
}

size_t fg_shared_bytes(const fg_plan *p) {
    return MAS_CACHE_LINE + p->coef_bytes + up((size_t)p->batch * sizeof(int32_t));
}

mas_status fg_check_lengths(int64_t X, int64_t Y, int64_t T, int64_t S) {
    if (X < 1 || Y < 1 || X > T || Y > S) return MAS_ERR_BAD_LENGTH;
    if (X > Y) return MAS_ERR_X_LEN_GT_Y_LEN;
    return MAS_OK;
}
