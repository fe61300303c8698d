/* Fused Gaussian alignment on CUDA (mas.h section 8): host entry points.
 * Hard MAS: the tokens' coefficients (mas_gauss_coef_cuda's kernel, the
 * bits gaussian_loglik uses) into the workspace, its blocks also zeroing
 * the sweep's rings, flags and ticket when an item spans several blocks;
 * the fused forward sweep (fused_forward.cuh); then hard MAS's backtrack
 * and outputs (hard_finish.h). The sweep and the backtrack are dependent
 * launches (dependent_launch.cuh). No synchronisation and no allocation.
 * The forward-sum is in fused_forward_sum.cu. */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/checks.h"
#include "cpu/parallel.h" /* mas_shape_too_big */
#include "cuda/coef_launch.h"
#include "cuda/dependent_launch.cuh"
#include "cuda/device_cache.cuh"
#include "cuda/fused_forward.cuh"
#include "cuda/hard_finish.h"
#include "mas.h"

using namespace mas_cuda;

namespace {

/* The workspace: the coefficients [model batch][2J+1][T] (rows
 * fused_coef_row(T) apart) from the aligned start, then hard MAS's regions
 * (hard_common.cuh, with the fused sweep's shorter rings): what its
 * backtrack reads (hard_finish.h) and the rings, flags and ticket.
 * hard.total keeps the 256 bytes that align the caller's pointer. */
struct FusedLayout {
    size_t hard_at;
    HardLayout hard;
    size_t total;
};

/* 0 when the call is rejected; SIZE_MAX for shapes beyond 2^52 cells. */
size_t fused_layout(const mas_gauss_align_args *args, FusedLayout *L, mas_gauss_align_shape *sh) {
    if (mas_gauss_align_check_call(args, sh) != MAS_OK) return 0;
    const int64_t B = sh->batch, T = sh->tokens, S = sh->frames, P = 2 * sh->dim + 1;
    if (mas_shape_too_big(B, T, S) || mas_shape_too_big(B, T + S, P)) return SIZE_MAX;
    const mas_dtype acc = (mas_dtype)mas_accum_dtype(args->x.dtype);
    L->hard_at = align256((size_t)sh->model_batch * (size_t)P * (size_t)fused_coef_row(T) *
                          mas_dtype_size(acc));
    L->hard = hard_layout(B, T, S, acc, kFgRingFrames);
    L->total = L->hard_at + L->hard.total;
    return L->total;
}

/* Rows of e and coefficients a slice: all 2J (TC: 2J rounded up to
 * whole eight-row groups) when two blocks of the kernel fit a
 * multiprocessor with them, else balanced slices that do (TC: of whole
 * groups); never more than a block may have (smem_optin less the launch's
 * 1 KB margin: sm_86 / sm_89 allow 99 KB, where TC's padded rows at J = 80
 * would not fit whole). */
void plan_slices(int64_t J, int es, bool tc, size_t smem_optin, int *rows, int *slices) {
    size_t budget = 110 * 1024; /* two blocks in the 228 KB of sm_90 */
    if (smem_optin > 1024 && smem_optin - 1024 < budget) budget = smem_optin - 1024;
    const size_t fixed = fused_smem(0, es, false, 2, tc);
    const size_t per_row = fused_smem(1, es, false, 2, tc) - fixed;
    const int64_t kr = tc ? tc_rows(J) : 2 * J, unit = tc ? 8 : 1;
    const int64_t fit = (int64_t)((budget - fixed) / per_row) / unit * unit;
    const int64_t cap = fit < unit ? unit : (fit < kr ? fit : kr);
    const int64_t n = (kr + cap - 1) / cap;
    *slices = (int)n;
    *rows = (int)(((kr + n - 1) / n + unit - 1) / unit * unit);
}

/* The most dynamic shared memory a kernel of this file takes (the launchers'
 * fits(): the device's opt-in limit less room for static shared variables);
 * the 8 KB slot occupancy answers are cached per; and the shared memory a
 * kernel's occupancy query asks for, for smem bytes: the slot's top, or the
 * most that fits in the slot that crosses it. One value for every
 * size of a slot, as cached_occupancy needs: its query raises the kernel's
 * limit, and a later size of the slot, answered from the cache, must not
 * be above that limit (asked size by size, a larger size launched above
 * it: MAS_ERR_CUDA, seen in session 41's lab). Never fewer bytes than
 * smem. */
size_t smem_most(const DeviceInfo &dev) { return (size_t)dev.smem_optin - 1024; }
int occupancy_slot(size_t smem) { return (int)((smem + 8191) / 8192); }
size_t occupancy_asked(const DeviceInfo &dev, size_t smem) {
    const size_t top = (size_t)occupancy_slot(smem) * 8192, most = smem_most(dev);
    return smem > most ? smem : top < most ? top : most;
}

/* The kernel's blocks a multiprocessor (never more than fit with the
 * actual size); 0 when it does not fit. */
template <typename TX, typename TA, int K, bool SPLIT, bool TC, bool AH = false>
int fused_per_sm(const DeviceInfo &dev, size_t smem) {
    static KernelCache cache;
    const int slot = occupancy_slot(smem);
    const size_t asked = occupancy_asked(dev, smem);
    int per_sm = 0;
    if (cached_occupancy(cache, fused_forward<TX, TA, K, SPLIT, TC, AH>, dev, slot,
                         fused_threads(SPLIT, TC), asked, &per_sm) != MAS_OK)
        return 0;
    return per_sm;
}

template <typename TX, typename TA, int K, bool SPLIT, bool TC, bool AH = false>
mas_status launch_fused_as(FusedArgs fa, int64_t B, int64_t per_launch, size_t smem,
                           const DeviceInfo &dev, cudaStream_t s) {
    for (int64_t first = 0; first < B; first += per_launch) {
        const int64_t n = B - first < per_launch ? B - first : per_launch;
        fa.item0 = first;
        fa.ticket0 = (unsigned)(first * fa.slabs);
        if (launch_dependent(dev.cc_major, fused_forward<TX, TA, K, SPLIT, TC, AH>,
                             dim3((unsigned)(n * fa.slabs)), dim3(fused_threads(SPLIT, TC)), smem,
                             s, fa) != cudaSuccess)
            return MAS_ERR_CUDA;
    }
    return MAS_OK;
}

/* Items of at most this many 128-token slabs take the kernel that makes
 * the later slabs' last tiles ahead (launch_fused): measured to gain at 4
 * and 8 (B=32 T=512, B=16 T=1024), not at 32 (B=8 T=4096: session 37's
 * form lost 2.5%; session 39's with an aligned barrier was level, this
 * one was not timed there) */
constexpr int64_t kAheadMaxSlabs = 8;
/* MAS_FUSED_AHEAD_SLABS=n replaces it (lab A/B), read once a process */
int64_t ahead_max_slabs() {
    static const int64_t n = [] {
        const char *e = getenv("MAS_FUSED_AHEAD_SLABS");
        long long v = 0;
        return e && sscanf(e, "%lld", &v) == 1 && v >= 0 ? (int64_t)v : kAheadMaxSlabs;
    }();
    return n;
}

/* Which kernel: with all 2J rows in one slice,
 *  - blocks of 64-token slabs no more than the multiprocessors (short
 *    items): each block has a multiprocessor to itself, and a sweep warp of
 *    its own overlaps the sweep with the next tile's cells (T=150 S=800
 *    B=32: 96 blocks on an H100's 132);
 *  - more (long items or large batches), float accumulation, and enough
 *    128-token slabs for 0.6 of the multiprocessors: 128-token slabs (4
 *    tokens a sweep lane), one block a multiprocessor with a sweep warp of
 *    its own. An item still spans its frames (a slab starts when the one
 *    before has swept its first tile's frames), but a tile costs less: one
 *    sweep warp for 128 tokens, half the hand-overs, and 4 x 8 cells a
 *    compute thread;
 *  - otherwise 64-token slabs, two blocks a multiprocessor, the sweep after
 *    the products.
 * The two forms with a sweep warp of its own take eleven warps in the
 * tensor-core precision (TC), the sweep warp alone on its scheduler
 * (fused_forward.cuh). *split_blocks: the blocks of a form with a sweep
 * warp of its own where it took one launch, else 0; *wide: that form has
 * 128-token slabs. */
template <typename TX, typename TA, bool TC>
mas_status launch_fused(FusedArgs fa, int64_t B, const DeviceInfo &dev, cudaStream_t s,
                        int64_t *split_blocks, bool *wide) {
    const int es = (int)sizeof(TA);
    *split_blocks = 0;
    *wide = false;
    const auto fits = [&](size_t smem) { return smem <= smem_most(dev); };
    fa.stage = 0;
    fa.vec = 0;
    if (fa.slices == 1) {
        /* the next tile's x staged in shared memory where it fits next to
         * the rest (cp.async copies 4 or 8 bytes an element; 16 bytes, four
         * frames, for float frames contiguous in 16-byte aligned rows) */
        const size_t stage = sizeof(TX) >= 4 ? fused_stage_smem(fa.J, (int)sizeof(TX)) : 0;
        const bool vec = sizeof(TX) == 4 && stage_x16_ok(fa.x, fa.xs0, fa.xs1, fa.xs2);
        const auto staged = [&](size_t smem, FusedArgs &f) {
            f.stage = stage > 0 && fits(smem + stage);
            f.vec = f.stage && vec;
            return f.stage ? smem + stage : smem;
        };
        FusedArgs f2 = fa;
        const size_t smem_split = staged(fused_smem(fa.rows, es, true, 2, TC), f2);
        if (B * fa.slabs <= dev.sms && fits(smem_split) &&
            fused_per_sm<TX, TA, 2, true, TC>(dev, smem_split) >= 1) {
            *split_blocks = B * fa.slabs;
            return launch_fused_as<TX, TA, 2, true, TC>(f2, B, B, smem_split, dev, s);
        }
        if constexpr (sizeof(TA) == 4) {
            FusedArgs f4 = fa;
            const size_t smem4 = staged(fused_smem(fa.rows, es, true, 4, TC), f4);
            const int per_sm4 = fits(smem4) ? fused_per_sm<TX, TA, 4, true, TC>(dev, smem4) : 0;
            const int64_t slabs4 = (fa.T + fused_tokens(4) - 1) / fused_tokens(4);
            /* with fewer 128-token slabs than 0.6 of the multiprocessors the
             * 64-token kernel's twice as many blocks win (H100: B=17 T=512
             * S=2048, 68 slabs: 441 against 454 us; 96 slabs at B=24: 491
             * against 474) */
            if (per_sm4 >= 1 && slabs4 <= (int64_t)per_sm4 * dev.sms &&
                5 * B * slabs4 >= 3 * (int64_t)dev.sms) {
                f4.slabs = (int)slabs4;
                const int64_t per_launch = slabs4 == 1 ? B : (int64_t)per_sm4 * dev.sms / slabs4;
                if (per_launch >= B) {
                    *split_blocks = B * slabs4;
                    *wide = true;
                }
                /* The last tiles made ahead (fused_forward.cuh's AheadPolicy),
                 * a kernel of its own, for items of a few slabs, where an
                 * item's end is a few slabs' tails (H100, session 39, against
                 * main's kernel in one call: B=32 T=512 S=2048, 4 slabs,
                 * 0.3625-0.3653 -> 0.3442-0.3459 ms; B=16 T=1024 S=4096, 8,
                 * 0.6879-0.6923 -> 0.6683-0.6728; sessions 37-38, while the
                 * kernel's own code still cost 2-3%: T=512 0.3628 -> 0.3553,
                 * T=1024 the same, B=8 T=4096 10.65 -> 10.92). Its
                 * occupancy query also sets its shared memory size, and must
                 * give per_sm4's blocks at least: per_launch counts on them
                 * all being resident (a block waits on the ones before it). */
                if constexpr (!TC)
                    if (slabs4 <= ahead_max_slabs() && fa.ahead.lag16 > 0 &&
                        fused_per_sm<TX, TA, 4, true, TC, true>(dev, smem4) >= per_sm4)
                        return launch_fused_as<TX, TA, 4, true, TC, true>(f4, B, per_launch, smem4,
                                                                          dev, s);
                return launch_fused_as<TX, TA, 4, true, TC>(f4, B, per_launch, smem4, dev, s);
            }
        }
    }
    const size_t smem = fused_smem(fa.rows, es, false, 2, TC);
    if (!fits(smem)) return MAS_ERR_CUDA;
    const int per_sm = fused_per_sm<TX, TA, 2, false, TC>(dev, smem);
    if (per_sm < 1) return MAS_ERR_CUDA;
    const int64_t resident = (int64_t)per_sm * dev.sms;
    if (fa.slabs > resident) return MAS_ERR_BAD_ARGUMENT;
    const int64_t per_launch = fa.slabs == 1 ? B : resident / fa.slabs;
    return launch_fused_as<TX, TA, 2, false, TC>(fa, B, per_launch, smem, dev, s);
}

/* How many of their last tiles the later slabs make ahead (AheadPolicy,
 * fused_forward.cuh), for items of at most kAheadMaxSlabs 128-token slabs
 * (launch_fused). MAS_FUSED_AHEAD="lag16 base16 cost16" replaces it (lab
 * A/B; "0 0 0": none, and main's kernel), read once a process. */
AheadPolicy read_ahead_policy() {
    AheadPolicy p{36, 21, 17};
    if (const char *e = getenv("MAS_FUSED_AHEAD")) {
        AheadPolicy q;
        if (sscanf(e, "%d %d %d", &q.lag16, &q.base16, &q.cost16) == 3) p = q;
    }
    return p;
}
AheadPolicy ahead_policy() {
    static const AheadPolicy p = read_ahead_policy();
    return p;
}

} // namespace

extern "C" size_t mas_align_gaussian_cuda_workspace_size(const mas_gauss_align_args *args) {
    FusedLayout L;
    mas_gauss_align_shape sh;
    return fused_layout(args, &L, &sh);
}

extern "C" mas_status mas_align_gaussian_cuda(const mas_gauss_align_args *args,
                                              const mas_hard_outputs *out, void *workspace,
                                              size_t workspace_size, void *stream,
                                              uint64_t *error_word) {
    mas_gauss_align_shape sh;
    mas_status st = mas_gauss_align_check_call(args, &sh);
    if (st != MAS_OK) return st;
    const int64_t B = sh.batch, T = sh.tokens, S = sh.frames, J = sh.dim;
    /* the virtual [B, T, S] matrix, for the output checks */
    const mas_tensor3 value = make_tensor3(args->x.data, args->x.dtype, B, T, S, 0, 0, 0);
    st = mas_hard_check_call(&value, args->x_len, args->y_len, out);
    if (st != MAS_OK) return st;
    if (!workspace) return MAS_ERR_NULL_POINTER;
    FusedLayout L;
    const size_t need = fused_layout(args, &L, &sh);
    if (need == SIZE_MAX || workspace_size < need) return MAS_ERR_WORKSPACE_TOO_SMALL;
    if (T > INT32_MAX / 2 || J > (1 << 20)) return MAS_ERR_BAD_SHAPE;
    DeviceInfo dev;
    if ((st = current_device(&dev)) != MAS_OK) return st;
    cudaStream_t s = (cudaStream_t)stream;
    unsigned char *ws = align_workspace(workspace);
    const int32_t acc = mas_accum_dtype(args->x.dtype);
    const int es = acc == MAS_FLOAT64 ? 8 : 4;

    const int64_t row = fused_coef_row(T);
    const mas_tensor3 coef =
        make_tensor3(ws, acc, sh.model_batch, 2 * J + 1, T, (2 * J + 1) * row, row, 1);
    FusedArgs fa;
    fa.x = args->x.data;
    fa.xs0 = view_stride(&args->x, 0);
    fa.xs1 = view_stride(&args->x, 1);
    fa.xs2 = view_stride(&args->x, 2);
    fa.coef = coef.data;
    fa.cs0 = sh.model_batch == 1 ? 0 : coef.stride[0];
    fa.cs1 = row;
    fa.T = T;
    fa.S = S;
    fa.J = J;
    fa.x_len = args->x_len;
    fa.y_len = args->y_len;
    const HardLayout &H = L.hard;
    unsigned char *hw = ws + L.hard_at;
    fa.bits = (uint32_t *)(hw + H.bits);
    fa.groups = H.groups;
    fa.ring = hw + H.ring;
    fa.max_slabs = H.max_slabs;
    fa.flags = (int *)(hw + H.flags);
    fa.ticket = (unsigned *)(hw + H.flags) + (size_t)B * H.max_slabs * kFlagStride;
    fa.group_flag = (int *)(hw + H.group_flag);
    fa.final_score = (double *)(hw + H.final_score);
    fa.slabs = (int)H.max_slabs;
    /* tensor cores from sm_80 on, float32 arithmetic; else the default
     * (as mas_loglik_cuda) */
    const bool tc = args->precision != MAS_PRECISION_DEFAULT && acc == MAS_FLOAT32 &&
                    dev.cc_major >= 8;
    plan_slices(J, es, tc, (size_t)dev.smem_optin, &fa.rows, &fa.slices);
    fa.item0 = 0;
    fa.ticket0 = 0;
    fa.early_dependents = backtrack_block_fits(H.groups, S, dev.smem_optin, dev.cc_major);
    fa.ahead = ahead_policy();
    /* In a loop of calls the next call's coefficient kernel is placed once
     * this forward's work is done and makes its first pass during this
     * backtrack's last walks, storing after their end (early_next, and the
     * coefficient kernel's hold). Same-machine A/B, H100, session 29, wall
     * ms a call: B=32 T=150 S=800 0.1037-0.1046 -> 0.1023-0.1029 in
     * float32, 0.0712-0.0721 -> 0.0699-0.0704 in TF32; B=32 T=512 S=2048
     * TF32 0.2287-0.2294 -> 0.2267-0.2271, B=16 T=1024 S=4096 TF32
     * 0.4079-0.4094 -> 0.4041-0.4054. Not for 128-token slabs in float32
     * (their CUDA-core cells), which it made slower (T=512 0.3561-0.3602 ->
     * 0.3612-0.3673). Chosen before the forward's form is (it follows the
     * coefficients): float32 coefficients, and TF32 or 64-token slabs no
     * more than the multiprocessors (launch_fused's first form); either
     * choice is safe after either kind of call. */
    const bool early = acc == MAS_FLOAT32 && (tc || B * fa.slabs <= dev.sms);
    /* the coefficients; the rings, flags and ticket start at 0 when an item
     * spans blocks, zeroed by the same kernel */
    const size_t clear = H.max_slabs > 1 ? H.group_flag - H.ring : 0;
    st = gauss_coef_and_clear(&args->params, &coef, s, error_word, hw + H.ring, clear, early);
    if (st != MAS_OK) return st;
    int64_t split = 0; /* blocks of a kernel with a sweep warp, one launch */
    bool wide = false; /* ... with 128-token slabs */
    switch (args->x.dtype) {
    case MAS_FLOAT32:
        st = tc ? launch_fused<float, float, true>(fa, B, dev, s, &split, &wide)
                : launch_fused<float, float, false>(fa, B, dev, s, &split, &wide);
        break;
    case MAS_FLOAT64: st = launch_fused<double, double, false>(fa, B, dev, s, &split, &wide); break;
    case MAS_FLOAT16:
        st = tc ? launch_fused<__half, float, true>(fa, B, dev, s, &split, &wide)
                : launch_fused<__half, float, false>(fa, B, dev, s, &split, &wide);
        break;
    default:
        st = tc ? launch_fused<__nv_bfloat16, float, true>(fa, B, dev, s, &split, &wide)
                : launch_fused<__nv_bfloat16, float, false>(fa, B, dev, s, &split, &wide);
        break;
    }
    if (st != MAS_OK) return st;

    /* The backtrack streamed (hard_finish.h): its blocks are placed while
     * the forward sweeps, where each item's finds a multiprocessor the
     * forward leaves idle (B=32 T=150 S=800: 96 sweep blocks, 36 idle) or
     * on those its first slabs leave (128-token slabs), the forward lets
     * them be placed at its start, and the slab-done flags were zeroed
     * (clear): an item's words are copied and walked slab by slab while
     * the forward's later slabs still sweep, and only the last slab's
     * walks, the chain and the outputs follow the forward (H200, session
     * 23: 0.0790 -> 0.0758 ms a call in TF32, 0.1129 -> 0.1089 in float32;
     * 128-token slabs, H100, session 27: B=32 T=512 S=2048 0.378-0.383 ->
     * 0.358-0.360, B=16 T=1024 S=4096 0.724-0.729 -> 0.676-0.678) */
    const int *slab_done = nullptr;
    if (backtrack_streams(split, clear > 0, fa.early_dependents, B, dev.sms, wide))
        slab_done = (const int *)(hw + H.flags) + 1;
    return hard_finish(H, hw, B, T, S, args->x_len, args->y_len, acc == MAS_FLOAT64, out, dev, s,
                       error_word, nullptr, slab_done, fused_tokens(wide ? 4 : 2) / 32, early);
}
