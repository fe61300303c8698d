/* Likelihoods on the CPU (mas.h section 6): the Gaussian coefficients, and
 * the entry point of the log-likelihood kernel (likelihood.h): argument and
 * value checks, the cut into units, threads, and the pick of the widest
 * instruction set (the one the DP sweep uses, MAS_CPU_ISA included). */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "common/checks.h"
#include "common/convert.h"
#include "common/gauss_coef.h"
#include "cpu/det_exp.h"
#include "cpu/dp_core.h"
#include "cpu/gauss_coef_lanes.h"
#include "cpu/likelihood.h"
#include "cpu/parallel.h"


static int isa_level(void);

static void set_err(mas_error *err, mas_status st, int64_t item) {
    if (err) {
        err->status = st;
        err->reserved_ = 0;
        err->item = item;
    }
}

/* ---------------------------------------------------------------------- */
/* Coefficients                                                            */
/* ---------------------------------------------------------------------- */

static double load_f(const mas_tensor3 *t, int64_t b, int64_t i, int64_t j) {
    int64_t off = b * t->stride[0] + i * t->stride[1] + j * t->stride[2];
    switch (t->dtype) {
    case MAS_FLOAT64: return ((const double *)t->data)[off];
    case MAS_FLOAT16: return mas_f16_to_f32(((const uint16_t *)t->data)[off]);
    case MAS_BFLOAT16: return mas_bf16_to_f32(((const uint16_t *)t->data)[off]);
    default: return ((const float *)t->data)[off];
    }
}

/* Rounds once to coef's dtype and stores; returns the stored value. */
static double store_coef(const mas_tensor3 *c, int64_t b, int64_t r, int64_t k, double v) {
    int64_t off = b * c->stride[0] + r * c->stride[1] + k * c->stride[2];
    if (c->dtype == MAS_FLOAT64) {
        ((double *)c->data)[off] = v;
        return v;
    }
    float f = (float)v;
    ((float *)c->data)[off] = f;
    return f;
}

/* Bytes of expanded frames per unit (likelihood.h), about half a 512 KB L2. */
#define LK_E_BYTES ((int64_t)256 << 10)

#define COEF_BLOCK 512 /* Gaussians per parallel work item */
#define COEF_DIMS 64   /* dimensions whose spreads are done at once */

typedef struct coef_ctx {
    const mas_gauss_params *p;
    const mas_tensor3 *coef;
    int64_t m, j, blocks_per_item;
    /* log-std spreads: their exps by the vector mas_det_exp (det_exp.h),
     * and in Glow-TTS's layout `lanes` Gaussians at once (gauss_coef_lanes.h);
     * NULL / 0 when the CPU or the call has no such path */
    void (*vector_exp)(const double *, double *, int64_t);
    mas_gauss_coef_lanes_fn lanes_fn;
    int64_t lanes;
    _Atomic int64_t first_bad; /* flat index b*M + k, INT64_MAX when none */
} coef_ctx;

static void note_bad(coef_ctx *c, int64_t idx) {
    int64_t cur = atomic_load(&c->first_bad);
    while (idx < cur && !atomic_compare_exchange_weak(&c->first_bad, &cur, idx)) {
    }
}

/* For every Gaussian: the float64 arithmetic of common/gauss_coef.h (the
 * same functions the CUDA kernel calls, so both backends store the same
 * bits), then the stored (rounded) values checked: a, b finite, b nonzero,
 * K finite or -inf from a weight of 0. */
/* Built twice, picked when the library loads: with FMA instructions, the
 * fma() calls of det_math.h are single instructions instead of calls into
 * the C library (same bits: fma is exact either way; -std=c11 keeps a*b+c
 * unfused); the baseline for CPUs without FMA. */
#if defined(__GNUC__) && defined(__x86_64__) && defined(__ELF__)
__attribute__((target_clones("fma", "default")))
#endif
static void coef_block(void *vctx, int64_t item, int32_t rank) {
    (void)rank;
    coef_ctx *c = (coef_ctx *)vctx;
    const mas_gauss_params *p = c->p;
    const int64_t M = c->m, J = c->j;
    const int64_t b = item / c->blocks_per_item;
    const int64_t k0 = item % c->blocks_per_item * COEF_BLOCK;
    const int64_t k1 = k0 + COEF_BLOCK < M ? k0 + COEF_BLOCK : M;
    int64_t k = k0;
    if (c->lanes_fn) {
        const mas_tensor3 *mt = &p->means, *st = &p->spread, *ct = c->coef;
        for (; k + c->lanes <= k1; k += c->lanes) {
            double lw[8];
            for (int64_t l = 0; l < c->lanes; l++)
                lw[l] = p->log_weights.data ? load_f(&p->log_weights, b, 0, k + l) : 0.0;
            const uint32_t bad = c->lanes_fn(
                (const float *)mt->data + b * mt->stride[0] + k, mt->stride[2],
                (const float *)st->data + b * st->stride[0] + k, st->stride[2], J, lw,
                (float *)ct->data + b * ct->stride[0] + k, ct->stride[1]);
            if (bad) note_bad(c, b * M + k + __builtin_ctz(bad));
        }
    }
    for (; k < k1; k++) {
        double lw = p->log_weights.data ? load_f(&p->log_weights, b, 0, k) : 0.0;
        int bad = !mas_gauss_log_weight_ok(lw);
        double sum = 0.0;
        for (int64_t j0 = 0; j0 < J; j0 += COEF_DIMS) {
            const int64_t nj = J - j0 < COEF_DIMS ? J - j0 : COEF_DIMS;
            /* the spreads' exp / log first, in a loop of their own: their
             * long independent fma chains then overlap (the coefficients
             * 1.4x faster than one dimension at a time); the same calls,
             * so the same bits */
            double inv[COEF_DIMS], log_var[COEF_DIMS];
            int ok[COEF_DIMS];
            if (c->vector_exp) { /* 4-8 exps an instruction (the exp was 45% of the time) */
                double sp[COEF_DIMS], arg[COEF_DIMS], e[COEF_DIMS];
                for (int64_t j = 0; j < nj; j++) {
                    sp[j] = load_f(&p->spread, b, k, j0 + j);
                    arg[j] = mas_gauss_log_std_arg(sp[j]);
                }
                c->vector_exp(arg, e, nj);
                for (int64_t j = 0; j < nj; j++)
                    ok[j] = mas_gauss_log_std_values(sp[j], e[j], &inv[j], &log_var[j]);
            } else {
                for (int64_t j = 0; j < nj; j++)
                    ok[j] = mas_gauss_coef_spread(load_f(&p->spread, b, k, j0 + j),
                                                  p->spread_kind, &inv[j], &log_var[j]);
            }
            for (int64_t j = 0; j < nj; j++) {
                double a = 0, q = 0, kt = 0;
                if (!ok[j] || !mas_gauss_coef_rest(load_f(&p->means, b, k, j0 + j), inv[j],
                                                   log_var[j], &a, &q, &kt))
                    bad = 1;
                sum = sum + kt;
                double a_r = store_coef(c->coef, b, 1 + j0 + j, k, a);
                double q_r = store_coef(c->coef, b, 1 + J + j0 + j, k, q);
                if (!mas_gauss_coef_stored_ok(a_r, q_r)) bad = 1;
            }
        }
        double kk = store_coef(c->coef, b, 0, k, mas_gauss_coef_k(lw, sum));
        if (!mas_gauss_coef_k_ok(kk, lw)) bad = 1;
        if (bad) note_bad(c, b * M + k);
    }
}

mas_status mas_gauss_coef_cpu(const mas_gauss_params *params, const mas_tensor3 *coef,
                              int32_t threads, mas_error *err) {
    mas_status st = mas_gauss_coef_check_call(params, coef);
    if (st != MAS_OK) {
        set_err(err, st, -1);
        return st;
    }
    coef_ctx c;
    c.p = params;
    c.coef = coef;
    c.m = params->means.dim[1];
    c.j = params->means.dim[2];
    c.blocks_per_item = (c.m + COEF_BLOCK - 1) / COEF_BLOCK;
    const int level = isa_level();
    c.vector_exp = NULL;
    c.lanes_fn = NULL;
    c.lanes = 0;
    if (params->spread_kind == MAS_SPREAD_LOG_STD) {
        if (level == 2) {
            c.vector_exp = mas_det_exp_avx512;
            c.lanes_fn = mas_gauss_coef_lanes_avx512;
            c.lanes = 8;
        } else if (level == 1 && __builtin_cpu_supports("fma")) {
            c.vector_exp = mas_det_exp_avx2;
            c.lanes_fn = mas_gauss_coef_lanes_avx2;
            c.lanes = 4;
        }
    }
    if (!(params->means.dtype == MAS_FLOAT32 && params->spread.dtype == MAS_FLOAT32 &&
          params->means.stride[1] == 1 && params->spread.stride[1] == 1 &&
          coef->dtype == MAS_FLOAT32 && coef->stride[2] == 1))
        c.lanes_fn = NULL;
    atomic_init(&c.first_bad, INT64_MAX);
    int64_t items = params->means.dim[0] * c.blocks_per_item;
    int64_t team = mas_thread_count(threads);
    int64_t work_teams = items * COEF_BLOCK * c.j / 65536 + 1; /* small models: one thread */
    if (team > work_teams) team = work_teams;
    if (team > items) team = items;
    mas_parallel_items((int32_t)team, items, coef_block, &c);
    int64_t bad = atomic_load(&c.first_bad);
    if (bad != INT64_MAX) {
        set_err(err, MAS_ERR_BAD_MODEL, bad);
        return MAS_ERR_BAD_MODEL;
    }
    set_err(err, MAS_OK, -1);
    return MAS_OK;
}

/* ---------------------------------------------------------------------- */
/* Log-likelihoods                                                         */
/* ---------------------------------------------------------------------- */

/* 0 sse2, 1 avx2, 2 avx512: the DP sweep's choice (dp_lanes = 16 << level). */
static int isa_level(void) {
    int64_t lanes = dp_lanes(MAS_FLOAT32);
    return lanes >= 64 ? 2 : lanes >= 32 ? 1 : 0;
}

static void geometry(int level, int f64, lk_geometry *g) {
    static void (*const fns[2][3])(lk_geometry *) = {
        {lk_geometry_f32_sse2, lk_geometry_f32_avx2, lk_geometry_f32_avx512},
        {lk_geometry_f64_sse2, lk_geometry_f64_avx2, lk_geometry_f64_avx512}};
    fns[f64][level](g);
}

static lk_unit_fn unit_fn(int level, int f64) {
    static const lk_unit_fn fns[2][3] = {
        {lk_unit_f32_sse2, lk_unit_f32_avx2, lk_unit_f32_avx512},
        {lk_unit_f64_sse2, lk_unit_f64_avx2, lk_unit_f64_avx512}};
    return fns[f64][level];
}

static size_t up64(size_t n) { return (n + MAS_CACHE_LINE - 1) / MAS_CACHE_LINE * MAS_CACHE_LINE; }

size_t lk_thread_bytes(int64_t rows, int64_t block, int64_t chunk, lk_geometry geo,
                       size_t real_size) {
    size_t e = up64(real_size * (size_t)((rows - 1) * block));
    size_t packed = up64(real_size * (size_t)(rows * chunk));
    size_t scores = up64(real_size * (size_t)(chunk * geo.ft));
    size_t running = 2 * up64(real_size * (size_t)block) + up64(4 * (size_t)block);
    return e + packed + scores + running;
}

/* Score cells (frames x Gaussians) below which one more thread does not pay. */
static int64_t min_cells_per_thread(void) {
    const char *s = getenv("MAS_CPU_MIN_CELLS_PER_THREAD");
    if (s && *s) {
        long long v = atoll(s);
        if (v >= 1) return v;
    }
    return (int64_t)1 << 17;
}

/* The cut of a call into units, and the team that runs them. */
static mas_status plan(const mas_loglik_args *a, int32_t threads, lk_job *job, int32_t *team) {
    mas_status st = mas_loglik_check_call(a);
    if (st != MAS_OK) return st;
    memset(job, 0, sizeof *job);
    job->a = a;
    job->batch = a->x.dim[0];
    job->frames = a->x.dim[1];
    job->dim = a->x.dim[2];
    job->rows = a->coef.dim[1];
    job->gaussians = a->coef.dim[2];
    job->states = a->n_states;
    job->offsets = a->offsets;
    job->want_max = (a->flags & MAS_LOGLIK_MAX) != 0u;
    job->want_best = a->best.data != NULL;
    /* Sizes beyond MAS_MAX_CELLS (any of x, coef, out, or the B*N*M scores):
     * no plan; the workspace size is SIZE_MAX (the products below would
     * overflow). */
    if (mas_shape_too_big(a->x.dim[0], a->x.dim[1], a->x.dim[2]) ||
        mas_shape_too_big(a->coef.dim[0], a->coef.dim[1], a->coef.dim[2]) ||
        mas_shape_too_big(a->out.dim[0], a->out.dim[1], a->out.dim[2]) ||
        mas_shape_too_big(a->x.dim[0], a->x.dim[1], a->coef.dim[2])) {
        job->per_thread = SIZE_MAX;
        *team = 1;
        return MAS_OK;
    }
    int level = isa_level(), f64 = a->x.dtype == MAS_FLOAT64;
    geometry(level, f64, &job->geo);
    const int64_t ft = job->geo.ft, g = job->geo.g;
    int64_t n_tiles = (job->frames + ft - 1) / ft;
    /* Frames per unit: as many tiles as keep the expanded frames within
     * LK_E_BYTES (at least 8 tiles), the same number in every block. Each
     * block packs every coefficient once more, from L3 at GMM sizes (2.3 MB
     * at 500 x 16, J=36): with AVX2's 16-frame tiles, blocks of 8 tiles
     * (128 frames) made the packing a fifth of the call, 2 blocks of 512
     * frames make it ~5%. Where a block ends changes no score. */
    const int64_t real_bytes = f64 ? (int64_t)sizeof(double) : (int64_t)sizeof(float);
    const int64_t tile_bytes = (job->rows - 1) * ft * real_bytes;
    int64_t max_tiles = LK_E_BYTES / (tile_bytes > 0 ? tile_bytes : 1);
    if (max_tiles < 8) max_tiles = 8;
    const int64_t n_blk = n_tiles > 0 ? (n_tiles + max_tiles - 1) / max_tiles : 1;
    job->block = (n_tiles + n_blk - 1) / n_blk * ft;
    job->n_blocks = (job->frames + job->block - 1) / job->block;
    job->chunk = (128 / g > 1 ? 128 / g : 1) * g;
    int64_t count = mas_thread_count(threads);
    if (count > 256) count = 256;
    int64_t cells = job->batch * job->frames * job->gaussians;
    int64_t by_work = cells / min_cells_per_thread() + 1;
    if (count > by_work) count = by_work;
    int64_t base = job->batch * job->n_blocks;
    job->n_groups = 1;
    if (count > 1 && base < 4 * count) {
        job->n_groups = (4 * count + base - 1) / base;
        if (job->n_groups > job->states) job->n_groups = job->states;
    }
    int64_t units = base * job->n_groups;
    if (count > units) count = units;
    *team = (int32_t)count;
    job->per_thread = lk_thread_bytes(job->rows, job->block, job->chunk, job->geo,
                                      f64 ? sizeof(double) : sizeof(float));
    return MAS_OK;
}

/* Bytes of the whole workspace: SIZE_MAX when it overflows (too big). */
static size_t workspace_need(const lk_job *job, int32_t team) {
    size_t n;
    if (__builtin_mul_overflow((size_t)team, job->per_thread, &n) ||
        __builtin_add_overflow(n, (size_t)MAS_CACHE_LINE, &n))
        return SIZE_MAX;
    return n;
}

size_t mas_loglik_cpu_workspace_size(const mas_loglik_args *args, int32_t threads) {
    lk_job job;
    int32_t team;
    if (plan(args, threads, &job, &team) != MAS_OK) return 0;
    return workspace_need(&job, team);
}

typedef struct run_ctx {
    const lk_job *job;
    lk_unit_fn fn;
} run_ctx;

static void run_unit(void *vctx, int64_t unit, int32_t rank) {
    run_ctx *c = (run_ctx *)vctx;
    c->fn(c->job, unit, c->job->workspace + (size_t)rank * c->job->per_thread);
}

mas_status mas_loglik_cpu(const mas_loglik_args *args, void *workspace, size_t workspace_size,
                          int32_t threads, mas_error *err) {
    lk_job job;
    int32_t team;
    mas_status st = plan(args, threads, &job, &team);
    if (st != MAS_OK) {
        set_err(err, st, -1);
        return st;
    }
    if (job.offsets) {
        int ok = job.offsets[0] == 0 && job.offsets[job.states] == job.gaussians;
        for (int64_t s = 0; ok && s < job.states; s++) ok = job.offsets[s] < job.offsets[s + 1];
        /* a stated mixture size (a hint the CUDA tensor cores use) must hold */
        for (int64_t s = 0; ok && args->mixture_size > 0 && s < job.states; s++)
            ok = job.offsets[s] == s * args->mixture_size;
        if (!ok) {
            set_err(err, MAS_ERR_BAD_ARGUMENT, -1);
            return MAS_ERR_BAD_ARGUMENT;
        }
    }
    /* (without length arrays there is nothing to check: B may be huge) */
    for (int64_t b = 0; (args->n_len || args->s_len) && b < job.batch; b++) {
        int64_t n = args->n_len ? args->n_len[b] : job.frames;
        int64_t s = args->s_len ? args->s_len[b] : job.states;
        if (n < 0 || n > job.frames || s < 0 || s > job.states) {
            set_err(err, MAS_ERR_BAD_LENGTH, b);
            return MAS_ERR_BAD_LENGTH;
        }
    }
    size_t need = workspace_need(&job, team);
    if (!workspace || workspace_size < need || need == SIZE_MAX) {
        set_err(err, MAS_ERR_WORKSPACE_TOO_SMALL, -1);
        return MAS_ERR_WORKSPACE_TOO_SMALL;
    }
    uintptr_t base = (uintptr_t)workspace;
    job.workspace = (char *)workspace + (MAS_ALIGN_UP(base, MAS_CACHE_LINE) - base);
    run_ctx c = {&job, unit_fn(isa_level(), args->x.dtype == MAS_FLOAT64)};
    mas_parallel_items(team, job.batch * job.n_blocks * job.n_groups, run_unit, &c);
    set_err(err, MAS_OK, -1);
    return MAS_OK;
}
