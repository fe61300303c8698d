/* The fused labs' inputs (bench/lab/fused_stamps.cu, backtrack_timeline.cu):
 * Glow-TTS's layouts and float32, z [B, J, S] standard normal, mean [B, J, T]
 * standard normal, log_std [B, J, T] 0.3 times standard normal (the same
 * random numbers for the same shape: the generator is seeded here), every
 * item at full length, on the device with room for the outputs. Include
 * after tests/cuda's cuda_check.h, test_common.h and fused_test_data.h. */
#ifndef MAS_BENCH_LAB_GLOW_INPUTS_H
#define MAS_BENCH_LAB_GLOW_INPUTS_H

#include <stdlib.h>
#include <string.h>

#include <vector>

struct GlowInputs {
    int64_t B, T, S, J;
    DevBuf dz, dm, dl, dx, dy, ddur, didx, dscore;
    GlowInputs(int64_t b, int64_t t, int64_t s, int64_t j)
        : B(b), T(t), S(s), J(j), dz((size_t)(b * j * s) * 4), dm((size_t)(b * j * t) * 4),
          dl((size_t)(b * j * t) * 4), dx((size_t)b * 8), dy((size_t)b * 8),
          ddur((size_t)(b * t) * 4), didx((size_t)(b * s) * 4), dscore((size_t)b * 4) {
        g_rng = 88172645463325252ull;
        std::vector<float> z((size_t)(B * J * S)), m((size_t)(B * J * T)), l((size_t)(B * J * T));
        for (auto &v : z) v = (float)nrand();
        for (auto &v : m) v = (float)nrand();
        for (auto &v : l) v = 0.3f * (float)nrand();
        std::vector<int64_t> xl((size_t)B, T), yl((size_t)B, S);
        upload(dz, z.data(), z.size() * 4);
        upload(dm, m.data(), m.size() * 4);
        upload(dl, l.data(), l.size() * 4);
        upload(dx, xl.data(), (size_t)B * 8);
        upload(dy, yl.data(), (size_t)B * 8);
    }
    /* a driver's `[B T S]` arguments when all three are given, else the
     * defaults; D = 80 */
    GlowInputs(int argc, char **argv, int64_t b, int64_t t, int64_t s)
        : GlowInputs(argc > 3 ? atoll(argv[1]) : b, argc > 3 ? atoll(argv[2]) : t,
                     argc > 3 ? atoll(argv[3]) : s, 80) {}
    /* durations, indices and score (no dense path) */
    mas_hard_outputs outputs() const {
        return hard_outputs(nullptr, (int32_t *)ddur.p, (int32_t *)didx.p, dscore.p, B, T, S);
    }
    mas_gauss_align_args args(int32_t precision) const {
        mas_gauss_align_args a = glow_args(dz.p, dm.p, dl.p, (const int64_t *)dx.p,
                                           (const int64_t *)dy.p, B, T, S, J);
        a.precision = precision;
        return a;
    }
};

/* ms a call of `call`: five warm-up calls, then the best of `rounds` loops
 * of n back-to-back calls timed by CUDA events around each loop */
template <class F> static float loop_ms(F call, int n, int rounds) {
    for (int k = 0; k < 5; k++) call();
    cudaEvent_t e0, e1;
    CUDA_OK(cudaEventCreate(&e0));
    CUDA_OK(cudaEventCreate(&e1));
    float best = 1e30f;
    for (int r = 0; r < rounds; r++) {
        CUDA_OK(cudaEventRecord(e0));
        for (int k = 0; k < n; k++) call();
        CUDA_OK(cudaEventRecord(e1));
        CUDA_OK(cudaEventSynchronize(e1));
        float ms = 0;
        CUDA_OK(cudaEventElapsedTime(&ms, e0, e1));
        if (ms < best) best = ms;
    }
    CUDA_OK(cudaEventDestroy(e0));
    CUDA_OK(cudaEventDestroy(e1));
    return best / n;
}

#endif
