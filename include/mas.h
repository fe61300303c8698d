/*
 * mas.h -- libmas: monotonic alignment search for speech.
 *
 * The one public header of the C library. Sections:
 *   1. Version
 *   2. Status codes and errors
 *   3. Tensors (dtype, strided 3-D views)
 *   4. Core API: hard MAS (Viterbi) on the CPU and on CUDA
 *   5. Experimental API: soft alignment (log semiring), subject to change
 *   6. Likelihoods: diagonal Gaussians and Gaussian mixtures
 *   7. Topologies: HMM states per token, token skips, CTC blanks
 *   8. Fused Gaussian alignment: likelihood + alignment without [B,T,S]
 *
 * Conventions that hold for every function below:
 *   - Memory is owned by the caller. A function that needs scratch memory has a
 *     companion *_workspace_size() function; the caller allocates at least that
 *     many bytes (CPU: any alignment; the library aligns inside) and passes them
 *     in. No function allocates, frees, prints, or exits. For shapes beyond
 *     2^52 cells in all, the CPU *_workspace_size() functions return SIZE_MAX
 *     (no allocation meets it: the call returns MAS_ERR_WORKSPACE_TOO_SMALL).
 *   - Inputs are never modified. Nothing is read or written outside the
 *     per-item lengths, except outputs that are documented as dense (the path
 *     and posterior arrays are written in full, zeros outside the lengths).
 *   - Sizes and strides are int64_t, in elements (not bytes). Strides may be
 *     any value, including 0 and negative ones, as long as every addressed
 *     element lies inside the caller's allocation.
 *   - Every function returns a mas_status. MAS_OK is 0. When an error concerns
 *     one batch item, the optional mas_error* receives the item index and the
 *     rule; with several bad items, the lowest index is reported.
 *
 * Semantics of hard MAS (Glow-TTS rules), per item b, with X = x_len[b] text
 * tokens and Y = y_len[b] speech frames, 1 <= X <= Y, X <= T, Y <= S:
 *   Q(0,0) = v(0,0); Q(i,0) = -inf for i > 0; Q(-1,j) = -inf;
 *   Q(i,j) = max(Q(i,j-1), Q(i-1,j-1)) + v(i,j)   (one max, then one add)
 *   computed in float32 for float32/float16/bfloat16 input (each element is
 *   converted to float32 once) and in float64 for float64 input.
 *   Backtrack: i = X-1; for j = Y-1 down to 0: (i,j) is on the path; then if
 *   i > 0 and (i == j or Q(i,j-1) < Q(i-1,j-1)) then i = i-1.
 *   Ties stay on the same token. score = Q(X-1, Y-1).
 * The band: only cells that some monotonic path from (0,0) to (X-1,Y-1)
 *   crosses, j - (Y - X) <= i <= j, can change any output. Only those are
 *   checked, and a NaN or +inf among them is an error; other cells inside
 *   the lengths are ignored (whatever they hold, they change no output; the
 *   CUDA backend may load some of them together with band neighbours).
 *   Nothing outside the lengths is ever read.
 */
#ifndef MAS_H
#define MAS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ===================================================================== */
/* 1. Version                                                            */
/* ===================================================================== */

#define MAS_VERSION_MAJOR 0
#define MAS_VERSION_MINOR 1
#define MAS_VERSION_PATCH 0
#define MAS_VERSION_NUMBER \
    (MAS_VERSION_MAJOR * 10000 + MAS_VERSION_MINOR * 100 + MAS_VERSION_PATCH)

/* "MAJOR.MINOR.PATCH" of the library actually linked. Static storage. */
const char *mas_version_string(void);
/* MAS_VERSION_NUMBER of the library actually linked. */
int32_t mas_version_number(void);
/* 1 when the library was built with its CUDA backend, else 0. */
int32_t mas_has_cuda(void);

/* ===================================================================== */
/* 2. Status codes and errors                                            */
/* ===================================================================== */

typedef enum mas_status {
    MAS_OK = 0,
    MAS_ERR_NULL_POINTER = 1,     /* a required pointer is NULL */
    MAS_ERR_BAD_SHAPE = 2,        /* a size < 1, or output shape != input shape */
    MAS_ERR_BAD_DTYPE = 3,        /* dtype not supported for this argument */
    MAS_ERR_BAD_LENGTH = 4,       /* x_len < 1, x_len > T, y_len > S or y_len < 1 */
    MAS_ERR_X_LEN_GT_Y_LEN = 5,   /* x_len > y_len: no monotonic path exists */
    MAS_ERR_NONFINITE_VALUE = 6,  /* NaN or +inf inside the lengths */
    MAS_ERR_NO_FINITE_PATH = 7,   /* every path crosses a -inf cell */
    MAS_ERR_WORKSPACE_TOO_SMALL = 8,
    MAS_ERR_BAD_ARGUMENT = 9,     /* any other argument out of range */
    MAS_ERR_NO_CUDA = 10,         /* the library was built without CUDA */
    MAS_ERR_CUDA = 11,            /* a CUDA runtime call failed */
    MAS_ERR_BAD_MODEL = 12,       /* a model parameter is NaN/inf, or a variance <= 0 */
    MAS_ERR_TARGET_TOO_LONG = 13, /* the states a target needs outnumber the frames */
    MAS_STATUS_COUNT_ = 14
} mas_status;

/* A sentence naming the rule behind a status ("x_len > y_len: ..."). Never
 * NULL; static storage; unknown codes give "unknown status". */
const char *mas_status_string(mas_status status);

/* Which item failed, and why. item is -1 when the error is not an item's. */
typedef struct mas_error {
    int32_t status; /* a mas_status */
    int32_t reserved_;
    int64_t item;
} mas_error;

/* Device-side errors (CUDA). Kernels cannot return a status without a host
 * synchronisation, so they record the first error in a 64-bit word in device
 * memory by atomicMin(word, (uint64_t)item << 8 | status). The caller sets the
 * word to MAS_DEVICE_NO_ERROR before the call (e.g. cudaMemsetAsync to 0xff),
 * copies it back whenever convenient, and decodes it here. */
#define MAS_DEVICE_NO_ERROR UINT64_MAX
/* The item field of an error that is not one item's (decoded as item -1). */
#define MAS_DEVICE_NO_ITEM (UINT64_MAX << 8)
/* Decodes a device error word into *err (status MAS_OK if none). */
void mas_decode_device_error(uint64_t word, mas_error *err);

/* ===================================================================== */
/* 3. Tensors                                                            */
/* ===================================================================== */

typedef enum mas_dtype {
    MAS_FLOAT32 = 0,
    MAS_FLOAT64 = 1,
    MAS_FLOAT16 = 2,
    MAS_BFLOAT16 = 3,
    MAS_INT32 = 4,
    MAS_INT64 = 5,
    MAS_UINT8 = 6, /* also bool: 0 or 1 */
    MAS_DTYPE_COUNT_ = 7
} mas_dtype;

/* Size in bytes of one element; 0 for an unknown dtype. */
size_t mas_dtype_size(mas_dtype dtype);

/* A batch of matrices, addressed as data[b*stride[0] + i*stride[1] + j*stride[2]]
 * for b < dim[0] (B, items), i < dim[1] (T, tokens), j < dim[2] (S, frames).
 * The "bst" layout of VITS/ESPnet is the same view with stride[1] and
 * stride[2] taken from the array's last and middle axes. */
typedef struct mas_tensor3 {
    void *data;
    int32_t dtype; /* a mas_dtype */
    int32_t reserved_;
    int64_t dim[3];
    int64_t stride[3];
} mas_tensor3;

/* ===================================================================== */
/* 4. Core API: hard MAS                                                 */
/* ===================================================================== */

/* Outputs of hard MAS. Any subset may be requested; NULL data means "not
 * wanted". At least one output must be requested.
 *   path:      dense 0/1, same dim as value, any dtype of mas_dtype, any
 *              strides; written in full (0 outside the lengths).
 *   durations: int32, durations[b*durations_stride + i], i < T: frames of
 *              token i; 0 for i >= x_len. Sums to y_len.
 *   indices:   int32, indices[b*indices_stride + j], j < S: token of frame j;
 *              -1 for j >= y_len.
 *   score:     [B] contiguous, float32 for float32/float16/bfloat16 value and
 *              float64 for float64 value: Q(x_len-1, y_len-1). Where sums
 *              of cells near the accumulator's largest value overflow, the
 *              score may be +inf or NaN (+inf plus a -inf cell) with MAS_OK;
 *              the path is then the one the overflowed comparisons pick (the
 *              same on every backend), the NaN's sign unspecified. */
typedef struct mas_hard_outputs {
    mas_tensor3 path;
    int32_t *durations;
    int64_t durations_stride;
    int32_t *indices;
    int64_t indices_stride;
    void *score;
} mas_hard_outputs;

/* Bytes of workspace mas_hard_cpu needs for this shape and thread count
 * (threads <= 0 means one thread per available core) to run unbounded: one
 * decision bit per cell of an item, [tokens x frames] bits per thread.
 * Less works too (long-form alignment, below). */
size_t mas_hard_cpu_workspace_size(int64_t batch, int64_t tokens, int64_t frames,
                                   mas_dtype dtype, int32_t threads);

/* Long-form alignment under a memory budget. A workspace smaller than
 * mas_hard_cpu_workspace_size() but at least this many bytes makes
 * mas_hard_cpu checkpoint instead: it runs the forward once keeping the
 * column of scores (all tokens) every K frames and the bits of K frames
 * only, then, from the last segment to the first, re-runs the forward of
 * the segment from its checkpoint (over the tokens up to the path's: no
 * score depends on a later token's) and backtracks through it. K is chosen
 * from the size given (the longest segments that fit). Items run in
 * parallel, one per thread, as many threads as the size holds (at least
 * one); with fewer items than threads, the threads pipeline one item at a
 * time (as the unbounded call does) when the size also holds an array of
 * `frames` scores per thread. The outputs are bit-identical to the
 * unbounded run's; the time is one forward plus the re-runs, about 1.5
 * forwards for a path along the diagonal.
 * About (frames/K) * tokens * 4 + K * tokens / 8 bytes per thread (float32),
 * smallest near K = sqrt(32 * frames); e.g. 60,000 tokens x 360,000 frames
 * (2 hours at 50 frames/s): ~50 MB against ~2.7 GB unbounded.
 * Returns the smallest workspace mas_hard_cpu accepts for this shape (the
 * unbounded size when that is smaller); below it mas_hard_cpu returns
 * MAS_ERR_WORKSPACE_TOO_SMALL. 0 for sizes < 1; SIZE_MAX for shapes beyond
 * 2^52 cells. */
size_t mas_hard_cpu_min_workspace_size(int64_t batch, int64_t tokens, int64_t frames,
                                       mas_dtype dtype, int32_t threads);

/* Hard MAS on the CPU.
 *   value:  float32, float64, float16 or bfloat16, any strides.
 *   x_len, y_len: [B] host arrays of token and frame counts per item.
 *   threads: <= 0 uses every available core; 1 runs on the calling thread only.
 *   Returns MAS_OK, or an error with *err (may be NULL) naming the item. On
 *   an item error the outputs of the other items are still written; the
 *   failing item's outputs are zeros (path, durations), -1 (indices) and
 *   -inf (score). Validation happens while computing: no extra pass. */
mas_status mas_hard_cpu(const mas_tensor3 *value, const int64_t *x_len,
                        const int64_t *y_len, const mas_hard_outputs *out,
                        void *workspace, size_t workspace_size, int32_t threads,
                        mas_error *err);

/* Bytes of device workspace mas_hard_cuda needs (see the CUDA notes). */
size_t mas_hard_cuda_workspace_size(int64_t batch, int64_t tokens, int64_t frames,
                                    mas_dtype dtype);

/* Hard MAS on a CUDA device, asynchronously on `stream` (a cudaStream_t; NULL
 * is the legacy default stream). Every pointer (value, x_len, y_len, outputs,
 * workspace, error_word) is device memory of the current device. The call
 * checks what it can on the host (dtypes, shapes, NULLs) and returns at once;
 * errors that depend on values (lengths, NaN, no finite path) are recorded in
 * *error_word (see MAS_DEVICE_NO_ERROR), which may be NULL to ignore them.
 * Never synchronises, never allocates: safe inside CUDA graph capture.
 * workspace: mas_hard_cuda_workspace_size() bytes (or fewer, down to
 * mas_hard_cuda_min_workspace_size(): the long form). NULL with
 * workspace_size 0 is taken when the call needs none: each item runs in one
 * thread block (an item's tiles and decision bits fit the current device's
 * shared memory: in float32 on an H100, T <= 64 tokens with S <= ~9,400
 * frames, T <= 128 with S <= ~4,600, T <= 256 with S <= ~1,100; and value
 * contiguous along frames or along tokens, its pointer and other strides
 * multiples of 16 bytes) and no dense path over 128 KB an item is asked;
 * then nothing is read or written there. Otherwise NULL with 0 returns
 * MAS_ERR_WORKSPACE_TOO_SMALL (a caller can try without a workspace first),
 * and NULL with a non-zero size MAS_ERR_NULL_POINTER.
 * Returns MAS_ERR_NO_CUDA when the library was built without CUDA. */
mas_status mas_hard_cuda(const mas_tensor3 *value, const int64_t *x_len,
                         const int64_t *y_len, const mas_hard_outputs *out,
                         void *workspace, size_t workspace_size, void *stream,
                         uint64_t *error_word);

/* Bytes of device workspace mas_hard_cuda_mask needs: mas_hard_cuda's plus
 * room for the lengths it counts. */
size_t mas_hard_cuda_mask_workspace_size(int64_t batch, int64_t tokens, int64_t frames,
                                         mas_dtype dtype);

/* The smallest workspace mas_hard_cuda (mas_hard_cuda_mask) accepts: the
 * unbounded size when that is smaller; 0 for sizes < 1 or a bad dtype.
 * With less than the unbounded size the call runs the long form: hard MAS
 * as the Viterbi of the k = 1 chain of section 7 (mas_viterbi_cuda's long
 * form: tokens split over several blocks, frames in segments with a
 * checkpoint column before each, the forward once more segment by segment
 * during the backtrack), the same outputs bit for bit in about twice the
 * time; a budget that holds it all but the unbounded layout runs it in
 * one segment. E.g. T=60,000 tokens x S=360,000 frames (2 hours at 50
 * frames/s): about 0.15 GB instead of 2.7 GB. Limits as mas_viterbi_cuda's
 * (about 130,000 tokens per item in float32 on an H100). Below the
 * minimum: MAS_ERR_WORKSPACE_TOO_SMALL. */
size_t mas_hard_cuda_min_workspace_size(int64_t batch, int64_t tokens, int64_t frames,
                                        mas_dtype dtype);
size_t mas_hard_cuda_mask_min_workspace_size(int64_t batch, int64_t tokens, int64_t frames,
                                             mas_dtype dtype);

/* mas_hard_cuda with the lengths read from a Glow-TTS mask by the kernels
 * themselves (no reduction launched by the caller): x_len[b] is the number
 * of non-zero entries of mask[b, :, 0] and y_len[b] of mask[b, 0, :] (for a
 * 0/1 prefix mask, Glow-TTS's mask.sum(1)[:, 0] and mask.sum(2)[:, 0];
 * for any other mask, exactly that count, whatever the other entries hold;
 * float -0.0 counts as zero, NaN as non-zero). mask: device memory, the
 * value's dims, any mas_dtype, any strides. Length errors (a count of 0, or
 * x_len > y_len) are item errors in *error_word as for mas_hard_cuda.
 * Returns as mas_hard_cuda (the workspace too: none when each item runs in
 * one block); MAS_ERR_BAD_SHAPE when mask's dims differ from value's. */
mas_status mas_hard_cuda_mask(const mas_tensor3 *value, const mas_tensor3 *mask,
                              const mas_hard_outputs *out, void *workspace,
                              size_t workspace_size, void *stream, uint64_t *error_word);

/* ===================================================================== */
/* 5. Experimental API: soft alignment (log semiring)                    */
/* ===================================================================== */
/* The same dynamic program in the log semiring. Subject to change.
 * Arithmetic: float32 for float32/float16/bfloat16 input, float64 for float64.
 * Outputs are of the accumulator type (MAS_FLOAT32 or MAS_FLOAT64).
 * Overflow: when sums exceed the accumulator (e.g. float32 cells near
 * FLT_MAX), log_z is +inf with MAS_OK, never NaN (NaN and +inf cells are
 * errors, so a NaN can only come from such an overflow). +inf then means
 * "overflowed": the exact value may be smaller, even -inf where every
 * overflowing path also crosses a -inf cell. The posterior of such an item
 * is unspecified, but written only inside the lengths (zeros outside, as
 * always). The same holds for the topology forward-sum of section 7. */

/* Forward-sum over the hard-MAS path set (value [B,T,S] as in section 4):
 *   log_z[b] = log sum over monotonic paths of exp(sum of v over the path).
 * posterior (optional, data NULL to skip): gamma[b,i,j] = d log_z / d v(i,j),
 * the probability that the path visits (i,j); written in full (0 outside the
 * lengths); sums to 1 over tokens for every frame j < y_len.
 * Errors as for hard MAS (NaN/+inf in the band, no finite path, lengths). */
size_t mas_forward_sum_cpu_workspace_size(int64_t batch, int64_t tokens, int64_t frames,
                                          mas_dtype dtype, int32_t threads);
mas_status mas_forward_sum_cpu(const mas_tensor3 *value, const int64_t *x_len,
                               const int64_t *y_len, void *log_z,
                               const mas_tensor3 *posterior, void *workspace,
                               size_t workspace_size, int32_t threads, mas_error *err);
size_t mas_forward_sum_cuda_workspace_size(int64_t batch, int64_t tokens, int64_t frames,
                                           mas_dtype dtype);
mas_status mas_forward_sum_cuda(const mas_tensor3 *value, const int64_t *x_len,
                                const int64_t *y_len, void *log_z,
                                const mas_tensor3 *posterior, void *workspace,
                                size_t workspace_size, void *stream, uint64_t *error_word);

/* Monotonic attention over logits x [B,N,M] (dim[1] = N, dim[2] = M).
 *   MAS_ATTENTION_ONE_TO_MANY: along N the path always advances; it stays on
 *     column j with p = sigmoid(x) or moves to j+1 with 1-p:
 *     log phi[0,0] = 0, log phi[0,j>0] = -inf,
 *     log phi[i,j] = logaddexp(log phi[i-1,j] + log sigmoid(x[i-1,j]),
 *                              log phi[i-1,j-1] + log sigmoid(-x[i-1,j-1])).
 *   MAS_ATTENTION_MANY_TO_MANY: from (i,j) right to (i,j+1) with p =
 *     sigmoid(x[i,j]) or down to (i+1,j) with 1-p: phi[0,0] = 1,
 *     phi[i,j] = phi[i,j-1] p[i,j-1] + phi[i-1,j] (1-p[i-1,j]).
 * n_len, m_len: [B] lengths (NULL: N and M for every item). log_phi [B,N,M]
 * is written in full, -inf outside the lengths. The backward pass takes the
 * forward's log_phi and the upstream gradient d loss / d log_phi and writes
 * d loss / d x (0 outside the lengths). Given any other log_phi the
 * gradient inside the lengths is unspecified (it may differ between
 * backends, inf included); the statuses and the zeros outside still hold. */
typedef enum mas_attention_kind {
    MAS_ATTENTION_ONE_TO_MANY = 0,
    MAS_ATTENTION_MANY_TO_MANY = 1
} mas_attention_kind;

size_t mas_attention_cpu_workspace_size(int64_t batch, int64_t n, int64_t m,
                                        mas_dtype dtype, int32_t threads);
mas_status mas_attention_forward_cpu(mas_attention_kind kind, const mas_tensor3 *logits,
                                     const int64_t *n_len, const int64_t *m_len,
                                     const mas_tensor3 *log_phi, void *workspace,
                                     size_t workspace_size, int32_t threads, mas_error *err);
mas_status mas_attention_backward_cpu(mas_attention_kind kind, const mas_tensor3 *logits,
                                      const int64_t *n_len, const int64_t *m_len,
                                      const mas_tensor3 *log_phi,
                                      const mas_tensor3 *grad_log_phi,
                                      const mas_tensor3 *grad_logits, void *workspace,
                                      size_t workspace_size, int32_t threads, mas_error *err);
size_t mas_attention_cuda_workspace_size(int64_t batch, int64_t n, int64_t m, mas_dtype dtype);
mas_status mas_attention_forward_cuda(mas_attention_kind kind, const mas_tensor3 *logits,
                                      const int64_t *n_len, const int64_t *m_len,
                                      const mas_tensor3 *log_phi, void *workspace,
                                      size_t workspace_size, void *stream,
                                      uint64_t *error_word);
mas_status mas_attention_backward_cuda(mas_attention_kind kind, const mas_tensor3 *logits,
                                       const int64_t *n_len, const int64_t *m_len,
                                       const mas_tensor3 *log_phi,
                                       const mas_tensor3 *grad_log_phi,
                                       const mas_tensor3 *grad_logits, void *workspace,
                                       size_t workspace_size, void *stream,
                                       uint64_t *error_word);

/* ===================================================================== */
/* 6. Likelihoods: diagonal Gaussians and Gaussian mixtures              */
/* ===================================================================== */
/* A diagonal Gaussian k over J dimensions scores a frame x as
 *   log w_k + log N(x; mu_k, diag var_k) = K_k + sum_j a_kj x_j + sum_j b_kj x_j^2,
 *   a_kj = mu_kj / var_kj,   b_kj = -1 / (2 var_kj),
 *   K_k  = log w_k - 1/2 sum_j (log(2 pi) + log var_kj + mu_kj^2 / var_kj).
 * The coefficients of M Gaussians form a matrix coef [P, M] with P = 2J+1
 * rows: row 0 holds K, rows 1..J hold a, rows J+1..2J hold b. A state is a
 * run of consecutive Gaussians (its mixture); its log-likelihood is the
 * log-sum-exp of its Gaussians' scores, or their max (MAS_LOGLIK_MAX).
 *
 * Arithmetic, the same on every backend in the default precision: the
 * accumulator type (float64 when the frames are float64, else float32; the
 * coefficients must be of that type). The score of frame x under Gaussian k
 * is the chain
 *   e = [1, x_0, .., x_{J-1}, x_0*x_0, .., x_{J-1}*x_{J-1}]   (squares rounded)
 *   acc = coef[0][k];  for r = 1 .. 2J: acc = fma(e[r], coef[r][k], acc)
 * in that order, so a state of one Gaussian (the per-token Gaussians of TTS)
 * gives the same bits on the CPU and on CUDA. Coefficients made by
 * mas_gauss_coef_* are computed in float64 from the parameters and rounded
 * once, so they too agree between backends.
 *
 * Batches: every tensor has a leading item axis. A model shared by all items
 * has dim[0] = 1 (or stride[0] = 0 with dim[0] = B). Per-item models (TTS:
 * each utterance's token Gaussians) have dim[0] = B. */

/* How mas_gauss_params.spread is given. */
typedef enum mas_gauss_spread {
    MAS_SPREAD_VARIANCE = 0, /* variances var_kj (> 0) */
    MAS_SPREAD_LOG_STD = 1   /* log standard deviations: var = exp(2 log_std) */
} mas_gauss_spread;

/* The parameters of M diagonal Gaussians over J dimensions, per item.
 *   means:       [B or 1, M, J], any float dtype, any strides.
 *   spread:      [B or 1, M, J], same dtype rules; variances or log-std.
 *   log_weights: [B or 1, 1, M]; data NULL means 0 (weight 1) for all.
 * The Glow-TTS tensors mean / log_std [B, D, T] are the views with
 * dim {B, T, D} and stride {D*T, 1, T}. */
typedef struct mas_gauss_params {
    mas_tensor3 means;
    mas_tensor3 spread;
    int32_t spread_kind; /* mas_gauss_spread */
    int32_t reserved_;
    mas_tensor3 log_weights;
} mas_gauss_params;

/* Writes the coefficients of the Gaussians of params into coef ([B or 1, P,
 * M], MAS_FLOAT32 or MAS_FLOAT64, any strides), computed in float64 and
 * rounded once. Returns MAS_ERR_BAD_MODEL when a mean, spread or log weight
 * is NaN or +-inf (a log weight of -inf is allowed: a Gaussian of weight 0)
 * or a variance is <= 0, with err->item = the flat index b*M + k of the
 * first bad Gaussian; MAS_ERR_BAD_SHAPE when the shapes disagree. The
 * CUDA form takes device pointers, runs on `stream` and records value errors
 * in *error_word (may be NULL) as mas_hard_cuda does. Neither needs a
 * workspace. */
mas_status mas_gauss_coef_cpu(const mas_gauss_params *params, const mas_tensor3 *coef,
                              int32_t threads, mas_error *err);
mas_status mas_gauss_coef_cuda(const mas_gauss_params *params, const mas_tensor3 *coef,
                               void *stream, uint64_t *error_word);

/* Flags of mas_loglik_*. */
#define MAS_LOGLIK_MAX 1u /* a state's score is its best Gaussian's, not the log-sum */

/* Precision of mas_loglik_cuda. The CPU computes MAS_PRECISION_DEFAULT
 * whatever is asked (it has no tensor cores). With MAS_PRECISION_TF32 and
 * one Gaussian a state (offsets NULL, no best), a score is K_k (float32)
 * plus the products of e = [x, x*x] (the square taken in float32) and
 * coefficient rows 1..2J, both rounded to TF32 (to nearest, ties away from
 * zero), summed eight rows at a time in row order by the tensor cores in
 * float32: the cells mas_align_gaussian_cuda computes in that precision. */
typedef enum mas_precision {
    MAS_PRECISION_DEFAULT = 0, /* the fma chain above, on CUDA cores */
    MAS_PRECISION_TF32 = 1,    /* tensor cores, TF32 products, float32 sums */
    MAS_PRECISION_BF16 = 2     /* computed as MAS_PRECISION_TF32 (TF32 products, the same
                                * error): the tensor-core kernels are not bound by the tensor
                                * cores (about a fifth of the TF32 peak), so bfloat16 products
                                * would add error without speed */
} mas_precision;

/* The arguments of a log-likelihood call.
 *   x:       frames [B, N, J], any float dtype, any strides. (Glow-TTS z
 *            [B, D, S] is the view dim {B, S, D}, stride {D*S, 1, S}.)
 *   coef:    [B or 1, P, M] of the accumulator type, any strides (fastest
 *            with unit stride along M).
 *   offsets: [n_states + 1] int64, offsets[0] = 0, offsets[n_states] = M,
 *            strictly increasing: state s owns Gaussians [offsets[s],
 *            offsets[s+1]). NULL: one Gaussian per state (n_states = M).
 *            Host memory for the CPU, device memory for CUDA.
 *   n_states: number of states (the output's last axis).
 *   n_len:   [B] frames per item (N when NULL); frames >= n_len get 0.
 *   s_len:   [B] states per item (n_states when NULL); states >= s_len get 0.
 *   out:     [B, N, n_states] of the accumulator type, any strides; written
 *            in full (0 outside the lengths).
 *   best:    optional int32 [B, N, n_states] (data NULL: not wanted): the
 *            index k in [0, M) of the best Gaussian of the state (the
 *            lowest on ties); -1 outside the lengths.
 *   flags:   MAS_LOGLIK_* bits.
 *   precision: a mas_precision (CUDA from sm_80 on; the CPU and older
 *            GPUs compute MAS_PRECISION_DEFAULT whatever is asked).
 *   mixture_size: 0, or G when every state has G Gaussians (offsets[s] =
 *            s * G, M = n_states * G): CUDA then log-adds each state from
 *            the accumulators, in every precision, for float32 arithmetic
 *            and G a multiple of 8 dividing 128, or of 128 (a shared model,
 *            no best, the log-sum). The default precision's Gaussian scores
 *            are the same bits either way; the log-sum is added in another
 *            order (within float32 rounding of the G = 0 result). A G that
 *            disagrees with M, or with offsets, is MAS_ERR_BAD_ARGUMENT.
 *            Zero-initialised arguments (memset) leave it 0. */
typedef struct mas_loglik_args {
    mas_tensor3 x;
    mas_tensor3 coef;
    const int64_t *offsets;
    int64_t n_states;
    const int64_t *n_len;
    const int64_t *s_len;
    mas_tensor3 out;
    mas_tensor3 best;
    uint32_t flags;
    int32_t precision;
    int64_t mixture_size;
} mas_loglik_args;

/* Bytes of workspace for mas_loglik_cpu (threads <= 0: every core). */
size_t mas_loglik_cpu_workspace_size(const mas_loglik_args *args, int32_t threads);

/* Log-likelihoods of frames under the states of a Gaussian mixture model (or
 * one Gaussian per state), on the CPU. Returns MAS_OK; MAS_ERR_BAD_SHAPE
 * when the shapes disagree (x's J against coef's P = 2J+1, out against
 * B, N, n_states); MAS_ERR_BAD_DTYPE when coef is not of the accumulator
 * type; MAS_ERR_BAD_ARGUMENT for offsets that do not increase from 0 to M (or
 * differ from s * mixture_size when that is stated);
 * MAS_ERR_BAD_LENGTH (err->item = the item) for a length < 0 or beyond the
 * array; MAS_ERR_WORKSPACE_TOO_SMALL. Frames holding NaN or inf give NaN or
 * -inf scores (not an error). Scores are specified for coefficients as
 * mas_gauss_coef_* writes them (a and b finite, K finite or -inf) and
 * frames whose squares are finite; for others (NaN or inf coefficients
 * given directly) they may be NaN or inf and differ between backends. */
mas_status mas_loglik_cpu(const mas_loglik_args *args, void *workspace, size_t workspace_size,
                          int32_t threads, mas_error *err);

/* Bytes of device workspace for mas_loglik_cuda. */
size_t mas_loglik_cuda_workspace_size(const mas_loglik_args *args);

/* The same on a CUDA device, asynchronously on `stream`; every pointer is
 * device memory; host checks as on the CPU, value errors (lengths, offsets)
 * in *error_word. Never synchronises, never allocates. */
mas_status mas_loglik_cuda(const mas_loglik_args *args, void *workspace, size_t workspace_size,
                           void *stream, uint64_t *error_word);

/* ===================================================================== */
/* 7. Topologies: HMM states per token, token skips, CTC blanks          */
/* ===================================================================== */
/* The dynamic program over a chain of states built from a transcript of L
 * tokens (per item L = token_len[b]) and S frames (S = frame_len[b]):
 *   - each token is k = states_per_token left-to-right states;
 *   - with has_blank, one blank state before the first token, between every
 *     two tokens and after the last (CTC): n = L*k + L + 1 states, in order
 *     blank, token 0 (k states), blank, token 1, ..., blank; without blanks
 *     n = L*k. mas_topology_states() gives n.
 * A path visits one state per frame, starts in a first state and ends in a
 * final state, and from frame to frame stays on its state or moves forward:
 *   - stay:    s -> s, log-score stay[j] for state j of a token,
 *              blank_stay for a blank;
 *   - advance: s-1 -> s, log-score advance[j] into state j of a token,
 *              blank_advance into a blank;
 *   - blank skip (has_blank): from the last state of token i-1 to the first
 *     state of token i over the blank between them, log-score advance[0],
 *     only where the two states' labels differ (the CTC rule: equal labels
 *     need a blank between them);
 *   - token skip (skip_penalty > -inf, no blanks): from the last state of
 *     token i-1 to the first state of token i+1, log-score advance[0] +
 *     skip_penalty.
 * First states: state 0 (log-score 0), and the first state of token 0 with
 *   blanks (0) or of token 1 with token skips (skip_penalty: token 0
 *   skipped). Final states: state n-1 (0), and the last state of token L-1
 *   with blanks (0) or of token L-2 with token skips (skip_penalty).
 * A path's score is the sum of its edges' log-scores and of the emissions
 * e(t, s) of the cells it visits; hard (Viterbi) keeps the best path, soft
 * (forward-sum) log_z = log sum over paths of exp(score).
 * Emissions, either
 *   - per state (gathered = 0): emissions [B, n_max, S'] (dim[1] >= n of
 *     every item, dim[2] = S' >= frame_len), e(t,s) = emissions[b, s, t]; or
 *   - gathered (gathered = 1): frame log-probs [B, S', V] (dim[1] = S',
 *     dim[2] = V) and a label per state, e(t,s) = log_probs[b, t, label(s)],
 *     where label(s) = labels[b*labels_stride + i*k + j] for state j of token
 *     i and `blank` for a blank (CTC: k = 1, labels = targets). The [B, n, S]
 *     expansion is never written.
 * Arithmetic is float32 for float32/float16/bfloat16 emissions and float64
 * for float64; the log-scores (double) are converted once. Outputs of
 * real type are of that accumulator type.
 * Ties (hard): a cell keeps stay over advance over skip (a later edge wins
 * only when strictly better), and the path ends in state n-1 unless the
 * other final state is strictly better.
 * Errors per item (err->item names it): token_len < 0 (< 1 without blanks)
 * or > tokens, frame_len < 1 or > S': MAS_ERR_BAD_LENGTH; a label outside
 * [0, V) (gathered) or equal to the blank: MAS_ERR_BAD_ARGUMENT; fewer frames
 * than the shortest path needs (k*L; with blanks k*L + the number of
 * adjacent equal labels; with token skips k * max(1, floor(L/2)): a path
 * skips at most every other token): MAS_ERR_TARGET_TOO_LONG; NaN
 * or +inf in an emission the sweep reads: MAS_ERR_NONFINITE_VALUE. The sweep
 * reads, for frames t < frame_len and states s < n, every cell when the
 * topology has skip edges (blanks, token skips), else the band
 * t - (frame_len - n) <= s <= t (as hard MAS); gathered emissions are read
 * only at the item's labels and the blank (other labels are ignored);
 * every path -inf: MAS_ERR_NO_FINITE_PATH. The other items' outputs are
 * still written; the failing item's are as beyond the lengths. */
typedef struct mas_topology {
    int32_t states_per_token; /* k >= 1 (<= 7 with token skips) */
    int32_t has_blank;        /* 1: CTC blanks (then skip_penalty must be -inf) */
    int32_t blank;            /* the blank's label (gathered emissions) */
    int32_t reserved_;
    const double *stay;       /* [k] log-scores, NULL: all 0 */
    const double *advance;    /* [k] log-scores, NULL: all 0 */
    double blank_stay;        /* log-scores of a blank's edges */
    double blank_advance;
    double skip_penalty;      /* token skip log-score; -INFINITY: no token skips */
} mas_topology;

/* The arguments shared by the hard and soft calls.
 *   emissions: any float dtype, any strides (see above for its two forms).
 *   labels: int32 host array, required when gathered or has_blank, else
 *     may be NULL.
 *   tokens: the outputs' token axis (L_max >= every token_len).
 *   token_len, frame_len: [B] host arrays. */
typedef struct mas_topo_args {
    mas_topology topology;
    int32_t gathered;
    int32_t reserved_;
    mas_tensor3 emissions;
    const int32_t *labels;
    int64_t labels_stride;
    int64_t tokens;
    const int64_t *token_len;
    const int64_t *frame_len;
} mas_topo_args;

/* Outputs of the hard (Viterbi) call; any subset (at least one); NULL: not
 * wanted. Strides are per item (b), in elements.
 *   state_ids:    int32 [B, S'], the state of each frame; -1 beyond frame_len.
 *   frame_labels: int32 [B, S'], label(state) of each frame (the blank's
 *                 label on blank frames); -1 beyond frame_len. Needs labels.
 *   token_spans:  int32 [B, tokens, 2] at b*stride + 2*i: first and last
 *                 frame of token i; -1, -1 for a skipped token or i >= L.
 *   token_scores: [B, tokens] accumulator type: the mean emission of the
 *                 token's frames; -inf for a skipped token, 0 for i >= L.
 *   score:        [B] accumulator type: the best path's score (-inf on an
 *                 item error). */
typedef struct mas_topo_hard_outputs {
    int32_t *state_ids;
    int64_t state_ids_stride;
    int32_t *frame_labels;
    int64_t frame_labels_stride;
    int32_t *token_spans;
    int64_t token_spans_stride;
    void *token_scores;
    int64_t token_scores_stride;
    void *score;
} mas_topo_hard_outputs;

/* Outputs of the soft (forward-sum) call; NULL data: not wanted.
 *   log_z:     [B] accumulator type.
 *   posterior: [B, n_max, S'] accumulator type, any strides: the
 *              probability that the path is in state s at frame t; written
 *              in full (0 beyond the lengths); sums to 1 over s per frame
 *              (each frame is divided by its sum, which differs from 1 by
 *              log Z's rounding drift: up to ~2e-2 in float32 at S = 1500).
 *              It is d log_z / d e(t,s).
 *   grad:      gathered only, [B, S', V] accumulator type, any strides:
 *              d log_z / d log_probs, the posterior summed per label; written
 *              in full (0 beyond the lengths and at unused labels). */
typedef struct mas_topo_soft_outputs {
    void *log_z;
    mas_tensor3 posterior;
    mas_tensor3 grad;
} mas_topo_soft_outputs;

/* States of a transcript of `tokens` tokens under t (n above); 0 for k < 1;
 * INT64_MAX when n overflows int64 (the workspace size is then SIZE_MAX). */
int64_t mas_topology_states(const mas_topology *t, int64_t tokens);

/* Bytes of workspace for mas_viterbi_cpu (soft = 0) or
 * mas_topo_forward_sum_cpu (soft = 1) with these arguments (threads <= 0:
 * every core); 0 for bad arguments. For mas_viterbi_cpu this is the
 * unbounded size (one decision bit per cell, two with skip edges); less
 * works too (below). */
size_t mas_topo_cpu_workspace_size(const mas_topo_args *args, int32_t soft, int32_t threads);

/* The smallest workspace mas_viterbi_cpu accepts for these arguments (the
 * unbounded size when that is smaller); 0 for bad arguments. Between this
 * and mas_topo_cpu_workspace_size(args, 0, threads), mas_viterbi_cpu runs
 * the long-form (checkpointed) Viterbi described for
 * mas_hard_cpu_min_workspace_size: same outputs bit for bit, about 1.5
 * times the forward's time, items one per thread as the size allows. Below it,
 * MAS_ERR_WORKSPACE_TOO_SMALL. (The soft call has no long form: it keeps
 * alpha and beta of every cell.) */
size_t mas_topo_cpu_min_workspace_size(const mas_topo_args *args, int32_t threads);

/* Hard alignment (Viterbi) over the topology on the CPU. Returns MAS_OK, or
 * an error (argument errors before any work; item errors as above, with
 * *err naming the lowest failing item). */
mas_status mas_viterbi_cpu(const mas_topo_args *args, const mas_topo_hard_outputs *out,
                           void *workspace, size_t workspace_size, int32_t threads,
                           mas_error *err);

/* Soft alignment (forward-sum) over the topology on the CPU: log_z, and the
 * posterior / the gradient of the log-probs when wanted. Returns as
 * mas_viterbi_cpu. */
mas_status mas_topo_forward_sum_cpu(const mas_topo_args *args,
                                    const mas_topo_soft_outputs *out, void *workspace,
                                    size_t workspace_size, int32_t threads, mas_error *err);

/* The same on a CUDA device, asynchronously on `stream`, value errors
 * (the item statuses above) in *error_word (mas_decode_device_error).
 * Device memory: emissions, labels, token_len, frame_len, the outputs and
 * the workspace; host memory: the topology's stay / advance arrays.
 * Hard: a plain chain (no blanks, no token skips, per-state emissions,
 * k <= 8, emission rows dim[1] <= k x tokens and <= 65,536) runs on hard
 * MAS's kernels (section 4) with the edges' log-scores added in the same
 * order as the CPU: one block and one launch an item when the emissions'
 * rows and frames (dim[1], dim[2]) fit one block's shared memory (at most
 * 512 rows, 16-byte aligned along frames or states; e.g. 256 x 800 in
 * float32 on an H100), else several blocks an item in the unbounded
 * workspace (whose size covers it). Other topologies: items of up to 1024
 * states run one block an item; longer chains are split over several
 * blocks that hand the scores at their edges on frame by frame (all of an
 * item's blocks must be resident at once: MAS_ERR_BAD_ARGUMENT beyond:
 * about 130,000 states per item on an H100 in float32, 65,000 in float64).
 * The outputs are the same bits on every route.
 * Soft: one block an item, at most 8192 states (MAS_ERR_BAD_ARGUMENT
 * beyond). Limits of both: k <= 16, frames < 2^31.
 * mas_topo_cuda_workspace_size: bytes for the call (soft = 1) or for the
 * unbounded hard call (one decision bit per cell, two with skip edges); 0
 * for bad arguments. MAS_ERR_NO_CUDA in a build without CUDA. */
size_t mas_topo_cuda_workspace_size(const mas_topo_args *args, int32_t soft);
/* The smallest workspace mas_viterbi_cuda accepts (the unbounded size when
 * that is smaller); 0 for bad arguments. With less than the unbounded
 * size, mas_viterbi_cuda runs the long form: the frames in segments as
 * long as the workspace allows, a checkpoint column of every state before
 * each segment, the forward once more segment by segment during the
 * backtrack (about twice the forward's time); the same outputs bit for
 * bit. Below the minimum, MAS_ERR_WORKSPACE_TOO_SMALL. */
size_t mas_topo_cuda_min_workspace_size(const mas_topo_args *args);
mas_status mas_viterbi_cuda(const mas_topo_args *args, const mas_topo_hard_outputs *out,
                            void *workspace, size_t workspace_size, void *stream,
                            uint64_t *error_word);
mas_status mas_topo_forward_sum_cuda(const mas_topo_args *args,
                                     const mas_topo_soft_outputs *out, void *workspace,
                                     size_t workspace_size, void *stream,
                                     uint64_t *error_word);

/* ===================================================================== */
/* 8. Fused Gaussian alignment: likelihood + alignment without [B,T,S]  */
/* ===================================================================== */
/* Hard MAS and forward-sum over the log-likelihood v(i,j) of frame j under
 * token i's diagonal Gaussian (Glow-TTS / VITS / Matcha-TTS), with the cells
 * computed where the sweep needs them, tile by tile: the [B, T, S] matrix
 * is never written. v(i,j) is the score of section 6 (the same fma chain on
 * the same coefficients, computed by the same code), so
 *   mas_align_gaussian_cpu(x, params)  ==  mas_hard_cpu(mas_loglik_cpu(x, params))
 * bit for bit (durations, indices, path, score, and errors), and
 * mas_forward_sum_gaussian_cpu's log_z is mas_forward_sum_cpu's on that
 * matrix, bit for bit (the same sweep); its gradients are the posterior-
 * weighted derivatives of the cells' Gaussians, summed in float64.
 *
 * Memory beyond inputs and outputs (the workspace): the coefficients
 * [B, 2J+1, T], per thread the item's expanded frames (2J x S) and packed
 * coefficients, plus for hard MAS the decision bits (T*S/8 bytes per
 * thread, not per item) and for forward-sum O(T sqrt(S)) checkpointed
 * columns and O((T+S) J) gradient accumulators: no [B, T, S] anywhere.
 * Work is split over items (one thread per item at a time). */

/* The arguments.
 *   x:      frames [B, S, J], any float dtype, any strides (Glow-TTS z
 *           [B, D, S] is the view dim {B, S, D}, stride {D*S, 1, S}).
 *   params: the tokens' Gaussians, means and spread [B or 1, T, J]
 *           (Glow-TTS mean / log_std [B, D, T]: dim {B, T, D}, stride
 *           {D*T, 1, T}) with spread_kind; log_weights optional [B or 1,
 *           1, T] (added to every cell of the token).
 *   x_len:  [B] tokens per item, y_len: [B] frames per item (host memory
 *           for the CPU), with the rules of hard MAS (1 <= x_len <= y_len,
 *           x_len <= T, y_len <= S).
 *   precision: a mas_precision, as for mas_loglik_cuda (zero-initialised
 *           arguments leave the default). MAS_PRECISION_TF32 (and _BF16,
 *           computed as TF32) is taken by mas_align_gaussian_cuda for
 *           float32 arithmetic from sm_80 on: the cells are then those
 *           mas_loglik_cuda computes in that precision (TF32 operands,
 *           float32 sums on the tensor cores), bit for bit, so the results
 *           are mas_hard_cuda's on mas_loglik_cuda's TF32 matrix. Every other
 *           call (the CPU, float64, older GPUs, the forward-sum) computes the
 *           default precision whatever is asked.
 * Arithmetic: float64 when x is float64, else float32 (section 6). */
typedef struct mas_gauss_align_args {
    mas_tensor3 x;
    mas_gauss_params params;
    const int64_t *x_len;
    const int64_t *y_len;
    int32_t precision;
    int32_t reserved_;
} mas_gauss_align_args;

/* Bytes of workspace for mas_align_gaussian_cpu (threads <= 0: every core);
 * 0 for bad arguments, SIZE_MAX for shapes beyond 2^52 cells. This is the
 * unbounded size (decision bits of every cell of an item per thread); less
 * works too, down to the minimum below. */
size_t mas_align_gaussian_cpu_workspace_size(const mas_gauss_align_args *args,
                                             int32_t threads);

/* The smallest workspace mas_align_gaussian_cpu accepts: given less than
 * the unbounded size it aligns long-form (as mas_hard_cpu: score columns
 * kept every K frames, the bits of one segment at a time, the backtrack
 * re-running one segment at a time), with the same outputs bit for bit and
 * more time. The coefficients and each worker's expanded frames (2J x S)
 * stay whole. 0 / SIZE_MAX as the function above. */
size_t mas_align_gaussian_cpu_min_workspace_size(const mas_gauss_align_args *args,
                                                 int32_t threads);

/* Hard MAS on the Gaussian log-likelihoods, on the CPU. out as for
 * mas_hard_cpu with value = the virtual [B, T, S] matrix (path dim {B, T,
 * S}; score float64 for float64 x, else float32). Returns MAS_OK, or, in
 * this order: argument errors (MAS_ERR_NULL_POINTER, MAS_ERR_BAD_DTYPE,
 * MAS_ERR_BAD_SHAPE when x's J differs from the means' or the means' batch
 * is neither 1 nor B, MAS_ERR_BAD_ARGUMENT, MAS_ERR_WORKSPACE_TOO_SMALL);
 * MAS_ERR_BAD_MODEL with err->item = b*T + k as mas_gauss_coef_cpu (every
 * token is checked, also beyond x_len); then item errors as mas_hard_cpu
 * (lengths, NaN/+inf in the band, no finite path), outputs of the other
 * items written. */
mas_status mas_align_gaussian_cpu(const mas_gauss_align_args *args,
                                  const mas_hard_outputs *out, void *workspace,
                                  size_t workspace_size, int32_t threads, mas_error *err);

/* Outputs of the fused forward-sum; NULL data: not wanted (log_z or one
 * gradient at least). Of the accumulator type, any strides, written in full
 * (0 outside the lengths, and for a failing item; log_z -inf for it).
 *   log_z:       [B]: log sum over monotonic paths of exp(sum of v).
 *   grad_x:      [B, S, J]: d log_z[b] / d x[b] (the view of x).
 *   grad_means:  [B, T, J]: d log_z[b] / d means[b] (means of batch 1:
 *                still one row per item, the caller sums).
 *   grad_spread: [B, T, J]: d log_z[b] / d spread[b], per spread_kind (log
 *                std or variance). Log weights get no gradient (it would
 *                be the expected durations). */
typedef struct mas_gauss_soft_outputs {
    void *log_z;
    mas_tensor3 grad_x;
    mas_tensor3 grad_means;
    mas_tensor3 grad_spread;
} mas_gauss_soft_outputs;

/* Bytes of workspace for mas_forward_sum_gaussian_cpu. */
size_t mas_forward_sum_gaussian_cpu_workspace_size(const mas_gauss_align_args *args,
                                                   int32_t threads);

/* Forward-sum on the Gaussian log-likelihoods with the gradients of log_z,
 * on the CPU: the log-plus sweep keeps alpha's column every ~sqrt(S)
 * frames; then, block by block from the end, the block's alpha is
 * recomputed from its checkpoint and its cells from the parameters, a
 * reversed sweep walks the block on those cells, and the posterior
 * gamma(i,j) of the block weights the Gaussian's derivatives (accumulated
 * in float64):
 *   d v / d x_j = -(x_j - mu_j) / var_j,  d v / d mu_j = (x_j - mu_j) / var_j,
 *   d v / d log_std_j = (x_j - mu_j)^2 / var_j - 1,
 *   d v / d var_j = ((x_j - mu_j)^2 / var_j - 1) / (2 var_j).
 * Errors as mas_align_gaussian_cpu. */
mas_status mas_forward_sum_gaussian_cpu(const mas_gauss_align_args *args,
                                        const mas_gauss_soft_outputs *out, void *workspace,
                                        size_t workspace_size, int32_t threads,
                                        mas_error *err);

/* Bytes of device workspace for mas_align_gaussian_cuda (0 for a call it
 * rejects, SIZE_MAX for shapes beyond 2^52 cells): the coefficients
 * [means' B, 2J+1, T] (rows padded to 4 tokens; once read, an item's rows
 * may also hold cells its later slabs make ahead), one decision bit per cell
 * of [B, T, S], and small per-item regions (15.7 MB for B=32 T=512 S=2048
 * J=80, float32). There is no long form: less than this is
 * MAS_ERR_WORKSPACE_TOO_SMALL. */
size_t mas_align_gaussian_cuda_workspace_size(const mas_gauss_align_args *args);

/* mas_align_gaussian_cpu on a CUDA device: every pointer device memory
 * (x_len, y_len too), asynchronously on `stream`, no synchronisation, no
 * allocation (CUDA-graph capturable). The same outputs bit for bit as the
 * CPU op and as mas_hard_cuda on mas_loglik_cuda's matrix. Returns the
 * argument errors of the CPU op in its order, MAS_ERR_CUDA when a launch
 * fails, MAS_ERR_BAD_ARGUMENT for T beyond what the device holds at once
 * (64 tokens a block, every block of an item resident); value errors (a bad
 * model: item b*T + k as mas_gauss_coef_cuda; lengths, NaN/+inf in the band,
 * no finite path: item b) go to *error_word (may be NULL) as for
 * mas_hard_cuda. In a loop of calls on sm_90 and later, a call may start
 * while the last kernel of the mas_align_gaussian_cuda call just before it
 * on `stream` still ends: it reads its means and spreads then, and writes
 * nothing before that kernel has ended. So they must not be memory that
 * the call just before writes (its outputs) unless an operation of the
 * caller's runs between the two. */
mas_status mas_align_gaussian_cuda(const mas_gauss_align_args *args,
                                   const mas_hard_outputs *out, void *workspace,
                                   size_t workspace_size, void *stream, uint64_t *error_word);

/* Bytes of device workspace for mas_forward_sum_gaussian_cuda (0 for a call
 * it rejects, SIZE_MAX for shapes beyond 2^52 cells): the coefficients,
 * two blocks of [B, K, T] (the cells, and alpha then the posterior in its
 * place; K: the multiple of 128 frames nearest 6 sqrt(S), at least 256, at
 * most S rounded up to 16), the checkpointed columns [B, S/K, T], two
 * columns [B, T], mu/var and 1/var [B, T, J] and the float64 token sums
 * [B, T, 2J+1] (78 MB for B=32 T=512 S=2048 J=80, float32; the unfused
 * path holds the 134 MB matrix, its posterior and their gradients). */
size_t mas_forward_sum_gaussian_cuda_workspace_size(const mas_gauss_align_args *args);

/* mas_forward_sum_gaussian_cpu on a CUDA device: every pointer device
 * memory, asynchronously on `stream`, no synchronisation, no allocation.
 * The frames go in blocks of K: per block the cells are computed by the
 * likelihood kernels into the workspace and swept, resumed from the
 * previous block's column. log_z is bit for bit mas_forward_sum_cuda's on
 * mas_loglik_cuda's matrix; the gradients are the CPU op's within rounding
 * (the posterior and the weighted sums of one block in the accumulator
 * type, the blocks' sums in float64, in another order). The token
 * gradients come from the sums of gamma, gamma x and gamma x^2 (the CPU
 * takes x - mu first), so in float32 their relative error is about
 * eps (mu^2 + x^2) / (x - mu)^2, as for the cells themselves and the
 * unfused path's products. Returns the argument errors of the CPU op in
 * its order (and MAS_ERR_BAD_SHAPE for an empty token or frame axis, where
 * the CPU op reports each item's lengths), MAS_ERR_CUDA when a launch
 * fails; value errors (a bad model: item b*T + k; lengths, NaN/+inf in the
 * band, no finite path: item b) go to *error_word (may be NULL) as for
 * mas_forward_sum_cuda. */
mas_status mas_forward_sum_gaussian_cuda(const mas_gauss_align_args *args,
                                         const mas_gauss_soft_outputs *out, void *workspace,
                                         size_t workspace_size, void *stream,
                                         uint64_t *error_word);

#ifdef __cplusplus
}
#endif

#endif /* MAS_H */
