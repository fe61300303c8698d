/* Capsule and descriptor parsing shared by every op wrapper (see pytensor.h). */
#include "pytensor.h"

#include <string.h>

#include "dlpack.h"

static int32_t dl_to_mas_dtype(mas_dl_dtype t) {
    if (t.lanes != 1) return -1;
    switch (t.code) {
    case MAS_DL_FLOAT:
        if (t.bits == 32) return MAS_FLOAT32;
        if (t.bits == 64) return MAS_FLOAT64;
        if (t.bits == 16) return MAS_FLOAT16;
        return -1;
    case MAS_DL_BFLOAT: return t.bits == 16 ? MAS_BFLOAT16 : -1;
    case MAS_DL_INT:
        if (t.bits == 32) return MAS_INT32;
        if (t.bits == 64) return MAS_INT64;
        return -1;
    case MAS_DL_UINT:
    case MAS_DL_BOOL: return t.bits == 8 ? MAS_UINT8 : -1;
    default: return -1;
    }
}

static const char *dtype_name(int32_t dtype) {
    static const char *const names[MAS_DTYPE_COUNT_] = {
        "float32", "float64", "float16", "bfloat16", "int32", "int64", "uint8/bool"};
    return (dtype >= 0 && dtype < MAS_DTYPE_COUNT_) ? names[dtype] : "an unsupported dtype";
}

static int from_capsule(PyObject *cap, const char *what, mas_py_array *arr) {
    mas_dl_managed_tensor *m =
        (mas_dl_managed_tensor *)PyCapsule_GetPointer(cap, MAS_DL_CAPSULE_NAME);
    if (!m) return -1;
    const mas_dl_tensor *t = &m->dl_tensor;
    if (t->ndim < 0 || t->ndim > MAS_PY_MAX_NDIM) {
        PyErr_Format(PyExc_ValueError, "%s: rank %d is not supported", what, (int)t->ndim);
        return -1;
    }
    arr->ndim = t->ndim;
    arr->dtype = dl_to_mas_dtype(t->dtype);
    arr->device_type = t->device.device_type;
    arr->device_id = t->device.device_id;
    arr->data = (char *)t->data + t->byte_offset;
    int64_t compact = 1;
    for (int32_t k = t->ndim - 1; k >= 0; k--) {
        arr->shape[k] = t->shape[k];
        arr->strides[k] = t->strides ? t->strides[k] : compact;
        compact *= t->shape[k];
    }
    return 0;
}

static int tuple_int64s(PyObject *seq, const char *what, int64_t *out, int32_t n) {
    if (!PyTuple_Check(seq) || PyTuple_GET_SIZE(seq) != n) {
        PyErr_Format(PyExc_ValueError, "%s: malformed array descriptor", what);
        return -1;
    }
    for (int32_t k = 0; k < n; k++) {
        long long v = PyLong_AsLongLong(PyTuple_GET_ITEM(seq, k));
        if (v == -1 && PyErr_Occurred()) return -1;
        out[k] = (int64_t)v;
    }
    return 0;
}

/* (address, mas_dtype, shape, strides, device_type, device_id, owner) */
static int from_tuple(PyObject *tup, const char *what, mas_py_array *arr) {
    if (PyTuple_GET_SIZE(tup) != 7) {
        PyErr_Format(PyExc_ValueError, "%s: malformed array descriptor", what);
        return -1;
    }
    void *address = PyLong_AsVoidPtr(PyTuple_GET_ITEM(tup, 0));
    if (!address && PyErr_Occurred()) return -1;
    long dtype = PyLong_AsLong(PyTuple_GET_ITEM(tup, 1));
    long dev_type = PyLong_AsLong(PyTuple_GET_ITEM(tup, 4));
    long dev_id = PyLong_AsLong(PyTuple_GET_ITEM(tup, 5));
    if (PyErr_Occurred()) return -1;
    PyObject *shape = PyTuple_GET_ITEM(tup, 2);
    Py_ssize_t ndim = PyTuple_Check(shape) ? PyTuple_GET_SIZE(shape) : -1;
    if (ndim < 0 || ndim > MAS_PY_MAX_NDIM) {
        PyErr_Format(PyExc_ValueError, "%s: rank %zd is not supported", what, ndim);
        return -1;
    }
    arr->ndim = (int32_t)ndim;
    if (tuple_int64s(shape, what, arr->shape, arr->ndim) ||
        tuple_int64s(PyTuple_GET_ITEM(tup, 3), what, arr->strides, arr->ndim))
        return -1;
    arr->data = (char *)address;
    arr->dtype = (dtype >= 0 && dtype < MAS_DTYPE_COUNT_) ? (int32_t)dtype : -1;
    arr->device_type = (int32_t)dev_type;
    arr->device_id = (int32_t)dev_id;
    return 0;
}

int mas_py_array_get(PyObject *obj, const char *what, mas_py_array *arr) {
    memset(arr, 0, sizeof *arr);
    arr->dtype = -1;
    if (obj == Py_None) return 0;
    int rc;
    if (PyCapsule_CheckExact(obj)) {
        if (!PyCapsule_IsValid(obj, MAS_DL_CAPSULE_NAME)) {
            PyErr_Format(PyExc_ValueError,
                         "%s: expected an unconsumed DLPack capsule named 'dltensor'", what);
            return -1;
        }
        rc = from_capsule(obj, what, arr);
    } else if (PyTuple_Check(obj)) {
        rc = from_tuple(obj, what, arr);
    } else {
        PyErr_Format(PyExc_TypeError, "%s: expected a DLPack capsule or an array descriptor",
                     what);
        return -1;
    }
    if (rc) return -1;
    for (int32_t k = 0; k < arr->ndim; k++) {
        if (arr->shape[k] < 0) {
            PyErr_Format(PyExc_ValueError, "%s: negative size", what);
            return -1;
        }
    }
    Py_INCREF(obj);
    arr->owner = obj;
    return 0;
}

void mas_py_array_release(mas_py_array *arr) {
    Py_CLEAR(arr->owner);
}

void mas_py_array_release_all(mas_py_array *arrs, int count) {
    for (int k = 0; k < count; k++) mas_py_array_release(&arrs[k]);
}

int mas_py_array_check_device(const mas_py_array *arr, const char *what,
                              mas_py_place place, int32_t device_id) {
    int ok;
    if (place == MAS_PY_HOST) {
        ok = arr->device_type == MAS_DL_CPU || arr->device_type == MAS_DL_CUDA_HOST;
        if (!ok) {
            PyErr_Format(PyExc_ValueError, "%s: expected host (CPU) memory, got DLPack device type %d",
                         what, (int)arr->device_type);
            return -1;
        }
        return 0;
    }
    ok = (arr->device_type == MAS_DL_CUDA || arr->device_type == MAS_DL_CUDA_MANAGED) &&
         arr->device_id == device_id;
    if (!ok) {
        PyErr_Format(PyExc_ValueError,
                     "%s: expected CUDA memory on device %d, got DLPack device (%d, %d)", what,
                     (int)device_id, (int)arr->device_type, (int)arr->device_id);
        return -1;
    }
    return 0;
}

int mas_py_array_check_kind(const mas_py_array *arr, const char *what, int32_t ndim,
                            int32_t dtype) {
    if (arr->ndim != ndim) {
        PyErr_Format(PyExc_ValueError, "%s: expected %d dimensions, got %d", what, (int)ndim,
                     (int)arr->ndim);
        return -1;
    }
    if (arr->dtype < 0 || (dtype >= 0 && arr->dtype != dtype)) {
        PyErr_Format(PyExc_TypeError, "%s: expected %s, got %s", what,
                     dtype >= 0 ? dtype_name(dtype) : "a supported dtype", dtype_name(arr->dtype));
        return -1;
    }
    return 0;
}

int mas_py_array_check_inner_contiguous(const mas_py_array *arr, const char *what) {
    int32_t last = arr->ndim - 1;
    if (last >= 0 && arr->shape[last] > 1 && arr->strides[last] != 1) {
        PyErr_Format(PyExc_ValueError, "%s: the last axis must be contiguous", what);
        return -1;
    }
    return 0;
}

int mas_py_array_check_vector(const mas_py_array *arr, const char *what, int64_t count) {
    if (arr->ndim != 1 || arr->shape[0] != count) {
        PyErr_Format(PyExc_ValueError, "%s: expected shape [%lld]", what, (long long)count);
        return -1;
    }
    return mas_py_array_check_inner_contiguous(arr, what);
}

void mas_py_array_tensor3(const mas_py_array *arr, int bst, mas_tensor3 *t) {
    int a = bst ? 2 : 1, b = bst ? 1 : 2;
    memset(t, 0, sizeof *t);
    t->data = arr->data;
    t->dtype = arr->dtype;
    t->dim[0] = arr->shape[0];
    t->dim[1] = arr->shape[a];
    t->dim[2] = arr->shape[b];
    t->stride[0] = arr->strides[0];
    t->stride[1] = arr->strides[a];
    t->stride[2] = arr->strides[b];
}
