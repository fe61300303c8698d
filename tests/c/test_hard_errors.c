/* Every status mas_hard_cpu can return, and what it leaves behind: the item
 * reported (the lowest bad one), the failed items' outputs (zeros, -1, -inf),
 * the other items' outputs still exact, nothing written outside the outputs
 * or the workspace, inputs unchanged. Also the small helpers of section 1-3
 * of mas.h. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support.h"

static const mas_dtype value_dtypes[4] = {MAS_FLOAT32, MAS_FLOAT64, MAS_FLOAT16,
                                          MAS_BFLOAT16};

/* A batch with random valid lengths and log-likelihood values, random views,
 * every output requested. Returns 0 (after a failed check) if out of memory. */
static int make_valid_call(ts_rng *rng, ts_hard_call *call, mas_dtype dtype, int64_t batch,
                           int64_t tokens, int64_t frames) {
    ts_hard_plan plan;
    ts_hard_plan_default(&plan, dtype, batch, tokens, frames);
    ts_layout_random(rng, &plan.value_layout, 1, 0);
    ts_layout_random(rng, &plan.path_layout, 1, 0);
    ts_row_layout_random(rng, &plan.durations_layout);
    ts_row_layout_random(rng, &plan.indices_layout);
    plan.threads = (int32_t)ts_rng_int(rng, 0, 3);
    plan.workspace_misalign = (size_t)ts_rng_int(rng, 0, 7);
    if (!ts_hard_call_make(call, &plan)) {
        TS_CHECK(0, "out of memory");
        ts_hard_call_free(call);
        return 0;
    }
    for (int64_t b = 0; b < batch; b++) {
        call->y_len[b] = ts_rng_int(rng, 1, frames);
        int64_t most_x = tokens < call->y_len[b] ? tokens : call->y_len[b];
        call->x_len[b] = ts_rng_int(rng, 1, most_x);
    }
    ts_fill_values(rng, &call->value.tensor, TS_VALUES_LOGLIK, call->x_len, call->y_len, 1);
    return 1;
}

static void put(ts_hard_call *call, int64_t b, int64_t i, int64_t j, double x) {
    ts_store(call->value.tensor.data, ts_view_offset(&call->value.tensor, b, i, j),
             (mas_dtype)call->value.tensor.dtype, x);
}

/* Finite values in item b's whole rectangle, after its lengths grew past
 * cells that held poison. */
static void refill_item(ts_rng *rng, ts_hard_call *call, int64_t b) {
    for (int64_t i = 0; i < call->x_len[b] && i < call->plan.tokens; i++)
        for (int64_t j = 0; j < call->y_len[b] && j < call->plan.frames; j++)
            put(call, b, i, j,
                ts_random_value(rng, TS_VALUES_LOGLIK, (mas_dtype)call->value.tensor.dtype));
}

/* A cell of item b that lies on some monotonic path: the recurrence cannot
 * skip it. */
static void cell_on_a_path(ts_rng *rng, const ts_hard_call *call, int64_t b, int64_t *i,
                           int64_t *j) {
    int64_t y_len = call->y_len[b];
    int32_t *path = (int32_t *)malloc((size_t)y_len * sizeof(int32_t));
    *j = ts_rng_int(rng, 0, y_len - 1);
    *i = 0;
    if (!path) return;
    ts_random_path(rng, call->x_len[b], y_len, path);
    *i = path[*j];
    free(path);
}

/* Runs the call (with err, or with NULL err when use_null_err) and checks
 * the status, the item reported and every output against the reference. */
static void run_and_check_item_error(ts_hard_call *call, mas_status expect, int64_t expect_item,
                                     int use_null_err) {
    ts_hard_call_prepare(call);
    /* The reference must agree that this is the error at this item, or the
     * test itself is wrong. */
    for (int64_t b = 0; b < call->plan.batch; b++) {
        mas_status want = b == expect_item ? expect : call->refs[b].status;
        if (b < expect_item || expect_item < 0)
            TS_CHECK(call->refs[b].status == MAS_OK, "test bug: item %lld fails (%d)",
                     (long long)b, (int)call->refs[b].status);
        if (b == expect_item)
            TS_CHECK(call->refs[b].status == want, "test bug: reference says %d at item %lld",
                     (int)call->refs[b].status, (long long)b);
    }
    mas_error err = {-5, 0, 77};
    mas_status st = ts_hard_call_run(call, use_null_err ? NULL : &err);
    TS_CHECK(st == expect, "status %d (%s), expected %d (%s)", (int)st, mas_status_string(st),
             (int)expect, mas_status_string(expect));
    if (!use_null_err) {
        TS_CHECK(err.status == (int32_t)expect, "err.status %d, expected %d", err.status,
                 (int)expect);
        TS_CHECK(err.item == expect_item, "err.item %lld, expected %lld", (long long)err.item,
                 (long long)expect_item);
    }
    ts_hard_call_check_outputs(call);
}

typedef enum item_fault {
    FAULT_NAN_ON_PATH,
    FAULT_POS_INF_ON_PATH,
    FAULT_NAN_OFF_PATHS,      /* inside the rectangle, on no monotonic path: not an error */
    FAULT_NEG_INF_FRAME,      /* a whole frame of -inf */
    FAULT_NEG_INF_START,
    FAULT_NEG_INF_END,
    FAULT_X_GT_Y,
    FAULT_X_ZERO,
    FAULT_X_NEGATIVE,
    FAULT_X_GT_T,
    FAULT_Y_GT_S,
    FAULT_Y_ZERO,             /* with x_len = 0 too: only the length rule applies */
    FAULT_COUNT
} item_fault;

static const char *fault_name(item_fault f) {
    static const char *names[FAULT_COUNT] = {
        "NaN on a path", "+inf on a path", "NaN/+inf inside the lengths but on no path (ok)",
        "-inf frame", "-inf at (0,0)", "-inf at the end", "x_len > y_len", "x_len = 0",
        "x_len < 0", "x_len > T", "y_len > S", "y_len = 0"};
    return names[f];
}

/* Puts fault f into item b; returns the status it must cause. */
static mas_status inject(ts_rng *rng, ts_hard_call *call, int64_t b, item_fault f) {
    int64_t T = call->plan.tokens, S = call->plan.frames, i, j;
    int64_t *x = &call->x_len[b], *y = &call->y_len[b];
    switch (f) {
    case FAULT_NAN_ON_PATH:
        cell_on_a_path(rng, call, b, &i, &j);
        put(call, b, i, j, NAN);
        return MAS_ERR_NONFINITE_VALUE;
    case FAULT_POS_INF_ON_PATH:
        cell_on_a_path(rng, call, b, &i, &j);
        put(call, b, i, j, INFINITY);
        return MAS_ERR_NONFINITE_VALUE;
    case FAULT_NAN_OFF_PATHS:
        /* (x_len-1, 0) and (1, 0) lie above the diagonal i <= j when
         * x_len >= 2: no monotonic path crosses them, so mas.h's band rule
         * says they are never read and cannot be an error. */
        if (*x < 2) *x = 2;
        if (*y < 2) *y = 2;
        refill_item(rng, call, b);
        put(call, b, *x - 1, 0, NAN);
        put(call, b, 1, 0, INFINITY);
        return MAS_OK;
    case FAULT_NEG_INF_FRAME:
        j = ts_rng_int(rng, 0, *y - 1);
        for (i = 0; i < *x; i++) put(call, b, i, j, -INFINITY);
        return MAS_ERR_NO_FINITE_PATH;
    case FAULT_NEG_INF_START:
        put(call, b, 0, 0, -INFINITY);
        return MAS_ERR_NO_FINITE_PATH;
    case FAULT_NEG_INF_END:
        put(call, b, *x - 1, *y - 1, -INFINITY);
        return MAS_ERR_NO_FINITE_PATH;
    case FAULT_X_GT_Y:
        /* Needs y_len < x_len <= T. */
        *x = ts_rng_int(rng, 2, T);
        *y = ts_rng_int(rng, 1, *x - 1);
        return MAS_ERR_X_LEN_GT_Y_LEN;
    case FAULT_X_ZERO:
        *x = 0;
        return MAS_ERR_BAD_LENGTH;
    case FAULT_X_NEGATIVE:
        *x = -ts_rng_int(rng, 1, 5);
        return MAS_ERR_BAD_LENGTH;
    case FAULT_X_GT_T:
        /* Needs S > T so that y_len >= x_len = T + 1 still fits. */
        *x = T + 1;
        *y = ts_rng_int(rng, T + 1, S);
        return MAS_ERR_BAD_LENGTH;
    case FAULT_Y_GT_S:
        *y = S + ts_rng_int(rng, 1, 3);
        return MAS_ERR_BAD_LENGTH;
    case FAULT_Y_ZERO:
        *x = 0;
        *y = 0;
        return MAS_ERR_BAD_LENGTH;
    default: return MAS_OK;
    }
}

/* Sizes where every fault can be injected: T >= 2 for x_len > y_len and
 * S > T for x_len > T. */
static void item_error_case(ts_rng *rng, int64_t case_no, item_fault f, mas_dtype dtype,
                            int two_faults, int use_null_err) {
    /* Sometimes one item with many tokens, so that several threads share
     * the item (the pipelined split) rather than taking whole items. */
    int64_t batch = ts_rng_chance(rng, 0.3) ? 1 : ts_rng_int(rng, 1, 6);
    int64_t tokens = ts_rng_chance(rng, 0.3) ? ts_rng_int(rng, 20, 70) : ts_rng_int(rng, 2, 12);
    int64_t frames = ts_rng_int(rng, tokens + 1, 3 * tokens + 20);
    int64_t bad = ts_rng_int(rng, 0, batch - 1);
    ts_hard_call call;
    ts_case_begin("item error %lld: %s at item %lld%s, %s B=%lld T=%lld S=%lld%s",
                  (long long)case_no, fault_name(f), (long long)bad,
                  two_faults ? " (+ a later bad item)" : "", ts_dtype_name(dtype),
                  (long long)batch, (long long)tokens, (long long)frames,
                  use_null_err ? " err=NULL" : "");
    if (!make_valid_call(rng, &call, dtype, batch, tokens, frames)) {
        ts_case_end();
        return;
    }
    mas_status expect = inject(rng, &call, bad, f);
    if (expect == MAS_OK) {
        run_and_check_item_error(&call, MAS_OK, -1, use_null_err);
        ts_hard_call_free(&call);
        ts_case_end();
        return;
    }
    if (two_faults && bad + 1 < batch) {
        /* A different fault further on: the lowest item is the one named. */
        item_fault later = (item_fault)ts_rng_int(rng, 0, FAULT_COUNT - 1);
        if (later == FAULT_NAN_OFF_PATHS) later = FAULT_NAN_ON_PATH; /* tested on its own */
        (void)inject(rng, &call, ts_rng_int(rng, bad + 1, batch - 1), later);
    }
    run_and_check_item_error(&call, expect, bad, use_null_err);
    ts_hard_call_free(&call);
    ts_case_end();
}

/* NaN and +inf everywhere outside the lengths, lengths well inside the
 * array: not an error, and the answer is the reference's. */
static void poison_outside_case(ts_rng *rng, int64_t case_no, mas_dtype dtype) {
    int64_t batch = ts_rng_int(rng, 1, 5), tokens = ts_rng_int(rng, 2, 20);
    int64_t frames = ts_rng_int(rng, tokens, 60);
    ts_case_begin("poison outside the lengths %lld: %s B=%lld T=%lld S=%lld", (long long)case_no,
                  ts_dtype_name(dtype), (long long)batch, (long long)tokens, (long long)frames);
    ts_hard_call call;
    if (!make_valid_call(rng, &call, dtype, batch, tokens, frames)) {
        ts_case_end();
        return;
    }
    for (int64_t b = 0; b < batch; b++)
        for (int64_t i = 0; i < tokens; i++)
            for (int64_t j = 0; j < frames; j++)
                if (i >= call.x_len[b] || j >= call.y_len[b])
                    put(&call, b, i, j, (i + j) % 2 ? NAN : INFINITY);
    run_and_check_item_error(&call, MAS_OK, -1, 0);
    ts_hard_call_free(&call);
    ts_case_end();
}

/* ---------------------------------------------------------------------- */
/* Errors that concern the call, not an item: err->item is -1 and nothing  */
/* is written.                                                             */
/* ---------------------------------------------------------------------- */

typedef enum call_fault {
    CALL_VALUE_NULL,
    CALL_VALUE_DATA_NULL,
    CALL_X_LEN_NULL,
    CALL_Y_LEN_NULL,
    CALL_OUT_NULL,
    CALL_WORKSPACE_NULL,
    CALL_VALUE_INT32,
    CALL_VALUE_INT64,
    CALL_VALUE_UINT8,
    CALL_VALUE_DTYPE_7,
    CALL_VALUE_DTYPE_NEG,
    CALL_PATH_DTYPE_7,
    CALL_PATH_DTYPE_NEG,
    CALL_BATCH_ZERO,
    CALL_TOKENS_ZERO,
    CALL_FRAMES_ZERO,
    CALL_FRAMES_NEG,
    CALL_PATH_BATCH_DIFFERS,
    CALL_PATH_TOKENS_DIFFERS,
    CALL_PATH_FRAMES_DIFFERS,
    CALL_WORKSPACE_ONE_SHORT,
    CALL_WORKSPACE_ZERO,
    CALL_NO_OUTPUT,
    CALL_FAULT_COUNT
} call_fault;

static const char *call_fault_name(call_fault f) {
    static const char *names[CALL_FAULT_COUNT] = {
        "value NULL", "value->data NULL", "x_len NULL", "y_len NULL", "out NULL",
        "workspace NULL", "value int32", "value int64", "value uint8", "value dtype 7",
        "value dtype -1", "path dtype 7", "path dtype -1", "B = 0", "T = 0", "S = 0",
        "S = -3", "path B differs", "path T differs", "path S differs",
        "workspace one byte short", "workspace size 0", "no output requested"};
    return names[f];
}

static void call_error_case(ts_rng *rng, call_fault f, mas_dtype dtype) {
    int64_t batch = ts_rng_int(rng, 1, 4), tokens = ts_rng_int(rng, 1, 10);
    int64_t frames = ts_rng_int(rng, tokens, 30);
    ts_case_begin("call error: %s, %s B=%lld T=%lld S=%lld", call_fault_name(f),
                  ts_dtype_name(dtype), (long long)batch, (long long)tokens, (long long)frames);
    ts_hard_call call;
    if (!make_valid_call(rng, &call, dtype, batch, tokens, frames)) {
        ts_case_end();
        return;
    }
    ts_hard_call_prepare(&call);
    mas_tensor3 value = call.value.tensor;
    mas_hard_outputs out = call.out;
    const mas_tensor3 *value_arg = &value;
    const int64_t *x_arg = call.x_len, *y_arg = call.y_len;
    const mas_hard_outputs *out_arg = &out;
    void *ws = (unsigned char *)call.workspace.data + call.plan.workspace_misalign;
    size_t ws_size = call.workspace_size;
    mas_status expect = MAS_ERR_BAD_ARGUMENT;
    int applicable = 1;
    switch (f) {
    case CALL_VALUE_NULL: value_arg = NULL; expect = MAS_ERR_NULL_POINTER; break;
    case CALL_VALUE_DATA_NULL: value.data = NULL; expect = MAS_ERR_NULL_POINTER; break;
    case CALL_X_LEN_NULL: x_arg = NULL; expect = MAS_ERR_NULL_POINTER; break;
    case CALL_Y_LEN_NULL: y_arg = NULL; expect = MAS_ERR_NULL_POINTER; break;
    case CALL_OUT_NULL: out_arg = NULL; expect = MAS_ERR_NULL_POINTER; break;
    case CALL_WORKSPACE_NULL:
        applicable = ws_size > 0;
        ws = NULL;
        expect = MAS_ERR_NULL_POINTER;
        break;
    case CALL_VALUE_INT32: value.dtype = MAS_INT32; expect = MAS_ERR_BAD_DTYPE; break;
    case CALL_VALUE_INT64: value.dtype = MAS_INT64; expect = MAS_ERR_BAD_DTYPE; break;
    case CALL_VALUE_UINT8: value.dtype = MAS_UINT8; expect = MAS_ERR_BAD_DTYPE; break;
    case CALL_VALUE_DTYPE_7: value.dtype = MAS_DTYPE_COUNT_; expect = MAS_ERR_BAD_DTYPE; break;
    case CALL_VALUE_DTYPE_NEG: value.dtype = -1; expect = MAS_ERR_BAD_DTYPE; break;
    case CALL_PATH_DTYPE_7: out.path.dtype = MAS_DTYPE_COUNT_; expect = MAS_ERR_BAD_DTYPE; break;
    case CALL_PATH_DTYPE_NEG: out.path.dtype = -1; expect = MAS_ERR_BAD_DTYPE; break;
    /* Shrinking a dim keeps every address inside the allocation. */
    case CALL_BATCH_ZERO: value.dim[0] = 0; out.path.dim[0] = 0; expect = MAS_ERR_BAD_SHAPE; break;
    case CALL_TOKENS_ZERO: value.dim[1] = 0; out.path.dim[1] = 0; expect = MAS_ERR_BAD_SHAPE; break;
    case CALL_FRAMES_ZERO: value.dim[2] = 0; out.path.dim[2] = 0; expect = MAS_ERR_BAD_SHAPE; break;
    case CALL_FRAMES_NEG: value.dim[2] = -3; out.path.dim[2] = -3; expect = MAS_ERR_BAD_SHAPE; break;
    case CALL_PATH_BATCH_DIFFERS:
        applicable = batch > 1;
        out.path.dim[0] = batch - 1;
        expect = MAS_ERR_BAD_SHAPE;
        break;
    case CALL_PATH_TOKENS_DIFFERS:
        applicable = tokens > 1;
        out.path.dim[1] = tokens - 1;
        expect = MAS_ERR_BAD_SHAPE;
        break;
    case CALL_PATH_FRAMES_DIFFERS:
        applicable = frames > 1;
        out.path.dim[2] = frames - 1;
        expect = MAS_ERR_BAD_SHAPE;
        break;
    case CALL_WORKSPACE_ONE_SHORT:
        /* one byte below the smallest that works (below the unbounded size
         * the call runs long-form: test_longform_cpu.c) */
        ws_size = mas_hard_cpu_min_workspace_size(batch, tokens, frames, dtype,
                                                  call.plan.threads);
        applicable = ws_size > 0;
        ws_size -= applicable ? 1 : 0;
        expect = MAS_ERR_WORKSPACE_TOO_SMALL;
        break;
    case CALL_WORKSPACE_ZERO:
        applicable = ws_size > 0;
        ws_size = 0;
        expect = MAS_ERR_WORKSPACE_TOO_SMALL;
        break;
    case CALL_NO_OUTPUT:
        memset(&out, 0, sizeof out);
        expect = MAS_ERR_BAD_ARGUMENT;
        break;
    default: break;
    }
    if (applicable) {
        mas_error err = {-5, 0, 77};
        mas_status st = mas_hard_cpu(value_arg, x_arg, y_arg, out_arg, ws, ws_size,
                                     call.plan.threads, &err);
        TS_CHECK(st == expect, "status %d (%s), expected %d (%s)", (int)st,
                 mas_status_string(st), (int)expect, mas_status_string(expect));
        TS_CHECK(err.status == (int32_t)expect && err.item == -1,
                 "err = {status %d, item %lld}, expected {%d, -1}", err.status,
                 (long long)err.item, (int)expect);
        mas_status again = mas_hard_cpu(value_arg, x_arg, y_arg, out_arg, ws, ws_size,
                                        call.plan.threads, NULL);
        TS_CHECK(again == expect, "with err = NULL: status %d", (int)again);
        /* Nothing is written on an argument error. */
        call.plan.wants = 0;
        ts_hard_call_check_untouched(&call);
    }
    ts_hard_call_free(&call);
    ts_case_end();
}

/* Sections 1-3 of mas.h: version, status strings, device error words, dtype
 * sizes, and the CUDA entry point without CUDA. */
static void helper_cases(void) {
    ts_case_begin("version");
    TS_CHECK(mas_version_number() == MAS_VERSION_NUMBER, "number %d", (int)mas_version_number());
    char want[32];
    snprintf(want, sizeof want, "%d.%d.%d", MAS_VERSION_MAJOR, MAS_VERSION_MINOR,
             MAS_VERSION_PATCH);
    TS_CHECK(strcmp(mas_version_string(), want) == 0, "string %s", mas_version_string());
    ts_case_end();

    ts_case_begin("status strings");
    for (int s = 0; s < MAS_STATUS_COUNT_; s++) {
        const char *text = mas_status_string((mas_status)s);
        TS_CHECK(text != NULL && text[0] != '\0', "status %d has no text", s);
        TS_CHECK(strcmp(text, "unknown status") != 0, "status %d reads as unknown", s);
        for (int t = 0; t < s; t++)
            TS_CHECK(strcmp(text, mas_status_string((mas_status)t)) != 0,
                     "statuses %d and %d share a text", t, s);
    }
    TS_CHECK(strcmp(mas_status_string(MAS_STATUS_COUNT_), "unknown status") == 0 &&
                 strcmp(mas_status_string((mas_status)-1), "unknown status") == 0 &&
                 strcmp(mas_status_string((mas_status)1000), "unknown status") == 0,
             "unknown codes");
    TS_CHECK(strstr(mas_status_string(MAS_ERR_X_LEN_GT_Y_LEN), "x_len > y_len") != NULL,
             "the x_len > y_len text names the rule");
    ts_case_end();

    ts_case_begin("device error words");
    mas_error e = {-5, 0, 77};
    mas_decode_device_error(MAS_DEVICE_NO_ERROR, &e);
    TS_CHECK(e.status == MAS_OK, "no error decodes to %d", e.status);
    mas_decode_device_error(((uint64_t)12345 << 8) | MAS_ERR_NONFINITE_VALUE, &e);
    TS_CHECK(e.status == MAS_ERR_NONFINITE_VALUE && e.item == 12345, "decoded {%d, %lld}",
             e.status, (long long)e.item);
    uint64_t big_item = (uint64_t)1 << 40;
    mas_decode_device_error((big_item << 8) | MAS_ERR_NO_FINITE_PATH, &e);
    TS_CHECK(e.status == MAS_ERR_NO_FINITE_PATH && e.item == (int64_t)big_item,
             "64-bit item decoded as %lld", (long long)e.item);
    mas_decode_device_error(0, NULL); /* NULL err is allowed */
    ts_case_end();

    ts_case_begin("dtype sizes");
    static const size_t sizes[MAS_DTYPE_COUNT_] = {4, 8, 2, 2, 4, 8, 1};
    for (int d = 0; d < MAS_DTYPE_COUNT_; d++)
        TS_CHECK(mas_dtype_size((mas_dtype)d) == sizes[d], "%s has size %zu",
                 ts_dtype_name((mas_dtype)d), mas_dtype_size((mas_dtype)d));
    TS_CHECK(mas_dtype_size(MAS_DTYPE_COUNT_) == 0 && mas_dtype_size((mas_dtype)-1) == 0,
             "unknown dtypes have size 0");
    ts_case_end();

    if (!mas_has_cuda()) {
        ts_case_begin("CUDA entry point without CUDA");
        mas_hard_outputs out;
        memset(&out, 0, sizeof out);
        TS_CHECK(mas_hard_cuda(NULL, NULL, NULL, &out, NULL, 0, NULL, NULL) == MAS_ERR_NO_CUDA,
                 "mas_hard_cuda without CUDA");
        ts_case_end();
    }
}

int main(int argc, char **argv) {
    uint64_t seed = ts_seed_from_args(argc, argv);
    ts_rng rng;
    ts_rng_init(&rng, seed);
    helper_cases();
    int64_t case_no = 0;
    for (int f = 0; f < FAULT_COUNT; f++)
        for (int d = 0; d < 4; d++)
            for (int rep = 0; rep < 8; rep++)
                item_error_case(&rng, case_no++, (item_fault)f, value_dtypes[d], rep >= 4,
                                rep % 4 == 3);
    for (int d = 0; d < 4; d++)
        for (int rep = 0; rep < 5; rep++) poison_outside_case(&rng, case_no++, value_dtypes[d]);
    for (int f = 0; f < CALL_FAULT_COUNT; f++)
        for (int d = 0; d < 4; d++) call_error_case(&rng, (call_fault)f, value_dtypes[d]);
    return ts_finish();
}
