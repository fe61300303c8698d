/* What the fused-op GPU tests share (include once, after test_common.h):
 * views, host values stored in any float dtype, device buffers. */
#ifndef MAS_TESTS_CUDA_FUSED_TEST_DATA_H
#define MAS_TESTS_CUDA_FUSED_TEST_DATA_H

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <string.h>

#include <vector>

#include "cuda_check.h"
#include "mas.h"

static size_t dsize(mas_dtype d) { return mas_dtype_size(d); }

static mas_tensor3 t3(void *data, mas_dtype dtype, int64_t d0, int64_t d1, int64_t d2, int64_t s0,
                      int64_t s1, int64_t s2) {
    mas_tensor3 t;
    memset(&t, 0, sizeof t);
    t.data = data;
    t.dtype = dtype;
    t.dim[0] = d0;
    t.dim[1] = d1;
    t.dim[2] = d2;
    t.stride[0] = s0;
    t.stride[1] = s1;
    t.stride[2] = s2;
    return t;
}

/* Every output of hard MAS (path uint8 [B, T, S]). */
static mas_hard_outputs hard_outputs(void *path, int32_t *dur, int32_t *idx, void *score, int64_t B,
                                     int64_t T, int64_t S) {
    mas_hard_outputs o;
    memset(&o, 0, sizeof o);
    o.path = t3(path, MAS_UINT8, B, T, S, T * S, S, 1);
    o.durations = dur;
    o.durations_stride = T;
    o.indices = idx;
    o.indices_stride = S;
    o.score = score;
    return o;
}

/* value v stored as dtype d at element k of buf */
static void store(std::vector<unsigned char> &buf, int64_t k, mas_dtype d, double v) {
    unsigned char *p = buf.data() + (size_t)k * dsize(d);
    if (d == MAS_FLOAT64) {
        memcpy(p, &v, 8);
    } else if (d == MAS_FLOAT32) {
        float f = (float)v;
        memcpy(p, &f, 4);
    } else if (d == MAS_FLOAT16) {
        __half h = __float2half_rn((float)v);
        memcpy(p, &h, 2);
    } else {
        __nv_bfloat16 h = __float2bfloat16_rn((float)v);
        memcpy(p, &h, 2);
    }
}

/* element k of buf, stored as dtype d (float64 or float32) */
static double load(const std::vector<unsigned char> &buf, int64_t k, mas_dtype d) {
    const unsigned char *p = buf.data() + (size_t)k * dsize(d);
    if (d == MAS_FLOAT64) {
        double v;
        memcpy(&v, p, 8);
        return v;
    }
    float f;
    memcpy(&f, p, 4);
    return f;
}

struct DevBuf {
    void *p = nullptr;
    explicit DevBuf(size_t n) { CUDA_OK(cudaMalloc(&p, n ? n : 1)); }
    ~DevBuf() { cudaFree(p); }
};
static void *upload(DevBuf &d, const void *h, size_t n) {
    CUDA_OK(cudaMemcpy(d.p, h, n, cudaMemcpyHostToDevice));
    return d.p;
}

#endif
