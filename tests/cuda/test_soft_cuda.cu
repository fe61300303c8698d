/* GPU test of the soft-alignment ops (forward-sum with posterior, one-to-many
 * and many-to-many monotonic attention, forward and backward).
 *
 * Every GPU result is compared with a float64 scalar reference written here
 * from the formulas of mas.h; the references themselves are checked against
 * brute-force path enumeration and central finite differences on tiny sizes,
 * and the GPU against the CPU backend of the library as a second opinion.
 * Outputs are poisoned with NaN before each call, so an unwritten element
 * fails. Random cases print the seed: `test_soft_cuda SEED` replays them.
 * `test_soft_cuda SEED small` skips the cases of 8192 and more states or
 * steps (compute-sanitizer); segments (items longer than one block) are also
 * run at small sizes through an internal hook. */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <vector>

#include "mas.h"
#include "test_common.h"

/* States per block before items run in segments (lib/cuda/soft_sweep.cuh);
 * 0: the library's default. An internal hook, set here to run the segment
 * path at small sizes. */
extern "C" int32_t mas_soft_cuda_segment_states_;
/* The forward sweep in the max-plus semiring (lib/cuda/soft_forward_sum.cu). */
extern "C" int32_t mas_soft_cuda_max_plus_;

/* ---- checks and randomness ------------------------------------------------ */

#include "cuda_check.h"

/* splitmix64 on test_common.h's g_rng */
static uint64_t rng_next(void) {
    g_rng += 0x9e3779b97f4a7c15ull;
    uint64_t z = g_rng;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static double rng_unit(void) { return (double)(rng_next() >> 11) * (1.0 / 9007199254740992.0); }
static int64_t rng_int(int64_t lo, int64_t hi) {
    return lo + (int64_t)(rng_next() % (uint64_t)(hi - lo + 1));
}
static double rng_normal(void) {
    double u = rng_unit() + 1e-300, v = rng_unit();
    return sqrt(-2 * log(u)) * cos(6.283185307179586 * v);
}

static const double NEG_INF = -INFINITY;

static double lse(double a, double b) {
    double hi = a > b ? a : b, lo = a > b ? b : a;
    if (hi == NEG_INF) return hi;
    return hi + log1p(exp(lo - hi));
}
static double log_sig(double x) { return (x < 0 ? x : 0) - log1p(exp(-fabs(x))); }

/* ---- host tensors in any float dtype --------------------------------------- */

static size_t dsize(int32_t d) { return d == MAS_FLOAT64 ? 8 : d == MAS_FLOAT32 ? 4 : 2; }
static const char *dname(int32_t d) {
    return d == MAS_FLOAT64 ? "f64" : d == MAS_FLOAT32 ? "f32" : d == MAS_FLOAT16 ? "f16" : "bf16";
}

/* A [B,D1,D2] tensor laid out as "b12" (D2 contiguous) or "b21" (D1
 * contiguous), stored in a dtype; values() gives what the library sees. */
struct HostT {
    int32_t dtype;
    int64_t B, D1, D2;
    bool d1_inner;
    std::vector<unsigned char> bytes;
    int64_t stride(int k) const {
        if (k == 0) return D1 * D2;
        if (k == 1) return d1_inner ? 1 : D2;
        return d1_inner ? D1 : 1;
    }
    int64_t off(int64_t b, int64_t i, int64_t j) const {
        return b * stride(0) + i * stride(1) + j * stride(2);
    }
    void init(int32_t dt, int64_t b, int64_t d1, int64_t d2, bool inner) {
        dtype = dt;
        B = b;
        D1 = d1;
        D2 = d2;
        d1_inner = inner;
        bytes.assign((size_t)(B * D1 * D2) * dsize(dt), 0);
    }
    void set(int64_t b, int64_t i, int64_t j, double x) {
        int64_t o = off(b, i, j);
        switch (dtype) {
        case MAS_FLOAT32: ((float *)bytes.data())[o] = (float)x; break;
        case MAS_FLOAT64: ((double *)bytes.data())[o] = x; break;
        case MAS_FLOAT16: ((__half *)bytes.data())[o] = __float2half((float)x); break;
        default: ((__nv_bfloat16 *)bytes.data())[o] = __float2bfloat16((float)x); break;
        }
    }
    double get(int64_t b, int64_t i, int64_t j) const {
        int64_t o = off(b, i, j);
        switch (dtype) {
        case MAS_FLOAT32: return ((const float *)bytes.data())[o];
        case MAS_FLOAT64: return ((const double *)bytes.data())[o];
        case MAS_FLOAT16: return __half2float(((const __half *)bytes.data())[o]);
        default: return __bfloat162float(((const __nv_bfloat16 *)bytes.data())[o]);
        }
    }
    mas_tensor3 view(void *data) const {
        mas_tensor3 t;
        memset(&t, 0, sizeof t);
        t.data = data;
        t.dtype = dtype;
        t.dim[0] = B;
        t.dim[1] = D1;
        t.dim[2] = D2;
        for (int k = 0; k < 3; k++) t.stride[k] = stride(k);
        return t;
    }
};

struct Dev {
    void *p = nullptr;
    size_t n = 0;
    explicit Dev(size_t bytes) : n(bytes) { CUDA_OK(cudaMalloc(&p, bytes ? bytes : 1)); }
    ~Dev() { cudaFree(p); }
    void up(const void *src) { CUDA_OK(cudaMemcpy(p, src, n, cudaMemcpyHostToDevice)); }
    void down(void *dst) const { CUDA_OK(cudaMemcpy(dst, p, n, cudaMemcpyDeviceToHost)); }
    void poison() { CUDA_OK(cudaMemset(p, 0xff, n)); } /* all-ones bits: NaN in any float */
};

static HostT download(const HostT &like, const Dev &d) {
    HostT h = like;
    d.down(h.bytes.data());
    return h;
}

static uint64_t read_error(Dev &word) {
    uint64_t w = 0;
    CUDA_OK(cudaDeviceSynchronize());
    word.down(&w);
    return w;
}

/* Relative closeness with an absolute floor; -inf must match -inf. */
static bool close(double got, double want, double rtol, double atol) {
    if (want == NEG_INF || got == NEG_INF) return got == want;
    if (got != got) return false;
    return fabs(got - want) <= atol + rtol * fabs(want);
}

/* ---- references ------------------------------------------------------------ */

/* Forward-sum of one item (v[i*Y + j], i < X, j < Y): log_z and gamma. Only
 * cells inside the band are read. */
static double ref_forward_sum(const std::vector<double> &v, int64_t X, int64_t Y,
                              std::vector<double> *gamma) {
    std::vector<double> a((size_t)(X * Y), NEG_INF), e((size_t)(X * Y), NEG_INF);
    auto inb = [&](int64_t i, int64_t j) { return i <= j && i >= j - (Y - X); };
    for (int64_t j = 0; j < Y; j++)
        for (int64_t i = 0; i < X; i++) {
            if (!inb(i, j)) continue;
            double prev = j == 0 ? (i == 0 ? 0.0 : NEG_INF)
                                 : lse(a[i * Y + j - 1], i > 0 ? a[(i - 1) * Y + j - 1] : NEG_INF);
            a[i * Y + j] = prev + v[i * Y + j];
            if (prev == NEG_INF) a[i * Y + j] = NEG_INF;
        }
    for (int64_t j = Y - 1; j >= 0; j--)
        for (int64_t i = X - 1; i >= 0; i--) {
            if (!inb(i, j)) continue;
            double next = j == Y - 1 ? (i == X - 1 ? 0.0 : NEG_INF)
                                     : lse(e[i * Y + j + 1], i + 1 < X ? e[(i + 1) * Y + j + 1] : NEG_INF);
            e[i * Y + j] = next == NEG_INF ? NEG_INF : next + v[i * Y + j];
        }
    double lz = a[(X - 1) * Y + Y - 1];
    if (gamma) {
        gamma->assign((size_t)(X * Y), 0.0);
        for (int64_t k = 0; k < X * Y; k++)
            if (a[k] != NEG_INF && e[k] != NEG_INF) (*gamma)[k] = exp(a[k] + e[k] - v[k] - lz);
    }
    return lz;
}

/* log phi of one item (x[i*m + j]) for either kind. */
static void ref_attention(int kind, const std::vector<double> &x, int64_t n, int64_t m,
                          std::vector<double> &lp) {
    lp.assign((size_t)(n * m), NEG_INF);
    lp[0] = 0;
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < m; j++) {
            if (i == 0 && j == 0) continue;
            double a = NEG_INF, b = NEG_INF;
            if (kind == MAS_ATTENTION_ONE_TO_MANY) {
                if (i == 0) continue;
                a = lp[(i - 1) * m + j] + log_sig(x[(i - 1) * m + j]);
                if (j > 0) b = lp[(i - 1) * m + j - 1] + log_sig(-x[(i - 1) * m + j - 1]);
            } else {
                if (j > 0) a = lp[i * m + j - 1] + log_sig(x[i * m + j - 1]);
                if (i > 0) b = lp[(i - 1) * m + j] + log_sig(-x[(i - 1) * m + j]);
            }
            lp[i * m + j] = lse(a, b);
        }
}

/* d/dx of sum(g * log phi) by reverse mode, a plain loop over cells in
 * reverse order (checked against finite differences below). */
static void ref_attention_grad(int kind, const std::vector<double> &x, const std::vector<double> &g,
                               int64_t n, int64_t m, std::vector<double> &dx) {
    std::vector<double> lp, ab((size_t)(n * m), 0.0);
    ref_attention(kind, x, n, m, lp);
    dx.assign((size_t)(n * m), 0.0);
    for (int64_t i = n - 1; i >= 0; i--)
        for (int64_t j = m - 1; j >= 0; j--) {
            int64_t c = i * m + j;
            if (lp[c] == NEG_INF) continue;
            double ws = log_sig(x[c]), wm = log_sig(-x[c]);
            /* successors: the stay edge and the move edge out of (i,j) */
            int64_t si, sj, mi, mj;
            if (kind == MAS_ATTENTION_ONE_TO_MANY) {
                si = i + 1; sj = j; mi = i + 1; mj = j + 1;
            } else {
                si = i; sj = j + 1; mi = i + 1; mj = j;
            }
            double as = 0, am = 0;
            if (si < n && sj < m && lp[si * m + sj] != NEG_INF)
                as = ab[si * m + sj] * exp(lp[c] + ws - lp[si * m + sj]);
            if (mi < n && mj < m && lp[mi * m + mj] != NEG_INF)
                am = ab[mi * m + mj] * exp(lp[c] + wm - lp[mi * m + mj]);
            ab[c] = g[c] + as + am;
            dx[c] = as * exp(wm) - am * exp(ws);
        }
}

/* Brute force for many-to-many: every right/down path from (0,0), its
 * probability added to each cell it visits. */
static void brute_m2m(const std::vector<double> &x, int64_t n, int64_t m, int64_t i, int64_t j,
                      double p, std::vector<double> &phi) {
    phi[i * m + j] += p;
    double r = 1 / (1 + exp(-x[i * m + j]));
    if (j + 1 < m) brute_m2m(x, n, m, i, j + 1, p * r, phi);
    if (i + 1 < n) brute_m2m(x, n, m, i + 1, j, p * (1 - r), phi);
}
/* ... and for one-to-many: each step advances i; the path stays or moves. */
static void brute_o2m(const std::vector<double> &x, int64_t n, int64_t m, int64_t i, int64_t j,
                      double p, std::vector<double> &phi) {
    phi[i * m + j] += p;
    if (i + 1 >= n) return;
    double r = 1 / (1 + exp(-x[i * m + j]));
    brute_o2m(x, n, m, i + 1, j, p * r, phi);
    if (j + 1 < m) brute_o2m(x, n, m, i + 1, j + 1, p * (1 - r), phi);
}
/* Forward-sum by enumerating every monotonic path (tiny sizes). */
static void brute_fs(const std::vector<double> &v, int64_t X, int64_t Y, int64_t i, int64_t j,
                     double s, std::vector<int64_t> &path, std::vector<double> &acc, double &z) {
    s += v[i * Y + j];
    path.push_back(i * Y + j);
    if (j == Y - 1) {
        if (i == X - 1) {
            double w = exp(s);
            z += w;
            for (int64_t c : path) acc[c] += w;
        }
    } else {
        brute_fs(v, X, Y, i, j + 1, s, path, acc, z);
        if (i + 1 < X) brute_fs(v, X, Y, i + 1, j + 1, s, path, acc, z);
    }
    path.pop_back();
}

static void check_references(void) {
    snprintf(g_case, sizeof g_case, "references vs brute force and finite differences");
    for (int rep = 0; rep < 20; rep++) {
        int64_t n = rng_int(1, 5), m = rng_int(1, 5);
        std::vector<double> x((size_t)(n * m)), g((size_t)(n * m)), lp, dx, phi;
        for (auto &e : x) e = 2 * rng_normal();
        for (auto &e : g) e = rng_normal();
        for (int kind = 0; kind < 2; kind++) {
            ref_attention(kind, x, n, m, lp);
            phi.assign((size_t)(n * m), 0.0);
            if (kind == 0) brute_o2m(x, n, m, 0, 0, 1.0, phi);
            else brute_m2m(x, n, m, 0, 0, 1.0, phi);
            for (int64_t c = 0; c < n * m; c++)
                CHECK(phi[c] == 0 ? lp[c] == NEG_INF : close(exp(lp[c]), phi[c], 1e-12, 1e-15),
                      "kind %d cell %lld: %g vs brute %g", kind, (long long)c, exp(lp[c]), phi[c]);
            ref_attention_grad(kind, x, g, n, m, dx);
            for (int64_t c = 0; c < n * m; c++) {
                auto loss = [&](double h) {
                    std::vector<double> y = x, l;
                    y[c] += h;
                    ref_attention(kind, y, n, m, l);
                    double s = 0;
                    for (int64_t k = 0; k < n * m; k++)
                        if (l[k] != NEG_INF) s += g[k] * l[k];
                    return s;
                };
                double h = 1e-5, fd = (loss(h) - loss(-h)) / (2 * h);
                CHECK(close(dx[c], fd, 1e-5, 1e-7), "kind %d grad cell %lld: %g vs fd %g", kind,
                      (long long)c, dx[c], fd);
            }
        }
        int64_t X = rng_int(1, 5), Y = rng_int(X, 8);
        std::vector<double> v((size_t)(X * Y)), gam, acc((size_t)(X * Y), 0.0);
        for (auto &e : v) e = rng_normal();
        double lz = ref_forward_sum(v, X, Y, &gam), z = 0;
        std::vector<int64_t> path;
        brute_fs(v, X, Y, 0, 0, 0.0, path, acc, z);
        CHECK(close(lz, log(z), 1e-12, 1e-12), "forward-sum log_z %g vs brute %g", lz, log(z));
        for (int64_t c = 0; c < X * Y; c++)
            CHECK(close(gam[c], acc[c] / z, 1e-10, 1e-14), "gamma %lld: %g vs %g", (long long)c,
                  gam[c], acc[c] / z);
    }
}

/* ---- forward-sum ------------------------------------------------------------ */

struct FsCase {
    int32_t dtype;
    int64_t B, T, S;
    bool bst;           /* tokens contiguous */
    double mask_p;      /* chance of a -inf cell */
    bool want_log_z;
};

/* A forward-sum case of random size: B <= max_b, T <= max_t, T <= S <= max_s. */
static FsCase random_fs_case(int32_t dtype, int64_t max_b, int64_t max_t, int64_t max_s, bool bst,
                             double mask_p, bool want_log_z) {
    FsCase c;
    c.dtype = dtype;
    c.B = rng_int(1, max_b);
    c.T = rng_int(1, max_t);
    c.S = rng_int(c.T, max_s);
    c.bst = bst;
    c.mask_p = mask_p;
    c.want_log_z = want_log_z;
    return c;
}

static void run_fs_case(const FsCase &c) {
    snprintf(g_case, sizeof g_case, "forward-sum %s B=%lld T=%lld S=%lld %s mask=%.2f seg=%d",
             dname(c.dtype), (long long)c.B, (long long)c.T, (long long)c.S, c.bst ? "bst" : "bts",
             c.mask_p, (int)mas_soft_cuda_segment_states_);
    progress();
    HostT v;
    v.init(c.dtype, c.B, c.T, c.S, c.bst);
    std::vector<int64_t> xl(c.B), yl(c.B);
    for (int64_t b = 0; b < c.B; b++) {
        xl[b] = rng_int(1, c.T);
        yl[b] = rng_int(xl[b], c.S);
        if (b == 0) {
            xl[b] = c.T < c.S ? c.T : c.S;
            yl[b] = c.S;
        }
        for (int64_t i = 0; i < c.T; i++)
            for (int64_t j = 0; j < c.S; j++) {
                bool mask = rng_unit() < c.mask_p && !(i == 0 && j == 0) &&
                            !(i == xl[b] - 1 && j == yl[b] - 1);
                /* Cells off the band may hold anything: they are never read. */
                bool band = i < xl[b] && j < yl[b] && i <= j && i >= j - (yl[b] - xl[b]);
                v.set(b, i, j, !band && rng_unit() < 0.1 ? NAN : mask ? NEG_INF : 3 * rng_normal());
            }
    }
    const int32_t acc = c.dtype == MAS_FLOAT64 ? MAS_FLOAT64 : MAS_FLOAT32;
    HostT post;
    post.init(acc, c.B, c.T, c.S, !c.bst);
    Dev dv(v.bytes.size()), dx(8 * c.B), dy(8 * c.B), dz(8 * c.B), dp(post.bytes.size()), dw(8);
    dv.up(v.bytes.data());
    dx.up(xl.data());
    dy.up(yl.data());
    dz.poison();
    dp.poison();
    dw.poison();
    size_t wsz = mas_forward_sum_cuda_workspace_size(c.B, c.T, c.S, (mas_dtype)c.dtype);
    Dev ws(wsz);
    mas_tensor3 vt = v.view(dv.p), pt = post.view(dp.p);
    mas_status st = mas_forward_sum_cuda(&vt, (const int64_t *)dx.p, (const int64_t *)dy.p,
                                         c.want_log_z ? dz.p : nullptr, &pt, ws.p, wsz, nullptr,
                                         (uint64_t *)dw.p);
    CHECK(st == MAS_OK, "status %d", (int)st);
    uint64_t word = read_error(dw);
    HostT got = download(post, dp);
    std::vector<unsigned char> lz(8 * c.B);
    dz.down(lz.data());
    int64_t first_bad = -1;
    for (int64_t b = 0; b < c.B; b++) {
        std::vector<double> vv((size_t)(xl[b] * yl[b])), gam;
        for (int64_t i = 0; i < xl[b]; i++)
            for (int64_t j = 0; j < yl[b]; j++) vv[i * yl[b] + j] = v.get(b, i, j);
        double want = ref_forward_sum(vv, xl[b], yl[b], &gam);
        if (want == NEG_INF && first_bad < 0) first_bad = b;
        double gz = acc == MAS_FLOAT64 ? ((double *)lz.data())[b] : ((float *)lz.data())[b];
        double rtol = acc == MAS_FLOAT64 ? 1e-10 : 2e-5;
        if (c.want_log_z) CHECK(close(gz, want, rtol, rtol * 10), "item %lld log_z %.9g vs %.9g",
                                (long long)b, gz, want);
        /* float32: alpha and beta~ carry rounding of about eps * |log_z| per
         * step, a random walk over the frames: the posterior's absolute error
         * grows like eps * |log_z| * S^0.5 (|log_z| grows like S; here up to
         * 0.18 at S = 8192, log_z = 21929: 80 ulp of log_z, drifting smoothly
         * over the frames). */
        const double scale = want == NEG_INF ? (double)c.S : fmax(fabs(want), (double)c.S);
        double gtol = acc == MAS_FLOAT64 ? 1e-9 : 5e-4 + 1.5e-7 * scale * sqrt((double)c.S);
        int64_t bad_cells = 0;
        double worst = 0;
        for (int64_t i = 0; i < c.T; i++)
            for (int64_t j = 0; j < c.S; j++) {
                double w = (want != NEG_INF && i < xl[b] && j < yl[b]) ? gam[i * yl[b] + j] : 0;
                double gv = got.get(b, i, j);
                double d = fabs(gv - w);
                if (!(d <= gtol)) {
                    bad_cells++;
                    if (!(d <= worst)) worst = d;
                }
            }
        CHECK(bad_cells == 0, "item %lld: %lld posterior cells off (worst %g)", (long long)b,
              (long long)bad_cells, worst);
        if (want != NEG_INF) {
            double worst_sum = 0;
            for (int64_t j = 0; j < yl[b]; j++) {
                double s = 0;
                for (int64_t i = 0; i < xl[b]; i++) s += got.get(b, i, j);
                if (fabs(s - 1) > worst_sum) worst_sum = fabs(s - 1);
            }
            CHECK(worst_sum < (acc == MAS_FLOAT64 ? 1e-9 : gtol), "item %lld: frame sums off by %g",
                  (long long)b, worst_sum);
            if (!(worst_sum < (acc == MAS_FLOAT64 ? 1e-9 : gtol))) {
                /* rounding drifts smoothly over the frames; a lost or stale
                 * edge would jump */
                printf("  frame sums - 1 at 17 frames of %lld (log_z %.6g):", (long long)yl[b], want);
                for (int q = 0; q <= 16; q++) {
                    const int64_t j = (yl[b] - 1) * q / 16;
                    double sj = 0;
                    for (int64_t i = 0; i < xl[b]; i++) sj += got.get(b, i, j);
                    printf(" %.3g", sj - 1);
                }
                printf("\n");
            }
        }
    }
    mas_error err;
    mas_decode_device_error(word, &err);
    if (first_bad < 0) CHECK(err.status == MAS_OK, "error word status %d item %lld", err.status,
                             (long long)err.item);
    else CHECK(err.status == MAS_ERR_NO_FINITE_PATH && err.item == first_bad,
               "error word status %d item %lld, want no finite path at %lld", err.status,
               (long long)err.item, (long long)first_bad);
}

/* The library's CPU forward-sum as a second opinion (float32, bts). */
static void fs_vs_cpu(void) {
    snprintf(g_case, sizeof g_case, "forward-sum GPU vs CPU backend");
    const int64_t B = 3, T = 37, S = 150;
    HostT v;
    v.init(MAS_FLOAT32, B, T, S, false);
    std::vector<int64_t> xl = {37, 20, 5}, yl = {150, 90, 5};
    for (int64_t b = 0; b < B; b++)
        for (int64_t i = 0; i < T; i++)
            for (int64_t j = 0; j < S; j++) v.set(b, i, j, rng_normal());
    HostT pc, pg;
    pc.init(MAS_FLOAT32, B, T, S, false);
    pg = pc;
    std::vector<float> zc(B), zg(B);
    size_t wc = mas_forward_sum_cpu_workspace_size(B, T, S, MAS_FLOAT32, 1);
    std::vector<unsigned char> wsc(wc);
    mas_tensor3 vt = v.view(v.bytes.data()), pct = pc.view(pc.bytes.data());
    mas_error e;
    mas_status sc = mas_forward_sum_cpu(&vt, xl.data(), yl.data(), zc.data(), &pct, wsc.data(), wc,
                                        1, &e);
    Dev dv(v.bytes.size()), dx(8 * B), dy(8 * B), dz(4 * B), dp(pg.bytes.size());
    dv.up(v.bytes.data());
    dx.up(xl.data());
    dy.up(yl.data());
    dp.poison();
    size_t wg = mas_forward_sum_cuda_workspace_size(B, T, S, MAS_FLOAT32);
    Dev ws(wg);
    mas_tensor3 vg = v.view(dv.p), pgt = pg.view(dp.p);
    mas_status sg = mas_forward_sum_cuda(&vg, (const int64_t *)dx.p, (const int64_t *)dy.p, dz.p,
                                         &pgt, ws.p, wg, nullptr, nullptr);
    CUDA_OK(cudaDeviceSynchronize());
    CHECK(sc == MAS_OK && sg == MAS_OK, "status cpu %d gpu %d", (int)sc, (int)sg);
    dz.down(zg.data());
    HostT got = download(pg, dp);
    for (int64_t b = 0; b < B; b++) CHECK(close(zg[b], zc[b], 1e-5, 1e-5), "log_z %g vs cpu %g", zg[b], zc[b]);
    double worst = 0;
    for (int64_t b = 0; b < B; b++)
        for (int64_t i = 0; i < T; i++)
            for (int64_t j = 0; j < S; j++) {
                double d = fabs(got.get(b, i, j) - pc.get(b, i, j));
                if (!(d <= worst)) worst = d;
            }
    CHECK(worst < 1e-4, "posterior differs from cpu by %g", worst);
}

/* The soft sweep with the max-plus semiring is hard MAS's forward: its
 * log_z must be hard MAS's score (the CPU's, bit for bit: the same
 * compare-and-select and the same additions in the same order). */
static void fs_max_plus_vs_hard(void) {
    const int32_t dts[3] = {MAS_FLOAT32, MAS_FLOAT64, MAS_FLOAT16};
    for (int rep = 0; rep < 6; rep++) {
        const int32_t dt = dts[rep % 3];
        const int64_t B = rng_int(1, 5), T = rng_int(1, 300), S = rng_int(T, 700);
        snprintf(g_case, sizeof g_case, "max-plus sweep vs hard MAS %s B=%lld T=%lld S=%lld",
                 dname(dt), (long long)B, (long long)T, (long long)S);
        progress();
        HostT v;
        v.init(dt, B, T, S, rep % 2 == 0);
        std::vector<int64_t> xl(B), yl(B);
        for (int64_t b = 0; b < B; b++) {
            xl[b] = rng_int(1, T);
            yl[b] = rng_int(xl[b], S);
            for (int64_t i = 0; i < T; i++)
                for (int64_t j = 0; j < S; j++)
                    v.set(b, i, j, rep >= 3 && rng_unit() < 0.05 ? NEG_INF : 3 * rng_normal());
        }
        const int32_t acc = dt == MAS_FLOAT64 ? MAS_FLOAT64 : MAS_FLOAT32;
        std::vector<unsigned char> want(8 * B), got(8 * B);
        mas_hard_outputs out;
        memset(&out, 0, sizeof out);
        out.score = want.data();
        mas_tensor3 hv = v.view(v.bytes.data());
        std::vector<unsigned char> hws(mas_hard_cpu_workspace_size(B, T, S, (mas_dtype)dt, 1));
        mas_status hst = mas_hard_cpu(&hv, xl.data(), yl.data(), &out, hws.data(), hws.size(), 1, nullptr);
        Dev dv(v.bytes.size()), dx(8 * B), dy(8 * B), dz(8 * B), dw(8);
        dv.up(v.bytes.data());
        dx.up(xl.data());
        dy.up(yl.data());
        dz.poison();
        dw.poison();
        size_t wsz = mas_forward_sum_cuda_workspace_size(B, T, S, (mas_dtype)dt);
        Dev ws(wsz);
        mas_tensor3 vt = v.view(dv.p);
        mas_soft_cuda_max_plus_ = 1;
        mas_status st = mas_forward_sum_cuda(&vt, (const int64_t *)dx.p, (const int64_t *)dy.p, dz.p,
                                             nullptr, ws.p, wsz, nullptr, (uint64_t *)dw.p);
        mas_soft_cuda_max_plus_ = 0;
        CHECK(st == MAS_OK, "status %d", (int)st);
        read_error(dw);
        dz.down(got.data());
        for (int64_t b = 0; b < B; b++) {
            const double w = acc == MAS_FLOAT64 ? ((double *)want.data())[b] : ((float *)want.data())[b];
            const double g = acc == MAS_FLOAT64 ? ((double *)got.data())[b] : ((float *)got.data())[b];
            CHECK(w == g, "item %lld: max-plus log_z %.9g, hard MAS score %.9g (hard status %d)",
                  (long long)b, g, w, (int)hst);
        }
    }
}

static void fs_errors(void) {
    snprintf(g_case, sizeof g_case, "forward-sum errors");
    const int64_t B = 4, T = 6, S = 9;
    HostT v;
    v.init(MAS_FLOAT32, B, T, S, false);
    for (int64_t b = 0; b < B; b++)
        for (int64_t i = 0; i < T; i++)
            for (int64_t j = 0; j < S; j++) v.set(b, i, j, rng_normal());
    /* item 1: NaN inside the band; item 2: x_len > y_len; item 3: fine */
    v.set(1, 2, 4, NAN);
    std::vector<int64_t> xl = {6, 6, 6, 3}, yl = {9, 9, 5, 9};
    HostT post;
    post.init(MAS_FLOAT32, B, T, S, false);
    Dev dv(v.bytes.size()), dx(8 * B), dy(8 * B), dz(4 * B), dp(post.bytes.size()), dw(8);
    dv.up(v.bytes.data());
    dx.up(xl.data());
    dy.up(yl.data());
    dp.poison();
    dz.poison();
    dw.poison();
    size_t wsz = mas_forward_sum_cuda_workspace_size(B, T, S, MAS_FLOAT32);
    Dev ws(wsz);
    mas_tensor3 vt = v.view(dv.p), pt = post.view(dp.p);
    mas_status st = mas_forward_sum_cuda(&vt, (const int64_t *)dx.p, (const int64_t *)dy.p, dz.p,
                                         &pt, ws.p, wsz, nullptr, (uint64_t *)dw.p);
    CHECK(st == MAS_OK, "status %d", (int)st);
    mas_error err;
    mas_decode_device_error(read_error(dw), &err);
    CHECK(err.status == MAS_ERR_NONFINITE_VALUE && err.item == 1, "got status %d item %lld",
          err.status, (long long)err.item);
    float lz[4];
    dz.down(lz);
    HostT got = download(post, dp);
    CHECK(lz[1] == NEG_INF && lz[2] == NEG_INF && isfinite(lz[0]) && isfinite(lz[3]),
          "log_z %g %g %g %g", lz[0], lz[1], lz[2], lz[3]);
    for (int64_t b = 1; b <= 2; b++) {
        double s = 0;
        for (int64_t i = 0; i < T; i++)
            for (int64_t j = 0; j < S; j++) s += fabs(got.get(b, i, j));
        CHECK(s == 0, "failed item %lld posterior not zero (%g)", (long long)b, s);
    }
    /* host-side argument checks */
    CHECK(mas_forward_sum_cuda(&vt, (const int64_t *)dx.p, (const int64_t *)dy.p, nullptr, nullptr,
                               ws.p, wsz, nullptr, nullptr) == MAS_ERR_BAD_ARGUMENT,
          "no output requested");
    CHECK(mas_forward_sum_cuda(&vt, (const int64_t *)dx.p, (const int64_t *)dy.p, dz.p, &pt, ws.p,
                               wsz - 1, nullptr, nullptr) == MAS_ERR_WORKSPACE_TOO_SMALL,
          "small workspace");
    mas_tensor3 bad = pt;
    bad.dtype = MAS_FLOAT64;
    CHECK(mas_forward_sum_cuda(&vt, (const int64_t *)dx.p, (const int64_t *)dy.p, dz.p, &bad, ws.p,
                               wsz, nullptr, nullptr) == MAS_ERR_BAD_DTYPE,
          "posterior dtype");
}

/* ---- attention ---------------------------------------------------------------- */

struct AttnCase {
    int kind;
    int32_t dtype;
    int64_t B, N, M;
    bool transposed; /* N axis contiguous */
    bool lengths;
    double scale;   /* logits ~ scale * normal */
    double extreme; /* chance of a +-1e4 logit */
};

static void run_attn_case(const AttnCase &c) {
    snprintf(g_case, sizeof g_case, "attention %s %s B=%lld N=%lld M=%lld%s%s scale=%g ext=%.2f seg=%d",
             c.kind ? "m2m" : "o2m", dname(c.dtype), (long long)c.B, (long long)c.N,
             (long long)c.M, c.transposed ? " transposed" : "", c.lengths ? " lengths" : "",
             c.scale, c.extreme, (int)mas_soft_cuda_segment_states_);
    progress();
    HostT x, g;
    x.init(c.dtype, c.B, c.N, c.M, c.transposed);
    const int32_t acc = c.dtype == MAS_FLOAT64 ? MAS_FLOAT64 : MAS_FLOAT32;
    g.init(acc, c.B, c.N, c.M, false);
    std::vector<int64_t> nl(c.B), ml(c.B);
    for (int64_t b = 0; b < c.B; b++) {
        nl[b] = c.lengths && b > 0 ? rng_int(1, c.N) : c.N;
        ml[b] = c.lengths && b > 0 ? rng_int(1, c.M) : c.M;
        for (int64_t i = 0; i < c.N; i++)
            for (int64_t j = 0; j < c.M; j++) {
                double r = rng_unit();
                double val = r < c.extreme / 2 ? 1e4 : r < c.extreme ? -1e4 : c.scale * rng_normal();
                bool inside = i < nl[b] && j < ml[b];
                x.set(b, i, j, inside ? val : NAN); /* outside the lengths: never read */
                g.set(b, i, j, rng_normal());
            }
    }
    HostT phi, dxh;
    phi.init(acc, c.B, c.N, c.M, !c.transposed);
    dxh.init(acc, c.B, c.N, c.M, c.transposed);
    Dev dxv(x.bytes.size()), dg(g.bytes.size()), dphi(phi.bytes.size()), ddx(dxh.bytes.size());
    Dev dn(8 * c.B), dm(8 * c.B), dw(8);
    dxv.up(x.bytes.data());
    dg.up(g.bytes.data());
    dn.up(nl.data());
    dm.up(ml.data());
    dphi.poison();
    ddx.poison();
    dw.poison();
    size_t wsz = mas_attention_cuda_workspace_size(c.B, c.N, c.M, (mas_dtype)c.dtype);
    Dev ws(wsz);
    mas_tensor3 xt = x.view(dxv.p), pt = phi.view(dphi.p), gt = g.view(dg.p), dt = dxh.view(ddx.p);
    const int64_t *np = c.lengths ? (const int64_t *)dn.p : nullptr;
    const int64_t *mp = c.lengths ? (const int64_t *)dm.p : nullptr;
    mas_status st = mas_attention_forward_cuda((mas_attention_kind)c.kind, &xt, np, mp, &pt, ws.p,
                                               wsz, nullptr, (uint64_t *)dw.p);
    CHECK(st == MAS_OK, "forward status %d", (int)st);
    st = mas_attention_backward_cuda((mas_attention_kind)c.kind, &xt, np, mp, &pt, &gt, &dt, ws.p,
                                     wsz, nullptr, (uint64_t *)dw.p);
    CHECK(st == MAS_OK, "backward status %d", (int)st);
    uint64_t word = read_error(dw);
    mas_error err;
    mas_decode_device_error(word, &err);
    CHECK(err.status == MAS_OK, "error word status %d item %lld", err.status, (long long)err.item);
    HostT gphi = download(phi, dphi), gdx = download(dxh, ddx);
    const bool f64 = acc == MAS_FLOAT64;
    for (int64_t b = 0; b < c.B; b++) {
        const int64_t n = nl[b], m = ml[b];
        std::vector<double> xv((size_t)(n * m)), gv((size_t)(n * m)), lp, dref;
        for (int64_t i = 0; i < n; i++)
            for (int64_t j = 0; j < m; j++) {
                xv[i * m + j] = x.get(b, i, j);
                gv[i * m + j] = g.get(b, i, j);
            }
        ref_attention(c.kind, xv, n, m, lp);
        ref_attention_grad(c.kind, xv, gv, n, m, dref);
        /* float32 error grows with the path length and the log phi scale */
        const double steps = (double)(c.kind ? n + m : n);
        const double rtol = f64 ? 1e-10 : 1e-6 * steps, atol = f64 ? 1e-9 : 1e-5 * steps;
        double gmax = 0;
        for (double d : dref) gmax = fabs(d) > gmax ? fabs(d) : gmax;
        /* The adjoint exponentiates differences of log phi values; in
         * float32 those carry an absolute error of about ulp(|log phi|)
         * (1e-3 at 1e4: logits of +-1e4 drive log phi there), so the
         * gradient's tolerance grows with the largest finite |log phi|.
         * Seen on an H100: 2e-2 off at |grad| 6.3 with |log phi| ~1e4. */
        double lpmax = 0;
        for (double v : lp)
            if (v != NEG_INF && fabs(v) > lpmax) lpmax = fabs(v);
        int64_t off_phi = 0, off_dx = 0, nan_count = 0;
        double worst_phi = 0, worst_dx = 0;
        for (int64_t i = 0; i < c.N; i++)
            for (int64_t j = 0; j < c.M; j++) {
                bool inside = i < n && j < m;
                double want = inside ? lp[i * m + j] : NEG_INF, got = gphi.get(b, i, j);
                double wdx = inside ? dref[i * m + j] : 0, gdv = gdx.get(b, i, j);
                if (got != got || gdv != gdv) nan_count++;
                if (!close(got, want, rtol, atol)) {
                    off_phi++;
                    if (fabs(got - want) > worst_phi || got != got) worst_phi = fabs(got - want);
                }
                double dtol = f64 ? 1e-8 * (1 + gmax) * (1 + 1e-8 * lpmax)
                                  : 2e-3 * (1 + gmax) * (1 + steps / 512) * (1 + 1e-4 * lpmax);
                if (!(fabs(gdv - wdx) <= dtol)) {
                    off_dx++;
                    if (fabs(gdv - wdx) > worst_dx || gdv != gdv) worst_dx = fabs(gdv - wdx);
                }
            }
        CHECK(nan_count == 0, "item %lld: %lld NaN outputs", (long long)b, (long long)nan_count);
        CHECK(off_phi == 0, "item %lld (n=%lld m=%lld): %lld log phi cells off (worst %g)",
              (long long)b, (long long)n, (long long)m, (long long)off_phi, worst_phi);
        CHECK(off_dx == 0, "item %lld (n=%lld m=%lld): %lld grad cells off (worst %g, max %g)",
              (long long)b, (long long)n, (long long)m, (long long)off_dx, worst_dx, gmax);
    }
}

/* The library's CPU attention as a second opinion. */
static void attn_vs_cpu(int kind) {
    snprintf(g_case, sizeof g_case, "attention %s GPU vs CPU backend", kind ? "m2m" : "o2m");
    const int64_t B = 3, N = 45, M = 70;
    HostT x, g;
    x.init(MAS_FLOAT32, B, N, M, false);
    g.init(MAS_FLOAT32, B, N, M, false);
    for (int64_t b = 0; b < B; b++)
        for (int64_t i = 0; i < N; i++)
            for (int64_t j = 0; j < M; j++) {
                x.set(b, i, j, 2 * rng_normal());
                g.set(b, i, j, rng_normal());
            }
    std::vector<int64_t> nl = {45, 30, 1}, ml = {70, 12, 9};
    HostT pc = x, dc = x;
    size_t wc = mas_attention_cpu_workspace_size(B, N, M, MAS_FLOAT32, 1);
    std::vector<unsigned char> wsc(wc + 1);
    mas_tensor3 xt = x.view(x.bytes.data()), pct = pc.view(pc.bytes.data()),
                gt = g.view(g.bytes.data()), dct = dc.view(dc.bytes.data());
    mas_error e;
    mas_status s1 = mas_attention_forward_cpu((mas_attention_kind)kind, &xt, nl.data(), ml.data(),
                                              &pct, wsc.data(), wc, 1, &e);
    mas_status s2 = mas_attention_backward_cpu((mas_attention_kind)kind, &xt, nl.data(), ml.data(),
                                               &pct, &gt, &dct, wsc.data(), wc, 1, &e);
    if (s1 != MAS_OK || s2 != MAS_OK) {
        printf("note: CPU attention returned %d/%d; GPU-vs-CPU comparison skipped\n", (int)s1,
               (int)s2);
        return;
    }
    Dev dxv(x.bytes.size()), dg(g.bytes.size()), dp(x.bytes.size()), dd(x.bytes.size()), dn(8 * B),
        dm(8 * B);
    dxv.up(x.bytes.data());
    dg.up(g.bytes.data());
    dn.up(nl.data());
    dm.up(ml.data());
    dp.poison();
    dd.poison();
    size_t wg = mas_attention_cuda_workspace_size(B, N, M, MAS_FLOAT32);
    Dev ws(wg);
    mas_tensor3 xg = x.view(dxv.p), pg = x.view(dp.p), gg = g.view(dg.p), dg2 = x.view(dd.p);
    CHECK(mas_attention_forward_cuda((mas_attention_kind)kind, &xg, (const int64_t *)dn.p,
                                     (const int64_t *)dm.p, &pg, ws.p, wg, nullptr, nullptr) == MAS_OK,
          "gpu forward");
    CHECK(mas_attention_backward_cuda((mas_attention_kind)kind, &xg, (const int64_t *)dn.p,
                                      (const int64_t *)dm.p, &pg, &gg, &dg2, ws.p, wg, nullptr,
                                      nullptr) == MAS_OK,
          "gpu backward");
    CUDA_OK(cudaDeviceSynchronize());
    HostT pgh = download(x, dp), dgh = download(x, dd);
    int64_t off = 0;
    for (int64_t b = 0; b < B; b++)
        for (int64_t i = 0; i < N; i++)
            for (int64_t j = 0; j < M; j++) {
                if (!close(pgh.get(b, i, j), pc.get(b, i, j), 1e-4, 1e-4)) off++;
                if (!(fabs(dgh.get(b, i, j) - dc.get(b, i, j)) <= 1e-3)) off++;
            }
    CHECK(off == 0, "%lld cells differ from the CPU backend", (long long)off);
}

static void attn_errors(void) {
    snprintf(g_case, sizeof g_case, "attention errors");
    const int64_t B = 3, N = 5, M = 6;
    HostT x;
    x.init(MAS_FLOAT32, B, N, M, false);
    for (int64_t b = 0; b < B; b++)
        for (int64_t i = 0; i < N; i++)
            for (int64_t j = 0; j < M; j++) x.set(b, i, j, rng_normal());
    x.set(2, 1, 1, NAN);
    std::vector<int64_t> nl = {5, 0, 5}, ml = {6, 6, 6};
    HostT phi = x;
    Dev dxv(x.bytes.size()), dp(x.bytes.size()), dn(8 * B), dm(8 * B), dw(8);
    dxv.up(x.bytes.data());
    dn.up(nl.data());
    dm.up(ml.data());
    dp.poison();
    dw.poison();
    size_t wsz = mas_attention_cuda_workspace_size(B, N, M, MAS_FLOAT32);
    Dev ws(wsz);
    mas_tensor3 xt = x.view(dxv.p), pt = phi.view(dp.p);
    for (int kind = 0; kind < 2; kind++) {
        dw.poison();
        CHECK(mas_attention_forward_cuda((mas_attention_kind)kind, &xt, (const int64_t *)dn.p,
                                         (const int64_t *)dm.p, &pt, ws.p, wsz, nullptr,
                                         (uint64_t *)dw.p) == MAS_OK,
              "status");
        mas_error err;
        mas_decode_device_error(read_error(dw), &err);
        CHECK(err.status == MAS_ERR_BAD_LENGTH && err.item == 1, "kind %d: status %d item %lld",
              kind, err.status, (long long)err.item);
        HostT got = download(phi, dp);
        for (int64_t b = 1; b < B; b++) {
            int64_t not_inf = 0;
            for (int64_t i = 0; i < N; i++)
                for (int64_t j = 0; j < M; j++) not_inf += got.get(b, i, j) != NEG_INF;
            CHECK(not_inf == 0, "kind %d failed item %lld: %lld cells not -inf", kind,
                  (long long)b, (long long)not_inf);
        }
    }
    CHECK(mas_attention_forward_cuda((mas_attention_kind)7, &xt, nullptr, nullptr, &pt, ws.p, wsz,
                                     nullptr, nullptr) == MAS_ERR_BAD_ARGUMENT,
          "bad kind");
}

int main(int argc, char **argv) {
    uint64_t seed = argc > 1 ? strtoull(argv[1], nullptr, 10) : (uint64_t)time(nullptr);
    bool small = argc > 2 && strcmp(argv[2], "small") == 0;
    printf("test_soft_cuda seed %llu%s\n", (unsigned long long)seed, small ? " (small)" : "");
    g_rng = seed;
    check_references();
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
        printf("%lld reference checks, %lld failed; no CUDA device: GPU checks skipped\n",
               (long long)g_checks, (long long)g_failures);
        return g_failures == 0 ? 0 : 1;
    }
    const int32_t dts[4] = {MAS_FLOAT32, MAS_FLOAT64, MAS_FLOAT16, MAS_BFLOAT16};
    for (int rep = 0; rep < 6; rep++)
        run_fs_case(random_fs_case(dts[rep % 4], 5, 70, 200, rep % 2,
                                   rep == 3 ? 0.3 : (rep == 5 ? 0.05 : 0), rep != 4));
    run_fs_case({MAS_FLOAT32, 2, 600, 1500, false, 0.0, true}); /* 5 segments an item */
    run_fs_case({MAS_FLOAT64, 1, 1100, 1300, true, 0.0, true}); /* 9 */
    fs_vs_cpu();
    fs_errors();
    fs_max_plus_vs_hard();
    for (int kind = 0; kind < 2; kind++) {
        for (int rep = 0; rep < 6; rep++) /* (a braced list draws left to right) */
            run_attn_case({kind, dts[rep % 4], rng_int(1, 4), rng_int(1, 90), rng_int(1, 90),
                           rep % 3 == 1, rep % 2 == 0, rep == 5 ? 8.0 : 2.0, rep >= 4 ? 0.05 : 0});
        run_attn_case({kind, MAS_FLOAT32, 2, 700, 1100, false, true, 2, 0.01});
        run_attn_case({kind, MAS_FLOAT64, 2, 1100, 600, true, true, 2, 0});
        if (!small) {
            run_attn_case({kind, MAS_FLOAT32, 1, 8192, 8192, false, false, 3, 0});
            run_attn_case({kind, MAS_FLOAT64, 1, 8192, 3000, false, false, 3, 0});
        }
        attn_vs_cpu(kind);
    }
    if (!small) run_fs_case({MAS_FLOAT32, 1, 4096, 8192, false, 0.0, true}); /* 32 segments */
    attn_errors();

    /* Many segments an item at small sizes: 48 states a block (a full and a
     * partial warp) and 16 (half a warp); then items of 9000 states. */
    for (int32_t seg : {48, 16}) {
        mas_soft_cuda_segment_states_ = seg;
        for (int rep = 0; rep < 4; rep++)
            run_fs_case(random_fs_case(dts[rep % 4], 4, 150, 300, rep % 2, rep == 2 ? 0.2 : 0, true));
        for (int kind = 0; kind < 2; kind++)
            for (int rep = 0; rep < 4; rep++)
                run_attn_case({kind, dts[rep % 4], rng_int(1, 4), rng_int(1, 120), rng_int(1, 120),
                               rep % 2 == 1, rep < 2, 2.0, rep == 3 ? 0.05 : 0});
    }
    mas_soft_cuda_segment_states_ = 0;
    if (!small) {
        run_fs_case({MAS_FLOAT32, 1, 9000, 9500, false, 0.0, true});
        run_attn_case({MAS_ATTENTION_ONE_TO_MANY, MAS_FLOAT32, 1, 600, 9000, false, false, 3, 0});
        run_attn_case({MAS_ATTENTION_MANY_TO_MANY, MAS_FLOAT32, 1, 9000, 700, false, false, 3, 0});
    }
    printf("%lld checks, %lld failed\n", (long long)g_checks, (long long)g_failures);
    return g_failures == 0 ? 0 : 1;
}
