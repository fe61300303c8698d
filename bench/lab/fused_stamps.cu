/* Lab (session 23): where a tile's cycles go in the fused forward's split
 * kernel (64-token slabs, a sweep warp of its own), from the stamps that
 * bench/lab/fused_stamps.patch adds (clock64 around the sweep warp's and
 * the compute warps' work of each tile and around each tile's barrier).
 *
 * Device: run(command="bash bench/lab/fused_stamps.sh"), which builds
 * libmas.a with the patch in a copy of the tree and this driver against
 * it; `fused_stamps [B T S]` (default 32 150 800) runs both precisions.
 * Prints, a tile and averaged over the blocks of 20 calls: the sweep warp's
 * busy cycles, warp 1's (a compute warp on its own scheduler), warp 4's
 * (scheduler 0, the sweep warp's, in the float32 form; idle in TF32), the
 * tile period (to the barrier's end), and each block's set-up before its
 * first tile; also the wall a call (CUDA events). */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

/* tests/cuda's helpers: CUDA_OK, the random numbers, t3, DevBuf, upload,
 * hard_outputs */
#include "cuda_check.h"
#include "mas.h"
#include "test_common.h"
#include "fused_test_data.h"
#include "glow_inputs.h" /* GlowInputs */

extern "C" int mas_lab_fused_stamps(unsigned long long *out);

int main(int argc, char **argv) {
    const GlowInputs in(argc, argv, 32, 150, 800);
    const int64_t B = in.B, T = in.T, S = in.S;
    DevBuf dword(8);
    int clock_khz = 0;
    CUDA_OK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0));
    const mas_hard_outputs o = in.outputs();
    for (int prec = 0; prec < 2; prec++) {
        const mas_gauss_align_args a = in.args(prec ? MAS_PRECISION_TF32 : MAS_PRECISION_DEFAULT);
        const size_t ws = mas_align_gaussian_cuda_workspace_size(&a);
        DevBuf w(ws);
        uint64_t *word = (uint64_t *)dword.p;
        CUDA_OK(cudaMemset(word, 0xff, 8));
        const int calls = 20;
        unsigned long long st[16];
        for (int k = 0; k < 5; k++) mas_align_gaussian_cuda(&a, &o, w.p, ws, nullptr, word);
        if (mas_lab_fused_stamps(st)) return 1;
        cudaEvent_t e0, e1;
        CUDA_OK(cudaEventCreate(&e0));
        CUDA_OK(cudaEventCreate(&e1));
        CUDA_OK(cudaEventRecord(e0));
        for (int k = 0; k < calls; k++) {
            const mas_status s = mas_align_gaussian_cuda(&a, &o, w.p, ws, nullptr, word);
            if (s != MAS_OK) {
                fprintf(stderr, "call: %s\n", mas_status_string(s));
                return 1;
            }
        }
        CUDA_OK(cudaEventRecord(e1));
        CUDA_OK(cudaEventSynchronize(e1));
        float ms = 0;
        CUDA_OK(cudaEventElapsedTime(&ms, e0, e1));
        if (mas_lab_fused_stamps(st)) return 1;
        const double tiles = (double)st[4], blocks = (double)st[5];
        printf("B=%lld T=%lld S=%lld %s: %.4f ms a call; %llu blocks, %.1f tiles a block "
               "(cycles a tile; clock %d MHz)\n",
               (long long)B, (long long)T, (long long)S, prec ? "tf32" : "float32", ms / calls,
               (unsigned long long)(blocks / calls), tiles / blocks, clock_khz / 1000);
        printf("  sweep warp %.0f | warp 1 %.0f | warp 4 %.0f | period %.0f | set-up a block %.0f\n",
               st[0] / tiles, st[1] / tiles, st[2] / tiles, st[3] / tiles, st[6] / blocks);
        printf("  sweep: settle %.0f | chunks %.0f | stores+put %.0f (a tile) | slab 0: sweep %.0f period %.0f over %.0f tiles\n",
               st[7] / tiles, st[8] / tiles, st[9] / tiles, st[10] / (double)st[11], st[12] / (double)st[11], (double)st[11]);
    }
    return 0;
}
