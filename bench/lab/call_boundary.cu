/* Lab (session 29): what happens between two fused calls of a loop, from the
 * event logs that bench/lab/call_boundary.patch adds (lib/cuda/lab_log.cuh:
 * the coefficient blocks' start, first pass, wait and end; each forward
 * slab's start and end; the streamed backtrack's entry, last flag, stages,
 * tops' chain, outputs, runs and final wait), with MAS_LAB_EARLY forcing the
 * next-call overlap (fused.cu's `early`: the backtrack's trigger at the last
 * slab's flag and the coefficient kernel's HOLD) on (1) or off (0).
 *
 * Why: in session 29 that overlap made float32 calls with 128-token slabs
 * (B=32 T=512 S=2048) ~1% slower while the same form in TF32 gained ~1%,
 * and the coefficient and backtrack work is the same in both.
 *
 * Device: DRIVER=bench/lab/call_boundary.cu PATCHES=bench/lab/call_boundary.patch
 * SHAPES='32 512 2048;32 150 800' bash bench/lab/fused_stamps.sh
 * `call_boundary [B T S]` (default 32 512 2048), D=80, full lengths, for
 * float32 and TF32, early 0 and 1: the wall a call over 40 back-to-back
 * calls (CUDA events), then three calls back to back whose events it
 * prints around the boundary of the second and third, in us from the
 * second call's forward end (its last slab's end). */
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <vector>

/* tests/cuda's helpers (CUDA_OK, the random numbers, t3, DevBuf, upload,
 * hard_outputs); fused_test_data.h after test_common.h, whose helpers it uses */
#include "cuda_check.h"
#include "mas.h"
#include "test_common.h"
#include "fused_test_data.h"
#include "glow_inputs.h" /* GlowInputs */

struct LabEvent { /* lib/cuda/lab_log.cuh's */
    unsigned long long t;
    int kind, id;
};
extern "C" int mas_lab_log_coef(LabEvent *out, int cap, int *n);
extern "C" int mas_lab_log_fused(LabEvent *out, int cap, int *n);
extern "C" int mas_lab_log_bt(LabEvent *out, int cap, int *n);

static std::vector<LabEvent> read_log(int (*f)(LabEvent *, int, int *)) {
    std::vector<LabEvent> v(1 << 16);
    int n = 0;
    if (f(v.data(), (int)v.size(), &n)) {
        printf("log read failed\n");
        exit(1);
    }
    v.resize((size_t)n);
    std::sort(v.begin(), v.end(), [](const LabEvent &a, const LabEvent &b) { return a.t < b.t; });
    return v;
}

int main(int argc, char **argv) {
    const GlowInputs in(argc, argv, 32, 512, 2048);
    const int64_t B = in.B, T = in.T, S = in.S;
    DevBuf dword(8);
    const mas_hard_outputs o = in.outputs();
    uint64_t *word = (uint64_t *)dword.p;
    for (int32_t precision : {MAS_PRECISION_DEFAULT, MAS_PRECISION_TF32})
        for (const char *early : {"0", "1"}) {
            setenv("MAS_LAB_EARLY", early, 1);
            const mas_gauss_align_args a = in.args(precision);
            const size_t ws = mas_align_gaussian_cuda_workspace_size(&a);
            DevBuf w(ws);
            CUDA_OK(cudaMemset(word, 0xff, 8));
            auto call = [&]() {
                if (mas_align_gaussian_cuda(&a, &o, w.p, ws, nullptr, word) != MAS_OK) exit(1);
            };
            const int calls = 40;
            const float ms = loop_ms(call, calls, 1);
            read_log(mas_lab_log_coef);
            read_log(mas_lab_log_fused);
            read_log(mas_lab_log_bt);
            for (int k = 0; k < 3; k++) call();
            const std::vector<LabEvent> cf = read_log(mas_lab_log_coef),
                                        fw = read_log(mas_lab_log_fused),
                                        bt = read_log(mas_lab_log_bt);
            /* the calls: the coefficient events in three clusters (a gap of
             * 30 us apart); a forward event the call of the last cluster
             * started before it; a backtrack event its item's last entry's */
            std::vector<unsigned long long> start;
            for (size_t i = 0; i < cf.size(); i++)
                if (i == 0 || cf[i].t - cf[i - 1].t > 30000) start.push_back(cf[i].t);
            if (start.size() != 3) {
                printf("B=%lld T=%lld S=%lld precision %d early %s: %zu coefficient clusters, not 3\n",
                       (long long)B, (long long)T, (long long)S, (int)precision, early, start.size());
                continue;
            }
            auto call_of = [&](unsigned long long t) {
                int k = 0;
                while (k + 1 < 3 && start[k + 1] <= t) k++;
                return k;
            };
            /* [call][kind] -> times */
            std::vector<std::vector<std::vector<double>>> at(3, std::vector<std::vector<double>>(32));
            for (const LabEvent &e : cf) at[call_of(e.t)][e.kind].push_back((double)e.t);
            for (const LabEvent &e : fw) at[call_of(e.t)][e.kind].push_back((double)e.t);
            std::vector<int> item_call((size_t)B, 0);
            for (const LabEvent &e : bt) {
                if (e.kind == 20) item_call[(size_t)e.id] = call_of(e.t);
                at[item_call[(size_t)e.id]][e.kind].push_back((double)e.t);
            }
            auto lo = [&](int c, int k) {
                const auto &v = at[c][k];
                return v.empty() ? -1e18 : *std::min_element(v.begin(), v.end());
            };
            auto hi = [&](int c, int k) {
                const auto &v = at[c][k];
                return v.empty() ? -1e18 : *std::max_element(v.begin(), v.end());
            };
            const double t0 = hi(1, 11); /* the second call's forward end */
            auto us = [&](double t) { return t < -1e17 ? NAN : (t - t0) / 1e3; }; /* nan: none */
            printf("B=%lld T=%lld S=%lld %s early=%s: %.4f ms a call (CUDA events, %d back to back); "
                   "us from call 2's forward end:\n",
                   (long long)B, (long long)T, (long long)S,
                   precision == MAS_PRECISION_TF32 ? "tf32" : "float32", early, ms, calls);
            printf("  call 2: coefficient start %.1f, forward first slab start %.1f; backtrack, last of "
                   "the items: last flag seen %.1f, stages %.1f, tops %.1f, outputs %.1f, runs %.1f, "
                   "final wait returned %.1f\n",
                   us(lo(1, 0)), us(lo(1, 10)), us(hi(1, 21)), us(hi(1, 22)), us(hi(1, 23)),
                   us(hi(1, 24)), us(hi(1, 25)), us(hi(1, 26)));
            printf("  call 3 coefficients: blocks start %.1f .. %.1f, first pass made (held) by %.1f, "
                   "wait returned %.1f .. %.1f, blocks end %.1f .. %.1f\n",
                   us(lo(2, 0)), us(hi(2, 0)), us(hi(2, 3)), us(lo(2, 1)), us(hi(2, 1)),
                   us(lo(2, 2)), us(hi(2, 2)));
            printf("  call 3 forward: slabs start %.1f .. %.1f, first slab end %.1f, forward end %.1f "
                   "(the period: call 2's forward end to call 3's)\n",
                   us(lo(2, 10)), us(hi(2, 10)), us(lo(2, 11)), us(hi(2, 11)));
        }
    return 0;
}
