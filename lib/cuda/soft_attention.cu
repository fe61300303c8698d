/* Monotonic attention on CUDA, one-to-many and many-to-many, forward and
 * backward: views onto the one soft sweep (soft_sweep.cuh).
 *
 *   one-to-many:  steps = i (N axis), states = j (M axis), logit weights on
 *                 the edges, no lower band.
 *   many-to-many: the same recurrence on anti-diagonals, step d = i + j,
 *                 state i; the skewed view has stride_step = stride_j and
 *                 stride_state = stride_i - stride_j, and the lower band
 *                 M - 1 keeps j < M. A right move is a "stay" (weight
 *                 log sigmoid(x[i,j-1])), a down move an "advance" (weight
 *                 log sigmoid(-x[i-1,j])).
 * The forward is the log-plus sweep with logit weights writing log phi; the
 * backward is the adjoint sweep (AdjointCell) over the reversed view of the
 * same item. A fill kernel writes the cells outside the lengths (-inf in
 * log phi, 0 in the gradient), or all of a failed item's. */
#include <cuda_runtime.h>
#include <math.h>

#include "cuda/soft_cells.cuh"
#include "cuda/soft_fill.cuh"
#include "cuda/soft_sweep.cuh"
#include "mas.h"

using namespace mas_cuda;

namespace {

/* Status [B], then the sweeps' segment links (states M or N, steps N or
 * N + M - 1: sized for the larger of each). */
size_t attn_status_bytes(int64_t B) { return align256((size_t)B * sizeof(int32_t)); }
size_t attn_workspace(int64_t B, int64_t N, int64_t M, int32_t dtype) {
    const size_t acc = mas_accum_dtype(dtype) == MAS_FLOAT64 ? 8 : 4;
    return attn_status_bytes(B) +
           soft_link_bytes(B, N > M ? N : M, N + M - 1, 2 * acc, soft_min_segment()) + 256;
}

struct Strided {
    const void *base;
    int32_t dtype;
    int64_t s0, s1, s2;
};

Strided strided(const mas_tensor3 *t) {
    Strided r;
    r.base = t->data;
    r.dtype = t->dtype;
    r.s0 = view_stride(t, 0);
    r.s1 = view_stride(t, 1);
    r.s2 = view_stride(t, 2);
    return r;
}

template <typename TA> struct AttnPlan {
    int32_t kind;
    int64_t N, M;
    const int64_t *n_len, *m_len;
    Strided logits;
    Strided phi;   /* forward: the output; backward: an input */
    Strided grad;  /* backward: d loss / d log phi */
    Strided dx;    /* backward: d loss / d x (output) */
    int32_t *status;
    uint64_t *error_word;

    /* The item's (step, state) view of a [B,N,M] tensor. */
    __device__ void view(const Strided &t, int64_t b, int64_t &base_off, int64_t &s_state,
                         int64_t &s_step) const {
        base_off = b * t.s0;
        if (kind == MAS_ATTENTION_ONE_TO_MANY) {
            s_state = t.s2;
            s_step = t.s1;
        } else {
            s_state = t.s1 - t.s2;
            s_step = t.s2;
        }
    }

    __device__ SoftView in_view(const Strided &t, int64_t b, int64_t t_lo, int64_t t_hi,
                                int32_t check) const {
        int64_t off, s_state, s_step;
        view(t, b, off, s_state, s_step);
        return soft_view((const char *)t.base + off * soft_dtype_bytes(t.dtype), t.dtype, s_state,
                         s_step, t_lo, t_hi, check);
    }

    /* Forward (NIN 1): logits in, log phi out. Backward (NIN 3): logits, log
     * phi and its gradient in, d x out, reversed. */
    template <int NIN> __device__ bool item(int64_t b, SoftItem<TA, NIN> &it) const {
        constexpr bool backward = NIN == 3;
        const int64_t n = n_len ? n_len[b] : N, m = m_len ? m_len[b] : M;
        if (n < 1 || n > N || m < 1 || m > M) {
            if (threadIdx.x == 0) {
                status[b] = MAS_ERR_BAD_LENGTH;
                report_error(error_word, b, MAS_ERR_BAD_LENGTH);
            }
            return false;
        }
        if (kind == MAS_ATTENTION_ONE_TO_MANY) {
            it.n_states = m;
            it.n_steps = n;
            it.band_lo = kSoftNoBand;
            it.store_band = false;
        } else {
            it.n_states = n;
            it.n_steps = n + m - 1;
            it.band_lo = m - 1;
            it.store_band = true;
        }
        it.band_hi = 0;
        it.scalar = 0;
        /* The last step's logits weigh edges that leave the item: unread. */
        it.in[0] = in_view(logits, b, 0, it.n_steps - 1, 2);
        const Strided &out = backward ? dx : phi;
        int64_t off;
        view(out, b, off, it.out.s_state, it.out.s_step);
        it.out.base = (TA *)out.base + off;
        if constexpr (backward) {
            it.in[1] = in_view(phi, b, 0, it.n_steps, 0);
            it.in[2] = in_view(grad, b, 0, it.n_steps, 0);
            soft_reverse(it);
        }
        return true;
    }

    __device__ void finish(int64_t b, TA, bool bad) const {
        status[b] = bad ? MAS_ERR_NONFINITE_VALUE : MAS_OK;
        if (bad) report_error(error_word, b, MAS_ERR_NONFINITE_VALUE);
    }
};

mas_status check_common(mas_attention_kind kind, const mas_tensor3 *logits,
                        const mas_tensor3 *log_phi, const void *workspace) {
    if (!logits || !log_phi || !workspace) return MAS_ERR_NULL_POINTER;
    if (kind != MAS_ATTENTION_ONE_TO_MANY && kind != MAS_ATTENTION_MANY_TO_MANY)
        return MAS_ERR_BAD_ARGUMENT;
    mas_status st = mas_check_tensor(logits, MAS_ANY_FLOAT);
    if (st != MAS_OK) return st;
    st = mas_check_tensor(log_phi, mas_accum_dtype(logits->dtype));
    if (st != MAS_OK) return st;
    if (!mas_same_dims(log_phi, logits)) return MAS_ERR_BAD_SHAPE;
    return MAS_OK;
}

template <typename TA>
mas_status run_attention(mas_attention_kind kind, const mas_tensor3 *logits, const int64_t *n_len,
                         const int64_t *m_len, const mas_tensor3 *log_phi,
                         const mas_tensor3 *grad_log_phi, const mas_tensor3 *grad_logits,
                         unsigned char *ws, cudaStream_t stream, uint64_t *error_word) {
    const int64_t B = logits->dim[0], N = logits->dim[1], M = logits->dim[2];
    AttnPlan<TA> plan;
    plan.kind = kind;
    plan.N = N;
    plan.M = M;
    plan.n_len = n_len;
    plan.m_len = m_len;
    plan.logits = strided(logits);
    plan.phi = strided(log_phi);
    plan.status = (int32_t *)ws;
    plan.error_word = error_word;
    const int64_t states = kind == MAS_ATTENTION_ONE_TO_MANY ? M : N;
    const int64_t steps = kind == MAS_ATTENTION_ONE_TO_MANY ? N : N + M - 1;
    void *seg = ws + attn_status_bytes(B);
    mas_status st;
    if (!grad_logits) {
        st = soft_launch<TA, PlusCell<TA, LogPlus, false, true, false>>(plan, B, states,
                                                                             steps, seg, stream);
        if (st != MAS_OK) return st;
        return soft_launch_fill<TA>(log_phi, n_len, m_len, plan.status, -(TA)INFINITY, stream);
    }
    plan.grad = strided(grad_log_phi);
    plan.dx = strided(grad_logits);
    st = soft_launch<TA, AdjointCell<TA>>(plan, B, states, steps, seg, stream);
    if (st != MAS_OK) return st;
    return soft_launch_fill<TA>(grad_logits, n_len, m_len, plan.status, (TA)0, stream);
}

} // namespace

extern "C" size_t mas_attention_cuda_workspace_size(int64_t batch, int64_t n, int64_t m,
                                                    mas_dtype dtype) {
    if (batch < 1 || n < 1 || m < 1 || !mas_is_float_dtype(dtype)) return 0;
    return attn_workspace(batch, n, m, dtype);
}

extern "C" mas_status mas_attention_forward_cuda(mas_attention_kind kind, const mas_tensor3 *logits,
                                                 const int64_t *n_len, const int64_t *m_len,
                                                 const mas_tensor3 *log_phi, void *workspace,
                                                 size_t workspace_size, void *stream,
                                                 uint64_t *error_word) {
    mas_status st = check_common(kind, logits, log_phi, workspace);
    if (st != MAS_OK) return st;
    if (workspace_size < attn_workspace(logits->dim[0], logits->dim[1], logits->dim[2], logits->dtype))
        return MAS_ERR_WORKSPACE_TOO_SMALL;
    unsigned char *ws = align_workspace(workspace);
    cudaStream_t s = (cudaStream_t)stream;
    if (mas_accum_dtype(logits->dtype) == MAS_FLOAT64)
        return run_attention<double>(kind, logits, n_len, m_len, log_phi, nullptr, nullptr, ws, s,
                                     error_word);
    return run_attention<float>(kind, logits, n_len, m_len, log_phi, nullptr, nullptr, ws, s,
                                error_word);
}

extern "C" mas_status mas_attention_backward_cuda(mas_attention_kind kind,
                                                  const mas_tensor3 *logits, const int64_t *n_len,
                                                  const int64_t *m_len, const mas_tensor3 *log_phi,
                                                  const mas_tensor3 *grad_log_phi,
                                                  const mas_tensor3 *grad_logits, void *workspace,
                                                  size_t workspace_size, void *stream,
                                                  uint64_t *error_word) {
    mas_status st = check_common(kind, logits, log_phi, workspace);
    if (st != MAS_OK) return st;
    if (!grad_log_phi || !grad_logits) return MAS_ERR_NULL_POINTER;
    if ((st = mas_check_tensor(grad_log_phi, MAS_ANY_FLOAT)) != MAS_OK) return st;
    if ((st = mas_check_tensor(grad_logits, mas_accum_dtype(logits->dtype))) != MAS_OK) return st;
    if (!mas_same_dims(grad_log_phi, logits) || !mas_same_dims(grad_logits, logits))
        return MAS_ERR_BAD_SHAPE;
    if (workspace_size < attn_workspace(logits->dim[0], logits->dim[1], logits->dim[2], logits->dtype))
        return MAS_ERR_WORKSPACE_TOO_SMALL;
    unsigned char *ws = align_workspace(workspace);
    cudaStream_t s = (cudaStream_t)stream;
    if (mas_accum_dtype(logits->dtype) == MAS_FLOAT64)
        return run_attention<double>(kind, logits, n_len, m_len, log_phi, grad_log_phi,
                                     grad_logits, ws, s, error_word);
    return run_attention<float>(kind, logits, n_len, m_len, log_phi, grad_log_phi, grad_logits,
                                ws, s, error_word);
}
