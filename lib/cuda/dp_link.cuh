/* Links between the blocks of one pipelined sweep on CUDA, shared by hard
 * MAS's forward (hard_forward.cuh: the boundary scores between the blocks of
 * an item) and the soft sweeps (soft_sweep.cuh: the edges between the
 * segments of an item). A value goes as tagged 64-bit words: the consumer
 * that sees the tag it expects has the value, with no flag, no fence and no
 * second round trip through L2. */
#ifndef MAS_CUDA_DP_LINK_CUH
#define MAS_CUDA_DP_LINK_CUH

#include <stdint.h>
#include <string.h>

namespace mas_cuda {

/* A value as 32-bit pieces, each sent in a 64-bit word under a 32-bit tag
 * (callers use tags from 1, so a zeroed buffer holds nothing valid): a word
 * is stored and loaded whole, so a matching tag means the piece is there. */
template <typename E> struct Link {
    static constexpr int N = (int)(sizeof(E) / 4);
    __device__ static void put(volatile unsigned long long *slot, const E &e, unsigned tag) {
        uint32_t w[N];
        memcpy(w, &e, sizeof(E));
#pragma unroll
        for (int k = 0; k < N; k++) slot[k] = ((unsigned long long)tag << 32) | w[k];
    }
    __device__ static void fetch(const volatile unsigned long long *slot, unsigned long long (&raw)[N]) {
#pragma unroll
        for (int k = 0; k < N; k++) raw[k] = slot[k];
    }
    __device__ static bool ok(const unsigned long long (&raw)[N], unsigned tag) {
        bool r = true;
#pragma unroll
        for (int k = 0; k < N; k++) r = r && (unsigned)(raw[k] >> 32) == tag;
        return r;
    }
    __device__ static E value(const unsigned long long (&raw)[N]) {
        uint32_t w[N];
#pragma unroll
        for (int k = 0; k < N; k++) w[k] = (uint32_t)raw[k];
        E e;
        memcpy(&e, w, sizeof(E));
        return e;
    }
    /* Warp-wide: each lane that wants its entry (raw, fetched from slot
     * earlier, ideally a chunk or tile ago) gets it, re-reading until the
     * tag matches, i.e. until the producer has written it; lanes that want
     * nothing get absent. All 32 lanes must call. */
    __device__ static E settle(const volatile unsigned long long *slot, unsigned long long (&raw)[N],
                               unsigned tag, bool want, E absent) {
        bool ready = !want || ok(raw, tag);
        while (!__all_sync(0xffffffffu, ready)) { /* the producer is behind */
            if (!ready) {
                fetch(slot, raw);
                ready = ok(raw, tag);
            }
        }
        return want ? value(raw) : absent;
    }
};

/* A count one warp publishes and another waits on, both in shared memory:
 * the soft sweep's backpressure (a producer waits until its consumer has
 * read far enough into their ring of tagged entries). With the tagged
 * entries above, the only accesses between warps that no barrier orders;
 * compute-sanitizer's racecheck reports them (it does not model this kind
 * of hand-over), bench/gpu_soft.sh checks that it reports nothing else. */
struct Progress {
    __device__ static void publish(volatile long long *count, long long v) {
        __threadfence_block(); /* the reads it counts come first */
        *count = v;
    }
    __device__ static void wait_at_least(const volatile long long *count, long long v) {
        while (*count < v) {
        }
        __threadfence_block(); /* the writes it allows come after */
    }
};

} // namespace mas_cuda

#endif
