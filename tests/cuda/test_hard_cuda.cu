/* mas_hard_cuda against the reference and against mas_hard_cpu, bit for bit:
 * random lengths, both layouts, strided (also negative and batch-broadcast)
 * views, value and path dtypes, output subsets, tie-heavy, -inf and huge
 * inputs; every value error through the device error word with the right
 * item; CUDA graph capture; and (with --large) a batch of more than 2^31
 * elements. Every device buffer is a copy of the host allocation with its
 * poison and guard bands, so stray device writes are caught on the host.
 *
 * Usage: test_hard_cuda [seed] [--small] [--large]
 * Exits 0 printing "skipped: no CUDA device" when no GPU is present. */
#include "support.c" /* the C tests' support library, compiled into this program */

#include <cuda_runtime.h>

#include "cuda_check.h"

static const mas_dtype value_dtypes[4] = {MAS_FLOAT32, MAS_FLOAT64, MAS_FLOAT16, MAS_BFLOAT16};
static const mas_dtype path_dtypes[7] = {MAS_FLOAT32, MAS_FLOAT64, MAS_FLOAT16, MAS_BFLOAT16,
                                         MAS_INT32,   MAS_INT64,   MAS_UINT8};

/* Device copies of every allocation of a ts_hard_call. */
typedef struct dev_call {
    unsigned char *value, *path, *durations, *indices, *score, *workspace;
    int64_t *x_len, *y_len;
    uint64_t *error_word;
    size_t workspace_size;
    mas_tensor3 value_t;
    mas_hard_outputs out;
} dev_call;

static void *dev_copy(const void *host, size_t bytes) {
    void *d = NULL;
    CUDA_OK(cudaMalloc(&d, bytes ? bytes : 1));
    if (bytes) CUDA_OK(cudaMemcpy(d, host, bytes, cudaMemcpyHostToDevice));
    return d;
}

static void *rebase(const void *host_ptr, const void *host_alloc, void *dev_alloc) {
    return (unsigned char *)dev_alloc + ((const unsigned char *)host_ptr - (const unsigned char *)host_alloc);
}

/* 1: calls get the smallest workspace (mas_hard_cuda_min_workspace_size),
 * so that they run the long form wherever it is smaller. */
static int use_min_workspace = 0;

static void dev_call_make(dev_call *d, const ts_hard_call *c) {
    memset(d, 0, sizeof *d);
    const ts_hard_plan *p = &c->plan;
    d->value = (unsigned char *)dev_copy(c->value.alloc, c->value.alloc_bytes);
    d->path = (unsigned char *)dev_copy(c->path.alloc, c->path.alloc_bytes);
    d->durations = (unsigned char *)dev_copy(c->durations.alloc, c->durations.alloc_bytes);
    d->indices = (unsigned char *)dev_copy(c->indices.alloc, c->indices.alloc_bytes);
    d->score = (unsigned char *)dev_copy(c->score.alloc, c->score.alloc_bytes);
    d->x_len = (int64_t *)dev_copy(c->x_len, (size_t)p->batch * sizeof(int64_t));
    d->y_len = (int64_t *)dev_copy(c->y_len, (size_t)p->batch * sizeof(int64_t));
    d->workspace_size = use_min_workspace
                            ? mas_hard_cuda_min_workspace_size(p->batch, p->tokens, p->frames, p->dtype)
                            : mas_hard_cuda_workspace_size(p->batch, p->tokens, p->frames, p->dtype);
    CUDA_OK(cudaMalloc((void **)&d->workspace, d->workspace_size + 8));
    /* Garbage in the workspace: the call must not rely on zeros. */
    CUDA_OK(cudaMemset(d->workspace, 0x69, d->workspace_size + 8));
    CUDA_OK(cudaMalloc((void **)&d->error_word, sizeof(uint64_t)));
    CUDA_OK(cudaMemset(d->error_word, 0xff, sizeof(uint64_t)));
    d->value_t = c->value.tensor;
    d->value_t.data = rebase(c->value.tensor.data, c->value.alloc, d->value);
    memset(&d->out, 0, sizeof d->out);
    if (c->out.path.data) {
        d->out.path = c->out.path;
        d->out.path.data = rebase(c->out.path.data, c->path.alloc, d->path);
    }
    if (c->out.durations) {
        d->out.durations = (int32_t *)rebase(c->out.durations, c->durations.alloc, d->durations);
        d->out.durations_stride = c->out.durations_stride;
    }
    if (c->out.indices) {
        d->out.indices = (int32_t *)rebase(c->out.indices, c->indices.alloc, d->indices);
        d->out.indices_stride = c->out.indices_stride;
    }
    if (c->out.score) d->out.score = rebase(c->out.score, c->score.alloc, d->score);
}

static void dev_call_free(dev_call *d) {
    cudaFree(d->value);
    cudaFree(d->path);
    cudaFree(d->durations);
    cudaFree(d->indices);
    cudaFree(d->score);
    cudaFree(d->workspace);
    cudaFree(d->x_len);
    cudaFree(d->y_len);
    cudaFree(d->error_word);
}

static mas_status dev_call_run(dev_call *d, const ts_hard_call *c, cudaStream_t stream) {
    return mas_hard_cuda(&d->value_t, d->x_len, d->y_len, &d->out,
                         d->workspace + c->plan.workspace_misalign, d->workspace_size,
                         (void *)stream, d->error_word);
}

/* Copies every device allocation back over the host one. */
static void dev_call_fetch(const dev_call *d, ts_hard_call *c, mas_error *err) {
    CUDA_OK(cudaDeviceSynchronize());
    CUDA_OK(cudaMemcpy(c->value.alloc, d->value, c->value.alloc_bytes, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(c->path.alloc, d->path, c->path.alloc_bytes, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(c->durations.alloc, d->durations, c->durations.alloc_bytes, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(c->indices.alloc, d->indices, c->indices.alloc_bytes, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(c->score.alloc, d->score, c->score.alloc_bytes, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(c->x_len, d->x_len, (size_t)c->plan.batch * sizeof(int64_t), cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(c->y_len, d->y_len, (size_t)c->plan.batch * sizeof(int64_t), cudaMemcpyDeviceToHost));
    uint64_t word = 0;
    CUDA_OK(cudaMemcpy(&word, d->error_word, sizeof word, cudaMemcpyDeviceToHost));
    mas_decode_device_error(word, err);
}

typedef struct saved_outputs {
    unsigned char *path, *durations, *indices, *score;
} saved_outputs;

static unsigned char *dup_bytes(const unsigned char *p, size_t n) {
    unsigned char *q = (unsigned char *)malloc(n ? n : 1);
    memcpy(q, p, n);
    return q;
}

static void save_outputs(saved_outputs *s, const ts_hard_call *c) {
    s->path = dup_bytes(c->path.alloc, c->path.alloc_bytes);
    s->durations = dup_bytes(c->durations.alloc, c->durations.alloc_bytes);
    s->indices = dup_bytes(c->indices.alloc, c->indices.alloc_bytes);
    s->score = dup_bytes(c->score.alloc, c->score.alloc_bytes);
}

static void free_saved(saved_outputs *s) {
    free(s->path);
    free(s->durations);
    free(s->indices);
    free(s->score);
}

static void repoison(ts_hard_call *c) {
    memset(c->path.alloc, TS_PATH_FILL, c->path.alloc_bytes);
    memset(c->durations.alloc, TS_DURATIONS_FILL, c->durations.alloc_bytes);
    memset(c->indices.alloc, TS_INDICES_FILL, c->indices.alloc_bytes);
    memset(c->score.alloc, TS_SCORE_FILL, c->score.alloc_bytes);
}

/* Runs the call on the GPU, checks it against the reference, then runs
 * mas_hard_cpu on the same inputs and compares every output byte and the
 * reported error. */
static void gpu_vs_reference_and_cpu(ts_hard_call *call) {
    dev_call d;
    dev_call_make(&d, call);
    mas_status st = dev_call_run(&d, call, 0);
    TS_CHECK(st == MAS_OK, "mas_hard_cuda returned %d (%s)", (int)st, mas_status_string(st));
    mas_error gerr;
    dev_call_fetch(&d, call, &gerr);
    dev_call_free(&d);
    if (st != MAS_OK) return;

    /* The reference's first failing item is what the error word must name. */
    mas_error want = {MAS_OK, 0, -1};
    for (int64_t b = 0; b < call->plan.batch; b++)
        if (call->refs[b].status != MAS_OK) {
            want.status = call->refs[b].status;
            want.item = b;
            break;
        }
    TS_CHECK(gerr.status == want.status && gerr.item == want.item,
             "device error word: status %d item %lld, reference: status %d item %lld",
             (int)gerr.status, (long long)gerr.item, (int)want.status, (long long)want.item);
    ts_hard_call_check_outputs(call);

    saved_outputs gpu;
    save_outputs(&gpu, call);
    repoison(call);
    mas_error cerr = {-5, 0, 77};
    mas_status cst = ts_hard_call_run(call, &cerr);
    TS_CHECK(cst == (mas_status)want.status && (cst == MAS_OK || cerr.item == gerr.item),
             "mas_hard_cpu: status %d item %lld; GPU: status %d item %lld", (int)cst,
             (long long)cerr.item, (int)gerr.status, (long long)gerr.item);
    TS_CHECK(memcmp(gpu.path, call->path.alloc, call->path.alloc_bytes) == 0, "path differs from mas_hard_cpu");
    TS_CHECK(memcmp(gpu.durations, call->durations.alloc, call->durations.alloc_bytes) == 0,
             "durations differ from mas_hard_cpu");
    TS_CHECK(memcmp(gpu.indices, call->indices.alloc, call->indices.alloc_bytes) == 0,
             "indices differ from mas_hard_cpu");
    TS_CHECK(memcmp(gpu.score, call->score.alloc, call->score.alloc_bytes) == 0, "score differs from mas_hard_cpu");
    free_saved(&gpu);
}

static void pick_lengths(ts_rng *rng, int64_t tokens, int64_t frames, int64_t *x, int64_t *y) {
    int64_t most_x = tokens < frames ? tokens : frames;
    int64_t y_len = ts_rng_int(rng, 1, frames), x_len;
    switch (ts_rng_int(rng, 0, 7)) {
    case 0: y_len = frames; x_len = ts_rng_int(rng, 1, most_x); break;
    case 1: x_len = y_len = ts_rng_int(rng, 1, most_x); break;
    case 2: x_len = 1; break;
    case 3: x_len = most_x; y_len = ts_rng_int(rng, x_len, frames); break;
    case 4: x_len = most_x; y_len = frames; break;
    default: x_len = ts_rng_int(rng, 1, tokens < y_len ? tokens : y_len); break;
    }
    *x = x_len;
    *y = y_len;
}

typedef struct size_class {
    const char *name;
    int64_t max_batch, max_tokens, max_frames;
} size_class;

enum { NO_ERROR = 0, ERR_NAN, ERR_POS_INF, ERR_LENGTH, ERR_X_GT_Y, ERR_NO_PATH, ERROR_KINDS };

/* Makes item b fail in the given way. */
static void inject_error(ts_rng *rng, ts_hard_call *call, int64_t b, int kind) {
    const mas_tensor3 *v = &call->value.tensor;
    int64_t T = call->plan.tokens, S = call->plan.frames;
    int64_t X = call->x_len[b], Y = call->y_len[b];
    /* A cell of the band (j - (Y-X) <= i <= j): only those are read, so
     * only those can be a value error (mas.h). */
    int64_t j = ts_rng_int(rng, 0, Y - 1);
    int64_t i = ts_rng_int(rng, j - (Y - X) > 0 ? j - (Y - X) : 0, j < X - 1 ? j : X - 1);
    switch (kind) {
    case ERR_NAN: ts_store(v->data, ts_view_offset(v, b, i, j), (mas_dtype)v->dtype, NAN); break;
    case ERR_POS_INF: ts_store(v->data, ts_view_offset(v, b, i, j), (mas_dtype)v->dtype, INFINITY); break;
    case ERR_LENGTH:
        switch (ts_rng_int(rng, 0, 3)) {
        case 0: call->x_len[b] = 0; break;
        case 1: call->x_len[b] = T + 1; break;
        case 2: call->y_len[b] = S + ts_rng_int(rng, 1, 3); break;
        default: call->y_len[b] = -ts_rng_int(rng, 0, 2); break;
        }
        break;
    case ERR_X_GT_Y:
        if (Y < T) {
            call->x_len[b] = ts_rng_int(rng, Y + 1, T);
        } else {
            call->x_len[b] = 0; /* no room for x > y: a length error instead */
        }
        break;
    default: /* the last cell is on every path */
        ts_store(v->data, ts_view_offset(v, b, X - 1, Y - 1), (mas_dtype)v->dtype, -INFINITY);
        break;
    }
}

/* long_runs: loglik values with one token a item raised above every other
 * cell, so that its run spans most of the band: runs across several 32-frame
 * decision words (the one-block kernel's backtrack reads a word at a time),
 * and past the chunks a warp of that kernel skips or sweeps masked. */
static void run_case(ts_rng *rng, int64_t case_no, const size_class *size, int with_errors,
                     int long_runs) {
    ts_hard_plan plan;
    memset(&plan, 0, sizeof plan);
    plan.dtype = value_dtypes[case_no % 4];
    plan.path_dtype = path_dtypes[case_no % 7];
    plan.wants = (int)ts_rng_int(rng, 1, TS_WANT_ALL);
    plan.threads = 1;
    ts_hard_plan_random_sizes(rng, &plan, size->max_batch, size->max_tokens, size->max_frames);
    /* Half the cases on the fast loaders' plain layouts, half random. */
    if (ts_rng_chance(rng, 0.5)) {
        ts_layout_plain(&plan.value_layout, ts_rng_chance(rng, 0.5));
        plan.value_layout.guard = ts_rng_chance(rng, 0.5) ? 0 : 8;
        ts_layout_plain(&plan.path_layout, plan.value_layout.axis_order[1] == 2);
        plan.path_layout.guard = 8;
    } else {
        ts_layout_random(rng, &plan.value_layout, 1, 1);
        ts_layout_random(rng, &plan.path_layout, 1, 0);
    }
    const ts_hard_values vals = ts_hard_plan_random_rest(rng, &plan);
    const ts_value_kind kind = long_runs ? TS_VALUES_LOGLIK : vals.kind;
    const int poison_outside = vals.poison_outside;
    const double neg_inf_fraction = vals.neg_inf_fraction;
    int error_kind = with_errors && !vals.shared ? (int)ts_rng_int(rng, 1, ERROR_KINDS - 1) : NO_ERROR;

    ts_hard_call call;
    int made = ts_hard_call_make(&call, &plan);
    if (made)
        for (int64_t b = 0; b < plan.batch; b++)
            pick_lengths(rng, plan.tokens, plan.frames, &call.x_len[b], &call.y_len[b]);
    char plan_text[320];
    ts_hard_plan_describe(&plan, plan_text, sizeof plan_text);
    use_min_workspace = case_no % 3 == 2; /* a third in the long form */
    ts_case_begin("%s case %lld%s: %s %s B=%lld T=%lld S=%lld %s%s%s error=%d", size->name,
                  (long long)case_no, use_min_workspace ? " (long form)" : "",
                  ts_dtype_name(plan.dtype), ts_value_kind_name(kind),
                  (long long)plan.batch, (long long)plan.tokens, (long long)plan.frames, plan_text,
                  poison_outside ? " poison-outside" : "", neg_inf_fraction > 0 ? " -inf-cells" : "",
                  error_kind);
    if (!made) {
        TS_CHECK(0, "out of memory");
        ts_hard_call_free(&call);
        ts_case_end();
        return;
    }
    ts_fill_values(rng, &call.value.tensor, kind, call.x_len, call.y_len, poison_outside);
    if (long_runs)
        for (int64_t b = 0; b < plan.batch; b++) {
            const int64_t X = call.x_len[b], Y = call.y_len[b];
            if (X < 1 || X > Y || X > plan.tokens || Y > plan.frames) continue;
            const int64_t k = ts_rng_int(rng, 0, X - 1);
            for (int64_t j = k; j <= k + (Y - X); j++) /* token k's cells of the band */
                ts_store(call.value.tensor.data, ts_view_offset(&call.value.tensor, b, k, j),
                         (mas_dtype)call.value.tensor.dtype, 3.0);
        }
    if (neg_inf_fraction > 0)
        for (int64_t b = 0; b < plan.batch; b++)
            ts_sprinkle_neg_inf(rng, &call.value.tensor, b, call.x_len[b], call.y_len[b],
                                neg_inf_fraction);
    if (error_kind != NO_ERROR) {
        /* One or two bad items; the lowest must be reported. */
        int64_t nbad = plan.batch > 1 && ts_rng_chance(rng, 0.3) ? 2 : 1;
        for (int64_t n = 0; n < nbad; n++) {
            int64_t b = ts_rng_int(rng, 0, plan.batch - 1);
            inject_error(rng, &call, b, n == 0 ? error_kind : (int)ts_rng_int(rng, 1, ERROR_KINDS - 1));
        }
    }
    ts_hard_call_prepare(&call);
    gpu_vs_reference_and_cpu(&call);
    use_min_workspace = 0;
    ts_hard_call_free(&call);
    ts_case_end();
}

/* The call recorded into a CUDA graph on a side stream and replayed gives
 * the same bytes as a direct call; replaying twice too. */
static void graph_capture_case(ts_rng *rng) {
    ts_hard_plan plan;
    ts_hard_plan_default(&plan, MAS_FLOAT32, 5, 200, 700);
    ts_hard_call call;
    ts_case_begin("graph capture: float32 B=5 T=200 S=700, all outputs");
    if (!ts_hard_call_make(&call, &plan)) {
        TS_CHECK(0, "out of memory");
        ts_case_end();
        return;
    }
    for (int64_t b = 0; b < plan.batch; b++) pick_lengths(rng, plan.tokens, plan.frames, &call.x_len[b], &call.y_len[b]);
    ts_fill_values(rng, &call.value.tensor, TS_VALUES_LOGLIK, call.x_len, call.y_len, 1);
    ts_hard_call_prepare(&call);
    dev_call d;
    dev_call_make(&d, &call);
    cudaStream_t stream;
    CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    cudaGraph_t graph;
    CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    mas_status st = dev_call_run(&d, &call, stream);
    CUDA_OK(cudaStreamEndCapture(stream, &graph));
    TS_CHECK(st == MAS_OK, "capture: status %d", (int)st);
    cudaGraphExec_t exec;
    CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
    for (int rep = 0; rep < 2; rep++) {
        CUDA_OK(cudaGraphLaunch(exec, stream));
        CUDA_OK(cudaStreamSynchronize(stream));
        mas_error err;
        dev_call_fetch(&d, &call, &err);
        TS_CHECK(err.status == MAS_OK, "replay %d: error word status %d", rep, (int)err.status);
        ts_hard_call_check_outputs(&call);
        repoison(&call);
        CUDA_OK(cudaMemcpy(d.path, call.path.alloc, call.path.alloc_bytes, cudaMemcpyHostToDevice));
    }
    CUDA_OK(cudaGraphExecDestroy(exec));
    CUDA_OK(cudaGraphDestroy(graph));
    CUDA_OK(cudaStreamDestroy(stream));
    dev_call_free(&d);
    ts_hard_call_free(&call);
    ts_case_end();
}

/* Host-side checks answer at once, as on the CPU. */
static void argument_errors_case(void) {
    ts_case_begin("argument errors");
    int64_t *xl, *yl;
    float *v, *p;
    CUDA_OK(cudaMalloc((void **)&xl, 16));
    CUDA_OK(cudaMalloc((void **)&yl, 16));
    CUDA_OK(cudaMalloc((void **)&v, 4 * 8 * 8));
    CUDA_OK(cudaMalloc((void **)&p, 4 * 8 * 8));
    mas_tensor3 value = {v, MAS_FLOAT32, 0, {1, 8, 8}, {64, 8, 1}};
    mas_hard_outputs out;
    memset(&out, 0, sizeof out);
    out.path = value;
    out.path.data = p;
    size_t ws = mas_hard_cuda_workspace_size(1, 8, 8, MAS_FLOAT32);
    void *w;
    CUDA_OK(cudaMalloc(&w, ws));
    TS_CHECK(mas_hard_cuda(NULL, xl, yl, &out, w, ws, NULL, NULL) == MAS_ERR_NULL_POINTER, "NULL value");
    TS_CHECK(mas_hard_cuda(&value, xl, yl, &out, NULL, ws, NULL, NULL) == MAS_ERR_NULL_POINTER, "NULL workspace");
    {   /* no workspace: [1, 400, 8] runs in no one block, nor with a 256 KB dense path */
        float *big;
        CUDA_OK(cudaMalloc((void **)&big, 4 * 400 * 640));
        mas_tensor3 tall = {big, MAS_FLOAT32, 0, {1, 400, 8}, {3200, 8, 1}};
        mas_hard_outputs o2 = out;
        o2.path = tall;
        TS_CHECK(mas_hard_cuda(&tall, xl, yl, &o2, NULL, 0, NULL, NULL) == MAS_ERR_WORKSPACE_TOO_SMALL,
                 "no workspace, T = 400");
        mas_tensor3 wide = {big, MAS_FLOAT32, 0, {1, 100, 640}, {64000, 640, 1}};
        o2.path = wide;
        TS_CHECK(mas_hard_cuda(&wide, xl, yl, &o2, NULL, 0, NULL, NULL) == MAS_ERR_WORKSPACE_TOO_SMALL,
                 "no workspace, a 256 KB path an item");
        cudaFree(big);
    }
    const size_t least = mas_hard_cuda_min_workspace_size(1, 8, 8, MAS_FLOAT32);
    TS_CHECK(least > 0 && least <= ws, "min workspace size %zu (unbounded %zu)", least, ws);
    TS_CHECK(mas_hard_cuda(&value, xl, yl, &out, w, least - 1, NULL, NULL) == MAS_ERR_WORKSPACE_TOO_SMALL, "small workspace");
    mas_tensor3 bad = value;
    bad.dtype = MAS_INT32;
    TS_CHECK(mas_hard_cuda(&bad, xl, yl, &out, w, ws, NULL, NULL) == MAS_ERR_BAD_DTYPE, "int32 value");
    bad = value;
    bad.dim[1] = 0;
    TS_CHECK(mas_hard_cuda(&bad, xl, yl, &out, w, ws, NULL, NULL) == MAS_ERR_BAD_SHAPE, "T = 0");
    mas_hard_outputs wrong = out;
    wrong.path.dim[2] = 7;
    TS_CHECK(mas_hard_cuda(&value, xl, yl, &wrong, w, ws, NULL, NULL) == MAS_ERR_BAD_SHAPE, "path shape");
    mas_hard_outputs none;
    memset(&none, 0, sizeof none);
    TS_CHECK(mas_hard_cuda(&value, xl, yl, &none, w, ws, NULL, NULL) == MAS_ERR_BAD_ARGUMENT, "no output");
    TS_CHECK(mas_has_cuda() == 1, "mas_has_cuda");
    cudaFree(xl);
    cudaFree(yl);
    cudaFree(v);
    cudaFree(p);
    cudaFree(w);
    ts_case_end();
}

/* Device outputs of one call on [B, T, S] with a contiguous uint8 path
 * (poisoned), float32 scores and the error word at all ones; for the cases
 * that build their inputs by hand (mask_case, large_case). */
typedef struct dev_outputs {
    int64_t B, T, S;
    uint8_t *path;
    int32_t *durations, *indices;
    float *score;
    uint64_t *error_word;
} dev_outputs;

static void dev_outputs_make(dev_outputs *o, int64_t B, int64_t T, int64_t S) {
    o->B = B;
    o->T = T;
    o->S = S;
    CUDA_OK(cudaMalloc((void **)&o->path, (size_t)(B * T * S)));
    CUDA_OK(cudaMemset(o->path, 0xa5, (size_t)(B * T * S)));
    CUDA_OK(cudaMalloc((void **)&o->durations, (size_t)(B * T) * 4));
    CUDA_OK(cudaMalloc((void **)&o->indices, (size_t)(B * S) * 4));
    CUDA_OK(cudaMalloc((void **)&o->score, (size_t)B * 4));
    CUDA_OK(cudaMalloc((void **)&o->error_word, 8));
    CUDA_OK(cudaMemset(o->error_word, 0xff, 8));
}

/* After the call: everything back to the host (path may be NULL). */
static void dev_outputs_fetch(const dev_outputs *o, uint8_t *path, int32_t *durations,
                              int32_t *indices, float *score, uint64_t *word) {
    CUDA_OK(cudaDeviceSynchronize());
    const int64_t B = o->B, T = o->T, S = o->S;
    if (path) CUDA_OK(cudaMemcpy(path, o->path, (size_t)(B * T * S), cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(durations, o->durations, (size_t)(B * T) * 4, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(indices, o->indices, (size_t)(B * S) * 4, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(score, o->score, (size_t)B * 4, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(word, o->error_word, 8, cudaMemcpyDeviceToHost));
}

static void dev_outputs_free(dev_outputs *o) {
    cudaFree(o->path);
    cudaFree(o->durations);
    cudaFree(o->indices);
    cudaFree(o->score);
    cudaFree(o->error_word);
}

/* mas_hard_cuda_mask: the lengths counted from a mask (float32, uint8,
 * bfloat16 or int64; prefix 0/1, or with holes and other non-zero values in
 * the first row and column, where the count of non-zero entries is the
 * rule; -0.0 counts as zero), both layouts, on the one-block kernel (small
 * T) and the multi-kernel path (T = 1100): the outputs equal mas_hard_cpu's
 * with the counted lengths, item errors (a count of 0, x_len > y_len)
 * included. */
static void mask_case(ts_rng *rng, int64_t case_no) {
    const int64_t B = ts_rng_int(rng, 1, 6);
    const int64_t T = case_no % 4 == 3 ? 1100 : ts_rng_int(rng, 1, 200);
    const int64_t S = T + ts_rng_int(rng, 0, case_no % 4 == 3 ? 400 : 600);
    const int bst = (int)(case_no % 2);
    const mas_dtype mdt[4] = {MAS_FLOAT32, MAS_UINT8, MAS_BFLOAT16, MAS_INT64};
    const mas_dtype mask_dtype = mdt[case_no % 4];
    const int holes = ts_rng_chance(rng, 0.3);
    ts_case_begin("mask case %lld: B=%lld T=%lld S=%lld %s mask %s%s", (long long)case_no, (long long)B,
                  (long long)T, (long long)S, bst ? "bst" : "bts", ts_dtype_name(mask_dtype),
                  holes ? " with holes" : "");
    const int64_t n = B * T * S;
    const size_t mes = mas_dtype_size(mask_dtype);
    float *v = (float *)malloc((size_t)n * 4);
    unsigned char *m = (unsigned char *)calloc((size_t)n, mes);
    int64_t *xl = (int64_t *)malloc(B * 8), *yl = (int64_t *)malloc(B * 8);
    /* element (b, i, j) of the [B, T, S] view at offset */
    #define AT(b, i, j) ((b) * T * S + (bst ? (j) * T + (i) : (i) * S + (j)))
    for (int64_t k = 0; k < n; k++) v[k] = (float)ts_rng_uniform(rng, -3.0, 1.0);
    for (int64_t b = 0; b < B; b++) {
        int64_t x = ts_rng_int(rng, 1, T), y = ts_rng_int(rng, x, S);
        if (ts_rng_chance(rng, 0.1)) x = 0;                 /* BAD_LENGTH */
        if (ts_rng_chance(rng, 0.1) && x > 1) y = x - 1;    /* x_len > y_len */
        /* the prefix mask; with holes the counts are what the rule says */
        int64_t cx = 0, cy = 0;
        for (int64_t i = 0; i < T; i++)
            for (int64_t j = 0; j < S; j++) {
                int on = i < x && j < y;
                if (holes && (i == 0 || j == 0) && on && ts_rng_chance(rng, 0.2)) on = 0;
                double val = on ? (holes ? ts_rng_int(rng, 1, 3) : 1) : 0;
                if (!on && holes && ts_rng_chance(rng, 0.05) && mask_dtype != MAS_UINT8 &&
                    mask_dtype != MAS_INT64)
                    val = -0.0;
                unsigned char *e = m + AT(b, i, j) * mes;
                switch (mask_dtype) {
                case MAS_FLOAT32: *(float *)e = (float)val; break;
                case MAS_UINT8: *e = (unsigned char)val; break;
                case MAS_BFLOAT16: *(uint16_t *)e = ts_f32_to_bf16((float)val); break;
                default: *(int64_t *)e = (int64_t)val; break;
                }
                if (on && j == 0) cx++;
                if (on && i == 0) cy++;
            }
        xl[b] = cx;
        yl[b] = cy;
    }
    int64_t strides[3] = {T * S, bst ? 1 : S, bst ? T : 1};
    mas_tensor3 value = {v, MAS_FLOAT32, 0, {B, T, S}, {strides[0], strides[1], strides[2]}};
    mas_tensor3 mask = {m, mask_dtype, 0, {B, T, S}, {strides[0], strides[1], strides[2]}};
    /* the CPU with the counted lengths */
    uint8_t *path_c = (uint8_t *)malloc((size_t)n), *path_g = (uint8_t *)malloc((size_t)n);
    int32_t *dur_c = (int32_t *)malloc(B * T * 4), *idx_c = (int32_t *)malloc(B * S * 4);
    int32_t *dur_g = (int32_t *)malloc(B * T * 4), *idx_g = (int32_t *)malloc(B * S * 4);
    float score_c[6], score_g[6];
    mas_hard_outputs oc;
    memset(&oc, 0, sizeof oc);
    oc.path = (mas_tensor3){path_c, MAS_UINT8, 0, {B, T, S}, {strides[0], strides[1], strides[2]}};
    oc.durations = dur_c;
    oc.durations_stride = T;
    oc.indices = idx_c;
    oc.indices_stride = S;
    oc.score = score_c;
    size_t wsc = mas_hard_cpu_workspace_size(B, T, S, MAS_FLOAT32, 1);
    void *wc = malloc(wsc);
    mas_error cerr;
    mas_status cst = mas_hard_cpu(&value, xl, yl, &oc, wc, wsc, 1, &cerr);
    free(wc);

    void *vd = dev_copy(v, (size_t)n * 4), *md = dev_copy(m, (size_t)n * mes);
    dev_outputs d;
    dev_outputs_make(&d, B, T, S);
    size_t wsg = mas_hard_cuda_mask_workspace_size(B, T, S, MAS_FLOAT32);
    TS_CHECK(wsg > mas_hard_cuda_workspace_size(B, T, S, MAS_FLOAT32), "mask workspace size");
    void *wg;
    CUDA_OK(cudaMalloc(&wg, wsg));
    mas_tensor3 vdev = value, mdev = mask;
    vdev.data = vd;
    mdev.data = md;
    mas_hard_outputs og = oc;
    og.path.data = d.path;
    og.durations = d.durations;
    og.indices = d.indices;
    og.score = d.score;
    const size_t least = mas_hard_cuda_mask_min_workspace_size(B, T, S, MAS_FLOAT32);
    TS_CHECK(least > 0 && least <= wsg, "mask min workspace %zu (unbounded %zu)", least, wsg);
    TS_CHECK(mas_hard_cuda_mask(&vdev, &mdev, &og, wg, least - 1, NULL, d.error_word) ==
                 MAS_ERR_WORKSPACE_TOO_SMALL,
             "one byte short");
    mas_tensor3 mbad = mdev;
    mbad.dim[2] = S + 1;
    TS_CHECK(mas_hard_cuda_mask(&vdev, &mbad, &og, wg, wsg, NULL, d.error_word) == MAS_ERR_BAD_SHAPE,
             "mask dims");
    mas_status gst = mas_hard_cuda_mask(&vdev, &mdev, &og, wg, wsg, NULL, d.error_word);
    TS_CHECK(gst == MAS_OK, "mas_hard_cuda_mask status %d", (int)gst);
    uint64_t word;
    dev_outputs_fetch(&d, path_g, dur_g, idx_g, score_g, &word);
    mas_error gerr;
    mas_decode_device_error(word, &gerr);
    TS_CHECK(gerr.status == (int32_t)cst && (cst == MAS_OK || gerr.item == cerr.item),
             "error: CUDA status %d item %lld, CPU status %d item %lld", (int)gerr.status,
             (long long)gerr.item, (int)cst, (long long)cerr.item);
    TS_CHECK(memcmp(dur_g, dur_c, B * T * 4) == 0, "durations differ from mas_hard_cpu");
    TS_CHECK(memcmp(idx_g, idx_c, B * S * 4) == 0, "indices differ from mas_hard_cpu");
    TS_CHECK(memcmp(score_g, score_c, B * 4) == 0, "scores differ from mas_hard_cpu");
    TS_CHECK(memcmp(path_g, path_c, (size_t)n) == 0, "path differs from mas_hard_cpu");
    if (least < wsg) { /* the long form, lengths counted from the mask too */
        CUDA_OK(cudaMemset(d.path, 0x5a, (size_t)n));
        CUDA_OK(cudaMemset(d.indices, 0x5a, (size_t)B * S * 4));
        CUDA_OK(cudaMemset(d.error_word, 0xff, 8));
        gst = mas_hard_cuda_mask(&vdev, &mdev, &og, wg, least, NULL, d.error_word);
        TS_CHECK(gst == MAS_OK, "mas_hard_cuda_mask (long form) status %d", (int)gst);
        dev_outputs_fetch(&d, path_g, dur_g, idx_g, score_g, &word);
        mas_decode_device_error(word, &gerr);
        TS_CHECK(gerr.status == (int32_t)cst && (cst == MAS_OK || gerr.item == cerr.item),
                 "long form error: CUDA status %d item %lld, CPU status %d item %lld",
                 (int)gerr.status, (long long)gerr.item, (int)cst, (long long)cerr.item);
        TS_CHECK(memcmp(dur_g, dur_c, B * T * 4) == 0, "long form: durations differ");
        TS_CHECK(memcmp(idx_g, idx_c, B * S * 4) == 0, "long form: indices differ");
        TS_CHECK(memcmp(score_g, score_c, B * 4) == 0, "long form: scores differ");
        TS_CHECK(memcmp(path_g, path_c, (size_t)n) == 0, "long form: path differs");
    }
    /* No workspace (NULL, 0): taken when each item runs in one block (the
     * one-block kernel also wants rows of 16 bytes: S % 4 == 0 for bts
     * float32, T % 4 == 0 for bst) and the dense path, if asked, is at most
     * 128 KB an item; else MAS_ERR_WORKSPACE_TOO_SMALL. The same outputs
     * either way. */
    for (int with_path = 0; with_path < 2; with_path++) {
        mas_hard_outputs on = og;
        if (!with_path) on.path.data = NULL;
        CUDA_OK(cudaMemset(d.durations, 0x5a, (size_t)B * T * 4));
        CUDA_OK(cudaMemset(d.indices, 0x5a, (size_t)B * S * 4));
        CUDA_OK(cudaMemset(d.path, 0x5a, (size_t)n));
        CUDA_OK(cudaMemset(d.error_word, 0xff, 8));
        gst = mas_hard_cuda_mask(&vdev, &mdev, &on, NULL, 0, NULL, d.error_word);
        const int must_run = T <= 64 && S <= 1000 && (bst ? T % 4 : S % 4) == 0 &&
                             (!with_path || T * S <= 128 * 1024);
        const int may_run = T <= 320 && (!with_path || T * S <= 128 * 1024);
        TS_CHECK(gst == MAS_OK ? may_run : gst == MAS_ERR_WORKSPACE_TOO_SMALL && !must_run,
                 "no workspace, path %d: status %d", with_path, (int)gst);
        TS_CHECK(mas_hard_cuda_mask(&vdev, &mdev, &on, NULL, 1, NULL, d.error_word) ==
                     MAS_ERR_NULL_POINTER, "NULL workspace of 1 byte");
        if (gst != MAS_OK) continue;
        dev_outputs_fetch(&d, path_g, dur_g, idx_g, score_g, &word);
        mas_decode_device_error(word, &gerr);
        TS_CHECK(gerr.status == (int32_t)cst && (cst == MAS_OK || gerr.item == cerr.item),
                 "no workspace: CUDA status %d item %lld, CPU status %d item %lld",
                 (int)gerr.status, (long long)gerr.item, (int)cst, (long long)cerr.item);
        TS_CHECK(memcmp(dur_g, dur_c, B * T * 4) == 0, "no workspace: durations differ");
        TS_CHECK(memcmp(idx_g, idx_c, B * S * 4) == 0, "no workspace: indices differ");
        TS_CHECK(memcmp(score_g, score_c, B * 4) == 0, "no workspace: scores differ");
        if (with_path) TS_CHECK(memcmp(path_g, path_c, (size_t)n) == 0, "no workspace: path differs");
    }
    #undef AT
    cudaFree(vd); cudaFree(md); cudaFree(wg);
    dev_outputs_free(&d);
    free(v); free(m); free(xl); free(yl); free(path_c); free(path_g); free(dur_c); free(idx_c);
    free(dur_g); free(idx_g);
    ts_case_end();
}

/* More than 2^31 elements: bfloat16 value [2, 1024, 1.1M], uint8 path,
 * against mas_hard_cpu on all cores (the full-table reference would need
 * tens of GB). */
static void large_case(uint64_t seed) {
    const int64_t B = 2, T = 1024, S = 1100000;
    const int64_t n = B * T * S;
    ts_case_begin("large: bfloat16 B=%lld T=%lld S=%lld (%lld elements > 2^31)", (long long)B,
                  (long long)T, (long long)S, (long long)n);
    uint16_t *v = (uint16_t *)malloc((size_t)n * 2);
    uint8_t *path_h = (uint8_t *)malloc((size_t)n);
    if (!v || !path_h) {
        TS_CHECK(0, "out of host memory");
        free(v);
        free(path_h);
        ts_case_end();
        return;
    }
    uint64_t s = seed | 1;
    for (int64_t k = 0; k < n; k++) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        /* multiples of 1/8 in [-8, 8): exact in bfloat16, many ties */
        float x = (float)((int)(s >> 40 & 127) - 64) / 8.0f;
        v[k] = ts_f32_to_bf16(x);
    }
    int64_t xl[2] = {T, T - 17}, yl[2] = {S, S - 1000};
    mas_tensor3 value = {v, MAS_BFLOAT16, 0, {B, T, S}, {T * S, S, 1}};
    int32_t *dur_c = (int32_t *)malloc(B * T * 4), *idx_c = (int32_t *)malloc(B * S * 4);
    float score_c[2];
    mas_hard_outputs oc;
    memset(&oc, 0, sizeof oc);
    oc.durations = dur_c;
    oc.durations_stride = T;
    oc.indices = idx_c;
    oc.indices_stride = S;
    oc.score = score_c;
    size_t wsc = mas_hard_cpu_workspace_size(B, T, S, MAS_BFLOAT16, 0);
    void *wc = malloc(wsc);
    mas_status cst = mas_hard_cpu(&value, xl, yl, &oc, wc, wsc, 0, NULL);
    free(wc);
    TS_CHECK(cst == MAS_OK, "mas_hard_cpu status %d", (int)cst);

    void *vd = dev_copy(v, (size_t)n * 2);
    int64_t *xd = (int64_t *)dev_copy(xl, sizeof xl), *yd = (int64_t *)dev_copy(yl, sizeof yl);
    dev_outputs d;
    dev_outputs_make(&d, B, T, S);
    size_t wsg = mas_hard_cuda_workspace_size(B, T, S, MAS_BFLOAT16);
    void *wg;
    CUDA_OK(cudaMalloc(&wg, wsg));
    mas_tensor3 vdev = value;
    vdev.data = vd;
    mas_hard_outputs og;
    memset(&og, 0, sizeof og);
    og.path = (mas_tensor3){d.path, MAS_UINT8, 0, {B, T, S}, {T * S, S, 1}};
    og.durations = d.durations;
    og.durations_stride = T;
    og.indices = d.indices;
    og.indices_stride = S;
    og.score = d.score;
    mas_status gst = mas_hard_cuda(&vdev, xd, yd, &og, wg, wsg, NULL, d.error_word);
    TS_CHECK(gst == MAS_OK, "mas_hard_cuda status %d", (int)gst);
    int32_t *dur_g = (int32_t *)malloc(B * T * 4), *idx_g = (int32_t *)malloc(B * S * 4);
    float score_g[2];
    uint64_t word;
    dev_outputs_fetch(&d, path_h, dur_g, idx_g, score_g, &word);
    TS_CHECK(word == MAS_DEVICE_NO_ERROR, "error word %llx", (unsigned long long)word);
    TS_CHECK(memcmp(dur_g, dur_c, B * T * 4) == 0, "durations differ from mas_hard_cpu");
    TS_CHECK(memcmp(idx_g, idx_c, B * S * 4) == 0, "indices differ from mas_hard_cpu");
    TS_CHECK(memcmp(score_g, score_c, 8) == 0, "score differs from mas_hard_cpu");
    /* The dense path from the CPU's indices, element by element. */
    int64_t wrong = 0, first_wrong = -1;
    for (int64_t b = 0; b < B; b++)
        for (int64_t i = 0; i < T; i++) {
            const uint8_t *row = path_h + (b * T + i) * S;
            for (int64_t j = 0; j < S; j++) {
                uint8_t want = idx_c[b * S + j] == i;
                if (row[j] != want) {
                    if (first_wrong < 0) first_wrong = (b * T + i) * S + j;
                    wrong++;
                }
            }
        }
    TS_CHECK(wrong == 0, "%lld path elements wrong, first at element %lld", (long long)wrong,
             (long long)first_wrong);
    cudaFree(vd);
    cudaFree(xd);
    cudaFree(yd);
    cudaFree(wg);
    dev_outputs_free(&d);
    free(v);
    free(path_h);
    free(dur_c);
    free(idx_c);
    free(dur_g);
    free(idx_g);
    ts_case_end();
}

int main(int argc, char **argv) {
    int small = 0, large = 0;
    int nargs = 1;
    char *args[2] = {argv[0], NULL};
    for (int k = 1; k < argc; k++) {
        if (!strcmp(argv[k], "--small")) small = 1;
        else if (!strcmp(argv[k], "--large")) large = 1;
        else if (nargs < 2) args[nargs++] = argv[k];
    }
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
        printf("skipped: no CUDA device\n");
        return 0;
    }
    uint64_t seed = ts_seed_from_args(nargs, args);
    ts_rng rng;
    ts_rng_init(&rng, seed);
    static const size_class tiny = {"tiny", 4, 8, 8};
    static const size_class small_c = {"small", 9, 70, 200};
    static const size_class medium = {"medium", 5, 300, 900};
    static const size_class large_c = {"large", 3, 1100, 2500};
    int64_t case_no = 0;
    argument_errors_case();
    int scale = small ? 1 : 6;
    for (int64_t c = 0; c < 30 * scale; c++) run_case(&rng, case_no++, &tiny, c % 3 == 2, 0);
    for (int64_t c = 0; c < 20 * scale; c++) run_case(&rng, case_no++, &small_c, c % 3 == 2, 0);
    for (int64_t c = 0; c < 4 * scale; c++) run_case(&rng, case_no++, &medium, c % 3 == 2, 0);
    for (int64_t c = 0; c < 2 * scale; c++) run_case(&rng, case_no++, &medium, 0, 1);
    if (!small)
        for (int64_t c = 0; c < 6; c++) run_case(&rng, case_no++, &large_c, c % 3 == 2, 0);
    for (int64_t c = 0; c < 8 * scale; c++) mask_case(&rng, c);
    graph_capture_case(&rng);
    if (large) large_case(seed);
    return ts_finish();
}
