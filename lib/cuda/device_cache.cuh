/* What the CUDA entry points ask of the runtime about a device or a kernel,
 * asked once and kept: device attributes, a kernel's raised shared-memory
 * limit and its occupancy. Each of those runtime calls costs microseconds of
 * host time, which at training shapes is a large part of a call (issue: host
 * overhead per call). Host code only; thread-safe (relaxed atomics: every
 * thread that races computes the same value). */
#ifndef MAS_CUDA_DEVICE_CACHE_CUH
#define MAS_CUDA_DEVICE_CACHE_CUH

#include <cuda_runtime.h>

#include <atomic>

#include "mas.h"

namespace mas_cuda {

constexpr int kMaxDevices = 64;

struct DeviceInfo {
    int index;      /* the current device */
    int sms;        /* multiprocessors */
    int smem_optin; /* shared memory a block may opt in to, bytes */
    int cc_major;   /* compute capability, major (8: TF32 tensor cores, cp.async) */
};

/* The current device and its attributes (read once per device). */
static inline mas_status current_device(DeviceInfo *d) {
    static std::atomic<int> sms[kMaxDevices], smem[kMaxDevices], major[kMaxDevices];
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= kMaxDevices) return MAS_ERR_CUDA;
    /* sms is stored last: once it is seen, the others are there */
    int s = sms[dev].load(std::memory_order_acquire);
    int m = smem[dev].load(std::memory_order_relaxed);
    int c = major[dev].load(std::memory_order_relaxed);
    if (s == 0) {
        if (cudaDeviceGetAttribute(&s, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess ||
            cudaDeviceGetAttribute(&m, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) !=
                cudaSuccess ||
            cudaDeviceGetAttribute(&c, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess)
            return MAS_ERR_CUDA;
        smem[dev].store(m, std::memory_order_relaxed);
        major[dev].store(c, std::memory_order_relaxed);
        sms[dev].store(s, std::memory_order_release);
    }
    d->index = dev;
    d->sms = s;
    d->smem_optin = m;
    d->cc_major = c;
    return MAS_OK;
}

/* One kernel's cached state: the dynamic shared memory its limit was raised
 * to on each device, and blocks per multiprocessor for up to kOccSlots
 * launch shapes (slot chosen by the caller, e.g. warps per block). Keep one
 * as a function-local static per kernel instantiation. */
constexpr int kOccSlots = 33;
struct KernelCache {
    std::atomic<int> smem_raised[kMaxDevices];
    std::atomic<int> per_sm[kMaxDevices][kOccSlots]; /* 0: not known yet */
};

/* Raises the kernel's dynamic shared-memory limit to at least smem bytes on
 * the device, unless an earlier call already did. */
template <class Kernel>
static inline mas_status ensure_smem(KernelCache &c, Kernel kernel, const DeviceInfo &d,
                                     size_t smem) {
    /* 48 KB less room for a kernel's static shared variables */
    if (smem <= 47 * 1024) return MAS_OK;
    if ((size_t)c.smem_raised[d.index].load(std::memory_order_relaxed) >= smem) return MAS_OK;
    if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem) !=
        cudaSuccess)
        return MAS_ERR_CUDA;
    int seen = c.smem_raised[d.index].load(std::memory_order_relaxed);
    while (seen < (int)smem &&
           !c.smem_raised[d.index].compare_exchange_weak(seen, (int)smem, std::memory_order_relaxed)) {
    }
    return MAS_OK;
}

/* Blocks of `threads` threads and smem bytes resident per multiprocessor
 * (the limit raised first), cached in slot `slot`: a slot must always be
 * asked with the same threads and smem. */
template <class Kernel>
static inline mas_status cached_occupancy(KernelCache &c, Kernel kernel, const DeviceInfo &d,
                                          int slot, int threads, size_t smem, int *per_sm) {
    int v = c.per_sm[d.index][slot].load(std::memory_order_relaxed);
    if (v == 0) {
        mas_status st = ensure_smem(c, kernel, d, smem);
        if (st != MAS_OK) return st;
        if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&v, kernel, threads, smem) != cudaSuccess)
            return MAS_ERR_CUDA;
        if (v < 1) return MAS_ERR_CUDA;
        c.per_sm[d.index][slot].store(v, std::memory_order_relaxed);
    }
    *per_sm = v;
    return MAS_OK;
}

} // namespace mas_cuda

#endif
