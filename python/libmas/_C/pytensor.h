/* Turning Python array handles into raw views for the C library.
 *
 * Every op wrapper (hard.c, soft.c, baseline.c) receives its arrays as one of
 *   - a DLPack capsule named "dltensor" (from obj.__dlpack__()), borrowed for
 *     the duration of the call: we do not rename it, so the capsule's own
 *     destructor still frees the tensor when Python drops it;
 *   - a tuple (address, mas_dtype, shape, strides_in_elements, device_type,
 *     device_id, owner) built by libmas._arrays when DLPack is unavailable
 *     (NumPy refuses to export read-only arrays);
 *   - None, for an output the caller does not want.
 * A mas_py_array holds a strong reference to that object so the memory stays
 * alive while the GIL is released. */
#ifndef LIBMAS_PY_PYTENSOR_H
#define LIBMAS_PY_PYTENSOR_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

#include "mas.h"

#define MAS_PY_MAX_NDIM 4

typedef struct mas_py_array {
    PyObject *owner;       /* strong reference, NULL when absent (None) */
    char *data;            /* first element, byte offset applied */
    int32_t dtype;         /* a mas_dtype, or -1 when it has none */
    int32_t ndim;
    int64_t shape[MAS_PY_MAX_NDIM];
    int64_t strides[MAS_PY_MAX_NDIM]; /* elements */
    int32_t device_type;   /* DLPack device type (1 CPU, 2 CUDA, ...) */
    int32_t device_id;
} mas_py_array;

/* Which device family an op needs its arrays on. */
typedef enum mas_py_place { MAS_PY_HOST = 0, MAS_PY_CUDA = 1 } mas_py_place;

/* Fills *arr from a capsule, a descriptor tuple or None (arr->owner stays
 * NULL). Returns 0, or -1 with a Python exception naming `what`. */
int mas_py_array_get(PyObject *obj, const char *what, mas_py_array *arr);

/* Drops the reference taken by mas_py_array_get; safe on a zeroed array. */
void mas_py_array_release(mas_py_array *arr);

/* Releases every array of a list; for the cleanup path of a wrapper. */
void mas_py_array_release_all(mas_py_array *arrs, int count);

/* 1 when arr was given (not None). */
static inline int mas_py_array_present(const mas_py_array *arr) {
    return arr->owner != NULL;
}

/* Raises ValueError unless arr lives on `place` (and, for CUDA, on
 * device_id). Returns 0 or -1. */
int mas_py_array_check_device(const mas_py_array *arr, const char *what,
                              mas_py_place place, int32_t device_id);

/* Raises unless arr has this rank (ValueError) and dtype (TypeError;
 * dtype < 0 accepts any mas_dtype). Returns 0 or -1. */
int mas_py_array_check_kind(const mas_py_array *arr, const char *what,
                            int32_t ndim, int32_t dtype);

/* Raises ValueError unless the last axis has unit stride (or size <= 1). */
int mas_py_array_check_inner_contiguous(const mas_py_array *arr, const char *what);

/* Raises ValueError unless arr is 1-D with exactly `count` elements and unit
 * stride (or count <= 1). */
int mas_py_array_check_vector(const mas_py_array *arr, const char *what,
                              int64_t count);

/* Views a rank-3 array as a mas_tensor3. With bst != 0 the array is
 * [B, S, T] and the view swaps its last two axes, so dim is always
 * [B, T, S]. */
void mas_py_array_tensor3(const mas_py_array *arr, int bst, mas_tensor3 *t);

#endif
