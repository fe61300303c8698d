/* The forward sweep's tile loader (lib/cuda/hard_forward.cuh), run on the
 * host (it is __host__ __device__; without cp.async it copies synchronously,
 * same addresses): every band cell of a chunk lands where the sweep reads it,
 * no cell outside the lengths is read (those hold a poison value that must
 * never reach the tile; off-band cells inside the lengths may be read along
 * with their band neighbours), and the fast path for chunks wholly inside the
 * band gives the same tile bytes as the checked path. Random shapes, lengths, chunks,
 * all three loaders, float32/float64/float16.
 *
 * Usage: test_hard_loader [seed]. Needs no GPU. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <vector>

#include "cuda/hard_forward.cuh"

using namespace mas_cuda;

static uint64_t rng_state;
static uint64_t next_u64() {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}
static int64_t uniform(int64_t lo, int64_t hi) { return lo + (int64_t)(next_u64() % (uint64_t)(hi - lo + 1)); }

static long inside_chunks = 0;

/* The value a band cell holds: small integers, exact in every dtype. */
static float cell_code(int64_t i, int64_t j) { return (float)((i * 7 + j * 3) % 50); }
static const float kPoison = -1000.0f;
static const float kOffBand = -500.0f;

template <typename TV, int K, int MODE> static int check(int iterations) {
    using G = TileGeom<TV, K, MODE>;
    int failures = 0;
    for (int it = 0; it < iterations; ++it) {
        int64_t T = uniform(1, 400), S = uniform(T, 4 * T + 40);
        int64_t X = uniform(1, T), Y = uniform(X, S);
        int64_t s1, s2;
        if (MODE == LOAD_BTS) {
            s2 = 1;
            s1 = (S + 7) / 8 * 8 + 8 * uniform(0, 2); /* 16-byte aligned rows for any dtype */
        } else if (MODE == LOAD_BST) {
            s1 = 1;
            s2 = (T + 7) / 8 * 8 + 8 * uniform(0, 2);
        } else {
            s1 = uniform(0, 1) ? S + 3 : 1;
            s2 = s1 == 1 ? T + 5 : 1;
        }
        std::vector<TV> v((size_t)((T - 1) * s1 + (S - 1) * s2 + 1));
        for (int64_t i = 0; i < T; i++)
            for (int64_t j = 0; j < S; j++) {
                bool band = i < X && j < Y && i <= j && i >= j - (Y - X);
                bool inside = i < X && j < Y;
                v[(size_t)(i * s1 + j * s2)] = (TV)(band ? cell_code(i, j) : inside ? kOffBand : kPoison);
            }
        ForwardArgs a;
        memset(&a, 0, sizeof a);
        a.s1 = s1;
        a.s2 = s2;
        a.frames_inner = llabs(s2) <= llabs(s1);
        int64_t base = uniform(0, (X - 1) / G::ROWS) * G::ROWS;
        int64_t j0 = uniform(0, (Y - 1) / kChunk) * kChunk;
        std::vector<unsigned char> checked(G::BYTES, 0x5c), fast(G::BYTES, 0x5c);
        for (int lane = 0; lane < 32; ++lane)
            load_tile<TV, K, MODE>(checked.data(), a, v.data(), base, j0, X, Y, lane, false);
        for (int r = 0; r < G::ROWS; r++)
            for (int f = 0; f < kChunk; f++) {
                int64_t i = base + r, j = j0 + f;
                int off = G::TOKEN_ROWS ? token_row_offset<TV, K, MODE>(r, f) : f * G::ROW_BYTES + r * G::ES;
                TV got;
                memcpy(&got, &checked[(size_t)off], sizeof got);
                bool band = i < X && j < Y && i <= j && i >= j - (Y - X);
                float g = (float)got;
                if ((band && g != cell_code(i, j)) || (!band && g == kPoison)) {
                    if (failures++ < 5)
                        printf("FAIL %s K=%d mode %d: X=%lld Y=%lld cell (%lld,%lld) %s\n", G::ES == 8 ? "f64" : G::ES == 4 ? "f32" : "f16",
                               K, MODE, (long long)X, (long long)Y, (long long)i, (long long)j,
                               band ? "band cell missing" : "read outside the lengths");
                }
            }
        if (chunk_inside_band(base, G::ROWS, j0, X, Y)) {
            inside_chunks++;
            for (int lane = 0; lane < 32; ++lane)
                load_tile<TV, K, MODE>(fast.data(), a, v.data(), base, j0, X, Y, lane, true);
            if (memcmp(checked.data(), fast.data(), checked.size()) != 0 && failures++ < 5)
                printf("FAIL mode %d: fast path differs: X=%lld Y=%lld base=%lld j0=%lld\n", MODE,
                       (long long)X, (long long)Y, (long long)base, (long long)j0);
        }
    }
    return failures;
}

int main(int argc, char **argv) {
    uint64_t seed = argc > 1 ? strtoull(argv[1], NULL, 10) : (uint64_t)time(NULL);
    printf("test_hard_loader: seed %llu\n", (unsigned long long)seed);
    rng_state = seed * 0x9E3779B97F4A7C15ull | 1;
    int failures = 0;
    failures += check<float, 2, LOAD_BTS>(3000);
    failures += check<float, 2, LOAD_BST>(3000);
    failures += check<float, 2, LOAD_ANY>(1000);
    failures += check<double, 2, LOAD_BTS>(2000);
    failures += check<double, 2, LOAD_BST>(2000);
    failures += check<__half, 2, LOAD_BTS>(2000);
    failures += check<__half, 2, LOAD_BST>(2000);
    printf("%ld chunks wholly inside the band compared; %s\n", inside_chunks,
           failures ? "FAILED" : "all passed");
    if (failures) printf("replay with seed %llu\n", (unsigned long long)seed);
    return failures != 0;
}
