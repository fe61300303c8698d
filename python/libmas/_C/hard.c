/* Wrappers of mas_hard_cpu and mas_hard_cuda: check that the arrays handed
 * over by libmas.hard agree with each other (a wrong shape here would make
 * the library address memory outside them), then call the library.
 * Both return (status, item) and leave the wording of errors to Python,
 * which knows the public function's name. */
#include "module.h"

#include <string.h>

enum { A_VALUE, A_XLEN, A_YLEN, A_PATH, A_DUR, A_IDX, A_SCORE, A_WORK, A_ERROR, A_COUNT };

typedef struct hard_call {
    mas_py_array a[A_COUNT];
    mas_tensor3 value;
    mas_tensor3 mask; /* hard_cuda_mask: the mask in A_XLEN's slot */
    mas_hard_outputs out;
    size_t workspace_size;
} hard_call;

static int check_outputs(hard_call *c, int bst) {
    const int64_t B = c->value.dim[0], T = c->value.dim[1], S = c->value.dim[2];
    mas_py_array *p = &c->a[A_PATH], *d = &c->a[A_DUR], *ix = &c->a[A_IDX], *sc = &c->a[A_SCORE];
    memset(&c->out, 0, sizeof c->out);
    if (mas_py_array_present(p)) {
        if (mas_py_array_check_kind(p, "path", 3, -1)) return -1;
        const mas_py_array *v = &c->a[A_VALUE];
        if (p->shape[0] != v->shape[0] || p->shape[1] != v->shape[1] ||
            p->shape[2] != v->shape[2]) {
            PyErr_SetString(PyExc_ValueError, "path: shape differs from value's");
            return -1;
        }
        mas_py_array_tensor3(p, bst, &c->out.path);
    }
    if (mas_py_array_present(d)) {
        if (mas_py_array_check_kind(d, "durations", 2, MAS_INT32) ||
            mas_py_array_check_inner_contiguous(d, "durations"))
            return -1;
        if (d->shape[0] != B || d->shape[1] != T) {
            PyErr_SetString(PyExc_ValueError, "durations: expected shape [B, T]");
            return -1;
        }
        c->out.durations = (int32_t *)d->data;
        c->out.durations_stride = d->strides[0];
    }
    if (mas_py_array_present(ix)) {
        if (mas_py_array_check_kind(ix, "indices", 2, MAS_INT32) ||
            mas_py_array_check_inner_contiguous(ix, "indices"))
            return -1;
        if (ix->shape[0] != B || ix->shape[1] != S) {
            PyErr_SetString(PyExc_ValueError, "indices: expected shape [B, S]");
            return -1;
        }
        c->out.indices = (int32_t *)ix->data;
        c->out.indices_stride = ix->strides[0];
    }
    if (mas_py_array_present(sc)) {
        int32_t want = c->value.dtype == MAS_FLOAT64 ? MAS_FLOAT64 : MAS_FLOAT32;
        if (mas_py_array_check_kind(sc, "score", 1, want) ||
            mas_py_array_check_vector(sc, "score", B))
            return -1;
        c->out.score = sc->data;
    }
    return 0;
}

/* Parses and cross-checks every array; on success the caller owns c->a.
 * with_mask: A_XLEN holds a mask of value's shape (any dtype), A_YLEN none. */
static int prepare(hard_call *c, PyObject *const *objs, int bst, mas_py_place place,
                   int with_mask) {
    static const char *const names[A_COUNT] = {"value",  "x_lengths", "y_lengths",
                                               "path",   "durations", "indices",
                                               "score",  "workspace", "error_word"};
    memset(c, 0, sizeof *c);
    for (int k = 0; k < A_COUNT; k++)
        if (mas_py_array_get(objs[k], with_mask && k == A_XLEN ? "mask" : names[k], &c->a[k]))
            return -1;
    mas_py_array *v = &c->a[A_VALUE];
    if (!mas_py_array_present(v) || !mas_py_array_present(&c->a[A_XLEN]) ||
        (!with_mask && !mas_py_array_present(&c->a[A_YLEN]))) {
        PyErr_SetString(PyExc_ValueError, with_mask ? "value and mask are required"
                                                    : "value and both length arrays are required");
        return -1;
    }
    if (mas_py_array_check_kind(v, "value", 3, -1)) return -1;
    if (v->dtype != MAS_FLOAT32 && v->dtype != MAS_FLOAT64 && v->dtype != MAS_FLOAT16 &&
        v->dtype != MAS_BFLOAT16) {
        PyErr_SetString(PyExc_TypeError,
                        "value: expected float32, float64, float16 or bfloat16");
        return -1;
    }
    int32_t dev = v->device_id;
    for (int k = 0; k < A_COUNT; k++)
        if (mas_py_array_present(&c->a[k]) &&
            mas_py_array_check_device(&c->a[k], names[k], place, dev))
            return -1;
    mas_py_array_tensor3(v, bst, &c->value);
    if (with_mask) {
        mas_py_array *m = &c->a[A_XLEN];
        if (mas_py_array_check_kind(m, "mask", 3, -1)) return -1;
        if (m->shape[0] != v->shape[0] || m->shape[1] != v->shape[1] ||
            m->shape[2] != v->shape[2]) {
            PyErr_SetString(PyExc_ValueError, "mask: shape differs from value's");
            return -1;
        }
        mas_py_array_tensor3(m, bst, &c->mask);
    } else {
        for (int k = A_XLEN; k <= A_YLEN; k++)
            if (mas_py_array_check_kind(&c->a[k], names[k], 1, MAS_INT64) ||
                mas_py_array_check_vector(&c->a[k], names[k], c->value.dim[0]))
                return -1;
    }
    mas_py_array *w = &c->a[A_WORK];
    if (mas_py_array_present(w)) {
        if (mas_py_array_check_kind(w, "workspace", 1, MAS_UINT8) ||
            mas_py_array_check_inner_contiguous(w, "workspace"))
            return -1;
        c->workspace_size = (size_t)w->shape[0];
    }
    mas_py_array *e = &c->a[A_ERROR];
    if (mas_py_array_present(e) &&
        (mas_py_array_check_kind(e, "error_word", 1, MAS_INT64) ||
         mas_py_array_check_vector(e, "error_word", 1)))
        return -1;
    return check_outputs(c, bst);
}

static PyObject *status_tuple(mas_status st, const mas_error *err) {
    return Py_BuildValue("(iL)", (int)st, (long long)(st == MAS_OK ? -1 : err->item));
}

/* hard_cpu(value, bst, x_len, y_len, path, durations, indices, score,
 *          workspace, threads) -> (status, item). Runs without the GIL. */
PyObject *mas_py_hard_cpu(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 10) {
        PyErr_SetString(PyExc_TypeError, "hard_cpu expects 10 arguments");
        return NULL;
    }
    int bst = PyObject_IsTrue(args[1]);
    long threads = PyLong_AsLong(args[9]);
    if (bst < 0 || (threads == -1 && PyErr_Occurred())) return NULL;
    PyObject *objs[A_COUNT] = {args[0], args[2], args[3], args[4], args[5],
                               args[6], args[7], args[8], Py_None};
    hard_call c;
    if (prepare(&c, objs, bst, MAS_PY_HOST, 0)) {
        mas_py_array_release_all(c.a, A_COUNT);
        return NULL;
    }
    mas_error err = {0, 0, -1};
    mas_status st;
    Py_BEGIN_ALLOW_THREADS
    st = mas_hard_cpu(&c.value, (const int64_t *)c.a[A_XLEN].data,
                      (const int64_t *)c.a[A_YLEN].data, &c.out, c.a[A_WORK].data,
                      c.workspace_size, (int32_t)threads, &err);
    Py_END_ALLOW_THREADS
    mas_py_array_release_all(c.a, A_COUNT);
    return status_tuple(st, &err);
}

/* hard_cuda(value, bst, x_len, y_len, path, durations, indices, score,
 *           workspace, stream, error_word) -> (status, item). Asynchronous:
 * value-dependent errors land in error_word, never in the returned status.
 * The caller has made value's device current. */
PyObject *mas_py_hard_cuda(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 11) {
        PyErr_SetString(PyExc_TypeError, "hard_cuda expects 11 arguments");
        return NULL;
    }
    int bst = PyObject_IsTrue(args[1]);
    void *stream = args[9] == Py_None ? NULL : PyLong_AsVoidPtr(args[9]);
    if (bst < 0 || PyErr_Occurred()) return NULL;
    PyObject *objs[A_COUNT] = {args[0], args[2], args[3], args[4], args[5],
                               args[6], args[7], args[8], args[10]};
    hard_call c;
    if (prepare(&c, objs, bst, MAS_PY_CUDA, 0)) {
        mas_py_array_release_all(c.a, A_COUNT);
        return NULL;
    }
    mas_error err = {0, 0, -1};
    mas_status st;
    Py_BEGIN_ALLOW_THREADS
    st = mas_hard_cuda(&c.value, (const int64_t *)c.a[A_XLEN].data,
                       (const int64_t *)c.a[A_YLEN].data, &c.out, c.a[A_WORK].data,
                       c.workspace_size, stream, (uint64_t *)c.a[A_ERROR].data);
    Py_END_ALLOW_THREADS
    mas_py_array_release_all(c.a, A_COUNT);
    return status_tuple(st, &err);
}

static int parse_shape(PyObject *const *args, int64_t *B, int64_t *T, int64_t *S, int *dtype) {
    *B = PyLong_AsLongLong(args[0]);
    *T = PyLong_AsLongLong(args[1]);
    *S = PyLong_AsLongLong(args[2]);
    *dtype = (int)PyLong_AsLong(args[3]);
    return PyErr_Occurred() ? -1 : 0;
}

/* hard_cuda_mask(value, bst, mask, path, durations, indices, score,
 *                workspace, stream, error_word) -> (status, item): hard_cuda
 * with the lengths counted from a Glow-TTS mask by the kernels
 * (mas_hard_cuda_mask). */
PyObject *mas_py_hard_cuda_mask(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 10) {
        PyErr_SetString(PyExc_TypeError, "hard_cuda_mask expects 10 arguments");
        return NULL;
    }
    int bst = PyObject_IsTrue(args[1]);
    void *stream = args[8] == Py_None ? NULL : PyLong_AsVoidPtr(args[8]);
    if (bst < 0 || PyErr_Occurred()) return NULL;
    PyObject *objs[A_COUNT] = {args[0], args[2], Py_None, args[3], args[4],
                               args[5], args[6], args[7], args[9]};
    hard_call c;
    if (prepare(&c, objs, bst, MAS_PY_CUDA, 1)) {
        mas_py_array_release_all(c.a, A_COUNT);
        return NULL;
    }
    mas_error err = {0, 0, -1};
    mas_status st;
    Py_BEGIN_ALLOW_THREADS
    st = mas_hard_cuda_mask(&c.value, &c.mask, &c.out, c.a[A_WORK].data, c.workspace_size, stream,
                            (uint64_t *)c.a[A_ERROR].data);
    Py_END_ALLOW_THREADS
    mas_py_array_release_all(c.a, A_COUNT);
    return status_tuple(st, &err);
}

/* hard_cuda_mask_workspace_size(B, T, S, dtype) -> bytes */
PyObject *mas_py_hard_cuda_mask_workspace_size(PyObject *self, PyObject *const *args,
                                               Py_ssize_t nargs) {
    (void)self;
    int64_t B, T, S;
    int dtype;
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "hard_cuda_mask_workspace_size expects 4 arguments");
        return NULL;
    }
    if (parse_shape(args, &B, &T, &S, &dtype)) return NULL;
    return PyLong_FromSize_t(mas_hard_cuda_mask_workspace_size(B, T, S, (mas_dtype)dtype));
}

/* hard_cpu_workspace_size(B, T, S, dtype, threads) -> bytes */
PyObject *mas_py_hard_cpu_workspace_size(PyObject *self, PyObject *const *args,
                                         Py_ssize_t nargs) {
    (void)self;
    int64_t B, T, S;
    int dtype;
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "hard_cpu_workspace_size expects 5 arguments");
        return NULL;
    }
    long threads = PyLong_AsLong(args[4]);
    if (parse_shape(args, &B, &T, &S, &dtype)) return NULL;
    size_t n = mas_hard_cpu_workspace_size(B, T, S, (mas_dtype)dtype, (int32_t)threads);
    return PyLong_FromSize_t(n);
}

/* hard_cpu_min_workspace_size(B, T, S, dtype, threads) -> bytes: the
 * smallest workspace mas_hard_cpu accepts (long-form below the unbounded). */
PyObject *mas_py_hard_cpu_min_workspace_size(PyObject *self, PyObject *const *args,
                                             Py_ssize_t nargs) {
    (void)self;
    int64_t B, T, S;
    int dtype;
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "hard_cpu_min_workspace_size expects 5 arguments");
        return NULL;
    }
    long threads = PyLong_AsLong(args[4]);
    if (parse_shape(args, &B, &T, &S, &dtype)) return NULL;
    size_t n = mas_hard_cpu_min_workspace_size(B, T, S, (mas_dtype)dtype, (int32_t)threads);
    return PyLong_FromSize_t(n);
}

/* hard_cuda_min_workspace_size(B, T, S, dtype) -> bytes: the smallest
 * workspace mas_hard_cuda accepts (long-form below the unbounded). */
PyObject *mas_py_hard_cuda_min_workspace_size(PyObject *self, PyObject *const *args,
                                              Py_ssize_t nargs) {
    (void)self;
    int64_t B, T, S;
    int dtype;
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "hard_cuda_min_workspace_size expects 4 arguments");
        return NULL;
    }
    if (parse_shape(args, &B, &T, &S, &dtype)) return NULL;
    return PyLong_FromSize_t(mas_hard_cuda_min_workspace_size(B, T, S, (mas_dtype)dtype));
}

/* hard_cuda_workspace_size(B, T, S, dtype) -> bytes */
PyObject *mas_py_hard_cuda_workspace_size(PyObject *self, PyObject *const *args,
                                          Py_ssize_t nargs) {
    (void)self;
    int64_t B, T, S;
    int dtype;
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "hard_cuda_workspace_size expects 4 arguments");
        return NULL;
    }
    if (parse_shape(args, &B, &T, &S, &dtype)) return NULL;
    return PyLong_FromSize_t(mas_hard_cuda_workspace_size(B, T, S, (mas_dtype)dtype));
}
