/* Host emulation of the cluster backtrack (lib/cuda/hard_backtrack_block.cuh,
 * a lab patch until session 22), phase by phase (each block's copy, fold,
 * walks and `below`, then each block's chain through the blocks above and
 * its frames' tokens), against the plain backtrack
 * (the rules of mas.h: a token equal to its frame moves, token 0 never) on
 * random decision words, for clusters of 1, 2, 4 and 8 blocks. It passes
 * (session 20): the lab kernel's fault was not in its method (it was an
 * inline-asm register sharing; the patch's header).
 *   g++ -O2 -std=c++17 bench/lab/backtrack_cluster_emulate.cpp -o /tmp/e && /tmp/e [seed] */
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

static uint32_t brev(uint32_t x) {
    uint32_t r = 0;
    for (int i = 0; i < 32; i++)
        if (x >> i & 1) r |= 1u << (31 - i);
    return r;
}
/* __funnelshift_r: the low word of (hi:lo) >> (sh & 31) */
static uint32_t funnel_r(uint32_t lo, uint32_t hi, unsigned sh) {
    return (uint32_t)((((uint64_t)hi << 32) | lo) >> (sh & 31));
}
static int popc(uint32_t x) { return __builtin_popcount(x); }

struct Block {
    std::vector<uint32_t> smem;
    int w0, nw;
};

int main(int argc, char **argv) {
    const unsigned seed = argc > 1 ? (unsigned)atoi(argv[1]) : 1u;
    srand(seed);
    int fails = 0, items = 0;
    for (int trial = 0; trial < 3000; trial++) {
        const int T = 1 + rand() % 150, S = T + rand() % 300;
        const int X = 1 + rand() % T, Y = X + rand() % (S - X + 1);
        const int groups = (T + 31) / 32, tp = groups * 32;
        std::vector<uint32_t> bits((size_t)groups * S); /* [groups][S], as the forward leaves them */
        for (auto &w : bits) w = (uint32_t)rand() ^ ((uint32_t)rand() << 16);
        auto bit = [&](int t, int f) { return bits[(size_t)(t / 32) * S + f] >> (t % 32) & 1u; };
        std::vector<int> ref(Y);
        for (int t = X - 1, f = Y - 1; f >= 0; --f) {
            ref[f] = t;
            const bool move = t != 0 && (t == f || bit(t, f));
            t -= move;
        }
        if (ref[0] != 0) continue; /* no path the rules allow: the forward would not leave these bits */
        items++;
        for (int c : {1, 2, 4, 8}) {
            const int wmax = ((S + 31) / 32 + c - 1) / c, row = 32 * wmax;
            const int live = (X + 31) / 32, windows = (Y + 31) / 32;
            std::vector<Block> blk(c);
            for (int rank = 0; rank < c; rank++) { /* up to the cluster's first barrier */
                Block &B = blk[rank];
                B.smem.assign((size_t)(1 + groups) * row + (size_t)wmax * tp + tp + wmax, 0xdeadbeefu);
                uint32_t *words = B.smem.data() + row, *moves = words + groups * row;
                int *below = (int *)(moves + wmax * tp);
                B.w0 = rank * windows / c;
                B.nw = (rank + 1) * windows / c - B.w0;
                const int f0 = 32 * B.w0, f1 = std::min(32 * (B.w0 + B.nw), Y);
                for (int r = 0; r < live; r++) /* the 16-byte copies */
                    for (int f = f0; f < f1; f += 4)
                        for (int k = 0; k < 4 && f + k < S; k++)
                            words[r * row + (f - f0) + k] = bits[(size_t)r * S + f + k];
                for (int r = -1; r < live; r++)
                    for (int f = f0; f < 32 * (B.w0 + B.nw); f++) {
                        uint32_t w = r >= 0 && f < Y ? words[r * row + (f - f0)] : 0u;
                        const int d = f - 32 * r;
                        if (r >= 0 && d >= 0 && d < 32) w |= 1u << d;
                        if (r == 0) w &= ~1u;
                        words[r * row + (f - f0)] = brev(w);
                    }
                for (int t = 0; t < B.nw * live; t++) {
                    const int i = t / live, g = t - i * live;
                    const uint32_t *lo = words + (g - 1) * row + 32 * i, *hi = lo + row;
                    for (int lane = 0; lane < 32; lane++) {
                        uint32_t m = 1u, mv = 0u;
                        for (int q = 7; q >= 0; q--)
                            for (int e = 3; e >= 0; e--)
                                if (m & funnel_r(hi[4 * q + e], lo[4 * q + e], 31u - lane)) {
                                    m <<= 1;
                                    mv |= 1u << (31 - 4 * q - e);
                                }
                        moves[i * tp + 32 * g + lane] = mv;
                    }
                }
                if (rank > 0)
                    for (int t = 0; t < 32 * live; t++) {
                        int tok = t;
                        for (int i = B.nw - 1; i >= 0; i--) tok -= popc(moves[i * tp + tok]);
                        below[t] = tok;
                    }
            }
            std::vector<int> got(Y, -7);
            for (int rank = 0; rank < c; rank++) { /* after it */
                Block &B = blk[rank];
                uint32_t *moves = B.smem.data() + row + groups * row;
                int *tops = (int *)(moves + wmax * tp) + tp;
                int top = X - 1;
                for (int q = c - 1; q > rank; q--)
                    top = ((int *)(blk[q].smem.data() + row + groups * row + wmax * tp))[top];
                for (int i = B.nw - 1; i >= 0; i--) {
                    tops[i] = top;
                    top -= popc(moves[i * tp + top]);
                }
                for (int f = 32 * B.w0; f < std::min(32 * (B.w0 + B.nw), Y); f++) {
                    const int i = (f >> 5) - B.w0, k = 31 - (f & 31);
                    got[f] = tops[i] - popc(moves[i * tp + tops[i]] & ((1u << k) - 1u));
                }
            }
            if (got != ref) {
                if (fails < 5) printf("MISMATCH T=%d S=%d X=%d Y=%d c=%d\n", T, S, X, Y, c);
                fails++;
            }
        }
    }
    printf("seed %u: %d items x 4 cluster sizes, %d mismatches\n", seed, items, fails);
    return fails != 0;
}
