/* Wrappers of the soft-alignment functions (mas.h section 5) for
 * libmas.soft: check that the arrays agree with each other (a wrong shape
 * would make the library address memory outside them), then call the CPU or
 * the CUDA entry point. Each returns (status, item) and leaves the wording of
 * errors to Python, which knows the public function's name.
 *
 * The last two arguments of every op are `how` and `error_word`: on the CPU
 * `how` is the thread count and error_word is None; on CUDA `how` is the
 * stream (an int, or None for the legacy default stream). */
#include "module.h"

#include <string.h>

static int parse_place(PyObject *obj, mas_py_place *place) {
    int cuda = PyObject_IsTrue(obj);
    if (cuda < 0) return -1;
    *place = cuda ? MAS_PY_CUDA : MAS_PY_HOST;
    return 0;
}

/* threads (CPU) or stream (CUDA) */
static int parse_how(PyObject *obj, mas_py_place place, int32_t *threads, void **stream) {
    *threads = 0;
    *stream = NULL;
    if (place == MAS_PY_CUDA) {
        if (obj != Py_None) *stream = PyLong_AsVoidPtr(obj);
    } else {
        long n = PyLong_AsLong(obj);
        *threads = (int32_t)n;
    }
    return PyErr_Occurred() ? -1 : 0;
}

/* Every present array on the right device; lengths, workspace and error
 * word of the right kind. n_req: arrays that must be present (the first). */
static int check_common(mas_py_array *a, const char *const *names, int count, int n_req,
                        mas_py_place place, int len_first, int len_count, int64_t batch,
                        int work, int error_word) {
    for (int k = 0; k < n_req; k++)
        if (!mas_py_array_present(&a[k])) {
            PyErr_Format(PyExc_ValueError, "%s is required", names[k]);
            return -1;
        }
    for (int k = 0; k < count; k++)
        if (mas_py_array_present(&a[k]) &&
            mas_py_array_check_device(&a[k], names[k], place, a[0].device_id))
            return -1;
    for (int k = len_first; k < len_first + len_count; k++)
        if (mas_py_array_present(&a[k]) &&
            (mas_py_array_check_kind(&a[k], names[k], 1, MAS_INT64) ||
             mas_py_array_check_vector(&a[k], names[k], batch)))
            return -1;
    if (!mas_py_array_present(&a[work]) ||
        mas_py_array_check_kind(&a[work], "workspace", 1, MAS_UINT8) ||
        mas_py_array_check_inner_contiguous(&a[work], "workspace")) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "workspace is required");
        return -1;
    }
    if (mas_py_array_present(&a[error_word]) &&
        (mas_py_array_check_kind(&a[error_word], "error_word", 1, MAS_INT64) ||
         mas_py_array_check_vector(&a[error_word], "error_word", 1)))
        return -1;
    return 0;
}

static int check_value_dtype(const mas_py_array *a, const char *what) {
    if (mas_py_array_check_kind(a, what, 3, -1)) return -1;
    if (a->dtype != MAS_FLOAT32 && a->dtype != MAS_FLOAT64 && a->dtype != MAS_FLOAT16 &&
        a->dtype != MAS_BFLOAT16) {
        PyErr_Format(PyExc_TypeError, "%s: expected float32, float64, float16 or bfloat16", what);
        return -1;
    }
    return 0;
}

/* Rank 3 and the same shape as a[0]. */
static int check_like(const mas_py_array *a, const mas_py_array *ref, const char *what,
                      int32_t dtype) {
    if (mas_py_array_check_kind(a, what, 3, dtype)) return -1;
    for (int k = 0; k < 3; k++)
        if (a->shape[k] != ref->shape[k]) {
            PyErr_Format(PyExc_ValueError, "%s: shape differs from the input's", what);
            return -1;
        }
    return 0;
}

static PyObject *status_tuple(mas_status st, const mas_error *err) {
    return Py_BuildValue("(iL)", (int)st, (long long)(st == MAS_OK ? -1 : err->item));
}

static int32_t accum_of(int32_t dtype) { return dtype == MAS_FLOAT64 ? MAS_FLOAT64 : MAS_FLOAT32; }

enum { F_VALUE, F_XLEN, F_YLEN, F_LOGZ, F_POST, F_WORK, F_ERROR, F_COUNT };

/* forward_sum(cuda, value, bst, x_len, y_len, log_z, posterior, workspace,
 *             how, error_word) -> (status, item) */
PyObject *mas_py_forward_sum(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    static const char *const names[F_COUNT] = {"value", "x_lengths", "y_lengths", "log_z",
                                               "posterior", "workspace", "error_word"};
    if (nargs != 10) {
        PyErr_SetString(PyExc_TypeError, "forward_sum expects 10 arguments");
        return NULL;
    }
    mas_py_place place;
    int32_t threads;
    void *stream;
    int bst = PyObject_IsTrue(args[2]);
    if (bst < 0 || parse_place(args[0], &place) || parse_how(args[8], place, &threads, &stream))
        return NULL;
    PyObject *objs[F_COUNT] = {args[1], args[3], args[4], args[5], args[6], args[7], args[9]};
    mas_py_array a[F_COUNT];
    memset(a, 0, sizeof a);
    mas_tensor3 value, post;
    memset(&post, 0, sizeof post);
    int bad = 0;
    for (int k = 0; k < F_COUNT && !bad; k++) bad = mas_py_array_get(objs[k], names[k], &a[k]);
    if (!bad) bad = check_common(a, names, F_COUNT, 3, place, F_XLEN, 2,
                                 a[F_VALUE].ndim >= 1 ? a[F_VALUE].shape[0] : 0, F_WORK, F_ERROR);
    if (!bad) bad = check_value_dtype(&a[F_VALUE], "value");
    int32_t acc = accum_of(a[F_VALUE].dtype);
    if (!bad && mas_py_array_present(&a[F_LOGZ]))
        bad = mas_py_array_check_kind(&a[F_LOGZ], "log_z", 1, acc) ||
              mas_py_array_check_vector(&a[F_LOGZ], "log_z", a[F_VALUE].shape[0]);
    if (!bad && mas_py_array_present(&a[F_POST]))
        bad = check_like(&a[F_POST], &a[F_VALUE], "posterior", acc);
    if (bad) {
        mas_py_array_release_all(a, F_COUNT);
        return NULL;
    }
    mas_py_array_tensor3(&a[F_VALUE], bst, &value);
    if (mas_py_array_present(&a[F_POST])) mas_py_array_tensor3(&a[F_POST], bst, &post);
    const int64_t *x = (const int64_t *)a[F_XLEN].data, *y = (const int64_t *)a[F_YLEN].data;
    size_t wsize = (size_t)a[F_WORK].shape[0];
    mas_error err = {0, 0, -1};
    mas_status st;
    Py_BEGIN_ALLOW_THREADS
    if (place == MAS_PY_CUDA)
        st = mas_forward_sum_cuda(&value, x, y, a[F_LOGZ].data, &post, a[F_WORK].data, wsize,
                                  stream, (uint64_t *)a[F_ERROR].data);
    else
        st = mas_forward_sum_cpu(&value, x, y, a[F_LOGZ].data, &post, a[F_WORK].data, wsize,
                                 threads, &err);
    Py_END_ALLOW_THREADS
    mas_py_array_release_all(a, F_COUNT);
    return status_tuple(st, &err);
}

enum { A_LOGITS, A_NLEN, A_MLEN, A_LOGPHI, A_GRADIN, A_GRADOUT, A_WORK, A_ERROR, A_COUNT };

/* attention(cuda, backward, kind, logits, n_len, m_len, log_phi, grad_log_phi,
 *           grad_logits, workspace, how, error_word) -> (status, item).
 * Forward: grad_log_phi and grad_logits are None. */
PyObject *mas_py_attention(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    static const char *const names[A_COUNT] = {"logits", "n_lengths", "m_lengths",
                                               "log_phi", "grad_log_phi", "grad_logits",
                                               "workspace", "error_word"};
    if (nargs != 12) {
        PyErr_SetString(PyExc_TypeError, "attention expects 12 arguments");
        return NULL;
    }
    mas_py_place place;
    int32_t threads;
    void *stream;
    int backward = PyObject_IsTrue(args[1]);
    long kind = PyLong_AsLong(args[2]);
    if (backward < 0 || (kind == -1 && PyErr_Occurred()) || parse_place(args[0], &place) ||
        parse_how(args[10], place, &threads, &stream))
        return NULL;
    PyObject *objs[A_COUNT] = {args[3], args[4], args[5], args[6],
                               args[7], args[8], args[9], args[11]};
    mas_py_array a[A_COUNT];
    memset(a, 0, sizeof a);
    int bad = 0;
    for (int k = 0; k < A_COUNT && !bad; k++) bad = mas_py_array_get(objs[k], names[k], &a[k]);
    if (!bad) bad = check_common(a, names, A_COUNT, 1, place, A_NLEN, 2,
                                 a[A_LOGITS].ndim >= 1 ? a[A_LOGITS].shape[0] : 0, A_WORK,
                                 A_ERROR);
    if (!bad) bad = check_value_dtype(&a[A_LOGITS], "logits");
    int32_t acc = accum_of(a[A_LOGITS].dtype);
    if (!bad && !mas_py_array_present(&a[A_LOGPHI])) {
        PyErr_SetString(PyExc_ValueError, "log_phi is required");
        bad = 1;
    }
    if (!bad) bad = check_like(&a[A_LOGPHI], &a[A_LOGITS], "log_phi", backward ? -1 : acc);
    if (!bad && backward) {
        if (!mas_py_array_present(&a[A_GRADIN]) || !mas_py_array_present(&a[A_GRADOUT])) {
            PyErr_SetString(PyExc_ValueError, "the backward pass needs both gradients");
            bad = 1;
        }
        if (!bad) bad = check_like(&a[A_GRADIN], &a[A_LOGITS], "grad_log_phi", -1);
        if (!bad) bad = check_like(&a[A_GRADOUT], &a[A_LOGITS], "grad_logits", acc);
    }
    if (bad) {
        mas_py_array_release_all(a, A_COUNT);
        return NULL;
    }
    mas_tensor3 t[A_GRADOUT + 1];
    memset(t, 0, sizeof t);
    for (int k = A_LOGITS; k <= A_GRADOUT; k++)
        if (k != A_NLEN && k != A_MLEN && mas_py_array_present(&a[k]))
            mas_py_array_tensor3(&a[k], 0, &t[k]);
    const int64_t *n = (const int64_t *)a[A_NLEN].data, *m = (const int64_t *)a[A_MLEN].data;
    size_t wsize = (size_t)a[A_WORK].shape[0];
    void *work = a[A_WORK].data;
    uint64_t *word = (uint64_t *)a[A_ERROR].data;
    mas_attention_kind kd = (mas_attention_kind)kind;
    mas_error err = {0, 0, -1};
    mas_status st;
    Py_BEGIN_ALLOW_THREADS
    if (place == MAS_PY_CUDA)
        st = backward ? mas_attention_backward_cuda(kd, &t[A_LOGITS], n, m, &t[A_LOGPHI],
                                                    &t[A_GRADIN], &t[A_GRADOUT], work, wsize,
                                                    stream, word)
                      : mas_attention_forward_cuda(kd, &t[A_LOGITS], n, m, &t[A_LOGPHI], work,
                                                   wsize, stream, word);
    else
        st = backward ? mas_attention_backward_cpu(kd, &t[A_LOGITS], n, m, &t[A_LOGPHI],
                                                   &t[A_GRADIN], &t[A_GRADOUT], work, wsize,
                                                   threads, &err)
                      : mas_attention_forward_cpu(kd, &t[A_LOGITS], n, m, &t[A_LOGPHI], work,
                                                  wsize, threads, &err);
    Py_END_ALLOW_THREADS
    mas_py_array_release_all(a, A_COUNT);
    return status_tuple(st, &err);
}

/* soft_workspace_size(op, cuda, B, T, S, dtype, threads) -> bytes; op 0 is
 * forward-sum, 1 attention (forward and backward). */
PyObject *mas_py_soft_workspace_size(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError, "soft_workspace_size expects 7 arguments");
        return NULL;
    }
    long op = PyLong_AsLong(args[0]);
    int cuda = PyObject_IsTrue(args[1]);
    int64_t B = PyLong_AsLongLong(args[2]), T = PyLong_AsLongLong(args[3]),
            S = PyLong_AsLongLong(args[4]);
    mas_dtype dtype = (mas_dtype)PyLong_AsLong(args[5]);
    int32_t threads = (int32_t)PyLong_AsLong(args[6]);
    if (cuda < 0 || PyErr_Occurred()) return NULL;
    size_t n;
    if (op == 0)
        n = cuda ? mas_forward_sum_cuda_workspace_size(B, T, S, dtype)
                 : mas_forward_sum_cpu_workspace_size(B, T, S, dtype, threads);
    else
        n = cuda ? mas_attention_cuda_workspace_size(B, T, S, dtype)
                 : mas_attention_cpu_workspace_size(B, T, S, dtype, threads);
    return PyLong_FromSize_t(n);
}
