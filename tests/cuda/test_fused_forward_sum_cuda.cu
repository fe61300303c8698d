/* GPU test of the fused forward-sum (mas.h section 8), three ways:
 *   - log_z equal bit for bit to the unfused CUDA path on the same inputs
 *     (mas_gauss_coef_cuda + mas_loglik_cuda + mas_forward_sum_cuda), and
 *     the same error word;
 *   - log_z and the gradients (frames, means, spread) against the CPU op,
 *     which test_fused_cpu holds to float64 references and finite
 *     differences: within the rounding of the accumulator type (log_z
 *     carries eps * |log_z| a frame, so the float32 tolerance grows with
 *     |log_z| sqrt(S)); float64 cases take the long items;
 *   - zeros outside the lengths and for failed items, every output poisoned
 *     before the call.
 * Cases: float32 / float64 / float16 / bfloat16 frames, channel-first and
 * frame-major views and gradients, one model or one per item, log-std and
 * variance spreads, uneven lengths (some bad), items over many blocks of
 * frames and many segments of tokens, NaN frames, bad models, calls that
 * want only log_z or one gradient. `test_fused_forward_sum_cuda SEED`
 * replays; `--small` keeps the cases small (compute-sanitizer). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <vector>

#include "cuda_check.h"
#include "mas.h"
#include "test_common.h"
#include "fused_test_data.h"

struct Case {
    int64_t B, T, S, J;
    mas_dtype zt, mt;
    bool frame_major;  /* x and grad_x stored [B, S, J] (else [B, J, S]) */
    bool shared_model;
    bool variance;     /* spread as variances (else log-std) */
    double nan_frame;  /* chance an item gets a NaN frame inside y_len */
    double bad_model;  /* chance the model gets a NaN mean */
    int want;          /* bits: 1 log_z, 2 grad_x, 4 grad_means, 8 grad_spread */
    const int64_t *ys; /* y_len of every item (NULL: random) */
};

/* The largest error / tolerance seen per accumulator type (printed at the
 * end: how close the tolerances are). */
static double g_ratio[2];
static void note_ratio(mas_dtype acc, double r) {
    double &m = g_ratio[acc == MAS_FLOAT64];
    if (r > m) m = r;
}

struct Soft {
    std::vector<unsigned char> log_z, gx, gm, gs;
    mas_status status; /* CPU: the call's; CUDA: the error word's */
    int64_t item;
};

static void run_case(const Case &c) {
    snprintf(g_case, sizeof g_case,
             "forward-sum B=%lld T=%lld S=%lld J=%lld zt=%d mt=%d fm=%d shared=%d var=%d want=%d",
             (long long)c.B, (long long)c.T, (long long)c.S, (long long)c.J, (int)c.zt, (int)c.mt,
             (int)c.frame_major, (int)c.shared_model, (int)c.variance, c.want);
    progress();
    const int64_t B = c.B, T = c.T, S = c.S, J = c.J, MB = c.shared_model ? 1 : B;
    std::vector<unsigned char> z((size_t)(B * S * J) * dsize(c.zt));
    std::vector<unsigned char> mean((size_t)(MB * T * J) * dsize(c.mt)),
        spread((size_t)(MB * T * J) * dsize(c.mt));
    std::vector<int64_t> xl(B), yl(B);
    auto zat = [&](int64_t b, int64_t s, int64_t j) {
        return c.frame_major ? (b * S + s) * J + j : (b * J + j) * S + s;
    };
    random_lengths(B, T, S, xl, yl);
    if (c.ys)
        for (int64_t b = 0; b < B; b++) {
            yl[b] = c.ys[b];
            xl[b] = irand(1, yl[b] < T ? yl[b] : T);
        }
    /* frames near the means (cells of a few units a dimension) */
    for (int64_t b = 0; b < MB; b++)
        for (int64_t k = 0; k < T; k++)
            for (int64_t j = 0; j < J; j++) {
                const double ls = urand() * 0.8 - 0.4;
                store(mean, (b * J + j) * T + k, c.mt, urand() * 2 - 1);
                store(spread, (b * J + j) * T + k, c.mt, c.variance ? exp(2 * ls) : ls);
            }
    for (int64_t b = 0; b < B; b++)
        for (int64_t s = 0; s < S; s++)
            for (int64_t j = 0; j < J; j++) store(z, zat(b, s, j), c.zt, urand() * 2.4 - 1.2);
    for (int64_t b = 0; b < B; b++)
        if (chance(c.nan_frame) && yl[b] >= 1 && yl[b] <= S)
            store(z, zat(b, irand(0, yl[b] - 1), irand(0, J - 1)), c.zt, NAN);
    if (chance(c.bad_model)) store(mean, irand(0, MB * T * J - 1), c.mt, NAN);

    const mas_dtype acc = c.zt == MAS_FLOAT64 ? MAS_FLOAT64 : MAS_FLOAT32;
    const size_t es = dsize(acc);
    auto args_of = [&](void *zp, void *mp, void *sp, const int64_t *x, const int64_t *y) {
        mas_gauss_align_args a;
        memset(&a, 0, sizeof a);
        a.x = t3(zp, c.zt, B, S, J, S * J, c.frame_major ? J : 1, c.frame_major ? 1 : S);
        a.params.means = t3(mp, c.mt, MB, T, J, J * T, 1, T);
        a.params.spread = t3(sp, c.mt, MB, T, J, J * T, 1, T);
        a.params.spread_kind = c.variance ? MAS_SPREAD_VARIANCE : MAS_SPREAD_LOG_STD;
        a.x_len = x;
        a.y_len = y;
        return a;
    };
    /* outputs: log_z [B]; grad_x in x's layout; grad_means / grad_spread [B, J, T] */
    auto outputs_of = [&](void *lz, void *gx, void *gm, void *gs, int want) {
        mas_gauss_soft_outputs o;
        memset(&o, 0, sizeof o);
        o.log_z = want & 1 ? lz : nullptr;
        o.grad_x = t3(want & 2 ? gx : nullptr, acc, B, S, J, S * J, c.frame_major ? J : 1,
                      c.frame_major ? 1 : S);
        o.grad_means = t3(want & 4 ? gm : nullptr, acc, B, T, J, J * T, 1, T);
        o.grad_spread = t3(want & 8 ? gs : nullptr, acc, B, T, J, J * T, 1, T);
        return o;
    };
    const size_t nx = (size_t)(B * S * J) * es, nt = (size_t)(B * T * J) * es;

    /* CPU (log_z always: the reference's scale) */
    Soft cpu;
    cpu.log_z.assign((size_t)B * es, 0);
    cpu.gx.assign(nx, 0);
    cpu.gm.assign(nt, 0);
    cpu.gs.assign(nt, 0);
    {
        mas_gauss_align_args a = args_of(z.data(), mean.data(), spread.data(), xl.data(), yl.data());
        mas_gauss_soft_outputs o =
            outputs_of(cpu.log_z.data(), cpu.gx.data(), cpu.gm.data(), cpu.gs.data(), c.want | 1);
        const size_t ws = mas_forward_sum_gaussian_cpu_workspace_size(&a, 1);
        std::vector<unsigned char> w(ws);
        mas_error err;
        cpu.status = mas_forward_sum_gaussian_cpu(&a, &o, w.data(), ws, 1, &err);
        cpu.item = err.item;
    }

    /* CUDA, fused */
    DevBuf dz(z.size()), dm(mean.size()), ds(spread.size()), dx(B * 8), dy(B * 8);
    upload(dz, z.data(), z.size());
    upload(dm, mean.data(), mean.size());
    upload(ds, spread.data(), spread.size());
    upload(dx, xl.data(), B * 8);
    upload(dy, yl.data(), B * 8);
    mas_gauss_align_args a = args_of(dz.p, dm.p, ds.p, (const int64_t *)dx.p, (const int64_t *)dy.p);
    DevBuf dlz(B * es), dgx(nx), dgm(nt), dgs(nt), dword(8);
    const uint64_t none = ~0ull;
    auto read_word = [&](Soft &r) {
        uint64_t word = 0;
        CUDA_OK(cudaMemcpy(&word, dword.p, 8, cudaMemcpyDeviceToHost));
        r.status = word == ~0ull ? MAS_OK : (mas_status)(word & 0xff);
        r.item = word == ~0ull ? -1 : (int64_t)(word >> 8);
    };
    Soft gpu;
    {
        CUDA_OK(cudaMemset(dlz.p, 0x33, B * es));
        CUDA_OK(cudaMemset(dgx.p, 0x5a, nx));
        CUDA_OK(cudaMemset(dgm.p, 0x5a, nt));
        CUDA_OK(cudaMemset(dgs.p, 0x5a, nt));
        CUDA_OK(cudaMemcpy(dword.p, &none, 8, cudaMemcpyHostToDevice));
        mas_gauss_soft_outputs o = outputs_of(dlz.p, dgx.p, dgm.p, dgs.p, c.want);
        const size_t ws = mas_forward_sum_gaussian_cuda_workspace_size(&a);
        CHECK(ws > 0, "workspace size 0");
        DevBuf w(ws);
        CUDA_OK(cudaMemset(w.p, 0xEE, ws)); /* stale data: nothing may depend on it */
        mas_status st = mas_forward_sum_gaussian_cuda(&a, &o, w.p, ws, nullptr, (uint64_t *)dword.p);
        CHECK(st == MAS_OK, "fused status %d", (int)st);
        CUDA_OK(cudaDeviceSynchronize());
        gpu.log_z.resize((size_t)B * es);
        gpu.gx.resize(nx);
        gpu.gm.resize(nt);
        gpu.gs.resize(nt);
        CUDA_OK(cudaMemcpy(gpu.log_z.data(), dlz.p, B * es, cudaMemcpyDeviceToHost));
        CUDA_OK(cudaMemcpy(gpu.gx.data(), dgx.p, nx, cudaMemcpyDeviceToHost));
        CUDA_OK(cudaMemcpy(gpu.gm.data(), dgm.p, nt, cudaMemcpyDeviceToHost));
        CUDA_OK(cudaMemcpy(gpu.gs.data(), dgs.p, nt, cudaMemcpyDeviceToHost));
        read_word(gpu);
    }

    /* CUDA, unfused: log_z only */
    Soft unf;
    unf.log_z.resize((size_t)B * es);
    {
        CUDA_OK(cudaMemcpy(dword.p, &none, 8, cudaMemcpyHostToDevice));
        DevBuf coef(MB * (2 * J + 1) * T * es), value(B * T * S * es), lz(B * es);
        const mas_tensor3 vv = unfused_cells(a, acc, coef.p, value.p, (uint64_t *)dword.p);
        const size_t ws = mas_forward_sum_cuda_workspace_size(B, T, S, acc);
        DevBuf w(ws);
        mas_status st = mas_forward_sum_cuda(&vv, a.x_len, a.y_len, lz.p, nullptr, w.p, ws,
                                             nullptr, (uint64_t *)dword.p);
        CHECK(st == MAS_OK, "forward_sum status %d", (int)st);
        CUDA_OK(cudaDeviceSynchronize());
        CUDA_OK(cudaMemcpy(unf.log_z.data(), lz.p, B * es, cudaMemcpyDeviceToHost));
        read_word(unf);
    }

    CHECK(gpu.status == unf.status && gpu.item == unf.item,
          "error word: fused %d item %lld, unfused %d item %lld", (int)gpu.status,
          (long long)gpu.item, (int)unf.status, (long long)unf.item);
    CHECK((gpu.status == MAS_OK) == (cpu.status == MAS_OK), "status: cuda %d cpu %d",
          (int)gpu.status, (int)cpu.status);
    if (cpu.status != MAS_OK && cpu.status != MAS_ERR_BAD_MODEL)
        CHECK(gpu.status == cpu.status && gpu.item == cpu.item,
              "error: cuda %d item %lld, cpu %d item %lld", (int)gpu.status, (long long)gpu.item,
              (int)cpu.status, (long long)cpu.item);
    if (c.want & 1) {
        int64_t differ = 0;
        for (int64_t b = 0; b < B; b++)
            differ += memcmp(gpu.log_z.data() + b * es, unf.log_z.data() + b * es, es) != 0;
        CHECK(differ == 0, "log_z: %lld items differ from the unfused CUDA path", (long long)differ);
    }
    if (cpu.status == MAS_ERR_BAD_MODEL) return; /* the CPU writes nothing then */

    /* against the CPU, item by item */
    const double eps = acc == MAS_FLOAT64 ? 2.2e-16 : 1.2e-7;
    for (int64_t b = 0; b < B; b++) {
        const double lz_ref = load(cpu.log_z, b, acc);
        const bool live = isfinite(lz_ref);
        /* an exponent error of eps |log_z| a frame, a random walk over the
         * frames: log_z's absolute error, and the posterior's (so the
         * gradients') relative error */
        const double tol = 4 * eps * (1 + (live ? fabs(lz_ref) : 0)) * sqrt((double)yl[b]) +
                           (acc == MAS_FLOAT64 ? 1e-12 : 1e-4);
        if (c.want & 1) {
            const double lz = load(gpu.log_z, b, acc);
            CHECK(live ? fabs(lz - lz_ref) <= tol : lz == lz_ref, "item %lld log_z %.9g vs cpu %.9g",
                  (long long)b, lz, lz_ref);
            if (live) note_ratio(acc, fabs(lz - lz_ref) / tol);
        }
        struct Arr {
            int bit;
            const char *name;
            const std::vector<unsigned char> *got, *ref;
            int64_t rows;
        } arrs[3] = {{2, "grad_x", &gpu.gx, &cpu.gx, S},
                     {4, "grad_means", &gpu.gm, &cpu.gm, T},
                     {8, "grad_spread", &gpu.gs, &cpu.gs, T}};
        for (const Arr &r : arrs) {
            if (!(c.want & r.bit)) continue;
            double num = 0, den = 0, worst = 0, top = 0;
            int64_t nonzero_out = 0;
            for (int64_t i = 0; i < r.rows; i++)
                for (int64_t j = 0; j < J; j++) {
                    const int64_t k = r.bit == 2 ? zat(b, i, j) : (b * J + j) * T + i;
                    const double g = load(*r.got, k, acc), w = load(*r.ref, k, acc);
                    const bool inside = live && i < (r.bit == 2 ? yl[b] : xl[b]);
                    if (!inside) {
                        nonzero_out += g != 0; /* also catches the poison (NaN or huge) */
                        continue;
                    }
                    const double d = fabs(g - w);
                    num += d * d;
                    den += w * w;
                    if (!(d <= worst)) worst = d;
                    if (fabs(w) > top) top = fabs(w);
                }
            CHECK(nonzero_out == 0, "item %lld %s: %lld cells outside the lengths not 0",
                  (long long)b, r.name, (long long)nonzero_out);
            if (!live) continue;
            note_ratio(acc, sqrt(num) / (tol * (sqrt(den) + 1e-3)));
            CHECK(sqrt(num) <= tol * (sqrt(den) + 1e-3) && worst <= 4 * tol * (top + 1e-3),
                  "item %lld %s: relative L2 error %.3g, worst %.3g of %.3g (tol %.3g)",
                  (long long)b, r.name, sqrt(num) / (sqrt(den) + 1e-300), worst, top, tol);
        }
    }
}

/* The host checks: the CPU op's statuses for the same bad calls. */
static void host_checks() {
    snprintf(g_case, sizeof g_case, "forward-sum host checks");
    const int64_t B = 2, T = 5, S = 9, J = 3;
    std::vector<float> z(B * S * J, 0.5f), mean(B * T * J, 0.1f), ls(B * T * J, 0.0f);
    std::vector<float> lz(B), gx(B * S * J), gm(B * T * J), gs(B * T * J);
    std::vector<double> wrong(B * T * J);
    std::vector<int64_t> xl = {5, 3}, yl = {9, 4};
    DevBuf dz(z.size() * 4), dm(mean.size() * 4), dl(ls.size() * 4), dx(B * 8), dy(B * 8);
    DevBuf dlz(B * 4), dgx(gx.size() * 4), dgm(gm.size() * 4), dgs(gs.size() * 4),
        dwrong(wrong.size() * 8);
    upload(dz, z.data(), z.size() * 4);
    upload(dm, mean.data(), mean.size() * 4);
    upload(dl, ls.data(), ls.size() * 4);
    upload(dx, xl.data(), B * 8);
    upload(dy, yl.data(), B * 8);
    auto args_of = [&](bool dev) {
        mas_gauss_align_args a;
        memset(&a, 0, sizeof a);
        a.x = t3(dev ? dz.p : z.data(), MAS_FLOAT32, B, S, J, S * J, J, 1);
        a.params.means = t3(dev ? dm.p : mean.data(), MAS_FLOAT32, B, T, J, T * J, J, 1);
        a.params.spread = t3(dev ? dl.p : ls.data(), MAS_FLOAT32, B, T, J, T * J, J, 1);
        a.params.spread_kind = MAS_SPREAD_LOG_STD;
        a.x_len = dev ? (const int64_t *)dx.p : xl.data();
        a.y_len = dev ? (const int64_t *)dy.p : yl.data();
        return a;
    };
    auto outs_of = [&](bool dev, int variant) {
        mas_gauss_soft_outputs o;
        memset(&o, 0, sizeof o);
        o.log_z = dev ? dlz.p : (void *)lz.data();
        o.grad_x = t3(dev ? dgx.p : (void *)gx.data(), MAS_FLOAT32, B, S, J, S * J, J, 1);
        o.grad_means = t3(dev ? dgm.p : (void *)gm.data(), MAS_FLOAT32, B, T, J, T * J, J, 1);
        o.grad_spread = t3(dev ? dgs.p : (void *)gs.data(), MAS_FLOAT32, B, T, J, T * J, J, 1);
        if (variant == 1) { /* nothing wanted */
            o.log_z = nullptr;
            o.grad_x.data = o.grad_means.data = o.grad_spread.data = nullptr;
        } else if (variant == 2) { /* a gradient of the wrong dtype */
            o.grad_means = t3(dev ? dwrong.p : (void *)wrong.data(), MAS_FLOAT64, B, T, J, T * J, J, 1);
        } else if (variant == 3) { /* a gradient of the wrong shape */
            o.grad_x.dim[1] = S - 1;
        }
        return o;
    };
    const char *names[6] = {"valid", "nothing wanted", "wrong dtype", "wrong shape",
                            "NULL outputs", "small workspace"};
    for (int v = 0; v < 6; v++) {
        mas_status got[2];
        for (int dev = 0; dev < 2; dev++) {
            mas_gauss_align_args a = args_of(dev);
            mas_gauss_soft_outputs o = outs_of(dev, v < 4 ? v : 0);
            size_t ws = dev ? mas_forward_sum_gaussian_cuda_workspace_size(&a)
                            : mas_forward_sum_gaussian_cpu_workspace_size(&a, 1);
            DevBuf dw(ws);
            std::vector<unsigned char> hw(ws);
            if (v == 5) ws -= 1;
            const mas_gauss_soft_outputs *op = v == 4 ? nullptr : &o;
            mas_error err;
            got[dev] = dev ? mas_forward_sum_gaussian_cuda(&a, op, dw.p, ws, nullptr, nullptr)
                           : mas_forward_sum_gaussian_cpu(&a, op, hw.data(), ws, 1, &err);
        }
        CUDA_OK(cudaDeviceSynchronize());
        CHECK(got[0] == got[1] && (v == 0) == (got[1] == MAS_OK), "%s: cpu %d cuda %d",
              names[v], (int)got[0], (int)got[1]);
    }
}

/* The workspace from the size function alone (no device), as mas.h states
 * it: two blocks [B, K, T] with K <= max(256, 6 ceil(sqrt S) + 64), the
 * coefficients, checkpoints, columns, mu/var, 1/var and the float64 token
 * sums, the sweep's links; never the [B, T, S] matrix once S >= 4 K. */
static void workspace_bounds() {
    check_workspaces("forward_sum_gaussian", mas_forward_sum_gaussian_cuda_workspace_size,
                     [](int64_t B, int64_t T, int64_t S, int64_t J) {
                         const double K = fmax(256.0, 6.0 * ceil(sqrt((double)S)) + 64);
                         const double bt = (double)B * T;
                         const double parts =
                             bt * (2 * K * 4 + (2 * J + 1) * 4 + 4 * ceil(S / 128.0) + 8 +
                                   2 * J * 4 + 2 * J * 8 + 8) +
                             B * (T / 32.0 + 1) * (K + 2) * 16 + B * (2 * J + 1) * 3 * 4 + 65536;
                         return S >= 4 * K ? fmin(parts, 4.0 * bt * S - 1) : parts;
                     });
}

int main(int argc, char **argv) {
    bool small = false;
    workspace_bounds();
    if (!test_start(argc, argv, &small)) return g_failures ? 1 : 0;
    host_checks();
    const mas_dtype zts[4] = {MAS_FLOAT32, MAS_FLOAT64, MAS_FLOAT16, MAS_BFLOAT16};
    const int n = small ? 16 : 80;
    for (int k = 0; k < n; k++) {
        Case c;
        c.zt = zts[k % 4];
        c.mt = chance(0.5) ? MAS_FLOAT32 : MAS_FLOAT64;
        c.B = irand(1, small ? 3 : 5);
        c.T = irand(1, small ? 140 : 300);
        c.S = c.T + irand(0, small ? 200 : 600);
        c.J = chance(0.5) ? irand(1, 8) : irand(9, 90);
        c.frame_major = chance(0.3);
        c.shared_model = chance(0.2);
        c.variance = chance(0.3);
        c.nan_frame = chance(0.15) ? 0.3 : 0;
        c.bad_model = chance(0.05) ? 1 : 0;
        c.want = chance(0.7) ? 15 : (int)irand(1, 15);
        c.ys = nullptr;
        run_case(c);
    }
    /* long items (many blocks of frames, many segments of tokens) */
    const Case fixed[] = {
        {2, 300, 1500, 80, MAS_FLOAT64, MAS_FLOAT64, false, false, false, 0, 0, 15, nullptr},
        {3, 150, 800, 80, MAS_FLOAT32, MAS_FLOAT32, false, false, false, 0, 0, 15, nullptr},
        {2, 520, 2100, 16, MAS_FLOAT64, MAS_FLOAT32, true, true, true, 0, 0, 15, nullptr},
        {2, 64, 64, 80, MAS_FLOAT32, MAS_FLOAT32, false, false, false, 0, 0, 15, nullptr}, /* X = Y */
        {2, 1, 300, 5, MAS_FLOAT64, MAS_FLOAT64, false, true, false, 0, 0, 15, nullptr},
        {2, 40, 700, 200, MAS_FLOAT32, MAS_FLOAT64, false, false, false, 0, 0, 15, nullptr}, /* J > 128 */
    };
    for (const Case &c : fixed)
        if (!small || c.T * c.S <= 200000) run_case(c);
    /* items ending on both sides of the block edges (blocks of 6 sqrt(S)
     * frames rounded up to 16: 112 at S = 300, edges at 112 and 224) */
    static const int64_t edges[12] = {63, 64, 65, 111, 112, 113, 127, 128, 129, 223, 224, 225};
    for (mas_dtype zt : {MAS_FLOAT64, MAS_FLOAT32}) {
        Case c = {12, 60, 300, 7, zt, zt, false, false, false, 0, 0, 15, edges};
        run_case(c);
    }
    printf("largest error / tolerance: float32 %.3g, float64 %.3g\n", g_ratio[0], g_ratio[1]);
    printf("%lld checks, %lld failed\n", (long long)g_checks, (long long)g_failures);
    return g_failures ? 1 : 0;
}
