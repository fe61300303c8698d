/* Benchmark of the soft-alignment ops on CUDA at the sizes of issue 4, float32,
 * forward plus backward:
 *   forward-sum with posterior  B=32, T=512,  S=2048   (target <= 1.0 ms)
 *   one-to-many attention       B=16, N=M=1024         (target <= 0.5 ms)
 *   many-to-many attention      B=16, N=M=1024         (target <= 1.0 ms)
 * plus the same ops in float64 and at other sizes for scale.
 *
 * Inputs are random (standard normal values or logits) on the device. Each
 * row: warm-up calls, then `reps` timed calls, each between two events on one
 * stream; the median. Forward-sum's one call computes log_z and the posterior
 * (its gradient); attention's forward and backward are two calls, timed
 * together and apart.
 *
 * Each row also prints GB/s (the bytes a call must move: inputs read and
 * outputs written once per sweep that touches them, forward-sum's alpha
 * written and read back) against the device-to-device copy measured in the
 * same run, and for the target rows the library's CPU backend on every core
 * of the same machine (median of 3 calls after a warm-up) as the baseline.
 *
 * Usage: bench_soft_cuda [--quick | --shapes | --only fs|o2m|m2m]
 *   --shapes: the target rows with 1 and 2 compute warps a block besides
 *   the default 4; --only: one target row, 2 timed calls (for profilers). */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <algorithm>
#include <vector>

#include "mas.h"

/* Internal hook of the library (lib/cuda/soft_forward_sum.cu): compute
 * threads per block of the sweeps, 0 for the default. Used to compare shapes. */
extern "C" int32_t mas_soft_cuda_target_threads_;

#include "cuda_check.h"
#include "bench_common.h"
#define MAS_OK_OR_DIE(call)                                                                  \
    do {                                                                                     \
        mas_status s_ = (call);                                                              \
        if (s_ != MAS_OK) {                                                                  \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, mas_status_string(s_)); \
            exit(3);                                                                         \
        }                                                                                    \
    } while (0)

template <typename T> __global__ void fill_normal(T *x, size_t n, unsigned long long seed, float scale) {
    for (size_t k = blockIdx.x * (size_t)blockDim.x + threadIdx.x; k < n;
         k += (size_t)gridDim.x * blockDim.x) {
        const unsigned long long h = bench_hash(k, seed);
        float u1 = ((h >> 40) + 1) * (1.0f / 16777217.0f);
        float u2 = ((h >> 16) & 0xffffff) * (1.0f / 16777216.0f);
        x[k] = (T)(scale * sqrtf(-2.0f * logf(u1)) * cospif(2.0f * u2));
    }
}

static mas_tensor3 dense(void *p, int32_t dtype, int64_t B, int64_t D1, int64_t D2) {
    mas_tensor3 t;
    memset(&t, 0, sizeof t);
    t.data = p;
    t.dtype = dtype;
    t.dim[0] = B;
    t.dim[1] = D1;
    t.dim[2] = D2;
    t.stride[0] = D1 * D2;
    t.stride[1] = D2;
    t.stride[2] = 1;
    return t;
}

static void random_fill(void *p, int32_t dtype, size_t n, unsigned long long seed, float scale) {
    if (dtype == MAS_FLOAT64) fill_normal<double><<<1024, 256>>>((double *)p, n, seed, scale);
    else fill_normal<float><<<1024, 256>>>((float *)p, n, seed, scale);
    CUDA_OK(cudaGetLastError());
}

static double g_copy_gbs = 0; /* the ceiling, measured once */

static double now_ms(void) {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

/* Median milliseconds of 3 host calls after one warm-up (the first touches
 * freshly allocated pages). */
template <class F> static double host_median_ms(F fn) {
    fn();
    double ms[3];
    for (int r = 0; r < 3; r++) {
        const double t0 = now_ms();
        fn();
        ms[r] = now_ms() - t0;
    }
    std::sort(ms, ms + 3);
    return ms[1];
}

/* The columns after "total ms": GB/s, share of the copy, CPU ms, speed-up. */
static void print_tail(double bytes, double gpu_ms, double cpu_ms, double target) {
    const double gbs = bytes / (gpu_ms * 1e-3) / 1e9;
    printf(" %.0f | %.0f%% |", gbs, 100.0 * gbs / g_copy_gbs);
    if (cpu_ms > 0) printf(" %.1f | %.0fx |", cpu_ms, cpu_ms / gpu_ms);
    else printf(" - | - |");
    printf(" %s |\n", target > 0 ? (gpu_ms <= target ? "<= target" : "OVER target") : "-");
}

static const char *shape_note(void) {
    static char buf[48];
    if (mas_soft_cuda_target_threads_ <= 0) return "";
    snprintf(buf, sizeof buf, " (%d compute threads/block)", (int)mas_soft_cuda_target_threads_);
    return buf;
}

struct Timer {
    cudaEvent_t a, b;
    Timer() {
        CUDA_OK(cudaEventCreate(&a));
        CUDA_OK(cudaEventCreate(&b));
    }
    ~Timer() {
        cudaEventDestroy(a);
        cudaEventDestroy(b);
    }
};

/* Median milliseconds of fn() over reps calls after warm-up. */
template <class F> static double median_ms(F fn, int reps) {
    Timer t;
    for (int i = 0; i < 3; i++) fn();
    CUDA_OK(cudaDeviceSynchronize());
    std::vector<float> ms;
    for (int r = 0; r < reps; r++) {
        CUDA_OK(cudaEventRecord(t.a));
        fn();
        CUDA_OK(cudaEventRecord(t.b));
        CUDA_OK(cudaEventSynchronize(t.b));
        float x = 0;
        CUDA_OK(cudaEventElapsedTime(&x, t.a, t.b));
        ms.push_back(x);
    }
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
}

static void check_word(uint64_t *dword) {
    uint64_t w = 0;
    CUDA_OK(cudaMemcpy(&w, dword, 8, cudaMemcpyDeviceToHost));
    mas_error e;
    mas_decode_device_error(w, &e);
    if (e.status != MAS_OK) {
        fprintf(stderr, "device error: %s (item %lld)\n", mas_status_string((mas_status)e.status),
                (long long)e.item);
        exit(4);
    }
}

static void bench_forward_sum(int32_t dtype, int64_t B, int64_t T, int64_t S, double target,
                              int reps) {
    const size_t es = dtype == MAS_FLOAT64 ? 8 : 4, cells = (size_t)(B * T * S);
    void *v, *post, *lz, *ws;
    int64_t *xl, *yl;
    uint64_t *word;
    CUDA_OK(cudaMalloc(&v, cells * es));
    CUDA_OK(cudaMalloc(&post, cells * es));
    CUDA_OK(cudaMalloc(&lz, B * es));
    CUDA_OK(cudaMalloc(&xl, B * 8));
    CUDA_OK(cudaMalloc(&yl, B * 8));
    CUDA_OK(cudaMalloc(&word, 8));
    size_t wsz = mas_forward_sum_cuda_workspace_size(B, T, S, (mas_dtype)dtype);
    CUDA_OK(cudaMalloc(&ws, wsz));
    random_fill(v, dtype, cells, 7, 1.0f);
    std::vector<int64_t> hx(B, T), hy(B, S);
    CUDA_OK(cudaMemcpy(xl, hx.data(), B * 8, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(yl, hy.data(), B * 8, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemset(word, 0xff, 8));
    mas_tensor3 vt = dense(v, dtype, B, T, S), pt = dense(post, dtype, B, T, S);
    double fwd = median_ms([&] {
        MAS_OK_OR_DIE(mas_forward_sum_cuda(&vt, xl, yl, lz, nullptr, ws, wsz, nullptr, word));
    }, reps);
    double both = median_ms([&] {
        MAS_OK_OR_DIE(mas_forward_sum_cuda(&vt, xl, yl, lz, &pt, ws, wsz, nullptr, word));
    }, reps);
    CUDA_OK(cudaDeviceSynchronize());
    check_word(word);
    double cpu = 0;
    if (target > 0) { /* the baseline: the CPU backend, every core */
        std::vector<unsigned char> hv(cells * es), hp(cells * es), hz(B * es);
        CUDA_OK(cudaMemcpy(hv.data(), v, cells * es, cudaMemcpyDeviceToHost));
        std::vector<unsigned char> hws(mas_forward_sum_cpu_workspace_size(B, T, S, (mas_dtype)dtype, 0));
        mas_tensor3 hvt = dense(hv.data(), dtype, B, T, S), hpt = dense(hp.data(), dtype, B, T, S);
        cpu = host_median_ms([&] {
            MAS_OK_OR_DIE(mas_forward_sum_cpu(&hvt, hx.data(), hy.data(), hz.data(), &hpt, hws.data(),
                                              hws.size(), 0, nullptr));
        });
    }
    const double es_d = (double)es, bytes = (double)cells * (2 * es_d + 3 * es_d); /* v twice; alpha out, in; posterior */
    printf("| forward-sum + posterior%s | %s | B=%lld T=%lld S=%lld | %.3f | %.3f | %.3f |",
           shape_note(), dtype == MAS_FLOAT64 ? "f64" : "f32", (long long)B, (long long)T, (long long)S, fwd,
           both - fwd, both);
    print_tail(bytes, both, cpu, target);
    cudaFree(v);
    cudaFree(post);
    cudaFree(lz);
    cudaFree(xl);
    cudaFree(yl);
    cudaFree(word);
    cudaFree(ws);
}

static void bench_attention(int kind, int32_t dtype, int64_t B, int64_t N, int64_t M,
                            double target, int reps) {
    const size_t es = dtype == MAS_FLOAT64 ? 8 : 4, cells = (size_t)(B * N * M);
    void *x, *phi, *g, *dx, *ws;
    uint64_t *word;
    CUDA_OK(cudaMalloc(&x, cells * es));
    CUDA_OK(cudaMalloc(&phi, cells * es));
    CUDA_OK(cudaMalloc(&g, cells * es));
    CUDA_OK(cudaMalloc(&dx, cells * es));
    CUDA_OK(cudaMalloc(&word, 8));
    size_t wsz = mas_attention_cuda_workspace_size(B, N, M, (mas_dtype)dtype);
    CUDA_OK(cudaMalloc(&ws, wsz));
    random_fill(x, dtype, cells, 11, 2.0f);
    random_fill(g, dtype, cells, 13, 1.0f);
    CUDA_OK(cudaMemset(word, 0xff, 8));
    mas_tensor3 xt = dense(x, dtype, B, N, M), pt = dense(phi, dtype, B, N, M),
                gt = dense(g, dtype, B, N, M), dt = dense(dx, dtype, B, N, M);
    mas_attention_kind k = (mas_attention_kind)kind;
    double fwd = median_ms([&] {
        MAS_OK_OR_DIE(mas_attention_forward_cuda(k, &xt, nullptr, nullptr, &pt, ws, wsz, nullptr, word));
    }, reps);
    double bwd = median_ms([&] {
        MAS_OK_OR_DIE(mas_attention_backward_cuda(k, &xt, nullptr, nullptr, &pt, &gt, &dt, ws, wsz,
                                                  nullptr, word));
    }, reps);
    double both = median_ms([&] {
        MAS_OK_OR_DIE(mas_attention_forward_cuda(k, &xt, nullptr, nullptr, &pt, ws, wsz, nullptr, word));
        MAS_OK_OR_DIE(mas_attention_backward_cuda(k, &xt, nullptr, nullptr, &pt, &gt, &dt, ws, wsz,
                                                  nullptr, word));
    }, reps);
    CUDA_OK(cudaDeviceSynchronize());
    check_word(word);
    double cpu = 0;
    if (target > 0) { /* the baseline: the CPU backend, every core, forward + backward */
        std::vector<unsigned char> hx_(cells * es), hp(cells * es), hg(cells * es), hd(cells * es);
        CUDA_OK(cudaMemcpy(hx_.data(), x, cells * es, cudaMemcpyDeviceToHost));
        CUDA_OK(cudaMemcpy(hg.data(), g, cells * es, cudaMemcpyDeviceToHost));
        std::vector<unsigned char> hws(mas_attention_cpu_workspace_size(B, N, M, (mas_dtype)dtype, 0));
        mas_tensor3 hxt = dense(hx_.data(), dtype, B, N, M), hpt = dense(hp.data(), dtype, B, N, M),
                    hgt = dense(hg.data(), dtype, B, N, M), hdt = dense(hd.data(), dtype, B, N, M);
        cpu = host_median_ms([&] {
            MAS_OK_OR_DIE(mas_attention_forward_cpu(k, &hxt, nullptr, nullptr, &hpt, hws.data(),
                                                    hws.size(), 0, nullptr));
            MAS_OK_OR_DIE(mas_attention_backward_cpu(k, &hxt, nullptr, nullptr, &hpt, &hgt, &hdt,
                                                     hws.data(), hws.size(), 0, nullptr));
        });
    }
    /* forward: logits in, log phi out; backward: logits, log phi, gradient in, dx out */
    const double bytes = (double)cells * es * 6;
    printf("| %s attention%s | %s | B=%lld N=%lld M=%lld | %.3f | %.3f | %.3f |",
           kind ? "many-to-many" : "one-to-many", shape_note(), dtype == MAS_FLOAT64 ? "f64" : "f32",
           (long long)B, (long long)N, (long long)M, fwd, bwd, both);
    print_tail(bytes, both, cpu, target);
    cudaFree(x);
    cudaFree(phi);
    cudaFree(g);
    cudaFree(dx);
    cudaFree(word);
    cudaFree(ws);
}

int main(int argc, char **argv) {
    bool quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
    if (!bench_has_device()) return 0;
    g_copy_gbs = copy_bandwidth();
    bench_print_device(g_copy_gbs);
    const int reps = quick ? 5 : 20;
    if (argc > 2 && strcmp(argv[1], "--only") == 0) {
        if (!strcmp(argv[2], "fs")) bench_forward_sum(MAS_FLOAT32, 32, 512, 2048, 1.0, 2);
        else if (!strcmp(argv[2], "o2m")) bench_attention(0, MAS_FLOAT32, 16, 1024, 1024, 0.5, 2);
        else if (!strcmp(argv[2], "m2m")) bench_attention(1, MAS_FLOAT32, 16, 1024, 1024, 1.0, 2);
        else return 2;
        return 0;
    }
    printf("| op | dtype | shape | forward ms | backward ms | total ms | GB/s | of copy | CPU ms "
           "| vs CPU | target |\n");
    printf("|---|---|---|---|---|---|---|---|---|---|---|\n");
    bench_forward_sum(MAS_FLOAT32, 32, 512, 2048, 1.0, reps);
    bench_attention(0, MAS_FLOAT32, 16, 1024, 1024, 0.5, reps);
    bench_attention(1, MAS_FLOAT32, 16, 1024, 1024, 1.0, reps);
    if (argc > 1 && strcmp(argv[1], "--shapes") == 0) {
        /* the target rows again for other launch shapes */
        const int32_t shapes[2] = {32, 64};
        for (int i = 0; i < 2; i++) {
            mas_soft_cuda_target_threads_ = shapes[i];
            bench_forward_sum(MAS_FLOAT32, 32, 512, 2048, 1.0, reps);
            bench_attention(0, MAS_FLOAT32, 16, 1024, 1024, 0.5, reps);
            bench_attention(1, MAS_FLOAT32, 16, 1024, 1024, 1.0, reps);
        }
        mas_soft_cuda_target_threads_ = 0;
        return 0;
    }
    if (!quick) {
        bench_forward_sum(MAS_FLOAT64, 32, 512, 2048, 0, reps);
        bench_attention(0, MAS_FLOAT64, 16, 1024, 1024, 0, reps);
        bench_attention(1, MAS_FLOAT64, 16, 1024, 1024, 0, reps);
        bench_forward_sum(MAS_FLOAT32, 4, 2048, 8192, 0, 5);
        bench_attention(0, MAS_FLOAT32, 2, 8192, 8192, 0, 5);
        bench_attention(1, MAS_FLOAT32, 2, 8192, 8192, 0, 5);
    }
    return 0;
}
