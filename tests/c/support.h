/* Shared support for the C tests: case bookkeeping, a seeded RNG that prints
 * its seed, exact element conversion written independently of the library,
 * strided views with guard bands, and the reference hard MAS (a plain scalar
 * loop written from the semantics in mas.h) plus brute-force path enumeration
 * that checks the reference itself. */
#ifndef MAS_TESTS_SUPPORT_H
#define MAS_TESTS_SUPPORT_H

#include <stddef.h>
#include <stdint.h>

#include "mas.h"

/* ---------------------------------------------------------------------- */
/* Cases and checks                                                        */
/* ---------------------------------------------------------------------- */

/* A case is a group of checks; it passes when all of them pass. Failures
 * print the program's seed and the case description (sizes, dtypes...). */
void ts_case_begin(const char *fmt, ...);
void ts_case_end(void);
/* Records one check; prints file:line, the case description and the message
 * when ok is 0. Returns ok. */
int ts_check_at(int ok, const char *file, int line, const char *fmt, ...);
#define TS_CHECK(ok, ...) ts_check_at((ok) ? 1 : 0, __FILE__, __LINE__, __VA_ARGS__)
/* Failures recorded so far in the open case. */
int64_t ts_case_failures(void);
/* Prints "N passed, N failed" and returns the process exit code. */
int ts_finish(void);

/* ---------------------------------------------------------------------- */
/* Random numbers                                                          */
/* ---------------------------------------------------------------------- */

typedef struct ts_rng {
    uint64_t state;
} ts_rng;

/* The program's seed: argv[1] if given, else $MAS_TEST_SEED, else the clock.
 * Printed so that any failure can be replayed. */
uint64_t ts_seed_from_args(int argc, char **argv);
void ts_rng_init(ts_rng *rng, uint64_t seed);
uint64_t ts_rng_next(ts_rng *rng);
/* Uniform integer in [lo, hi] (inclusive). */
int64_t ts_rng_int(ts_rng *rng, int64_t lo, int64_t hi);
/* Uniform double in [0, 1). */
double ts_rng_unit(ts_rng *rng);
double ts_rng_uniform(ts_rng *rng, double lo, double hi);
/* 1 with probability p. */
int ts_rng_chance(ts_rng *rng, double p);

/* ---------------------------------------------------------------------- */
/* Elements                                                                */
/* ---------------------------------------------------------------------- */

/* Round-to-nearest-even narrowing and exact widening, independent of the
 * library's own conversions. */
uint16_t ts_f32_to_f16(float x);
float ts_f16_to_f32(uint16_t h);
uint16_t ts_f32_to_bf16(float x);
float ts_bf16_to_f32(uint16_t h);
/* x rounded to the nearest value of a floating dtype (what a store keeps). */
double ts_round_to_dtype(double x, mas_dtype dtype);
/* Element at base + offset (offset in elements), as double (exact for every
 * dtype but int64 beyond 2^53). */
double ts_load(const void *base, int64_t offset, mas_dtype dtype);
/* Stores x (rounded for floats, truncated for integers). */
void ts_store(void *base, int64_t offset, mas_dtype dtype, double x);
const char *ts_dtype_name(mas_dtype dtype);
/* Bits of a double / float, for bit-exact comparison and messages. */
uint64_t ts_f64_bits(double x);
uint32_t ts_f32_bits(float x);

/* ---------------------------------------------------------------------- */
/* Strided views with guard bands                                          */
/* ---------------------------------------------------------------------- */

/* How a [B,T,S] view is laid out in its allocation. axis_order lists the
 * logical axes (0 = batch, 1 = tokens, 2 = frames) from outermost to innermost
 * in memory: {0,1,2} is "bts", {0,2,1} is "bst". */
typedef struct ts_layout {
    int axis_order[3];
    int64_t inner_step;      /* stride of the innermost axis, >= 1 */
    int64_t pad_inner;       /* extra elements after each innermost run */
    int64_t pad_middle;      /* extra elements after each middle block */
    int flip[3];             /* per logical axis: negative stride */
    int zero_batch_stride;   /* stride[0] = 0 (inputs only: items share data) */
    int64_t guard;           /* elements of guard band at each end */
} ts_layout;

/* A view and the allocation that holds it. Bytes not addressed by the view
 * keep the fill byte, so stray writes can be detected. */
typedef struct ts_view {
    mas_tensor3 tensor;
    unsigned char *alloc;
    size_t alloc_bytes;
} ts_view;

/* A plain contiguous layout: bts (bst = 0) or bst (bst = 1). */
void ts_layout_plain(ts_layout *layout, int bst);
/* A random layout: either memory order, sometimes padded, stepped, flipped
 * (allow_negative) or batch-broadcast (allow_zero_batch). */
void ts_layout_random(ts_rng *rng, ts_layout *layout, int allow_negative,
                      int allow_zero_batch);
/* Allocates and fills every byte with fill_byte. Returns 0 on allocation
 * failure. */
int ts_view_make(ts_view *view, mas_dtype dtype, int64_t batch, int64_t tokens,
                 int64_t frames, const ts_layout *layout, unsigned char fill_byte);
void ts_view_free(ts_view *view);
/* Element offset of (b, i, j). */
int64_t ts_view_offset(const mas_tensor3 *t, int64_t b, int64_t i, int64_t j);
/* Number of bytes of the allocation that the view does not address and that
 * no longer hold fill_byte (0 means no stray write). */
int64_t ts_view_stray_bytes(const ts_view *view, unsigned char fill_byte);
/* Describes a layout in a few words for failure messages. */
void ts_layout_describe(const ts_layout *layout, char *buf, size_t size);

/* A flat buffer with guard bands: data points guard bytes into alloc. */
typedef struct ts_guarded {
    unsigned char *alloc;
    size_t alloc_bytes;
    size_t guard_bytes;
    void *data;
} ts_guarded;
int ts_guarded_make(ts_guarded *g, size_t bytes, size_t guard_bytes,
                    unsigned char fill_byte);
void ts_guarded_free(ts_guarded *g);
/* Bytes of the two guard bands that no longer hold fill_byte. */
int64_t ts_guarded_stray_bytes(const ts_guarded *g, unsigned char fill_byte);

/* ---------------------------------------------------------------------- */
/* Reference hard MAS                                                      */
/* ---------------------------------------------------------------------- */

/* The reference's answer for one item. Arrays are sized for the item's
 * tensor: durations [T], indices [S], path [T*S] indexed i*S + j. */
typedef struct ts_ref_item {
    mas_status status;
    double score;          /* exact; a float32 score widened to double */
    int32_t *durations;
    int32_t *indices;
    uint8_t *path;
} ts_ref_item;

/* 1 when value's dtype is accumulated in float64, 0 for float32. */
int ts_accumulates_f64(mas_dtype dtype);
int ts_ref_item_alloc(ts_ref_item *r, int64_t tokens, int64_t frames);
void ts_ref_item_free(ts_ref_item *r);
/* Hard MAS for item b of value by a plain scalar loop over the full score
 * table, straight from the semantics. On an item error the outputs are those
 * mas.h documents for a failing item (zeros, -1, -inf). Checks in this
 * order: lengths, x_len > y_len, NaN/+inf inside the lengths, no finite
 * path. Returns r->status. */
mas_status ts_ref_hard_item(const mas_tensor3 *value, int64_t b, int64_t x_len,
                            int64_t y_len, ts_ref_item *r);

/* Brute force over every monotonic path of item b (x_len, y_len <= 8): a
 * path is indices[0..y_len) with indices[0] = 0, indices[y_len-1] = x_len-1,
 * steps of 0 or 1. A path's score is its values summed frame by frame in the
 * accumulation type (the same additions the recurrence makes along it). */
typedef struct ts_brute_result {
    int64_t paths;          /* monotonic paths enumerated */
    int64_t best_paths;     /* paths reaching the best score */
    double best_score;      /* -inf when every path crosses -inf */
    /* Among the best paths, the one the backtrack rule picks when sums are
     * exact: scanning frames from the last down, prefer the higher token at
     * the first frame where two best paths differ ("ties stay on the same
     * token" while walking back). */
    int32_t tie_rule_indices[8];
} ts_brute_result;
void ts_brute_force(const mas_tensor3 *value, int64_t b, int64_t x_len,
                    int64_t y_len, ts_brute_result *out);
/* Sum of item b's values along a path given by indices, in the
 * accumulation type, frame by frame. */
double ts_path_sum(const mas_tensor3 *value, int64_t b, const int32_t *indices,
                   int64_t y_len);
/* 1 when indices[0..y_len) is a monotonic path from token 0 to x_len-1. */
int ts_is_monotonic_path(const int32_t *indices, int64_t x_len, int64_t y_len);

/* ---------------------------------------------------------------------- */
/* Random inputs                                                           */
/* ---------------------------------------------------------------------- */

typedef enum ts_value_kind {
    TS_VALUES_LOGLIK = 0,    /* uniform in [-8, 2): log-likelihood-like */
    TS_VALUES_HALVES = 1,    /* multiples of 0.5 in [-3, 3]: ties everywhere */
    TS_VALUES_SMALL_INT = 2, /* integers in [-2, 2]: ties everywhere */
    TS_VALUES_HUGE = 3,      /* magnitudes up to 1e6 (6e4 for float16) */
    TS_VALUES_KIND_COUNT = 4
} ts_value_kind;
const char *ts_value_kind_name(ts_value_kind kind);
/* A random value exactly representable in dtype, never -0.0. */
double ts_random_value(ts_rng *rng, ts_value_kind kind, mas_dtype dtype);
/* Fills every element the view addresses; with poison_outside, cells outside
 * an item's lengths or off its band (j - (y-x) <= i <= j) get NaN or +inf
 * (allowed there: ignored, mas.h). */
void ts_fill_values(ts_rng *rng, const mas_tensor3 *value, ts_value_kind kind,
                    const int64_t *x_len, const int64_t *y_len, int poison_outside);
/* A uniformly chosen monotonic path from token 0 to x_len-1 over y_len frames. */
void ts_random_path(ts_rng *rng, int64_t x_len, int64_t y_len, int32_t *indices);
/* Sets cells of item b inside the lengths to -inf with probability fraction,
 * except the cells of one random path, so a finite path still exists. */
void ts_sprinkle_neg_inf(ts_rng *rng, const mas_tensor3 *value, int64_t b,
                         int64_t x_len, int64_t y_len, double fraction);

/* ---------------------------------------------------------------------- */
/* One call of mas_hard_cpu with guarded outputs, checked against the      */
/* reference                                                               */
/* ---------------------------------------------------------------------- */

enum { TS_WANT_PATH = 1, TS_WANT_DURATIONS = 2, TS_WANT_INDICES = 4, TS_WANT_SCORE = 8,
       TS_WANT_ALL = 15 };

/* Fill bytes: each output's allocation starts full of its own poison. */
#define TS_VALUE_FILL 0x77
#define TS_PATH_FILL 0xa5
#define TS_DURATIONS_FILL 0x5a
#define TS_INDICES_FILL 0x3c
#define TS_SCORE_FILL 0xc3
#define TS_WORKSPACE_FILL 0x69

typedef struct ts_hard_plan {
    mas_dtype dtype;
    int64_t batch, tokens, frames;
    ts_layout value_layout;
    int wants;                   /* TS_WANT_* bits */
    mas_dtype path_dtype;
    ts_layout path_layout;
    ts_layout durations_layout;  /* [B, 1, T] int32, rows contiguous */
    ts_layout indices_layout;    /* [B, 1, S] int32, rows contiguous */
    int32_t threads;
    size_t workspace_misalign;   /* 0..7 bytes past an aligned address */
} ts_hard_plan;

typedef struct ts_hard_call {
    ts_hard_plan plan;
    int64_t *x_len, *y_len;      /* [B], filled by the caller */
    ts_view value, path, durations, indices;
    ts_guarded score, workspace;
    size_t workspace_size;
    mas_hard_outputs out;        /* points into the views above */
    ts_ref_item *refs;           /* [B], from ts_hard_call_prepare */
    unsigned char *value_before;
    int64_t *x_before, *y_before;
} ts_hard_call;

/* Plain layouts, every output, one thread. */
void ts_hard_plan_default(ts_hard_plan *plan, mas_dtype dtype, int64_t batch,
                          int64_t tokens, int64_t frames);
/* Random rows for durations or indices: padding between items, sometimes a
 * negative item stride. */
void ts_row_layout_random(ts_rng *rng, ts_layout *layout);
/* The draws the randomized hard-MAS tests (CPU and CUDA) share. Sizes: B, T
 * and S up to the maxima, mostly S >= T as in speech. */
void ts_hard_plan_random_sizes(ts_rng *rng, ts_hard_plan *plan, int64_t max_batch,
                               int64_t max_tokens, int64_t max_frames);
/* Once the value and path layouts are set: row layouts, workspace
 * misalignment, and the values (kind, poison outside the lengths, share of
 * -inf cells; items sharing one data block (batch stride 0) get neither
 * poison nor -inf: one item's outside is another's inside). */
typedef struct ts_hard_values {
    ts_value_kind kind;
    int shared; /* the items share one data block */
    int poison_outside;
    double neg_inf_fraction;
} ts_hard_values;
ts_hard_values ts_hard_plan_random_rest(ts_rng *rng, ts_hard_plan *plan);
/* Allocates everything (value filled with TS_VALUE_FILL, lengths zero) and
 * sets up out. Returns 0 on allocation failure. */
int ts_hard_call_make(ts_hard_call *call, const ts_hard_plan *plan);
void ts_hard_call_free(ts_hard_call *call);
/* After the caller has filled value and lengths: computes the reference for
 * every item and snapshots the inputs. */
void ts_hard_call_prepare(ts_hard_call *call);
/* Calls mas_hard_cpu with the plan's workspace and threads. */
mas_status ts_hard_call_run(ts_hard_call *call, mas_error *err);
/* Checks every requested output of every item against the reference (failed
 * items included: zeros, -1, -inf), that nothing was written outside the
 * outputs or the workspace, and that the inputs are unchanged. */
void ts_hard_call_check_outputs(const ts_hard_call *call);
/* Only the parts that hold whatever the status: no stray writes, inputs
 * unchanged. */
void ts_hard_call_check_untouched(const ts_hard_call *call);
/* A few words naming the layouts and outputs, for case descriptions. */
void ts_hard_plan_describe(const ts_hard_plan *plan, char *buf, size_t size);

#endif
