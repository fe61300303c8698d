/* Lab (session 27): where the time after the fused forward goes, from the
 * globaltimer stamps that bench/lab/backtrack_timeline.patch adds (each
 * forward slab's start and end, and the streamed backtrack's entry, each
 * stage's flag seen, the end of its stages, the tops' chain, the outputs,
 * the runs and its dependency wait; lib/cuda/hard_common.cuh's lab_tl).
 *
 * Device: DRIVER=bench/lab/backtrack_timeline.cu
 * PATCHES=bench/lab/backtrack_timeline.patch bash bench/lab/fused_stamps.sh
 * (builds libmas.a with the patch in a copy of the tree and this driver
 * against it). `backtrack_timeline [B T S]` (default 32 512 2048), float32,
 * D=80, full lengths: 20 back-to-back calls (their wall a call by CUDA
 * events), then one call alone, whose stamps it prints, in us from the
 * coefficient kernel's start (its first block's, after its dependency
 * wait; also its last block's end): for the first items, each slab's
 * start, when its coefficients are at hand (with
 * bench/lab/slab_own_coef.patch applied first: when it has made its own)
 * and its end, the backtrack's entry, the stages' flags seen and its
 * steps; then over all items the forward's end (its last slab's), the
 * call's end (the last backtrack's wait done), and the median of each step
 * after an item's last slab. */
#include <cuda_runtime.h>
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

extern "C" int mas_lab_timeline(unsigned long long *out);
extern "C" int mas_lab_timeline_bt(unsigned long long *out);
extern "C" int mas_lab_timeline_coef(unsigned long long *out);

static double median(std::vector<double> v) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

int main(int argc, char **argv) {
    const GlowInputs in(argc, argv, 32, 512, 2048);
    const int64_t B = in.B, T = in.T, S = in.S;
    DevBuf dword(8);
    const mas_hard_outputs o = in.outputs();
    const mas_gauss_align_args a = in.args(MAS_PRECISION_DEFAULT);
    const size_t ws = mas_align_gaussian_cuda_workspace_size(&a);
    DevBuf w(ws);
    uint64_t *word = (uint64_t *)dword.p;
    CUDA_OK(cudaMemset(word, 0xff, 8));
    static unsigned long long fw[64 * 64], bt[64 * 64], cf[2];
    for (int k = 0; k < 5; k++) mas_align_gaussian_cuda(&a, &o, w.p, ws, nullptr, word);
    if (mas_lab_timeline(fw) || mas_lab_timeline_bt(bt) || mas_lab_timeline_coef(cf)) return 1;
    const int calls = 20;
    cudaEvent_t e0, e1;
    CUDA_OK(cudaEventCreate(&e0));
    CUDA_OK(cudaEventCreate(&e1));
    CUDA_OK(cudaEventRecord(e0));
    for (int k = 0; k < calls; k++)
        if (mas_align_gaussian_cuda(&a, &o, w.p, ws, nullptr, word) != MAS_OK) return 1;
    CUDA_OK(cudaEventRecord(e1));
    CUDA_OK(cudaEventSynchronize(e1));
    float ms = 0;
    CUDA_OK(cudaEventElapsedTime(&ms, e0, e1));
    if (mas_lab_timeline(fw) || mas_lab_timeline_bt(bt)) return 1;
    /* the coefficient kernel's stamps span the 20 calls: one more call alone */
    if (mas_lab_timeline_coef(cf)) return 1;
    if (mas_align_gaussian_cuda(&a, &o, w.p, ws, nullptr, word) != MAS_OK) return 1;
    if (mas_lab_timeline(fw) || mas_lab_timeline_bt(bt) || mas_lab_timeline_coef(cf)) return 1;
    const int64_t items = B < 64 ? B : 64;
    unsigned long long t0 = cf[0];
    for (int64_t b = 0; b < items; b++)
        for (int s = 0; s < 16; s++)
            if (fw[b * 64 + 16 + s]) t0 = std::min(t0, fw[b * 64 + 16 + s]);
    auto us = [&](unsigned long long t) { return t ? (double)(t - t0) / 1e3 : -1.0; };
    printf("B=%lld T=%lld S=%lld float32: %.4f ms a call (CUDA events, %d back to back); one call "
           "alone, us from the coefficient kernel's start: its end %.1f\n",
           (long long)B, (long long)T, (long long)S, ms / calls, calls, us(cf[1]));
    printf("item | slab starts | coefficients made (session 28: own) | slab ends\n");
    for (int64_t b = 0; b < std::min<int64_t>(items, 6); b++) {
        printf("%lld |", (long long)b);
        for (int s = 0; s < 16; s++)
            if (fw[b * 64 + 16 + s]) printf(" %.1f", us(fw[b * 64 + 16 + s]));
        printf(" |");
        for (int s = 0; s < 10; s++)
            if (fw[b * 64 + 54 + s]) printf(" %.1f", us(fw[b * 64 + 54 + s]));
        printf(" |");
        for (int s = 0; s < 16; s++)
            if (fw[b * 64 + s]) printf(" %.1f", us(fw[b * 64 + s]));
        printf("\n");
    }
    printf("item | slab ends (64-token slabs at T < 256: read the first) | backtrack entry | stage flags seen | stages done | chain | outputs | runs | wait\n");
    for (int64_t b = 0; b < std::min<int64_t>(items, 6); b++) {
        printf("%lld |", (long long)b);
        for (int s = 0; s < 16; s++)
            if (fw[b * 64 + s]) printf(" %.1f", us(fw[b * 64 + s]));
        printf(" | %.1f |", us(bt[b * 64 + 32]));
        for (int k = 0; k < 16; k++)
            if (bt[b * 64 + 33 + k]) printf(" %.1f", us(bt[b * 64 + 33 + k]));
        printf(" | %.1f | %.1f | %.1f | %.1f | %.1f\n", us(bt[b * 64 + 49]), us(bt[b * 64 + 50]),
               us(bt[b * 64 + 51]), us(bt[b * 64 + 52]), us(bt[b * 64 + 53]));
    }
    double fwd_end = 0, call_end = 0;
    std::vector<double> flag, stages, chain, outs, runs, wait, entry_before;
    for (int64_t b = 0; b < items; b++) {
        double last = 0;
        for (int s = 0; s < 16; s++) last = std::max(last, us(fw[b * 64 + s]));
        int kl = -1;
        for (int k = 0; k < 16; k++)
            if (bt[b * 64 + 33 + k]) kl = k;
        fwd_end = std::max(fwd_end, last);
        call_end = std::max(call_end, us(bt[b * 64 + 53]));
        if (kl < 0) continue;
        entry_before.push_back(last - us(bt[b * 64 + 32]));
        flag.push_back(us(bt[b * 64 + 33 + kl]) - last);
        stages.push_back(us(bt[b * 64 + 49]) - us(bt[b * 64 + 33 + kl]));
        chain.push_back(us(bt[b * 64 + 50]) - us(bt[b * 64 + 49]));
        outs.push_back(us(bt[b * 64 + 51]) - us(bt[b * 64 + 50]));
        runs.push_back(us(bt[b * 64 + 52]) - us(bt[b * 64 + 51]));
        wait.push_back(us(bt[b * 64 + 53]) - us(bt[b * 64 + 52]));
    }
    printf("forward's end %.1f us, the call's end %.1f (tail %.1f); medians over %zu streamed items, us: "
           "entry before its last slab's end %.1f | last flag seen after it %.1f | last stage %.1f | "
           "chain %.1f | outputs %.1f | runs %.1f | wait %.1f\n",
           fwd_end, call_end, call_end - fwd_end, flag.size(), median(entry_before), median(flag),
           median(stages), median(chain), median(outs), median(runs), median(wait));
    return 0;
}
