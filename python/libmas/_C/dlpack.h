/* The DLPack ABI as far as libmas consumes it: the legacy (unversioned)
 * DLManagedTensor that travels in a PyCapsule named "dltensor".
 *
 * Written from the DLPack specification (dmlc/dlpack, data-api array API
 * "DLPack" section) rather than vendored, so the module has no third-party
 * header. Only the layout matters: these structs must match the ABI bit for
 * bit, so field order and types follow the specification exactly. */
#ifndef LIBMAS_PY_DLPACK_H
#define LIBMAS_PY_DLPACK_H

#include <stdint.h>

/* Device types (DLDeviceType). Only the ones we accept or name in errors. */
enum {
    MAS_DL_CPU = 1,
    MAS_DL_CUDA = 2,
    MAS_DL_CUDA_HOST = 3,   /* pinned host memory: readable by the CPU */
    MAS_DL_ROCM = 10,
    MAS_DL_CUDA_MANAGED = 13
};

/* Type codes (DLDataTypeCode). */
enum {
    MAS_DL_INT = 0,
    MAS_DL_UINT = 1,
    MAS_DL_FLOAT = 2,
    MAS_DL_OPAQUE_HANDLE = 3,
    MAS_DL_BFLOAT = 4,
    MAS_DL_COMPLEX = 5,
    MAS_DL_BOOL = 6
};

typedef struct mas_dl_device {
    int32_t device_type;
    int32_t device_id;
} mas_dl_device;

typedef struct mas_dl_dtype {
    uint8_t code;
    uint8_t bits;
    uint16_t lanes;
} mas_dl_dtype;

typedef struct mas_dl_tensor {
    void *data;
    mas_dl_device device;
    int32_t ndim;
    mas_dl_dtype dtype;
    int64_t *shape;
    int64_t *strides; /* in elements; NULL means compact row-major */
    uint64_t byte_offset;
} mas_dl_tensor;

typedef struct mas_dl_managed_tensor {
    mas_dl_tensor dl_tensor;
    void *manager_ctx;
    void (*deleter)(struct mas_dl_managed_tensor *self);
} mas_dl_managed_tensor;

/* Capsule name of an unconsumed legacy DLPack tensor. */
#define MAS_DL_CAPSULE_NAME "dltensor"

#endif
