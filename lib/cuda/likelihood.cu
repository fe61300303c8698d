/* Likelihoods on CUDA (mas.h section 6): host entry points and the
 * coefficient kernel. The log-likelihood kernels are in loglik_kernel.cuh
 * (any mixture sizes), loglik_uniform.cuh (G Gaussians every state),
 * loglik_items.cuh (one Gaussian a state, default precision) and
 * loglik_items_tc.cuh (one Gaussian a state, tensor cores).
 * Device properties and kernel attributes are read once per device, so a
 * call costs only its checks and its launch; no synchronisation, no
 * allocation (safe under graph capture). */
#include <cuda_runtime.h>

#include <type_traits>

#include "common/checks.h"
#include "common/gauss_coef.h"
#include "cuda/coef_launch.h"
#include "cuda/dependent_launch.cuh"
#include "cuda/device_cache.cuh"
#include "cuda/loglik_kernel.cuh"
#include "cuda/loglik_items.cuh"
#include "cuda/loglik_items_tc.cuh"
#include "cuda/loglik_uniform.cuh"
#include "mas.h"

using namespace mas_cuda;

namespace {

/* ---- coefficients --------------------------------------------------------- */

/* A block holds a tile of G (32 or 16, coef_tile) Gaussians of one item,
 * lane l Gaussian l % G (loads and stores along the Gaussians, contiguous
 * in Glow-TTS's [B, D, T] and in the coefficients' [2J+1, T]), thread t
 * dimensions t / G, t / G + 256 / G, ... (the exps and logs of
 * mas_gauss_coef_dim, independent); the K terms are parked in
 * shared memory and warp 0 adds each Gaussian's in dimension order, as
 * the CPU does, so K keeps its bits. One thread a Gaussian (each thread J
 * exps in one chain, B*T/256 blocks) took 60-95 us at Glow-TTS shapes, a
 * quarter to a third of align_gaussian's kernels (H200, 2026-11-27). A
 * warp's next kCoefAhead dimensions are loaded while this one is computed
 * (kept as loaded until used: a float widened at its load made the load's
 * latency show there), and float32 log-std models (Glow-TTS's) have a
 * kernel of their own, loads typed and the variance branch compiled out:
 * 20 -> 14.7 us at B=32 T=512 D=80, long-scoreboard stalls 5.8 -> 0.9 per
 * issued instruction (ncu, H100, 2026-11-27; with the 2^n of mas_det_exp
 * built from its bits). */
constexpr int kCoefWarps = 8;
constexpr int kCoefPark = 2048; /* K terms a block parks at once: 64 dimensions of 32 Gaussians */
constexpr int kCoefAhead = 2;   /* dimensions a thread has in flight */
/* HOLD: 48 registers; with the held coefficients' shared memory (34 KB)
 * five blocks a multiprocessor, B=32 T=512's 512 blocks in one wave (56,
 * the compiler's own choice, held four) */
constexpr int kCoefBlocksPerSm = 5;

/* element off of a means or spread tensor: FAST, the float32 as it is;
 * else as float64 */
template <bool FAST>
__device__ __forceinline__ typename std::conditional<FAST, float, double>::type
coef_in(const mas_tensor3 &t, int64_t off) {
    if constexpr (FAST) return __ldg((const float *)t.data + off);
    else return load_elem<double>(t.data, t.dtype, off);
}

/* FAST: float32 means and log-std spreads (Glow-TTS's), loaded as such
 * and with the variance branch compiled out. G: Gaussians a tile (32 or
 * 16); thread t holds Gaussian t % G and dimensions t / G, t / G + STEP,
 * ... of each pass. clear[0 .. n_clear) is zeroed too (the fused sweep's
 * rings, flags and ticket, which it reads after its dependent_wait: a
 * memset and its gap less a call). A dependent launch: its launch and
 * block placement overlap the end of the kernel before it in the stream (a
 * user's, or the last call's backtrack; B=32 T=150 S=800, H200, session 22:
 * 0.0817-0.0819 ms a fused TF32 call against 0.0826-0.0829 plainly
 * launched). HOLD (float32 coefficients, fused calls of the forms whose
 * backtrack lets the next kernel be placed early: fused.cu): it waits for
 * that kernel before its first store, not at its top, so that after such a
 * backtrack its first pass's loads and exps run during that call's last
 * walks; its reads before the wait are the means and spreads, which a
 * call's kernels never write (mas.h states the caller's part: the model
 * is not the last call's output). A pass's coefficients are held in shared
 * memory until then (registers would take two waves at B=32 T=512). Not
 * HOLD, it waits at its top: a HOLD kernel took 13.5 us at B=32 T=512
 * against 11.8 where nothing ran before it to overlap (H100, session 29). */
template <typename TC, bool FAST, int G, bool HOLD>
__device__ __forceinline__ void gauss_coef_body(const mas_gauss_params &prm, TC *coef, int64_t c0,
                                                int64_t c1, int64_t c2, uint64_t *error_word,
                                                uint4 *clear, int64_t n_clear) {
    static_assert(G == 16 || G == 32, "a tile's Gaussians divide a warp");
    constexpr int DIMS = kCoefPark / G;      /* dimensions a pass */
    constexpr int STEP = kCoefWarps * 32 / G; /* dimensions the block takes at once */
    static_assert(!HOLD || std::is_same<TC, float>::value,
                  "float64 coefficients held would take static shared memory past 48 KB");
    __shared__ double park[DIMS][G];
    __shared__ TC held[HOLD ? 2 : 1][HOLD ? DIMS : 1][G];
    __shared__ int good[G];
    dependent_trigger(); /* the sweep's blocks may be placed once all of ours run */
    const auto zero_clear = [&]() {
        for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n_clear;
             i += (int64_t)gridDim.x * blockDim.x)
            clear[i] = make_uint4(0u, 0u, 0u, 0u);
    };
    bool waited = !HOLD;
    if constexpr (!HOLD) {
        dependent_wait(); /* the means and spreads, and clear[], may be the last kernel's */
        zero_clear();
    }
    const int64_t B = prm.means.dim[0], M = prm.means.dim[1], J = prm.means.dim[2];
    const int g = threadIdx.x % G, first = threadIdx.x / G; /* the thread's first dimension */
    const bool summer = threadIdx.x < G; /* warp 0's first G lanes: K, in dimension order */
    const int64_t tiles = (M + G - 1) / G; /* of one item */
    const mas_tensor3 &mt = prm.means, &st = prm.spread;
    for (int64_t tile = blockIdx.x; tile < B * tiles; tile += gridDim.x) {
        const int64_t b = tile / tiles, k = tile % tiles * G + g;
        const bool live = k < M;
        TC *out = coef + b * c0 + k * c2;
        if (summer) good[g] = 1;
        double k_sum = 0; /* the summer's */
        for (int64_t j0 = 0; j0 < J; j0 += DIMS) {
            const int nj = J - j0 < DIMS ? (int)(J - j0) : DIMS;
            __syncthreads(); /* good[] is set; the last terms are added */
            /* the next kCoefAhead dimensions' loads in flight while this one's exps run */
            const int64_t mo = b * mt.stride[0] + k * mt.stride[1];
            const int64_t so = b * st.stride[0] + k * st.stride[1];
            /* as loaded: a float converted only where it is used, so that
             * no instruction waits for the load before then */
            using In = typename std::conditional<FAST, float, double>::type;
            In mu_n[kCoefAhead], sp_n[kCoefAhead];
#pragma unroll
            for (int d = 0; d < kCoefAhead; d++) {
                const int qd = first + d * STEP;
                mu_n[d] = qd < nj && live ? coef_in<FAST>(mt, mo + (j0 + qd) * mt.stride[2]) : In(0);
                sp_n[d] = qd < nj && live ? coef_in<FAST>(st, so + (j0 + qd) * st.stride[2]) : In(0);
            }
            for (int q = first; q < nj && live; q += STEP) {
                const int64_t j = j0 + q;
                const In mu_in = mu_n[0], sp_in = sp_n[0];
#pragma unroll
                for (int d = 0; d + 1 < kCoefAhead; d++) {
                    mu_n[d] = mu_n[d + 1];
                    sp_n[d] = sp_n[d + 1];
                }
                const int qn = q + kCoefAhead * STEP;
                if (qn < nj) {
                    mu_n[kCoefAhead - 1] = coef_in<FAST>(mt, mo + (j0 + qn) * mt.stride[2]);
                    sp_n[kCoefAhead - 1] = coef_in<FAST>(st, so + (j0 + qn) * st.stride[2]);
                }
                double a = 0, bb = 0, kt = 0;
                /* FAST: the range cases told apart on the floats, one branch
                 * for five (the same values and verdicts; the kernel is
                 * issue-bound: H200, session 23, 6.7 -> 5.7 us at B=32 T=150) */
                bool ok;
                if constexpr (FAST)
                    ok = mas_gauss_coef_dim_log_std_f32(mu_in, sp_in, &a, &bb, &kt);
                else
                    ok = mas_gauss_coef_dim((double)mu_in, (double)sp_in, prm.spread_kind, &a, &bb,
                                            &kt);
                park[q][g] = kt;
                const TC a_r = (TC)a, b_r = (TC)bb;
                if constexpr (HOLD) {
                    held[0][q][g] = a_r;
                    held[1][q][g] = b_r;
                } else {
                    out[(1 + j) * c1] = a_r;
                    out[(1 + J + j) * c1] = b_r;
                }
                bool stored;
                if constexpr (std::is_same<TC, float>::value)
                    stored = mas_gauss_coef_stored_ok_f32(a_r, b_r);
                else
                    stored = mas_gauss_coef_stored_ok((double)a_r, (double)b_r);
                if (!ok || !stored) good[g] = 0;
            }
            if constexpr (HOLD) {
                if (!waited) { /* block-uniform */
                    dependent_wait();
                    waited = true;
                }
                for (int q = first; q < nj && live; q += STEP) { /* the thread's own */
                    out[(1 + j0 + q) * c1] = held[0][q][g];
                    out[(1 + J + j0 + q) * c1] = held[1][q][g];
                }
            }
            __syncthreads();
            if (summer && live)
                for (int q = 0; q < nj; q++) k_sum = __dadd_rn(k_sum, park[q][g]);
        }
        __syncthreads(); /* every warp's good[] */
        if (summer && live) {
            double log_w = 0;
            if (prm.log_weights.data)
                log_w = load_elem<double>(prm.log_weights.data, prm.log_weights.dtype,
                                          b * prm.log_weights.stride[0] + k * prm.log_weights.stride[2]);
            const TC k_r = (TC)mas_gauss_coef_k(log_w, k_sum);
            out[0] = k_r;
            if (!good[g] || !mas_gauss_log_weight_ok(log_w) ||
                !mas_gauss_coef_k_ok((double)k_r, log_w))
                report_error(error_word, b * M + k, MAS_ERR_BAD_MODEL);
        }
    }
    if constexpr (HOLD) {
        if (!waited) dependent_wait(); /* a block without a pass */
        zero_clear();
    }
}

/* Two kernels, so that the one that waits at its top keeps the compiler's
 * own register count (48 and 56; asked for five blocks a multiprocessor it
 * schedules the code otherwise) */
template <typename TC, bool FAST, int G>
__global__ void __launch_bounds__(kCoefWarps * 32)
    gauss_coef_kernel(mas_gauss_params prm, TC *coef, int64_t c0, int64_t c1, int64_t c2,
                      uint64_t *error_word, uint4 *clear, int64_t n_clear) {
    gauss_coef_body<TC, FAST, G, false>(prm, coef, c0, c1, c2, error_word, clear, n_clear);
}
template <bool FAST, int G>
__global__ void __launch_bounds__(kCoefWarps * 32, kCoefBlocksPerSm)
    gauss_coef_hold_kernel(mas_gauss_params prm, float *coef, int64_t c0, int64_t c1, int64_t c2,
                           uint64_t *error_word, uint4 *clear, int64_t n_clear) {
    gauss_coef_body<float, FAST, G, true>(prm, coef, c0, c1, c2, error_word, clear, n_clear);
}

template <typename TC, bool HOLD>
void launch_coef(const mas_gauss_params &prm, const mas_tensor3 &coef, const DeviceInfo &dev,
                 cudaStream_t s, uint64_t *error_word, void *clear, size_t clear_bytes) {
    const bool fast = prm.means.dtype == MAS_FLOAT32 && prm.spread.dtype == MAS_FLOAT32 &&
                      prm.spread_kind == MAS_SPREAD_LOG_STD;
    const int64_t items = prm.means.dim[0], M = prm.means.dim[1];
    const int G = coef_tile(items, M, dev.sms);
    const int64_t tiles = items * ((M + G - 1) / G), most = (int64_t)dev.sms * 16;
    const unsigned blocks = (unsigned)(tiles < most ? tiles : most);
    void (*kernel)(mas_gauss_params, TC *, int64_t, int64_t, int64_t, uint64_t *, uint4 *, int64_t);
    if constexpr (HOLD)
        kernel = fast ? (G == 16 ? gauss_coef_hold_kernel<true, 16> : gauss_coef_hold_kernel<true, 32>)
                      : (G == 16 ? gauss_coef_hold_kernel<false, 16> : gauss_coef_hold_kernel<false, 32>);
    else
        kernel = fast ? (G == 16 ? gauss_coef_kernel<TC, true, 16> : gauss_coef_kernel<TC, true, 32>)
                      : (G == 16 ? gauss_coef_kernel<TC, false, 16> : gauss_coef_kernel<TC, false, 32>);
    launch_dependent(dev.cc_major, kernel, dim3(blocks), dim3(kCoefWarps * 32), 0, s, prm,
                     (TC *)coef.data, coef.stride[0], coef.stride[1], coef.stride[2], error_word,
                     (uint4 *)clear, (int64_t)(clear_bytes / sizeof(uint4)));
}

/* ---- log-likelihoods -------------------------------------------------------- */

template <typename TA, int TF, int KS> size_t loglik_smem(bool mix, bool tc) {
    using G = LLGeom<TA, TF, KS>;
    size_t n = 2 * (size_t)G::KS * (G::FT + G::GC + (tc ? 8 : 0)) + 2 * G::GC +
               (mix ? (size_t)G::FT * (G::GC + 1) : 0);
    return n * sizeof(TA);
}

template <typename TA, typename TX, int TF, int KS, bool MIX, bool TC = false>
mas_status launch_loglik(LLParams p, const DeviceInfo *dev, cudaStream_t stream) {
    using G = LLGeom<TA, TF, KS>;
    auto kernel = loglik_kernel<TA, TX, TF, KS, MIX, TC>;
    const size_t smem = loglik_smem<TA, TF, KS>(MIX, TC);
    if (smem > (size_t)dev->smem_optin) return MAS_ERR_CUDA;
    static KernelCache cache; /* the limit is raised once per device */
    mas_status st = ensure_smem(cache, kernel, *dev, smem);
    if (st != MAS_OK) return st;
    /* ranges of
     * Gaussians of whole chunks, enough units for several waves */
    p.slices = (2 * p.J + G::KS - 1) / G::KS;
    p.ftiles = (p.N + G::FT - 1) / G::FT;
    const int64_t want = (int64_t)dev->sms * 8;
    int64_t granges = (want + p.B * p.ftiles - 1) / (p.B * p.ftiles);
    const int64_t chunks = (p.M + G::GC - 1) / G::GC;
    if (granges > chunks) granges = chunks;
    if (granges < 1) granges = 1;
    p.gu = (chunks + granges - 1) / granges * G::GC;
    p.granges = (p.M + p.gu - 1) / p.gu;
    const int64_t units = p.B * p.granges * p.ftiles;
    int64_t grid = units < (int64_t)1 << 30 ? units : (int64_t)1 << 30;
    kernel<<<(unsigned)grid, kLLThreads, smem, stream>>>(p);
    return cudaGetLastError() == cudaSuccess ? MAS_OK : MAS_ERR_CUDA;
}

/* Units of the uniform-mixture and one-Gaussian kernels: B x ranges x
 * frame tiles of kUniFrames, enough for two blocks on every multiprocessor,
 * each range a multiple of `whole` states. Sets l.ftiles, *ranges and *spr
 * (states a range); returns the grid (one block a unit, at most two a
 * multiprocessor). */
int64_t plan_units(LLParams &l, int64_t whole, const DeviceInfo *dev, int64_t *ranges,
                   int64_t *spr) {
    l.ftiles = (l.N + kUniFrames - 1) / kUniFrames;
    const int64_t slots = 2 * (int64_t)dev->sms;
    int64_t r = (slots + l.B * l.ftiles - 1) / (l.B * l.ftiles);
    if (r > l.n_states) r = l.n_states;
    if (r < 1) r = 1;
    const int64_t s = ((l.n_states + r - 1) / r + whole - 1) / whole * whole;
    *spr = s;
    *ranges = (l.n_states + s - 1) / s;
    const int64_t units = l.B * l.ftiles * *ranges;
    return units < slots ? units : slots;
}

/* The coefficients as the uniform-mixture and one-Gaussian kernels copy
 * them: rows of unit stride, 16-byte aligned (16-byte copies), and a unit's
 * Gaussians within 32-bit offsets. */
bool copies_fit(const LLParams &p) {
    return p.cs2 == 1 && p.cs1 % 4 == 0 && p.cs0 % 4 == 0 && (uintptr_t)p.coef % 16 == 0 &&
           p.J <= 4096 && p.M < ((int64_t)1 << 31);
}

/* Does the uniform-mixture kernel (loglik_uniform.cuh) take this call? A
 * shared model with Gaussians contiguous (rows 16-byte aligned), G
 * Gaussians every state with G a multiple of 8 dividing 128 or a multiple
 * of 128, the log-sum (no best Gaussian), and the shared memory for 2J. */
bool uniform_fits(const LLParams &p, int64_t G, const DeviceInfo *dev, bool tc) {
    if (G < 8 || !p.offsets || p.cs0 != 0 || p.best || p.max_mode || !copies_fit(p)) return false;
    if (!(G % 128 == 0 || (G % 8 == 0 && 128 % G == 0))) return false;
    const int kp = (int)((2 * p.J + 7) / 8 * 8);
    return uni_smem(kp, tc) + 1024 <= (size_t)dev->smem_optin;
}

template <typename TX, int TPS, bool TC>
mas_status launch_uniform_tps(UniParams p, const DeviceInfo *dev, cudaStream_t stream) {
    auto kernel = loglik_uniform<TX, TPS, TC>;
    const size_t smem = uni_smem(p.kp, TC);
    static KernelCache cache;
    mas_status st = ensure_smem(cache, kernel, *dev, smem);
    if (st != MAS_OK) return st;
    /* two blocks a multiprocessor (measured with TC: one block with the
     * next chunk's copy double-buffered was slower, 0.73 against 0.54 ms),
     * one unit each: ranges of whole chunks of states */
    const int64_t grid = plan_units(p.l, p.G < kUniGauss ? kUniGauss / p.G : 1, dev, &p.sranges, &p.spr);
    kernel<<<(unsigned)grid, kUniThreads, smem, stream>>>(p);
    return cudaGetLastError() == cudaSuccess ? MAS_OK : MAS_ERR_CUDA;
}

template <typename TX, bool TC>
mas_status launch_uniform(const LLParams &lp, int64_t G, const DeviceInfo *dev,
                          cudaStream_t stream) {
    UniParams p;
    p.l = lp;
    p.G = G;
    p.kp = (int)((2 * lp.J + 7) / 8 * 8);
    /* tiles of 8 Gaussians a state covers in 64 columns */
    switch (G >= 64 ? 8 : (int)(G / 8)) {
    case 1: return launch_uniform_tps<TX, 1, TC>(p, dev, stream);
    case 2: return launch_uniform_tps<TX, 2, TC>(p, dev, stream);
    case 4: return launch_uniform_tps<TX, 4, TC>(p, dev, stream);
    default: return launch_uniform_tps<TX, 8, TC>(p, dev, stream);
    }
}

/* Does the one-Gaussian-a-state kernel (loglik_items.cuh) take this call?
 * No offsets, no best, copyable coefficients and the shared memory for 2J. */
bool items_fit(const LLParams &p, const DeviceInfo *dev) {
    if (p.offsets || p.best || !copies_fit(p)) return false;
    return items_smem(p.J) + 1024 <= (size_t)dev->smem_optin;
}

template <typename TX, int ROWS>
mas_status launch_items(const LLParams &lp, const DeviceInfo *dev, cudaStream_t stream) {
    ItemsParams p;
    p.l = lp;
    p.kp = items_kp(lp.J);
    auto kernel = loglik_items<TX, ROWS>;
    const size_t smem = items_smem(lp.J);
    static KernelCache cache;
    mas_status st = ensure_smem(cache, kernel, *dev, smem);
    if (st != MAS_OK) return st;
    /* ranges of whole chunks of 128 states: 16-byte aligned copies */
    const int64_t grid = plan_units(p.l, kUniGauss, dev, &p.ranges, &p.spr);
    kernel<<<(unsigned)grid, kUniThreads, smem, stream>>>(p);
    return cudaGetLastError() == cudaSuccess ? MAS_OK : MAS_ERR_CUDA;
}

/* One Gaussian a state on the tensor cores (loglik_items_tc.cuh): units
 * of 64 states x runs of up to 16 tiles of 64 frames, the run length that
 * gives the fewest tiles to the busiest block (the longest run on ties: a
 * unit loads its coefficients once). */
template <typename TX>
mas_status launch_items_tc(const LLParams &lp, const DeviceInfo *dev, cudaStream_t stream) {
    ItemsTcParams p;
    p.l = lp;
    p.kp = tc_rows(lp.J);
    itc_plan_rows(p.kp, lp.J, sizeof(TX) == 4, (size_t)dev->smem_optin, &p.rows, &p.slices,
                  &p.stage);
    p.vec = p.stage && stage_x16_ok(lp.x, lp.xs0, lp.xs1, lp.xs2);
    p.ranges = (lp.n_states + kItcStates - 1) / kItcStates;
    const int64_t ftiles = (lp.N + kItcFrames - 1) / kItcFrames, slots = 2 * (int64_t)dev->sms;
    int64_t best = -1;
    for (int64_t tpr = 16; tpr >= 1; tpr /= 2) {
        const int64_t runs = (ftiles + tpr - 1) / tpr, units = lp.B * p.ranges * runs;
        const int64_t span = (units + slots - 1) / slots * (tpr < ftiles ? tpr : ftiles);
        if (best < 0 || span < best) {
            best = span;
            p.tpr = tpr;
            p.l.ftiles = runs;
        }
    }
    const int64_t units = lp.B * p.ranges * p.l.ftiles;
    if (units == 0) return MAS_OK;
    auto kernel = loglik_items_tc<TX>;
    const size_t smem = itc_smem(p.rows, p.stage ? lp.J : 0);
    static KernelCache cache;
    mas_status st = ensure_smem(cache, kernel, *dev, smem);
    if (st != MAS_OK) return st;
    kernel<<<(unsigned)(units < slots ? units : slots), kItcThreads, smem, stream>>>(p);
    return cudaGetLastError() == cudaSuccess ? MAS_OK : MAS_ERR_CUDA;
}

template <typename TA, typename TX>
mas_status dispatch_loglik(const LLParams &p, const DeviceInfo *dev, cudaStream_t stream,
                           int32_t precision, int64_t mixture_size) {
    constexpr int TF = sizeof(TA) == 4 ? 8 : 4;
    if constexpr (sizeof(TA) == 4) {
        /* tensor cores: TF32 (bf16 runs the TF32 path for now), from sm_80
         * on; older GPUs compute the default precision */
        if (precision != MAS_PRECISION_DEFAULT && dev->cc_major >= 8) {
            /* one Gaussian a state: the cells of the fused alignment's TF32 form */
            if (!p.offsets && !p.best && p.M < ((int64_t)1 << 31) && p.J <= 4096)
                return launch_items_tc<TX>(p, dev, stream);
            if (uniform_fits(p, mixture_size, dev, true))
                return launch_uniform<TX, true>(p, mixture_size, dev, stream);
            return p.offsets ? launch_loglik<TA, TX, TF, 8, true, true>(p, dev, stream)
                             : launch_loglik<TA, TX, TF, 8, false, true>(p, dev, stream);
        }
        if (uniform_fits(p, mixture_size, dev, false))
            return launch_uniform<TX, false>(p, mixture_size, dev, stream);
        if (items_fit(p, dev))
            return items_rows(p.J) == 32 ? launch_items<TX, 32>(p, dev, stream)
                                         : launch_items<TX, 16>(p, dev, stream);
    }
    /* the mixture kernel has no registers to spare for wider slices */
    if (p.offsets) return launch_loglik<TA, TX, TF, 8, true>(p, dev, stream);
    if ((2 * p.J) % 16 == 0) return launch_loglik<TA, TX, TF, 16, false>(p, dev, stream);
    return launch_loglik<TA, TX, TF, 8, false>(p, dev, stream);
}

} // namespace

int mas_cuda::coef_tile(int64_t items, int64_t M, int sms) {
    const int64_t t32 = items * ((M + 31) / 32), t16 = items * ((M + 15) / 16);
    const int64_t per32 = (t32 + sms - 1) / sms * 32, per16 = (t16 + sms - 1) / sms * 16;
    return per16 * 6 < per32 * 5 ? 16 : 32;
}

mas_status mas_cuda::gauss_coef_and_clear(const mas_gauss_params *params, const mas_tensor3 *coef,
                                           cudaStream_t s, uint64_t *error_word, void *clear,
                                           size_t clear_bytes, bool hold) {
    mas_status st = mas_gauss_coef_check_call(params, coef);
    if (st != MAS_OK) return st;
    DeviceInfo dev;
    if ((st = current_device(&dev)) != MAS_OK) return st;
    if (coef->dtype != MAS_FLOAT32)
        launch_coef<double, false>(*params, *coef, dev, s, error_word, clear, clear_bytes);
    else if (hold)
        launch_coef<float, true>(*params, *coef, dev, s, error_word, clear, clear_bytes);
    else
        launch_coef<float, false>(*params, *coef, dev, s, error_word, clear, clear_bytes);
    return cudaGetLastError() == cudaSuccess ? MAS_OK : MAS_ERR_CUDA;
}

extern "C" mas_status mas_gauss_coef_cuda(const mas_gauss_params *params,
                                          const mas_tensor3 *coef, void *stream,
                                          uint64_t *error_word) {
    return gauss_coef_and_clear(params, coef, (cudaStream_t)stream, error_word, nullptr, 0, false);
}

extern "C" size_t mas_loglik_cuda_workspace_size(const mas_loglik_args *args) {
    (void)args;
    return 0; /* no scratch memory: the per-Gaussian scores stay on chip */
}

extern "C" mas_status mas_loglik_cuda(const mas_loglik_args *args, void *workspace,
                                      size_t workspace_size, void *stream,
                                      uint64_t *error_word) {
    (void)workspace;
    (void)workspace_size;
    mas_status st = mas_loglik_check_call(args);
    if (st != MAS_OK) return st;
    DeviceInfo dev;
    if ((st = current_device(&dev)) != MAS_OK) return st;
    LLParams p = {};
    p.x = args->x.data;
    p.x_dtype = args->x.dtype;
    p.xs0 = args->x.stride[0];
    p.xs1 = args->x.stride[1];
    p.xs2 = args->x.stride[2];
    p.B = args->x.dim[0];
    p.N = args->x.dim[1];
    p.J = args->x.dim[2];
    p.M = args->coef.dim[2];
    p.n_states = args->n_states;
    p.coef = args->coef.data;
    p.cs0 = args->coef.dim[0] == 1 ? 0 : args->coef.stride[0];
    p.cs1 = args->coef.stride[1];
    p.cs2 = args->coef.stride[2];
    p.offsets = args->offsets;
    p.uniform = args->mixture_size;
    p.n_len = args->n_len;
    p.s_len = args->s_len;
    p.out = args->out.data;
    p.os0 = args->out.stride[0];
    p.os1 = args->out.stride[1];
    p.os2 = args->out.stride[2];
    p.best = (int32_t *)args->best.data;
    p.bs0 = args->best.stride[0];
    p.bs1 = args->best.stride[1];
    p.bs2 = args->best.stride[2];
    p.max_mode = (args->flags & MAS_LOGLIK_MAX) != 0;
    p.error_word = error_word;
    cudaStream_t s = (cudaStream_t)stream;
    const int32_t pr = args->precision;
    const int64_t g = args->mixture_size;
    switch (args->x.dtype) {
    case MAS_FLOAT64: return dispatch_loglik<double, double>(p, &dev, s, pr, g);
    case MAS_FLOAT16: return dispatch_loglik<float, __half>(p, &dev, s, pr, g);
    case MAS_BFLOAT16: return dispatch_loglik<float, __nv_bfloat16>(p, &dev, s, pr, g);
    default: return dispatch_loglik<float, float>(p, &dev, s, pr, g);
    }
}
