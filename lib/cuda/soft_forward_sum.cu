/* Forward-sum on CUDA: the log-plus soft sweep (soft_sweep.cuh) over the
 * hard-MAS path set, and the posterior from the same sweep over the reversed
 * view.
 *
 * Sweep 1 (forward): alpha(i,j) over states = tokens, steps = frames, cell
 * weights v, band Y - X; alpha goes to the workspace as [b][frame][token] so
 * that both sweeps touch it along contiguous tokens. log_z = alpha(X-1, Y-1).
 * Sweep 2 (reversed view, from (X-1, Y-1)): beta~(i,j) = v(i,j) +
 * LSE(beta~(i,j+1), beta~(i+1,j+1)), and each cell writes
 * gamma = exp(alpha + beta~ - v - log_z) straight into the posterior.
 * A fill kernel then zeros the cells outside the lengths (or all of a failed
 * item). Three launches on the caller's stream; no synchronisation. */
#include <cuda_runtime.h>
#include <math.h>

#include "cuda/soft_cells.cuh"
#include "cuda/soft_fill.cuh"
#include "cuda/soft_sweep.cuh"
#include "mas.h"

using namespace mas_cuda;

/* Compute threads per block of the soft sweeps (0: the default); set only by
 * the benchmark program to compare launch shapes. Not part of the API. */
extern "C" {
int32_t mas_soft_cuda_target_threads_ = 0;
int32_t mas_soft_cuda_segment_states_ = 0;
/* Test hook: the forward sweep in the max-plus semiring (log_z becomes hard
 * MAS's score; no posterior). Shows the sweep takes the semiring as a
 * parameter; not part of the API. */
int32_t mas_soft_cuda_max_plus_ = 0;
}

namespace {

struct FsLayout {
    size_t status; /* int32 [B] */
    size_t log_z;  /* accum [B] */
    size_t alpha;  /* accum [B][S][T] */
    size_t seg;    /* the sweeps' segment links (soft_link_bytes) */
    size_t total;
};

FsLayout fs_layout(int64_t B, int64_t T, int64_t S, int32_t accum) {
    const size_t acc = accum == MAS_FLOAT64 ? 8 : 4;
    FsLayout L;
    size_t at = 0;
    L.status = at;
    at += align256((size_t)B * sizeof(int32_t));
    L.log_z = at;
    at += align256((size_t)B * acc);
    L.alpha = at;
    at += align256((size_t)B * (size_t)S * (size_t)T * acc);
    L.seg = at;
    at += soft_link_bytes(B, T, S, 2 * acc, soft_min_segment());
    L.total = at + 256; /* room to align the caller's pointer */
    return L;
}

template <typename TA> struct FsPlan {
    const void *value;
    int32_t dtype;
    int64_t v0, v1, v2; /* value strides */
    int64_t T, S;
    const int64_t *x_len, *y_len;
    TA *alpha;           /* workspace [B][S][T]; NULL when no posterior */
    TA *post;            /* posterior, or NULL */
    int64_t p0, p1, p2;
    int32_t *status;
    TA *log_z_ws;
    TA *log_z; /* the caller's, may be NULL */
    uint64_t *error_word;
    bool alpha_read; /* the reversed sweep: status and log_z are already set */

    /* The forward sweep reads v; the reversed one v and the forward's alpha. */
    template <int NIN> __device__ bool item(int64_t b, SoftItem<TA, NIN> &it) const {
        constexpr bool backward = NIN == 2;
        const int64_t X = x_len[b], Y = y_len[b];
        if (backward) {
            if (status[b] != MAS_OK) return false; /* the fill zeros it */
        } else {
            int st = length_status(X, Y, T, S);
            if (st != MAS_OK) {
                if (threadIdx.x == 0)
                    forward_sum_record(b, st, (TA)0, status, log_z_ws, log_z, error_word);
                return false;
            }
        }
        it.n_states = X;
        it.n_steps = Y;
        it.band_lo = Y - X;
        it.band_hi = 0;
        it.store_band = false;
        it.in[0] = soft_view((const char *)value + b * v0 * soft_dtype_bytes(dtype), dtype, v1, v2,
                             0, Y, backward ? 0 : 1);
        TA *alpha_b = alpha ? alpha + b * S * T : nullptr;
        it.scalar = 0;
        if constexpr (!backward) {
            it.out.base = alpha_b;
            it.out.s_state = 1;
            it.out.s_step = T;
        } else {
            it.in[1] = soft_view(alpha_b, sizeof(TA) == 8 ? MAS_FLOAT64 : MAS_FLOAT32, 1, T, 0, Y, 0);
            it.out.base = post + b * p0;
            it.out.s_state = p1;
            it.out.s_step = p2;
            it.scalar = log_z_ws[b];
            soft_reverse(it);
        }
        return true;
    }

    __device__ void finish(int64_t b, TA last, bool bad) const {
        if (alpha_read) return;
        const int st = forward_sum_status(bad, &last);
        forward_sum_record(b, st, last, status, log_z_ws, log_z, error_word);
    }
};

template <typename TA>
mas_status run_forward_sum(const mas_tensor3 *value, const int64_t *x_len, const int64_t *y_len,
                           void *log_z, const mas_tensor3 *post, unsigned char *ws,
                           const FsLayout &L, cudaStream_t stream, uint64_t *error_word) {
    const int64_t B = value->dim[0], T = value->dim[1], S = value->dim[2];
    FsPlan<TA> plan;
    plan.value = value->data;
    plan.dtype = value->dtype;
    plan.v0 = view_stride(value, 0);
    plan.v1 = view_stride(value, 1);
    plan.v2 = view_stride(value, 2);
    plan.T = T;
    plan.S = S;
    plan.x_len = x_len;
    plan.y_len = y_len;
    plan.alpha = post ? (TA *)(ws + L.alpha) : nullptr;
    plan.post = post ? (TA *)post->data : nullptr;
    plan.p0 = post ? view_stride(post, 0) : 0;
    plan.p1 = post ? view_stride(post, 1) : 0;
    plan.p2 = post ? view_stride(post, 2) : 0;
    plan.status = (int32_t *)(ws + L.status);
    plan.log_z_ws = (TA *)(ws + L.log_z);
    plan.log_z = (TA *)log_z;
    plan.error_word = error_word;
    plan.alpha_read = false;

    if (mas_soft_cuda_max_plus_) {
        if (post) return MAS_ERR_BAD_ARGUMENT;
        return soft_launch<TA, PlusCell<TA, MaxPlus, true, false, false>>(plan, B, T, S, ws + L.seg,
                                                                          stream);
    }
    using Fwd = PlusCell<TA, LogPlus, true, false, false>;
    mas_status st = soft_launch<TA, Fwd>(plan, B, T, S, ws + L.seg, stream);
    if (st != MAS_OK || !post) return st;
    plan.alpha_read = true;
    using Bwd = PlusCell<TA, LogPlus, true, false, true>;
    st = soft_launch<TA, Bwd>(plan, B, T, S, ws + L.seg, stream);
    if (st != MAS_OK) return st;
    return soft_launch_fill<TA>(post, x_len, y_len, plan.status, (TA)0, stream);
}

} // namespace

extern "C" size_t mas_forward_sum_cuda_workspace_size(int64_t batch, int64_t tokens,
                                                      int64_t frames, mas_dtype dtype) {
    if (batch < 1 || tokens < 1 || frames < 1 || !mas_is_float_dtype(dtype)) return 0;
    return fs_layout(batch, tokens, frames, mas_accum_dtype(dtype)).total;
}

extern "C" mas_status mas_forward_sum_cuda(const mas_tensor3 *value, const int64_t *x_len,
                                           const int64_t *y_len, void *log_z,
                                           const mas_tensor3 *posterior, void *workspace,
                                           size_t workspace_size, void *stream,
                                           uint64_t *error_word) {
    /* The checks of mas_forward_sum_cpu, in the same order. */
    const mas_tensor3 *post = posterior && posterior->data ? posterior : nullptr;
    mas_status st = MAS_OK;
    if (!value || !x_len || !y_len || !workspace) st = MAS_ERR_NULL_POINTER;
    else if ((st = mas_check_tensor(value, MAS_ANY_FLOAT)) != MAS_OK) {
    } else if (!log_z && !post) st = MAS_ERR_BAD_ARGUMENT;
    else if (post && (st = mas_check_tensor(post, mas_accum_dtype(value->dtype))) != MAS_OK) {
    } else if (post && !mas_same_dims(post, value)) st = MAS_ERR_BAD_SHAPE;
    if (st != MAS_OK) return st;
    const int64_t B = value->dim[0], T = value->dim[1], S = value->dim[2];
    const int32_t accum = mas_accum_dtype(value->dtype);
    const FsLayout L = fs_layout(B, T, S, accum);
    if (workspace_size < L.total) return MAS_ERR_WORKSPACE_TOO_SMALL;
    unsigned char *ws = align_workspace(workspace);
    cudaStream_t s = (cudaStream_t)stream;
    if (accum == MAS_FLOAT64)
        return run_forward_sum<double>(value, x_len, y_len, log_z, post, ws, L, s, error_word);
    return run_forward_sum<float>(value, x_len, y_len, log_z, post, ws, L, s, error_word);
}
