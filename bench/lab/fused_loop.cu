/* Lab driver: the wall a call of back-to-back mas_align_gaussian_cuda calls
 * from C (CUDA events around loops of N calls, the best of three), for an
 * A/B of two builds of libmas.a that needs no Python module on the device:
 * each side's binary is built here (nvcc, sm_90) and carried. Prints, for
 * each shape (Glow-TTS inputs of bench/lab/glow_inputs.h, full lengths) and
 * precision, ms a call and a hash of the durations, indices and scores
 * (equal on both sides when a change keeps the bits). Session 30: the
 * device's Python builds took ~100 s of a call whose machine start had
 * already taken 200-400 s of the session's device time.
 * Build: nvcc -std=c++17 -O2 -arch=sm_90 -Iinclude -Itests/c -Itests/cuda
 *        -Ibench/lab bench/lab/fused_loop.cu <build>/libmas.a -lm -lpthread
 * Run:   fused_loop [N] (default 40): B=32 T=150 S=800, B=32 T=512 S=2048,
 *        B=16 T=1024 S=4096 (D=80); MAS_LOOP_SHAPES="B T S D;..." for others
 *        (session 35: T=150 at smaller D, the period against the products). */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <vector>

#include "cuda_check.h"
#include "mas.h"
#include "test_common.h"
#include "fused_test_data.h"
#include "glow_inputs.h"

static uint64_t fnv(uint64_t h, const void *p, size_t n) {
    const unsigned char *c = (const unsigned char *)p;
    for (size_t i = 0; i < n; i++) h = (h ^ c[i]) * 1099511628211ull;
    return h;
}

int main(int argc, char **argv) {
    const int n = argc > 1 ? atoi(argv[1]) : 40;
    std::vector<std::vector<long long>> shapes = {
        {32, 150, 800, 80}, {32, 512, 2048, 80}, {16, 1024, 4096, 80}};
    if (const char *e = getenv("MAS_LOOP_SHAPES")) {
        shapes.clear();
        long long b, t, s, d;
        int used = 0;
        while (sscanf(e, " %lld %lld %lld %lld%n", &b, &t, &s, &d, &used) == 4) {
            shapes.push_back({b, t, s, d});
            e += used;
            while (*e == ' ' || *e == ';') e++;
        }
    }
    for (const auto &sh : shapes) {
        const GlowInputs in(sh[0], sh[1], sh[2], sh[3]);
        const mas_hard_outputs o = in.outputs();
        for (int32_t precision : {MAS_PRECISION_DEFAULT, MAS_PRECISION_TF32}) {
            const mas_gauss_align_args a = in.args(precision);
            const size_t ws = mas_align_gaussian_cuda_workspace_size(&a);
            DevBuf w(ws), word(8);
            CUDA_OK(cudaMemset(word.p, 0xff, 8));
            auto call = [&]() {
                if (mas_align_gaussian_cuda(&a, &o, w.p, ws, nullptr, (uint64_t *)word.p) != MAS_OK) {
                    printf("call failed\n");
                    exit(1);
                }
            };
            const float ms = loop_ms(call, n, 3);
            std::vector<int32_t> dur((size_t)(in.B * in.T)), idx((size_t)(in.B * in.S));
            std::vector<float> score((size_t)in.B);
            uint64_t err = 0;
            CUDA_OK(cudaMemcpy(dur.data(), in.ddur.p, dur.size() * 4, cudaMemcpyDeviceToHost));
            CUDA_OK(cudaMemcpy(idx.data(), in.didx.p, idx.size() * 4, cudaMemcpyDeviceToHost));
            CUDA_OK(cudaMemcpy(score.data(), in.dscore.p, score.size() * 4, cudaMemcpyDeviceToHost));
            CUDA_OK(cudaMemcpy(&err, word.p, 8, cudaMemcpyDeviceToHost));
            uint64_t h = 14695981039346656037ull;
            h = fnv(h, dur.data(), dur.size() * 4);
            h = fnv(h, idx.data(), idx.size() * 4);
            h = fnv(h, score.data(), score.size() * 4);
            printf("| B=%lld T=%lld S=%lld D=%lld | %s | %.4f | %010llx | %s |\n", (long long)in.B,
                   (long long)in.T, (long long)in.S, sh[3],
                   precision == MAS_PRECISION_TF32 ? "tf32" : "float32", ms,
                   (unsigned long long)(h & 0xffffffffffull),
                   err == ~0ull ? "no error" : "ERROR WORD SET");
        }
    }
    return 0;
}
